# Copyright (c) zklock contributors
#
# A held node deleted by another client is a lost lock at once, at no
# request of its own: counted through a proxy in front of the one server,
# an uncontended cycle costs its create, its listing and its release.
#  1. zk_lock + zk_unlock: 3 requests each (create, list, delete), and
#     BEGIN; zk_xact_lock; COMMIT the same, five times over.
#  2. An uncontended holder whose node another client deletes: lost within
#     2 s (the session's proofs come every 10 s), still with no request
#     of its own before the deletion.
#  3. A holder with a queued waiter (another cluster): its node deleted,
#     it is lost within 2 s, and the waiter gets the lock.
#  4. Children that come and go beside a held node are no loss: another
#     backend's shared contender joining and leaving the same queue, and
#     a node of another client (kazoo) made and deleted in the same
#     directory; the holder stays held and a write commit goes through;
#     deleting its node afterwards is still a loss within 2 s.
#  5. A hand-off: a waiter's own node gets a data watch of its own once it
#     waits, so the holder's delete, which fires the waiter's child watch
#     too, leaves it in no doubt: the waiter's commit sends no proof.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";

use PostgreSQL::Test::Utils;
use Test::More;
use ZkEnsemble;
use ZkProxy;
use ZklockTest;

my $zk = ZkEnsemble->new(servers => 1);
my $hosts = $zk->connect_string;
my $east = zk_cluster('east', $zk, session_timeout => 60000);
my $west = zk_cluster('west', $zk, session_timeout => 60000);
$east->safe_psql('postgres', 'CREATE TABLE work (name text)');

my $proxy = ZkProxy->new($zk->port(1));

# Every request but the session's own (ping, auth, set_watches) and the
# close: what a lock costs the ensemble.
my @KINDS = qw(create delete exists get set get_acl set_acl list sync list2
  check multi create2 remove_watches create_container);

sub counts
{
	return { map { $_ => $proxy->requests($_) } @KINDS };
}

# The requests since $before, as "kind n" pairs, and their total.
sub since
{
	my ($before) = @_;
	my $now = counts();
	my @seen = map { $now->{$_} - $before->{$_} ? "$_ " . ($now->{$_} - $before->{$_}) : () }
	  sort keys %$now;
	my $total = 0;
	$total += $now->{$_} - $before->{$_} for keys %$now;
	return ($total, join(', ', @seen));
}

sub node_of
{
	my ($s, $name) = @_;
	my $node = $s->query_safe("SELECT node FROM zk_locks WHERE name = '$name'");
	chomp $node;
	return $node;
}

my $a = session($east, via => $proxy, warm => 1);

# --- 1. three requests per uncontended cycle
{
	# the directories made once, so that the cycles below find them
	$a->query_safe("SELECT zk_lock('count'), zk_unlock('count')");
	$a->query_safe("BEGIN; SELECT zk_xact_lock('count-x'); COMMIT");

	my $before = counts();
	for (1 .. 5)
	{
		$a->query_safe("SELECT zk_lock('count')");
		$a->query_safe("SELECT zk_unlock('count')");
	}
	my ($total, $what) = since($before);
	is($total, 15, 'five uncontended zk_lock + zk_unlock: 3 requests each')
	  or diag($what);
	is($what, 'create2 5, delete 5, list 5', 'a create, a listing and a delete each');

	$before = counts();
	$a->query_safe("BEGIN; SELECT zk_xact_lock('count-x'); COMMIT") for 1 .. 5;
	($total, $what) = since($before);
	is($total, 15, 'five BEGIN; zk_xact_lock; COMMIT: 3 requests each')
	  or diag($what);
	is($what, 'create2 5, delete 5, list 5', 'a create, a listing and a delete each');
}

# --- 2. an uncontended holder's node deleted by another client
{
	$a->query_safe("SELECT zk_lock('gone'), zk_unlock('gone')");
	my $before = counts();
	$a->query_safe("SELECT zk_lock('gone')");
	my ($total, $what) = since($before);
	is($what, 'create2 1, list 1', 'the holder sent its create and its listing, nothing else')
	  or diag($what);
	is(zkq($hosts, 'delete', node_of($a, 'gone')), 'deleted', 'another client deletes its node');
	ok(poll_until(sub { lock_state($a, 'gone') eq 'lost' }, 2),
		'zk_locks shows it lost within 2 s (proofs come every 10 s)')
	  or diag('state: ' . lock_state($a, 'gone'));
	$a->query("BEGIN; INSERT INTO work VALUES ('gone'); COMMIT");
	like($a->{stderr}, qr/cannot commit while ZooKeeper lock "gone" \(exclusive\) is lost/,
		'a write commit under it is refused');
	$a->{stderr} = '';
	$a->query("ROLLBACK");
	my ($out) = $a->query("SELECT zk_unlock('gone')");
	is($out, 'f', 'zk_unlock says it was lost');
	$a->{stderr} = '';
}

# --- 3. a holder with a queued waiter
{
	my $b = session($west, warm => 1);
	$a->query_safe("SELECT zk_lock('queued')");
	start_wait($b, "SELECT zk_lock('queued') > 0");
	ok(poll_until(sub { zk_count($zk, '/zklock/queued') == 2 }, 30), 'a waiter queues behind A');
	is(zkq($hosts, 'delete', node_of($a, 'queued')), 'deleted', 'another client deletes A\'s node');
	ok(poll_until(sub { lock_state($a, 'queued') eq 'lost' }, 2), 'A\'s lock shows lost within 2 s')
	  or diag('state: ' . lock_state($a, 'queued'));
	my ($out) = finish_wait($b);
	is($out, 't', 'and the waiter has the lock');
	$b->query_safe("SELECT zk_unlock('queued')");
	($out) = $a->query("SELECT zk_unlock('queued')");
	is($out, 'f', 'A\'s zk_unlock says it was lost');
	$a->{stderr} = '';
	quit_session($b);
}

# --- 4. unrelated children come and go
{
	my $b = session($west, warm => 1);
	$a->query_safe("SELECT zk_lock_shared('beside')");
	$b->query_safe("SELECT zk_lock_shared('beside')");
	is(zk_count($zk, '/zklock/beside'), 2, 'another backend\'s shared contender joins the queue');
	$b->query_safe("SELECT zk_unlock_shared('beside')");
	is(zk_count($zk, '/zklock/beside'), 1, 'and leaves it');
	is(zkq($hosts, 'create', '/zklock/beside/__lock__0000009999'), 'created',
		'another client makes a node in the same directory');
	is(zkq($hosts, 'delete', '/zklock/beside/__lock__0000009999'), 'deleted', 'and deletes it');
	# the holder's own-node watch, set once others came, is the barrier
	ok(poll_until(sub { ($zk->watches_by_path->{ node_of($a, 'beside') } // 0) == 1 }, 10),
		'the holder watches its own node now that others came')
	  or diag(explain $zk->watches_by_path);
	is(lock_state($a, 'beside'), 'held', 'the holder\'s lock is still held');
	$a->query_safe("BEGIN; INSERT INTO work VALUES ('beside'); COMMIT");
	is($east->safe_psql('postgres', "SELECT count(*) FROM work WHERE name = 'beside'"), '1',
		'a write commit under it goes through');
	is(zkq($hosts, 'delete', node_of($a, 'beside')), 'deleted', 'then another client deletes its node');
	ok(poll_until(sub { lock_state($a, 'beside') eq 'lost' }, 2), 'and it shows lost within 2 s')
	  or diag('state: ' . lock_state($a, 'beside'));
	$a->query("SELECT zk_unlock_shared('beside')");
	$a->{stderr} = '';
	quit_session($b);
}

# --- 5. a hand-off costs the waiter no proof
{
	my $h = session($west, warm => 1);
	$h->query_safe("SELECT zk_lock('handoff')");
	my $before = counts();
	start_wait($a, "SELECT zk_lock('handoff') > 0");
	ok(poll_until(sub { zk_count($zk, '/zklock/handoff') == 2 }, 30), 'A queues behind the holder');
	# A's own watch, sent once it waits, is in place before the hand-off:
	# the holder's node watched by A, and A's own
	ok(poll_until(sub { (grep { m{^/zklock/handoff/} } keys %{ $zk->watches_by_path }) == 2 }, 10),
		'both nodes in the queue are watched: the holder\'s by A, and A\'s own')
	  or diag(explain $zk->watches_by_path);
	$h->query_safe("SELECT zk_unlock('handoff')");
	my ($out) = finish_wait($a);
	is($out, 't', 'A has the lock once the holder released it');
	my ($total, $what) = since($before);
	unlike($what, qr/multi/,
		'A\'s node had its own watch while it waited: the deletion that woke A (which fired its child watch too) cost its commit no proof')
	  or diag($what);
	like($what, qr/get 2/, 'A watched its predecessor and its own node') or diag($what);
	$a->query_safe("SELECT zk_unlock('handoff')");
	quit_session($h);
}

ok(poll_until(sub { zkq($hosts, 'tree', '/zklock') !~ /_c_/ }, 30), 'no lock node is left');

finish(nodes => [ $east, $west ], zk => $zk);
$proxy->stop;
done_testing();
