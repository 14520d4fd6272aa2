# Copyright (c) zklock contributors
#
# A release has happened when it returns, and a lost transaction lock
# never commits.
#
# 1. Every release form, 40 rounds each: cluster east releases, then at
#    once cluster west tries the lock with no timeout.  With
#    zklock.synchronous_release = on (the default) every try succeeds; with
#    off the lock is only checked to be free within a bounded time.
# 2. A COMMIT whose releases the ensemble cannot answer (every server
#    paused): it returns committed, with a WARNING, after the session
#    timeout; a cancel or a terminate request during that wait ends it at
#    once with a WARNING, the transaction committed.
# 3. Under a lost transaction lock, read-only and NOTIFY-only transactions
#    cannot commit, and the listener hears nothing; under a lost session
#    lock a read-only commit works.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use ZkEnsemble;
use ZklockTest;

my $ROUNDS = 40;

my $zk = ZkEnsemble->new(servers => 3);
my $east = zk_cluster('east', $zk);
my $west = zk_cluster('west', $zk);
$east->safe_psql('postgres', 'CREATE TABLE work (who text)');

my $a = waiter($east);
my $b = waiter($west);

# --- 1. every release form: free for the other cluster when it returns

# One form: $take on east, $release on east, then west's $try at once;
# west gives a lock it got back with $give, east ends with $after.
sub rounds
{
	my (%f) = @_;
	my $free = 0;
	for (1 .. $ROUNDS)
	{
		$a->query_safe($f{take});
		$a->query_safe($f{release});
		my $got = $b->query_safe($f{try});
		$free++ if $got eq 't';
		# West waits for the lock if it did not get it at once, so that
		# every round starts from a free lock.
		$b->query_safe($f{wait}) if $got ne 't';
		$b->query_safe($f{give});
		$a->query_safe($f{after}) if $f{after};
	}
	is($free, $ROUNDS, "$f{label}: free for another cluster when it returns ($free of $ROUNDS)");
}

my %lock = (
	try  => "SELECT zk_try_lock('r')",
	wait => "SELECT zk_lock('r', '10s')",
	give => "SELECT zk_unlock('r')");
my %sem = (
	try  => "SELECT zk_try_semaphore('s', 1)",
	wait => "SELECT zk_semaphore('s', 1, '10s')",
	give => "SELECT zk_semaphore_release('s')");

rounds(%lock, label => 'zk_unlock', take => "SELECT zk_lock('r')",
	release => "SELECT zk_unlock('r')");
rounds(%lock, label => 'zk_unlock_shared', take => "SELECT zk_lock_shared('r')",
	release => "SELECT zk_unlock_shared('r')");
rounds(%lock, label => 'zk_unlock_all', take => "SELECT zk_lock('r'), zk_lock_shared('r')",
	release => 'SELECT zk_unlock_all()');
rounds(label => 'zk_unlock(bigint)', take => 'SELECT zk_lock(4242)',
	release => 'SELECT zk_unlock(4242)', try => 'SELECT zk_try_lock(4242)',
	wait => "SELECT zk_lock(4242, '10s')", give => 'SELECT zk_unlock(4242)');
rounds(label => 'zk_unlock_shared(int, int)', take => 'SELECT zk_lock_shared(42, 42)',
	release => 'SELECT zk_unlock_shared(42, 42)', try => 'SELECT zk_try_lock(42, 42)',
	wait => "SELECT zk_lock(42, 42, '10s')", give => 'SELECT zk_unlock(42, 42)');
rounds(%lock, label => 'DISCARD ALL', take => "SELECT zk_lock('r')",
	release => 'DISCARD ALL');
rounds(%lock, label => 'COMMIT', take => "BEGIN; SELECT zk_xact_lock('r')",
	release => 'COMMIT');
rounds(%lock, label => 'ROLLBACK', take => "BEGIN; SELECT zk_xact_lock_shared('r')",
	release => 'ROLLBACK');
rounds(%lock, label => 'ROLLBACK TO', take => "BEGIN; SAVEPOINT sp; SELECT zk_xact_lock('r')",
	release => 'ROLLBACK TO sp', after => 'COMMIT');
rounds(%sem, label => 'zk_semaphore_release', take => "SELECT zk_semaphore('s', 1)",
	release => "SELECT zk_semaphore_release('s')");
rounds(%sem, label => 'zk_semaphore_release_all', take => "SELECT zk_semaphore('s', 1)",
	release => 'SELECT zk_semaphore_release_all()');
rounds(%sem, label => 'COMMIT of a transaction lease',
	take => "BEGIN; SELECT zk_xact_semaphore('s', 1)", release => 'COMMIT');

# A try that gives up leaves nothing in the way of the next one: west
# fails to take a lock east holds, east releases, and a third try wins.
{
	my $c = waiter($west);
	my $won = 0;
	for (1 .. $ROUNDS)
	{
		$a->query_safe("SELECT zk_lock('r')");
		$b->query_safe("SELECT zk_try_lock('r')") eq 'f' or next;
		$a->query_safe("SELECT zk_unlock('r')");
		my $got = $c->query_safe("SELECT zk_try_lock('r')");
		$won++ if $got eq 't';
		$c->query_safe($got eq 't' ? "SELECT zk_unlock('r')" : "SELECT zk_lock('r', '10s'), zk_unlock('r')");
	}
	is($won, $ROUNDS, "a try that failed is out of the way when it returns ($won of $ROUNDS)");
	$c->quit;
}

# With synchronous_release = off the release returns at once; the lock is
# free within a bounded time all the same.
{
	$a->query_safe('SET zklock.synchronous_release = off');
	my ($free_at_once, $free_soon) = (0, 0);
	for (1 .. 10)
	{
		$a->query_safe("SELECT zk_lock('r')");
		$a->query_safe("SELECT zk_unlock('r')");
		my $got = $b->query_safe("SELECT zk_try_lock('r')");
		$free_at_once++ if $got eq 't';
		$got = poll_until(sub { $b->query_safe("SELECT zk_try_lock('r')") eq 't' }, 10) ? 't' : 'f'
		  if $got ne 't';
		$free_soon++ if $got eq 't';
		$b->query_safe("SELECT zk_unlock('r')") if $got eq 't';
	}
	is($free_soon, 10, 'synchronous_release = off: the lock is free within 10 s');
	diag("synchronous_release = off: free at once in $free_at_once of 10 rounds");
	$a->query_safe('RESET zklock.synchronous_release');
}

# --- 3. lost locks: a transaction lock refuses every commit

my $ro = waiter($east);        # read-only under a lost transaction lock
my $nt = waiter($east);        # NOTIFY-only under a lost transaction lock
my $ss = waiter($east);        # read-only under a lost session lock
my $l = waiter($east);         # listens
$_->query_safe("SET zklock.session_timeout = '2s'") for ($ro, $nt, $ss);
$l->query_safe('LISTEN under_lock');
$ro->query_safe("BEGIN; SELECT zk_xact_lock('lost-ro'); SELECT count(*) FROM work");
$nt->query_safe("BEGIN; SELECT zk_xact_lock('lost-notify'); NOTIFY under_lock, 'lost'");
$ss->query_safe("SELECT zk_lock('lost-session')");

# A notification reaches the listener: the check below can fail.
$east->safe_psql('postgres', "NOTIFY under_lock, 'control'");
like($l->query_safe('SELECT 1'), qr/Asynchronous notification "under_lock" with payload "control"/,
	'the listener hears a notification');

sub state_of
{
	my ($s, $name) = @_;
	my $out = $s->query_safe("SELECT coalesce(max(state), '') FROM zk_locks WHERE name = '$name'");
	chomp $out;
	return $out;
}
$zk->pause_server($_) for 1 .. 3;
ok(poll_until(sub {
	state_of($ro, 'lost-ro') eq 'lost' && state_of($nt, 'lost-notify') eq 'lost'
	  && state_of($ss, 'lost-session') eq 'lost' }, 60),
	'every lock is lost past the session timeout');
$zk->resume_server($_) for 1 .. 3;
ok($zk->wait_for_quorum(60), 'ensemble serves again');

$ro->query('COMMIT');
like($ro->{stderr}, qr/cannot commit while ZooKeeper lock "lost-ro" \(exclusive\) is lost/,
	'a read-only transaction under a lost transaction lock cannot commit');
$ro->{stderr} = '';
$nt->query('COMMIT');
like($nt->{stderr}, qr/cannot commit while ZooKeeper lock "lost-notify" \(exclusive\) is lost/,
	'a NOTIFY-only transaction under a lost transaction lock cannot commit');
$nt->{stderr} = '';
unlike($l->query_safe('SELECT 1'), qr/payload "lost"/, 'and its notification reaches no listener');
is($ss->query_safe('SELECT count(*) FROM work'), '0',
	'a read-only commit under a lost session lock works');
$ss->query("SELECT zk_unlock('lost-session')");
$ss->{stderr} = '';

# --- 2. a COMMIT whose release the ensemble cannot answer

$east->safe_psql('postgres', 'CREATE TABLE marks (who text)');
my ($bound, $cancel, $term) = map { waiter($east) } 1 .. 3;
my %pid;
for my $s ([ bound => $bound ], [ cancel => $cancel ], [ term => $term ])
{
	my ($who, $psql) = @$s;
	$psql->query_safe("SET zklock.session_timeout = '12s'");
	$psql->query_safe("BEGIN; SELECT zk_xact_lock('paused-$who'); INSERT INTO marks VALUES ('$who')");
	$pid{$who} = backend_pid($psql);
}
my $log_offset = -s $east->logfile;
# Inside the lease (a third of the timeout) the commit needs no round
# trip: only the release waits for the paused ensemble.
$zk->pause_server($_) for 1 .. 3;
my $t0 = time;
start_wait($_, 'COMMIT') for ($bound, $cancel, $term);
ok(poll_until(sub { is_waiting($east, $pid{cancel}) && is_waiting($east, $pid{term}) }, 10),
	'COMMITs wait for the ensemble to confirm their release');
is($east->safe_psql('postgres', "SELECT wait_event FROM pg_stat_activity WHERE pid = $pid{cancel}"),
	$east->pg_version >= 17 ? 'ZkRelease' : 'Extension',
	'pg_stat_activity names the wait (from PostgreSQL 17 on)');

$east->safe_psql('postgres', "SELECT pg_cancel_backend($pid{cancel})");
my $t1 = time;
my (undef, $err) = finish_wait($cancel);
ok(time - $t1 < 5, 'a cancel ends the wait at once');
like($err, qr/WARNING:  canceling wait for ZooKeeper to confirm the release due to user request/,
	'with a WARNING');
unlike($err, qr/ERROR/, 'and no error');

$east->safe_psql('postgres', "SELECT pg_terminate_backend($pid{term})");
ok(poll_until(sub {
	slurp_file($east->logfile, $log_offset) =~
	  /WARNING:  canceling the wait for ZooKeeper to confirm the release and terminating connection/ }, 10),
	'a terminate request ends the wait with a WARNING');
ok(poll_until(sub {
	$east->safe_psql('postgres', "SELECT count(*) FROM pg_stat_activity WHERE pid = $pid{term}") eq '0' }, 10),
	'and the backend ends');

(undef, $err) = finish_wait($bound);
my $took = time - $t0;
like($err, qr/WARNING:  ZooKeeper did not confirm the release within 12000 ms/,
	'an unanswered release ends after the session timeout, with a WARNING');
ok($took < 40, sprintf('the COMMIT returned (after %.1f s): no hang', $took));
is($east->safe_psql('postgres', 'SELECT string_agg(who, \',\' ORDER BY who) FROM marks'),
	'bound,cancel,term', 'every one of those transactions committed');
$zk->resume_server($_) for 1 .. 3;
ok($zk->wait_for_quorum(60), 'ensemble serves again');
ok(poll_until(sub { $west->safe_psql('postgres', "SELECT zk_try_lock('paused-bound')") eq 't' }, 60),
	'the unconfirmed release is free once the ensemble is back');

$_->quit for ($a, $b, $ro, $nt, $ss, $l, $bound, $cancel);
$east->stop('fast');
$west->stop('fast');
$zk->stop;
done_testing();
