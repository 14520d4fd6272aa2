# Copyright (c) zklock contributors
#
# Connection faults of one backend, through a TCP proxy the test controls
# (fault tests 6 and 7): a create carried out by the server whose reply is
# lost to a connection drop is found again and adopted, never duplicated,
# never orphaned; a waiter cancelled while ZooKeeper is unreachable leaves
# no node once the connection is back, and the next waiter gets the lock; a
# waiter cut off until its timeout gets a connection error, not false.
# The replies to a lock directory's creates, lost the same way, do not end
# the acquisition either (gdb holds the backend between its first create
# and the directory's).

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

my $zk = ZkEnsemble->new(servers => 3);
my $node = zk_cluster('faults', $zk, session_timeout => 20000);
my $proxy = ZkProxy->new($zk->port(1));

# --- 6. the reply to a create is lost: the node is adopted, not created twice
my $h = session($node);
$h->query_safe("SELECT zk_lock('reply')");
my $x = session($node, via => $proxy, warm => 1);
my $xpid = backend_pid($x);
is(scalar(my @c = zk_servers_of($zk, $xpid)), 0, 'backend talks to ZooKeeper only through the proxy');

$proxy->mode('swallow');
start_wait($x, "SELECT zk_lock('reply')");
ok(poll_until(sub { zk_count($zk, '/zklock/reply') == 2 }, 30),
	'the server carried out the create whose reply is being swallowed');
my @before = zk_children($zk, '/zklock/reply');
$proxy->mode('cut');
ok(poll_until(sub { is_waiting($node, $xpid) }), 'backend waits through the connection loss');
$proxy->mode('pass');
ok(poll_until(sub { zk_count($zk, '/zklock/reply') == 2 && is_waiting($node, $xpid) }, 30),
	'after the reconnect it waits in the queue');
is_deeply([ zk_children($zk, '/zklock/reply') ], \@before,
	'same two nodes: no second create, the lost-reply node is kept');
$h->query_safe("SELECT zk_unlock('reply')");
ok(poll_until(sub { !is_waiting($node, $xpid) }, 30), 'it gets the lock when the holder releases');
my ($out, $err) = finish_wait($x);
is($err, '', 'without an error');
my $xnode = $x->query_safe("SELECT node FROM zk_locks WHERE name = 'reply'");
ok((grep { $xnode eq "/zklock/reply/$_" } @before), 'holding the node created before the drop');
is(zk_count($zk, '/zklock/reply'), 1, 'one node');
$x->query_safe("SELECT zk_unlock('reply')");
ok(poll_until(sub { zk_count($zk, '/zklock/reply') == 0 }, 30), 'no orphan after the release');

# --- the replies to a lock directory's creates are lost: the acquisition
# reconnects and goes on in the same session, as after any other lost
# reply (creating a directory again is harmless); a single lock, and a set
# whose directories are all missing
for my $case ([ 'a lock', "zk_lock('dir-reply')", ['dir-reply'] ],
	[ 'a set', "array_to_string(zk_lock(ARRAY['dir-set-a', 'dir-set-b']), ',')",
	  [ 'dir-set-a', 'dir-set-b' ] ])
{
	my ($what, $call, $dirs) = @$case;
  SKIP:
	{
		my $d = session($node, via => $proxy, warm => 1);
		my $dpid = backend_pid($d);
		my $dsid = $d->query_safe('SELECT session_id FROM zk_session()');
		my $g = ZkGdb->attach($dpid, non_stop => 1);
		skip $ZkGdb::why, 8 unless $g;
		like($g->cmd('break zkl_session_create_dir') // '', qr/Breakpoint 1 at/,
			"$what: gdb stops the backend before it creates a lock directory");
		start_wait($d, "SELECT $call");
		ok($g->wait_for(qr/hit Breakpoint 1\b/, 30), "$what: its first create found no directory");
		$proxy->mode('swallow');
		$g->cmd('delete');
		$g->cmd('continue -a &');
		ok( poll_until(
				sub {
					my %have = map { $_ => 1 } zk_children($zk, '/zklock');
					!grep { !$have{$_} } @$dirs;
				},
				30),
			"$what: the server created the directories, their replies swallowed");
		$proxy->mode('cut');
		$proxy->mode('pass');
		my ($dout, $derr) = finish_wait($d);
		$g->detach;
		is($derr, '', "$what: the acquisition reconnects and goes on, without an error");
		like($dout, qr/^\d+(,\d+)*$/, "$what: it returns its tokens");
		is($d->query_safe('SELECT session_id FROM zk_session()'), $dsid, "$what: in the same session");
		is(join(' ', map { zk_count($zk, "/zklock/$_") } @$dirs), join(' ', map { 1 } @$dirs),
			"$what: one node in each directory, its own");
		$d->query_safe('SELECT zk_unlock_all()');
		ok(poll_until(sub { !grep { zk_count($zk, "/zklock/$_") } @$dirs }, 30),
			"$what: and it releases them");
	}
}

# --- 7. cancel a waiter while ZooKeeper is unreachable for it
my $h2 = session($node);
$h2->query_safe("SELECT zk_lock('unreach')");
my $w = session($node, via => $proxy);
my $wpid = backend_pid($w);
# Without synchronous_release the cancel does not wait for its give-up
# delete (test/t/168_give_up_wait.pl tests that wait): here the delete
# must go after the reconnect, with the backend idle.
$w->query_safe('SET zklock.synchronous_release = off');
start_wait($w, "SELECT zk_lock('unreach')");
ok(poll_until(sub { is_waiting($node, $wpid) && zk_count($zk, '/zklock/unreach') == 2 }),
	'waiter behind the proxy is queued');
my $v = session($node);
my $vpid = backend_pid($v);
start_wait($v, "SELECT zk_lock('unreach')");
ok(poll_until(sub { is_waiting($node, $vpid) && zk_count($zk, '/zklock/unreach') == 3 }),
	'a second waiter queues behind it');

$proxy->mode('cut');
$node->safe_psql('postgres', "SELECT pg_cancel_backend($wpid)");
($out, $err) = finish_wait($w);
like($err, qr/canceling statement due to user request/, 'the cut-off waiter is cancelled at once');
is(zk_count($zk, '/zklock/unreach'), 3, 'its node stays while ZooKeeper is unreachable');
my ($h2node) = $h2->query_safe("SELECT node FROM zk_locks WHERE name = 'unreach'");
$proxy->mode('pass');
ok(poll_until(sub { zk_count($zk, '/zklock/unreach') == 2 }, 30),
	'its node is deleted once the connection is back, while the backend is idle');
ok(poll_until(sub { ($zk->watches_by_path->{$h2node} // 0) == 2 }, 30),
	'and its watch is removed: only the next waiter watches the holder (besides the holder itself)')
  or diag(explain $zk->watches_by_path);
$h2->query_safe("SELECT zk_unlock('unreach')");
ok(poll_until(sub { !is_waiting($node, $vpid) }, 30), 'the next waiter gets the lock');
($out, $err) = finish_wait($v);
ok($out > 0 && $err eq '', 'with a token');

# --- a wait cut off from the ensemble until its timeout ends with a
# connection error (08006), never with "not granted": nobody holds the lock
# by then, and the waiter cannot know.
my $h3 = session($node);
$h3->query_safe("SELECT zk_lock('cutoff')");
my $c = session($node, via => $proxy);
my $cpid = backend_pid($c);
$c->query_safe('\\set VERBOSITY verbose');
start_wait($c, "SELECT zk_try_lock('cutoff', '4s')");
ok(poll_until(sub { is_waiting($node, $cpid) && zk_count($zk, '/zklock/cutoff') == 2 }),
	'a waiter behind the proxy is queued behind a holder');
$proxy->mode('cut');
$h3->query_safe("SELECT zk_unlock('cutoff')");
($out, $err) = finish_wait($c);
like($err, qr/ERROR:  08006: lost connection to ZooKeeper while waiting for lock/,
	'cut off until its timeout: a connection error, not false')
  or diag("out: $out");
$proxy->mode('pass');
ok(poll_until(sub { zk_count($zk, '/zklock/cutoff') == 0 }, 30),
	'its node is deleted once the connection is back');
is($c->query_safe("SELECT zk_try_lock('cutoff')"), 't', 'and the lock is free for it');

# The client library's complaints about the cut went to the server log,
# from the main thread, and never to the client.
like(slurp_file($node->logfile), qr/LOG:  zookeeper client: .*ZOO_(ERROR|WARN)@/,
	'client library messages reach the server log');
unlike($err . $w->{stderr}, qr/zookeeper client/, 'and not the client');

# --- a cancel while the watch request is under way (its reply held back by
# the proxy): the library registers the watch only when the reply arrives,
# after the give-up; the watch must still go, and the holder's release must
# not wake the cancelled backend.
my $h4 = session($node);
$h4->query_safe("SELECT zk_lock('cancel-watch')");
my ($hnode) = zk_children($zk, '/zklock/cancel-watch');
$v = session($node, via => $proxy, warm => 1);
$vpid = backend_pid($v);
my $notes = $v->query_safe('SELECT notifications FROM zk_session()');
my $gets = $proxy->requests('get');
$proxy->mode('delay:1500');
start_wait($v, "SELECT zk_lock('cancel-watch')");
# One get: the watch on the holder's node (its own node is covered by the
# child watch of its listing).
ok(poll_until(sub { $proxy->requests('get') > $gets }, 30),
	'the watch request is sent, its reply held back');
$node->safe_psql('postgres', "SELECT pg_cancel_backend($vpid)");
($out, $err) = finish_wait($v);
like($err, qr/canceling statement due to user request/, 'the waiter is cancelled');
$proxy->mode('pass');
ok(poll_until(sub { zk_count($zk, '/zklock/cancel-watch') == 1 }, 30),
	'its node is gone');
my $watched = sub { ($zk->watches_by_path->{"/zklock/cancel-watch/$hnode"} // 0) };
ok(poll_until(sub { $watched->() == 1 }, 30),
	'no watch but the holder\'s own is left on its node once the late reply has come')
  or diag('watches: ' . $watched->());
# The client library keeps its own table of watches and sets every one of
# them again on a reconnect (SetWatches): a watch that reached that table
# after the give-up, and was dropped only on the server, comes back here.
my $vstate = sub { $v->query_safe('SELECT state FROM zk_session()') };
my $vsid = $v->query_safe('SELECT session_id FROM zk_session()');
$proxy->mode('cut');
ok(poll_until(sub { $vstate->() ne 'connected' }, 30),
	'the cancelled backend\'s connection is cut');
$proxy->mode('pass');
ok(poll_until(sub { $vstate->() eq 'connected' }, 30), 'and comes back');
is($v->query_safe('SELECT session_id FROM zk_session()'), $vsid, 'in the same session');
# A round trip after the reconnect: SetWatches, sent first, has been served.
$v->query_safe("SELECT zk_try_lock('warm-up'), zk_unlock('warm-up')");
is($watched->(), 1, 'the reconnect sets no watch on the holder\'s node again (the holder\'s own stays)');
$h4->query_safe("SELECT zk_unlock('cancel-watch')");
ok(poll_until(sub { zk_count($zk, '/zklock/cancel-watch') == 0 }, 30), 'the holder releases');
is($v->query_safe('SELECT notifications FROM zk_session()'), $notes,
	'the release woke nobody in the cancelled backend');
is($v->query_safe("SELECT zk_try_lock('cancel-watch')"), 't',
	'and its session works on');

# --- exit while the ensemble answers nothing (replies swallowed, the
# connection up), with the COMMIT's release sent and unanswered: the
# backend waits at most its 2 s drain, not its 20 s session timeout, and
# its locks go when the ensemble ends the session.
my $q = waiter($node);
$q->query_safe("SET zklock.hosts = '127.0.0.1:" . $proxy->port . "'");
my $qpid = backend_pid($q);
$q->query_safe("SELECT zk_lock('exit-swallow')");
$q->query_safe("BEGIN");
$q->query_safe("SELECT zk_xact_lock('exit-swallow-xact')");
my $deletes = $proxy->requests('delete');
$proxy->mode('swallow');
$q->query_safe("COMMIT");
ok(poll_until(sub { $proxy->requests('delete') > $deletes }, 30),
	'the COMMIT\'s release is sent, its answer swallowed');
my $t0 = time;
$q->quit;
ok(poll_until(sub { !kill(0, $qpid) }, 30), 'a backend whose ensemble answers nothing exits');
my $took = time - $t0;
cmp_ok($took, '<', 10, 'well inside its 20 s session timeout') or diag("took $took s");
note("exit took $took s");
$proxy->mode('pass');
ok( poll_until(
		sub {
			zk_count($zk, '/zklock/exit-swallow') == 0
			  && zk_count($zk, '/zklock/exit-swallow-xact') == 0;
		},
		40),
	'its locks are gone once the ensemble is heard again');

$proxy->stop;
finish(nodes => [$node], zk => $zk);
done_testing();
