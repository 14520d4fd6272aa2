# Copyright (c) zklock contributors
#
# A TCP proxy on 127.0.0.1 in front of one ZooKeeper server, whose faults a
# test switches on and off.  Point a backend's zklock.hosts at it to cut
# that backend (and only it) off from the ensemble, or to lose the replies
# to requests the server did carry out.
#
#   my $p = ZkProxy->new($target_port);
#   $p->port                      the port to connect to
#   $p->mode('pass')              forward both ways (the start state)
#   $p->mode('swallow')           forward requests, drop every reply
#   $p->mode('cut')               close every connection, refuse new ones
#   $p->stop                      also done in DESTROY / END
#
# The proxy runs in a child process; the mode goes through a file that it
# reads between two polls (50 ms), and mode() waits until it is taken.

package ZkProxy;

use strict;
use warnings;

use File::Temp ();
use IO::Select;
use IO::Socket::INET;
use Socket ();
use POSIX ();
use Time::HiRes qw(sleep time);

my @proxies;

sub new
{
	my ($class, $target_port) = @_;
	my $listen = IO::Socket::INET->new(
		LocalAddr => '127.0.0.1',
		LocalPort => 0,
		Listen => 64,
		ReuseAddr => 1) or die "proxy listen: $!";
	my $dir = File::Temp::tempdir('zkproxy_XXXXXX', TMPDIR => 1, CLEANUP => 1);
	my $self = bless {
		port => $listen->sockport,
		target => $target_port,
		ctl => "$dir/mode",
		ack => "$dir/ack",
		owner => $$,
	}, $class;
	_write($self->{ctl}, 'pass');
	my $pid = fork() // die "fork: $!";
	if ($pid == 0)
	{
		_run($self, $listen);
		POSIX::_exit(0);
	}
	close $listen;
	$self->{pid} = $pid;
	push @proxies, $self;
	$self->_wait_ack('pass');
	return $self;
}

sub port { return $_[0]->{port}; }

sub mode
{
	my ($self, $mode) = @_;
	die "unknown proxy mode $mode" unless $mode =~ /^(pass|swallow|cut)$/;
	_write($self->{ctl}, $mode);
	$self->_wait_ack($mode);
}

sub stop
{
	my ($self) = @_;
	return unless $self->{pid} && $self->{owner} == $$;
	kill 'KILL', $self->{pid};
	waitpid($self->{pid}, 0);
	delete $self->{pid};
}

sub DESTROY { $_[0]->stop; }
END { $_->stop for grep { defined } @proxies; }

sub _write
{
	my ($file, $text) = @_;
	open(my $fh, '>', "$file.tmp") or die "$file: $!";
	print $fh $text;
	close $fh;
	rename("$file.tmp", $file) or die "rename $file: $!";
}

sub _read
{
	my ($file) = @_;
	open(my $fh, '<', $file) or return '';
	my $t = <$fh> // '';
	return $t;
}

sub _wait_ack
{
	my ($self, $mode) = @_;
	my $deadline = time + 10;
	while (_read($self->{ack}) ne $mode)
	{
		die "proxy did not take mode $mode" if time > $deadline;
		sleep 0.01;
	}
}

# The child: pairs of (client, server) sockets, forwarded per mode.
sub _run
{
	my ($self, $listen) = @_;
	my $sel = IO::Select->new($listen);
	my %peer;    # fileno -> [ socket, its peer socket, is_client ]
	my $mode = 'pass';
	my $close_pair = sub {
		my ($s) = @_;
		my $e = delete $peer{ fileno $s } or return;
		my $other = $e->[1];
		delete $peer{ fileno $other };
		for my $x ($s, $other)
		{
			$sel->remove($x);
			# Abortive close, as a crashed peer or a cut network would be.
			setsockopt($x, Socket::SOL_SOCKET(), Socket::SO_LINGER(), pack('ii', 1, 0));
			close $x;
		}
	};
	while (1)
	{
		my $want = _read($self->{ctl});
		if ($want ne $mode && $want =~ /^(pass|swallow|cut)$/)
		{
			$mode = $want;
			if ($mode eq 'cut')
			{
				$close_pair->($_->[0]) for grep { $_->[2] } values %peer;
			}
			_write($self->{ack}, $mode);
		}
		elsif (_read($self->{ack}) ne $mode)
		{
			_write($self->{ack}, $mode);
		}
		for my $s ($sel->can_read(0.05))
		{
			if ($s == $listen)
			{
				my $c = $listen->accept or next;
				if ($mode eq 'cut')
				{
					close $c;
					next;
				}
				my $srv = IO::Socket::INET->new(
					PeerAddr => '127.0.0.1',
					PeerPort => $self->{target},
					Timeout => 2);
				if (!$srv)
				{
					close $c;
					next;
				}
				$peer{ fileno $c } = [ $c, $srv, 1 ];
				$peer{ fileno $srv } = [ $srv, $c, 0 ];
				$sel->add($c, $srv);
				next;
			}
			my $e = $peer{ fileno $s } or next;
			my $buf;
			my $n = sysread($s, $buf, 65536);
			if (!$n)
			{
				$close_pair->($s);
				next;
			}
			next if $mode eq 'cut';
			next if $mode eq 'swallow' && !$e->[2];    # a reply: drop it
			my $off = 0;
			while ($off < $n)
			{
				my $w = syswrite($e->[1], $buf, $n - $off, $off);
				last unless $w;
				$off += $w;
			}
		}
	}
}

1;
