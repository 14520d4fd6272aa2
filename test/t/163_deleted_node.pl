# Copyright (c) zklock contributors
#
# A held node deleted by another ZooKeeper client (an operator "breaking" a
# lock with a ZooKeeper shell, a clean-up script) is a lost lock at once,
# not at the next lease proof: the holder watches its own node.  The
# holders here have a 60 s session, so proofs come every 10 s; every bound
# below is far under that.
#  1. A transaction lock: B on the other cluster takes the lock; A's COMMIT
#     one second after the delete is refused (08000) and its row is not
#     visible.
#  2. A session lock shows as lost in zk_locks within 2 s; zk_unlock says
#     so.
#  3. A semaphore lease, likewise, and the permit is free for B.
#  4. One member of a set: it alone is lost, and a write commit is refused.
#  5. Our own releases are no loss: a lock released and taken again stays
#     held, and commits.
#  6. The watch on our own node (sent once another client's node came
#     into the directory) answered with an error (NoAuth, the node's read
#     access taken away for a moment): the watch is set again, so a
#     deletion is still a lost lock within 2 s.
#  7. A lost node left unreleased is no reason for the lease to run out:
#     after three session timeouts the session is connected and another
#     lock is held.
#  8. A commit after the child watch fired but before the node's own data
#     watch is answered (gdb holds that answer while another client
#     deletes the node): the lock is in doubt, the commit sends a proof and
#     is refused (08000), not let through.
#  9. A child watch that fires while the lease thread is sending another
#     node's watch (gdb holds it inside zoo_awget) is not missed: the
#     second node gets its data watch within 3 s, not at the lease
#     thread's next beat (10 s with a 60 s session).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);
use ZkEnsemble;
use ZkGdb;
use ZklockTest;

my $zk = ZkEnsemble->new(servers => 3);
my $east = zk_cluster('east', $zk, session_timeout => 60000);
my $west = zk_cluster('west', $zk, session_timeout => 60000);
$east->safe_psql('postgres', 'CREATE TABLE work (name text)');
my $hosts = $zk->connect_string;

sub node_of
{
	my ($s, $name) = @_;
	my $node = $s->query_safe("SELECT node FROM zk_locks WHERE name = '$name'");
	chomp $node;
	return $node;
}

# Poll a session's view of one lock until it says lost; the seconds it took.
sub seconds_until_lost
{
	my ($s, $name, $bound) = @_;
	my $t0 = time;
	return poll_until(sub { lock_state($s, $name) eq 'lost' }, $bound)
	  ? time - $t0
	  : undef;
}

my $a = waiter($east);
my $b = waiter($west);
$a->query_safe('\set VERBOSITY verbose');

# --- 1. a transaction lock: the other cluster takes it, A may not commit
{
	$a->query_safe("BEGIN");
	$a->query_safe("SELECT zk_xact_lock('broken')");
	$a->query_safe("INSERT INTO work VALUES ('broken')");
	my $node = node_of($a, 'broken');
	my $t0 = time;
	is(zkq($hosts, 'delete', $node), 'deleted', 'another client deletes A\'s transaction-lock node');
	is($b->query_safe("SELECT zk_try_lock('broken')"), 't', 'B on the other cluster takes the lock');
	# A commits one second after the delete.
	sleep(1 - (time - $t0)) if time - $t0 < 1;
	$a->query("COMMIT");
	like($a->{stderr}, qr/ERROR:  08000: cannot commit while ZooKeeper lock "broken" \(exclusive\) is lost/,
		'A\'s COMMIT one second after the delete is refused with 08000');
	$a->{stderr} = '';
	is($east->safe_psql('postgres', "SELECT count(*) FROM work WHERE name = 'broken'"), '0',
		'A\'s row is not visible');
	is($a->query_safe("SELECT count(*) FROM zk_locks"), '0', 'A holds nothing afterwards');
	$b->query_safe("SELECT zk_unlock('broken')");
}

# --- 2. a session lock shows as lost at once
{
	$a->query_safe("SELECT zk_lock('broken2')");
	is(lock_state($a, 'broken2'), 'held', 'A holds a session lock');
	is(zkq($hosts, 'delete', node_of($a, 'broken2')), 'deleted', 'another client deletes its node');
	my $took = seconds_until_lost($a, 'broken2', 2);
	ok(defined $took, 'zk_locks shows it lost within 2 s (proofs come every 10 s)')
	  or diag('state: ' . lock_state($a, 'broken2'));
	is($b->query_safe("SELECT zk_try_lock('broken2')"), 't', 'B takes it');
	$a->query("BEGIN; INSERT INTO work VALUES ('broken2'); COMMIT");
	like($a->{stderr}, qr/08000: cannot commit while ZooKeeper lock "broken2" \(exclusive\) is lost/,
		'a write commit under it is refused');
	$a->{stderr} = '';
	$a->query("ROLLBACK");
	$a->{stderr} = '';
	my ($out) = $a->query("SELECT zk_unlock('broken2')");
	is($out, 'f', 'zk_unlock returns false');
	like($a->{stderr}, qr/ZooKeeper lock "broken2" \(exclusive\) was lost before it was released/,
		'and warns about the loss');
	$a->{stderr} = '';
	$b->query_safe("SELECT zk_unlock('broken2')");
}

# --- 3. a semaphore lease
{
	$a->query_safe("SELECT zk_semaphore('sem', 1)");
	is(zkq($hosts, 'delete', node_of($a, 'sem')), 'deleted', 'another client deletes A\'s lease node');
	ok(defined seconds_until_lost($a, 'sem', 2), 'the lease shows lost within 2 s')
	  or diag('state: ' . lock_state($a, 'sem'));
	is($b->query_safe("SELECT zk_try_semaphore('sem', 1)"), 't', 'B takes the only permit');
	my ($out) = $a->query("SELECT zk_semaphore_release('sem')");
	is($out, 'f', 'zk_semaphore_release returns false');
	like($a->{stderr}, qr/lease of ZooKeeper semaphore "sem" was lost before it was released/,
		'and warns about the loss');
	$a->{stderr} = '';
	$b->query_safe("SELECT zk_semaphore_release_all()");
}

# --- 4. one member of a set
{
	$a->query_safe("SELECT zk_lock(ARRAY['m1', 'm2', 'm3'])");
	is(zkq($hosts, 'delete', node_of($a, 'm2')), 'deleted', 'another client deletes the node of one member');
	ok(defined seconds_until_lost($a, 'm2', 2), 'that member shows lost within 2 s');
	is(lock_state($a, 'm1') . ',' . lock_state($a, 'm3'), 'held,held', 'the others stay held');
	is($b->query_safe("SELECT zk_try_lock('m2')"), 't', 'B takes the lost member');
	$a->query("BEGIN; INSERT INTO work VALUES ('m'); COMMIT");
	like($a->{stderr}, qr/08000: cannot commit while ZooKeeper lock "m2" \(exclusive\) is lost/,
		'a write commit is refused');
	$a->{stderr} = '';
	$a->query("ROLLBACK");
	$a->query("SELECT zk_unlock_all()");
	$a->{stderr} = '';
	$b->query_safe("SELECT zk_unlock('m2')");
}

# --- 5. our own releases are no loss
{
	for my $i (1 .. 3)
	{
		$a->query_safe("SELECT zk_lock('own')");
		$a->query_safe("SELECT zk_unlock('own')");
	}
	$a->query_safe("SELECT zk_lock('own')");
	$a->query_safe("BEGIN");
	$a->query_safe("SELECT zk_xact_lock('own-x')");
	$a->query_safe("COMMIT");
	$a->query_safe("BEGIN");
	$a->query_safe("SELECT zk_xact_lock('own-x')");
	$a->query_safe("INSERT INTO work VALUES ('own')");
	$a->query_safe("COMMIT");
	is($east->safe_psql('postgres', "SELECT count(*) FROM work WHERE name = 'own'"), '1',
		'a commit after our own releases goes through');
	is(lock_state($a, 'own'), 'held', 'a lock taken again after our own releases is held');
	my ($out) = $a->query("SELECT zk_unlock('own')");
	is($out, 't', 'and is released without a warning');
	is($a->{stderr}, '', 'no warning');
}
# --- 6. the watch on our own node answered with an error.  An uncontended
# holder's node is covered by the child watch of its listing; another
# client's node in the same directory fires it, and the holder then sends
# a watch on its own node.  gdb holds the thread that sends it; another
# client takes read access to the node away meanwhile, so that the server
# answers the watch with NoAuth and sets none; then gives it back.  The
# session (a 6 s timeout, so that its lease thread comes round every
# second) must set the watch again.
SKIP:
{
	my $s = session($east, set => { 'zklock.session_timeout' => '6000' }, warm => 1);
	is($s->query_safe("SELECT zk_lock('unwatched') > 0"), 't', 'the lock is taken');
	my ($child) = zk_children($zk, '/zklock/unwatched');
	my $path = "/zklock/unwatched/$child";
	my $g = ZkGdb->attach(backend_pid($s), non_stop => 1);
	skip $ZkGdb::why, 10 unless $g;
	like($g->cmd('break zkl_sess_lease_watch_nodes') // '', qr/reakpoint 1 at/,
		'gdb will hold the thread that sends the next own-node watch');
	is(zkq($hosts, 'create', '/zklock/unwatched/other'), 'created',
		'another client makes a node in the same directory');
	ok($g->wait_for(qr/hit Breakpoint 1(\.\d+)?, zkl_sess_lease_watch_nodes/, 30),
		'the watch on the held node is about to be sent')
	  or diag($g->output);
	is(zkq($hosts, 'chmod', $path, 30), 'set', 'another client takes read access away');
	like($g->cmd('break session_own_watched') // '', qr/reakpoint 2 at/,
		'gdb will hold the answer to that watch');
	$g->cmd('continue -a &');
	ok($g->wait_for(qr/hit Breakpoint 2(\.\d+)?, session_own_watched/, 30),
		'the watch is answered')
	  or diag($g->output);
	is(zkq($hosts, 'chmod', $path, 31), 'set', 'and read access is given back once it was refused');
	$g->detach;
	ok(poll_until(sub { ($zk->watches_by_path->{$path} // 0) == 1 }, 10),
		'the watch on the node is set again')
	  or diag(explain $zk->watches_by_path);
	is(zkq($hosts, 'delete', $path), 'deleted', 'another client deletes the node');
	ok(poll_until(sub { lock_state($s, 'unwatched') eq 'lost' }, 2),
		'the lock shows lost within 2 s');
	my ($out) = $s->query("SELECT zk_unlock('unwatched')");
	is($out, 'f', 'zk_unlock says it was lost');
	$s->{stderr} = '';
	zkq($hosts, 'delete', '/zklock/unwatched/other');
}

# --- 7. a lost node left unreleased does not run the lease out: with no
# other node there is nothing to prove, and the session lives.  A 3 s
# session timeout: proofs every half second while a node lives.
{
	my $s = session($east, set => { 'zklock.session_timeout' => '3000' }, warm => 1);
	$s->query_safe("SELECT zk_lock('left')");
	is(zkq($hosts, 'delete', node_of($s, 'left')), 'deleted', 'another client deletes the node of a held lock');
	ok(poll_until(sub { lock_state($s, 'left') eq 'lost' }, 2), 'it shows lost');
	my $state = sub { my $o = $s->query_safe('SELECT state FROM zk_session()'); chomp $o; $o };
	ok(!poll_until(sub { $state->() ne 'connected' }, 9),
		'left unreleased for three session timeouts, the session stays connected, not lost')
	  or diag('state: ' . $state->());
	is($s->query_safe("SELECT zk_lock('right') > 0"), 't', 'another lock is taken');
	is(lock_state($s, 'right'), 'held', 'and held');
	is($s->query_safe("SELECT zk_unlock('right')"), 't', 'and released without a warning');
	my ($out) = $s->query("SELECT zk_unlock('left')");
	is($out, 'f', 'the lost one\'s zk_unlock says it was lost');
	$s->{stderr} = '';
}

# --- 8. a commit while the node is in doubt.  The child watch that covers
# the held node fires (another client's node in the directory); gdb holds
# the answer to the data watch the node gets then, and another client
# deletes the node meanwhile.  The commit must not go through on the lease
# alone: it waits for a proof, which fails once gdb lets go.
SKIP:
{
	my $s = session($east, warm => 1);
	my $pid = backend_pid($s);
	$s->query_safe('\set VERBOSITY verbose');
	$s->query_safe("BEGIN");
	$s->query_safe("SELECT zk_xact_lock('doubt')");
	$s->query_safe("INSERT INTO work VALUES ('doubt')");
	my $path = node_of($s, 'doubt');
	my $g = ZkGdb->attach($pid, non_stop => 1);
	skip $ZkGdb::why, 7 unless $g;
	like($g->cmd('break session_own_watched') // '', qr/reakpoint 1 at/,
		'gdb will hold the answer to the held node\'s data watch');
	is(zkq($hosts, 'create', '/zklock/doubt/other'), 'created',
		'another client makes a node in the same directory');
	ok($g->wait_for(qr/hit Breakpoint 1(\.\d+)?, session_own_watched/, 30),
		'the data watch is answered, and held')
	  or diag($g->output);
	is(zkq($hosts, 'delete', $path), 'deleted', 'another client deletes the held node');
	start_wait($s, 'COMMIT');
	ok(poll_until(sub { started($east, $pid, 'COMMIT')
			  && (is_waiting($east, $pid) || !in_call($east, $pid)) }, 10)
		  && in_call($east, $pid),
		'the COMMIT is under way while gdb holds the answers');
	$g->cmd('continue -a &');
	$g->detach;
	my ($out, $err) = finish_wait($s);
	like($err, qr/08000: cannot commit while ZooKeeper lock "doubt" \(exclusive\) is lost/,
		'the COMMIT is refused with 08000');
	is($east->safe_psql('postgres', "SELECT count(*) FROM work WHERE name = 'doubt'"), '0',
		'its row is not visible');
	zkq($hosts, 'delete', '/zklock/doubt/other');
}

# --- 9. a child watch that fires while the lease thread sends a watch.
# Two held nodes in two directories, both covered by their listings' child
# watches.  Another client's node in the first directory makes the lease
# thread send that node's data watch; gdb holds the lease thread inside
# zoo_awget while another client's node in the second directory fires the
# other child watch (its wake finds the lease thread busy).  Once let go,
# the lease thread must send the second node's watch too.
SKIP:
{
	my $s = session($east, warm => 1);
	$s->query_safe("SELECT zk_lock('busy1'), zk_lock('busy2')");
	my $p2 = node_of($s, 'busy2');
	my $g = ZkGdb->attach(backend_pid($s), non_stop => 1);
	skip $ZkGdb::why, 6 unless $g;
	like($g->cmd('break zoo_awget') // '', qr/reakpoint 1 at/,
		'gdb will hold the thread that sends the next own-node watch');
	is(zkq($hosts, 'create', '/zklock/busy1/other'), 'created',
		'another client makes a node beside the first held node');
	ok($g->wait_for(qr/hit Breakpoint 1(\.\d+)?, (0x[0-9a-f]+ in )?zoo_awget/, 30),
		'the lease thread is sending the first node\'s watch')
	  or diag($g->output);
	$g->break_run('break zkl_sess_lease_wake_locked', 'continue');
	is(zkq($hosts, 'create', '/zklock/busy2/other'), 'created',
		'another client makes a node beside the second held node');
	ok($g->wait_for(qr/hit Breakpoint 2(\.\d+)?, (0x[0-9a-f]+ in )?zkl_sess_lease_wake_locked/, 30),
		'its child watch fired and woke the lease thread, busy meanwhile')
	  or diag($g->output);
	$g->cmd('delete');
	$g->cmd('continue -a &');
	$g->detach;
	ok(poll_until(sub { ($zk->watches_by_path->{$p2} // 0) == 1 }, 3),
		'the second node gets its data watch within 3 s')
	  or diag(explain $zk->watches_by_path);
	$s->query_safe("SELECT zk_unlock_all()");
	zkq($hosts, 'delete', '/zklock/busy1/other');
	zkq($hosts, 'delete', '/zklock/busy2/other');
}

ok(poll_until(sub { zkq($hosts, 'tree', '/zklock') !~ /_c_/ }, 30),
	'no lock node is left');

finish(sessions => [ $a, $b ], nodes => [ $east, $west ], zk => $zk);
done_testing();
