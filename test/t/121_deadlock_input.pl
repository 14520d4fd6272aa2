# Copyright (c) zklock contributors
#
# The deadlock search reads other clients' wait entries as untrusted input,
# and cleans up its claims.
#
# - A crafted tree that runs the search into its lookup limit just before
#   it reads a semaphore waiter's leases directory: the search treats what
#   it could not read as not waiting, and the backend lives on.
# - A wait entry naming a directory that is no lock's (a relative path):
#   skipped, the wait goes on (the client library's refusal of that path
#   does not reach the waiter's zk_lock).
# - The victim's claim under .zklock-deadlocks is gone when the victim's
#   40P01 reaches the client, not kept as long as the session.
# - A claim whose create lost its reply (gdb turns its answer into a
#   connection loss) is this session's: a later search that finds it takes
#   it as its own, and the cycle still gets its one victim (not every
#   member seeing the claim taken, and waits without a timeout hanging).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use ZkEnsemble;
use ZkGdb;
use ZklockTest;

my $zk = ZkEnsemble->new(servers => 1);
my $node = zk_cluster('dlinput', $zk, session_timeout => 30000);
# Sessions whose waits look for a deadlock after 200 ms.
my %fast_search = (set => { deadlock_timeout => '200ms' });

# Run a Python (kazoo) snippet against the ensemble; zk is the client.
sub kazoo
{
	my ($code) = @_;
	my $py = "from kazoo.client import KazooClient\n"
	  . "zk = KazooClient(hosts='@{[ $zk->connect_string ]}', timeout=10.0)\n"
	  . "zk.start(timeout=15)\n$code\nzk.stop()\n";
	my $out = PostgreSQL::Test::Utils::run_log([ '/usr/bin/python3', '-c', $py ]);
	ok($out, 'crafted the tree');
}

# A session uuid part (28 characters) and a node uuid of it.
sub sess { return sprintf('%08x-0000-0000-0000-0000', $_[0]); }
sub uuid { return sess($_[0]) . '00000001'; }

# --- the lookup limit, then a semaphore waiter's directory
# A holder H of lock 'crafted' (session 1) waits, as its entry says, for a
# lease of semaphore D (max 1) behind 300 leases of sessions 2..301; each
# of those waits for a lease elsewhere.  Session 2's entry is no JSON (one
# lookup), every other costs two (its entry, its directory): the 512th
# lookup is the entry of the 256th, and its directory is not read.
my $S1 = uuid(1);
my $code = <<"EOF";
import json
zk.ensure_path('/zklock/crafted')
zk.ensure_path('/zklock/.zklock-waits')
zk.ensure_path('/zklock/D/leases')
zk.create('/zklock/crafted/_c_$S1-lock-', b'', sequence=True)
own = zk.create('/zklock/D/leases/_c_$S1-lease-', b'', sequence=True)
zk.create('/zklock/.zklock-waits/$S1', json.dumps({'waits_dir': '/zklock/D/leases',
  'waits_node': own.split('/')[-1], 'waits_max_leases': 1, 'pid': 1,
  'cluster_name': 'crafted'}).encode())
for i in range(2, 302):
    u = '%08x-0000-0000-0000-000000000001' % i
    lease = zk.create('/zklock/D/leases/_c_%s-lease-' % u, b'', sequence=True)
    data = b'x' if i == 2 else json.dumps({'waits_dir': '/zklock/E%d/leases' % i,
      'waits_node': '_c_%s-lease-0000000000' % u, 'waits_max_leases': 1}).encode()
    zk.create('/zklock/.zklock-waits/%s' % u, data)
EOF
kazoo($code);
my $w = session($node, %fast_search);
my $wpid = backend_pid($w);
start_wait($w, "SELECT zk_lock('crafted', '3s')");
my ($out, $err) = finish_wait($w);
like($err, qr/ERROR:  could not obtain ZooKeeper lock "crafted"/,
	'a search that hit its lookup limit at a semaphore waiter: the wait goes on to its timeout');
ok($node->safe_psql('postgres', 'SELECT 1') eq '1', 'the server is up (no backend crashed)');
unlike(slurp_file($node->logfile), qr/was terminated by signal/, 'no backend died of a signal');

# --- an entry naming no lock's directory
my $S2 = uuid(1000);
kazoo(<<"EOF");
import json
zk.ensure_path('/zklock/crafted2')
zk.create('/zklock/crafted2/_c_$S2-lock-', b'', sequence=True)
zk.create('/zklock/.zklock-waits/$S2', json.dumps({'waits_dir': 'nonsense',
  'waits_node': 'x', 'pid': 2}).encode())
EOF
$w = session($node, %fast_search);
start_wait($w, "SELECT zk_lock('crafted2', '2s')");
($out, $err) = finish_wait($w);
like($err, qr/ERROR:  could not obtain ZooKeeper lock "crafted2"/,
	'an entry naming a relative path is skipped: the wait goes on to its timeout')
  or diag($err);
kazoo("zk.delete('/zklock/.zklock-waits', recursive=True)\n"
	  . "zk.delete('/zklock/crafted', recursive=True)\n"
	  . "zk.delete('/zklock/crafted2', recursive=True)\n"
	  . "zk.delete('/zklock/D', recursive=True)");

# --- two backends in a cycle: (a holds x, waits y), (b holds y, waits x);
# b, waiting last, closes the cycle and claims it.  $gdb_setup: run on a
# gdb attached to b first.  Returns (the victim's error, the claims left
# when it came); undef when gdb cannot attach.
sub cycle
{
	my ($tag, $gdb_setup) = @_;
	my @s = (session($node, %fast_search), session($node, %fast_search));
	my @pid = map { backend_pid($_) } @s;
	my $g;
	$_->query_safe('BEGIN') for @s;
	$s[0]->query_safe("SELECT zk_xact_lock('$tag-x')");
	$s[1]->query_safe("SELECT zk_xact_lock('$tag-y')");
	if ($gdb_setup)
	{
		# zklock is loaded in b by now
		$g = ZkGdb->attach($pid[1]) or return undef;
		$gdb_setup->($g);
		$g->cmd('continue &');
	}
	start_wait($s[0], "SELECT zk_xact_lock('$tag-y')");
	ok(poll_until(sub { is_waiting($node, $pid[0]) }, 30), "$tag: a waits");
	start_wait($s[1], "SELECT zk_xact_lock('$tag-x')");
	my $t0 = time;
	my ($verr, $claims);
	my %done;
	poll_until(
		sub {
			for my $i (0, 1)
			{
				next if $done{$i} || in_call($node, $pid[$i]);
				my ($o, $e) = finish_wait($s[$i]);
				$done{$i} = 1;
				next unless $e =~ /deadlock detected/;
				$claims = zk_count($zk, '/zklock/.zklock-deadlocks');
				$verr = $e;
				return 1;
			}
			return 0;
		},
		30);
	note("$tag: the cycle was broken after " . (time - $t0) . ' s') if $verr;
	$g->detach if $g;
	for my $i (0, 1)
	{
		next if $done{$i};
		$node->safe_psql('postgres', "SELECT pg_cancel_backend($pid[$i])")
		  if !$verr;
		finish_wait($s[$i]);
	}
	$_->query('ROLLBACK') for @s;
	return ($verr // '(nobody was chosen)', $claims);
}

my ($verr, $claims) = cycle('claim');
like($verr, qr/ERROR:  deadlock detected/, 'a cycle of two: one 40P01');
is($claims, 0, 'its claim is gone when the victim\'s error comes');

SKIP:
{
	my $set = '';
	my ($lerr, $lclaims) = cycle(
		'lost',
		sub {
			my ($g) = @_;
			# The first claim's answer becomes a connection loss, though the
			# server made the claim: the answer of the multi that makes it
			# (session_claimed), or of a plain create (session_created) in a
			# build without that completion.
			my $multi = ($g->cmd('info line session_claimed') // '') =~ /starts at/;
			my $bp = $multi
			  ? 'tbreak *session_claimed if $rdi == 0'
			  : 'tbreak *session_created if $rdi == 0 && $rsi != 0 && '
			  . '(long) strstr((char *) $rsi, ".zklock-deadlocks/") != 0';
			$set = $g->break_run($bp, "silent\nset \$rdi = -4\ncontinue");
		});
	skip $ZkGdb::why, 2 unless defined $lerr;
	like($set, qr/Temporary breakpoint 1 at/, 'gdb turns the claim\'s answer into a connection loss');
	like($lerr, qr/ERROR:  deadlock detected/,
		'a claim whose reply was lost is taken as this session\'s: one 40P01');
}

finish(nodes => [$node], zk => $zk);
done_testing();
