#!/bin/sh
# The mutual-exclusion checker (test/t/070_checker.pl) for longer runs:
#   sh test/checker.sh [SECONDS [CLUSTERS [BACKENDS [LOCKS]]]]
# e.g. sh test/checker.sh 1800 3 16 4.  Builds and installs zklock first;
# prints the cycles done and failed and the overlaps found (must be 0).
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
make -s PG_CFLAGS="-Wall -Wextra -Werror" >/dev/null && make -s install >/dev/null

pgxs=$(dirname "$(pg_config --pgxs)")
export ZKLOCK_CHECK_SECONDS="${1:-300}" ZKLOCK_CHECK_CLUSTERS="${2:-2}"
export ZKLOCK_CHECK_BACKENDS="${3:-8}" ZKLOCK_CHECK_LOCKS="${4:-2}"
export PG_REGRESS="$pgxs/../test/regress/pg_regress"
export PATH="$(pg_config --bindir):$PATH"

work="$top"
run="env"
if [ "$(id -u)" -eq 0 ]; then
	work=$(mktemp -d /tmp/zklock-checker.XXXXXX)
	cp -a "$top/." "$work/"
	chown -R postgres:postgres "$work"
	run="runuser -u postgres -- env"
fi
cd "$work"
rm -rf tmp_check
$run PATH="$PATH" PG_REGRESS="$PG_REGRESS" ZKLOCK_CHECK_SECONDS="$ZKLOCK_CHECK_SECONDS" \
	ZKLOCK_CHECK_CLUSTERS="$ZKLOCK_CHECK_CLUSTERS" ZKLOCK_CHECK_BACKENDS="$ZKLOCK_CHECK_BACKENDS" \
	ZKLOCK_CHECK_LOCKS="$ZKLOCK_CHECK_LOCKS" \
	prove -I "$pgxs/../test/perl" -I test/perl test/t/070_checker.pl
echo "logs: $work/tmp_check/log"
