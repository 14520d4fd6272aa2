# Copyright (c) zklock contributors
#
# What a session over TLS costs on the wire (zklock.ssl), with a real TLS
# server (one 3.8 server, Netty, client certificates required) and
# certificates this test makes: a reconnect to the same server resumes the
# TLS session that server gave (the client library says close_notify
# before it frees a connection, C client patch 0021); each request, the
# session handshake included, goes in one TLS record (patch 0022); replies
# that share a TLS record with another, and a reply cut across two
# records, are read at once, not when the next packet comes (patch 0023).
# A TLS-terminating proxy (ZkTlsProxy) counts the client's records and
# cuts the server's replies into records as the test asks.  A backend
# reads its TLS files once (strace counts their opens): not again for a
# reconnect, nor for the next session, while no file changed; a file
# written again, or whose times are too recent to prove it unchanged
# (racily clean), is read again with its partner (the certificate with the
# key, the CA file with the CRL file) and the context kept when their bytes
# are the same.  With zklock
# preloaded the postmaster reads them, and a backend not at all, unless
# they were written just before the start: then a backend reads them, keeps
# the postmaster's context when the bytes are the same and builds its own
# when not (a file the postmaster cannot use is logged at start and
# reported by the backend).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";

use File::Copy qw(copy);
use IPC::Run ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ZkCerts;
use ZkEnsemble;
use ZkProxy;
use ZkTlsProxy;
use ZklockTest;

my $certs = ZkCerts->new(dir => "$PostgreSQL::Test::Utils::tmp_check/certs-cost");
my $ca = $certs->file('ca.pem');
my $a = $certs->client('a');
my $zk = ZkEnsemble->new(
	servers => 1,
	tls     => {
		keystore    => $certs->file('server.pem'),
		truststore  => $ca,
		client_cert => $a->{cert},
		client_key  => $a->{key} });

# No preload: a backend resumes only what its own connections were given.
my $node = PostgreSQL::Test::Cluster->new('cost');
$node->init;
$node->append_conf('postgresql.conf', join("\n",
	"zklock.hosts = '" . $zk->connect_string . "'",
	"zklock.session_timeout = 20000",
	"zklock.connect_timeout = 10000",
	"zklock.ssl = on",
	"zklock.ssl_ca_file = '$ca'",
	"zklock.ssl_cert_file = '$a->{cert}'",
	"zklock.ssl_key_file = '$a->{key}'") . "\n");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION zklock');

# strace following backend $pid's threads (its opens of files), or undef
# with the reason when it cannot attach here.
sub trace_opens
{
	my ($pid) = @_;
	my $trace = "$PostgreSQL::Test::Utils::tmp_check/strace-$pid.txt";
	my ($in, $out, $err) = ('', '', '');
	my $st = eval {
		IPC::Run::start([ 'strace', '-f', '-qq', '-e', 'trace=openat', '-o', $trace, '-p', $pid ],
			\$in, \$out, \$err);
	};
	my $traced = sub {
		open my $fh, '<', "/proc/$pid/status" or return 0;
		local $/;
		return <$fh> =~ /^TracerPid:\s*[1-9]/m;
	};
	return (undef, $@ || $err || 'strace did not attach')
	  unless $st && poll_until($traced, 10);
	return ($st, $trace);
}

# How many times the trace shows the CA, certificate and key files opened.
sub opens
{
	my ($trace) = @_;
	my $t = slurp_file($trace);
	return join(' ', map { my $f = $_; scalar(() = $t =~ /openat\([^,]*, "\Q$f\E"/g) }
		$ca, $a->{cert}, $a->{key});
}

# --- a reconnect to the same server resumes.  The proxy drops the replies
# of the backend's connection; the client gives the silent connection up
# after two thirds of the session timeout and connects again, through the
# proxy, to the same server, which still knows the session.  The close
# logs the handshakes of every connection of the session.
{
	my $proxy = ZkProxy->new($zk->port(1));
	my $s = session($node, via => $proxy,
		set => { 'zklock.session_timeout' => '6000', 'zklock.log_sessions' => 'on' });
	my $pid = backend_pid($s);
	my $from = -s $node->logfile;
	is($s->query_safe("SELECT zk_try_lock('r'), zk_unlock('r')"), "t|t",
		'a backend takes a lock over TLS through the proxy');
	is($proxy->connections, 1, 'over one connection');
	$proxy->mode('stall');
	ok(poll_until(sub { $proxy->connections >= 2 }, 30),
		'the backend gives its silent connection up and connects again, to the same server');
	ok(poll_until(sub { $s->query_safe('SELECT state FROM zk_session()') eq 'connected' }, 30),
		'its session is connected');
	is($s->query_safe("SELECT zk_try_lock('r'), zk_unlock('r')"), "t|t",
		'the same session takes the lock again');
	quit_session($s);
	ok(poll_until(sub { slurp_file($node->logfile, $from) =~ /\[$pid\][^\n]*closed in/ }, 30),
		'the backend logs its close');
	my ($tls) = slurp_file($node->logfile, $from) =~
	  /\[$pid\][^\n]*closed in[^\n]*\n[^\n]*DETAIL:[^\n]*; TLS: ([^\n]*)\./;
	SKIP:
	{
		skip 'ZooKeeper 3.9 servers do not resume TLS sessions', 1
		  if $zk->server_line eq '3.9';
		is($tls, '2 handshakes, 1 resumed',
			'a reconnect to the same server resumes its TLS session');
	}
	$proxy->stop;
}

# --- one TLS record per request: the proxy reads each record of the
# client's on its own and counts the request frames in them.
my $tp = ZkTlsProxy->new($zk->port(1),
	cert        => $certs->file('server.pem'),
	key         => $certs->file('server.pem'),
	client_cert => $a->{cert},
	client_key  => $a->{key});
{
	my $s = session($node, via => $tp);
	$s->query_safe("SELECT zk_try_lock('w'), zk_unlock('w')") for 1 .. 3;
	my $c = $tp->counts;
	cmp_ok($c->{requests}, '>=', 7,
		'a session over TLS sent its handshake and the requests of three lock cycles');
	is($c->{records}, $c->{requests},
		'each request, the session handshake included, went in one TLS record');
	quit_session($s);
}

# --- replies read at once: a session whose pings are 10 s apart (session
# timeout 30 s) takes locks within a statement_timeout of 5 s, while the
# proxy puts a pipeline's replies (the create and the listing) in one TLS
# record, then cuts every reply across two records.
{
	my $s = session($node, via => $tp, warm => 1,
		set => { 'zklock.session_timeout' => '30000' });
	$s->query_safe("SET statement_timeout = '5s'");
	$tp->mode('pair');
	my ($out, $err) = ('', '');
	($out) = $s->query("SELECT zk_lock('pair') IS NOT NULL, zk_unlock('pair')");
	$err = $s->{stderr};
	$s->{stderr} = '';
	is($out, 't|t', 'replies that share a TLS record are read at once')
	  or diag($err);
	cmp_ok($tp->counts->{paired}, '>', 0, 'the proxy did put two replies in one record');
	$tp->mode('split');
	($out) = $s->query("SELECT zk_lock('split') IS NOT NULL, zk_unlock('split')");
	$err = $s->{stderr};
	$s->{stderr} = '';
	is($out, 't|t', 'a reply cut across two TLS records is read at once')
	  or diag($err);
	cmp_ok($tp->counts->{split}, '>', 0, 'the proxy did cut replies across records');
	$tp->mode('pass');
	quit_session($s);
}
$tp->stop;

# --- the TLS files are read once per backend: strace follows a backend's
# threads and counts the opens of the CA, certificate and key files, over
# its first session, a reconnect (ZkProxy's stall) and a second session
# after the first was lost (every reply swallowed until the ensemble
# expired it).
SKIP:
{
	my $proxy = ZkProxy->new($zk->port(1));
	my $s = session($node, via => $proxy,
		set => { 'zklock.session_timeout' => '6000' });
	my $pid = backend_pid($s);
	my ($st, $trace) = trace_opens($pid);
	skip "strace cannot follow a backend here: $trace", 8 unless $st;
	my $opens = sub { opens($trace) };
	is($s->query_safe("SELECT zk_try_lock('f'), zk_unlock('f')"), 't|t',
		'a backend followed by strace takes a lock over TLS');
	is($opens->(), '1 1 1', 'its session read the CA, certificate and key files once each');
	$proxy->mode('stall');
	ok(poll_until(sub { $proxy->connections >= 2 }, 30)
		  && poll_until(sub { $s->query_safe('SELECT state FROM zk_session()') eq 'connected' }, 30)
		  && $opens->() eq '1 1 1',
		'a reconnect, the files unchanged, read none of them');
	# The session lost (every reply swallowed until the ensemble expired
	# it), the next call opens another: 't|t|t' when it took its lock in a
	# new session.
	my $next_session = sub {
		my $sid = $s->query_safe('SELECT session_id FROM zk_session()');
		$proxy->mode('swallow');
		poll_until(sub { ($zk->four_letter(1, 'dump') // $sid) !~ /\Q$sid\E/ }, 60);
		$proxy->mode('pass');
		my $r = $s->query_safe("SELECT zk_try_lock('f'), zk_unlock('f')");
		return $r . '|' . $s->query_safe("SELECT session_id <> '$sid' FROM zk_session()");
	};
	is($next_session->() . ' ' . $opens->(), 't|t|t 1 1 1',
		'the next session, after the first was lost, read none of them either');
	# The certificate file rewritten in place with the same bytes: not the
	# same file by stat(), so the next session reads it and the key again
	# and compares their digest with the context's (the CA file, the same
	# by stat(), is not read).
	my $pem = slurp_file($a->{cert});
	open my $fh, '>', $a->{cert} or die "$a->{cert}: $!";
	print {$fh} $pem;
	close $fh;
	is($next_session->() . ' ' . $opens->(), 't|t|t 1 2 2',
		'after the certificate file was written again, the next session read it and the key again, not the CA file');
	# A file whose mtime or ctime is not two seconds older than the stat()
	# that took its identity is read again at each use: rewritten within a
	# tick of the file clock (a whole second on some filesystems), a file
	# keeps its size and times, so such an identity proves nothing (git's
	# "racily clean" rule).  The CA file's mtime set ahead of the clock
	# stands for one just written: the first reconnect after reads it (its
	# times changed), and the second reads it again.
	my $stall_reconnect = sub {
		my $n = $proxy->connections;
		$proxy->mode('pass');
		$proxy->mode('stall');
		return poll_until(sub { $proxy->connections > $n }, 30)
		  && poll_until(sub { $s->query_safe('SELECT state FROM zk_session()') eq 'connected' }, 30);
	};
	my $ca_opens = sub { (split / /, $opens->())[0] };
	my @ca_st = stat $ca or die "$ca: $!";
	utime(time, time + 3600, $ca) or die "$ca: $!";
	ok($stall_reconnect->(), 'a reconnect after the CA file\'s mtime was set ahead of the clock');
	my $first = $ca_opens->();
	ok($stall_reconnect->(), 'and another reconnect');
	cmp_ok($ca_opens->(), '>', $first,
		'the second reconnect read again the CA file whose mtime is not older than its stat()');
	# Its times put back; the cluster below reads it only when its change
	# time (now) is old enough to trust.
	utime($ca_st[8], $ca_st[9], $ca) or die "$ca: $!";
	poll_until(sub { time - (stat $ca)[10] > 3 }, 10);
	$st->kill_kill;
	quit_session($s);
	$proxy->stop;
}

# --- with zklock preloaded, the postmaster prepared the files, trust and
# context: a new backend's first session opens none of the files.
{
	my $pre = PostgreSQL::Test::Cluster->new('preloaded');
	$pre->init;
	$pre->append_conf('postgresql.conf', join("\n",
		"shared_preload_libraries = 'zklock'",
		"zklock.hosts = '" . $zk->connect_string . "'",
		"zklock.ssl = on",
		"zklock.ssl_ca_file = '$ca'",
		"zklock.ssl_cert_file = '$a->{cert}'",
		"zklock.ssl_key_file = '$a->{key}'") . "\n");
	$pre->start;
	$pre->safe_psql('postgres', 'CREATE EXTENSION zklock');
	my $s = session($pre);
	my ($st, $trace) = trace_opens(backend_pid($s));
	SKIP:
	{
		skip "strace cannot follow a backend here: $trace", 2 unless $st;
		is($s->query_safe("SELECT zk_try_lock('p'), zk_unlock('p')"), 't|t',
			'a new backend of a cluster that preloads zklock takes a lock over TLS');
		is(opens($trace), '0 0 0',
			'its first session opened none of the TLS files: the postmaster had read them');
		$st->kill_kill;
	}
	quit_session($s);

	# Files written just before the postmaster started (here: their mtime
	# set ahead of the clock) have identities that prove nothing: a new
	# backend reads them again, finds the bytes the postmaster built its
	# context from, and keeps that context; a file changed since makes it
	# build its own.
	my @saved = map { [ (stat $_)[ 8, 9 ] ] } ($ca, $a->{cert}, $a->{key});
	utime(time, time + 3600, $ca, $a->{cert}, $a->{key}) or die "utime: $!";
	$pre->restart;
	my $debug_lock = sub {
		my $d = session($pre);
		my ($out) = $d->query("SET client_min_messages = debug1;\n"
			  . "SELECT zk_try_lock('p'), zk_unlock('p')");
		my $err = $d->{stderr};
		quit_session($d);
		return ($out, $err);
	};
	my ($dout, $derr) = $debug_lock->();
	is($dout, 't|t', 'a backend of a postmaster started just after its TLS files were written takes a lock');
	like($derr, qr/DEBUG:  ZooKeeper TLS files read again: unchanged since the TLS context was built/,
		'it read the files again and found what the postmaster had built from');
	unlike($derr, qr/TLS context built from/, 'and built no context of its own');
	my $key_pem = slurp_file($a->{key});
	open my $kfh, '>', $a->{key} or die "$a->{key}: $!";
	print {$kfh} $key_pem, "\n";
	close $kfh;
	utime(time, time + 3600, $a->{key}) or die "utime: $!";
	($dout, $derr) = $debug_lock->();
	is($dout, 't|t', 'with the key file changed since (a line added), a backend takes a lock');
	like($derr, qr/DEBUG:  ZooKeeper TLS context built from "\Q$a->{cert}\E"/,
		'having built a context of its own');
	open $kfh, '>', $a->{key} or die "$a->{key}: $!";
	print {$kfh} $key_pem;
	close $kfh;
	utime(time, time + 3600, $a->{key}) or die "utime: $!";
	# The CA file changed likewise: the trust's digest differs.
	my $ca_pem = slurp_file($ca);
	open my $cfh, '>>', $ca or die "$ca: $!";
	print {$cfh} "\n";
	close $cfh;
	utime(time, time + 3600, $ca) or die "utime: $!";
	($dout, $derr) = $debug_lock->();
	is($dout, 't|t', 'with the CA file changed since (a line added), a backend takes a lock');
	like($derr, qr/DEBUG:  ZooKeeper TLS context built from "\Q$a->{cert}\E"/,
		'having built a context of its own');
	open $cfh, '>', $ca or die "$ca: $!";
	print {$cfh} $ca_pem;
	close $cfh;
	# With a CRL file too, all four written just before the start: the CA
	# and CRL files are read and compared together.
	my $crl = $pre->data_dir . '/zk.crl';
	copy($certs->file('ca.crl'), $crl) or die "ca.crl: $!";
	$pre->append_conf('postgresql.conf', "zklock.ssl_crl_file = 'zk.crl'\n");
	utime(time, time + 3600, $ca, $a->{cert}, $a->{key}, $crl) or die "utime: $!";
	$pre->restart;
	($dout, $derr) = $debug_lock->();
	is($dout, 't|t', 'with a CRL file as well, a backend of a postmaster started just after the files were written takes a lock');
	like($derr, qr/DEBUG:  ZooKeeper TLS files read again: unchanged since the TLS context was built/,
		'it read the four files again and found what the postmaster had built from');
	unlike($derr, qr/TLS context built from/, 'and built no context of its own');
	my @files = ($ca, $a->{cert}, $a->{key});
	utime(@{ $saved[$_] }, $files[$_]) or die "utime: $!" for 0 .. 2;

	# A file the postmaster cannot use is logged at start and reported by
	# the backend that needs it, as without preload.
	$pre->append_conf('postgresql.conf', "zklock.ssl_ca_file = 'no-such-ca.pem'\n");
	my $from = -s $pre->logfile;
	$pre->restart;
	like(slurp_file($pre->logfile, $from),
		qr/LOG:  could not prepare the ZooKeeper TLS context at server start: could not open ZooKeeper TLS file "[^"]*no-such-ca\.pem"/,
		'a CA file the postmaster cannot read is logged at start, and the cluster starts');
	my ($ret, $out, $err) = $pre->psql('postgres', "SELECT zk_try_lock('p')");
	like($err, qr/ERROR:  could not open ZooKeeper TLS file "[^"]*no-such-ca\.pem"/,
		'and a backend that needs it reports it');
	$pre->stop;
}

$node->stop;
$zk->stop;
done_testing();
