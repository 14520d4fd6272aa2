/*-------------------------------------------------------------------------
 *
 * owner.h
 *	  The owner record zklock writes into its lock nodes and wait entries,
 *	  and reads back for the fleet views and the deadlock search (owner.c:
 *	  its one formatter and its one parser).
 *
 * Plain C with no PostgreSQL dependency, so that the parser can be fuzzed
 * by the unit tests: node data comes from any ZooKeeper client.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_OWNER_H
#define ZKLOCK_OWNER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The fields of an owner record.  Parsed: a string field is NULL when the
 * record lacks it or gives it another type; strings are valid UTF-8
 * without NUL bytes and point into the caller's buffer.  Formatted: a
 * NULL string and an integer without its has_* flag are left out.
 */
typedef struct ZklOwner
{
	const char *host;
	const char *cluster_name;
	const char *database;
	const char *user;
	const char *application_name;
	const char *acquired_at;
	const char *waits_dir;		/* wait entries: the lock directory */
	const char *waits_node;		/* wait entries: the waiting node's name */
	bool		has_port;
	int32_t		port;
	bool		has_pid;
	int32_t		pid;
	bool		has_max_leases;	/* a semaphore's node: its acquirer's limit */
	int32_t		max_leases;
	bool		has_waits_max_leases;	/* wait entries: a lease's limit */
	int32_t		waits_max_leases;
} ZklOwner;

/* Room the caller gives zkl_owner_parse for len bytes of data. */
#define ZKL_OWNER_BUF(len) ((len) + 1)

extern size_t zkl_owner_format(const ZklOwner *o, char *buf, size_t size);
extern bool zkl_owner_parse(const char *data, size_t len, char *buf,
							ZklOwner *out);
extern bool zkl_owner_utf8_valid(const char *s, size_t len);

#endif							/* ZKLOCK_OWNER_H */
