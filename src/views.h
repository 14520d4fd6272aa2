/*-------------------------------------------------------------------------
 *
 * views.h
 *	  The fleet views' readers and their rows: what zk_lock_queue,
 *	  zk_semaphore_queue, zk_lock_waits and zk_fleet_locks read from
 *	  ZooKeeper, each reader in the recipe file that knows its recipe:
 *	    zkl_recipe_queue	 recipe.c	 a lock's queue
 *	    zkl_semaphore_queue semaphore.c a semaphore's leases and queue
 *	    zkl_deadlock_waits	 deadlock.c	 the fleet's published waits
 *	    zkl_fleet_locks	 fleet.c	 every lock and semaphore
 *	  Each opens the session if it must, reads with plain listings and
 *	  gets (no watch), and never fails on what other clients wrote.  A
 *	  reader holds nothing, so the lock set has no part in it.
 *
 * The SQL layer (ZKL_SQL_LAYER) includes this header, and the recipe
 * layer that implements it; the lock set does not.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_VIEWS_H
#define ZKLOCK_VIEWS_H

#if !defined(ZKL_SQL_LAYER) && !defined(ZKL_RECIPE_LAYER)
#error "views.h is for the SQL layer (sql_api.c) and the recipe layer only"
#endif

#include "nodes/pg_list.h"

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

/* A row of zk_fleet_locks(): one lock or semaphore directory. */
typedef struct ZklFleetRow
{
	char	   *component;		/* its znode name under zklock.root */
	char	   *path;
	const char *kind;			/* lock, semaphore */
	int			holders;
	int			waiting;
	int64		oldest_wait_ms; /* the first waiter's node created, ms since
								 * 1970; 0: nobody waits */
	char	   *holder_node;	/* the first holder's node and data, or NULL */
	char	   *holder_data;
} ZklFleetRow;

/* Lists of ZklQueueRow (dir: a lock's or a semaphore's directory) */
extern List *zkl_recipe_queue(const char *dir);
extern List *zkl_semaphore_queue(const char *dir);

/* A list of ZklWaitRow */
extern List *zkl_deadlock_waits(void);

/* A list of ZklFleetRow, at most max_locks directories read (< 0: all) */
extern List *zkl_fleet_locks(int max_locks);

#endif							/* ZKLOCK_VIEWS_H */
