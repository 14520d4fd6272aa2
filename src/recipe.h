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

#include "zkltypes.h"

extern ZklAcquire zkl_recipe_acquire(const char *dir, const char *display,
									 bool shared, const char *data,
									 TimestampTz deadline, char **node,
									 int64 *token);
extern ZklAcquire zkl_recipe_acquire_set(int n, const char *const *dirs,
										 const char *const *displays,
										 bool shared, const char *data,
										 TimestampTz deadline, char **nodes,
										 int64 *tokens, int *blocked);
extern ZklAcquire zkl_recipe_lease(const char *dir, const char *display,
								   int max_leases, const char *data,
								   TimestampTz deadline, char **node,
								   int64 *token);
extern uint64 zkl_recipe_waits(const char **display);

#endif							/* ZKLOCK_RECIPE_H */
