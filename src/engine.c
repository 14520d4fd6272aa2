/*-------------------------------------------------------------------------
 *
 * engine.c
 *	  The contender engine: one acquisition in the queue of one ZooKeeper
 *	  directory, as a state machine (enqueue, decide, watch, wait, list
 *	  again, reconnect, find our own node, give up), with the policy of a
 *	  lock, a mutex or a lease deciding what a listing means.
 *
 * One node per contender, EPHEMERAL_SEQUENTIAL, named with Curator's
 * protection prefix "_c_<uuid>-" so that a node whose create reply was lost
 * can be found again.  The create and the directory listing are sent back
 * to back (with the directory's ACL when the session has credentials):
 * ZooKeeper runs one session's requests in order, so the listing already
 * holds the new node and an uncontended acquire costs one round trip.
 *
 * A contender waits for one node (a lock's blocker: one release wakes one
 * waiter) or for any child of its directory (a full semaphore's mutex
 * holder).  One rule ends a wait for a node: when that node was the only
 * one ahead that blocked us, its deletion is the grant, whether a
 * notification says so or the watch finds it gone already; any other wake
 * lists again.  A wait for children lists again with the watch at once.
 *
 * Every answer that says the connection or the session went goes to one
 * state, CS_RECONNECT: it waits for the proof that our node (or the
 * anchor, the semaphore's mutex) still lives, and raises the one error for
 * a session lost meanwhile.
 *
 * Every request under way belongs to the ZklContender, so that every way
 * out but success gives up cleanly: the requests are let go (the session
 * cleans up after a create or a watch that is answered later), the node is
 * deleted and the watch removed before the error propagates, or the node
 * would block everyone queued after it.  Giving up never waits and never
 * raises.  Listings are parsed in a memory context reset for each one, so
 * a long wait does not grow.
 *
 * Knows nothing of SQL types nor of ZooKeeper's codes: directories, names
 * and node data come from the policies, answers come as ZklRc from the
 * session.
 *
 *-------------------------------------------------------------------------
 */
#define ZKL_RECIPE_LAYER
#include "postgres.h"

#include <string.h>

#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "engine.h"
#include "guc.h"
#include "owner.h"

/* Bound on re-creating a directory that the server keeps removing. */
#define ZKL_DIR_ATTEMPTS 5
/* Answers "session lost" taken for a session that may yet answer. */
#define ZKL_SESSION_LOST_ROUNDS 3

/* Let go of a request (the session cleans up after it); clear the slot. */
static void
engine_drop(ZklOp **op)
{
	zkl_session_op_free(*op);
	*op = NULL;
}

/* Our node is gone while we queue. */
pg_noreturn static void
engine_raise_vanished(ZklContender *c)
{
	ereport(ERROR,
			(errcode(ERRCODE_CONNECTION_EXCEPTION),
			 c->semaphore ?
			 errmsg("ZooKeeper node of semaphore \"%s\" vanished while waiting",
					c->display) :
			 errmsg("ZooKeeper node of lock \"%s\" vanished while waiting",
					c->display),
			 errdetail("Node \"%s\" is gone: the ZooKeeper session may have expired, or another client deleted it.",
					   c->node)));
}

/* The session of this acquisition is gone, and our node with it. */
pg_noreturn static void
engine_raise_expired(ZklContender *c)
{
	ereport(ERROR,
			(errcode(ERRCODE_CONNECTION_EXCEPTION),
			 c->semaphore ?
			 errmsg("ZooKeeper session expired while acquiring a lease of semaphore \"%s\"",
					c->display) :
			 errmsg("ZooKeeper session expired while acquiring lock \"%s\"",
					c->display),
			 errdetail("The ensemble did not answer for longer than the session timeout.")));
}

/*
 * A node of ours is lost: gone with the session, or, while the session
 * lives, deleted by another client (its owner's watch said so).
 */
pg_noreturn static void
engine_raise_lost(ZklContender *c)
{
	if (zkl_session_health(c->epoch, NULL) != ZKL_HEALTH_LOST)
		engine_raise_vanished(c);
	engine_raise_expired(c);
}

/*
 * An answer said the connection or the session went: reconnect.  Answers
 * that say the session went are counted, so that a session that answers
 * so while its health says otherwise (moved to another server, say) is
 * given up on after a few rounds rather than retried for ever.
 */
static ZklContenderState
engine_lost(ZklContender *c, ZklRc rc)
{
	if (rc == ZKL_RC_SESSION_LOST)
		c->session_lost++;
	return CS_RECONNECT;
}

/*
 * Fill in the caller's part of a contender (the rest starts zeroed): the
 * one place the policies' acquisitions are set up.
 */
void
zkl_engine_contender(ZklContender *c, const ZklPolicy *policy,
					 const char *dir, const char *display, bool semaphore,
					 const char *infix, const ZklOwner *owner,
					 TimestampTz deadline)
{
	size_t		len = zkl_owner_format(owner, NULL, 0);

	memset(c, 0, sizeof(*c));
	c->policy = policy;
	c->dir = dir;
	c->display = display;
	c->semaphore = semaphore;
	c->infix = infix;
	c->owner = owner;
	c->data = palloc(len + 1);
	(void) zkl_owner_format(owner, c->data, len + 1);
	c->deadline = deadline;
}

/*
 * Refuse a directory of ours in which another identity may delete our
 * node: *acl is the answer to zkl_session_get_acl(dir) (NULL without an
 * identity: zklock.auth, a certificate or SASL), let go here.  An answer
 * lost with the connection is returned (ZKL_RC_OK otherwise), for the
 * caller to reconnect: the next listing reads the ACL again (acl_unread),
 * so that the check is never skipped.
 */
static ZklRc
engine_check_acl(ZklContender *c)
{
	ZklRc		rc;
	char	   *problem;

	if (c->acl == NULL)
		return ZKL_RC_OK;
	rc = zkl_session_answer(c->acl);
	if (rc == ZKL_RC_CONNECTION_LOST || rc == ZKL_RC_SESSION_LOST)
	{
		engine_drop(&c->acl);
		c->acl_unread = true;
		return rc;
	}
	c->acl_unread = false;
	if (rc != ZKL_RC_OK && rc != ZKL_RC_NO_NODE)
		zkl_session_raise(c->acl, c->dir);
	problem = rc == ZKL_RC_OK ? zkl_session_op_acl_problem(c->acl) : NULL;
	engine_drop(&c->acl);
	if (problem != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 c->semaphore ?
				 errmsg("ZooKeeper lease directory \"%s\" is not protected by %s",
						c->dir, zkl_session_identity_name()) :
				 errmsg("ZooKeeper lock directory \"%s\" is not protected by %s",
						c->dir, zkl_session_identity_name()),
				 errdetail("Its ACL says %s, so another ZooKeeper identity could delete a holder's node.",
						   problem),
				 errhint("Delete the directory (zklock recreates it with its own ACL), or set its ACL to give delete and admin rights only to the identity of %s.",
						 zkl_session_identity_setting())));
	return ZKL_RC_OK;
}

/* Send our create and the listing (and the ACL) without waiting. */
static void
engine_send(ZklContender *c)
{
	char		uuid[ZKL_UUID_LEN + 1];

	zkl_session_next_uuid(uuid);
	c->prefix = psprintf("%s%s-", ZKL_PROTECT_PREFIX, uuid);
	c->path = psprintf("%s/%s%s%s", c->dir, ZKL_PROTECT_PREFIX, uuid, c->infix);
	c->create = zkl_session_create_node(c->path, c->data, c->dir, c->prefix);
	c->list = zkl_session_list_own(c->dir);
	c->acl = zkl_session_get_acl(c->dir);
}

/* Read the create's answer; the listing's is read when deciding. */
static ZklContenderState
engine_enqueued(ZklContender *c)
{
	ZklRc		rc = zkl_session_answer(c->create);

	if (rc == ZKL_RC_NO_NODE)
	{
		engine_drop(&c->create);
		return CS_MAKE_DIRS;
	}
	if (rc == ZKL_RC_CONNECTION_LOST || rc == ZKL_RC_SESSION_LOST)
	{
		/* The node may exist: never create twice, find it first. */
		engine_drop(&c->list);
		engine_drop(&c->acl);
		return engine_lost(c, rc);
	}
	if (rc != ZKL_RC_OK)
		zkl_session_raise(c->create, c->path);
	c->node = zkl_session_op_take_node(c->create, &c->token);
	engine_drop(&c->create);
	rc = engine_check_acl(c);
	if (rc != ZKL_RC_OK)
	{
		/* Our node is there: prove it, then list and read the ACL again. */
		engine_drop(&c->list);
		return engine_lost(c, rc);
	}
	return CS_DECIDE;
}

static ZklContenderState
engine_enqueue(ZklContender *c)
{
	engine_send(c);
	return engine_enqueued(c);
}

/* One create of a directory, and the directory it was sent for. */
typedef struct ZklDirOp
{
	ZklOp	   *op;
	const char *dir;
	bool		top;			/* directly under the chroot */
} ZklDirOp;

/*
 * Send the creates of a directory and the ones above it into ops (room
 * for engine_dir_depth of them):
 * persistent ones down to zklock.root, containers (removed by the server
 * once empty) below it.
 */
static void
engine_send_dirs(const char *dir, ZklDirOp *ops, int *nops)
{
	const char *p = dir;
	size_t		rootlen = strlen(zkl_root);
	bool		top = true;

	while ((p = strchr(p + 1, '/')) != NULL)
	{
		ops[*nops].dir = dir;
		ops[*nops].top = top;
		ops[(*nops)++].op = zkl_session_create_dir(pnstrdup(dir, p - dir),
												   (size_t) (p - dir) > rootlen);
		top = false;
	}
	ops[*nops].dir = dir;
	ops[*nops].top = top;
	ops[(*nops)++].op = zkl_session_create_dir(dir, true);
}

/*
 * Read every answer of ops; raise on the first that failed.  A lost
 * connection or session is returned instead (the session lost, if any
 * answer says so), for the caller to reconnect and enqueue again: creating
 * a directory twice is harmless.  ZKL_RC_OK when every one is there.
 */
static ZklRc
engine_read_dirs(ZklDirOp *ops, int nops)
{
	ZklRc		lost = ZKL_RC_OK;

	for (int i = 0; i < nops; i++)
	{
		ZklRc		rc = zkl_session_answer(ops[i].op);

		if (rc == ZKL_RC_CONNECTION_LOST || rc == ZKL_RC_SESSION_LOST)
		{
			if (lost != ZKL_RC_SESSION_LOST)
				lost = rc;
			continue;
		}
		/* A top-level directory has no parent to miss but the chroot. */
		if (ops[i].top && rc == ZKL_RC_NO_NODE && zkl_guc_chroot() != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("ZooKeeper chroot \"%s\" of zklock.hosts does not exist",
							zkl_guc_chroot()),
					 errdetail("Lock directory \"%s\" would be created under it.",
							   ops[i].dir),
					 errhint("Create the chroot with a ZooKeeper client, or remove it from zklock.hosts.")));
		if (rc != ZKL_RC_OK && rc != ZKL_RC_EXISTS)
			zkl_session_raise(ops[i].op, ops[i].dir);
	}
	return lost;
}

/* How many directories a directory's path names, itself included. */
static int
engine_dir_depth(const char *dir)
{
	int			n = 0;

	for (const char *p = dir; *p; p++)
		n += *p == '/';
	return n;
}

/*
 * The directories of contenders cs[0..m) are missing: create them and
 * the ones above them, all in one pipeline.  Bounded per contender, since
 * the server may remove a container again before our node is in it.
 * Every request is let go on every way out.  Returns a lost connection or
 * session (engine_read_dirs), which counts as no attempt.
 */
static ZklRc
engine_make_dirs_of(ZklContender **cs, int m)
{
	int			max = 0;
	ZklDirOp   *ops;
	int		   *nops = palloc0(sizeof(int));
	ZklRc	   *lost = palloc(sizeof(ZklRc));

	for (int k = 0; k < m; k++)
	{
		ZklContender *c = cs[k];

		engine_drop(&c->list);
		engine_drop(&c->acl);
		if (++c->dir_attempts > ZKL_DIR_ATTEMPTS)
			ereport(ERROR,
					(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
					 c->semaphore ?
					 errmsg("could not create ZooKeeper lease directory \"%s\"",
							c->dir) :
					 errmsg("could not create ZooKeeper lock directory \"%s\"",
							c->dir),
					 errdetail("It was removed again %d times.", ZKL_DIR_ATTEMPTS)));
		max += engine_dir_depth(c->dir);
	}
	ops = palloc0(sizeof(ZklDirOp) * Max(max, 1));
	PG_TRY();
	{
		for (int k = 0; k < m; k++)
			engine_send_dirs(cs[k]->dir, ops, nops);
		*lost = engine_read_dirs(ops, *nops);
	}
	PG_FINALLY();
	{
		for (int i = 0; i < *nops; i++)
			zkl_session_op_free(ops[i].op);
	}
	PG_END_TRY();
	if (*lost != ZKL_RC_OK)
		for (int k = 0; k < m; k++)
			cs[k]->dir_attempts--;
	return *lost;
}

/*
 * Our directory is missing: create it and the ones above it, then enqueue
 * again; after a lost connection, once the session is back.
 */
static ZklContenderState
engine_make_dirs(ZklContender *c)
{
	ZklRc		rc = engine_make_dirs_of(&c, 1);

	if (rc != ZKL_RC_OK)
		return engine_lost(c, rc);
	return CS_ENQUEUE;
}

/*
 * List again; with the child watch when we wait for children, and with
 * the directory's ACL when its answer was lost.
 */
static ZklContenderState
engine_list(ZklContender *c)
{
	if (c->acl_unread && c->acl == NULL)
		c->acl = zkl_session_get_acl(c->dir);
	if (c->child_watch)
	{
		c->list = zkl_session_watch_children(c->dir);
		c->mark = zkl_session_op_mark(c->list);
	}
	else
		c->list = zkl_session_children(c->dir);
	return CS_DECIDE;
}

/*
 * Order children that share a sequence number by creation: fetch the
 * czxid of each (ours we know), in one pipeline.  Children that vanished
 * meanwhile are dropped.  An answer lost with the connection or the
 * session is returned (ZKL_RC_OK otherwise), the queue left as it is, for
 * the caller to reconnect and list again.
 */
static ZklRc
engine_order_ties(ZklContender *c, ZklQueue *q)
{
	int			keep = 0;
	ZklRc		lost = ZKL_RC_OK;

	c->stats = palloc0(sizeof(ZklOp *) * Max(q->nkids, 1));
	c->nstats = q->nkids;
	for (int i = 0; i < q->nkids; i++)
		if (zkl_names_tied(q->kids, q->nkids, i) && !q->kids[i].ours)
			c->stats[i] = zkl_session_stat(psprintf("%s/%s", c->dir,
													q->kids[i].name));
		else if (zkl_names_tied(q->kids, q->nkids, i))
			q->kids[i].czxid = c->token;
	for (int i = 0; i < q->nkids; i++)
	{
		ZklRc		rc = c->stats[i] ? zkl_session_answer(c->stats[i]) : ZKL_RC_OK;

		if (rc == ZKL_RC_CONNECTION_LOST || rc == ZKL_RC_SESSION_LOST)
		{
			if (lost != ZKL_RC_SESSION_LOST)
				lost = rc;
			continue;
		}
		if (rc == ZKL_RC_NO_NODE)
			continue;
		if (rc != ZKL_RC_OK)
			zkl_session_raise(c->stats[i], c->dir);
		if (c->stats[i])
			(void) zkl_session_op_owned(c->stats[i], &q->kids[i].czxid);
		q->kids[keep++] = q->kids[i];
	}
	for (int i = 0; i < c->nstats; i++)
		engine_drop(&c->stats[i]);
	c->nstats = 0;
	if (lost != ZKL_RC_OK)
		return lost;
	q->nkids = keep;
	zkl_names_sort(q->kids, q->nkids);
	return ZKL_RC_OK;
}

/*
 * Take the strays of this session out of a listing: nodes with its prefix
 * that it neither holds nor waits with.  Such a node is a create that
 * landed after this backend gave it up (its reply lost, and the sweep by
 * its prefix ran before it landed, as after a whole-ensemble pause), or a
 * release whose delete could not be queued.  Nobody holds it, yet it would
 * block everyone queued behind it (or count against a semaphore's limit)
 * for as long as this session lives: delete it.
 */
static void
engine_drop_strays(ZklContender *c, char **names, int *n, const char *own)
{
	int			keep = 0;

	for (int i = 0; i < *n; i++)
	{
		if (zkl_queue_is_ours(names[i]) && strcmp(names[i], own) != 0)
		{
			char	   *path = psprintf("%s/%s", c->dir, names[i]);
			bool		stray = !zkl_session_tracks(path);

			if (stray)
				zkl_session_release(path);
			pfree(path);
			if (stray)
				continue;
		}
		names[keep++] = names[i];
	}
	*n = keep;
}

/* Read the listing: held, or what to wait for. */
static ZklContenderState
engine_decide(ZklContender *c)
{
	ZklRc		rc = zkl_session_answer(c->list);
	const char *own = strrchr(c->node, '/') + 1;
	MemoryContext outer;
	char	  **listed;
	char	  **names;
	int			n;
	ZklQueue	q;
	int			self = -1;
	int			blocker = -1;
	bool		present = false;
	bool		expired;
	ZklVerdict	verdict;

	if (rc == ZKL_RC_OK || rc == ZKL_RC_NO_NODE)
	{
		ZklRc		acl_rc = engine_check_acl(c);

		if (acl_rc != ZKL_RC_OK)
			rc = acl_rc;
	}
	if (rc == ZKL_RC_CONNECTION_LOST || rc == ZKL_RC_SESSION_LOST)
	{
		engine_drop(&c->list);
		engine_drop(&c->acl);
		return engine_lost(c, rc);
	}
	if (rc == ZKL_RC_NO_NODE)
		engine_raise_vanished(c);	/* our node's directory is gone: so is it */
	if (rc != ZKL_RC_OK)
		zkl_session_raise(c->list, c->dir);

	MemoryContextReset(c->listing_cxt);
	outer = MemoryContextSwitchTo(c->listing_cxt);
	n = zkl_session_op_children(c->list, &listed);
	names = palloc(sizeof(char *) * Max(n, 1));
	for (int i = 0; i < n; i++)
		names[i] = pstrdup(listed[i]);
	engine_drop(&c->list);
	engine_drop_strays(c, names, &n, own);
	for (int i = 0; i < n; i++)
		present |= strcmp(names[i], own) == 0;
	memset(&q, 0, sizeof(q));
	q.n = n;
	q.names = names;
	if (present && c->policy->ordered)
	{
		zkl_queue_parse(&q, names, n, zkl_session_own_prefix());
		for (int i = 0; i < q.nkids; i++)
			if (zkl_names_tied(q.kids, q.nkids, i))
			{
				rc = engine_order_ties(c, &q);
				break;
			}
		if (rc != ZKL_RC_OK)
		{
			/* A czxid was lost with the connection: list again after. */
			MemoryContextSwitchTo(outer);
			return engine_lost(c, rc);
		}
		for (int i = 0; i < q.nkids; i++)
			if (strcmp(q.kids[i].name, own) == 0)
				self = i;
		present = self >= 0;
	}
	MemoryContextSwitchTo(outer);
	/* Every read of this listing answered: the session answers again. */
	c->session_lost = 0;
	if (!present)
		engine_raise_vanished(c);

	expired = c->deadline != 0 && GetCurrentTimestamp() >= c->deadline;
	verdict = c->policy->decide(c, &q, self, expired, &blocker, &c->handoff);

	/*
	 * The node watched so far stays in c->watched until here, so that
	 * giving up while listing removes its watch.  A new blocker means the
	 * old one is gone, and its watch with it.
	 */
	if (c->watched)
		pfree(c->watched);
	c->watched = verdict == ZKL_VERDICT_WAIT_NODE ?
		psprintf("%s/%s", c->dir, q.kids[blocker].name) : NULL;
	if (c->head)
		pfree(c->head);
	c->head = verdict == ZKL_VERDICT_WAIT_NODE && q.nkids > 0 ?
		psprintf("%s/%s", c->dir, q.kids[0].name) : NULL;

	if (verdict == ZKL_VERDICT_HELD)
		return CS_HELD;
	if (expired)
		return CS_TIMED_OUT;
	if (verdict == ZKL_VERDICT_WAIT_CHILDREN)
	{
		/* The listing that set the watch decided: wait on it. */
		if (c->child_watch)
			return CS_WAIT;
		c->child_watch = true;
		return CS_LIST;
	}
	return CS_WATCH;
}

/*
 * Watch the blocking node; if it is gone already, as if it went now.  Our
 * own node, waiting, gets a data watch of its own (zkl_session_watch_own):
 * the hand-off's commit then needs no proof.
 */
static ZklContenderState
engine_watch(ZklContender *c)
{
	ZklRc		rc;

	zkl_session_watch_own(c->node);
	c->watch = zkl_session_watch(c->watched);
	c->mark = zkl_session_op_mark(c->watch);
	rc = zkl_session_answer(c->watch);
	if (rc != ZKL_RC_OK && rc != ZKL_RC_NO_NODE &&
		rc != ZKL_RC_CONNECTION_LOST && rc != ZKL_RC_SESSION_LOST)
		zkl_session_raise(c->watch, c->watched);
	engine_drop(&c->watch);
	if (rc == ZKL_RC_CONNECTION_LOST || rc == ZKL_RC_SESSION_LOST)
		return engine_lost(c, rc);
	if (rc == ZKL_RC_NO_NODE)
	{
		/* A get-data on a node that is gone leaves no watch behind. */
		pfree(c->watched);
		c->watched = NULL;
		return c->handoff ? CS_HELD : CS_LIST;
	}
	return CS_WAIT;
}

/* What a wait's messages call the lock: "lock "x" (exclusive)". */
static char *
engine_what(const ZklContender *c)
{
	if (c->semaphore)
		return psprintf("a lease of ZooKeeper semaphore \"%s\"", c->display);
	return psprintf("ZooKeeper lock \"%s\" (%s)", c->display,
					strcmp(c->infix, ZKL_SHARED_INFIX) == 0 ? "shared" : "exclusive");
}

/*
 * Who is at the head of the queue, from its node's owner record (one
 * read), as a message's detail; NULL when that cannot be told.
 */
static char *
engine_describe_head(const ZklContender *c)
{
	ZklOp	   *op;
	ZklRc		rc;
	int64		czxid;
	const char *data;
	char	   *buf;
	ZklOwner	o;
	char	   *out;

	if (c->head == NULL)
		return NULL;
	op = zkl_session_get(c->head);
	PG_TRY();
	{
		rc = zkl_session_answer(op);
	}
	PG_CATCH();
	{
		zkl_session_op_free(op);
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (rc != ZKL_RC_OK)
	{
		zkl_session_op_free(op);
		return NULL;
	}
	data = zkl_session_op_data(op, &czxid);
	buf = palloc(ZKL_OWNER_BUF(strlen(data)));
	if (zkl_owner_parse(data, strlen(data), buf, &o) && o.has_pid)
		out = psprintf("Process holding it: %d of cluster \"%s\" on host \"%s\", application \"%s\" (node \"%s\").",
					   o.pid, o.cluster_name ? o.cluster_name : "",
					   o.host ? o.host : "",
					   o.application_name ? o.application_name : "",
					   strrchr(c->head, '/') + 1);
	else
		out = psprintf("It is held by node \"%s\" of another client.",
					   strrchr(c->head, '/') + 1);
	zkl_session_op_free(op);
	return out;
}

/* zklock.log_lock_waits: the wait has lasted deadlock_timeout. */
static void
engine_log_wait(ZklContender *c)
{
	char	   *detail = engine_describe_head(c);

	c->logged = true;
	ereport(LOG,
			(errmsg("process %d still waiting for %s after %.3f ms",
					MyProcPid, engine_what(c),
					(double) (GetCurrentTimestamp() - c->wait_start) / 1000.0),
			 detail ? errdetail_internal("%s", detail) : 0));
}

/*
 * Wait for the watch, in slices between deadlock searches.  Our own node
 * is covered by the session's watches (session_lease.c): its deletion by
 * someone else wakes the wait
 * (a loss after the mark) or is seen here before it (a loss before), and
 * fails the acquisition at once, whatever the blocker does.
 */
static ZklContenderState
engine_wait(ZklContender *c)
{
	bool		search;
	TimestampTz until = zkl_deadlock_wait_until(&c->dl, c->deadline, &search);

	if (zkl_session_health(c->epoch, c->node) == ZKL_HEALTH_LOST)
		engine_raise_lost(c);

	if (!c->waited)
	{
		c->waited = true;
		c->wait_start = GetCurrentTimestamp();
		if (c->report)
			c->report->waited_for = c->display;
	}

	if (zkl_session_await_watch_as(c->policy->wait_kind, &c->mark, until))
	{
		/*
		 * The hand-off: the notice of the blocker's deletion is the grant,
		 * with no listing on the way (the set runner still proves the lease
		 * before the token goes out).  Any other wake (a change, a session
		 * event, another node's deletion, our own node's) lists again, or
		 * fails at the top of the next slice when our node is lost.  A
		 * deletion of our own node notified after the blocker's is seen by
		 * the proof before the token goes out, or marks the lock lost.
		 */
		if (c->watched && c->handoff &&
			zkl_session_deleted_since(&c->mark, c->watched))
			return CS_HELD;
		return CS_LIST;
	}
	if (!search)
		return CS_TIMED_OUT;
	if (zkl_log_lock_waits && !c->logged)
		engine_log_wait(c);
	zkl_deadlock_wait_search(&c->dl, c->dir, c->node, c->owner, c->max_leases);
	return CS_WAIT;
}

/*
 * The connection dropped, or an answer said the session is gone.  Our
 * node (or the anchor, before our node exists) and our place live as long
 * as the session: wait for the proof that it still does, and look again.
 * If the session is lost meanwhile, so is the node; fail rather than hang.
 * Not hearing from the ensemble before the caller's deadline is a
 * connection error, not a timeout: nobody was seen to hold the lock.
 */
static ZklContenderState
engine_reconnect(ZklContender *c)
{
	const char *proved = c->node ? c->node : c->anchor;
	ZklLockHealth h;

	if (c->session_lost > ZKL_SESSION_LOST_ROUNDS)
		engine_raise_expired(c);

	if (proved == NULL)
	{
		/*
		 * No node yet: a connected session of the same epoch will do (a
		 * create that landed is found then).  A session lost meanwhile took
		 * any node of ours with it.
		 */
		if (zkl_session_health(c->epoch, NULL) == ZKL_HEALTH_LOST)
			engine_raise_expired(c);
		zkl_session_connect_until(c->deadline);
		if (zkl_session_epoch() != c->epoch)
			engine_raise_expired(c);
		return c->create ? CS_FIND_OWN : CS_ENQUEUE;
	}
	h = zkl_session_prove(c->epoch, proved, c->deadline);
	if (h == ZKL_HEALTH_LOST)
		engine_raise_lost(c);
	if (h == ZKL_HEALTH_IN_DOUBT)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 c->semaphore ?
				 errmsg("lost connection to ZooKeeper while waiting for a lease of semaphore \"%s\"",
						c->display) :
				 errmsg("lost connection to ZooKeeper while waiting for lock \"%s\"",
						c->display),
				 c->semaphore ?
				 errdetail("The ensemble did not answer before the timeout; whether the semaphore is full is unknown.") :
				 errdetail("The ensemble did not answer before the lock timeout; whether another client holds the lock is unknown.")));
	if (c->node == NULL)
		return c->create ? CS_FIND_OWN : CS_ENQUEUE;
	return CS_LIST;
}

/*
 * The reply to our create was lost, c->create (unclaimed) still held.
 * After the reconnect, list the directory: a child carrying the create's
 * prefix is our node if its ephemeral owner is our session; claim and
 * adopt it (and, with zklock.auth, check the directory's ACL, sent with
 * the stat).  Else the create never happened, and it is let go (it sweeps
 * its prefix should the node show up after all).
 */
static ZklContenderState
engine_find_own(ZklContender *c)
{
	char	  **names;
	int			n;
	ZklRc		rc;
	char	   *found = NULL;
	int64		czxid;
	int64		unused;

	c->list = zkl_session_children(c->dir);
	rc = zkl_session_answer(c->list);
	if (rc == ZKL_RC_CONNECTION_LOST || rc == ZKL_RC_SESSION_LOST)
	{
		engine_drop(&c->list);
		return engine_lost(c, rc);
	}
	n = rc == ZKL_RC_OK ? zkl_session_op_children(c->list, &names) : 0;
	for (int i = 0; i < n; i++)
		if (strncmp(names[i], c->prefix, strlen(c->prefix)) == 0)
			found = psprintf("%s/%s", c->dir, names[i]);
	engine_drop(&c->list);
	if (found == NULL)
	{
		engine_drop(&c->create);
		return CS_ENQUEUE;
	}

	c->stat = zkl_session_stat(found);
	c->acl = zkl_session_get_acl(c->dir);
	rc = zkl_session_answer(c->stat);
	if (rc == ZKL_RC_CONNECTION_LOST || rc == ZKL_RC_SESSION_LOST)
	{
		engine_drop(&c->stat);
		engine_drop(&c->acl);
		return engine_lost(c, rc);
	}
	if (rc != ZKL_RC_OK || !zkl_session_op_owned(c->stat, &czxid))
	{
		engine_drop(&c->stat);
		engine_drop(&c->acl);
		engine_drop(&c->create);
		return CS_ENQUEUE;
	}
	/* Ours: claim it so that letting go of the create keeps it. */
	engine_drop(&c->stat);
	(void) zkl_session_op_take_node(c->create, &unused);
	engine_drop(&c->create);
	c->node = found;
	c->token = czxid;
	zkl_session_adopt_node(found);
	rc = engine_check_acl(c);
	if (rc != ZKL_RC_OK)
		return engine_lost(c, rc);
	return CS_LIST;
}

/* One step of the state machine. */
ZklContenderState
zkl_engine_step(ZklContender *c, ZklContenderState state)
{
	switch (state)
	{
		case CS_ENQUEUE:
			return engine_enqueue(c);
		case CS_MAKE_DIRS:
			return engine_make_dirs(c);
		case CS_LIST:
			return engine_list(c);
		case CS_DECIDE:
			return engine_decide(c);
		case CS_WATCH:
			return engine_watch(c);
		case CS_WAIT:
			return engine_wait(c);
		case CS_RECONNECT:
			return engine_reconnect(c);
		case CS_FIND_OWN:
			return engine_find_own(c);
		case CS_HELD:
		case CS_TIMED_OUT:
			break;
	}
	return state;
}

/* Undo everything this acquisition left in ZooKeeper; never raises. */
void
zkl_engine_give_up(ZklContender *c)
{
	engine_drop(&c->create);
	engine_drop(&c->list);
	engine_drop(&c->acl);
	engine_drop(&c->watch);
	engine_drop(&c->stat);
	for (int i = 0; i < c->nstats; i++)
		engine_drop(&c->stats[i]);
	c->nstats = 0;
	if (c->watched)
		zkl_session_unwatch(c->watched);
	if (c->child_watch)
		zkl_session_unwatch_children(c->dir);
	if (c->node)
		zkl_session_release(c->node);
	c->node = NULL;
	/* after the node: a victim's claim goes once its node has gone */
	zkl_deadlock_wait_end(&c->dl);
}

/* A set's contender gives up its place, to enqueue afresh later. */
void
zkl_engine_restart(ZklContender *c)
{
	zkl_engine_give_up(c);
	if (c->watched)
		pfree(c->watched);
	c->watched = NULL;
	c->child_watch = false;
	c->handoff = false;
	c->dir_attempts = 0;
	c->session_lost = 0;
	c->token = 0;
}

/* Granted: end what only the wait needed (a child watch would only wake us). */
void
zkl_engine_granted(ZklContender *c)
{
	if (c->logged)
		ereport(LOG,
				(errmsg("process %d acquired %s after %.3f ms",
						MyProcPid, engine_what(c),
						(double) (GetCurrentTimestamp() - c->wait_start) / 1000.0)));
	c->logged = false;
	zkl_deadlock_wait_end(&c->dl);
	if (c->child_watch)
		zkl_session_unwatch_children(c->dir);
	c->child_watch = false;
	if (c->watched)
		pfree(c->watched);
	c->watched = NULL;
}

/* Whether a contender has come as far as it can without waiting. */
static bool
engine_settled(ZklContenderState st)
{
	return st == CS_HELD || st == CS_TIMED_OUT || st == CS_WATCH ||
		st == CS_WAIT;
}

/*
 * Enqueue contenders cs[0..m): every create and listing in one pipeline
 * (missing directories made in one more, and their creates sent again in
 * a third), then each decided in turn, as far as it comes without
 * waiting: held, blocked, or blocked past the deadline.
 */
void
zkl_engine_enqueue_all(ZklContender **cs, int m, ZklContenderState *st)
{
	ZklContender **missing = palloc(sizeof(ZklContender *) * m);
	int		   *at = palloc(sizeof(int) * m);

	for (int k = 0; k < m; k++)
		engine_send(cs[k]);
	for (int k = 0; k < m; k++)
		st[k] = engine_enqueued(cs[k]);
	for (;;)
	{
		int			nmissing = 0;
		ZklRc		rc;

		for (int k = 0; k < m; k++)
			if (st[k] == CS_MAKE_DIRS)
			{
				at[nmissing] = k;
				missing[nmissing++] = cs[k];
			}
		if (nmissing == 0)
			break;
		rc = engine_make_dirs_of(missing, nmissing);
		if (rc != ZKL_RC_OK)
		{
			/* Each enqueues again once the session is back. */
			for (int k = 0; k < nmissing; k++)
				st[at[k]] = engine_lost(missing[k], rc);
			continue;
		}
		for (int k = 0; k < nmissing; k++)
			engine_send(missing[k]);
		for (int k = 0; k < nmissing; k++)
			st[at[k]] = engine_enqueued(missing[k]);
	}
	for (int k = 0; k < m; k++)
		while (!engine_settled(st[k]))
			st[k] = zkl_engine_step(cs[k], st[k]);
	pfree(missing);
	pfree(at);
}

/*
 * Granted: before its token is returned, make sure the lease covers the
 * node (a wait can outlast it when the ensemble stalls).
 */
void
zkl_engine_prove(ZklContender *c)
{
	if (zkl_session_prove(c->epoch, c->node, 0) != ZKL_HEALTH_HELD)
		engine_raise_lost(c);
}
