# Copyright (c) zklock contributors
#
# Several locks as one: zk_lock(text[]) and its forms.
#  - a free set of 5 names in one round trip, counted through a proxy that
#    holds every reply (so that a pipeline is one turn): it sends its one
#    pipeline (5 creates, 5 listings) and nothing else, no watch on its
#    own nodes either (the listings' child watches cover them); its
#    release in one; a set whose directories are missing in three
#    pipelines, not one per name;
#  - a blocked set waits in one queue only: it holds the names before it
#    in path order and has no node in any later queue;
#  - timeout, cancel and terminate in the middle of a contended set leave
#    nothing: no node, no watch;
#  - mixed with a single lock, a cycle is found (40P01), and the set
#    leaves nothing when it is the victim;
#  - 2 clusters x 4 backends take random overlapping subsets of 6 names
#    in random orders for 30 s, in both scopes: no 40P01 at all, no two
#    critical sections of a name overlap (a ledger), every backend makes
#    progress;
#  - Curator's InterProcessMultiLock over zk_lock_path of the same names
#    and a zklock set exclude each other, both ways.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";

use List::Util qw(shuffle);
use POSIX ();
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);
use ZkEnsemble;
use ZkProxy;
use ZklockTest;

my $zk = ZkEnsemble->new(servers => 1);
my $hosts = $zk->connect_string;
my %conf = (conf => ["deadlock_timeout = '200ms'"]);
my $east = zk_cluster('east', $zk, %conf);
my $west = zk_cluster('west', $zk, %conf);

sub nodes_in
{
	my (@names) = @_;
	my $n = 0;
	$n += zk_count($zk, "/zklock/$_") for @names;
	return $n;
}

# Requests of every kind but the session's own (ping, auth, set_watches)
# and the close.
sub requests_all
{
	my ($proxy) = @_;
	my $n = 0;
	$n += $proxy->requests($_)
	  for qw(create delete exists get set get_acl set_acl list sync list2
	  check multi create2 remove_watches create_container);
	return $n;
}

# --- round trips, counted through a proxy that holds every reply 300 ms
{
	my $proxy = ZkProxy->new($zk->port(1));
	my $s = session($east);
	$s->query_safe("SET zklock.hosts = '127.0.0.1:" . $proxy->port . "'");
	$s->query_safe("SELECT zk_lock('rt-warm'), zk_unlock('rt-warm')");
	# Persistent directories: the server's container sweep cannot take them.
	for my $i (1 .. 5)
	{
		is(zkq($hosts, 'create', "/zklock/rt-$i"), 'created',
			"directory rt-$i made by another client");
	}
	$proxy->mode('hold:300');
	my $before = $proxy->turns;
	my $gets = $proxy->requests('get');
	my $sent = requests_all($proxy);
	my ($creates, $lists) = ($proxy->requests('create2'), $proxy->requests('list'));
	my $tokens = $s->query_safe(
		"SELECT zk_lock(ARRAY['rt-4', 'rt-2', 'rt-5', 'rt-1', 'rt-3'])");
	my ($turns, $after) = ($proxy->turns - $before, requests_all($proxy) - $sent);
	like($tokens, qr/^\{\d+,\d+,\d+,\d+,\d+\}$/, 'a free set of 5 names: five tokens');
	is( join(' ', $proxy->requests('create2') - $creates, $proxy->requests('list') - $lists, $after),
		'5 5 10',
		'a free set of 5 names: by its return it sent 5 creates and 5 listings, nothing else');
	is($turns, 1, 'a free set of 5 names: all of them in one turn');
	is($s->query_safe('SELECT count(*) FROM zk_locks'), '5', 'all five are held');

	# A barrier: any request sent before it has been counted.
	$s->query_safe("SELECT zk_lock('rt-warm'), zk_unlock('rt-warm')");
	is($proxy->requests('get') - $gets, 0, 'no watch was sent on its own nodes');
	$before = $proxy->turns;
	is($s->query_safe("SELECT zk_unlock(ARRAY['rt-1', 'rt-2', 'rt-3', 'rt-4', 'rt-5'])"),
		't', 'the set is released');
	is($proxy->turns - $before, 1, 'its release, confirmed: one round trip');
	is(nodes_in(map { "rt-$_" } 1 .. 5), 0, 'and the nodes are gone when it returns');

	$before = $proxy->turns;
	$sent = requests_all($proxy);
	my %kinds = map { $_ => $proxy->requests($_) } qw(create2 create_container list);
	$s->query_safe("SELECT zk_lock(ARRAY['cold-1', 'cold-2', 'cold-3', 'cold-4', 'cold-5'])");
	($turns, $after) = ($proxy->turns - $before, requests_all($proxy) - $sent);
	is( join(' ', (map { $proxy->requests($_) - $kinds{$_} } qw(create2 create_container list)), $after),
		'15 5 10 30',
		'missing directories: by its return, three pipelines (5 creates and 5 listings; 5 directories and their parent, 5 times; the 10 again), nothing else');
	is($turns, 3, 'in three turns') or diag("turns $turns");
	$s->query_safe('SELECT zk_unlock_all()');
	is($proxy->requests('get') - $gets, 0, 'and no watch on its own nodes');
	$proxy->mode('pass');
	quit_session($s);
	$proxy->stop;
}

# --- all or nothing: a set blocked by one name
my $holder = session($west);
$holder->query_safe("SELECT zk_lock('aon-3')");
my @aon = map { "aon-$_" } 1 .. 4;
my $set = "ARRAY['aon-4', 'aon-1', 'aon-3', 'aon-2']";
my $watches = $zk->all_watches;

{
	my $s = session($east);
	my $pid = backend_pid($s);
	start_wait($s, "SELECT zk_lock($set, '3s')");
	ok(poll_until(sub { is_waiting($east, $pid) }, 30), 'the set waits');
	is(zk_count($zk, '/zklock/aon-1') . zk_count($zk, '/zklock/aon-2') .
		zk_count($zk, '/zklock/aon-3') . zk_count($zk, '/zklock/aon-4'),
		'1120', 'it holds aon-1 and aon-2, queues in aon-3, and has no place in aon-4');
	my ($out, $err) = finish_wait($s);
	like($err, qr/ERROR:  could not obtain ZooKeeper lock "aon-3"/, 'timeout: 55P03 names the blocked name');
	like($err, qr/none of the 4 locks requested with it was taken/, 'and says nothing was taken');
	is(nodes_in(@aon), 1, 'timeout: only the holder\'s node is left when it returns');
	is($s->query_safe('SELECT count(*) FROM zk_locks'), '0', 'and zk_locks is empty');
	ok(poll_until(sub { $zk->all_watches == $watches }, 30), 'no watch left');

	for my $how ('cancel', 'terminate')
	{
		my $w = $how eq 'cancel' ? $s : session($east);
		my $wpid = backend_pid($w);
		start_wait($w, "SELECT zk_xact_lock($set)");
		ok(poll_until(sub { is_waiting($east, $wpid) && nodes_in(@aon) == 4 }, 30),
			"$how: the set waits");
		$east->safe_psql('postgres', "SELECT pg_${how}_backend($wpid)");
		if ($how eq 'cancel')
		{
			my ($o, $e) = finish_wait($w);
			like($e, qr/canceling statement due to user request/, 'cancel: the wait ends');
			is(nodes_in(@aon), 1, 'cancel: only the holder\'s node is left when it returns');
		}
		else
		{
			ok(poll_until(sub { nodes_in(@aon) == 1 }, 30),
				'terminate: only the holder\'s node is left');
			eval { quit_session($w) };    # its connection is gone: psql may be too
		}
		ok(poll_until(sub { $zk->all_watches == $watches }, 30), "$how: no watch left");
	}

	# once free, the set is taken whole, in either scope
	$holder->query_safe("SELECT zk_unlock('aon-3')");
	is($s->query_safe("BEGIN; SELECT array_length(zk_xact_lock($set), 1); "),
		'4', 'free again: the whole set in a transaction');
	is($s->query_safe("SELECT zk_try_lock(ARRAY['aon-2'])"), 't', 'a held name is taken again in the other scope');
	is($s->query_safe('COMMIT; SELECT count(*) FROM zk_locks'), '1',
		'commit releases the transaction holds, the session hold stays');
	my ($unlocked) = $s->query("SELECT zk_unlock(ARRAY['aon-2', 'aon-1'])");
	is($unlocked, 'f', 'unlock of a set with a name not held: false');
	like($s->{stderr}, qr/WARNING:  you don't own a ZooKeeper session lock "aon-1" in exclusive mode/,
		'with the WARNING of the single form for that name');
	$s->{stderr} = '';
	is(nodes_in(@aon), 0, 'and nothing is left');
}

# --- mixed with a single lock: the cycle is found
{
	my $a = session($east);
	my $b = session($west);
	$a->query_safe("BEGIN; SELECT zk_xact_lock('mx-b')");
	$b->query_safe('BEGIN');
	my $bpid = backend_pid($b);
	start_wait($b, "SELECT zk_xact_lock(ARRAY['mx-b', 'mx-a'])");
	ok(poll_until(sub { is_waiting($west, $bpid) && zk_count($zk, '/zklock/mx-a') == 1 }, 30),
		'the set holds mx-a and waits for mx-b');
	start_wait($a, "SELECT zk_xact_lock('mx-a')");
	my ($ao, $ae) = finish_wait($a);
	my ($bo, $be) = finish_wait($b);
	my @dead = grep { /deadlock detected/ } ($ae, $be);
	is(scalar @dead, 1, 'set and single lock in a cycle: exactly one 40P01');
	ok(($ae eq '' && $ao =~ /^\d+$/) || ($be eq '' && $bo =~ /^\{\d+,\d+\}$/),
		'the other acquires');
	$_->query('ROLLBACK') for ($a, $b);
	$_->{stderr} = '' for ($a, $b);
	is(nodes_in('mx-a', 'mx-b'), 0, 'nothing is left after both end');
}

# --- stress: random overlapping subsets of 6 names, random orders
{
	my $seconds = 30;
	my $deadline = time + $seconds;
	my $dir = PostgreSQL::Test::Utils::tempdir();
	my @kids;
	for my $i (0 .. 7)
	{
		my $node = $i % 2 ? $west : $east;
		my $pid = fork() // die "fork: $!";
		if ($pid == 0)
		{
			my $ok = eval {
				my $s = waiter($node);
				srand($$);
				open my $fh, '>', "$dir/w$i.log" or die $!;
				$fh->autoflush(1);
				while (time < $deadline)
				{
					my @names = grep { rand() < 0.5 } map { "st-$_" } 1 .. 6;
					next if @names < 2;
					@names = shuffle @names;
					my $arr = 'ARRAY[' . join(', ', map { "'$_'" } @names) . ']';
					my $xact = rand() < 0.5;
					my $take = $xact ? "BEGIN; SELECT zk_xact_lock($arr, '20s');"
					  : "SELECT zk_lock($arr, '20s');";
					$s->query($take);
					my $err = $s->{stderr};
					if ($err ne '')
					{
						$err =~ s/\n/ /g;
						print $fh "error $err\n";
						$s->{stderr} = '';
						$s->query('ROLLBACK') if $xact;
						$s->{stderr} = '';
						next;
					}
					my $t0 = time;
					sleep rand(0.02);
					my $t1 = time;
					print $fh join(' ', 'held', $t0, $t1, @names), "\n";
					$s->query_safe($xact ? 'COMMIT' : "SELECT zk_unlock($arr)");
				}
				$s->quit;
				1;
			};
			POSIX::_exit($ok ? 0 : 1);
		}
		push @kids, $pid;
	}
	my $until = $deadline + 60;
	my %left = map { $_ => 1 } @kids;
	while (%left && time < $until)
	{
		my $k = waitpid(-1, POSIX::WNOHANG());
		delete $left{$k} if $k > 0;
		sleep 0.1 if $k <= 0;
	}
	kill 'KILL', keys %left;
	waitpid($_, 0) for keys %left;
	is(scalar keys %left, 0, 'stress: every worker ended in time');

	my (%sections, @errors, %cycles);
	for my $i (0 .. 7)
	{
		open my $fh, '<', "$dir/w$i.log" or next;
		while (<$fh>)
		{
			chomp;
			if (/^error (.*)/) { push @errors, $1; next; }
			my (undef, $t0, $t1, @names) = split / /;
			push @{ $sections{$_} }, [ $t0, $t1, $i ] for @names;
			$cycles{$i}++;
		}
	}
	is(scalar(grep { /deadlock detected/ } @errors), 0, 'stress: no 40P01 at all');
	is(scalar @errors, 0, 'stress: no error at all') or diag(join "\n", @errors[0 .. ($#errors < 4 ? $#errors : 4)]);
	my $overlaps = 0;
	for my $name (keys %sections)
	{
		my @s = sort { $a->[0] <=> $b->[0] } @{ $sections{$name} };
		for my $k (1 .. $#s)
		{
			$overlaps++ if $s[$k][0] < $s[ $k - 1 ][1];
		}
	}
	is($overlaps, 0, 'stress: no two critical sections of a name overlap');
	is(scalar(grep { ($cycles{$_} // 0) >= 5 } 0 .. 7), 8,
		'stress: every backend made progress (5 sets or more)')
	  or diag(join ', ', map { "w$_: " . ($cycles{$_} // 0) } 0 .. 7);
	my $total = 0;
	$total += $_ for values %cycles;
	diag("stress: $total sets held in $seconds s");
	is(nodes_in(map { "st-$_" } 1 .. 6), 0, 'stress: nothing is left');
}

# --- Curator's InterProcessMultiLock on the same names
{
	my $interop = "$FindBin::Bin/../interop";
	my $classes = "$PostgreSQL::Test::Utils::tmp_check/multi_classes";
	ok(compile_peers($classes, "$interop/LockPeer.java"), 'the Curator peer compiles');
	my $paths = join ',', map {
		my $p = $east->safe_psql('postgres', "SELECT zk_lock_path('cm-$_')");
		$p
	} 1 .. 3;
	my $peer = curator($hosts, 'multi', $paths, 'multi');
	my $s = session($east);
	like(peer_cmd($peer, 'acquire'), qr/^acquired \d+$/, 'Curator takes cm-1, cm-2, cm-3 as one');
	is($s->query_safe("SELECT zk_try_lock(ARRAY['cm-9', 'cm-2'], '500ms')"), 'f',
		'a zklock set with cm-2 is refused');
	is(nodes_in('cm-9'), 0, 'and leaves nothing in cm-9');
	like(peer_cmd($peer, 'release'), qr/^released \d+$/, 'Curator releases');
	like($s->query_safe("SELECT zk_lock(ARRAY['cm-3', 'cm-1'], '10s')"), qr/^\{\d+,\d+\}$/,
		'zklock takes cm-3 and cm-1 as one');
	is(peer_cmd($peer, 'try 500'), 'busy', 'Curator\'s multi-lock is refused');
	is($s->query_safe("SELECT zk_unlock(ARRAY['cm-1', 'cm-3'])"), 't', 'zklock releases');
	like(peer_cmd($peer, 'try 10000'), qr/^acquired \d+$/, 'Curator takes the set again');
	like(peer_cmd($peer, 'release'), qr/^released \d+$/, 'and releases it');
	peer_quit($peer);
}

finish(nodes => [ $east, $west ], zk => $zk);
done_testing();
