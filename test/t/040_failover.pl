# Copyright (c) zklock contributors
#
# Ensemble failover on a real 3-server ensemble (fault tests 1 and 2):
# killing the leader while a lock is held and others wait keeps the holder,
# never makes a second holder, and the queue proceeds under the new leader;
# killing the server a holder is connected to moves its session, and the
# lock stays held.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";

use PostgreSQL::Test::Utils;
use Test::More;
use ZkEnsemble;
use ZklockTest;

my $zk = ZkEnsemble->new(servers => 3);
my $node = zk_cluster('failover', $zk, session_timeout => 20000);

# --- 1. kill the leader while a lock is held and two backends wait
my $holder = session($node);
my $tok = $holder->query_safe("SELECT zk_lock('fo')");
my (@w, @pid);
for my $i (0 .. 1)
{
	my $s = session($node);
	my $pid = backend_pid($s);
	start_wait($s, "SELECT zk_lock('fo')");
	poll_until(sub { is_waiting($node, $pid) && zk_count($zk, '/zklock/fo') == $i + 2 })
	  or die "waiter $i did not queue";
	push @w, $s;
	push @pid, $pid;
}
my $leader = $zk->leader;
ok(defined $leader, "server $leader leads");
$zk->kill_server($leader);
ok($zk->wait_for_quorum(60), 'the two others elect a new leader');
isnt($zk->leader, $leader, 'a new leader');
ok(poll_until(sub { lock_state($holder, 'fo') eq 'held' }, 30),
	'holder still holds the lock after the election');
ok(in_call($node, $pid[0]) && in_call($node, $pid[1]), 'both waiters still wait: no second holder');
is($holder->query_safe("BEGIN; SELECT 1; COMMIT; SELECT 'committed'"), "1\ncommitted",
	'holder commits normally');
is(zk_count($zk, '/zklock/fo'), 3, 'queue unchanged: holder and two waiters');
$holder->query_safe("SELECT zk_unlock('fo')");
ok(poll_until(sub { !is_waiting($node, $pid[0]) }, 30), 'first waiter gets the lock under the new leader');
ok(in_call($node, $pid[1]), 'second waiter still waits');
my ($out, $err) = finish_wait($w[0]);
ok($out > $tok && $err eq '', 'with a larger token and no error');
$w[0]->query_safe("SELECT zk_unlock('fo')");
ok(poll_until(sub { !is_waiting($node, $pid[1]) }, 30), 'second waiter gets it next');
($out, $err) = finish_wait($w[1]);
is($err, '', 'without error');
$w[1]->query_safe("SELECT zk_unlock('fo')");
$zk->restart_server($leader);
ok($zk->wait_for_quorum(60), 'killed server rejoins');

# --- 2. kill the server the holder is connected to
my $h2 = session($node);
my $h2pid = backend_pid($h2);
my $tok2 = $h2->query_safe("SELECT zk_lock('mv')");
my @conn = zk_servers_of($zk, $h2pid);
is(scalar(@conn), 1, 'holder has one ZooKeeper connection');
my $victim = $conn[0];
$zk->kill_server($victim);
ok(poll_until(sub { my @c = zk_servers_of($zk, $h2pid); @c == 1 && $c[0] != $victim }, 60),
	'holder session moved to another server');
ok(poll_until(sub { lock_state($h2, 'mv') eq 'held' }, 30), 'lock still held');
is($h2->query_safe("SELECT token FROM zk_locks WHERE name = 'mv'"), $tok2, 'same node, same token');
is($node->safe_psql('postgres', "SELECT zk_try_lock('mv', '1s')"), 'f',
	'another backend still cannot take it');
is(zk_count($zk, '/zklock/mv'), 1, 'one node: the holder\'s');
$h2->query_safe("SELECT zk_unlock('mv')");
ok(poll_until(sub { zk_count($zk, '/zklock/mv') == 0 }, 30), 'released after the move');
$zk->restart_server($victim);

finish(nodes => [$node], zk => $zk);
done_testing();
