# Copyright (c) zklock contributors
#
# A server that accepts the connection and never answers the TLS handshake
# (a paused or overloaded process, a wrong port): a session open over TLS
# must fail within zklock.connect_timeout, and the backend must go on.  The
# stock 3.8.0 client loops in SSL_connect() on its IO thread with no time
# limit, so zookeeper_close(), which joins that thread, never returns and
# the call hangs past any timeout; C client patches 0002 and 0005 bound
# the handshake.  The silent server is a listening socket of this test that
# never accepts: the kernel completes the TCP handshake for it.

use strict;
use warnings;

use File::Copy qw(copy);
use FindBin;
use lib "$FindBin::Bin/../perl";

use IO::Socket::INET;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use ZkCerts;

my $certs = ZkCerts->new(dir => "$PostgreSQL::Test::Utils::tmp_check/certs");
my $ca = $certs->file('ca.pem');
my $a = $certs->client('a');

my $silent = IO::Socket::INET->new(
	LocalAddr => '127.0.0.1',
	LocalPort => 0,
	Listen    => 16,
	Proto     => 'tcp') or die "no listening socket: $!";
my $port = $silent->sockport;

my $node = PostgreSQL::Test::Cluster->new('silent');
$node->init;
copy($a->{cert}, $node->data_dir . '/zk-client.crt') or die $!;
copy($a->{key}, $node->data_dir . '/zk-client.key') or die $!;
chmod 0600, $node->data_dir . '/zk-client.key';
$node->append_conf('postgresql.conf', join("\n",
	"zklock.hosts = '127.0.0.1:$port'",
	"zklock.session_timeout = 20000",
	"zklock.connect_timeout = 3000",
	"zklock.ssl = on",
	"zklock.ssl_ca_file = '$ca'",
	"zklock.ssl_cert_file = 'zk-client.crt'",
	"zklock.ssl_key_file = 'zk-client.key'") . "\n");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION zklock');

for my $round (1 .. 2)
{
	my $timed_out = 0;
	my $t0 = time;
	my ($rc, $out, $err) = $node->psql('postgres', "SELECT zk_lock('silent', '1s')",
		extra_params => [ '-v', 'VERBOSITY=verbose' ],
		timeout      => 60,
		timed_out    => \$timed_out);
	my $took = time - $t0;
	ok(!$timed_out, "round $round: the call returns (took ${\ sprintf '%.1f', $took} s)");
	like($err, qr/ERROR:  08001: could not connect to ZooKeeper/,
		"round $round: a connection error") or diag("stderr: $err");
	cmp_ok($took, '<', 10, "round $round: within connect_timeout (3 s) and the close");
}
is($node->safe_psql('postgres', 'SELECT 1'), '1', 'the cluster serves');

$silent->close;
$node->stop;
done_testing();
