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
$s->query_safe("SELECT zk_lock('first'), zk_lock('second')");
my %path;
for my $name (qw(first second))
{
	($path{$name}) = $s->query_safe("SELECT node FROM zk_locks WHERE name = '$name'");
	chomp $path{$name};
}

# Another client (kazoo) watches both nodes and prints the order in which
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
open(my $watcher, '-|', '/usr/bin/python3', '-c', $script, $hosts,
	map { "$_=$path{$_}" } qw(first second))
  or die "cannot run python3: $!";
my $ready = <$watcher>;
is($ready, "ready\n", 'another client watches both nodes');

SKIP:
{
	my $g = ZkGdb->attach(backend_pid($s), non_stop => 1);
	skip $ZkGdb::why, 7 unless $g;
	my $state = sub { my $o = $s->query_safe('SELECT state FROM zk_session()'); chomp $o; $o };
	$proxy->mode('cut');
	ok(poll_until(sub { $state->() ne 'connected' }, 30), 'the backend is cut off');
	is($s->query_safe("SELECT zk_unlock('first'), zk_unlock('second')"), 't|t',
		'both locks are released: their deletes wait for the connection');
	like($g->break_run('tbreak *zoo_adelete', "silent\nreturn (int) -5\ncontinue"),
		qr/reakpoint 1 at/, 'gdb will refuse the next delete with ZMARSHALLINGERROR');
	$proxy->mode('pass');
	ok(poll_until(sub { $state->() eq 'connected' }, 30), 'the connection is back');
	ok(poll_until(sub { ($g->cmd('info breakpoints', 10) // '') !~ /zoo_adelete/ }, 30),
		'the first delete sent after the reconnect was refused');
	$g->detach;
	is($s->query_safe("SELECT zk_lock('third') > 0, zk_unlock('third')"), 't|t',
		'a third lock taken and released: its delete and the waiting ones go out');
	ok(poll_until(sub { zkq($hosts, 'ls', '/zklock/third') eq '' }, 30), 'the third one\'s node goes');
}
my $order = <$watcher>;
close $watcher;
chomp $order if defined $order;
is($order, 'first second', 'the nodes are deleted in the order they were released');
ok(poll_until(sub { zkq($hosts, 'tree', '/zklock') !~ /_c_/ }, 30), 'no lock node is left');

finish(nodes => [$node], zk => $zk);
$proxy->stop;
done_testing();
