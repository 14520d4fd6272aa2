# Copyright (c) zklock contributors
#
# A program a backend starts (COPY ... FROM PROGRAM, as superuser) must not
# inherit the descriptors of the backend's ZooKeeper session: the client
# library's socket and the pipe that wakes its IO thread.  A child holding
# them keeps the connection open after the backend closed it, and can
# write to the session's socket.  The client is built with
# WANT_SOCK_CLOEXEC and patch 0014 (the pipe); without them the child of
# COPY holds the socket and both ends of the pipe.  The descriptors are matched
# by what they are (socket:[inode], pipe:[inode]), as /proc shows them.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";

use PostgreSQL::Test::Utils;
use Test::More;
use ZkEnsemble;
use ZklockTest;

my $zk = ZkEnsemble->new(servers => 1);
my $node = zk_cluster('cloexec', $zk);
my $s = waiter($node);
my $pid = backend_pid($s);

# fd number => target, for sockets and pipes of process $pid.
sub sockets_and_pipes
{
	my ($pid) = @_;
	my %fds;
	for my $path (glob("/proc/$pid/fd/*"))
	{
		my $target = readlink($path) // next;
		my ($fd) = $path =~ m{/(\d+)$};
		$fds{$fd} = $target if defined $fd && $target =~ /^(?:socket|pipe):/;
	}
	return %fds;
}

my %before = sockets_and_pipes($pid);
is($s->query_safe("SELECT zk_try_lock('cloexec-1')"), 't', 'the session is open');
my %after = sockets_and_pipes($pid);
# target => its descriptors (a pipe's two ends share one inode)
my %library;
push @{ $library{ $after{$_} } }, $_ for grep { !exists $before{$_} } sort keys %after;
my @kinds = sort map { /^(\w+):/ ? $1 : () } keys %library;
note("the session's new descriptors: "
	  . join(', ', map { "@{ $library{$_} } -> $_" } sort keys %library));
ok((grep { $_ eq 'socket' } @kinds) && (grep { $_ eq 'pipe' } @kinds),
	'the session opened a socket and a pipe in the backend');

# The child lists its own descriptors ("... N -> target" per line).
$s->query_safe('CREATE TEMP TABLE fds (line text)');
$s->query_safe(q{COPY fds FROM PROGRAM 'ls -l /proc/self/fd/'});
my @lines = split /\n/, $s->query_safe('SELECT line FROM fds');
my @child = map { / -> (\S+)$/ ? $1 : () } @lines;
cmp_ok(scalar(@child), '>=', 3, 'the child listed its descriptors');
my %seen;
my @inherited = grep { exists $library{$_} && !$seen{$_}++ } @child;
is(join(', ', map { "@{ $library{$_} } -> $_" } @inherited), '',
	'the child holds none of the session\'s sockets and pipes');

is($s->query_safe("SELECT zk_unlock('cloexec-1')"), 't', 'the session still works');
$s->quit;
done_testing();
