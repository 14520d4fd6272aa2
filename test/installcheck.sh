#!/bin/sh
# make installcheck: PGXS's pg_regress command (the arguments) against the
# running server, with zklock installed there, and a ZooKeeper.  The
# suites need zklock.hosts: ZKLOCK_HOSTS names an ensemble to use (its
# tree under zklock.root gets the suites' lock directories); without it a
# throwaway standalone ZooKeeper (Debian's zookeeper package, or
# ZooKeeper's jars where test/perl/ZkEnsemble.pm finds them) starts on a
# free loopback port and is stopped, by its PID, when the suites end.
# zklock.hosts (a superuser's setting: installcheck connects as one) and
# zklock.session_timeout reach every session through PGOPTIONS.
#   sh test/installcheck.sh PG_REGRESS [ARG...]
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
hosts=${ZKLOCK_HOSTS:-}
zkdir=""
stop_zk() {
	[ -n "$zkdir" ] || return 0
	perl -I "$top/test/perl" "$top/test/zk_ensemble.pl" stop --dir "$zkdir/zk" >/dev/null 2>&1 || true
	rm -rf "$zkdir"
}
trap stop_zk EXIT
trap 'exit 1' INT TERM
if [ -z "$hosts" ]; then
	zkdir=$(mktemp -d "${TMPDIR:-/tmp}/zklock-installcheck.XXXXXX")
	if ! hosts=$(perl -I "$top/test/perl" "$top/test/zk_ensemble.pl" start \
		--servers 1 --dir "$zkdir/zk" 2>"$zkdir/start.log"); then
		echo "installcheck: could not start a ZooKeeper server (set ZKLOCK_HOSTS to use a running ensemble):" >&2
		tail -n 20 "$zkdir/start.log" >&2
		exit 1
	fi
	echo "installcheck: a throwaway ZooKeeper at $hosts" >&2
fi
PGOPTIONS="${PGOPTIONS:+$PGOPTIONS }-c zklock.hosts=$hosts -c zklock.session_timeout=10000"
export PGOPTIONS
"$@"
