# Copyright (c) zklock contributors
#
# Mutual exclusion on a real 3-server ensemble: between two backends of one
# cluster, between two clusters, FIFO order of several waiters, shared
# holders together with a writer excluded, fencing tokens, and the
# lock_timeout / statement_timeout paths.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";

use PostgreSQL::Test::Utils;
use Test::More;
use ZkEnsemble;
use ZklockTest;

my $zk = ZkEnsemble->new(servers => 3);
my $n1 = zk_cluster('east', $zk);
my $n2 = zk_cluster('west', $zk);

# --- two backends of one cluster
my $a = session($n1);
my $b = session($n1);
my $tok_a = $a->query_safe("SELECT zk_lock('ex')");
ok($tok_a > 0, 'holder gets a positive token');
is($b->query_safe("SELECT zk_try_lock('ex')"), 'f',
	'second backend cannot take a held lock');
my $pid_b = backend_pid($b);
start_wait($b, "SELECT zk_lock('ex')");
ok(poll_until(sub { is_waiting($n1, $pid_b) }), 'second backend waits (Extension wait event)');
# What pg_stat_activity names the wait: ZkLock from PostgreSQL 17 on (a
# wait event of zklock's own), plain Extension before.
my $lock_event = $n1->pg_version >= 17 ? 'ZkLock' : 'Extension';
my $event = '';
poll_until(
	sub {
		$event = $n1->safe_psql('postgres',
			"SELECT wait_event_type || '/' || wait_event FROM pg_stat_activity WHERE pid = $pid_b"
		);
		return $event eq "Extension/$lock_event";
	});
is($event, "Extension/$lock_event", "the waiter's wait event is $lock_event");
is(zk_count($zk, '/zklock/ex'), 2, 'holder and waiter each have one node');
$a->query_safe("SELECT zk_unlock('ex')");
my ($out, $err) = finish_wait($b);
ok($out > $tok_a, 'waiter gets the lock with a larger token after release');
is($err, '', 'no error for the waiter');
ok(!is_waiting($n1, $pid_b), 'waiter no longer waits');
is($a->query_safe("SELECT zk_try_lock('ex')"), 'f', 'first backend now excluded');
$b->query_safe("SELECT zk_unlock('ex')");

# PostgreSQL 18 records the module's name and version from its magic block:
# the control file's default_version.
if ($n1->pg_version >= 18)
{
	my ($version) = PostgreSQL::Test::Utils::slurp_file("$FindBin::Bin/../../zklock.control")
	  =~ /^default_version = '([^']+)'/m;
	is( $b->query_safe(
			"SELECT module_name || ' ' || version FROM pg_get_loaded_modules() WHERE file_name = 'zklock.so'"
		),
		"zklock $version",
		'pg_get_loaded_modules() names zklock and its version');
}

# --- two clusters, transaction scope: the waiter gets it when the holder commits
my $c = session($n2);
$a->query_safe('BEGIN');
my $tok_x = $a->query_safe("SELECT zk_xact_lock('cross')");
is($c->query_safe("SELECT zk_try_lock('cross')"), 'f', 'other cluster is excluded');
my $pid_c = backend_pid($c);
start_wait($c, "SELECT zk_xact_lock('cross', '60s')");
ok(poll_until(sub { is_waiting($n2, $pid_c) }), 'other cluster waits');
$a->query_safe('SELECT pg_sleep(0.2)');
ok(in_call($n2, $pid_c), 'still waiting while the transaction is open');
$a->query_safe('COMMIT');
($out, $err) = finish_wait($c);
ok($out > $tok_x, 'other cluster gets it at commit, with a larger token');
is($c->query_safe('SELECT count(*) FROM zk_locks'), '0',
	'its transaction lock went with its statement');

# --- FIFO: five waiters from both clusters get the lock in arrival order
my $h = session($n1);
$h->query_safe("SELECT zk_lock('fifo')");
my (@w, @wpid, @wnode);
for my $i (0 .. 4)
{
	my $node = $i % 2 ? $n2 : $n1;
	my $s = session($node);
	my $pid = backend_pid($s);
	my @before = zk_children($zk, '/zklock/fifo');
	start_wait($s, "SELECT zk_lock('fifo')");
	ok(poll_until(sub { is_waiting($node, $pid) }), "waiter $i waits");
	my %old = map { $_ => 1 } @before;
	my @new = grep { !$old{$_} } zk_children($zk, '/zklock/fifo');
	is(scalar(@new), 1, "waiter $i added one node");
	push @w, [ $s, $node ];
	push @wpid, $pid;
	push @wnode, $new[0];
}
my @order;
$h->query_safe("SELECT zk_unlock('fifo')");
my $last_token = 0;
for my $i (0 .. 4)
{
	my ($s, $node) = @{ $w[$i] };
	ok(poll_until(sub { !is_waiting($node, $wpid[$i]) }), "waiter $i got the lock");
	my $still = grep { is_waiting($w[$_][1], $wpid[$_]) } ($i + 1 .. 4);
	is($still, 4 - $i, "the later waiters still wait when $i holds");
	($out, $err) = finish_wait($s);
	ok($out > $last_token, "token of waiter $i is larger than the previous holder's");
	$last_token = $out;
	$s->query_safe("SELECT zk_unlock('fifo')");
}

# --- shared: readers together, a writer excluded, a later reader queued behind it
my ($r1, $r2, $wr, $r3) = (session($n1), session($n2), session($n1), session($n2));
ok($r1->query_safe("SELECT zk_lock_shared('rw')") > 0, 'reader 1 holds');
is($r2->query_safe("SELECT zk_try_lock_shared('rw')"), 't',
	'reader 2 in the other cluster holds too');
is($wr->query_safe("SELECT zk_try_lock('rw')"), 'f', 'writer is excluded by readers');
my $pid_wr = backend_pid($wr);
my $pid_r3 = backend_pid($r3);
start_wait($wr, "SELECT zk_lock('rw')");
ok(poll_until(sub { is_waiting($n1, $pid_wr) }), 'writer waits');
start_wait($r3, "SELECT zk_lock_shared('rw')");
ok(poll_until(sub { is_waiting($n2, $pid_r3) }),
	'a reader arriving after the writer waits behind it (FIFO, no writer starvation)');
$r1->query_safe("SELECT zk_unlock_shared('rw')");
$r1->query_safe('SELECT pg_sleep(0.2)');
ok(in_call($n1, $pid_wr), 'writer still waits while one reader holds');
$r2->query_safe("SELECT zk_unlock_shared('rw')");
ok(poll_until(sub { !is_waiting($n1, $pid_wr) }), 'writer gets it when the readers are gone');
ok(in_call($n2, $pid_r3), 'the later reader waits for the writer');
finish_wait($wr);
$wr->query_safe("SELECT zk_unlock('rw')");
ok(poll_until(sub { !is_waiting($n2, $pid_r3) }), 'the later reader gets it after the writer');
($out, $err) = finish_wait($r3);
is($err, '', 'reader got the lock without error');
$r3->query_safe("SELECT zk_unlock_shared('rw')");

# --- timeouts: lock_timeout as the default, statement_timeout cancels
$a->query_safe("SELECT zk_lock('to')");
my ($res, $stderr);
$n2->psql('postgres', "SET lock_timeout = '300ms'; SELECT zk_lock('to')",
	stderr => \$stderr);
like($stderr, qr/could not obtain ZooKeeper lock "to"/, 'lock_timeout applies to a NULL timeout');
like($stderr, qr/300 ms/, 'the error names the timeout');
$n2->psql('postgres', "SET statement_timeout = '300ms'; SELECT zk_lock('to')",
	stderr => \$stderr);
like($stderr, qr/canceling statement due to statement timeout/, 'statement_timeout cancels the wait');
is($n2->safe_psql('postgres', "SET lock_timeout = '100ms'; SELECT zk_try_lock('to')"),
	'f', 'try form returns false');
ok(poll_until(sub { zk_count($zk, '/zklock/to') == 1 }, 30),
	'timed-out waiters left no node behind');
$a->query_safe("SELECT zk_unlock('to')");

finish(nodes => [ $n1, $n2 ], zk => $zk);
done_testing();
