/*-------------------------------------------------------------------------
 *
 * lockset.h
 *	  This backend's held ZooKeeper locks (lockset.c), as the SQL functions
 *	  see them.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_LOCKSET_H
#define ZKLOCK_LOCKSET_H

#include "datatype/timestamp.h"
#include "nodes/pg_list.h"
#include "recipe.h"

/* A row of the zk_locks view. */
typedef struct ZklLockRow
{
	char	   *name;
	bool		shared;
	bool		xact;
	int			holds;
	char	   *node;
	int64		token;
	TimestampTz acquired_at;
	ZklLockHealth health;
} ZklLockRow;

extern bool zkl_lockset_acquire(const char *name, bool shared, bool xact,
								int64 timeout_ms, int64 *token);
extern bool zkl_lockset_release(const char *name, bool shared);
extern void zkl_lockset_release_all(void);
extern List *zkl_lockset_rows(void);
extern char *zkl_lockset_dir(const char *name);
extern List *zkl_lockset_queue(const char *name);
extern void zkl_lockset_session(ZklSessionInfo *info, int *locks);

#endif							/* ZKLOCK_LOCKSET_H */
