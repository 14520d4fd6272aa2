# Copyright (c) zklock contributors
#
# Deadlock detection across backends and clusters (SQLSTATE 40P01):
#  - two clusters, two locks taken in opposite order: one 40P01, naming
#    both members, the other acquires;
#  - a cycle of three backends on three clusters;
#  - the shared-to-exclusive upgrade behind another cluster's writer;
#  - both members starting their waits at the same instant, 10 times:
#    found every time, exactly one victim;
#  - a long wait behind a busy holder is no deadlock, and shows in
#    zk_lock_waits() with its blocker's owner;
#  - a stress run: 8 backends over 2 clusters take random pairs of 5 locks,
#    in a global order (no 40P01 at all) and in random order (no run hangs,
#    and every 40P01 names a real cycle: each member held the lock the
#    previous one waited for).

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
my %conf = (conf => ["deadlock_timeout = '200ms'"]);
my $east = zk_cluster('east', $zk, %conf);
my $west = zk_cluster('west', $zk, %conf);
my $north = zk_cluster('north', $zk, %conf);

# Finish waits and sort them into (errors matching 40P01, successes).
sub outcomes
{
	my @r = map { [ finish_wait($_) ] } @_;
	my @dead = grep { $r[$_][1] =~ /deadlock detected/ } 0 .. $#r;
	my @ok = grep { $r[$_][1] eq '' && $r[$_][0] =~ /^\d+$/ } 0 .. $#r;
	return (\@dead, \@ok, \@r);
}

# --- two clusters, opposite order
{
	my $a = session($east, begin => 1);
	my $b = session($west, begin => 1);
	$a->query_safe("SELECT zk_xact_lock('dl-a')");
	$b->query_safe("SELECT zk_xact_lock('dl-b')");
	my $t0 = time;
	start_wait($a, "SELECT zk_xact_lock('dl-b')");
	start_wait($b, "SELECT zk_xact_lock('dl-a')");
	my ($dead, $ok, $r) = outcomes($a, $b);
	is(scalar @$dead, 1, 'opposite order on two clusters: exactly one 40P01');
	is(scalar @$ok, 1, 'the other acquires');
	my $err = $r->[ $dead->[0] ][1];
	like($err, qr/ERROR:  deadlock detected/, 'the error is deadlock detected');
	like($err, qr/Process \d+ of cluster "east" waits for ZooKeeper lock "\/zklock\/dl-b"; blocked by process \d+ of cluster "west"/,
		'the detail names the east member');
	like($err, qr/Process \d+ of cluster "west" waits for ZooKeeper lock "\/zklock\/dl-a"; blocked by process \d+ of cluster "east"/,
		'and the west member');
	like($err, qr/HINT:  Take ZooKeeper locks in one order/, 'with a hint');
	ok(time - $t0 < 10, 'found within a few deadlock_timeouts');
	my $victim = $dead->[0] == 0 ? $a : $b;
	$victim->query('SELECT 1');
	like($victim->{stderr}, qr/current transaction is aborted/, 'the victim\'s transaction aborted');
	$victim->{stderr} = '';
	$_->query_safe('ROLLBACK') for ($a, $b);
	is($victim->query_safe('SELECT count(*) FROM zk_locks'), '0', 'its transaction lock is gone');
	quit_session($a, $b);
	ok(poll_until(sub { zk_count($zk, '/zklock/dl-a') + zk_count($zk, '/zklock/dl-b') == 0 }, 30),
		'no node left behind');
}

# Poll until exactly $n of the sessions' backends are out of their wait.
sub settled
{
	my ($n, @who) = @_;
	return poll_until(sub {
		(grep { !is_waiting($_->[0], $_->[1]) } @who) == $n }, 60);
}

# --- three backends, three clusters
{
	my @nodes = ($east, $west, $north);
	my @s = map { session($_, begin => 1) } @nodes;
	my @pids = map { backend_pid($_) } @s;
	my @l = qw(c3-x c3-y c3-z);
	$s[$_]->query_safe("SELECT zk_xact_lock('$l[$_]')") for 0 .. 2;
	start_wait($s[$_], "SELECT zk_xact_lock('$l[($_ + 1) % 3]')") for 0 .. 2;
	# The victim ends its wait, the member it blocked acquires, and the
	# third waits for that one's commit.
	ok(settled(2, map { [ $nodes[$_], $pids[$_] ] } 0 .. 2), 'a cycle of three on three clusters is broken');
	my @done = grep { !is_waiting($nodes[$_], $pids[$_]) } 0 .. 2;
	my ($waiting) = grep { is_waiting($nodes[$_], $pids[$_]) } 0 .. 2;
	my ($dead, $ok) = outcomes(map { $s[$_] } @done);
	is(scalar @$dead, 1, 'exactly one 40P01');
	is(scalar @$ok, 1, 'the member it blocked acquires');
	$s[$_]->query_safe('ROLLBACK') for @done;
	my ($out, $err) = finish_wait($s[$waiting]);
	ok($out > 0 && $err eq '', 'and the third, once that one ends');
	$s[$waiting]->query_safe('ROLLBACK');
	quit_session(@s);
}

# --- the upgrade: shared held, exclusive asked, another cluster's writer between
{
	my $e = waiter($east);
	my $w = waiter($west);
	my @who = ([ $east, backend_pid($e) ], [ $west, backend_pid($w) ]);
	$e->query_safe("SELECT zk_lock_shared('upg')");
	start_wait($w, "SELECT zk_lock('upg')");
	ok(poll_until(sub { zk_count($zk, '/zklock/upg') == 2 }), 'the writer queues behind the reader');
	start_wait($e, "SELECT zk_lock('upg')");
	ok(settled(1, @who), 'upgrade behind another cluster\'s writer: one side ends its wait');
	my $e_done = !is_waiting(@{ $who[0] });
	my ($first, $second) = $e_done ? ($e, $w) : ($w, $e);
	my ($out, $err) = finish_wait($first);
	if ($e_done && $err =~ /deadlock detected/)
	{
		# The reader was the victim; its shared lock still blocks the writer.
		pass('the upgrading reader got 40P01');
		$e->query_safe('SELECT zk_unlock_all()');
	}
	elsif (!$e_done)
	{
		like($err, qr/deadlock detected/, 'the writer got 40P01');
	}
	else
	{
		fail("unexpected outcome: $out $err");
	}
	($out, $err) = finish_wait($second);
	ok($out > 0 && $err eq '', 'and the other side gets its lock');
	$_->query_safe('SELECT zk_unlock_all()') for ($e, $w);
	$_->quit for ($e, $w);
}

# --- members start waiting at the same instant
{
	my ($found, $one) = (0, 0);
	for my $trial (1 .. 10)
	{
		my $a = session($east, begin => 1);
		my $b = session($west, begin => 1);
		$a->query_safe("SELECT zk_xact_lock('same-$trial-a')");
		$b->query_safe("SELECT zk_xact_lock('same-$trial-b')");
		# The barrier: both requests are written before either is read back.
		start_wait($a, "SELECT zk_xact_lock('same-$trial-b')");
		start_wait($b, "SELECT zk_xact_lock('same-$trial-a')");
		my ($dead, $ok) = outcomes($a, $b);
		$found++ if @$dead >= 1;
		$one++ if @$dead == 1 && @$ok == 1;
		$_->query_safe('ROLLBACK') for ($a, $b);
		quit_session($a, $b);
	}
	is($found, 10, 'simultaneous waits: the cycle is found every time');
	is($one, 10, 'with exactly one victim every time');
}

# --- a long wait behind a busy holder is no deadlock; the fleet view shows it
{
	my $h = waiter($east);
	my $w = waiter($west);
	my $hpid = backend_pid($h);
	my $wpid = backend_pid($w);
	$h->query_safe("SELECT zk_lock('busy')");
	start_wait($w, "SELECT zk_lock('busy', '30s')");
	ok(poll_until(sub {
		$north->safe_psql('postgres', "SELECT count(*) FROM zk_lock_waits() WHERE waiter_pid = $wpid") eq '1' }, 30),
		'a wait longer than deadlock_timeout shows in zk_lock_waits()');
	is($north->safe_psql('postgres', qq{
		SELECT waiter_cluster_name, lock_path, blocker_holds, blocker_cluster_name, blocker_pid = $hpid
		  FROM zk_lock_waits() WHERE waiter_pid = $wpid}),
		'west|/zklock/busy|t|east|t', 'with the lock, and the holder that blocks it');
	sleep 2;    # ten deadlock_timeouts of searching
	ok(in_call($west, $wpid), 'still waiting: no false deadlock');
	$h->query_safe("SELECT zk_unlock('busy')");
	my ($out, $err) = finish_wait($w);
	ok($out > 0 && $err eq '', 'it gets the lock when the holder releases');
	ok(poll_until(sub {
		$north->safe_psql('postgres', "SELECT count(*) FROM zk_lock_waits()") eq '0' }, 30),
		'and its wait is gone from the view');
	$_->quit for ($h, $w);
}

# Whether a worker's events show it holding or waiting for lock $k at some
# point between line $from and line $to of the log.
sub had_lock
{
	my ($events, $k, $from, $to) = @_;
	my $state = '';
	for my $e (@$events)
	{
		my ($i, $what, $lk) = @$e;
		last if $i > $to;
		return 1 if $i >= $from && $state eq 'has';
		if ($what eq 'free') { $state = '' }
		elsif (($what eq 'hold' || $what eq 'wait') && $lk eq $k)
		{
			return 1 if $i >= $from;
			$state = 'has';
		}
	}
	return $state eq 'has';
}

# --- stress: 8 backends over 2 clusters, random pairs of 5 locks
for my $ordered (1, 0)
{
	my $seconds = 60;
	my $label = $ordered ? 'global order' : 'random order';
	my $deadline = time + $seconds;
	my @kids;
	my $log = PostgreSQL::Test::Utils::tempdir() . '/holds.log';
	for my $i (0 .. 7)
	{
		my $node = $i % 2 ? $west : $east;
		my $pid = fork() // die "fork: $!";
		if ($pid == 0)
		{
			my $ok = eval {
				my $s = waiter($node);
				my $me = backend_pid($s);
				srand($$);
				open my $fh, '>>', $log or die $!;
				$fh->autoflush(1);
				while (time < $deadline)
				{
					my @pair = (int(rand(5)), int(rand(5)));
					next if $pair[0] == $pair[1];
					@pair = sort @pair if $ordered;
					$s->query_safe('BEGIN');
					my $done = 1;
					for my $k (@pair)
					{
						print $fh "$me wait $k\n";
						my ($out, $ret) = $s->query("SELECT zk_xact_lock('st-$k', '20s')");
						if ($s->{stderr} =~ /deadlock detected/)
						{
							my $err = $s->{stderr};
							$err =~ s/\n/ | /g;
							print $fh "$me deadlock $k $err\n";
							$done = 0;
							last;
						}
						die "unexpected: $s->{stderr}" if $s->{stderr} ne '';
						print $fh "$me hold $k\n";
					}
					$s->{stderr} = '';
					$s->query_safe($done ? 'COMMIT' : 'ROLLBACK');
					print $fh "$me free\n";
				}
				$s->quit;
				1;
			};
			print STDERR "stress worker $i: $@" unless $ok;
			POSIX::_exit($ok ? 0 : 1);
		}
		push @kids, $pid;
	}
	my $failed = 0;
	for my $pid (@kids)
	{
		waitpid($pid, 0);
		$failed++ if $? != 0;
	}
	is($failed, 0, "stress, $label: every worker finished (no hang, no other error)");
	my @lines = split /\n/, slurp_file($log);
	my @dead = grep { / deadlock / } @lines;
	my $cycles = grep { / free$/ } @lines;
	diag(sprintf('stress, %s: %d transactions, %d deadlocks', $label, $cycles, scalar @dead));
	if ($ordered)
	{
		is(scalar @dead, 0, 'stress, global order: no deadlock reported');
	}
	else
	{
		# Replay the log: at each 40P01, every member named in the detail
		# must have held, or waited in the queue of, the lock the detail
		# says it blocks, at some point of the victim's wait.
		my (%ev, %since, $bad);
		for my $i (0 .. $#lines)
		{
			my ($pid, $what, $k, $rest) = split / /, $lines[$i], 4;
			push @{ $ev{$pid} }, [ $i, $what, $k ];
			$since{$pid} = $i if $what eq 'wait';
			next unless $what eq 'deadlock';
			my @m = $rest =~ /Process (\d+) of cluster "\w+" waits for ZooKeeper lock "\/zklock\/st-(\d)"; blocked by process (\d+)/g;
			$bad++ unless @m >= 6;
			while (my ($p, $lk, $by) = splice(@m, 0, 3))
			{
				$bad++ unless had_lock($ev{$by} // [], $lk, $since{$pid}, $i);
			}
		}
		ok(@dead > 0, 'stress, random order: deadlocks happen');
		is($bad // 0, 0, 'stress, random order: every 40P01 names a real cycle');
	}
}

finish(nodes => [ $east, $west, $north ], zk => $zk);
done_testing();
