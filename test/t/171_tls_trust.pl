# Copyright (c) zklock contributors
#
# Trust follows the files (zklock.ssl): a TLS session resumed from a ticket
# is only as good as a full handshake under the CA and CRL files in force.
# With real TLS servers whose certificates this test makes: a new backend
# resumes another's ticket while nothing changed; a ticket made before the
# CRL or the CA file changed is not resumed after it, even when the file was
# rewritten with the same size within the same second; the bound on
# resumption counts from the full handshake that verified the chain, not
# from a ticket a resumed connection got (a TLS 1.3 server); a backend whose
# session was open across a revocation (the CRL file rewritten, or a reload
# naming another one) is refused at its next reconnect, at once and saying
# why, and so is one whose CA or CRL file was cut short or removed, until
# the file is back; a server certificate that expired since its ticket was
# made is refused, not resumed; every certificate of the chain is checked
# against the CRLs (a revoked intermediate CA is refused, and so is a chain
# without a list from each CA).  A certificate without subject alternative
# names matches a host name by its common name, never an address; the names
# of a refused certificate are escaped in messages.  A client certificate
# from an intermediate CA that only the CA file holds is sent with it.

use strict;
use warnings;

use File::Copy qw(copy);
use FindBin;
use lib "$FindBin::Bin/../perl";

use POSIX qw(strftime);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time utime);
use ZkCerts;
use ZkEnsemble;
use ZklockTest;

my $certs = ZkCerts->new(dir => "$PostgreSQL::Test::Utils::tmp_check/certs-trust");
my $a = $certs->client('a');
my $from = '20200101000000Z';
my $until = '20991231000000Z';
my $server_ext = 'extendedKeyUsage = serverAuth,clientAuth';

# The servers' own CA, whose revocations this test makes: two revocation
# lists that revoke nothing (another number each, the same size), then one
# that revokes the server's certificate.
my $sca = $certs->ca('sca', '/O=zklock test/CN=zklock server CA');
$certs->sign('sca', 'srv', '/O=zklock test/CN=127.0.0.1', $from, $until,
	"subjectAltName = IP:127.0.0.1\n$server_ext");
my $crl1 = $certs->crl('sca', 'sca-1.crl');
my $crl2 = $certs->crl('sca', 'sca-2.crl');
$certs->revoke('sca', 'srv');
my $crl_revoked = $certs->crl('sca', 'sca-revoked.crl');
is(-s $crl1, -s $crl2, 'the two revocation lists have the same size');
isnt(slurp_file($crl1), slurp_file($crl2), 'but not the same contents');

# A CA file of two CAs, and the same two in the other order: same size.
my $bundle1 = $certs->concat('bundle-1.pem', 'sca.pem', 'other-ca.pem');
my $bundle2 = $certs->concat('bundle-2.pem', 'other-ca.pem', 'sca.pem');

# One TLS server with a certificate of $keystore; the servers trust client a.
# Started unless $start is false.
sub tls_server
{
	my ($keystore, $start) = @_;
	return ZkEnsemble->new(
		servers => 1,
		start   => $start // 1,
		tls     => {
			keystore    => $keystore,
			truststore  => $certs->file('ca.pem'),
			client_cert => $a->{cert},
			client_key  => $a->{key} });
}

my $started = time;
my $zk = tls_server($certs->keystore('srv'));
my $start_s = time - $started;    # how long a server takes to start here

# The cluster preloads zklock (its backends share tickets) and reads its
# CA and CRL from files of its own, which the test rewrites in place.
my $node = PostgreSQL::Test::Cluster->new('trust');
$node->init;
my $ca_file = $node->data_dir . '/zk-ca.pem';
my $crl_file = $node->data_dir . '/zk.crl';
copy($bundle1, $ca_file) or die $!;
copy($crl1, $crl_file) or die $!;
$node->append_conf('postgresql.conf', join("\n",
	"shared_preload_libraries = 'zklock'",
	"zklock.hosts = '" . $zk->connect_string . "'",
	"zklock.session_timeout = 20000",
	"zklock.connect_timeout = 5000",
	"zklock.log_sessions = on",
	"zklock.ssl = on",
	"zklock.ssl_ca_file = 'zk-ca.pem'",
	"zklock.ssl_crl_file = 'zk.crl'",
	"zklock.ssl_cert_file = '$a->{cert}'",
	"zklock.ssl_key_file = '$a->{key}'") . "\n");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION zklock');

# A new backend takes and releases a lock: ('1/0' full handshake, '1/1'
# resumed, or the error), from zklock.log_sessions' line of its open (the
# close of the backend before may be logged after this one began).
sub new_backend
{
	my $from_pos = -s $node->logfile;
	my ($ret, $out, $err) = $node->psql('postgres',
		"SELECT zk_lock('trust', '5s'), zk_unlock('trust')");
	return $err if $ret != 0;
	my $log = slurp_file($node->logfile, $from_pos);
	return $log =~ /opened in [^\n]*\n[^\n]*TLS: (\d+) handshakes?, (\d+) resumed\./
	  ? "$1/$2" : 'no log line';
}

# Until a new backend resumes (the first after a change makes a full
# handshake and leaves its ticket): true when one did, within six.
sub resumes
{
	for (1 .. 6)
	{
		my $r = new_backend();
		return 1 if $r eq '1/1';
		return 0 if $r !~ m{^1/0$};
	}
	return 0;
}

# Rewrite a file in place with other contents of the same size, and give
# it back the whole second of its modification time: a change that size
# and seconds do not show.
sub rewrite_same_second
{
	my ($file, $contents_of) = @_;
	my @st = stat($file) or die "$file: $!";
	my $data = slurp_file($contents_of);
	die "not the same size" unless length($data) == $st[7];
	open my $fh, '+<', $file or die "$file: $!";
	print {$fh} $data;
	close $fh;
	utime($st[8], $st[9], $file) or die "utime $file: $!";
	return;
}

my $resumption = $zk->server_line ne '3.9';

SKIP:
{
	skip 'ZooKeeper 3.9 servers do not resume TLS sessions', 5 unless $resumption;

	ok(resumes(), 'a new backend resumes another\'s ticket while nothing changed');

	rewrite_same_second($crl_file, $crl2);
	is(new_backend(), '1/0',
		'after the CRL file was rewritten (same size, same second), the old ticket is not resumed');
	ok(resumes(), 'a ticket made under the new CRL file is resumed');

	rewrite_same_second($ca_file, $bundle2);
	is(new_backend(), '1/0',
		'after the CA file was rewritten (same size, same second), the old ticket is not resumed');
	ok(resumes(), 'a ticket made under the new CA file is resumed');
}

# --- the bound on resumption counts from the full handshake that verified
# the chain, not from the last ticket: a TLS 1.3 server gives a new ticket
# on a resumed connection too (OpenSSL starts its clock anew), and that
# ticket carries the older time.  The bound shortened to 10 s: a full
# handshake (A), a resumption 5 s later (B, whose new ticket is what the
# next backend finds), then a backend 11 s after A but only some 6 s after
# B.
SKIP:
{
	skip 'ZooKeeper 3.9 servers do not resume TLS sessions', 3 unless $resumption;
	my $tls13 = ZkEnsemble->new(
		servers    => 1,
		extra_conf => {
			'ssl.protocol'         => 'TLSv1.3',
			'ssl.enabledProtocols' => 'TLSv1.3',
			'ssl.ciphersuites'     => 'TLS_AES_128_GCM_SHA256,TLS_AES_256_GCM_SHA384' },
		tls => {
			keystore    => $certs->keystore('srv'),
			truststore  => $certs->file('ca.pem'),
			client_cert => $a->{cert},
			client_key  => $a->{key} });
	$node->safe_psql('postgres', join('; ',
		"ALTER SYSTEM SET zklock.hosts = '" . $tls13->connect_string . "'",
		'ALTER SYSTEM SET zklock.ssl_ticket_max_age = 10',
		'SELECT pg_reload_conf()'));
	my ($a_end, $resumed);
	for (1 .. 6)
	{
		my $r = new_backend();
		$a_end = time if $r eq '1/0';
		$resumed = $r eq '1/1';
		last unless $r eq '1/0';
	}
	ok($resumed && defined $a_end,
		'after a full handshake verified the chain (A), a new backend resumes');
	$a_end //= time;
	poll_until(sub { time > $a_end + 5 }, 10);
	my $b_start = time;
	is(new_backend(), '1/1',
		'a backend 5 s after A resumes too (B), and gets another ticket');
	poll_until(sub { time > $a_end + 11.1 }, 20);
	note sprintf('the third backend starts %.1f s after B started', time - $b_start);
	is(new_backend(), '1/0',
		'past the bound after A, the next backend makes a full handshake, though its ticket came from B');
	$node->safe_psql('postgres', join('; ',
		'ALTER SYSTEM RESET zklock.hosts',
		'ALTER SYSTEM RESET zklock.ssl_ticket_max_age',
		'SELECT pg_reload_conf()'));
	$tls13->stop;
}

# --- a backend open across a revocation and reload is refused at its
# next reconnect, as a new backend is.
{
	my $bg = waiter($node);
	like($bg->query_safe("SELECT zk_lock('across')"), qr/^\d+$/,
		'a backend takes a lock over TLS');
	copy($crl_revoked, "$crl_file.new") or die $!;
	rename("$crl_file.new", $crl_file) or die $!;
	$node->reload;
	like(new_backend(), qr/ERROR:  could not connect to ZooKeeper server "127\.0\.0\.1:\d+" over TLS\nDETAIL:  .*certificate revoked/,
		'after the revocation and reload, a new backend is refused');
	$zk->kill_server(1);
	$zk->restart_server(1);
	my $zklog = $zk->log_file(1);
	my $pos = -s $zklog;
	ok(poll_until(sub { slurp_file($zklog, $pos) =~ /Unsuccessful handshake/ }, 30),
		'the open backend reconnects, and its handshake fails');
	$bg->query_safe('\set VERBOSITY verbose');
	my $t = time;
	$bg->{stderr} = '';
	$bg->query("SELECT zk_lock('across-2', '1s')");
	like($bg->{stderr}, qr/ERROR:  08006: lost connection to ZooKeeper at "[^"]+"\nDETAIL:  A reconnect over TLS was refused: with 127\.0\.0\.1:\d+, the server's certificate did not verify .*: certificate revoked/,
		'the open backend takes no further lock: the revocation is the reason given');
	cmp_ok(time - $t, '<', 4, 'at once, not after connect_timeout');
	my $state = $bg->query("SELECT state FROM zk_session()");
	isnt($state, 'connected', "its session is not connected again (state $state)");
	$bg->quit;
	copy($crl2, "$crl_file.new") or die $!;
	rename("$crl_file.new", $crl_file) or die $!;
}

# --- the same when the reload names another CRL file: the open backend
# follows the setting at its next call, and its next reconnect reads it.
{
	my $bg = waiter($node);
	like($bg->query_safe("SELECT zk_lock('across-path')"), qr/^\d+$/,
		'a backend takes a lock over TLS (the CRL file revokes nothing)');
	$node->safe_psql('postgres',
		"ALTER SYSTEM SET zklock.ssl_crl_file = '$crl_revoked'; SELECT pg_reload_conf()");
	ok(poll_until(sub { $bg->query_safe('SHOW zklock.ssl_crl_file') eq $crl_revoked }),
		'the open backend reloaded: zklock.ssl_crl_file names the revoking list');
	like($bg->query_safe("SELECT zk_lock('across-path-2')"), qr/^\d+$/,
		'its connection made before stays');
	$zk->kill_server(1);
	$zk->restart_server(1);
	my $zklog = $zk->log_file(1);
	my $pos = -s $zklog;
	ok(poll_until(sub { slurp_file($zklog, $pos) =~ /Unsuccessful handshake/ }, 30),
		'it reconnects, and its handshake fails');
	$bg->query_safe('\set VERBOSITY verbose');
	$bg->{stderr} = '';
	$bg->query("SELECT zk_lock('across-path-3', '1s')");
	like($bg->{stderr}, qr/ERROR:  08006: lost connection to ZooKeeper at "[^"]+"\nDETAIL:  A reconnect over TLS was refused: .*zklock\.ssl_crl_file "\Q$crl_revoked\E": certificate revoked/,
		'it takes no further lock: the revocation under the new file is the reason given');
	$bg->quit;
	$node->safe_psql('postgres',
		'ALTER SYSTEM RESET zklock.ssl_crl_file; SELECT pg_reload_conf()');
}

# --- a CA or CRL file that cannot be loaded at a reconnect (cut short,
# removed): the open backend does not reconnect, and says why; once the
# file is back, it reconnects.
{
	my $bg = waiter($node);
	$bg->query_safe('\set VERBOSITY verbose');
	like($bg->query_safe("SELECT zk_lock('files')"), qr/^\d+$/,
		'a backend takes a lock over TLS');
	my $try = sub {
		my ($name, $want) = @_;
		return poll_until(
			sub {
				$bg->{stderr} = '';
				$bg->query("SELECT zk_lock('$name', '1s')");
				return $bg->{stderr} =~ $want;
			},
			30);
	};
	# A query that must not fail (a failed one leaves its stderr behind).
	my $ask = sub {
		$bg->{stderr} = '';
		return $bg->query_safe(@_);
	};
	my $connected = sub {
		return poll_until(
			sub { $ask->('SELECT state FROM zk_session()') eq 'connected' }, 30);
	};
	for my $case (
		[ 'CRL file cut short', $crl_file, 'cut',
		  qr/DETAIL:  A reconnect over TLS was refused: with 127\.0\.0\.1:\d+, zklock\.ssl_crl_file "[^"]+" holds no PEM revocation list at a connection attempt\./ ],
		[ 'CA file removed', $ca_file, 'remove',
		  qr/DETAIL:  A reconnect over TLS was refused: with 127\.0\.0\.1:\d+, zklock\.ssl_ca_file "[^"]+" could not be read at a connection attempt: No such file or directory\./ ])
	{
		my ($what, $file, $how, $want) = @$case;
		my $data = slurp_file($file);
		if ($how eq 'cut')
		{
			open my $fh, '>', "$file.new" or die $!;
			print {$fh} substr($data, 0, length($data) / 2);
			close $fh;
			rename("$file.new", $file) or die $!;
		}
		else
		{
			rename($file, "$file.away") or die $!;
		}
		$zk->kill_server(1);
		$zk->restart_server(1);
		ok($try->("files-$how", qr/ERROR:  08006: lost connection to ZooKeeper at "[^"]+"\n$want/),
			"$what: the open backend does not reconnect, and says why")
		  or diag($bg->{stderr});
		isnt($ask->('SELECT state FROM zk_session()'), 'connected',
			"$what: its session is not connected");
		if ($how eq 'cut')
		{
			open my $fh, '>', "$file.new" or die $!;
			print {$fh} $data;
			close $fh;
			rename("$file.new", $file) or die $!;
		}
		else
		{
			rename("$file.away", $file) or die $!;
		}
		ok($connected->(), "$what, then restored: the session reconnects");
		like($ask->("SELECT zk_lock('files-$how-back')"), qr/^\d+$/,
			"$what, then restored: it takes a lock");
	}
	$bg->quit;
}
$zk->stop;

# --- an expired server certificate is refused on a resumed handshake: a
# certificate valid for a few seconds more, a ticket made while it was
# valid, then a new backend after it expired.  The certificate is made
# just before its server starts, valid for twice the time the first server
# took to start and 10 s more; a server that still leaves it less than 8 s
# gets another, valid longer.
SKIP:
{
	skip 'ZooKeeper 3.9 servers do not resume TLS sessions', 3 unless $resumption;
	my ($short, $end);
	for my $margin (2 * $start_s + 10, 4 * $start_s + 30)
	{
		$short->stop if $short;
		$short = tls_server($certs->file('short.pem'), 0);
		$end = time + $margin;
		$certs->sign('sca', 'short', '/O=zklock test/CN=127.0.0.1', $from,
			strftime('%Y%m%d%H%M%SZ', gmtime($end)),
			"subjectAltName = IP:127.0.0.1\n$server_ext");
		$certs->keystore('short');
		$short->start;
		last if time < $end - 8;
	}
	note sprintf('the certificate is valid %.1f s more', $end - time);
	$node->safe_psql('postgres',
		"ALTER SYSTEM SET zklock.hosts = '" . $short->connect_string . "'; SELECT pg_reload_conf()");
	ok(resumes(), 'while the certificate is valid, a new backend resumes');
	ok(poll_until(sub { time > $end + 1 }, $end - time + 10), 'the certificate expired');
	like(new_backend(), qr/DETAIL:  .*certificate has expired/,
		'then a new backend does not resume its ticket: the certificate is refused');
	$short->stop;
}

# --- a revoked intermediate CA is refused: root, intermediate, server; the
# CRL file holds a list from each CA.
{
	$certs->ca('iroot', '/O=zklock test/CN=zklock root CA');
	$certs->sign('iroot', 'imid', '/O=zklock test/CN=zklock intermediate CA', $from, $until,
		"basicConstraints = critical,CA:TRUE\nkeyUsage = critical,keyCertSign,cRLSign");
	$certs->concat('imid.pem', 'imid.crt');    # as a CA, where sign reads it
	$certs->sign('imid', 'ileaf', '/O=zklock test/CN=127.0.0.1', $from, $until,
		"subjectAltName = IP:127.0.0.1\n$server_ext");
	$certs->crl('imid', 'imid.crl');
	$certs->crl('iroot', 'iroot-1.crl');
	$certs->revoke('iroot', 'imid');
	$certs->crl('iroot', 'iroot-revoked.crl');
	my $ok_crls = $certs->concat('chain-ok.crl', 'iroot-1.crl', 'imid.crl');
	my $revoked_crls = $certs->concat('chain-revoked.crl', 'iroot-revoked.crl', 'imid.crl');
	my $srv = tls_server($certs->keystore('ileaf', 'imid'));
	my $set = sub {
		my ($crl) = @_;
		$node->safe_psql('postgres', join('; ',
			"ALTER SYSTEM SET zklock.hosts = '" . $srv->connect_string . "'",
			"ALTER SYSTEM SET zklock.ssl_ca_file = '" . $certs->file('iroot.pem') . "'",
			"ALTER SYSTEM SET zklock.ssl_crl_file = '$crl'",
			'SELECT pg_reload_conf()'));
	};
	$set->($ok_crls);
	like(new_backend(), qr{^1/[01]$}, 'a chain through an intermediate CA is accepted, with a CRL from each CA');

	# A CRL past its next update forbids resuming: the intermediate's list
	# due in 12 s, a ticket made while it was current, then a new backend
	# after it is due makes a full handshake, which refuses the server.
  SKIP:
	{
		skip 'ZooKeeper 3.9 servers do not resume TLS sessions', 3 unless $resumption;
		my $due = time + 12;
		$set->($certs->concat('chain-due.crl', 'iroot-1.crl',
			$certs->crl('imid', 'imid-due.crl', 12)));
		ok(resumes(), 'while the intermediate\'s CRL is current, a new backend resumes');
		ok(poll_until(sub { time > $due + 1 }, 20), 'the CRL is past its next update');
		like(new_backend(), qr/DETAIL:  .*CRL has expired/,
			'then a new backend does not resume its ticket: the full handshake refuses the server');
	}
	$set->($certs->file('imid.crl'));
	like(new_backend(), qr/DETAIL:  .*unable to get certificate CRL/,
		'with the intermediate CA\'s list only (none from the root), the chain is refused: the intermediate is checked too');
	$set->($revoked_crls);
	like(new_backend(), qr/ERROR:  could not connect to ZooKeeper server "127\.0\.0\.1:\d+" over TLS\nDETAIL:  .*certificate revoked/,
		'a server certificate under a revoked intermediate CA is refused');
	$srv->stop;
}

# --- the names of a refused certificate: a certificate with no subject
# alternative name matches a host name by its common name, as OpenSSL's
# host check does, never an address (stricter than ZooKeeper's Java
# client, which may match an address by it); what a refused certificate
# carries is escaped in the message (a newline as \x0a).
{
	# A certificate of the servers' CA with only a common name, from a
	# request whose subject openssl reads from a file (newlines included).
	my $serial = 0;
	my $cn_only = sub {
		my ($name, $cn) = @_;
		$serial++;
		my $cnf = $certs->file("$name.req.cnf");
		open my $fh, '>', $cnf or die "$cnf: $!";
		print $fh "[ req ]\nprompt = no\ndistinguished_name = dn\n"
		  . "[ dn ]\nO = zklock test\nCN = $cn\n";
		close $fh;
		my $d = $certs->file('');
		system("cd '$d' && openssl req -new -newkey rsa:2048 -nodes -keyout $name.key"
			  . " -config $name.req.cnf -out $name.csr >>openssl.log 2>&1"
			  . " && openssl x509 -req -in $name.csr -CA sca.pem -CAkey sca.key"
			  . " -set_serial " . ($$ * 10 + $serial)
			  . " -days 3650 -out $name.crt >>openssl.log 2>&1") == 0
		  or die "openssl for $name failed";
		chmod 0600, $certs->file("$name.key");
		return $certs->keystore($name);
	};
	my $set = sub {
		my ($hosts) = @_;
		$node->safe_psql('postgres', join('; ',
			"ALTER SYSTEM SET zklock.hosts = '$hosts'",
			"ALTER SYSTEM SET zklock.ssl_ca_file = '$sca'",
			"ALTER SYSTEM RESET zklock.ssl_crl_file",
			'SELECT pg_reload_conf()'));
	};
	my $srv = tls_server($cn_only->('cn-localhost', 'localhost'));
	$set->('localhost:' . $srv->port(1));
	like(new_backend(), qr{^1/[01]$},
		'a certificate without subject alternative names matches a host name by its common name');
	$set->('127.0.0.1:' . $srv->port(1));
	like(new_backend(), qr/DETAIL:  The server's certificate does not name "127\.0\.0\.1", the address it was reached under; it carries no subject alternative name, only the common name "localhost"\./,
		'but never an address');
	$srv->stop;

	$srv = tls_server($cn_only->('cn-forged', 'localhost\nLOG:  forged\\\\'));
	$set->('localhost:' . $srv->port(1));
	my $log_from = -s $node->logfile;
	like(new_backend(), qr/only the common name "localhost\\x0aLOG:  forged\\\\"\./,
		'a refused certificate\'s name is escaped in the message');
	unlike(slurp_file($node->logfile, $log_from), qr/localhost\n/,
		'and breaks no line of the server log');
	$srv->stop;
}

# --- a CA file that is not a regular file (a FIFO that nobody writes) is
# refused at once, not waited on.
{
	my $fifo = $certs->file('ca.fifo');
	POSIX::mkfifo($fifo, 0600) or die "mkfifo $fifo: $!";
	$node->safe_psql('postgres',
		"ALTER SYSTEM SET zklock.ssl_ca_file = '$fifo'; SELECT pg_reload_conf()");
	like(new_backend(), qr/ERROR:  ZooKeeper TLS file "\Q$fifo\E" is not a regular file\nDETAIL:  The file is zklock\.ssl_ca_file\./,
		'a CA file that is a FIFO is refused at once');
}

# --- a client certificate from an intermediate CA that only
# zklock.ssl_ca_file holds (zklock.ssl_cert_file holds the leaf alone): the
# chain sent is completed from the CA file, and the server, which trusts
# the root only, accepts it.
{
	$certs->ca('croot', '/O=zklock test/CN=zklock client root CA');
	$certs->sign('croot', 'cmid', '/O=zklock test/CN=zklock client intermediate CA', $from, $until,
		"basicConstraints = critical,CA:TRUE\nkeyUsage = critical,keyCertSign,cRLSign");
	$certs->concat('cmid.pem', 'cmid.crt');    # as a CA, where sign reads it
	$certs->sign('cmid', 'cleaf', '/O=zklock test/OU=db/CN=zklock-c', $from, $until,
		'extendedKeyUsage = clientAuth');
	my $srv = ZkEnsemble->new(
		servers => 1,
		tls     => {
			keystore    => $certs->keystore('srv'),
			truststore  => $certs->file('croot.pem'),
			client_cert => $certs->concat('cleaf-chain.crt', 'cleaf.crt', 'cmid.crt'),
			client_key  => $certs->file('cleaf.key') });
	$node->safe_psql('postgres', join('; ',
		"ALTER SYSTEM SET zklock.hosts = '" . $srv->connect_string . "'",
		"ALTER SYSTEM SET zklock.ssl_ca_file = '"
		  . $certs->concat('client-chain-ca.pem', 'sca.pem', 'croot.pem', 'cmid.crt') . "'",
		"ALTER SYSTEM RESET zklock.ssl_crl_file",
		"ALTER SYSTEM SET zklock.ssl_cert_file = '" . $certs->file('cleaf.crt') . "'",
		"ALTER SYSTEM SET zklock.ssl_key_file = '" . $certs->file('cleaf.key') . "'",
		'SELECT pg_reload_conf()'));
	like(new_backend(), qr{^1/0$},
		'a client certificate from an intermediate CA held only by zklock.ssl_ca_file is accepted');
	$srv->stop;
}

finish(nodes => [$node]);
done_testing();
