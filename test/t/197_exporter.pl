# Copyright (c) zklock contributors
#
# Where operators already look: Debian's prometheus-postgres-exporter,
# with the custom-queries file zklock ships (exporter/zklock_queries.yaml),
# scrapes a cluster with zklock preloaded; its /metrics on loopback carry
# zklock's counters with the values this test caused, for a role that is a
# member of pg_read_all_stats.  The exporter is stopped by PID.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";

use HTTP::Tiny;
use IO::Socket::INET;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);
use ZkEnsemble;
use ZklockTest;

my $exporter = '/usr/bin/prometheus-postgres-exporter';
my $queries = "$FindBin::Bin/../../exporter/zklock_queries.yaml";
ok(-x $exporter, 'the exporter is installed (make deps)');

my $zk = ZkEnsemble->new(servers => 1);
my $node = zk_cluster('exp', $zk, preload => 1, conf => ["deadlock_timeout = '100ms'"]);
$node->safe_psql('postgres', q{
	CREATE ROLE exporter LOGIN IN ROLE pg_read_all_stats;
	SELECT zk_lock('ex-a'), zk_unlock('ex-a');
	SELECT zk_lock('ex-a'), zk_unlock('ex-a');
	SELECT zk_try_lock_shared('ex-b'), zk_unlock_shared('ex-b');
	SELECT zk_semaphore('ex-sem', 3), zk_semaphore_release('ex-sem');});
# a timeout: another backend holds ex-a
my $h = waiter($node);
$h->query_safe("SELECT zk_lock('ex-a')");
is($node->safe_psql('postgres', "SELECT zk_try_lock('ex-a')"), 'f', 'a try that times out');
$h->query_safe("SELECT zk_unlock('ex-a')");
$h->quit;

# A free loopback port for the exporter.
my $probe = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0, Listen => 1)
  or die "no port: $!";
my $port = $probe->sockport;
close $probe;

my $dsn = sprintf('host=%s port=%d user=exporter dbname=postgres sslmode=disable',
	$node->host, $node->port);
my $log = "$PostgreSQL::Test::Utils::log_path/exporter.log";
my $pid = fork() // die "fork: $!";
if ($pid == 0)
{
	open STDOUT, '>', $log or die;
	open STDERR, '>&', \*STDOUT or die;
	$ENV{DATA_SOURCE_NAME} = $dsn;
	exec($exporter, "--web.listen-address=127.0.0.1:$port",
		"--extend.query-path=$queries", '--disable-settings-metrics',
		'--no-collector.database', '--no-collector.bgwriter')
	  or die "exec: $!";
}
END { if ($pid) { kill 'TERM', $pid; waitpid($pid, 0); } }

my $http = HTTP::Tiny->new(timeout => 10);
my $metrics = '';
ok(poll_until(sub {
		my $r = $http->get("http://127.0.0.1:$port/metrics");
		$metrics = $r->{success} ? $r->{content} : '';
		$metrics =~ /^zklock_locks_acquisitions\{/m;
	}, 60), 'the exporter serves zklock\'s metrics')
  or diag(slurp_file($log));

sub metric
{
	my ($name, %labels) = @_;
	for my $line (split /\n/, $metrics)
	{
		next unless $line =~ /^\Q$name\E\{([^}]*)\} (\S+)$/;
		my ($l, $v) = ($1, $2);
		my %have = $l =~ /(\w+)="([^"]*)"/g;
		next if grep { ($have{$_} // '') ne $labels{$_} } keys %labels;
		return $v;
	}
	return undef;
}

my %a = (database => 'postgres', user => 'postgres', name => 'ex-a', mode => 'exclusive');
is(metric('zklock_locks_acquisitions', %a), 3, 'ex-a: three acquisitions (two, then the holder of the timeout)');
is(metric('zklock_locks_timeouts', %a), 1, 'ex-a: one timeout');
ok(metric('zklock_locks_hold_seconds_total', %a) > 0, 'ex-a: held some time, in seconds');
is(metric('zklock_locks_acquisitions', %a, name => 'ex-b', mode => 'shared'), 1, 'ex-b: a shared acquisition');
is(metric('zklock_locks_acquisitions', %a, name => 'ex-sem', mode => 'lease'), 1, 'ex-sem: a lease');
my $opened = $node->safe_psql('postgres', 'SELECT sessions_opened FROM zk_stat_sessions');
is(metric('zklock_sessions_sessions_opened'), $opened, "sessions opened: $opened, as zk_stat_sessions says");
ok(defined metric('zklock_sessions_sessions_open'), 'and the open sessions gauge');
like($metrics, qr/^# TYPE zklock_sessions_sessions_open gauge$/m, 'a gauge');
like($metrics, qr/^# TYPE zklock_locks_acquisitions counter$/m, 'acquisitions a counter');

kill 'TERM', $pid;
waitpid($pid, 0);
$pid = 0;
$node->stop('fast');
$zk->stop;
done_testing();
