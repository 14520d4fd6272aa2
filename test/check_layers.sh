#!/bin/sh
# The layers of src/ (DESIGN, src/README.md) are walls the compiler
# keeps: each .c file names its layer before its first include, and each
# layer's header refuses the files of the layers it is not for.  Compiles
# small probes against the headers and prints one TAP line per probe: what
# must compile does, and a call that skips a layer does not.
#   sh test/check_layers.sh [PG_CONFIG]
set -u

pgc=${1:-pg_config}
top=$(cd "$(dirname "$0")/.." && pwd)
inc=$("$pgc" --includedir-server) || { echo "not ok 1 - $pgc --includedir-server failed"; exit 1; }
cc=${CC:-cc}
# the C client's headers: the build's (make deps), as the Makefile has them
zkc=${ZKLOCK_ZKC:-${ZKLOCK_PG_CACHE:-/var/cache/zklock}/zkc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
bad=0

# probe EXPECT LAYER-MACRO HEADER [CODE]: EXPECT is "compiles" or "refused"
probe() {
	n=$((n + 1))
	{
		[ -n "$2" ] && printf '#define %s\n' "$2"
		printf '#include "postgres.h"\n#include "%s"\n' "$3"
		[ $# -ge 4 ] && printf 'void probe(void);\nvoid probe(void) { %s; }\n' "$4"
	} >"$tmp/p.c"
	if "$cc" -fsyntax-only -DTHREADED -Werror=implicit-function-declaration \
		-isystem "$inc" -I "$top/src" -I "$zkc/include" "$tmp/p.c" >"$tmp/err" 2>&1; then
		got=compiles
	elif grep -qE '#error|implicit declaration' "$tmp/err"; then
		got=refused
	else
		got="broken (not refused by a wall)"
	fi
	what="${2:-a session file} including $3${4:+ and calling $4}"
	if [ "$got" = "$1" ]; then
		echo "ok $n - $what: $got"
	else
		bad=$((bad + 1))
		echo "not ok $n - $what: $got, expected $1"
		sed 's/^/# /' "$tmp/err" | head -n 5
	fi
}

# the SQL layer (sql_api.c, zklock.c): the lock set and the plain helpers
probe compiles ZKL_SQL_LAYER lockset.h
for h in names.h owner.h guc.h zkltypes.h; do probe compiles ZKL_SQL_LAYER "$h"; done
# the fleet views' readers: one header, for the SQL layer (and the recipe
# files that implement it), not for the lock set
probe compiles ZKL_SQL_LAYER views.h "zkl_fleet_locks(0)"
probe refused ZKL_SQL_LAYER views.h "zkl_engine_run(0)"
probe refused ZKL_LOCKSET_LAYER views.h
for h in recipe.h engine.h queue.h deadlock.h session.h session_held.h session_int.h; do
	probe refused ZKL_SQL_LAYER "$h"
done
# the lock set: the recipe layer's API and the session's face for held
# nodes, nothing else of the session
probe compiles ZKL_LOCKSET_LAYER recipe.h
probe refused ZKL_LOCKSET_LAYER recipe.h "zkl_session_connect()"
probe compiles ZKL_LOCKSET_LAYER session_held.h "zkl_session_connect()"
probe refused ZKL_LOCKSET_LAYER session_held.h "zkl_session_children(\"/\")"
for h in engine.h queue.h deadlock.h session.h session_int.h; do
	probe refused ZKL_LOCKSET_LAYER "$h"
done
# the recipe layer: the engine and the session's public API
probe compiles ZKL_RECIPE_LAYER engine.h "zkl_session_connect()"
# below the engine: the queue, and the deadlock search, which sees the
# queue and not the engine
probe compiles ZKL_RECIPE_LAYER queue.h "zkl_queue_parse(0, 0, 0, 0)"
probe compiles ZKL_RECIPE_LAYER deadlock.h "zkl_deadlock_wait_end(0)"
probe refused ZKL_RECIPE_LAYER deadlock.h "zkl_engine_run(0)"
probe refused ZKL_RECIPE_LAYER queue.h "zkl_engine_run(0)"
probe refused ZKL_RECIPE_LAYER lockset.h
probe refused ZKL_RECIPE_LAYER session_int.h
# the session files: their internals, nothing above
probe compiles "" session_int.h
probe refused "" session_int.h "zkl_recipe_acquire_set(0, 0, 0, 0, 0, 0, 0, 0, 0)"
# the statistics are a plain helper: every layer may count
probe compiles ZKL_SQL_LAYER stats.h "zkl_stats_reset()"
probe compiles ZKL_LOCKSET_LAYER stats.h "zkl_stats_session(ZKL_SS_REQUESTS, 1)"
probe compiles "" stats.h "zkl_stats_session(ZKL_SS_REQUESTS, 1)"

echo "# layer probes: $n, failed: $bad"
[ "$bad" -eq 0 ]
