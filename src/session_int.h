/*-------------------------------------------------------------------------
 *
 * session_int.h
 *	  Internals shared by the session file family: session.c (lifecycle and
 *	  states), session_request.c (asynchronous requests), session_wait.c
 *	  (the wait loop), session_cleanup.c (the clean-up queue),
 *	  session_lease.c (the lease and its heartbeat) and session_log.c (the
 *	  client library's log).  Only these files call zoo_*; nothing outside
 *	  them includes this header.
 *
 * Thread rules for the whole family.  Three kinds of threads touch
 * zkl_shared: the backend's main thread; the client library's IO and
 * completion threads (watchers, completions, the log callback); and the
 * lease thread of session_lease.c.  Code on the last two kinds is plain C:
 * it takes zkl_shared.mu, copies results into malloc'd memory, may send
 * further asynchronous zoo_a* requests (clean-ups, lease proofs) and
 * writes the eventfd.  It never calls palloc, elog, CHECK_FOR_INTERRUPTS
 * or anything else of PostgreSQL.  No zoo_* call is made while holding mu:
 * the library may run a completion, which takes mu, inside it.
 *
 * The main thread sends only asynchronous requests and waits for them in
 * session_wait, where cancels and timeouts are served.  Three library
 * calls block it: zookeeper_init2 (the connect string is resolved first,
 * where a cancel is served, so it finds only addresses), zookeeper_close
 * (bounded by the library: about 4.5 s at most) and the local
 * zoo_remove_watches, which sends nothing.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_SESSION_INT_H
#define ZKLOCK_SESSION_INT_H

#include <pthread.h>
#include <stdint.h>
#include <zookeeper/zookeeper.h>

#if defined(ZKL_RECIPE_LAYER) || defined(ZKL_LOCKSET_LAYER) || defined(ZKL_SQL_LAYER)
#error "session_int.h is for the session files only"
#endif
#define ZKL_SESSION_LAYER

#include "session.h"

/* A point in time, on two clocks; see session_lease.c. */
typedef struct ZklStamp
{
	int64_t		boot_ms;		/* CLOCK_BOOTTIME */
	int64_t		wall_ms;		/* CLOCK_REALTIME */
} ZklStamp;

/* A node this session created and has not deleted: held or queued. */
typedef struct ZklNode
{
	struct ZklNode *next;
	char	   *path;
	bool		lost;			/* deleted by someone else */
} ZklNode;

typedef enum ZklCleanupKind
{
	ZKL_CLEAN_DELETE,			/* delete path */
	ZKL_CLEAN_SWEEP,			/* list path, delete children with prefix */
	ZKL_CLEAN_UNWATCH,			/* remove our data watch on path */
	ZKL_CLEAN_UNWATCH_CHILDREN	/* remove our child watch on path */
} ZklCleanupKind;

typedef struct ZklCleanup
{
	struct ZklCleanup *next;
	bool		in_flight;
	ZklCleanupKind kind;
	char	   *path;
	char	   *prefix;
	uint64		seq;			/* order of queuing: releases wait by it */
	ZklStamp	sent;
} ZklCleanup;

/* Messages of the client library kept between two flushes, and the rate. */
#define ZKL_LOG_SLOTS 16
#define ZKL_LOG_MSG_LEN 512
#define ZKL_LOG_PER_MINUTE 30

/* State shared with the library's threads and the lease thread; under mu. */
typedef struct ZklShared
{
	pthread_mutex_t mu;
	pthread_cond_t lease_cv;	/* wakes the lease thread */
	zhandle_t  *zh;
	int			efd;
	int			state;			/* last session state from the watcher */
	bool		ever_connected;
	bool		lost;			/* this session's locks are lost, for good */
	int			timeout_ms;		/* negotiated session timeout */
	int64_t		session_id;		/* of the connected session */
	ZklNode    *nodes;			/* our lock nodes */
	bool		have_proof;		/* proof_sent is set */
	ZklStamp	proof_sent;		/* lease: send time of the last write answered */
	int			proofs_in_flight;
	bool		lease_stop;
	uint64		watch_events;	/* data-watch notifications received */
	char	   *deleted_path;	/* node of the last deletion notified */
	uint64		deleted_at;		/* watch_events counted with it */
	uint64		session_events;
	uint64		requests_out;	/* requests sent and not yet answered */
	ZklCleanup *cleanups;
	uint64		cleanups_queued;	/* seq of the last clean-up queued */
	char		own_digest[160];	/* zklock.auth's id in ACLs; set at open */
	int			nlog;
	char		log[ZKL_LOG_SLOTS][ZKL_LOG_MSG_LEN];
	int64_t		log_window_ms;
	int			log_in_window;
	int			log_dropped;
} ZklShared;

extern ZklShared zkl_shared;

/* session.c */
extern void session_kick(void);
extern bool session_connected_locked(void);
extern bool session_settled_locked(void);
extern void session_mark_lost_locked(void);

/* session_request.c */
extern ZklRc session_rc(int rc);

/* session_wait.c */
extern bool session_wait_as(ZklWaitKind kind, bool (*ready) (void *),
							void *arg, TimestampTz deadline);
extern void session_init_waiting(void);
extern bool session_wait(bool (*ready) (void *), void *arg,
						 TimestampTz deadline);
extern void session_drain(int timeout_ms);
extern ZklReleaseWait session_wait_held(bool (*ready) (void *), void *arg,
										TimestampTz deadline);

/* session_cleanup.c */
extern bool session_queue_cleanup(ZklCleanupKind kind, const char *path,
								  const char *prefix);
extern void session_issue_cleanups(void);
extern void session_drop_cleanups(void);

/* session_lease.c */
extern void zkl_stamp_now(ZklStamp *s);
extern int64_t zkl_stamp_age_ms(const ZklStamp *s);
extern void session_lease_renew_locked(const ZklStamp *sent);
extern bool session_lease_lost_locked(void);
extern int64_t session_lease_age_locked(void);
extern int	session_lease_window_ms(void);
extern void session_lease_start(void);
extern void session_lease_stop(void);

/* session_log.c */
extern void session_log(const char *message);
extern void session_flush_log(void);

#endif							/* ZKLOCK_SESSION_INT_H */
