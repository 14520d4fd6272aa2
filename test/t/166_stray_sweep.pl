# Copyright (c) zklock contributors
#
# A create whose reply was lost, landing after the sweep that looked for
# it.  The backend sweeps for such a create after the reconnect; the
# create can still land later, from a connection of the session that the
# client gave up but a server had not read yet (as after a whole-ensemble
# pause).  That node of the backend's live session is held by nobody, at
# the head of its queue: the backend sweeps again after the next
# reconnect, without waiting until it lists that lock again.
#
# The test makes the late create as the paused server would: the
# backend's create is lost in a proxy, the backend gives up and sweeps
# after its reconnect; then, while the backend is cut off, another client
# takes the session over with its id and password (read with gdb), makes
# the create with the lost create's name, and drops its connection; the
# backend reconnects.

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
my $node = zk_cluster('sweep', $zk, session_timeout => 30000);
my $proxy = ZkProxy->new($zk->port(1));

my $x = waiter($node);
my $xpid = backend_pid($x);
$x->query_safe("SET zklock.hosts = '127.0.0.1:" . $proxy->port . "'");
$x->query_safe("SELECT zk_lock('warm-up')");
my ($warm) = zk_children($zk, '/zklock/warm-up');
$x->query_safe("SELECT zk_unlock('warm-up')");
like($warm, qr/^_c_([0-9a-f-]{28})([0-9a-f]{8})-lock-/, 'a node of the backend names its session');
$warm =~ /^_c_([0-9a-f-]{28})([0-9a-f]{8})-lock-/;
# The next create of the session has the next counter.
my $lost = sprintf('_c_%s%08x-lock-', $1, hex($2) + 1);

my $g = ZkGdb->attach($xpid);
plan skip_all => $ZkGdb::why unless $g;
my $id = $g->cmd('p/x ((clientid_t *) zoo_client_id(zkl_state_zh))->client_id') // '';
my $pw = $g->cmd('x/16xb ((clientid_t *) zoo_client_id(zkl_state_zh))->passwd') // '';
$g->detach;
ok($id =~ /= (0x[0-9a-f]+)/, 'gdb reads the session id') or diag($id);
my $sid = $1 // '0';
my @pw = $pw =~ /\b0x([0-9a-f]{2})\b/g;
is(scalar @pw, 16, 'and its password') or diag($pw);

# --- the create is lost: held in the proxy, which then cuts the connection
$proxy->mode('lag:5000');
start_wait($x, "SELECT zk_lock('stray-sweep')");
ok(poll_until(sub { $proxy->requests('create2') + $proxy->requests('create') > 0 }, 30),
	'the create is sent');
$proxy->mode('cut');
ok(poll_until(sub { is_waiting($node, $xpid) }, 30), 'the backend waits for a reconnect');
$node->safe_psql('postgres', "SELECT pg_cancel_backend($xpid)");
my ($out, $err) = finish_wait($x);
like($err, qr/canceling statement due to user request/, 'and gives up');
$proxy->mode('pass');
ok(poll_until(sub { $x->query_safe('SELECT state FROM zk_session()') eq 'connected' }, 30),
	'it reconnects (and sweeps: nothing is there)');
is(zk_count($zk, '/zklock/stray-sweep'), 0, 'the lost create never landed');

# --- the late create, from another connection of the session
$proxy->mode('cut');
ok(poll_until(sub { $x->query_safe('SELECT state FROM zk_session()') ne 'connected' }, 30),
	'the backend is cut off');
my $code = <<'EOF';
import os, sys
from kazoo.client import KazooClient
hosts, sid, pw, path = sys.argv[1:5]
zk = KazooClient(hosts=hosts, timeout=30.0, client_id=(int(sid, 16), bytes.fromhex(pw)))
zk.start(timeout=15)
zk.ensure_path(os.path.dirname(path))
print(zk.create(path, b'', ephemeral=True, sequence=True))
sys.stdout.flush()
os._exit(0)    # drop the connection, not the session
EOF
my ($made, $stderr) = run_command([ '/usr/bin/python3', '-c', $code, $zk->connect_string,
		$sid, join('', @pw), "/zklock/stray-sweep/$lost" ]);
like($made, qr{^/zklock/stray-sweep/\Q$lost\E\d+}, 'the create lands in the backend\'s session')
  or diag($stderr);
is(zk_count($zk, '/zklock/stray-sweep'), 1, 'a node nobody holds is at the head of the queue');
$proxy->mode('pass');
ok(poll_until(sub { zk_count($zk, '/zklock/stray-sweep') == 0 }, 30),
	'after its next reconnect the backend sweeps again and deletes it, without touching the lock');
is($node->safe_psql('postgres', "SELECT zk_try_lock('stray-sweep')"), 't', 'another backend takes the lock');
is($x->query_safe('SELECT state FROM zk_session()'), 'connected', 'the backend\'s session lives on');

$x->quit;
$proxy->stop;
finish(nodes => [$node], zk => $zk);
done_testing();
