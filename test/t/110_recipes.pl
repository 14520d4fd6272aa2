# Copyright (c) zklock contributors
#
# zklock with the tools pg_advisory_lock users run, the real ones from
# Debian's archive, started here and stopped by PID:
#
#  1. pg_cron, the fleet's run-once job: three clusters schedule the same
#     job every minute, guarded by zk_try_xact_lock; on every tick each
#     cluster's pg_cron runs it and exactly one cluster does the work.  Once
#     in pg_cron's background-worker mode, once in its libpq mode (six
#     clusters, both groups at the same time, so the test waits for two
#     ticks only once).  This is README's first recipe, with its SQL.
#     pg_cron is Debian's postgresql-15-cron; no build of it can be had
#     here for other majors (test/build_pg.sh), where this part is skipped.
#  2. pgbouncer: in session pooling with DISCARD ALL as the reset query, a
#     session lock a client left behind is not held for the next client of
#     the same server connection; in transaction pooling zk_xact_lock works.
#  3. Serialized migrations: the README's psql script run by two deployers
#     on each of two clusters at once applies once per cluster, one cluster
#     after the other, and the late deployer on a cluster skips.
#  4. The fleet view reads other clients' node data, however malformed,
#     without failing.
#
# Runs while the cron groups wait for their ticks.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";

use File::Spec;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use ZkEnsemble;
use ZklockTest;

my $zk = ZkEnsemble->new(servers => 1);
# pg_config on PATH is the major's under test (test/run_all.sh sets PATH).
chomp(my $pkglibdir = `pg_config --pkglibdir`);
my $cron = -e "$pkglibdir/pg_cron.so";
my @cron_conf = $cron ? ("shared_preload_libraries = 'pg_cron'", "cron.database_name = 'postgres'") : ();

# --- 1. pg_cron: schedule first, test the rest while the ticks come
my $job_sql = <<'SQL';
CREATE TABLE job_runs (tick timestamptz, cluster text, token bigint);
-- The README's run-once job: the lock is held until the job commits, and
-- the job takes longer than the clusters' schedulers drift apart.
CREATE FUNCTION nightly_billing(lock_name text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF zk_try_xact_lock(lock_name) THEN
    INSERT INTO job_runs
    SELECT date_trunc('minute', now()), current_setting('cluster_name'), token
      FROM zk_locks WHERE name = lock_name;
    PERFORM pg_sleep(5);
  END IF;
END $$;
SQL

my @bgw;
my @libpq;
for my $i (1 .. 3)
{
	push @bgw, zk_cluster("cron_bgw$i", $zk, conf => [
		@cron_conf,
		($cron ? "cron.use_background_workers = on" : ()),
		"max_worker_processes = 16" ]);
}
for my $i (1 .. 3)
{
	my $node = PostgreSQL::Test::Cluster->new("cron_libpq$i");
	$node->init;
	$node->append_conf('postgresql.conf', join("\n",
		"zklock.hosts = '" . $zk->connect_string . "'",
		"cluster_name = 'cron_libpq$i'",
		@cron_conf,
		($cron ? ("cron.use_background_workers = off", "cron.host = '" . $node->host . "'") : ()))
		  . "\n");
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION zklock');
	push @libpq, $node;
}
my %group = $cron ? (bgw => \@bgw, libpq => \@libpq) : ();
for my $mode (sort keys %group)
{
	for my $node (@{ $group{$mode} })
	{
		$node->safe_psql('postgres', 'CREATE EXTENSION pg_cron');
		$node->safe_psql('postgres', $job_sql);
		$node->safe_psql('postgres',
			"SELECT cron.schedule('nightly-billing', '* * * * *', "
			  . "\$\$SELECT nightly_billing('nightly-billing-$mode')\$\$)");
	}
}
my $cron_start = time;

# --- 2. pgbouncer in front of the first libpq cluster
my $east = $libpq[0];
my $west = $bgw[0];
my $bdir = PostgreSQL::Test::Utils::tempdir();
my $target = 'host=' . $east->host . ' port=' . $east->port . ' dbname=postgres user=' . getpwuid($<);
my ($bouncer, $pgb) = pgbouncer($east,
	sess => "$target pool_mode=session",
	tx => "$target pool_mode=transaction");

# Session pooling: the first client leaves a session lock behind.
my $first = $pgb->safe_psql('sess', "SELECT pg_backend_pid() || ' ' || (zk_lock('pooled') > 0)");
my ($pid1) = split / /, $first;
is($first, "$pid1 true", 'a client takes a session lock through pgbouncer and leaves');
my $second = $pgb->safe_psql('sess', "SELECT pg_backend_pid() || ' ' || count(*) FROM zk_locks");
is($second, "$pid1 0", 'the next client gets the same server connection, without the lock');
is($west->safe_psql('postgres', "SELECT zk_try_lock('pooled')"), 't',
	'another cluster takes the lock at once');

# Transaction pooling: a transaction lock lives exactly as long as the
# transaction, on whichever server connection it ran.
my $tx = $pgb->background_psql('tx');
$tx->query_safe('BEGIN');
ok($tx->query_safe("SELECT zk_xact_lock('tx-pooled')") > 0, 'transaction lock through transaction pooling');
is($west->safe_psql('postgres', "SELECT zk_try_lock('tx-pooled')"), 'f', 'held while the transaction is open');
$tx->query_safe('COMMIT');
is($west->safe_psql('postgres', "SELECT zk_try_lock('tx-pooled')"), 't', 'free once it commits');
# A session lock there stays with the server connection (documented as
# unsafe): the next transaction of any client sees it in zk_locks.
$tx->query_safe("SELECT zk_lock('tx-session')");
$tx->quit;
is($pgb->safe_psql('tx', "SELECT name FROM zk_locks"), 'tx-session',
	'in transaction pooling a session lock outlives its client, as documented');
$pgb->safe_psql('tx', 'SELECT zk_unlock_all()');

$bouncer->signal('INT');
$bouncer->finish;
ok(1, 'pgbouncer stopped');

# --- 3. serialized migrations: the README's script
my $script = File::Spec->catfile($bdir, 'migrate-0042.sql');
open my $fh, '>', $script or die "$script: $!";
print $fh <<'SQL';
\set ON_ERROR_STOP on
BEGIN;
-- one migration at a time, fleet-wide; the token orders them
SELECT zk_xact_lock('migration:0042') AS token \gset
SELECT EXISTS (SELECT FROM schema_migrations WHERE version = '0042') AS applied \gset
\if :applied
\echo migration 0042 already applied
\else
SELECT clock_timestamp() AS started \gset
CREATE TABLE accounts (id bigint PRIMARY KEY, balance numeric NOT NULL DEFAULT 0);
SELECT pg_sleep(2);
INSERT INTO schema_migrations
VALUES ('0042', :token, :'started', clock_timestamp());
\echo migration 0042 applied
\endif
COMMIT;
SQL
close $fh;
for my $node ($east, $west)
{
	$node->safe_psql('postgres', 'CREATE TABLE schema_migrations (version text PRIMARY KEY, token bigint, started timestamptz, finished timestamptz)');
}
my @deploys;
for my $node ($east, $west, $east, $west)
{
	my %d = (out => '', err => '');
	$d{h} = IPC::Run::start(
		[ 'psql', '-X', '-q', '-d', $node->connstr('postgres'), '-f', $script ],
		'>', \$d{out}, '2>', \$d{err}, IPC::Run::timeout(120));
	push @deploys, \%d;
}
$_->{h}->finish for @deploys;
my $all = join '', map { $_->{out} } @deploys;
is(scalar(() = $all =~ /migration 0042 applied/g), 2, 'applied twice: once per cluster');
is(scalar(() = $all =~ /migration 0042 already applied/g), 2, 'each late deployer skips');
is(join('', map { $_->{err} } @deploys), '', 'no deployer failed');
my @m = map {
	[ split /\|/, $_->safe_psql('postgres',
		"SELECT count(*), max(token), extract(epoch FROM max(started)), extract(epoch FROM max(finished)) FROM schema_migrations") ]
} ($east, $west);
is("$m[0][0] $m[1][0]", '1 1', 'one row per cluster');
my ($early, $late) = $m[0][1] < $m[1][1] ? @m : reverse @m;
ok($late->[2] >= $early->[3], 'the clusters applied it one after the other, in token order');

# --- 4. the fleet view and other clients' data
my $dir = $west->safe_psql('postgres', "SELECT zk_lock_path('foreign-data')");
my %put = (
	'other-lock-0000000001' => unpack('H*', '{"host":"h","port":"abc","pid":1e99,"acquired_at":"not a time"}'),
	'other-lock-0000000002' => unpack('H*', '{"host":'),
	'other-lock-0000000003' => 'ff80fe',
	'other-lock-0000000004' => unpack('H*', '{"host":"jvm1","port":8080,"pid":7,"cluster_name":"javaland","acquired_at":"2026-01-01 00:00:00+00"}'),
);
for my $n (sort keys %put)
{
	my $r = zkq($zk, 'put', "$dir/$n", $put{$n});
	chomp $r;
	die "put $n: $r" unless $r eq 'created';
}
my $rows = $west->safe_psql('postgres', q{
	SELECT position, holds, coalesce(host, '-'), coalesce(port::text, '-'), coalesce(pid::text, '-'),
	       coalesce(cluster_name, '-'),
	       coalesce((acquired_at = '2026-01-01 00:00:00+00')::text, '-'), data
	  FROM zk_lock_queue('foreign-data') ORDER BY position});
is($rows, join("\n",
	'1|t|h|-|-|-|-|{"host":"h","port":"abc","pid":1e99,"acquired_at":"not a time"}',
	'2|f|-|-|-|-|-|{"host":',
	'3|f|-|-|-|-|-|\xff80fe',
	'4|f|jvm1|8080|7|javaland|true|{"host":"jvm1","port":8080,"pid":7,"cluster_name":"javaland","acquired_at":"2026-01-01 00:00:00+00"}'),
	'malformed and foreign data shows raw, with only the owner fields that parse');

# --- 1, judged: two ticks in each group, every tick run by every cluster's
# pg_cron, the work done by exactly one
sub ticks
{
	my ($nodes) = @_;
	my %attempts;
	my %work;
	for my $node (@$nodes)
	{
		for (split /\n/, $node->safe_psql('postgres', q{
			SELECT date_trunc('minute', start_time) FROM cron.job_run_details
			 WHERE status = 'succeeded'}))
		{
			$attempts{$_}++;
		}
		for (split /\n/, $node->safe_psql('postgres', 'SELECT tick FROM job_runs'))
		{
			$work{$_}++;
		}
	}
	return (\%attempts, \%work);
}
for my $mode (sort keys %group)
{
	my $nodes = $group{$mode};
	my $full = sub {
		my ($attempts) = ticks($nodes);
		return scalar grep { $attempts->{$_} == 3 } keys %$attempts;
	};
	ok(poll_until(sub { $full->() >= 2 }, 200), "$mode: two ticks run by all three clusters");
	my ($attempts, $work) = ticks($nodes);
	# Ticks every cluster has finished; a later one may still be running.
	my @ticks = sort grep { $attempts->{$_} == 3 } keys %$attempts;
	my @bad = grep { ($work->{$_} // 0) != 1 } @ticks;
	is(scalar(@bad), 0, "$mode: the work ran exactly once on each of " . scalar(@ticks) . ' finished ticks')
	  or diag(join ', ', map { "$_: " . ($work->{$_} // 0) } @ticks);
	is(scalar(grep { $work->{$_} > 1 } keys %$work), 0, "$mode: no tick's work ran twice");
	my @clusters = grep { $_->safe_psql('postgres', 'SELECT count(*) FROM job_runs') > 0 } @$nodes;
	ok(@clusters >= 1, "$mode: runs recorded on " . scalar(@clusters) . ' cluster(s)');
}
diag(sprintf('pg_cron part took %.0f s', time - $cron_start)) if $cron;
if (!$cron)
{
  SKIP: { skip "part 1: pg_cron is not installed for this major ($pkglibdir)", 1; }
}

$_->stop('fast') for (@bgw, @libpq);
$zk->stop;
done_testing();
