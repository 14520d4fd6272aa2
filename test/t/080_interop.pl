# Copyright (c) zklock contributors
#
# Interoperability with the lock recipes of other ZooKeeper clients, using
# the real libraries: Apache Curator 5.4 (InterProcessMutex,
# InterProcessReadWriteLock) through test/interop/LockPeer.java, and kazoo
# (Lock, ReadLock, WriteLock) through test/interop/kazoo_peer.py, both
# driven line by line on stdin/stdout while PostgreSQL backends contend for
# the same lock directory (zk_lock_path).
#
#  1. Curator InterProcessMutex and zk_lock exclude each other both ways,
#     FIFO (PG, Curator, PG).
#  2. zklock.node_naming = 'readwrite' with Curator InterProcessReadWriteLock:
#     readers share, writers exclude, FIFO across both.
#  3. kazoo Lock (extra_lock_patterns=["-lock-"]) and zk_lock exclude each
#     other both ways, FIFO; kazoo ReadLock/WriteLock with zklock's shared
#     and exclusive nodes.
#  4. One queue of PG, Curator, PG, kazoo: FIFO and no two holders at once,
#     from the contenders' own acquire/release times and zk_lock_queue.
#     (Curator and kazoo never compete directly: Curator sorts kazoo's
#     "__lock__" nodes by their whole name, so it does not see them in
#     order.  kazoo is last in this queue, so it only waits for PG.)
#  5. Sequence numbers at the int32 limit.  ZooKeeper names a sequential
#     child after a counter its parent keeps (creates only), which no API
#     can set; test/interop/CraftSnapshot.java writes a snapshot that every
#     server loads at start-up, with two lock directories whose counters are
#     2147483644 and -2147483647.
#     a. Up to 2147483647 everything agrees (10-digit suffixes compare the
#        same as text and as numbers).  ZooKeeper 3.8.0 does not wrap: the
#        create that would take the counter past INT_MAX leaves it at
#        INT_MAX (the txn's new parent counter, -2147483648, is not larger
#        than the stored one, so the tree keeps 2147483647; the server logs
#        a digest mismatch), and every later sequential child is named
#        ...2147483647 again.  zklock (like Curator and kazoo) breaks such
#        ties by the order of the server's child list: here every server
#        lists the children in the same order, so one contender holds at a
#        time, but FIFO among equal suffixes is hash order, not arrival
#        order.  The test checks exclusion and notes which one went first.
#     b. Serial-number order across a wrap, as a counter that did wrap would
#        give it: hand-made nodes ...-lock-2147483646, ...-lock-2147483647,
#        ...-lock--2147483648 (created by name, not sequential), then two
#        backends whose nodes ZooKeeper names -2147483644 and -2147483643
#        (every create advances the counter, sequential or not).
#        zklock queues them in that order and hands the lock on in it.
#        (Curator and kazoo compare suffixes as text and would not.)
#
# Every wait is a bounded poll; every peer process is stopped by its pid at
# the end, also when the test dies.

use strict;
use warnings;

use File::Copy qw(copy);
use File::Path qw(make_path);
use FindBin;
use lib "$FindBin::Bin/../perl";

use IPC::Run ();
use JSON::PP;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);
use ZkEnsemble;
use ZklockTest;

my $interop = "$FindBin::Bin/../interop";
my $python = '/usr/bin/python3';    # Debian's, where python3-kazoo lives
my $jars = $curator_jars;
my $classes = "$PostgreSQL::Test::Utils::tmp_check/interop_classes";
my $peer_logs = $PostgreSQL::Test::Utils::log_path;

# --- prerequisites: missing ones fail the test, nothing is skipped
my @missing = grep { !-r } split /:/, $jars;
is("@missing", '', 'Curator and ZooKeeper client jars are installed')
  or die "missing jars: @missing";
ok(compile_peers($classes, "$interop/LockPeer.java", "$interop/CraftSnapshot.java"),
	'the Curator peer and the snapshot tool compile')
  or die 'javac failed (the test needs a JDK: default-jdk-headless)';
ok( run_log(
		[
			$python, '-c',
			'import inspect, kazoo.recipe.lock as l; '
			  . 'assert "extra_lock_patterns" in inspect.signature(l.Lock).parameters'
		]),
	'kazoo is importable and its Lock takes extra_lock_patterns')
  or die "kazoo with extra_lock_patterns is needed under $python";

# --- a 3-server ensemble that starts from a crafted snapshot (part 5)
my $zk = ZkEnsemble->new(servers => 3, start => 0);
my $state = decode_json(slurp_file($zk->save_state));
my @data_dirs = map { $_->{data_dir} } @{ $state->{servers} };
my $craft_out = '';
ok( IPC::Run::run(
		[
			'java', '-cp', "$classes:$jars", 'CraftSnapshot', $data_dirs[0],
			'/zklock/wrap-max=2147483644', '/zklock/wrap-neg=-2147483647'
		],
		'>', \$craft_out, '2>>', "$peer_logs/craft_snapshot.err"),
	'snapshot with lock directories near the int32 limit written');
note $craft_out;
my @snaps = glob("$data_dirs[0]/version-2/snapshot.*");
is(scalar(@snaps), 1, 'one snapshot file');
for my $dir (@data_dirs[ 1 .. $#data_dirs ])
{
	make_path("$dir/version-2");
	copy($snaps[0], "$dir/version-2/") or die "copy to $dir: $!";
}
$zk->start;

my $node = zk_cluster('interop', $zk);
my $hosts = $zk->connect_string;

# --- PostgreSQL contenders
my %label;    # backend pid => label in queue_of()
my $NOW = 'floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint';

sub pg
{
	my ($name, @setup) = @_;
	my $s = session($node);
	$s->query_safe($_) for @setup;
	my $pid = backend_pid($s);
	$label{$pid} = $name;
	return { s => $s, pid => $pid, name => $name };
}

# Take a lock that is free; returns (token, acquire time in ms).
sub pg_take
{
	my ($pg, $fn, $lock) = @_;
	return split /\|/, $pg->{s}->query_safe("SELECT $fn('$lock'), $NOW");
}

# Start a lock call that waits; pg_got collects it: (token, time, stderr).
sub pg_start
{
	my ($pg, $fn, $lock) = @_;
	start_wait($pg->{s}, "SELECT $fn('$lock'), $NOW");
}

sub pg_got
{
	my ($pg) = @_;
	my ($out, $err) = finish_wait($pg->{s});
	my ($tok, $t) = split /\|/, $out;
	return ($tok // '', $t // 0, $err);
}

# Waits: in zklock's wait, and (given $lock) with its node in the queue: on
# PostgreSQL 15 the wait for the create's answer is a wait too.
sub pg_waits
{
	my ($pg, $lock) = @_;
	return poll_until(sub {
		is_waiting($node, $pg->{pid}) && (!defined $lock || node_of($lock, $pg->{name}) ne '')
	});
}

# Release; returns the time the critical section ended (before the delete).
sub pg_release
{
	my ($pg, $fn, $lock) = @_;
	my ($t, $ok) = split /\|/, $pg->{s}->query_safe("SELECT $NOW, $fn('$lock')");
	is($ok, 't', "$pg->{name} releases $lock");
	return $t;
}

# --- peers
sub kazoo
{
	my ($name, $path, $mode) = @_;
	return start_peer($name, $python, "$interop/kazoo_peer.py", $hosts, $path,
		$mode, $name);
}

# Whether the peer has printed nothing since its last reply.
sub peer_silent
{
	my ($p) = @_;
	$p->{h}->pump_nb if $p->{h}->pumpable;
	return $p->{out} eq '';
}


# --- the queue as zklock sees it (zk_lock_queue, from an observer backend):
# contenders in order, "/s" for shared, "*" for holders.  PG backends by
# label, other clients by their node data (the peers' id), hand-made nodes
# by name.
my $obs = session($node);

sub queue_rows
{
	my ($lock) = @_;
	my $out = $obs->query_safe(
		"SELECT coalesce(pid::text, ''), mode, holds, node, data FROM zk_lock_queue('$lock')"
	);
	my @rows;
	for my $line (split /\n/, $out)
	{
		my ($pid, $mode, $holds, $path, $data) = split /\|/, $line, 5;
		(my $base = $path) =~ s{.*/}{};
		my $who =
		    $pid ne '' ? $label{$pid} // "pid$pid"
		  : $data ne '' ? $data
		  :               $base;
		push @rows, { who => $who, shared => $mode eq 'shared',
			holds => $holds eq 't', node => $base };
	}
	return @rows;
}

sub queue_of
{
	my @rows = queue_rows(@_);
	return join ' ',
	  map { $_->{who} . ($_->{shared} ? '/s' : '') . ($_->{holds} ? '*' : '') } @rows;
}

sub queue_is
{
	my ($lock, $want, $what) = @_;
	my $got;
	poll_until(sub { ($got = queue_of($lock)) eq $want }, 30);
	is($got, $want, $what);
}

sub node_of
{
	my ($lock, $who) = @_;
	my ($row) = grep { $_->{who} eq $who } queue_rows($lock);
	return $row ? $row->{node} : '';
}

# --- critical sections, from the contenders' own clocks (ms, floored; one
# machine): no two may overlap, and they must follow the expected order.
my %sections;

sub section
{
	my ($lock, $who, $from, $to) = @_;
	push @{ $sections{$lock} }, [ $who, $from, $to ];
}

sub sections_ok
{
	my ($lock, @order) = @_;
	my @s = sort { $a->[1] <=> $b->[1] } @{ $sections{$lock} };
	my @overlaps;
	for my $i (1 .. $#s)
	{
		push @overlaps, "$s[$i-1][0]..$s[$i][0]" if $s[$i][1] < $s[ $i - 1 ][2];
	}
	is("@overlaps", '', "$lock: no two critical sections overlap");
	is(join(' ', map { $_->[0] } @s), "@order", "$lock: holders in FIFO order");
}

sub acquired_at
{
	my ($line) = @_;
	return $line =~ /^acquired (\d+)$/ ? $1 : undef;
}

sub released_at
{
	my ($line) = @_;
	return $line =~ /^released (\d+)$/ ? $1 : undef;
}

my ($tok, $t0, $t1, $err, $line, $acq);

# ===== 1. Curator InterProcessMutex <-> zk_lock
{
	my $lock = 'curator-mutex';
	my $path = $obs->query_safe("SELECT zk_lock_path('$lock')");
	is($path, "/zklock/$lock", 'zk_lock_path names the lock directory');
	my ($p1, $p2) = (pg('pg1'), pg('pg2'));
	my $cu = curator($hosts, 'curator-1', $path, 'mutex');

	($tok, $t0) = pg_take($p1, 'zk_lock', $lock);
	ok($tok > 0, 'pg1 holds');
	peer_send($cu, 'acquire');
	queue_is($lock, 'pg1* curator-1', 'Curator InterProcessMutex queues behind the PG holder');
	like(node_of($lock, 'curator-1'), qr/^_c_[0-9a-f-]{36}-lock-\d{10}$/,
		"Curator's node has the same naming as zklock's");
	pg_start($p2, 'zk_lock', $lock);
	ok(pg_waits($p2, $lock), 'pg2 waits');
	queue_is($lock, 'pg1* curator-1 pg2', 'pg2 queues after Curator');
	ok(peer_silent($cu), 'Curator has not acquired while pg1 holds');

	section($lock, 'pg1', $t0, pg_release($p1, 'zk_unlock', $lock));
	$acq = acquired_at(peer_line($cu) // '');
	ok($acq, 'Curator acquires when pg1 releases');
	ok(in_call($node, $p2->{pid}), 'pg2 still waits: Curator was queued first');
	queue_is($lock, 'curator-1* pg2', 'Curator holds, pg2 waits');
	$t1 = released_at(peer_cmd($cu, 'release'));
	ok($t1, 'Curator releases');
	section($lock, 'curator-1', $acq, $t1);
	($tok, $t0, $err) = pg_got($p2);
	ok($tok > 0 && $err eq '', 'pg2 acquires after Curator') or diag $err;
	section($lock, 'pg2', $t0, pg_release($p2, 'zk_unlock', $lock));

	# the other way round
	$acq = acquired_at(peer_cmd($cu, 'acquire'));
	ok($acq, 'Curator takes the free lock');
	is($p1->{s}->query_safe("SELECT zk_try_lock('$lock')"), 'f',
		'zk_try_lock is false while Curator holds');
	pg_start($p1, 'zk_lock', $lock);
	ok(pg_waits($p1, $lock), 'pg1 waits for Curator');
	queue_is($lock, 'curator-1* pg1', 'pg1 is queued behind Curator');
	$t1 = released_at(peer_cmd($cu, 'release'));
	section($lock, 'curator-1', $acq, $t1);
	($tok, $t0, $err) = pg_got($p1);
	ok($tok > 0 && $err eq '', 'pg1 acquires when Curator releases') or diag $err;
	is(peer_cmd($cu, 'try 300'), 'busy', 'Curator cannot take it while pg1 holds');
	queue_is($lock, 'pg1*', "Curator's timed-out attempt left no node");
	section($lock, 'pg1', $t0, pg_release($p1, 'zk_unlock', $lock));
	sections_ok($lock, qw(pg1 curator-1 pg2 curator-1 pg1));
	peer_quit($cu);
}

# ===== 2. Curator InterProcessReadWriteLock <-> zklock.node_naming = 'readwrite'
{
	my $lock = 'curator-rw';
	my $path = "/zklock/$lock";
	my $rw = "SET zklock.node_naming = 'readwrite'";
	my ($p3, $p4) = (pg('pg3', $rw), pg('pg4', $rw));
	my $cr = curator($hosts, 'curator-r', $path, 'read');
	my $cw = curator($hosts, 'curator-w', $path, 'write');

	ok(acquired_at(peer_cmd($cr, 'acquire')), 'Curator read lock on a free lock');
	($tok) = pg_take($p3, 'zk_lock_shared', $lock);
	ok($tok > 0, 'pg3 takes it shared at once, together with the Curator reader');
	queue_is($lock, 'curator-r/s* pg3/s*', 'both readers hold');
	is($p4->{s}->query_safe("SELECT zk_try_lock('$lock')"), 'f',
		'zk_try_lock (exclusive) is false while readers hold');
	pg_start($p4, 'zk_lock', $lock);
	ok(pg_waits($p4, $lock), 'pg4 waits for exclusive');
	like(node_of($lock, 'pg4'), qr/^_c_[0-9a-f-]{36}-__WRIT__\d{10}$/,
		'its node is named like a Curator write lock node');
	pg_release($p3, 'zk_unlock_shared', $lock);
	queue_is($lock, 'curator-r/s* pg4', 'pg3 released');
	ok(in_call($node, $p4->{pid}), 'pg4 (__WRIT__) still waits for the Curator reader');
	ok(released_at(peer_cmd($cr, 'release')), 'Curator reader releases');
	($tok, $t0, $err) = pg_got($p4);
	ok($tok > 0 && $err eq '', 'pg4 gets exclusive when the Curator reader is gone')
	  or diag $err;

	# FIFO over writers and readers of both kinds, behind pg4
	peer_send($cw, 'acquire');
	queue_is($lock, 'pg4* curator-w', 'Curator write lock waits for PG exclusive');
	pg_start($p3, 'zk_lock_shared', $lock);
	ok(pg_waits($p3, $lock), 'pg3 (shared) waits');
	queue_is($lock, 'pg4* curator-w pg3/s', 'pg3 queues behind the Curator writer');
	peer_send($cr, 'acquire');
	queue_is($lock, 'pg4* curator-w pg3/s curator-r/s', 'Curator reader queues last');
	ok(peer_silent($cw) && peer_silent($cr), 'no Curator lock acquired while pg4 holds');
	$t1 = pg_release($p4, 'zk_unlock', $lock);
	section($lock, 'pg4', $t0, $t1);
	$acq = acquired_at(peer_line($cw) // '');
	ok($acq, 'Curator writer acquires next');
	queue_is($lock, 'curator-w* pg3/s curator-r/s', 'readers wait for the Curator writer');
	ok(in_call($node, $p3->{pid}), 'the Curator write lock excludes PG shared');
	ok(peer_silent($cr), 'and the Curator reader');
	$t1 = released_at(peer_cmd($cw, 'release'));
	section($lock, 'curator-w', $acq, $t1);
	($tok, $t0, $err) = pg_got($p3);
	ok($tok > 0 && $err eq '', 'pg3 gets shared after the Curator writer') or diag $err;
	$acq = acquired_at(peer_line($cr) // '');
	ok($acq && $acq >= $t1, 'the Curator reader too');
	queue_is($lock, 'pg3/s* curator-r/s*', 'both readers hold together');
	ok(released_at(peer_cmd($cr, 'release')), 'Curator reader releases');
	section($lock, 'readers', $t0, pg_release($p3, 'zk_unlock_shared', $lock));
	sections_ok($lock, qw(pg4 curator-w readers));
	peer_quit($_) for $cr, $cw;
}

# ===== 3. kazoo Lock (extra_lock_patterns=["-lock-"]) <-> zk_lock
# With these patterns kazoo's Lock does not see zklock's shared nodes
# (__READ__): exclusive only here, as in part 1 (Curator's mutex sorts
# __READ__ nodes by their whole name, after every "lock-" node).
{
	my $lock = 'kazoo-lock';
	my $path = "/zklock/$lock";
	my ($p5, $p6) = (pg('pg5'), pg('pg6'));
	my $kz = kazoo('kazoo-1', $path, 'lock');

	($tok, $t0) = pg_take($p5, 'zk_lock', $lock);
	ok($tok > 0, 'pg5 holds');
	peer_send($kz, 'acquire');
	queue_is($lock, 'pg5* kazoo-1', 'kazoo Lock queues behind the PG holder');
	like(node_of($lock, 'kazoo-1'), qr/^[0-9a-f]{32}__lock__\d{10}$/, "kazoo's own node naming");
	pg_start($p6, 'zk_lock', $lock);
	ok(pg_waits($p6, $lock), 'pg6 waits');
	queue_is($lock, 'pg5* kazoo-1 pg6', 'pg6 queues after kazoo');
	ok(peer_silent($kz), 'kazoo has not acquired while pg5 holds');
	section($lock, 'pg5', $t0, pg_release($p5, 'zk_unlock', $lock));
	$acq = acquired_at(peer_line($kz) // '');
	ok($acq, 'kazoo acquires when pg5 releases');
	ok(in_call($node, $p6->{pid}), 'pg6 still waits: kazoo was queued first');
	queue_is($lock, 'kazoo-1* pg6', 'kazoo holds, pg6 waits');
	$t1 = released_at(peer_cmd($kz, 'release'));
	section($lock, 'kazoo-1', $acq, $t1);
	($tok, $t0, $err) = pg_got($p6);
	ok($tok > 0 && $err eq '', 'pg6 acquires after kazoo') or diag $err;
	section($lock, 'pg6', $t0, pg_release($p6, 'zk_unlock', $lock));

	$acq = acquired_at(peer_cmd($kz, 'acquire'));
	ok($acq, 'kazoo takes the free lock');
	is($p5->{s}->query_safe("SELECT zk_try_lock('$lock')"), 'f',
		'zk_try_lock is false while kazoo holds');
	pg_start($p5, 'zk_lock', $lock);
	ok(pg_waits($p5, $lock), 'pg5 waits for kazoo');
	queue_is($lock, 'kazoo-1* pg5', 'pg5 is queued behind kazoo');
	$t1 = released_at(peer_cmd($kz, 'release'));
	section($lock, 'kazoo-1', $acq, $t1);
	($tok, $t0, $err) = pg_got($p5);
	ok($tok > 0 && $err eq '', 'pg5 acquires when kazoo releases') or diag $err;
	is(peer_cmd($kz, 'try 300'), 'busy', 'kazoo cannot take it while pg5 holds');
	queue_is($lock, 'pg5*', "kazoo's timed-out attempt left no node");
	section($lock, 'pg5', $t0, pg_release($p5, 'zk_unlock', $lock));
	sections_ok($lock, qw(pg5 kazoo-1 pg6 kazoo-1 pg5));
	peer_quit($kz);

	# kazoo's read/write lock: "__rlock__" is shared for zklock; kazoo sees
	# zklock's "-lock-" nodes as writers and its "__READ__" nodes as readers
	# (WriteLock with extra_lock_patterns=["-lock-", "__READ__"]).
	$lock = 'kazoo-rw';
	$path = "/zklock/$lock";
	my $kr = kazoo('kazoo-r', $path, 'read');
	my $kw = kazoo('kazoo-w', $path, 'write');
	($tok) = pg_take($p5, 'zk_lock_shared', $lock);
	ok($tok > 0, 'pg5 holds shared');
	ok(acquired_at(peer_cmd($kr, 'acquire')), 'kazoo ReadLock holds together with it');
	queue_is($lock, 'pg5/s* kazoo-r/s*', 'both hold');
	is(peer_cmd($kw, 'try 300'), 'busy', 'kazoo WriteLock is excluded by PG shared + kazoo reader');
	is($p6->{s}->query_safe("SELECT zk_try_lock('$lock')"), 'f',
		'PG exclusive is excluded by the kazoo reader');
	ok(released_at(peer_cmd($kr, 'release')), 'kazoo reader releases');
	is(peer_cmd($kw, 'try 300'), 'busy', 'kazoo WriteLock still excluded by PG shared alone');
	pg_release($p5, 'zk_unlock_shared', $lock);
	ok(acquired_at(peer_cmd($kw, 'acquire')), 'kazoo WriteLock takes the free lock');
	is($p5->{s}->query_safe("SELECT zk_try_lock_shared('$lock')"), 'f',
		'PG shared is excluded by the kazoo writer');
	ok(released_at(peer_cmd($kw, 'release')), 'kazoo writer releases');
	peer_quit($_) for $kr, $kw;
}

# ===== 4. one queue: PG, Curator, PG, kazoo
{
	my $lock = 'mixed';
	my $path = "/zklock/$lock";
	my ($pa, $pb) = (pg('pga'), pg('pgb'));
	my $cu = curator($hosts, 'curator-m', $path, 'mutex');
	my $kz = kazoo('kazoo-m', $path, 'lock');

	($tok, $t0) = pg_take($pa, 'zk_lock', $lock);
	peer_send($cu, 'acquire');
	queue_is($lock, 'pga* curator-m', 'Curator queued');
	pg_start($pb, 'zk_lock', $lock);
	ok(pg_waits($pb, $lock), 'pgb waits');
	queue_is($lock, 'pga* curator-m pgb', 'pgb queued');
	peer_send($kz, 'acquire');
	queue_is($lock, 'pga* curator-m pgb kazoo-m', 'kazoo queued: four contenders, one holder');

	section($lock, 'pga', $t0, pg_release($pa, 'zk_unlock', $lock));
	$acq = acquired_at(peer_line($cu) // '');
	ok($acq, 'Curator is next');
	queue_is($lock, 'curator-m* pgb kazoo-m', 'one holder: Curator');
	ok(in_call($node, $pb->{pid}) && peer_silent($kz), 'pgb and kazoo wait');
	$t1 = released_at(peer_cmd($cu, 'release'));
	section($lock, 'curator-m', $acq, $t1);
	($tok, $t0, $err) = pg_got($pb);
	ok($tok > 0 && $err eq '', 'pgb is next') or diag $err;
	queue_is($lock, 'pgb* kazoo-m', 'one holder: pgb');
	ok(peer_silent($kz), 'kazoo waits');
	section($lock, 'pgb', $t0, pg_release($pb, 'zk_unlock', $lock));
	$acq = acquired_at(peer_line($kz) // '');
	ok($acq, 'kazoo is last');
	queue_is($lock, 'kazoo-m*', 'one holder: kazoo');
	$t1 = released_at(peer_cmd($kz, 'release'));
	section($lock, 'kazoo-m', $acq, $t1);
	sections_ok($lock, qw(pga curator-m pgb kazoo-m));
	peer_quit($_) for $cu, $kz;
}

# ===== 5a. the counter up to INT_MAX, and what ZooKeeper 3.8 does after it
{
	my $lock = 'wrap-max';
	my $path = "/zklock/$lock";
	my ($pa, $pb, $pc, $pd) = (pg('wa'), pg('wb'), pg('wc'), pg('wd'));
	my $cu = curator($hosts, 'curator-x', $path, 'mutex');

	($tok, $t0) = pg_take($pa, 'zk_lock', $lock);
	like(node_of($lock, 'wa'), qr/-lock-2147483644$/,
		'the crafted counter is in effect: suffix 2147483644');
	peer_send($cu, 'acquire');
	queue_is($lock, 'wa* curator-x', 'Curator queued');
	pg_start($pb, 'zk_lock', $lock);
	ok(pg_waits($pb, $lock), 'wb waits');
	pg_start($pc, 'zk_lock', $lock);
	ok(pg_waits($pc, $lock), 'wc waits');
	queue_is($lock, 'wa* curator-x wb wc', 'queue up to the largest suffix');
	is( join(' ', map { /(?:lock-|__)(-?\d+)$/ } map { node_of($lock, $_) } qw(curator-x wb wc)),
		'2147483645 2147483646 2147483647',
		'suffixes 2147483645..2147483647');

	pg_start($pd, 'zk_lock', $lock);
	ok(pg_waits($pd, $lock), 'wd waits');
	like(node_of($lock, 'wd'), qr/-lock-2147483647$/,
		'ZooKeeper 3.8 does not wrap: the next child is named 2147483647 again');

	section($lock, 'wa', $t0, pg_release($pa, 'zk_unlock', $lock));
	$acq = acquired_at(peer_line($cu) // '');
	ok($acq, 'Curator acquires after wa');
	$t1 = released_at(peer_cmd($cu, 'release'));
	section($lock, 'curator-x', $acq, $t1);
	($tok, $t0, $err) = pg_got($pb);
	ok($tok > 0 && $err eq '', 'wb acquires after Curator') or diag $err;
	ok(in_call($node, $pc->{pid}) && in_call($node, $pd->{pid}), 'wc and wd wait');
	section($lock, 'wb', $t0, pg_release($pb, 'zk_unlock', $lock));

	# wc and wd have the same suffix: exactly one of them may hold
	my $first;
	poll_until(sub {
		my @free = grep { !is_waiting($node, $_->{pid}) } $pc, $pd;
		$first = $free[0] if @free == 1;
		return @free > 0;
	});
	ok($first, 'one of the two backends with suffix 2147483647 acquires, not both');
	$first //= $pc;
	my $second = $first == $pc ? $pd : $pc;
	note "of the equal suffixes, $first->{name} (arrived "
	  . ($first == $pc ? 'first' : 'second') . ') got the lock first';
	my @q = queue_rows($lock);
	is(scalar(grep { $_->{holds} } @q), 1, 'zk_lock_queue shows one holder');
	($tok, $t0, $err) = pg_got($first);
	ok($tok > 0 && $err eq '', "$first->{name} holds") or diag $err;
	ok(in_call($node, $second->{pid}), "$second->{name} waits for it");
	section($lock, $first->{name}, $t0, pg_release($first, 'zk_unlock', $lock));
	($tok, $t0, $err) = pg_got($second);
	ok($tok > 0 && $err eq '', "$second->{name} acquires next") or diag $err;
	section($lock, $second->{name}, $t0, pg_release($second, 'zk_unlock', $lock));
	sections_ok($lock, 'wa', 'curator-x', 'wb', $first->{name}, $second->{name});
	peer_quit($cu);
}

# ===== 5b. serial-number order across the wrap
{
	my $lock = 'wrap-neg';
	my $path = "/zklock/$lock";
	my ($pe, $pf) = (pg('we'), pg('wf'));
	my $adm = kazoo('admin', $path, 'admin');

	# contenders from before the wrap (and the first after it), by hand
	my @hand = map { "hand$_->[0]-lock-$_->[1]" }
	  ([ 1, '2147483646' ], [ 2, '2147483647' ], [ 3, '-2147483648' ]);
	is(peer_cmd($adm, "create $path/$_"), "created $path/$_", "node $_ created")
	  for @hand;
	pg_start($pe, 'zk_lock', $lock);
	ok(pg_waits($pe, $lock), 'we waits');
	pg_start($pf, 'zk_lock', $lock);
	ok(pg_waits($pf, $lock), 'wf waits');
	is(join(' ', map { /(?:lock-|__)(-?\d+)$/ } map { node_of($lock, $_) } qw(we wf)),
		'-2147483644 -2147483643',
		'ZooKeeper named their nodes after the wrapped counter (3 hand-made creates later)');
	queue_is($lock, "$hand[0]* $hand[1] $hand[2] we wf",
		'serial-number order: 2147483646 < 2147483647 < -2147483648 < -2147483644 < -2147483643');

	is(peer_cmd($adm, "delete $path/$hand[0]"), "deleted $path/$hand[0]", 'first holder gone');
	queue_is($lock, "$hand[1]* $hand[2] we wf", 'the lock passes to 2147483647');
	ok(in_call($node, $pe->{pid}), 'we still waits');
	peer_cmd($adm, "delete $path/$hand[1]");
	queue_is($lock, "$hand[2]* we wf", 'then to -2147483648');
	ok(in_call($node, $pe->{pid}), 'we still waits');
	peer_cmd($adm, "delete $path/$hand[2]");
	($tok, $t0, $err) = pg_got($pe);
	ok($tok > 0 && $err eq '', 'we (-2147483644) acquires when the last hand-made node goes')
	  or diag $err;
	ok(in_call($node, $pf->{pid}), 'wf (-2147483643) waits for it');
	queue_is($lock, 'we* wf', 'we holds');
	pg_release($pe, 'zk_unlock', $lock);
	($tok, $t0, $err) = pg_got($pf);
	ok($tok > 0 && $err eq '', 'wf acquires last') or diag $err;
	pg_release($pf, 'zk_unlock', $lock);
	peer_quit($adm);
}

finish(nodes => [$node], zk => $zk);
done_testing();
