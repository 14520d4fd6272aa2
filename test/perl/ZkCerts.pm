
# Copyright (c) zklock contributors

=pod

=head1 NAME

ZkCerts - the certificates of a TLS test, made with the openssl command

=head1 SYNOPSIS

  use ZkCerts;

  my $c = ZkCerts->new(dir => "$tmp/certs");
  $c->file('ca.pem');                 # the test CA
  $c->file('server.pem');             # key and certificate of the servers
  $c->client('a');                    # { cert => ..., key => ..., dn => ... }
  $c->subject('a');                   # "CN=zklock-a,OU=db,O=zklock test"

=head1 DESCRIPTION

One CA signs the servers' certificate (for 127.0.0.1) and two client
identities, a and b; an expired client certificate (expired) from the same
CA; and a client certificate from another CA (rogue), which the servers do
not trust.  Server certificates for the refusals of the client side, each
in a PEM key store of its own (NAME.pem): server-elsewhere (the CA's, for
the host elsewhere.example only), server-localhost (the CA's, for the host
localhost only), server-expired and server-revoked (the CA's, for
127.0.0.1; ca.crl revokes the second), and server-sysca (for 127.0.0.1,
from a third CA, sys-ca.pem, that stands for a machine's default trust
store).  Keys are unencrypted PEM (PKCS#8), mode 0600, as
zklock.ssl_key_file wants them; server.pem (and a.pem, for a Java client)
holds the key and the certificate together, as ZooKeeper's PEM key store
reads it.

=cut

package ZkCerts;

use strict;
use warnings;

use Carp;
use File::Path qw(make_path);
use File::Spec;

my %SUBJECT = (
	a       => '/O=zklock test/OU=db/CN=zklock-a',
	b       => '/O=zklock test/OU=db/CN=zklock-b',
	expired => '/O=zklock test/OU=db/CN=zklock-expired',
	rogue   => '/O=rogue/CN=zklock-rogue',);

# What ZooKeeper's x509 provider calls each (X500Principal, RFC 2253).
my %DN = (
	a       => 'CN=zklock-a,OU=db,O=zklock test',
	b       => 'CN=zklock-b,OU=db,O=zklock test',
	expired => 'CN=zklock-expired,OU=db,O=zklock test',
	rogue   => 'CN=zklock-rogue,O=rogue',);

sub new
{
	my ($class, %args) = @_;
	my $dir = $args{dir} or croak "dir is required";
	make_path($dir);
	my $self = bless { dir => File::Spec->rel2abs($dir) }, $class;
	$self->_make;
	return $self;
}

sub file { my ($self, $name) = @_; return "$self->{dir}/$name"; }
sub subject { return $DN{ $_[1] } // croak "no client $_[1]"; }

sub client
{
	my ($self, $who) = @_;
	croak "no client $who" unless $SUBJECT{$who};
	return {
		cert => $self->file("$who.crt"),
		key  => $self->file("$who.key"),
		dn   => $DN{$who} };
}

sub _openssl
{
	my ($self, @args) = @_;
	my $out = "$self->{dir}/openssl.log";
	my $rc = system("cd '$self->{dir}' && openssl @args >>'$out' 2>&1");
	croak "openssl @args failed; see $out" if $rc != 0;
	return;
}

sub _key
{
	my ($self, $name) = @_;
	$self->_openssl("genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out $name.key");
	chmod 0600, $self->file("$name.key");
	return;
}

# A CA: self-signed, valid ten years.
sub _ca
{
	my ($self, $name, $subject) = @_;
	$self->_key($name);
	$self->_openssl("req -x509 -new -key $name.key -days 3650 -subj '$subject'"
		  . " -addext basicConstraints=critical,CA:TRUE"
		  . " -addext keyUsage=critical,keyCertSign,cRLSign -out $name.pem");
	return;
}

# A certificate signed by a CA, with openssl ca so that its dates can be
# set (an expired one too).
sub _sign
{
	my ($self, $ca, $name, $subject, $start, $end, $ext) = @_;
	my $d = $self->{dir};
	my $db = "$d/$ca.db";
	make_path($db);
	for my $f ("$db/index.txt")
	{
		open my $fh, '>>', $f or croak "$f: $!";
		close $fh;
	}
	unless (-f "$db/serial")
	{
		open my $fh, '>', "$db/serial" or croak "$db/serial: $!";
		printf $fh "%04X\n", 1000 + int(rand(60000));
		close $fh;
		open $fh, '>', "$db/crlnumber" or croak "$db/crlnumber: $!";
		print $fh "1000\n";
		close $fh;
	}
	open my $cnf, '>', "$d/$name.cnf" or croak "$d/$name.cnf: $!";
	print $cnf <<"EOF";
[ ca ]
default_ca = this
[ this ]
database = $db/index.txt
serial = $db/serial
new_certs_dir = $db
certificate = $d/$ca.pem
private_key = $d/$ca.key
crlnumber = $db/crlnumber
default_crl_days = 3650
default_md = sha256
policy = any
unique_subject = no
copy_extensions = none
[ any ]
organizationName = optional
organizationalUnitName = optional
commonName = supplied
[ ext ]
${\ ($ext =~ /^basicConstraints/m ? '' : "basicConstraints = CA:FALSE\n")}$ext
EOF
	close $cnf;
	$self->_key($name);
	$self->_openssl("req -new -key $name.key -subj '$subject' -out $name.csr");
	$self->_openssl("ca -batch -config $name.cnf -extensions ext -notext"
		  . " -startdate $start -enddate $end -in $name.csr -out $name.crt");
	$self->{cnf}{$ca} = "$name.cnf";
	return;
}

=pod

=head2 Certificates of a test's own

Made in the directory when called (not kept by the done stamp): ca(NAME,
SUBJECT) a self-signed CA; sign(CA, NAME, SUBJECT, START, END, EXT) a
certificate NAME.crt (and NAME.key) signed by CA, valid from START to END
(openssl's YYYYMMDDHHMMSSZ), with EXT's extension lines (an intermediate
CA gives its own basicConstraints); revoke(CA, NAME) revokes it; crl(CA,
FILE, SECONDS) writes CA's revocation list (its next update SECONDS from
now when given, else in ten years); keystore(NAME, CHAIN...) writes
NAME.pem, the key and certificate then the CHAIN's certificates, as
ZooKeeper's PEM key store reads them; concat(FILE, FILES...) joins files.
Each returns the path it wrote, when it wrote one.

=cut

sub ca
{
	my ($self, $name, $subject) = @_;
	$self->_ca($name, $subject);
	return $self->file("$name.pem");
}

sub sign
{
	my ($self, @args) = @_;
	$self->_sign(@args);
	return $self->file("$args[1].crt");
}

sub revoke
{
	my ($self, $ca, $name) = @_;
	my $cnf = $self->{cnf}{$ca} or croak "nothing signed by $ca in this run";
	$self->_openssl("ca -config $cnf -revoke $name.crt");
	return;
}

sub crl
{
	my ($self, $ca, $file, $seconds) = @_;
	my $cnf = $self->{cnf}{$ca} or croak "nothing signed by $ca in this run";
	$self->_openssl("ca -config $cnf -gencrl"
		  . ($seconds ? " -crlsec $seconds" : '') . " -out $file");
	return $self->file($file);
}

sub concat
{
	my ($self, $file, @files) = @_;
	my $path = File::Spec->file_name_is_absolute($file) ? $file : $self->file($file);
	open my $out, '>', $path or croak "$path: $!";
	for my $f (@files)
	{
		my $in_path = File::Spec->file_name_is_absolute($f) ? $f : $self->file($f);
		open my $in, '<', $in_path or croak "$in_path: $!";
		print {$out} <$in>;
		close $in;
	}
	close $out;
	return $path;
}

sub keystore
{
	my ($self, $name, @chain) = @_;
	my $path = $self->concat("$name.pem", "$name.key", "$name.crt",
		map { "$_.crt" } @chain);
	chmod 0600, $path;
	return $path;
}

sub _make
{
	my ($self) = @_;
	return if -f $self->file('done');
	my $from = '20200101000000Z';
	my $until = '20991231000000Z';
	$self->_ca('ca', '/O=zklock test/CN=zklock test CA');
	$self->_ca('other-ca', '/O=rogue/CN=another CA');
	$self->_sign('ca', 'server', '/O=zklock test/CN=127.0.0.1', $from, $until,
		"subjectAltName = IP:127.0.0.1\nextendedKeyUsage = serverAuth,clientAuth");
	for my $who (qw(a b))
	{
		$self->_sign('ca', $who, $SUBJECT{$who}, $from, $until,
			'extendedKeyUsage = clientAuth');
	}
	$self->_sign('ca', 'expired', $SUBJECT{expired}, $from, '20200201000000Z',
		'extendedKeyUsage = clientAuth');
	$self->_sign('other-ca', 'rogue', $SUBJECT{rogue}, $from, $until,
		'extendedKeyUsage = clientAuth');

	# The refusals of the client side.
	my $server = 'extendedKeyUsage = serverAuth,clientAuth';
	$self->_ca('sys-ca', '/O=some public CA/CN=some public CA');
	$self->_sign('ca', 'server-elsewhere', '/O=zklock test/CN=elsewhere.example',
		$from, $until, "subjectAltName = DNS:elsewhere.example\n$server");
	$self->_sign('ca', 'server-localhost', '/O=zklock test/CN=localhost',
		$from, $until, "subjectAltName = DNS:localhost\n$server");
	$self->_sign('ca', 'server-expired', '/O=zklock test/CN=127.0.0.1',
		$from, '20200201000000Z', "subjectAltName = IP:127.0.0.1\n$server");
	$self->_sign('ca', 'server-revoked', '/O=zklock test/CN=127.0.0.1',
		$from, $until, "subjectAltName = IP:127.0.0.1\n$server");
	$self->_sign('sys-ca', 'server-sysca', '/O=zklock test/CN=127.0.0.1',
		$from, $until, "subjectAltName = IP:127.0.0.1\n$server");
	$self->_openssl('ca -config server-revoked.cnf -revoke server-revoked.crt');
	$self->_openssl('ca -config server-revoked.cnf -gencrl -out ca.crl');

	# ZooKeeper's PEM key store (the servers', and the Java client's):
	# the key and the certificate in one file.
	for my $name (
		qw(server a server-elsewhere server-localhost server-expired
		server-revoked server-sysca))
	{
		my $crt = "$name.crt";
		open my $out, '>', $self->file("$name.pem") or croak "$name.pem: $!";
		for my $f ("$name.key", $crt)
		{
			open my $in, '<', $self->file($f) or croak "$f: $!";
			print {$out} <$in>;
			close $in;
		}
		close $out;
		chmod 0600, $self->file("$name.pem");
	}
	open my $done, '>', $self->file('done') or croak "done: $!";
	close $done;
	return;
}

1;
