# Copyright (c) zklock contributors
#
# Mutual-exclusion checker.  C clusters x B backends loop for D seconds.
# Each cycle picks one of four kinds of lock on one of L names:
#   xact     zk_xact_lock, work, COMMIT (released by the commit)
#   session  zk_lock, work in its own transaction, COMMIT, zk_unlock
#   sem      zk_xact_semaphore with a limit of 2, work, COMMIT
#   set      zk_lock(text[]) on two of the names (a set), work in its own
#            transaction, COMMIT, zk_unlock(text[]); it counts as a section
#            of each of its names
# The work is a row per name written in the worker's own cluster inside the
# transaction (track_commit_timestamp = on).  Every cycle's times go to a
# file of the worker's own: when it asked, when it got the lock (the
# backend's clock), when the work ended, when the release returned, and
# how it ended.  A cycle whose lock was lost cannot commit and counts as
# failed.
#
# Meanwhile a nemesis strikes, one fault at a time: kill, pause and restart
# one ZooKeeper server; pause all of them past the session timeout; freeze
# (SIGSTOP) a backend that holds its lock past its session timeout; cut one
# backend's connection to its server (a proxy in front of it) for a random
# time; terminate a backend.  The first 5 s of the run (10 s of a run of
# five minutes or more) and a quiet spell after each fault have no fault
# under way.  Until each kind the judgement asks for has struck once, the
# nemesis strikes those in turn, the quickest first; the default 60 s has
# room for that first round at the longest spans of each fault.
#
# Network partitions, when this process may make network namespaces
# (test/perl/ZkNet.pm; test/checker.sh and make test run it so as root):
# every server, every cluster and the checker itself then sit in namespaces
# of their own behind one router, and a partition drops packets silently
# (connections hang; nothing is refused) for a random span around the
# session timeout, then heals:
#   isolate  one server cut from the other servers, the checker (and the
#            proxies in it) and a random half of the clusters
#   split    one server and a cluster that holds a lock (the minority)
#            cut from the rest (the majority)
#   bridge   one server sees both halves; a cluster that holds a lock with
#            a second server in one, the rest in the other
#   cluster  one cluster cut from every server and the checker
#   standby  cluster c1 commits synchronously to a standby in a namespace
#            of its own: c1 cut from its standby and the ensemble at once
# During each partition a TCP connect from its cut side to a server across
# the cut must hang (not be refused), and after the heal connect.
#
# A worker's queries each have their own timeout; a worker whose backend
# was frozen, cut off or terminated reconnects and carries on, counting
# that cycle as failed; one that cannot carry on says why.  Every worker
# runs to the deadline.  A progress line comes every minute.
#
# Then, from every worker's file and every cluster's committed rows:
#   - no two critical sections of one lock overlap, and never more than two
#     of one semaphore, judged both by the worker's times (acquisition to
#     end of work) and by the committed rows (acquisition to the commit's
#     timestamp), across all clusters;
#   - tokens of a lock increase in acquisition order;
#   - with the standby: a commit of c1 whose COMMIT returned more than a
#     second after the next holder of one of its locks had it (by the
#     workers' clocks: the commit waited for the
#     standby across a partition, and the lock was lost meanwhile) is named
#     as warned in the summary: its work committed inside its section by
#     the commit timestamp, but became visible after the hand-off;
#   - every cycle completed or failed, every completed cycle committed its
#     row (a row whose commit the worker could not hear of is "in doubt");
#   - lost wake-ups: when a lock was released while someone waited for it,
#     the next holder got it within LOST_WAKEUP_S of the release, or of the
#     moment the last fault before had settled (two session timeouts after
#     its end), whichever came later.
# The summary is printed whatever happens (and written to
# ZKLOCK_CHECK_SUMMARY when set); every process the checker starts is
# stopped by PID at the end, however it ends.
#
# Defaults suit make test; test/checker.sh runs it longer:
#   ZKLOCK_CHECK_SECONDS (60), ZKLOCK_CHECK_CLUSTERS (2),
#   ZKLOCK_CHECK_BACKENDS (8 per cluster), ZKLOCK_CHECK_LOCKS (2),
#   ZKLOCK_CHECK_PARTITIONS (every shape; or some, e.g. "standby,bridge":
#   the first is the one a short run strikes)

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";

use File::Spec;
use POSIX ();
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);
use ZkEnsemble;
use ZkNet;
use ZkProxy;
use ZklockTest;

my $SECONDS = $ENV{ZKLOCK_CHECK_SECONDS} // 60;
my $CLUSTERS = $ENV{ZKLOCK_CHECK_CLUSTERS} // 2;
my $BACKENDS = $ENV{ZKLOCK_CHECK_BACKENDS} // 8;
my $LOCKS = $ENV{ZKLOCK_CHECK_LOCKS} // 2;
my $SESSION_TIMEOUT_MS = 4000;
my $LOCK_WAIT_S = 60;          # a lost wake-up shows as a gap, not a timeout
my $QUERY_TIMEOUT_S = 120;     # per query: longer than any lock wait
my $LOST_WAKEUP_S = 5;
my $SETTLE_S = 2 * $SESSION_TIMEOUT_MS / 1000;
my $WARMUP_S = $SECONDS >= 300 ? 10 : 5;
my $QUIET = $SECONDS >= 300 ? [ 4, 12 ] : [ 1, 2 ];    # between faults
my $PAUSE_ALL_EVERY_S = $SECONDS >= 300 ? 180 : 15;
my $dir = File::Spec->rel2abs(PostgreSQL::Test::Utils::tempdir('checker'));

# The network: servers zk1..zk3, clusters pg0.. (c1.. by name), c1's
# standby sb, and ctl, where this process and the proxies live.
my $no_net = ZkNet::unavailable();
my $net;
if ($no_net eq '')
{
	$net = ZkNet->new(nodes => [ (map { "zk$_" } 1 .. 3),
		(map { "pg$_" } 0 .. $CLUSTERS - 1), 'sb', 'ctl' ]);
	$net->enter('ctl');
}
else
{
	diag("checker: no network partitions: $no_net");
}
# Runs code with this process in a node's namespace, when there is a network.
my $in = sub { my ($node, $code) = @_; return $net ? $net->in($node, $code) : $code->(); };

my $zk = ZkEnsemble->new(servers => 3,
	$net ? (address => sub { $net->addr("zk$_[0]") },
		spawn_hook => sub { $net->join_child("zk$_[0]") }) : ());
my @clusters = map {
	my $c = $_;
	$in->("pg$c", sub {
		zk_cluster('c' . ($c + 1), $zk, max_connections => $BACKENDS + 10,
			session_timeout => $SESSION_TIMEOUT_MS,
			conf => [ 'track_commit_timestamp = on',
				($net && $c == 0 ? ('wal_level = replica', 'max_wal_senders = 4',
					"listen_addresses = '" . $net->addr('pg0') . "'") : ()) ])
	});
} 0 .. $CLUSTERS - 1;
$_->safe_psql('postgres', 'CREATE TABLE work (lock text, cycle text, t_start float8)')
  for @clusters;
my $rec = PostgreSQL::Test::Cluster->new('recorder');
$rec->init;
$rec->start;

# c1 commits synchronously to a standby that reaches it over the network.
my $standby;
if ($net)
{
	my $p = $clusters[0];
	$p->append_conf('pg_hba.conf', "host replication all 10.83.0.0/16 trust
");
	$p->reload;
	$p->backup('sb');
	$standby = PostgreSQL::Test::Cluster->new('c1_standby');
	$standby->init_from_backup($p, 'sb', has_streaming => 1);
	$standby->append_conf('postgresql.conf', join("\n", "listen_addresses = ''",
		"cluster_name = 'c1_standby'",
		"primary_conninfo = 'host=" . $net->addr('pg0') . ' port=' . $p->port
		  . " user=postgres application_name=sb'") . "\n");
	$in->('sb', sub { $standby->start });
	$p->safe_psql('postgres', "ALTER SYSTEM SET synchronous_standby_names = 'sb'");
	$p->reload;
	$p->poll_query_until('postgres',
		"SELECT sync_state = 'sync' FROM pg_stat_replication WHERE application_name = 'sb'")
	  or die 'the standby of c1 did not become synchronous';
}

# The first backend of each cluster reaches one server through a proxy of
# its own, so that the nemesis can cut exactly that backend off.
my %proxy;
for my $c (0 .. $#clusters)
{
	my $i = 1 + $c % 3;
	$proxy{"c$c-b1"} = ZkProxy->new($zk->port($i),
		$net ? (listen => $net->addr('ctl'), target_host => $net->addr("zk$i")) : ());
}

# --- the workers

sub worker
{
	my ($c, $b, $deadline) = @_;
	my $id = "c$c-b$b";
	my $cluster = $clusters[$c];
	my %n = (attempts => 0, completed => 0, failed => 0, reconnects => 0);
	my $why = '';
	open(my $log, '>>', "$dir/$id.tsv") or die "$id.tsv: $!";
	$log->autoflush(1);
	my $db;

	# A new backend; false when none could be had for a minute.
	my $connect = sub {
		my $until = time + 60;
		while (time < $until)
		{
			eval { $db->{run}->kill_kill if $db && $db->{run}; };
			$db = eval {
				my $s = $cluster->background_psql('postgres',
					on_error_stop => 0, timeout => $QUERY_TIMEOUT_S);
				$s->set_query_timer_restart;
				$s->query_safe("SET zklock.session_timeout = '${SESSION_TIMEOUT_MS}ms'");
				$s->query_safe("SET zklock.hosts = '" . ($net ? $net->addr('ctl') : '127.0.0.1')
					  . ':' . $proxy{$id}->port . "'")
				  if $proxy{$id};
				$s;
			};
			return 1 if $db;
			$why = "cannot connect: $@";
			sleep 1;
		}
		return 0;
	};
	# One statement: (output, stderr, whether the backend is gone).
	my $q = sub {
		my ($sql) = @_;
		my $out;
		my $ok = eval { ($out) = $db->query($sql); 1 };
		return ('', "psql: $@", 1) unless $ok;
		my $err = $db->{stderr};
		$db->{stderr} = '';
		my $gone = $err =~ /connection to server was lost|server closed the connection|terminating connection|no connection to the server/;
		return ($out // '', $err, $gone);
	};
	my $first = sub { my ($e) = @_; $e =~ /(?:ERROR|FATAL|psql):\s*([^\n]*)/; return $1 // $e; };

	$connect->() or return ($why, %n);
	my $seq = 0;
	while (time < $deadline)
	{
		my $r = rand();
		my $kind = $r < 0.4 ? 'xact' : $r < 0.65 ? 'session' : $r < 0.85 ? 'sem' : 'set';
		$kind = 'session' if $kind eq 'set' && $LOCKS < 2;
		my $lock = ($kind eq 'sem' ? 'sem-' : 'check-') . int(rand($LOCKS));
		# A set: two names in a random order, as "a,b" in the records.
		if ($kind eq 'set')
		{
			my $other = 'check-' . ((($lock =~ /(\d+)$/)[0] + 1 + int(rand($LOCKS - 1))) % $LOCKS);
			$lock = rand() < 0.5 ? "$lock,$other" : "$other,$lock";
		}
		my $names = "ARRAY['" . join("','", split(/,/, $lock)) . "']";
		my $cycle = "$id-" . ++$seq;
		my %row = (t_call => time);
		my ($out, $err, $gone, $outcome);
		$n{attempts}++;

		my $take = $kind eq 'xact' ? "BEGIN; SELECT zk_xact_lock('$lock', '${LOCK_WAIT_S}s')"
		  : $kind eq 'sem' ? "BEGIN; SELECT zk_xact_semaphore('$lock', 2, '${LOCK_WAIT_S}s')"
		  : $kind eq 'set' ? "SELECT array_to_string(zk_lock($names, '${LOCK_WAIT_S}s'), ':')"
		  : "SELECT zk_lock('$lock', '${LOCK_WAIT_S}s')";
		($out, $err, $gone) = $q->("$take || ',' || extract(epoch from clock_timestamp())");
		if (!$gone && $err !~ /ERROR/ && $out =~ /^([\d:]+),([\d.]+)$/)
		{
			@row{qw(token t_start)} = ($1, $2);
			my $begin = $kind =~ /^(session|set)$/ ? 'BEGIN; ' : '';
			($out, $err, $gone) = $q->("${begin}INSERT INTO work SELECT n, '$cycle', $row{t_start} "
				  . "FROM unnest($names) n; "
				  . 'SELECT pg_sleep(random() * 0.005); SELECT extract(epoch from clock_timestamp())');
			$row{t_end} = $1 if $out =~ /([\d.]+)\s*$/;
			if (!$gone)
			{
				my ($o2, $e2);
				($o2, $e2, $gone) = $q->('COMMIT');
				$err .= $e2;
				$row{t_commit_seen} = time unless $gone;
				if (!$gone && $kind =~ /^(session|set)$/)
				{
					my ($o3, $e3);
					my $what = $kind eq 'set' ? $names : "'$lock'";
					($o3, $e3, $gone) = $q->("SELECT zk_unlock($what)");
				}
				$row{t_release} = time unless $gone;
			}
			$outcome = $gone ? 'failed: backend gone: ' . $first->($err)
			  : $err =~ /ERROR/ ? 'failed: ' . $first->($err)
			  : 'committed';
		}
		else
		{
			$outcome = 'failed: not acquired: ' . $first->($err || $out);
			$q->('ROLLBACK') unless $gone;
		}
		$outcome =~ s/[\t\n\\]/ /g;
		print $log join("\t", $id, $cycle, $kind, $lock,
			map({ $row{$_} // '\N' } qw(token t_call t_start t_end t_commit_seen t_release)), $outcome), "\n";
		$n{ $outcome eq 'committed' ? 'completed' : 'failed' }++;
		if ($gone)
		{
			$n{reconnects}++;
			$connect->() or return ($why, %n);
		}
	}
	eval { $db->quit };
	return ('', %n);
}

my $deadline = time + $SECONDS;
my %kids;
for my $c (0 .. $#clusters)
{
	for my $b (1 .. $BACKENDS)
	{
		my $pid = fork() // die "fork: $!";
		if ($pid == 0)
		{
			# The psql sessions' notes would flood the test's output.
			Test::More->builder->output(File::Spec->devnull);
			my ($why, %n) = eval { worker($c, $b, $deadline) };
			$why = "died: $@" unless defined $why;
			$why =~ s/\s+/ /g;
			if (open(my $fh, '>', "$dir/c$c-b$b.done"))
			{
				print $fh join("\t", "c$c-b$b",
					map({ $n{$_} // 0 } qw(attempts completed failed reconnects)), $why), "\n";
				close $fh;
			}
			POSIX::_exit(0);    # no END blocks: the parent owns the servers
		}
		$kids{$pid} = "c$c-b$b";
	}
}

# Every worker still running is stopped by PID, however the checker ends.
END
{
	kill 'KILL', keys %kids if %kids;
	waitpid($_, 0) for keys %kids;
}

# --- the nemesis: one fault at a time, with quiet spells between

my @SHAPES = grep { my $s = $_; !$ENV{ZKLOCK_CHECK_PARTITIONS}
	  || grep { $_ eq $s } split /,/, $ENV{ZKLOCK_CHECK_PARTITIONS} }
  $net ? qw(split isolate bridge cluster standby) : ();
my %faults = map { $_ => 0 } qw(kill pause pause_all freeze cut terminate), @SHAPES;
my @windows;    # [kind, begin, end]
my %probes = (hangs => 0, connected => 0);    # across cuts, and after heals
my @probe_odd;                                # what the others gave

sub fault
{
	my ($kind, $code) = @_;
	my $begin = time;
	my $struck = $code->();
	push @windows, [ $kind, $begin, time ] if $struck;
	$faults{$kind} += $struck ? 1 : 0;
}

# A backend of a random cluster that holds its lock and is between
# statements, or undef.
sub holder_pid
{
	my $c = $clusters[ int(rand(@clusters)) ];
	for (1 .. 20)
	{
		my $pid = $c->safe_psql('postgres', q{
			SELECT pid FROM pg_stat_activity
			 WHERE state IN ('idle in transaction', 'idle')
			   AND query ~ 'zk_(xact_lock|lock|xact_semaphore)\('
			   AND query !~ 'zk_unlock'
			 ORDER BY random() LIMIT 1});
		return ($c, $pid) if $pid =~ /^\d+$/;
		sleep 0.05;
	}
	return;
}

# A cluster (index) one of whose backends holds its lock, else a random one.
sub holding_cluster
{
	my ($c) = holder_pid();
	return $c ? (grep { $clusters[$_] == $c } 0 .. $#clusters)[0] : int(rand(@clusters));
}

# A partition of one of the shapes: cut, check from a node of the cut side
# that a server across the cut cannot be reached (the connect hangs), hold
# for a random span around the session timeout, heal, and check that it can.
sub partition
{
	my ($shape) = @_;
	my @zk = map { "zk$_" } 1 .. 3;
	my @pg = map { "pg$_" } 0 .. $#clusters;
	my $i = 1 + int(rand(3));
	my (@a, @b, $from, $to);
	if ($shape eq 'isolate')
	{
		@a = ("zk$i");
		my @reach = grep { rand() < 0.5 } @pg;
		@b = ((grep { $_ ne "zk$i" } @zk), 'ctl', grep { my $p = $_; !grep { $_ eq $p } @reach } @pg);
		($from, $to) = ($b[0], $i);
	}
	elsif ($shape eq 'split')
	{
		my $c = holding_cluster();
		@a = ("zk$i", "pg$c");
		@b = ((grep { $_ ne "zk$i" } @zk), 'ctl', grep { $_ ne "pg$c" } @pg);
		($from, $to) = ("pg$c", 1 + $i % 3);
	}
	elsif ($shape eq 'bridge')
	{
		my $c = holding_cluster();
		my $x = 1 + $i % 3;
		my $y = 1 + ($i + 1) % 3;
		@a = ("zk$x", "pg$c");
		@b = ("zk$y", 'ctl', grep { $_ ne "pg$c" } @pg);
		($from, $to) = ("pg$c", $y);
	}
	elsif ($shape eq 'cluster')
	{
		my $c = int(rand(@clusters));
		@a = ("pg$c");
		@b = (@zk, 'ctl');
		($from, $to) = ("pg$c", $i);
	}
	else
	{
		@a = ('pg0');
		@b = (@zk, 'ctl', 'sb');
		($from, $to) = ('pg0', $i);
	}
	$net->cut(\@a, \@b);
	my $ok = eval {
		my $p = $net->probe($from, $net->addr("zk$to"), $zk->port($to), 1);
		$p eq 'hangs' ? $probes{hangs}++ : push @probe_odd, "$shape: $from to zk$to across the cut: $p";
		sleep(($SESSION_TIMEOUT_MS / 1000) * (0.5 + rand(1.5)));
		1;
	};
	my $err = $@;
	$net->heal;
	die $err unless $ok;
	my $p = $net->probe($from, $net->addr("zk$to"), $zk->port($to), 5);
	$p eq 'connected' ? $probes{connected}++ : push @probe_odd, "$shape: $from to zk$to after the heal: $p";
	return 1;
}

sub progress
{
	my ($done, $failed) = (0, 0);
	for my $f (glob("$dir/*.tsv"))
	{
		open(my $fh, '<', $f) or next;
		while (<$fh>)
		{
			/\tcommitted$/ ? $done++ : $failed++;
		}
	}
	return ($done, $failed);
}

my $t_start = time;
my $next_progress = $t_start + 60;
my $last_all = $t_start;
sleep $WARMUP_S;
# A nemesis that fails (a server that does not come back) ends the faults,
# not the run: the workers and the judgement go on.
my $nemesis_ok = eval {
while (time < $deadline - 3)
{
	my $i = 1 + int(rand(3));
	my $r = rand();
	# Until each kind the judgement asks for has struck once, the nemesis
	# tries them in turn, the quickest first, and only then pauses the
	# whole ensemble.
	my ($untried) = grep { $faults{$_} == 0 } qw(terminate pause freeze cut),
	  (@SHAPES ? $SHAPES[0] : ());
	$r = { freeze => 0, cut => 0.3, terminate => 0.5, pause => 0.9 }->{$untried} // $untried
	  if defined $untried;
	# With a network, two faults in five are partitions of a random shape.
	$r = $SHAPES[ int(rand(@SHAPES)) ] if @SHAPES && !defined $untried && rand() < 0.4;
	if ($r =~ /^[a-z]/)
	{
		my $shape = $r;
		fault($shape, sub { partition($shape) });
	}
	elsif (!defined $untried && time - $last_all > $PAUSE_ALL_EVERY_S && time < $deadline - 10)
	{
		fault('pause_all', sub {
			$zk->pause_server($_) for 1 .. 3;
			sleep(($SESSION_TIMEOUT_MS / 1000) * 1.5);
			$zk->resume_server($_) for 1 .. 3;
			1;
		});
		$last_all = time;
	}
	elsif ($r < 0.25)
	{
		fault('freeze', sub {
			my ($c, $pid) = holder_pid() or return 0;
			kill 'STOP', $pid;
			sleep(($SESSION_TIMEOUT_MS / 1000) * 1.5);
			kill 'CONT', $pid;
			1;
		});
	}
	elsif ($r < 0.45)
	{
		fault('cut', sub {
			my @ids = sort keys %proxy;
			my $p = $proxy{ $ids[ int(rand(@ids)) ] };
			$p->mode('cut');
			sleep 0.5 + rand(2 * $SESSION_TIMEOUT_MS / 1000);
			$p->mode('pass');
			1;
		});
	}
	elsif ($r < 0.55)
	{
		fault('terminate', sub {
			my ($c, $pid) = holder_pid() or return 0;
			$c->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
			1;
		});
	}
	elsif ($r < 0.8)
	{
		fault('kill', sub {
			$zk->kill_server($i);
			sleep 1 + rand(2);
			$zk->restart_server($i, 60);
			1;
		});
	}
	else
	{
		fault('pause', sub {
			$zk->pause_server($i);
			sleep 0.5 + rand(2.5);
			$zk->resume_server($i);
			1;
		});
	}
	$zk->wait_for_quorum(60);
	if (time >= $next_progress)
	{
		my ($done, $failed) = progress();
		diag(sprintf('checker: progress %d s: cycles done %d, failed %d; faults %s',
			time - $t_start, $done, $failed,
			join(', ', map { "$_ $faults{$_}" } sort keys %faults)));
		$next_progress += 60;
	}
	sleep $QUIET->[0] + rand($QUIET->[1] - $QUIET->[0]);
}
1;
};
my $nemesis_error = $nemesis_ok ? '' : "$@";
diag("checker: the nemesis failed: $nemesis_error") unless $nemesis_ok;

# Workers end at the deadline, each query within its own timeout.
my $wait_until = $deadline + $QUERY_TIMEOUT_S + 30;
while (%kids && time < $wait_until)
{
	my $pid = waitpid(-1, POSIX::WNOHANG);
	if ($pid > 0) { delete $kids{$pid}; next; }
	sleep 0.2;
}
my @stuck = sort values %kids;
kill 'KILL', keys %kids;
waitpid($_, 0) for keys %kids;
%kids = ();

# --- judge

$rec->safe_psql('postgres', q{
	CREATE TABLE acq_row (worker text, cycle text, kind text, locks text, tokens text,
	                  t_call float8, t_start float8, t_end float8, t_commit_seen float8,
	                  t_release float8, outcome text);
	CREATE TABLE done (worker text, attempts int, completed int, failed int,
	                   reconnects int, why text);
	CREATE TABLE committed (lock text, cycle text, t_start float8, t_commit float8);
	CREATE TABLE faults (kind text, t_begin float8, t_end float8);
});
$rec->safe_psql('postgres', "COPY acq_row FROM '$_'") for glob("$dir/*.tsv");
# A set's cycle is a section of each of its names, with that name's token.
$rec->safe_psql('postgres', q{
	CREATE VIEW acq AS
	SELECT worker, cycle, kind, l.lock, split_part(tokens, ':', l.n::int)::bigint AS token,
	       t_call, t_start, t_end, t_commit_seen, t_release, outcome
	  FROM acq_row, unnest(string_to_array(locks, ',')) WITH ORDINALITY AS l(lock, n)});
$rec->safe_psql('postgres', "COPY done FROM '$_'") for glob("$dir/*.done");
$rec->safe_psql('postgres', 'INSERT INTO faults VALUES '
	  . join(',', map { "('$_->[0]', $_->[1], $_->[2])" } @windows))
  if @windows;
for my $c (@clusters)
{
	my $f = "$dir/committed-" . $c->name;
	$c->safe_psql('postgres', "COPY (SELECT lock, cycle, t_start, "
		  . "extract(epoch from pg_xact_commit_timestamp(xmin)) FROM work) TO '$f'");
	$rec->safe_psql('postgres', "COPY committed FROM '$f'");
}

my $sql = sub { my $v = $rec->safe_psql('postgres', $_[0]); return $v eq '' ? 0 : $v; };

# How many sections of one lock are under way at once, at most above its
# limit (1, or 2 for a semaphore): a sweep over starts and ends, an end
# before a start at the same instant.
sub excess
{
	my ($table, $from, $to) = @_;
	return $sql->(qq{
		SELECT count(*) FROM (
		  SELECT lock, sum(d) OVER (PARTITION BY lock ORDER BY t, d
		                            ROWS UNBOUNDED PRECEDING) AS n
		    FROM (SELECT lock, $from AS t, 1 AS d FROM $table
		           WHERE $from IS NOT NULL AND $to IS NOT NULL
		          UNION ALL
		          SELECT lock, $to, -1 FROM $table
		           WHERE $from IS NOT NULL AND $to IS NOT NULL) e) s
		 WHERE n > CASE WHEN lock LIKE 'sem-%' THEN 2 ELSE 1 END});
}

my ($attempts, $completed, $failed, $reconnects) = split /\|/,
  $sql->('SELECT sum(attempts), sum(completed), sum(failed), sum(reconnects) FROM done');
my $finished = $sql->("SELECT count(*) FROM done WHERE why = ''");
my $gave_up = $rec->safe_psql('postgres', "SELECT string_agg(worker || ': ' || why, '; ') FROM done WHERE why <> ''");
my $by_kind = $rec->safe_psql('postgres', q{
	SELECT string_agg(kind || ' ' || ok || '/' || n, ', ' ORDER BY kind) FROM (
	  SELECT kind, count(*) FILTER (WHERE outcome = 'committed') AS ok, count(*) AS n
	    FROM acq_row GROUP BY kind) k});
my $reasons = $rec->safe_psql('postgres', q{
	SELECT string_agg(n || ' x ' || r, '; ' ORDER BY n DESC) FROM (
	  SELECT left(regexp_replace(outcome, '"[^"]*"|[0-9]+', '_', 'g'), 90) AS r, count(*) AS n
	    FROM acq_row WHERE outcome <> 'committed' GROUP BY 1 ORDER BY 2 DESC LIMIT 6) x});
$rec->safe_psql('postgres', q{CREATE VIEW cs AS SELECT * FROM acq WHERE outcome = 'committed'});
my $overlaps = excess('cs', 't_start', 't_end');
my $committed_overlaps = excess('committed', 't_start', 't_commit');
my $disorder = $sql->(q{
	SELECT count(*) FROM (
	  SELECT token, lag(token) OVER (PARTITION BY lock ORDER BY t_start) AS prev
	    FROM cs WHERE kind <> 'sem') x WHERE token <= prev});
my $recorded = $sql->('SELECT count(*) FROM acq_row');
my $committed = $sql->('SELECT count(DISTINCT cycle) FROM committed');
my $missing = $sql->(q{SELECT count(*) FROM cs
	WHERE NOT EXISTS (SELECT 1 FROM committed c WHERE c.cycle = cs.cycle AND c.lock = cs.lock)});
my $in_doubt = $sql->(q{
	SELECT count(DISTINCT cycle) FROM committed c JOIN acq_row a USING (cycle) WHERE a.outcome <> 'committed'});
my $in_doubt_unexplained = $sql->(q{
	SELECT count(DISTINCT cycle) FROM committed c JOIN acq_row a USING (cycle)
	 WHERE a.outcome <> 'committed' AND a.outcome NOT LIKE 'failed: backend gone%'});
# c1's commits that returned only after the next holder of one of their
# locks had it (by the workers' clocks): with the synchronous standby, the
# commit waited across a partition while the lock was lost.
my $warned = $rec->safe_psql('postgres', q{
	SELECT string_agg(DISTINCT cycle || ' (' || lock || ', visible '
	                  || round((t_commit_seen - next_start)::numeric, 3) || ' s after the next holder took it)', '; ')
	  FROM (SELECT cycle, worker, lock, t_commit_seen,
	               lead(t_start) OVER (PARTITION BY lock ORDER BY t_start) AS next_start
	          FROM cs WHERE kind <> 'sem') x
	 WHERE worker LIKE 'c0-%' AND t_commit_seen > next_start + 1});
my $n_warned = $warned eq '' ? 0 : scalar(() = $warned =~ /\(check-/g);
my ($slow_commits, $slowest_commit) = split /\|/, $sql->(q{
	SELECT count(*) FILTER (WHERE t_commit_seen - t_end > 1),
	       coalesce(round(max(t_commit_seen - t_end)::numeric, 3), 0)
	  FROM acq_row WHERE worker LIKE 'c0-%' AND outcome = 'committed'});

# Hand-offs: each acquisition of an exclusive lock after the previous
# holder's release, by someone who was already waiting then.  The lock is
# due from the release on, or from when the last fault before the
# acquisition had settled, whichever is later; an acquisition more than
# LOST_WAKEUP_S after that is a lost wake-up (or a lock nobody could take
# for that long, which a waiter cannot tell apart).
$rec->safe_psql('postgres', qq{
	CREATE VIEW handoffs AS
	SELECT h.*, greatest(released, (SELECT max(f.t_end + $SETTLE_S) FROM faults f
	                                  WHERE f.t_begin < h.t_start)) AS due
	  FROM (SELECT lock, kind, t_call, t_start,
	               lag(t_release) OVER (PARTITION BY lock ORDER BY t_start) AS released
	          FROM acq WHERE kind <> 'sem' AND t_start IS NOT NULL) h
	 WHERE released IS NOT NULL AND t_call < released AND t_start >= released
	   AND kind <> 'set'});
my ($handoffs, $longest_gap, $lost_wakeups) = split /\|/, $sql->(qq{
	SELECT count(*) FILTER (WHERE due = released),
	       coalesce(round(max(t_start - due)::numeric, 3), 0),
	       count(*) FILTER (WHERE t_start - due > $LOST_WAKEUP_S) FROM handoffs});

my $commit = $ENV{ZKLOCK_CHECK_COMMIT} // 'unknown';
my @summary = (
	sprintf('checker: %s, commit %s', POSIX::strftime('%Y-%m-%d %H:%M:%S UTC', gmtime($t_start)), $commit),
	sprintf('checker: %d clusters x %d backends, %d s, %d locks (also taken two at a time as sets) and %d semaphores (limit 2), session timeout %d ms',
		$CLUSTERS, $BACKENDS, $SECONDS, $LOCKS, $LOCKS, $SESSION_TIMEOUT_MS),
	'checker: network: ' . ($net ? 'every server, cluster and the checker in a namespace of its own, '
		  . 'partitions by silent drops; c1 commits synchronously to a standby'
		  : "none, no partitions ($no_net)"),
	sprintf('checker: workers finished %d of %d%s%s', $finished, $CLUSTERS * $BACKENDS,
		@stuck ? '; stopped at the bound: ' . join(' ', @stuck) : '',
		$gave_up ne '' ? "; gave up: $gave_up" : ''),
	"checker: cycles done $completed, failed $failed (by kind, done/all: $by_kind); reconnects $reconnects",
	"checker: failures: " . ($reasons || 'none'),
	'checker: faults: ' . join(', ', map { "$_ $faults{$_}" } sort keys %faults)
	  . ($nemesis_error ne '' ? "; the nemesis failed: $nemesis_error" : ''),
	($net ? ("checker: partitions checked: connects across a cut that hung $probes{hangs}, "
		  . "connected after the heal $probes{connected}"
		  . (@probe_odd ? '; otherwise: ' . join('; ', @probe_odd) : '')) : ()),
	"checker: overlaps $overlaps, committed rows $committed, overlapping from acquisition to commit $committed_overlaps, tokens out of order $disorder",
	"checker: completed cycles without their row $missing; rows committed although the worker saw the cycle fail (in doubt) $in_doubt",
	"checker: hand-offs outside faults $handoffs, longest wait past due ${longest_gap} s, lost wake-ups (> ${LOST_WAKEUP_S} s) $lost_wakeups",
	($net ? "checker: commits of c1 (synchronous standby) that took over 1 s $slow_commits (the longest $slowest_commit s); "
		  . 'visible only after the next holder took the lock (warned): '
		  . ($n_warned ? "$n_warned: $warned" : 'none') : ()),
);
diag($_) for @summary;
if (my $f = $ENV{ZKLOCK_CHECK_SUMMARY})
{
	open(my $fh, '>', $f) or die "$f: $!";
	print $fh map { s/^checker: //r . "\n" } @summary;
	close $fh;
}

is($nemesis_error, '', 'the nemesis ran to the deadline');
is(scalar @stuck, 0, 'every worker ended by the deadline and its bound');
is($finished, $CLUSTERS * $BACKENDS, 'every worker ran to the deadline');
ok($completed > 0, 'critical sections completed');
is($attempts, $completed + $failed, 'every cycle completed or failed: none vanished');
is($recorded, $attempts, 'every cycle is recorded');
is($overlaps, 0, 'no two critical sections of one lock overlap, nor three of one semaphore');
is($missing, 0, 'every completed cycle committed its row');
is($in_doubt_unexplained, 0, 'a committed row of a failed cycle only where the backend went away');
is($committed_overlaps, 0, 'no two committed sections of one lock overlap from acquisition to commit, nor three of one semaphore');
is($disorder, 0, 'tokens increase in acquisition order');
ok($handoffs > 0, 'hand-offs were judged outside faults');
is($lost_wakeups, 0, 'no lost wake-ups');
# When a kind of fault is missing, when each fault struck, in seconds from
# the start.
my $timeline = sub {
	diag('checker: faults struck (s from the start): '
		  . join(', ', map { sprintf('%s %.1f-%.1f', $_->[0], $_->[1] - $t_start, $_->[2] - $t_start) }
			  @windows));
};
ok($faults{kill} + $faults{pause} + $faults{pause_all} > 0, 'the nemesis struck servers')
  or $timeline->();
ok($faults{freeze} > 0, 'the nemesis froze holders') or $timeline->();
ok($faults{cut} > 0, 'the nemesis cut a backend off') or $timeline->();
ok($faults{terminate} > 0 && $reconnects > 0,
	'the nemesis terminated backends, and their workers reconnected') or $timeline->();
SKIP:
{
	skip "no network partitions: $no_net", 3 unless $net;
	ok((grep { $faults{$_} > 0 } @SHAPES) > 0, 'the nemesis partitioned the network')
	  or diag('shapes: ' . join(' ', @SHAPES)) or $timeline->();
	is(scalar @probe_odd, 0, 'every connect across a cut hung, and connected after the heal');
	ok($probes{hangs} > 0 && $probes{connected} > 0, 'partitions were checked from their cut side');
}

# The sweep that counts overlaps finds the ones it is shown: two sections
# of a lock, three of a semaphore, and none where one ends as one starts.
$rec->safe_psql('postgres', q{
	CREATE TABLE probe (lock text, t_start float8, t_end float8);
	INSERT INTO probe VALUES ('check-p', 0, 2), ('check-p', 1, 3), ('check-p', 3, 4),
	  ('sem-p', 0, 5), ('sem-p', 1, 5), ('sem-p', 5, 6), ('sem-p', 2, 5)});
is(excess('probe', 't_start', 't_end'), 2, 'the overlap sweep finds overlaps');

$rec->stop('fast');
$standby->stop('fast') if $standby;
$_->stop('fast') for @clusters;
$_->stop for values %proxy;
$zk->stop;
if ($net)
{
	my @inside = $net->stop;
	is(scalar @inside, 0, 'nothing is left in the namespaces, and they are gone')
	  or diag('still inside: ' . join(' ', @inside));
}
done_testing();
