# Copyright (c) zklock contributors
#
# Where a request and its answer cross threads (the CPU per cycle).
# zklock's C client patches 0006 and 0007 run the library's
# callbacks on its IO thread (no completion thread), and let the main
# thread write a request to the socket itself instead of waking the IO
# thread through a pipe for it; with TLS the IO thread still sends all
# (170_tls covers that path).  strace, attached to every thread of a
# backend with an open plain-text session, sees which thread makes which
# system call while it runs lock and unlock cycles:
#   - the requests (one sendmsg each) come from the main thread;
#   - the main thread never writes the library's wake-up pipe (a write of
#     one byte);
#   - the main thread's wake-ups (the eventfd, eight bytes) are written by
#     the thread that reads the answers: the IO thread, not a third one.
# Without the patches the main thread makes no sendmsg call, writes the
# pipe once per request batch, and a completion thread writes the eventfd.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";

use IPC::Run ();
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);
use ZkEnsemble;
use ZklockTest;

plan skip_all => 'strace is not installed' unless -x '/usr/bin/strace';

my $zk = ZkEnsemble->new(servers => 1);
my $east = zk_cluster('east', $zk);
my $s = waiter($east);
$s->query_safe("SET statement_timeout = '60s'");
is($s->query_safe("SELECT zk_try_lock('io-0') AND zk_unlock('io-0')"), 't',
	'the session is open');
my $pid = backend_pid($s);
my @tids = map { m{/(\d+)$} ? $1 : () } glob("/proc/$pid/task/*");

my $dir = PostgreSQL::Test::Utils::tempdir();
my $trace = "$dir/strace.out";
my ($in, $out, $err) = ('', '', '');
my $st = IPC::Run::start(
	[ 'strace', '-f', '-qq', '-e', 'trace=write,sendmsg,sendto,recvfrom,read',
	  '-o', $trace, '-p', $pid ],
	\$in, \$out, \$err);

# Attached once every thread of the backend names a tracer.
sub traced
{
	for my $task (glob("/proc/$pid/task/*"))
	{
		open(my $fh, '<', "$task/status") or next;
		my ($tracer) = join('', <$fh>) =~ /^TracerPid:\s+(\d+)/m;
		return 0 unless $tracer;
	}
	return 1;
}
my $attached = poll_until(\&traced, 30);
SKIP:
{
	skip "strace could not attach here: $err", 4 unless $attached;

	for my $i (1 .. 5)
	{
		$s->query_safe("SELECT zk_lock('io-1')");
		$s->query_safe("SELECT zk_unlock('io-1')");
	}
	$st->signal('INT');
	$st->finish;

	# strace -f -o: "TID syscall(FD, ...) = RESULT"
	my (%sendmsg, %pipe_writes, %efd_writes, %socket_reads);
	open(my $fh, '<', $trace) or die "no trace: $!";
	while (my $line = <$fh>)
	{
		my ($tid, $call, $args, $rc) =
		  $line =~ /^(\d+)\s+(\w+)\((.*)\)\s+=\s+(-?\d+)/ or next;
		$sendmsg{$tid}++ if $call eq 'sendmsg' && $rc > 0;
		$pipe_writes{$tid}++ if $call eq 'write' && $args =~ /^\d+, "\\0", 1$/;
		$efd_writes{$tid}++ if $call eq 'write' && $args =~ /, 8$/ && $rc == 8;
		$socket_reads{$tid}++ if $call eq 'recvfrom' && $rc > 0;
	}
	close($fh);
	note("sendmsg by thread: " . join(' ', %sendmsg));
	note("wake-up pipe writes by thread: " . join(' ', %pipe_writes));
	note("eventfd writes by thread: " . join(' ', %efd_writes));
	note("socket reads by thread: " . join(' ', %socket_reads));

	# create, listing and delete per cycle: at least 15 requests
	cmp_ok($sendmsg{$pid} // 0, '>=', 15,
		'the main thread writes its requests to the socket itself');
	is($pipe_writes{$pid} // 0, 0,
		'and never wakes the IO thread through its pipe');
	my @wakers = keys %efd_writes;
	ok(@wakers == 1 && $wakers[0] != $pid && $socket_reads{ $wakers[0] },
		'the thread that reads the answers wakes the main thread (no completion thread)');
	is($s->query_safe("SELECT count(*) FROM zk_locks"), '0', 'nothing is left held');
}

$s->quit;

# A session that the ensemble expires ends its IO thread by itself (the
# library's state is unrecoverable).  With no completion thread to hold
# the handle, zklock's close of that session (before the next one opens)
# must still join that thread, or its stack (8 MiB reserved) stays mapped
# for the life of the backend, one more per expiry.  The backend is frozen
# until the ensemble has dropped its session, then resumed; the next
# zk_try_lock opens a new session.  After the first round, the stacks that
# glibc keeps for reuse are warm: the backend's address space must not
# grow by a thread stack per further expiry.
my $x = waiter($east);
$x->query_safe("SET zklock.session_timeout = '1s'");
my $xpid = backend_pid($x);

sub vm_kb
{
	open(my $fh, '<', "/proc/$xpid/status") or return -1;
	my ($kb) = join('', <$fh>) =~ /^VmSize:\s+(\d+) kB/m;
	return $kb // -1;
}

sub threads_of { my @t = glob("/proc/$xpid/task/*"); return scalar @t; }

my (@vm, $expired_all);
$expired_all = 1;
for my $round (1 .. 4)
{
	is($x->query_safe("SELECT zk_try_lock('io-x') AND zk_unlock('io-x')"), 't',
		"round $round: a session is open");
	my $sid = $x->query_safe("SELECT session_id FROM zk_session()");
	my $threads = threads_of();
	kill 'STOP', $xpid;
	my $gone = poll_until(
		sub {
			my $cons = $zk->four_letter(1, 'cons');
			return defined $cons && $cons !~ /sid=\Q$sid\E\b/;
		},
		30);
	kill 'CONT', $xpid;
	# The library hears of the expiry and its IO thread ends.
	my $ended = $gone && poll_until(sub { threads_of() < $threads }, 30);
	$expired_all &&= $ended;
	is($x->query_safe("SELECT zk_try_lock('io-x') AND zk_unlock('io-x')"), 't',
		"round $round: the next call takes the lock");
	isnt($x->query_safe("SELECT session_id FROM zk_session()"), $sid,
		"round $round: on a new session");
	push @vm, vm_kb();
}
ok($expired_all, 'every round the ensemble expired the session and the IO thread ended');
note("VmSize after each round (kB): @vm");
ok(!grep({ $_ <= 0 } @vm), 'VmSize was read every round');
cmp_ok($vm[3] - $vm[1], '<', 8192,
	'the IO threads of expired sessions are joined: no thread stack left behind per expiry');
$x->quit;
done_testing();
