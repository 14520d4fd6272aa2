# Copyright (c) zklock contributors
#
# The hand-off: a waiter whose watched node was the only one ahead that
# blocked it takes the lock on the notice of its deletion, with no listing
# of the directory on the way; a waiter with anything else ahead (a
# predecessor that was not the head, a node no known recipe names) lists
# again before it holds.  The waiter talks to ZooKeeper through a proxy
# that counts its requests by kind.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use ZkEnsemble;
use ZkProxy;
use ZklockTest;

my $zk = ZkEnsemble->new(servers => 3);
my $node = zk_cluster('handoff', $zk);
my $proxy = ZkProxy->new($zk->port(1));

sub listings { return $proxy->requests('list') + $proxy->requests('list2'); }

sub token_of
{
	my ($s, $name) = @_;
	my $t = $s->query_safe("SELECT token FROM zk_locks WHERE name = '$name'");
	chomp $t;
	return $t;
}

# No deadlock search (it lists directories) during these short waits.
my %quiet = (set => { deadlock_timeout => '10min' });
my $h = session($node, %quiet);    # holder, straight to the ensemble
my $b = session($node, %quiet);    # a second contender
my $a = session($node, %quiet, via => $proxy, warm => 1);    # the observed waiter
my $apid = backend_pid($a);
my $bpid = backend_pid($b);
is(scalar(my @c = zk_servers_of($zk, $apid)), 0, 'the waiter talks to ZooKeeper only through the proxy');
ok(listings() >= 1, 'the proxy counts the listings the waiter sends');

# Wait in $a for $name; returns the listings sent so far once it waits.
sub queue_a
{
	my ($sql, $dir, $count) = @_;
	start_wait($a, $sql);
	poll_until(sub { is_waiting($node, $apid) && zk_count($zk, $dir) == $count }, 30)
	  or die "waiter did not queue on $dir";
	return listings();
}

sub finish_a
{
	my ($what) = @_;
	ok(poll_until(sub { !is_waiting($node, $apid) }, 30), "$what: the waiter stops waiting");
	my ($out, $err) = finish_wait($a);
	is($err, '', "$what: it holds, with no error");
	return $out;
}

# --- 1. second in line: the head's deletion is the grant
$h->query_safe("SELECT zk_lock('head')");
my $htoken = token_of($h, 'head');
my $before = queue_a("SELECT zk_lock('head')", '/zklock/head', 2);
$h->query_safe("SELECT zk_unlock('head')");
finish_a('head');
is(listings() - $before, 0, 'head hand-off: no listing after the wake');
cmp_ok(token_of($a, 'head'), '>', $htoken, 'head hand-off: the token is the waiter\'s own, later node');
is_deeply([ map { /^_c_/ ? 1 : 0 } zk_children($zk, '/zklock/head') ], [1],
	'head hand-off: the waiter\'s node is the only one left');
$a->query_safe("SELECT zk_unlock('head')");

# --- 2. third in line: the predecessor was not the head, list again
$h->query_safe("SELECT zk_lock('third')");
start_wait($b, "SELECT zk_lock('third')");
poll_until(sub { is_waiting($node, $bpid) && zk_count($zk, '/zklock/third') == 2 }, 30)
  or die 'second contender did not queue';
$before = queue_a("SELECT zk_lock('third')", '/zklock/third', 3);
$h->query_safe("SELECT zk_unlock('third')");
ok(poll_until(sub { !is_waiting($node, $bpid) }, 30), 'third in line: the second gets the lock first');
my ($out, $err) = finish_wait($b);
is($err, '', 'third in line: the second holds');
ok(in_call($node, $apid), 'third in line: the third still waits');
is(listings() - $before, 0, 'third in line: the first release did not wake the third');
$b->query_safe("SELECT zk_unlock('third')");
finish_a('third');
is(listings() - $before, 1, 'third in line: exactly one listing before it holds');
$a->query_safe("SELECT zk_unlock('third')");

# --- 3. a reader behind one writer, next to another reader: hand-off
$h->query_safe("SELECT zk_lock('readers')");
start_wait($b, "SELECT zk_lock_shared('readers')");
poll_until(sub { is_waiting($node, $bpid) && zk_count($zk, '/zklock/readers') == 2 }, 30)
  or die 'reader did not queue';
$before = queue_a("SELECT zk_lock_shared('readers')", '/zklock/readers', 3);
$h->query_safe("SELECT zk_unlock('readers')");
finish_a('reader');
is(listings() - $before, 0, 'reader behind one writer: no listing after the wake');
ok(poll_until(sub { !is_waiting($node, $bpid) }, 30), 'the other reader holds too');
($out, $err) = finish_wait($b);
is($err, '', 'the other reader holds without error');
$a->query_safe("SELECT zk_unlock_shared('readers')");
$b->query_safe("SELECT zk_unlock_shared('readers')");

# --- 4. a reader behind two writers: list again
$h->query_safe("SELECT zk_lock('writers')");
start_wait($b, "SELECT zk_lock('writers')");
poll_until(sub { is_waiting($node, $bpid) && zk_count($zk, '/zklock/writers') == 2 }, 30)
  or die 'second writer did not queue';
$before = queue_a("SELECT zk_lock_shared('writers')", '/zklock/writers', 3);
$h->query_safe("SELECT zk_unlock('writers')");
ok(poll_until(sub { !is_waiting($node, $bpid) }, 30), 'two writers: the second writer holds');
($out, $err) = finish_wait($b);
$b->query_safe("SELECT zk_unlock('writers')");
finish_a('reader behind two writers');
is(listings() - $before, 1, 'reader behind two writers: one listing before it holds');
$a->query_safe("SELECT zk_unlock_shared('writers')");

# --- 5. a node no known recipe names, at the head: list again
my $hosts = $zk->connect_string;
is(zkq($hosts, 'create', '/zklock/foreign/x0000000000'), 'created',
	'a foreign client creates a node with its own naming');
$before = queue_a("SELECT zk_lock('foreign')", '/zklock/foreign', 2);
is(zkq($hosts, 'delete', '/zklock/foreign/x0000000000'), 'deleted',
	'the foreign client deletes it');
finish_a('foreign head');
is(listings() - $before, 1, 'foreign head: one listing before it holds');
$a->query_safe("SELECT zk_unlock('foreign')");

# --- 6. a data change on the watched node is no hand-off
$h->query_safe("SELECT zk_lock('changed')");
$before = queue_a("SELECT zk_lock('changed')", '/zklock/changed', 2);
my ($hnode) = grep { /^_c_/ } zk_children($zk, '/zklock/changed');
my $hpid = backend_pid($h);
$h->query_safe("SELECT zk_unlock('changed')");
finish_a('changed');
is(listings() - $before, 0, 'changed: plain hand-off first');
$a->query_safe("SELECT zk_unlock('changed')");
# the waiter's wake on a change: only the deletion is the grant
$h->query_safe("SELECT zk_lock('changed')");
($hnode) = grep { /^_c_/ } zk_children($zk, '/zklock/changed');
$before = queue_a("SELECT zk_lock('changed')", '/zklock/changed', 2);
system('/usr/bin/python3', '-c', <<EOF, $hosts, "/zklock/changed/$hnode") == 0 or die 'set failed';
import sys
from kazoo.client import KazooClient
zk = KazooClient(hosts=sys.argv[1]); zk.start(timeout=15)
zk.set(sys.argv[2], b'changed by another client'); zk.stop(); zk.close()
EOF
ok(poll_until(sub { listings() - $before >= 1 }, 30), 'a change of the watched node makes the waiter list again');
ok(in_call($node, $apid), 'and it keeps waiting: the holder still holds');
$h->query_safe("SELECT zk_unlock('changed')");
finish_a('changed twice');
$a->query_safe("SELECT zk_unlock('changed')");

# --- 7. a full semaphore's waiter, woken by a change that leaves it full,
# lists once, with the watch (not once without it and again with it)
$h->query_safe("SELECT zk_semaphore('semwake', 1)");
my $watches = $zk->all_watches;
start_wait($a, "SELECT zk_semaphore('semwake', 1) > 0");
# Queued means its child watch on the leases is set (mntr counts child
# watches): "waiting" alone is also true while its first listings are
# answered, and one of those would then count as the wake's.
poll_until(sub {
		is_waiting($node, $apid) && zk_count($zk, '/zklock/semwake/leases') == 2
		  && $zk->all_watches > $watches }, 30)
  or die 'the semaphore waiter did not queue';
$before = listings();
is(zkq($hosts, 'create', '/zklock/semwake/leases/foreign-lease'), 'created',
	'a foreign client adds a lease: still full');
ok(poll_until(sub { listings() - $before >= 1 && is_waiting($node, $apid) }, 30),
	'the waiter wakes, lists and waits again');
# An absence cannot be polled for: give a second listing a bounded moment.
my $quiet = time + 1;
poll_until(sub { listings() - $before > 1 || time > $quiet }, 5);
is(listings() - $before, 1, 'full semaphore: one listing per wake, with the watch');
is(zkq($hosts, 'delete', '/zklock/semwake/leases/foreign-lease'), 'deleted',
	'the foreign lease goes');
$h->query_safe("SELECT zk_semaphore_release('semwake')");
is(finish_a('semaphore'), 't', 'the waiter takes the lease once the holder releases');
$a->query_safe("SELECT zk_semaphore_release('semwake')");

$proxy->stop;
finish(nodes => [$node], zk => $zk);
done_testing();
