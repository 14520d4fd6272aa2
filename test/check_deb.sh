#!/bin/sh
# The package make deb built for one Debian PostgreSQL major
# (deb/postgresql-NN-zklock_*.deb) follows Debian's conventions for
# extensions: its name; its dependencies are that PostgreSQL and the
# shared libraries zklock.so links (${shlibs:Depends}: the C library and
# OpenSSL's), no ZooKeeper library, the client being linked in; it records
# the statically linked client's Debian source package (Built-Using,
# Static-Built-Using) when it was built from one; it installs zklock.so,
# the control file and every script of the Makefile's DATA where that
# PostgreSQL looks.  Prints one TAP line per property.
#   sh test/check_deb.sh PG_CONFIG
set -u

pgc=$1
major=$("$pgc" --version | sed -n 's/^PostgreSQL \([0-9]*\).*/\1/p')
pkg=postgresql-$major-zklock
zkc=${ZKLOCK_ZKC:-${ZKLOCK_PG_CACHE:-/var/cache/zklock}/zkc}
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
want="libc6 libssl3 postgresql-$major "
result "$([ "$deps" = "$want" ] && echo 1 || echo 0)" \
	"$pkg depends on $want(got: $(field Depends))"

case $(cat "$zkc/source" 2>/dev/null) in
debian\ *)
	src=$(awk '{ print $2 " (= " $3 ")" }' "$zkc/source")
	result "$([ "$(field Built-Using)" = "$src" ] &&
		[ "$(field Static-Built-Using)" = "$src" ] && echo 1 || echo 0)" \
		"Built-Using and Static-Built-Using name the client's source package $src" ;;
*)
	result "$([ -z "$(field Built-Using)" ] && echo 1 || echo 0)" \
		"no Built-Using: the client was not built from a Debian source package" ;;
esac

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
dpkg-deb -x "$deb" "$tmp"
so="$tmp$("$pgc" --pkglibdir)/zklock.so"
# The dynamic loader (ld-linux) serves the client's thread-local variables.
needed=$(readelf -d "$so" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' |
	grep -v '^ld-linux' | sort | tr '\n' ' ')
result "$([ "$needed" = "libc.so.6 libcrypto.so.3 libssl.so.3 " ] && echo 1 || echo 0)" \
	"zklock.so needs only the C library, libssl and libcrypto (got: $needed)"

ext="$tmp$("$pgc" --sharedir)/extension"
missing=""
for f in zklock.control $(sed -n 's/^DATA = //p' Makefile); do
	[ -f "$ext/$f" ] || missing="$missing $f"
done
[ -f "$so" ] || missing="$missing zklock.so"
result "$([ -z "$missing" ] && echo 1 || echo 0)" \
	"$pkg installs zklock.so, zklock.control and every DATA script${missing:+ (missing:$missing)}"

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
exit $failed
