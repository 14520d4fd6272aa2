# Sourced by test/build_pg.sh and test/build_zkc.sh: bounded build steps
# with their output in one log.  The sourcing script sets $me (its name for
# messages), $what (what it builds, for the failure line) and $log.

# Run from make deps, a build inherits make's MAKELEVEL and MAKEFLAGS; then
# PostgreSQL's makefiles take themselves for a sub-make and skip generating
# their headers (utils/errcodes.h missing in src/common).  Build as from a
# shell.
unset MAKELEVEL MAKEFLAGS MFLAGS MAKEOVERRIDES GNUMAKEFLAGS

step=""
# fail [REASON]: the step that failed, and the last lines of the log
fail() {
	echo "$me: ${what:+$what: }step \"$step\" failed${1:+: $1}" >&2
	[ -n "${log:-}" ] && [ -f "$log" ] && {
		echo "$me: last lines of $log:" >&2
		tail -n 30 "$log" >&2
	}
	exit 1
}

# run SECONDS STEP COMMAND...: one bounded step, its output in $log
run() {
	limit=$1
	step=$2
	shift 2
	echo "$me: $step" >&2
	rc=0
	timeout "$limit" "$@" >>"$log" 2>&1 || rc=$?
	[ "$rc" -eq 124 ] && fail "timed out after $limit s"
	[ "$rc" -ne 0 ] && fail "exit code $rc"
	return 0
}
