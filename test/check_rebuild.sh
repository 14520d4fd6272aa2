#!/bin/sh
# After make test has built zklock for one PostgreSQL, a plain make for
# another (make demo after make test) must build it again for that one, not
# keep the objects of the first.  Builds for PG_CONFIG without cleaning, then
# checks that every symbol zklock.so takes from outside is defined by that
# PostgreSQL's postgres or by the libraries it or zklock.so links.  Prints one TAP
# line.
#   sh test/check_rebuild.sh PG_CONFIG
set -u

pgc=$1
version=$("$pgc" --version)
if ! make -s PG_CONFIG="$pgc" >/dev/null 2>&1; then
	echo "not ok 1 - make for $version after a build for another PostgreSQL failed"
	exit 1
fi
defined=$(mktemp)
trap 'rm -f "$defined"' EXIT
postgres=$("$pgc" --bindir)/postgres
{
	nm -D --defined-only "$postgres"
	# the libraries ("name => /path"), and the dynamic loader ("/path")
	ldd "$postgres" zklock.so |
		awk '$3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' | sort -u |
		while read -r lib; do nm -D --defined-only "$lib"; done
} 2>/dev/null | awk '{ sub(/@.*/, "", $3); print $3 }' | sort -u >"$defined"
missing=$(nm -D --undefined-only zklock.so | awk '$1 == "U" { sub(/@.*/, "", $2); print $2 }' |
	sort -u | comm -23 - "$defined" | tr '\n' ' ')
if [ -n "$missing" ]; then
	echo "not ok 1 - zklock.so built for $version after another PostgreSQL: it binds to what $version lacks: $missing"
	exit 1
fi
echo "ok 1 - a make for $version after a build for another PostgreSQL builds zklock.so for it"
