/*-------------------------------------------------------------------------
 *
 * session_request.c
 *	  Asynchronous requests of the main thread and their completions.
 *
 * A request is a ZklOp: sent with zoo_a*, answered on the completion
 * thread, which copies the answer into the op under mu and wakes the main
 * thread.  An op belongs to whoever sent it until zkl_session_op_free; one
 * freed while still under way is marked abandoned and its completion frees
 * it, and cleans up after it: the node of a lock-node create nobody
 * claimed is deleted (or searched for by its uuid, when the reply was
 * lost), a watch that was set after its waiter gave up is removed.
 *
 * Answers are mapped to zklock's own codes (ZklRc) here, so that the
 * recipe never sees a ZooKeeper code; the raw code stays in the op for the
 * error detail.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <stdlib.h>
#include <string.h>

#include "utils/timestamp.h"

#include "session_int.h"
#include "session_tls.h"

typedef enum ZklOpKind
{
	ZKL_OP_CREATE_NODE,
	ZKL_OP_CREATE_DIR,
	ZKL_OP_CHILDREN,
	ZKL_OP_WATCH,
	ZKL_OP_WATCH_CHILDREN,
	ZKL_OP_STAT,
	ZKL_OP_GET,
	ZKL_OP_ACL
} ZklOpKind;

struct ZklOp
{
	ZklOpKind	kind;
	bool		done;			/* completion has run */
	bool		abandoned;		/* main thread let go; completion frees */
	bool		claimed;		/* create: the caller owns the new node */
	int			rc;				/* ZooKeeper's code */
	ZklStamp	sent;
	ZklWatchMark mark;			/* watch: counts when it was sent */
	char	   *path;			/* create: the new node; watch: the target */
	int64_t		czxid;			/* create, stat, get: the node's czxid */
	int64_t		owner;			/* stat: ephemeralOwner */
	int			nchildren;		/* children: the list */
	char	  **children;
	char	   *data;			/* get: the node's data, NUL-terminated */
	char	   *acl_problem;	/* acl: who else may delete, or NULL */
	char	   *sweep_dir;		/* create: where to find a lost reply's node */
	char	   *sweep_prefix;
};

/* ZooKeeper's code in zklock's terms; any thread. */
ZklRc
session_rc(int rc)
{
	switch (rc)
	{
		case ZOK:
			return ZKL_RC_OK;
		case ZNONODE:
			return ZKL_RC_NO_NODE;
		case ZNODEEXISTS:
			return ZKL_RC_EXISTS;
		case ZCONNECTIONLOSS:
		case ZOPERATIONTIMEOUT:
			return ZKL_RC_CONNECTION_LOST;
		case ZSESSIONEXPIRED:
		case ZSESSIONMOVED:
		case ZINVALIDSTATE:
		case ZCLOSING:
			return ZKL_RC_SESSION_LOST;
		case ZNOAUTH:
		case ZAUTHFAILED:
			return ZKL_RC_DENIED;
		default:
			return ZKL_RC_FAILED;
	}
}

static void
session_free_op(ZklOp *op)
{
	if (op->children)
	{
		for (int i = 0; i < op->nchildren; i++)
			free(op->children[i]);
		free(op->children);
	}
	free(op->path);
	free(op->data);
	free(op->acl_problem);
	free(op->sweep_dir);
	free(op->sweep_prefix);
	free(op);
}

/* Register a node of ours (held or queued).  Caller holds mu. */
static bool
session_add_node_locked(const char *path)
{
	ZklNode    *n = malloc(sizeof(ZklNode));

	if (n == NULL || (n->path = strdup(path)) == NULL)
	{
		free(n);
		return false;
	}
	if (zkl_shared.nodes == NULL)
		zkl_shared.have_proof = false;	/* a new lease starts */
	n->lost = false;
	n->next = zkl_shared.nodes;
	zkl_shared.nodes = n;
	return true;
}

/*
 * Clean up after an op nobody will look at again: delete the node of an
 * unclaimed create (search for it when the reply was lost), remove a watch
 * whose answer came after its waiter gave up (abandoned: a watch answered
 * in time is the waiter's to keep or remove).  Caller holds mu; returns whether
 * anything was queued.
 */
static bool
session_cleanup_unclaimed(ZklOp *op)
{
	if (op->kind == ZKL_OP_WATCH || op->kind == ZKL_OP_WATCH_CHILDREN)
		return op->abandoned && op->rc == ZOK &&
			session_queue_cleanup(op->kind == ZKL_OP_WATCH ?
								  ZKL_CLEAN_UNWATCH : ZKL_CLEAN_UNWATCH_CHILDREN,
								  op->path, NULL);
	if (op->kind != ZKL_OP_CREATE_NODE || op->claimed)
		return false;
	if (op->rc == ZOK)
	{
		ZklNode   **p = &zkl_shared.nodes;

		while (*p && strcmp((*p)->path, op->path) != 0)
			p = &(*p)->next;
		if (*p)
		{
			ZklNode    *n = *p;

			*p = n->next;
			free(n->path);
			free(n);
		}
		return session_queue_cleanup(ZKL_CLEAN_DELETE, op->path, NULL);
	}
	if (session_rc(op->rc) == ZKL_RC_CONNECTION_LOST)
		return session_queue_cleanup(ZKL_CLEAN_SWEEP, op->sweep_dir,
									 op->sweep_prefix);
	return false;
}

/*
 * Finish an op on the completion thread, with mu held by the caller; an
 * abandoned one is freed here after its clean-up.  Returns whether clean-
 * ups were queued.
 */
static bool
session_finish_locked(ZklOp *op, int rc)
{
	bool		issue = false;

	zkl_shared.requests_out--;
	op->rc = rc;
	op->done = true;
	if (op->abandoned)
	{
		issue = session_cleanup_unclaimed(op);
		session_free_op(op);
	}
	return issue;
}

static void
session_finish(ZklOp *op, int rc)
{
	bool		issue;

	pthread_mutex_lock(&zkl_shared.mu);
	issue = session_finish_locked(op, rc);
	pthread_mutex_unlock(&zkl_shared.mu);
	if (issue)
		session_issue_cleanups();
	session_kick();
}

/*
 * A create's answer.  A lock node is registered at once, so that the
 * lease covers it and an abandoned create still gets deleted; its answer
 * is a write the quorum committed, so it renews the lease.
 */
static void
session_created(int rc, const char *value, const struct Stat *stat,
				const void *data)
{
	ZklOp	   *op = (ZklOp *) data;
	bool		issue;

	pthread_mutex_lock(&zkl_shared.mu);
	if (rc == ZOK && op->kind == ZKL_OP_CREATE_NODE)
	{
		op->path = strdup(value);
		op->czxid = stat->czxid;
		if (op->path == NULL || !session_add_node_locked(op->path))
		{
			/* The node goes with the session; treat it as lost. */
			free(op->path);
			op->path = NULL;
			rc = ZSYSTEMERROR;
		}
		else
			session_lease_renew_locked(&op->sent);
	}
	issue = session_finish_locked(op, rc);
	pthread_mutex_unlock(&zkl_shared.mu);
	if (issue)
		session_issue_cleanups();
	session_kick();
}

static void
session_listed(int rc, const struct String_vector *strings, const void *data)
{
	ZklOp	   *op = (ZklOp *) data;

	if (rc == ZOK && strings->count > 0)
	{
		op->children = calloc(strings->count, sizeof(char *));
		if (op->children == NULL)
			rc = ZSYSTEMERROR;
		for (int i = 0; rc == ZOK && i < strings->count; i++)
		{
			op->children[i] = strdup(strings->data[i]);
			op->nchildren = i + 1;
			if (op->children[i] == NULL)
				rc = ZSYSTEMERROR;
		}
	}
	session_finish(op, rc);
}

static void
session_got_data(int rc, const char *value, int value_len,
				 const struct Stat *stat, const void *data)
{
	ZklOp	   *op = (ZklOp *) data;

	if (rc == ZOK && op->kind == ZKL_OP_GET)
	{
		op->czxid = stat->czxid;
		op->data = malloc(value_len > 0 ? value_len + 1 : 1);
		if (op->data == NULL)
			rc = ZSYSTEMERROR;
		else
		{
			if (value_len > 0)
				memcpy(op->data, value, value_len);
			op->data[value_len > 0 ? value_len : 0] = '\0';
		}
	}
	session_finish(op, rc);
}

static void
session_got_stat(int rc, const struct Stat *stat, const void *data)
{
	ZklOp	   *op = (ZklOp *) data;

	if (rc == ZOK)
	{
		op->czxid = stat->czxid;
		op->owner = stat->ephemeralOwner;
	}
	session_finish(op, rc);
}

/*
 * A directory's ACL: note the first entry that lets an identity other than
 * zklock.auth's delete children or change the ACL.
 */
static void
session_got_acl(int rc, struct ACL_vector *acl, struct Stat *stat,
				const void *data)
{
	ZklOp	   *op = (ZklOp *) data;
	const char *own = zkl_shared.own_digest;

	(void) stat;
	for (int i = 0; rc == ZOK && op->acl_problem == NULL && i < acl->count; i++)
	{
		struct ACL *e = &acl->data[i];
		size_t		len;

		if (!(e->perms & (ZOO_PERM_DELETE | ZOO_PERM_ADMIN)) ||
			(strcmp(e->id.scheme, "digest") == 0 &&
			 strcmp(e->id.id, own) == 0) ||
			zkl_tls_is_own_id(e->id.scheme, e->id.id))
			continue;
		len = strlen(e->id.scheme) + strlen(e->id.id) + 32;
		if ((op->acl_problem = malloc(len)) != NULL)
			snprintf(op->acl_problem, len, "%s:%s may %s", e->id.scheme,
					 e->id.id, (e->perms & ZOO_PERM_DELETE) ?
					 "delete its children" : "change its ACL");
	}
	session_finish(op, rc);
}

static ZklOp *
session_new_op(ZklOpKind kind)
{
	ZklOp	   *op = calloc(1, sizeof(ZklOp));

	if (op == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	op->kind = kind;
	zkl_stamp_now(&op->sent);
	pthread_mutex_lock(&zkl_shared.mu);
	op->mark.watch_events = zkl_shared.watch_events;
	op->mark.session_events = zkl_shared.session_events;
	zkl_shared.requests_out++;
	pthread_mutex_unlock(&zkl_shared.mu);
	return op;
}

/*
 * Account for the send of an op.  One the library refused because the
 * session is gone (an expired handle says ZINVALIDSTATE) is answered at
 * once with that code, so that callers treat it as they treat such an
 * answer; any other refusal is freed, and raised.
 */
static ZklOp *
session_sent(ZklOp *op, int rc, const char *what, const char *path)
{
	if (rc == ZOK)
		return op;
	pthread_mutex_lock(&zkl_shared.mu);
	zkl_shared.requests_out--;
	op->rc = rc;
	op->done = session_rc(rc) == ZKL_RC_SESSION_LOST;
	pthread_mutex_unlock(&zkl_shared.mu);
	if (op->done)
		return op;
	PG_TRY();
	{
		zkl_session_raise(op, what, path);
	}
	PG_FINALLY();
	{
		session_free_op(op);
	}
	PG_END_TRY();
	return NULL;
}

static const struct ACL_vector *
session_acl(void)
{
	static struct ACL entries[2];
	static struct ACL_vector own = {2, entries};

	if (zkl_shared.own_digest[0] == '\0' && !zkl_tls_has_identity())
		return &ZOO_OPEN_ACL_UNSAFE;

	/* This identity may do anything, everyone may read. */
	entries[0].perms = ZOO_PERM_ALL;
	entries[0].id = ZOO_AUTH_IDS;
	entries[1].perms = ZOO_PERM_READ;
	entries[1].id = ZOO_ANYONE_ID_UNSAFE;
	return &own;
}

/*
 * Send the create of a lock node, EPHEMERAL_SEQUENTIAL.  sweep_dir and
 * sweep_prefix say where it can be found if the reply is lost, so that an
 * unclaimed create never leaves an orphan.
 */
ZklOp *
zkl_session_create_node(const char *path, const char *data,
						const char *sweep_dir, const char *sweep_prefix)
{
	ZklOp	   *op = session_new_op(ZKL_OP_CREATE_NODE);

	op->sweep_dir = strdup(sweep_dir);
	op->sweep_prefix = strdup(sweep_prefix);
	if (op->sweep_dir == NULL || op->sweep_prefix == NULL)
		return session_sent(op, ZSYSTEMERROR, "create", path);
	return session_sent(op,
						zoo_acreate2(zkl_shared.zh, path, data, (int) strlen(data),
									 session_acl(), ZOO_EPHEMERAL_SEQUENTIAL,
									 session_created, op),
						"create", path);
}

/* Send the create of a directory: a container, or a persistent parent. */
ZklOp *
zkl_session_create_dir(const char *path, bool container)
{
	ZklOp	   *op = session_new_op(ZKL_OP_CREATE_DIR);

	return session_sent(op,
						zoo_acreate2(zkl_shared.zh, path, NULL, -1, session_acl(),
									 container ? ZOO_CONTAINER : ZOO_PERSISTENT,
									 session_created, op),
						"create", path);
}

/*
 * Send the create of a plain ephemeral node that is no lock node: not in
 * the lease, not swept, gone with the session (the wait entries and
 * victim claims of the deadlock search).
 */
ZklOp *
zkl_session_create_mark(const char *path, const char *data)
{
	ZklOp	   *op = session_new_op(ZKL_OP_CREATE_DIR);

	return session_sent(op,
						zoo_acreate2(zkl_shared.zh, path, data, (int) strlen(data),
									 session_acl(), ZOO_EPHEMERAL,
									 session_created, op),
						"create", path);
}

ZklOp *
zkl_session_children(const char *path)
{
	ZklOp	   *op = session_new_op(ZKL_OP_CHILDREN);

	return session_sent(op,
						zoo_aget_children(zkl_shared.zh, path, 0,
										  session_listed, op),
						"list", path);
}

/* The data watcher only counts: the recipe decides what a wake means. */
static void
session_data_watcher(zhandle_t *zh, int type, int state, const char *path,
					 void *ctx)
{
	char	   *copy = type == ZOO_DELETED_EVENT && path ? strdup(path) : NULL;

	(void) zh;
	(void) state;
	(void) ctx;
	pthread_mutex_lock(&zkl_shared.mu);
	if (type == ZOO_SESSION_EVENT)
		zkl_shared.session_events++;
	else
		zkl_shared.watch_events++;
	if (copy != NULL)
	{
		free(zkl_shared.deleted_path);
		zkl_shared.deleted_path = copy;
		zkl_shared.deleted_at = zkl_shared.watch_events;
	}
	pthread_mutex_unlock(&zkl_shared.mu);
	session_kick();
}

/*
 * Set a data watch on path (get-data rather than exists: a data watch is
 * not left behind when the node is already gone, ZNONODE).  The op keeps
 * the notification counts of the moment it was sent, for
 * zkl_session_await_watch.
 */
ZklOp *
zkl_session_watch(const char *path)
{
	ZklOp	   *op = session_new_op(ZKL_OP_WATCH);

	if ((op->path = strdup(path)) == NULL)
		return session_sent(op, ZSYSTEMERROR, "watch", path);
	return session_sent(op,
						zoo_awget(zkl_shared.zh, path, session_data_watcher,
								  NULL, session_got_data, op),
						"watch", path);
}

/*
 * List path and set a child watch on it (the semaphore's waiter, which
 * must hear of a lease going).  Like a data watch, one answered after its
 * waiter gave up is removed again.
 */
ZklOp *
zkl_session_watch_children(const char *path)
{
	ZklOp	   *op = session_new_op(ZKL_OP_WATCH_CHILDREN);

	if ((op->path = strdup(path)) == NULL)
		return session_sent(op, ZSYSTEMERROR, "list", path);
	return session_sent(op,
						zoo_awget_children(zkl_shared.zh, path,
										   session_data_watcher, NULL,
										   session_listed, op),
						"list", path);
}

/* Ask for a node's data (and czxid), without a watch. */
ZklOp *
zkl_session_get(const char *path)
{
	ZklOp	   *op = session_new_op(ZKL_OP_GET);

	return session_sent(op,
						zoo_aget(zkl_shared.zh, path, 0, session_got_data, op),
						"get", path);
}

/* Ask for a node's Stat (czxid, ephemeral owner). */
ZklOp *
zkl_session_stat(const char *path)
{
	ZklOp	   *op = session_new_op(ZKL_OP_STAT);

	return session_sent(op,
						zoo_aexists(zkl_shared.zh, path, 0, session_got_stat, op),
						"stat", path);
}

/*
 * Ask whether a directory's ACL lets another identity delete in it; NULL
 * when the session has no credentials, so that nothing is protected.
 */
ZklOp *
zkl_session_get_acl(const char *path)
{
	ZklOp	   *op;

	if (zkl_shared.own_digest[0] == '\0' && !zkl_tls_has_identity())
		return NULL;
	op = session_new_op(ZKL_OP_ACL);
	return session_sent(op,
						zoo_aget_acl(zkl_shared.zh, path, session_got_acl, op),
						"get ACL", path);
}

static bool
session_op_done(void *arg)
{
	return ((ZklOp *) arg)->done;
}

/* Wait for an op's answer; false when the deadline came first. */
bool
zkl_session_await(ZklOp *op, TimestampTz deadline)
{
	return session_wait(session_op_done, op, deadline);
}

/* Wait for an op's answer, which the session bounds; its code. */
ZklRc
zkl_session_answer(ZklOp *op)
{
	zkl_session_await(op, 0);
	return session_rc(op->rc);
}

static bool
session_watch_fired(void *arg)
{
	const ZklWatchMark *m = (const ZklWatchMark *) arg;

	return zkl_shared.watch_events != m->watch_events ||
		zkl_shared.session_events != m->session_events ||
		session_lease_lost_locked();
}

/*
 * Wait until a data watch fired, the session's state changed or its locks
 * were lost since the mark; false when the deadline came first.
 */
bool
zkl_session_await_watch(const ZklWatchMark *mark, TimestampTz deadline)
{
	return session_wait(session_watch_fired, (void *) mark, deadline);
}

/*
 * zkl_session_await_watch, reported as kind (ZkLock, ZkSemaphore, ...);
 * the kind before is restored, on error too.
 */
bool
zkl_session_await_watch_as(ZklWaitKind kind, const ZklWatchMark *mark,
						   TimestampTz deadline)
{
	ZklWaitKind prev = zkl_session_wait_kind(kind);
	volatile bool fired = false;

	PG_TRY();
	{
		fired = zkl_session_await_watch(mark, deadline);
	}
	PG_FINALLY();
	{
		zkl_session_wait_kind(prev);
	}
	PG_END_TRY();
	return fired;
}

/*
 * Whether the ensemble notified the deletion of path since the mark: the
 * last deletion notified is kept, so a later notification of another node
 * hides it and the answer is a safe false.
 */
bool
zkl_session_deleted_since(const ZklWatchMark *mark, const char *path)
{
	bool		gone;

	pthread_mutex_lock(&zkl_shared.mu);
	gone = zkl_shared.deleted_path != NULL &&
		zkl_shared.deleted_at > mark->watch_events &&
		strcmp(zkl_shared.deleted_path, path) == 0;
	pthread_mutex_unlock(&zkl_shared.mu);
	return gone;
}

/* The notification counts of the moment a watch was sent. */
ZklWatchMark
zkl_session_op_mark(ZklOp *op)
{
	return op->mark;
}

/*
 * Claim a create's node: freeing the op no longer deletes it.  Returns its
 * path (palloc'd), NULL if the reply did not say it.
 */
char *
zkl_session_op_take_node(ZklOp *op, int64 *czxid)
{
	op->claimed = true;
	*czxid = op->czxid;
	return op->path ? pstrdup(op->path) : NULL;
}

/* The listed children; valid until the op is freed. */
int
zkl_session_op_children(ZklOp *op, char ***children)
{
	*children = op->children;
	return op->nchildren;
}

/* A get answer: the data (valid until the op is freed), czxid. */
const char *
zkl_session_op_data(ZklOp *op, int64 *czxid)
{
	*czxid = op->czxid;
	return op->data;
}

/* A stat answer: the node's czxid and whether this session owns it. */
bool
zkl_session_op_owned(ZklOp *op, int64 *czxid)
{
	bool		mine;

	pthread_mutex_lock(&zkl_shared.mu);
	mine = op->owner != 0 && op->owner == zkl_shared.session_id &&
		session_connected_locked();
	pthread_mutex_unlock(&zkl_shared.mu);
	*czxid = op->czxid;
	return mine;
}

/* An ACL answer: who else may delete in the directory (palloc'd), or NULL. */
char *
zkl_session_op_acl_problem(ZklOp *op)
{
	return op->acl_problem ? pstrdup(op->acl_problem) : NULL;
}

/*
 * Let go of an op.  One still under way is freed by its completion; either
 * way, what it leaves in ZooKeeper is cleaned up.
 */
void
zkl_session_op_free(ZklOp *op)
{
	bool		issue = false;

	if (op == NULL)
		return;
	pthread_mutex_lock(&zkl_shared.mu);
	if (!op->done)
		op->abandoned = true;
	else
	{
		issue = session_cleanup_unclaimed(op);
		session_free_op(op);
	}
	pthread_mutex_unlock(&zkl_shared.mu);
	if (issue)
		session_issue_cleanups();
}

/* Raise the error for a failed request. */
void
zkl_session_raise(ZklOp *op, const char *what, const char *path)
{
	int			code;

	switch (session_rc(op->rc))
	{
		case ZKL_RC_CONNECTION_LOST:
			code = ERRCODE_CONNECTION_FAILURE;
			break;
		case ZKL_RC_SESSION_LOST:
			ereport(ERROR,
					(errcode(ERRCODE_CONNECTION_EXCEPTION),
					 errmsg("ZooKeeper session ended before the %s request for \"%s\" was answered",
							what, path),
					 errdetail("The ensemble expired, closed or moved this backend's session (%s).",
							   zerror(op->rc)),
					 op->rc != ZSESSIONMOVED ?
					 errhint("The next zklock call opens a new session.") : 0));
			break;
		case ZKL_RC_DENIED:
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("ZooKeeper denied the %s request for \"%s\"", what, path),
					 errdetail_internal("%s", zerror(op->rc)),
					 errhint("The node belongs to another ZooKeeper identity: check zklock.auth and zklock.root.")));
			break;
		default:
			code = ERRCODE_EXTERNAL_ROUTINE_EXCEPTION;
			break;
	}
	ereport(ERROR,
			(errcode(code),
			 errmsg("ZooKeeper %s request for \"%s\" failed", what, path),
			 errdetail_internal("%s", zerror(op->rc))));
}

/* Register a node found again after a lost create reply (see recipe.c). */
void
zkl_session_adopt_node(const char *path)
{
	bool		ok;

	pthread_mutex_lock(&zkl_shared.mu);
	ok = session_add_node_locked(path);
	pthread_mutex_unlock(&zkl_shared.mu);
	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
}
