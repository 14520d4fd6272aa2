#!/bin/sh
# What make deb built for one Debian PostgreSQL major follows Debian's
# conventions for extensions.  The source package: a .dsc with two
# upstream tarballs, zklock's and orig-zookeeper (the client's source),
# built with no network and no Java when make deb ran as root (its log says
# so).  The binary package: its name; its dependencies are that PostgreSQL
# and the shared libraries zklock.so links (${shlibs:Depends}: the C
# library and OpenSSL's), no ZooKeeper library, the client being linked
# in from the package's own source (so no Built-Using); it installs
# zklock.so, the control file and every script of the Makefile's DATA where
# that PostgreSQL looks, NOTICE, and a DEP-5 copyright naming every
# licence; the dbgsym package holds the debug file; lintian finds no
# error in the source or the binary package; autopkgtest (the null runner,
# on this machine) passes, and the package it installed is purged after.
# Prints one TAP line per property.
#   sh test/check_deb.sh PG_CONFIG
set -u

pgc=$1
major=$("$pgc" --version | sed -n 's/^PostgreSQL \([0-9]*\).*/\1/p')
pkg=postgresql-$major-zklock
. "$(dirname "$0")/tap.sh"

deb=$(ls deb/"$pkg"_*.deb 2>/dev/null | head -n 1)
if [ -z "$deb" ]; then
	echo "not ok 1 - make deb built no deb/${pkg}_*.deb"
	exit 1
fi
field() { dpkg-deb -f "$deb" "$1"; }
result "$([ "$(field Package)" = "$pkg" ] && echo 1 || echo 0)" \
	"the package is named $pkg"

# Every dependency's package name, one a line.
deps=$(field Depends | tr ',' '\n' | sed 's/^ *//; s/[ (].*//' | sort -u | tr '\n' ' ')
want="libc6 libgssapi-krb5-2 libkrb5-3 libsasl2-2 libsasl2-modules libsasl2-modules-gssapi-mit libssl3 postgresql-$major "
result "$([ "$deps" = "$want" ] && echo 1 || echo 0)" \
	"$pkg depends on $want(got: $(field Depends))"

result "$([ -z "$(field Built-Using)" ] && [ -z "$(field Static-Built-Using)" ] && echo 1 || echo 0)" \
	"no Built-Using: the client is built from the source package's own orig-zookeeper tarball"

dsc=$(ls deb/postgresql-zklock_*.dsc 2>/dev/null | head -n 1)
files=$(sed -n '/^Files:/,/^[^ ]/p' "$dsc" 2>/dev/null | awk 'NF == 3 { print $3 }' | sort | tr '\n' ' ')
upstream=$(sed -n 's/^Version: \(.*\)-[^-]*$/\1/p' "$dsc" 2>/dev/null)
ok=0
[ -n "$dsc" ] && ok=1
for f in postgresql-zklock_$upstream.orig.tar.gz postgresql-zklock_$upstream.orig-zookeeper.tar.gz; do
	case " $files" in *" $f "*) ;; *) ok=0 ;; esac
done
for f in $files; do [ -f "deb/$f" ] || ok=0; done
result "$ok" "the source package ${dsc:-deb/postgresql-zklock_*.dsc} has zklock's and the client's upstream tarballs (got: $files)"
bdeps=$(sed -n '/^Build-Depends:/,/^[^ ]/p' "$dsc" 2>/dev/null | sed '$d' | tr -d '\n')
result "$(echo "$bdeps" | grep -q cmake && echo "$bdeps" | grep -q libssl-dev &&
	echo "$bdeps" | grep -q libsasl2-dev && echo "$bdeps" | grep -q libkrb5-dev &&
	! echo "$bdeps" | grep -qE 'java|jdk|jre' && echo 1 || echo 0)" \
	"its Build-Depends name CMake, OpenSSL's, Cyrus SASL's and Kerberos' headers, and no Java ($bdeps)"
if [ "$(id -u)" -eq 0 ]; then
	result "$(grep -q '^make deb: building .* with no network, .* hidden' deb/build.log && echo 1 || echo 0)" \
		"the binary packages were built from the .dsc with no network, no ZooKeeper cache and no Java (deb/build.log)"
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
dpkg-deb -x "$deb" "$tmp"
so="$tmp$("$pgc" --pkglibdir)/zklock.so"
# The dynamic loader (ld-linux) serves the client's thread-local variables.
needed=$(readelf -d "$so" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' |
	grep -v '^ld-linux' | sort | tr '\n' ' ')
result "$([ "$needed" = "libc.so.6 libcrypto.so.3 libgssapi_krb5.so.2 libkrb5.so.3 libsasl2.so.2 libssl.so.3 " ] && echo 1 || echo 0)" \
	"zklock.so needs only the C library, libssl, libcrypto, libsasl2, libgssapi_krb5 and libkrb5 (got: $needed)"

ext="$tmp$("$pgc" --sharedir)/extension"
missing=""
for f in zklock.control $(sed -n 's/^DATA = //p' Makefile); do
	[ -f "$ext/$f" ] || missing="$missing $f"
done
[ -f "$so" ] || missing="$missing zklock.so"
# (dh_compress gzips the notice, as every document of a package)
[ -f "$tmp/usr/share/doc/$pkg/NOTICE.gz" ] || missing="$missing NOTICE"
result "$([ -z "$missing" ] && echo 1 || echo 0)" \
	"$pkg installs zklock.so, zklock.control, every DATA script and NOTICE${missing:+ (missing:$missing)}"
copyright="$tmp/usr/share/doc/$pkg/copyright"
lic=$(sed -n 's/^License: //p' "$copyright" 2>/dev/null | sort -u | tr '\n' ' ')
result "$(head -n 1 "$copyright" 2>/dev/null | grep -q copyright-format/1.0 &&
	[ "$lic" = "Apache-2.0 BSD-3-clause PostgreSQL " ] && echo 1 || echo 0)" \
	"its copyright is DEP-5 with the PostgreSQL, Apache-2.0 and BSD-3-clause licences (got: $lic)"

# Debug symbols apart, as Debian ships them: the dbgsym package holds the
# debug file of this zklock.so's build id (the gdb tests need it).
dbg=$(ls deb/"$pkg"-dbgsym_*.deb 2>/dev/null | head -n 1)
id=$(readelf -n "$so" 2>/dev/null | sed -n 's/.*Build ID: *//p')
found=0
if [ -n "$dbg" ] && [ -n "$id" ]; then
	mkdir "$tmp/dbg"
	dpkg-deb -x "$dbg" "$tmp/dbg"
	rest=${id#??}
	[ -f "$tmp/dbg/usr/lib/debug/.build-id/$(echo "$id" | cut -c1-2)/$rest.debug" ] && found=1
fi
result "$found" "$pkg-dbgsym holds the debug file of zklock.so (build id ${id:-none})"

out=$(lintian "$dsc" "$deb" 2>&1)
errors=$(echo "$out" | grep -c '^E: ')
result "$([ "$errors" -eq 0 ] && echo 1 || echo 0)" \
	"lintian finds no error in $(basename "$dsc") and $(basename "$deb") ($errors; $(echo "$out" | grep -c '^W: ') warnings)"
[ "$errors" -eq 0 ] || echo "$out" | grep '^E: ' | head -n 10

# autopkgtest installs the package; a package installed before is not
# touched
if [ "$(id -u)" -eq 0 ]; then
	if dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed'; then
		result 0 "autopkgtest: $pkg is installed already, not touched"
	else
		timeout 900 autopkgtest -q "$dsc" "$deb" -- null >"$tmp/autopkgtest.log" 2>&1
		rc=$?
		result "$([ "$rc" -eq 0 ] && grep -q '^installcheck *PASS' "$tmp/autopkgtest.log" && echo 1 || echo 0)" \
			"autopkgtest of $(basename "$dsc") with $(basename "$deb") passes (installcheck)"
		[ "$rc" -eq 0 ] || tail -n 40 "$tmp/autopkgtest.log"
		dpkg -P "$pkg" >/dev/null 2>&1
	fi
fi
exit $failed
