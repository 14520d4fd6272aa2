# Copyright (c) zklock contributors
#
# pg_advisory_* on a key zklock.fleet_advisory_keys lists, across two
# clusters (issue 44): every blocking form waits for the other cluster's
# holder and is granted at its release, every try form returns false while
# it holds, as zk_lock_queue shows; a key the setting does not list stays
# local.  lock_timeout, a cancel and the holder's exit end and release as
# they do for PostgreSQL's own locks, and leave nothing behind in either
# place.  On the holder's own cluster a session without the setting still
# conflicts with a routed holder, and a routed session with a plain
# holder; pg_locks shows the routed lock.  The wait shows in
# zklock.log_lock_waits and zk_stat_locks like any zklock lock's.  A
# session's statement prepared before its database had zklock is routed
# once another session creates it.  Through pgbouncer in session mode a
# client's lock ends with the client.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";

use IPC::Run ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ZkEnsemble;
use ZklockTest;

my $zk = ZkEnsemble->new(servers => 1);
my $east = zk_cluster('east', $zk, preload => 1);
my $west = zk_cluster('west', $zk,
	conf => [ 'zklock.log_lock_waits = on', "deadlock_timeout = '100ms'" ]);
my $keys = '101, 7:8';
my $routed = { 'zklock.fleet_advisory_keys' => $keys };

# Whose nodes are in a key's queue, in order: "cluster:holds" each.
sub queue
{
	my ($key) = @_;
	return $east->safe_psql('postgres',
		"SELECT string_agg(cluster_name || CASE WHEN holds THEN ':t' ELSE ':f' END, ' ' ORDER BY position) FROM zk_lock_queue($key)"
	);
}

my $e = session($east, set => $routed, warm => 1);
my $w = session($west, set => $routed, warm => 1);
my $wpid = backend_pid($w);

# --- every blocking form waits for the other cluster and gets it at release
my @blocking = (
	[ 'pg_advisory_lock(101)', 'pg_advisory_unlock(101)', '101' ],
	[ 'pg_advisory_lock_shared(101)', 'pg_advisory_unlock_shared(101)', '101' ],
	[ 'pg_advisory_lock(7, 8)', 'pg_advisory_unlock(7, 8)', '7, 8' ],
	[ 'pg_advisory_lock_shared(7, 8)', 'pg_advisory_unlock_shared(7, 8)', '7, 8' ],
	[ 'pg_advisory_xact_lock(101)', undef, '101' ],
	[ 'pg_advisory_xact_lock_shared(101)', undef, '101' ],
	[ 'pg_advisory_xact_lock(7, 8)', undef, '7, 8' ],
	[ 'pg_advisory_xact_lock_shared(7, 8)', undef, '7, 8' ]);
for my $f (@blocking)
{
	my ($call, $unlock, $key) = @$f;
	$e->query_safe("SELECT pg_advisory_lock($key)");
	$w->query_safe('BEGIN') unless $unlock;
	start_wait($w, "SELECT $call");
	ok(poll_until(sub { queue($key) eq 'east:t west:f' }, 30),
		"$call waits behind the other cluster's holder in zk_lock_queue");
	ok(in_call($west, $wpid), "$call: still waiting");
	$e->query_safe("SELECT pg_advisory_unlock($key)");
	my ($out, $err) = finish_wait($w);
	is($err, '', "$call: granted at the holder's release");
	is(queue($key), 'west:t', "$call: holds the fleet's lock");
	$w->query_safe($unlock ? "SELECT $unlock" : 'COMMIT');
	is(queue($key), '', "$call: released in ZooKeeper");
}

# --- every try form returns false while the other cluster holds
my @try = (
	'pg_try_advisory_lock(101)', 'pg_try_advisory_lock_shared(101)',
	'pg_try_advisory_lock(7, 8)', 'pg_try_advisory_lock_shared(7, 8)',
	'pg_try_advisory_xact_lock(101)', 'pg_try_advisory_xact_lock_shared(101)',
	'pg_try_advisory_xact_lock(7, 8)', 'pg_try_advisory_xact_lock_shared(7, 8)');
$e->query_safe('SELECT pg_advisory_lock(101), pg_advisory_lock(7, 8)');
for my $call (@try)
{
	is($w->query_safe("SELECT $call"), 'f', "$call is false while the other cluster holds");
}
is(queue('101') . ' ' . queue('7, 8'), 'east:t east:t', 'the try forms left no node behind');
is($w->query_safe("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = $wpid"),
	'0', 'nor a local advisory lock');
$e->query_safe('SELECT pg_advisory_unlock(101), pg_advisory_unlock(7, 8)');
is($w->query_safe('SELECT pg_try_advisory_lock(101), pg_try_advisory_lock_shared(7, 8)'),
	't|t', 'free again: the try forms take it');
$e->query_safe('SELECT pg_advisory_lock_shared(7, 8)');
is(queue('7, 8'), 'west:t east:t', 'shared holders of two clusters together');
$w->query_safe('SELECT pg_advisory_unlock_all()');
$e->query_safe('SELECT pg_advisory_unlock_all()');

# --- a key the setting does not list stays local
$e->query_safe('SELECT pg_advisory_lock(102), pg_advisory_lock(8, 7)');
is($w->query_safe('SELECT pg_try_advisory_lock(102), pg_try_advisory_lock(8, 7)'),
	't|t', 'an unlisted key is not seen by the other cluster');
is(queue('102') . queue('8, 7'), '', 'nor in ZooKeeper');
$w->query_safe('SELECT pg_advisory_unlock_all()');
$e->query_safe('SELECT pg_advisory_unlock_all()');

# --- lock_timeout: 55P03 as PostgreSQL's, both halves given back
$e->query_safe('SELECT pg_advisory_lock(101)');
# (a new backend of a cluster without preload: zklock is loaded first)
my ($ret, $stdout, $stderr) = $west->psql('postgres',
	"LOAD 'zklock'; SET zklock.fleet_advisory_keys = '$keys'; SET lock_timeout = '300ms'; SELECT pg_advisory_lock(101)"
);
like($stderr, qr/ERROR:  canceling statement due to lock timeout/,
	'lock_timeout ends a wait for the other cluster as it ends a local one');
$w->query_safe("SET lock_timeout = '300ms'");
$w->query("SELECT pg_advisory_xact_lock(101)");
like($w->{stderr}, qr/canceling statement due to lock timeout/, 'the transaction form too');
$w->{stderr} = '';
$w->query_safe('RESET lock_timeout');
ok(poll_until(sub { queue('101') eq 'east:t' }, 30), 'the timed-out waiters left no node');
is($w->query_safe("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = $wpid"),
	'0', 'nor their local advisory lock');
# the local half of the wait is PostgreSQL's own: lock_timeout there too
my $e2 = session($east, set => $routed);
$e2->query("SET lock_timeout = '300ms'; SELECT pg_advisory_lock(101)");
like($e2->{stderr}, qr/canceling statement due to lock timeout/,
	'behind a routed holder of the same cluster, lock_timeout as ever');
$e2->{stderr} = '';
$e2->query_safe('RESET lock_timeout');

# --- a cancel ends the wait and gives both halves back
start_wait($w, 'SELECT pg_advisory_lock(101)');
ok(poll_until(sub { queue('101') eq 'east:t west:f' }, 30), 'waiting for the other cluster');
$west->safe_psql('postgres', "SELECT pg_cancel_backend($wpid)");
my ($out, $err) = finish_wait($w);
like($err, qr/canceling statement due to user request/, 'a cancel ends the wait');
is(queue('101'), 'east:t', 'the cancelled waiter left no node');
is($w->query_safe("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = $wpid"),
	'0', 'nor its local advisory lock');

# --- zklock.log_lock_waits and the statistics see the routed wait
my $log_at = -s $west->logfile;
start_wait($w, 'SELECT pg_advisory_lock(101)');
ok( poll_until(
		sub { slurp_file($west->logfile, $log_at) =~ /still waiting for ZooKeeper lock "key:101"/ },
		30),
	'log_lock_waits names the routed wait');

# --- the holder's backend exits: the other cluster gets it
my $epid = backend_pid($e);
$east->safe_psql('postgres', "SELECT pg_terminate_backend($epid)");
($out, $err) = finish_wait($w);
is($err, '', "the holder's exit grants the waiter");
is(queue('101'), 'west:t', 'the waiter holds the fleet lock');
ok( poll_until(
		sub {
			$east->safe_psql('postgres',
				"SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = $epid") eq '0';
		},
		30),
	"the holder's local lock ended with it");
$w->query_safe('SELECT pg_advisory_unlock(101)');
eval { quit_session($e) };    # its backend is gone
is( $east->safe_psql('postgres',
		"SELECT acquisitions > 0 FROM zk_stat_locks WHERE name = 'key:101' AND mode = 'exclusive'"),
	't',
	'zk_stat_locks counts the routed acquisitions');

# --- on one cluster, a session without the setting and a routed one conflict
my $plain = session($east);
my $r = session($east, set => $routed);
my $rpid = backend_pid($r);
$r->query_safe('SELECT pg_advisory_lock(101)');
is($plain->query_safe('SELECT pg_try_advisory_lock(101)'), 'f',
	'a session without the setting cannot take a key a routed session holds');
is( $plain->query_safe(
		"SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objid = 101 AND granted"),
	$rpid, "pg_locks shows the routed holder's advisory lock");
$r->query_safe('SELECT pg_advisory_unlock(101)');
$plain->query_safe('SELECT pg_advisory_lock(101)');
is($r->query_safe('SELECT pg_try_advisory_lock(101)'), 'f',
	'a routed session cannot take a key a plain session holds');
is(queue('101'), '', 'and queued nothing in ZooKeeper');
$plain->query_safe('SELECT pg_advisory_unlock(101)');

# --- a plan a long-lived session cached before its database had zklock
# 1.3 (a pooled server connection's prepared statement) is routed once
# another session creates the extension there: the builtins it calls are
# pinned, so only zklock can tell that it must be made again
$east->safe_psql('postgres', 'CREATE DATABASE late');
my $late = $east->background_psql('late');
$late->query_safe("SET zklock.fleet_advisory_keys = '$keys'");
$late->query_safe('PREPARE early AS SELECT pg_advisory_lock(101)');
$late->query_safe('EXECUTE early');
is(queue('101'), '', 'before CREATE EXTENSION: the prepared lock is local only');
$late->query_safe('SELECT pg_advisory_unlock(101)');
$east->safe_psql('late', 'CREATE EXTENSION zklock');
$late->query_safe('EXECUTE early');
is(queue('101'), 'east:t',
	'after CREATE EXTENSION in another session: the same prepared statement takes the fleet lock');
$late->query_safe('SELECT pg_advisory_unlock(101)');
is(queue('101'), '', 'and releases it');
$late->quit;

# --- through pgbouncer in session mode: the deployer's role has the
# setting; a client that never unlocks (as sqitch) holds the fleet's lock
# until it leaves, and the reset query DISCARD ALL releases both halves
$east->safe_psql('postgres', qq{
	CREATE ROLE deployer LOGIN;
	ALTER ROLE deployer SET zklock.fleet_advisory_keys = '$keys';
});
my ($bouncer, $pgb) = pgbouncer($east,
	sess => 'host=' . $east->host . ' port=' . $east->port
	  . ' dbname=postgres user=deployer pool_mode=session');
my $client = $pgb->background_psql('sess');
$client->query_safe('SELECT pg_advisory_lock(101)');
is(queue('101'), 'east:t', 'a client through pgbouncer holds the fleet lock');
is($w->query_safe('SELECT pg_try_advisory_lock(101)'), 'f', 'the other cluster cannot take it');
$client->quit;
ok(poll_until(sub { queue('101') eq '' }, 30),
	"the client's leaving releases it (pgbouncer's DISCARD ALL)");
is($east->safe_psql('postgres', "SELECT count(*) FROM pg_stat_activity WHERE usename = 'deployer'"),
	'1', 'on the server connection pgbouncer keeps');
is($w->query_safe('SELECT pg_try_advisory_lock(101), pg_advisory_unlock(101)'), 't|t',
	'the other cluster takes it');
$bouncer->signal('INT');
$bouncer->finish;
undef $bouncer;

finish(nodes => [ $east, $west ], zk => $zk);
done_testing();
