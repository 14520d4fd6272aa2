# Copyright (c) zklock contributors
#
# zklock.sasl_mechanism: ensembles that admit only sessions authenticated
# with SASL (ZooKeeper's SASL provider, enforce.auth.enabled with
# enforce.auth.schemes=sasl), DIGEST-MD5 with a JAAS Server section.
# Locks work and exclude across two clusters; a held lock survives a
# server restart (the library authenticates again on the reconnect); a
# wrong password, an unknown user, and a server that demands SASL from a
# backend that offers none each fail at once in class 28, naming SASL, the
# mechanism and the server, and leave no thread or node behind; SASL works
# over TLS too.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use File::Copy qw(copy);
use ZkCerts;
use ZkEnsemble;
use ZkGdb;
use ZklockTest;

my %users = (zklock => 'sasl-pw-1', other => 'sasl-pw-2');
my $zk = ZkEnsemble->new(servers => 3, sasl => { users => \%users });
my $hosts = $zk->connect_string;

# A password file in the data directory, mode 0600, named relative to it.
sub password_file
{
	my ($node, $name, $pw) = @_;
	my $f = $node->data_dir . "/$name";
	open my $fh, '>', $f or die "$f: $!";
	print $fh "$pw\n";
	close $fh;
	chmod 0600, $f;
	return $name;
}

sub sasl_cluster
{
	my ($name, $user, $pw, @conf) = @_;
	return zk_cluster($name, undef, hosts => $hosts,
		before_start => sub { password_file($_[0], 'zk-sasl.pw', $pw) },
		conf => [
			"zklock.sasl_mechanism = 'DIGEST-MD5'",
			"zklock.sasl_user = '$user'",
			"zklock.sasl_password_file = 'zk-sasl.pw'", @conf ]);
}

# The log of sasl1 from its start: PostgreSQL 15's tests keep one log
# directory for both server lines, and a file of the same name gets both.
my $n1_log_at = -s "$PostgreSQL::Test::Utils::log_path/200_sasl_sasl1.log" // 0;
my $n1 = sasl_cluster('sasl1', 'zklock', $users{zklock});
my $n2 = sasl_cluster('sasl2', 'zklock', $users{zklock});

# Locks work and exclude across the two clusters.
my $a = waiter($n1);
is($a->query_safe("SELECT zk_try_lock('sasl-x')"), 't', 'a lock is taken over SASL');
is($n2->safe_psql('postgres', "SELECT zk_try_lock('sasl-x')"), 'f',
	'the other cluster cannot take it');
is($a->query_safe("SELECT zk_unlock('sasl-x')"), 't', 'released');
is($n2->safe_psql('postgres', "SELECT zk_try_lock('sasl-x')"), 't',
	'then the other cluster takes it');

# How many SASL logins of user zklock the servers logged so far.
sub logins
{
	my $n = 0;
	for my $i (1 .. 3)
	{
		open my $fh, '<', $zk->log_file($i) or next;
		$n += grep { /Successfully authenticated client: authenticationID=zklock;/ } <$fh>;
		close $fh;
	}
	return $n;
}
cmp_ok(logins(), '>=', 2, 'the servers logged the SASL logins of both sessions');

# sasl ACLs: the nodes and directories carry the sasl identity the server
# assigned (whoAmI), and everyone may read; another SASL user may neither
# delete a held node nor lock in zklock's directory (42501).
like($a->query_safe("SELECT zk_lock('sasl-acl')"), qr/^\d+$/, 'a lock for the ACL checks');
my $node_path = $a->query_safe("SELECT node FROM zk_locks WHERE name = 'sasl-acl'");
is(zkq({ sasl => "zklock:$users{zklock}" }, $hosts, 'acl', $node_path),
	"sasl:zklock 31\nworld:anyone 1", 'the lock node: sasl:zklock all, everyone read');
is(zkq({ sasl => "zklock:$users{zklock}" }, $hosts, 'acl', '/zklock/sasl-acl'),
	"sasl:zklock 31\nworld:anyone 1", 'its directory likewise');
is(zkq({ sasl => "other:$users{other}" }, $hosts, 'delete', $node_path), 'NoAuthError',
	'another SASL identity cannot delete the held node');
my $o = sasl_cluster('saslother', 'other', $users{other});
my ($orc, $oout, $oerr) = $o->psql('postgres',
	"\\set VERBOSITY verbose\nSELECT zk_try_lock('sasl-acl')");
like($oerr, qr/ERROR:  42501: permission denied to create ZooKeeper node "\/zklock\/sasl-acl\/.*\n.*HINT:  The node belongs to another ZooKeeper identity: check zklock.sasl_user/s,
	'another SASL identity gets 42501 in zklock\'s directory');
$o->stop;
unlike(slurp_file($n1->logfile, $n1_log_at), qr/did not say which SASL identity/,
	'the server answered whoAmI (no identity was assumed)');
is($a->query_safe("SELECT zk_unlock('sasl-acl')"), 't', 'released');

# A directory another SASL identity made with an open ACL is refused (55000),
# naming the SASL identity as the one that should guard it.
is(zkq({ sasl => "other:$users{other}" }, $hosts, 'create', '/sasl-open/dir'), 'created',
	'another SASL identity makes an open directory');
($orc, $oout, $oerr) = $n1->psql('postgres',
	"\\set VERBOSITY verbose\nSET zklock.root = '/sasl-open';\nSELECT zk_lock('dir', '5s')");
like($oerr, qr/ERROR:  55000: ZooKeeper lock directory "\/sasl-open\/dir" is not protected by the SASL identity\n.*HINT:  .* only to the identity of zklock.sasl_user \(or zklock.sasl_principal\)\./s,
	'zklock refuses it, naming the SASL identity');
like(zkq({ sasl => "other:$users{other}" }, $hosts, 'acl', '/sasl-open/dir'), qr/^world:anyone 31$/m,
	'the directory is still there, open');
ok(poll_until(sub { zkq({ sasl => "other:$users{other}" }, $hosts, 'ls', '/sasl-open/dir') eq '' }, 30),
	'and zklock left no node in it');


# A cluster whose credentials each case below sets, reloaded.
my $bad = sasl_cluster('sasl3', 'zklock', 'wrong-password');

my ($err, $took, $threads) = failing_lock($bad, 'sasl-bad');
note $err;
like($err, qr/ERROR:  28000: SASL authentication with ZooKeeper at "\Q$hosts\E" failed/,
	'a wrong password fails with 28000 naming SASL');
like($err, qr/DETAIL:  Mechanism DIGEST-MD5 as user "zklock": server 127\.0\.0\.1:\d+/,
	'the detail names the mechanism, the user and the server');
cmp_ok($took, '<', 10, 'within zklock.connect_timeout');
is($threads, 1, 'no thread of the session is left in the backend');

# How many refused SASL logins the servers logged so far.
sub refusals
{
	my $n = 0;
	for my $i (1 .. 3)
	{
		open my $fh, '<', $zk->log_file($i) or next;
		$n += grep { /failed to SASL authenticate/ } <$fh>;
		close $fh;
	}
	return $n;
}

# The refusal can come before the backend has published its handle, when
# the session watcher drops what it hears: gdb holds the main thread there
# until a server has refused the login; the call still fails at once.
{
	my $s = waiter($bad);
	$s->query_safe("LOAD 'zklock'");
	my $g = ZkGdb->attach(backend_pid($s), non_stop => 1);
	SKIP:
	{
		skip "no gdb here: $ZkGdb::why", 3 unless $g;
		like($g->cmd('break zkl_sess_state_start') // '', qr/Breakpoint 1 at/,
			'a breakpoint where the new handle is published');
		$g->cmd('continue -a &');
		my $before = refusals();
		start_wait($s, "\\set VERBOSITY verbose\nSELECT zk_lock('sasl-bad')");
		ok($g->wait_for(qr/hit Breakpoint 1\b/, 30)
			  && poll_until(sub { refusals() > $before }, 30),
			'a server refused the login while the handle was not published')
		  or diag($g->output);
		my $t0 = time;
		$g->cmd('continue -a &');
		$g->detach;
		my (undef, $gerr) = finish_wait($s);
		like($gerr, qr/ERROR:  28000: SASL authentication with ZooKeeper .* failed/,
			'the call still fails at once with 28000')
		  or diag("took " . (time - $t0) . " s");
	}
	$s->quit;
}

alter_system($bad, 'zklock.sasl_user' => 'nobody');
($err, $took, $threads) = failing_lock($bad, 'sasl-bad');
like($err, qr/ERROR:  28000: SASL authentication with ZooKeeper .* failed\n.*DETAIL:  Mechanism DIGEST-MD5 as user "nobody": server 127\.0\.0\.1:\d+ ended the exchange/s,
	'an unknown user fails with 28000 naming SASL, the mechanism and the server');
cmp_ok($took, '<', 10, 'within zklock.connect_timeout');
is($threads, 1, 'no thread left');

# A server that demands SASL, from a backend that offers none: named as
# such, in class 28, not "could not create ZooKeeper node" in 38000.
alter_system($bad, 'zklock.sasl_mechanism' => '');
($err, $took, $threads) = failing_lock($bad, 'sasl-bad');
like($err, qr/ERROR:  28000: could not create ZooKeeper node .*\n.*DETAIL:  The ZooKeeper server closed the session because it requires SASL authentication, and zklock.sasl_mechanism is not set/s,
	'a server that demands SASL: 28000 saying so');
cmp_ok($took, '<', 10, 'at once');
is($n1->safe_psql('postgres', "SELECT count(*) FROM zk_lock_queue('sasl-bad')"), '0',
	'no node was left behind');

# Settings: another mechanism is refused with a hint; a password file
# others can read is refused as zklock.ssl_key_file is.
my ($ret, $out, $stderr) = $bad->psql('postgres',
	"\\set VERBOSITY verbose\nLOAD 'zklock';\nALTER SYSTEM SET zklock.sasl_mechanism = 'PLAIN'");
like($stderr, qr/22023: invalid value for parameter "zklock.sasl_mechanism": "PLAIN"\n.*DETAIL:  zklock does not support the SASL mechanism "PLAIN".\n.*HINT:  Use DIGEST-MD5/s,
	'another mechanism is refused (22023) with a hint');
($ret, $out, $stderr) = $bad->psql('postgres',
	"ALTER SYSTEM SET zklock.sasl_mechanism = 'digest-md5'; SELECT pg_reload_conf()");
is($bad->safe_psql('postgres', "LOAD 'zklock'; SHOW zklock.sasl_mechanism"), 'DIGEST-MD5',
	'a mechanism is taken in any case and shown as SASL names it');
chmod 0644, $bad->data_dir . '/zk-sasl.pw';
($err) = failing_lock($bad, 'sasl-bad');
like($err, qr/ERROR:  08001: ZooKeeper SASL password file ".*zk-sasl\.pw" has group or world access/,
	'a password file readable by others is refused');
chmod 0600, $bad->data_dir . '/zk-sasl.pw';
# A password longer than zklock reads (1024 bytes) is refused, not cut.
alter_system($bad, 'zklock.sasl_password_file' => password_file($bad, 'long.pw', 'p' x 1025));
($err) = failing_lock($bad, 'sasl-bad');
like($err, qr/ERROR:  22023: password in ZooKeeper SASL password file ".*long\.pw" is too long\n.*DETAIL:  The password is the file's first line, of at most 1024 bytes\./s,
	'a password file longer than 1024 bytes is refused (22023), naming the file');
alter_system($bad, 'zklock.sasl_password_file' => 'zk-sasl.pw');

# A held lock survives the restart of every server in turn: each
# reconnect authenticates again, and the session stays the same.
like($a->query_safe("SELECT zk_lock('sasl-held')"), qr/^\d+$/, 'a lock is held');
my $before = logins();
for my $i (1 .. 3)
{
	$zk->stop_server($i);
	$zk->restart_server($i);
	$zk->wait_for_quorum;
}
ok(poll_until(sub { (eval { $a->query_safe("SELECT zk_try_lock('sasl-other')") } // '') eq 't' }, 30),
	'after the restarts the session authenticates again and works');
is($n2->safe_psql('postgres', "SELECT zk_try_lock('sasl-held')"), 'f',
	'the held lock is still held');
cmp_ok(logins(), '>', $before, 'the reconnects logged in with SASL again');
is($a->query_safe("SELECT zk_unlock('sasl-held')"), 't', 'and released by its holder');

# SASL over TLS: the certificate secures the wire, SASL names the user
# (both at once: the public init calls of the client take one or the
# other; C client patch 0042).
my $certs = ZkCerts->new(dir => "$PostgreSQL::Test::Utils::tmp_check/certs");
my $ca = $certs->file('ca.pem');
my $c = $certs->client('a');
my $tzk = ZkEnsemble->new(
	servers => 1,
	sasl    => { users => \%users },
	tls     => {
		keystore    => $certs->file('server.pem'),
		truststore  => $ca,
		client_cert => $c->{cert},
		client_key  => $c->{key} });
$hosts = $tzk->connect_string;
my $tn = sasl_cluster('sasltls', 'zklock', $users{zklock},
	"zklock.ssl = on", "zklock.ssl_ca_file = '$ca'",
	"zklock.ssl_cert_file = 'zk-client.crt'", "zklock.ssl_key_file = 'zk-client.key'");
copy($c->{cert}, $tn->data_dir . '/zk-client.crt') or die $!;
copy($c->{key}, $tn->data_dir . '/zk-client.key') or die $!;
chmod 0600, $tn->data_dir . '/zk-client.key';
like($tn->safe_psql('postgres', "SELECT zk_lock('sasl-tls')"), qr/^\d+$/,
	'a lock is taken over TLS with SASL');
my $tlog = do { local $/; open my $fh, '<', $tzk->log_file(1) or die $!; <$fh> };
like($tlog, qr/Successfully authenticated client: authenticationID=zklock;/,
	'the server logged the SASL login over TLS');
$tn->append_conf('postgresql.conf', "zklock.sasl_password_file = 'wrong.pw'\n");
password_file($tn, 'wrong.pw', 'not-it');
$tn->reload;
my ($r2, $o2, $e2) = $tn->psql('postgres', "SELECT zk_lock('sasl-tls')");
like($e2, qr/SASL authentication with ZooKeeper .* failed\n.*Mechanism DIGEST-MD5 as user "zklock": server 127\.0\.0\.1:\d+ ended the exchange/s,
	'over TLS a wrong password is named as a SASL failure');

done_testing();
