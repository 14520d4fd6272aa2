#!/bin/sh
# make test: build with warnings as errors, install, then run every suite
# (unit, pg_regress, TAP) and end with one line "N passed, N failed".
#
# initdb refuses root, so when started as root the suites run as the
# unprivileged user "postgres" in a copy of the tree under a temp dir.
set -u

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
passed=0
failed=0
count() { passed=$((passed + $1)); failed=$((failed + $2)); }

make -s clean >/dev/null 2>&1
if ! make -s PG_CFLAGS="-Wall -Wextra -Werror" || ! make -s install >/dev/null; then
	echo "build failed"
	echo "0 passed, 1 failed"
	exit 1
fi

# Unit tests of the pure helpers: each "ok"/"not ok" line counts.
out=$(make -s unit 2>&1)
echo "$out"
count "$(echo "$out" | grep -c '^ok')" "$(echo "$out" | grep -c '^not ok')"
echo "$out" | grep -q '^1\.\.' || count 0 1

if [ "$(id -u)" -eq 0 ]; then
	work=$(mktemp -d /tmp/zklock-test.XXXXXX)
	cp -a "$top/." "$work/"
	chown -R postgres:postgres "$work"
	as_user() { runuser -u postgres -- "$@"; }
else
	work="$top"
	as_user() { "$@"; }
fi
cd "$work" || exit 1

# pg_regress: count the "... ok" and "... FAILED" lines of PostgreSQL 15.
regress=$(sed -n 's/^REGRESS = //p' Makefile)
# shellcheck disable=SC2086
out=$(as_user sh test/run_regress.sh $regress 2>&1)
echo "$out"
count "$(echo "$out" | grep -cE '^(test| ) .* \.\.\. ok')" \
	"$(echo "$out" | grep -cE '\.\.\. FAILED')"
echo "$out" | grep -qE 'tests passed|tests failed' || count 0 1
[ -f regression.diffs ] && head -n 200 regression.diffs

# TAP: every assertion counts; a script that dies counts as one failure.
pgxs=$(dirname "$(pg_config --pgxs)")
export PG_REGRESS="$pgxs/../test/regress/pg_regress"
export PATH="$(pg_config --bindir):$PATH"
for t in test/t/*.pl; do
	rm -rf tmp_check/t_*
	# A test whose name ends in _dns runs in test/dns_jail.sh (root only:
	# a mount namespace with a resolver that never answers).
	jail=
	case $t in *_dns.pl) [ "$(id -u)" -eq 0 ] && jail="sh test/dns_jail.sh" ;; esac
	if [ -n "$jail" ]; then
		out=$($jail runuser -u postgres -- env PATH="$PATH" PG_REGRESS="$PG_REGRESS" \
			prove -v -I "$pgxs/../test/perl" -I test/perl "$t" 2>&1)
	else
		out=$(as_user env PATH="$PATH" PG_REGRESS="$PG_REGRESS" \
			prove -v -I "$pgxs/../test/perl" -I test/perl "$t" 2>&1)
	fi
	echo "$out" | grep -vE '^(# |ok )' | head -n 100
	echo "$out" | grep -E '^# checker:'
	ok=$(echo "$out" | grep -cE '^ok [0-9]')
	nok=$(echo "$out" | grep -cE '^not ok [0-9]')
	echo "$t: $ok ok, $nok not ok"
	echo "$out" | grep -qE '^Result: PASS' || [ "$nok" -gt 0 ] || nok=1
	# As root everything a test needs can be had (the DNS jail, ptrace for
	# gdb): a file that skips as a whole there has tested nothing.
	if [ "$(id -u)" -eq 0 ] && echo "$out" | grep -qE '^1\.\.0 # SKIP'; then
		echo "$t: skipped as root, counted as a failure"
		nok=$((nok + 1))
	fi
	count "$ok" "$nok"
	[ "$nok" -gt 0 ] && ls tmp_check/log 2>/dev/null | head -n 20
done

[ "$work" != "$top" ] && [ "$failed" -eq 0 ] && rm -rf "$work"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
