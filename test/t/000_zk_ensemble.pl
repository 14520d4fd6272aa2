
# Copyright (c) zklock contributors

# Checks the ZkEnsemble test helper itself against real ZooKeeper servers:
# leader election, kill/restart, pause/resume, clean stop, and the CLI used
# by the demo.  Runs as any user; all data goes to temporary directories.

use strict;
use warnings;

use File::Spec;
use File::Temp ();
use FindBin;
use lib File::Spec->catdir($FindBin::RealBin, File::Spec->updir, 'perl');
use Test::More;
use Time::HiRes qw(sleep time);

use ZkEnsemble;

my $cli = File::Spec->catfile($FindBin::RealBin, File::Spec->updir,
	'zk_ensemble.pl');
my @cli = ($^X, $cli);

# Run the CLI, return its stdout (list form: no shell quoting issues).
sub run_cli
{
	my @args = @_;
	open my $fh, '-|', @cli, @args or die "could not run $cli: $!";
	my $out = do { local $/; <$fh> } // '';
	close $fh;
	return $out;
}

# Poll $cond every 100 ms for up to $timeout seconds.
sub poll_until
{
	my ($timeout, $cond) = @_;
	my $deadline = time + $timeout;
	until ($cond->())
	{
		return 0 if time >= $deadline;
		sleep 0.1;
	}
	return 1;
}

# A process is gone once it is reaped; a zombie (its parent has not reaped
# it yet, e.g. a PID 1 that does not reap) counts as gone too.
sub gone
{
	my ($pid) = @_;
	return 1 unless kill(0, $pid);
	open my $fh, '<', "/proc/$pid/stat" or return 1;
	my $stat = <$fh> // '';
	return $stat =~ /^\d+ \(.*\) Z/ ? 1 : 0;
}

my $zk = ZkEnsemble->new(servers => 3);
is($zk->server_count, 3, 'three servers');
like(
	$zk->connect_string,
	qr/^127\.0\.0\.1:\d+(?:,127\.0\.0\.1:\d+){2}$/,
	'connect string lists three loopback servers');
is($zk->connect_string,
	join(',', map { '127.0.0.1:' . $zk->port($_) } 1 .. 3),
	'connect string matches port()');

my %modes = map { $_ => $zk->mode($_) } 1 .. 3;
is(scalar(grep { $_ eq 'leader' } values %modes), 1, 'exactly one leader');
is(scalar(grep { $_ eq 'follower' } values %modes), 2, 'two followers');
is($zk->four_letter($_, 'ruok'), 'imok', "server $_ answers ruok") for 1 .. 3;
is($zk->total_watches, 0, 'no watches yet');
is_deeply($zk->watches_by_path, {}, 'no watched paths yet');

# The server line (ZKLOCK_ZK_SERVER): the servers that answer are of it,
# and servers of another line than the one asked for are an error.
is($zk->server_line, $ENV{ZKLOCK_ZK_SERVER} || '3.8', 'the server line asked for');
like($zk->server_version, qr/^\Q${\ $zk->server_line}\E\.\d+$/,
	'the servers answer with a version of that line');
{
	local $ENV{ZK_CLASSPATH} =
	  '/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar';
	my $other = eval { ZkEnsemble->new(servers => 1, server_line => '3.9') };
	like($@, qr/^server 1 is ZooKeeper 3\.8\.\d+, not of the 3\.9 line asked for/,
		"3.8.0's jars started as line 3.9: start dies naming both");
}

# Kill the leader: one of the two others must take over.
my $old = $zk->leader;
ok(defined $old, "leader is server $old");
my $old_pid = $zk->pid($old);
$zk->kill_server($old);
ok(!kill(0, $old_pid), 'killed leader process is gone');
ok(!$zk->is_running($old), 'is_running is false after kill');
is($zk->four_letter($old, 'ruok', 1), undef, 'killed server does not answer');
my $new;
ok( poll_until(
		30,
		sub {
			$new = $zk->leader;
			return defined $new;
		}),
	'a new leader is elected');
ok(defined $new && $new != $old, 'new leader is one of the survivors')
  or diag("old $old, new " . ($new // 'none'));
ok($zk->wait_for_quorum(30), 'the two survivors form a quorum');

# Restart it: it rejoins under the new leader.
$zk->restart_server($old);
is($zk->mode($old), 'follower', 'restarted server rejoins as follower');
ok($zk->wait_for_quorum(30), 'all three serve again');
is($zk->leader, $new, 'leadership did not move');

# Pause a follower: it stops answering, then answers again after resume.
my ($f) = grep { $_ != $new } 1 .. 3;
$zk->pause_server($f);
ok($zk->is_paused($f), "server $f is paused");
is($zk->four_letter($f, 'srvr', 1), undef, 'paused server does not answer srvr');
ok(defined $zk->four_letter($new, 'srvr'), 'leader still answers');
$zk->resume_server($f);
ok(!$zk->is_paused($f), "server $f is resumed");
ok(poll_until(30, sub { defined $zk->four_letter($f, 'srvr') }),
	'resumed server answers srvr');
ok($zk->wait_for_quorum(30), 'quorum complete after resume');

# Stop: no process left; keep_logs copies the servers' logs beside the
# clusters' (as a failed test's stop does).
my @pids = map { $zk->pid($_) } 1 .. 3;
$zk->stop(keep_logs => 1);
ok(!kill(0, $_), "server process $_ is gone after stop") for @pids;
ok(!grep({ !-s "$ENV{TESTLOGDIR}/zk_000_zk_ensemble_zk$_.log" } 1 .. 3),
	'stop(keep_logs => 1) copies every server\'s log to the test\'s log directory');
ok($zk->stop, 'stop is idempotent');
ok(!grep({ $zk->is_running($_) } 1 .. 3), 'no server reported running');

# The CLI used by shell scripts: start detached, status, stop by state file.
my $dir = File::Temp::tempdir('zkcli_XXXXXX', TMPDIR => 1, CLEANUP => 1);

# Whatever happens below, do not leave the detached server running.
END { system(@cli, 'stop', '--dir', $dir) if defined $dir; }

my $cs = run_cli('start', '--servers', 1, '--dir', $dir);
is($?, 0, 'CLI start succeeds');
like($cs, qr/^127\.0\.0\.1:\d+\n\z/, 'CLI start prints only the connect string');
my $attached = ZkEnsemble->attach("$dir/ensemble.state");
is($attached->server_count, 1, 'attach reads the state file');
is($attached->mode(1), 'standalone', 'single server runs standalone');
my $status = run_cli('status', '--dir', $dir);
is($?, 0, 'CLI status succeeds');
like($status, qr/^server 1 port \d+ standalone$/m, 'CLI status shows the mode');
my $cli_pid = $attached->pid(1);
is(system(@cli, 'stop', '--dir', $dir), 0, 'CLI stop succeeds');
ok(poll_until(5, sub { gone($cli_pid) }), 'CLI-started server is gone');
is(system(@cli, 'stop', '--dir', $dir), 0, 'CLI stop again is no error');

done_testing();
