# Copyright (c) zklock contributors
#
# Migration tools serialized across the fleet, unchanged (issue 44): three
# clusters on one ensemble deploy the same release at the same moment with
# sqitch, Rails' ActiveRecord and node-pg-migrate, each of which takes its
# own pg_advisory_lock before it migrates.  The migration records when it
# started and ended and takes five seconds, longer than the tools' start
# may be apart.  In a database where the role's
# zklock.fleet_advisory_keys lists the tools' keys (README.md, "Migration
# tools"), no two clusters migrate at once and every cluster ends with the
# release; a tool that says "already running" instead of waiting is run
# again, as a deployer would.  In a database without the setting the
# clusters migrate at once: the problem the setting solves.
#
# One cluster loads zklock by shared_preload_libraries, the other two by
# the deployer role's session_preload_libraries: both must route.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";

use File::Path qw(make_path);
use IPC::Run ();
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use ZkEnsemble;
use ZklockTest;

# The tools: Debian's sqitch and ActiveRecord, npm's node-pg-migrate 9
# (test/npm_tools.sh installs it under ZKLOCK_PG_CACHE; make test's
# dependency step runs it).
my $npm_dir = ($ENV{ZKLOCK_PG_CACHE} // '/var/cache/zklock') . '/npm';
my $npm_bin = "$npm_dir/node_modules/.bin/node-pg-migrate";
my @missing;
push @missing, 'sqitch' unless -x '/usr/bin/sqitch';
push @missing, 'ruby-activerecord'
  unless system('ruby -e "require %q(active_record); require %q(pg)" >/dev/null 2>&1') == 0;
push @missing, "node-pg-migrate ($npm_bin)" unless -x $npm_bin;
plan skip_all => 'missing: ' . join(', ', @missing) . ' (sh test/deps.sh test)'
  if @missing;

my $zk = ZkEnsemble->new(servers => 3);
my @nodes = (
	zk_cluster('east', $zk, preload => 1),
	zk_cluster('west', $zk),
	zk_cluster('north', $zk));

# The tools' keys (README.md, "Migration tools"): sqitch's and
# node-pg-migrate's are constants; ActiveRecord's is 2053462845 times the
# CRC-32 of the database's name.
my $ar_key = `ruby -rzlib -e 'print 2053462845 * Zlib.crc32(%q(app))'`;
like($ar_key, qr/^\d+$/, "ActiveRecord's key for database app is $ar_key");
my $keys = "75474063, $ar_key, 7241865325823964";

# The deployer, set up as README.md's recipe says, deploys to database
# "app"; "plain", the same without the setting, deploys to "plain".
for my $i (0 .. $#nodes)
{
	my $n = $nodes[$i];
	$n->safe_psql('postgres', qq{
		CREATE ROLE deployer LOGIN;
		CREATE ROLE plain LOGIN;
		CREATE DATABASE app OWNER deployer;
		CREATE DATABASE plain OWNER plain;
		ALTER ROLE deployer SET zklock.fleet_advisory_keys = '$keys';
	});
	$n->safe_psql('postgres', "ALTER ROLE deployer SET session_preload_libraries = 'zklock'")
	  if $i > 0;
	$n->safe_psql($_, 'CREATE EXTENSION zklock') for qw(app plain);
}
is( $nodes[1]->safe_psql('app', 'SHOW zklock.fleet_advisory_keys', extra_params => [ '-U', 'deployer' ]),
	$keys, "session_preload_libraries: the deployer's backend has the role's setting");

# The projects, one per tool, in the test's own directory.
my $work = PostgreSQL::Test::Utils::tempdir;
my $migration = sub {
	my ($table) = @_;
	return "CREATE TABLE $table (started timestamptz, ended timestamptz);\n"
	  . "INSERT INTO $table VALUES (clock_timestamp(), NULL);\n"
	  . "SELECT pg_sleep(5);\n"
	  . "UPDATE $table SET ended = clock_timestamp();\n";
};

make_path("$work/sqitch/deploy", "$work/sqitch/revert", "$work/sqitch/verify");
PostgreSQL::Test::Utils::append_to_file("$work/sqitch/sqitch.conf",
	"[core]\n\tengine = pg\n\tplan_file = sqitch.plan\n\ttop_dir = .\n");
PostgreSQL::Test::Utils::append_to_file("$work/sqitch/sqitch.plan",
	"%syntax-version=1.0.0\n%project=zklock_release\n\n"
	  . "release 2026-11-27T00:00:00Z Deployer <deployer\@example.org> # the release\n");
PostgreSQL::Test::Utils::append_to_file("$work/sqitch/deploy/release.sql",
	"BEGIN;\n" . $migration->('public.release_sqitch') . "COMMIT;\n");
PostgreSQL::Test::Utils::append_to_file("$work/sqitch/revert/release.sql",
	"DROP TABLE public.release_sqitch;\n");

make_path("$work/ar/db/migrate");
PostgreSQL::Test::Utils::append_to_file("$work/ar/db/migrate/20261127000000_release.rb",
	"class Release < ActiveRecord::Migration[6.1]\n  def up\n"
	  . join('', map { "    execute \"$_\"\n" } split /\n/, $migration->('release_ar'))
	  . "  end\nend\n");
PostgreSQL::Test::Utils::append_to_file("$work/ar/migrate.rb", <<'RUBY');
require 'active_record'
ActiveRecord::Base.establish_connection(
  adapter: 'postgresql', host: ENV['PGHOST'], port: ENV['PGPORT'],
  database: ENV['PGDATABASE'], username: ENV['PGUSER'], schema_search_path: 'public')
ActiveRecord::Base.connection.migration_context.migrate
RUBY

make_path("$work/npm/migrations");
PostgreSQL::Test::Utils::append_to_file("$work/npm/migrations/1795737600000_release.js",
	"exports.up = (pgm) => {\n"
	  . join('', map { "  pgm.sql(\"$_\");\n" } split /\n/, $migration->('release_npm'))
	  . "};\nexports.down = false;\n");

# One deploy of a tool to one cluster's database, run again while the tool
# says another deploy holds its lock (at most 60 times, a quarter second
# apart, as a deployer's retry loop); a shell command.
my %tool = (
	sqitch => {
		dir => "$work/sqitch",
		cmd => 'sqitch deploy db:pg:',
		busy => 'Blocked by another instance',
	},
	activerecord => {
		dir => "$work/ar",
		cmd => 'ruby migrate.rb',
		busy => 'ConcurrentMigrationError',
	},
	'node-pg-migrate' => {
		dir => "$work/npm",
		cmd => "$npm_bin up --migrations-dir migrations",
		busy => 'Another migration is already running',
	},
);

sub deploy_all
{
	my ($tool, $db) = @_;
	my $t = $tool{$tool};
	my $user = $db eq 'app' ? 'deployer' : 'plain';
	my (@runs, @out, @pgid);
	for my $i (0 .. $#nodes)
	{
		my $n = $nodes[$i];
		my $script = "cd '$t->{dir}' || exit 2\n"
		  . "i=0\n"
		  . "while [ \$i -lt 60 ]; do\n"
		  . "  out=\$($t->{cmd} 2>&1) && { echo \"\$out\"; echo \"attempts: \$((i + 1))\"; exit 0; }\n"
		  . "  echo \"\$out\"\n"
		  . "  echo \"\$out\" | grep -q '$t->{busy}' || exit 1\n"
		  . "  i=\$((i + 1)); sleep 0.25\n"
		  . "done\nexit 1\n";
		local %ENV = (
			%ENV,
			PGHOST => $n->host,
			PGPORT => $n->port,
			PGUSER => $user,
			PGDATABASE => $db,
			HOME => $work,
			SQITCH_FULLNAME => 'Deployer',
			SQITCH_EMAIL => 'deployer@example.org');
		# node-pg-migrate reads the URL; ActiveRecord would take it over its
		# own configuration
		$ENV{DATABASE_URL} = "postgresql://$user\@/$db?host=" . $n->host . "&port=" . $n->port
		  if $tool eq 'node-pg-migrate';
		# in a process group of its own, so that a timeout ends the tool
		# (ruby, node, sqitch's perl) with the shell
		push @runs,
		  IPC::Run::start([ 'sh', '-c', $script ], '>', \$out[$i], '2>&1',
			init => sub { setpgrp(0, 0) },
			IPC::Run::timeout(120));
		# the shell's pid, the group's id (IPC::Run has no accessor)
		$pgid[$i] = $runs[$i]{KIDS}[0]{PID};
	}
	my @ok;
	for my $i (0 .. $#runs)
	{
		eval { $runs[$i]->finish };
		if ($@)
		{
			kill 'KILL', -$pgid[$i];
			$runs[$i]->kill_kill;
			diag("$tool on " . $nodes[$i]->name . " did not end: $@");
		}
		push @ok, $runs[$i]->result == 0 && !$@;
		diag("$tool on " . $nodes[$i]->name . " failed:\n$out[$i]") unless $ok[-1];
	}
	return (\@ok, \@out);
}

# When each cluster's migration ran, as epoch seconds [start, end].
sub spans
{
	my ($table, $db) = @_;
	return [
		map {
			[ split /\|/, $_->safe_psql($db,
				"SELECT extract(epoch FROM started), extract(epoch FROM ended) FROM $table") ]
		} @nodes ];
}

# The largest overlap of any two spans, in seconds: negative when every two
# are apart (the smallest gap).
sub overlap
{
	my ($spans) = @_;
	my $max;
	for my $i (0 .. $#$spans)
	{
		for my $j ($i + 1 .. $#$spans)
		{
			my ($a, $b) = ($spans->[$i], $spans->[$j]);
			next unless @$a == 2 && @$b == 2;
			my $o = (($a->[1] < $b->[1]) ? $a->[1] : $b->[1]) -
			  (($a->[0] > $b->[0]) ? $a->[0] : $b->[0]);
			$max = $o if !defined $max || $o > $max;
		}
	}
	return $max // 0;
}

my %table = (
	sqitch => 'release_sqitch',
	activerecord => 'release_ar',
	'node-pg-migrate' => 'release_npm');

for my $tool ('sqitch', 'activerecord', 'node-pg-migrate')
{
	# Without the setting: each cluster's lock is its own.
	my $t0 = time;
	my ($ok) = deploy_all($tool, 'plain');
	is_deeply($ok, [ 1, 1, 1 ], "$tool without the setting: every cluster deploys");
	my $o = overlap(spans($table{$tool}, 'plain'));
	ok($o > 0, sprintf("$tool without the setting: the clusters migrate at once (overlap %.1f s)", $o));

	# With it: one cluster at a time, every one with the release.
	($ok, my $out) = deploy_all($tool, 'app');
	is_deeply($ok, [ 1, 1, 1 ], "$tool with the setting: every cluster deploys");
	my $spans = spans($table{$tool}, 'app');
	is(scalar(grep { @$_ == 2 && $_->[1] > $_->[0] } @$spans),
		3, "$tool with the setting: every cluster has the release, its migration ended");
	$o = overlap($spans);
	ok($o < 0, sprintf("$tool with the setting: no two clusters migrate at once (largest overlap %.2f s)", $o));
	note("$tool: " . join('; ', map { /attempts: (\d+)/ ? "$1 attempts" : '?' } @$out));
	note(sprintf("$tool: %.1f s for both runs", time - $t0));
}

# No routed lock is left behind: the tools' sessions have ended.
ok( poll_until(
		sub {
			$nodes[0]->safe_psql('app', 'SELECT count(*) FROM zk_fleet_locks()') eq '0';
		}),
	'no lock is left in ZooKeeper');

finish(nodes => \@nodes, zk => $zk);
done_testing();
