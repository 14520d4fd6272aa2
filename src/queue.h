/*-------------------------------------------------------------------------
 *
 * queue.h
 *	  The queue of one ZooKeeper directory (queue.c): a listing parsed
 *	  into queue order, and the read of a queue's children with their data
 *	  for the fleet views.  Used by the contender engine, the deadlock
 *	  search and the view readers.
 *
 * Only the recipe layer includes this header: the files that define
 * ZKL_RECIPE_LAYER before their first include.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_QUEUE_H
#define ZKLOCK_QUEUE_H

#ifndef ZKL_RECIPE_LAYER
#error "queue.h is for the recipe layer only"
#endif

#include "names.h"
#include "session.h"

/* A directory listing, parsed and in queue order. */
typedef struct ZklQueue
{
	int			n;				/* every child, as listed */
	char	  **names;
	int			nkids;			/* children of known recipes, in queue order */
	ZklChild   *kids;
} ZklQueue;

/* One child of a queue read for a fleet view. */
typedef struct ZklQueueEntry
{
	const char *dir;
	char	   *name;
	char	   *data;
	int64		czxid;
} ZklQueueEntry;

extern void zkl_queue_parse(ZklQueue *q, char **names, int n,
							const char *own_prefix);
extern int	zkl_queue_read(const char *const *dirs, int ndirs,
						   ZklQueueEntry **entries);
extern bool zkl_queue_is_ours(const char *name);

#endif							/* ZKLOCK_QUEUE_H */
