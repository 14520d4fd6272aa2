/*-------------------------------------------------------------------------
 *
 * semaphore.c
 *	  Fleet-wide semaphores: at most max_leases holders of one name, with
 *	  the nodes and rules of Curator's InterProcessSemaphoreV2, so that
 *	  Curator clients and zklock backends share one limit.  A policy of the
 *	  contender engine (engine.c), behind the lock recipe's mutex.
 *
 * Under the semaphore's directory <dir>:
 *	 <dir>/locks	a mutex (Curator's InterProcessMutex names, "-lock-")
 *					that lets one acquirer at a time in;
 *	 <dir>/leases	one EPHEMERAL_SEQUENTIAL node per lease,
 *					"_c_<uuid>-lease-NNNNNNNNNN".
 * An acquirer takes the mutex (the lock: one watch on its predecessor),
 * creates its lease node and lists the leases with it (one round trip, as
 * for a lock).  With at most max_leases children it holds; otherwise it
 * lists again with a child watch and waits for a lease to go, listing
 * with the watch again on every wake.  Either way it then releases the
 * mutex.  Only the mutex holder watches the leases, so a release wakes one
 * session, and that session's mutex release wakes the next acquirer: two
 * notifications per hand-off, however many wait.
 *
 * The child watch is set only while the semaphore is full (a plain listing
 * decides first), and removed when the lease is taken, so a holder keeps
 * no watch that a later release would fire.  Giving up deletes the lease
 * node, removes the watch and releases the mutex, and never raises.
 *
 *-------------------------------------------------------------------------
 */
#define ZKL_RECIPE_LAYER
#include "postgres.h"

#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "owner.h"
#include "views.h"

#define ZKL_LEASE_INFIX "-lease-"

/*
 * More than max_leases of the leases are this backend's session's (the new
 * one included): no release by anyone else can make room, and only this
 * backend, which is about to wait, could release its own.
 */
pg_noreturn static void
sem_raise_self_deadlock(const ZklContender *c, int mine)
{
	ereport(ERROR,
			(errcode(ERRCODE_T_R_DEADLOCK_DETECTED),
			 errmsg("deadlock detected"),
			 errdetail_plural("This backend holds %d lease of semaphore \"%s\" itself and asks for one more with max_leases %d: it would wait for itself.",
							  "This backend holds %d leases of semaphore \"%s\" itself and asks for one more with max_leases %d: it would wait for itself.",
							  mine - 1, mine - 1, c->display, c->max_leases),
			 errhint("Release a lease of this semaphore first, or raise max_leases.")));
}

/*
 * At most max_leases children, ours among them: held.  All children count,
 * as in Curator.  Else wait for any of them to go.
 */
static ZklVerdict
sem_decide(const ZklContender *c, const ZklQueue *q, int self, bool expired,
		   int *blocker, bool *handoff)
{
	int			mine = 0;

	(void) self;
	*blocker = -1;
	*handoff = false;
	if (q->n <= c->max_leases)
		return ZKL_VERDICT_HELD;
	for (int i = 0; i < q->n; i++)
		mine += zkl_queue_is_ours(q->names[i]);
	if (!expired && mine > c->max_leases)
		sem_raise_self_deadlock(c, mine);
	return ZKL_VERDICT_WAIT_CHILDREN;
}

static const ZklPolicy lease_policy = {
	.wait_kind = ZKL_WAIT_SEMAPHORE,
	.ordered = false,
	.decide = sem_decide
};

/*
 * Take one lease of the semaphore at dir with at most max_leases holders
 * (display: its name for messages).  Returns ZKL_ACQUIRED with the lease
 * node and its czxid as the token, ZKL_TIMED_OUT when the deadline passed
 * first; raises on errors and interrupts, leaving nothing behind.  The
 * mutex is released on every way out.  *report hears of every wait.
 */
ZklAcquire
zkl_semaphore_lease(const char *dir, const char *display, int max_leases,
					const ZklOwner *owner, TimestampTz deadline, char **node,
					int64 *token, ZklWaitReport *report)
{
	ZklContender c;
	volatile ZklAcquire got = ZKL_TIMED_OUT;
	char	   *mutex;
	int64		mutex_token;

	if (zkl_recipe_acquire_mutex(psprintf("%s/locks", dir), display, owner,
								 deadline, &mutex, &mutex_token,
								 report) != ZKL_ACQUIRED)
		return ZKL_TIMED_OUT;
	zkl_engine_contender(&c, &lease_policy, psprintf("%s/leases", dir),
						 display, true, ZKL_LEASE_INFIX, owner, deadline);
	c.max_leases = max_leases;
	c.anchor = mutex;
	c.report = report;
	PG_TRY();
	{
		got = zkl_engine_run(&c);
	}
	PG_FINALLY();
	{
		zkl_session_release(mutex);
	}
	PG_END_TRY();
	if (got != ZKL_ACQUIRED)
		return ZKL_TIMED_OUT;
	*node = c.node;
	*token = c.token;
	return ZKL_ACQUIRED;
}

/* Leases first, then the mutex's queue; each in creation order. */
static int
sem_entry_cmp(const void *a, const void *b)
{
	const ZklQueueEntry *x = a;
	const ZklQueueEntry *y = b;
	bool		xl = strcmp(strrchr(x->dir, '/'), "/leases") == 0;
	bool		yl = strcmp(strrchr(y->dir, '/'), "/leases") == 0;

	if (xl != yl)
		return xl ? -1 : 1;
	return (x->czxid > y->czxid) - (x->czxid < y->czxid);
}

/*
 * The fleet view of a semaphore: its leases in creation order, then the
 * acquirers on its mutex (the first, "mutex", is letting itself in: its
 * lease, if it made one, is the last and waits; the rest are "queued").
 * A lease holds when it is among the first max_leases, with max_leases as
 * zklock's nodes record it (when no node says, every lease counts as
 * held).  Children that vanish meanwhile are left out.
 */
List *
zkl_semaphore_queue(const char *dir)
{
	const char *dirs[2] = {psprintf("%s/leases", dir), psprintf("%s/locks", dir)};
	ZklQueueEntry *e;
	int			n;
	int			max = -1;
	int			nleases = 0;
	List	   *rows = NIL;

	zkl_session_connect();
	n = zkl_queue_read(dirs, 2, &e);
	for (int i = 0; i < n && max < 0; i++)
	{
		char	   *buf = palloc(ZKL_OWNER_BUF(strlen(e[i].data)));
		ZklOwner	o;

		if (e[i].dir == dirs[0] &&
			zkl_owner_parse(e[i].data, strlen(e[i].data), buf, &o) &&
			o.has_max_leases)
			max = o.max_leases;
	}
	qsort(e, n, sizeof(ZklQueueEntry), sem_entry_cmp);
	for (int i = 0; i < n; i++)
	{
		ZklQueueRow *row = palloc0(sizeof(ZklQueueRow));
		bool		lease = e[i].dir == dirs[0];

		row->position = i + 1;
		row->mode = lease ? "lease" :
			(i == 0 || e[i - 1].dir == dirs[0]) ? "mutex" : "queued";
		row->holds = lease && (max < 0 || ++nleases <= max);
		row->node = psprintf("%s/%s", e[i].dir, e[i].name);
		row->token = e[i].czxid;
		row->data = e[i].data;
		rows = lappend(rows, row);
	}
	return rows;
}
