# Copyright (c) zklock contributors
#
# zk_fleet_locks(): every lock and semaphore under zklock.root in one
# call, against locks held by zklock on two clusters (exclusive with a
# waiter, shared by two, an integer key, a full semaphore with a waiter),
# by Curator and by kazoo: the counts, the first holder's owner as
# zk_lock_queue shows it (other clients' data raw, with NULL owners), the
# oldest wait, a name only where zklock would have made the directory;
# max_locks bounds the directories read; nothing is watched.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);
use ZkEnsemble;
use ZklockTest;

my $zk = ZkEnsemble->new(servers => 1);
my $hosts = $zk->connect_string;
my $east = zk_cluster('east', $zk);
my $west = zk_cluster('west', $zk);
my $interop = "$FindBin::Bin/../interop";
my $classes = "$PostgreSQL::Test::Utils::tmp_check/fleet_classes";

is($east->safe_psql('postgres', 'SELECT count(*) FROM zk_fleet_locks()'), '0', 'an empty root: no rows');

my $a = session($east);
my $apid = backend_pid($a);
$a->query_safe("SELECT zk_lock('fl-a'), zk_lock_shared('fl-r'), zk_lock(42), zk_semaphore('fl-sem', 1)");
my $b = session($west);
my $bpid = backend_pid($b);
$b->query_safe("SELECT zk_lock_shared('fl-r')");
start_wait($b, "SELECT zk_lock('fl-a')");
my $c = session($west);
my $cpid = backend_pid($c);
start_wait($c, "SELECT zk_semaphore('fl-sem', 1)");
ok(poll_until(sub { is_waiting($west, $bpid) && is_waiting($west, $cpid) }, 30), 'two waiters on west');

ok(compile_peers($classes, "$interop/LockPeer.java"), 'the Curator peer compiles');
my $cur = curator($hosts, 'cur', '/zklock/cur.lock', 'mutex');
like(peer_cmd($cur, 'acquire'), qr/^acquired/, 'Curator holds /zklock/cur.lock (no name zklock makes)');
my $kz = start_peer('kz', '/usr/bin/python3', "$interop/kazoo_peer.py", $hosts, '/zklock/fl-kz', 'lock', 'kazoo-id');
like(peer_cmd($kz, 'acquire'), qr/^acquired/, 'kazoo holds /zklock/fl-kz');
my $watches = $zk->all_watches;

my $rows = $east->safe_psql('postgres', q{
	SELECT coalesce(name, '(null)'), path, kind, holders, waiting,
	       oldest_wait IS NOT NULL, oldest_wait < interval '1 hour',
	       coalesce(cluster_name, '-'), coalesce(pid, 0), holder_node IS NOT NULL,
	       coalesce(data, '-')
	  FROM zk_fleet_locks() ORDER BY path});
my @r = split /\n/, $rows;
is(scalar @r, 6, 'six locks and semaphores');
is($r[0], '(null)|/zklock/cur.lock|lock|1|0|f||-|0|t|cur', 'Curator\'s lock: no zklock name, raw data, no owner');
is($r[1], "fl-a|/zklock/fl-a|lock|1|1|t|t|east|$apid|t|" . $east->safe_psql('postgres',
	"SELECT data FROM zk_lock_queue('fl-a') WHERE holds"), 'an exclusive lock: its holder on east, a waiter, the oldest wait');
is($r[2], 'fl-kz|/zklock/fl-kz|lock|1|0|f||-|0|t|kazoo-id', 'kazoo\'s lock: its name, raw data, no owner');
like($r[3], qr/^fl-r\|\/zklock\/fl-r\|lock\|2\|0\|f\|\|(east|west)\|\d+\|t\|/, 'a shared lock: two holders');
like($r[4], qr/^fl-sem\|\/zklock\/fl-sem\|semaphore\|1\|1\|t\|t\|east\|$apid\|t\|/, 'a full semaphore: its lease, a waiter');
like($r[5], qr/^key:42\|\/zklock\/key:42\|lock\|1\|0\|f\|\|east\|$apid\|t\|/, 'an integer key, by its name');
is($zk->all_watches, $watches, 'the view set no watch');

is($east->safe_psql('postgres', 'SELECT string_agg(path, \',\' ORDER BY path) FROM zk_fleet_locks(2)'),
	'/zklock/cur.lock,/zklock/fl-a', 'max_locks: only the first directories by name are read');
is($east->safe_psql('postgres', 'SELECT count(*) FROM zk_fleet_locks(0)'), '0', 'max_locks 0: none');
my ($ret, $out, $err) = $east->psql('postgres', 'SELECT * FROM zk_fleet_locks(-1)');
like($err, qr/max_locks must not be negative/, 'a negative max_locks is refused');

# a waiter that goes leaves no waiting count behind
$a->query_safe("SELECT zk_unlock('fl-a')");
finish_wait($b);
is($east->safe_psql('postgres', "SELECT holders, waiting, oldest_wait IS NULL, pid FROM zk_fleet_locks() WHERE name = 'fl-a'"),
	"1|0|t|$bpid", 'the hand-off shows: west holds, nobody waits');

peer_quit($cur);
is(peer_cmd($kz, 'quit'), 'bye', 'kazoo quits');
finish(nodes => [ $east, $west ], zk => $zk);
done_testing();
