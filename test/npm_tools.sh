#!/bin/sh
# The npm packages the TAP tests run: node-pg-migrate 9 with pg 8
# (115_migration_tools), installed under $ZKLOCK_PG_CACHE/npm, outside the
# tree; a no-op when they are there.  test/deps.sh runs it for the test
# set.  Node.js and npm must be on PATH (the machine's own, or, as root,
# Debian's nodejs and npm installed here); the install is bounded at five
# minutes.
#   sh test/npm_tools.sh
set -eu

dir=${ZKLOCK_PG_CACHE:-/var/cache/zklock}/npm
if [ -x "$dir/node_modules/.bin/node-pg-migrate" ] && [ -d "$dir/node_modules/pg" ]; then
	exit 0
fi
if ! command -v npm >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ] &&
	command -v apt-get >/dev/null 2>&1; then
	echo "zklock: installing nodejs npm"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
		nodejs npm >/dev/null
fi
if ! command -v npm >/dev/null 2>&1; then
	echo "npm_tools.sh: npm not found: install Node.js with npm (Debian: nodejs npm)" >&2
	exit 1
fi
mkdir -p "$dir"
echo "zklock: npm install node-pg-migrate@9 pg@8 in $dir"
timeout 300 npm install --prefix "$dir" --no-audit --no-fund --silent \
	node-pg-migrate@9 pg@8 >/dev/null
# The tests run as an unprivileged user.
chmod -R a+rX "$dir"
