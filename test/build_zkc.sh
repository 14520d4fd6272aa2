#!/bin/sh
# Build the TLS-capable ZooKeeper C client zklock links, from Debian's own
# zookeeper source package (3.8.0, bookworm: the version installed) or from
# Apache's source release of the same version, into a private prefix; print
# the prefix on the last line.
#   sh test/build_zkc.sh              (as root the first time)
#   ZKLOCK_ZK_SOURCE=/path/to/apache-zookeeper-3.8.0.tar.gz sh test/build_zkc.sh
#
# Debian's libzookeeper-mt is built without OpenSSL: it has no
# zookeeper_init_ssl.  The source has the client with its CMake build
# (WITH_OPENSSL) but not the jute-generated zookeeper.jute.{c,h}; the jute
# compiler that writes them is in a zookeeper-jute jar (Debian's installed
# /usr/share/java/zookeeper-jute.jar, or ZKLOCK_ZK_JUTE_JAR: e.g. lib/ of
# Apache's binary release), run by a Java runtime.
#
# Without ZKLOCK_ZK_SOURCE, nothing is downloaded but Debian's source
# package, through a private apt configuration (a bookworm deb-src line,
# its own lists and cache under $ZKLOCK_PG_CACHE/zkc-src): the machine's own
# apt sources stay as they are, and the system's libzookeeper_mt is not
# touched; Debian's patches are applied (dpkg-source -x; for the C client
# they touch only its tests, its autotools build and spelling).  With
# ZKLOCK_ZK_SOURCE, Apache's tarball is unpacked as it is (Debian's
# zookeeper_3.8.0.orig.tar.gz is that tarball), and neither apt nor root is
# needed when the tools are there: a C compiler, make, CMake, patch,
# OpenSSL's headers, a Java runtime and the jute jar.
#
# Then test/zkc/*.patch in
# order: upstream's fixes that 3.8.0 lacks (named by their JIRA) and
# zklock's own.  test/zkc/README.md documents each patch (what it fixes,
# the test that fails without it, its upstream status).
#
# The library is built with Debian's hardening flags (dpkg-buildflags with
# hardening=+all, as PostgreSQL's own packages are: -O2,
# -D_FORTIFY_SOURCE=2, -fstack-protector-strong; test/check_hardening.sh
# checks the objects; the same flags without dpkg-buildflags) and with
# WANT_SOCK_CLOEXEC, so that its sockets (and,
# with patch 0014, its wake-up pipe) are close-on-exec.  The result is static and
# position-independent
# ($ZKLOCK_PG_CACHE/zkc/lib/libzookeeper.a, libhashtable.a, and the headers
# under include/zookeeper), linked into zklock.so; $ZKLOCK_PG_CACHE/zkc/source
# names the source it came from ("debian zookeeper VERSION" or "apache
# TARBALL"; debian/rules records the first as Built-Using).  A stamp written
# last names the source version, the patches and the flags: the next run
# with the same ones does nothing.  Every step is bounded in time and says
# which step failed.
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
cache=${ZKLOCK_PG_CACHE:-/var/cache/zklock}
prefix="$cache/zkc"
stamp="$prefix/.zklock-build-complete"

# The distribution's flags, without the prefix maps of reproducible
# builds (they name the directory dpkg-buildflags runs in).  CMake reads no
# CPPFLAGS: they go in front of CFLAGS.
flags() {
	DEB_BUILD_MAINT_OPTIONS="hardening=+all reproducible=-all" \
		dpkg-buildflags --get "$1"
}
tarball=${ZKLOCK_ZK_SOURCE:-}
jute=${ZKLOCK_ZK_JUTE_JAR:-/usr/share/java/zookeeper-jute.jar}
cmake_opts="-DWITH_OPENSSL=ON -DWITH_CYRUS_SASL=OFF -DWANT_CPPUNIT=OFF -DWANT_SOCK_CLOEXEC=ON -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo"
# ask_flags: the flags (Debian's, as dpkg-buildflags gives them on
# bookworm, where it is missing), and the stamp that names them and the source.
ask_flags() {
	if command -v dpkg-buildflags >/dev/null 2>&1; then
		zkc_cflags="$(flags CPPFLAGS) $(flags CFLAGS)"
		zkc_ldflags=$(flags LDFLAGS)
	else
		zkc_cflags="-D_FORTIFY_SOURCE=2 -g -O2 -fstack-protector-strong -Wformat -Werror=format-security"
		zkc_ldflags="-Wl,-z,relro -Wl,-z,now"
	fi
	want="zookeeper 3.8.0${tarball:+ from $(basename "$tarball")}; patches $(cat "$top"/test/zkc/*.patch | cksum | cut -d' ' -f1); CFLAGS $zkc_cflags; LDFLAGS $zkc_ldflags; $cmake_opts"
}
ask_flags
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] &&
	[ -f "$prefix/lib/libzookeeper.a" ]; then
	# A build made before the source was noted: Debian's .dsc names it
	# (debian/rules needs it; zklock.so does not).
	dsc=$(ls "$cache"/zkc-src/dl/zookeeper_3.8.0-*.dsc 2>/dev/null | head -n 1)
	if [ ! -f "$prefix/source" ] && [ -z "$tarball" ] && [ -n "$dsc" ]; then
		echo "debian zookeeper $(sed -n 's/^Version: //p' "$dsc")" \
			>"$prefix/source" 2>/dev/null || true
	fi
	echo "$prefix"
	exit 0
fi

me=build_zkc.sh
what=""
. "$(cd "$(dirname "$0")" && pwd)/build_steps.sh"

src="$cache/zkc-src"
apt="$src/apt"
log="$src/build.log"
if [ -n "$tarball" ]; then
	[ -f "$tarball" ] || { step="read ZKLOCK_ZK_SOURCE"; fail "$tarball is not a file"; }
	# The release's top directory names its version.
	topdir=$(tar tzf "$tarball" 2>/dev/null | head -n 1)
	topdir=${topdir%%/*}
	case $topdir in
	apache-zookeeper-3.8.0) ;;
	*) step="read ZKLOCK_ZK_SOURCE"
		fail "$tarball holds ${topdir:-nothing tar can read}, not Apache's source release apache-zookeeper-3.8.0 (test/zkc/*.patch is a series against 3.8.0)" ;;
	esac
fi

# cmake and OpenSSL's headers to build it; patch; the jute jar (Debian's
# libzookeeper-java) and a Java runtime to run it; for Debian's source,
# dpkg-source to unpack it with its patches (and dpkg-buildflags).  As
# root on Debian what is missing is installed; elsewhere it must be there.
need=""
tools="cmake patch make cc java"
pkgs="cmake libssl-dev patch gcc make"
[ -n "$tarball" ] || pkgs="$pkgs dpkg-dev"
[ -f "$jute" ] && [ "$jute" != /usr/share/java/zookeeper-jute.jar ] ||
	pkgs="$pkgs libzookeeper-java"
command -v java >/dev/null 2>&1 || pkgs="$pkgs default-jre-headless"
if command -v dpkg-query >/dev/null 2>&1; then
	for p in $pkgs; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' ||
			need="$need $p"
	done
else
	for t in $tools; do
		command -v "$t" >/dev/null 2>&1 || need="$need $t"
	done
	[ -f "$jute" ] || need="$need $jute"
fi
if [ -n "$need" ] || [ -z "$tarball" ]; then
	if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
		if [ -n "$need" ]; then
			echo "build_zkc.sh: the TLS-capable ZooKeeper client is not built in $prefix," \
				"and building it needs:$need" >&2
		else
			echo "build_zkc.sh: the TLS-capable ZooKeeper client is not built in $prefix;" \
				"run 'make deps' as root to build it from Debian's source package," \
				"or set ZKLOCK_ZK_SOURCE to Apache's apache-zookeeper-3.8.0.tar.gz" >&2
		fi
		exit 1
	fi
fi
mkdir -p "$src"
: >"$log"
start=$(date +%s)
export DEBIAN_FRONTEND=noninteractive
if [ -n "$need" ]; then
	run 300 "apt-get update (the machine's own sources)" apt-get update -q
	# shellcheck disable=SC2086
	run 600 "apt-get install$need" apt-get install -y -q --no-install-recommends $need
fi
# dpkg-dev may have been missing when the flags were asked for.
ask_flags
[ -f "$jute" ] || { step="find the jute compiler"; fail "$jute is missing (set ZKLOCK_ZK_JUTE_JAR)"; }

rm -rf "$src/tree"
if [ -n "$tarball" ]; then
	mkdir -p "$src/tree"
	run 300 "unpack $(basename "$tarball")" tar xzf "$tarball" -C "$src/tree" --strip-components=1
	[ -d "$src/tree/zookeeper-client/zookeeper-client-c" ] ||
		{ step="unpack $(basename "$tarball")"; fail "no zookeeper-client/zookeeper-client-c in it (the binary release?)"; }
	zkc_source="apache $(basename "$tarball")"
else
	mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial"
	echo "deb-src http://deb.debian.org/debian bookworm main" >"$apt/sources.list"
	set -- -o Dir::Etc::sourcelist="$apt/sources.list" -o Dir::Etc::sourceparts=- \
		-o Dir::State::Lists="$apt/lists" -o Dir::Cache="$apt/cache" \
		-o APT::Get::List-Cleanup=0
	run 300 "apt-get update (private bookworm deb-src)" apt-get "$@" update -q
	rm -rf "$src/dl"
	mkdir -p "$src/dl"
	step="apt-get source zookeeper"
	echo "build_zkc.sh: $step" >&2
	(cd "$src/dl" && timeout 900 apt-get "$@" source --download-only -q zookeeper) \
		>>"$log" 2>&1 || fail "could not download the source package"
	dsc=$(ls "$src"/dl/zookeeper_3.8.0-*.dsc 2>/dev/null | head -n 1)
	[ -n "$dsc" ] || fail "no zookeeper_3.8.0-*.dsc in $src/dl (another version?)"
	run 300 "dpkg-source -x $(basename "$dsc")" dpkg-source -x "$dsc" "$src/tree"
	zkc_source="debian zookeeper $(sed -n 's/^Version: //p' "$dsc")"
fi

cd "$src/tree"
for p in "$top"/test/zkc/*.patch; do
	run 60 "apply $(basename "$p")" patch -p1 -i "$p"
done
client="$src/tree/zookeeper-client/zookeeper-client-c"
mkdir -p "$client/generated"
cd "$client/generated"
run 300 "generate zookeeper.jute.{c,h} (jute compiler)" java -cp "$jute" \
	org.apache.jute.compiler.generated.Rcc -l c \
	"$src/tree/zookeeper-jute/src/main/resources/zookeeper.jute"
mkdir -p "$client/build"
cd "$client/build"
# shellcheck disable=SC2086
run 300 "cmake" env CFLAGS="$zkc_cflags" LDFLAGS="$zkc_ldflags" cmake .. $cmake_opts
run 900 "make zookeeper hashtable" make -j2 zookeeper hashtable
grep -q '^#define SOCK_CLOEXEC_ENABLED 1' include/config.h ||
	{ step="check the configuration"; fail "SOCK_CLOEXEC_ENABLED is not defined in include/config.h"; }
nm libzookeeper.a 2>/dev/null | grep -q ' T zookeeper_init_ssl$' ||
	{ step="check the library"; fail "no zookeeper_init_ssl in libzookeeper.a"; }

rm -rf "$prefix"
mkdir -p "$prefix/lib" "$prefix/include/zookeeper"
cp libzookeeper.a libhashtable.a "$prefix/lib/"
cp "$client"/include/*.h "$client/generated/zookeeper.jute.h" "$prefix/include/zookeeper/"
echo "$zkc_source" >"$prefix/source"
chmod -R a+rX "$prefix"
echo "$want" >"$stamp"
echo "build_zkc.sh: ZooKeeper C client with TLS built in $prefix in $(($(date +%s) - start)) s" >&2
echo "$prefix"
