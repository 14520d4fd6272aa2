#!/bin/sh
# README.md's table "What each target installs" names, for each set, the
# Debian packages test/deps.sh installs for it: the same packages, no more,
# no fewer (the third column's `package` names, compared with
# sh test/deps.sh --list SET).  Prints one TAP line per set.
#   sh test/check_readme.sh
set -u

top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/test/tap.sh"

for set in build deb demo test bench; do
	readme=$(awk -F'|' -v set="$set" '
		/^### What each target installs/ { table = 1; next }
		table && /^#/ { table = 0 }
		table && $3 ~ "^ *" set " *$" { print $4 }' "$top/README.md" |
		grep -o '`[^`]*`' | tr -d '`' | sort -u | tr '\n' ' ')
	deps=$(sh "$top/test/deps.sh" --list "$set" | sort -u | tr '\n' ' ')
	if [ -n "$readme" ] && [ "$readme" = "$deps" ]; then
		result 1 "README.md lists the $set set as test/deps.sh installs it"
	else
		result 0 "README.md lists the $set set as test/deps.sh installs it (README: ${readme:-nothing}; deps.sh: $deps)"
	fi
done
exit $failed
