# Copyright (c) zklock contributors
#
# Shared pieces of the zklock TAP tests: PostgreSQL clusters wired to a
# ZkEnsemble, background psql sessions (session(), ended by finish()), a
# look at the ZooKeeper tree (zkq()), other clients' peers (curator(),
# start_peer()), and polling helpers.  Every wait is a bounded poll of a
# condition, never a fixed sleep.

package ZklockTest;

use strict;
use warnings;

use Exporter 'import';
use File::Basename qw(dirname);
use File::Path ();
use File::Spec;
use IPC::Run ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

our @EXPORT = qw(zk_cluster zk_children zk_count zk_data zkq poll_until waiter
  alter_system failing_lock
  session quit_session quit_all_sessions start_wait finish_wait backend_pid is_waiting in_call
  started count_waiting finish zk_servers_of lock_state peer_send peer_line
  peer_cmd $curator_jars compile_peers start_peer curator peer_quit pgbouncer);

my $zkq_py = File::Spec->catfile(dirname(__FILE__), '..', 'zkq.py');

# A started cluster with zklock configured for $zk and the extension made.
# Options: session_timeout, max_connections, preload, conf (more lines),
# hosts (a connect string of its own instead of $zk's), before_start (run
# with the node between init and start: files in its data directory).
sub zk_cluster
{
	my ($name, $zk, %opt) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	$opt{before_start}->($node) if $opt{before_start};
	my $conf = join "\n",
	  "zklock.hosts = '" . ($opt{hosts} // $zk->connect_string) . "'",
	  "zklock.session_timeout = " . ($opt{session_timeout} // 20000),
	  "zklock.connect_timeout = 10000",
	  "cluster_name = '$name'",
	  "max_connections = " . ($opt{max_connections} // 40),
	  ($opt{preload} ? "shared_preload_libraries = 'zklock'" : ()),
	  @{ $opt{conf} // [] };
	$node->append_conf('postgresql.conf', "$conf\n");
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION zklock');
	return $node;
}

# Run test/zkq.py (kazoo) against $zk, a ZkEnsemble or a connect string:
# what it printed, chomped; $? holds its exit status.  Options go first, in
# a hash ref: auth => 'user:password' (a digest identity), sasl =>
# 'user:password' (SASL DIGEST-MD5), tls => [ CA,
# certificate, key ] (TLS with that client certificate).  The command's
# words go to zkq.py as they are (no shell).
sub zkq
{
	my $opt = ref $_[0] eq 'HASH' ? shift : {};
	my ($zk, @cmd) = @_;
	my $hosts = ref $zk ? $zk->connect_string : $zk;
	my @pre;
	push @pre, '--auth', $opt->{auth} if $opt->{auth};
	push @pre, '--sasl', $opt->{sasl} if $opt->{sasl};
	push @pre, '--tls', join(',', @{ $opt->{tls} }) if $opt->{tls};
	open(my $fh, '-|', '/usr/bin/python3', $zkq_py, @pre, $hosts, @cmd)
	  or die "cannot run zkq.py: $!";
	my $out = do { local $/; <$fh> } // '';
	close $fh;
	chomp $out;
	return $out;
}

# Children of a znode, sorted by name; empty when it does not exist.
sub zk_children
{
	my ($zk, $path) = @_;
	my $out = zkq($zk, 'ls', $path);
	die "zkq.py failed for $path" if $? != 0;
	return sort split /\n/, $out;
}

sub zk_count
{
	my @kids = zk_children(@_);
	return scalar @kids;
}

sub zk_data
{
	my ($zk, $path) = @_;
	return zkq($zk, 'get', $path);
}

# Poll $cond until true or $timeout seconds pass; returns the last result.
sub poll_until
{
	my ($cond, $timeout) = @_;
	my $deadline = time + ($timeout // $PostgreSQL::Test::Utils::timeout_default);
	while (1)
	{
		my $r = $cond->();
		return $r if $r || time > $deadline;
		sleep 0.05;
	}
}

# A background psql session that keeps errors going (for waits that fail).
# The caller quits it; session() makes one that finish() quits.
sub waiter
{
	my ($node) = @_;
	return $node->background_psql('postgres', on_error_stop => 0);
}

# Set zklock settings of $node with ALTER SYSTEM and reload.  zklock is
# loaded first: PostgreSQL before 17 sets with ALTER SYSTEM only the
# settings a backend knows.
sub alter_system
{
	my ($node, %kv) = @_;
	$node->safe_psql('postgres', "LOAD 'zklock'; ALTER SYSTEM SET $_ = '$kv{$_}'")
	  for sort keys %kv;
	$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
	return;
}

# Take lock $name in a new backend of $node, expecting it to fail: (what
# it printed on stderr, verbose, the seconds it took, the backend's thread
# count after).  $settle: the seconds a thread that hands its work over
# and ends is given to go (0 by default: counted at once).
sub failing_lock
{
	my ($node, $name, $settle) = @_;
	my $s = waiter($node);
	my $pid = $s->query_safe('SELECT pg_backend_pid()');
	my $t0 = time;
	$s->query("\\set VERBOSITY verbose\nSELECT zk_lock('$name')");
	my $took = time - $t0;
	my $err = $s->{stderr};
	my $threads;
	poll_until(sub { $threads = () = glob("/proc/$pid/task/*"); $threads == 1 }, $settle // 0);
	$s->quit;
	return ($err, $took, $threads);
}

# Sessions made by session() and not quit yet: finish() quits them.
my @open_sessions;

# A waiter on $node that finish() quits at the end of the test.  Options:
#   via   => $proxy     reach ZooKeeper through this ZkProxy (zklock.hosts)
#   set   => { setting => value, ... }   SET these (deadlock_timeout,
#                       statement_timeout to bound a wait that would
#                       otherwise never end, zklock.session_timeout, ...)
#   warm  => 1          open the ZooKeeper session (a lock taken and
#                       released), so that the first call of the test does
#                       not also open it
#   begin => 1          leave it inside a transaction block
sub session
{
	my ($node, %opt) = @_;
	my $s = waiter($node);
	$s->query_safe("SET zklock.hosts = '127.0.0.1:" . $opt{via}->port . "'")
	  if $opt{via};
	my $set = $opt{set} // {};
	$s->query_safe("SET $_ = '$set->{$_}'") for sort keys %$set;
	$s->query_safe("SELECT zk_try_lock('warm-up'), zk_unlock('warm-up')")
	  if $opt{warm};
	$s->query_safe('BEGIN') if $opt{begin};
	push @open_sessions, $s;
	return $s;
}

# Quit sessions made by session() before the end of the test (each is
# forgotten first, so a quit that dies leaves nothing for finish()).
sub quit_session
{
	my @quit = @_;    # a copy: the list given may be @open_sessions itself
	for my $s (@quit)
	{
		@open_sessions = grep { $_ != $s } @open_sessions;
		$s->quit;
	}
}

# Quit every session session() made that is still open.
sub quit_all_sessions
{
	quit_session(@open_sessions);
}

# Send a statement that is expected to wait; return at once.  What the
# statement printed by the time the marker came (it did not wait after all)
# is kept for finish_wait: query_until hands it back and clears it.
sub start_wait
{
	my ($session, $sql) = @_;
	my $early = $session->query_until(qr/zz_sent\n/, "\\echo zz_sent\n$sql;\n");
	$early =~ s/^.*?zz_sent\n//s;
	$session->{zkl_early_out} = $early;
}

# Collect what a start_wait statement printed: (stdout, stderr).  Clears
# the session's stderr so that later query_safe calls work.
sub finish_wait
{
	my ($session) = @_;
	my ($out) = $session->query("SELECT 'zz_end'");
	$out = (delete($session->{zkl_early_out}) // '') . $out;
	$out =~ s/\n?zz_end$//;
	my $err = $session->{stderr};
	$session->{stderr} = '';
	return ($out, $err);
}

sub backend_pid
{
	my ($session) = @_;
	my $pid = $session->query_safe('SELECT pg_backend_pid()');
	chomp $pid;
	return $pid;
}

# Whether a backend is in zklock's wait (an Extension wait event).
sub is_waiting
{
	my ($node, $pid) = @_;
	return $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE pid = $pid AND wait_event_type = 'Extension'"
	) eq '1';
}

# The backend's statement has not returned yet.  "Still waits" checks use
# this, not is_waiting: a waiter past deadlock_timeout runs its search on
# the CPU now and then, outside its wait event.
sub in_call
{
	my ($node, $pid) = @_;
	return $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE pid = $pid AND state = 'active'"
	) eq '1';
}

# The backend has begun a statement starting with $prefix (it may have
# ended it since: pg_stat_activity keeps an idle backend's last query).  A
# poll for a statement's end is meaningful only once this holds.
sub started
{
	my ($node, $pid, $prefix) = @_;
	$prefix =~ s/'/''/g;
	$prefix =~ s/([%_\\])/\\$1/g;
	return $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE pid = $pid AND query LIKE '$prefix%'"
	) eq '1';
}

sub count_waiting
{
	my ($node) = @_;
	return $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Extension'"
	);
}

# Indexes of the ensemble servers a backend process has a TCP connection to
# (by the remote ports of its established sockets).
sub zk_servers_of
{
	my ($zk, $pid) = @_;
	my %index = map { $zk->port($_) => $_ } 1 .. $zk->server_count;
	my %inodes;
	for my $fd (glob("/proc/$pid/fd/*"))
	{
		my $l = readlink($fd) // next;
		$inodes{$1} = 1 if $l =~ /^socket:\[(\d+)\]/;
	}
	my @servers;
	for my $f ('/proc/net/tcp', '/proc/net/tcp6')
	{
		open(my $fh, '<', $f) or next;
		while (my $line = <$fh>)
		{
			my @c = split ' ', $line;
			next unless @c > 9 && $c[2] =~ /:([0-9A-F]{4})$/;
			my $i = $index{ hex($1) };
			push @servers, $i if $i && $inodes{ $c[9] } && $c[3] eq '01';
		}
	}
	return @servers;
}

# State of one lock in a session's zk_locks view ('' when not there).
# With in_txn => 1, read inside a transaction that is rolled back: no
# commit, which would be refused once the lock is lost.
sub lock_state
{
	my ($session, $name, %opt) = @_;
	my $sql = "SELECT coalesce(max(state), '') FROM zk_locks WHERE name = '$name'";
	$sql = "BEGIN; $sql; ROLLBACK" if $opt{in_txn};
	my $out = $session->query_safe($sql);
	chomp $out;
	return $out;
}

# Other clients' peers (test/interop), started with IPC::Run as
# { h => handle, in => stdin buffer, out => stdout buffer }: send a command
# line, read the next line printed (undef after $timeout s), or both.
sub peer_send
{
	my ($p, $cmd) = @_;
	$p->{in} .= "$cmd\n";
	$p->{h}->pump_nb if $p->{h}->pumpable;
}

sub peer_line
{
	my ($p, $timeout) = @_;
	my $deadline = time + ($timeout // $PostgreSQL::Test::Utils::timeout_default);
	while (1)
	{
		return $1 if $p->{out} =~ s/^([^\n]*)\n//;
		return undef if time > $deadline || !$p->{h}->pumpable;
		$p->{h}->pump_nb;
		sleep 0.02;
	}
}

sub peer_cmd
{
	my ($p, $cmd, $timeout) = @_;
	peer_send($p, $cmd);
	return peer_line($p, $timeout) // '(no reply)';
}

# The end of a test: quit the sessions session() made that are still
# open and the waiters given, stop the clusters and the ensemble.
sub finish
{
	my (%what) = @_;
	quit_all_sessions();
	$_->quit for @{ $what{sessions} // [] };
	$_->stop('fast') for @{ $what{nodes} // [] };
	$what{zk}->stop if $what{zk};
}


# The Curator and ZooKeeper client jars the Java peers (test/interop) need.
our $curator_jars = join ':', map { "/usr/share/java/$_.jar" }
  qw(curator-recipes curator-framework curator-client guava zookeeper
  zookeeper-jute slf4j-api slf4j-nop);

# Peers still running when a test ends (or dies) are stopped by pid.
my @live_peers;

END
{
	eval { $_->{h}->kill_kill(grace => 2) } for @live_peers;
}

# pgbouncer in front of $node, its [databases] section given as
# name => "libpq settings pool_mode=MODE": listening on its own socket in
# $node's socket directory, one server connection per pool, DISCARD ALL
# as the reset query.  Waits until it serves the first database (one
# assertion) and returns its IPC::Run handle and a cluster object that
# names its socket, for psql; stopped at the end of the test (or when it
# dies) if the test did not stop it.
my @live_bouncers;

END
{
	eval { $_->kill_kill(grace => 2) } for @live_bouncers;
}

sub pgbouncer
{
	my ($node, %dbs) = @_;
	my $port = PostgreSQL::Test::Cluster::get_free_port();
	my $dir = PostgreSQL::Test::Utils::tempdir();
	my $ini = File::Spec->catfile($dir, 'pgbouncer.ini');
	my $databases = join '', map { "$_ = $dbs{$_}\n" } sort keys %dbs;
	PostgreSQL::Test::Utils::append_to_file($ini, <<"INI");
[databases]
$databases
[pgbouncer]
listen_addr =
listen_port = $port
unix_socket_dir = @{[ $node->host ]}
auth_type = any
default_pool_size = 1
max_client_conn = 20
server_reset_query = DISCARD ALL
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
INI
	my $h = IPC::Run::start([ '/usr/sbin/pgbouncer', $ini ],
		'>', "$dir/stdout", '2>', "$dir/stderr", IPC::Run::timeout(600));
	push @live_bouncers, $h;
	my $pgb = PostgreSQL::Test::Cluster->new('pgbouncer', port => $port);
	my ($first) = sort keys %dbs;
	Test::More::ok(
		poll_until(sub { (eval { $pgb->safe_psql($first, 'SELECT 1') } // '') eq '1' }, 30),
		'pgbouncer serves');
	return ($h, $pgb);
}

# Where compile_peers put the classes; curator() runs LockPeer from there.
my $peer_classes;

# Compile test/interop Java sources into $classes; true on success.
sub compile_peers
{
	my ($classes, @sources) = @_;
	File::Path::make_path($classes);
	my $ok = PostgreSQL::Test::Utils::run_log(
		[ 'javac', '-nowarn', '-d', $classes, '-cp', $curator_jars, @sources ]);
	$peer_classes = $classes if $ok;
	return $ok;
}

# Start a peer process (stderr to the test's log directory) and wait for
# its "ready" line; it is stopped at the end of the test if still running.
sub start_peer
{
	my ($name, @cmd) = @_;
	my $p = { name => $name, in => '', out => '' };
	$p->{h} = IPC::Run::start(\@cmd, '<', \$p->{in}, '>', \$p->{out},
		'2>', "$PostgreSQL::Test::Utils::log_path/peer_$name.err");
	push @live_peers, $p;
	Test::More::is(peer_line($p, 60), 'ready', "peer $name is connected");
	return $p;
}

# A Curator peer (test/interop/LockPeer.java, built by compile_peers) on
# $path of $zk (a ZkEnsemble or a connect string), named $name; $mode as
# LockPeer takes it (mutex, read, write, semaphore:MAX, multi).  With
# tls => { keystore => PEM, truststore => PEM, protocol => TLSv1.3 or
# undef }, it connects over TLS with Netty, as ZooKeeper's Java client does.
sub curator
{
	my ($zk, $name, $path, $mode, %opt) = @_;
	die 'curator() before compile_peers()' unless $peer_classes;
	my $hosts = ref $zk ? $zk->connect_string : $zk;
	my $jars = $curator_jars;
	my @jvm;
	if (my $tls = $opt{tls})
	{
		$jars .= ':' . join ':',
		  map { "/usr/share/java/$_.jar" } qw(netty-codec netty-resolver);
		@jvm = (
			'-Dzookeeper.clientCnxnSocket=org.apache.zookeeper.ClientCnxnSocketNetty',
			'-Dzookeeper.client.secure=true',
			($tls->{protocol} ? "-Dzookeeper.ssl.protocol=$tls->{protocol}" : ()),
			"-Dzookeeper.ssl.keyStore.location=$tls->{keystore}",
			'-Dzookeeper.ssl.keyStore.type=PEM',
			"-Dzookeeper.ssl.trustStore.location=$tls->{truststore}",
			'-Dzookeeper.ssl.trustStore.type=PEM');
	}
	return start_peer($name, 'java', '-Xmx128m', '-XX:TieredStopAtLevel=1',
		@jvm, '-cp', "$peer_classes:$jars", 'LockPeer', $hosts, $path, $mode,
		$name);
}

# Tell a peer to quit, check that it says so, and wait for it.
sub peer_quit
{
	my ($p) = @_;
	Test::More::is(peer_cmd($p, 'quit'), 'bye', "peer $p->{name} quits");
	$p->{h}->finish;
	@live_peers = grep { $_ != $p } @live_peers;
}

1;
