#!/bin/sh
# The source releases, made from a clone (the Makefile's dist and deb).
#   sh test/release.sh dist    zklock-RELEASE.zip at the top of the tree
#   sh test/release.sh deb     the Debian source package and the binary
#                              packages built from it, in deb/
#   sh test/release.sh version the release's version
#
# RELEASE is zklock.control's default_version in SemVer (1.2 is 1.2.0);
# META.json (its version and the version it provides) and
# debian/changelog's upstream version must say the same, or nothing is
# made.
#
# Both carry the ZooKeeper C client's source as zookeeper/ (the tree
# test/build_zkc.sh --prepare makes: Apache's release, in part, and the
# jute-generated C files), so that they build with no network and no Java.
#
# dist: the last commit's files (git archive of HEAD) and zookeeper/,
# under zklock-RELEASE/, as PGXN wants a distribution: a zip with
# META.json at its top.  Entries are sorted and dated by the commit, so
# the same commit gives the same zip.
#
# deb: two upstream tarballs, postgresql-zklock_RELEASE.orig.tar.gz (the
# tree's files, tracked and not ignored, without debian/) and
# postgresql-zklock_RELEASE.orig-zookeeper.tar.gz (the client's source),
# debian/ as the Debian revision (format 3.0 (quilt)); dpkg-source -b makes
# the .dsc, then dpkg-source -x unpacks it afresh and dpkg-buildpackage -b
# builds postgresql-NN-zklock from that alone.  As root the build runs with
# no network (unshare -n) and with $ZKLOCK_PG_CACHE, /usr/share/java and
# /usr/lib/jvm hidden (unshare -m, empty tmpfs over each): it can use
# nothing but the source package and what is installed.  The build's log
# is deb/build.log.
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
cache=${ZKLOCK_PG_CACHE:-/var/cache/zklock}
what=${1:-}

version=$(sed -n "s/^default_version = '\([^']*\)'.*/\1/p" zklock.control)
case $version in
*.*.*) release=$version ;;
*.*) release=$version.0 ;;
*) release=$version.0.0 ;;
esac
if [ "$what" = version ]; then
	echo "$release"
	exit 0
fi
meta_ok=$(perl -MJSON::PP -e '
	local $/; open my $f, "<", "META.json" or die; my $m = decode_json(<$f>);
	print(($m->{version} eq $ARGV[0] && $m->{provides}{zklock}{version} eq $ARGV[0]) ? 1 : 0)' "$release")
[ "$meta_ok" = 1 ] || {
	echo "release.sh: META.json's version and provides.zklock.version must be $release (zklock.control's $version)" >&2
	exit 1
}
debversion=$(sed -n '1s/^postgresql-zklock (\([^)]*\)).*/\1/p' debian/changelog)
[ "${debversion%-*}" = "$release" ] || {
	echo "release.sh: debian/changelog's upstream version is ${debversion%-*}, not $release (zklock.control's $version)" >&2
	exit 1
}

# The client's source: the tree a release carries, else the one make deps
# prepared.
if [ -f zookeeper/README.zklock ]; then
	zktree=$top/zookeeper
else
	zktree=$(sh test/build_zkc.sh --prepare | tail -n 1)
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

case $what in
dist)
	git rev-parse --verify -q HEAD >/dev/null || {
		echo "release.sh: make dist makes a release of the last commit: run it in a clone" >&2
		exit 1
	}
	stage="$tmp/zklock-$release"
	mkdir -p "$stage"
	git archive HEAD | tar -xf - -C "$stage"
	cp -R "$zktree" "$stage/zookeeper"
	when=$(git log -1 --format=%ct HEAD)
	rm -f "zklock-$release.zip"
	python3 - "$tmp" "zklock-$release" "$top/zklock-$release.zip" "$when" <<'EOF'
import os, sys, time, zipfile
base, name, out, when = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
date = time.gmtime(max(when, 315532800))[:6]
paths = []
for d, dirs, files in os.walk(os.path.join(base, name)):
    for f in files:
        paths.append(os.path.join(d, f))
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
    for p in sorted(paths):
        info = zipfile.ZipInfo(os.path.relpath(p, base), date)
        info.external_attr = (0o100755 if os.access(p, os.X_OK) else 0o100644) << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        with open(p, "rb") as f:
            z.writestr(info, f.read())
EOF
	echo "zklock-$release.zip"
	;;
deb)
	src=postgresql-zklock
	out="$top/deb"
	rm -rf "$out"
	mkdir -p "$out"
	# tar_of DIR NAME TARBALL: DIR as NAME/ in a gzip tarball, sorted, owned
	# by root, dated by debian/changelog (the same files give the same
	# tarball)
	stamp=$(dpkg-parsechangelog -S Timestamp)
	tar_of() {
		tar --sort=name --mtime="@$stamp" --owner=0 --group=0 --numeric-owner \
			-C "$(dirname "$1")" --transform "s|^$(basename "$1")|$2|" \
			-cf - "$(basename "$1")" | gzip -n -9 >"$3"
	}
	mkdir "$tmp/main"
	if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
		git ls-files -z --cached --others --exclude-standard | \
			tar --null -T - --ignore-failed-read -cf -
	else
		tar --exclude=./deb --exclude=./zkc-build --exclude=./zookeeper -cf - .
	fi | tar -xf - -C "$tmp/main"
	rm -rf "$tmp/main/debian" "$tmp/main/zookeeper"
	tar_of "$tmp/main" "zklock-$release" "$out/${src}_$release.orig.tar.gz"
	tar_of "$zktree" zookeeper "$out/${src}_$release.orig-zookeeper.tar.gz"
	dir="$out/$src-$release"
	mkdir "$dir"
	tar -xzf "$out/${src}_$release.orig.tar.gz" -C "$dir" --strip-components=1
	tar -xzf "$out/${src}_$release.orig-zookeeper.tar.gz" -C "$dir"
	cp -R debian "$dir/"
	(cd "$out" && dpkg-source -b "$src-$release") >"$out/build.log" 2>&1 || {
		tail -n 20 "$out/build.log" >&2
		echo "make deb: dpkg-source -b failed: deb/build.log" >&2
		exit 1
	}
	rm -rf "$dir"
	dsc="${src}_$debversion.dsc"
	(cd "$out" && dpkg-source -x "$dsc" "$src-$release") >>"$out/build.log" 2>&1
	build="cd '$dir' && dpkg-buildpackage -b -us -uc"
	if [ "$(id -u)" -eq 0 ] && command -v unshare >/dev/null 2>&1; then
		hide=""
		for d in "$cache" /usr/share/java /usr/lib/jvm; do
			[ -d "$d" ] && hide="$hide mount -t tmpfs none '$d' &&"
		done
		echo "make deb: building $dsc with no network, $cache, /usr/share/java and /usr/lib/jvm hidden" >>"$out/build.log"
		set -- unshare -n -m sh -c "$hide $build"
	else
		set -- sh -c "$build"
	fi
	"$@" >>"$out/build.log" 2>&1 || {
		tail -n 40 "$out/build.log" >&2
		echo "make deb failed: deb/build.log" >&2
		exit 1
	}
	rm -rf "$dir"
	ls "$out"/*.dsc "$out"/*.deb
	;;
*)
	echo "usage: sh test/release.sh dist|deb|version" >&2
	exit 2
	;;
esac
