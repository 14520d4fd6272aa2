#!/bin/sh
# The ZooKeeper C client in zklock.so is built, and zklock.so linked, with
# the hardening the distribution asks for (dpkg-buildflags with
# hardening=+all, as test/build_zkc.sh and the Makefile ask): its objects
# call the checking variants of the string and print functions
# (-D_FORTIFY_SOURCE: __sprintf_chk, ...) and check their stacks
# (-fstack-protector-strong: __stack_chk_fail); zklock.so has read-only
# relocations (-z relro: a GNU_RELRO segment) bound at load (-z now:
# BIND_NOW), and imports no select().  Prints one TAP line per property.
#   sh test/check_hardening.sh [path/to/zklock.so [path/to/libzookeeper.a]]
set -u

so=${1:-zklock.so}
zkc=${ZKLOCK_ZKC:-${ZKLOCK_PG_CACHE:-/var/cache/zklock}/zkc}
lib=${2:-$zkc/lib/libzookeeper.a}
flags() {
	DEB_BUILD_MAINT_OPTIONS="hardening=+all reproducible=-all" \
		dpkg-buildflags --get "$1" 2>/dev/null
}
. "$(dirname "$0")/tap.sh"
# asks FLAG-PATTERN VARIABLE: whether dpkg-buildflags asks for the flag
# (without dpkg-buildflags, every flag counts as asked for)
asks() {
	command -v dpkg-buildflags >/dev/null 2>&1 || return 0
	flags "$2" | grep -qE -- "$1"
}

undef=$(nm -A "$lib" 2>/dev/null | awk '$2 == "U" { print $1, $3 }')
if [ -z "$undef" ]; then
	echo "not ok 1 - $lib: no undefined symbols (nm failed)"
	exit 1
fi
# The client's own code: zookeeper.c (requests, connections, logging).
main_obj=$(echo "$undef" | grep -E '^[^ ]*zookeeper\.c\.o:' )

if asks '_FORTIFY_SOURCE=[1-9]' CPPFLAGS; then
	chk=$(echo "$main_obj" | awk '$2 ~ /^__.*_chk$/ && $2 != "__stack_chk_fail" { print $2 }' | sort -u | tr '\n' ' ' | sed 's/ $//')
	plain=$(echo "$main_obj" | awk '$2 ~ /^(sprintf|snprintf|vsnprintf|fprintf)$/ { print $2 }' | sort -u | tr '\n' ' ' | sed 's/ $//')
	[ -n "$chk" ] && [ -z "$plain" ]
	result $((1 - $?)) "the client is built with _FORTIFY_SOURCE: zookeeper.c calls ${chk:-no __*_chk function}${plain:+, and unchecked $plain}"
fi
if asks '-fstack-protector' CFLAGS; then
	objs=$(echo "$undef" | awk '$2 == "__stack_chk_fail" { sub(/:$/, "", $1); n = split($1, p, ":"); print p[n] }' | sort -u | tr '\n' ' ' | sed 's/ $//')
	echo "$objs" | grep -q 'zookeeper\.c\.o'
	result $((1 - $?)) "the client is built with the stack protector: __stack_chk_fail in ${objs:-no object}"
fi
if asks '-z,relro' LDFLAGS; then
	readelf -lW "$so" 2>/dev/null | grep -q 'GNU_RELRO'
	result $((1 - $?)) "$so has read-only relocations (GNU_RELRO)"
fi
if asks '-z,now' LDFLAGS; then
	readelf -dW "$so" 2>/dev/null | grep -qE '\(FLAGS\).*BIND_NOW|\(FLAGS_1\).*NOW'
	result $((1 - $?)) "$so is bound at load (BIND_NOW)"
fi
# No select() and no fd_set anywhere: a backend's descriptors go past
# FD_SETSIZE (the TLS handshake waits with poll, C client patch 0020).
sel=$(nm -D --undefined-only "$so" 2>/dev/null | awk '$2 ~ /^(select|pselect|__fdelt_chk)(@|$)/ { print $2 }' | tr '\n' ' ' | sed 's/ $//')
[ -z "$sel" ]
result $((1 - $?)) "$so imports no select() and no fd_set check${sel:+: it imports $sel}"
exit $failed
