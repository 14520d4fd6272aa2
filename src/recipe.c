/*-------------------------------------------------------------------------
 *
 * recipe.c
 *	  The lock: shared and exclusive contenders of one lock directory, as a
 *	  policy of the contender engine (engine.c); the semaphore's mutex (an
 *	  exclusive lock with Curator's names); and the fleet view of a lock's
 *	  queue.
 *
 * A waiter watches only the node that blocks it (names.c decides which),
 * so one release wakes one waiter; when that node was the only one ahead
 * that blocked it, the notice of its deletion is the grant (no second
 * listing on the hand-off's critical path).
 *
 *-------------------------------------------------------------------------
 */
#define ZKL_RECIPE_LAYER
#include "postgres.h"

#include <string.h>

#include "engine.h"
#include "guc.h"
#include "views.h"

/*
 * Held when nothing ahead blocks us (names.c's rule: an exclusive node
 * waits for every node ahead, a shared one for exclusive nodes ahead);
 * else wait for the one node names.c picks.
 */
static ZklVerdict
lock_decide(const ZklContender *c, const ZklQueue *q, int self, bool expired,
			int *blocker, bool *handoff)
{
	(void) c;
	(void) expired;
	*blocker = zkl_names_blocker(q->kids, q->nkids, self);
	*handoff = *blocker >= 0 &&
		zkl_names_handoff(q->kids, q->nkids, self, *blocker);
	return *blocker < 0 ? ZKL_VERDICT_HELD : ZKL_VERDICT_WAIT_NODE;
}

static const ZklPolicy lock_policy = {
	.wait_kind = ZKL_WAIT_LOCK,
	.ordered = true,
	.decide = lock_decide
};

/*
 * Acquire the locks of directories dirs[0..n) as one (displays: their
 * names for messages), all shared or all exclusive; the directories must
 * differ; a single lock is a set of one.  Returns ZKL_ACQUIRED with every
 * node path and fencing token (czxid) once all are held, ZKL_TIMED_OUT
 * when the deadline passed first (with *blocked: the index of the lock
 * that was not granted); raises on ZooKeeper errors and interrupts,
 * leaving nothing behind.  *report hears of every wait.
 */
ZklAcquire
zkl_recipe_acquire_set(int n, const char *const *dirs,
					   const char *const *displays, bool shared,
					   const ZklOwner *owner, TimestampTz deadline, char **nodes,
					   int64 *tokens, int *blocked, ZklWaitReport *report)
{
	ZklContender *cs = palloc0(sizeof(ZklContender) * n);

	for (int i = 0; i < n; i++)
	{
		zkl_engine_contender(&cs[i], &lock_policy, dirs[i], displays[i], false,
							 shared ? ZKL_SHARED_INFIX : zkl_guc_exclusive_infix(),
							 owner, deadline);
		cs[i].report = report;
	}
	if (zkl_engine_run_set(cs, n) != ZKL_ACQUIRED)
	{
		*blocked = 0;
		for (int i = 0; i < n; i++)
			if (cs[i].timed_out)
				*blocked = i;
		pfree(cs);
		return ZKL_TIMED_OUT;
	}
	for (int i = 0; i < n; i++)
	{
		nodes[i] = cs[i].node;
		tokens[i] = cs[i].token;
	}
	pfree(cs);
	return ZKL_ACQUIRED;
}

/*
 * The exclusive lock with Curator's InterProcessMutex names ("-lock-")
 * whatever zklock.node_naming says: a semaphore's mutex.
 */
ZklAcquire
zkl_recipe_acquire_mutex(const char *dir, const char *display,
						 const ZklOwner *owner, TimestampTz deadline, char **node,
						 int64 *token, ZklWaitReport *report)
{
	ZklContender c;

	zkl_engine_contender(&c, &lock_policy, dir, display, true,
						 ZKL_EXCLUSIVE_INFIX, owner, deadline);
	c.report = report;
	if (zkl_engine_run(&c) != ZKL_ACQUIRED)
		return ZKL_TIMED_OUT;
	*node = c.node;
	*token = c.token;
	return ZKL_ACQUIRED;
}

/*
 * Every contender of a lock directory in queue order, for the fleet view.
 * Whether a contender holds follows the lock's rule, seen from outside (no
 * node counts as ours).  Children that vanish meanwhile, and children of
 * no known recipe, are left out.
 */
List *
zkl_recipe_queue(const char *dir)
{
	ZklQueueEntry *e;
	int			n;
	char	  **names;
	ZklQueue	q;
	List	   *rows = NIL;

	zkl_session_connect();
	n = zkl_queue_read(&dir, 1, &e);
	names = palloc(sizeof(char *) * Max(n, 1));
	for (int i = 0; i < n; i++)
		names[i] = e[i].name;
	zkl_queue_parse(&q, names, n, NULL);
	/* czxid and data: from the entry each child's name was copied from */
	for (int i = 0; i < q.nkids; i++)
		for (int j = 0; j < n; j++)
			if (q.kids[i].name == q.names[j])
				q.kids[i].czxid = e[j].czxid;
	zkl_names_sort(q.kids, q.nkids);
	for (int i = 0; i < q.nkids; i++)
	{
		ZklQueueRow *row = palloc(sizeof(ZklQueueRow));

		row->position = i + 1;
		row->mode = q.kids[i].shared ? "shared" : "exclusive";
		row->holds = zkl_names_blocker(q.kids, q.nkids, i) < 0;
		row->node = psprintf("%s/%s", dir, q.kids[i].name);
		row->token = q.kids[i].czxid;
		row->data = NULL;
		for (int j = 0; j < n && row->data == NULL; j++)
			if (q.kids[i].name == q.names[j])
				row->data = e[j].data;
		rows = lappend(rows, row);
	}
	return rows;
}
