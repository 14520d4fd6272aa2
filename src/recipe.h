/*-------------------------------------------------------------------------
 *
 * recipe.h
 *	  The ZooKeeper lock recipe (recipe.c, with deadlock.c for the
 *	  fleet-wide wait-for graph), and what the lock set needs of
 *	  the session below it, passed through so that each layer talks only
 *	  to its neighbour.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_RECIPE_H
#define ZKLOCK_RECIPE_H

#include "datatype/timestamp.h"
#include "nodes/pg_list.h"
#include "session.h"

/* How an acquisition ended when it did not raise. */
typedef enum ZklAcquire
{
	ZKL_ACQUIRED,
	ZKL_TIMED_OUT
} ZklAcquire;

/* A row of zk_lock_queue() and zk_semaphore_queue(). */
typedef struct ZklQueueRow
{
	int			position;
	const char *mode;			/* shared, exclusive; lease, mutex, queued */
	bool		holds;
	char	   *node;
	int64		token;
	char	   *data;
} ZklQueueRow;

/* A row of zk_lock_waits(): a published wait and one node in its way. */
typedef struct ZklWaitRow
{
	char	   *waiter_cluster;
	int			waiter_pid;
	char	   *dir;
	char	   *waiter_node;
	char	   *blocker_node;
	bool		blocker_holds;
	char	   *blocker_data;	/* the blocking node's data, or NULL */
} ZklWaitRow;

extern ZklAcquire zkl_recipe_acquire(const char *dir, bool shared,
									 const char *data, TimestampTz deadline,
									 char **node, int64 *token);
extern ZklAcquire zkl_recipe_acquire_mutex(const char *dir, const char *data,
										   TimestampTz deadline, char **node,
										   int64 *token);
extern void zkl_recipe_make_dirs(const char *dir, const char *what,
								 int *attempts);
extern void zkl_recipe_check_acl(ZklOp **acl, const char *dir);
extern ZklRc zkl_recipe_find_own(const char *dir, const char *prefix,
								 ZklOp **create, ZklOp **list, ZklOp **stat,
								 ZklOp **acl, char **node, int64 *token);
extern List *zkl_recipe_queue(const char *dir);

/* semaphore.c */
extern ZklAcquire zkl_recipe_lease(const char *dir, int max_leases,
								   const char *data, TimestampTz deadline,
								   char **node, int64 *token);
extern List *zkl_recipe_semaphore_queue(const char *dir);

/*
 * deadlock.c.  A wait's part in deadlock detection, one per acquisition
 * (zeroed with it): when to search next, and the wait entry it published.
 */
typedef struct ZklDeadlockWait
{
	TimestampTz next_check;		/* next search, 0: none */
	int			checks;			/* searches so far, up to 4 */
	char	   *entry;			/* our published wait, once sent */
	ZklOp	   *publish_dir;	/* requests under way: let go on every way out */
	ZklOp	   *publish;
} ZklDeadlockWait;

extern void zkl_deadlock_wait_start(ZklDeadlockWait *w);
extern TimestampTz zkl_deadlock_wait_until(const ZklDeadlockWait *w,
										   TimestampTz deadline, bool *search);
extern void zkl_deadlock_wait_search(ZklDeadlockWait *w, const char *dir,
									 const char *node, const char *owner,
									 int max_leases);
extern void zkl_deadlock_wait_end(ZklDeadlockWait *w);
extern List *zkl_deadlock_waits(void);

extern void zkl_recipe_connect(void);
extern uint64 zkl_recipe_epoch(void);
extern ZklLockHealth zkl_recipe_health(uint64 epoch, const char *node);
extern ZklLockHealth zkl_recipe_prove(uint64 epoch, const char *node);
extern int64 zkl_recipe_unheard_ms(void);
extern void zkl_recipe_release(const char *node);
extern ZklReleaseWait zkl_recipe_await_releases(int *timeout_ms);
extern void zkl_recipe_session_info(ZklSessionInfo *info);

#endif							/* ZKLOCK_RECIPE_H */
