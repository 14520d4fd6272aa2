# Copyright (c) zklock contributors
#
# zklock.ssl: an ensemble that serves only a secure client port (Netty, PEM
# stores, client certificates required, the x509 authentication provider),
# with certificates this test makes with openssl.  Over TLS: exclusion across
# two clusters and the hand-off, reconnect after the connected server dies,
# deadlock detection, semaphores; the certificate's subject is the identity
# in the nodes' ACL, so another certificate (kazoo) cannot delete a held
# node, and a directory of another identity is refused; a Curator client
# over TLS and zklock exclude each other; a reconnect reads neither the
# client certificate nor the key (one TLS context per session).  Each TLS failure is a class-08 error within
# connect_timeout naming TLS, the server and the file, and never a fallback
# to plain text.  The ensemble is authenticated: a server certificate for
# another host, one that only the machine's default trust store vouches
# for, a revoked one (zklock.ssl_crl_file) and an expired one are refused
# at once; one for the host as zklock.hosts names it, by name or by
# address, is accepted.  A backend whose descriptors go past 1024 opens
# its session over TLS there.

use strict;
use warnings;

use File::Copy qw(copy);
use File::Path qw(make_path);
use FindBin;
use lib "$FindBin::Bin/../perl";

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use ZkCerts;
use ZkEnsemble;
use ZklockTest;

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

# zkq.py's answer over TLS with client $who's certificate.
sub zkq_as
{
	my ($who, @cmd) = @_;
	my $c = $certs->client($who);
	return zkq({ tls => [ $ca, $c->{cert}, $c->{key} ] }, $hosts, @cmd);
}

# A cluster with its own copy of client a's files: key and certificate in
# the data directory, named relative to it; the CA by absolute path.
sub tls_cluster
{
	my ($name, $start) = @_;
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
	$start ? $start->($node) : $node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION zklock');
	return $node;
}

my $east = tls_cluster('east');
# west preloads zklock: its backends share the servers' TLS tickets.
my $west = tls_cluster('west', sub {
	my ($node) = @_;
	$node->append_conf('postgresql.conf', "shared_preload_libraries = 'zklock'\n");
	$node->start;
});

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
like(zkq_as('a', 'acl', $node), qr/^x509:\Q$dn\E 31$/m,
	'the node carries an ACL for the certificate subject (x509)');
like(zkq_as('a', 'acl', '/zklock/tls'), qr/^x509:\Q$dn\E 31$/m,
	'and so does the directory zklock created');
is(zkq_as('b', 'delete', $node), 'NoAuthError',
	'kazoo with another certificate cannot delete the held node');
is(zkq_as('b', 'delete', '/zklock/tls'), 'NoAuthError', 'nor the directory');
is($ww->query_safe("SELECT zk_unlock('tls')"), 't', 'west releases');
like($east->safe_psql('postgres', "SELECT zk_lock('tls'), zk_unlock('tls')"),
	qr/^\d+\|t$/, 'east takes it again in the directory of its own identity');

# Identity b cannot even create in zklock's root; a directory made with an
# open ACL (here by a kazoo client of identity a) is refused.
is(zkq_as('b', 'create', '/zklock/open-dir'), 'NoAuthError',
	'kazoo with another certificate cannot create in zklock\'s root');
is(zkq_as('a', 'create', '/zklock/open-dir'), 'created', 'kazoo makes an open directory');
my ($ret, $stdout, $stderr) = $east->psql('postgres',
	"SELECT zk_lock('open-dir')", extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($stderr, qr/ERROR:  55000: ZooKeeper lock directory "\/zklock\/open-dir" is not protected by the client certificate\n.*world:anyone may delete its children.*\nHINT:  .* only to the identity of the certificate in zklock.ssl_cert_file\./s,
	'zklock refuses a directory with an open ACL over TLS too, naming the certificate');

# --- a new backend of west resumes a TLS session from the ticket a server
# gave another backend (shared memory), with the same identity: it creates
# in the directory that only certificate a may create in.  Each backend
# connects to a server of the three at random; the first to reach one makes
# a full handshake and keeps its ticket for the next.
{
	my $from = -s $west->logfile;
	my ($resumed, $backends, $locked) = (0, 0, 0);
	while (!$resumed && $backends < 12)
	{
		$backends++;
		$locked++ if $west->safe_psql('postgres',
			"SET zklock.log_sessions = on; SELECT zk_lock('tls'), zk_unlock('tls')") =~ /^\d+\|t$/;
		my $log = slurp_file($west->logfile, $from);
		$resumed = () = $log =~ /opened in .*\n.*; TLS: 1 handshake, 1 resumed\./g;
	}
	SKIP:
	{
		# Checked with openssl s_client: a 3.9.3 server gives a ticket and
		# never accepts it (a 3.8.0 server resumes TLS 1.2 and 1.3 sessions).
		skip 'ZooKeeper 3.9.3 servers do not resume TLS sessions', 1
		  if $zk->server_line eq '3.9';
		ok($resumed,
			"a new backend resumed a TLS session instead of a full handshake (backend $backends)");
	}
	is($locked, $backends, 'every backend, resumed or not, took a lock in identity a\'s directory');
}

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
	# The session's TLS context holds the certificate and key: a reconnect
	# reads neither (171_tls_trust: it reads the CA and CRL files).
	my $key = $east->data_dir . '/zk-client.key';
	rename($key, "$key.away") or die $!;
	$zk->kill_server($i);
	ok( poll_until(sub {
			my ($st, $id, $srv) = split /\|/,
			  $s->query_safe("SELECT state, session_id, coalesce(server, '') FROM zk_session()");
			$st eq 'connected' && $id eq $sid && $srv !~ /:$port$/;
		}),
		'the same session reconnects to another server over TLS, with the key file gone');
	rename("$key.away", $key) or die $!;
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
	ok(compile_peers("$PostgreSQL::Test::Utils::tmp_check/interop_classes",
			"$FindBin::Bin/../interop/LockPeer.java"),
		'the Curator peer compiles');
	# ZooKeeper 3.9 servers speak only TLS 1.3 by default (ZOOKEEPER-4415),
	# bookworm's 3.8.0 Java client only TLS 1.2 unless its protocol is set
	# (ZOOKEEPER-5053): against 3.9 the peer asks for TLS 1.3.
	my $p = curator(
		$hosts, 'curator-tls', '/zklock/interop', 'mutex',
		tls => {
			keystore   => $certs->file('a.pem'),
			truststore => $ca,
			protocol   => $zk->server_line eq '3.9' ? 'TLSv1.3' : undef });
	my $s = waiter($east);
	$s->query_safe("SELECT zk_lock('interop')");
	is(peer_cmd($p, 'try 300'), 'busy', 'Curator cannot take the lock zklock holds');
	$s->query_safe("SELECT zk_unlock('interop')");
	like(peer_cmd($p, 'acquire'), qr/^acquired/, 'Curator takes it once zklock released it');
	is($west->safe_psql('postgres', "SELECT zk_try_lock('interop')"), 'f',
		'zklock cannot take it while Curator holds it');
	like(peer_cmd($p, 'release'), qr/^released/, 'Curator releases');
	peer_quit($p);
	$s->quit;
}

# --- the errors: class 08, naming TLS, the server or the file, in time
my $plain = ZkEnsemble->new(servers => 1);
my $errs = PostgreSQL::Test::Cluster->new('errors');
$errs->init;
$errs->append_conf('postgresql.conf', "zklock.connect_timeout = 3000\n");
{
	# A machine trust store that holds a CA the ensemble's file does not:
	# OpenSSL's default paths read SSL_CERT_FILE from the environment.
	local $ENV{SSL_CERT_FILE} = $certs->file('sys-ca.pem');
	$errs->start;
}
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

# TLS off against the TLS port: no session, a plain connection error
# that names TLS first.
my ($e) = try_with('zklock.ssl' => 'off');
like($e, qr/ERROR:  08001: could not connect to ZooKeeper at.*\n.*\nHINT:  A port that serves only TLS \(secureClientPort\) closes plain-text connections so/,
	'plain text against a TLS-only ensemble does not connect, and the hint names TLS first');
# And TLS on with the right files works on this cluster too.
($e) = try_with();
is($e, '', 'the right files connect');

# --- the ensemble is authenticated: each server certificate below is the
# test CA's or another CA's, served by a real ZooKeeper server of its own.
# A refusal fails at once (every server refused), naming the server, the
# name it was reached under and what the certificate carries.
sub tls_server
{
	my ($name) = @_;
	return ZkEnsemble->new(
		servers => 1,
		tls     => {
			keystore    => $certs->file("$name.pem"),
			truststore  => $ca,
			client_cert => $a->{cert},
			client_key  => $a->{key} });
}

sub refused_fast
{
	my ($what, $took) = @_;
	ok($took < 3, "$what: refused before connect_timeout (took ${\ sprintf '%.1f', $took} s)");
}

{
	my $srv = tls_server('server-elsewhere');
	my $port = $srv->port(1);
	my ($e, $took) = try_with('zklock.hosts' => "127.0.0.1:$port");
	like($e,
		qr/ERROR:  08001: could not connect to ZooKeeper server "127\.0\.0\.1:$port" over TLS\nDETAIL:  The server's certificate does not name "127\.0\.0\.1", the address it was reached under; it carries DNS:elsewhere\.example\.\nHINT:  .*zklock\.ssl_hostname_verification off/,
		'a certificate for another host is refused, naming the server, the address and the names it carries');
	refused_fast('another host', $took);
	($e) = try_with('zklock.hosts' => "127.0.0.1:$port",
		'zklock.ssl_hostname_verification' => 'off');
	is($e, '', 'with zklock.ssl_hostname_verification off, the CA alone decides');
	$errs->safe_psql('postgres',
		'ALTER SYSTEM RESET zklock.ssl_hostname_verification; SELECT pg_reload_conf()');
	$srv->stop;
}
{
	my $srv = tls_server('server-localhost');
	my $port = $srv->port(1);
	my ($e) = try_with('zklock.hosts' => "localhost:$port");
	is($e, '', 'a certificate that names the host zklock.hosts names is accepted (by name)');
	($e) = try_with('zklock.hosts' => "127.0.0.1:$port");
	like($e, qr/DETAIL:  The server's certificate does not name "127\.0\.0\.1", the address it was reached under; it carries DNS:localhost\./,
		'the same server reached by address is refused: the address is not in the certificate');
	$srv->stop;
}
{
	my $srv = tls_server('server-sysca');
	my ($e, $took) = try_with('zklock.hosts' => $srv->connect_string);
	like($e,
		qr/ERROR:  08001: could not connect to ZooKeeper server "127\.0\.0\.1:\d+" over TLS\nDETAIL:  The server's certificate did not verify with zklock\.ssl_ca_file ".*ca\.pem": unable to get local issuer certificate/,
		'a server certificate that only the machine\'s default trust store vouches for is refused');
	refused_fast('a CA of the default store', $took);
	$srv->stop;
}
{
	my $srv = tls_server('server-revoked');
	my ($e) = try_with('zklock.hosts' => $srv->connect_string);
	is($e, '', 'the revoked certificate is accepted without zklock.ssl_crl_file');
	my $took;
	($e, $took) = try_with('zklock.hosts' => $srv->connect_string,
		'zklock.ssl_crl_file' => $certs->file('ca.crl'));
	like($e,
		qr/DETAIL:  The server's certificate did not verify with zklock\.ssl_ca_file ".*ca\.pem" and zklock\.ssl_crl_file ".*ca\.crl": certificate revoked/,
		'with zklock.ssl_crl_file, a revoked server certificate is refused');
	refused_fast('a revoked certificate', $took);
	($e) = try_with('zklock.ssl_crl_file' => $certs->file('ca.crl'));
	is($e, '', 'and the ensemble, whose certificate is not revoked, is accepted with it');
	($e) = try_with('zklock.ssl_crl_file' => 'nowhere.crl');
	like($e, qr/ERROR:  58P01: could not open ZooKeeper TLS file ".*nowhere\.crl": No such file.*\n.*zklock\.ssl_crl_file/,
		'a missing CRL file is named');
	$errs->safe_psql('postgres', 'ALTER SYSTEM RESET zklock.ssl_crl_file; SELECT pg_reload_conf()');
	$srv->stop;
}
{
	my $srv = tls_server('server-expired');
	my ($e, $took) = try_with('zklock.hosts' => $srv->connect_string);
	like($e,
		qr/DETAIL:  The server's certificate did not verify with zklock\.ssl_ca_file ".*ca\.pem": certificate has expired/,
		'an expired server certificate is refused');
	refused_fast('an expired certificate', $took);
	$srv->stop;
}

# A server that speaks only TLS 1.3 (as 3.9 servers do by default) refuses
# a client certificate after the handshake, at the first read: every
# server closes at once.  The error still names the certificate, not
# maxClientCnxns.
{
	my $srv = ZkEnsemble->new(
		servers    => 1,
		extra_conf => {
			'ssl.enabledProtocols' => 'TLSv1.3',
			'ssl.protocol'         => 'TLSv1.3',
			'ssl.ciphersuites'     => 'TLS_AES_128_GCM_SHA256,TLS_AES_256_GCM_SHA384' },
		tls        => {
			keystore    => $certs->file('server.pem'),
			truststore  => $ca,
			client_cert => $a->{cert},
			client_key  => $a->{key} });
	my ($e) = try_with('zklock.hosts' => $srv->connect_string,
		'zklock.ssl_cert_file' => $rogue->{cert}, 'zklock.ssl_key_file' => $rogue->{key});
	like($e,
		qr/ERROR:  08001: could not connect to ZooKeeper server "127\.0\.0\.1:\d+" over TLS\n.*(refused the client certificate|ended the connection).*rogue\.crt/,
		'TLS 1.3 only: a client certificate the server does not trust is named, not maxClientCnxns');
	$srv->stop;
}

# --- a backend whose descriptors go past 1024 opens its session over TLS
# there (the handshake waits with poll; select's fd_set holds 1024).  The
# postmaster starts with a higher descriptor limit, and one backend opens
# 1100 relation files before its first zklock call.
{
	my $wrap = "$PostgreSQL::Test::Utils::tmp_check/pg_ctl_nofile";
	make_path($wrap);
	my ($bindir) = grep { -x "$_/pg_ctl" } split /:/, $ENV{PATH};
	my $real = "$bindir/pg_ctl";
	open my $fh, '>', "$wrap/pg_ctl" or die $!;
	print $fh "#!/bin/sh\nulimit -n 4096 || exit 1\nexec '$real' \"\$@\"\n";
	close $fh;
	chmod 0755, "$wrap/pg_ctl";
	my $many = tls_cluster('many_fds', sub {
		my ($node) = @_;
		$node->append_conf('postgresql.conf', "max_files_per_process = 3000\n");
		local $ENV{PATH} = "$wrap:$ENV{PATH}";
		$node->start;
	});
	$many->safe_psql('postgres',
		'DO $$ BEGIN FOR i IN 1..1100 LOOP EXECUTE format(\'CREATE TABLE fd_%s (i int)\', i); END LOOP; END $$');
	my $s = waiter($many);
	my $pid = backend_pid($s);
	$s->query_safe('DO $$ BEGIN FOR i IN 1..1100 LOOP EXECUTE format(\'SELECT count(*) FROM fd_%s\', i); END LOOP; END $$');
	like($s->query_safe("SELECT zk_lock('high-fd')"), qr/^\d+$/,
		'a backend holding 1100 relation files takes a lock over TLS');
	my @socks = grep { (readlink("/proc/$pid/fd/$_") // '') =~ /^socket:/ && $_ > 1024 }
	  map { m{/(\d+)$} ? $1 : () } glob("/proc/$pid/fd/*");
	ok(scalar(@socks) >= 1, "its ZooKeeper connection is on a descriptor above 1024 (@socks)");
	is($west->safe_psql('postgres', "SELECT zk_try_lock('high-fd')"), 'f',
		'and the lock excludes another cluster');
	is($s->query_safe("SELECT zk_unlock('high-fd')"), 't', 'it releases');
	$s->quit;
	$many->stop('fast');
}

$_->quit for $ew, $ww;
finish(nodes => [ $east, $west, $errs ], zk => $zk);
$plain->stop;
done_testing();
