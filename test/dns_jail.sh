#!/bin/sh
# test/dns_jail.sh CMD...: run CMD in a new mount namespace whose
# /etc/resolv.conf names a resolver that never answers (test/silent_dns.py
# on 127.83.83.83:53, started here and stopped by pid), with
# ZKLOCK_SILENT_DNS=127.83.83.83 in its environment.  Needs root (the
# namespace, the bind mount and port 53); make test uses it for
# test/t/140_dns.pl.  Exits with CMD's status.
set -u
addr=127.83.83.83
dir=$(mktemp -d /tmp/zklock-dns.XXXXXX) || exit 1
chmod 755 "$dir"
printf 'nameserver %s\noptions timeout:30 attempts:2\n' "$addr" >"$dir/resolv.conf"
chmod 644 "$dir/resolv.conf"
pid=""
# the resolver and the directory go on every way out, a signal included
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP
/usr/bin/python3 "$(dirname "$0")/silent_dns.py" "$addr" 53 "$dir/ready" &
pid=$!
i=0
while [ ! -f "$dir/ready" ] && [ $i -lt 100 ] && kill -0 $pid 2>/dev/null; do
	sleep 0.1
	i=$((i + 1))
done
rc=1
if [ -f "$dir/ready" ]; then
	unshare -m sh -c 'mount --bind "$1" /etc/resolv.conf && shift && exec "$@"' \
		sh "$dir/resolv.conf" env ZKLOCK_SILENT_DNS=$addr "$@"
	rc=$?
else
	echo "dns_jail: the silent resolver did not start" >&2
fi
exit $rc
