#!/bin/sh
# make dist's source release is PGXN's distribution and builds as any PGXS
# extension: zklock-RELEASE.zip holds the last commit's files and the
# ZooKeeper client's source (zookeeper/, with the jute-generated C files)
# under zklock-RELEASE/, LICENSE, NOTICE and a META.json that validates
# against the PGXN Meta Spec (test/check_meta.pl, which must also refuse a
# broken copy) and names the zip's version.  Unpacked in an empty directory
# by the unprivileged user postgres, it builds with PGXS for PG_CONFIG
# (warnings as errors) and installs (DESTDIR: a staging directory) with
# nothing but what the README names: as root this runs with no network
# and with $ZKLOCK_PG_CACHE, /usr/share/java and /usr/lib/jvm hidden
# (unshare; empty tmpfs over each).  Then, as root, PGXN's own client
# installs the zip into that PostgreSQL (pgxn install, from the zip as
# from PGXN) and uninstalls it again.  Prints one TAP line per property.
#   sh test/check_dist.sh PG_CONFIG
set -u

pgc=${1:-pg_config}
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
. "$top/test/tap.sh"
cache=${ZKLOCK_PG_CACHE:-/var/cache/zklock}

release=$(sh test/release.sh version)
zip=zklock-$release.zip
tmp=$(mktemp -d)
chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT
rm -f "$zip"
if ! make -s dist >"$tmp/dist.log" 2>&1 || [ ! -f "$zip" ]; then
	echo "not ok 1 - make dist wrote no $zip: $(tail -n 3 "$tmp/dist.log")"
	exit 1
fi
mv "$zip" "$tmp/"

# the commit's files and the client's tree, nothing else
zktree=$(sh test/build_zkc.sh --prepare 2>/dev/null | tail -n 1)
{
	git ls-tree -r --name-only HEAD | sed "s|^|zklock-$release/|"
	(cd "$zktree" && find . -type f | sed "s|^\./|zklock-$release/zookeeper/|")
} | sort >"$tmp/want"
unzip -Z1 "$tmp/$zip" | grep -v '/$' | sort >"$tmp/got"
result "$(cmp -s "$tmp/want" "$tmp/got" && echo 1 || echo 0)" \
	"$zip holds the last commit's files and the client's source under zklock-$release/, nothing else$(
		diff "$tmp/want" "$tmp/got" | grep '^[<>]' | head -n 5 | tr '\n' ' ')"
missing=""
for f in META.json LICENSE NOTICE zookeeper/LICENSE.txt zookeeper/NOTICE.txt \
	zookeeper/README.zklock \
	zookeeper/zookeeper-client/zookeeper-client-c/generated/zookeeper.jute.c \
	zookeeper/zookeeper-client/zookeeper-client-c/generated/zookeeper.jute.h; do
	grep -qx "zklock-$release/$f" "$tmp/got" || missing="$missing $f"
done
result "$([ -z "$missing" ] && echo 1 || echo 0)" \
	"$zip has META.json, LICENSE and NOTICE at its top and the client's licence, notice and generated C files${missing:+ (missing:$missing)}"

mkdir "$tmp/empty" "$tmp/root" "$tmp/log"
(cd "$tmp/empty" && unzip -q "$tmp/$zip")
src="$tmp/empty/zklock-$release"
out=$(perl test/check_meta.pl "$src/META.json" 2>&1)
result "$([ "$out" = valid ] && echo 1 || echo 0)" \
	"META.json validates against the PGXN Meta Spec 1.0.0 ($(echo "$out" | tr '\n' ' '))"
meta_version=$(perl -MJSON::PP -e 'local $/; my $m = decode_json(<STDIN>);
	print "$m->{version} $m->{provides}{zklock}{version}"' <"$src/META.json")
result "$([ "$meta_version" = "$release $release" ] && echo 1 || echo 0)" \
	"META.json's version and the version it provides are $release, the zip's (got: $meta_version)"
sed 's/"version": "[^"]*",/"version": "1.2",/; s/"license": "[^"]*"/"license": "PostgreSQL License"/' \
	META.json >"$tmp/broken.json"
out=$(perl test/check_meta.pl "$tmp/broken.json" 2>&1)
result "$(echo "$out" | grep -q 'is not a semantic version' &&
	echo "$out" | grep -q 'is not one of the spec' && echo 1 || echo 0)" \
	"test/check_meta.pl refuses a two-part version and an unknown licence name"

# As postgres, in the empty directory: a plain PGXS build, make and make
# install, with no variable but PG_CONFIG.
build="cd '$src' && env -u MAKEFLAGS -u MAKELEVEL make -s PG_CONFIG='$pgc' \
PG_CFLAGS='-Wall -Wextra -Werror' >'$tmp/log/build.log' 2>&1 && \
env -u MAKEFLAGS -u MAKELEVEL make -s PG_CONFIG='$pgc' DESTDIR='$tmp/root' install \
>'$tmp/log/install.log' 2>&1"
isolated=""
if [ "$(id -u)" -eq 0 ]; then
	chown -R postgres "$tmp/empty" "$tmp/root" "$tmp/log"
	hide=""
	for d in "$cache" /usr/share/java /usr/lib/jvm; do
		[ -d "$d" ] && hide="$hide mount -t tmpfs none '$d' &&"
	done
	set -- unshare -n -m sh -c "$hide runuser -u postgres -- sh -c \"$build\""
	isolated=" as postgres, with no network, no $cache and no Java"
else
	set -- sh -c "$build"
fi
if "$@"; then
	result 1 "zklock-$release builds and installs with PGXS in an empty directory$isolated"
else
	result 0 "zklock-$release builds and installs with PGXS in an empty directory$isolated: $(tail -n 5 "$tmp/log/build.log" "$tmp/log/install.log" 2>/dev/null | tr '\n' ' ')"
fi
ext="$tmp/root$("$pgc" --sharedir)/extension"
doc="$tmp/root$("$pgc" --docdir)/extension/zklock"
missing=""
for f in zklock.control $(sed -n 's/^DATA = //p' Makefile); do
	[ -f "$ext/$f" ] || missing="$missing $f"
done
[ -f "$tmp/root$("$pgc" --pkglibdir)/zklock.so" ] || missing="$missing zklock.so"
for f in LICENSE NOTICE; do
	[ -f "$doc/$f" ] || missing="$missing $f"
done
result "$([ -z "$missing" ] && echo 1 || echo 0)" \
	"make install of zklock-$release installs zklock.so, zklock.control, every DATA script, LICENSE and NOTICE${missing:+ (missing:$missing)}"

# PGXN's client, from the zip, into that PostgreSQL and out again
if [ "$(id -u)" -eq 0 ] && command -v pgxn >/dev/null 2>&1; then
	so="$("$pgc" --pkglibdir)/zklock.so"
	ctl="$("$pgc" --sharedir)/extension/zklock.control"
	# A zklock installed there already (make install, make bench) is put
	# aside for the while and put back after: pgxn uninstall removes what
	# make uninstall does.
	kept=""
	for f in "$so" "$("$pgc" --sharedir)"/extension/zklock.control \
		"$("$pgc" --sharedir)"/extension/zklock--*.sql "$("$pgc" --docdir)/extension/zklock"; do
		[ -e "$f" ] || continue
		mkdir -p "$tmp/kept$(dirname "$f")"
		mv "$f" "$tmp/kept$f"
		kept="$kept $f"
	done
	(cd "$tmp" && pgxn install --yes --nosudo --make make --pg_config "$pgc" "./$zip") \
		>"$tmp/pgxn.log" 2>&1
	ok=0
	[ -f "$so" ] && [ -f "$ctl" ] && [ -f "$("$pgc" --docdir)/extension/zklock/NOTICE" ] && ok=1
	result "$ok" "pgxn install ./$zip installs zklock into $("$pgc" --version)$(
		[ "$ok" -eq 1 ] || tail -n 5 "$tmp/pgxn.log" | tr '\n' ' ')"
	(cd "$tmp" && pgxn uninstall --yes --nosudo --make make --pg_config "$pgc" "./$zip") \
		>"$tmp/pgxn-un.log" 2>&1
	result "$([ ! -e "$so" ] && [ ! -e "$ctl" ] &&
		[ ! -e "$("$pgc" --docdir)/extension/zklock" ] && echo 1 || echo 0)" \
		"pgxn uninstall ./$zip removes it again"
	for f in $kept; do
		mv "$tmp/kept$f" "$f"
	done
fi
exit $failed
