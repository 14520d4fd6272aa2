# Copyright (c) zklock contributors
#
# zklock.sasl_mechanism = 'GSSAPI': Kerberos against a private MIT KDC
# (ZkKdc, started first) and servers that log in to zookeeper/localhost
# from a keytab and admit only SASL sessions.  zklock authenticates as
# zklock.sasl_principal from zklock.sasl_keytab alone, even when the
# backend's KRB5CCNAME holds another principal's tickets; each server is
# asked for as written in zklock.hosts (zookeeper/localhost, not the
# address).  Locks work and exclude across two clusters, a held lock
# survives the restart of every server after the first tickets expired; a missing keytab, a principal the keytab lacks, a KDC that is
# down and a wrong service name fail at once (28000, 58P01), naming
# Kerberos or GSSAPI; a KDC that never answers fails at
# zklock.connect_timeout (08001).  Kerberos works over TLS too.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";

use File::Copy qw(copy);
use IO::Socket::INET;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use ZkCerts;
use ZkEnsemble;
use ZkGdb;
use ZkKdc;
use ZklockTest;

# Tickets live 20 s: the restarts below come after the first ones expired.
my $lifetime = 20;
my $kdc = ZkKdc->new(dir => "$PostgreSQL::Test::Utils::tmp_check/kdc",
	ticket_lifetime => $lifetime);
my $realm = $kdc->realm;
my $zk_keytab = $kdc->keytab('zk', 'zookeeper/localhost');
my $client_keytab = $kdc->keytab('zklock', 'zklock');
my $other_keytab = $kdc->keytab('other', 'other');

# Every process of the test (and the clusters' backends) reads our realm.
my %kenv = $kdc->env;
@ENV{ keys %kenv } = values %kenv;
# Another principal's tickets in the environment: zklock must not use them.
my $other_cc = "FILE:$PostgreSQL::Test::Utils::tmp_check/kdc/other.ccache";
$kdc->kinit($other_keytab, 'other', $other_cc);
$ENV{KRB5CCNAME} = $other_cc;

my $zk = ZkEnsemble->new(
	servers => 3,
	sasl    => {
		kerberos => {
			keytab    => $zk_keytab,
			principal => "zookeeper/localhost\@$realm",
			krb5_conf => $kdc->krb5_conf } });
my $hosts = join ',', map { 'localhost:' . $zk->port($_) } 1 .. 3;

sub gss_cluster
{
	my ($name, @conf) = @_;
	return zk_cluster($name, undef, hosts => $hosts,
		before_start => sub {
			my $keytab = $_[0]->data_dir . '/zk.keytab';
			copy($client_keytab, $keytab) or die $!;
			chmod 0600, $keytab;
		},
		conf => [
			"zklock.sasl_mechanism = 'GSSAPI'",
			"zklock.sasl_principal = 'zklock\@$realm'",
			"zklock.sasl_keytab = 'zk.keytab'", @conf ]);
}

my $first_ticket = time;
# The log of gss1 from its start: PostgreSQL 15's tests keep one log
# directory for both server lines, and a file of the same name gets both.
my $n1_log_at = -s "$PostgreSQL::Test::Utils::log_path/201_sasl_gssapi_gss1.log" // 0;
my $n1 = gss_cluster('gss1');
my $n2 = gss_cluster('gss2');

my $a = waiter($n1);
is($a->query_safe("SELECT zk_try_lock('gss-x')"), 't', 'a lock is taken over Kerberos');
is($n2->safe_psql('postgres', "SELECT zk_try_lock('gss-x')"), 'f',
	'the other cluster cannot take it');

sub logins
{
	my ($who) = @_;
	my $n = 0;
	for my $i (1 .. 3)
	{
		open my $fh, '<', $zk->log_file($i) or next;
		$n += grep { /Successfully authenticated client: authenticationID=\Q$who\E\@\Q$realm\E;/ } <$fh>;
		close $fh;
	}
	return $n;
}
cmp_ok(logins('zklock'), '>=', 2, 'the servers logged the Kerberos logins of zklock');
is(logins('other'), 0, 'and none of the principal in KRB5CCNAME');

my $node_path = $a->query_safe("SELECT node FROM zk_locks WHERE name = 'gss-x'");
like($n1->safe_psql('postgres', "SELECT count(*) FROM zk_lock_queue('gss-x')"), qr/^1$/,
	'the queue reads');
unlike(slurp_file($n1->logfile, $n1_log_at), qr/did not say which SASL identity/,
	'the server answered whoAmI');

# A held lock survives the restart of every server in turn, after the
# session's first tickets expired: the reconnects authenticate with new
# tickets from the keytab.  This proves the outcome, not who renewed them:
# MIT's GSS library refreshes credentials acquired from a client keytab by
# itself (at half their lifetime, in gss_init_sec_context), so it passes
# without zklock's own renewal before a reconnect too.
ok(poll_until(sub { time > $first_ticket + $lifetime + 5 }, $lifetime + 30),
	'the first tickets have expired');
my $before = logins('zklock');
for my $i (1 .. 3)
{
	$zk->stop_server($i);
	$zk->restart_server($i);
	$zk->wait_for_quorum;
}
ok(poll_until(sub { (eval { $a->query_safe("SELECT zk_try_lock('gss-other')") } // '') eq 't' }, 30),
	'after the restarts the session authenticates again and works');
is($n2->safe_psql('postgres', "SELECT zk_try_lock('gss-x')"), 'f', 'the lock is still held');
cmp_ok(logins('zklock'), '>', $before,
	'the reconnects logged in with Kerberos again, with tickets past the first ones\' lifetime');
is($a->query_safe("SELECT zk_unlock('gss-x')"), 't', 'released');

# The sasl ACL: another principal may not lock in zklock's directory.
my $o = PostgreSQL::Test::Cluster->new('gssother');
$o->init;
copy($other_keytab, $o->data_dir . '/zk.keytab') or die $!;
chmod 0600, $o->data_dir . '/zk.keytab';
$o->append_conf('postgresql.conf', join("\n",
	"zklock.hosts = '$hosts'", "zklock.sasl_mechanism = 'GSSAPI'",
	"zklock.sasl_principal = 'other\@$realm'", "zklock.sasl_keytab = 'zk.keytab'") . "\n");
$o->start;
$o->safe_psql('postgres', 'CREATE EXTENSION zklock');
my (undef, undef, $oerr) = $o->psql('postgres',
	"\\set VERBOSITY verbose\nSELECT zk_try_lock('gss-x')");
like($oerr, qr/ERROR:  42501: permission denied to create ZooKeeper node "\/zklock\/gss-x\//,
	'another principal gets 42501 in zklock\'s directory (sasl ACL)');
$o->stop;

# A server that does not name the session's identity (whoAmI refused, as
# by a server older than 3.7, or unanswered): zklock does not guess it.
# These servers strip the realm (sasl:zklock, not the principal), so a
# guess of the principal would call zklock's own entries foreign.  gdb
# makes the backend's whoAmI fail (connection loss) before it is sent.
SKIP:
{
	my $w = waiter($n1);
	# zklock's library loaded (the session opens only at the first call)
	$w->query_safe("LOAD 'zklock'");
	my $g = ZkGdb->attach(backend_pid($w));
	skip $ZkGdb::why, 4 unless $g;
	$g->cmd('set $failed = 0');
	like($g->break_run('break zoo_awhoami',
			"silent\nset \$failed = \$failed + 1\nreturn (int) -4\ncontinue"),
		qr/Breakpoint 1 at/, 'gdb makes whoAmI fail');
	$g->cmd('continue &');
	my $log_at = -s $n1->logfile;
	my $got = eval { $w->query_safe("SELECT zk_try_lock('gss-x')") } // "error: $@";
	$g->cmd('interrupt', 10);
	$g->wait_for(qr/SIGINT|stopped/, 10);
	my ($failed) = ($g->cmd('print $failed', 10) // '') =~ /= (\d+)/;
	$g->detach;
	cmp_ok($failed // 0, '>=', 1, 'the session\'s whoAmI failed');
	is($got, 't', 'a lock is still taken in zklock\'s own directory');
	like(substr(slurp_file($n1->logfile), $log_at),
		qr/did not say which SASL identity it assigned this session/,
		'the log says the identity is unknown');
	$w->quit;
}

# Failures, each in a fresh backend of a cluster reconfigured for it (the
# thread that got the credentials ends just after handing them over: 10 s
# for it to go).
my $bad = gss_cluster('gss3');

alter_system($bad, 'zklock.sasl_keytab' => 'missing.keytab');
my ($err, $took, $threads) = failing_lock($bad, 'gss-bad', 10);
like($err, qr/ERROR:  58P01: could not access ZooKeeper Kerberos keytab ".*missing\.keytab"/,
	'a missing keytab is named (58P01)');

alter_system($bad, 'zklock.sasl_keytab' => 'zk.keytab', 'zklock.sasl_principal' => "nobody\@$realm");
($err, $took, $threads) = failing_lock($bad, 'gss-bad', 10);
like($err, qr/ERROR:  28000: could not get Kerberos credentials of "nobody\@\Q$realm\E" for SASL GSSAPI from keytab/,
	'a principal the keytab lacks: 28000 naming Kerberos and GSSAPI');
cmp_ok($took, '<', 10, 'at once');
is($threads, 1, 'no thread left');

alter_system($bad, 'zklock.sasl_principal' => "zklock\@$realm", 'zklock.sasl_service' => 'kafka');
($err, $took, $threads) = failing_lock($bad, 'gss-bad', 10);
like($err, qr/ERROR:  28000: SASL authentication \(Kerberos, GSSAPI\) with ZooKeeper at .* failed\n.*DETAIL:  Mechanism GSSAPI as principal "zklock\@\Q$realm\E": server 127\.0\.0\.1:\d+, starting the negotiation: .*not found in Kerberos database/s,
	'a wrong service name: 28000 with the KDC\'s answer');
cmp_ok($took, '<', 10, 'within connect_timeout');
is($threads, 1, 'no thread left');

alter_system($bad, 'zklock.sasl_service' => 'zookeeper');
$kdc->stop;
($err, $took, $threads) = failing_lock($bad, 'gss-bad', 10);
like($err, qr/ERROR:  28000: could not get Kerberos credentials of "zklock\@\Q$realm\E" for SASL GSSAPI from keytab .*\n.*DETAIL:  GSS: .*Cannot contact any KDC/s,
	'a KDC that is down: 28000 naming Kerberos, GSSAPI and the cause');
cmp_ok($took, '<', 10, 'at once');
is($threads, 1, 'no thread left');

# A KDC that never answers: its port held by sockets that read nothing.
# The call gives up at zklock.connect_timeout; the thread that asked the
# KDC ends when Kerberos' own timeouts do.
{
	my $tcp = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => $kdc->port,
		Proto => 'tcp', Listen => 16, ReuseAddr => 1) or die "listen: $!";
	my $udp = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => $kdc->port,
		Proto => 'udp') or die "udp: $!";
	alter_system($bad, 'zklock.connect_timeout' => '3000');
	my $s = waiter($bad);
	my $pid = $s->query_safe('SELECT pg_backend_pid()');
	$s->query_safe('\\set VERBOSITY verbose');
	my $t0 = time;
	start_wait($s, "SELECT zk_lock('gss-bad')");
	# (named wait events of extensions since PostgreSQL 17)
	my $event = $bad->pg_version >= 17 ? 'ZkConnect' : 'Extension';
	ok(poll_until(sub { $bad->safe_psql('postgres',
		"SELECT wait_event FROM pg_stat_activity WHERE pid = $pid") eq $event }, 10),
		"while it waits for the KDC the backend shows the wait event $event");
	my (undef, $err) = finish_wait($s);
	my $took = time - $t0;
	like($err, qr/ERROR:  08001: could not get Kerberos credentials of "zklock\@\Q$realm\E" for SASL GSSAPI\n.*DETAIL:  The KDC did not answer within 3000 ms\./s,
		'a KDC that never answers: 08001 at zklock.connect_timeout');
	cmp_ok($took, '<', 8, 'the call returned at connect_timeout (3 s), not at Kerberos\' timeouts');
	ok(poll_until(sub { my @t = glob("/proc/$pid/task/*"); @t == 1 }, 90),
		'the thread that asked the KDC ends by itself');
	is($s->query_safe('SELECT 1'), '1', 'the backend goes on');
	$s->quit;
	close $tcp;
	close $udp;
	alter_system($bad, 'zklock.connect_timeout' => '10000');
}
$kdc->start;

# Kerberos over TLS: a server whose certificate names localhost, as
# zklock.hosts does; TLS for the wire, GSSAPI for the identity.
my $certs = ZkCerts->new(dir => "$PostgreSQL::Test::Utils::tmp_check/certs");
my $ca = $certs->file('ca.pem');
my $c = $certs->client('a');
my $tzk = ZkEnsemble->new(
	servers => 1,
	sasl    => {
		kerberos => {
			keytab    => $zk_keytab,
			principal => "zookeeper/localhost\@$realm",
			krb5_conf => $kdc->krb5_conf } },
	tls => {
		keystore    => $certs->file('server-localhost.pem'),
		truststore  => $ca,
		client_cert => $c->{cert},
		client_key  => $c->{key} });
$hosts = 'localhost:' . $tzk->port(1);
my $tn = gss_cluster('gsstls', "zklock.ssl = on", "zklock.ssl_ca_file = '$ca'",
	"zklock.ssl_cert_file = '$c->{cert}'", "zklock.ssl_key_file = 'zk-client.key'");
copy($c->{key}, $tn->data_dir . '/zk-client.key') or die $!;
chmod 0600, $tn->data_dir . '/zk-client.key';
like($tn->safe_psql('postgres', "SELECT zk_lock('gss-tls')"), qr/^\d+$/,
	'a lock is taken over TLS with Kerberos');
my $tlog = do { local $/; open my $fh, '<', $tzk->log_file(1) or die $!; <$fh> };
like($tlog, qr/Successfully authenticated client: authenticationID=zklock\@\Q$realm\E;/,
	'the server logged the Kerberos login over TLS');

done_testing();
