# Copyright (c) zklock contributors
#
# Lost locks (fault tests 3, 4 and 5).  Every server of the ensemble is
# paused past the holders' session timeout, then resumed.  Whichever way the
# ensemble resolves that (sessions expired, or revived by a re-election),
# the locks are lost for everyone: another cluster takes them while the
# first transaction is still open, that transaction cannot commit what it
# wrote, a lost session lock fails every commit that writes until released
# while the views keep working (or ends the backend with
# zklock.on_lock_loss = terminate), and the next zk_lock works on a new
# session.  Last, a SIGKILLed holder's lock is free once its session times
# out, and PostgreSQL's crash restart leaves no stale holder.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use ZkEnsemble;
use ZklockTest;

my $zk = ZkEnsemble->new(servers => 3);
# The TAP framework turns restart_after_crash off; test 5 needs it.
my $east = zk_cluster('east', $zk, session_timeout => 20000,
	conf => ['restart_after_crash = on']);
my $west = zk_cluster('west', $zk, session_timeout => 20000);

# Short sessions for the holders that are to lose their locks.
my ($a, $s, $t) = map { waiter($east) } 1 .. 3;
$_->query_safe("SET zklock.session_timeout = '2s'") for ($a, $s, $t);
$a->query_safe("SET zklock.log_sessions = on");
my $apid = backend_pid($a);
$t->query_safe("SET zklock.on_lock_loss = 'terminate'");
my $tpid = backend_pid($t);

$east->safe_psql('postgres', 'CREATE TABLE work (who text)');
$a->query_safe('BEGIN');
my $tok_a = $a->query_safe("SELECT zk_xact_lock('lx')");
$a->query_safe("INSERT INTO work VALUES ('a')");
my $tok_s = $s->query_safe("SELECT zk_lock('ls')");
$t->query_safe("SELECT zk_lock('lt')");
is($a->query_safe("SELECT state FROM zk_locks"), 'held', 'transaction lock held');

$zk->pause_server($_) for 1 .. 3;
ok(poll_until(sub { $a->query_safe("SELECT state FROM zk_locks") eq 'in doubt' }, 30),
	'locks are in doubt once the connection is gone');
ok(poll_until(sub { $a->query_safe("SELECT state FROM zk_locks") eq 'lost' }, 30),
	'transaction lock is lost past the session timeout');
ok(poll_until(sub { lock_state($s, 'ls', in_txn => 1) eq 'lost' && lock_state($t, 'lt', in_txn => 1) eq 'lost' }, 30),
	'session locks are lost too');
$zk->resume_server($_) for 1 .. 3;
ok($zk->wait_for_quorum(60), 'ensemble serves again');

# --- 3. transaction lock: another cluster takes it while A's transaction is open
my $b = waiter($west);
my $tok_b = $b->query_safe("SELECT zk_lock('lx', '60s')");
ok($tok_b > $tok_a, 'another cluster acquires the lost lock, with a larger token');
is($a->query_safe("SELECT state FROM zk_locks"), 'lost', 'first holder sees it as lost');
my ($out, $ret) = $a->query('COMMIT');
like($a->{stderr}, qr/cannot commit while ZooKeeper lock "lx" \(exclusive\) is lost/,
	'the first transaction cannot commit');
$a->{stderr} = '';
is($a->query_safe('SELECT count(*) FROM work'), '0', 'nothing it wrote is there');
is($a->query_safe('SELECT count(*) FROM zk_locks'), '0', 'its transaction lock is gone');
my $a_log = -s $east->logfile;
ok($a->query_safe("SELECT zk_lock('lx-next')") > $tok_b, 'its next zk_lock works, on a new session');
like(slurp_file($east->logfile, $a_log),
	qr/\[$apid\][^\n]*LOG:  ZooKeeper session 0x[0-9a-f]+ closed in \d+\.\d{3} ms after it was lost\n.*DETAIL:  (?:The ensemble expired it|No answer within the session timeout)[^\n]*\n(?:.*\n)*?.*\[$apid\][^\n]*LOG:  ZooKeeper session 0x[0-9a-f]+ opened in/,
	'log_sessions: the lost session\'s close is logged, with how it was lost, before the new one opens');
is(zk_count($zk, '/zklock/lx'), 1, 'only the new holder\'s node is left');

# --- 4. session lock: every commit that writes fails until it is released;
# the views and read-only statements keep working
is($s->query_safe("SELECT name || ' ' || state FROM zk_locks"), 'ls lost',
	'zk_locks shows the lost lock (a read-only commit is not refused)');
is($s->query_safe('SELECT count(*) FROM work'), '0', 'read-only statements work');
$s->query("INSERT INTO work VALUES ('s')");
like($s->{stderr}, qr/cannot commit while ZooKeeper lock "ls" \(exclusive\) is lost/,
	'a later commit that writes fails');
$s->{stderr} = '';
$s->query('SELECT txid_current()');
like($s->{stderr}, qr/is lost/, 'and the next one too');
$s->{stderr} = '';
($out) = $s->query("SELECT zk_unlock('ls')");
is($out, 'f', 'zk_unlock of a lost lock returns false');
like($s->{stderr}, qr/WARNING:  ZooKeeper lock "ls" \(exclusive\) was lost before it was released/,
	'with a WARNING naming the loss');
$s->{stderr} = '';
$s->query_safe("INSERT INTO work VALUES ('s')");
is($s->query_safe('SELECT count(*) FROM work'), '1', 'commits that write work again after the release');
ok($west->safe_psql('postgres', "SELECT zk_lock('ls', '60s')") > $tok_s,
	'another cluster takes the lost session lock');

# with zklock.on_lock_loss = terminate the backend ends
my $log_offset = -s $east->logfile;
eval { $t->query('SELECT 1') };    # psql ends with the backend
ok(poll_until(sub {
	slurp_file($east->logfile, $log_offset) =~
	  /FATAL:  terminating connection because ZooKeeper lock "lt" \(exclusive\) was lost/ }),
	'on_lock_loss = terminate ends the backend with FATAL');
ok(poll_until(sub {
	$east->safe_psql('postgres', "SELECT count(*) FROM pg_stat_activity WHERE pid = $tpid") eq '0' }),
	'the backend is gone');
ok(poll_until(sub { zk_count($zk, '/zklock/lt') == 0 }, 30), 'its lock node is gone');

# --- 5. SIGKILL a holder: free once its session times out, no stale holder
my $k = waiter($east);
$k->query_safe("SET zklock.session_timeout = '3s'");
my $kpid = backend_pid($k);
$k->query_safe("SELECT zk_lock('killed')");
is(zk_count($zk, '/zklock/killed'), 1, 'killed holder has its node');
my $t0 = time;
kill 'KILL', $kpid;
my $tok_w = $west->safe_psql('postgres', "SELECT zk_lock('killed', '60s')");
ok($tok_w > 0, 'another cluster gets the lock after the holder is SIGKILLed');
ok(time - $t0 >= 1, 'not before the killed session could time out');
ok(poll_until(sub { (eval { $east->safe_psql('postgres', 'SELECT 1') } // '') eq '1' }, 120),
	'east is back after its crash restart');
is(zk_count($zk, '/zklock/killed'), 0, 'the lock was released by west\'s single statement');
is($east->safe_psql('postgres', "SELECT zk_try_lock('killed')"), 't',
	'east takes it again: no stale holder');

$_->quit for grep { $_ } ($b);
$east->stop('immediate');
$west->stop('fast');
$zk->stop;
done_testing();
