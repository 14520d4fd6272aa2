#!/bin/sh
# The mutual-exclusion checker (test/t/070_checker.pl) for longer runs:
#   sh test/checker.sh [SECONDS [CLUSTERS [BACKENDS [LOCKS]]]]
# e.g. sh test/checker.sh 1800 3 8 3.  Builds and installs zklock first
# (PG_CONFIG picks the major); prints a progress line every minute and a
# summary, which it also writes to test/results/checker-latest.txt.
# As root, the checker runs as postgres with the capabilities it needs to
# partition a network of its own (test/net_user.sh); otherwise without
# network partitions.
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
PG_CONFIG=${PG_CONFIG:-pg_config}
make -s PG_CONFIG="$PG_CONFIG" PG_CFLAGS="-Wall -Wextra -Werror" >/dev/null
make -s PG_CONFIG="$PG_CONFIG" install >/dev/null

pgxs=$(dirname "$("$PG_CONFIG" --pgxs)")
bindir=$("$PG_CONFIG" --bindir)
commit=$(git -C "$top" describe --always --dirty 2>/dev/null || echo unknown)

work="$top"
run="env"
if [ "$(id -u)" -eq 0 ]; then
	work=$(mktemp -d /tmp/zklock-checker.XXXXXX)
	cp -a "$top/." "$work/"
	chown -R postgres:postgres "$work"
	# As postgres, with the capabilities that network namespaces need.
	run="sh $top/test/net_user.sh env"
fi
cd "$work"
rm -rf tmp_check
summary="$work/tmp_check/checker-summary.txt"
status=0
# PostgreSQL 18's TAP modules want the data and log directories named.
$run PATH="$bindir:$PATH" PG_REGRESS="$pgxs/../test/regress/pg_regress" \
	TESTDATADIR="$work/tmp_check" TESTLOGDIR="$work/tmp_check/log" \
	ZKLOCK_CHECK_SECONDS="${1:-300}" ZKLOCK_CHECK_CLUSTERS="${2:-2}" \
	ZKLOCK_CHECK_BACKENDS="${3:-8}" ZKLOCK_CHECK_LOCKS="${4:-2}" \
	ZKLOCK_CHECK_COMMIT="$commit" ZKLOCK_CHECK_SUMMARY="$summary" \
	prove -v -I "$pgxs/../test/perl" -I test/perl test/t/070_checker.pl || status=$?
if [ -f "$summary" ]; then
	mkdir -p "$top/test/results"
	cp "$summary" "$top/test/results/checker-latest.txt"
	echo "summary: test/results/checker-latest.txt"
fi
echo "logs: $work/tmp_check/log"
exit $status
