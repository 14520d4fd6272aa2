/*-------------------------------------------------------------------------
 *
 * deadlock.h
 *	  The deadlock side of one wait (deadlock.c): when to search the
 *	  fleet's wait-for graph, the wait entry that lets others find this
 *	  wait, and the victim's claim.  The contender engine drives it from
 *	  its wait; deadlock.c reads queues through queue.h, never the engine.
 *
 * Only the recipe layer includes this header: the files that define
 * ZKL_RECIPE_LAYER before their first include.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_DEADLOCK_H
#define ZKLOCK_DEADLOCK_H

#ifndef ZKL_RECIPE_LAYER
#error "deadlock.h is for the recipe layer only"
#endif

#include "nodes/pg_list.h"

#include "owner.h"
#include "session.h"

/*
 * A wait's part in deadlock detection, one per acquisition (zeroed with
 * it): when to search next, and the wait entry it published.
 */
typedef struct ZklDeadlockWait
{
	TimestampTz next_check;		/* next search, 0: none */
	int			checks;			/* searches so far, up to 4 */
	char	   *entry;			/* our published wait, once sent */
	ZklOp	   *publish_dir;	/* requests under way: let go on every way out */
	ZklOp	   *publish;
	List	   *claims;			/* victim claims this wait made */
	List	   *unsure;			/* claims it may have made (no answer) */
} ZklDeadlockWait;

extern void zkl_deadlock_wait_start(ZklDeadlockWait *w);
extern TimestampTz zkl_deadlock_wait_until(const ZklDeadlockWait *w,
										   TimestampTz deadline, bool *search);
extern void zkl_deadlock_wait_search(ZklDeadlockWait *w, const char *dir,
									 const char *node, const ZklOwner *owner,
									 int max_leases);
extern void zkl_deadlock_wait_end(ZklDeadlockWait *w);

#endif							/* ZKLOCK_DEADLOCK_H */
