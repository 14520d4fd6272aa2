#!/bin/sh
# zklock's settings must be defined in the order PostgreSQL sorts them (by
# name, bytes of lower case): before 16, each one defined out of order costs
# a sort of every setting in the first call of each backend (src/guc.c).
# Prints one TAP line.
#   sh test/check_guc_order.sh
set -u

top=$(cd "$(dirname "$0")/.." && pwd)
names=$(sed -n 's/.*DefineCustom[A-Za-z]*Variable("\(zklock\.[a-z_]*\)".*/\1/p' "$top/src/guc.c")
if [ -z "$names" ]; then
	echo "not ok 1 - no zklock setting found in src/guc.c"
	exit 1
fi
sorted=$(echo "$names" | LC_ALL=C sort)
if [ "$names" != "$sorted" ]; then
	echo "not ok 1 - src/guc.c defines its settings out of PostgreSQL's order:" $names
	exit 1
fi
echo "ok 1 - src/guc.c defines its $(echo "$names" | wc -l) settings in PostgreSQL's order"
