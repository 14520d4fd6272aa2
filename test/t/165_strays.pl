# Copyright (c) zklock contributors
#
# Strays: a node of a backend's live session that the backend neither
# holds nor waits with.  One is left when a create lands after its
# backend gave it up (the reply lost, and the sweep by its prefix ran
# before it landed, as after a whole-ensemble pause), or when a
# release's delete cannot be queued (out of memory).  It blocks everyone
# behind it for as long as the session lives; the backend deletes it the
# next time it lists that lock or semaphore.
#
# The test makes one the second way: gdb holds the backend and makes the
# clean-up queue refuse the release's delete, as an allocation failure
# would.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";

use PostgreSQL::Test::Utils;
use Test::More;
use ZkEnsemble;
use ZkGdb;
use ZklockTest;

my $zk = ZkEnsemble->new(servers => 1);
my $east = zk_cluster('east', $zk);
my $west = zk_cluster('west', $zk);
my $a = waiter($east);
my $b = waiter($west);
my $apid = backend_pid($a);

# Release $release on east with the delete refused, leaving a stray.
sub leave_stray
{
	my ($release) = @_;
	my $g = ZkGdb->attach($apid) or return undef;
	my $set = $g->break_run('break zkl_sess_cleanup_queue_locked', "silent\nreturn 0\ncontinue");
	$g->cmd('continue &');
	my $out = $a->query_safe($release);
	$g->detach;
	return $set =~ /Breakpoint 1 at/ ? $out : undef;
}

$a->query_safe("SELECT zk_lock('stray')");
my $released = leave_stray("SELECT zk_unlock('stray')");
plan skip_all => $ZkGdb::why unless defined $released;
is($released, 't', 'zk_unlock returns true with its delete refused');
is(zk_count($zk, '/zklock/stray'), 1, 'a stray node of east\'s live session is left');
is($b->query_safe("SELECT zk_try_lock('stray')"), 'f', 'it blocks another cluster');
is($a->query_safe("SELECT zk_try_lock('stray')"), 't', 'east takes the lock again');
$a->query_safe("SELECT zk_unlock('stray')");
is($b->query_safe("SELECT zk_try_lock('stray')"), 't',
	'east deleted its stray when it listed the lock: west takes it');
is(zk_count($zk, '/zklock/stray'), 1, 'only west\'s node is there');
$b->query_safe("SELECT zk_unlock('stray')");

$a->query_safe("SELECT zk_semaphore('stray-sem', 1)");
is(leave_stray("SELECT zk_semaphore_release('stray-sem')"), 't',
	'zk_semaphore_release returns true with its delete refused');
is(zk_count($zk, '/zklock/stray-sem/leases'), 1, 'a stray lease is left');
is($b->query_safe("SELECT zk_try_semaphore('stray-sem', 1)"), 'f', 'it fills the semaphore for another cluster');
is($a->query_safe("SELECT zk_try_semaphore('stray-sem', 1)"), 't', 'east takes a lease again');
$a->query_safe("SELECT zk_semaphore_release('stray-sem')");
is($b->query_safe("SELECT zk_try_semaphore('stray-sem', 1)"), 't',
	'east deleted its stray lease when it counted the leases: west takes one');
$b->query_safe("SELECT zk_semaphore_release('stray-sem')");

# The helper itself: a breakpoint gdb cannot set gets no commands, so the
# "return 0" meant for it does not run in the frame the backend is
# stopped in.
{
	my $g = ZkGdb->attach($apid);
	my $before = $g->cmd('bt') // '';
	is($g->break_run('break zkl_no_such_function', "silent\nreturn 0\ncontinue"), '',
		'a breakpoint gdb cannot set gets no commands');
	is($g->cmd('bt') // '', $before, 'and the backend stays in the frame it was stopped in');
	$g->detach;
	is($a->query_safe('SELECT 1'), '1', 'and runs on');
}

$_->quit for ($a, $b);
$east->stop('fast');
$west->stop('fast');
$zk->stop;
done_testing();
