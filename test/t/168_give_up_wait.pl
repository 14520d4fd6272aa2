# Copyright (c) zklock contributors
#
# Give-ups and clean-ups finish before the error does.
#
# - A cancelled waiter (a lock, a set, a semaphore) waits, bounded like a
#   release, for the ensemble to answer its given-up node's delete before
#   the error reaches the client: when the client hears of the cancel, no
#   node of the acquisition is left.  The test's proxy holds the backend's
#   requests on their way to the server, so that the delete lands seconds
#   after it was sent; a timed-out wait (zk_lock with a timeout) likewise.
# - A delete answered with ZSESSIONMOVED (the session moved to another
#   server, which did not carry it out) is sent again, as after a
#   connection loss: gdb makes the first delete of a release answer so
#   without sending it, and zk_unlock must still return with the node gone.
# - A cancel while the connection is down: the give-up's wait ends as soon
#   as the library sees the connection down (here it is refused: at once;
#   a connection gone silent, within two thirds of the session timeout),
#   with a WARNING, not when the session timeout (30 s) has passed; the
#   delete goes once the connection is back.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";

use File::Basename qw(dirname);
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use ZkEnsemble;
use ZkGdb;
use ZkProxy;
use ZklockTest;

my $zk = ZkEnsemble->new(servers => 1);
my $node = zk_cluster('giveupwait', $zk, session_timeout => 30000);
my $proxy = ZkProxy->new($zk->port(1));
# Sessions through the proxy, opened before the test's first call.  No
# deadlock search: its reads would wait out the proxy's lag too.
my %lagged = (via => $proxy, warm => 1, set => { deadlock_timeout => '10min' });

# How many nodes each of @dirs holds, read in one look at the tree.
sub counts
{
	my (@dirs) = @_;
	my @all = split /\n/,
	  zkq($zk, 'tree', '/zklock');
	return join ',', map {
		my $d = $_;
		scalar grep { m{^\Q$d\E/[^/]+$} } @all
	} @dirs;
}

my $h = session($node);
$h->query_safe(
	"SELECT zk_lock('gw'), zk_lock('gw2'), zk_semaphore('gs', 1), zk_lock('gt')");

# Start $sql on a backend behind the proxy, wait until its nodes are there
# ($queued: the counts of @dirs then), hold its requests 4 s on the way,
# end its wait with $end (a cancel, or its own timeout), and check the
# counts of @dirs ($left) at the moment the error comes.
sub give_up_late
{
	my ($what, $sql, $end, $dirs, $queued, $left, $error) = @_;
	my $w = session($node, %lagged);
	my $pid = backend_pid($w);
	start_wait($w, $sql);
	ok(poll_until(sub { is_waiting($node, $pid) && counts(@$dirs) eq $queued }, 30),
		"$what: queued ($queued)") or diag(counts(@$dirs));
	$proxy->mode('lag:4000');
	my $t0 = time;
	$node->safe_psql('postgres', "SELECT pg_cancel_backend($pid)") if $end eq 'cancel';
	my ($out, $err) = finish_wait($w);
	my $at_error = counts(@$dirs);
	my $took = time - $t0;
	like($err, $error, "$what: the client gets the error");
	is($at_error, $left, "$what: when the error comes, no node of the acquisition is left");
	note("$what: the error came after $took s");
	$proxy->mode('pass');
	ok(poll_until(sub { counts(@$dirs) eq $left }, 30), "$what: and none later");
}

give_up_late('cancelled lock', "SELECT zk_lock('gw')", 'cancel',
	['/zklock/gw'], '2', '1', qr/canceling statement due to user request/);
give_up_late('cancelled set', "SELECT zk_lock(ARRAY['gw', 'gw2'])", 'cancel',
	[ '/zklock/gw', '/zklock/gw2' ], '2,1', '1,1',
	qr/canceling statement due to user request/);
give_up_late('cancelled semaphore', "SELECT zk_semaphore('gs', 1)", 'cancel',
	[ '/zklock/gs/leases', '/zklock/gs/locks' ], '2,1', '1,0',
	qr/canceling statement due to user request/);
give_up_late('timed-out lock', "SELECT zk_lock('gt', '3s')", 'timeout',
	['/zklock/gt'], '2', '1', qr/could not obtain ZooKeeper lock "gt"/);

# --- a delete answered with ZSESSIONMOVED is sent again
my $m = session($node);
my $mpid = backend_pid($m);
$m->query_safe("SELECT zk_lock('moved')");
is(zk_count($zk, '/zklock/moved'), 1, 'a lock to release');
SKIP:
{
	my $g = ZkGdb->attach($mpid);
	skip $ZkGdb::why, 3 unless $g;
	# The first delete sent is answered ZSESSIONMOVED (-118) on the spot,
	# by its own completion, and not sent.
	like(
		$g->break_run('tbreak *zoo_adelete', "silent\n"
			  . "call session_cleanup_done(-118, (void *) \$r8)\n"
			  . "return (int) 0\ncontinue"),
		qr/Temporary breakpoint 1 at/,
		'gdb answers the first delete with ZSESSIONMOVED');
	$g->cmd('continue &');
	is($m->query_safe("SELECT zk_unlock('moved')"), 't', 'zk_unlock returns true');
	is(zk_count($zk, '/zklock/moved'), 0,
		'the delete was sent again: the node is gone when zk_unlock returns');
	$g->detach;
}

# --- a cancel while the connection is down
{
	my $w = session($node, via => $proxy, warm => 1);
	my $wpid = backend_pid($w);
	start_wait($w, "SELECT zk_lock('gw')");
	ok(poll_until(sub { is_waiting($node, $wpid) && zk_count($zk, '/zklock/gw') == 2 }, 30),
		'cut off: the waiter queues');
	$proxy->mode('cut');
	my $t0 = time;
	$node->safe_psql('postgres', "SELECT pg_cancel_backend($wpid)");
	my ($out, $err) = finish_wait($w);
	my $took = time - $t0;
	like($err, qr/ERROR:  canceling statement due to user request/, 'cut off: the waiter is cancelled');
	like($err, qr/WARNING:  lost connection to ZooKeeper before it confirmed the release/,
		'cut off: with a warning that its release is not confirmed');
	cmp_ok($took, '<', 5, 'cut off: within 5 s of the cancel, not the 30 s session timeout')
	  or diag("took $took s");
	$proxy->mode('pass');
	ok(poll_until(sub { zk_count($zk, '/zklock/gw') == 1 }, 30),
		'cut off: its node is deleted once the connection is back');
	quit_session($w);
}

$proxy->stop;
finish(nodes => [$node], zk => $zk);
done_testing();
