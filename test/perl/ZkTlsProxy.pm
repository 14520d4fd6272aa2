# Copyright (c) zklock contributors
#
# A TLS-terminating proxy on 127.0.0.1 in front of one ZooKeeper TLS
# server: it ends the client's TLS (with a server certificate the client
# trusts) and makes its own connection to the server (with a client
# certificate the server trusts), so that it sees ZooKeeper's frames in the
# clear and chooses how the replies are cut into TLS records.
#
#   my $p = ZkTlsProxy->new($target_port,
#       cert => $server_pem, key => $server_pem,    # what the client sees
#       client_cert => ..., client_key => ...);     # what the server sees
#   $p->port                  the port to connect to
#   $p->mode('pass')          each read from the server written on as it
#                             came (the start state)
#   $p->mode('pair')          replies are held while a request the client
#                             sent is still unanswered, then all written in
#                             one TLS record: a pipeline's replies (a lock's
#                             create and listing) share a record
#   $p->mode('split')         each reply written as two TLS records, back
#                             to back, cut in its middle
#   $p->counts                { records => N, requests => N, paired => N,
#                             split => N } of the connection made last:
#                             the TLS records the client sent (each read of
#                             the client side is one record), its request
#                             frames (the session handshake included), and
#                             the records written with two replies or more,
#                             or with half of one
#   $p->stop                  also done in DESTROY / END
#
# The proxy runs in a child process, and each connection in a child of its
# own, with non-blocking sockets (OpenSSL reads records the application
# never sees, such as TLS 1.3 tickets).  The mode goes through a file that
# every connection reads between two polls (50 ms); mode() waits until the
# listener took it.  Every wait is bounded.

package ZkTlsProxy;

use strict;
use warnings;

use File::Temp ();
use IO::Select;
use IO::Socket::INET;
use IO::Socket::SSL;
use POSIX ();
use Time::HiRes qw(sleep time);
use ZkProxy ();

my @proxies;

sub new
{
	my ($class, $target_port, %opt) = @_;
	my $listen = IO::Socket::INET->new(
		LocalHost => '127.0.0.1',
		LocalPort => 0,
		Listen    => 16,
		ReuseAddr => 1) or die "tls proxy listen: $!";
	my $dir = File::Temp::tempdir('zktlsproxy_XXXXXX', TMPDIR => 1, CLEANUP => 1);
	my $self = bless {
		%opt,
		port   => $listen->sockport,
		target => $target_port,
		dir    => $dir,
		owner  => $$,
	}, $class;
	_write("$dir/mode", 'pass');
	my $pid = fork() // die "fork: $!";
	if ($pid == 0)
	{
		_listen($self, $listen);
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
	die "unknown tls proxy mode $mode" unless $mode =~ /^(?:pass|pair|split)$/;
	_write("$self->{dir}/mode", $mode);
	$self->_wait_ack($mode);
}

sub counts
{
	my ($self) = @_;
	my %c = (records => 0, requests => 0, paired => 0, split => 0);
	for my $line (split /\n/, _read("$self->{dir}/counts"))
	{
		my ($k, $v) = split / /, $line;
		$c{$k} = $v;
	}
	return \%c;
}

sub stop
{
	my ($self) = @_;
	return unless $self->{pid} && $self->{owner} == $$;
	# The listener's process group holds its connections' children.
	kill 'KILL', -$self->{pid};
	kill 'KILL', $self->{pid};
	waitpid($self->{pid}, 0);
	delete $self->{pid};
}

sub DESTROY { $_[0]->stop; }
END { $_->stop for grep { defined } @proxies; }

# The control files are read and written as ZkProxy's are.
*_write = \&ZkProxy::_write;
*_read  = \&ZkProxy::_read;

sub _wait_ack
{
	my ($self, $mode) = @_;
	my $deadline = time + 10;
	while (_read("$self->{dir}/ack") ne $mode)
	{
		die "tls proxy did not take mode $mode" if time > $deadline;
		sleep 0.01;
	}
}

# The listener: acknowledges modes, and hands each connection to a child.
sub _listen
{
	my ($self, $listen) = @_;
	POSIX::setpgid(0, 0);
	$SIG{CHLD} = 'IGNORE';
	my $sel = IO::Select->new($listen);
	while (1)
	{
		my $mode = _read("$self->{dir}/mode");
		_write("$self->{dir}/ack", $mode) if _read("$self->{dir}/ack") ne $mode;
		next unless $sel->can_read(0.05);
		my $c = $listen->accept or next;
		my $pid = fork();
		if (defined $pid && $pid == 0)
		{
			close $listen;
			_connection($self, $c);
			POSIX::_exit(0);
		}
		close $c;
	}
}

# Whole length-prefixed frames from the buffer $$buf, with their prefix.
sub _frames
{
	my ($buf) = @_;
	my @frames;
	while (length($$buf) >= 4)
	{
		my $len = unpack('N', $$buf);
		last if length($$buf) < 4 + $len;
		push @frames, substr($$buf, 0, 4 + $len, '');
	}
	return @frames;
}

# Write all of $data to a non-blocking TLS socket in one SSL_write (one
# record up to 16 kB), retried as OpenSSL asks.
sub _send
{
	my ($s, $data) = @_;
	my $deadline = time + 10;
	while (1)
	{
		my $w = $s->syswrite($data);
		return if defined $w && $w == length $data;
		die "tls proxy: short write" if defined $w;
		die "tls proxy write: $SSL_ERROR" unless $SSL_ERROR == SSL_WANT_WRITE || $SSL_ERROR == SSL_WANT_READ;
		die "tls proxy: write timed out" if time > $deadline;
		IO::Select->new($s)->can_write(0.05);
	}
}

# One client connection: TLS on both sides, then frames forwarded.
sub _connection
{
	my ($self, $c) = @_;
	my $client = IO::Socket::SSL->start_SSL($c,
		SSL_server      => 1,
		SSL_cert_file   => $self->{cert},
		SSL_key_file    => $self->{key},
		SSL_verify_mode => SSL_VERIFY_NONE,
		Timeout         => 10) or return;
	my $server = IO::Socket::SSL->new(
		PeerAddr        => '127.0.0.1',
		PeerPort        => $self->{target},
		SSL_cert_file   => $self->{client_cert},
		SSL_key_file    => $self->{client_key},
		SSL_verify_mode => SSL_VERIFY_NONE,
		Timeout         => 10) or return;
	$_->blocking(0) for $client, $server;
	my %n = (records => 0, requests => 0, paired => 0, split => 0);
	my ($from_client, $from_server) = ('', '');
	my $first_reply = 1;
	my $unanswered = 0;
	my @held;
	my $sel = IO::Select->new($client, $server);
	while (1)
	{
		my $mode = _read("$self->{dir}/mode");
		my @ready = grep { $_->pending } $client, $server;
		@ready = $sel->can_read(0.05) unless @ready;
		my $counted = 0;
		for my $s (@ready)
		{
			my $buf;
			my $r = $s->sysread($buf, 65536);
			if (!defined $r)
			{
				next if $SSL_ERROR == SSL_WANT_READ || $SSL_ERROR == SSL_WANT_WRITE;
				return;
			}
			return if $r == 0;
			if ($s == $client)
			{
				$n{records}++;
				$from_client .= $buf;
				my @f = _frames(\$from_client);
				$n{requests} += @f;
				$unanswered += @f;
				$counted = 1;
				_send($server, $buf);
				next;
			}
			$from_server .= $buf;
			_send($client, $buf) if $mode eq 'pass';
			for my $f (_frames(\$from_server))
			{
				# A notification (xid -1) answers no request; the first
				# frame answers the session handshake.
				my $xid = length($f) >= 8 ? unpack('l>', substr($f, 4, 4)) : 0;
				$unanswered-- if $first_reply || $xid != -1;
				$first_reply = 0;
				next if $mode eq 'pass';
				if ($mode eq 'split' && length($f) >= 2)
				{
					my $half = int(length($f) / 2);
					_send($client, substr($f, 0, $half));
					_send($client, substr($f, $half));
					$n{split}++;
					$counted = 1;
					next;
				}
				push @held, $f;
			}
			if (@held && ($unanswered <= 0 || $mode ne 'pair'))
			{
				$n{paired}++ if @held > 1;
				$counted = 1;
				_send($client, join('', @held));
				@held = ();
			}
		}
		_write("$self->{dir}/counts", join('', map { "$_ $n{$_}\n" } sort keys %n))
		  if $counted;
	}
}

1;
