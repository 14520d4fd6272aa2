# Copyright (c) zklock contributors
#
# Fleet-wide semaphores (zk_semaphore and friends) on a 3-server ensemble:
#
#  1. The SQL surface: leases, tokens, zk_locks and zk_semaphore_queue,
#     try, release by token, bad input, scopes, savepoints, DISCARD ALL.
#  2. Give-ups leave nothing: a timeout, a cancel and a terminate, both
#     while queued for the semaphore's mutex and while waiting (holding the
#     mutex) for a lease: no node, no watch.
#  3. A lease deleted by another client is lost: commits are refused.
#  4. Deadlock: a lock held while waiting for a full semaphore whose holder
#     waits for that lock: one 40P01, the other gets what it waits for.
#  5. Ledger: 3 clusters x 4 backends cycle on max_leases 3 (session and
#     transaction leases): never more than 3 holders, every cycle done, and
#     a request made clearly earlier is served first.
#  6. No herd: 50 waiters behind 3 holders; the leases directory is watched
#     by one session, and every waiter is woken at most twice (its mutex
#     predecessor's release, and the lease it gets).
#  7. Curator's InterProcessSemaphoreV2 shares the limit, both directions.
#
# Every wait is a bounded poll; peers are stopped by pid at the end.

use strict;
use warnings;

use File::Path qw(make_path);
use FindBin;
use lib "$FindBin::Bin/../perl";

use IPC::Run ();
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);
use ZkEnsemble;
use ZklockTest;

my $interop = "$FindBin::Bin/../interop";
my $classes = "$PostgreSQL::Test::Utils::tmp_check/sem_classes";

my $zk = ZkEnsemble->new(servers => 3);
my $hosts = $zk->connect_string;
my @nodes = map { zk_cluster($_, $zk, max_connections => 80) } qw(east west north);
my ($east, $west, $north) = @nodes;

sub dir_of
{
	my ($name) = @_;
	return $east->safe_psql('postgres', "SELECT zk_lock_path('$name')");
}

sub leases { return zk_count($zk, dir_of($_[0]) . '/leases'); }
sub queued { return zk_count($zk, dir_of($_[0]) . '/locks'); }

# The watches of nodes' owners, where every node's owner watches it (no
# Curator peer holds a node where this is used): once others came, or once
# its child watch on the directory went (the owner's own release, a given-up
# wait's removal).
sub own_watches
{
	return scalar grep { m{/_c_} } split /\n/,
	  zkq($hosts, 'tree', '/zklock');
}

sub sql_err
{
	my ($s, $sql) = @_;
	$s->query($sql);
	my $err = $s->{stderr};
	$s->{stderr} = '';
	return $err;
}

# --- 1. the SQL surface
my @h = map { waiter($east) } 1 .. 4;
my @tok = map { $h[$_]->query_safe("SELECT zk_semaphore('s', 3)") } 0 .. 2;
ok((grep { $_ > 0 } @tok) == 3 && $tok[0] < $tok[1] && $tok[1] < $tok[2],
	'three leases of max 3, with increasing tokens');
is(leases('s'), 3, 'three lease nodes');
is($h[3]->query_safe("SELECT zk_try_semaphore('s', 3)"), 'f', 'a fourth does not fit');
is(leases('s'), 3, 'and leaves no node');
is($h[0]->query_safe("SELECT mode || ' ' || scope || ' ' || token || ' ' || state FROM zk_locks"),
	"lease session $tok[0] held", 'zk_locks shows the lease');
is( $h[3]->query_safe(
		"SELECT string_agg(mode || ':' || holds || ':' || pid, ',' ORDER BY position) FROM zk_semaphore_queue('s')"),
	join(',', map { 'lease:true:' . backend_pid($h[$_]) } 0 .. 2),
	'zk_semaphore_queue shows every holder with its owner');

my $w = waiter($east);
my $wpid = backend_pid($w);
start_wait($w, "SELECT zk_semaphore('s', 3)");
ok(poll_until(sub { is_waiting($east, $wpid) && leases('s') == 4 }, 30),
	'a fourth acquirer waits with its lease node made');
is( $h[3]->query_safe(
		"SELECT string_agg(mode || ':' || holds, ',' ORDER BY position) FROM zk_semaphore_queue('s')"),
	'lease:true,lease:true,lease:true,lease:false,mutex:false',
	'the waiting lease shows as not holding, its acquirer on the mutex');
is($h[1]->query_safe("SELECT zk_semaphore_release('s')"), 't', 'one holder releases');
ok(poll_until(sub { !in_call($east, $wpid) }, 30), 'the waiter gets the freed lease');
my ($wtok, $werr) = finish_wait($w);
ok($wtok > $tok[2] && $werr eq '', 'with a larger token');
is(queued('s'), 0, 'the mutex is free again');

is($h[2]->query_safe("SELECT zk_semaphore_release('s')"), 't', 'another releases');
is($h[0]->query_safe("SELECT zk_semaphore('s', 3)") > $wtok, 1,
	'a backend may hold two leases');
is($h[0]->query_safe("SELECT count(*) FROM zk_locks WHERE name = 's'"), '2', 'both in zk_locks');
is($h[0]->query_safe("SELECT zk_semaphore_release('s', $tok[0])"), 't', 'release by token');
is($h[0]->query_safe("SELECT token FROM zk_locks WHERE name = 's'") == $tok[0], '',
	'the one named by the token went');
like(sql_err($h[0], "SELECT zk_semaphore_release('s', 42)"),
	qr/WARNING:  you don't own a session lease of ZooKeeper semaphore "s" with token 42/,
	'an unknown token warns');
is($h[0]->query_safe("SELECT zk_semaphore_release_all()"), '1', 'release_all releases the rest');
like(sql_err($h[0], "SELECT zk_semaphore_release('s')"),
	qr/WARNING:  you don't own a session lease of ZooKeeper semaphore "s"/, 'none left: a warning');
like(sql_err($h[0], "SELECT zk_semaphore('s', 0)"), qr/ERROR:  max_leases must be at least 1/,
	'max_leases 0 is refused');
like(sql_err($h[0], "SELECT zk_semaphore('', 1)"), qr/ERROR:  lock name must not be empty/,
	'an empty name is refused');
is($h[0]->query_safe("SELECT zk_semaphore(NULL, 3) IS NULL AND zk_semaphore('s', NULL) IS NULL"),
	't', 'NULL arguments give NULL');

# A semaphore and a lock of one name are independent.
$h[1]->query_safe("SELECT zk_lock('both')");
is($h[2]->query_safe("SELECT zk_try_semaphore('both', 1)"), 't',
	'a semaphore is free while a lock of its name is held');
is($h[1]->query_safe("SELECT zk_try_semaphore('both', 1)"), 'f', 'and counts its lease');
is($h[3]->query_safe("SELECT zk_try_lock('both')"), 'f', 'the lock still excludes');
is($h[3]->query_safe("SELECT string_agg(mode, ',') FROM zk_lock_queue('both')"), 'exclusive',
	'the lock\'s queue shows only the lock');
$h[$_]->query_safe("SELECT zk_unlock_all()") for 1, 2;

# Transaction scope, savepoints, DISCARD ALL.
$w->query_safe("SELECT zk_unlock_all()");
is(leases('s'), 0, 'zk_unlock_all releases session leases too');
$w->query_safe("BEGIN; SELECT zk_xact_semaphore('s', 1)");
is($h[0]->query_safe("SELECT zk_try_xact_semaphore('s', 1)"), 'f', 'a transaction lease counts');
$w->query_safe("COMMIT");
is(leases('s'), 0, 'and goes at commit');
$w->query_safe("BEGIN; SAVEPOINT a; SELECT zk_xact_semaphore('s', 2)");
$w->query_safe("ROLLBACK TO a");
is(leases('s'), 0, 'ROLLBACK TO a savepoint releases the lease taken after it');
$w->query_safe("ROLLBACK");
$w->query_safe("SELECT zk_semaphore('s', 2)");
$w->query_safe("DISCARD ALL");
is(leases('s'), 0, 'DISCARD ALL releases session leases');

# --- 2. give-ups leave nothing
$h[0]->query_safe("SELECT zk_semaphore('g', 1)");
is(sql_err($h[1], "SELECT zk_semaphore('g', 1, '300ms')") =~
	  /ERROR:  could not obtain a lease of ZooKeeper semaphore "g"/ ? 1 : 0, 1,
	'a timeout while waiting for a lease: 55P03');
is(leases('g') . '/' . queued('g'), '1/0', 'leaves no lease node and no mutex node');
ok(poll_until(sub { $zk->all_watches == own_watches() }, 10),
	'and no watch but each node\'s owner\'s');

my $wa = waiter($east);
my $wb = waiter($east);
my ($pa, $pb) = (backend_pid($wa), backend_pid($wb));
start_wait($wa, "SELECT zk_semaphore('g', 1)");
ok(poll_until(sub { is_waiting($east, $pa) && leases('g') == 2 }, 30), 'a waits for a lease');
start_wait($wb, "SELECT zk_semaphore('g', 1)");
ok(poll_until(sub { is_waiting($east, $pb) && queued('g') == 2 }, 30), 'b queues for the mutex');
is( $h[1]->query_safe(
		"SELECT string_agg(mode || ':' || holds, ',' ORDER BY position) FROM zk_semaphore_queue('g')"),
	'lease:true,lease:false,mutex:false,queued:false',
	'zk_semaphore_queue: the holder, a\'s waiting lease, a on the mutex, b queued');
# Each contender's node is covered by the child watch of the listing sent
# behind its create until another child comes or it waits behind another,
# then by a watch of its own.
ok( poll_until(
		sub {
			$zk->total_watches == 4 && $zk->all_watches == 6;
		},
		10),
	'data watches: b\'s on a\'s mutex node, and their owners\' on it, on the holder\'s lease (others came) and on b\'s (it waits); child watches: a\'s on the leases (its wait, covering its lease), b\'s on the locks')
  or diag explain $zk->watches_by_path;
my $hpid = backend_pid($h[0]);
ok( poll_until(
		sub {
			$h[1]->query_safe(
				"SELECT count(*) FROM zk_lock_waits() WHERE waiter_pid = $pa AND lock_path LIKE '%/g/leases' AND blocker_holds AND blocker_pid = $hpid"
			) eq '1';
		},
		15),
	'zk_lock_waits: a, past deadlock_timeout, waits for a lease; the holder\'s lease is in its way');
$east->safe_psql('postgres', "SELECT pg_cancel_backend($pb)");
ok(poll_until(sub { !in_call($east, $pb) }, 30), 'cancel while queued for the mutex');
like((finish_wait($wb))[1], qr/canceling statement due to user request/, 'b was canceled');
$east->safe_psql('postgres', "SELECT pg_cancel_backend($pa)");
ok(poll_until(sub { !in_call($east, $pa) }, 30), 'cancel while waiting for a lease');
like((finish_wait($wa))[1], qr/canceling statement due to user request/, 'a was canceled');
is(leases('g') . '/' . queued('g'), '1/0', 'no node is left');
ok(poll_until(sub { $zk->all_watches == own_watches() }, 10),
	'no watch is left but each node\'s owner\'s');

start_wait($wa, "SELECT zk_semaphore('g', 1)");
ok(poll_until(sub { is_waiting($east, $pa) && leases('g') == 2 }, 30), 'a waits again');
start_wait($wb, "SELECT zk_semaphore('g', 1)");
ok(poll_until(sub { is_waiting($east, $pb) && queued('g') == 2 }, 30), 'b queues again');
$east->safe_psql('postgres', "SELECT pg_terminate_backend($pa), pg_terminate_backend($pb)");
ok(poll_until(sub { leases('g') == 1 && queued('g') == 0 }, 5),
	'terminated: their nodes go at once, not after the session timeout');
eval { $_->quit } for $wa, $wb;    # their backends are gone
$h[0]->query_safe("SELECT zk_unlock_all()");
is(leases('g'), 0, 'the holder released');

# --- 3. a lease deleted by someone else is lost
{
	my $s = waiter($east);
	$s->query_safe("SET zklock.session_timeout = '3s'");
	$s->query_safe("CREATE TABLE IF NOT EXISTS work(x text)");
	$s->query_safe("BEGIN");
	$s->query_safe("SELECT zk_xact_semaphore('stolen', 2)");
	$s->query_safe("INSERT INTO work VALUES ('stolen')");
	my $node = $s->query_safe("SELECT node FROM zk_locks WHERE name = 'stolen'");
	is(zkq($hosts, 'delete', $node), 'deleted',
		'another client deletes a transaction lease\'s node');
	ok( poll_until(
			sub {
				$s->query_safe("SELECT state FROM zk_locks WHERE name = 'stolen'") eq 'lost';
			},
			10),
		'the lease shows as lost');
	like(sql_err($s, 'COMMIT'),
		qr/ERROR:  cannot commit while lease of ZooKeeper semaphore "stolen" is lost/,
		'the commit is refused');
	is($east->safe_psql('postgres', "SELECT count(*) FROM work WHERE x = 'stolen'"), '0',
		'nothing was committed');
	$s->quit;
}

# --- 4. deadlock through a semaphore
{
	my $a = waiter($east);
	my $b = waiter($west);
	my $apid = backend_pid($a);
	my $bpid = backend_pid($b);
	$b->query_safe("SELECT zk_semaphore('dl-s', 1)");
	$a->query_safe("SELECT zk_lock('dl-x')");
	start_wait($a, "SELECT zk_semaphore('dl-s', 1)");
	ok(poll_until(sub { started($east, $apid, "SELECT zk_semaphore('dl-s'") }),
		'a\'s wait has begun');
	start_wait($b, "SELECT zk_lock('dl-x')");
	ok(poll_until(sub { started($west, $bpid, "SELECT zk_lock('dl-x'") }),
		'b\'s wait has begun');
	ok(poll_until(sub { !in_call($east, $apid) || !in_call($west, $bpid) }, 60),
		'the cycle ends within a few deadlock_timeouts');
	# The victim's session locks stay, as in PostgreSQL: it lets go of them.
	my ($first, $other) =
	  in_call($east, $apid) ? ($b, $a) : ($a, $b);
	my ($fout, $ferr) = finish_wait($first);
	$first->query_safe("SELECT zk_unlock_all()") if $ferr =~ /deadlock detected/;
	my $onode = $other == $a ? $east : $west;
	my $opid = $other == $a ? $apid : $bpid;
	ok(poll_until(sub { !in_call($onode, $opid) }, 30), 'then the other call returns');
	my ($oout, $oerr) = finish_wait($other);
	my ($aout, $aerr, $bout, $berr) = $first == $a
	  ? ($fout, $ferr, $oout, $oerr) : ($oout, $oerr, $fout, $ferr);
	my @victims = grep { /deadlock detected/ } ($aerr, $berr);
	is(scalar(@victims), 1, 'exactly one member gets 40P01');
	ok(($aerr eq '' && $aout > 0) || ($berr eq '' && $bout > 0),
		'the other gets what it waited for');
	$_->query_safe("SELECT zk_unlock_all()") for $a, $b;
	$a->quit;
	$b->quit;
}

# A lease wait ends with any one release: a cycle through one holder's
# lease is no deadlock while another holder, who waits for nothing, can
# still let its lease go.  w holds a lock a waits for, and waits for a
# lease of two held by a and c.
{
	my $a = waiter($east);
	my $c = waiter($west);
	my $w = waiter($north);
	my ($apid, $wpid) = (backend_pid($a), backend_pid($w));
	$a->query_safe("SELECT zk_semaphore('dl-or', 2)");
	$c->query_safe("SELECT zk_semaphore('dl-or', 2)");
	$w->query_safe("SELECT zk_lock('dl-or-x')");
	start_wait($a, "SELECT zk_lock('dl-or-x')");
	start_wait($w, "SELECT zk_semaphore('dl-or', 2)");
	ok( poll_until(
			sub {
				$east->safe_psql('postgres',
					"SELECT count(DISTINCT waiter_pid) FROM zk_lock_waits() WHERE waiter_pid IN ($apid, $wpid)"
				) eq '2';
			},
			30),
		'a and w wait past deadlock_timeout (their searches have run)');
	ok(!poll_until(sub { !in_call($east, $apid) || !in_call($north, $wpid) }, 5),
		'neither is taken for a deadlock victim over the next searches');
	$c->query_safe("SELECT zk_semaphore_release('dl-or')");
	ok(poll_until(sub { !in_call($north, $wpid) }, 30), 'c lets its lease go: w gets one');
	my ($wout, $werr) = finish_wait($w);
	is($werr, '', 'without an error');
	$w->query_safe("SELECT zk_unlock('dl-or-x')");
	ok(poll_until(sub { !in_call($east, $apid) }, 30), 'w lets the lock go: a gets it');
	my ($aout, $aerr) = finish_wait($a);
	is($aerr, '', 'without an error');
	$_->query_safe("SELECT zk_unlock_all(), zk_semaphore_release_all()") for $a, $c, $w;
	$_->quit for $a, $c, $w;
}

# A backend that holds every lease and asks for one more would wait for
# itself: 40P01 at once, nothing left behind; a try form just says false.
{
	my $s = waiter($east);
	# A search would find it only after deadlock_timeout: make that long.
	$s->query_safe("SET deadlock_timeout = '30s'");
	$s->query_safe("SELECT zk_semaphore('self', 2)");
	$s->query_safe("SELECT zk_semaphore('self', 2)");
	my $t0 = time;
	like(sql_err($s, "SELECT zk_semaphore('self', 2)"),
		qr/ERROR:  deadlock detected\nDETAIL:  This backend holds 2 leases of semaphore "[^"]*" itself/,
		'asking for a third lease of two held: 40P01');
	ok(time - $t0 < 5, 'at once, not after the 30 s deadlock_timeout');
	is(leases('self') . '/' . queued('self'), '2/0', 'and no node is left');
	is($s->query_safe("SELECT zk_try_semaphore('self', 2)"), 'f', 'the try form says false');
	is($s->query_safe("SELECT zk_try_semaphore('self', 3)"), 't',
		'with room for one more, it is granted');
	$s->query_safe("SELECT zk_unlock_all()");
	$s->quit;
}

# --- 5. the ledger: 3 clusters x 4 backends, max_leases 3
my $CYCLES = 15;
for my $n (@nodes)
{
	$n->safe_psql('postgres', q{
		CREATE TABLE ledger(pid int, cycle int, token bigint,
		                    t_req timestamptz, t_in timestamptz, t_out timestamptz);
		CREATE PROCEDURE cycles(n int, xact bool) LANGUAGE plpgsql AS $$
		DECLARE tok bigint; t_req timestamptz; t_in timestamptz;
		BEGIN
		  FOR i IN 1 .. n LOOP
		    t_req := clock_timestamp();
		    IF xact THEN tok := zk_xact_semaphore('ledger', 3, '60s');
		    ELSE tok := zk_semaphore('ledger', 3, '60s'); END IF;
		    t_in := clock_timestamp();
		    PERFORM pg_sleep(0.05 + random() * 0.1);
		    INSERT INTO ledger VALUES (pg_backend_pid(), i, tok, t_req, t_in, clock_timestamp());
		    IF NOT xact THEN PERFORM zk_semaphore_release('ledger', tok); END IF;
		    COMMIT;
		  END LOOP;
		END $$;
	});
}
my @runs;
for my $n (@nodes)
{
	for my $k (1 .. 4)
	{
		my $s = waiter($n);
		start_wait($s, "CALL cycles($CYCLES, " . ($k % 2 ? 'true' : 'false') . ")");
		push @runs, [ $n, $s ];
	}
}
my $all_done = poll_until(
	sub {
		(grep { $_->safe_psql('postgres',
			"SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'CALL cycles%' AND state = 'active'") ne '0' } @nodes) == 0;
	},
	240);
ok($all_done, 'every backend finished its cycles');
my @errs = grep { $_ ne '' } map { (finish_wait($_->[1]))[1] } @runs;
is("@errs", '', 'without an error');
my @rows;
for my $n (@nodes)
{
	push @rows, map { [ split /\|/ ] } split /\n/,
	  $n->safe_psql('postgres',
		"SELECT '" . $n->name . "' || pid, token, extract(epoch FROM t_req), extract(epoch FROM t_in), extract(epoch FROM t_out) FROM ledger");
}
is(scalar(@rows), 12 * $CYCLES, 'every cycle is in the ledger');
my %per;
$per{ $_->[0] }++ for @rows;
is(scalar(grep { $_ == $CYCLES } values %per), 12, 'no backend starved: all did every cycle');
my %tokens = map { $_->[1] => 1 } @rows;
is(scalar(keys %tokens), scalar(@rows), 'every lease had its own token');
my @ev = sort { $a->[0] <=> $b->[0] || $a->[1] <=> $b->[1] }
  ((map { [ $_->[3], 1 ] } @rows), (map { [ $_->[4], -1 ] } @rows));
my ($cur, $max) = (0, 0);
for my $e (@ev)
{
	$cur += $e->[1];
	$max = $cur if $cur > $max;
}
ok($max == 3, "never more than 3 holders at once, and 3 at times (at most $max seen)");
# Fairness, over the pairs where it is at stake: x asked 0.25 s before y
# and still waited when y asked (holds of 50-150 ms make such waits
# common).  A check over no such pair proves nothing.
my ($pairs, $overtaken) = (0, 0);
for my $x (@rows)
{
	for my $y (@rows)
	{
		next unless $x->[2] + 0.25 < $y->[2] && $x->[3] > $y->[2];
		$pairs++;
		$overtaken++ if $x->[1] > $y->[1];
	}
}
cmp_ok($pairs, '>', 0, "requests waited while later ones came ($pairs such pairs)");
is($overtaken, 0, 'a request made 0.25 s before another got its lease first');
$_->[1]->quit for @runs;

# --- 6. no herd: 50 waiters behind 3 holders
{
	my $WAITERS = 50;
	my @hold = map { waiter($north) } 1 .. 3;
	$_->query_safe("SELECT zk_semaphore('herd', 3)") for @hold;
	my (@ws, @pids);
	for my $i (1 .. $WAITERS)
	{
		my $s = waiter($north);
		my $pid = backend_pid($s);
		start_wait($s, "SELECT zk_semaphore('herd', 3)");
		poll_until(sub { is_waiting($north, $pid) && leases('herd') + queued('herd') == 3 + $i + 1 }, 30)
		  or die "waiter $i did not queue";
		push @ws, $s;
		push @pids, $pid;
	}
	my $dir = dir_of('herd');
	# Owners cover their nodes besides (their own watch, or a child watch).
	my $by_path = $zk->watches_by_path;
	is(scalar(grep { m{^\Q$dir\E/locks/} && $by_path->{$_} == 2 } keys %$by_path),
		$WAITERS - 1, 'all but one waiter each watch their mutex predecessor');
	is(scalar(grep { $_ > 2 } values %$by_path), 0,
		'no node is watched by more than one session besides its owner');
	is($zk->all_watches - $zk->total_watches, 2,
		'two child watches: the leases, by the mutex holder (its wait, covering its lease), and the locks, by the last waiter (its listing\'s)');
	is($zk->total_watches, 2 * ($WAITERS - 1) + 4,
		'data watches: one per waiter but the first, on its predecessor, and the owners\' of the nodes others came after or that wait (the holders\' leases, every mutex node)');

	$hold[0]->query_safe("SELECT zk_semaphore_release('herd')");
	my ($got, $woken, $fifo) = (0, 0, 0);
	my $prev = 0;
	for my $i (0 .. $WAITERS - 1)
	{
		my $ok = poll_until(sub { !in_call($north, $pids[$i]) }, 60);
		my ($out, $err) = finish_wait($ws[$i]);
		$got++ if $ok && $err eq '';
		$fifo++ if $out > $prev;
		$prev = $out;
		$woken++ if $ws[$i]->query_safe('SELECT notifications FROM zk_session()') <= 2;
		$ws[$i]->query_safe("SELECT zk_semaphore_release('herd')");
	}
	is($got, $WAITERS, 'every waiter got a lease');
	is($fifo, $WAITERS, 'in arrival order');
	is($woken, $WAITERS, 'every waiter was woken at most twice');
	$_->query_safe("SELECT zk_unlock_all()") for @hold;
	ok(poll_until(sub { leases('herd') == 0 && queued('herd') == 0 }, 30), 'all gone at the end');
	$_->quit for @hold, @ws;
}

# --- 7. Curator's InterProcessSemaphoreV2 shares the limit
ok(compile_peers($classes, "$interop/LockPeer.java"), 'the Curator peer compiles')
  or die 'javac failed (the test needs a JDK: default-jdk-headless)';

{
	my $path = dir_of('shared-limit');
	my $c = curator($hosts, 'c1', $path, 'semaphore:2');
	like(peer_cmd($c, 'acquire'), qr/^acquired/, 'Curator takes a lease');
	like(peer_cmd($c, 'acquire'), qr/^acquired/, 'and a second: the semaphore is full');
	my $s1 = waiter($east);
	my $s2 = waiter($west);
	my %pid_of = ("$s1" => backend_pid($s1), "$s2" => backend_pid($s2));
	is($s1->query_safe("SELECT zk_try_semaphore('shared-limit', 2)"), 'f',
		'zklock sees Curator\'s leases: no room');
	my $p1 = backend_pid($s1);
	start_wait($s1, "SELECT zk_semaphore('shared-limit', 2)");
	ok(poll_until(sub { is_waiting($east, $p1) }, 30), 'a backend waits');
	like(peer_cmd($c, 'release'), qr/^released/, 'Curator returns a lease');
	ok(poll_until(sub { !in_call($east, $p1) }, 30), 'the backend gets it');
	my ($t1, $e1) = finish_wait($s1);
	ok($t1 > 0 && $e1 eq '', 'with a token');
	like(peer_cmd($c, 'release'), qr/^released/, 'Curator returns its other lease');
	$s2->query_safe("SELECT zk_semaphore('shared-limit', 2)");
	is(peer_cmd($c, 'try 500'), 'busy', 'two zklock leases fill it for Curator');
	peer_send($c, 'acquire');
	ok(!defined peer_line($c, 1), 'Curator waits');
	$s1->query_safe("SELECT zk_semaphore_release('shared-limit')");
	like(peer_line($c, 30) // '', qr/^acquired/, 'a zklock release lets Curator in');
	like(peer_cmd($c, 'release'), qr/^released/, 'Curator releases');
	$s2->query_safe("SELECT zk_unlock_all()");

	# Mixed contention: two Curator peers and two backends cycle on max 2.
	my $c2 = curator($hosts, 'c2', $path, 'semaphore:2');
	my (@iv, @release_errors);
	for my $round (1 .. 5)
	{
		peer_send($_, 'acquire') for $c, $c2;
		start_wait($s1, "SELECT extract(epoch FROM clock_timestamp()) FROM (SELECT zk_semaphore('shared-limit', 2)) x");
		start_wait($s2, "SELECT extract(epoch FROM clock_timestamp()) FROM (SELECT zk_semaphore('shared-limit', 2)) x");
		for my $x ([ $s1, $east ], [ $s2, $west ])
		{
			poll_until(sub { started($x->[1], $pid_of{"$x->[0]"}, 'SELECT extract(epoch') })
			  or die "round $round: a backend's acquire did not start";
		}
		my %held;
		my $deadline = time + 60;
		while (keys %held < 4 && time < $deadline)
		{
			for my $p ($c, $c2)
			{
				next if $held{ $p->{name} };
				$p->{h}->pump_nb;
				if ($p->{out} =~ s/^acquired (\d+)\n//)
				{
					my $t_in = $1 / 1000;
					sleep 0.05;
					my $rel = peer_cmd($p, 'release') // '(no answer)';
					my ($t_out) = $rel =~ /^released (\d+)/;
					push @release_errors, "$p->{name}: $rel" unless defined $t_out;
					push @iv, [ $t_in, ($t_out // 0) / 1000 ];
					$held{ $p->{name} } = 1;
				}
			}
			for my $x ([ $s1, $east ], [ $s2, $west ])
			{
				my ($s, $n) = @$x;
				next if $held{"$s"};
				next if in_call($n, $pid_of{"$s"});
				my ($t_in) = finish_wait($s);
				sleep 0.05;
				my $t_out = $s->query_safe("SELECT extract(epoch FROM clock_timestamp())");
				$s->query_safe("SELECT zk_semaphore_release('shared-limit')");
				push @iv, [ $t_in, $t_out ];
				$held{"$s"} = 1;
			}
			sleep 0.01;
		}
		is(scalar(keys %held), 4, "round $round: all four got a lease");
	}
	my @e = sort { $a->[0] <=> $b->[0] || $a->[1] <=> $b->[1] }
	  ((map { [ $_->[0], 1 ] } @iv), (map { [ $_->[1], -1 ] } @iv));
	is("@release_errors", '', 'every Curator release succeeded');
	my ($c_now, $c_max) = (0, 0);
	for (@e) { $c_now += $_->[1]; $c_max = $c_now if $c_now > $c_max; }
	ok($c_max <= 2, "Curator and zklock together never exceed 2 holders (at most $c_max)");
	peer_quit($_) for $c, $c2;
	$_->quit for $s1, $s2;
	ok(poll_until(sub { leases('shared-limit') == 0 && queued('shared-limit') == 0 }, 30),
		'nothing is left');
}

$_->quit for @h;
$w->quit;
$_->stop('fast') for @nodes;
$zk->stop;
done_testing();
