# Copyright (c) zklock contributors
#
# Rare failures surface as errors, and no backend hangs on them.
#
# - The client library's IO thread cannot start (the backend's limit on
#   processes, RLIMIT_NPROC, set below what its user runs, as ulimit -u or
#   a cgroup's pids.max does): the first zk_* call fails with 53000, not
#   waiting for ever in zookeeper_init with every signal blocked (C client
#   patch 0030), and works once the limit is lifted.
# - The lease thread cannot start (gdb lowers the limit just before it
#   starts): the acquire fails with 53000; no lock goes unproven.
# - A delete refused with ZNOAUTH (a lock directory made by someone else
#   whose ACL grants create and read, not delete): zk_unlock says so with
#   a WARNING, and a try that gives up raises; neither reports success
#   while the node stays.
# - A create answered OK whose node cannot be registered (no memory: gdb
#   makes the registration fail): the acquire fails, and the node is
#   deleted, not left to block everyone queued behind it.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";

use PostgreSQL::Test::Utils;
use Test::More;
use ZkEnsemble;
use ZkGdb;
use ZklockTest;

my $zk = ZkEnsemble->new(servers => 1);
my $node = zk_cluster('rare', $zk, session_timeout => 20000);

# Set a backend's soft limit on processes; the one it had, for 'orig'.
my %orig;
sub nproc
{
	my ($pid, $soft) = @_;
	if (!exists $orig{$pid})
	{
		my ($line) = grep { /^Max processes/ } split /\n/, slurp_file("/proc/$pid/limits");
		$orig{$pid} = (split ' ', $line)[2];
	}
	$soft = $orig{$pid} if $soft eq 'orig';
	return system('prlimit', "--pid=$pid", "--nproc=$soft:") == 0;
}

# --- the IO thread cannot start
my $s = session($node);
my $pid = backend_pid($s);
ok(nproc($pid, 1), 'the backend may run one process of its user');
start_wait($s, "SELECT zk_try_lock('threads')");
my $ended = poll_until(sub { !in_call($node, $pid) }, 20);
ok($ended, 'the first zk_* call ends though its IO thread cannot start');
if (!$ended)
{
	# Every signal is blocked where it hangs: only SIGKILL ends it.
	kill 'KILL', $pid;
	BAIL_OUT('the backend hung in zookeeper_init');
}
my ($out, $err) = finish_wait($s);
like($err, qr/ERROR:  could not start the ZooKeeper client's thread/,
	'it fails with an error naming the thread');
$s->query_safe('\\set VERBOSITY verbose');
start_wait($s, "SELECT zk_try_lock('threads')");
($out, $err) = finish_wait($s);
like($err, qr/ERROR:  53000:/, 'SQLSTATE 53000, every time');
ok(nproc($pid, 'orig'), 'the limit is lifted');
is($s->query_safe("SELECT zk_try_lock('threads')"), 't', 'then the session opens and the lock is taken');
is($s->query_safe("SELECT zk_unlock('threads')"), 't', 'and released');

# --- the lease thread cannot start
my $l = session($node);
my $lpid = backend_pid($l);
$l->query_safe("LOAD 'zklock'");
nproc($lpid, 'orig');    # note the limit it has
SKIP:
{
	my $g = ZkGdb->attach($lpid);
	skip $ZkGdb::why, 4 unless $g;
	like(
		$g->break_run('break zkl_sess_lease_start', "silent\n"
			  . "shell prlimit --pid=$lpid --nproc=1:\ncontinue"),
		qr/Breakpoint 1 at/,
		'gdb lowers the limit just before the lease thread starts');
	$g->cmd('continue &');
	$l->query_safe('\\set VERBOSITY verbose');
	start_wait($l, "SELECT zk_try_lock('lease-thread')");
	($out, $err) = finish_wait($l);
	$g->detach;
	like($err, qr/ERROR:  53000: could not start the lease thread of the ZooKeeper session/,
		'the acquire fails with 53000');
	is(zk_count($zk, '/zklock/lease-thread'), 0, 'and leaves no node');
	ok(nproc($lpid, 'orig'), 'the limit is lifted');
	is($l->query_safe("SELECT zk_try_lock('lease-thread')"), 't', 'then the lock is taken');
	$l->query_safe("SELECT zk_unlock('lease-thread')");
}

# --- a created node that cannot be registered
SKIP:
{
	my $m = session($node, warm => 1);
	# the directory, made by zklock and left empty
	$m->query_safe("SELECT zk_lock('no-memory'), zk_unlock('no-memory')");
	my $g = ZkGdb->attach(backend_pid($m), non_stop => 1);
	skip $ZkGdb::why, 5 unless $g;
	like($g->cmd('tbreak zkl_sess_lease_add_node_locked') // '', qr/reakpoint 1 at/,
		'gdb will stop the IO thread at the next node\'s registration');
	start_wait($m, "SELECT zk_lock('no-memory')");
	ok($g->wait_for(qr/Thread \d+ "[^"]*" hit Temporary breakpoint 1(\.\d+)?, zkl_sess_lease_add_node_locked/, 30),
		'the create of its node is answered')
	  or diag($g->output);
	my ($thread) = $g->output =~ /Thread (\d+) "[^"]*" hit Temporary breakpoint 1/;
	$g->cmd("thread $thread");
	# the registration fails, as out of memory
	$g->cmd('return 0');
	$g->cmd('continue &');
	($out, $err) = finish_wait($m);
	like($err, qr/ERROR:  could not create ZooKeeper node "\/zklock\/no-memory\/_c_/,
		'the acquire fails');
	$g->detach;
	ok(poll_until(sub { zk_count($zk, '/zklock/no-memory') == 0 }, 10),
		'its node is deleted, with the session still open');
	is($m->query_safe("SELECT zk_try_lock('no-memory')"), 't', 'then the lock is taken');
	$m->query_safe("SELECT zk_unlock('no-memory')");
}

# --- deletes refused with ZNOAUTH
my $code = <<'EOF';
from kazoo.client import KazooClient
from kazoo.security import ACL, Id, Permissions
import sys
zk = KazooClient(hosts=sys.argv[1], timeout=10.0)
zk.start(timeout=15)
zk.ensure_path('/zklock')
cr = [ACL(Permissions.CREATE | Permissions.READ, Id('world', 'anyone'))]
zk.create('/zklock/noauth', b'', acl=cr)
zk.create('/zklock/noauth2', b'', acl=cr)
zk.create('/zklock/noauth2/holder-lock-', b'', sequence=True)
zk.stop()
EOF
ok(PostgreSQL::Test::Utils::run_log(
		[ '/usr/bin/python3', '-c', $code, $zk->connect_string ]),
	'two lock directories that grant create and read, not delete');
my $d = session($node);
is($d->query_safe("SELECT zk_try_lock('noauth')"), 't', 'a lock is taken there');
$d->query('SELECT zk_unlock(\'noauth\')');
like($d->{stderr}, qr/WARNING:  permission denied to delete ZooKeeper node "\/zklock\/noauth\/_c_/,
	'zk_unlock warns that ZooKeeper refused the delete');
$d->{stderr} = '';
is(zk_count($zk, '/zklock/noauth'), 1, 'the node is indeed still there');
$d->query('SELECT zk_try_lock(\'noauth2\')');
like($d->{stderr}, qr/ERROR:  permission denied to delete ZooKeeper node "\/zklock\/noauth2\/_c_/,
	'a try that gives up its place raises: its node stays');
$d->{stderr} = '';
is($d->query_safe('SELECT count(*) FROM zk_locks'), '0', 'and holds nothing');

finish(nodes => [$node], zk => $zk);
done_testing();
