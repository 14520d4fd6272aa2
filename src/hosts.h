/*-------------------------------------------------------------------------
 *
 * hosts.h
 *	  The servers of a ZooKeeper connect string (zklock.hosts), read as
 *	  ZooKeeper's Java client and kazoo read them: host:port entries
 *	  separated by commas, the port 2181 when left out, an IPv6 address in
 *	  brackets, an optional chroot path after the list.
 *
 * Plain C with no PostgreSQL dependency: the setting's check hook, the
 * main thread and the resolver thread use it, and test/unit tests it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_HOSTS_H
#define ZKLOCK_HOSTS_H

#include <stdbool.h>
#include <stddef.h>

/* ZooKeeper's client port, for an entry that names none. */
#define ZKL_DEFAULT_PORT 2181

/* Room for "address:port" of any one server (an IPv6 address is 45). */
#define ZKL_SERVER_ADDR_MAX 64

typedef struct ZklServer
{
	const char *host;			/* the host, brackets off; host_len bytes */
	size_t		host_len;
	int			port;
	bool		bracketed;		/* an IPv6 address in brackets */
} ZklServer;

/* Where the server list ends: at the chroot's '/', else at the end. */
extern const char *zkl_hosts_end(const char *hosts);

/* How many entries the server list has (commas + 1), for an array. */
extern int	zkl_hosts_count(const char *hosts);

/*
 * Read the server list into servers (room for zkl_hosts_count entries;
 * NULL to check it only): their number, or -1 with what is wrong written
 * to problem (a sentence, at most cap bytes).
 */
extern int	zkl_hosts_parse(const char *hosts, ZklServer *servers,
							char *problem, size_t cap);

/*
 * The numeric address of a server whose host is an IPv4 or IPv6 address
 * (not a name) as the client library takes it, "address:port", into out
 * (ZKL_SERVER_ADDR_MAX bytes); false for a host name.
 */
extern bool zkl_hosts_numeric(const ZklServer *s, char *out);

#endif							/* ZKLOCK_HOSTS_H */
