#!/bin/sh
# make test: the unit tests and the source release's build (make dist,
# test/check_dist.sh) once, then for each PostgreSQL given (its pg_config;
# default the pg_config on PATH): build with warnings as errors and
# install (Debian's PostgreSQL, as root: make deb, its checks and
# autopkgtest, then apt install ./postgresql-NN-zklock_*.deb, purged at the
# end), check the exports, run make installcheck (a throwaway cluster as
# it comes, a throwaway ZooKeeper), pg_regress and every TAP test against
# what was installed.  Ends with one line "N passed, N failed", summed
# over every major.
#   sh test/run_all.sh [PG_CONFIG...]
#
# The ZooKeeper servers are Debian 12's 3.8.0 (ZKLOCK_ZK_SERVER, default
# 3.8; see test/perl/ZkEnsemble.pm).  On the last major given, the TAP
# tests in ZK39_TESTS run once more against ZooKeeper 3.9 servers (trixie's
# 3.9.3, unpacked by test/zk39.sh), counted like the others.  Each TAP
# test's line names the server version that answered it.
#
# initdb refuses root, so when started as root the suites run as the
# unprivileged user "postgres" in a copy of the tree under a temp dir (one
# per major; kept when something failed).
set -u

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
[ $# -eq 0 ] && set -- pg_config
passed=0
failed=0
zk_line=${ZKLOCK_ZK_SERVER:-3.8}
ZK39_TESTS="test/t/010_exclusion.pl test/t/040_failover.pl test/t/080_interop.pl test/t/170_tls.pl test/t/200_sasl.pl test/t/201_sasl_gssapi.pl"
count() { passed=$((passed + $1)); failed=$((failed + $2)); }
# Count the "ok"/"not ok" lines of a TAP stream.
count_tap() {
	count "$(echo "$1" | grep -c '^ok')" "$(echo "$1" | grep -c '^not ok')"
}

# Unit tests of the pure helpers (no PostgreSQL): each "ok"/"not ok" counts.
out=$(make -s unit PG_CONFIG="$1" 2>&1)
echo "$out"
count_tap "$out"
echo "$out" | grep -q '^1\.\.' || count 0 1
out=$(sh test/check_guc_order.sh)
echo "$out"
count_tap "$out"
out=$(sh test/check_dist.sh "$1")
echo "$out"
count_tap "$out"
out=$(sh test/check_readme.sh)
echo "$out"
count_tap "$out"

if [ "$(id -u)" -eq 0 ]; then
	as_user() { runuser -u postgres -- "$@"; }
else
	as_user() { "$@"; }
fi

# run_tap LINE TEST...: TAP tests in $work on ZooKeeper servers of LINE.
# Every assertion counts; a script that dies counts as one failure.
# PostgreSQL::Test::Utils of 16 and later puts its files where TESTDATADIR
# and TESTLOGDIR say (tmp_check, or tmp_check/zkLINE for the other server
# line); 15's always under tmp_check.
run_tap() {
	line=$1
	shift
	data="$work/tmp_check"
	[ "$line" = "$zk_line" ] || data="$work/tmp_check/zk$line"
	as_user mkdir -p "$data"
	# The loop's list is expanded once, before it runs: set -- in it is safe.
	for t in "$@"; do
		rm -rf tmp_check/t_* "$data"/t_*
		# A test whose name ends in _dns runs in test/dns_jail.sh (root only:
		# a mount namespace with a resolver that never answers).
		jail=
		case $t in *_dns.pl) [ "$(id -u)" -eq 0 ] && jail="sh test/dns_jail.sh" ;; esac
		# The checker partitions a network of its own: as root it runs as
		# postgres with the capabilities that needs (test/net_user.sh).
		net=
		case $t in */070_checker.pl) [ "$(id -u)" -eq 0 ] && net="sh test/net_user.sh" ;; esac
		set -- env PATH="$path" PG_REGRESS="$pgxs/../test/regress/pg_regress" \
			TESTDATADIR="$data" TESTLOGDIR="$data/log" \
			ZKLOCK_PG_CACHE="${ZKLOCK_PG_CACHE:-/var/cache/zklock}" \
			ZKLOCK_ZK_SERVER="$line" \
			prove -v -I "$pgxs/../test/perl" -I test/perl "$t"
		if [ -n "$jail" ]; then
			out=$($jail runuser -u postgres -- "$@" 2>&1)
		elif [ -n "$net" ]; then
			out=$($net "$@" 2>&1)
		else
			out=$(as_user "$@" 2>&1)
		fi
		echo "$out" | grep -vE '^(# |ok )' | head -n 100
		echo "$out" | grep -E '^# checker:'
		ok=$(echo "$out" | grep -cE '^ok [0-9]')
		nok=$(echo "$out" | grep -cE '^not ok [0-9]')
		skip=$(echo "$out" | grep -cE '^ok [0-9]+ # skip')
		# ZkEnsemble notes the version of the servers it started.
		zk=$(echo "$out" | sed -n 's/^# ZkEnsemble: ZooKeeper \([0-9.]*\).*/\1/p' |
			sort -u | tr '\n' ' ')
		echo "$t: $ok ok ($skip of them skipped), $nok not ok${zk:+ [ZooKeeper ${zk% }]}"
		echo "$out" | grep -qE '^Result: PASS' || [ "$nok" -gt 0 ] || nok=1
		# As root everything a test needs can be had (the DNS jail, ptrace for
		# gdb): a file that skips as a whole there has tested nothing.
		if [ "$(id -u)" -eq 0 ] && echo "$out" | grep -qE '^1\.\.0 # SKIP'; then
			echo "$t: skipped as root, counted as a failure"
			nok=$((nok + 1))
		fi
		count "$ok" "$nok"
		[ "$nok" -gt 0 ] && ls "$data/log" 2>/dev/null | head -n 20
	done
}

# run_major PG_CONFIG: every suite that needs PostgreSQL, on that one.
run_major() {
	pgc=$1
	cd "$top" || return
	version=$("$pgc" --version 2>/dev/null)
	echo "== ${version:-PostgreSQL (no $pgc)}: $pgc"
	make -s clean PG_CONFIG="$pgc" >/dev/null 2>&1
	# Debian's PostgreSQL (/usr/lib/postgresql/NN), as root: zklock as its
	# users install it, the package make deb builds (postgresql-NN-zklock),
	# installed with apt in place of make install, purged at the end.
	pkg=""
	major=$("$pgc" --version 2>/dev/null | sed -n 's/^PostgreSQL \([0-9]*\).*/\1/p')
	case $pgc in
	/usr/lib/postgresql/[0-9]*/bin/pg_config)
		[ "$(id -u)" -eq 0 ] && pkg=postgresql-$major-zklock ;;
	esac
	if [ -n "$pkg" ]; then
		echo "== make deb: $pkg"
		if ! make -s deb PG_SUPPORTED_VERSIONS="$major" PG_UPDATECONTROL=yes \
			PG_CFLAGS="-Wall -Wextra -Werror" >/dev/null; then
			echo "make deb failed on ${version:-$pgc}"
			count 0 1
			return
		fi
		out=$(sh test/check_deb.sh "$pgc")
		echo "$out"
		count_tap "$out"
		# with its debug symbols (postgresql-NN-zklock-dbgsym, as Debian
		# ships them): the gdb tests hold backends at zklock's functions
		if ! out=$(DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
			./deb/"$pkg"_*.deb ./deb/"$pkg"-dbgsym_*.deb 2>&1); then
			echo "$out"
			echo "apt install ./deb/${pkg}_*.deb failed"
			dpkg -P "$pkg-dbgsym" "$pkg" >/dev/null 2>&1
			count 0 1
			return
		fi
		so="$("$pgc" --pkglibdir)/zklock.so"
	elif ! make -s PG_CONFIG="$pgc" PG_CFLAGS="-Wall -Wextra -Werror" ||
		! make -s PG_CONFIG="$pgc" install >/dev/null; then
		echo "build failed on ${version:-$pgc}"
		count 0 1
		return
	else
		so=zklock.so
	fi
	out=$(sh test/check_exports.sh "$so")
	echo "$out"
	count_tap "$out"
	out=$(sh test/check_hardening.sh "$so")
	echo "$out"
	count_tap "$out"
	out=$(sh test/check_layers.sh "$pgc")
	echo "$out"
	count_tap "$out"

	if [ "$(id -u)" -eq 0 ]; then
		work=$(mktemp -d /tmp/zklock-test.XXXXXX)
		cp -a "$top/." "$work/"
		chown -R postgres:postgres "$work"
	else
		work="$top"
	fi
	cd "$work" || return
	failed_before=$failed
	bindir=$("$pgc" --bindir)
	pgxs=$(dirname "$("$pgc" --pgxs)")
	path="$bindir:$PATH"

	# make installcheck, as a user would run it against the installed
	# zklock: a throwaway cluster as it comes (max_prepared_transactions
	# 0), a throwaway ZooKeeper (test/installcheck.sh)
	ic=$(mktemp -d /tmp/zklock-ic.XXXXXX)
	chown postgres "$ic" 2>/dev/null
	out=$(as_user sh -c "'$bindir/initdb' -D '$ic/data' >/dev/null 2>&1 &&
		'$bindir/pg_ctl' -D '$ic/data' -l '$ic/log' -w -o \"-c listen_addresses= -k $ic\" start >/dev/null &&
		env PGHOST='$ic' make -s installcheck PG_CONFIG='$pgc'" 2>&1)
	as_user "$bindir/pg_ctl" -D "$ic/data" -m immediate stop >/dev/null 2>&1
	echo "$out" | grep -vE '^(=|DROP|CREATE|ALTER|SET|\(using|$)'
	count "$(echo "$out" | grep -cE '^(test| ) .* \.\.\. ok|^ok [0-9]')" \
		"$(echo "$out" | grep -cE '\.\.\. FAILED|^not ok [0-9]')"
	echo "$out" | grep -qE 'tests passed' || { count 0 1; echo "make installcheck failed on ${version:-$pgc}"; cat "$ic/log" 2>/dev/null | tail -n 20; }
	[ -f regression.diffs ] && head -n 100 regression.diffs
	rm -rf "$ic" results regression.diffs regression.out

	# pg_regress: count its "... ok" and "... FAILED" lines.
	regress=$(sed -n 's/^REGRESS = //p' Makefile)
	# shellcheck disable=SC2086
	out=$(as_user env PATH="$path" PG_CONFIG="$pgc" sh test/run_regress.sh $regress 2>&1)
	echo "$out"
	# 15 prints "test NAME ... ok", 16 and later a TAP line "ok N - NAME".
	count "$(echo "$out" | grep -cE '^(test| ) .* \.\.\. ok|^ok [0-9]')" \
		"$(echo "$out" | grep -cE '\.\.\. FAILED|^not ok [0-9]')"
	echo "$out" | grep -qE 'tests passed|tests failed' || count 0 1
	[ -f regression.diffs ] && head -n 200 regression.diffs

	rm -rf tmp_check
	echo "== TAP on ZooKeeper $zk_line servers"
	run_tap "$zk_line" test/t/*.pl
	# The other server line, on the last major only (make test's time).
	if [ "$pgc" = "$last_pgc" ] && [ "$zk_line" = 3.8 ]; then
		# shellcheck disable=SC2086
		echo "== TAP on ZooKeeper 3.9 servers:" $ZK39_TESTS
		if sh "$top/test/zk39.sh" >/dev/null; then
			# shellcheck disable=SC2086
			run_tap 3.9 $ZK39_TESTS
		else
			echo "no ZooKeeper 3.9 server (test/zk39.sh failed)"
			count 0 1
		fi
	fi
	if [ -n "$pkg" ]; then
		# (dpkg's triggers talk on stdout and stderr: shown on failure)
		if out=$(dpkg -P "$pkg-dbgsym" "$pkg" 2>&1) && [ ! -e "$so" ] &&
			! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed'; then
			echo "ok 1 - dpkg -P $pkg removed zklock from PostgreSQL $major"
			count 1 0
		else
			echo "$out"
			echo "not ok 1 - dpkg -P $pkg left zklock installed in PostgreSQL $major"
			count 0 1
		fi
	fi
	if [ "$work" != "$top" ]; then
		if [ "$failed" -eq "$failed_before" ]; then
			rm -rf "$work"
		else
			echo "logs of ${version:-$pgc}: $work/tmp_check"
		fi
	fi
}

for last_pgc in "$@"; do :; done
for pgc in "$@"; do
	start=$(date +%s)
	run_major "$pgc"
	echo "== $pgc: $(($(date +%s) - start)) s"
done

# Run last: the tree now holds the last major's build.  A plain make for
# the first (make demo after make test) must build for the first again.
if [ $# -gt 1 ]; then
	cd "$top" || exit 1
	out=$(sh test/check_rebuild.sh "$1")
	echo "$out"
	count_tap "$out"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
