/*-------------------------------------------------------------------------
 *
 * zkltypes.h
 *	  Plain values that cross the layers: what an acquisition came to, a
 *	  lock's health, how a wait for releases ended, what zk_session()
 *	  shows.  No functions: each layer's header declares its own (the
 *	  fleet views' rows are in views.h, with their readers).
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
	ZKL_RELEASE_TERMINATED,		/* a terminate request ended it */
	ZKL_RELEASE_DISCONNECTED	/* a give-up's wait: the connection is down */
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

#endif							/* ZKLOCK_ZKLTYPES_H */
