# Copyright (c) zklock contributors
#
# Leaving cleanly: a cancelled, timed-out or rolled-back waiter leaves no
# node in ZooKeeper and the next waiter still gets the lock; a terminated
# or exiting holder frees its locks at once (not after the session
# timeout); with zklock in shared_preload_libraries, a backend that never
# calls zk_* has no ZooKeeper session and no extra threads.

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
# A long session timeout, so that "freed at once" cannot be the expiry.
my $node = zk_cluster('giveup', $zk, session_timeout => 60000, preload => 1);

my $holder = session($node);
$holder->query_safe("SELECT zk_lock('g')");

# Start a waiter on 'g', return (session, pid) once its node is queued.
sub queued_waiter
{
	my ($sql) = @_;
	my $s = session($node);
	my $pid = backend_pid($s);
	my $before = zk_count($zk, '/zklock/g');
	start_wait($s, $sql);
	poll_until(sub { is_waiting($node, $pid) && zk_count($zk, '/zklock/g') == $before + 1 })
	  or die "waiter $pid did not queue";
	return ($s, $pid);
}

# --- cancel
my ($w1, $pid1) = queued_waiter("SELECT zk_lock('g')");
my ($w2, $pid2) = queued_waiter("SELECT zk_lock('g')");
is(zk_count($zk, '/zklock/g'), 3, 'holder and two waiters queued');
$node->safe_psql('postgres', "SELECT pg_cancel_backend($pid1)");
my ($out, $err) = finish_wait($w1);
like($err, qr/canceling statement due to user request/, 'cancelled waiter gets the cancel error');
ok(poll_until(sub { zk_count($zk, '/zklock/g') == 2 }, 30), 'cancelled waiter left no node');
is($w1->query_safe('SELECT count(*) FROM zk_locks'), '0', 'cancelled waiter holds nothing');

# --- timeout argument
my ($w3, $pid3) = queued_waiter("SELECT zk_lock('g', '1s')");
($out, $err) = finish_wait($w3);
like($err, qr/could not obtain ZooKeeper lock "g"/, 'timed-out waiter gets 55P03 error text');
ok(poll_until(sub { zk_count($zk, '/zklock/g') == 2 }, 30), 'timed-out waiter left no node');
my ($w4, $pid4) = queued_waiter("SELECT zk_try_lock('g', '1s')");
($out, $err) = finish_wait($w4);
is($out, 'f', 'try form with a timeout returns false');
ok(poll_until(sub { zk_count($zk, '/zklock/g') == 2 }, 30), 'try waiter left no node');

# --- cancel inside a savepoint, then ROLLBACK TO: the transaction goes on
$w3->query_safe('BEGIN');
$w3->query_safe('SAVEPOINT s');
start_wait($w3, "SELECT zk_xact_lock('g')");
ok(poll_until(sub { is_waiting($node, $pid3) }), 'waiter in a savepoint waits');
$node->safe_psql('postgres', "SELECT pg_cancel_backend($pid3)");
finish_wait($w3);
$w3->query_safe('ROLLBACK TO s');
is($w3->query_safe("SELECT zk_try_xact_lock('other-lock')"), 't',
	'transaction continues after ROLLBACK TO');
$w3->query_safe('COMMIT');
ok(poll_until(sub { zk_count($zk, '/zklock/g') == 2 }, 30), 'savepoint waiter left no node');

# --- the remaining waiter still gets the lock after the holder releases
$holder->query_safe("SELECT zk_unlock('g')");
ok(poll_until(sub { !is_waiting($node, $pid2) }), 'next waiter gets the lock');
($out, $err) = finish_wait($w2);
ok($out > 0 && $err eq '', 'with a token and no error');

# --- pg_terminate_backend of a holder frees its locks at once
my $t0 = time;
my ($w5, $pid5) = queued_waiter("SELECT zk_lock('g')");
$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid2)");
ok(poll_until(sub { !is_waiting($node, $pid5) }, 30), 'waiter gets the lock after the holder is terminated');
ok(time - $t0 < 30, 'well before the 60 s session timeout');
($out, $err) = finish_wait($w5);
ok($out > 0 && $err eq '', 'terminated holder\'s successor has a token');

# --- a backend ending normally frees its session locks at once
my $quitter = session($node);
$quitter->query_safe("SELECT zk_lock('q'), zk_lock_shared('q2')");
is(zk_count($zk, '/zklock/q'), 1, 'holder node exists');
quit_session($quitter);
ok(poll_until(sub { zk_count($zk, '/zklock/q') == 0 && zk_count($zk, '/zklock/q2') == 0 }, 30),
	'nodes vanish when the backend exits');
is($node->safe_psql('postgres', "SELECT zk_try_lock('q')"), 't', 'lock is free for others');

# --- the node carries its owner for fleet views
my $kid = (zk_children($zk, '/zklock/g'))[0];
my $json = zk_data($zk, "/zklock/g/$kid");
like($json, qr/"cluster_name":"giveup"/, 'node data names the cluster');
like($json, qr/"pid":$pid5\b/, 'node data names the backend pid');
like($json, qr/"database":"postgres"/, 'node data names the database');

# --- preloaded, but a backend that never calls zk_* has no session, no threads
is($node->safe_psql('postgres', 'SHOW shared_preload_libraries'), 'zklock', 'library is preloaded');
my $idle = session($node);
my $idle_pid = backend_pid($idle);
$idle->query_safe('SELECT count(*) FROM pg_class');
my @tasks = glob("/proc/$idle_pid/task/*");
is(scalar(@tasks), 1, 'a backend that never called zk_* runs one thread');
is(scalar(my @none = zk_servers_of($zk, $idle_pid)), 0, 'and has no connection to ZooKeeper');
$idle->query_safe("SELECT zk_try_lock('lazy')");
@tasks = glob("/proc/$idle_pid/task/*");
is(scalar(@tasks), 3,
	'the first zk_* call starts the IO and lease threads: no completion thread');
is(scalar(my @one = zk_servers_of($zk, $idle_pid)), 1, 'and opens one ZooKeeper connection');

finish(nodes => [$node], zk => $zk);
done_testing();
