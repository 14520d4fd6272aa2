# Copyright (c) zklock contributors
#
# zklock.hosts as ZooKeeper's own clients read a connect string: an IPv6
# server in brackets, a server without a port on 2181, blanks around the
# entries, empty entries skipped.  zklock reads the servers itself: the C
# client, handed the string as it is, takes "[::1]:2181" for a host named
# "[::1]" (No such file or directory), refuses "zk1" (Invalid argument),
# and connects a port of 99999 to port 34463.  A connect string that cannot be read is refused
# when it is set (src/hosts.c; test/unit/test_hosts.c has the cases).
#
# The ensemble listens on 127.0.0.1 only (as every test's does); a proxy
# on ::1 stands for an IPv6 server, one on 127.0.0.1:2181 for a server on
# the default port (that part skips when the port is taken).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";

use PostgreSQL::Test::Utils;
use Test::More;
use ZkEnsemble;
use ZkProxy;
use ZklockTest;

my $zk = ZkEnsemble->new(servers => 1);
my $node = zk_cluster('hosts', $zk);
my $port = $zk->port(1);

# A new backend with zklock loaded (so that SET checks the value) and
# hosts set; the result of a lock and unlock, or the error.
sub try_hosts
{
	my ($hosts) = @_;
	my $s = waiter($node);
	$s->query_safe("LOAD 'zklock'");
	$s->query_safe("SET zklock.connect_timeout = '3s'");
	my ($out) = $s->query("SET zklock.hosts = '$hosts'");
	my $err = $s->{stderr};
	$s->{stderr} = '';
	if ($err eq '')
	{
		($out) = $s->query(
			"SELECT zk_try_lock('hosts') AND zk_unlock('hosts'), (SELECT server FROM zk_session())");
		$err = $s->{stderr};
	}
	$s->quit;
	return $err ne '' ? $err : $out;
}

like(try_hosts(" 127.0.0.1:$port , 127.0.0.1:$port "), qr/^t\|127\.0\.0\.1:$port$/,
	'blanks around the entries are taken off');
like(try_hosts("127.0.0.1:$port,,127.0.0.1:$port,"), qr/^t\|127\.0\.0\.1:$port$/,
	'empty entries are skipped, as ZooKeeper\'s clients skip them');
like(try_hosts("localhost:$port"), qr/^t\|127\.0\.0\.1:$port$/,
	'a host name is looked up');

SKIP:
{
	my $p6 = ZkProxy->new($port, listen => '::1');
	skip 'no IPv6 loopback address here', 2 unless $p6;
	my $p6port = $p6->port;
	like(try_hosts("[::1]:$p6port"), qr/^t\|\[?::1\]?:$p6port$/,
		'an IPv6 server in brackets: the lock is taken through it');
	like(try_hosts("[::1]:$p6port/chrooted"),
		qr/ERROR:  ZooKeeper chroot "\/chrooted" of zklock.hosts does not exist/,
		'with a chroot after it, read as the chroot');
	$p6->stop;
}

SKIP:
{
	my $p2181 = ZkProxy->new($port, port => 2181);
	skip 'port 2181 is taken here', 1 unless $p2181;
	like(try_hosts('127.0.0.1'), qr/^t\|127\.0\.0\.1:2181$/,
		'a server without a port is reached on 2181');
	$p2181->stop;
}

for my $case (
	[ '127.0.0.1:99999', qr/Server "127\.0\.0\.1:99999" has an invalid port/ ],
	[ ',,,', qr/The list names no server/ ],
	[ '[fe80::1]:2181', qr/a link-local IPv6 address needs a network interface/ ],
	[ '::1:2181', qr/an IPv6 address must be in brackets/ ],
	[ '[zk1]:2181', qr/"zk1" in brackets is not an IPv6 address/ ])
{
	my ($hosts, $detail) = @$case;
	like(try_hosts($hosts),
		qr/ERROR:  invalid value for parameter "zklock.hosts": "\Q$hosts\E"\nDETAIL:  .*$detail/,
		"'$hosts' is refused when it is set");
}

$node->stop('fast');
$zk->stop;
done_testing();
