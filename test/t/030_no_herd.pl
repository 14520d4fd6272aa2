# Copyright (c) zklock contributors
#
# No herd effect: with 50 waiters on one lock, each waiter watches only its
# predecessor, besides its own node: every contender hears of its node's
# deletion by another client, through the child watch of the listing sent
# behind its create until another contender comes, then through a watch
# on the node itself.  So at most two sessions per watched path and one
# child watch on the directory, the last waiter's (counted with the
# ensemble's wchs/wchp/mntr four-letter words).  Each release hands the
# lock to exactly one waiter, in FIFO order, and wakes exactly one.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";

use PostgreSQL::Test::Utils;
use Test::More;
use ZkEnsemble;
use ZklockTest;

my $WAITERS = 50;

my $zk = ZkEnsemble->new(servers => 3);
my $node = zk_cluster('herd', $zk, max_connections => $WAITERS + 20);

my $holder = waiter($node);
$holder->query_safe("SELECT zk_lock('herd')");

my (@w, @pid);
for my $i (1 .. $WAITERS)
{
	my $s = waiter($node);
	my $pid = backend_pid($s);
	start_wait($s, "SELECT zk_lock('herd')");
	# Arrival order is queue order: wait for each node before the next.
	poll_until(sub { is_waiting($node, $pid) && zk_count($zk, '/zklock/herd') == $i + 1 })
	  or die "waiter $i did not queue";
	push @w, $s;
	push @pid, $pid;
}
ok(poll_until(sub { count_waiting($node) == $WAITERS }, 30), "$WAITERS backends wait");

# Every node carries its owner's watch (a waiter's own from the moment it
# waits), and every node but the last the watch of the waiter behind it.
my $by_path = $zk->watches_by_path;
my @lock_paths = grep { m{^/zklock/herd/} } keys %$by_path;
is(scalar(@lock_paths), $WAITERS + 1, 'every node is watched');
is(scalar(grep { $by_path->{$_} == 2 } @lock_paths), $WAITERS,
	'each waiter watches a different node besides its own');
is(scalar(grep { $by_path->{$_} > 2 } @lock_paths), 0,
	'no node is watched by more than one other session');
ok(!exists $by_path->{'/zklock/herd'}, 'nobody has a data watch on the lock directory');
is($zk->total_watches, 2 * $WAITERS + 1,
	'one watch per waiter and one per node in the whole ensemble');
is($zk->all_watches - $zk->total_watches, 1,
	'and one child watch: the last waiter\'s, covering its own node');

# Release one holder at a time: exactly the next waiter gets the lock.
$holder->query_safe("SELECT zk_unlock('herd')");
my ($woken_ok, $fifo_ok, $watch_ok, $one_wake) = (0, 0, 0, 0);
my $prev_token = 0;
for my $i (0 .. $WAITERS - 1)
{
	my $remaining = $WAITERS - $i - 1;
	my $got = poll_until(sub { !is_waiting($node, $pid[$i]) }, 60);
	my ($out, $err) = finish_wait($w[$i]);
	$fifo_ok++ if $got && $err eq '' && $out > $prev_token;
	# This waiter was woken exactly once: by its predecessor's release.
	$one_wake++ if $w[$i]->query_safe('SELECT notifications FROM zk_session()') eq '1';
	$prev_token = $out;
	# Polled: a waiter running its deadlock search (every waiter here waits
	# past deadlock_timeout) is on the CPU, not in its wait, for a moment.
	$woken_ok++ if poll_until(sub { count_waiting($node) == $remaining }, 5);
	# the new holder's own watch, and each remaining waiter's two
	$watch_ok++ if poll_until(sub { $zk->total_watches == 2 * $remaining + 1 }, 10);
	$w[$i]->query_safe("SELECT zk_unlock('herd')");
}
is($fifo_ok, $WAITERS, 'every waiter got the lock in arrival order, tokens increasing');
is($woken_ok, $WAITERS, 'each release let exactly one waiter through');
is($one_wake, $WAITERS, 'every waiter received exactly one watch notification');
is($watch_ok, $WAITERS, 'each release fired exactly one watch');
ok(poll_until(sub { zk_count($zk, '/zklock/herd') == 0 }, 30), 'queue is empty at the end');

finish(sessions => [ $holder, @w ], nodes => [$node], zk => $zk);
done_testing();
