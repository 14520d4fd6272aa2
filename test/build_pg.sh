#!/bin/sh
# Build and install a PostgreSQL major that Debian 12 does not ship, from
# Debian's source package, into a private prefix; print the prefix's
# pg_config on the last line.
#   sh test/build_pg.sh MAJOR          (as root; MAJOR is 18)
#
# Debian serves the source package postgresql-MAJOR in sid; its binary
# packages need a newer C library than Debian 12's, so the server is built
# here.  The sid deb-src line lives in a private apt configuration under
# $ZKLOCK_PG_CACHE: the machine's own apt sources and lists stay as they are.
#
# The install goes to $ZKLOCK_PG_CACHE/pg/MAJOR (default
# /var/cache/zklock/pg/MAJOR) with what the tests need from the build tree:
# pg_regress and the TAP modules (PostgreSQL/Test/*.pm) under the pgxs
# directory, the layout of Debian's postgresql-client-15.  A stamp file,
# written last, marks a complete install: the next run reuses it and does
# nothing else.  Every step is bounded in time and says which step failed.
# (pg_cron, which test/t/110_recipes.pl uses on 15, cannot be had for 18
# here: the files of Debian's pg-cron source package are not served.)
set -eu

major=${1:-}
case $major in
18) ;;
*)
	echo "build_pg.sh: usage: $0 18 (the majors built from source here)" >&2
	exit 2
	;;
esac

cache=${ZKLOCK_PG_CACHE:-/var/cache/zklock}
prefix="$cache/pg/$major"
stamp="$prefix/.zklock-build-complete"
if [ -f "$stamp" ] && [ -x "$prefix/bin/pg_config" ]; then
	echo "$prefix/bin/pg_config"
	exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
	echo "build_pg.sh: PostgreSQL $major is not installed in $prefix;" \
		"run 'make deps PG=$major' as root to build it" >&2
	exit 1
fi

me=build_pg.sh
what="PostgreSQL $major"
. "$(cd "$(dirname "$0")" && pwd)/build_steps.sh"

src="$cache/src/$major"
apt="$cache/apt"
mkdir -p "$src" "$apt/lists/partial" "$apt/cache/archives/partial"
log="$src/build.log"
: >"$log"
start=$(date +%s)

# Tools the release tarball needs (no pre-generated parser in it) and the
# libraries configure looks for; IPC::Run for --enable-tap-tests.
export DEBIAN_FRONTEND=noninteractive
need=""
for p in bison flex gcc make perl bzip2 zlib1g-dev libipc-run-perl; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' ||
		need="$need $p"
done
if [ -n "$need" ]; then
	run 300 "apt-get update (the machine's own sources)" apt-get update -q
	# shellcheck disable=SC2086
	run 600 "apt-get install$need" apt-get install -y -q --no-install-recommends $need
fi

# Source packages come through a private apt configuration: a sid deb-src
# line, its own lists and cache; the machine's sources are not read.
echo "deb-src http://deb.debian.org/debian sid main" >"$apt/sources.list"
set -- -o Dir::Etc::sourcelist="$apt/sources.list" -o Dir::Etc::sourceparts=- \
	-o Dir::State::Lists="$apt/lists" -o Dir::Cache="$apt/cache" \
	-o APT::Get::List-Cleanup=0
updated=""
# fetch PACKAGE APT-OPTIONS...: download its source package into
# $src/dl-PACKAGE; $orig is its upstream tarball
fetch() {
	pkg=$1
	shift
	if [ -z "$updated" ]; then
		run 300 "apt-get update (private sid deb-src)" apt-get "$@" update -q
		updated=1
	fi
	rm -rf "${src:?}/dl-$pkg"
	mkdir -p "$src/dl-$pkg"
	step="apt-get source $pkg"
	echo "build_pg.sh: $step" >&2
	(cd "$src/dl-$pkg" && timeout 900 apt-get "$@" source --download-only -q "$pkg") \
		>>"$log" 2>&1 || fail "could not download the source package"
	orig=$(ls "$src/dl-$pkg"/*.orig.tar.* 2>/dev/null | head -n 1)
	[ -n "$orig" ] || fail "no upstream tarball (*.orig.tar.*) in $src/dl-$pkg"
}
# unpack DIR: the last fetched tarball into $src/DIR
unpack() {
	rm -rf "${src:?}/$1"
	mkdir -p "$src/$1"
	run 300 "unpack $(basename "$orig")" tar -xf "$orig" -C "$src/$1" --strip-components=1
}

# The server, with pg_regress and the TAP modules from its build tree.
fetch "postgresql-$major" "$@"
unpack tree
cd "$src/tree"
run 900 "configure" ./configure --prefix="$prefix" --without-icu --without-readline \
	--enable-debug --enable-cassert --enable-tap-tests
run 3600 "make -j2" make -j2
rm -rf "$prefix"
run 900 "make install" make install
run 300 "install pg_regress" make -C src/test/regress install
run 300 "install the TAP modules" make -C src/test/perl install
pgxs=$(dirname "$("$prefix/bin/pg_config" --pgxs)")
for f in "$pgxs/../test/regress/pg_regress" \
	"$pgxs/../test/perl/PostgreSQL/Test/Cluster.pm"; do
	[ -e "$f" ] || { step="check the install"; fail "$f is missing"; }
done

# Let the unprivileged test user read it all.
chmod -R a+rX "$prefix"
"$prefix/bin/pg_config" --version >"$stamp"
echo "build_pg.sh: PostgreSQL $major installed in $prefix in $(($(date +%s) - start)) s" >&2
echo "$prefix/bin/pg_config"
