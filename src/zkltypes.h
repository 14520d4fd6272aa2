/*-------------------------------------------------------------------------
 *
 * zkltypes.h
 *	  Plain values that cross the layers: what an acquisition came to, a
 *	  lock's health, how a wait for releases ended, and the rows of the
 *	  views.  No functions: each layer's header declares its own.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_ZKLTYPES_H
#define ZKLOCK_ZKLTYPES_H

/* How an acquisition ended when it did not raise. */
typedef enum ZklAcquire
{
	ZKL_ACQUIRED,
	ZKL_TIMED_OUT
} ZklAcquire;

/* What this backend's session says about one lock node. */
typedef enum ZklLockHealth
{
	ZKL_HEALTH_HELD,			/* the ensemble answered within the lease */
	ZKL_HEALTH_IN_DOUBT,		/* not heard from lately, may still live */
	ZKL_HEALTH_LOST				/* the ensemble may have expired it, or did */
} ZklLockHealth;

/* How a wait for the ensemble to confirm this backend's releases ended. */
typedef enum ZklReleaseWait
{
	ZKL_RELEASE_CONFIRMED,		/* answered, or the session is gone */
	ZKL_RELEASE_TIMED_OUT,		/* no answer within the session timeout */
	ZKL_RELEASE_CANCELED,		/* a cancel or statement_timeout ended it */
	ZKL_RELEASE_TERMINATED		/* a terminate request ended it */
} ZklReleaseWait;

/* What zk_session() shows. */
typedef struct ZklSessionInfo
{
	const char *state;
	int64		session_id;
	char	   *server;
	int			timeout_ms;
	uint64		watch_events;
} ZklSessionInfo;

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

#endif							/* ZKLOCK_ZKLTYPES_H */
