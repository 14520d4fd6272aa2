# Copyright (c) zklock contributors
#
# A TCP proxy on 127.0.0.1 in front of one ZooKeeper server, whose faults a
# test switches on and off.  Point a backend's zklock.hosts at it to cut
# that backend (and only it) off from the ensemble, or to lose the replies
# to requests the server did carry out.
#
#   my $p = ZkProxy->new($target_port);
#   ZkProxy->new($target_port, listen => '::1', port => 2181)
#                                 on that address and port (undef when
#                                 they cannot be had)
#   ZkProxy->new($target_port, target_host => '10.83.1.2')
#                                 to a server on that address (default
#                                 127.0.0.1)
#   $p->port                      the port to connect to
#   $p->mode('pass')              forward both ways (the start state)
#   $p->mode('swallow')           forward requests, drop every reply
#   $p->mode('stall')             drop every reply on the connections open
#                                 now (forward their requests); newer
#                                 connections pass both ways
#   $p->mode('cut')               close every connection, refuse new ones
#   $p->mode('delay:MS')          forward both ways, each reply held MS ms
#   $p->mode('lag:MS')            forward both ways, each request held MS
#                                 ms on its way to the server (replies
#                                 pass at once)
#   $p->mode('hold:MS')           the same as delay, but replies that came within
#                                 50 ms of the first one due go together,
#                                 so that a client sees a pipeline's
#                                 answers at once (for counting turns)
#   $p->requests('list')          requests of that kind seen so far (list,
#                                 create, delete, get, exists, ping, ...)
#   $p->connections               connections accepted and forwarded so far
#   $p->turns                     round trips so far: requests (pings and
#                                 auth aside) sent after a reply came back
#                                 since the previous one; with 'hold:MS'
#                                 a client's pipeline counts as one
#   $p->stop                      also done in DESTROY / END
#
# The proxy runs in a child process; the mode goes through a file that it
# reads between two polls (50 ms, 5 ms while replies are held), and mode()
# waits until it is taken.  Requests are counted by their opcode (the
# client's byte stream is split into ZooKeeper's length-prefixed frames;
# the first frame of a connection is the session handshake).

package ZkProxy;

use strict;
use warnings;

use File::Temp ();
use IO::Select;
use IO::Socket::INET;
use IO::Socket::IP;
use Socket ();
use POSIX ();
use Time::HiRes qw(sleep time);

my @proxies;

sub new
{
	my ($class, $target_port, %opt) = @_;
	# listen => '::1' (an IPv6 address), port => N (else any free port);
	# undef if that address and port cannot be had.
	my $listen = IO::Socket::IP->new(
		LocalHost => $opt{listen} // '127.0.0.1',
		LocalPort => $opt{port} // 0,
		Listen => 64,
		ReuseAddr => 1);
	if (!$listen)
	{
		return undef if defined $opt{listen} || defined $opt{port};
		die "proxy listen: $!";
	}
	my $dir = File::Temp::tempdir('zkproxy_XXXXXX', TMPDIR => 1, CLEANUP => 1);
	my $self = bless {
		port => $listen->sockport,
		target => $target_port,
		target_host => $opt{target_host} // '127.0.0.1',
		ctl => "$dir/mode",
		ack => "$dir/ack",
		counts => "$dir/counts",
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
	die "unknown proxy mode $mode" unless $mode =~ /^(pass|swallow|stall|cut|(?:delay|hold|lag):\d+)$/;
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

# ZooKeeper's request opcodes, by the names the tests use.
my %OPCODE = (
	create => 1, delete => 2, exists => 3, get => 4, set => 5,
	get_acl => 6, set_acl => 7, list => 8, sync => 9, ping => 11,
	list2 => 12, check => 13, multi => 14, create2 => 15,
	remove_watches => 18, create_container => 19, close => -11,
	auth => 100, set_watches => 101, set_watches2 => 105);

sub turns
{
	my ($self) = @_;
	for my $line (split /\n/, _read($self->{counts}))
	{
		my ($o, $n) = split / /, $line;
		return $n if $o eq 'turns';
	}
	return 0;
}

sub connections
{
	my ($self) = @_;
	for my $line (split /\n/, _read($self->{counts}))
	{
		my ($o, $n) = split / /, $line;
		return $n if $o eq 'connections';
	}
	return 0;
}

sub requests
{
	my ($self, $kind) = @_;
	my $op = $OPCODE{$kind} // die "unknown request kind $kind";
	for my $line (split /\n/, _read($self->{counts}))
	{
		my ($o, $n) = split / /, $line;
		return $n if $o eq $op;
	}
	return 0;
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
	local $/;
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

# The whole length-prefixed frames that $data completes in the stream
# buffered at $e->{$key}, but the first of the stream (the handshake, or
# its answer), which $e->{"$key.greeted"} records as seen.
sub _frames
{
	my ($e, $key, $data) = @_;
	my @frames;
	$e->{$key} .= $data;
	while (length($e->{$key}) >= 4)
	{
		my $len = unpack('N', $e->{$key});
		last if length($e->{$key}) < 4 + $len;
		my $frame = substr($e->{$key}, 4, $len);
		substr($e->{$key}, 0, 4 + $len) = '';
		if ($e->{"$key.greeted"}++)
		{
			push @frames, $frame;
		}
	}
	return @frames;
}

# Count the request frames in a client's stream by opcode; a request
# (pings and auth aside) after a reply begins a round trip.
sub _count_frames
{
	my ($e, $data, $counts) = @_;
	my $changed = 0;
	for my $frame (_frames($e, 'in', $data))
	{
		next if length($frame) < 8;
		my (undef, $op) = unpack('l> l>', $frame);
		$counts->{$op}++;
		$changed = 1;
		next if $op == 11 || $op == 100;
		$counts->{turns}++ if $e->{replied} // 1;
		$e->{replied} = 0;
	}
	return $changed;
}

# Note the replies in a server's stream on their way to the client entry
# $ce: a reply to a request (not a ping's, not a notification) ends a
# round trip.
sub _note_replies
{
	my ($ce, $data) = @_;
	for my $frame (_frames($ce, 'rin', $data))
	{
		next if length($frame) < 4;
		$ce->{replied} = 1 if unpack('l>', $frame) >= 0;
	}
}

# The child: pairs of (client, server) sockets, forwarded per mode.
sub _run
{
	my ($self, $listen) = @_;
	my $sel = IO::Select->new($listen);
	my %peer;    # fileno -> { s => socket, to => its peer, client => bool }
	my %counts;  # opcode -> requests seen
	my @held;    # [ due time, destination entry, data, request? ]: held data
	my $mode = 'pass';
	my $close_pair = sub {
		my ($s) = @_;
		my $e = delete $peer{ fileno $s } or return;
		my $other = $e->{to};
		delete $peer{ fileno $other };
		@held = grep { $_->[1]{s} != $s && $_->[1]{s} != $other } @held;
		for my $x ($s, $other)
		{
			$sel->remove($x);
			# Abortive close, as a crashed peer or a cut network would be.
			setsockopt($x, Socket::SOL_SOCKET(), Socket::SO_LINGER(), pack('ii', 1, 0));
			close $x;
		}
	};
	my $send = sub {
		my ($s, $buf) = @_;
		my $off = 0;
		while ($off < length $buf)
		{
			my $w = syswrite($s, $buf, length($buf) - $off, $off);
			last unless $w;
			$off += $w;
		}
	};
	while (1)
	{
		my $want = _read($self->{ctl});
		if ($want ne $mode && $want =~ /^(pass|swallow|stall|cut|(?:delay|hold|lag):\d+)$/)
		{
			$mode = $want;
			$_->{stalled} = 1 for $mode eq 'stall' ? values %peer : ();
			if ($mode eq 'cut')
			{
				$close_pair->($_->{s}) for grep { $_->{client} } values %peer;
			}
			_write($self->{ack}, $mode);
		}
		elsif (_read($self->{ack}) ne $mode)
		{
			_write($self->{ack}, $mode);
		}
		my $delay = $mode =~ /^(?:delay|hold|lag):(\d+)$/ ? $1 / 1000 : 0;
		# Replies whose time has come (and all of them once no longer
		# delaying); holding, those due within 50 ms of the first go too.
		my $until = time;
		$until = $held[0][0] + 0.05 if @held && $held[0][0] <= time && $mode =~ /^hold:/;
		while (@held && ($held[0][0] <= $until || !$delay))
		{
			my $h = shift @held;
			_note_replies($h->[1], $h->[2]) unless $h->[3];
			$send->($h->[1]{s}, $h->[2]);
		}
		my $wait = @held ? ($held[0][0] - time) : 0.05;
		$wait = 0.005 if $wait > 0.005 && @held;
		$wait = 0 if $wait < 0;
		my $counted = 0;
		for my $s ($sel->can_read($wait))
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
					PeerAddr => $self->{target_host},
					PeerPort => $self->{target},
					Timeout => 2);
				if (!$srv)
				{
					close $c;
					next;
				}
				my $ce = { s => $c, client => 1 };
				my $se = { s => $srv, client => 0 };
				$ce->{to} = $srv;
				$se->{to} = $c;
				$ce->{peer} = $se;
				$se->{peer} = $ce;
				$peer{ fileno $c } = $ce;
				$peer{ fileno $srv } = $se;
				$sel->add($c, $srv);
				$counts{connections}++;
				$counted = 1;
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
			if ($e->{client})
			{
				$counted |= _count_frames($e, $buf, \%counts);
				if ($mode =~ /^lag:/)
				{
					my $due = time + $delay;
					$due = $held[-1][0] if @held && $held[-1][0] > $due;
					push @held, [ $due, $e->{peer}, $buf, 1 ];
					next;
				}
				$send->($e->{to}, $buf);
				next;
			}
			next if $mode eq 'swallow' || $e->{stalled};    # a reply: drop it
			if ($delay && $mode !~ /^lag:/)
			{
				my $due = time + $delay;
				$due = $held[-1][0] if @held && $held[-1][0] > $due;
				push @held, [ $due, $e->{peer}, $buf ];
				next;
			}
			_note_replies($e->{peer}, $buf);
			$send->($e->{to}, $buf);
		}
		_write($self->{counts}, join('', map { "$_ $counts{$_}\n" } sort keys %counts))
		  if $counted;
	}
}

1;
