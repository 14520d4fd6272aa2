# Copyright (c) zklock contributors

=pod

=head1 NAME

ZkKdc - a private MIT Kerberos KDC for tests, as MIT's own k5test.py runs one

=head1 SYNOPSIS

  my $kdc = ZkKdc->new(dir => "$tmp_check/kdc");
  my $keytab = $kdc->keytab('zk', 'zookeeper/localhost');
  $ENV{KRB5_CONFIG} = $kdc->krb5_conf;
  ...
  $kdc->stop;    # or at exit

=head1 DESCRIPTION

A realm of its own (ZKLOCK.TEST) on a free loopback port, UDP and TCP: its
own krb5.conf (DNS and reverse lookups off, host names taken as written)
and kdc.conf (KRB5_CONFIG and KRB5_KDC_PROFILE given to every command, the
machine's own files untouched), a database made with kdb5_util, principals
and keytabs with kadmin.local, and krb5kdc -n in the foreground, stopped by
its PID.  Needs Debian's krb5-kdc and krb5-admin-server.

=cut

package ZkKdc;

use strict;
use warnings;

use Carp;
use File::Path qw(make_path remove_tree);
use File::Spec;
use IO::Socket::INET;
use POSIX qw(WNOHANG);
use Time::HiRes qw(time sleep);

my @kdcs;
my $REALM = 'ZKLOCK.TEST';

=pod

=item ZkKdc->new(dir => DIR, ticket_lifetime => SECONDS)

Make the realm in DIR (emptied first) and start its KDC; dies when it does not answer
within 30 s.

=cut

sub new
{
	my ($class, %args) = @_;
	my $dir = $args{dir} or croak "dir is required";
	# a realm afresh: a directory left by an earlier run (PostgreSQL 15's
	# tests share one tmp_check between the server lines) holds a database
	# kdb5_util will not make again
	remove_tree($dir) if -d $dir;
	make_path($dir);
	my $self = bless {
		dir      => File::Spec->rel2abs($dir),
		port     => _free_port(),
		lifetime => $args{ticket_lifetime} // 3600,
		owner    => $$,
	}, $class;
	$self->_write_conf;
	$self->_run('kdb5_util', 'create', '-s', '-r', $REALM, '-P', 'master-pw-' . $$);
	$self->start;
	push @kdcs, $self;
	return $self;
}

sub realm     { return $REALM; }
sub port      { return $_[0]->{port}; }
sub krb5_conf { return "$_[0]->{dir}/krb5.conf"; }
sub kdc_conf  { return "$_[0]->{dir}/kdc.conf"; }

# The environment every Kerberos command (and process) of the test needs.
sub env
{
	my ($self) = @_;
	return (KRB5_CONFIG => $self->krb5_conf, KRB5_KDC_PROFILE => $self->kdc_conf);
}

sub _write_conf
{
	my ($self) = @_;
	my ($d, $p, $life) = ($self->{dir}, $self->{port}, $self->{lifetime});
	open my $fh, '>', "$d/krb5.conf" or croak "$d/krb5.conf: $!";
	print $fh <<"EOF";
[libdefaults]
	default_realm = $REALM
	dns_lookup_kdc = false
	dns_lookup_realm = false
	dns_canonicalize_hostname = false
	rdns = false
	ignore_acceptor_hostname = false
	ticket_lifetime = ${life}s
	renew_lifetime = 0
	forwardable = false
	default_ccache_name = FILE:$d/default.ccache
[realms]
	$REALM = {
		kdc = 127.0.0.1:$p
	}
[domain_realm]
	localhost = $REALM
EOF
	close $fh;
	open $fh, '>', "$d/kdc.conf" or croak "$d/kdc.conf: $!";
	print $fh <<"EOF";
[kdcdefaults]
	kdc_listen = 127.0.0.1:$p
	kdc_tcp_listen = 127.0.0.1:$p
[realms]
	$REALM = {
		database_name = $d/principal
		key_stash_file = $d/stash
		acl_file = $d/kadm5.acl
		max_life = ${life}s
		max_renewable_life = 0
		supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
	}
[logging]
	kdc = FILE:$d/kdc.log
EOF
	close $fh;
	open $fh, '>', "$d/kadm5.acl" or croak "$d/kadm5.acl: $!";
	close $fh;
	return;
}

# Run a Kerberos command with the realm's environment; dies on failure.
sub _run
{
	my ($self, @cmd) = @_;
	my %env = $self->env;
	local @ENV{ keys %env } = values %env;
	my $out = `@{[ join ' ', map { "'$_'" } @cmd ]} 2>&1`;
	croak "@cmd failed: $out" if $?;
	return $out;
}

=pod

=item $kdc->keytab(NAME, PRINCIPAL...)

Add the principals (random keys) and write them to DIR/NAME.keytab, mode
0600; returns its path.

=cut

sub keytab
{
	my ($self, $name, @princs) = @_;
	my $kt = "$self->{dir}/$name.keytab";
	for my $p (@princs)
	{
		$self->_run('kadmin.local', '-q', "addprinc -randkey $p");
		$self->_run('kadmin.local', '-q', "ktadd -k $kt $p");
	}
	chmod 0600, $kt;
	return $kt;
}

=pod

=item $kdc->kinit(KEYTAB, PRINCIPAL, CCACHE)

Get PRINCIPAL's ticket from KEYTAB into CCACHE (a FILE: cache).

=cut

sub kinit
{
	my ($self, $keytab, $princ, $ccache) = @_;
	$self->_run('kinit', '-k', '-t', $keytab, '-c', $ccache, $princ);
	return;
}

=pod

=item $kdc->start, $kdc->stop

Start krb5kdc -n (waits until its TCP port answers), stop it by PID.

=cut

sub start
{
	my ($self) = @_;
	return if $self->{pid};
	my %env = $self->env;
	my $pid = fork;
	croak "fork: $!" unless defined $pid;
	if ($pid == 0)
	{
		@ENV{ keys %env } = values %env;
		open STDIN, '<', File::Spec->devnull or die;
		open STDOUT, '>>', "$self->{dir}/krb5kdc.out" or die;
		open STDERR, '>&', \*STDOUT or die;
		exec '/usr/sbin/krb5kdc', '-n' or die "exec krb5kdc: $!";
	}
	$self->{pid} = $pid;
	my $deadline = time + 30;
	while (time < $deadline)
	{
		my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $self->{port},
			Proto => 'tcp', Timeout => 1);
		if ($s) { close $s; return; }
		croak "krb5kdc exited" if waitpid($pid, WNOHANG) == $pid;
		sleep 0.05;
	}
	croak "krb5kdc did not answer on port $self->{port} within 30 s";
}

sub stop
{
	my ($self) = @_;
	my $pid = delete $self->{pid} or return;
	return unless $self->{owner} == $$;
	kill 'TERM', $pid;
	my $deadline = time + 10;
	while (time < $deadline)
	{
		return if waitpid($pid, WNOHANG) == $pid;
		sleep 0.05;
	}
	kill 'KILL', $pid;
	waitpid($pid, 0);
	return;
}

# A loopback port free for both UDP and TCP now.
sub _free_port
{
	for (1 .. 100)
	{
		my $port = 20000 + int(rand(20000));
		my $t = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => $port,
			Proto => 'tcp', ReuseAddr => 0, Listen => 1) or next;
		my $u = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => $port,
			Proto => 'udp') or next;
		close $t;
		close $u;
		return $port;
	}
	croak "no free port";
}

END
{
	$_->stop for grep { defined } @kdcs;
}

1;
