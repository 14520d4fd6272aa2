# Copyright (c) zklock contributors
#
# Windows that no fault from outside opens on time, opened with a
# debugger: gdb, attached to one backend, holds it at the edge of the
# window while the fault happens, then lets it go on.
#
# - A cancel while the watch request is under way: every request object is
#   freed once the late answer has come (gdb counts them).
# - An expiry between the answer to the watch request and the start of the
#   wait: the wait must see it and fail, not wait for ever.  gdb in
#   non-stop mode holds only the main thread; the client library's threads
#   hear of the expiry meanwhile.
# - An expiry while a request is being made: after the client library
#   checked that the session lives, before it recorded the request.  The
#   library's IO thread has answered every request it knew of with the
#   expiry and ended; the stock library never answers one recorded after
#   that, and the backend would wait for it until statement_timeout (C
#   client patch 0009 refuses it).
# - The connection drops while the first call opens the session, just as
#   the main thread catches up with the library's state: the drop must
#   stay recorded (the call fails within zklock.connect_timeout, and
#   zk_session() does not say connected).
# - The first memory allocation after the lock node is made fails: the
#   backend must never keep a node it has not recorded (the node goes with
#   the error, or the lock set holds it and releases it as usual).
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
# The sessions' timeout outlasts gdb's attach on a loaded machine (a second
# or more: every thread stops), so a session expires only when the test
# cuts it off.
my $node = zk_cluster('windows', $zk, session_timeout => 6000);
my $proxy = ZkProxy->new($zk->port(1));
# Sessions with their ZooKeeper session open before the test's first call,
# and a wait that would never end bounded: its failure, not a hang.
my %bounded = (warm => 1, set => { statement_timeout => '20s' });

# With gdb ($g, non-stop) holding the main thread of $s: cut $s off until
# the ensemble expired its session (the children of $dir drop to $left),
# let it reconnect until the client library heard of the expiry, then let
# the main thread go on; what $s's statement printed (finish_wait).
sub expire_held
{
	my ($g, $s, $dir, $left) = @_;
	$proxy->mode('cut');
	ok(poll_until(sub { zk_count($zk, $dir) == $left }, 30),
		'cut off, its session expires on the ensemble: its node is gone');
	$proxy->mode('pass');
	ok( poll_until(
			sub { ($g->cmd('print zkl_state_state', 10) // '') =~ /= -112\b/ }, 30),
		'the client library has heard the session expired, the main thread still held'
	) or diag($g->output);
	$g->cmd('delete');
	$g->cmd('continue -a &');
	$g->detach;
	return finish_wait($s);
}

# --- a cancel while the watch request is under way (its answer
# held back by the proxy).  Every request object must be freed, the
# abandoned watch's once its late answer came; gdb counts the objects the
# session makes and frees meanwhile.
my $h = session($node, %bounded);
$h->query_safe("SELECT zk_lock('cancel-watch')");
my ($hnode) = zk_children($zk, '/zklock/cancel-watch');
# A session timeout that outlasts gdb's pauses and the held-back answers.
my $v = session($node, via => $proxy, warm => 1,
	set => { statement_timeout => '20s', 'zklock.session_timeout' => '20s' });
my $vpid = backend_pid($v);
# The cancel must return while the watch's answer is still out: without
# synchronous_release it does not wait for its give-up delete, whose answer
# comes after the watch's (test/t/168_give_up_wait.pl tests that wait).
$v->query_safe('SET zklock.synchronous_release = off');
my $gv = ZkGdb->attach($vpid);
plan skip_all => $ZkGdb::why unless $gv;

$gv->cmd('set $made = 0');
$gv->cmd('set $freed = 0');
like($gv->break_run('break session_new_op', "silent\nset \$made = \$made + 1\ncontinue"),
	qr/Breakpoint 1 at/, 'gdb counts the request objects made');
like($gv->break_run('break session_free_op', "silent\nset \$freed = \$freed + 1\ncontinue"),
	qr/Breakpoint 2 at/, 'and freed');
$gv->cmd('continue &');
# The two counts, or () when gdb did not answer with both.
my $counts = sub {
	my ($made) = ($gv->cmd('print $made', 10) // '') =~ /= (\d+)/;
	my ($freed) = ($gv->cmd('print $freed', 10) // '') =~ /= (\d+)/;
	return defined $made && defined $freed ? ($made, $freed) : ();
};
my $gets = $proxy->requests('get');
$proxy->mode('delay:2500');
start_wait($v, "SELECT zk_lock('cancel-watch')");
# One get: the watch on the holder's node (its own node is covered by the
# child watch of its listing).
ok(poll_until(sub { $proxy->requests('get') > $gets }, 30),
	'the watch request is sent, its answer held back') ;
$node->safe_psql('postgres', "SELECT pg_cancel_backend($vpid)");
my ($out, $err) = finish_wait($v);
like($err, qr/canceling statement due to user request/, 'the waiter is cancelled');
my @n = $counts->();
ok(@n && $n[0] > $n[1],
	'a request object is still out (the watch\'s answer is held back)');
$proxy->mode('pass');
ok( poll_until(
		sub {
			zk_count($zk, '/zklock/cancel-watch') == 1
			  && ($zk->watches_by_path->{"/zklock/cancel-watch/$hnode"} // 0) == 1;
		},
		30),
	'the late answer has come: the waiter\'s node and watch are gone (the holder\'s own stays)');
ok( poll_until(
		sub {
			my @c = $counts->();
			return @c && $c[0] > 0 && $c[0] == $c[1];
		},
		15),
	'every request object made is freed')
  or diag('made, freed: ' . join(', ', $counts->()));
$gv->detach;
$h->query_safe("SELECT zk_unlock('cancel-watch')");
is($v->query_safe("SELECT zk_try_lock('cancel-watch')"), 't', 'the session works on');
$v->query_safe("SELECT zk_unlock('cancel-watch')");

# --- the session expires after the watch is answered, before
# the wait has begun.
$h->query_safe("SELECT zk_lock('expiry')");
my $w = session($node, %bounded, via => $proxy);
my $wpid = backend_pid($w);

my $g = ZkGdb->attach($wpid, non_stop => 1);
ok($g, 'gdb attached to the next waiter');

like($g->cmd('break zkl_session_await_watch') // '', qr/Breakpoint 1 at/,
	'a breakpoint where the wait for a watch begins');
start_wait($w, "SELECT zk_lock('expiry')");
ok($g->wait_for(qr/hit Breakpoint 1\b/, 30),
	'the waiter\'s main thread stops there, its watch request answered')
  or diag($g->output);
is(zk_count($zk, '/zklock/expiry'), 2, 'the waiter is queued behind the holder');
($out, $err) = expire_held($g, $w, '/zklock/expiry', 1);
like($err, qr{ERROR:  ZooKeeper session expired while acquiring lock "expiry"},
	'the wait sees the expiry and fails') or diag("out: $out");
unlike($err, qr/statement timeout/, 'at once, not at statement_timeout');
is($w->query_safe("SELECT count(*) FROM zk_locks WHERE name = 'expiry'"), '0',
	'and records no lock');
$h->query_safe("SELECT zk_unlock('expiry')");

# --- an expiry while a request is being made.  gdb holds the main thread
# in serialize_RequestHeader: the create's request is being written, the
# library has checked that the session lives, and the request is not
# recorded yet.
my $r = session($node, %bounded, via => $proxy);
my $rpid = backend_pid($r);
$r->query_safe("SELECT zk_lock('race-hold')");
my $gr = ZkGdb->attach($rpid, non_stop => 1);
ok($gr, 'gdb attached to a backend with a session');
like($gr->cmd('break serialize_RequestHeader thread 1') // '', qr/Breakpoint 1 at/,
	'a breakpoint where the main thread writes a request');
$gr->cmd('continue -a &');
start_wait($r, "SELECT zk_lock('race')");
ok($gr->wait_for(qr/hit Breakpoint 1\b/, 30),
	'the main thread stops there, making the create of zk_lock(\'race\')')
  or diag($gr->output);
is(zk_count($zk, '/zklock/race-hold'), 1,
	'the session that makes it still holds race-hold');
# zklock hears of the expiry from the IO thread after it answered every
# request it had.
($out, $err) = expire_held($gr, $r, '/zklock/race-hold', 0);
like($err, qr{ERROR:  ZooKeeper session expired while acquiring lock "race"},
	'the request is refused and the call fails') or diag("out: $out");
unlike($err, qr/statement timeout/, 'at once, not at statement_timeout');
is(zk_count($zk, '/zklock/race'), 0, 'no node is left');
is($r->query_safe("SELECT zk_try_lock('race')"), 't', 'the next call works, on a new session');
$r->query_safe("SELECT zk_unlock('race')");

# --- the connection drops while the first call opens the session: the
# library has connected, and the main thread, which may have missed the
# watcher's report (it runs before the handle is published), reads the
# library's state to catch up.  A drop the IO thread reports meanwhile
# must stay recorded: the catch-up reads the state under the lock that the
# watcher records it under, so the report waits and comes after it.  A
# catch-up recorded over the report would have the backend say
# 'connected' for as long as the connection stays down, and its first call
# wait until statement_timeout.
my $c = session($node, via => $proxy, set => { statement_timeout => '20s' });
$c->query_safe("SET zklock.connect_timeout = '3s'");
is($c->query_safe("SELECT state FROM zk_session()"), 'closed',
	'zklock is loaded (for gdb), with no session yet');
my $gc = ZkGdb->attach(backend_pid($c), non_stop => 1);
ok($gc, 'gdb attached to a backend with no session yet');
# Hold the main thread before it publishes the handle until the library
# has connected: the watcher's report of it is dropped, as it is when the
# IO thread is quicker.  Then hold it where it catches up.
like($gc->cmd('break zoo_set_servers_resolution_delay thread 1') // '', qr/Breakpoint 1 at/,
	'a breakpoint before the main thread publishes the new handle');
$gc->cmd('continue -a &');
start_wait($c, "SELECT zk_try_lock('catch-up')");
ok($gc->wait_for(qr/hit Breakpoint 1\b/, 30), 'the main thread stops there')
  or diag($gc->output);
$gc->cmd('thread 1');
ok(poll_until(sub { ($gc->cmd('print zh->state', 10) // '') =~ /= 3\b/ }, 30),
	'meanwhile the library connects') or diag($gc->output);
$gc->cmd('delete');
# The catch-up reads the library's state (zoo_state, the main thread's
# only call of it): hold the main thread just after that read, then let
# the connection drop, and wait until the library has seen the drop.
like($gc->cmd('break zoo_state thread 1') // '', qr/Breakpoint 2 at/,
	'a breakpoint where the main thread reads the library\'s state to catch up');
$gc->cmd('thread 1');
$gc->cmd('continue &');
ok($gc->wait_for(qr/hit Breakpoint 2\b/, 30), 'the main thread stops there')
  or diag($gc->output);
$gc->cmd('finish &');
ok($gc->wait_for(qr/Value returned is \$\d+ = 3\b/, 30),
	'it has read: connected') or diag($gc->output);
# The IO thread reports the drop: recorded at once (zklock's state 1)
# if the main thread does not hold the lock, else it waits for the lock
# (then contended: 2).
$proxy->mode('cut');
ok( poll_until(
		sub {
			($gc->cmd('print zkl_state_state', 10) // '') =~ /= 1\b/
			  || ($gc->cmd('print zkl_sess_sync_mu.__data.__lock', 10) // '') =~ /= 2\b/;
		},
		30),
	'cut off, the IO thread reports the drop') or diag($gc->output);
$gc->cmd('delete');
$gc->cmd('continue -a &');
$gc->detach;
($out, $err) = finish_wait($c);
like($err, qr/ERROR:  /, 'the call fails with the connection gone') or diag("out: $out");
unlike($err, qr/statement timeout/, 'before statement_timeout');
unlike($c->query_safe("SELECT state FROM zk_session()"), qr/^connected$/,
	'zk_session() does not say connected while the connection is down');
$proxy->mode('pass');
is($c->query_safe("SELECT zk_try_lock('catch-up')"), 't', 'with the connection back, the lock is taken');
$c->query_safe("SELECT zk_unlock('catch-up')");

# --- an allocation fails after the recipe made the node and
# before the lock set has recorded it.  gdb (all-stop) lets the recipe run
# to its return, sets a breakpoint where the lock set returns to the SQL
# function, and makes the k-th palloc-family call in between ask for more
# than PostgreSQL allows: an ERROR exactly where running out of memory
# would raise one.  k goes up until the lock set returns first.
my %first_arg = map { $_ => 1 } qw(palloc palloc0 palloc_extended);
my @allocators = (sort(keys %first_arg),
	qw(MemoryContextAlloc MemoryContextAllocZero MemoryContextAllocZeroAligned
	  MemoryContextAllocExtended MemoryContextAllocHuge repalloc repalloc_huge));

# Run $sql in $s with the k-th allocation of a window failed: from where
# $recipe_fn returns the lock (or, with $from_entry, from the entry of
# $lockset_fn) to where $lockset_fn returns to its SQL function.  Returns
# the allocator that failed, '' when the window ended first, or undef when
# gdb did not do each step as planned (the output goes to the log).
sub fail_allocation
{
	my ($s, $sql, $recipe_fn, $lockset_fn, $k, $from_entry) = @_;
	my $d = ZkGdb->attach(backend_pid($s)) or return undef;
	my $start = $from_entry ? $lockset_fn : $recipe_fn;
	my $fn = eval {
		die "no breakpoint\n"
		  unless ($d->cmd("break $start") // '') =~ /Breakpoint 1 at/;
		$d->cmd('continue &');
		start_wait($s, $sql);
		die "$start not reached\n"
		  unless $d->wait_for(qr/Breakpoint 1, (0x\S+ in )?\Q$start\E /, 30);
		die "$recipe_fn did not return the lock\n"
		  unless $from_entry
		  || ($d->cmd('finish', 60) // '') =~ /Value returned is .*(ZKL_ACQUIRED|true)/;
		$d->cmd('delete');
		# Where the lock set returns to its SQL function: the window's end.
		die "no frame of $lockset_fn\n"
		  unless ($d->cmd("frame function $lockset_fn") // '') =~ /\Q$lockset_fn\E/;
		my ($caller) = ($d->cmd('up') // '') =~ /^#\d+\s+(?:0x\S+ in )?(\w+) /m;
		die "no caller of $lockset_fn\n" unless defined $caller;
		die "no breakpoint at the return\n"
		  unless ($d->cmd('tbreak *$pc') // '') =~ /Temporary breakpoint \d+ at/;
		$d->cmd('set $n = 0');
		for my $f (@allocators)
		{
			# Not every major has every one (18 has no
			# MemoryContextAllocZeroAligned).
			next if ($d->cmd("info address $f") // '') =~ /No symbol/;
			die "no breakpoint on $f\n"
			  unless ($d->cmd("break *$f") // '') =~ /Breakpoint \d+ at/;
			$d->cmd("commands\nsilent\nset \$n = \$n + 1\nif \$n < $k\ncontinue\nend\nend");
		}
		my $stop = $d->cmd('continue', 60) // '';
		my ($at) = ($d->cmd('info symbol $pc') // '') =~ /^(\w+)/m;
		die "stopped nowhere known\n" unless defined $at;
		if (grep { $_ eq $at } @allocators)
		{
			diag("allocation $k after $start: " . ($d->cmd('bt 3') // ''));
			$d->cmd($first_arg{$at} ? 'set $rdi = 0xffffffffffffff00' : 'set $rsi = 0xffffffffffffff00');
			return $at;
		}
		die "stopped in $at, not at the return to $caller\n"
		  unless $at eq $caller && $stop =~ /Temporary breakpoint \d+, /;
		'';
	};
	diag("gdb: $@" . $d->output) unless defined $fn;
	$d->detach;
	return $fn;
}

my $c = session($node, %bounded);

# The control: from the lock set's entry the window does allocate (the
# entry, its node buffer), so the machinery must catch and fail one, and
# the lock must not be taken.
{
	my $fn = fail_allocation($c, "SELECT zk_xact_lock('alloc-control')", 'zkl_recipe_acquire_set',
		'zkl_lockset_acquire', 1, 1);
	my ($out, $err) = finish_wait($c);
	ok(defined $fn && $fn ne '', 'control: the first allocation in the lock set is caught')
	  or diag('got ' . ($fn // 'undef'));
	like($err, qr/invalid memory alloc request size/, 'control: and fails the statement');
	is(zk_count($zk, '/zklock/alloc-control'), 0, 'control: before any node is made');
}

for my $case (
	[ 'transaction lock', "SELECT zk_xact_lock('alloc-xact')", '/zklock/alloc-xact',
		'zkl_recipe_acquire_set', 'zkl_lockset_acquire', 'SELECT zk_unlock_all()' ],
	[ 'session lock', "SELECT zk_lock('alloc-session')", '/zklock/alloc-session',
		'zkl_recipe_acquire_set', 'zkl_lockset_acquire', 'SELECT zk_unlock_all()' ],
	[ 'semaphore lease', "SELECT zk_semaphore('alloc-sem', 2)", '/zklock/alloc-sem/leases',
		'zkl_semaphore_lease', 'zkl_lockset_lease', 'SELECT zk_semaphore_release_all()' ])
{
	my ($what, $sql, $dir, $recipe_fn, $lockset_fn, $release) = @$case;
	my $k = 1;
	for (; $k <= 10; $k++)
	{
		my $fn = fail_allocation($c, $sql, $recipe_fn, $lockset_fn, $k);
		my ($out, $err) = finish_wait($c);
		if (!defined $fn)
		{
			fail("$what: gdb reaches allocation $k");
			last;
		}
		if ($fn eq '')
		{
			is($err, '', "$what: the lock set returns after " . ($k - 1)
				  . ' allocation(s), all of them failed in turn') or diag($out);
			$c->query_safe($release);
			last;
		}
		like($err, qr/invalid memory alloc request size/,
			"$what: allocation $k ($fn) fails the statement");
		# The lock set either holds the lock (a session lock outlives the
		# failed transaction) or no node of ours is left.
		my $recorded = $c->query_safe('SELECT count(*) FROM zk_locks');
		ok(poll_until(sub { zk_count($zk, $dir) == $recorded }, 15),
			"$what: allocation $k: a node exactly when the lock set holds it ($recorded)")
		  or diag(explain [ zk_children($zk, $dir) ]);
		$c->query_safe($release);
		ok(poll_until(sub { zk_count($zk, $dir) == 0 }, 15),
			"$what: allocation $k: nothing left once all is released");
	}
	ok($k <= 10, "$what: the window ends within 10 allocations");
}

# --- the reply to a semaphore's lease create is lost: the lease is found
# again and adopted, never created twice.  gdb holds the backend where it
# sends the lease create (the mutex held by then), so that the proxy
# swallows exactly that reply.
{
	my $l = session($node, via => $proxy, warm => 1,
		set => { statement_timeout => '20s', 'zklock.session_timeout' => '20s' });
	my $lpid = backend_pid($l);
	# Its directories made beforehand: the swallowed reply is the lease's.
	$l->query_safe("SELECT zk_semaphore('sem-reply', 2), zk_semaphore_release_all()");
	ok(poll_until(sub { zk_count($zk, '/zklock/sem-reply/leases') == 0 }, 15),
		'lost lease reply: the semaphore\'s directories are there, no lease');
	my $d = ZkGdb->attach($lpid);
	ok($d, 'lost lease reply: gdb attached');
	# The acquire creates two nodes: the mutex's, then the lease: stop at the
	# second.
	like($d->cmd("break zkl_session_create_node\nignore 1 1") // '', qr/Breakpoint 1 at/,
		'lost lease reply: a breakpoint where the lease create is sent');
	$d->cmd('continue &');
	start_wait($l, "SELECT zk_semaphore('sem-reply', 2)");
	ok($d->wait_for(qr{Breakpoint 1, (0x\S+ in )?zkl_session_create_node \(path=[^)]*/leases/}, 30),
		'lost lease reply: the mutex is held, the lease create about to go')
	  or diag($d->output);
	$proxy->mode('swallow');
	$d->detach;
	ok(poll_until(sub { zk_count($zk, '/zklock/sem-reply/leases') == 1 }, 30),
		'lost lease reply: the server made the lease, its reply swallowed');
	my @before = zk_children($zk, '/zklock/sem-reply/leases');
	$proxy->mode('cut');
	ok(poll_until(sub { is_waiting($node, $lpid) }, 30), 'lost lease reply: waits through the cut');
	$proxy->mode('pass');
	ok(poll_until(sub { !in_call($node, $lpid) }, 30), 'lost lease reply: the call returns');
	my ($out, $err) = finish_wait($l);
	is($err, '', 'lost lease reply: with the lease');
	is_deeply([ zk_children($zk, '/zklock/sem-reply/leases') ], \@before,
		'lost lease reply: still the one lease: no second create');
	like($l->query_safe("SELECT node FROM zk_locks WHERE mode = 'lease'"),
		qr{/\Q$before[0]\E$}, 'lost lease reply: the lease made before the cut is the one held');
	$l->query_safe("SELECT zk_semaphore_release_all()");
}

$proxy->stop;
finish(nodes => [$node], zk => $zk);
done_testing();
