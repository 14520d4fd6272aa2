/*-------------------------------------------------------------------------
 *
 * recipe.c
 *	  The ZooKeeper lock recipe for one acquisition, as a state machine:
 *	  enqueue, decide, watch, wait, re-check, give up.
 *
 * One node per contender, EPHEMERAL_SEQUENTIAL, named with Curator's
 * protection prefix "_c_<uuid>-" so that a node whose create reply was lost
 * can be found again.  The create and the directory listing are sent back
 * to back (with the directory's ACL when the session has credentials):
 * ZooKeeper runs one session's requests in order, so the listing already
 * holds the new node and an uncontended acquire costs one round trip.  A
 * waiter watches only the node that blocks it (names.c decides which), so
 * one release wakes one waiter; when that node was the only one ahead that
 * blocked it, the notice of its deletion is the grant (no second listing on
 * the hand-off's critical path).
 *
 * Every request under way belongs to the ZklRecipe, so that every way out
 * but success gives up cleanly: the requests are let go (session.c cleans
 * up after a create or a watch that is answered later), the node is
 * deleted and the watch removed before the error propagates, or the node
 * would block everyone queued after it.  Giving up never waits and never
 * raises.
 *
 * Knows nothing of SQL types nor of ZooKeeper's codes: the lock directory
 * and node data come from lockset.c, answers come as ZklRc from session.c.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <string.h>

#include "utils/timestamp.h"

#include "guc.h"
#include "recipe.h"

/* Bound on re-creating a lock directory that the server keeps removing. */
#define ZKL_DIR_ATTEMPTS 5
/* Deepest directory the recipes create parents for. */
#define ZKL_DIR_MAX_DEPTH 64


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
	const char *infix;			/* an exclusive node's name infix */
	const char *data;
	TimestampTz deadline;		/* 0: wait for ever */
	char	   *node;			/* our node's path, once created */
	int64		token;
	int			dir_attempts;
	uint64		epoch;			/* the session the recipe started in */
	char	   *prefix;			/* "_c_<uuid>-" of the current create */
	/* requests under way: all let go on every way out */
	ZklOp	   *create;
	ZklOp	   *list;
	ZklOp	   *acl;
	ZklOp	   *watch;
	ZklOp	   *stat;
	ZklOp	  **stats;			/* czxid of tied children */
	int			nstats;
	char	   *watched;		/* node we wait for (and may watch) */
	bool		handoff;		/* its deletion alone hands us the lock */
	ZklWatchMark mark;			/* notification counts when it was watched */
	ZklDeadlockWait dl;			/* deadlock search and wait entry */
} ZklRecipe;

/* Let go of a request (session.c cleans up after it) and clear the slot. */
static void
recipe_drop(ZklOp **op)
{
	zkl_session_op_free(*op);
	*op = NULL;
}

/* The error for a lock node that is gone while we wait. */
static void
recipe_raise_vanished(ZklRecipe *r)
{
	ereport(ERROR,
			(errcode(ERRCODE_CONNECTION_EXCEPTION),
			 errmsg("ZooKeeper lock node \"%s\" vanished while waiting",
					r->node),
			 errdetail("The ZooKeeper session may have expired, or another client deleted the node.")));
}

/* The session of this acquisition is gone, and our node with it. */
static void
recipe_raise_expired(ZklRecipe *r)
{
	ereport(ERROR,
			(errcode(ERRCODE_CONNECTION_EXCEPTION),
			 errmsg("ZooKeeper session expired while acquiring lock \"%s\"",
					r->dir),
			 errdetail("The ensemble did not answer for longer than the session timeout.")));
}

/*
 * Refuse a directory of ours in which another identity may delete our
 * node: *acl is the answer to zkl_session_get_acl(dir) (NULL without
 * zklock.auth), let go here.  The lock and the semaphore recipes send it
 * with their create.
 */
void
zkl_recipe_check_acl(ZklOp **acl, const char *dir)
{
	ZklRc		rc;
	char	   *problem;

	if (*acl == NULL)
		return;
	rc = zkl_session_answer(*acl);
	if (rc != ZKL_RC_OK && rc != ZKL_RC_NO_NODE)
		zkl_session_raise(*acl, "get ACL", dir);
	problem = rc == ZKL_RC_OK ? zkl_session_op_acl_problem(*acl) : NULL;
	recipe_drop(acl);
	if (problem != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("ZooKeeper lock directory \"%s\" is not protected by zklock.auth",
						dir),
				 errdetail("Its ACL says %s, so another ZooKeeper identity could delete a lock holder's node.",
						   problem),
				 errhint("Delete the directory (zklock recreates it with its own ACL), or set its ACL to give delete and admin rights only to the identity in zklock.auth.")));
}

/* Send our create and the listing without waiting in between. */
static ZklRecipeState
recipe_enqueue(ZklRecipe *r)
{
	char		uuid[ZKL_UUID_LEN + 1];
	char	   *path;
	ZklRc		rc;

	zkl_session_next_uuid(uuid);
	r->prefix = psprintf("%s%s-", ZKL_PROTECT_PREFIX, uuid);
	path = psprintf("%s/%s%s%s", r->dir, ZKL_PROTECT_PREFIX, uuid,
					r->shared ? ZKL_SHARED_INFIX : r->infix);
	r->create = zkl_session_create_node(path, r->data, r->dir, r->prefix);
	r->list = zkl_session_children(r->dir);
	r->acl = zkl_session_get_acl(r->dir);

	rc = zkl_session_answer(r->create);
	if (rc == ZKL_RC_NO_NODE)
	{
		recipe_drop(&r->create);
		return RS_MAKE_DIRS;
	}
	if (rc == ZKL_RC_CONNECTION_LOST)
	{
		/* The node may exist: never create twice, find it first. */
		recipe_drop(&r->list);
		recipe_drop(&r->acl);
		return RS_FIND_OWN;
	}
	if (rc != ZKL_RC_OK)
		zkl_session_raise(r->create, "create", path);
	r->node = zkl_session_op_take_node(r->create, &r->token);
	recipe_drop(&r->create);
	zkl_recipe_check_acl(&r->acl, r->dir);
	return RS_DECIDE;
}

/*
 * Create a directory and the ones above it, all in one pipeline:
 * persistent ones down to zklock.root, containers (removed by the server
 * once empty) below it; every answer read.
 */
static void
recipe_send_dirs(const char *dir, ZklOp **ops, int *nops)
{
	const char *p = dir;
	size_t		rootlen = strlen(zkl_root);

	while ((p = strchr(p + 1, '/')) != NULL && *nops < ZKL_DIR_MAX_DEPTH - 1)
		ops[(*nops)++] = zkl_session_create_dir(pnstrdup(dir, p - dir),
												(size_t) (p - dir) > rootlen);
	ops[(*nops)++] = zkl_session_create_dir(dir, true);

	for (int i = 0; i < *nops; i++)
	{
		ZklRc		rc = zkl_session_answer(ops[i]);

		/* A top-level directory has no parent to miss but the chroot. */
		if (i == 0 && rc == ZKL_RC_NO_NODE && zkl_guc_chroot() != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("ZooKeeper chroot \"%s\" of zklock.hosts does not exist",
							zkl_guc_chroot()),
					 errdetail("Lock directory \"%s\" would be created under it.",
							   dir),
					 errhint("Create the chroot with a ZooKeeper client, or remove it from zklock.hosts.")));
		if (rc != ZKL_RC_OK && rc != ZKL_RC_EXISTS)
			zkl_session_raise(ops[i], "create", dir);
	}
}

/*
 * A directory our node goes in is missing: create it and the ones above
 * it.  Bounded, since the server may remove a container again before our
 * node is in it: *attempts counts one acquisition's tries, and what
 * ("lock directory", "lease directory") names dir in the error.  Every
 * request is let go on every way out.
 */
void
zkl_recipe_make_dirs(const char *dir, const char *what, int *attempts)
{
	ZklOp	  **ops = palloc0(sizeof(ZklOp *) * ZKL_DIR_MAX_DEPTH);
	int		   *nops = palloc0(sizeof(int));

	if (++*attempts > ZKL_DIR_ATTEMPTS)
		ereport(ERROR,
				(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
				 errmsg("could not create ZooKeeper %s \"%s\"", what, dir),
				 errdetail("It was removed again %d times.", ZKL_DIR_ATTEMPTS)));
	PG_TRY();
	{
		recipe_send_dirs(dir, ops, nops);
	}
	PG_FINALLY();
	{
		for (int i = 0; i < *nops; i++)
			zkl_session_op_free(ops[i]);
	}
	PG_END_TRY();
}

static ZklRecipeState
recipe_make_dirs(ZklRecipe *r)
{
	recipe_drop(&r->list);
	recipe_drop(&r->acl);
	zkl_recipe_make_dirs(r->dir, "lock directory", &r->dir_attempts);
	return RS_ENQUEUE;
}

static ZklRecipeState
recipe_list(ZklRecipe *r)
{
	r->list = zkl_session_children(r->dir);
	return RS_DECIDE;
}

/*
 * Order children that share a sequence number by creation: fetch the
 * czxid of each (ours we know), in one pipeline.  Children that vanished
 * meanwhile are dropped.  Returns the new count.
 */
static int
recipe_order_ties(ZklRecipe *r, ZklChild *kids, int nkids)
{
	int			keep = 0;

	r->stats = palloc0(sizeof(ZklOp *) * nkids);
	r->nstats = nkids;
	for (int i = 0; i < nkids; i++)
		if (zkl_names_tied(kids, nkids, i) && !kids[i].ours)
			r->stats[i] = zkl_session_stat(psprintf("%s/%s", r->dir,
													kids[i].name));
		else if (zkl_names_tied(kids, nkids, i))
			kids[i].czxid = r->token;
	for (int i = 0; i < nkids; i++)
	{
		ZklRc		rc = r->stats[i] ? zkl_session_answer(r->stats[i]) : ZKL_RC_OK;

		if (rc == ZKL_RC_NO_NODE)
			continue;
		if (rc != ZKL_RC_OK)
			zkl_session_raise(r->stats[i], "stat", r->dir);
		if (r->stats[i])
			(void) zkl_session_op_owned(r->stats[i], &kids[i].czxid);
		kids[keep++] = kids[i];
	}
	for (int i = 0; i < r->nstats; i++)
		recipe_drop(&r->stats[i]);
	r->nstats = 0;
	zkl_names_sort(kids, keep);
	return keep;
}

/* Parse and order a listing; our own nodes are marked. */
static int
recipe_children(ZklRecipe *r, ZklOp *list, ZklChild **out)
{
	char	  **names;
	int			n = zkl_session_op_children(list, &names);
	ZklChild   *kids = palloc(sizeof(ZklChild) * Max(n, 1));
	int			nkids = 0;
	bool		ties = false;

	for (int i = 0; i < n; i++)
		if (zkl_names_parse_child(pstrdup(names[i]), zkl_session_own_prefix(),
								  &kids[nkids]))
			nkids++;
	zkl_names_sort(kids, nkids);
	for (int i = 0; i < nkids && !ties; i++)
		ties = zkl_names_tied(kids, nkids, i);
	if (ties)
		nkids = recipe_order_ties(r, kids, nkids);
	*out = kids;
	return nkids;
}

/*
 * Delete the strays of this session in a listing: nodes with its prefix
 * that it neither holds nor waits with.  Such a node is a create that
 * landed after this backend gave it up (its reply lost, and the sweep by
 * its prefix ran before it landed, as after a whole-ensemble pause), or a
 * release whose delete could not be queued.  Nobody holds it, yet it would
 * block everyone queued behind it for as long as this session lives.
 * Returns the listing without them.
 */
static int
recipe_drop_strays(ZklRecipe *r, ZklChild *kids, int nkids, const char *own)
{
	int			keep = 0;

	for (int i = 0; i < nkids; i++)
	{
		char	   *path;

		if (kids[i].ours && strcmp(kids[i].name, own) != 0)
		{
			path = psprintf("%s/%s", r->dir, kids[i].name);
			if (!zkl_session_tracks(path))
			{
				zkl_session_release(path);
				pfree(path);
				continue;
			}
			pfree(path);
		}
		kids[keep++] = kids[i];
	}
	return keep;
}

/* Order the listing and find what, if anything, we must wait for. */
static ZklRecipeState
recipe_decide(ZklRecipe *r)
{
	ZklRc		rc = zkl_session_answer(r->list);
	const char *own = strrchr(r->node, '/') + 1;
	ZklChild   *kids;
	int			nkids;
	int			self = -1;
	int			blocker;

	if (rc == ZKL_RC_NO_NODE)
		recipe_raise_vanished(r);	/* our node's directory is gone: so is it */
	if (rc == ZKL_RC_CONNECTION_LOST)
	{
		recipe_drop(&r->list);
		return RS_RECONNECT;
	}
	if (rc == ZKL_RC_SESSION_LOST)
		recipe_raise_expired(r);
	if (rc != ZKL_RC_OK)
		zkl_session_raise(r->list, "list", r->dir);

	nkids = recipe_children(r, r->list, &kids);
	recipe_drop(&r->list);
	nkids = recipe_drop_strays(r, kids, nkids, own);
	for (int i = 0; i < nkids; i++)
		if (strcmp(kids[i].name, own) == 0)
			self = i;
	if (self < 0)
		recipe_raise_vanished(r);

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
	r->handoff = zkl_names_handoff(kids, nkids, self, blocker);
	pfree(kids);

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
	ZklRc		rc;

	r->watch = zkl_session_watch(r->watched);
	r->mark = zkl_session_op_mark(r->watch);
	rc = zkl_session_answer(r->watch);
	if (rc == ZKL_RC_SESSION_LOST)
		recipe_raise_expired(r);
	if (rc != ZKL_RC_OK && rc != ZKL_RC_NO_NODE &&
		rc != ZKL_RC_CONNECTION_LOST)
		zkl_session_raise(r->watch, "watch", r->watched);
	recipe_drop(&r->watch);

	/*
	 * Gone already: list again, also when the hand-off rule would grant.
	 * This race is rare, and the listing also proves our own node is there.
	 */
	if (rc == ZKL_RC_NO_NODE)
		return RS_LIST;
	if (rc == ZKL_RC_CONNECTION_LOST)
		return RS_RECONNECT;
	return RS_WAIT;
}

/*
 * The connection dropped.  Our node and queue position live as long as the
 * session: wait for the proof that it still does, and look again.  If the
 * session is lost meanwhile, so is the node; fail rather than hang.  Not
 * hearing from the ensemble before the caller's deadline is a connection
 * error, not a lock timeout: nobody was seen to hold the lock.
 */
static ZklRecipeState
recipe_reconnect(ZklRecipe *r)
{
	ZklLockHealth h;

	if (r->node == NULL)
	{
		/* No node yet: a connected session of the same epoch will do. */
		if (zkl_session_health(r->epoch, NULL) != ZKL_HEALTH_LOST)
			zkl_session_connect();
		if (zkl_session_epoch() != r->epoch)
			recipe_raise_expired(r);
		return RS_FIND_OWN;
	}
	h = zkl_session_prove(r->epoch, r->node, r->deadline);
	if (h == ZKL_HEALTH_LOST)
		recipe_raise_expired(r);
	if (h == ZKL_HEALTH_IN_DOUBT)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("lost connection to ZooKeeper while waiting for lock \"%s\"",
						r->dir),
				 errdetail("The ensemble did not answer before the lock timeout; whether another client holds the lock is unknown.")));
	return RS_LIST;
}

/*
 * The reply to a create in dir was lost, *create (unclaimed) still held.
 * After the reconnect, list dir: a child carrying the create's prefix is
 * our node if its ephemeral owner is our session; claim and adopt it (and,
 * with zklock.auth, check dir's ACL, sent with the stat).  ZKL_RC_OK: it
 * is *node, its czxid *token; ZKL_RC_CONNECTION_LOST: look again after the
 * next reconnect; anything else: the create never happened, and *create is
 * let go (it sweeps its prefix should the node show up after all).  The
 * requests live in the caller's slots, so its give-up frees them; the lock
 * and the semaphore recipes share this.
 */
ZklRc
zkl_recipe_find_own(const char *dir, const char *prefix, ZklOp **create,
					ZklOp **list, ZklOp **stat, ZklOp **acl, char **node,
					int64 *token)
{
	char	  **names;
	int			n;
	ZklRc		rc;
	char	   *found = NULL;
	int64		czxid;
	int64		unused;

	*list = zkl_session_children(dir);
	rc = zkl_session_answer(*list);
	if (rc == ZKL_RC_CONNECTION_LOST)
	{
		recipe_drop(list);
		return rc;
	}
	n = rc == ZKL_RC_OK ? zkl_session_op_children(*list, &names) : 0;
	for (int i = 0; i < n; i++)
		if (strncmp(names[i], prefix, strlen(prefix)) == 0)
			found = psprintf("%s/%s", dir, names[i]);
	recipe_drop(list);
	if (found == NULL)
	{
		recipe_drop(create);
		return ZKL_RC_NO_NODE;
	}

	*stat = zkl_session_stat(found);
	*acl = zkl_session_get_acl(dir);
	rc = zkl_session_answer(*stat);
	if (rc == ZKL_RC_CONNECTION_LOST)
	{
		recipe_drop(stat);
		recipe_drop(acl);
		return rc;
	}
	if (rc != ZKL_RC_OK || !zkl_session_op_owned(*stat, &czxid))
	{
		recipe_drop(stat);
		recipe_drop(acl);
		recipe_drop(create);
		return ZKL_RC_NO_NODE;
	}
	/* Ours: claim it so that letting go of the create keeps it. */
	recipe_drop(stat);
	(void) zkl_session_op_take_node(*create, &unused);
	recipe_drop(create);
	*node = found;
	*token = czxid;
	zkl_session_adopt_node(found);
	zkl_recipe_check_acl(acl, dir);
	return ZKL_RC_OK;
}

static ZklRecipeState
recipe_find_own(ZklRecipe *r)
{
	ZklRc		rc = zkl_recipe_find_own(r->dir, r->prefix, &r->create,
										 &r->list, &r->stat, &r->acl,
										 &r->node, &r->token);

	if (rc == ZKL_RC_OK)
		return RS_LIST;
	return rc == ZKL_RC_CONNECTION_LOST ? RS_RECONNECT : RS_ENQUEUE;
}

/* Wait for the watch, in slices between deadlock searches. */
static ZklRecipeState
recipe_wait(ZklRecipe *r)
{
	bool		search;
	TimestampTz until = zkl_deadlock_wait_until(&r->dl, r->deadline, &search);

	if (zkl_session_await_watch_as(ZKL_WAIT_LOCK, &r->mark, until))
	{
		/*
		 * The hand-off: when the node we waited for was the only one ahead
		 * that blocked us, the notice of its deletion is the grant, with no
		 * listing on the way (recipe_confirm still checks the lease).  Any
		 * other wake (a change, a session event, another node's deletion)
		 * lists again.  Without the listing, a deletion of our own node by
		 * someone else is not seen here but by the next lease proof, which
		 * marks the lock lost (as for any held lock).
		 */
		if (r->handoff && zkl_session_deleted_since(&r->mark, r->watched))
		{
			pfree(r->watched);
			r->watched = NULL;
			return RS_HELD;
		}
		return RS_LIST;
	}
	if (!search)
		return RS_TIMED_OUT;
	zkl_deadlock_wait_search(&r->dl, r->dir, r->node, r->data, 0);
	return RS_WAIT;
}

/*
 * Granted by the listing: before returning the token, make sure the lease
 * covers the node (a wait can outlast it when the ensemble stalls).
 */
static void
recipe_confirm(ZklRecipe *r)
{
	if (zkl_session_prove(r->epoch, r->node, 0) != ZKL_HEALTH_HELD)
		recipe_raise_expired(r);
}

/* Undo everything this acquisition left in ZooKeeper; never raises. */
static void
recipe_give_up(ZklRecipe *r)
{
	recipe_drop(&r->create);
	recipe_drop(&r->list);
	recipe_drop(&r->acl);
	recipe_drop(&r->watch);
	recipe_drop(&r->stat);
	for (int i = 0; i < r->nstats; i++)
		recipe_drop(&r->stats[i]);
	r->nstats = 0;
	zkl_deadlock_wait_end(&r->dl);
	if (r->watched)
		zkl_session_unwatch(r->watched);
	if (r->node)
		zkl_session_release(r->node);
}

/* One step of the state machine. */
static ZklRecipeState
recipe_step(ZklRecipe *r, ZklRecipeState state)
{
	switch (state)
	{
		case RS_ENQUEUE:
			return recipe_enqueue(r);
		case RS_MAKE_DIRS:
			return recipe_make_dirs(r);
		case RS_LIST:
			return recipe_list(r);
		case RS_DECIDE:
			return recipe_decide(r);
		case RS_WATCH:
			return recipe_watch(r);
		case RS_WAIT:
			return recipe_wait(r);
		case RS_RECONNECT:
			return recipe_reconnect(r);
		case RS_FIND_OWN:
			return recipe_find_own(r);
		case RS_HELD:
		case RS_TIMED_OUT:
			break;
	}
	return state;
}

/*
 * Run the recipe for one lock directory.  Returns ZKL_ACQUIRED with the
 * node path and fencing token (czxid) once held, ZKL_TIMED_OUT when the
 * deadline passed first; raises on ZooKeeper errors and interrupts,
 * leaving nothing behind.
 */
static ZklAcquire
recipe_run(const char *dir, bool shared, const char *infix, const char *data,
		   TimestampTz deadline, char **node, int64 *token)
{
	ZklRecipe	r;
	volatile ZklRecipeState state = RS_ENQUEUE;

	memset(&r, 0, sizeof(r));
	r.dir = dir;
	r.shared = shared;
	r.infix = infix;
	r.data = data;
	r.deadline = deadline;
	r.epoch = zkl_session_epoch();
	zkl_deadlock_wait_start(&r.dl);

	PG_TRY();
	{
		while (state != RS_HELD && state != RS_TIMED_OUT)
			state = recipe_step(&r, state);
		if (state == RS_HELD)
			recipe_confirm(&r);
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
		return ZKL_TIMED_OUT;
	}
	zkl_deadlock_wait_end(&r.dl);
	*node = r.node;
	*token = r.token;
	return ZKL_ACQUIRED;
}

ZklAcquire
zkl_recipe_acquire(const char *dir, bool shared, const char *data,
				   TimestampTz deadline, char **node, int64 *token)
{
	return recipe_run(dir, shared, zkl_guc_exclusive_infix(), data, deadline,
					  node, token);
}

/*
 * The exclusive lock with Curator's InterProcessMutex names ("-lock-")
 * whatever zklock.node_naming says: the semaphore's mutex.
 */
ZklAcquire
zkl_recipe_acquire_mutex(const char *dir, const char *data,
						 TimestampTz deadline, char **node, int64 *token)
{
	return recipe_run(dir, false, ZKL_EXCLUSIVE_INFIX, data, deadline, node,
					  token);
}

/*
 * Every contender of a lock directory in queue order, for the fleet view:
 * the listing, then the data of every child in one pipeline.  Whether a
 * contender holds follows the recipe's rule, seen from outside (no node
 * counts as ours).  Children that vanish meanwhile are left out.
 */
typedef struct ZklQueueRead
{
	ZklOp	   *list;
	ZklOp	  **gets;
	int			ngets;
} ZklQueueRead;

/* The rows of a sorted queue; data[] follows unsorted[] by name. */
static List *
recipe_queue_rows(const char *dir, ZklChild *kids, int n,
				  const ZklChild *unsorted, char **data)
{
	List	   *rows = NIL;

	for (int i = 0; i < n; i++)
	{
		ZklQueueRow *row = palloc(sizeof(ZklQueueRow));

		row->position = i + 1;
		row->mode = kids[i].shared ? "shared" : "exclusive";
		row->holds = zkl_names_blocker(kids, n, i) < 0;
		row->node = psprintf("%s/%s", dir, kids[i].name);
		row->token = kids[i].czxid;
		row->data = NULL;
		for (int j = 0; j < n && row->data == NULL; j++)
			if (unsorted[j].name == kids[i].name)
				row->data = data[j];
		rows = lappend(rows, row);
	}
	return rows;
}

/* The listing, then every child's data in one pipeline; ops stay in q. */
static List *
recipe_queue_read(const char *dir, ZklQueueRead *q)
{
	char	  **names;
	int			n;
	ZklRc		rc;
	ZklChild   *kids;
	ZklChild   *unsorted;
	char	  **data;
	int			nkids = 0;
	int			kept = 0;

	q->list = zkl_session_children(dir);
	rc = zkl_session_answer(q->list);
	if (rc != ZKL_RC_OK && rc != ZKL_RC_NO_NODE)
		zkl_session_raise(q->list, "list", dir);
	n = rc == ZKL_RC_OK ? zkl_session_op_children(q->list, &names) : 0;
	kids = palloc(sizeof(ZklChild) * Max(n, 1));
	for (int i = 0; i < n; i++)
		if (zkl_names_parse_child(pstrdup(names[i]), NULL, &kids[nkids]))
			nkids++;
	q->gets = palloc0(sizeof(ZklOp *) * Max(nkids, 1));
	data = palloc0(sizeof(char *) * Max(nkids, 1));
	for (int i = 0; i < nkids; i++)
		q->gets[q->ngets++] = zkl_session_get(psprintf("%s/%s", dir,
													   kids[i].name));
	for (int i = 0; i < nkids; i++)
	{
		rc = zkl_session_answer(q->gets[i]);
		if (rc == ZKL_RC_NO_NODE)
			continue;
		if (rc != ZKL_RC_OK)
			zkl_session_raise(q->gets[i], "get", dir);
		data[kept] = pstrdup(zkl_session_op_data(q->gets[i], &kids[i].czxid));
		kids[kept++] = kids[i];
	}
	unsorted = palloc(sizeof(ZklChild) * Max(kept, 1));
	memcpy(unsorted, kids, sizeof(ZklChild) * kept);
	zkl_names_sort(kids, kept);
	return recipe_queue_rows(dir, kids, kept, unsorted, data);
}

static void
recipe_queue_free(ZklQueueRead *q)
{
	zkl_session_op_free(q->list);
	for (int i = 0; i < q->ngets; i++)
		zkl_session_op_free(q->gets[i]);
}

/*
 * Every contender of a lock directory in queue order, for the fleet view.
 * Whether a contender holds follows the recipe's rule, seen from outside
 * (no node counts as ours).  Children that vanish meanwhile are left out.
 */
List *
zkl_recipe_queue(const char *dir)
{
	ZklQueueRead q = {0};
	List	   *rows = NIL;

	PG_TRY();
	{
		rows = recipe_queue_read(dir, &q);
	}
	PG_CATCH();
	{
		recipe_queue_free(&q);
		PG_RE_THROW();
	}
	PG_END_TRY();
	recipe_queue_free(&q);
	return rows;
}

/*
 * What the lock set needs of the session, passed through: the recipe is
 * the lock set's only neighbour below.
 */
void
zkl_recipe_connect(void)
{
	zkl_session_connect();
}

uint64
zkl_recipe_epoch(void)
{
	return zkl_session_epoch();
}

ZklLockHealth
zkl_recipe_health(uint64 epoch, const char *node)
{
	return zkl_session_health(epoch, node);
}

ZklLockHealth
zkl_recipe_prove(uint64 epoch, const char *node)
{
	return zkl_session_prove(epoch, node, 0);
}

int64
zkl_recipe_unheard_ms(void)
{
	return zkl_session_unheard_ms();
}

/* Release a held lock's node: never blocks, never raises. */
void
zkl_recipe_release(const char *node)
{
	zkl_session_release(node);
}

/* Wait for the ensemble to answer every release sent; never raises. */
ZklReleaseWait
zkl_recipe_await_releases(int *timeout_ms)
{
	return zkl_session_await_releases(timeout_ms);
}

void
zkl_recipe_session_info(ZklSessionInfo *info)
{
	zkl_session_info(info);
}
