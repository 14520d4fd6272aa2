#!/usr/bin/perl

# Copyright (c) zklock contributors
#
# Validate a META.json against the PGXN Meta Spec 1.0.0
# (https://pgxn.org/spec/, written from its text): the required keys and
# their types, the licence names it lists, SemVer versions, version ranges
# in prereqs, the phases and relations prereqs may name, the resources
# it defines, tags, release_status, and no keys of its own but "x_"/"X_".
# Prints one line per violation and exits 1 when there is any, else
# prints "valid" and exits 0.
#   perl test/check_meta.pl [META.json]

use strict;
use warnings;

use JSON::PP;

my $file = shift // 'META.json';
open my $fh, '<', $file or die "could not open $file: $!\n";
my $text = do { local $/; <$fh> };
close $fh;

my @bad;
my $meta = eval { JSON::PP->new->decode($text) };
if (!$meta || ref $meta ne 'HASH')
{
	print "$file: not a JSON object: ", ($@ || 'not an object'), "\n";
	exit 1;
}

# SemVer as the spec cites it (1.0.0): three integers without leading
# zeros, an optional pre-release part of letters, digits and hyphens.
my $semver = qr/^(?:0|[1-9]\d*)\.(?:0|[1-9]\d*)\.(?:0|[1-9]\d*)(?:-?[A-Za-z][0-9A-Za-z-]*)?$/;
# A term: at least two characters, no slash, backslash, control
# character or blank.
my $term = qr/^[^\/\\\x00-\x20\x7f]{2,}$/;
my %licenses = map { $_ => 1 } qw(agpl_3 apache_1_1 apache_2_0 artistic_1
  artistic_2 bsd freebsd gfdl_1_2 gfdl_1_3 gpl_1 gpl_2 gpl_3 lgpl_2_1 lgpl_3_0
  mit mozilla_1_0 mozilla_1_1 openssl perl_5 postgresql qpl_1_0 ssleay sun
  zlib open_source restricted unrestricted unknown);

sub bad { push @bad, join('', @_) }
sub is_str { defined $_[0] && !ref $_[0] && length $_[0] }

sub check_range
{
	my ($where, $range) = @_;
	return bad("$where: a version range must be a string") unless is_str($range);
	return if $range eq '0' || $range =~ $semver;
	for my $part (split /\s*,\s*/, $range)
	{
		bad("$where: \"$part\" is not a version range")
		  unless $part =~ /^(?:==|!=|>=|<=|>|<)\s*(.+)$/ && $1 =~ $semver;
	}
}

my %known = map { $_ => 1 } qw(abstract description generated_by license
  maintainer meta-spec name no_index prereqs provides release_status
  resources tags version);
for my $k (sort keys %$meta)
{
	bad("unknown key \"$k\" (custom keys start with x_ or X_)")
	  unless $known{$k} || $k =~ /^[xX]_/;
}
for my $k (qw(abstract license maintainer meta-spec name provides version))
{
	bad("required key \"$k\" is missing") unless exists $meta->{$k};
}
bad("name must be a term") if exists $meta->{name} && !(is_str($meta->{name}) && $meta->{name} =~ $term);
bad("version \"", $meta->{version} // '', "\" is not a semantic version")
  if exists $meta->{version} && !(is_str($meta->{version}) && $meta->{version} =~ $semver);
bad("abstract must be a non-empty string") if exists $meta->{abstract} && !is_str($meta->{abstract});
for my $k (qw(description generated_by))
{
	bad("$k must be a string") if exists $meta->{$k} && !is_str($meta->{$k});
}

if (exists $meta->{maintainer})
{
	my $m = $meta->{maintainer};
	bad("maintainer must be a string or a list of strings")
	  unless is_str($m) || (ref $m eq 'ARRAY' && @$m && !grep { !is_str($_) } @$m);
}

if (exists $meta->{license})
{
	my $l = $meta->{license};
	if (ref $l eq 'HASH')
	{
		bad("license: each value must be a URL") if grep { !is_str($_) || !/^https?:\/\// } values %$l;
	}
	else
	{
		for my $name (ref $l eq 'ARRAY' ? @$l : ($l))
		{
			bad("license \"", $name // '', "\" is not one of the spec's names")
			  unless is_str($name) && $licenses{$name};
		}
	}
}

if (exists $meta->{'meta-spec'})
{
	my $ms = $meta->{'meta-spec'};
	if (ref $ms ne 'HASH' || !is_str($ms->{version}))
	{
		bad("meta-spec must be an object with a version");
	}
	else
	{
		bad("meta-spec version must be 1.0.0") unless $ms->{version} eq '1.0.0';
		bad("meta-spec url must be a URL") if exists $ms->{url} && !(is_str($ms->{url}) && $ms->{url} =~ /^https?:\/\//);
	}
}

if (exists $meta->{provides})
{
	my $p = $meta->{provides};
	if (ref $p ne 'HASH' || !%$p)
	{
		bad("provides must be an object naming at least one extension");
	}
	else
	{
		for my $ext (sort keys %$p)
		{
			my $e = $p->{$ext};
			bad("provides: \"$ext\" is not a term") unless $ext =~ $term;
			if (ref $e ne 'HASH')
			{
				bad("provides.$ext must be an object");
				next;
			}
			bad("provides.$ext.file is required") unless is_str($e->{file});
			bad("provides.$ext.version \"", $e->{version} // '', "\" is not a semantic version")
			  unless is_str($e->{version}) && $e->{version} =~ $semver;
			for my $k (sort keys %$e)
			{
				bad("provides.$ext: unknown key \"$k\"")
				  unless $k =~ /^(?:file|version|abstract|docfile)$/ || $k =~ /^[xX]_/;
			}
		}
	}
}

if (exists $meta->{prereqs})
{
	my $pr = $meta->{prereqs};
	if (ref $pr ne 'HASH')
	{
		bad("prereqs must be an object");
	}
	else
	{
		for my $phase (sort keys %$pr)
		{
			bad("prereqs: \"$phase\" is not a phase (configure, build, test, runtime, develop)")
			  unless $phase =~ /^(?:configure|build|test|runtime|develop)$/ || $phase =~ /^[xX]_/;
			my $rels = $pr->{$phase};
			if (ref $rels ne 'HASH')
			{
				bad("prereqs.$phase must be an object");
				next;
			}
			for my $rel (sort keys %$rels)
			{
				bad("prereqs.$phase: \"$rel\" is not a relation (requires, recommends, suggests, conflicts)")
				  unless $rel =~ /^(?:requires|recommends|suggests|conflicts)$/ || $rel =~ /^[xX]_/;
				my $deps = $rels->{$rel};
				if (ref $deps ne 'HASH')
				{
					bad("prereqs.$phase.$rel must be an object");
					next;
				}
				for my $name (sort keys %$deps)
				{
					bad("prereqs.$phase.$rel: \"$name\" is not a term") unless $name =~ $term;
					check_range("prereqs.$phase.$rel.$name", $deps->{$name});
				}
			}
		}
	}
}

if (exists $meta->{release_status})
{
	bad("release_status must be stable, testing or unstable")
	  unless is_str($meta->{release_status})
	  && $meta->{release_status} =~ /^(?:stable|testing|unstable)$/;
}

if (exists $meta->{resources})
{
	my $r = $meta->{resources};
	if (ref $r ne 'HASH')
	{
		bad("resources must be an object");
	}
	else
	{
		for my $k (sort keys %$r)
		{
			bad("resources: unknown key \"$k\"")
			  unless $k =~ /^(?:homepage|bugtracker|repository)$/ || $k =~ /^[xX]_/;
		}
		bad("resources.homepage must be a URL")
		  if exists $r->{homepage} && !(is_str($r->{homepage}) && $r->{homepage} =~ /^https?:\/\//);
		if (exists $r->{bugtracker})
		{
			my $b = $r->{bugtracker};
			if (ref $b ne 'HASH' || !(exists $b->{web} || exists $b->{mailto}))
			{
				bad("resources.bugtracker must be an object with web or mailto");
			}
			else
			{
				bad("resources.bugtracker.web must be a URL")
				  if exists $b->{web} && !(is_str($b->{web}) && $b->{web} =~ /^https?:\/\//);
				bad("resources.bugtracker.mailto must be an address")
				  if exists $b->{mailto} && !(is_str($b->{mailto}) && $b->{mailto} =~ /^[^@\s]+@[^@\s]+$/);
			}
		}
		if (exists $r->{repository})
		{
			my $repo = $r->{repository};
			bad("resources.repository must be an object with url or web")
			  unless ref $repo eq 'HASH' && (exists $repo->{url} || exists $repo->{web});
		}
	}
}

if (exists $meta->{tags})
{
	my $t = $meta->{tags};
	if (ref $t ne 'ARRAY' || !@$t)
	{
		bad("tags must be a non-empty list");
	}
	else
	{
		for my $tag (@$t)
		{
			bad("tag \"", $tag // '', "\" must be a string of at most 255 characters without slash, backslash or control characters")
			  unless is_str($tag) && length($tag) <= 255 && $tag !~ /[\/\\\x00-\x1f\x7f]/;
		}
	}
}

if (exists $meta->{no_index})
{
	my $n = $meta->{no_index};
	if (ref $n ne 'HASH')
	{
		bad("no_index must be an object");
	}
	else
	{
		for my $k (sort keys %$n)
		{
			bad("no_index: unknown key \"$k\"") unless $k =~ /^(?:file|directory)$/ || $k =~ /^[xX]_/;
		}
	}
}

if (@bad)
{
	print "$file: $_\n" for @bad;
	exit 1;
}
print "valid\n";
exit 0;
