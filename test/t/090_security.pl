# Copyright (c) zklock contributors
#
# zklock.auth: sessions authenticate with digest credentials and lock nodes
# carry an ACL, so that no other ZooKeeper identity can delete or alter
# them while everyone can still read the fleet view; a wrong password gives
# a clear error at once, not a hang; the credentials are never shown to
# non-superusers nor written to the server log.

use strict;
use warnings;

use File::Basename qw(dirname);
use FindBin;
use lib "$FindBin::Bin/../perl";

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use ZkEnsemble;
use ZklockTest;

my $zk = ZkEnsemble->new(servers => 1);
my $node = zk_cluster('secure', $zk, preload => 1,
	conf => [ "zklock.auth = 'zklock:s3cret-pw'", "zklock.root = '/secure'" ]);
my $a = waiter($node);
my $tok = $a->query_safe("SELECT zk_lock('vault')");
my $path = $a->query_safe("SELECT node FROM zk_locks WHERE name = 'vault'");
like($path, qr{^/secure/vault/_c_}, 'lock node under the configured root');
my $hosts = $zk->connect_string;

is(zkq($hosts, 'delete', $path), 'NoAuthError', 'an unauthenticated client cannot delete the node');
is(zkq({ auth => 'mallory:guess' }, $hosts, 'delete', $path), 'NoAuthError',
	'another digest identity cannot delete it');
is(zkq($hosts, 'delete', '/secure/vault'), 'NoAuthError', 'nor remove the lock directory');
is(zk_count($zk, '/secure/vault'), 1, 'the node is still there');
like(zkq($hosts, 'get', $path), qr/"cluster_name":"secure"/, 'but everyone can read who holds it');
is($node->safe_psql('postgres',
	"SET zklock.auth = ''; SELECT count(*) FROM zk_lock_queue('vault') WHERE holds"),
	'1', 'a backend without credentials sees the queue');

# A wrong password: a different identity, denied at once with a clear error.
my ($ret, $stdout, $stderr);
my $t0 = time;
$ret = $node->psql('postgres',
	"SET zklock.auth = 'zklock:wrong'; SELECT zk_lock('vault', '30s')",
	stdout => \$stdout, stderr => \$stderr, extra_params => [ '-v', 'VERBOSITY=verbose' ]);
ok($ret != 0, 'a wrong password fails');
like($stderr, qr/ERROR:  42501: permission denied to create ZooKeeper node "\/secure\/vault/,
	'with SQLSTATE 42501 naming the request');
like($stderr, qr/HINT:  .*zklock\.auth/, 'and a hint naming zklock.auth');
ok(time - $t0 < 15, 'at once, not after the 30 s lock timeout');
$node->psql('postgres', "SET zklock.auth = 'zklock:wrong'; SELECT zk_lock('fresh-name')",
	stderr => \$stderr);
like($stderr, qr/permission denied to create ZooKeeper node "\/secure\/fresh-name"/,
	'nor can it create new lock directories under the root');

# The same credentials from another backend can contend normally.
is($node->safe_psql('postgres', "SELECT zk_try_lock('vault')"), 'f',
	'an authenticated backend is excluded as usual');
$a->query_safe("SELECT zk_unlock('vault')");
ok($node->safe_psql('postgres', "SELECT zk_lock('vault', '10s')") > $tok,
	'and takes the lock once released');

# Never shown to non-superusers, never logged.
$node->safe_psql('postgres', 'CREATE ROLE zk_reader');
$node->psql('postgres', 'SET ROLE zk_reader; SHOW zklock.auth', stderr => \$stderr);
# (PostgreSQL 15's wording, then 18's.)
like(
	$stderr,
	qr/must be superuser or have privileges of pg_read_all_settings|permission denied to examine "zklock.auth"/,
	'SHOW zklock.auth is refused to other roles');
is($node->safe_psql('postgres',
	"SET ROLE zk_reader; SELECT count(*) FROM pg_settings WHERE name = 'zklock.auth'"),
	'0', 'pg_settings hides it from them');
is($node->safe_psql('postgres',
	"SET ROLE zk_reader; SELECT count(*) FROM pg_settings WHERE setting LIKE '%' || 's3' || 'cret%'"),
	'0', 'nor does any other setting show the password');
$a->quit;
unlike(slurp_file($node->logfile), qr/s3cret/, 'the password never reaches the server log');

# Credentials without preloading are refused: in a backend that has not
# loaded zklock, a configured zklock.auth is a placeholder anyone can SHOW.
my $loose = zk_cluster('loose', $zk, conf => ["zklock.auth = 'zklock:s3cret-pw'"]);
$loose->psql('postgres', "SELECT zk_lock('x')", stderr => \$stderr);
like($stderr, qr/zklock.auth requires zklock in shared_preload_libraries/,
	'zklock.auth without preloading is refused');
unlike($stderr, qr/s3cret/, 'without echoing the credentials');
$loose->stop('fast');

# A lock directory someone else created with an open ACL: ZooKeeper checks
# a delete against the parent, so anyone could delete a holder's node in it
# and hand the lock to a second holder.  zklock refuses the directory, with
# the path, the ACL and what to do, and leaves no node behind.
is(zkq($hosts, 'create', '/open-area/open-dir'), 'created', 'an anonymous client pre-creates a directory');
$node->psql('postgres', "SET zklock.root = '/open-area'; SELECT zk_lock('open-dir', '5s')",
	stderr => \$stderr, extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($stderr, qr/ERROR:  55000: ZooKeeper lock directory "\/open-area\/open-dir" is not protected by zklock.auth/,
	'the lock is refused with SQLSTATE 55000 naming the directory');
like($stderr, qr/DETAIL:  Its ACL says world:anyone may delete its children/, 'the detail names the ACL');
like($stderr, qr/HINT:  Delete the directory/, 'the hint says what to do');
is(zk_count($zk, '/open-area/open-dir'), 0, 'and no node is left in it');
is(zkq($hosts, 'delete', '/open-area/open-dir'), 'deleted', 'once the directory is removed ...');
ok($node->safe_psql('postgres',
	"SET zklock.root = '/open-area'; SELECT zk_lock('open-dir', '5s')") > 0,
	'... zklock recreates it and locks');

# The same for a semaphore's leases directory, whose nodes the limit counts.
is(zkq($hosts, 'create', '/open-area/open-sem/leases'), 'created',
	'an anonymous client pre-creates a semaphore\'s leases directory');
$node->psql('postgres', "SET zklock.root = '/open-area'; SELECT zk_semaphore('open-sem', 2, '5s')",
	stderr => \$stderr, extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($stderr,
	qr/ERROR:  55000: ZooKeeper lease directory "\/open-area\/open-sem\/leases" is not protected by zklock.auth/,
	'the semaphore is refused with SQLSTATE 55000 naming the leases directory');
ok( poll_until(
		sub {
			zk_count($zk, '/open-area/open-sem/leases') == 0
			  && zk_count($zk, '/open-area/open-sem/locks') == 0;
		},
		15),
	'and neither a lease nor a mutex node is left');

# An open root or chroot is harmless: zklock creates each lock directory
# itself, with its own ACL, so the holder's node cannot be deleted.
my $chrooted = zk_cluster('chrooted', $zk, preload => 1,
	conf => [ "zklock.auth = 'zklock:s3cret-pw'", "zklock.root = '/open-root'",
		"zklock.hosts = '$hosts/open-chroot'" ]);
is(zkq($hosts, 'create', '/open-chroot/open-root'), 'created',
	'an anonymous client pre-creates the chroot and the root');
my $h = waiter($chrooted);
$h->query_safe("SELECT zk_lock('shared-res')");
my $held = '/open-chroot' . $h->query_safe("SELECT node FROM zk_locks WHERE name = 'shared-res'");
is(zkq($hosts, 'delete', $held), 'NoAuthError',
	'the anonymous client cannot delete the holder\'s node under an open root and chroot');
is($chrooted->safe_psql('postgres', "SELECT zk_try_lock('shared-res')"), 'f',
	'so a second backend cannot take the lock');
$h->quit;
$chrooted->stop('fast');

# Backends whose first connection attempt is refused (the ensemble is
# restarting) give their credentials to the library while it may be
# between two attempts; the sessions that open once the server is back
# must carry them: every lock is taken and its node protected, none
# refused for its ACL.  The 3.8.0 library drops credentials added in that
# state unless C client patch 0008 keeps them; a backend lands in it one
# time in five to fifteen, so 24 of them.
$zk->stop_server(1);
my @late = map { waiter($node) } 1 .. 24;
my @lpid = map { backend_pid($_) } @late;
for my $i (0 .. $#late)
{
	$late[$i]->query_safe("SET zklock.connect_timeout = '60s'");
	start_wait($late[$i], "SELECT zk_lock('after-restart-$i') > 0");
}
ok( poll_until(
		sub {
			!grep { !is_waiting($node, $_) } @lpid;
		},
		60),
	'24 backends call zk_lock while the only server is down, and wait to connect');
$zk->restart_server(1);
my @taken;
for my $i (0 .. $#late)
{
	my ($lout, $lerr) = finish_wait($late[$i]);
	push @taken, $i if $lout eq 't';
	diag("backend $i: $lerr") if $lout ne 't';
}
is(scalar @taken, 24, 'once the server is back, every one takes its lock');
my $lnode = $late[0]->query_safe("SELECT node FROM zk_locks WHERE name = 'after-restart-0'");
is(zkq($hosts, 'delete', $lnode), 'NoAuthError',
	'its credentials protect the node: an unauthenticated client cannot delete it');
$_->quit for @late;

$node->stop('fast');
$zk->stop;
done_testing();
