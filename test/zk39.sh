#!/bin/sh
# Unpack the ZooKeeper 3.9 server (Debian trixie's 3.9.3) for the tests that
# run against both server lines (ZKLOCK_ZK_SERVER=3.9, test/perl/ZkEnsemble.pm);
# print the directory of its jars on the last line.
#   sh test/zk39.sh              (as root the first time; make deps runs it)
#
# The server is Java (architecture all): its jars are in trixie's binary
# package libzookeeper-java (trixie's "zookeeper" package holds only the
# scripts and example configuration around them, and depends on it).  The
# package is fetched with apt-get download through a private apt
# configuration (a trixie deb line, its own lists and cache under
# $ZKLOCK_PG_CACHE/zk39) and unpacked with dpkg-deb -x: nothing is
# installed, and the machine's apt sources and bookworm's 3.8.0 jars in
# /usr/share/java stay as they are.
#
# The 3.9.3 jar's manifest class path is the 3.8.0 one, entry for entry
# (absolute /usr/share/java paths); trixie's netty, slf4j, jetty and
# metrics are the same upstream versions as bookworm's (4.1.48, 1.7.32,
# 9.4.57, 3.2.6), and every class, method and field of the libraries that
# the 3.9.3 classes name resolves in bookworm's installed jars (checked
# with javap and reflection on 2026-11-27), apart from those that 3.8.0's
# name and bookworm lacks too (the admin server's servlet classes, the
# native epoll transport, the client's netty resolver, the CLI's jline,
# source-only annotations).  So bookworm's jars serve it,
# with two exceptions ZkEnsemble.pm handles on the class path: the
# manifest also names /usr/share/java/zookeeper-jute.jar, bookworm's 3.8.0
# jute, which the JVM searches right after the jar that names it, so the
# 3.9.3 jute jar must come first; and, as for 3.8.0, netty-codec.jar is
# missing from the manifest and needed by the TLS handshake.  This script
# checks that every jar the manifest names is installed and that the JVM
# here loads the 3.9.3 classes (they are built for Java 8).
#
# A stamp written last names the version: the next run does nothing.  Every
# step is bounded in time and says which step failed.
set -eu

cache=${ZKLOCK_PG_CACHE:-/var/cache/zklock}
dir="$cache/zk39"
jars="$dir/pkg/usr/share/java"
stamp="$dir/.zklock-unpacked"
want="zookeeper 3.9.3 (trixie's libzookeeper-java)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] &&
	[ -f "$jars/zookeeper.jar" ] && [ -f "$jars/zookeeper-jute.jar" ]; then
	echo "$jars"
	exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
	echo "zk39.sh: the ZooKeeper 3.9 server jars are not unpacked in $dir;" \
		"run 'make deps' as root to unpack them" >&2
	exit 1
fi

me=zk39.sh
what="ZooKeeper 3.9 server"
. "$(cd "$(dirname "$0")" && pwd)/build_steps.sh"

apt="$dir/apt"
mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial"
log="$dir/unpack.log"
: >"$log"
start=$(date +%s)

echo "deb http://deb.debian.org/debian trixie main" >"$apt/sources.list"
set -- -o Dir::Etc::sourcelist="$apt/sources.list" -o Dir::Etc::sourceparts=- \
	-o Dir::State::Lists="$apt/lists" -o Dir::Cache="$apt/cache" \
	-o APT::Get::List-Cleanup=0
run 300 "apt-get update (private trixie deb)" apt-get "$@" update -q
rm -f "$stamp"
rm -rf "$dir/dl" "$dir/pkg"
mkdir -p "$dir/dl"
step="apt-get download libzookeeper-java (trixie)"
echo "$me: $step" >&2
(cd "$dir/dl" && timeout 300 apt-get "$@" download -q libzookeeper-java/trixie) \
	>>"$log" 2>&1 || fail "could not download the package"
deb=$(ls "$dir"/dl/libzookeeper-java_3.9.3-*_all.deb 2>/dev/null | head -n 1)
[ -n "$deb" ] || fail "no libzookeeper-java_3.9.3-*_all.deb in $dir/dl (another version?)"
run 60 "dpkg-deb -x $(basename "$deb")" dpkg-deb -x "$deb" "$dir/pkg"

step="read the jar's manifest"
if [ ! -f "$jars/zookeeper.jar" ] || [ ! -f "$jars/zookeeper-jute.jar" ]; then
	fail "no zookeeper.jar and zookeeper-jute.jar in $jars"
fi
tmp="$dir/manifest"
rm -rf "$tmp"
mkdir -p "$tmp"
(cd "$tmp" && timeout 60 jar xf "$jars/zookeeper.jar" META-INF/MANIFEST.MF) \
	>>"$log" 2>&1 || fail "jar xf failed"
# Manifest lines are folded at 72 bytes: a line that starts with a blank
# continues the one before.
classpath=$(tr -d '\r' <"$tmp/META-INF/MANIFEST.MF" |
	awk '/^ / { if (cp) printf "%s", substr($0, 2); next }
		{ cp = 0 } /^Class-Path: / { cp = 1; printf "%s", substr($0, 13) }')
rm -rf "$tmp"
[ -n "$classpath" ] || fail "no Class-Path in the manifest"

step="check the jars the manifest names"
missing=""
for j in $classpath; do
	case $j in
	# The CLI's (zkCli); bookworm's 3.8.0 names it too and lacks it too.
	*/jline.jar) continue ;;
	esac
	[ -f "$j" ] || missing="$missing $j"
done
[ -z "$missing" ] || fail "not installed:$missing (run 'make deps')"

run 60 "load the 3.9.3 classes (org.apache.zookeeper.Version)" \
	java -cp "$jars/zookeeper-jute.jar:$jars/zookeeper.jar" org.apache.zookeeper.Version
step="check the version"
grep -q '^3\.9\.3-' "$log" || fail "org.apache.zookeeper.Version did not print 3.9.3"

chmod -R a+rX "$dir"
echo "$want" >"$stamp"
echo "zk39.sh: ZooKeeper 3.9.3 unpacked in $jars in $(($(date +%s) - start)) s" >&2
echo "$jars"
