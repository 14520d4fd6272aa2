# Copyright (c) zklock contributors
#
# Sends that fail for want of memory or descriptors, made to fail with a
# debugger (gdb, as in 150_race_windows).
#
# - The client library runs out of memory after it registered a request's
#   completion: zoo_acreate2 registers the completion, then
#   fails to queue the request and returns ZMARSHALLINGERROR.  The request
#   never goes out, but its completion runs later, with the object it was
#   given: when the next reply comes (out of order, so the library drops
#   the connection and answers every pending request with connection
#   loss), or at close.  That object must still be there then.  gdb counts
#   the main thread's calloc calls in one zoo_acreate2, fails the last one
#   (the request buffer's, after the completion's), and watches the
#   request object: it must not be freed before its completion runs, and
#   must be freed once.
# - A clean-up whose send the library refuses with ZMARSHALLINGERROR (gdb
#   makes the delete of a released lock's node return that at its entry)
#   goes again without waiting for another send: the node is gone within
#   5 s, with nothing else sent meanwhile.
# - A backend out of external descriptors gets a clear error when it opens
#   its session, and gives back the ones it had counted.
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
use ZklockTest;

my $zk = ZkEnsemble->new(servers => 1);
my $node = zk_cluster('sendoom', $zk);
# Sessions whose waits end by statement_timeout when they would never end
# otherwise: a failure, not a hang.
my %bounded = (set => { statement_timeout => '60s' });

# gdb's value of an expression, or undef.
sub gdb_value
{
	my ($g, $expr) = @_;
	my ($v) = ($g->cmd("print $expr", 10) // '') =~ /= (-?\d+)/;
	return $v;
}

# Run $sql in $s with gdb stopping at the create of a lock node (mode 3,
# EPHEMERAL_SEQUENTIAL), and count the main thread's calloc calls until
# zoo_acreate2 returns; the $fail-th (if given) asks for more than can be
# had.  The backend runs under gdb when called.  Returns (number of
# callocs, zoo_acreate2's result), or () when gdb did not do each step;
# gdb stays stopped at the return, the request object in $op and its
# completion in $cb.
sub create_with_callocs
{
	my ($g, $s, $sql, $fail) = @_;
	my @r = eval {
		my ($bp) = ($g->cmd('break *zoo_acreate2 if $r9 == 3') // '') =~ /Breakpoint (\d+) at/;
		die "no breakpoint\n" unless $bp;
		start_wait($s, $sql);
		die "zoo_acreate2 not reached\n"
		  unless $g->wait_for(qr/hit Breakpoint $bp, (?:0x\S+ in )?zoo_acreate2 /, 30);
		$g->cmd('delete');
		# At the entry: the return address on top of the stack, the 7th
		# and 8th arguments (completion, data) above it.
		$g->cmd('set $ret = *(long *) $sp');
		$g->cmd('set $cb = *(long *) ($sp + 8)');
		$g->cmd('set $op = *(long *) ($sp + 16)');
		die "no return breakpoint\n"
		  unless ($g->cmd('tbreak *$ret') // '') =~ /Temporary breakpoint \d+ at/;
		$g->cmd('set $n = 0');
		die "no calloc breakpoint\n"
		  unless ($g->cmd('eval "break *calloc thread %d", $_thread') // '') =~ /Breakpoint \d+ at/;
		my $on_call = 'set $n = $n + 1';
		$on_call .= "\nif \$n == $fail\nset \$rsi = 0xffffffffffffff00\nend" if $fail;
		$g->cmd("commands\nsilent\n$on_call\ncontinue\nend");
		die "zoo_acreate2 did not return\n"
		  unless ($g->cmd('continue', 60) // '') =~ /Temporary breakpoint \d+, /;
		$g->cmd('delete');
		(gdb_value($g, '$n'), gdb_value($g, '(int) $rax'));
	};
	diag("gdb: $@" . $g->output) unless @r;
	return @r;
}

my $s = session($node, %bounded, warm => 1);
my $pid = backend_pid($s);
my $g = ZkGdb->attach($pid);
plan skip_all => $ZkGdb::why unless $g;
$g->cmd('continue &');

# The count, with every allocation granted.
my ($n) = create_with_callocs($g, $s, "SELECT zk_try_lock('oom-count')");
$g->cmd('continue &');
my ($out, $err) = finish_wait($s);
is($out, 't', 'counting: the lock is taken') or diag($err);
ok(defined $n && $n >= 2,
	'one create of a lock node callocs at least twice (its completion, then its request buffer)')
  or diag('callocs: ' . ($n // 'undef'));
$s->query_safe("SELECT zk_unlock('oom-count')");
$n //= 2;

# The last calloc fails: the completion is registered, the request not
# queued.
my (undef, $rc) = create_with_callocs($g, $s, "SELECT zk_try_lock('oom')", $n);
is($rc, -5, 'zoo_acreate2 returns ZMARSHALLINGERROR when its last calloc fails');
$g->cmd('set $freed = 0');
$g->cmd('set $completed = 0');
$g->cmd('set $freed_first = -1');
# Counting stops at the first free: the address may serve a new object
# afterwards, whose free is no second free of this one (a real double free
# aborts the backend in glibc, which the checks after it would see).
my ($free_bp) = ($g->cmd("break *free if \$rdi == \$op") // '') =~ /Breakpoint (\d+) at/;
ok($free_bp, 'gdb counts the frees of the request object');
$g->cmd("commands $free_bp\nsilent\nset \$freed = \$freed + 1\ndisable $free_bp\ncontinue\nend")
  if $free_bp;
like($g->break_run('break *$cb if $rcx == $op', "silent\nset \$completed = \$completed + 1\n"
	  . "if \$freed_first < 0\nset \$freed_first = \$freed\nend\ncontinue"),
	qr/Breakpoint \d+ at/, 'and the runs of its completion');
$g->cmd('continue &');
($out, $err) = finish_wait($s);
like($err, qr/ERROR:  could not create ZooKeeper node "\/zklock\/oom\//,
	'the statement fails with the create\'s error');
like($err, qr/DETAIL:  marshalling error/, 'naming the library\'s code');
is(zk_count($zk, '/zklock/oom'), 0, 'no node: the create never went out');

# The next request's reply comes out of order: the library drops the
# connection and runs the orphaned completion; this backend reconnects and
# takes the lock.
start_wait($s, "SELECT zk_try_lock('oom')");
ok(poll_until(sub { (gdb_value($g, '$completed') // 0) >= 1 }, 30),
	'the failed create\'s completion runs when the next reply comes');
is(gdb_value($g, '$freed_first'), 0,
	'its request object was not freed before the completion ran');
ok(poll_until(sub { (gdb_value($g, '$freed') // 0) == 1 }, 15),
	'and is freed, after it (once: the backend survives, below)')
  or diag('freed: ' . (gdb_value($g, '$freed') // 'undef'));
$g->detach;
($out, $err) = finish_wait($s);
is($out, 't', 'the backend reconnects and takes the lock') or diag($err);
is(backend_pid($s), $pid, 'in the same backend');
$s->query_safe("SELECT zk_unlock('oom')");
ok(poll_until(sub { zk_count($zk, '/zklock/oom') == 0 }, 15), 'nothing is left behind');
is($node->safe_psql('postgres', "SELECT zk_try_lock('oom'), zk_unlock('oom')"), 't|t',
	'another backend takes the lock');

# --- a refused clean-up send goes again.  The release does not wait
# (synchronous_release off), and nothing else is sent after it: only the
# lease thread can send the queue again.
{
	my $r = session($node, %bounded, warm => 1);
	$r->query_safe("SET zklock.synchronous_release = off");
	$r->query_safe("SELECT zk_lock('resend')");
	my $rg = ZkGdb->attach(backend_pid($r), non_stop => 1);
	ok($rg, 'gdb attached to a holder');
	$rg->cmd('set $refused = 0');
	# Refused at the entry: ZMARSHALLINGERROR (-5) to the caller.
	like($rg->break_run('tbreak *zoo_adelete', "silent\nset \$refused = 1\nset \$rax = -5\n"
		  . "set \$pc = *(long *) \$sp\nset \$sp = \$sp + 8\ncontinue"),
		qr/Temporary breakpoint \d+ at/, 'gdb will refuse the next delete with ZMARSHALLINGERROR');
	is($r->query_safe("SELECT zk_unlock('resend')"), 't', 'the lock is released');
	is(gdb_value($rg, '$refused'), 1, 'the send of its delete was refused');
	ok(poll_until(sub { zk_count($zk, '/zklock/resend') == 0 }, 5),
		'the delete goes again: the node is gone within 5 s');
	$rg->detach;
	is($node->safe_psql('postgres', "SELECT zk_try_lock('resend'), zk_unlock('resend')"), 't|t',
		'another backend takes the lock');
	quit_session($r);
}

# --- descriptors: a fresh backend counts its eventfd and wait set, then
# three descriptors for the client library; the second of those three is
# refused.
my $f = session($node, %bounded);
# Loaded, for gdb to find its functions; no session is opened yet.
$f->query_safe("LOAD 'zklock'");
my $d = ZkGdb->attach(backend_pid($f));
ok($d, 'gdb attached to a fresh backend');
$d->cmd('set $lib = 0');
$d->cmd('set $acq = 0');
$d->cmd('set $rel = 0');
# The session resolves zklock.hosts after its eventfd and wait set are
# made, before it counts the library's descriptors.
like($d->break_run('break session_resolve', "silent\nset \$lib = 1\ncontinue"),
	qr/Breakpoint \d+ at/, 'gdb sees the session about to count the client library\'s descriptors');
# Refused at the entry: return false to the caller.
like($d->break_run('break *AcquireExternalFD', "silent\nif \$lib\nset \$acq = \$acq + 1\n"
	  . "if \$acq == 2\nset \$rax = 0\nset \$pc = *(long *) \$sp\nset \$sp = \$sp + 8\nend\nend\ncontinue"),
	qr/Breakpoint \d+ at/, 'refuses the second of them');
like($d->break_run('break *ReleaseExternalFD', "silent\nif \$lib\nset \$rel = \$rel + 1\nend\ncontinue"),
	qr/Breakpoint \d+ at/, 'and counts the ones given back');
$d->cmd('continue &');
$f->query("SELECT zk_try_lock('fds')");
like($f->{stderr}, qr/ERROR:  could not open ZooKeeper session: too many open files/,
	'out of descriptors: a clear error');
$f->{stderr} = '';
is(gdb_value($d, '$acq'), 2, 'after two tries for the library');
is(gdb_value($d, '$rel'), 1, 'the one counted for it is given back');
$d->detach;
is($f->query_safe("SELECT zk_try_lock('fds'), zk_unlock('fds')"), 't|t',
	'with descriptors again, the session opens');

finish(nodes => [$node], zk => $zk);
done_testing();
