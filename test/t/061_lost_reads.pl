# Copyright (c) zklock contributors
#
# The connection lost while an acquisition waits for the answer to one of
# its reads: the acquisition reconnects and goes on in the same session, as
# after any other lost reply, and never fails with 08006 while the session
# lives.  gdb holds the backend's main thread just before it sends the
# read; the test makes the proxy swallow replies, lets the read go to the
# server, then cuts the connection and lets the backend reconnect.
#  1. the lock directory's ACL (zklock.auth): read again after the
#     reconnect, so that a directory open to other identities is still
#     refused (55000), never taken unchecked;
#  2. the czxids that order children sharing a sequence number (a child
#     made by name with the suffix that our create gets next).
# And the connection lost for longer than zklock.connect_timeout (2 s
# here) within a longer lock timeout, the session living on: the wait for
# the reconnect lasts as long as the lock's timeout allows,
#  3. for a contender whose create's reply was lost (no node of its own to
#     prove yet): it finds its node after the reconnect and takes the lock;
#  4. for an acquisition that starts while the connection is down.
#  5. A create's reply lost, its node found again after the reconnect: the
#     connection drops once more between the answer that names the node's
#     owner and the look at it (gdb holds the backend there).  The answer
#     says the node is ours: it is adopted, never created a second time.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use ZkEnsemble;
use ZkGdb;
use ZkProxy;
use ZklockTest;

my $zk = ZkEnsemble->new(servers => 1);
my $auth = 'zklock:s3cret-pw';
my $node = zk_cluster('reads', $zk, preload => 1, session_timeout => 20000,
	conf => ["zklock.auth = '$auth'"]);
my $proxy = ZkProxy->new($zk->port(1));
my $hosts = $zk->connect_string;

# Hold $s's backend at its next call of $func, run $sql, and lose the
# answer of the $kind request sent after the breakpoint: swallowed, then
# the connection cut and let back.  Returns what the statement printed.
sub lose_read
{
	my ($what, $s, $func, $kind, $sql) = @_;
	my $g = ZkGdb->attach(backend_pid($s), non_stop => 1);
	return (undef, $ZkGdb::why) unless $g;
	like($g->cmd("break $func") // '', qr/Breakpoint 1 at/,
		"$what: gdb stops the backend before the read");
	my $sent = $proxy->requests($kind);
	start_wait($s, $sql);
	ok($g->wait_for(qr/hit Breakpoint 1\b/, 30), "$what: the backend is about to read")
	  or diag($g->output);
	$proxy->mode('swallow');
	$g->cmd('delete');
	$g->cmd('continue -a &');
	ok(poll_until(sub { $proxy->requests($kind) > $sent }, 30),
		"$what: the read is sent, its answer swallowed");
	$proxy->mode('cut');
	$proxy->mode('pass');
	return ($g, '');
}

# --- 1. the ACL of a lock directory
for my $case ([ 'a directory of zklock\'s', 'acl-own', 1 ],
	[ 'a directory open to anyone', 'acl-open', 0 ])
{
	my ($what, $lock, $protected) = @$case;
  SKIP:
	{
		my $s = session($node, via => $proxy, warm => 1);
		my $sid = $s->query_safe('SELECT session_id FROM zk_session()');
		if ($protected)
		{
			# the directory made by zklock, with its own ACL, left empty
			$s->query_safe("SELECT zk_lock('$lock'), zk_unlock('$lock')");
		}
		else
		{
			is(zkq({ auth => $auth }, $hosts, 'create', "/zklock/$lock"), 'created',
				"$what: another client makes the directory with an open ACL");
		}
		my ($g, $why) = lose_read($what, $s, 'zkl_session_get_acl', 'get_acl',
			"SELECT zk_lock('$lock', '60s') > 0");
		skip $why, 5 unless $g;
		my ($out, $err) = finish_wait($s);
		$g->detach;
		if ($protected)
		{
			is($err, '', "$what: the acquisition reconnects and goes on, without an error");
			is($out, 't', "$what: it returns its token");
			is($s->query_safe("SELECT count(*) FROM zk_locks WHERE name = '$lock'"),
				'1', "$what: it holds the lock");
			$s->query_safe('SELECT zk_unlock_all()');
		}
		else
		{
			like($err, qr/ERROR:  ZooKeeper lock directory "\/zklock\/$lock" is not protected by zklock.auth/,
				"$what: the ACL read again after the reconnect refuses it");
			is($out, '', "$what: no token");
			is($s->query_safe("SELECT count(*) FROM zk_locks"), '0',
				"$what: nothing held");
		}
		is($s->query_safe('SELECT session_id FROM zk_session()'), $sid,
			"$what: in the same session");
		ok(poll_until(sub { zk_count($zk, "/zklock/$lock") == 0 }, 30),
			"$what: nothing is left in the directory");
		quit_session($s);
	}
}

# --- 2. the czxids of tied sequence numbers
SKIP:
{
	my $s = session($node, via => $proxy, warm => 1);
	my $sid = $s->query_safe('SELECT session_id FROM zk_session()');
	my $spid = backend_pid($s);
	# zklock makes the directory: one child created, then deleted
	$s->query_safe("SELECT zk_lock('tie')");
	my ($first) = zk_children($zk, '/zklock/tie');
	$s->query_safe('SELECT zk_unlock_all()');
	my ($seq) = $first =~ /-lock-(\d+)$/;
	# A sequential child is named after the count of the creates of
	# children before it (deletes do not count): the node made by name
	# below is the second, and our next create gets the suffix it has.
	my $other = sprintf('other-lock-%010d', $seq + 2);
	is(zkq({ auth => $auth }, $hosts, 'create', "/zklock/tie/$other"), 'created',
		'another client makes a node by name, with the suffix ours will get');
	my ($g, $why) = lose_read('ties', $s, 'zkl_session_stat', 'exists',
		"SELECT zk_lock('tie', '60s') > 0");
	skip $why, 7 unless $g;
	ok(poll_until(sub { zk_count($zk, '/zklock/tie') == 2 && is_waiting($node, $spid) }, 30),
		'the acquisition reconnects and waits behind the older of the tied nodes');
	my @kids = zk_children($zk, '/zklock/tie');
	note("first node $first, now: @kids");
	is(scalar(grep { /-lock-\Q@{[ sprintf('%010d', $seq + 2) ]}\E$/ } @kids), 2,
		'the two nodes share a sequence number');
	is(zkq({ auth => $auth }, $hosts, 'delete', "/zklock/tie/$other"), 'deleted',
		'the other client deletes its node');
	my ($out, $err) = finish_wait($s);
	$g->detach;
	is($err, '', 'without an error');
	is($out, 't', 'it gets the lock');
	is($s->query_safe('SELECT session_id FROM zk_session()'), $sid, 'in the same session');
	$s->query_safe('SELECT zk_unlock_all()');
	ok(poll_until(sub { zk_count($zk, '/zklock/tie') == 0 }, 30), 'nothing is left');
}

# Keep the proxy cut well past connect_timeout while $s's statement runs;
# true when the statement was still running then.
sub cut_past_connect_timeout
{
	my ($pid) = @_;
	my $t0 = time;
	$proxy->mode('cut');
	poll_until(sub { time - $t0 > 4 || !in_call($node, $pid) }, 30);
	return in_call($node, $pid);
}

# --- 3. a contender with no node yet
{
	my $s = session($node, via => $proxy, warm => 1,
		set => { 'zklock.connect_timeout' => '2000' });
	my $sid = $s->query_safe('SELECT session_id FROM zk_session()');
	my $spid = backend_pid($s);
	$s->query_safe("SELECT zk_lock('no-node'), zk_unlock('no-node')");
	$proxy->mode('swallow');
	start_wait($s, "SELECT zk_lock('no-node', '60s') > 0");
	ok(poll_until(sub { zk_count($zk, '/zklock/no-node') == 1 }, 30),
		'no node: the create is carried out, its reply swallowed');
	ok(cut_past_connect_timeout($spid),
		'no node: cut off past connect_timeout, it still waits for the reconnect');
	$proxy->mode('pass');
	my ($out, $err) = finish_wait($s);
	is($err, '', 'no node: without an error');
	is($out, 't', 'no node: it gets the lock');
	is($s->query_safe('SELECT session_id FROM zk_session()'), $sid, 'no node: in the same session');
	is(zk_count($zk, '/zklock/no-node'), 1, 'no node: one node, the one created before the cut');
	$s->query_safe('SELECT zk_unlock_all()');
	ok(poll_until(sub { zk_count($zk, '/zklock/no-node') == 0 }, 30), 'no node: nothing is left');
	quit_session($s);
}

# --- 4. an acquisition that starts while the connection is down
{
	my $s = session($node, via => $proxy, warm => 1,
		set => { 'zklock.connect_timeout' => '2000' });
	my $sid = $s->query_safe('SELECT session_id FROM zk_session()');
	my $spid = backend_pid($s);
	$proxy->mode('cut');
	ok(poll_until(sub { $s->query_safe('SELECT state FROM zk_session()') ne 'connected' }, 30),
		'down: the connection is cut');
	start_wait($s, "SELECT zk_lock('cut-first', '60s') > 0");
	ok(cut_past_connect_timeout($spid),
		'down: cut off past connect_timeout, it still waits for the reconnect');
	$proxy->mode('pass');
	my ($out, $err) = finish_wait($s);
	is($err, '', 'down: without an error');
	is($out, 't', 'down: it gets the lock');
	is($s->query_safe('SELECT session_id FROM zk_session()'), $sid, 'down: in the same session');
	$s->query_safe('SELECT zk_unlock_all()');
	ok(poll_until(sub { zk_count($zk, '/zklock/cut-first') == 0 }, 30), 'down: nothing is left');
	quit_session($s);
}

# --- 5. a drop between the owner's answer and the look at it
SKIP:
{
	my $s = session($node, via => $proxy, warm => 1);
	my $sid = $s->query_safe('SELECT session_id FROM zk_session()');
	$s->query_safe("SELECT zk_lock('blip'), zk_unlock('blip')");
	my $g = ZkGdb->attach(backend_pid($s), non_stop => 1);
	skip $ZkGdb::why, 9 unless $g;
	like($g->cmd('break zkl_session_op_owned') // '', qr/Breakpoint 1 at/,
		'blip: gdb will stop the backend when it looks at a node\'s owner');
	$proxy->mode('swallow');
	start_wait($s, "SELECT zk_lock('blip', '60s') > 0");
	ok(poll_until(sub { zk_count($zk, '/zklock/blip') == 1 }, 30),
		'blip: the create is carried out, its reply swallowed');
	my @before = zk_children($zk, '/zklock/blip');
	$proxy->mode('cut');
	$proxy->mode('pass');
	ok($g->wait_for(qr/hit Breakpoint 1\b/, 30),
		'blip: after the reconnect it finds the node and has its owner')
	  or diag($g->output);
	$proxy->mode('cut');
	ok( poll_until(
			sub { ($g->cmd('print (int) zkl_sess_state_connected_locked()') // '') =~ /= 0/ },
			30),
		'blip: the connection drops again before it looks');
	$g->detach;
	$proxy->mode('pass');
	my ($out, $err) = finish_wait($s);
	is($err, '', 'blip: without an error');
	is($out, 't', 'blip: it gets the lock');
	is($s->query_safe("SELECT node FROM zk_locks WHERE name = 'blip'"), "/zklock/blip/$before[0]",
		'blip: holding the node created before the first drop');
	is($s->query_safe('SELECT session_id FROM zk_session()'), $sid, 'blip: in the same session');
	$s->query_safe('SELECT zk_unlock_all()');
	ok(poll_until(sub { zk_count($zk, '/zklock/blip') == 0 }, 30), 'blip: nothing is left');
}

$proxy->stop;
finish(nodes => [$node], zk => $zk);
done_testing();
