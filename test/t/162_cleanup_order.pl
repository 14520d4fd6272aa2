# Copyright (c) zklock contributors
#
# Clean-ups reach the ensemble in the order they were queued, also when a
# send is refused: a deadlock victim's claim must go after its node, or a
# late member of the cycle could claim it again (a second 40P01).  Here two
# releases stand for them, made while the backend is cut off from the
# ensemble (a proxy), so that both wait in the queue; once it is back, gdb
# makes the library refuse the first delete with ZMARSHALLINGERROR (what
# it says when it cannot queue a request for want of memory).  That delete
# must keep its place, ahead of the second: the next send (a third lock's
# release) puts them on the wire in that order, which another client sees.
# Likewise when gdb holds the library's thread inside that first send
# while the main thread releases the third lock: the main thread must not
# send the second delete ahead of the first.
#
# Skips when gdb cannot attach to a backend here (no ptrace).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";

use PostgreSQL::Test::Utils;
use Test::More;
use ZkEnsemble;
use ZkGdb;
use ZkProxy;
use ZklockTest;

my $zk = ZkEnsemble->new(servers => 1);
my $hosts = $zk->connect_string;
my $node = zk_cluster('order', $zk, session_timeout => 30000);
my $proxy = ZkProxy->new($zk->port(1));

# The releases return without waiting for their deletes.
my $s = session($node, via => $proxy, warm => 1,
	set => { 'zklock.synchronous_release' => 'off' });
my $state = sub { my $o = $s->query_safe('SELECT state FROM zk_session()'); chomp $o; $o };

# Another client (kazoo) watches two nodes and prints the order in which
# their deletions reach it (one server: zxid order), within 60 s.
my $script = <<'PY';
import sys, threading
from kazoo.client import KazooClient
zk = KazooClient(hosts=sys.argv[1])
zk.start()
order = []
done = threading.Event()
def watch(name):
    def fired(event):
        order.append(name)
        if len(order) == 2:
            done.set()
    return fired
for arg in sys.argv[2:]:
    name, path = arg.split("=", 1)
    if zk.exists(path, watch=watch(name)) is None:
        order.append(name + "(gone)")
print("ready", flush=True)
done.wait(60)
print(" ".join(order), flush=True)
zk.stop()
PY

# Take locks a and b, watched by the other client; release both while cut
# off; let the connection come back with gdb's breakpoint $break at the
# entry of zoo_adelete, whose first hit is the first delete sent after the
# reconnect (on the library's thread, which sends the waiting clean-ups);
# then release a third lock, taken before, from the backend.  The order
# the other client saw.
sub released_in_order
{
	my ($what, $a, $b, $break, $body) = @_;
	my %path;
	$s->query_safe("SELECT zk_lock('$a'), zk_lock('$b'), zk_lock('$a-3')");
	for my $name ($a, $b)
	{
		($path{$name}) = $s->query_safe("SELECT node FROM zk_locks WHERE name = '$name'");
		chomp $path{$name};
	}
	open(my $watcher, '-|', '/usr/bin/python3', '-c', $script, $hosts,
		map { "$_=$path{$_}" } ($a, $b))
	  or die "cannot run python3: $!";
	my $ready = <$watcher>;
	is($ready, "ready\n", "$what: another client watches both nodes");
	my $g = ZkGdb->attach(backend_pid($s), non_stop => 1);
	return undef unless $g;
	$proxy->mode('cut');
	ok(poll_until(sub { $state->() ne 'connected' }, 30), "$what: the backend is cut off");
	is($s->query_safe("SELECT zk_unlock('$a'), zk_unlock('$b')"), 't|t',
		"$what: both locks are released: their deletes wait for the connection");
	like($g->break_run("tbreak *zoo_adelete", $body), qr/reakpoint 1 at/,
		"$what: gdb will $break the first delete sent after the reconnect");
	$proxy->mode('pass');
	ok(poll_until(sub { $state->() eq 'connected' }, 30), "$what: the connection is back");
	ok(poll_until(sub { ($g->cmd('info breakpoints', 10) // '') !~ /zoo_adelete/ }, 30),
		"$what: the first delete sent after the reconnect is at gdb's breakpoint");
	is($s->query_safe("SELECT zk_unlock('$a-3')"), 't', "$what: a third lock is released");
	$g->detach;
	ok(poll_until(sub { zkq($hosts, 'ls', "/zklock/$a-3") eq '' }, 30),
		"$what: the third one's node goes");
	my $order = <$watcher>;
	close $watcher;
	chomp $order if defined $order;
	return $order;
}

SKIP:
{
	# The library refuses the send: the entry waits for the next send, in
	# its place.
	my $order = released_in_order('refused', 'first', 'second', 'refuse',
		"silent\nreturn (int) -5\ncontinue");
	skip $ZkGdb::why, 17 unless defined $order;
	is($order, 'first second', 'refused: the nodes are deleted in the order they were released');

	# The library's thread held inside the send: the main thread's release
	# must not put the waiting second delete on the wire first.
	$order = released_in_order('held', 'one', 'two', 'hold', "silent");
	is($order, 'one two', 'held: the nodes are deleted in the order they were released');
}
ok(poll_until(sub { zkq($hosts, 'tree', '/zklock') !~ /_c_/ }, 30), 'no lock node is left');

finish(nodes => [$node], zk => $zk);
$proxy->stop;
done_testing();
