/*-------------------------------------------------------------------------
 *
 * semaphore.c
 *	  Fleet-wide semaphores: at most max_leases holders of one name, with
 *	  the nodes and rules of Curator's InterProcessSemaphoreV2, so that
 *	  Curator clients and zklock backends share one limit.  Part of the
 *	  recipe layer: it talks to the session below.
 *
 * Under the semaphore's directory <dir>:
 *	 <dir>/locks	a mutex (Curator's InterProcessMutex names, "-lock-")
 *					that lets one acquirer at a time in;
 *	 <dir>/leases	one EPHEMERAL_SEQUENTIAL node per lease,
 *					"_c_<uuid>-lease-NNNNNNNNNN".
 * An acquirer takes the mutex (the lock recipe: one watch on its
 * predecessor), creates its lease node and lists the leases with it (one
 * round trip, as for a lock).  With at most max_leases children it holds;
 * otherwise it lists again with a child watch and waits for a lease to
 * go.  Either way it then releases the mutex.  Only the mutex holder
 * watches the leases, so a release wakes one session, and that session's
 * mutex release wakes the next acquirer: two notifications per hand-off,
 * however many wait.
 *
 * The child watch is set only while the semaphore is full (a plain listing
 * decides first), so a holder keeps no watch that a later release would
 * fire.  Every request under way belongs to the ZklSem and is let go on
 * every way out; giving up deletes the lease node, removes the watch and
 * releases the mutex, and never raises.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <stdlib.h>
#include <string.h>

#include "utils/timestamp.h"

#include "guc.h"
#include "owner.h"
#include "recipe.h"

#define ZKL_LEASE_NAME "lease-"

typedef enum ZklSemState
{
	SS_CREATE,					/* send the lease create and a listing */
	SS_MAKE_DIRS,				/* the leases directory is missing */
	SS_DECIDE,					/* count the leases */
	SS_WATCH,					/* list again with a child watch */
	SS_WAIT,					/* wait for a lease to go */
	SS_RECONNECT,				/* connection lost: prove, then look again */
	SS_FIND_OWN,				/* create reply lost: look for our lease */
	SS_HELD,
	SS_TIMED_OUT
} ZklSemState;

typedef struct ZklSem
{
	char	   *leases;			/* <dir>/leases */
	int			max;
	const char *data;
	TimestampTz deadline;
	uint64		epoch;
	char	   *mutex;			/* our held node in <dir>/locks */
	char	   *node;			/* our lease node, once created */
	int64		token;
	int			attempts;
	/* requests under way: all let go on every way out */
	ZklOp	   *create;
	ZklOp	   *list;
	ZklOp	   *acl;			/* with zklock.auth: the leases' ACL */
	ZklOp	   *stat;			/* a lost create: its node's owner */
	char	   *prefix;			/* name prefix of our lease's create */
	bool		watched;		/* a child watch of ours may be set */
	ZklWatchMark mark;
	ZklDeadlockWait dl;			/* deadlock search and wait entry */
} ZklSem;

static void
sem_drop(ZklOp **op)
{
	zkl_session_op_free(*op);
	*op = NULL;
}

static void
sem_raise_vanished(ZklSem *s)
{
	ereport(ERROR,
			(errcode(ERRCODE_CONNECTION_EXCEPTION),
			 errmsg("ZooKeeper lease node \"%s\" vanished while waiting",
					s->node),
			 errdetail("The ZooKeeper session may have expired, or another client deleted the node.")));
}

static void
sem_raise_expired(ZklSem *s)
{
	ereport(ERROR,
			(errcode(ERRCODE_CONNECTION_EXCEPTION),
			 errmsg("ZooKeeper session expired while acquiring a lease of semaphore \"%s\"",
					s->leases),
			 errdetail("The ensemble did not answer for longer than the session timeout.")));
}

/* Send our lease's create and the listing without waiting in between. */
static ZklSemState
sem_create(ZklSem *s)
{
	char		uuid[ZKL_UUID_LEN + 1];
	char	   *path;
	ZklRc		rc;

	zkl_session_next_uuid(uuid);
	s->prefix = psprintf("%s%s-", ZKL_PROTECT_PREFIX, uuid);
	path = psprintf("%s/%s%s", s->leases, s->prefix, ZKL_LEASE_NAME);
	s->create = zkl_session_create_node(path, s->data, s->leases, s->prefix);
	s->list = zkl_session_children(s->leases);
	s->acl = zkl_session_get_acl(s->leases);
	rc = zkl_session_answer(s->create);
	if (rc == ZKL_RC_NO_NODE || rc == ZKL_RC_CONNECTION_LOST)
	{
		/* A lost reply: the lease may exist; never create twice. */
		if (rc == ZKL_RC_NO_NODE)
			sem_drop(&s->create);
		sem_drop(&s->list);
		sem_drop(&s->acl);
		return rc == ZKL_RC_NO_NODE ? SS_MAKE_DIRS : SS_RECONNECT;
	}
	if (rc != ZKL_RC_OK)
		zkl_session_raise(s->create, "create", path);
	s->node = zkl_session_op_take_node(s->create, &s->token);
	sem_drop(&s->create);
	zkl_recipe_check_acl(&s->acl, s->leases);
	return SS_DECIDE;
}

static ZklSemState
sem_make_dirs(ZklSem *s)
{
	zkl_recipe_make_dirs(s->leases, "lease directory", &s->attempts);
	return SS_CREATE;
}

/*
 * More than max_leases of the leases are this backend's session's (the new
 * one included): no release by anyone else can make room, and only this
 * backend, which is about to wait, could release its own.
 */
static void
sem_raise_self_deadlock(ZklSem *s, int mine)
{
	ereport(ERROR,
			(errcode(ERRCODE_T_R_DEADLOCK_DETECTED),
			 errmsg("deadlock detected"),
			 errdetail("This backend holds %d leases of \"%s\" itself and asks for one more with max_leases %d: it would wait for itself.",
					   mine - 1, s->leases, s->max),
			 errhint("Release a lease of this semaphore first, or raise max_leases.")));
}

/*
 * A lease of this session that it neither holds nor waits with is a
 * stray (see the lock recipe's recipe_drop_strays): delete it and do not
 * count it.  Returns whether name was one.
 */
static bool
sem_drop_stray(ZklSem *s, const char *name)
{
	char	   *path = psprintf("%s/%s", s->leases, name);
	bool		stray = !zkl_session_tracks(path);

	if (stray)
		zkl_session_release(path);
	pfree(path);
	return stray;
}

/*
 * Count the leases in s->list (a plain listing, or one that set the child
 * watch): at most max_leases children, ours among them, and we hold.  All
 * children count, as in Curator.
 */
static ZklSemState
sem_count(ZklSem *s, bool watching)
{
	ZklRc		rc = zkl_session_answer(s->list);
	const char *own = strrchr(s->node, '/') + 1;
	char	  **names;
	int			n;
	int			mine = 0;
	int			leases;
	bool		present = false;
	const char *prefix = zkl_session_own_prefix();

	if (rc == ZKL_RC_CONNECTION_LOST)
	{
		sem_drop(&s->list);
		return SS_RECONNECT;
	}
	if (rc == ZKL_RC_NO_NODE)
		sem_raise_vanished(s);
	if (rc == ZKL_RC_SESSION_LOST)
		sem_raise_expired(s);
	if (rc != ZKL_RC_OK)
		zkl_session_raise(s->list, "list", s->leases);
	n = zkl_session_op_children(s->list, &names);
	leases = n;
	for (int i = 0; i < n; i++)
	{
		bool		ours = strncmp(names[i], prefix, strlen(prefix)) == 0;

		present |= strcmp(names[i], own) == 0;
		if (ours && strcmp(names[i], own) != 0 && sem_drop_stray(s, names[i]))
			leases--;
		else
			mine += ours;
	}
	n = leases;
	sem_drop(&s->list);
	if (!present)
		sem_raise_vanished(s);
	if (n <= s->max)
		return SS_HELD;
	if (s->deadline != 0 && GetCurrentTimestamp() >= s->deadline)
		return SS_TIMED_OUT;
	if (mine > s->max)
		sem_raise_self_deadlock(s, mine);
	return watching ? SS_WAIT : SS_WATCH;
}

/* Full: list again, this time leaving a child watch. */
static ZklSemState
sem_watch(ZklSem *s)
{
	s->list = zkl_session_watch_children(s->leases);
	s->mark = zkl_session_op_mark(s->list);
	s->watched = true;
	return sem_count(s, true);
}

/*
 * Wait for the child watch, searching for a deadlock after
 * deadlock_timeout and then at growing intervals, as the lock recipe does;
 * the wait is published with max_leases, so that a search through it
 * counts every other lease as in its way while the semaphore is full.
 */
static ZklSemState
sem_wait(ZklSem *s)
{
	bool		search;
	TimestampTz until = zkl_deadlock_wait_until(&s->dl, s->deadline, &search);

	if (zkl_session_await_watch_as(ZKL_WAIT_SEMAPHORE, &s->mark, until))
	{
		s->list = zkl_session_children(s->leases);
		return SS_DECIDE;
	}
	if (!search)
		return SS_TIMED_OUT;
	zkl_deadlock_wait_search(&s->dl, s->leases, s->node, s->data, s->max);
	return SS_WAIT;
}

/*
 * The connection dropped.  The mutex node (and our lease, if created)
 * live as long as the session: prove it, then look again.
 */
static ZklSemState
sem_reconnect(ZklSem *s)
{
	ZklLockHealth h = zkl_session_prove(s->epoch, s->mutex, s->deadline);

	if (h == ZKL_HEALTH_LOST)
		sem_raise_expired(s);
	if (h == ZKL_HEALTH_IN_DOUBT)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("lost connection to ZooKeeper while waiting for a lease of semaphore \"%s\"",
						s->leases),
				 errdetail("The ensemble did not answer before the timeout; whether the semaphore is full is unknown.")));
	if (s->node == NULL)
		return s->create ? SS_FIND_OWN : SS_CREATE;
	s->list = zkl_session_children(s->leases);
	return SS_DECIDE;
}

/* The reply to our lease's create was lost: adopt the lease if it is there. */
static ZklSemState
sem_find_own(ZklSem *s)
{
	ZklRc		rc = zkl_recipe_find_own(s->leases, s->prefix, &s->create,
										 &s->list, &s->stat, &s->acl,
										 &s->node, &s->token);

	if (rc == ZKL_RC_CONNECTION_LOST)
		return SS_RECONNECT;
	if (rc != ZKL_RC_OK)
		return SS_CREATE;
	s->list = zkl_session_children(s->leases);
	return SS_DECIDE;
}

static ZklSemState
sem_step(ZklSem *s, ZklSemState state)
{
	switch (state)
	{
		case SS_CREATE:
			return sem_create(s);
		case SS_MAKE_DIRS:
			return sem_make_dirs(s);
		case SS_DECIDE:
			return sem_count(s, false);
		case SS_WATCH:
			return sem_watch(s);
		case SS_WAIT:
			return sem_wait(s);
		case SS_RECONNECT:
			return sem_reconnect(s);
		case SS_FIND_OWN:
			return sem_find_own(s);
		case SS_HELD:
		case SS_TIMED_OUT:
			break;
	}
	return state;
}

/*
 * Let go of everything but the lease node: requests, the wait entry, the
 * child watch, the mutex.  Never waits, never raises.
 */
static void
sem_leave(ZklSem *s)
{
	sem_drop(&s->create);
	sem_drop(&s->list);
	sem_drop(&s->acl);
	sem_drop(&s->stat);
	zkl_deadlock_wait_end(&s->dl);
	if (s->watched)
		zkl_session_unwatch_children(s->leases);
	zkl_session_release(s->mutex);
}

/*
 * Take one lease of the semaphore at dir with at most max_leases holders.
 * Returns ZKL_ACQUIRED with the lease node and its czxid as the token,
 * ZKL_TIMED_OUT when the deadline passed first; raises on errors and
 * interrupts, leaving nothing behind.
 */
ZklAcquire
zkl_recipe_lease(const char *dir, int max_leases, const char *data,
				 TimestampTz deadline, char **node, int64 *token)
{
	ZklSem		s;
	volatile ZklSemState state = SS_CREATE;
	char	   *mutex;
	int64		mutex_token;

	memset(&s, 0, sizeof(s));
	s.leases = psprintf("%s/leases", dir);
	s.max = max_leases;
	s.data = data;
	s.deadline = deadline;
	if (zkl_recipe_acquire_mutex(psprintf("%s/locks", dir), data, deadline,
								 &mutex, &mutex_token) != ZKL_ACQUIRED)
		return ZKL_TIMED_OUT;
	s.mutex = mutex;
	s.epoch = zkl_session_epoch();
	zkl_deadlock_wait_start(&s.dl);

	PG_TRY();
	{
		while (state != SS_HELD && state != SS_TIMED_OUT)
			state = sem_step(&s, state);
		if (state == SS_HELD &&
			zkl_session_prove(s.epoch, s.node, 0) != ZKL_HEALTH_HELD)
			sem_raise_expired(&s);
	}
	PG_CATCH();
	{
		sem_leave(&s);
		if (s.node)
			zkl_session_release(s.node);
		PG_RE_THROW();
	}
	PG_END_TRY();

	sem_leave(&s);
	if (state == SS_TIMED_OUT)
	{
		zkl_session_release(s.node);
		return ZKL_TIMED_OUT;
	}
	*node = s.node;
	*token = s.token;
	return ZKL_ACQUIRED;
}

/*
 * The fleet view of a semaphore: its leases in creation order, then the
 * acquirers on its mutex (the first, "mutex", is letting itself in: its
 * lease, if it made one, is the last and waits; the rest are "queued").
 * A lease holds when it is among the first max_leases, with max_leases as
 * zklock's nodes record it (when no node says, every lease counts as
 * held).  Children that vanish meanwhile are left out.
 */
typedef struct ZklSemRead
{
	ZklOp	   *lists[2];
	ZklOp	  **gets;
	int			ngets;
} ZklSemRead;

typedef struct ZklSemChild
{
	const char *dir;
	const char *name;
	bool		lease;
	int64		czxid;
	char	   *data;
} ZklSemChild;

static int
sem_child_cmp(const void *a, const void *b)
{
	const ZklSemChild *x = a;
	const ZklSemChild *y = b;

	if (x->lease != y->lease)
		return x->lease ? -1 : 1;
	return (x->czxid > y->czxid) - (x->czxid < y->czxid);
}

static List *
sem_queue_read(const char *dir, ZklSemRead *q)
{
	const char *sub[2] = {psprintf("%s/leases", dir), psprintf("%s/locks", dir)};
	ZklSemChild *kids = NULL;
	int			nkids = 0;
	int			kept = 0;
	int			max = -1;
	int			nleases = 0;
	List	   *rows = NIL;

	for (int d = 0; d < 2; d++)
		q->lists[d] = zkl_session_children(sub[d]);
	for (int d = 0; d < 2; d++)
	{
		ZklRc		rc = zkl_session_answer(q->lists[d]);
		char	  **names;
		int			n;

		if (rc != ZKL_RC_OK && rc != ZKL_RC_NO_NODE)
			zkl_session_raise(q->lists[d], "list", sub[d]);
		n = rc == ZKL_RC_OK ? zkl_session_op_children(q->lists[d], &names) : 0;
		kids = kids ? repalloc(kids, sizeof(ZklSemChild) * (nkids + n + 1))
			: palloc(sizeof(ZklSemChild) * (n + 1));
		for (int i = 0; i < n; i++)
		{
			kids[nkids].dir = sub[d];
			kids[nkids].name = pstrdup(names[i]);
			kids[nkids].lease = d == 0;
			nkids++;
		}
	}
	q->gets = palloc0(sizeof(ZklOp *) * Max(nkids, 1));
	for (int i = 0; i < nkids; i++)
		q->gets[q->ngets++] = zkl_session_get(psprintf("%s/%s", kids[i].dir,
													   kids[i].name));
	for (int i = 0; i < nkids; i++)
	{
		ZklRc		rc = zkl_session_answer(q->gets[i]);
		const char *data;
		char	   *buf;
		ZklOwner	o;

		if (rc == ZKL_RC_NO_NODE)
			continue;
		if (rc != ZKL_RC_OK)
			zkl_session_raise(q->gets[i], "get", dir);
		data = zkl_session_op_data(q->gets[i], &kids[i].czxid);
		kids[i].data = pstrdup(data);
		buf = palloc(ZKL_OWNER_BUF(strlen(data)));
		if (max < 0 && kids[i].lease &&
			zkl_owner_parse(data, strlen(data), buf, &o) && o.has_max_leases)
			max = o.max_leases;
		kids[kept++] = kids[i];
	}
	qsort(kids, kept, sizeof(ZklSemChild), sem_child_cmp);
	for (int i = 0; i < kept; i++)
	{
		ZklQueueRow *row = palloc0(sizeof(ZklQueueRow));

		row->position = i + 1;
		row->mode = kids[i].lease ? "lease" :
			(i == 0 || kids[i - 1].lease) ? "mutex" : "queued";
		row->holds = kids[i].lease && (max < 0 || ++nleases <= max);
		row->node = psprintf("%s/%s", kids[i].dir, kids[i].name);
		row->token = kids[i].czxid;
		row->data = kids[i].data;
		rows = lappend(rows, row);
	}
	return rows;
}

static void
sem_queue_free(ZklSemRead *q)
{
	for (int d = 0; d < 2; d++)
		zkl_session_op_free(q->lists[d]);
	for (int i = 0; i < q->ngets; i++)
		zkl_session_op_free(q->gets[i]);
}

List *
zkl_recipe_semaphore_queue(const char *dir)
{
	ZklSemRead	q = {0};
	List	   *rows = NIL;

	PG_TRY();
	{
		rows = sem_queue_read(dir, &q);
	}
	PG_CATCH();
	{
		sem_queue_free(&q);
		PG_RE_THROW();
	}
	PG_END_TRY();
	sem_queue_free(&q);
	return rows;
}
