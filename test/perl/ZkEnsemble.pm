
# Copyright (c) zklock contributors

=pod

=head1 NAME

ZkEnsemble - start a real Apache ZooKeeper ensemble for tests and demos

=head1 SYNOPSIS

  use ZkEnsemble;

  my $zk = ZkEnsemble->new(servers => 3);    # starts and waits for a quorum
  my $cs = $zk->connect_string;             # "127.0.0.1:p1,127.0.0.1:p2,..."
  my $l  = $zk->leader;
  $zk->kill_server($l);
  $zk->wait_for_quorum(30) or die "no new leader";
  $zk->restart_server($l);
  $zk->stop;                                # also done in END

=head1 DESCRIPTION

Modelled on PostgreSQL's src/test/ldap/LdapServer.pm: run an external server
from the distribution's packages on free loopback ports, and make sure it is
gone when the test ends.  Uses Debian's zookeeper jars and only core Perl
modules, so shell scripts can use it through test/zk_ensemble.pl without the
PostgreSQL test modules.

Two server lines: 3.8 (the default), Debian 12's 3.8.0 in /usr/share/java;
and 3.9, Debian trixie's 3.9.3, whose jars test/zk39.sh unpacks under
$ZKLOCK_PG_CACHE/zk39 (default /var/cache/zklock) and which runs on
bookworm's libraries.  The environment variable ZKLOCK_ZK_SERVER (3.8 or
3.9) chooses the line for every ensemble a process starts; the
server_line argument of new overrides it.  Once the servers serve, each
one's C<srvr> version must be of that line, or start dies; under
Test::More it notes the version that serves ("# ZkEnsemble: ZooKeeper
3.9.3 ...").  ZK_CLASSPATH replaces the line's class path (the version
check still applies).

Each server runs in its own session (setsid), so signals go to the process
group, and every signal is sent only to a PID this module recorded, after
checking that the process still runs our configuration file.

=cut

package ZkEnsemble;

use strict;
use warnings;

use Carp;
use Fcntl qw(O_CREAT O_RDONLY :flock);
use File::Basename ();
use File::Copy ();
use File::Path qw(make_path);
use File::Spec;
use File::Temp ();
use IO::Select;
use IO::Socket::INET;
use JSON::PP;
use POSIX ();
use Scalar::Util qw(weaken);
use Test::Builder ();
use Time::HiRes qw(sleep time);

our $VERSION = '1.0';

my $JAVA = $ENV{ZK_JAVA} || 'java';
my $MAIN_STANDALONE = 'org.apache.zookeeper.server.ZooKeeperServerMain';
my $MAIN_QUORUM     = 'org.apache.zookeeper.server.quorum.QuorumPeerMain';

# Ports are drawn below Linux's ephemeral range (32768-60999) and below the
# range PostgreSQL's TAP framework uses for its clusters (49152-65535).
my ($PORT_MIN, $PORT_MAX) = (15000, 32000);

# zoo.cfg turns unknown keys into "zookeeper.<key>" system properties, but
# the container manager reads these without the prefix: pass them as -D.
my %JVM_PROPERTY_KEYS = map { $_ => 1 } qw(
  znode.container.checkIntervalMs
  znode.container.maxPerMinute
  znode.container.maxNeverUsedIntervalMs
);

# Ensembles started by this process (weak refs, so DESTROY still runs).
my @ensembles;
my %ports_in_use;

=pod

=head1 METHODS

=over

=item ZkEnsemble->new(%args)

Arguments: servers (default 3; 1 runs standalone), basedir (default: a temporary
directory removed at exit), tick_time (ms, default 200), extra_conf
(hashref of extra zoo.cfg lines; znode.container.* keys become JVM
properties), jvm_opts (string, appended to the JVM options), start (default
1), start_timeout (s, default 60).

tls (hashref: keystore, truststore, client_cert, client_key): the servers
serve only a secure client port (Netty, PEM stores, client certificates
required, ZooKeeper's x509 authentication provider) on the port that
connect_string and port name; four-letter words then go over TLS with
client_cert and client_key (IO::Socket::SSL).  With plain_too => 1 as well,
each server also serves a plain client port, by the same Netty code
(plain_connect_string names them): the benchmark's fair comparison of TLS
and plain on the same servers.

sasl (hashref: users, a hashref of user name => password; enforce,
default 1): the servers authenticate clients with SASL DIGEST-MD5 (a JAAS
file of their own with a Server section of DigestLoginModule and those
users, ZooKeeper's SASL authentication provider); with enforce, they admit
no session that has not authenticated with SASL (enforce.auth.enabled,
enforce.auth.schemes=sasl).  With kerberos (hashref: keytab, principal,
krb5_conf; ZkKdc), the Server section logs in to that principal with
Krb5LoginModule instead, for GSSAPI (the KDC must be up first), and the
servers name a client by its principal's bare user name
(kerberos.removeHostFromPrincipal, kerberos.removeRealmFromPrincipal).

server_line: '3.8' or '3.9' (default: $ENV{ZKLOCK_ZK_SERVER}, else '3.8').

address: a code ref giving server $i's address (default 127.0.0.1 for
all), which its ports bind and the connect string names; spawn_hook: a code
ref called with $i in the forked child just before the server's exec (for
ZkNet: the server's own network namespace).

=cut

sub new
{
	my ($class, %args) = @_;
	my $n = $args{servers} // 3;
	croak "servers must be a positive integer" unless $n =~ /^[1-9]\d*$/;
	my $basedir = $args{basedir};
	if (defined $basedir)
	{
		make_path($basedir) unless -d $basedir;
		$basedir = File::Spec->rel2abs($basedir);
	}
	else
	{
		$basedir = File::Temp::tempdir('zkensemble_XXXXXX',
			TMPDIR => 1, CLEANUP => 1);
	}

	my $line = $args{server_line} || $ENV{ZKLOCK_ZK_SERVER} || '3.8';
	my $self = bless {
		n             => $n,
		basedir       => $basedir,
		server_line   => $line,
		classpath     => _server_classpath($line),
		tick_time     => $args{tick_time} // 200,
		extra_conf    => { %{ $args{extra_conf} // {} } },
		jvm_opts      => $args{jvm_opts} // '',
		tls           => $args{tls},
		sasl          => $args{sasl},
		plain_too     => $args{tls} && $args{plain_too} ? 1 : 0,
		address       => $args{address},
		spawn_hook    => $args{spawn_hook},
		start_timeout => $args{start_timeout} // 60,
		owner_pid     => $$,    # only this process may auto-stop them
		detached      => 0,
		servers       => [],
		reservations  => [],
	}, $class;

	$self->_allocate_ports;
	$self->_write_jaas if $self->{sasl};
	$self->_write_config($_) for 1 .. $n;

	push @ensembles, $self;
	weaken($ensembles[-1]);
	_install_signal_handlers();

	$self->start unless defined $args{start} && !$args{start};
	return $self;
}

=pod

=item $zk->start

Start every server that is not running and wait until all answer and (for a
quorum) exactly one is leader, the others followers.  Dies with the tail of
the server logs on failure, or when a server's version is not of the line
asked for.

=cut

sub start
{
	my ($self) = @_;
	for my $i (1 .. $self->{n})
	{
		$self->_spawn($i) unless $self->_alive($i);
	}
	my $ok = $self->_wait_until(
		$self->{start_timeout},
		sub {
			for my $i (1 .. $self->{n})
			{
				return 0 unless $self->_alive($i);
				my $r = $self->four_letter($i, 'ruok');
				return 0 unless defined $r && $r eq 'imok';
			}
			return $self->_quorum_ok;
		});
	$self->_die_with_logs("ZooKeeper ensemble did not come up within "
		  . "$self->{start_timeout} s")
	  unless $ok;
	$self->_check_line($_) for 1 .. $self->{n};
	_note("ZkEnsemble: ZooKeeper $self->{version} (line $self->{server_line}"
		  . ($ENV{ZK_CLASSPATH} ? ', ZK_CLASSPATH' : '') . "), "
		  . "$self->{n} server" . ($self->{n} > 1 ? 's' : '')
		  . ($self->{tls} ? ', TLS' : '') . ": " . $self->connect_string);
	return 1;
}

=pod

=item $zk->connect_string, $zk->port($i), $zk->server_count

Connect string "127.0.0.1:p1,..." (or the address option's addresses),
the client port of server $i (1..N), the number of servers.  Also: $zk->server_line ('3.8' or '3.9'),
$zk->server_version (what the servers' srvr said, e.g. '3.9.3'; undef
before start), $zk->basedir, $zk->pid($i) (undef once this
process reaped it), $zk->log_file($i), $zk->log_tail($i, $lines),
$zk->is_running($i), $zk->is_paused($i).

=cut

sub connect_string
{
	my ($self) = @_;
	return join ',',
	  map { $self->_addr($_) . ":$self->{servers}[$_]{client_port}" } 1 .. $self->{n};
}

sub port          { return $_[0]->_srv($_[1])->{client_port}; }

# The plain client ports of a TLS ensemble started with plain_too.
sub plain_connect_string
{
	my ($self) = @_;
	croak 'plain_connect_string: the ensemble has no plain ports'
	  unless $self->{plain_too};
	return join ',',
	  map { $self->_addr($_) . ":$self->{servers}[$_]{plain_port}" } 1 .. $self->{n};
}

sub server_count  { return $_[0]->{n}; }
sub server_line   { return $_[0]->{server_line}; }
sub server_version { return $_[0]->{version}; }
sub basedir       { return $_[0]->{basedir}; }
sub pid           { return $_[0]->_srv($_[1])->{pid}; }
sub log_file      { return $_[0]->_srv($_[1])->{log}; }
sub is_paused     { return $_[0]->_srv($_[1])->{paused} ? 1 : 0; }
sub is_running    { return $_[0]->_alive($_[1]) ? 1 : 0; }

sub log_tail
{
	my ($self, $i, $lines) = @_;
	$lines //= 30;
	open my $fh, '<', $self->_srv($i)->{log} or return '';
	my @all = <$fh>;
	close $fh;
	splice @all, 0, @all - $lines if @all > $lines;
	return join '', @all;
}

=pod

=item $zk->four_letter($i, $cmd [, $timeout_s])

Send a four-letter word to server $i and return its reply, or undef when the
server does not answer within the timeout (default 2 s).

=cut

sub four_letter
{
	my ($self, $i, $cmd, $timeout) = @_;
	$timeout //= 2;
	my $deadline = time + $timeout;
	my $sock = $self->_connect($i, $timeout) or return undef;
	# A stopped server still completes the TCP handshake (the kernel does),
	# so the timeout that matters is the one on the reply.
	unless (defined syswrite($sock, $cmd))
	{
		close $sock;
		return undef;
	}
	my $sel = IO::Select->new($sock);
	my ($reply, $eof) = ('', 0);
	while (1)
	{
		my $left = $deadline - time;
		last if $left <= 0;
		last unless $sel->can_read($left);
		my $got = sysread($sock, my $buf, 65536);
		if (!$got)
		{
			$eof = 1;
			last;
		}
		$reply .= $buf;
	}
	close $sock;
	return undef unless $eof && length $reply;
	return $reply;
}

=pod

=item $zk->mode($i), $zk->leader

mode: 'leader', 'follower', 'standalone' (or 'observer'), or undef when the
server does not answer or is not serving.  leader: index of the server that
reports itself leader (or standalone), or undef.

=cut

sub mode
{
	my ($self, $i) = @_;
	my $r = $self->four_letter($i, 'srvr');
	return undef unless defined $r && $r =~ /^Mode:\s*(\S+)/m;
	return $1;
}

sub leader
{
	my ($self) = @_;
	for my $i (1 .. $self->{n})
	{
		# Skip servers that cannot answer, saving a reply timeout each.
		next unless $self->_alive($i) && !$self->{servers}[$i]{paused};
		my $m = $self->mode($i) // next;
		return $i if $m eq 'leader' || $m eq 'standalone';
	}
	return undef;
}

=pod

=item $zk->wait_for_quorum([$timeout_s])

Wait (default 60 s) until every server that runs and is not paused answers,
exactly one of them is leader, the others followers, and they are a majority
of the ensemble.  Returns 1, or 0 on timeout.

=cut

sub wait_for_quorum
{
	my ($self, $timeout) = @_;
	return $self->_wait_until($timeout // 60, sub { $self->_quorum_ok });
}

=pod

=item $zk->kill_server($i), stop_server($i), pause_server($i), resume_server($i), restart_server($i [, $timeout_s])

kill: SIGKILL and wait for the exit.  stop: SIGTERM, SIGKILL after 10 s.
pause/resume: SIGSTOP/SIGCONT.  restart: start a killed or stopped server
again with the same configuration and data, and wait until it serves (dies
with its log tail otherwise).  All return 1.

=cut

sub kill_server
{
	my ($self, $i) = @_;
	my $s = $self->_srv($i);
	if ($self->_alive($i))
	{
		my $pid = $s->{pid};
		$self->_signal($i, 'KILL');
		$self->_wait_until(30, sub { !$self->_alive($i) })
		  or croak "server $i (pid $pid) did not exit after SIGKILL";
	}
	$s->{paused} = 0;
	return 1;
}

sub stop_server
{
	my ($self, $i, $grace) = @_;
	$grace //= 10;
	return 1 unless $self->_alive($i);
	# A stopped process would keep SIGTERM pending: continue it first.
	$self->_signal($i, 'CONT');
	$self->_signal($i, 'TERM');
	$self->_wait_until($grace, sub { !$self->_alive($i) })
	  or $self->kill_server($i);
	$self->_srv($i)->{paused} = 0;
	return 1;
}

sub pause_server
{
	my ($self, $i) = @_;
	croak "server $i is not running" unless $self->_alive($i);
	$self->_signal($i, 'STOP');
	$self->_srv($i)->{paused} = 1;
	return 1;
}

sub resume_server
{
	my ($self, $i) = @_;
	croak "server $i is not running" unless $self->_alive($i);
	$self->_signal($i, 'CONT');
	$self->_srv($i)->{paused} = 0;
	return 1;
}

sub restart_server
{
	my ($self, $i, $timeout) = @_;
	$timeout //= $self->{start_timeout};
	croak "server $i is still running" if $self->_alive($i);
	$self->_spawn($i);
	my $want = $self->{n} == 1 ? qr/^standalone$/ : qr/^(?:leader|follower)$/;
	my $ok = $self->_wait_until(
		$timeout,
		sub {
			return 0 unless $self->_alive($i);
			my $m = $self->mode($i);
			return defined $m && $m =~ $want;
		});
	$self->_die_with_logs("server $i did not rejoin within $timeout s", $i)
	  unless $ok;
	$self->_check_line($i);
	return 1;
}

=pod

=item $zk->stop

Stop all servers (SIGTERM to all, then SIGKILL what is left after 10 s) and
release the port reservations.  When the test has failed so far (or
failed => 1 says so: at exit, a test that died), each server's log is
copied to the test's log directory (TESTLOGDIR), as C<zk_TEST_zkN.log>
(C<zk_TEST_2_zkN.log> for a second ensemble), beside the clusters' logs:
the servers' directory goes with the test's.  Their last eight warnings
and errors before the stop also go to stderr.  keep_logs => 1 copies the
logs without the warnings.  Idempotent.

=cut

sub stop
{
	my ($self, %opt) = @_;
	my @live = grep { $self->_alive($_) } 1 .. $self->{n};
	my %before_stop = map { $_ => -s ($self->{servers}[$_]{log} // '') // 0 } 1 .. $self->{n};
	for my $i (@live)
	{
		$self->_signal($i, 'CONT');
		$self->_signal($i, 'TERM');
	}
	$self->_wait_until(10, sub { !grep { $self->_alive($_) } @live });
	for my $i (@live)
	{
		$self->kill_server($i) if $self->_alive($i);
		$self->{servers}[$i]{paused} = 0;
	}
	$self->_release_ports;
	my $failed = $opt{failed} || !Test::Builder->new->is_passing;
	$self->_keep_logs(\%before_stop, $failed) if $failed || $opt{keep_logs};
	return 1;
}

my $kept_ensembles = 0;

sub _keep_logs
{
	my ($self, $before_stop, $failed) = @_;
	my $to = $ENV{TESTLOGDIR} or return;
	return if $self->{logs_kept}++;
	make_path($to);
	my $test = File::Basename::basename($0, '.pl');
	$test .= '_' . $kept_ensembles if $kept_ensembles++;
	for my $i (1 .. $self->{n})
	{
		my $from = $self->{servers}[$i]{log};
		next unless defined $from && -r $from;
		File::Copy::copy($from, File::Spec->catfile($to, "zk_${test}_zk$i.log"));
		# A failed test's last warnings and errors before the stop on the
		# test's own stderr too (not the log that PostgreSQL::Test::Utils
		# makes of STDERR), where a CI log shows them.
		next unless $failed;
		open my $fh, '<', $from or next;
		read($fh, my $text, $before_stop->{$i} // 0);
		my @w = grep { / (?:WARN|ERROR) / } split /^/, $text // '';
		my $err = Test::Builder->new->failure_output;
		print $err "zk$i: $_" for @w > 8 ? @w[-8 .. -1] : @w;
	}
	return;
}

=pod

=item $zk->total_watches, $zk->watches_by_path

total_watches: sum of "Total watches:N" from C<wchs> over the servers that
answer; C<wchs> sees data watches only.  all_watches: the sum of C<mntr>'s
zk_watch_count, which counts child watches as well.  watches_by_path:
hashref path => number of distinct sessions with a data watch on it, from
C<wchp> over the servers (C<wchp>, like C<wchs>, lists data watches only:
a child watch shows in all_watches alone).  A running, unpaused server
that does not answer within 10 s (three tries) makes these die rather
than count it as none.

=cut

sub total_watches
{
	my ($self) = @_;
	my $total = 0;
	for my $i ($self->_answering)
	{
		my $r = $self->_four_letter_sure($i, 'wchs');
		$total += $1 if $r =~ /Total watches:\s*(\d+)/;
	}
	return $total;
}

sub all_watches
{
	my ($self) = @_;
	my $total = 0;
	for my $i ($self->_answering)
	{
		my $r = $self->_four_letter_sure($i, 'mntr');
		$total += $1 if $r =~ /zk_watch_count\s+(\d+)/;
	}
	return $total;
}

sub watches_by_path
{
	my ($self) = @_;
	my %sessions;
	for my $i ($self->_answering)
	{
		my $r = $self->_four_letter_sure($i, 'wchp');
		my $path;
		for my $line (split /\n/, $r)
		{
			if ($line =~ m{^(/.*?)\s*$})
			{
				$path = $1;
			}
			elsif (defined $path && $line =~ /^\s+(0x[0-9a-fA-F]+)/)
			{
				$sessions{$path}{ lc $1 } = 1;
			}
		}
	}
	return { map { $_ => scalar keys %{ $sessions{$_} } } keys %sessions };
}

=pod

=item $zk->save_state([$file]), ZkEnsemble->attach($file), $zk->detach

save_state writes pids, ports and paths as JSON (default
basedir/ensemble.state) and returns the file name.  attach returns an
ensemble object for servers another process started; it is never stopped
automatically.  detach keeps this process from stopping the servers at exit
(END or DESTROY); call save_state so they can be stopped later.

=cut

sub save_state
{
	my ($self, $file) = @_;
	$file //= File::Spec->catfile($self->{basedir}, 'ensemble.state');
	my %state = (
		version   => 1,
		n         => $self->{n},
		basedir   => $self->{basedir},
		tick_time => $self->{tick_time},
		server_line => $self->{server_line},
		($self->{tls} ? (tls => $self->{tls}) : ()),
		($self->{plain_too} ? (plain_too => 1) : ()),
		servers   => [
			map {
				my $s = $_;
				+{ map { $_ => $s->{$_} } qw(id client_port quorum_port
					  election_port plain_port dir data_dir cfg log pid cmd) }
			} @{ $self->{servers} }[ 1 .. $self->{n} ]
		],);
	my $tmp = "$file.tmp$$";
	open my $fh, '>', $tmp or croak "could not write $tmp: $!";
	print $fh JSON::PP->new->canonical->pretty->encode(\%state);
	close $fh or croak "could not write $tmp: $!";
	rename $tmp, $file or croak "could not rename $tmp to $file: $!";
	return $file;
}

sub attach
{
	my ($class, $file) = @_;
	open my $fh, '<', $file or croak "could not read $file: $!";
	my $state = JSON::PP->new->decode(do { local $/; <$fh> });
	close $fh;
	my $self = bless {
		n             => $state->{n},
		basedir       => $state->{basedir},
		tick_time     => $state->{tick_time},
		server_line   => $state->{server_line} // '3.8',
		tls           => $state->{tls},
		plain_too     => $state->{plain_too} ? 1 : 0,
		start_timeout => 60,
		owner_pid     => $$,
		detached      => 1,    # never stopped implicitly
		servers       => [ undef, @{ $state->{servers} } ],
		reservations  => [],
	}, $class;
	$_->{paused} = 0 for @{ $self->{servers} }[ 1 .. $self->{n} ];
	return $self;
}

sub detach
{
	my ($self) = @_;
	$self->{detached} = 1;
	$self->_release_ports;
	return 1;
}

=pod

=back

=cut

# ---------------------------------------------------------------- internals

# A connection to server $i's client port: plain, or TLS with the client
# certificate of the tls option.  It checks liveness, not the server: the
# server's certificate is not verified (tests serve refused ones too).
sub _connect
{
	my ($self, $i, $timeout) = @_;
	my %plain = (
		PeerAddr => $self->_addr($i),
		PeerPort => $self->port($i),
		Proto    => 'tcp',
		Timeout  => $timeout);
	my $tls = $self->{tls};
	return IO::Socket::INET->new(%plain) unless $tls;
	require IO::Socket::SSL;
	return IO::Socket::SSL->new(
		%plain,
		SSL_cert_file       => $tls->{client_cert},
		SSL_key_file        => $tls->{client_key},
		SSL_verify_mode     => 0);    # a liveness check, whatever the certificate
}

# The class path of a server line.  3.8: Debian 12's jars.  3.9: trixie's
# 3.9.3 jars from test/zk39.sh; its jar's manifest names the same
# /usr/share/java libraries as 3.8.0's, bookworm's 3.8.0 jute jar among
# them, and the JVM searches a manifest's class path right after the jar
# that names it: the 3.9.3 jute jar goes first, or the server runs with
# 3.8.0's records.
sub _server_classpath
{
	my ($line) = @_;
	croak "unknown ZooKeeper server line '$line' (ZKLOCK_ZK_SERVER): 3.8 or 3.9"
	  unless $line eq '3.8' || $line eq '3.9';
	return $ENV{ZK_CLASSPATH} if $ENV{ZK_CLASSPATH};
	return '/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar'
	  if $line eq '3.8';
	my $jars = ($ENV{ZKLOCK_PG_CACHE} || '/var/cache/zklock')
	  . '/zk39/pkg/usr/share/java';
	croak "no ZooKeeper 3.9 server jars in $jars: "
	  . "run 'sh test/zk39.sh' as root (make deps does)"
	  unless -r "$jars/zookeeper.jar" && -r "$jars/zookeeper-jute.jar";
	return "$jars/zookeeper-jute.jar:$jars/zookeeper.jar:"
	  . '/usr/share/java/slf4j-simple.jar';
}

# Server $i must run the line asked for: its srvr names the version.
sub _check_line
{
	my ($self, $i) = @_;
	my $r = $self->_four_letter_sure($i, 'srvr');
	my ($v) = $r =~ /^Zookeeper version:\s*(\d+\.\d+\.\d+)/m;
	$self->_die_with_logs("server $i does not name its version in srvr: $r", $i)
	  unless defined $v;
	$self->_die_with_logs("server $i is ZooKeeper $v, not of the "
		  . "$self->{server_line} line asked for", $i)
	  unless index($v, "$self->{server_line}.") == 0;
	$self->{version} = $v;
	return;
}

# A note in the TAP stream when the caller is a test (Test::More loaded);
# shell scripts (test/zk_ensemble.pl) print only what they print.
sub _note
{
	my ($msg) = @_;
	Test::More::note($msg) if defined &Test::More::note;
	return;
}

# Server $i's address: 127.0.0.1 unless the address option says.
sub _addr
{
	my ($self, $i) = @_;
	return $self->{address} ? $self->{address}->($i) : '127.0.0.1';
}

sub _srv
{
	my ($self, $i) = @_;
	croak "no server $i (servers are 1.." . $self->{n} . ")"
	  unless defined $i && $i =~ /^\d+$/ && $i >= 1 && $i <= $self->{n};
	return $self->{servers}[$i];
}

# The reply of a server that should answer: a slow one is asked again,
# and one that never answers is an error, never a count of nothing.
sub _four_letter_sure
{
	my ($self, $i, $cmd) = @_;
	for my $try (1 .. 3)
	{
		my $r = $self->four_letter($i, $cmd, 2 + 2 * $try);
		return $r if defined $r && $r ne '';
	}
	die "ZooKeeper server $i does not answer '$cmd'";
}

sub _answering
{
	my ($self) = @_;
	return grep { $self->_alive($_) && !$self->{servers}[$_]{paused} }
	  1 .. $self->{n};
}

sub _wait_until
{
	my ($self, $timeout, $cond) = @_;
	my $deadline = time + $timeout;
	while (1)
	{
		return 1 if $cond->();
		return 0 if time >= $deadline;
		sleep 0.1;
	}
}

# Every server that runs and is not paused serves, in the right mode.
sub _quorum_ok
{
	my ($self) = @_;
	my @up = $self->_answering;
	if ($self->{n} == 1)
	{
		return @up == 1 && ($self->mode(1) // '') eq 'standalone';
	}
	return 0 unless @up > $self->{n} / 2;
	my $leaders = 0;
	for my $i (@up)
	{
		my $m = $self->mode($i) // return 0;
		if ($m eq 'leader') { $leaders++ }
		elsif ($m ne 'follower') { return 0 }
	}
	return $leaders == 1;
}

sub _port_free
{
	my ($port) = @_;
	# No SO_REUSEADDR: also refuses ports still in TIME_WAIT.
	my $s = IO::Socket::INET->new(
		LocalAddr => '127.0.0.1',
		LocalPort => $port,
		Proto     => 'tcp',
		Listen    => 1,
		ReuseAddr => 0) or return 0;
	close $s;
	return 1;
}

sub _portlock_dir
{
	my $dir = $ENV{ZK_PORTLOCK_DIR}
	  || File::Spec->catdir(File::Spec->tmpdir, 'zk_ensemble_portlock');
	unless (-d $dir)
	{
		mkdir $dir;
		# Shared by every user who runs tests here (root and postgres).
		chmod 01777, $dir if -o $dir;
	}
	return (-d $dir && -w $dir) ? $dir : undef;
}

# Reserve a port against concurrent test processes (the bind check alone
# races with the JVM's start-up), like PostgreSQL's get_free_port, but with
# flock: the reservation ends when this process closes the file or exits,
# whichever user it runs as, so nothing stale is left behind.
sub _reserve_port
{
	my ($self, $port) = @_;
	my $dir = _portlock_dir() // return 1;
	my $file = File::Spec->catfile($dir, "$port.lock");
	# O_CREAT only when needed: with fs.protected_regular, O_CREAT on another
	# user's file in a sticky directory fails even when the file exists.
	my $fh;
	sysopen($fh, $file, O_RDONLY)
	  or sysopen($fh, $file, O_RDONLY | O_CREAT, 0644)
	  or return 0;
	unless (flock($fh, LOCK_EX | LOCK_NB))
	{
		close $fh;
		return 0;
	}
	push @{ $self->{reservations} }, $fh;
	return 1;
}

# Once the servers listen, their bound ports protect them from other users.
sub _release_ports
{
	my ($self) = @_;
	close $_ for @{ $self->{reservations} };
	$self->{reservations} = [];
	return unless $$ == $self->{owner_pid};
	for my $s (@{ $self->{servers} }[ 1 .. $self->{n} ])
	{
		delete $ports_in_use{$_}
		  for grep { defined }
		  @$s{qw(client_port quorum_port election_port plain_port)};
	}
	return;
}

sub _allocate_ports
{
	my ($self) = @_;
	my $need = ($self->{n} == 1 ? 1 : 3 * $self->{n}) +
	  ($self->{plain_too} ? $self->{n} : 0);
	my @ports;
	for (my $tries = 0; @ports < $need; $tries++)
	{
		croak "no free ports found in $PORT_MIN-$PORT_MAX" if $tries > 5000;
		my $p = $PORT_MIN + int(rand($PORT_MAX - $PORT_MIN + 1));
		next if $ports_in_use{$p};
		next unless _port_free($p) && $self->_reserve_port($p);
		$ports_in_use{$p} = 1;
		push @ports, $p;
	}
	for my $i (1 .. $self->{n})
	{
		my $dir = File::Spec->catdir($self->{basedir}, "zk$i");
		$self->{servers}[$i] = {
			id            => $i,
			client_port   => shift(@ports),
			quorum_port   => $self->{n} > 1 ? shift(@ports) : undef,
			election_port => $self->{n} > 1 ? shift(@ports) : undef,
			plain_port    => $self->{plain_too} ? shift(@ports) : undef,
			dir           => $dir,
			data_dir      => File::Spec->catdir($dir, 'data'),
			cfg           => File::Spec->catfile($dir, 'zoo.cfg'),
			log           => File::Spec->catfile($dir, 'zookeeper.log'),
			pid           => undef,
			paused        => 0,
		};
	}
	return;
}

sub _write_config
{
	my ($self, $i) = @_;
	my $s = $self->{servers}[$i];
	make_path($s->{data_dir});

	# Small ticks allow short session timeouts (min is 2 ticks); init/sync
	# limits in ticks stay generous so slow CI machines still form a quorum.
	my %conf = (
		tickTime                 => $self->{tick_time},
		minSessionTimeout        => 400,
		maxSessionTimeout        => 120000,
		initLimit                => 50,
		syncLimit                => 25,
		dataDir                  => $s->{data_dir},
		maxClientCnxns           => 0,
		'4lw.commands.whitelist' => '*',
		'admin.enableServer'     => 'false',
		forceSync                => 'yes',);
	if (my $tls = $self->{tls})
	{
		%conf = (
			%conf,
			secureClientPort        => $s->{client_port},
			secureClientPortAddress => $self->_addr($i),
			serverCnxnFactory =>
			  'org.apache.zookeeper.server.NettyServerCnxnFactory',
			'ssl.keyStore.location'   => $tls->{keystore},
			'ssl.keyStore.type'       => 'PEM',
			'ssl.trustStore.location' => $tls->{truststore},
			'ssl.trustStore.type'     => 'PEM',
			'ssl.clientAuth'          => 'need',
			'authProvider.x509' =>
			  'org.apache.zookeeper.server.auth.X509AuthenticationProvider',
		);
		if ($self->{plain_too})
		{
			$conf{clientPort}        = $s->{plain_port};
			$conf{clientPortAddress} = $self->_addr($i);
		}
	}
	else
	{
		$conf{clientPort}        = $s->{client_port};
		$conf{clientPortAddress} = $self->_addr($i);
	}
	my @jvm_props;
	if (my $sasl = $self->{sasl})
	{
		$conf{'authProvider.sasl'} =
		  'org.apache.zookeeper.server.auth.SASLAuthenticationProvider';
		if ($sasl->{enforce} // 1)
		{
			$conf{'enforce.auth.enabled'} = 'true';
			$conf{'enforce.auth.schemes'} = 'sasl';
		}
		push @jvm_props, "-Djava.security.auth.login.config=$self->{jaas}";
		if (my $k = $sasl->{kerberos})
		{
			push @jvm_props, "-Djava.security.krb5.conf=$k->{krb5_conf}";
			$conf{'kerberos.removeHostFromPrincipal'}  = 'true';
			$conf{'kerberos.removeRealmFromPrincipal'} = 'true';
		}
	}
	while (my ($k, $v) = each %{ $self->{extra_conf} })
	{
		if ($JVM_PROPERTY_KEYS{$k}) { push @jvm_props, "-D$k=$v" }
		else { $conf{$k} = $v }
	}

	open my $fh, '>', $s->{cfg} or croak "could not write $s->{cfg}: $!";
	print $fh "# written by ZkEnsemble.pm\n";
	print $fh "# JVM properties: @jvm_props\n" if @jvm_props;
	print $fh "$_=$conf{$_}\n" for sort keys %conf;
	if ($self->{n} > 1)
	{
		for my $j (1 .. $self->{n})
		{
			my $o = $self->{servers}[$j];
			print $fh "server.$j=" . $self->_addr($j) . ":$o->{quorum_port}:$o->{election_port}\n";
		}
	}
	close $fh or croak "could not write $s->{cfg}: $!";

	if ($self->{n} > 1)
	{
		my $myid = File::Spec->catfile($s->{data_dir}, 'myid');
		open my $id, '>', $myid or croak "could not write $myid: $!";
		print $id "$i\n";
		close $id;
	}

	$s->{cmd} = [
		$JAVA, '-Xmx256m',
		'-Dzookeeper.admin.enableServer=false',
		'-Dzookeeper.4lw.commands.whitelist=*',
		# Timestamps make the logs usable when a test fails.
		'-Dorg.slf4j.simpleLogger.showDateTime=true',
		'-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS',
		@jvm_props,
		split(' ', $self->{jvm_opts}),
		# The jar's manifest lacks netty-codec, which the TLS handshake needs.
		'-cp', $self->{classpath} . ($self->{tls} ? ':/usr/share/java/netty-codec.jar' : ''),
		$self->{n} == 1 ? $MAIN_STANDALONE : $MAIN_QUORUM,
		$s->{cfg} ];
	return;
}

# The servers' JAAS file (the sasl option): a Server section whose
# DigestLoginModule knows the users, for DIGEST-MD5.
sub _write_jaas
{
	my ($self) = @_;
	my $users = $self->{sasl}{users} // {};
	$self->{jaas} = File::Spec->catfile($self->{basedir}, 'jaas.conf');
	open my $fh, '>', $self->{jaas} or croak "could not write $self->{jaas}: $!";
	if (my $k = $self->{sasl}{kerberos})
	{
		print $fh "Server {\n  com.sun.security.auth.module.Krb5LoginModule required\n"
		  . "  useKeyTab=true\n  keyTab=\"$k->{keytab}\"\n  storeKey=true\n"
		  . "  useTicketCache=false\n  principal=\"$k->{principal}\";\n};\n";
		close $fh or croak "could not write $self->{jaas}: $!";
		return;
	}
	print $fh "Server {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n";
	print $fh join("\n", map { "  user_$_=\"$users->{$_}\"" } sort keys %$users),
	  ";\n};\n";
	close $fh or croak "could not write $self->{jaas}: $!";
	return;
}

sub _spawn
{
	my ($self, $i) = @_;
	my $s = $self->{servers}[$i];
	my $pid = fork // croak "fork failed: $!";
	if ($pid == 0)
	{
		# Own session and process group: a signal to -pid reaches the whole
		# JVM, and the terminal's ^C does not.  _exit keeps END blocks out.
		eval {
			POSIX::setsid();
			$self->{spawn_hook}->($i) if $self->{spawn_hook};
			chdir $s->{dir};
			open STDIN, '<', File::Spec->devnull or die;
			open STDOUT, '>>', $s->{log} or die;
			open STDERR, '>&', \*STDOUT or die;
			exec { $s->{cmd}[0] } @{ $s->{cmd} };
		};
		print STDERR "could not start $s->{cmd}[0]: $!\n";
		POSIX::_exit(127);
	}
	$s->{pid}      = $pid;
	$s->{paused}   = 0;
	$s->{child_of} = $$;    # we reap it; others poll with kill 0
	return $pid;
}

# Is server $i's recorded process alive (and ours, not a reused PID)?
sub _alive
{
	my ($self, $i) = @_;
	my $s = $self->_srv($i);
	my $pid = $s->{pid} or return 0;
	if (($s->{child_of} // 0) == $$)
	{
		local $?;    # reaping must not clobber the caller's status
		my $r = waitpid($pid, POSIX::WNOHANG());
		if ($r == $pid || $r == -1)
		{
			$s->{pid} = undef;
			return 0;
		}
		return 1;
	}
	return 0 unless kill(0, $pid) || $!{EPERM};
	return $self->_is_ours($i);
}

# Guard against PID reuse for servers we did not fork: the process must
# still run our zoo.cfg (zombies have an empty cmdline, so they count as gone).
sub _is_ours
{
	my ($self, $i) = @_;
	my $s = $self->{servers}[$i];
	return 1 unless -d '/proc';
	open my $fh, '<', "/proc/$s->{pid}/cmdline" or return 0;
	my $cmdline = do { local $/; <$fh> } // '';
	close $fh;
	return scalar grep { $_ eq $s->{cfg} } split /\0/, $cmdline;
}

sub _signal
{
	my ($self, $i, $sig) = @_;
	my $pid = $self->{servers}[$i]{pid} or return;
	return unless $self->_alive($i);
	# The server leads its own process group (setsid in _spawn).
	kill($sig, -$pid) or kill($sig, $pid);
	return;
}

sub _die_with_logs
{
	my ($self, $msg, @which) = @_;
	@which = 1 .. $self->{n} unless @which;
	my $out = "$msg\n";
	for my $i (@which)
	{
		my $m = $self->_alive($i) ? 'running' : 'not running';
		$out .= "--- server $i ($m), $self->{servers}[$i]{log}:\n"
		  . $self->log_tail($i, 25);
	}
	# The servers are stopped by DESTROY or END unless detached.
	croak $out;
}

# ^C or kill of the test should still reach END, which stops the servers.
my $handlers_installed;

sub _install_signal_handlers
{
	return if $handlers_installed++;
	for my $sig (qw(INT TERM HUP))
	{
		my $h = $SIG{$sig};
		next if defined $h && $h ne '' && $h ne 'DEFAULT';
		$SIG{$sig} = sub { exit 128 + ($sig eq 'INT' ? 2 : $sig eq 'TERM' ? 15 : 1) };
	}
	return;
}

sub _auto_stop
{
	my ($self) = @_;
	return if $self->{detached} || $self->{owner_pid} != $$;
	# A test that died has not failed a test yet: its exit status says so.
	my $failing = $? != 0;
	local $?;    # keep the test's exit status
	eval { $self->stop(failed => $failing); 1 } or warn "ZkEnsemble: stopping failed: $@";
	return;
}

sub DESTROY
{
	my ($self) = @_;
	$self->_auto_stop;
	return;
}

END
{
	$_->_auto_stop for grep { defined } @ensembles;
}

1;
