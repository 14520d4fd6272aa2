/*-------------------------------------------------------------------------
 *
 * names.h
 *	  Lock name <-> znode name escaping, contender child-name parsing and
 *	  ordering.
 *
 * Everything here is plain C with no PostgreSQL dependency, so that it can
 * be unit-tested on its own (test/unit) and used from any thread.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_NAMES_H
#define ZKLOCK_NAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest lock name accepted, in bytes (documented in README.md). */
#define ZKL_NAME_MAX_BYTES 256
/* Most locks one call takes or releases as a set. */
#define ZKL_SET_MAX 1000

/* Room needed for an escaped name: every byte may become "%XX". */
#define ZKL_ESCAPED_MAX (ZKL_NAME_MAX_BYTES * 3 + 1)

/* Length of the text form of a contender uuid (8-4-4-4-12). */
#define ZKL_UUID_LEN 36

/*
 * Leading part of the uuid that is the same for every node of one
 * ZooKeeper session of this backend; the rest is a per-create counter.
 */
#define ZKL_UUID_SESSION_LEN 28

/* Curator's protection prefix and our node name infixes. */
#define ZKL_PROTECT_PREFIX "_c_"
#define ZKL_EXCLUSIVE_INFIX "-lock-"
#define ZKL_WRITE_INFIX "-__WRIT__"
#define ZKL_SHARED_INFIX "-__READ__"

/* One child of a lock directory, as parsed for ordering. */
typedef struct ZklChild
{
	const char *name;			/* the child's name (not copied) */
	int32_t		seq;			/* sequence suffix, may be negative */
	bool		shared;			/* a reader node (__READ__, __rlock__) */
	bool		ours;			/* created by this backend's session */
	bool		known;			/* named by a known recipe (zklock, Curator, kazoo) */
	int64_t		czxid;			/* creation order; 0 until known */
} ZklChild;

extern size_t zkl_names_escape(const char *name, size_t len, char *out);
extern bool zkl_names_unescape(const char *component, char *out, size_t *len);
extern bool zkl_names_parse_child(const char *child, const char *own_prefix,
								  ZklChild *out);
extern int	zkl_names_seq_cmp(int32_t a, int32_t b);
extern void zkl_names_sort(ZklChild *children, int n);
extern bool zkl_names_tied(const ZklChild *sorted, int n, int i);
extern void zkl_names_format_uuid(const unsigned char session_bytes[10],
								  uint32_t counter, char out[ZKL_UUID_LEN + 1]);
extern int	zkl_names_blocker(const ZklChild *sorted, int n, int self);
extern bool zkl_names_handoff(const ZklChild *sorted, int n, int self,
							  int blocker);
extern bool zkl_names_session_of(const char *child,
								 char out[ZKL_UUID_SESSION_LEN + 1]);

#endif							/* ZKLOCK_NAMES_H */
