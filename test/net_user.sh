#!/bin/sh
# test/net_user.sh CMD...: run CMD as user postgres (initdb refuses root)
# with CAP_SYS_ADMIN and CAP_NET_ADMIN as ambient capabilities, which
# test/perl/ZkNet.pm needs to make the network namespaces of the
# mutual-exclusion checker (test/t/070_checker.pl): its children (servers,
# clusters) keep them.  Root only; test/checker.sh and make test use it.
# The namespaces go with the processes in them (ZkNet's holders die with
# the test).  Exits with CMD's status.
set -u
if [ "$(id -u)" -ne 0 ]; then
	echo "net_user: must run as root" >&2
	exit 1
fi
home=$(getent passwd postgres | cut -d: -f6)
exec setpriv --reuid=postgres --regid=postgres --init-groups \
	--inh-caps=+sys_admin,+net_admin --ambient-caps=+sys_admin,+net_admin \
	-- env HOME="${home:-/tmp}" USER=postgres LOGNAME=postgres "$@"
