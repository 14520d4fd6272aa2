#!/usr/bin/perl

# Copyright (c) zklock contributors
#
# make bench's SASL servers (figure 12):
#
#   perl -I test/perl bench/sasl_servers.pl DIR
#
# A private MIT KDC (ZkKdc) with the principals zookeeper/localhost (the
# servers') and zklock (the backends'), each in a keytab; a 3-server
# ensemble that authenticates with DIGEST-MD5 (user zklock) and one whose
# servers log in to zookeeper/localhost for GSSAPI.  Neither enforces SASL,
# so that plain sessions and SASL sessions run on the same servers.  Once
# all of it serves, writes DIR/sasl.env (shell assignments: the connect
# strings, the keytab, the password, the Kerberos files) and waits, at most
# an hour, until it is sent SIGTERM or SIGINT; then stops the ensembles and
# the KDC by their PIDs (DIR/digest and DIR/gssapi keep the ensembles'
# state files and DIR/kdc.pid the KDC's, for a clean-up after a kill).
# Exits non-zero if anything did not start.

use strict;
use warnings;

use File::Path qw(make_path);
use ZkEnsemble;
use ZkKdc;

my $dir = shift or die "usage: $0 DIR\n";
make_path($dir);
my $stop = 0;
$SIG{TERM} = $SIG{INT} = sub { $stop = 1 };

my $kdc = ZkKdc->new(dir => "$dir/kdc");
my $zk_keytab = $kdc->keytab('zk', 'zookeeper/localhost');
my $client_keytab = $kdc->keytab('zklock', 'zklock');
my $realm = $kdc->realm;
my $password = 'bench-pw-' . int(rand(1e9));

my $digest = ZkEnsemble->new(
	servers    => 3,
	basedir    => "$dir/digest",
	extra_conf => { forceSync => 'yes' },
	sasl       => { users => { zklock => $password }, enforce => 0 });
my $gss = ZkEnsemble->new(
	servers    => 3,
	basedir    => "$dir/gssapi",
	extra_conf => { forceSync => 'yes' },
	sasl       => {
		enforce  => 0,
		kerberos => {
			keytab    => $zk_keytab,
			principal => "zookeeper/localhost\@$realm",
			krb5_conf => $kdc->krb5_conf } });

# what to stop if this process is killed: bench/run.sh's clean-up stops the
# ensembles by their state files and the KDC by its PID
$_->save_state for $digest, $gss;
open my $pf, '>', "$dir/kdc.pid" or die "$dir/kdc.pid: $!";
print $pf $kdc->{pid}, "\n";
close $pf;

# GSSAPI asks for zookeeper/<the host as written>: the servers by name
my $local = sub {
	my ($zk) = @_;
	return join ',', map { 'localhost:' . $zk->port($_) } 1 .. $zk->server_count;
};
my %env = (
	SASL_DIGEST_HOSTS => $digest->connect_string,
	SASL_GSS_HOSTS    => $local->($gss),
	SASL_PASSWORD     => $password,
	SASL_KEYTAB       => $client_keytab,
	SASL_PRINCIPAL    => "zklock\@$realm",
	KRB5_CONFIG       => $kdc->krb5_conf,
	KRB5_KDC_PROFILE  => $kdc->kdc_conf);
open my $fh, '>', "$dir/sasl.env.tmp" or die "$dir/sasl.env.tmp: $!";
print $fh map { "$_='$env{$_}'\n" } sort keys %env;
close $fh or die "$dir/sasl.env.tmp: $!";
rename "$dir/sasl.env.tmp", "$dir/sasl.env" or die "$dir/sasl.env: $!";

my $deadline = time + 3600;
sleep 1 while !$stop && time < $deadline;
$_->stop for $digest, $gss;
$kdc->stop;
exit 0;
