#!/bin/sh
# make bench: zklock against the ZooKeeper C client floor, Apache Curator,
# kazoo and PostgreSQL's own pg_advisory_lock, on one 3-server ensemble
# (forceSync=yes) on 127.0.0.1, in one run.
#
# Builds and installs zklock, starts the ensemble and two PostgreSQL
# clusters ("zk": zklock loaded on first use, max_connections for the herd;
# "central": the central PostgreSQL for pg_advisory_lock, with zklock in
# shared_preload_libraries for the memory and thread check), runs every
# contender in every figure once per round over several rounds (the order
# rotates each round, so drift hits all alike), prints one table with ratios
# and MET / NOT MET per target, writes it to bench/results/latest.txt, and
# stops every process it started, by PID, on success and on failure.
#
# Then the same figures at a distance: every client (PostgreSQL backends,
# Curator, kazoo, the C client, and the central PostgreSQL's clients) reaches
# the servers through bench/delay_proxy.c, which holds every byte for
# BENCH_DELAY_MS in each direction; the round trip is measured and printed.
# New figures at both distances: the hand-off latency (unlock sent -> the
# waiter's lock returns; also for a one-lease semaphore, zklock and Curator)
# and the cron-job pattern (new connection, lock,
# unlock, disconnect).  zklock-async is zklock with
# zklock.synchronous_release = off: what waiting for the release costs.
#
# Settings (environment): BENCH_ROUNDS (3), BENCH_CYCLES (600 per round),
# BENCH_SECONDS (3 per run), BENCH_HERD (500 waiters), BENCH_DELAY_MS (2),
# BENCH_DELAY_ROUNDS (2), BENCH_DELAY_CYCLES (120 per round),
# BENCH_REGION_MS (20, the cross-region distance), BENCH_WARMUP_S (30 s of
# unmeasured load that warms the ensemble up first), BENCH_KEEP=1
# keeps the work directory.  Must run as root (installs zklock; clusters run
# as "postgres").
set -u

top=$(cd "$(dirname "$0")/.." && pwd)
B=$top/bench
ROUNDS=${BENCH_ROUNDS:-3}
CYCLES=${BENCH_CYCLES:-600}
DELAY_MS=${BENCH_DELAY_MS:-2}
DROUNDS=${BENCH_DELAY_ROUNDS:-2}
DCYCLES=${BENCH_DELAY_CYCLES:-120}
LAT_N=150            # hand-off latency samples per run (at a distance: half)
CRON_N=60            # cron-job samples per run (at a distance: half)
WARM=100
JWARM=400            # Curator: JIT warm-up before the timed cycles
SECS=${BENCH_SECONDS:-3}
HANDOFF_CLIENTS=8
DISTINCT_CLIENTS=32
HERD=${BENCH_HERD:-500}
MEM_BACKENDS=5
MEM_ALL=20           # backends using zklock at once, for PSS
BUDGET_ROUNDS_S=260  # start no further loopback round after this much time
BUDGET_DELAY_S=500   # start no further round at a distance after this much
PY=/usr/bin/python3  # kazoo imports only under Debian's python3
JAVA_DIR=/usr/share/java
bindir=$(pg_config --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)
T_START=$(date +%s)

say() { printf '[%4ss] %s\n' "$(($(date +%s) - T_START))" "$*"; }
fail() { say "bench: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || fail "run as root (installs zklock; clusters run as postgres)"

# ---------------------------------------------------------------- packages
# make bench runs make deps (server, C client, kazoo) first; a bare machine
# also needs these for the peers and the clients.
PACKAGES="libpq-dev gcc openjdk-17-jdk-headless libcurator-recipes-java \
libcurator-framework-java libcurator-client-java libguava-java libslf4j-java \
python3-kazoo zookeeper libzookeeper-mt-dev postgresql-15 \
postgresql-server-dev-15 make coreutils libsasl2-modules libsasl2-modules-gssapi-mit \
krb5-kdc krb5-admin-server"
missing=""
for p in $PACKAGES; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' ||
		missing="$missing $p"
done
if [ -n "$missing" ]; then
	say "installing$missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q >/dev/null && \
		apt-get install -y -q --no-install-recommends $missing >/dev/null ||
		fail "could not install$missing"
fi

# ---------------------------------------------------------------- cleanup
W=""
BG_PIDS=""
PG_PIDS=""
cleanup() {
	status=$?
	trap - EXIT INT TERM HUP
	# contenders run under timeout, which passes TERM on to the contender's
	# process group and follows up with KILL after 5 s: give it that time
	for p in $BG_PIDS; do
		if kill -TERM "$p" 2>/dev/null; then
			i=0
			while kill -0 "$p" 2>/dev/null && [ $i -lt 80 ]; do
				sleep 0.1
				i=$((i + 1))
			done
			kill -KILL "$p" 2>/dev/null
		fi
		wait "$p" 2>/dev/null
	done
	if [ -n "$W" ]; then
		for c in pgzk central pgtls pgplain pgdigest pggss pgsaslp; do
			[ -f "$W/$c/postmaster.pid" ] &&
				runuser -u postgres -- "$bindir/pg_ctl" -D "$W/$c" -m fast -w -t 60 stop >/dev/null 2>&1
		done
		# what pg_ctl did not stop: by the PID recorded at start
		for p in $PG_PIDS; do
			if kill -0 "$p" 2>/dev/null; then
				kill -QUIT "$p" 2>/dev/null; sleep 2; kill -KILL "$p" 2>/dev/null
			fi
		done
		[ -f "$W/ensemble/ensemble.state" ] &&
			perl -I "$top/test/perl" "$top/test/zk_ensemble.pl" stop --dir "$W/ensemble" >/dev/null 2>&1
		for e in tls-ensemble tls39-ensemble sasl/digest sasl/gssapi; do
			[ -f "$W/$e/ensemble.state" ] &&
				perl -I "$top/test/perl" "$top/test/zk_ensemble.pl" stop --dir "$W/$e" >/dev/null 2>&1
		done
		[ -f "$W/sasl/kdc.pid" ] && kill -KILL "$(cat "$W/sasl/kdc.pid")" 2>/dev/null
		if [ "${BENCH_KEEP:-0}" = 1 ]; then
			echo "bench: work directory kept: $W" >&2
		else
			rm -rf "$W"
		fi
	fi
	exit $status
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# ---------------------------------------------------------------- build
say "building and installing zklock"
# from clean: objects built for another major (make PG=18) would link
(cd "$top" && make -s clean >/dev/null && make -s >/dev/null && make -s install >/dev/null) ||
	fail "make / make install of zklock failed"

W=$(mktemp -d /tmp/zklock-bench.XXXXXX)
chmod 755 "$W"
chown postgres "$W"
R=$W/res
mkdir -p "$R" "$W/bin"

say "building the clients"
gcc -O2 -Wall -Wextra -DTHREADED -o "$W/bin/zk_floor" "$B/zk_floor.c" \
	-lzookeeper_mt -lpthread || fail "zk_floor.c did not build"
gcc -O2 -Wall -Wextra -o "$W/bin/delay_proxy" "$B/delay_proxy.c" ||
	fail "delay_proxy.c did not build"
gcc -O2 -Wall -Wextra -I"$(pg_config --includedir)" -o "$W/bin/pg_client" \
	"$B/pg_client.c" -L"$(pg_config --libdir)" -lpq -lpthread ||
	fail "pg_client.c did not build"
CP_J=$W/bin
for j in curator-recipes curator-framework curator-client guava zookeeper \
	zookeeper-jute slf4j-api slf4j-nop; do
	CP_J=$CP_J:$JAVA_DIR/$j.jar
done
CURATOR_OK=1
javac -nowarn -d "$W/bin" -cp "$CP_J" "$B/CuratorBench.java" >"$W/javac.log" 2>&1 ||
	{ CURATOR_OK=0; say "CuratorBench.java did not compile: Curator rows will say FAILED"; }
KAZOO_OK=1
$PY -c 'import kazoo' 2>/dev/null || { KAZOO_OK=0; say "kazoo not importable under $PY"; }

# ---------------------------------------------------------------- servers
say "starting a 3-server ZooKeeper ensemble (forceSync=yes) on 127.0.0.1"
HOSTS=$(perl -I "$top/test/perl" "$top/test/zk_ensemble.pl" start --servers 3 \
	--dir "$W/ensemble" --conf forceSync=yes --conf maxClientCnxns=0) ||
	fail "the ensemble did not start"
[ -n "$HOSTS" ] || fail "the ensemble did not start"

# CPU time (user + system, all threads) of the ensemble's three servers, in
# clock ticks: per run, what the servers spent on the contender's requests.
CLK_TCK=$(getconf CLK_TCK)
server_ticks() {
	t=0
	for p in $(pgrep -f -- "$W/ensemble/"); do
		t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)))
	done
	echo $t
}

# wait_file FILE PID TENTHS: until FILE exists, PID has ended or TENTHS
# tenths of a second have passed
wait_file() {
	_i=0
	while [ ! -f "$1" ] && [ $_i -lt "$3" ] && kill -0 "$2" 2>/dev/null; do
		sleep 0.1
		_i=$((_i + 1))
	done
}

free_port() {
	# a port below the ephemeral range that nothing listens on
	$PY - <<'EOF'
import random, socket
for _ in range(500):
    p = random.randint(40000, 48000)
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
        print(p)
        break
    except OSError:
        pass
    finally:
        s.close()
EOF
}

start_cluster() {  # name port extra-conf
	name=$1 port=$2
	runuser -u postgres -- "$bindir/initdb" -D "$W/$name" -A trust -U postgres \
		>"$W/$name.initdb.log" 2>&1 || return 1
	cat >>"$W/$name/postgresql.conf" <<EOF
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$W'
cluster_name = 'bench-$name'
zklock.hosts = '$HOSTS'
zklock.session_timeout = '30s'
zklock.connect_timeout = '20s'
$3
EOF
	runuser -u postgres -- "$bindir/pg_ctl" -D "$W/$name" -l "$W/$name.log" -w -t 60 start \
		>/dev/null 2>&1 || return 1
	PG_PIDS="$PG_PIDS $(head -1 "$W/$name/postmaster.pid")"
	psql -X -q -h "$W" -p "$port" -U postgres -d postgres \
		-c "CREATE EXTENSION zklock" >/dev/null || return 1
}

ZK_PORT=$(free_port)
say "starting PostgreSQL cluster \"pgzk\" (port $ZK_PORT, max_connections $((HERD + 100)))"
start_cluster pgzk "$ZK_PORT" "max_connections = $((HERD + 100))
shared_buffers = 16MB" || fail "cluster pgzk did not start: $(tail -3 "$W/pgzk.log" "$W/pgzk.initdb.log" 2>/dev/null)"
CENTRAL_PORT=$(free_port)
say "starting PostgreSQL cluster \"central\" (port $CENTRAL_PORT, zklock preloaded)"
start_cluster central "$CENTRAL_PORT" "max_connections = 100
shared_buffers = 32MB
shared_preload_libraries = 'zklock'" || fail "cluster central did not start: $(tail -3 "$W/central.log" "$W/central.initdb.log" 2>/dev/null)"
CI_ZK="host=127.0.0.1 port=$ZK_PORT user=postgres dbname=postgres"
CI_CENTRAL="host=127.0.0.1 port=$CENTRAL_PORT user=postgres dbname=postgres"

# The distance: one delaying proxy process, a port per ZooKeeper server and
# one for the central PostgreSQL (the lock service of pg_advisory_lock).
# PostgreSQL backends reach ZooKeeper through it by zklock.hosts, set per
# connection; their own clients stay local, as a cron job's would.
say "starting the delaying proxy: ${DELAY_MS} ms each way"
ZK_PORTS=$(echo "$HOSTS" | tr ',' '\n' | sed 's/.*://' | tr '\n' ' ')
mkfifo "$W/proxy.out"
"$W/bin/delay_proxy" $((DELAY_MS * 1000)) $ZK_PORTS "$CENTRAL_PORT" >"$W/proxy.out" 2>"$W/proxy.log" &
PROXY_PID=$!
BG_PIDS="$BG_PIDS $PROXY_PID"
read -r PPORTS <"$W/proxy.out" || fail "delay proxy did not start: $(cat "$W/proxy.log")"
set -- $PPORTS
D_HOSTS=""
while [ $# -gt 1 ]; do
	D_HOSTS="$D_HOSTS${D_HOSTS:+,}127.0.0.1:$1"
	shift
done
D_CENTRAL_PORT=$1
CI_ZK_D="$CI_ZK options='-c zklock.hosts=$D_HOSTS'"
CI_CENTRAL_D="host=127.0.0.1 port=$D_CENTRAL_PORT user=postgres dbname=postgres"
CI_PRELOADED_D="$CI_CENTRAL options='-c zklock.hosts=$D_HOSTS'"
# zklock-async: releases that return before the ensemble answers them
ASYNC="-c zklock.synchronous_release=off"
CI_ZK_ASYNC="$CI_ZK options='$ASYNC'"
CI_ZK_ASYNC_D="$CI_ZK options='-c zklock.hosts=$D_HOSTS $ASYNC'"
# the cron job's breakdown: the same pattern, with its sessions logged
TRACE="-c zklock.log_sessions=on"

# at_distance 0|1|2: the hosts and conninfos the contenders use (2: the
# cross-region distance, set up further down)
at_distance() {
	if [ "$1" = 2 ]; then
		H=$X_HOSTS CZ=$CI_ZK_X CC=$CI_CENTRAL_X CPRE=$CI_PRELOADED_X CZA=$CI_ZK_X
		CYC=30 WRM=5 JW=30 LN=24 CN=12
		SETTLE=$((3000 + 6000 * REGION_MS))
	elif [ "$1" = 1 ]; then
		H=$D_HOSTS CZ=$CI_ZK_D CC=$CI_CENTRAL_D CPRE=$CI_PRELOADED_D CZA=$CI_ZK_ASYNC_D
		CZT="$CI_ZK options='-c zklock.hosts=$D_HOSTS $TRACE'"
		CYC=$DCYCLES WRM=20 JW=100 LN=$((LAT_N / 2)) CN=$((CRON_N / 2))
		SETTLE=$((3000 + 6000 * DELAY_MS))
	else
		H=$HOSTS CZ=$CI_ZK CC=$CI_CENTRAL CPRE=$CI_CENTRAL CZA=$CI_ZK_ASYNC
		CZT="$CI_ZK options='$TRACE'"
		# PostgreSQL's own pg_advisory_lock, routed to zklock by
		# zklock.fleet_advisory_keys (zklock loaded at connection), and
		# with zklock loaded but no key listed
		CZR="$CI_ZK options='-c session_preload_libraries=zklock -c zklock.fleet_advisory_keys=*'"
		CZL="$CI_ZK options='-c session_preload_libraries=zklock'"
		CYC=$CYCLES WRM=$WARM JW=$JWARM LN=$LAT_N CN=$CRON_N
		SETTLE=3000
	fi
}
at_distance 0

# ---------------------------------------------------------------- machine
{
	echo "nproc=$(nproc)"
	echo "cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')"
	echo "mem_kb=$(awk '/MemTotal/ {print $2}' /proc/meminfo)"
	echo "kernel=$(uname -sr)"
	echo "os=$(. /etc/os-release && echo "$PRETTY_NAME")"
	echo "pg=$("$bindir/postgres" --version)"
	echo "zk=$($PY "$B/zkstat.py" "$HOSTS" version | sed 's/-.*//')"
	echo "curator=$(dpkg-query -W -f='${Version}' libcurator-recipes-java | sed 's/-[^-]*$//')"
	echo "kazoo=$($PY -c 'from kazoo.version import __version__ as v; print(v)' 2>/dev/null)"
	echo "java=$(java -version 2>&1 | head -1)"
	echo "python=$($PY --version 2>&1)"
	echo "loadavg_start=$(cut -d' ' -f1-3 /proc/loadavg)"
	echo "rounds_planned=$ROUNDS"
	echo "cycles=$CYCLES"
	echo "warm=$WARM"
	echo "seconds=$SECS"
	echo "handoff_clients=$HANDOFF_CLIENTS"
	echo "distinct_clients=$DISTINCT_CLIENTS"
	echo "herd=$HERD"
	echo "mem_backends=$MEM_BACKENDS"
	echo "delay_ms=$DELAY_MS"
	echo "delay_rounds_planned=$DROUNDS"
	echo "delay_cycles=$DCYCLES"
	echo "lat_n=$LAT_N"
	echo "cron_n=$CRON_N"
} >"$R/meta"

# ---------------------------------------------------------------- contenders
# run_one FIGURE CONTENDER TAG: one timed run, bounded; a failure leaves
# OUT.fail with the reason, and the run goes on.
run_one() {
	fig=$1 who=$2 out=$R/$1.$2.$3
	case $fig in
	cycle|latency|cron|set|routed|unlisted|sasl) limit=150 ;;
	*) limit=$((SECS + 90)) ;;
	esac
	case $fig.$who in
	cycle.floor) set -- "$W/bin/zk_floor" cycle "$H" $WRM "$CYC" "$out" ;;
	set.zklock) set -- "$W/bin/pg_client" cycle "$CZ" zkset $WRM "$CYC" "$out" ;;
	set.zklock-five) set -- "$W/bin/pg_client" cycle "$CZ" zkfive $WRM "$CYC" "$out" ;;
	set.curator) set -- java -Xmx512m -cp "$CP_J" CuratorBench setcycle "$H" $JW "$CYC" "$out" ;;
	cycle.floor-async) set -- "$W/bin/zk_floor" async "$H" $WRM "$CYC" "$out" ;;
	cycle.floor-read) set -- "$W/bin/zk_floor" read "$H" $WRM "$CYC" "$out" ;;
	cycle.zklock) set -- "$W/bin/pg_client" cycle "$CZ" zklock $WRM "$CYC" "$out" ;;
	# pairs, one cycle each in turn (pg_client.c, run_pair): the routed
	# pg_advisory_lock against zk_lock on the same backend and session;
	# pg_advisory_lock of an unlisted key with zklock loaded against the
	# same without zklock (two backends, pinned to one CPU with the client)
	routed.zklock-routed) set -- "$W/bin/pg_client" pair "$CZR" zklock "=" advisory $WRM "$CYC" "$R/routed.zklock.$3" "$out" ;;
	unlisted.pg-advisory-loaded) set -- "$W/bin/pg_client" pair "$CZ" advisory "$CZL" advisory $WRM $((5 * CYC)) "$R/unlisted.pg-advisory.$3" "$out" ;;
	cycle.zklock-xact) set -- "$W/bin/pg_client" cycle "$CZ" zkxact $WRM "$CYC" "$out" ;;
	cycle.zklock-async) set -- "$W/bin/pg_client" cycle "$CZA" zklock $WRM "$CYC" "$out" ;;
	cycle.zklock-tls) set -- "$W/bin/pg_client" cycle "$CI_TLS" zklock $WRM "$CYC" "$out" ;;
	cron.zklock-tls) set -- "$W/bin/pg_client" cron "$CI_TLS" zklock 5 "$CN" "$out" ;;
	cycle.tls-plain) set -- "$W/bin/pg_client" cycle "$CI_PLAIN" zklock $WRM "$CYC" "$out" ;;
	# SASL: the cycle as a pair (plain and SASL in turn, two backends
	# pinned with the client to one CPU), the new session in runs
	sasl.digest) set -- "$W/bin/pg_client" pair "$CI_SASLP" zklock "$CI_DIGEST" zklock $WRM "$CYC" "$R/sasl.sasl-plain-digest.$3" "$out" ;;
	sasl.gssapi) set -- "$W/bin/pg_client" pair "$CI_SASLPG" zklock "$CI_GSS" zklock $WRM "$CYC" "$R/sasl.sasl-plain-gss.$3" "$out" ;;
	cron.digest) set -- "$W/bin/pg_client" cron "$CI_DIGEST" zklock 5 "$CN" "$out" ;;
	cron.gssapi) set -- "$W/bin/pg_client" cron "$CI_GSS" zklock 5 "$CN" "$out" ;;
	cron.sasl-plain-digest) set -- "$W/bin/pg_client" cron "$CI_SASLP" zklock 5 "$CN" "$out" ;;
	cron.sasl-plain-gss) set -- "$W/bin/pg_client" cron "$CI_SASLPG" zklock 5 "$CN" "$out" ;;
	cron.tls-plain) set -- "$W/bin/pg_client" cron "$CI_PLAIN" zklock 5 "$CN" "$out" ;;
	*.curator-plain) set -- java -Xmx512m $J_NETTY -cp "$CP_JN" CuratorBench "$fig" "$TLSP_HOSTS" \
		$([ "$fig" = cron ] && echo 5 || echo $JW) "$([ "$fig" = cron ] && echo "$CN" || echo "$CYC")" "$out" ;;
	*.curator-tls) set -- java -Xmx512m $J_TLS $J_TLS_PROTO -cp "$CP_JN" CuratorBench "$fig" "$TLS_HOSTS" \
		$([ "$fig" = cron ] && echo 5 || echo $JW) "$([ "$fig" = cron ] && echo "$CN" || echo "$CYC")" "$out" ;;
	cycle.pg-advisory) set -- "$W/bin/pg_client" cycle "$CC" advisory $WRM "$CYC" "$out" ;;
	cycle.curator) set -- java -Xmx512m -cp "$CP_J" CuratorBench cycle "$H" $JW "$CYC" "$out" ;;
	cycle.kazoo) set -- $PY "$B/kazoo_bench.py" cycle "$H" $WRM "$CYC" "$out" ;;
	latency.floor) set -- "$W/bin/zk_floor" latency "$H" 10 "$LN" "$out" ;;
	latency.zklock) set -- "$W/bin/pg_client" latency "$CZ" zklock 10 "$LN" "$SETTLE" "$out" ;;
	latency.zklock-async) set -- "$W/bin/pg_client" latency "$CZA" zklock 10 "$LN" "$SETTLE" "$out" ;;
	latency.pg-advisory) set -- "$W/bin/pg_client" latency "$CC" advisory 10 "$LN" "$SETTLE" "$out" ;;
	latency.curator) set -- java -Xmx512m -cp "$CP_J" CuratorBench latency "$H" 100 "$LN" "$SETTLE" "$out" ;;
	latency.kazoo) set -- $PY "$B/kazoo_bench.py" latency "$H" 10 "$LN" "$SETTLE" "$out" ;;
	latency.zklock-sem) set -- "$W/bin/pg_client" latency "$CZ" semaphore 10 "$LN" $((2 * SETTLE)) "$out" ;;
	latency.curator-sem) set -- java -Xmx512m -cp "$CP_J" CuratorBench semlatency "$H" 100 "$LN" $((2 * SETTLE)) "$out" ;;
	cron.floor) set -- "$W/bin/zk_floor" session "$H" 5 "$CN" "$out" ;;
	cron.floor-fork) set -- "$W/bin/zk_floor" session-fork "$H" 5 "$CN" "$out" ;;
	cron.zklock) set -- "$W/bin/pg_client" cron "$CZ" zklock 5 "$CN" "$out" ;;
	cron.zklock-preloaded) set -- "$W/bin/pg_client" cron "$CPRE" zklock 5 "$CN" "$out" ;;
	cron.zklock-trace) set -- "$W/bin/pg_client" cron "$CZT" zklock 5 "$CN" "$out" ;;
	cron.zklock-load) set -- "$W/bin/pg_client" cron "$CZ" load 5 "$CN" "$out" ;;
	cron.pg-connect) set -- "$W/bin/pg_client" cron "$CI_ZK" connect 5 "$CN" "$out" ;;
	cron.pg-advisory) set -- "$W/bin/pg_client" cron "$CC" advisory 5 "$CN" "$out" ;;
	*.floor) set -- "$W/bin/zk_floor" "$fig" "$H" "$N_CLIENTS" "$SECS" "$out" ;;
	*.zklock) set -- "$W/bin/pg_client" "$fig" "$CZ" zklock "$N_CLIENTS" "$SECS" "$out" ;;
	*.zklock-xact) set -- "$W/bin/pg_client" "$fig" "$CZ" zkxact "$N_CLIENTS" "$SECS" "$out" ;;
	*.zklock-async) set -- "$W/bin/pg_client" "$fig" "$CZA" zklock "$N_CLIENTS" "$SECS" "$out" ;;
	*.pg-advisory) set -- "$W/bin/pg_client" "$fig" "$CC" advisory "$N_CLIENTS" "$SECS" "$out" ;;
	*.curator) set -- java -Xmx512m -cp "$CP_J" CuratorBench "$fig" "$H" "$N_CLIENTS" "$SECS" "$out" ;;
	*.kazoo) set -- $PY "$B/kazoo_bench.py" "$fig" "$H" "$N_CLIENTS" "$SECS" "$out" ;;
	esac
	if [ "${who%%-*}" = curator ] && [ $CURATOR_OK = 0 ]; then
		echo "CuratorBench.java did not compile" >"$out.fail"
		return
	fi
	if [ "$who" = kazoo ] && [ $KAZOO_OK = 0 ]; then
		echo "kazoo not importable under $PY" >"$out.fail"
		return
	fi
	# The ensemble's own slowest request during the run (mntr, as the
	# servers measured it), so that a stall can be told from zklock's.
	$PY "$B/zkstat.py" "$HOSTS" reset >/dev/null 2>&1
	srv_at=$(server_ticks)
	log_at=$(stat -c %s "$W/pgzk.log" 2>/dev/null || echo 0)
	# a cluster that logs its sessions (zklock.log_sessions): this run's
	# opens, for the breakdowns
	case $fig.$who in
	cron.zklock-tls) slog=pgtls ;;
	cron.tls-plain) slog=pgplain ;;
	cron.digest) slog=pgdigest ;;
	cron.gssapi) slog=pggss ;;
	cron.sasl-plain-*) slog=pgsaslp ;;
	*) slog="" ;;
	esac
	slog_at=$(stat -c %s "$W/$slog.log" 2>/dev/null || echo 0)
	# In the background, so that a signal to this script runs the trap at
	# once; timeout signals the contender's whole process group.
	timeout -k 5 "$limit" "$@" >"$out.log" 2>&1 &
	cur=$!
	BG_PIDS="$BG_PIDS $cur"
	wait $cur
	rc=$?
	BG_PIDS=$(echo "$BG_PIDS" | sed "s/ $cur\b//")
	$PY "$B/zkstat.py" "$HOSTS" maxlat >"$out.zk" 2>/dev/null || rm -f "$out.zk"
	echo "server_cpu_us=$((($(server_ticks) - srv_at) * 1000000 / CLK_TCK))" >"$out.srv"
	if [ -n "$slog" ]; then
		tail -c +$((slog_at + 1)) "$W/$slog.log" >"$out.sessions" 2>/dev/null
	fi
	if [ "$fig.$who" = cron.zklock-trace ]; then
		# zklock.log_sessions: every open and close of the run (the last
		# backends close after their client has gone: wait, bounded)
		i=0
		while [ $i -lt 50 ]; do
			tail -c +$((log_at + 1)) "$W/pgzk.log" >"$out.sessions"
			[ "$(grep -c 'LOG:  ZooKeeper session .* closed in' "$out.sessions")" -ge "$(grep -c 'LOG:  ZooKeeper session .* opened in' "$out.sessions")" ] && break
			sleep 0.1
			i=$((i + 1))
		done
	fi
	if [ $rc = 0 ] && [ -s "$out.sum" ]; then
		say "  $fig $who ok"
	else
		{ [ $rc = 124 ] && echo "timed out after ${limit}s"; grep -v '^\s*at ' "$out.log" | tail -3; } |
			tr '\n' ' ' | cut -c1-200 >"$out.fail"
		rm -f "$out.sum"
		say "  $fig $who FAILED: $(cat "$out.fail")"
	fi
}

CONTENDERS="floor zklock zklock-xact zklock-async curator kazoo pg-advisory"
rotate() {  # rotate the list by $1 places
	n=$1
	shift
	while [ "$n" -gt 0 ]; do
		first=$1
		shift
		set -- "$@" "$first"
		n=$((n - 1))
	done
	echo "$@"
}

LAT_CONTENDERS="floor zklock zklock-async curator kazoo pg-advisory zklock-sem curator-sem"
CRON_CONTENDERS="floor floor-fork zklock zklock-preloaded pg-connect pg-advisory zklock-trace zklock-load"
SET_CONTENDERS="zklock zklock-five curator"

# run_round K TAG: every figure once, contender order rotated by K
run_round() {
	k=$1 tag=$2
	order=$(rotate "$k" $CONTENDERS)
	say "round $tag: $order"
	for who in $order; do
		run_one cycle "$who" "$tag"
		if [ "$who" = floor ]; then
			run_one cycle floor-async "$tag"
			run_one cycle floor-read "$tag"
		fi
		# after zk_lock's own cycle: zk_lock and the routed
		# pg_advisory_lock in turn, then an unlisted key's cost
		if [ "$who" = zklock ]; then
			run_one routed zklock-routed "$tag"
			run_one unlisted pg-advisory-loaded "$tag"
		fi
	done
	N_CLIENTS=$HANDOFF_CLIENTS
	for who in $order; do run_one handoff "$who" "$tag"; done
	N_CLIENTS=$DISTINCT_CLIENTS
	for who in $order; do run_one distinct "$who" "$tag"; done
	for who in $(rotate "$k" $LAT_CONTENDERS); do run_one latency "$who" "$tag"; done
	for who in $(rotate "$k" $CRON_CONTENDERS); do run_one cron "$who" "$tag"; done
	for who in $(rotate "$k" $SET_CONTENDERS); do run_one set "$who" "$tag"; done
}

# The servers' JIT compiler takes the first half minute of load (on 2 CPUs
# its threads took 45% of the CPU in the first seconds of a fresh
# ensemble, and throughput tripled after): warm the ensemble up with the
# C client's distinct and hand-off loads, unmeasured, so that round 1 is
# not the servers' warm-up.
WARMUP_S=${BENCH_WARMUP_S:-30}
say "warming the ensemble up: ${WARMUP_S} s of load, not measured"
timeout -k 5 $((WARMUP_S + 60)) "$W/bin/zk_floor" distinct "$HOSTS" "$DISTINCT_CLIENTS" \
	$((WARMUP_S * 2 / 3)) "$W/warmup.distinct" >"$W/warmup.log" 2>&1
timeout -k 5 $((WARMUP_S + 60)) "$W/bin/zk_floor" handoff "$HOSTS" "$HANDOFF_CLIENTS" \
	$((WARMUP_S / 3)) "$W/warmup.handoff" >>"$W/warmup.log" 2>&1
echo "warmup_s=$WARMUP_S" >>"$R/meta"

rounds_done=0
r=1
while [ $r -le "$ROUNDS" ]; do
	if [ $r -gt 1 ] && [ $(($(date +%s) - T_START)) -gt $BUDGET_ROUNDS_S ]; then
		say "time budget used: stopping after $rounds_done rounds"
		break
	fi
	at_distance 0
	run_round $((r - 1)) r$r
	rounds_done=$r
	r=$((r + 1))
done
echo "rounds_done=$rounds_done" >>"$R/meta"

drounds_done=0
r=1
while [ $r -le "$DROUNDS" ]; do
	if [ $r -gt 1 ] && [ $(($(date +%s) - T_START)) -gt $BUDGET_DELAY_S ]; then
		say "time budget used: stopping after $drounds_done rounds at a distance"
		break
	fi
	at_distance 1
	run_round $((r - 1)) d$r
	drounds_done=$r
	r=$((r + 1))
done
echo "delay_rounds_done=$drounds_done" >>"$R/meta"
at_distance 0

# ---------------------------------------------------------------- cross-region
# A lock shared by data centers: BENCH_REGION_MS (20) each way, through a
# second delaying proxy.  One round with fewer samples: the uncontended
# cycle, the hand-off latency and the cron job, zklock beside Curator,
# kazoo and the central PostgreSQL's advisory lock.
REGION_MS=${BENCH_REGION_MS:-20}
region_rounds_done=0
mkfifo "$W/proxyx.out"
"$W/bin/delay_proxy" $((REGION_MS * 1000)) $ZK_PORTS "$CENTRAL_PORT" >"$W/proxyx.out" 2>"$W/proxyx.log" &
PROXYX_PID=$!
BG_PIDS="$BG_PIDS $PROXYX_PID"
if read -r XPORTS <"$W/proxyx.out"; then
	set -- $XPORTS
	X_HOSTS=""
	while [ $# -gt 1 ]; do
		X_HOSTS="$X_HOSTS${X_HOSTS:+,}127.0.0.1:$1"
		shift
	done
	CI_ZK_X="$CI_ZK options='-c zklock.hosts=$X_HOSTS'"
	CI_CENTRAL_X="host=127.0.0.1 port=$1 user=postgres dbname=postgres"
	CI_PRELOADED_X="$CI_CENTRAL options='-c zklock.hosts=$X_HOSTS'"
	say "cross-region: ${REGION_MS} ms each way"
	at_distance 2
	for who in floor zklock curator kazoo pg-advisory; do run_one cycle "$who" x1; done
	for who in floor zklock curator kazoo pg-advisory; do run_one latency "$who" x1; done
	for who in floor floor-fork zklock zklock-preloaded pg-connect pg-advisory; do run_one cron "$who" x1; done
	at_distance 0
	region_rounds_done=1
else
	say "cross-region: the delay proxy did not start: no cross-region rows"
fi
echo "region_ms=$REGION_MS" >>"$R/meta"
echo "region_rounds_done=$region_rounds_done" >>"$R/meta"

# ---------------------------------------------------------------- TLS
# zklock over TLS (zklock.ssl) against plain, on the same servers: a second
# 3-server ensemble whose servers serve a secure client port (client
# certificates required, the x509 identity) and a plain one, both by Netty
# (the same server code on both sides), and two clusters alike but for
# zklock.ssl: "pgtls" (its backends present a client certificate) and
# "pgplain", both with zklock preloaded (backends share the servers' TLS
# tickets) and every session logged (zklock.log_sessions: where an open's
# time goes, and whether its handshake resumed).  Both ports are warmed up
# first (BENCH_TLS_WARMUP_S, plain and TLS in turn: a fresh server's TLS
# code runs interpreted at first); then plain and TLS alternate over
# TLS_ROUNDS rounds, the order swapped each round: zklock's uncontended
# cycle and cron-job pattern (a new session each sample: the handshake
# shows), and Curator's cycle and new session with ZooKeeper's Netty client
# socket, plain and TLS, the anchor for what TLS costs a Java client.
# Then one round more against ZooKeeper 3.9 servers, whose costs differ
# (doc/tls.md), with the same clusters (zklock.hosts per connection).
TLS_ROUNDS=2
TLS_WARMUP_S=${BENCH_TLS_WARMUP_S:-40}
tls_rounds_done=0
tls39_rounds_done=0
# ZooKeeper's Java client: Netty, plain or TLS (the PEM stores ZkCerts makes)
CP_JN=$CP_J:$JAVA_DIR/netty-codec.jar:$JAVA_DIR/netty-resolver.jar
J_NETTY="-Dzookeeper.clientCnxnSocket=org.apache.zookeeper.ClientCnxnSocketNetty"
J_TLS="$J_NETTY -Dzookeeper.client.secure=true -Dzookeeper.ssl.keyStore.location=$W/certs/a.pem
 -Dzookeeper.ssl.keyStore.type=PEM -Dzookeeper.ssl.trustStore.location=$W/certs/ca.pem
 -Dzookeeper.ssl.trustStore.type=PEM"

# tls_ensemble DIR LINE: a TLS + plain 3-server ensemble of ZooKeeper LINE
# (3.8 or 3.9); sets TLS_HOSTS and TLSP_HOSTS (empty on failure)
tls_ensemble() {
	out=$(ZKLOCK_ZK_SERVER=$2 perl -I "$top/test/perl" "$top/test/zk_ensemble.pl" start --servers 3 \
		--dir "$1" --tls "$W/certs" --plain-too --conf forceSync=yes \
		--conf maxClientCnxns=0) || out=""
	TLS_HOSTS=$(echo "$out" | sed -n 1p)
	TLSP_HOSTS=$(echo "$out" | sed -n 2p)
	[ -n "$TLSP_HOSTS" ] || TLS_HOSTS=""
}

# tls_warmup: plain and TLS in turn, TLS_WARMUP_S in all, not measured
tls_warmup() {
	for _half in 1 2; do
		for ci in "$CI_PLAIN" "$CI_TLS"; do
			timeout -k 5 $((TLS_WARMUP_S / 4 + 60)) "$W/bin/pg_client" distinct "$ci" zklock \
				"$HANDOFF_CLIENTS" $((TLS_WARMUP_S / 4)) "$W/warmup.tls" >>"$W/warmup.log" 2>&1
		done
	done
}

# tls_round TAG: every TLS figure once, plain and TLS in the order K says
tls_round() {
	tag=$1 k=$2
	for side in $(rotate "$k" plain tls); do
		if [ "$side" = plain ]; then
			run_one cycle tls-plain "$tag"
			run_one cron tls-plain "$tag"
			run_one cycle curator-plain "$tag"
			run_one cron curator-plain "$tag"
		else
			run_one cycle zklock-tls "$tag"
			run_one cron zklock-tls "$tag"
			run_one cycle curator-tls "$tag"
			run_one cron curator-tls "$tag"
		fi
	done
}

say "starting a TLS and plain 3-server ensemble, clusters \"pgtls\" and \"pgplain\""
tls_ensemble "$W/tls-ensemble" 3.8
# the backends' copies, owned by postgres, the key 0600 (as for
# ssl_key_file); the cluster starts once they are over 2 s old: files
# changed less than 2 s before the postmaster reads them are read and
# digested again by every backend (a file identity that recent is not
# trusted: doc/tls.md), a cost an operator's files seldom have
if [ -d "$W/certs" ]; then
	mkdir -p "$W/pgcerts"
	cp "$W/certs/ca.pem" "$W/certs/a.crt" "$W/certs/a.key" "$W/pgcerts/"
	chown -R postgres "$W/pgcerts"
	chmod 600 "$W/pgcerts/a.key"
fi
if [ -n "$TLS_HOSTS" ]; then
	i=0
	while [ $(($(date +%s) - $(stat -c %Z "$W/pgcerts/a.key"))) -le 2 ] && [ $i -lt 50 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	TLS_PORT=$(free_port)
	start_cluster pgtls "$TLS_PORT" "zklock.hosts = '$TLS_HOSTS'
zklock.ssl = on
zklock.ssl_ca_file = '$W/pgcerts/ca.pem'
zklock.ssl_cert_file = '$W/pgcerts/a.crt'
zklock.ssl_key_file = '$W/pgcerts/a.key'
zklock.root = '/zktls'
zklock.log_sessions = on
shared_preload_libraries = 'zklock'" || TLS_HOSTS=""
fi
# a root of its own: the plain side's directories have an open ACL, which
# the TLS side (an x509 identity) refuses to lock under
if [ -n "$TLS_HOSTS" ]; then
	PLAIN_PORT=$(free_port)
	start_cluster pgplain "$PLAIN_PORT" "zklock.hosts = '$TLSP_HOSTS'
zklock.root = '/zkplain'
zklock.log_sessions = on
shared_preload_libraries = 'zklock'" || TLS_HOSTS=""
fi
if [ -n "$TLS_HOSTS" ]; then
	CI_TLS="host=127.0.0.1 port=$TLS_PORT user=postgres dbname=postgres"
	CI_PLAIN="host=127.0.0.1 port=$PLAIN_PORT user=postgres dbname=postgres"
	J_TLS_PROTO=""
	say "warming both ports up: ${TLS_WARMUP_S} s of load, plain and TLS in turn, not measured"
	tls_warmup
	r=1
	while [ $r -le $TLS_ROUNDS ]; do
		tls_round "t$r" $((r - 1))
		tls_rounds_done=$r
		r=$((r + 1))
	done
	perl -I "$top/test/perl" "$top/test/zk_ensemble.pl" stop --dir "$W/tls-ensemble" >/dev/null 2>&1
	# ZooKeeper 3.9 (test/zk39.sh unpacks its jars; make bench runs it)
	say "starting a TLS and plain 3-server ensemble of ZooKeeper 3.9"
	TLS_HOSTS38=$TLS_HOSTS
	tls_ensemble "$W/tls39-ensemble" 3.9
	if [ -n "$TLS_HOSTS" ]; then
		CI_TLS="$CI_TLS options='-c zklock.hosts=$TLS_HOSTS'"
		CI_PLAIN="$CI_PLAIN options='-c zklock.hosts=$TLSP_HOSTS'"
		# 3.9 servers speak only TLS 1.3 (ZOOKEEPER-4415); the 3.8 Java
		# client must be told to
		J_TLS_PROTO="-Dzookeeper.ssl.protocol=TLSv1.3"
		tls_warmup
		tls_round z1 0
		tls39_rounds_done=1
		perl -I "$top/test/perl" "$top/test/zk_ensemble.pl" stop --dir "$W/tls39-ensemble" >/dev/null 2>&1
	else
		say "TLS: the 3.9 ensemble did not start: no 3.9 rows"
	fi
	TLS_HOSTS=$TLS_HOSTS38
else
	say "TLS: the ensemble or the clusters did not start: no TLS rows"
fi
echo "tls_rounds_done=$tls_rounds_done" >>"$R/meta"
echo "tls39_rounds_done=$tls39_rounds_done" >>"$R/meta"


# ---------------------------------------------------------------- SASL
# zklock with SASL (zklock.sasl_mechanism) against plain on the same
# servers: bench/sasl_servers.pl starts a private KDC and two 3-server
# ensembles that admit SASL and plain sessions alike, one for DIGEST-MD5,
# one whose servers log in to Kerberos for GSSAPI.  Three clusters alike
# but for the SASL settings, zklock preloaded, sessions logged: "pgdigest",
# "pggss" (its backends log in from a keytab of their own) and "pgsaslp"
# (plain; pointed at either ensemble by the connection).  Over SASL_ROUNDS
# rounds, for each mechanism: the uncontended cycle as a pair (plain and
# SASL in turn in one run) and the cron-job pattern (a new session each
# sample: the SASL exchange shows), plain and SASL in an order swapped
# each round.
SASL_ROUNDS=2
sasl_rounds_done=0
say "starting a KDC and two 3-server ensembles that admit SASL (DIGEST-MD5, GSSAPI)"
perl -I "$top/test/perl" "$B/sasl_servers.pl" "$W/sasl" >"$W/sasl.log" 2>&1 &
SASL_PID=$!
BG_PIDS="$BG_PIDS $SASL_PID"
wait_file "$W/sasl/sasl.env" $SASL_PID 1800
SASL_OK=0
if [ -f "$W/sasl/sasl.env" ]; then
	. "$W/sasl/sasl.env"
	mkdir -p "$W/pgsasl"
	printf '%s\n' "$SASL_PASSWORD" >"$W/pgsasl/zk.pw"
	cp "$SASL_KEYTAB" "$W/pgsasl/zklock.keytab"
	chown -R postgres "$W/pgsasl"
	chmod 600 "$W/pgsasl/zk.pw" "$W/pgsasl/zklock.keytab"
	# the backends read the private realm's krb5.conf (the postmaster's
	# environment); the keytab is all they log in with
	export KRB5_CONFIG KRB5_KDC_PROFILE
	DIGEST_PORT=$(free_port)
	GSS_PORT=$(free_port)
	SASLP_PORT=$(free_port)
	start_cluster pgdigest "$DIGEST_PORT" "zklock.hosts = '$SASL_DIGEST_HOSTS'
zklock.sasl_mechanism = 'DIGEST-MD5'
zklock.sasl_user = 'zklock'
zklock.sasl_password_file = '$W/pgsasl/zk.pw'
zklock.root = '/zkdigest'
zklock.log_sessions = on
shared_preload_libraries = 'zklock'" &&
	start_cluster pggss "$GSS_PORT" "zklock.hosts = '$SASL_GSS_HOSTS'
zklock.sasl_mechanism = 'GSSAPI'
zklock.sasl_principal = '$SASL_PRINCIPAL'
zklock.sasl_keytab = '$W/pgsasl/zklock.keytab'
zklock.root = '/zkgss'
zklock.log_sessions = on
shared_preload_libraries = 'zklock'" &&
	start_cluster pgsaslp "$SASLP_PORT" "zklock.hosts = '$SASL_DIGEST_HOSTS'
zklock.root = '/zksaslp'
zklock.log_sessions = on
shared_preload_libraries = 'zklock'" && SASL_OK=1
	unset KRB5_CONFIG KRB5_KDC_PROFILE
fi
if [ $SASL_OK = 1 ]; then
	CI_DIGEST="host=127.0.0.1 port=$DIGEST_PORT user=postgres dbname=postgres"
	CI_GSS="host=127.0.0.1 port=$GSS_PORT user=postgres dbname=postgres"
	CI_SASLP="host=127.0.0.1 port=$SASLP_PORT user=postgres dbname=postgres"
	CI_SASLPG="$CI_SASLP options='-c zklock.hosts=$SASL_GSS_HOSTS'"
	r=1
	while [ $r -le $SASL_ROUNDS ]; do
		for mech in digest gssapi; do
			run_one sasl "$mech" "s$r"
			plain=sasl-plain-digest
			[ $mech = gssapi ] && plain=sasl-plain-gss
			for who in $(rotate $((r - 1)) "$plain" "$mech"); do
				run_one cron "$who" "s$r"
			done
		done
		sasl_rounds_done=$r
		r=$((r + 1))
	done
else
	say "SASL: the servers or the clusters did not start: no SASL rows ($(tail -2 "$W/sasl.log" | tr '\n' ' '))"
fi
# the servers stop now (the driver stops them by PID on TERM)
if kill -TERM $SASL_PID 2>/dev/null; then
	i=0
	while kill -0 $SASL_PID 2>/dev/null && [ $i -lt 600 ]; do
		sleep 0.1
		i=$((i + 1))
	done
fi
echo "sasl_rounds_done=$sasl_rounds_done" >>"$R/meta"

# ---------------------------------------------------------------- herd
# HERD waiters queue on one lock; then the holder releases and each waiter
# releases as soon as it holds.  The ensemble counts the watches set
# (wchs) and the watches fired (mntr zk_sum_node_*_watch_count).
# Retried: right after the herd, 500 sessions closing can keep a server from
# answering a four-letter word within zkstat.py's 3 s.
zkstat() {
	for _try in 1 2 3 4 5; do
		$PY "$B/zkstat.py" "$HOSTS" 2>/dev/null && return
		sleep 1
	done
	echo "watches=-1 notifications=-1 children=-1"
}

run_herd() {
	who=$1 out=$R/herd.$1
	case $who in
	zklock) set -- "$W/bin/pg_client" herd "$CI_ZK" "$HERD" "$out" ;;
	curator)
		[ $CURATOR_OK = 1 ] || { echo "CuratorBench.java did not compile" >"$out.fail"; return; }
		set -- java -Xmx1g -Xss512k -cp "$CP_J" CuratorBench herd "$HOSTS" "$HERD" "$out" ;;
	kazoo)
		[ $KAZOO_OK = 1 ] || { echo "kazoo not importable" >"$out.fail"; return; }
		set -- $PY "$B/kazoo_bench.py" herd "$HOSTS" "$HERD" "$out" ;;
	esac
	timeout -k 5 300 "$@" >"$out.log" 2>&1 &
	hp=$!
	BG_PIDS="$BG_PIDS $hp"
	wait_file "$out.ready" $hp 2400
	if [ -f "$out.ready" ]; then
		# every waiter is queued; wait (bounded) for the watch count to settle
		j=0
		prev=""
		while [ $j -lt 50 ]; do
			cur=$(zkstat)
			[ "$cur" = "$prev" ] && break
			prev=$cur
			sleep 0.2
			j=$((j + 1))
		done
		echo "before: $cur" >"$out.zk"
		touch "$out.go"
	fi
	wait $hp
	rc=$?
	BG_PIDS=$(echo "$BG_PIDS" | sed "s/ $hp\b//")
	sleep 1   # the last notifications reach the counters
	echo "after: $(zkstat)" >>"$out.zk"
	if [ $rc = 0 ] && [ -s "$out.sum" ]; then
		say "  herd $who ok"
	else
		{ [ $rc = 124 ] && echo "timed out"; grep -v '^\s*at ' "$out.log" | tail -3; } |
			tr '\n' ' ' | cut -c1-200 >"$out.fail"
		rm -f "$out.sum"
		say "  herd $who FAILED: $(cat "$out.fail")"
	fi
}

say "herd: $HERD waiters on one lock"
for who in zklock curator kazoo; do run_herd "$who"; done

# ---------------------------------------------------------------- memory
say "memory: $MEM_BACKENDS backends per cluster"
for c in zk central; do
	if [ $c = zk ]; then ci=$CI_ZK; else ci=$CI_CENTRAL; fi
	if timeout -k 5 120 "$W/bin/pg_client" mem "$ci" $MEM_BACKENDS "$R/mem.$c" >"$R/mem.$c.log" 2>&1; then
		say "  memory $c ok"
	else
		tail -2 "$R/mem.$c.log" | tr '\n' ' ' | cut -c1-200 >"$R/mem.$c.fail"
		rm -f "$R/mem.$c.sum"
		say "  memory $c FAILED: $(cat "$R/mem.$c.fail")"
	fi
done

# what a using backend costs the machine: MEM_ALL backends connected and
# using zklock at once, so that PSS divides the shared pages among them
say "memory: $MEM_ALL backends using zklock at once"
if timeout -k 5 120 "$W/bin/pg_client" memall "$CI_ZK" $MEM_ALL "$R/memall.zk" >"$R/memall.zk.log" 2>&1; then
	say "  memory (all at once) ok"
else
	tail -2 "$R/memall.zk.log" | tr '\n' ' ' | cut -c1-200 >"$R/memall.zk.fail"
	rm -f "$R/memall.zk.sum"
	say "  memory (all at once) FAILED: $(cat "$R/memall.zk.fail")"
fi
echo "mem_all=$MEM_ALL" >>"$R/meta"

echo "loadavg_end=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$R/meta"
echo "elapsed_s=$(($(date +%s) - T_START))" >>"$R/meta"

# ---------------------------------------------------------------- report
mkdir -p "$B/results"
$PY "$B/report.py" "$R" "$B/results/latest.txt" || fail "report.py failed"
say "report written to bench/results/latest.txt; stopping servers"
