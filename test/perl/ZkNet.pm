# Copyright (c) zklock contributors
#
# A network of its own for a test: every node (a ZooKeeper server, a
# PostgreSQL cluster, the test itself) in a network namespace of its own,
# each linked by a veth pair to one router namespace, addresses only inside
# those namespaces (10.83.K.2 for node K, its router side 10.83.K.1), so
# nothing reaches or leaves the machine's own network.  Partitions are
# policy rules of type blackhole in the router: the router drops a cut
# pair's packets silently (no RST, no ICMP unreachable), so a connection
# across a cut hangs, as on a real network, rather than being refused.
#
#   ZkNet::unavailable()          '' or why this process cannot build one
#                                 (it needs CAP_SYS_ADMIN and CAP_NET_ADMIN:
#                                 test/checker.sh and make test run the
#                                 checker as postgres with those two)
#   my $net = ZkNet->new(nodes => ['zk1', 'c0', 'ctl'])
#   $net->addr('zk1')             the node's address
#   $net->enter('ctl')            move this process into the node's namespace
#   $net->in('c0', sub { ... })   run code with this process in the node's
#                                 namespace (what it forks stays there),
#                                 then come back
#   $net->join_child('zk1')       in a child before exec: move into it
#   $net->cut([qw(zk1 c0)], [qw(zk2 zk3 ctl)])
#                                 drop every packet between a node of the
#                                 first list and one of the second, both ways
#   $net->heal                    lift every cut
#   $net->probe('c0', $addr, $port, $secs)
#                                 a TCP connect from the node's namespace:
#                                 'connected', 'refused', 'hangs' or 'error: ...'
#   $net->stop                    back to the namespace this process
#                                 started in, and kill the holders (also
#                                 done at exit); returns the processes
#                                 still in one of the namespaces (none when
#                                 the caller stopped what it started)
#
# A namespace lives while its holder (a "sleep" started here, killed by PID
# in stop, and by the kernel when this process dies: PR_SET_PDEATHSIG) or a
# process started inside it runs; the caller stops what it started inside.
# Linux on x86_64 only (the system calls are made by number).

package ZkNet;

use strict;
use warnings;

use Config;
use File::Temp ();
use IO::Socket::INET;
use POSIX ();
use Time::HiRes qw(sleep time);

my %SYS = (setns => 308, unshare => 272, prctl => 157);
my $CLONE_NEWNET = 0x40000000;
my $PR_SET_PDEATHSIG = 1;
my ($CAP_NET_ADMIN, $CAP_SYS_ADMIN) = (12, 21);
my $RULE_PRIO = 100;
my @nets;

sub _ip
{
	for my $d (qw(/usr/sbin /sbin /usr/bin /bin))
	{
		return "$d/ip" if -x "$d/ip";
	}
	return undef;
}

sub unavailable
{
	return "network namespaces need Linux on x86_64, not $Config{archname}"
	  unless $^O eq 'linux' && $Config{archname} =~ /^x86_64/;
	return 'no ip command (iproute2)' unless _ip();
	open(my $fh, '<', '/proc/self/status') or return "/proc/self/status: $!";
	my ($eff) = map { /^CapEff:\s*([0-9a-f]+)/ ? hex($1) : () } <$fh>;
	close $fh;
	for ([ $CAP_SYS_ADMIN, 'CAP_SYS_ADMIN' ], [ $CAP_NET_ADMIN, 'CAP_NET_ADMIN' ])
	{
		return "this process lacks $_->[1] (run it as root, or as test/checker.sh does)"
		  unless defined $eff && ($eff >> $_->[0]) & 1;
	}
	return '';
}

sub new
{
	my ($class, %args) = @_;
	my $why = unavailable();
	die "ZkNet: $why\n" if $why;
	my $self = bless {
		owner   => $$,
		holders => {},
		addr    => {},
		rules   => [],
		dir     => File::Temp::tempdir('zknet_XXXXXX', TMPDIR => 1, CLEANUP => 1),
	}, $class;
	open($self->{home}, '<', '/proc/self/ns/net') or die "ZkNet: own namespace: $!\n";
	push @nets, $self;
	$self->{router} = $self->_holder('router');
	$self->_write_in('router', '/proc/sys/net/ipv4/ip_forward', "1\n");
	my $k = 0;
	for my $node (@{ $args{nodes} })
	{
		$k++;
		die "ZkNet: too many nodes\n" if $k > 250;
		$self->{holders}{$node} = $self->_holder($node);
		$self->{addr}{$node} = "10.83.$k.2";
		$self->_ip_cmd(undef, 'link', 'add', "n$k", 'netns', $self->{router},
			'type', 'veth', 'peer', 'name', 'e0', 'netns', $self->{holders}{$node});
		$self->_ip_batch('router', "addr add 10.83.$k.1/24 dev n$k", "link set n$k up");
		$self->_ip_batch($node, "addr add 10.83.$k.2/24 dev e0", 'link set e0 up',
			"route add default via 10.83.$k.1");
	}
	return $self;
}

sub addr { return $_[0]->{addr}{ $_[1] } // die "ZkNet: no node $_[1]\n"; }
sub nodes { return sort keys %{ $_[0]->{holders} }; }

sub _ns_file
{
	my ($self, $node) = @_;
	my $pid = $node eq 'router' ? $self->{router} : $self->{holders}{$node};
	die "ZkNet: no node $node\n" unless $pid;
	return "/proc/$pid/ns/net";
}

sub _setns_file
{
	my ($file) = @_;
	open(my $fh, '<', $file) or die "ZkNet: $file: $!\n";
	syscall($SYS{setns}, fileno($fh), $CLONE_NEWNET) == 0
	  or die "ZkNet: setns $file: $!\n";
	close $fh;
	return;
}

sub enter { my ($self, $node) = @_; _setns_file($self->_ns_file($node)); return; }
sub join_child { my ($self, $node) = @_; _setns_file($self->_ns_file($node)); return; }

sub in
{
	my ($self, $node, $code) = @_;
	open(my $home, '<', '/proc/self/ns/net') or die "ZkNet: own namespace: $!\n";
	$self->enter($node);
	my @r = eval { $code->() };
	my $err = $@;
	syscall($SYS{setns}, fileno($home), $CLONE_NEWNET) == 0
	  or die "ZkNet: could not come back: $!\n";
	close $home;
	die $err if $err;
	return wantarray ? @r : $r[0];
}

# A process that holds a new namespace with its loopback up, killed with
# this process.
sub _holder
{
	my ($self, $name) = @_;
	pipe(my $r, my $w) or die "ZkNet: pipe: $!\n";
	my $pid = fork() // die "ZkNet: fork: $!\n";
	if ($pid == 0)
	{
		close $r;
		$SIG{$_} = 'DEFAULT' for qw(INT TERM HUP);
		my $ok = syscall($SYS{prctl}, $PR_SET_PDEATHSIG, 9, 0, 0, 0) == 0
		  && syscall($SYS{unshare}, $CLONE_NEWNET) == 0
		  && system(_ip(), 'link', 'set', 'lo', 'up') == 0;
		print $w($ok ? "ok\n" : "failed: $!\n");
		close $w;
		exec('sleep', 'infinity') if $ok;
		POSIX::_exit(1);
	}
	close $w;
	my $line = <$r> // 'no answer';
	close $r;
	die "ZkNet: namespace $name: $line\n" unless $line eq "ok\n";
	return $pid;
}

# Run a command in a node's namespace (undef: this one); die when it fails.
sub _run_in
{
	my ($self, $node, @cmd) = @_;
	my $file = defined $node ? $self->_ns_file($node) : undef;
	my $pid = fork() // die "ZkNet: fork: $!\n";
	if ($pid == 0)
	{
		eval { _setns_file($file) if $file; exec { $cmd[0] } @cmd; };
		print STDERR "ZkNet: @cmd: $@ $!\n";
		POSIX::_exit(127);
	}
	waitpid($pid, 0);
	die "ZkNet: '@cmd' in " . ($node // 'here') . " failed ($?)\n" if $?;
	return;
}

sub _ip_cmd { my ($self, $node, @args) = @_; $self->_run_in($node, _ip(), @args); return; }

sub _ip_batch
{
	my ($self, $node, @lines) = @_;
	return unless @lines;
	my $f = "$self->{dir}/batch";
	open(my $fh, '>', $f) or die "ZkNet: $f: $!\n";
	print $fh map { "$_\n" } @lines;
	close $fh;
	$self->_run_in($node, _ip(), '-batch', $f);
	return;
}

sub _write_in
{
	my ($self, $node, $path, $text) = @_;
	my $file = $self->_ns_file($node);
	my $pid = fork() // die "ZkNet: fork: $!\n";
	if ($pid == 0)
	{
		my $ok = eval {
			_setns_file($file);
			open(my $fh, '>', $path) or die "$path: $!\n";
			print $fh $text;
			close $fh or die "$path: $!\n";
			1;
		};
		print STDERR "ZkNet: $@" unless $ok;
		POSIX::_exit($ok ? 0 : 1);
	}
	waitpid($pid, 0);
	die "ZkNet: could not write $path in $node\n" if $?;
	return;
}

sub cut
{
	my ($self, $side_a, $side_b) = @_;
	my @rules;
	for my $x (@$side_a)
	{
		for my $y (@$side_b)
		{
			next if $x eq $y;
			my ($ax, $ay) = ($self->addr($x), $self->addr($y));
			push @rules, "from $ax to $ay blackhole prio $RULE_PRIO",
			  "from $ay to $ax blackhole prio $RULE_PRIO";
		}
	}
	$self->_ip_batch('router', map { "rule add $_" } @rules);
	push @{ $self->{rules} }, @rules;
	return;
}

sub heal
{
	my ($self) = @_;
	my @rules = @{ $self->{rules} };
	$self->{rules} = [];
	$self->_ip_batch('router', map { "rule del $_" } @rules);
	return;
}

sub probe
{
	my ($self, $node, $addr, $port, $secs) = @_;
	my $file = $self->_ns_file($node);
	my $pid = fork() // die "ZkNet: fork: $!\n";
	if ($pid == 0)
	{
		my $code = 3;
		eval {
			_setns_file($file);
			my $s = IO::Socket::INET->new(PeerAddr => $addr, PeerPort => $port,
				Proto => 'tcp', Timeout => $secs);
			$code = $s ? 0 : $!{ECONNREFUSED} ? 1 : ($!{ETIMEDOUT} || $!{EINPROGRESS} || $@ =~ /timeout/i) ? 2 : 3;
		};
		POSIX::_exit($code);
	}
	waitpid($pid, 0);
	my $c = $? >> 8;
	return $c == 0 ? 'connected' : $c == 1 ? 'refused' : $c == 2 ? 'hangs' : "error: $?";
}

# Kill every holder by PID; a namespace goes with the last process in it.
sub stop
{
	my ($self) = @_;
	return unless $$ == $self->{owner} && $self->{home};
	syscall($SYS{setns}, fileno($self->{home}), $CLONE_NEWNET);
	close $self->{home};
	$self->{home} = undef;
	my @pids = grep { defined } ($self->{router}, values %{ $self->{holders} });
	my %ns = map { (readlink("/proc/$_/ns/net") // '') => 1 } @pids;
	delete $ns{''};
	kill 'KILL', @pids;
	waitpid($_, 0) for @pids;
	$self->{router} = undef;
	$self->{holders} = {};
	my @inside;
	for my $d (glob('/proc/[0-9]*'))
	{
		my $l = readlink("$d/ns/net") // next;
		next unless $ns{$l};
		open(my $fh, '<', "$d/comm") or next;
		chomp(my $comm = <$fh> // '?');
		push @inside, substr($d, 6) . " ($comm)";
	}
	return @inside;
}

END
{
	local $?;
	$_->stop for grep { defined } @nets;
}

1;
