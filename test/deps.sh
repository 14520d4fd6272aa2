#!/bin/sh
# Install what one job needs from Debian's packages; a no-op when all is
# there.  The sets add up: make deps installs "build", make deb and make
# dist "build deb", make demo "build demo", make test "build deb test",
# make bench "build bench".  A host that only runs zklock needs none of
# them: PostgreSQL, the C library and OpenSSL's (libssl3), which the
# package depends on.  README.md's table "What each target installs" lists
# the same packages (test/check_readme.sh compares them).
#   sh test/deps.sh [SET...]        (SET: build, the default; deb; demo;
#                                    test; bench)
#   sh test/deps.sh --list SET      the packages of one set, a line each
#   build:  make, gcc, postgresql-server-dev-15 (PGXS, pg_config); for the
#           TLS-capable ZooKeeper C client zklock links (test/build_zkc.sh):
#           cmake, libssl-dev, libsasl2-dev (Cyrus SASL), libkrb5-dev
#           (GSS-API, zklock's Kerberos credentials), patch, dpkg-dev (its source package and the
#           hardening flags), libzookeeper-java (the jute compiler's jar)
#           and a Java runtime to run it
#   deb:    debhelper and postgresql-server-dev-all (pg_buildext and the
#           pgxs debhelper sequence), the rest of the source package's
#           Build-Depends being in build
#   demo:   postgresql-15 and postgresql-client-15 (the server, psql),
#           zookeeper (the server's jars and their Java runtime; not
#           zookeeperd, which starts a service)
#   test:   what demo needs, and libipc-run-perl (TAP), python3-kazoo (tree
#           inspection, peers), Curator's jars and a JDK (javac) for the
#           interop peers, netcat-openbsd (four-letter words by hand),
#           pgbouncer and postgresql-15-cron (the tools users run zklock with),
#           gdb (holds a backend at the edge of a race window in 150_race_windows),
#           strace (146_io_thread: which thread makes which system call;
#           172_tls_cost: which files a backend opens),
#           openssl and libio-socket-ssl-perl (170_tls: certificates, and
#           four-letter words on a TLS-only ensemble; 172_tls_cost's
#           TLS-terminating proxy),
#           prometheus-postgres-exporter (197_exporter scrapes zklock's
#           statistics through exporter/zklock_queries.yaml),
#           iproute2 (ip) and util-linux (setpriv): the checker's network
#           namespaces and partitions (test/perl/ZkNet.pm, test/net_user.sh),
#           lintian and autopkgtest (the package's checks, test/check_deb.sh),
#           pgxnclient and unzip (the PGXN distribution, test/check_dist.sh),
#           sqitch, libdbd-pg-perl, ruby-activerecord and ruby-pg, and npm's
#           node-pg-migrate (test/npm_tools.sh, after the packages): the
#           migration tools 115_migration_tools deploys with
#   bench:  what demo needs, and libpq-dev (the C clients), a JDK and
#           Curator's jars, python3-kazoo, libzookeeper-mt-dev (the raw C
#           client floor), Cyrus SASL's DIGEST-MD5 and GSSAPI modules and
#           MIT's KDC (figure 12's servers); bench/run.sh checks the same
#           list
set -eu

list=0
if [ "${1:-}" = --list ]; then
	list=1
	shift
fi
[ $# -eq 0 ] && set -- build
PACKAGES=""
npm_tools=0
for set in "$@"; do
	case $set in
	build) PACKAGES="$PACKAGES make gcc postgresql-server-dev-15 cmake libssl-dev \
libsasl2-dev libkrb5-dev patch dpkg-dev libzookeeper-java default-jre-headless" ;;
	deb) PACKAGES="$PACKAGES debhelper postgresql-server-dev-all" ;;
	demo) PACKAGES="$PACKAGES postgresql-15 postgresql-client-15 zookeeper" ;;
	test) PACKAGES="$PACKAGES postgresql-15 postgresql-client-15 zookeeper \
libipc-run-perl python3-kazoo netcat-openbsd \
libcurator-recipes-java libcurator-framework-java libcurator-client-java \
default-jdk-headless pgbouncer postgresql-15-cron gdb strace \
openssl libio-socket-ssl-perl libsasl2-modules libsasl2-modules-gssapi-mit \
krb5-kdc krb5-admin-server prometheus-postgres-exporter iproute2 util-linux \
lintian autopkgtest pgxnclient unzip \
sqitch libdbd-pg-perl ruby-activerecord ruby-pg"
		npm_tools=1 ;;
	bench) PACKAGES="$PACKAGES postgresql-15 postgresql-client-15 zookeeper \
libpq-dev openjdk-17-jdk-headless libcurator-recipes-java \
libcurator-framework-java libcurator-client-java libguava-java libslf4j-java \
python3-kazoo libzookeeper-mt-dev coreutils libsasl2-modules \
libsasl2-modules-gssapi-mit krb5-kdc krb5-admin-server" ;;
	*) echo "deps.sh: unknown set \"$set\" (build, deb, demo, test, bench)" >&2
		exit 2 ;;
	esac
done

if [ "$list" -eq 1 ]; then
	# shellcheck disable=SC2086
	printf '%s\n' $PACKAGES | awk '!seen[$0]++'
	exit 0
fi

missing=""
for p in $PACKAGES; do
	case " $missing " in *" $p "*) continue ;; esac
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed'; then
		missing="$missing $p"
	fi
done
if [ -z "$missing" ]; then
	[ "$npm_tools" -eq 0 ] || exec sh "$(dirname "$0")/npm_tools.sh"
	exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
	echo "zklock: missing Debian packages:$missing" >&2
	echo "zklock: run 'make deps' (or the make target you ran) as root to install them" >&2
	exit 1
fi
echo "zklock: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $missing >/dev/null
[ "$npm_tools" -eq 0 ] || exec sh "$(dirname "$0")/npm_tools.sh"
