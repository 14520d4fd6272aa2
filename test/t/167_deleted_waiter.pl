# Copyright (c) zklock contributors
#
# A waiter's own node deleted by another client (an operator with a
# ZooKeeper shell, a clean-up script).  Such a waiter must never hold the
# lock beside another holder unnoticed:
# - when it finds out by listing the queue (it waited behind more than one
#   node), its zk_lock fails at once with 08000 naming the lock;
# - when the lock is handed to it by the deletion notice alone (the node
#   it waited for was the only one ahead), the watch on its own node has
#   marked that node lost, and the grant fails naming the lock; should the
#   grant win that race, the lock shows lost (zk_locks, commit refusal);
# - when its blocker stays (a session lock, a wait with no timeout), the
#   watch on its own node wakes it: it fails at once with the same error,
#   while the holder still holds, rather than waiting for ever.
# Either way the lock is free for others, and nothing is left behind.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";

use PostgreSQL::Test::Utils;
use Test::More;
use ZkEnsemble;
use ZklockTest;

my $zk = ZkEnsemble->new(servers => 1);
my $east = zk_cluster('east', $zk, session_timeout => 6000);
my $west = zk_cluster('west', $zk, session_timeout => 6000);
$west->safe_psql('postgres', 'CREATE TABLE t167 (i int)');
my $hosts = $zk->connect_string;

# The node of a backend's session in a lock directory (by its uuid's
# session part, which zk_session does not show: the newest child that is
# not in @others).
sub new_child
{
	my ($dir, @others) = @_;
	my %seen = map { $_ => 1 } @others;
	my @new = grep { !$seen{$_} } zk_children($zk, $dir);
	return @new == 1 ? $new[0] : undef;
}

# 1. The waiter lists: A holds, D waits, B waits behind D.  B's node is
#    deleted; D gives up; B, woken, lists and finds itself gone.
my $a = waiter($east);
my $d = waiter($east);
my $b = waiter($west);
my $c = waiter($west);
$a->query_safe("SELECT zk_lock('victim')");
my @before = zk_children($zk, '/zklock/victim');
start_wait($d, "SELECT zk_lock('victim', '60s')");
ok(poll_until(sub { zk_count($zk, '/zklock/victim') == 2 }), 'D queues');
my $dnode = new_child('/zklock/victim', @before);
start_wait($b, "SELECT zk_lock('victim', '60s')");
ok(poll_until(sub { zk_count($zk, '/zklock/victim') == 3 }), 'B queues behind D');
my $bnode = new_child('/zklock/victim', @before, $dnode);
ok(defined $bnode, 'B\'s node is found');
is(zkq($hosts, 'delete', "/zklock/victim/$bnode"), 'deleted', 'another client deletes B\'s node');
my $dpid = $east->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE query LIKE 'SELECT zk_lock(''victim'', ''60s'')%' AND state = 'active'");
ok($dpid =~ /^\d+$/, 'D\'s backend is found');
$east->safe_psql('postgres', "SELECT pg_cancel_backend($dpid)");
my (undef, $derr) = finish_wait($d);
like($derr, qr/canceling statement/, 'D gives up');
my ($bout, $berr) = finish_wait($b);
like($berr, qr/ERROR:  ZooKeeper node of lock "victim" vanished while waiting/,
	'B, woken by D\'s deletion, lists and fails naming the lock');
is($b->query_safe("SELECT count(*) FROM zk_locks"), '0', 'B holds nothing');
$a->query_safe("SELECT zk_unlock('victim')");
is($c->query_safe("SELECT zk_try_lock('victim')"), 't', 'the lock is free for others');
$c->query_safe("SELECT zk_unlock('victim')");
ok(poll_until(sub { zk_count($zk, '/zklock/victim') == 0 }), 'nothing is left in the directory');

# 2. The hand-off: A holds, B waits right behind it.  B's node is deleted,
#    then A releases: the deletion notice hands B the lock without a
#    listing.  B's own watch has marked its node lost: the grant fails.
$a->query_safe("SELECT zk_lock('victim2')");
@before = zk_children($zk, '/zklock/victim2');
start_wait($b, "SELECT zk_lock('victim2', '60s') > 0");
ok(poll_until(sub { zk_count($zk, '/zklock/victim2') == 2 }), 'B queues');
$bnode = new_child('/zklock/victim2', @before);
is(zkq($hosts, 'delete', "/zklock/victim2/$bnode"), 'deleted', 'another client deletes B\'s node');
$a->query_safe("SELECT zk_unlock('victim2')");
($bout, $berr) = finish_wait($b);
if ($berr =~ /ERROR/)
{
	like($berr, qr/vanished while waiting|was lost/, 'B fails naming its lost node');
}
else
{
	is($bout, 't', 'B is handed the lock by the deletion notice');
	ok(poll_until(sub { lock_state($b, 'victim2') eq 'lost' }, 10),
		'B\'s lock shows lost');
	$b->query("BEGIN; INSERT INTO t167 VALUES (1); COMMIT");
	like($b->{stderr}, qr/cannot commit while ZooKeeper lock "victim2" \(exclusive\) is lost/,
		'a write under it is refused');
	$b->{stderr} = '';
	$b->query("ROLLBACK");
	$b->{stderr} = '';
	$b->query("SELECT zk_unlock('victim2')");
	$b->{stderr} = '';
}
is($c->query_safe("SELECT zk_try_lock('victim2')"), 't', 'the lock is free for others');
$c->query_safe("SELECT zk_unlock('victim2')");
ok(poll_until(sub { zk_count($zk, '/zklock/victim2') == 0 }), 'nothing is left in the directory');

# 3. The blocker stays: A holds a session lock, E waits with no timeout
#    behind it.  E's node is deleted: E fails at once, A still holding.
#    E's session timeout (30 s) is far beyond the 10 s bound, so that E's
#    lease running out (its only node lost, nothing left to prove) cannot
#    be what ends its wait.
my $e = waiter($west);
$e->query_safe("SET zklock.session_timeout = 30000");
my $epid = backend_pid($e);
$a->query_safe("SELECT zk_lock('victim3')");
@before = zk_children($zk, '/zklock/victim3');
start_wait($e, "SELECT zk_lock('victim3') > 0");
ok(poll_until(sub { zk_count($zk, '/zklock/victim3') == 2 }), 'E queues');
my $enode = new_child('/zklock/victim3', @before);
ok(defined $enode, 'E\'s node is found');
is(zkq($hosts, 'delete', "/zklock/victim3/$enode"), 'deleted', 'another client deletes E\'s node');
ok(poll_until(sub { !in_call($west, $epid) }, 10),
	'E stops waiting while A still holds');
my ($eout, $eerr) = finish_wait($e);
like($eerr, qr/ERROR:  ZooKeeper node of lock "victim3" vanished while waiting/,
	'E fails naming the lock');
is($e->query_safe("SELECT count(*) FROM zk_locks"), '0', 'E holds nothing');
is(lock_state($a, 'victim3'), 'held', 'A still holds');
$a->query_safe("SELECT zk_unlock('victim3')");
ok(poll_until(sub { zk_count($zk, '/zklock/victim3') == 0 }), 'nothing is left in the directory');

$_->quit for ($a, $b, $c, $d, $e);
$east->stop('fast');
$west->stop('fast');
$zk->stop;
done_testing();
