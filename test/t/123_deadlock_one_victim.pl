# Copyright (c) zklock contributors
#
# A deadlock of three has one victim, also when the victim's connection is
# lost between its claim and its clean-ups.  V holds a and waits for b, L1
# holds b and waits for c, L2 holds c and waits for a.  gdb holds each
# member where it goes to claim the cycle; V alone goes on: it claims,
# gets 40P01, and its connection is cut before its clean-ups (its waiting
# node's delete, then its wait entry's and its claim's) leave.  When it is
# back, gdb holds the first delete the backend sends (the waiting node's)
# while V's main thread releases another lock: the claim must not be
# deleted ahead of the node.  Then L1 and L2 go on to claim: the claim is
# still there, so neither is a second victim.  Once V's node has gone and
# V lets a go, L2 and then L1 get their locks.
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
my $node = zk_cluster('victim', $zk, session_timeout => 30000);
my %proxy = map { $_ => ZkProxy->new($zk->port(1)) } qw(v l1 l2);

# Every member searches 500 ms into its wait (publishing it), then after
# 1, 2, 4 and 8 s more.  V's releases do not wait for their deletes.
my %s = (
	v => session($node, via => $proxy{v}, warm => 1,
		set => { deadlock_timeout => '500ms', 'zklock.synchronous_release' => 'off' }),
	l1 => session($node, via => $proxy{l1}, warm => 1, set => { deadlock_timeout => '500ms' }),
	l2 => session($node, via => $proxy{l2}, warm => 1, set => { deadlock_timeout => '500ms' }));
my %pid = map { $_ => backend_pid($s{$_}) } keys %s;

my %g;
for my $m (qw(v l1 l2))
{
	$g{$m} = ZkGdb->attach($pid{$m}, non_stop => 1);
	plan skip_all => $ZkGdb::why unless $g{$m};
}

$s{v}->query_safe("SELECT zk_lock('a'), zk_lock('v-other')");
$s{l1}->query_safe("SELECT zk_lock('b')");
$s{l2}->query_safe("SELECT zk_lock('c')");

for my $m (qw(v l1 l2))
{
	like($g{$m}->cmd('break *zkl_session_claim') // '', qr/reakpoint 1 at/,
		"gdb will hold \U$m\E when it goes to claim a cycle");
}
like($g{v}->cmd('break *zkl_engine_give_up') // '', qr/reakpoint 2 at/,
	'and V when its wait ends');

# The cycle, closed by L2.  Each member finds it at a search of its own.
my %wants = (v => 'b', l1 => 'c', l2 => 'a');
for my $m (qw(v l1 l2))
{
	start_wait($s{$m}, "SELECT zk_lock('$wants{$m}')");
	ok(poll_until(sub { started($node, $pid{$m}, "SELECT zk_lock('$wants{$m}')") }, 30),
		"\U$m\E waits for $wants{$m}");
	ok(poll_until(sub { zk_count($zk, "/zklock/$wants{$m}") == 2 }, 30),
		"\U$m\E queues behind the holder of $wants{$m}");
}
my %claim;
for my $m (qw(v l1 l2))
{
	ok($g{$m}->wait_for(qr/hit Breakpoint 1(\.\d+)?, zkl_session_claim/, 60),
		"\U$m\E finds the cycle and goes to claim it")
	  or diag($g{$m}->output);
	# (at the function's entry its first argument, the path, is in rdi)
	($claim{$m}) = ($g{$m}->cmd('x/s $rdi') // '') =~ /"([^"]+)"/;
}
ok(defined $claim{v} && $claim{v} =~ m{^/zklock/\.zklock-deadlocks/[0-9a-f]{16}-3$},
	'the claim names a cycle of three')
  or diag($claim{v} // 'no path');
is_deeply([ $claim{l1}, $claim{l2} ], [ $claim{v}, $claim{v} ],
	'all three members would claim the same cycle');

# V claims and is the victim; its connection goes before its clean-ups.
$g{v}->cmd('delete 1');
$g{v}->cmd('continue -a &');
ok($g{v}->wait_for(qr/hit Breakpoint 2(\.\d+)?, zkl_engine_give_up/, 30),
	'V claims the cycle, and its wait ends')
  or diag($g{v}->output);
is(zkq($hosts, 'ls', '/zklock/.zklock-deadlocks'), (split m{/}, $claim{v})[-1],
	'V\'s claim is made');
$proxy{v}->mode('cut');
ok(poll_until(sub { ($g{v}->cmd('print zkl_state_state', 10) // '') =~ /= (?!3\b)-?\d+/ }, 30),
	'V\'s connection is lost before its clean-ups leave')
  or diag($g{v}->output);
$g{v}->cmd('delete');
$g{v}->cmd('continue -a &');
my ($out, $err) = finish_wait($s{v});
like($err, qr/deadlock detected/, 'V gets 40P01');
is(zk_count($zk, '/zklock/b'), 2, 'V\'s waiting node is still there');

# Back: the first delete sent (the waiting node's) is held inside the
# send; V's main thread releases another lock meanwhile.
like($g{v}->cmd('tbreak *zoo_adelete') // '', qr/reakpoint \d+ at/,
	'gdb will hold the first delete V sends');
my $deletes = $proxy{v}->requests('delete');
$proxy{v}->mode('pass');
ok($g{v}->wait_for(qr/hit Temporary breakpoint \d+, (0x\S+ in )?zoo_adelete/, 30),
	'V is back, and its first delete is held')
  or diag($g{v}->output);
is($s{v}->query_safe("SELECT zk_unlock('v-other')"), 't', 'V releases another lock');
is($proxy{v}->requests('delete'), $deletes, 'no delete has left V meanwhile');
is(zk_count($zk, '/zklock/b'), 2, 'V\'s waiting node is still there');
is(zkq($hosts, 'ls', '/zklock/.zklock-deadlocks'), (split m{/}, $claim{v})[-1],
	'so is the claim: it goes after the node');

# L1 and L2 go on to claim the cycle: taken, by V's session.
for my $m (qw(l1 l2))
{
	my $exists = $proxy{$m}->requests('exists');
	$g{$m}->cmd('delete');
	$g{$m}->cmd('continue -a &');
	ok( poll_until(
			sub { $proxy{$m}->requests('exists') > $exists || !in_call($node, $pid{$m}) }, 30)
		  && in_call($node, $pid{$m}),
		"\U$m\E finds the claim taken, asks whose it is and waits on: no second victim");
}
$g{$_}->detach for qw(l1 l2);

# V's clean-ups go; the cycle is broken.
$g{v}->detach;
ok(poll_until(sub { zk_count($zk, '/zklock/b') == 1 }, 30), 'V\'s waiting node goes');
ok(poll_until(sub { zkq($hosts, 'ls', '/zklock/.zklock-deadlocks') eq '' }, 30),
	'then its claim');
# Each of L1 and L2 searches again (listings of its own): no cycle now.
my %lists = map { $_ => $proxy{$_}->requests('list') } qw(l1 l2);
for my $m (qw(l1 l2))
{
	ok( poll_until(sub { $proxy{$m}->requests('list') > $lists{$m} }, 30)
		  && in_call($node, $pid{$m}),
		"\U$m\E searches again and still waits");
}

is($s{v}->query("SELECT zk_unlock('a')"), 't', 'V lets a go');
($out, $err) = finish_wait($s{l2});
ok($out > 0 && $err eq '', 'L2 gets a');
is($s{l2}->query("SELECT zk_unlock('a') AND zk_unlock('c')"), 't', 'L2 lets a and c go');
($out, $err) = finish_wait($s{l1});
ok($out > 0 && $err eq '', 'L1 gets c');
$s{$_}->query('SELECT zk_unlock_all()') for qw(l1 v);

ok(poll_until(sub { zkq($hosts, 'tree', '/zklock') !~ /_c_/ }, 30), 'no lock node is left');
is(zkq($hosts, 'ls', '/zklock/.zklock-waits'), '', 'no wait entry is left');

finish(nodes => [$node], zk => $zk);
$_->stop for values %proxy;
done_testing();
