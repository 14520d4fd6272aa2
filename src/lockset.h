/*-------------------------------------------------------------------------
 *
 * lockset.h
 *	  This backend's held ZooKeeper locks (lockset.c), as the SQL functions
 *	  see them.  The SQL layer sees nothing below the lock set: no recipe,
 *	  no session (the plain helpers names.h, owner.h and guc.h it may use).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_LOCKSET_H
#define ZKLOCK_LOCKSET_H

#if !defined(ZKL_SQL_LAYER) && !defined(ZKL_LOCKSET_LAYER)
#error "lockset.h is for the SQL layer (sql_api.c, zklock.c) and lockset.c only"
#endif

#include "datatype/timestamp.h"
#include "nodes/pg_list.h"

#include "zkltypes.h"

/*
 * A lock as the SQL functions name it: what messages and zk_locks show,
 * and the znode name of its directory under zklock.root.  Text names are
 * escaped into [A-Za-z0-9_%-]; integer keys map to "key:..." names, which
 * no escaped text name can spell.
 */
typedef struct ZklName
{
	const char *display;
	const char *component;
} ZklName;

/* A row of the zk_locks view. */
typedef struct ZklLockRow
{
	char	   *name;
	const char *mode;			/* exclusive, shared or lease */
	bool		xact;
	int			holds;
	char	   *node;
	int64		token;
	TimestampTz acquired_at;
	ZklLockHealth health;
} ZklLockRow;

extern bool zkl_lockset_acquire(const ZklName *name, bool shared, bool xact,
								int64 timeout_ms, int64 *token);
extern bool zkl_lockset_acquire_set(const ZklName *names, int n, bool shared,
									bool xact, int64 timeout_ms,
									int64 *tokens, int *blocked);
extern bool zkl_lockset_release(const ZklName *name, bool shared);
extern bool zkl_lockset_release_set(const ZklName *names, int n, bool shared);
extern bool zkl_lockset_lease(const ZklName *name, int max_leases, bool xact,
							  int64 timeout_ms, int64 *token);
extern bool zkl_lockset_release_lease(const ZklName *name, bool by_token,
									  int64 token);
extern int	zkl_lockset_release_leases(void);
extern void zkl_lockset_drop_session_holds(const ZklName *name, bool shared,
										   int n);
extern void zkl_lockset_await_releases(void);
extern void zkl_lockset_release_all(void);
extern bool zkl_lockset_holds_any(void);
extern void zkl_lockset_preload(void);
extern List *zkl_lockset_rows(void);
extern char *zkl_lockset_dir(const ZklName *name);
extern void zkl_lockset_session(ZklSessionInfo *info, int *locks);

#endif							/* ZKLOCK_LOCKSET_H */
