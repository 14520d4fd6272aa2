# Copyright (c) zklock contributors
#
# When the ensemble turns connections away: three servers with
# maxClientCnxns = 5 take 15 backends' sessions from 127.0.0.1.  The
# backends past that fail long before zklock.connect_timeout, with a
# detail that says the servers closed the connection at once and a hint
# that names maxClientCnxns and how many sessions the cluster holds open
# (zk_stat_sessions.sessions_open, connections_refused).  Once sessions
# go, a new backend connects again.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);
use ZkEnsemble;
use ZklockTest;

my $LIMIT = 5;
my $zk = ZkEnsemble->new(servers => 3, extra_conf => { maxClientCnxns => $LIMIT });
my $node = zk_cluster('cnx', $zk, preload => 1, max_connections => 40,
	conf => ["zklock.connect_timeout = '20s'"]);

# Hold as many sessions as the servers take.
my @held;
my $refused;
for my $i (1 .. 3 * $LIMIT + 3)
{
	my $s = waiter($node);
	my $t0 = time;
	$s->query("SELECT zk_try_lock('cnx-$i')");
	if ($s->{stderr} ne '')
	{
		$refused = [ $s, $s->{stderr}, time - $t0 ];
		last;
	}
	push @held, $s;
}
ok(defined $refused, 'a backend past the servers\' limit is turned away');
my ($s, $err, $secs) = @$refused;
is(scalar @held, 3 * $LIMIT, 'after 3 x maxClientCnxns sessions');
like($err, qr/ERROR:  could not connect to ZooKeeper at/, 'it cannot connect');
like($err, qr/DETAIL:  Every server closed the connection at once, before answering: 127\.0\.0\.1:\d+, 127\.0\.0\.1:\d+, 127\.0\.0\.1:\d+\./,
	'the detail says every server closed the connection at once, naming them');
like($err, qr/HINT:  .*maxClientCnxns.*this cluster holds 15 open now \(zk_stat_sessions\.sessions_open\)/,
	'the hint names maxClientCnxns and the sessions this cluster holds');
ok($secs < 10, sprintf('it fails in %.1f s, not after connect_timeout (20 s)', $secs));
my ($open, $closed) = split /\|/, $node->safe_psql('postgres',
	'SELECT sessions_open, connections_refused FROM zk_stat_sessions');
is($open, 3 * $LIMIT, 'zk_stat_sessions.sessions_open: the sessions held');
ok($closed >= 3, "connections_refused counts the closed connections: $closed");
$s->{stderr} = '';

# Sessions go, a backend gets in again.
$_->quit for splice(@held, 0, 2);
ok(poll_until(sub { $node->safe_psql('postgres', 'SELECT sessions_open FROM zk_stat_sessions') == 3 * $LIMIT - 2 }, 30),
	'two sessions closed');
ok(poll_until(sub {
		$s->query("SELECT zk_try_lock('cnx-again')");
		my $ok = $s->{stderr} eq '';
		$s->{stderr} = '';
		$ok;
	}, 30), 'a backend connects again');

$s->quit;
$_->quit for @held;
$node->stop('fast');
$zk->stop;
done_testing();
