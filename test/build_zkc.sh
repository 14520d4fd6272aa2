#!/bin/sh
# Build the TLS-capable ZooKeeper C client that zklock links statically,
# into a private prefix; print the prefix on the last line.
#   sh test/build_zkc.sh              in a clone (make deps; as root the
#                                     first time): prepare, then build
#   sh test/build_zkc.sh --prepare    in a clone: prepare only (make dist,
#                                     make deb), print the prepared tree
#   ZKLOCK_ZK_TREE=DIR ZKLOCK_ZKC=PREFIX sh test/build_zkc.sh
#                                     in a release (the Makefile does it):
#                                     build the client source it carries
#
# Debian's libzookeeper-mt is built without OpenSSL: it has no
# zookeeper_init_ssl.  So zklock builds Apache's client itself, in two
# halves.
#
# Preparing (a clone only) makes the client's source tree that a release
# carries as zookeeper/ (the dist zip, the Debian source package's second
# upstream tarball): from Apache's source release of ZooKeeper 3.8.0
# (Debian's zookeeper_3.8.0.orig.tar.gz is that tarball, fetched with
# bookworm's source package through a private apt configuration: the
# machine's own apt sources stay as they are; or ZKLOCK_ZK_SOURCE, the
# tarball itself, with neither apt nor root), the files the client builds
# from, unchanged: zookeeper-client/zookeeper-client-c, the jute grammar it
# is generated from, Apache's LICENSE.txt and NOTICE.txt; and the
# jute-generated zookeeper.jute.{c,h} in zookeeper-client-c/generated,
# written by the jute compiler (a Java runtime and a zookeeper-jute jar:
# Debian's /usr/share/java/zookeeper-jute.jar or ZKLOCK_ZK_JUTE_JAR), so
# that building needs no Java.  README.zklock in the tree says what it is
# and names its source ("Source: debian zookeeper VERSION" or "Source:
# apache TARBALL").  The tree is $ZKLOCK_PG_CACHE/zkc-src/zookeeper.
#
# Building (everywhere) copies such a tree, applies test/zkc/*.patch in
# order (upstream's fixes that 3.8.0 lacks, named by their JIRA, and
# zklock's own; test/zkc/README.md documents each), and builds the static,
# position-independent libzookeeper.a and libhashtable.a with CMake, with
# Debian's hardening flags (dpkg-buildflags with hardening=+all, as
# PostgreSQL's own packages are: -O2, -D_FORTIFY_SOURCE=2,
# -fstack-protector-strong; the same flags without dpkg-buildflags;
# test/check_hardening.sh checks the objects) and WANT_SOCK_CLOEXEC (its
# sockets and, with patch 0014, its wake-up pipe are close-on-exec).  It
# needs a C compiler, make, CMake, patch, OpenSSL's and Cyrus SASL's
# headers (WITH_CYRUS_SASL: a library built without SASL is refused), nothing
# else: no network, no Java, no root.  The result goes to ZKLOCK_ZKC
# (default $ZKLOCK_PG_CACHE/zkc): lib/, include/zookeeper/, and "source"
# (the tree's Source line).  A stamp written last names the source, the
# patches and the flags: the next run with the same ones does nothing.
# Every step is bounded in time and says which step failed.
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
cache=${ZKLOCK_PG_CACHE:-/var/cache/zklock}
prepared="$cache/zkc-src/zookeeper"
tree=${ZKLOCK_ZK_TREE:-}
prefix=${ZKLOCK_ZKC:-$cache/zkc}
stamp="$prefix/.zklock-build-complete"
tarball=${ZKLOCK_ZK_SOURCE:-}
jute=${ZKLOCK_ZK_JUTE_JAR:-/usr/share/java/zookeeper-jute.jar}
cmake_opts="-DWITH_OPENSSL=ON -DWITH_CYRUS_SASL=ON -DWANT_CPPUNIT=OFF -DWANT_SOCK_CLOEXEC=ON -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo"
prepare_only=0
[ "${1:-}" = --prepare ] && prepare_only=1

me=build_zkc.sh
what=""
. "$top/test/build_steps.sh"
log=""

# The distribution's flags, without the prefix maps of reproducible
# builds (they name the directory dpkg-buildflags runs in).  CMake reads no
# CPPFLAGS: they go in front of CFLAGS.
flags() {
	DEB_BUILD_MAINT_OPTIONS="hardening=+all reproducible=-all" \
		dpkg-buildflags --get "$1"
}
ask_flags() {
	if command -v dpkg-buildflags >/dev/null 2>&1; then
		zkc_cflags="$(flags CPPFLAGS) $(flags CFLAGS)"
		zkc_ldflags=$(flags LDFLAGS)
	else
		zkc_cflags="-D_FORTIFY_SOURCE=2 -g -O2 -fstack-protector-strong -Wformat -Werror=format-security"
		zkc_ldflags="-Wl,-z,relro -Wl,-z,now"
	fi
}
# source_of TREE: the Source line of a prepared tree's README.zklock
source_of() {
	[ -f "$1/README.zklock" ] && sed -n 's/^Source: //p' "$1/README.zklock"
	return 0
}

# missing TOOL...: the commands not on PATH; "ssl" stands for OpenSSL's
# headers
missing() {
	for t in "$@"; do
		case $t in
		ssl) echo '#include <openssl/ssl.h>' | cc -E - >/dev/null 2>&1 ||
			printf ' %s' "OpenSSL's headers (libssl-dev, openssl-devel)" ;;
		sasl) echo '#include <sasl/sasl.h>' | cc -E - >/dev/null 2>&1 ||
			printf ' %s' "Cyrus SASL's headers (libsasl2-dev, cyrus-sasl-devel)" ;;
		*) command -v "$t" >/dev/null 2>&1 || printf ' %s' "$t" ;;
		esac
	done
}

# apt_install PACKAGE...: as root on Debian, what is missing of them
apt_install() {
	need=""
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' ||
			need="$need $p"
	done
	[ -z "$need" ] && return 0
	export DEBIAN_FRONTEND=noninteractive
	run 300 "apt-get update (the machine's own sources)" apt-get update -q
	# shellcheck disable=SC2086
	run 600 "apt-get install$need" apt-get install -y -q --no-install-recommends $need
}
as_root_on_debian() {
	[ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1
}

# prepare: the client's source tree, $prepared, from Debian's source
# package or from ZKLOCK_ZK_SOURCE; nothing when it is there for the same
# source already.
prepare() {
	want_src=${tarball:+apache $(basename "$tarball")}
	have=$(source_of "$prepared")
	if [ -f "$prepared.complete" ] && [ -n "$have" ]; then
		case $want_src in
		"") case $have in debian\ *) return 0 ;; esac ;;
		"$have") return 0 ;;
		esac
	fi
	if [ -n "$tarball" ]; then
		[ -f "$tarball" ] || { step="read ZKLOCK_ZK_SOURCE"; fail "$tarball is not a file"; }
	fi
	src="$cache/zkc-src"
	mkdir -p "$src"
	log="$src/prepare.log"
	: >"$log"
	if as_root_on_debian; then
		pkgs=""
		[ -f "$jute" ] && [ "$jute" != /usr/share/java/zookeeper-jute.jar ] ||
			pkgs="$pkgs libzookeeper-java"
		command -v java >/dev/null 2>&1 || pkgs="$pkgs default-jre-headless"
		# shellcheck disable=SC2086
		apt_install $pkgs
	elif [ -z "$tarball" ]; then
		echo "build_zkc.sh: the ZooKeeper client's source is not prepared in $prepared;" \
			"run 'make deps' as root to fetch Debian's source package," \
			"or set ZKLOCK_ZK_SOURCE to Apache's apache-zookeeper-3.8.0.tar.gz" >&2
		exit 1
	fi
	need=$(missing java tar)
	[ -f "$jute" ] || need="$need $jute (set ZKLOCK_ZK_JUTE_JAR)"
	if [ -n "$need" ]; then
		echo "build_zkc.sh: preparing the ZooKeeper client's source needs:$need" >&2
		exit 1
	fi
	if [ -z "$tarball" ]; then
		apt="$src/apt"
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
		[ -n "$dsc" ] && [ -f "$src/dl/zookeeper_3.8.0.orig.tar.gz" ] ||
			fail "no zookeeper_3.8.0-*.dsc and zookeeper_3.8.0.orig.tar.gz in $src/dl (another version?)"
		from="$src/dl/zookeeper_3.8.0.orig.tar.gz"
		source="debian zookeeper $(sed -n 's/^Version: //p' "$dsc")"
		origin="the zookeeper_3.8.0.orig.tar.gz of Debian's source package zookeeper ${source##* } (bookworm)"
	else
		from=$tarball
		source="apache $(basename "$tarball")"
		origin=$(basename "$tarball")
	fi
	# The release's top directory names its version.
	topdir=$(tar tzf "$from" 2>/dev/null | head -n 1)
	topdir=${topdir%%/*}
	[ "$topdir" = apache-zookeeper-3.8.0 ] || {
		step="read $(basename "$from")"
		fail "it holds ${topdir:-nothing tar can read}, not Apache's source release apache-zookeeper-3.8.0 (test/zkc/*.patch is a series against 3.8.0)"
	}
	rm -rf "$prepared" "$prepared.complete" "$src/unpack"
	mkdir -p "$src/unpack" "$prepared"
	jute_src=zookeeper-jute/src/main/resources/zookeeper.jute
	run 300 "unpack $(basename "$from")" tar xzf "$from" -C "$src/unpack" \
		"$topdir/LICENSE.txt" "$topdir/NOTICE.txt" "$topdir/$jute_src" \
		"$topdir/zookeeper-client/zookeeper-client-c"
	mv "$src/unpack/$topdir"/* "$prepared/"
	rm -rf "$src/unpack"
	client="$prepared/zookeeper-client/zookeeper-client-c"
	[ -f "$client/CMakeLists.txt" ] ||
		{ step="unpack $(basename "$from")"; fail "no zookeeper-client/zookeeper-client-c in it (the binary release?)"; }
	mkdir -p "$client/generated"
	(cd "$client/generated" &&
		run 300 "generate zookeeper.jute.{c,h} (jute compiler)" java -cp "$jute" \
			org.apache.jute.compiler.generated.Rcc -l c "$prepared/$jute_src")
	cat >"$prepared/README.zklock" <<EOF
Apache ZooKeeper 3.8.0's C client, as zklock builds it
Source: $source

This directory holds the part of Apache's source release of ZooKeeper
3.8.0 (apache-zookeeper-3.8.0.tar.gz, here from $origin)
that zklock's zklock.so is built with, unchanged: the C client
(zookeeper-client/zookeeper-client-c), the jute grammar of ZooKeeper's
wire format (zookeeper-jute/src/main/resources/zookeeper.jute), and the
release's LICENSE.txt and NOTICE.txt.  The rest of the release is left
out.

zookeeper-client/zookeeper-client-c/generated/zookeeper.jute.{c,h} are
not in Apache's source release: they were generated from zookeeper.jute
by the jute compiler of ZooKeeper 3.8.0
(org.apache.jute.compiler.generated.Rcc -l c), so that building needs
no Java.

zklock's build (test/build_zkc.sh) copies this tree, applies the patch
series in zklock's test/zkc/ (each patch's header and test/zkc/README.md
say what it changes and why) and builds the static libraries
libzookeeper.a and libhashtable.a that zklock.so links.  The client is
licensed under the Apache License 2.0 (LICENSE.txt), its hashtable
(zookeeper-client/zookeeper-client-c/src/hashtable) under a BSD licence
(src/hashtable/LICENSE.txt); zklock's NOTICE reproduces their notices.
EOF
	chmod -R a+rX "$prepared"
	echo "$source" >"$prepared.complete"
}

# build TREE: the libraries from a prepared tree into $prefix; nothing when
# the stamp says they were built from the same source, patches and flags.
build() {
	from=$1
	source=$(source_of "$from")
	[ -n "$source" ] || { step="read $from/README.zklock"; fail "no Source line: not a prepared client tree"; }
	ask_flags
	want="zookeeper 3.8.0, $source; patches $(cat "$top"/test/zkc/*.patch | cksum | cut -d' ' -f1); CFLAGS $zkc_cflags; LDFLAGS $zkc_ldflags; $cmake_opts"
	if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] &&
		[ -f "$prefix/lib/libzookeeper.a" ]; then
		return 0
	fi
	need=$(missing cc make cmake patch ssl sasl)
	# A release's build (ZKLOCK_ZK_TREE: a package build, PGXN) installs
	# nothing; a clone's make deps does, as root on Debian.
	if [ -n "$need" ] && [ -z "$tree" ] && as_root_on_debian; then
		log=/dev/null
		apt_install gcc make cmake patch libssl-dev libsasl2-dev
		need=$(missing cc make cmake patch ssl sasl)
	fi
	if [ -n "$need" ]; then
		echo "build_zkc.sh: building the ZooKeeper C client needs:$need" >&2
		exit 1
	fi
	work="$(dirname "$prefix")/zkc-work"
	rm -rf "$work"
	mkdir -p "$work"
	log="$work/build.log"
	: >"$log"
	start=$(date +%s)
	cp -R "$from" "$work/src"
	cd "$work/src"
	for p in "$top"/test/zkc/*.patch; do
		run 60 "apply $(basename "$p")" patch -p1 -i "$p"
	done
	client="$work/src/zookeeper-client/zookeeper-client-c"
	mkdir -p "$client/build"
	cd "$client/build"
	# shellcheck disable=SC2086
	run 300 "cmake" env CFLAGS="$zkc_cflags" LDFLAGS="$zkc_ldflags" cmake .. $cmake_opts
	run 900 "make zookeeper hashtable" make -j2 zookeeper hashtable
	grep -q '^#define SOCK_CLOEXEC_ENABLED 1' include/config.h ||
		{ step="check the configuration"; fail "SOCK_CLOEXEC_ENABLED is not defined in include/config.h"; }
	nm libzookeeper.a 2>/dev/null | grep -q ' T zookeeper_init_ssl$' ||
		{ step="check the library"; fail "no zookeeper_init_ssl in libzookeeper.a"; }
	# CMake builds without SASL, with a warning only, when it finds no
	# Cyrus SASL: refuse such a library.
	for sym in zookeeper_init_sasl zoo_sasl_make_basic_callbacks zookeeper_init_ssl_ctx_sasl; do
		nm libzookeeper.a 2>/dev/null | grep -q " T $sym\$" ||
			{ step="check the library"; fail "no $sym in libzookeeper.a: the client was built without Cyrus SASL (libsasl2-dev)"; }
	done
	rm -rf "$prefix"
	mkdir -p "$prefix/lib" "$prefix/include/zookeeper"
	cp libzookeeper.a libhashtable.a "$prefix/lib/"
	cp "$client"/include/*.h "$client/generated/zookeeper.jute.h" "$prefix/include/zookeeper/"
	echo "$source" >"$prefix/source"
	chmod -R a+rX "$prefix"
	echo "$want" >"$stamp"
	cd "$top"
	rm -rf "$work"
	echo "build_zkc.sh: ZooKeeper C client with TLS and SASL built in $prefix in $(($(date +%s) - start)) s" >&2
}

if [ -n "$tree" ]; then
	[ -f "$tree/zookeeper-client/zookeeper-client-c/CMakeLists.txt" ] ||
		{ step="read ZKLOCK_ZK_TREE"; fail "$tree holds no zookeeper-client/zookeeper-client-c"; }
	tree=$(cd "$tree" && pwd)
	build "$tree"
	echo "$prefix"
	exit 0
fi
prepare
if [ "$prepare_only" -eq 1 ]; then
	echo "$prepared"
	exit 0
fi
build "$prepared"
echo "$prefix"
