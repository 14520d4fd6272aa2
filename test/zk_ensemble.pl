#!/usr/bin/perl

# Copyright (c) zklock contributors
#
# Command-line wrapper around ZkEnsemble.pm for shell scripts (the demo):
#
#   perl -I test/perl test/zk_ensemble.pl start  --servers 3 --dir DIR
#       starts an ensemble with its data under DIR, leaves it running, writes
#       DIR/ensemble.state and prints the connect string as the only line
#   perl -I test/perl test/zk_ensemble.pl stop   --dir DIR
#       stops it by the recorded PIDs (no error if it is already stopped)
#   perl -I test/perl test/zk_ensemble.pl status --dir DIR
#       prints "server N port P MODE" per server; exit status 0 when all serve
#   perl -I test/perl test/zk_ensemble.pl kill|restart --server I --dir DIR
#       SIGKILL one server / start it again and wait until it serves
#
# Options for start: --tick-time MS, --conf key=value (repeatable),
# --jvm-opts '...', --tls CERTDIR (the servers serve only a secure client
# port, with the certificates ZkCerts.pm makes in CERTDIR: ca.pem,
# server.pem, and client identities a.crt/a.key, b.crt/b.key, ...),
# --plain-too (with --tls: each server also serves a plain client port by
# the same Netty code; their connect string is printed as a second line).

use strict;
use warnings;

use File::Spec;
use FindBin;
use Getopt::Long qw(GetOptionsFromArray);
use lib File::Spec->catdir($FindBin::RealBin, 'perl');

use ZkCerts;
use ZkEnsemble;

sub usage
{
	print STDERR <<"EOF";
usage: $0 start --dir DIR [--servers 1|3] [--tick-time MS] [--conf k=v]... [--jvm-opts OPTS] [--tls CERTDIR [--plain-too]]
       $0 stop|status --dir DIR
       $0 kill|restart --server I --dir DIR
EOF
	exit 2;
}

my $cmd = shift @ARGV // usage();
my %opt = (servers => 3, conf => {});
GetOptionsFromArray(\@ARGV, \%opt, 'dir=s', 'servers=i', 'tick-time=i',
	'conf=s%', 'jvm-opts=s', 'server=i', 'tls=s', 'plain-too')
  or usage();
usage() unless defined $opt{dir} && !@ARGV;
my $state = File::Spec->catfile($opt{dir}, 'ensemble.state');

sub attached
{
	die "no ensemble state in $opt{dir}\n" unless -f $state;
	return ZkEnsemble->attach($state);
}

if ($cmd eq 'start')
{
	if (-f $state)
	{
		my $old = ZkEnsemble->attach($state);
		die "an ensemble recorded in $state is still running\n"
		  if grep { $old->is_running($_) } 1 .. $old->server_count;
	}
	my $tls;
	if (defined $opt{tls})
	{
		my $certs = ZkCerts->new(dir => $opt{tls});
		my $a     = $certs->client('a');
		$tls = {
			keystore    => $certs->file('server.pem'),
			truststore  => $certs->file('ca.pem'),
			client_cert => $a->{cert},
			client_key  => $a->{key} };
	}
	my $zk = ZkEnsemble->new(
		($tls ? (tls => $tls, plain_too => $opt{'plain-too'}) : ()),
		servers    => $opt{servers},
		basedir    => $opt{dir},
		extra_conf => $opt{conf},
		(defined $opt{'tick-time'} ? (tick_time => $opt{'tick-time'}) : ()),
		(defined $opt{'jvm-opts'}  ? (jvm_opts  => $opt{'jvm-opts'})  : ()));
	$zk->save_state($state);
	# Leave the servers running when this process exits.
	$zk->detach;
	print $zk->connect_string, "\n";
	print $zk->plain_connect_string, "\n" if $tls && $opt{'plain-too'};
}
elsif ($cmd eq 'stop')
{
	exit 0 unless -f $state;    # never started, or cleaned up: nothing to do
	attached()->stop;
}
elsif ($cmd eq 'status')
{
	my $zk  = attached();
	my $all = 1;
	for my $i (1 .. $zk->server_count)
	{
		my $mode =
		    !$zk->is_running($i) ? 'stopped'
		  : $zk->mode($i) // 'not-serving';
		$all = 0 unless $mode =~ /^(?:leader|follower|standalone)$/;
		printf "server %d port %d %s\n", $i, $zk->port($i), $mode;
	}
	exit($all ? 0 : 1);
}
elsif ($cmd eq 'kill' || $cmd eq 'restart')
{
	usage() unless defined $opt{server};
	my $zk = attached();
	if ($cmd eq 'kill') { $zk->kill_server($opt{server}) }
	else
	{
		$zk->restart_server($opt{server});
		$zk->save_state($state);    # record the new PID
	}
}
else
{
	usage();
}
