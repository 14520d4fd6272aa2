#!/bin/sh
# The dynamic symbols zklock.so defines must be only what PostgreSQL looks
# up by name: Pg_magic_func, _PG_init, and each SQL function with its
# pg_finfo_ record.  Anything else (session_wait, names_escape, ...) could
# clash with another loaded library.  Prints one TAP line.
#   sh test/check_exports.sh [path/to/zklock.so]
set -u

so=${1:-zklock.so}
syms=$(nm -D --defined-only "$so" 2>/dev/null | awk '{ print $3 }')
if [ -z "$syms" ]; then
	echo "not ok 1 - $so: no dynamic symbols (nm -D failed)"
	exit 1
fi
bad=""
for s in $syms; do
	case $s in
	Pg_magic_func | _PG_init | pg_finfo_*) continue ;;
	esac
	# An SQL function: exported along with its info record.
	echo "$syms" | grep -qx "pg_finfo_$s" || bad="$bad $s"
done
for s in Pg_magic_func _PG_init; do
	echo "$syms" | grep -qx "$s" || bad="$bad (missing $s)"
done
if [ -n "$bad" ]; then
	echo "not ok 1 - $so exports only what PostgreSQL looks up; also:$bad"
	exit 1
fi
echo "ok 1 - $so exports only Pg_magic_func, _PG_init and $(echo "$syms" | grep -c '^pg_finfo_') SQL functions"
