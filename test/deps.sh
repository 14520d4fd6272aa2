#!/bin/sh
# Install what zklock needs from Debian's packages; a no-op when all is there.
#   build:  postgresql-server-dev-15 (PGXS, pg_config), libzookeeper-mt-dev
#   run:    zookeeper (server jars; not zookeeperd, which starts a service)
#   test:   libipc-run-perl (TAP), python3-kazoo (tree inspection, peers),
#           Curator's jars and a JDK (javac) for the interop peers,
#           netcat-openbsd (four-letter words by hand),
#           pgbouncer and postgresql-15-cron (the tools users run zklock with),
#           gdb (holds a backend at the edge of a race window in 150_windows),
#           strace (146_io_thread: which thread makes which system call),
#           openssl and libio-socket-ssl-perl (170_tls: certificates, and
#           four-letter words on a TLS-only ensemble),
#           prometheus-postgres-exporter (197_exporter scrapes zklock's
#           statistics through exporter/zklock_queries.yaml)
#           iproute2 (ip) and util-linux (setpriv): the checker's network
#           namespaces and partitions (test/perl/ZkNet.pm, test/net_user.sh)
#   The TLS-capable C client itself: test/build_zkc.sh (cmake, libssl-dev).
set -eu

PACKAGES="postgresql-15 postgresql-client-15 postgresql-server-dev-15 \
libzookeeper-mt-dev zookeeper libipc-run-perl python3-kazoo netcat-openbsd \
libcurator-recipes-java libcurator-framework-java libcurator-client-java \
default-jdk-headless make gcc pgbouncer postgresql-15-cron gdb strace \
openssl libio-socket-ssl-perl cmake libssl-dev dpkg-dev patch \
prometheus-postgres-exporter iproute2 util-linux"

missing=""
for p in $PACKAGES; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed'; then
		missing="$missing $p"
	fi
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "zklock: missing Debian packages:$missing" >&2
	echo "zklock: run 'make deps' as root to install them" >&2
	exit 1
fi
echo "zklock: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $missing >/dev/null
