# Copyright (c) zklock contributors
#
# zklock.ssl: an ensemble that serves only a secure client port (Netty, PEM
# stores, client certificates required, the x509 authentication provider),
# with certificates this test makes with openssl.  Over TLS: exclusion across
# two clusters and the hand-off, reconnect after the connected server dies,
# deadlock detection, semaphores; the certificate's subject is the identity
# in the nodes' ACL, so another certificate (kazoo) cannot delete a held
# node, and a directory of another identity is refused; a Curator client
# over TLS and zklock exclude each other.  Each TLS failure is a class-08
# error within connect_timeout naming TLS, the server and the file, and
# never a fallback to plain text.

use strict;
use warnings;

use File::Copy qw(copy);
use File::Path qw(make_path);
use FindBin;
use lib "$FindBin::Bin/../perl";

use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use ZkCerts;
use ZkEnsemble;
use ZklockTest;

my $python = '/usr/bin/python3';
my $zkq = "$FindBin::Bin/../zkq.py";
my $certs = ZkCerts->new(dir => "$PostgreSQL::Test::Utils::tmp_check/certs");
my $ca = $certs->file('ca.pem');
my $a = $certs->client('a');
my $b = $certs->client('b');

my $zk = ZkEnsemble->new(
	servers => 3,
	tls     => {
		keystore    => $certs->file('server.pem'),
		truststore  => $ca,
		client_cert => $a->{cert},
		client_key  => $a->{key} });
my $hosts = $zk->connect_string;

# kazoo over TLS with a client certificate: zkq.py's answer.
sub zkq
{
	my ($who, @args) = @_;
	my $c = $certs->client($who);
	my $out = `$python $zkq --tls $ca,$c->{cert},$c->{key} '$hosts' @args`;
	chomp $out;
	return $out;
}

# A cluster with its own copy of client a's files: key and certificate in
# the data directory, named relative to it; the CA by absolute path.
sub tls_cluster
{
	my ($name) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	copy($a->{cert}, $node->data_dir . '/zk-client.crt') or die $!;
	copy($a->{key}, $node->data_dir . '/zk-client.key') or die $!;
	chmod 0600, $node->data_dir . '/zk-client.key';
	$node->append_conf('postgresql.conf', join("\n",
		"zklock.hosts = '$hosts'",
		"zklock.session_timeout = 20000",
		"zklock.connect_timeout = 10000",
		"cluster_name = '$name'",
		"deadlock_timeout = '200ms'",
		"zklock.ssl = on",
		"zklock.ssl_ca_file = '$ca'",
		"zklock.ssl_cert_file = 'zk-client.crt'",
		"zklock.ssl_key_file = 'zk-client.key'") . "\n");
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION zklock');
	return $node;
}

my $east = tls_cluster('east');
my $west = tls_cluster('west');

# --- exclusion across two clusters, and the hand-off
my $ew = waiter($east);
my $ww = waiter($west);
like($ew->query_safe("SELECT zk_lock('tls')"), qr/^\d+$/, 'east takes a lock over TLS');
is($ew->query_safe("SELECT state FROM zk_session()"), 'connected', 'its session is connected');
is($west->safe_psql('postgres', "SELECT zk_try_lock('tls')"), 'f',
	'west cannot take it while east holds it');
my $wpid = backend_pid($ww);
start_wait($ww, "SELECT zk_lock('tls', '60s')");
ok(poll_until(sub { is_waiting($west, $wpid) }), 'west waits for it');
is($ew->query_safe("SELECT zk_unlock('tls')"), 't', 'east releases');
my ($out, $err) = finish_wait($ww);
like($out, qr/^\d+$/, 'west gets it on the hand-off');
is($err, '', 'without an error');

# --- the certificate identity in the ACL
my $node = $ww->query_safe("SELECT node FROM zk_locks WHERE name = 'tls'");
my $dn = $a->{dn};
like(zkq('a', 'acl', "'$node'"), qr/^x509:\Q$dn\E 31$/m,
	'the node carries an ACL for the certificate subject (x509)');
like(zkq('a', 'acl', '/zklock/tls'), qr/^x509:\Q$dn\E 31$/m,
	'and so does the directory zklock created');
is(zkq('b', 'delete', "'$node'"), 'NoAuthError',
	'kazoo with another certificate cannot delete the held node');
is(zkq('b', 'delete', '/zklock/tls'), 'NoAuthError', 'nor the directory');
is($ww->query_safe("SELECT zk_unlock('tls')"), 't', 'west releases');
like($east->safe_psql('postgres', "SELECT zk_lock('tls'), zk_unlock('tls')"),
	qr/^\d+\|t$/, 'east takes it again in the directory of its own identity');

# Identity b cannot even create in zklock's root; a directory made with an
# open ACL (here by a kazoo client of identity a) is refused.
is(zkq('b', 'create', '/zklock/open-dir'), 'NoAuthError',
	'kazoo with another certificate cannot create in zklock\'s root');
is(zkq('a', 'create', '/zklock/open-dir'), 'created', 'kazoo makes an open directory');
my ($ret, $stdout, $stderr) = $east->psql('postgres',
	"SELECT zk_lock('open-dir')", extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($stderr, qr/world:anyone may delete its children/,
	'zklock refuses a directory with an open ACL over TLS too');

# --- the next session after a reload uses new files: client b is another
# identity, and a directory of client a's is not its own.
$west->append_conf('postgresql.conf', "zklock.ssl_cert_file = '$b->{cert}'\n"
	  . "zklock.ssl_key_file = '$b->{key}'\n");
$west->reload;
($ret, $stdout, $stderr) = $west->psql('postgres', "SELECT zk_lock('tls')");
like($stderr, qr/ERROR:  permission denied to create ZooKeeper node "\/zklock\/tls\//,
	'after a reload, a new session is identity b, which a\'s directory refuses');
$west->append_conf('postgresql.conf', "zklock.ssl_cert_file = 'zk-client.crt'\n"
	  . "zklock.ssl_key_file = 'zk-client.key'\n");
$west->reload;

# --- deadlock detection over TLS
{
	my $s1 = waiter($east);
	my $s2 = waiter($west);
	$s1->query_safe('BEGIN');
	$s2->query_safe('BEGIN');
	$s1->query_safe("SELECT zk_xact_lock('dl-a')");
	$s2->query_safe("SELECT zk_xact_lock('dl-b')");
	start_wait($s1, "SELECT zk_xact_lock('dl-b')");
	start_wait($s2, "SELECT zk_xact_lock('dl-a')");
	my @r = map { [ finish_wait($_) ] } $s1, $s2;
	is(scalar(grep { $_->[1] =~ /deadlock detected/ } @r), 1,
		'a deadlock across clusters over TLS: exactly one 40P01');
	$_->query('ROLLBACK') for $s1, $s2;
	$_->quit for $s1, $s2;
}

# --- semaphores over TLS
{
	my $s1 = waiter($east);
	my $s2 = waiter($west);
	my $s3 = waiter($west);
	is($s1->query_safe("SELECT zk_semaphore('sem', 2) IS NOT NULL"), 't', 'east takes a lease');
	is($s2->query_safe("SELECT zk_semaphore('sem', 2) IS NOT NULL"), 't',
		'west takes the second lease');
	$s3->query_safe("SELECT zk_try_semaphore('sem', 2)");
	is($s3->query_safe("SELECT count(*) FROM zk_locks WHERE name = 'sem'"), '0',
		'a third lease is refused while two are held');
	$s1->quit;
	ok(poll_until(sub {
			$s3->query_safe("SELECT zk_try_semaphore('sem', 2)")
			  eq 't' }),
		'and granted once east\'s backend is gone');
	$_->quit for $s2, $s3;
}

# --- the connected server dies: the session moves to another over TLS
{
	my $s = waiter($east);
	$s->query_safe("SELECT zk_lock('move')");
	my ($sid, $server) = split /\|/, $s->query_safe("SELECT session_id, server FROM zk_session()");
	my ($port) = $server =~ /:(\d+)$/;
	my ($i) = grep { $zk->port($_) == $port } 1 .. 3;
	ok($i, "connected to server $i");
	$zk->kill_server($i);
	ok( poll_until(sub {
			my ($st, $id, $srv) = split /\|/,
			  $s->query_safe("SELECT state, session_id, coalesce(server, '') FROM zk_session()");
			$st eq 'connected' && $id eq $sid && $srv !~ /:$port$/;
		}),
		'the same session reconnects to another server over TLS');
	is($s->query_safe("SELECT state FROM zk_locks WHERE name = 'move'"), 'held',
		'the lock is still held');
	is($west->safe_psql('postgres', "SELECT zk_try_lock('move')"), 'f',
		'and still excludes west');
	$s->quit;
	$zk->restart_server($i);
	$zk->wait_for_quorum(60) or die 'no quorum after restart';
}

# --- a Curator client over TLS (Netty client socket) and zklock exclude each other
{
	my $jars = join ':', map { "/usr/share/java/$_.jar" }
	  qw(curator-recipes curator-framework curator-client guava zookeeper
	  zookeeper-jute slf4j-api slf4j-nop netty-codec netty-resolver);
	my $classes = "$PostgreSQL::Test::Utils::tmp_check/interop_classes";
	make_path($classes);
	ok(run_log([ 'javac', '-nowarn', '-d', $classes, '-cp', $jars,
		"$FindBin::Bin/../interop/LockPeer.java" ]), 'the Curator peer compiles');
	# ZooKeeper 3.9 servers speak only TLS 1.3 by default (ZOOKEEPER-4415),
	# bookworm's 3.8.0 Java client only TLS 1.2 unless its protocol is set
	# (ZOOKEEPER-5053): against 3.9 the peer asks for TLS 1.3.
	my @protocol =
	  $zk->server_line eq '3.9' ? ('-Dzookeeper.ssl.protocol=TLSv1.3') : ();
	my $p = { name => 'curator-tls', in => '', out => '' };
	$p->{h} = IPC::Run::start(
		[
			'java', '-Xmx128m', '-XX:TieredStopAtLevel=1',
			'-Dzookeeper.clientCnxnSocket=org.apache.zookeeper.ClientCnxnSocketNetty',
			'-Dzookeeper.client.secure=true', @protocol,
			'-Dzookeeper.ssl.keyStore.location=' . $certs->file('a.pem'),
			'-Dzookeeper.ssl.keyStore.type=PEM',
			"-Dzookeeper.ssl.trustStore.location=$ca",
			'-Dzookeeper.ssl.trustStore.type=PEM',
			'-cp', "$classes:$jars", 'LockPeer', $hosts, '/zklock/interop',
			'mutex', 'curator-tls'
		],
		'<', \$p->{in}, '>', \$p->{out},
		'2>', "$PostgreSQL::Test::Utils::log_path/peer_curator_tls.err");
	is(peer_line($p, 60), 'ready', 'Curator connects over TLS');
	my $s = waiter($east);
	$s->query_safe("SELECT zk_lock('interop')");
	is(peer_cmd($p, 'try 300'), 'busy', 'Curator cannot take the lock zklock holds');
	$s->query_safe("SELECT zk_unlock('interop')");
	like(peer_cmd($p, 'acquire'), qr/^acquired/, 'Curator takes it once zklock released it');
	is($west->safe_psql('postgres', "SELECT zk_try_lock('interop')"), 'f',
		'zklock cannot take it while Curator holds it');
	like(peer_cmd($p, 'release'), qr/^released/, 'Curator releases');
	is(peer_cmd($p, 'quit'), 'bye', 'Curator quits');
	$p->{h}->finish;
	$s->quit;
}

# --- the errors: class 08, naming TLS, the server or the file, in time
my $plain = ZkEnsemble->new(servers => 1);
my $errs = PostgreSQL::Test::Cluster->new('errors');
$errs->init;
$errs->append_conf('postgresql.conf', "zklock.connect_timeout = 3000\n");
$errs->start;
$errs->safe_psql('postgres', 'CREATE EXTENSION zklock');

# Try a lock with these settings; returns (stderr, seconds taken).
sub try_with
{
	my (%set) = @_;
	my %conf = (
		'zklock.hosts'         => $hosts,
		'zklock.ssl'           => 'on',
		'zklock.ssl_ca_file'   => $ca,
		'zklock.ssl_cert_file' => $a->{cert},
		'zklock.ssl_key_file'  => $a->{key},
		%set);
	$errs->safe_psql('postgres',
		"LOAD 'zklock'; "
		  . join('; ', map { "ALTER SYSTEM SET $_ = '$conf{$_}'" } sort keys %conf)
		  . '; SELECT pg_reload_conf()');
	my $t0 = time;
	my ($r, $o, $e) = $errs->psql('postgres', "SELECT zk_lock('err', '1s')",
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	return ($e, time - $t0);
}

my $rogue = $certs->client('rogue');
my $expired = $certs->client('expired');
my $copy = $errs->data_dir . '/open.key';
copy($a->{key}, $copy) or die $!;
chmod 0644, $copy;
my @cases = (
	[ 'the key file of another certificate', { 'zklock.ssl_key_file' => $b->{key} },
		qr/ERROR:  08001: ZooKeeper TLS key file ".*b\.key" does not match certificate file ".*a\.crt"/ ],
	[ 'an expired certificate', { 'zklock.ssl_cert_file' => $expired->{cert}, 'zklock.ssl_key_file' => $expired->{key} },
		qr/ERROR:  08001: ZooKeeper TLS client certificate ".*expired\.crt" has expired/ ],
	[ 'a key file readable by others', { 'zklock.ssl_key_file' => 'open.key' },
		qr/ERROR:  08001: ZooKeeper TLS key file ".*open\.key" has group or world access/ ],
	[ 'a missing CA file', { 'zklock.ssl_ca_file' => 'nowhere.pem' },
		qr/ERROR:  58P01: could not open ZooKeeper TLS file ".*nowhere\.pem": No such file.*\n.*zklock\.ssl_ca_file/ ],
	[ 'a certificate from another CA', { 'zklock.ssl_cert_file' => $rogue->{cert}, 'zklock.ssl_key_file' => $rogue->{key} },
		qr/ERROR:  08001: could not connect to ZooKeeper server "127\.0\.0\.1:\d+" over TLS\n.*(refused the client certificate|ended the connection).*rogue\.crt/ ],
	[ 'a CA that did not sign the servers', { 'zklock.ssl_ca_file' => $certs->file('other-ca.pem') },
		qr/ERROR:  08001: could not connect to ZooKeeper server "127\.0\.0\.1:\d+" over TLS\n.*did not verify with zklock\.ssl_ca_file ".*other-ca\.pem"/ ],
	[ 'a plain-text port', { 'zklock.hosts' => $plain->connect_string },
		qr/ERROR:  08001: could not connect to ZooKeeper server "127\.0\.0\.1:\d+" over TLS\n.*plain-text client port/ ],
);
for my $c (@cases)
{
	my ($what, $set, $re) = @$c;
	my ($e, $took) = try_with(%$set);
	like($e, $re, "$what: a clear error");
	ok($took < 8, "$what: within connect_timeout (took ${\ sprintf '%.1f', $took} s)");
}

# TLS off against the TLS port: no session, a plain connection error.
my ($e) = try_with('zklock.ssl' => 'off');
like($e, qr/ERROR:  08001: could not connect to ZooKeeper at/,
	'plain text against a TLS-only ensemble does not connect');
# And TLS on with the right files works on this cluster too.
($e) = try_with();
is($e, '', 'the right files connect');

$_->quit for $ew, $ww;
finish(nodes => [ $east, $west, $errs ], zk => $zk);
$plain->stop;
done_testing();
