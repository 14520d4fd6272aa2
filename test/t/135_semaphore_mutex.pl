# Copyright (c) zklock contributors
#
# A semaphore acquire lets go of the semaphore's internal mutex on its way
# out, and returns only once the ensemble has answered that release, as
# every release does: right after A's zk_semaphore(name, 2) returns, B's
# zk_try_semaphore(name, 2), which does not wait, finds one permit free and
# the mutex free too, every time.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";

use PostgreSQL::Test::Utils;
use Test::More;
use ZkEnsemble;
use ZklockTest;

my $ROUNDS = 40;

my $zk = ZkEnsemble->new(servers => 3);
my $east = zk_cluster('east', $zk);
my $west = zk_cluster('west', $zk);
my $a = waiter($east);
my $b = waiter($west);

my $free = 0;
for my $i (1 .. $ROUNDS)
{
	$a->query_safe("SELECT zk_semaphore('sem-mutex', 2)");
	$free++ if $b->query_safe("SELECT zk_try_semaphore('sem-mutex', 2)") eq 't';
	$a->query_safe("SELECT zk_semaphore_release_all()");
	$b->query_safe("SELECT zk_semaphore_release_all()");
}
is($free, $ROUNDS, "B's try found the free permit right after A's acquire in every round");
ok(poll_until(sub { zk_count($zk, '/zklock/sem-mutex/leases') == 0
			  && zk_count($zk, '/zklock/sem-mutex/locks') == 0 }, 30),
	'no lease or mutex node is left');

finish(sessions => [ $a, $b ], nodes => [ $east, $west ], zk => $zk);
done_testing();
