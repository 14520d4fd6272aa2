/*-------------------------------------------------------------------------
 *
 * recipe.c
 *	  The ZooKeeper lock recipe for one acquisition, as a state machine:
 *	  enqueue, decide, watch, wait, re-check, give up.
 *
 * One node per contender, EPHEMERAL_SEQUENTIAL, named with Curator's
 * protection prefix "_c_<uuid>-" so that a node whose create reply was lost
 * can be found again.  The create and the directory listing are sent back
 * to back: ZooKeeper runs one session's requests in order, so the listing
 * already holds the new node and an uncontended acquire costs one round
 * trip.  A waiter watches only the node that blocks it (names.c decides
 * which), so one release wakes one waiter.
 *
 * Every way out but success gives up cleanly: the node is deleted and the
 * watch removed before the error propagates, or the node would block
 * everyone queued after it.  Deletes are asynchronous and retried by
 * session.c, so giving up never waits and never raises.
 *
 * Knows nothing of SQL types; the lock directory and node data come from
 * lockset.c.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <string.h>
#include <zookeeper/zookeeper.h>

#include "lib/stringinfo.h"
#include "utils/timestamp.h"

#include "zklock.h"

/* Bound on re-creating a lock directory that the server keeps removing. */
#define ZKL_DIR_ATTEMPTS 5

typedef enum ZklRecipeState
{
	RS_ENQUEUE,					/* send create and listing back to back */
	RS_MAKE_DIRS,				/* the lock directory is missing */
	RS_LIST,					/* list the directory again */
	RS_DECIDE,					/* held, or pick the node to wait for */
	RS_WATCH,					/* set a watch on that node */
	RS_WAIT,					/* wait for the watch to fire */
	RS_RECONNECT,				/* connection lost: wait, then list again */
	RS_FIND_OWN,				/* create reply lost: look for our node */
	RS_HELD,
	RS_TIMED_OUT
} ZklRecipeState;

typedef struct ZklRecipe
{
	const char *dir;
	bool		shared;
	const char *data;
	TimestampTz deadline;		/* 0: wait for ever */
	char	   *node;			/* our node's path, once created */
	int64		token;
	int			dir_attempts;
	uint64		epoch;			/* the session the recipe started in */
	char	   *prefix;			/* "_c_<uuid>-" of the current create */
	ZklOp	   *create;
	ZklOp	   *list;
	char	   *watched;		/* node we wait for (and may watch) */
	uint64		since;			/* watch count when the watch was set */
} ZklRecipe;

/* Wait for a request's answer; the recipe bounds requests by the session. */
static int
recipe_answer(ZklOp *op)
{
	zkl_session_await(op, 0);
	return zkl_session_op_rc(op);
}

/* A request failed only because the connection dropped: worth retrying. */
static bool
recipe_connection_lost(int rc)
{
	return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT;
}

/* Send our create and the listing without waiting in between. */
static ZklRecipeState
recipe_enqueue(ZklRecipe *r)
{
	char		uuid[ZKL_UUID_LEN + 1];
	char	   *prefix;
	char	   *path;
	int			rc;

	zkl_session_next_uuid(uuid);
	prefix = psprintf("%s%s-", ZKL_PROTECT_PREFIX, uuid);
	r->prefix = prefix;
	path = psprintf("%s/%s%s%s", r->dir, ZKL_PROTECT_PREFIX, uuid,
					r->shared ? ZKL_SHARED_INFIX : zkl_guc_exclusive_infix());
	r->create = zkl_session_create(path, r->data, ZOO_EPHEMERAL_SEQUENTIAL,
								   r->dir, prefix);
	r->list = zkl_session_children(r->dir);

	rc = recipe_answer(r->create);
	if (rc == ZNONODE)
	{
		zkl_session_op_free(r->create);
		r->create = NULL;
		return RS_MAKE_DIRS;
	}
	if (recipe_connection_lost(rc))
	{
		/* The node may exist: never create twice, find it first. */
		zkl_session_op_free(r->list);
		r->list = NULL;
		return RS_FIND_OWN;
	}
	if (rc != ZOK)
		zkl_session_raise(rc, "create", path);
	r->node = zkl_session_op_take_node(r->create, &r->token);
	zkl_session_op_free(r->create);
	r->create = NULL;
	return RS_DECIDE;
}

/*
 * Create the lock directory (a container, removed by the server when
 * empty) and the persistent directories above it, all in one pipeline.
 */
static ZklRecipeState
recipe_make_dirs(ZklRecipe *r)
{
	ZklOp	   *ops[64];
	int			nops = 0;
	const char *p = r->dir;

	zkl_session_op_free(r->list);
	r->list = NULL;
	if (++r->dir_attempts > ZKL_DIR_ATTEMPTS)
		ereport(ERROR,
				(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
				 errmsg("could not create ZooKeeper lock directory \"%s\"",
						r->dir),
				 errdetail("It was removed again %d times.", ZKL_DIR_ATTEMPTS)));

	while ((p = strchr(p + 1, '/')) != NULL && nops < (int) lengthof(ops) - 1)
		ops[nops++] = zkl_session_create(pnstrdup(r->dir, p - r->dir), NULL,
										 0, NULL, NULL);
	ops[nops++] = zkl_session_create(r->dir, NULL, ZOO_CONTAINER, NULL, NULL);

	/* Every op is freed, also when an error or a cancel ends the wait. */
	PG_TRY();
	{
		for (int i = 0; i < nops; i++)
		{
			int			rc = recipe_answer(ops[i]);

			if (rc != ZOK && rc != ZNODEEXISTS)
				zkl_session_raise(rc, "create", r->dir);
		}
	}
	PG_FINALLY();
	{
		for (int i = 0; i < nops; i++)
			zkl_session_op_free(ops[i]);
	}
	PG_END_TRY();
	return RS_ENQUEUE;
}

static ZklRecipeState
recipe_list(ZklRecipe *r)
{
	r->list = zkl_session_children(r->dir);
	return RS_DECIDE;
}

/* Order the listing and find what, if anything, we must wait for. */
static ZklRecipeState
recipe_decide(ZklRecipe *r)
{
	char	  **names;
	int			n;
	int			rc = recipe_answer(r->list);
	const char *own = strrchr(r->node, '/') + 1;
	ZklChild   *kids;
	int			nkids = 0;
	int			self = -1;
	int			blocker;

	if (rc == ZNONODE)
		rc = ZSESSIONEXPIRED;	/* our node's directory is gone: so is it */
	if (recipe_connection_lost(rc))
	{
		zkl_session_op_free(r->list);
		r->list = NULL;
		return RS_RECONNECT;
	}
	if (rc != ZOK)
		zkl_session_raise(rc, "list", r->dir);

	n = zkl_session_op_children(r->list, &names);
	kids = palloc(sizeof(ZklChild) * Max(n, 1));
	for (int i = 0; i < n; i++)
		if (zkl_names_parse_child(names[i], zkl_session_own_prefix(),
								  &kids[nkids]))
			nkids++;
	zkl_names_sort(kids, nkids);
	for (int i = 0; i < nkids; i++)
		if (strcmp(kids[i].name, own) == 0)
			self = i;
	if (self < 0)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_EXCEPTION),
				 errmsg("ZooKeeper lock node \"%s\" vanished while waiting",
						r->node),
				 errdetail("The ZooKeeper session may have expired.")));

	/*
	 * The node watched so far stays in r->watched until here, so that
	 * giving up while listing removes its watch.  A new blocker means the
	 * old one is gone, and its watch with it.
	 */
	blocker = zkl_names_blocker(kids, nkids, self);
	if (r->watched)
		pfree(r->watched);
	r->watched = blocker >= 0 ?
		psprintf("%s/%s", r->dir, kids[blocker].name) : NULL;
	pfree(kids);
	zkl_session_op_free(r->list);
	r->list = NULL;

	if (blocker < 0)
		return RS_HELD;
	if (r->deadline != 0 && GetCurrentTimestamp() >= r->deadline)
		return RS_TIMED_OUT;
	return RS_WATCH;
}

/* Watch the blocking node; if it is gone already, look again. */
static ZklRecipeState
recipe_watch(ZklRecipe *r)
{
	ZklOp	   *op;
	int			rc;

	r->since = zkl_session_watch_count();
	op = zkl_session_watch(r->watched);
	rc = recipe_answer(op);
	zkl_session_op_free(op);
	if (rc == ZNONODE)
		return RS_LIST;
	if (recipe_connection_lost(rc))
		return RS_RECONNECT;
	if (rc != ZOK)
		zkl_session_raise(rc, "watch", r->watched);
	return RS_WAIT;
}

/*
 * The connection dropped.  Our node and queue position live as long as the
 * session: wait for the reconnect and look again.  If the session is lost
 * meanwhile, so is the node; fail rather than hang.
 */
static ZklRecipeState
recipe_reconnect(ZklRecipe *r)
{
	ZklLockHealth h = zkl_session_settle(r->epoch, r->deadline);

	if (h == ZKL_HEALTH_LOST)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_EXCEPTION),
				 errmsg("ZooKeeper session expired while acquiring lock \"%s\"",
						r->dir),
				 errdetail("The connection to the ensemble was lost for longer than the session timeout.")));
	if (h == ZKL_HEALTH_IN_DOUBT)
		return RS_TIMED_OUT;
	return r->create ? RS_FIND_OWN : RS_LIST;
}

/*
 * The reply to our create was lost.  After the reconnect, list the
 * directory: a child carrying this create's uuid is our node if its
 * ephemeral owner is our session; adopt it.  Otherwise the create never
 * happened: send it again under a new uuid.
 */
static ZklRecipeState
recipe_find_own(ZklRecipe *r)
{
	ZklOp	   *list;
	char	  **names;
	int			n;
	int			rc;
	char	   *found = NULL;

	if (zkl_session_health(r->epoch) != ZKL_HEALTH_HELD)
		return RS_RECONNECT;
	list = zkl_session_children(r->dir);
	rc = recipe_answer(list);
	if (recipe_connection_lost(rc))
	{
		zkl_session_op_free(list);
		return RS_RECONNECT;
	}
	n = rc == ZOK ? zkl_session_op_children(list, &names) : 0;
	for (int i = 0; i < n; i++)
		if (strncmp(names[i], r->prefix, strlen(r->prefix)) == 0)
			found = psprintf("%s/%s", r->dir, names[i]);
	zkl_session_op_free(list);

	if (found != NULL)
	{
		ZklOp	   *stat = zkl_session_stat(found);
		int64		czxid;

		rc = recipe_answer(stat);
		if (rc == ZOK && zkl_session_op_owned(stat, &czxid))
		{
			/* Ours: claim it so that freeing the create keeps it. */
			int64		unused;

			zkl_session_op_free(stat);
			(void) zkl_session_op_take_node(r->create, &unused);
			zkl_session_op_free(r->create);
			r->create = NULL;
			r->node = found;
			r->token = czxid;
			return RS_LIST;
		}
		zkl_session_op_free(stat);
		if (recipe_connection_lost(rc))
			return RS_RECONNECT;
	}
	/* Not there (or not ours): the unclaimed create sweeps its uuid. */
	zkl_session_op_free(r->create);
	r->create = NULL;
	return RS_ENQUEUE;
}

static ZklRecipeState
recipe_wait(ZklRecipe *r)
{
	if (!zkl_session_await_watch(r->since, r->deadline))
		return RS_TIMED_OUT;
	return RS_LIST;
}

/* Undo everything this acquisition left in ZooKeeper; never raises. */
static void
recipe_give_up(ZklRecipe *r)
{
	zkl_session_op_free(r->create);
	zkl_session_op_free(r->list);
	r->create = r->list = NULL;
	if (r->watched)
		zkl_session_unwatch(r->watched);
	if (r->node)
		zkl_session_delete(r->node);
}

/*
 * Run the recipe for one lock directory.  Returns true with the node path
 * and fencing token (czxid) once held, false when the deadline passed
 * first; raises on ZooKeeper errors and interrupts, leaving nothing behind.
 */
bool
zkl_recipe_acquire(const char *dir, bool shared, const char *data,
				   TimestampTz deadline, char **node, int64 *token)
{
	ZklRecipe	r;
	volatile ZklRecipeState state = RS_ENQUEUE;

	memset(&r, 0, sizeof(r));
	r.dir = dir;
	r.shared = shared;
	r.data = data;
	r.deadline = deadline;
	r.epoch = zkl_session_epoch();

	PG_TRY();
	{
		while (state != RS_HELD && state != RS_TIMED_OUT)
		{
			switch (state)
			{
				case RS_ENQUEUE:
					state = recipe_enqueue(&r);
					break;
				case RS_MAKE_DIRS:
					state = recipe_make_dirs(&r);
					break;
				case RS_LIST:
					state = recipe_list(&r);
					break;
				case RS_DECIDE:
					state = recipe_decide(&r);
					break;
				case RS_WATCH:
					state = recipe_watch(&r);
					break;
				case RS_WAIT:
					state = recipe_wait(&r);
					break;
				case RS_RECONNECT:
					state = recipe_reconnect(&r);
					break;
				case RS_FIND_OWN:
					state = recipe_find_own(&r);
					break;
				case RS_HELD:
				case RS_TIMED_OUT:
					break;
			}
		}
	}
	PG_CATCH();
	{
		recipe_give_up(&r);
		PG_RE_THROW();
	}
	PG_END_TRY();

	if (state == RS_TIMED_OUT)
	{
		recipe_give_up(&r);
		return false;
	}
	*node = r.node;
	*token = r.token;
	return true;
}

/*
 * Every contender of a lock directory in queue order, for the fleet view:
 * the listing, then the data of every child in one pipeline.  Whether a
 * contender holds follows the recipe's rule, seen from outside (no node
 * counts as ours).  Children that vanish meanwhile are left out.
 */
List *
zkl_recipe_queue(const char *dir)
{
	ZklOp	   *list = zkl_session_children(dir);
	List	   *rows = NIL;
	char	  **names;
	int			n;
	int			nkids = 0;
	int			rc = recipe_answer(list);
	ZklChild   *kids;
	ZklOp	  **gets;

	if (rc == ZNONODE)
	{
		zkl_session_op_free(list);
		return NIL;
	}
	if (rc != ZOK)
	{
		zkl_session_op_free(list);
		zkl_session_raise(rc, "list", dir);
	}
	n = zkl_session_op_children(list, &names);
	kids = palloc(sizeof(ZklChild) * Max(n, 1));
	for (int i = 0; i < n; i++)
		if (zkl_names_parse_child(pstrdup(names[i]), NULL, &kids[nkids]))
			nkids++;
	zkl_session_op_free(list);
	zkl_names_sort(kids, nkids);

	gets = palloc0(sizeof(ZklOp *) * Max(nkids, 1));
	PG_TRY();
	{
		for (int i = 0; i < nkids; i++)
			gets[i] = zkl_session_get(psprintf("%s/%s", dir, kids[i].name));
		for (int i = 0; i < nkids; i++)
		{
			ZklQueueRow *row;
			int64		czxid;
			const char *data;

			rc = recipe_answer(gets[i]);
			if (rc == ZNONODE)
				continue;
			if (rc != ZOK)
				zkl_session_raise(rc, "get", dir);
			data = zkl_session_op_data(gets[i], &czxid);
			row = palloc(sizeof(ZklQueueRow));
			row->position = list_length(rows) + 1;
			row->shared = kids[i].shared;
			row->holds = zkl_names_blocker(kids, nkids, i) < 0;
			row->node = psprintf("%s/%s", dir, kids[i].name);
			row->token = czxid;
			row->data = pstrdup(data);
			rows = lappend(rows, row);
		}
	}
	PG_FINALLY();
	{
		for (int i = 0; i < nkids; i++)
			zkl_session_op_free(gets[i]);
	}
	PG_END_TRY();
	return rows;
}
