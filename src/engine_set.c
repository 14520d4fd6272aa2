/*-------------------------------------------------------------------------
 *
 * engine_set.c
 *	  The set runner: contenders of the engine (engine.c) run as one, all
 *	  or nothing.  A single acquisition is a set of one.
 *
 * The set enqueues everywhere at once (one pipeline), then waits in one
 * queue at a time, in the bytewise order of directory paths, giving up
 * its place in every later queue while it waits: so sets never wait for
 * one another in a cycle.  Every way out but success gives every
 * contender up before the error propagates.
 *
 *-------------------------------------------------------------------------
 */
#define ZKL_RECIPE_LAYER
#include "postgres.h"

#include <stdlib.h>
#include <string.h>

#include "utils/memutils.h"

#include "engine.h"

/* The one order of a set: by directory path, bytewise. */
static int
set_cmp_dirs(const void *a, const void *b)
{
	return strcmp((*(ZklContender *const *) a)->dir,
				  (*(ZklContender *const *) b)->dir);
}

/*
 * The acquisition is raising: tell its report whether a cancel (or
 * statement_timeout) or a deadlock ended it, for the statistics.
 */
static void
set_report_error(ZklWaitReport *report)
{
	if (report == NULL)
		return;
	report->canceled = geterrcode() == ERRCODE_QUERY_CANCELED;
	report->deadlocked = geterrcode() == ERRCODE_T_R_DEADLOCK_DETECTED;
}

/*
 * Run the acquisitions of cs[0..n) as one: all or nothing.  Returns
 * ZKL_ACQUIRED with every cs[i].node and .token (the node's czxid, the
 * fencing token) once all are held, ZKL_TIMED_OUT when the deadline
 * passed first; raises on ZooKeeper errors and interrupts.  On every way
 * out but ZKL_ACQUIRED nothing is left behind; on ZKL_ACQUIRED only the
 * nodes.  The directories must differ.
 *
 * The set enqueues everywhere at once, so that a free set costs one round
 * trip.  Where it is blocked, it waits in one queue only: the first that
 * blocks it in the order of directory paths, holding only what comes
 * before it in that order, after giving up its place in every later queue
 * (held or not); once granted there, it enqueues in the later queues
 * afresh.  Sets that wait only so can never wait for each other in a
 * cycle: every wait points along the order, or to a node ahead in the
 * same queue.  A wait lasts as a single lock's would, with its deadlock
 * search: mixed with single locks, cycles remain possible and are found.
 */
ZklAcquire
zkl_engine_run_set(ZklContender *cs, int n)
{
	ZklContender **order = palloc(sizeof(ZklContender *) * n);
	ZklContenderState *st = palloc0(sizeof(ZklContenderState) * n);
	MemoryContext outer = CurrentMemoryContext;
	MemoryContext listing = AllocSetContextCreate(outer, "zklock listing",
												  ALLOCSET_SMALL_SIZES);
	uint64		epoch = zkl_session_epoch();
	volatile bool timed_out = false;

	for (int i = 0; i < n; i++)
	{
		order[i] = &cs[i];
		cs[i].epoch = epoch;
		cs[i].listing_cxt = listing;	/* reset for every listing of any */
	}
	qsort(order, n, sizeof(ZklContender *), set_cmp_dirs);

	PG_TRY();
	{
		int			held = 0;

		while (held < n && !timed_out)
		{
			ZklContender *c;

			zkl_engine_enqueue_all(order + held, n - held, st + held);
			while (held < n && st[held] == CS_HELD)
				zkl_engine_granted(order[held++]);
			if (held == n)
				break;
			/* Wait in this queue, with no place in any later one. */
			for (int k = held + 1; k < n; k++)
				zkl_engine_restart(order[k]);
			c = order[held];
			zkl_deadlock_wait_start(&c->dl);
			while (st[held] != CS_HELD && st[held] != CS_TIMED_OUT)
				st[held] = zkl_engine_step(c, st[held]);
			if (st[held] == CS_TIMED_OUT)
				timed_out = true;
			else
				zkl_engine_granted(order[held++]);
		}
		if (timed_out)
			order[held]->timed_out = true;

		/* Granted: the lease must cover every node before its token goes. */
		for (int i = 0; i < n && !timed_out; i++)
			zkl_engine_prove(&cs[i]);
	}
	PG_CATCH();
	{
		/* an error while a listing was parsed left us in its context */
		MemoryContextSwitchTo(outer);
		set_report_error(cs[0].report);
		for (int i = 0; i < n; i++)
			zkl_engine_give_up(&cs[i]);
		MemoryContextDelete(listing);
		PG_RE_THROW();
	}
	PG_END_TRY();

	MemoryContextDelete(listing);
	for (int i = 0; i < n; i++)
		cs[i].listing_cxt = NULL;
	pfree(order);
	pfree(st);
	if (timed_out)
	{
		for (int i = 0; i < n; i++)
			zkl_engine_give_up(&cs[i]);
		return ZKL_TIMED_OUT;
	}
	return ZKL_ACQUIRED;
}

/*
 * Run one acquisition: a set of one.  Returns ZKL_ACQUIRED with c->node
 * and c->token once held, ZKL_TIMED_OUT when the deadline passed first;
 * raises on ZooKeeper errors and interrupts, leaving nothing behind.
 */
ZklAcquire
zkl_engine_run(ZklContender *c)
{
	return zkl_engine_run_set(c, 1);
}
