# Copyright (c) zklock contributors
#
# Mutual-exclusion checker.  C clusters x B backends (at least 2 x 8) loop
# for D seconds: take a transaction lock on one of L names, note the
# critical section's start and end, commit, then record (lock, token,
# backend, start, end) in a table of a separate recorder cluster.  A cycle
# whose lock was lost cannot commit and counts as failed.  Meanwhile a
# nemesis kills, pauses and restarts ZooKeeper servers at random, and now
# and then pauses all of them past the workers' session timeout.
#
# The nemesis also freezes (SIGSTOP) a backend that holds its lock past its
# session timeout, the way swapping or a paused VM would, and resumes it.
#
# Then: no two successful critical sections of the same lock overlap in
# time, tokens increase in acquisition order, and every cycle either
# completed (and was recorded) or failed with an error.  Committed work is
# judged too: each critical section writes a row in its own cluster inside
# the lock's transaction (track_commit_timestamp = on), and no two
# committed rows of one lock may overlap between the acquisition and the
# commit timestamp, across all clusters.
#
# Defaults suit make test; test/checker.sh runs it longer:
#   ZKLOCK_CHECK_SECONDS (40), ZKLOCK_CHECK_CLUSTERS (2),
#   ZKLOCK_CHECK_BACKENDS (8 per cluster), ZKLOCK_CHECK_LOCKS (2)

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";

use POSIX ();
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);
use ZkEnsemble;
use ZklockTest;

my $SECONDS = $ENV{ZKLOCK_CHECK_SECONDS} // 40;
my $CLUSTERS = $ENV{ZKLOCK_CHECK_CLUSTERS} // 2;
my $BACKENDS = $ENV{ZKLOCK_CHECK_BACKENDS} // 8;
my $LOCKS = $ENV{ZKLOCK_CHECK_LOCKS} // 2;
my $SESSION_TIMEOUT_MS = 4000;

my $zk = ZkEnsemble->new(servers => 3);
my @clusters = map {
	zk_cluster("c$_", $zk, max_connections => $BACKENDS + 10,
		conf => ['track_commit_timestamp = on'])
} 1 .. $CLUSTERS;
$_->safe_psql('postgres', 'CREATE TABLE work (lock text, t_start timestamptz)') for @clusters;
my $rec = PostgreSQL::Test::Cluster->new('recorder');
$rec->init;
$rec->start;
$rec->safe_psql('postgres', q{
	CREATE TABLE cs (lock text, token bigint, worker text,
	                 t_start timestamptz, t_end timestamptz);
	CREATE TABLE counts (worker text PRIMARY KEY, attempts int,
	                     completed int, failed int);
});

# A worker: its own psql sessions to its cluster and to the recorder.
sub worker
{
	my ($cluster, $id, $deadline) = @_;
	my $db = $cluster->background_psql('postgres', on_error_stop => 0, timeout => 120);
	my $r = $rec->background_psql('postgres', timeout => 120);
	my ($attempts, $completed, $failed) = (0, 0, 0);
	my $q = sub {
		my ($sql) = @_;
		my ($out) = $db->query($sql);
		my $err = $db->{stderr};
		$db->{stderr} = '';
		return ($out, $err);
	};
	$q->("SET zklock.session_timeout = '${SESSION_TIMEOUT_MS}ms'");
	while (time < $deadline)
	{
		my $lock = 'check-' . int(rand($LOCKS));
		$attempts++;
		$q->('BEGIN');
		my ($got, $err) = $q->("SELECT zk_xact_lock('$lock', '10s') || ',' || clock_timestamp()");
		if ($err ne '' || $got !~ /^(\d+),(.+)$/)
		{
			$q->('ROLLBACK');
			$failed++;
			next;
		}
		my ($token, $t_start) = ($1, $2);
		$q->("INSERT INTO work VALUES ('$lock', '$t_start')");
		my ($t_end) = $q->('SELECT pg_sleep(random() * 0.005); SELECT clock_timestamp()');
		$t_end =~ s/^\s+//;
		(undef, $err) = $q->('COMMIT');
		if ($err ne '')
		{
			$failed++;
			next;
		}
		$r->query_safe("INSERT INTO cs VALUES ('$lock', $token, '$id', '$t_start', '$t_end')");
		$completed++;
	}
	$r->query_safe("INSERT INTO counts VALUES ('$id', $attempts, $completed, $failed)");
	$db->quit;
	$r->quit;
}

my $deadline = time + $SECONDS;
my @kids;
for my $c (0 .. $#clusters)
{
	for my $b (1 .. $BACKENDS)
	{
		my $pid = fork() // die "fork: $!";
		if ($pid == 0)
		{
			my $ok = eval { worker($clusters[$c], "c$c-b$b", $deadline); 1 };
			print STDERR "worker c$c-b$b: $@" unless $ok;
			POSIX::_exit($ok ? 0 : 1);    # no END blocks: the parent owns the servers
		}
		push @kids, $pid;
	}
}

# The nemesis: one fault at a time, servers back before the next.
my %events = (kill => 0, pause => 0, pause_all => 0, freeze => 0);

# Freeze a backend of a random cluster while it holds its lock.
sub freeze_holder
{
	my $c = $clusters[ int(rand(@clusters)) ];
	my $pid = '';
	for (1 .. 20)
	{
		$pid = $c->safe_psql('postgres', q{
			SELECT pid FROM pg_stat_activity
			 WHERE state = 'idle in transaction' AND query LIKE '%zk_xact_lock%'
			 ORDER BY random() LIMIT 1});
		last if $pid =~ /^\d+$/;
		sleep 0.05;
	}
	return 0 unless $pid =~ /^\d+$/;
	kill 'STOP', $pid;
	sleep(($SESSION_TIMEOUT_MS / 1000) * 1.5);
	kill 'CONT', $pid;
	return 1;
}
my $last_all = time;
while (time < $deadline - 3)
{
	sleep 1 + rand(2);
	my $i = 1 + int(rand(3));
	if (time - $last_all > 15 && time < $deadline - 10)
	{
		$zk->pause_server($_) for 1 .. 3;
		sleep(($SESSION_TIMEOUT_MS / 1000) * 1.5);
		$zk->resume_server($_) for 1 .. 3;
		$events{pause_all}++;
		$last_all = time;
	}
	elsif ($events{freeze} == 0 || rand() < 0.4)
	{
		# Until one holder was frozen, every turn tries.
		$events{freeze} += freeze_holder();
	}
	elsif (rand() < 0.5)
	{
		$zk->kill_server($i);
		sleep 1 + rand(2);
		$zk->restart_server($i, 60);
		$events{kill}++;
	}
	else
	{
		$zk->pause_server($i);
		sleep 0.5 + rand(2.5);
		$zk->resume_server($i);
		$events{pause}++;
	}
	$zk->wait_for_quorum(60);
}

my $worker_failures = 0;
for my $pid (@kids)
{
	waitpid($pid, 0);
	$worker_failures++ if $? != 0;
}
is($worker_failures, 0, 'every worker ran to the end');

my ($attempts, $completed, $failed) = split /\|/,
  $rec->safe_psql('postgres', 'SELECT sum(attempts), sum(completed), sum(failed) FROM counts');
my $recorded = $rec->safe_psql('postgres', 'SELECT count(*) FROM cs');
my $overlaps = $rec->safe_psql('postgres', q{
	SELECT count(*) FROM cs a JOIN cs b
	  ON a.lock = b.lock AND a.ctid < b.ctid
	 AND a.t_start < b.t_end AND b.t_start < a.t_end});
my $disorder = $rec->safe_psql('postgres', q{
	SELECT count(*) FROM (
	  SELECT token, lag(token) OVER (PARTITION BY lock ORDER BY t_start) AS prev
	  FROM cs) x WHERE token <= prev});

# Committed work of every cluster, judged from acquisition to commit.
$rec->safe_psql('postgres', 'CREATE TABLE committed (lock text, t_start timestamptz, t_commit timestamptz)');
for my $c (@clusters)
{
	my $rows = $c->safe_psql('postgres',
		"SELECT lock || '|' || t_start || '|' || pg_xact_commit_timestamp(xmin) FROM work");
	my @values = map {
		my ($l, $s, $e) = split /\|/, $_;
		"('$l', '$s', '$e')"
	} split /\n/, $rows;
	# One statement: a psql per row would take minutes.
	$rec->safe_psql('postgres', 'INSERT INTO committed VALUES ' . join(',', @values))
	  if @values;
}
my $committed = $rec->safe_psql('postgres', 'SELECT count(*) FROM committed');
my $committed_overlaps = $rec->safe_psql('postgres', q{
	SELECT count(*) FROM committed a JOIN committed b
	  ON a.lock = b.lock AND a.ctid < b.ctid
	 AND a.t_start < b.t_commit AND b.t_start < a.t_commit});

diag(sprintf('checker: %d clusters x %d backends, %d s, %d locks; nemesis: %d kills, %d pauses, %d whole-ensemble pauses, %d frozen holders',
	$CLUSTERS, $BACKENDS, $SECONDS, $LOCKS, $events{kill}, $events{pause}, $events{pause_all}, $events{freeze}));
diag("checker: committed rows $committed, overlapping from acquisition to commit $committed_overlaps");
diag("checker: cycles done $completed, failed $failed, overlaps $overlaps, tokens out of order $disorder");

is($rec->safe_psql('postgres', 'SELECT count(*) FROM counts'), $CLUSTERS * $BACKENDS,
	'every worker reported');
ok($completed > 0, 'critical sections completed');
is($attempts, $completed + $failed, 'every cycle completed or failed: none vanished');
is($recorded, $completed, 'every completed cycle is recorded');
is($overlaps, 0, 'no two critical sections of one lock overlap');
is($committed, $completed, 'every completed cycle committed its row');
is($committed_overlaps, 0, 'no two committed sections of one lock overlap from acquisition to commit');
is($disorder, 0, 'tokens increase in acquisition order');
ok($events{kill} + $events{pause} + $events{pause_all} > 0, 'the nemesis struck');
ok($events{freeze} > 0, 'the nemesis froze holders');

$rec->stop('fast');
$_->stop('fast') for @clusters;
$zk->stop;
done_testing();
