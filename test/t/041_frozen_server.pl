# Copyright (c) zklock contributors
#
# A frozen server at session open.  A ZooKeeper server that is stopped
# (SIGSTOP: a long GC pause, a frozen VM) still has its listening socket,
# so the kernel accepts a new connection and the handshake is never
# answered.  Left to itself, the C client waits two thirds of the session
# timeout for that handshake before it tries the next server, longer than
# zklock.connect_timeout, so a new session that drew the frozen server
# first would fail although a majority is up.  zklock gives each server's
# attempt its share of connect_timeout.
#
# The connect string names the frozen follower and one other server; the
# client shuffles it, so each new backend draws the frozen one first half
# the time, and ten new backends all miss it once in 1024 runs.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use ZkEnsemble;
use ZklockTest;

my $zk = ZkEnsemble->new(servers => 3);
my $node = zk_cluster('frozen', $zk, session_timeout => 30000);

my $leader = $zk->leader;
ok(defined $leader, 'the ensemble has a leader');
my ($frozen, $other) = grep { $_ != $leader } 1 .. 3;
my $hosts = join ',', map { '127.0.0.1:' . $zk->port($_) } ($frozen, $other);

$zk->pause_server($frozen);

# Each call is a new connection, so a new backend and a new session.
my ($ok, $slowest) = (0, 0);
for my $i (1 .. 10)
{
	my $t0 = time;
	my ($rc, $out, $err) = $node->psql('postgres', qq{
		SET zklock.hosts = '$hosts';
		SET zklock.connect_timeout = '4s';
		SELECT zk_lock('frozen-$i') > 0 AND zk_unlock('frozen-$i');});
	my $took = time - $t0;
	$slowest = $took if $took > $slowest;
	if ($rc == 0 && $out eq 't')
	{
		$ok++;
	}
	else
	{
		diag("new session $i failed after ${took}s: $err");
	}
}
is($ok, 10, 'every new session opens within connect_timeout while a server is frozen');
note(sprintf('the slowest new session took %.1f s (the frozen server\'s share: 2 s)', $slowest));

$zk->resume_server($frozen);
ok($zk->wait_for_quorum(60), 'the ensemble serves again');
is($node->safe_psql('postgres', "SELECT zk_lock('frozen-after') > 0 AND zk_unlock('frozen-after')"),
	't', 'and a new session opens as before');

$node->stop;
$zk->stop;
done_testing();
