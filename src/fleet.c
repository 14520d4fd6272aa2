/*-------------------------------------------------------------------------
 *
 * fleet.c
 *	  The fleet at a glance (zk_fleet_locks): every lock and semaphore
 *	  under zklock.root, read with plain listings and gets, never a watch.
 *
 * One listing of the root, then the directories in batches of
 * ZKL_FLEET_BATCH, each batch in pipelines: the listings of its
 * directories (and of a semaphore's "leases" and "locks"), then a get of
 * every first holder (its owner record) and a stat of every first waiter
 * (when it queued).  So a lock costs one listing and one or two reads, a
 * semaphore three listings and one or two reads (its holders: its leases,
 * up to the limit its oldest zklock lease records; its waiters: its mutex
 * queue), and at most
 * ZKL_FLEET_BATCH * 2 requests are in flight.  Directories without
 * contenders (an empty container the server will remove) give no row;
 * children of no known recipe count for nothing, as in the lock's queue.
 *
 *-------------------------------------------------------------------------
 */
#define ZKL_RECIPE_LAYER
#include "postgres.h"

#include <string.h>

#include "guc.h"
#include "owner.h"
#include "queue.h"
#include "views.h"

#define ZKL_FLEET_BATCH 64

/* One directory of a batch on its way to a row. */
typedef struct ZklFleetDir
{
	char	   *component;
	char	   *path;
	bool		semaphore;
	int			holders;
	int			waiting;
	char	   *holder;			/* path of the first holder, or NULL */
	char	   *waiter;			/* path of the first waiter, or NULL */
	ZklOp	   *list;			/* the directory (a semaphore: its leases) */
	ZklOp	   *list2;			/* a semaphore: its mutex queue */
	ZklOp	   *get;
	ZklOp	   *stat;
} ZklFleetDir;

static void
fleet_free(ZklFleetDir *d, int n)
{
	for (int i = 0; i < n; i++)
	{
		zkl_session_op_free(d[i].list);
		zkl_session_op_free(d[i].list2);
		zkl_session_op_free(d[i].get);
		zkl_session_op_free(d[i].stat);
		d[i].list = d[i].list2 = d[i].get = d[i].stat = NULL;
	}
}

/*
 * The children a listing answered, or none when the node went or another
 * client's ACL hides them (the view never fails on what others made).
 */
static int
fleet_children(ZklOp *op, const char *path, char ***names)
{
	ZklRc		rc = zkl_session_answer(op);

	if (rc == ZKL_RC_NO_NODE || rc == ZKL_RC_DENIED)
		return 0;
	if (rc != ZKL_RC_OK)
		zkl_session_raise(op, path);
	return zkl_session_op_children(op, names);
}

static int
fleet_cmp_seq(const void *a, const void *b)
{
	const char *x = *(char *const *) a;
	const char *y = *(char *const *) b;
	size_t		lx = strlen(x);
	size_t		ly = strlen(y);

	/* the ten-digit sequence suffix decides; then the name */
	if (lx >= 10 && ly >= 10 && strcmp(x + lx - 10, y + ly - 10) != 0)
		return strcmp(x + lx - 10, y + ly - 10);
	return strcmp(x, y);
}

/* A lock directory's queue: who holds, who waits, the first of each. */
static void
fleet_lock(ZklFleetDir *d, char **names, int n)
{
	ZklQueue	q;

	zkl_queue_parse(&q, names, n, NULL);
	for (int i = 0; i < q.nkids; i++)
	{
		bool		holds = zkl_names_blocker(q.kids, q.nkids, i) < 0;

		if (holds && d->holder == NULL)
			d->holder = psprintf("%s/%s", d->path, q.kids[i].name);
		if (!holds && d->waiter == NULL)
			d->waiter = psprintf("%s/%s", d->path, q.kids[i].name);
		d->holders += holds;
		d->waiting += !holds;
	}
}

/* One child list, copied and in sequence order. */
static char **
fleet_sorted(char **names, int n)
{
	char	  **copy = palloc(sizeof(char *) * Max(n, 1));

	for (int i = 0; i < n; i++)
		copy[i] = pstrdup(names[i]);
	qsort(copy, n, sizeof(char *), fleet_cmp_seq);
	return copy;
}

/*
 * A semaphore's leases past its limit wait (the acquirer that made one
 * still holds the mutex): the limit as zklock's oldest lease records it.
 * Other clients' leases record none, and all count as held.
 */
static void
fleet_lease_limit(ZklFleetRow *row)
{
	size_t		len = strlen(row->holder_data);
	char	   *buf = palloc(ZKL_OWNER_BUF(len));
	ZklOwner	o;

	if (strcmp(row->kind, "semaphore") == 0 &&
		zkl_owner_parse(row->holder_data, len, buf, &o) &&
		o.has_max_leases && row->holders > o.max_leases)
		row->holders = o.max_leases;
}

/* Read one batch of directories into rows. */
static void
fleet_batch(ZklFleetDir *d, int n, List **rows)
{
	for (int i = 0; i < n; i++)
		d[i].list = zkl_session_children(d[i].path);
	for (int i = 0; i < n; i++)
	{
		char	  **names;
		int			m = fleet_children(d[i].list, d[i].path, &names);

		for (int j = 0; j < m; j++)
			d[i].semaphore |= strcmp(names[j], "leases") == 0 ||
				strcmp(names[j], "locks") == 0;
		if (!d[i].semaphore)
			fleet_lock(&d[i], names, m);
		zkl_session_op_free(d[i].list);
		d[i].list = NULL;
	}
	/* a semaphore: its leases hold, its mutex queue waits */
	for (int i = 0; i < n; i++)
		if (d[i].semaphore)
		{
			d[i].list = zkl_session_children(psprintf("%s/leases", d[i].path));
			d[i].list2 = zkl_session_children(psprintf("%s/locks", d[i].path));
		}
	for (int i = 0; i < n; i++)
	{
		char	  **names;
		int			m;

		if (!d[i].semaphore)
			continue;
		m = fleet_children(d[i].list, d[i].path, &names);
		names = fleet_sorted(names, m);
		d[i].holders = m;
		if (m > 0)
			d[i].holder = psprintf("%s/leases/%s", d[i].path, names[0]);
		m = fleet_children(d[i].list2, d[i].path, &names);
		names = fleet_sorted(names, m);
		d[i].waiting = m;
		if (m > 0)
			d[i].waiter = psprintf("%s/locks/%s", d[i].path, names[0]);
	}
	/* the first holder's owner, the first waiter's age */
	for (int i = 0; i < n; i++)
	{
		if (d[i].holder)
			d[i].get = zkl_session_get(d[i].holder);
		if (d[i].waiter)
			d[i].stat = zkl_session_stat(d[i].waiter);
	}
	for (int i = 0; i < n; i++)
	{
		ZklFleetRow *row;
		ZklRc		rc;
		int64		czxid;

		if (d[i].holders + d[i].waiting == 0)
			continue;
		row = palloc0(sizeof(ZklFleetRow));
		row->component = d[i].component;
		row->path = d[i].path;
		row->kind = d[i].semaphore ? "semaphore" : "lock";
		row->holders = d[i].holders;
		row->waiting = d[i].waiting;
		if (d[i].get)
		{
			rc = zkl_session_answer(d[i].get);
			if (rc == ZKL_RC_OK)
			{
				row->holder_node = d[i].holder;
				row->holder_data = pstrdup(zkl_session_op_data(d[i].get, &czxid));
				fleet_lease_limit(row);
			}
			else if (rc != ZKL_RC_NO_NODE && rc != ZKL_RC_DENIED)
				zkl_session_raise(d[i].get, d[i].holder);
		}
		if (d[i].stat)
		{
			rc = zkl_session_answer(d[i].stat);
			if (rc == ZKL_RC_OK)
				row->oldest_wait_ms = zkl_session_op_ctime(d[i].stat);
			else if (rc != ZKL_RC_NO_NODE)
				zkl_session_raise(d[i].stat, d[i].waiter);
		}
		*rows = lappend(*rows, row);
	}
}

static int
fleet_cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

/* The directories in the order of their names, batch by batch. */
static List *
fleet_read(int max_locks)
{
	ZklOp	   *volatile root = zkl_session_children(zkl_root);
	ZklFleetDir *volatile d = NULL;
	volatile int nd = 0;
	List	   *rows = NIL;
	char	  **names;
	int			n;

	PG_TRY();
	{
		char	  **dirs;
		int			ndirs = 0;

		n = fleet_children(root, zkl_root, &names);
		dirs = palloc(sizeof(char *) * Max(n, 1));
		for (int i = 0; i < n; i++)
			if (names[i][0] != '.')		/* zklock's own: waits, claims */
				dirs[ndirs++] = pstrdup(names[i]);
		qsort(dirs, ndirs, sizeof(char *), fleet_cmp_names);
		if (max_locks >= 0 && ndirs > max_locks)
			ndirs = max_locks;
		d = palloc0(sizeof(ZklFleetDir) * ZKL_FLEET_BATCH);
		for (int start = 0; start < ndirs; start += ZKL_FLEET_BATCH)
		{
			nd = Min(ZKL_FLEET_BATCH, ndirs - start);
			memset(d, 0, sizeof(ZklFleetDir) * ZKL_FLEET_BATCH);
			for (int i = 0; i < nd; i++)
			{
				d[i].component = dirs[start + i];
				d[i].path = psprintf("%s/%s", zkl_root, dirs[start + i]);
			}
			fleet_batch(d, nd, &rows);
			fleet_free(d, nd);
		}
	}
	PG_CATCH();
	{
		zkl_session_op_free(root);
		if (d)
			fleet_free(d, nd);
		PG_RE_THROW();
	}
	PG_END_TRY();
	zkl_session_op_free(root);
	return rows;
}

/*
 * Every lock and semaphore under zklock.root with a contender, in the
 * order of their directory names; at most max_locks directories are read
 * (max_locks < 0: all).
 */
List *
zkl_fleet_locks(int max_locks)
{
	zkl_session_connect();
	return fleet_read(max_locks);
}
