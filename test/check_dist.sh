#!/bin/sh
# make dist's source release builds and installs as any PGXS extension: the
# tarball zklock-VERSION.tar.gz holds exactly the last commit's files under
# zklock-VERSION/ (META.json among them, nothing generated), and unpacked
# in an empty directory it builds with PGXS for PG_CONFIG (warnings as
# errors, the client make deps built) and installs (into a staging
# directory, DESTDIR: the system's PostgreSQL is not touched) zklock.so,
# the control file and every script.  Prints one TAP line per property.
#   sh test/check_dist.sh PG_CONFIG
set -u

pgc=${1:-pg_config}
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
. "$top/test/tap.sh"

version=$(sed -n "s/^default_version = '\([^']*\)'.*/\1/p" zklock.control)
tarball=zklock-$version.tar.gz
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! make -s dist >"$tmp/dist.log" 2>&1 || [ ! -f "$tarball" ]; then
	echo "not ok 1 - make dist wrote no $tarball: $(tail -n 3 "$tmp/dist.log")"
	exit 1
fi
mv "$tarball" "$tmp/"

git ls-tree -r --name-only HEAD | sed "s|^|zklock-$version/|" | sort >"$tmp/want"
tar tzf "$tmp/$tarball" | grep -v '/$' | sort >"$tmp/got"
result "$(cmp -s "$tmp/want" "$tmp/got" && echo 1 || echo 0)" \
	"$tarball holds the last commit's files under zklock-$version/, nothing else$(
		diff "$tmp/want" "$tmp/got" | grep '^[<>]' | head -n 5 | tr '\n' ' ')"
result "$(grep -qx "zklock-$version/META.json" "$tmp/got" && echo 1 || echo 0)" \
	"$tarball has META.json at its top"

mkdir "$tmp/empty" "$tmp/root"
tar xzf "$tmp/$tarball" -C "$tmp/empty"
src="$tmp/empty/zklock-$version"
# A plain PGXS build: make, make install, with no variable of this tree's
# but PG_CONFIG (the client's cache comes from the environment, as for
# make deps).
if (cd "$src" && env -u MAKEFLAGS -u MAKELEVEL make -s PG_CONFIG="$pgc" \
	PG_CFLAGS="-Wall -Wextra -Werror" >"$tmp/build.log" 2>&1); then
	result 1 "zklock-$version builds with PGXS in an empty directory"
else
	result 0 "zklock-$version builds with PGXS in an empty directory: $(tail -n 5 "$tmp/build.log" | tr '\n' ' ')"
fi
(cd "$src" && env -u MAKEFLAGS -u MAKELEVEL make -s PG_CONFIG="$pgc" \
	DESTDIR="$tmp/root" install >"$tmp/install.log" 2>&1)
ext="$tmp/root$("$pgc" --sharedir)/extension"
missing=""
for f in zklock.control $(sed -n 's/^DATA = //p' Makefile); do
	[ -f "$ext/$f" ] || missing="$missing $f"
done
[ -f "$tmp/root$("$pgc" --pkglibdir)/zklock.so" ] || missing="$missing zklock.so"
result "$([ -z "$missing" ] && echo 1 || echo 0)" \
	"make install of zklock-$version installs zklock.so, zklock.control and every DATA script${missing:+ (missing:$missing)}"
exit $failed
