#!/bin/sh
# make demo / make demo-stop
#
# start: build and install zklock, start a 3-server ZooKeeper ensemble on
#        127.0.0.1 and two PostgreSQL clusters ("east" and "west") wired to
#        it, then show a lock taken in one cluster blocking the other, the
#        waiter getting it when the holder commits, and the fencing tokens.
# stop:  stop both clusters and the ensemble, remove their data.
#
# Everything lives in $ZKLOCK_DEMO_DIR (default /tmp/zklock-demo).  The
# clusters run as the unprivileged user "postgres" (initdb refuses root).
# The PostgreSQL is $PG_CONFIG's (make demo PG=18 sets it), else the
# pg_config on PATH.
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
D=${ZKLOCK_DEMO_DIR:-/tmp/zklock-demo}
EAST_PORT=${ZKLOCK_DEMO_EAST_PORT:-5441}
WEST_PORT=${ZKLOCK_DEMO_WEST_PORT:-5442}
pgc=${PG_CONFIG:-pg_config}
bindir=$("$pgc" --bindir)

as_pg() {
	if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

stop() {
	for c in east west; do
		if [ -f "$D/$c/postmaster.pid" ]; then
			as_pg "$bindir/pg_ctl" -D "$D/$c" -m fast -w stop >/dev/null 2>&1 || true
		fi
	done
	if [ -f "$D/zk/ensemble.state" ]; then
		perl -I "$top/test/perl" "$top/test/zk_ensemble.pl" stop --dir "$D/zk" >/dev/null 2>&1 || true
	fi
	rm -rf "$D"
}

psql_on() {
	port=$1
	shift
	"$bindir/psql" -X -q -At -h "$D" -p "$port" -U postgres -d postgres "$@"
}

start() {
	stop
	echo "== building and installing zklock"
	(cd "$top" && make -s PG_CONFIG="$pgc" PG_CFLAGS="-Wall -Wextra -Werror" >/dev/null &&
		make -s PG_CONFIG="$pgc" install >/dev/null)

	mkdir -p "$D"
	echo "== starting a 3-server ZooKeeper ensemble on 127.0.0.1"
	hosts=$(perl -I "$top/test/perl" "$top/test/zk_ensemble.pl" start --servers 3 --dir "$D/zk")
	echo "   connect string: $hosts"

	[ "$(id -u)" -eq 0 ] && chown postgres "$D"
	for c in east west; do
		port=$EAST_PORT
		[ "$c" = west ] && port=$WEST_PORT
		echo "== starting PostgreSQL cluster \"$c\" on port $port"
		as_pg "$bindir/initdb" -D "$D/$c" -A trust -U postgres >/dev/null
		cat >>"$D/$c/postgresql.conf" <<EOF
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$D'
cluster_name = '$c'
zklock.hosts = '$hosts'
zklock.session_timeout = '10s'
EOF
		as_pg "$bindir/pg_ctl" -D "$D/$c" -l "$D/$c.log" -w start >/dev/null
		psql_on "$port" -c "CREATE EXTENSION zklock"
	done

	echo
	echo "== east takes 'nightly-billing' in a transaction and holds it for 3 s"
	rm -f "$D/east_locked"
	psql_on "$EAST_PORT" >"$D/east.out" 2>&1 <<EOF &
BEGIN;
SELECT 'east token: ' || zk_xact_lock('nightly-billing');
\! touch $D/east_locked
SELECT pg_sleep(3);
COMMIT;
EOF
	east_pid=$!
	i=0
	while [ ! -f "$D/east_locked" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
	cat "$D/east.out"

	echo "== west tries the same lock: zk_try_lock('nightly-billing')"
	echo "   -> $(psql_on "$WEST_PORT" -c "SELECT zk_try_lock('nightly-billing')")  (east holds it)"
	echo "== west waits with zk_lock('nightly-billing') until east commits"
	psql_on "$WEST_PORT" <<'EOF'
\set start `date +%s.%N`
SELECT 'west token: ' || zk_lock('nightly-billing');
\set stop `date +%s.%N`
SELECT format('west waited %s s; its token is larger, so storage can fence out east',
              round((:stop - :start)::numeric, 1));
SELECT format('west holds: name=%s mode=%s scope=%s state=%s node=%s',
              name, mode, scope, state, node) FROM zk_locks;
SELECT zk_unlock('nightly-billing') \g /dev/null
EOF
	wait "$east_pid" || true

	cat <<EOF

== the demo is running
   ZooKeeper ensemble: $hosts
   east:  psql -h $D -p $EAST_PORT -U postgres postgres
   west:  psql -h $D -p $WEST_PORT -U postgres postgres
   try:   SELECT zk_lock('job');  in one, SELECT zk_try_lock('job');  in the other
   stop everything: make demo-stop
EOF
}

case "${1:-}" in
start) start ;;
stop) stop; echo "zklock demo stopped" ;;
*) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
