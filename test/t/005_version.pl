
# Copyright (c) zklock contributors

# The extension's version is written once, as default_version in
# zklock.control.  The Makefile reads it from there (EXTVERSION, compiled
# into the magic block that PostgreSQL 18's pg_get_loaded_modules() shows);
# the release is numbered from it in SemVer (1.2 is 1.2.0): META.json
# (PGXN: the distribution's and the extension's version) and
# debian/changelog (the Debian package's upstream version) must say that,
# and CREATE EXTENSION must install the version.  No ZooKeeper is needed:
# loading zklock opens no session.

use strict;
use warnings;

use File::Spec;
use FindBin;
use JSON::PP ();
use PostgreSQL::Test::Cluster;
use Test::More;

my $top = File::Spec->catdir($FindBin::RealBin, File::Spec->updir,
	File::Spec->updir);

# slurp FILE: the text of a file of the tree
sub slurp
{
	my ($name) = @_;
	my $path = File::Spec->catfile($top, $name);
	open my $fh, '<', $path or die "could not open $path: $!";
	local $/;
	return scalar <$fh>;
}

my ($version) = slurp('zklock.control') =~ /^default_version = '([^']+)'/m;
ok(defined $version, "zklock.control names a default_version")
  or BAIL_OUT("no default_version in zklock.control");
# PGXN's versions are SemVer: 1.2 is 1.2.0 there.
my $semver = $version =~ /^\d+\.\d+$/ ? "$version.0" : $version;

my $meta = JSON::PP->new->decode(slurp('META.json'));
is($meta->{version}, $semver, "META.json's version is $semver");
is($meta->{provides}{zklock}{version},
	$semver, "META.json provides zklock $semver");
my ($deb) = slurp('debian/changelog') =~ /^postgresql-zklock \(([^)]+)\)/;
is($deb =~ s/-[^-]+$//r,
	$semver, "debian/changelog's upstream version is $semver");

my $node = PostgreSQL::Test::Cluster->new('version');
$node->init;
$node->start;

$node->safe_psql('postgres', 'CREATE EXTENSION zklock');
is( $node->safe_psql(
		'postgres', "SELECT extversion FROM pg_extension WHERE extname = 'zklock'"),
	$version,
	"CREATE EXTENSION installs $version");

SKIP:
{
	skip "pg_get_loaded_modules() is new in PostgreSQL 18", 1
	  if $node->pg_version < 18;
	# LOAD and the query in one session: the module is loaded per backend.
	is( $node->safe_psql(
			'postgres', "LOAD 'zklock';
			SELECT version FROM pg_get_loaded_modules() WHERE module_name = 'zklock'"),
		$version,
		"pg_get_loaded_modules() reports zklock $version");
}

$node->stop;
done_testing();
