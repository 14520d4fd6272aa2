#!/bin/sh
# An A/B of two revisions of zklock on the clusters of make demo: whether a
# change made zklock faster or slower, measured pair by pair in one run.
#
#   make demo && sh bench/ab.sh OLD NEW [ROUNDS]   # revisions, e.g. HEAD~3 HEAD
#
# Builds zklock.so for PostgreSQL 15 from each revision (a git worktree of
# its own, removed at the end), then runs ROUNDS rounds (default 12) on the
# demo's cluster "east": in each, both builds one after the other (the
# order alternates), each installed in turn in place of the demo's, and
# with each the uncontended lock and unlock cycle (600 cycles), the
# hand-off latency (150 samples) and distinct locks (32 clients, 3 s), by
# bench/pg_client.c, and then the ZooKeeper requests of a separate run of
# 500 uncontended cycles on one backend, counted at the servers
# (bench/zkstat.py packets: mntr's zk_packets_received summed over the
# demo's ensemble, read from zklock.hosts, before and after the run, once
# no other client is connected).  Every pg_client run opens new backends,
# which load the build installed at that moment.  The demo's own zklock.so
# is put back at the end, however the run ends.
#
# Prints, per timed figure, each build's median over the rounds and the
# median of NEW/OLD per round: the drift of a shared machine hits both
# builds of a round alike, so that ratio is the figure to read.  The first
# round also warms the servers' JIT compiler up; it counts like the others.
# The requests per cycle are each build's median over the rounds of the
# count divided by the cycles; the count includes the backend's session
# open and close and any ping, so it is a hair above the cycle's own (open
# and close are 2 requests: 0.004 a cycle), and 4 more in a run during
# which the servers' container check (every 60 s) removed the empty lock
# directory (a create and a list that fail, two directory creates).  The
# counts of every round are printed too.
# Run as root (the .so goes into PostgreSQL's library directory).
set -eu

[ $# -ge 2 ] || { echo "usage: sh bench/ab.sh OLD NEW [ROUNDS]" >&2; exit 2; }
old_rev=$1 new_rev=$2 rounds=${3:-12}
top=$(cd "$(dirname "$0")/.." && pwd)
D=${ZKLOCK_DEMO_DIR:-/tmp/zklock-demo}
port=${ZKLOCK_DEMO_EAST_PORT:-5441}
pgc=/usr/lib/postgresql/15/bin/pg_config
lib=$("$pgc" --pkglibdir)
ci="host=$D port=$port user=postgres dbname=postgres"
pkt_cycles=500

[ -f "$D/east/postmaster.pid" ] && [ -f "$lib/zklock.so" ] ||
	{ echo "bench/ab.sh: the demo is not running here: make demo first" >&2; exit 1; }
hosts=$("$("$pgc" --bindir)/psql" -X -At -d "$ci" -c 'SHOW zklock.hosts')
[ -n "$hosts" ] ||
	{ echo "bench/ab.sh: cluster east has no zklock.hosts" >&2; exit 1; }

W=$(mktemp -d /tmp/zklock-ab.XXXXXX)
cp "$lib/zklock.so" "$W/demo.so"
cleanup() {
	cp "$W/demo.so" "$lib/zklock.so.ab" && mv -f "$lib/zklock.so.ab" "$lib/zklock.so"
	for v in old new; do
		[ -d "$W/src-$v" ] && git -C "$top" worktree remove --force "$W/src-$v"
	done
	rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

for v in old new; do
	eval rev=\$${v}_rev
	git -C "$top" worktree add -q --detach "$W/src-$v" "$rev"
	make -s -C "$W/src-$v" PG=15 >"$W/build-$v.log" 2>&1 ||
		{ echo "bench/ab.sh: $rev does not build (log: $W/build-$v.log)" >&2; exit 1; }
	cp "$W/src-$v/zklock.so" "$W/$v.so"
	echo "$v: $(git -C "$top" log -1 --format='%h %s' "$rev" | cut -c1-72)"
done
gcc -O2 -Wall -I"$("$pgc" --includedir)" -o "$W/pg_client" "$top/bench/pg_client.c" \
	-L"$("$pgc" --libdir)" -lpq -lpthread

install_so() { cp "$1" "$lib/zklock.so.ab" && mv -f "$lib/zklock.so.ab" "$lib/zklock.so"; }

r=1
while [ "$r" -le "$rounds" ]; do
	if [ $((r % 2)) -eq 1 ]; then order="old new"; else order="new old"; fi
	for v in $order; do
		install_so "$W/$v.so"
		"$W/pg_client" cycle "$ci" zklock 50 600 "$W/cycle.$v.$r" >>"$W/client.log" 2>&1
		"$W/pg_client" latency "$ci" zklock 10 150 3000 "$W/lat.$v.$r" >>"$W/client.log" 2>&1
		"$W/pg_client" distinct "$ci" zklock 32 3 "$W/dist.$v.$r" >>"$W/client.log" 2>&1
		python3 "$top/bench/zkstat.py" "$hosts" packets "$W/pg_client" cycle "$ci" \
			zklock 0 "$pkt_cycles" "$W/pkt.$v.$r" >"$W/pkt.$v.$r.count" 2>>"$W/client.log" ||
			{ echo "bench/ab.sh: the request count failed:" >&2; tail -5 "$W/client.log" >&2; exit 1; }
	done
	r=$((r + 1))
done

python3 - "$W" "$rounds" <<'EOF'
import statistics, sys
w, rounds = sys.argv[1], int(sys.argv[2])

def p50(f):
    return statistics.median(float(l) for l in open(f) if l.strip())

def rate(f):
    d = dict(l.strip().split('=', 1) for l in open(f) if '=' in l)
    return float(d['cycles']) / float(d['seconds'])

for name, pre, ext, fn, unit in (
        ('uncontended lock + unlock, p50', 'cycle', 'lat', p50, 'ms'),
        ('hand-off latency, p50', 'lat', 'lat', p50, 'ms'),
        ('distinct locks, 32 clients', 'dist', 'sum', rate, '/s')):
    old = [fn(f'{w}/{pre}.old.{r}.{ext}') for r in range(1, rounds + 1)]
    new = [fn(f'{w}/{pre}.new.{r}.{ext}') for r in range(1, rounds + 1)]
    ratio = [n / o for o, n in zip(old, new)]
    scale = 1000.0 if unit == 'ms' else 1.0
    print(f'{name}: old {statistics.median(old) / scale:.2f} {unit}, '
          f'new {statistics.median(new) / scale:.2f} {unit}; new/old per round: '
          f'median {statistics.median(ratio):.3f}, from {min(ratio):.3f} to {max(ratio):.3f}')

def counted(v, r):
    count = dict(l.strip().split('=', 1) for l in open(f'{w}/pkt.{v}.{r}.count') if '=' in l)
    summ = dict(l.strip().split('=', 1) for l in open(f'{w}/pkt.{v}.{r}.sum') if '=' in l)
    return int(count['packets']), int(summ['cycles'])

runs = {v: [counted(v, r) for r in range(1, rounds + 1)] for v in ('old', 'new')}
pk = {v: [p / c for p, c in runs[v]] for v in runs}
print('ZooKeeper requests counted, round by round: ' +
      '; '.join(f'{v} ' + ' '.join(f'{p}/{c}' for p, c in runs[v]) for v in runs))
print('ZooKeeper requests per uncontended cycle, counted at the servers '
      '(with the session\'s open, close and pings, a hair above the cycle\'s own): ' +
      ', '.join(f'{v} {statistics.median(pk[v]):.2f} (from {min(pk[v]):.2f} to {max(pk[v]):.2f})'
                for v in ('old', 'new')))
EOF
