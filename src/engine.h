/*-------------------------------------------------------------------------
 *
 * engine.h
 *	  The one contender engine of the recipe layer: a contender in the
 *	  queue of one ZooKeeper directory (create with protection, find its
 *	  own node again, decide, watch, wait, reconnect, give up) in engine.c,
 *	  and the set runner that runs contenders as one in engine_set.c.  The
 *	  lock (shared and exclusive) and the semaphore's mutex (recipe.c) and
 *	  its leases (semaphore.c) are policies on it.
 *
 * Only the recipe layer includes this header: the files that define
 * ZKL_RECIPE_LAYER before their first include.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_ENGINE_H
#define ZKLOCK_ENGINE_H

#ifndef ZKL_RECIPE_LAYER
#error "engine.h is for the recipe layer only (recipe.c, semaphore.c, engine.c, engine_set.c)"
#endif

#include "utils/palloc.h"

#include "deadlock.h"
#include "queue.h"
#include "recipe.h"
#include "session.h"

/* What a policy makes of a listing. */
typedef enum ZklVerdict
{
	ZKL_VERDICT_HELD,
	ZKL_VERDICT_WAIT_NODE,		/* until the one node at *blocker goes */
	ZKL_VERDICT_WAIT_CHILDREN	/* until any child of the directory goes */
} ZklVerdict;

typedef struct ZklContender ZklContender;

/* What makes a contender a lock, a mutex or a lease. */
typedef struct ZklPolicy
{
	ZklWaitKind wait_kind;		/* what pg_stat_activity shows while it waits */
	bool		ordered;		/* queue order decides: ties ordered by czxid */

	/*
	 * Decide on a listing without this session's strays, our own node in it
	 * (q->kids[self] for an ordered policy, else self is -1).  expired: the
	 * deadline has passed, so a wait would end at once.  For
	 * ZKL_VERDICT_WAIT_NODE, set *blocker (an index into q->kids) and
	 * *handoff (that node's deletion alone grants).  May raise.
	 */
	ZklVerdict	(*decide) (const ZklContender *c, const ZklQueue *q, int self,
						   bool expired, int *blocker, bool *handoff);
} ZklPolicy;

/* One acquisition.  The caller fills in the first part. */
struct ZklContender
{
	const ZklPolicy *policy;
	const char *dir;			/* the queue's directory */
	const char *display;		/* the lock's name, as messages give it */
	bool		semaphore;		/* messages name a semaphore (a lease or the
								 * semaphore's mutex), not a lock */
	const char *infix;			/* the node's name after "_c_<uuid>" */
	const ZklOwner *owner;		/* who we are, for the node and a wait entry */
	char	   *data;			/* the node's data: owner, formatted (by
								 * zkl_engine_contender) */
	int			max_leases;		/* a lease's semaphore limit, else 0 */
	const char *anchor;			/* a node of ours that lives while we queue
								 * (the semaphore's mutex), or NULL */
	TimestampTz deadline;		/* 0: wait for ever */
	ZklWaitReport *report;		/* where its waits are told, or NULL */

	/* the outcome: node and token on ZKL_ACQUIRED; else whether it was
	 * this contender's wait that passed the deadline */
	char	   *node;
	int64		token;
	bool		timed_out;

	/* the engine's own */
	uint64		epoch;			/* the session the acquisition started in */
	char	   *prefix;			/* "_c_<uuid>-" of the current create */
	char	   *path;			/* the path the current create asked for */
	int			dir_attempts;
	int			session_lost;	/* answers "session lost" since the last listing */
	MemoryContext listing_cxt;	/* reset for every listing */
	/* requests under way: all let go on every way out */
	ZklOp	   *create;
	ZklOp	   *list;
	ZklOp	   *acl;
	bool		acl_unread;		/* its answer was lost: read it again */
	ZklOp	   *watch;
	ZklOp	   *stat;
	ZklOp	  **stats;			/* czxid of tied children */
	int			nstats;
	char	   *watched;		/* node we wait for (and may watch) */
	bool		handoff;		/* its deletion alone grants */
	bool		child_watch;	/* a child watch of ours on dir may be set */
	bool		waited;			/* it has begun to wait */
	TimestampTz wait_start;		/* when it began to wait */
	char	   *head;			/* the head of the queue it waits in */
	bool		logged;			/* zklock.log_lock_waits logged the wait */
	ZklWatchMark mark;			/* notification counts when it was watched */
	ZklDeadlockWait dl;			/* deadlock search and wait entry */
};

/* Where a contender is in the state machine. */
typedef enum ZklContenderState
{
	CS_ENQUEUE,					/* send create and listing back to back */
	CS_MAKE_DIRS,				/* the directory is missing */
	CS_LIST,					/* list the directory again */
	CS_DECIDE,					/* held, or pick what to wait for */
	CS_WATCH,					/* set a watch on that */
	CS_WAIT,					/* wait for the watch to fire */
	CS_RECONNECT,				/* connection or session lost: prove, go on */
	CS_FIND_OWN,				/* create reply lost: look for our node */
	CS_HELD,
	CS_TIMED_OUT
} ZklContenderState;

extern void zkl_engine_contender(ZklContender *c, const ZklPolicy *policy,
								 const char *dir, const char *display,
								 bool semaphore, const char *infix,
								 const ZklOwner *owner, TimestampTz deadline);
/* recipe.c: a semaphore's mutex */
extern ZklAcquire zkl_recipe_acquire_mutex(const char *dir,
										   const char *display,
										   const ZklOwner *owner,
										   TimestampTz deadline, char **node,
										   int64 *token,
										   ZklWaitReport *report);

/* engine.c, for the set runner: one contender's steps */
extern void zkl_engine_enqueue_all(ZklContender **cs, int m,
								   ZklContenderState *st);
extern ZklContenderState zkl_engine_step(ZklContender *c,
										 ZklContenderState state);
extern void zkl_engine_granted(ZklContender *c);
extern void zkl_engine_restart(ZklContender *c);
extern void zkl_engine_give_up(ZklContender *c);
extern void zkl_engine_prove(ZklContender *c);

/* engine_set.c: run contenders to the end, as one */
extern ZklAcquire zkl_engine_run_set(ZklContender *cs, int n);
extern ZklAcquire zkl_engine_run(ZklContender *c);

#endif							/* ZKLOCK_ENGINE_H */
