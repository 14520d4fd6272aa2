# Copyright (c) zklock contributors
#
# A deadlock claim whose create's reply was lost may be this session's or
# another's: when the wait ends, it is deleted only if the ensemble says
# this session owns it.  Deleting another member's claim could let a late
# member of the cycle claim it again: a second 40P01.
#
# A and B wait for each other.  1. The cycle's claim is made by another
# client first (standing for the member that claimed it); A's own attempt
# (its multi, held at gdb's breakpoint while the claim is made) is answered
# "exists", and the answer is lost with A's connection (a proxy swallows
# it).  A reconnects, waits on, and is cancelled: the claim must stay.
# 2. The same, with A's own claim made and its answer lost: it is deleted
# when A's wait ends.
#
# Skips when gdb cannot attach to a backend here (no ptrace).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";

use PostgreSQL::Test::Utils;
use Test::More;
use ZkEnsemble;
use ZkGdb;
use ZkProxy;
use ZklockTest;

my $zk = ZkEnsemble->new(servers => 1);
my $hosts = $zk->connect_string;
my $node = zk_cluster('claim', $zk);
my $proxy = ZkProxy->new($zk->port(1));

# B searches first, 2.5 s into its wait (publishing it), and again only
# 7.5 s into it; A searches 3 s into its wait, finds the cycle and goes to
# claim it, before B looks again.  A's 30 s session timeout: its lease is
# proved every 5 s.
my $a = session($node, via => $proxy, warm => 1,
	set => { deadlock_timeout => '3s', 'zklock.session_timeout' => '30000' });
my $b = session($node, warm => 1, set => { deadlock_timeout => '2500ms' });
my $apid = backend_pid($a);
my $bpid = backend_pid($b);
my $g = ZkGdb->attach($apid, non_stop => 1);
plan skip_all => $ZkGdb::why unless $g;
$g->detach;

# One round: A holds x, B holds y; B waits for x, A for y; A's claim is
# held at gdb's breakpoint (another client makes it first when $other),
# sent while a proxy swallows the answer, then the connection is cut and
# comes back; A is cancelled.  The claim's path.
sub round
{
	my ($what, $other) = @_;
	my ($x, $y) = ("$what-x", "$what-y");
	$a->query_safe("SELECT zk_lock('$x')");
	$b->query_safe("SELECT zk_lock('$y')");
	my $g = ZkGdb->attach($apid, non_stop => 1);
	like($g->cmd('break *zkl_session_claim') // '', qr/reakpoint 1 at/,
		"$what: gdb will hold A when it goes to claim the cycle");
	start_wait($b, "SELECT zk_lock('$x')");
	ok(poll_until(sub { is_waiting($node, $bpid) }, 30), "$what: B waits for A");
	start_wait($a, "SELECT zk_lock('$y')");
	ok($g->wait_for(qr/hit Breakpoint 1(\.\d+)?, zkl_session_claim/, 30),
		"$what: A found the cycle and goes to claim it")
	  or diag($g->output);
	# (at the function's entry its first argument, the path, is in rdi)
	my ($claim) = ($g->cmd('x/s $rdi') // '') =~ /"([^"]+)"/;
	ok(defined $claim && $claim =~ m{^/zklock/\.zklock-deadlocks/[0-9a-f]{16}-2$},
		"$what: the claim's path")
	  or diag($g->output);
	is(zkq($hosts, 'create', $claim), 'created', "$what: another client makes the claim first")
	  if $other;
	$g->cmd('delete');
	my $multis = $proxy->requests('multi');
	$proxy->mode('swallow');
	$g->cmd('continue -a &');
	ok(poll_until(sub { $proxy->requests('multi') > $multis }, 30),
		"$what: A's claim reaches the server; the answer is swallowed");
	$proxy->mode('cut');
	ok( poll_until(sub { ($g->cmd('print zkl_state_state', 10) // '') =~ /= (?!3\b)-?\d+/ }, 30),
		"$what: and lost with A's connection")
	  or diag($g->output);
	$proxy->mode('pass');
	ok(poll_until(sub { ($g->cmd('print zkl_state_state', 10) // '') =~ /= 3\b/ }, 30),
		"$what: A reconnects")
	  or diag($g->output);
	$g->detach;
	ok(poll_until(sub { is_waiting($node, $apid) }, 30), "$what: A waits on");
	$node->safe_psql('postgres', "SELECT pg_cancel_backend($apid)");
	my ($out, $err) = finish_wait($a);
	like($err, qr/canceling statement due to user request/, "$what: A is cancelled");
	$a->query_safe("SELECT zk_unlock('$x')");
	($out, $err) = finish_wait($b);
	ok($out > 0 && $err eq '', "$what: B gets the lock A released");
	$b->query_safe("SELECT zk_unlock_all()");
	return $claim;
}

# --- 1. the claim is another's: "exists", answer lost
my $claim = round('theirs', 1);
# A barrier: A's release waits for its delete, queued after its clean-ups.
is($a->query_safe("SELECT zk_lock('barrier') > 0, zk_unlock('barrier')"), 't|t',
	'theirs: A takes and releases another lock');
is(zkq($hosts, 'ls', '/zklock/.zklock-deadlocks'), (split m{/}, $claim)[-1],
	'theirs: the other client\'s claim is still there');
is(zkq($hosts, 'delete', $claim), 'deleted', 'theirs: the other client deletes it');

# --- 2. the claim is A's: made, answer lost; deleted when the wait ends
$claim = round('ours', 0);
ok(poll_until(sub { zkq($hosts, 'ls', '/zklock/.zklock-deadlocks') eq '' }, 30),
	'ours: A\'s claim is deleted');
ok(poll_until(sub { zkq($hosts, 'tree', '/zklock') !~ /_c_/ }, 30), 'no lock node is left');

finish(nodes => [$node], zk => $zk);
$proxy->stop;
done_testing();
