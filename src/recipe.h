/*-------------------------------------------------------------------------
 *
 * recipe.h
 *	  The recipe layer, as the lock set above it sees it: acquire a lock
 *	  or a lease (recipe.c and semaphore.c, on the contender engine of
 *	  engine.c).  What the lock set asks of a node it holds goes to the
 *	  session's face for held nodes (session_held.h), not through here.
 *
 * Only the lock set (ZKL_LOCKSET_LAYER) and the recipe layer itself
 * (ZKL_RECIPE_LAYER) include this header.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_RECIPE_H
#define ZKLOCK_RECIPE_H

#if !defined(ZKL_LOCKSET_LAYER) && !defined(ZKL_RECIPE_LAYER)
#error "recipe.h is for the lock set (lockset.c) and the recipe layer only"
#endif

#include "datatype/timestamp.h"
#include "nodes/pg_list.h"

#include "owner.h"
#include "zkltypes.h"

/*
 * What an acquisition's waits came to, for the lock set's statistics.
 * The caller zeroes it; the recipe fills it in as it goes, so that it
 * tells the caller as much when the acquisition raises as when it
 * returns.
 */
typedef struct ZklWaitReport
{
	const char *waited_for;		/* display of the lock of its latest wait
								 * (the caller's string); NULL: none */
	bool		canceled;		/* raised: a cancel or statement_timeout */
	bool		deadlocked;		/* raised: it was a deadlock's victim */
} ZklWaitReport;

extern ZklAcquire zkl_recipe_acquire_set(int n, const char *const *dirs,
										 const char *const *displays,
										 bool shared, const ZklOwner *owner,
										 TimestampTz deadline, char **nodes,
										 int64 *tokens, int *blocked,
										 ZklWaitReport *report);
extern ZklAcquire zkl_semaphore_lease(const char *dir, const char *display,
									  int max_leases, const ZklOwner *owner,
									  TimestampTz deadline, char **node,
									  int64 *token, ZklWaitReport *report);

#endif							/* ZKLOCK_RECIPE_H */
