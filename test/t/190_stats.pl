# Copyright (c) zklock contributors
#
# What operators ask of a lock service, with zklock in
# shared_preload_libraries on two clusters:
#  - a known sequence of acquisitions (re-entry not counted), waits,
#    timeouts, a cancel, a deadlock and a loss gives exactly the expected
#    counters in zk_stat_locks, per mode (exclusive, shared, lease) and
#    per name of a set;
#  - zklock.log_lock_waits logs a wait at deadlock_timeout, naming the
#    holder from its node, and logs its acquisition with the total wait;
#  - zklock.log_sessions logs a session's open and its close at exit,
#    with where their time went;
#  - zk_stat_sessions counts sessions, requests, notifications and proofs,
#    a reconnect and an expiry (a backend cut off through its own proxy),
#    and its sessions_open gauge follows the backends;
#  - visibility as pg_stat_statements: a user sees their own rows, members
#    of pg_read_all_stats every row; zk_stat_reset is not for PUBLIC;
#  - zklock.stat_max bounds the table: the least used go, dealloc counts
#    them; zk_stat_reset empties it.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);
use ZkEnsemble;
use ZkProxy;
use ZklockTest;

my $zk = ZkEnsemble->new(servers => 1);
my $hosts = $zk->connect_string;
my %conf = (preload => 1,
	conf => [ "deadlock_timeout = '200ms'", 'zklock.log_lock_waits = on',
		'zklock.stat_max = 100' ]);
my $east = zk_cluster('east', $zk, %conf);
my $west = zk_cluster('west', $zk, %conf);

# A lock's counters on a cluster, as "acq|waited|timeouts|cancels|deadlocks|
# lost|refused|waited some time|held some time" ('' when there is no row).
sub counters
{
	my ($node, $name, $mode) = @_;
	$mode //= 'exclusive';
	return $node->safe_psql('postgres', qq{
		SELECT acquisitions, waited, timeouts, cancels, deadlocks, lost,
		       commits_refused, wait_time_total > 0 AND wait_time_max > 0,
		       hold_time_total > 0 AND hold_time_max > 0
		  FROM zk_stat_locks WHERE name = '$name' AND mode = '$mode'});
}

# --- acquisitions in every mode and scope; re-entry does not count
$east->safe_psql('postgres', q{
	SELECT zk_lock('st-a'), zk_lock('st-a'), zk_unlock('st-a'), zk_unlock('st-a');
	SELECT zk_lock_shared('st-a'), zk_unlock_shared('st-a');
	BEGIN; SELECT zk_xact_lock('st-x'), zk_xact_lock('st-x'); COMMIT;
	SELECT zk_lock(ARRAY['st-s1', 'st-s2', 'st-s1']), zk_unlock(ARRAY['st-s1', 'st-s2']);
	SELECT zk_semaphore('st-sem', 2), zk_semaphore('st-sem', 2), zk_semaphore_release_all();
	SELECT zk_lock(42), zk_unlock(42);});
is(counters($east, 'st-a'), '1|0|0|0|0|0|0|f|t', 'exclusive: one acquisition (the re-entry is not one), held some time');
is(counters($east, 'st-a', 'shared'), '1|0|0|0|0|0|0|f|t', 'shared: a row of its own');
is(counters($east, 'st-x'), '1|0|0|0|0|0|0|f|t', 'a transaction lock, released at commit');
is(counters($east, 'st-s1') . ' ' . counters($east, 'st-s2'), '1|0|0|0|0|0|0|f|t 1|0|0|0|0|0|0|f|t',
	'a set: an acquisition per name, a name given twice once');
is(counters($east, 'st-sem', 'lease'), '2|0|0|0|0|0|0|f|t', 'a semaphore: every lease');
is(counters($east, 'key:42'), '1|0|0|0|0|0|0|f|t', 'an integer key, by the name zk_locks shows');
is($west->safe_psql('postgres', 'SELECT count(*) FROM zk_stat_locks'), '0',
	'each cluster counts its own backends');
is($east->safe_psql('postgres', q{SELECT database, "user" FROM zk_stat_locks WHERE name = 'st-a' LIMIT 1}),
	'postgres|postgres', 'rows name their database and user');

# --- a wait past deadlock_timeout: counted and logged, with the holder
my $holder = session($west);
my $hpid = backend_pid($holder);
$holder->query_safe("SELECT zk_lock('st-w')");
my $log_at = -s $east->logfile;
{
	my $s = session($east);
	my $pid = backend_pid($s);
	start_wait($s, "SELECT zk_lock('st-w')");
	ok(poll_until(sub { slurp_file($east->logfile, $log_at) =~ /still waiting for ZooKeeper lock "st-w"/ }, 30),
		'log_lock_waits: the wait is logged');
	my $log = slurp_file($east->logfile, $log_at);
	like($log, qr/LOG:  process $pid still waiting for ZooKeeper lock "st-w" \(exclusive\) after \d+\.\d{3} ms/,
		'in log_lock_waits\' words, with the waiting pid and the time waited');
	like($log, qr/DETAIL:  Process holding it: $hpid of cluster "west" on host "[^"]*", application "[^"]*" \(node "_c_[^"]+-lock-\d{10}"\)/,
		'the detail names the holder, from its node on the other cluster');
	sleep 0.3;
	$holder->query_safe("SELECT zk_unlock('st-w')");
	my ($out) = finish_wait($s);
	like($out, qr/^\d+$/, 'the waiter acquires');
	like(slurp_file($east->logfile, $log_at),
		qr/LOG:  process $pid acquired ZooKeeper lock "st-w" \(exclusive\) after \d+\.\d{3} ms/,
		'and its acquisition is logged with the total wait');
	$s->query_safe("SELECT zk_unlock('st-w')");
	is(counters($east, 'st-w'), '1|1|0|0|0|0|0|t|t', 'one acquisition that waited, with its wait time');
	my $max = $east->safe_psql('postgres', "SELECT wait_time_max >= 200 FROM zk_stat_locks WHERE name = 'st-w'");
	is($max, 't', 'the wait time covers the wait (at least deadlock_timeout, in ms)');

	# timeouts: a try that returns false, a wait that runs out
	$holder->query_safe("SELECT zk_lock('st-w')");
	is($s->query_safe("SELECT zk_try_lock('st-w')"), 'f', 'a try finds the lock taken');
	$s->query("SELECT zk_lock('st-w', '300ms')");
	like($s->{stderr}, qr/could not obtain ZooKeeper lock "st-w"/, 'a wait runs out');
	$s->{stderr} = '';
	is(counters($east, 'st-w'), '1|2|2|0|0|0|0|t|t', 'two timeouts, the second after a wait');

	# a cancel
	start_wait($s, "SELECT zk_lock('st-w')");
	ok(poll_until(sub { is_waiting($east, $pid) }, 30), 'another wait');
	$east->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
	my (undef, $err) = finish_wait($s);
	like($err, qr/canceling statement due to user request/, 'cancelled');
	is(counters($east, 'st-w'), '1|3|2|1|0|0|0|t|t', 'a cancel');
	$holder->query_safe("SELECT zk_unlock('st-w')");
}

# --- zklock.log_sessions: the open and the close at exit, with their parts
{
	my $at = -s $east->logfile;
	my $pid = $east->safe_psql('postgres', q{
		SET zklock.log_sessions = on;
		SELECT zk_lock('st-ls'), zk_unlock('st-ls');
		SELECT pg_backend_pid();});
	$pid = (split /\n/, $pid)[-1];
	ok(poll_until(sub { slurp_file($east->logfile, $at) =~ /\[$pid\].*closed in/ }, 30),
		'log_sessions: the close at exit is logged');
	my $log = slurp_file($east->logfile, $at);
	my ($id) = $log =~ /LOG:  ZooKeeper session (0x[0-9a-f]+) opened in \d+\.\d{3} ms/;
	ok(defined $id, 'log_sessions: the open is logged with the session id and its time');
	like($log, qr/DETAIL:  Setup and name resolution \d+\.\d{3} ms, start of the client library's and the lease threads \d+\.\d{3} ms, connection and session creation \d+\.\d{3} ms; server 127\.0\.0\.1:\d+\./,
		'the open\'s detail: resolution, thread start, connection, and the server');
	like($log, qr/LOG:  ZooKeeper session \Q${\($id \/\/ '')}\E closed in \d+\.\d{3} ms\n.*DETAIL:  Releases answered in \d+\.\d{3} ms; threads stopped and session closed in \d+\.\d{3} ms\./,
		'the close names the same session, with the wait for releases and the close');
	my $quiet_at = -s $east->logfile;
	$east->safe_psql('postgres', q{SELECT zk_lock('st-ls'), zk_unlock('st-ls')});
	$east->safe_psql('postgres', 'SELECT 1');
	unlike(slurp_file($east->logfile, $quiet_at), qr/ZooKeeper session 0x/, 'off by default: nothing logged');
}

# --- a deadlock across the clusters: counted once, by its victim
{
	my $a = session($east);
	my $b = session($west);
	$a->query_safe("BEGIN; SELECT zk_xact_lock('dl-1')");
	$b->query_safe("BEGIN; SELECT zk_xact_lock('dl-2')");
	start_wait($a, "SELECT zk_xact_lock('dl-2')");
	start_wait($b, "SELECT zk_xact_lock('dl-1')");
	my @r = (finish_wait($a), finish_wait($b));
	is(scalar(grep { /deadlock detected/ } @r), 1, 'a deadlock, one victim');
	$_->query('ROLLBACK') for ($a, $b);
	$_->{stderr} = '' for ($a, $b);
	my $sum = 0;
	for my $node ($east, $west)
	{
		$sum += $node->safe_psql('postgres',
			"SELECT coalesce(sum(deadlocks), 0) FROM zk_stat_locks WHERE name IN ('dl-1', 'dl-2')");
	}
	is($sum, 1, 'zk_stat_locks counts it once, on the victim\'s cluster');
}

# --- a loss: the node deleted by someone else; the commit that wrote is refused
{
	my $s = session($east);
	$s->query_safe("SET zklock.session_timeout = '3s'");
	$s->query_safe("CREATE TABLE IF NOT EXISTS work (i int)");
	# A second lock keeps the lease proving once st-l is lost.
	$s->query_safe("SELECT zk_lock('st-keep')");
	$s->query_safe("SELECT zk_lock('st-l')");
	my $node = $s->query_safe("SELECT node FROM zk_locks WHERE name = 'st-l'");
	is(zkq($hosts, 'delete', $node), 'deleted', 'another client deletes the node');
	ok(poll_until(sub {
			$s->query_safe("SELECT coalesce(max(state), '') FROM zk_locks WHERE name = 'st-l'") eq 'lost' }, 20),
		'the lock is lost');
	$s->query("BEGIN; INSERT INTO work VALUES (1); COMMIT");
	like($s->{stderr}, qr/cannot commit while ZooKeeper lock "st-l" \(exclusive\) is lost/, 'the commit is refused');
	$s->{stderr} = '';
	$s->query("SELECT zk_unlock('st-l')");
	like($s->{stderr}, qr/was lost before it was released/, 'the unlock warns');
	$s->{stderr} = '';
	is(counters($east, 'st-l'), '1|0|0|0|0|1|1|f|t', 'one loss (counted once, however often seen), one refused commit');
	# Proofs come every sixth of the 3 s timeout while st-keep is held.
	ok(poll_until(sub { $east->safe_psql('postgres', 'SELECT proofs FROM zk_stat_sessions') >= 1 }, 10),
		'the lease proves the lock still held');
	$s->query_safe("SELECT zk_unlock('st-keep')");
}

# --- the session counters
{
	my ($opened, $requests, $notes, $proofs, $failed, $open) = split /\|/, $east->safe_psql('postgres',
		'SELECT sessions_opened, requests, notifications, proofs, proofs_failed, sessions_open FROM zk_stat_sessions');
	is($opened, 6, 'sessions opened: one per backend that used zklock');
	ok($requests > 20, "requests: $requests");
	ok($notes >= 1, "notifications: $notes (a wait was woken)");
	# The deleted node was noticed by its own watch, not by a failed proof.
	ok($proofs >= 1, "proofs $proofs, failed $failed");
	my $live = $east->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()");
	ok($open >= 1 && $open <= $live, "sessions_open $open: at most the $live backends");
	quit_all_sessions();
	ok(poll_until(sub { $east->safe_psql('postgres', 'SELECT sessions_open FROM zk_stat_sessions') eq '0' }, 30),
		'sessions_open falls to 0 once the backends are gone');
}

# --- visibility, as pg_stat_statements
$east->safe_psql('postgres', q{
	CREATE ROLE alice LOGIN;
	CREATE ROLE bob LOGIN IN ROLE pg_read_all_stats;
	GRANT EXECUTE ON FUNCTION zk_lock(text, interval) TO alice;});
$east->safe_psql('postgres', "SELECT zk_lock('st-alice'), zk_unlock('st-alice')", extra_params => [ '-U', 'alice' ]);
is($east->safe_psql('postgres', 'SELECT count(*), min(name), min("user") FROM zk_stat_locks', extra_params => [ '-U', 'alice' ]),
	'1|st-alice|alice', 'a user sees their own rows only');
my $all = $east->safe_psql('postgres', 'SELECT count(*) FROM zk_stat_locks');
ok($all > 5, 'a superuser sees every row');
is($east->safe_psql('postgres', 'SELECT count(*) FROM zk_stat_locks', extra_params => [ '-U', 'bob' ]), $all,
	'so does a member of pg_read_all_stats');
my ($ret, $out, $err) = $east->psql('postgres', 'SELECT zk_stat_reset()', extra_params => [ '-U', 'alice' ]);
like($err, qr/permission denied for function zk_stat_reset/, 'zk_stat_reset is not for PUBLIC');

# --- stat_max: the least used go
is($east->safe_psql('postgres', q{
	SELECT count(*) FROM (SELECT zk_try_lock('ev-' || i), zk_unlock('ev-' || i)
	                        FROM generate_series(1, 150) AS i) AS x}), '150', '150 more names');
my ($rows, $dealloc) = split /\|/, $east->safe_psql('postgres',
	'SELECT (SELECT count(*) FROM zk_stat_locks), dealloc FROM zk_stat_sessions');
ok($rows <= 100, "at most zklock.stat_max rows: $rows");
ok($dealloc >= 50, "dealloc counts the evicted: $dealloc");

# --- a reconnect and an expiry, through a proxy only this backend uses
{
	my $proxy = ZkProxy->new($zk->port(1));
	my $s = waiter($east);
	my $sessions = sub {
		return split /\|/, $east->safe_psql('postgres',
			'SELECT sessions_expired, reconnects, sessions_opened FROM zk_stat_sessions');
	};
	$s->query_safe("SET zklock.hosts = '127.0.0.1:" . $proxy->port . "'");
	$s->query_safe("SET zklock.session_timeout = '3s'");
	$s->query_safe("SELECT zk_try_lock('st-e')");
	my ($expired, $reconnects, $opened) = $sessions->();
	# a short cut: the connection drops, the session lives on
	$proxy->mode('cut');
	$proxy->mode('pass');
	ok(poll_until(sub { ($sessions->())[1] == $reconnects + 1 }, 30),
		'a connection dropped and made again: one reconnect');
	# a long cut: the ensemble expires the session and deletes its node
	$proxy->mode('cut');
	ok(poll_until(sub { zk_count($zk, '/zklock/st-e') == 0 }, 30),
		'cut off past its timeout, the session expires');
	$proxy->mode('pass');
	ok(poll_until(sub { ($sessions->())[0] == $expired + 1 }, 30),
		'told so when it reconnects: one expiry');
	$s->query("SELECT zk_unlock('st-e')");
	like($s->{stderr}, qr/was lost before it was released/, 'and the lock is lost');
	$s->{stderr} = '';
	$s->query_safe("SELECT zk_try_lock('st-e2'), zk_unlock('st-e2')");
	is(($sessions->())[2], $opened + 1, 'the next call opens a new session');
	$s->quit;
	$proxy->stop;
}

# --- reset
my $before = $east->safe_psql('postgres', 'SELECT stats_reset FROM zk_stat_sessions');
$east->safe_psql('postgres', 'SELECT zk_stat_reset()');
is($east->safe_psql('postgres', qq{
	SELECT (SELECT count(*) FROM zk_stat_locks), requests, dealloc, stats_reset > '$before'
	  FROM zk_stat_sessions}), '0|0|0|t', 'zk_stat_reset empties both and stamps stats_reset');

finish(nodes => [ $east, $west ], zk => $zk);
done_testing();
