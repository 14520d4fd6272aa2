# Copyright (c) zklock contributors
#
# The lease: a lock that holds when things break.
#  1. A holder frozen (SIGSTOP) past its session timeout, with its COMMIT
#     already on the socket, while another cluster takes the lock: the
#     commit is refused, for transaction and session locks alike.
#  2. A holder frozen for less than a third of its timeout keeps its lock
#     and commits: no false refusals.
#  3. A backend that releases many locks and disconnects at once leaves no
#     node behind: the releases reach the server before the session closes.
#  4. A node deleted by someone else is noticed: the lock is lost and a
#     commit (or PREPARE TRANSACTION) is refused.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);
use ZkEnsemble;
use ZklockTest;

my $zk = ZkEnsemble->new(servers => 3);
my $east = zk_cluster('east', $zk, session_timeout => 20000,
	max_connections => 60, conf => ['max_prepared_transactions = 2']);
my $west = zk_cluster('west', $zk, session_timeout => 20000, max_connections => 60);
$east->safe_psql('postgres', 'CREATE TABLE work (name text)');
my $hosts = $zk->connect_string;

# Holders with a 3 s session that take their lock and write a row.
sub holders
{
	my ($prefix, $n, $scope) = @_;
	my @h;
	for my $i (1 .. $n)
	{
		my $s = waiter($east);
		my $name = "$prefix$i";
		$s->query_safe("SET zklock.session_timeout = '3s'");
		if ($scope eq 'xact')
		{
			$s->query_safe("BEGIN");
			$s->query_safe("SELECT zk_xact_lock('$name')");
		}
		else
		{
			$s->query_safe("SELECT zk_lock('$name')");
			$s->query_safe("BEGIN");
		}
		$s->query_safe("INSERT INTO work VALUES ('$name')");
		push @h, { s => $s, name => $name, pid => backend_pid($s) };
	}
	return @h;
}

sub committed
{
	my ($prefix) = @_;
	return $east->safe_psql('postgres',
		"SELECT count(*) FROM work WHERE name LIKE '$prefix%'");
}

# --- 1. frozen past the timeout while another cluster takes the lock
for my $round (1 .. 2)
{
	my @h = (holders("fx${round}_", 5, 'xact'), holders("fs${round}_", 5, 'session'));
	kill 'STOP', $_->{pid} for @h;
	start_wait($_->{s}, 'COMMIT') for @h;
	my @w = map { waiter($west) } @h;
	start_wait($w[$_], "SELECT zk_lock('$h[$_]{name}', '60s')") for 0 .. $#h;
	my $names = join ',', map { "'$_->{name}'" } @h;
	ok( poll_until(
			sub {
				$west->safe_psql('postgres',
					"SELECT count(*) FROM unnest(ARRAY[$names]) AS n, zk_lock_queue(n) q "
					  . "WHERE q.holds AND q.cluster_name = 'west'") == @h;
			},
			60),
		"round $round: the other cluster holds all 10 locks while the holders are frozen");
	kill 'CONT', $_->{pid} for @h;
	my $refused = 0;
	for my $x (@h)
	{
		my (undef, $err) = finish_wait($x->{s});
		$refused++ if $err =~ /cannot commit while ZooKeeper lock "\Q$x->{name}\E" \(exclusive\) is lost/;
		$x->{s}->quit;
	}
	is($refused, 10, "round $round: every frozen holder's COMMIT is refused");
	is(committed("fx${round}_"), '0', "round $round: no transaction-lock work committed");
	is(committed("fs${round}_"), '0', "round $round: no session-lock work committed");
	finish_wait($_) for @w;
	$_->quit for @w;
}

# The refusal names how long the session was not heard from.
{
	my ($x) = holders('fd', 1, 'xact');
	kill 'STOP', $x->{pid};
	start_wait($x->{s}, 'COMMIT');
	my $w = waiter($west);
	my $tok = $w->query_safe("SELECT zk_lock('fd1', '60s')");
	kill 'CONT', $x->{pid};
	my (undef, $err) = finish_wait($x->{s});
	like($err, qr/DETAIL:  The ensemble last confirmed this backend's ZooKeeper session \d+ ms ago/,
		'the refusal says how long the session was not heard from');
	$x->{s}->quit;
	$w->quit;
}

# --- 2. frozen for less than a third of the timeout: no false refusal
{
	my @h = holders('ok_', 10, 'xact');
	kill 'STOP', $_->{pid} for @h;
	start_wait($_->{s}, 'COMMIT') for @h;
	# The freeze itself: 0.6 s of a 3 s session.
	sleep 0.6;
	kill 'CONT', $_->{pid} for @h;
	my $errors = 0;
	for my $x (@h)
	{
		my (undef, $err) = finish_wait($x->{s});
		$errors++ if $err =~ /ERROR/;
		$x->{s}->quit;
	}
	is($errors, 0, 'holders frozen for 0.6 s of a 3 s session all commit');
	is(committed('ok_'), '10', 'and their work is there');
}

# --- 3. release many locks, disconnect at once: nothing left 1 s later
for my $way ('zk_unlock_all', 'commit')
{
	for my $try (1 .. 3)
	{
		my $root = "/rel_${way}_$try";
		my $take = join '; ', map {
			$way eq 'commit' ? "SELECT zk_xact_lock('r$_')" : "SELECT zk_lock('r$_')"
		} 1 .. 18;
		my $sql = $way eq 'commit'
		  ? "SET zklock.root = '$root'; BEGIN; $take; COMMIT;"
		  : "SET zklock.root = '$root'; $take; SELECT zk_unlock_all();";
		$east->safe_psql('postgres', $sql);
		my $left;
		my $gone = poll_until(
			sub {
				$left = grep { m{/_c_} } split /\n/,
				  zkq($hosts, 'tree', $root);
				$left == 0;
			},
			1);
		ok($gone, "$way, try $try: no node left 1 s after the backend exited ($left left)");
	}
}

# --- 4. a node deleted by someone else: lost, and commits are refused
{
	my $s = waiter($east);
	$s->query_safe("SET zklock.session_timeout = '3s'");
	$s->query_safe("SELECT zk_lock('stolen')");
	my $node = $s->query_safe("SELECT node FROM zk_locks WHERE name = 'stolen'");
	is(zkq($hosts, 'delete', $node), 'deleted',
		'another client deletes the holder\'s node');
	# Read the state without committing: a commit is refused once lost.
	ok( poll_until(
			sub {
				my $st = $s->query_safe("BEGIN; SELECT coalesce(max(state), '') "
					  . "FROM zk_locks WHERE name = 'stolen'; ROLLBACK");
				$st =~ s/\s+//g;
				$st eq 'lost';
			},
			10),
		'the lease notices: the lock shows as lost');
	$s->query_safe("BEGIN");
	$s->query_safe("INSERT INTO work VALUES ('stolen')");
	$s->query("PREPARE TRANSACTION 'p1'");
	like($s->{stderr}, qr/cannot commit while ZooKeeper lock "stolen" \(exclusive\) is lost/,
		'PREPARE TRANSACTION is refused while a session lock is lost');
	$s->{stderr} = '';
	is($east->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'), '0',
		'nothing was prepared');
	$s->query("SELECT zk_unlock('stolen')");
	like($s->{stderr}, qr/was lost before it was released/, 'zk_unlock warns about the loss');
	$s->quit;
}

$east->stop('fast');
$west->stop('fast');
$zk->stop;
done_testing();
