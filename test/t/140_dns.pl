# Copyright (c) zklock contributors
#
# A host name in zklock.hosts whose DNS never answers must not hold a
# backend hostage: name resolution runs where a cancel, statement_timeout
# and zklock.connect_timeout are served.  The library, left to resolve
# inside zookeeper_init2 with every signal blocked, would make each of
# these wait for the resolver's full timeout (here 2 x 30 s).
#
# Runs under test/dns_jail.sh (make test does this as root): a mount
# namespace whose /etc/resolv.conf names a resolver that never answers.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use ZkEnsemble;
use ZklockTest;

my $silent = $ENV{ZKLOCK_SILENT_DNS} // '';
plan skip_all => 'needs test/dns_jail.sh (make test runs this test in it as root)'
  if $silent eq '' || slurp_file('/etc/resolv.conf') !~ /^nameserver \Q$silent\E$/m;

my $name = 'zk-silent.invalid';
my $t0 = time;
my $rc = system('timeout', '3', 'getent', 'ahostsv4', $name) >> 8;
is($rc, 124, 'the jail\'s resolver does not answer (getent still waits after 3 s)');

my $zk = ZkEnsemble->new(servers => 1);
my $node = zk_cluster('dns', $zk);
my $s = waiter($node);
my $pid = backend_pid($s);
$s->query_safe("SET zklock.hosts = '$name:2181'");

# statement_timeout
$t0 = time;
$s->query("SET statement_timeout = '1s'; SELECT zk_lock('dns')");
my $took = time - $t0;
like($s->{stderr}, qr/canceling statement due to statement timeout/,
	'statement_timeout ends the wait for DNS');
ok($took < 10, sprintf('within seconds, not the resolver\'s timeout (%.1f s)', $took));
$s->{stderr} = '';
$s->query_safe("RESET statement_timeout");

# pg_cancel_backend
start_wait($s, "SELECT zk_lock('dns')");
ok(poll_until(sub { is_waiting($node, $pid) }, 10), 'the backend waits for DNS, interruptibly');
$t0 = time;
$node->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
ok(poll_until(sub { !in_call($node, $pid) }, 10), 'a cancel ends it');
$took = time - $t0;
my ($out, $err) = finish_wait($s);
like($err, qr/canceling statement due to user request/, 'as a cancel');
ok($took < 10, sprintf('within seconds (%.1f s)', $took));

# zklock.connect_timeout
$s->query_safe("SET zklock.connect_timeout = '1500ms'");
$t0 = time;
$s->query("SELECT zk_lock('dns')");
$took = time - $t0;
like($s->{stderr}, qr/could not resolve the host names in zklock.hosts/,
	'connect_timeout ends it with a connection error');
ok($took < 10, sprintf('after about connect_timeout (%.1f s)', $took));
$s->{stderr} = '';

# The backend is fine: with a reachable ensemble it locks at once.
$s->query_safe("RESET zklock.hosts; RESET zklock.connect_timeout");
ok($s->query_safe("SELECT zk_lock('dns')") > 0, 'the same backend then locks normally');
$s->query_safe("SELECT zk_unlock('dns')");

# Exit does not wait for a resolver still blocked in the library.
my $s2 = waiter($node);
my $pid2 = backend_pid($s2);
$s2->query_safe("SET zklock.hosts = '$name:2181'; SET zklock.connect_timeout = '500ms'");
$s2->query("SELECT zk_lock('dns')");
$s2->quit;
ok( poll_until(
		sub {
			$node->safe_psql('postgres', "SELECT count(*) FROM pg_stat_activity WHERE pid = $pid2") eq '0';
		},
		10),
	'a backend whose resolver still waits exits at once');

$s->quit;
$node->stop('fast');
$zk->stop;
done_testing();
