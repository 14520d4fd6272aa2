#!/bin/sh
# pg_regress suites against a temporary instance and a one-server ZooKeeper.
# Run as the unprivileged user, from a copy of the tree it may write to.
# Usage: [PG_CONFIG=/path/to/pg_config] test/run_regress.sh TEST...
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
pgc=${PG_CONFIG:-pg_config}
bindir=$("$pgc" --bindir)
pgxs=$(dirname "$("$pgc" --pgxs)")
work="$top/tmp_check/regress"
rm -rf "$work" results regression.diffs regression.out
mkdir -p "$work"

zk_stop() { perl -I test/perl test/zk_ensemble.pl stop --dir "$work/zk" >/dev/null 2>&1 || true; }
trap zk_stop EXIT INT TERM
hosts=$(perl -I test/perl test/zk_ensemble.pl start --servers 1 --dir "$work/zk")

cat > "$work/zklock.conf" <<CONF
zklock.hosts = '$hosts'
zklock.session_timeout = 10000
max_prepared_transactions = 2
CONF

"$pgxs/../test/regress/pg_regress" \
	--temp-instance="$work/instance" \
	--temp-config="$work/zklock.conf" \
	--bindir="$bindir" \
	--inputdir=. \
	--dbname=contrib_regression \
	--encoding=UTF8 \
	"$@"
