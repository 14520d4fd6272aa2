# Copyright (c) zklock contributors
#
# A commit that becomes visible after its lock was lost.  The proof at
# PRE_COMMIT passes; then the COMMIT waits for a synchronous standby that
# is down (synchronous_standby_names names one that never connects), and
# meanwhile another client deletes the holder's node and another cluster
# takes the lock.  When the wait ends (the setting is reset and reloaded),
# the commit stands, but the client is told:
#  1. a WARNING naming the lock, the transaction committed locally after
#     the lock was lost; the session goes on;
#  2. with zklock.on_lock_loss = terminate, that WARNING and the end of the
#     connection, without a COMMIT reply.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";

use IPC::Run ();
use PostgreSQL::Test::Utils;
use Test::More;
use ZkEnsemble;
use ZklockTest;

my $zk = ZkEnsemble->new(servers => 3);
my $west = zk_cluster('west', $zk);
my $b = waiter($west);
my $hosts = $zk->connect_string;

# A primary whose synchronous standby is down from the start (the setting
# is in force once the server runs: no reload to wait for).  Only sessions
# with synchronous_commit = on wait for it, so setting it up does not.
# Synchronous replication needs WAL senders (the TAP default has none).
sub primary
{
	my ($name) = @_;
	my $node = zk_cluster($name, $zk,
		conf => [
			'wal_level = replica', 'max_wal_senders = 2',
			"synchronous_standby_names = 'nobody'", 'synchronous_commit = local'
		]);
	$node->safe_psql('postgres', 'CREATE TABLE work (name text)');
	return $node;
}

# A psql of its own, so that its stderr and its end can be read whatever
# happens to its backend.
sub client
{
	my ($east, $name, $settings) = @_;
	my %c = (in => '', out => '', err => '');
	$c{h} = IPC::Run::start(
		[ 'psql', '-X', '-A', '-t', '-q', '-v', 'VERBOSITY=verbose',
		  '-d', $east->connstr('postgres') . " application_name=$name" ],
		'<', \$c{in}, '>', \$c{out}, '2>', \$c{err});
	$c{in} .= "SET synchronous_commit = on;\n$settings\nBEGIN;\nSELECT zk_xact_lock('$name');\n"
	  . "INSERT INTO work VALUES ('$name');\n"
	  . "SELECT 'node=' || node FROM zk_locks WHERE name = '$name';\n"
	  . "COMMIT;\nSELECT 'after commit';\n";
	return \%c;
}

sub read_until
{
	my ($c, $re) = @_;
	return poll_until(sub { $c->{h}->pump_nb if $c->{h}->pumpable; $c->{out} =~ $re }, 30);
}

# Run one client into its commit wait on a primary of its own, break its
# lock, end the wait by letting commits go without the standby.
sub commit_while_lost
{
	my ($name, $settings) = @_;
	my $east = primary($name);
	my $c = client($east, $name, $settings);
	ok(read_until($c, qr/node=(\S+)/), "$name: A holds the lock and wrote");
	my ($node) = $c->{out} =~ /node=(\S+)/;
	ok( poll_until(
			sub {
				$east->safe_psql('postgres',
					"SELECT count(*) FROM pg_stat_activity WHERE application_name = '$name' AND wait_event = 'SyncRep'"
				) eq '1';
			},
			30),
		"$name: A's COMMIT waits for the synchronous standby");
	is(zkq($hosts, 'delete', $node), 'deleted',
		"$name: another client deletes A's node");
	is($b->query_safe("SELECT zk_try_lock('$name')"), 't', "$name: B on the other cluster takes the lock");
	# A's server has sent its notification once the watch is gone from it.
	ok(poll_until(sub { !exists $zk->watches_by_path->{$node} }, 30), "$name: A's watch fired");
	$east->safe_psql('postgres',
		"ALTER SYSTEM SET synchronous_standby_names = ''; SELECT pg_reload_conf()");
	$c->{in} .= "\\q\n";
	ok(poll_until(sub { $c->{h}->pump_nb if $c->{h}->pumpable; !$c->{h}->pumpable }, 30),
		"$name: the client is done");
	$c->{h}->finish;
	is($east->safe_psql('postgres', "SELECT count(*) FROM work WHERE name = '$name'"), '1',
		"$name: the transaction committed locally");
	$b->query_safe("SELECT zk_unlock('$name')");
	$east->stop('fast');
	return $c;
}

# --- 1. the WARNING
{
	my $c = commit_while_lost('sync-warn', '');
	like($c->{err},
		qr/WARNING:  08000: ZooKeeper lock "sync-warn" \(exclusive\) was lost before the commit completed\nDETAIL:  The transaction has already committed locally/,
		'the client gets a WARNING naming the lock');
	like($c->{out}, qr/after commit/, 'and the session goes on');
}

# --- 2. on_lock_loss = terminate
{
	my $c = commit_while_lost('sync-term', 'SET zklock.on_lock_loss = terminate;');
	like($c->{err},
		qr/WARNING:  08000: terminating connection because ZooKeeper lock "sync-term" \(exclusive\) was lost before the commit completed/,
		'the client gets the WARNING');
	unlike($c->{out}, qr/after commit/, 'and the connection ends');
	unlike($c->{err}, qr/ERROR/, 'no ERROR after the commit');
}

finish(sessions => [$b], nodes => [$west], zk => $zk);
done_testing();
