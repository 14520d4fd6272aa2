/*-------------------------------------------------------------------------
 *
 * session_request.c
 *	  Asynchronous requests of the main thread and their completions.
 *
 * A request is a ZklOp: sent with zoo_a*, answered on the library's IO
 * thread (completions run there: zoo_set_io_completions), which copies the
 * answer into the op under mu and wakes the main thread.  An op belongs to whoever sent it until zkl_session_op_free; one
 * freed while still under way is marked abandoned and its completion frees
 * it, and cleans up after it: the node of a lock-node create nobody
 * claimed is deleted (or searched for by its uuid, when the reply was
 * lost), a watch that was set after its waiter gave up is removed.
 *
 * Answers are mapped to zklock's own codes (ZklRc), so that the recipe
 * never sees a ZooKeeper code; the raw code stays in the op for the error
 * detail, and the error names what the request was for, in one sentence
 * per kind of request.
 *
 * This file also owns the watch notifications (how many came, the last
 * deletion notified), which the recipe's waits are measured against, and
 * zklock.auth's identity as ACLs name it.
 *
 * A request refused with ZMARSHALLINGERROR may have its completion
 * registered (see session_int.h): it is raised as failed, and its op let
 * go as if it were under way, in limbo until its completion or the close.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <stdlib.h>
#include <string.h>

#include "common/cryptohash.h"
#include "common/sha1.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "guc.h"
#include "session_int.h"
#include "session_sasl.h"
#include "session_tls.h"
#include "stats.h"

typedef enum ZklOpKind
{
	ZKL_OP_CREATE_NODE,
	ZKL_OP_CREATE_DIR,
	ZKL_OP_CHILDREN,
	ZKL_OP_WATCH,
	ZKL_OP_WATCH_CHILDREN,
	ZKL_OP_STAT,
	ZKL_OP_GET,
	ZKL_OP_ACL,
	ZKL_OP_CLAIM
} ZklOpKind;

struct ZklOp
{
	ZklOpKind	kind;
	bool		done;			/* completion has run */
	bool		abandoned;		/* main thread let go; completion frees */
	bool		claimed;		/* create: the caller owns the new node */
	bool		covers;			/* children: sent behind a create, with
								 * the child watch covering our nodes */
	int			rc;				/* ZooKeeper's code */
	ZklStamp	sent;
	ZklWatchMark mark;			/* watch: counts when it was sent */
	char	   *path;			/* create: the new node; watch: the target */
	int64_t		czxid;			/* create, stat, get: the node's czxid */
	int64_t		ctime;			/* stat, get: its creation, ms since 1970 */
	int64_t		owner;			/* stat: ephemeralOwner */
	int			nchildren;		/* children: the list */
	char	  **children;
	char	   *data;			/* get: the node's data, NUL-terminated */
	char	   *acl_problem;	/* acl: who else may delete, or NULL */
	char	   *sweep_dir;		/* create: where to find a lost reply's node */
	char	   *sweep_prefix;
	int			nmulti;			/* claim: its multi's operations */
	zoo_op_t   *multi;
	zoo_op_result_t *multi_results;
	char	  **multi_paths;
	char	   *multi_created;
	bool		limbo;			/* refused with ZMARSHALLINGERROR, on the list */
	struct ZklOp *limbo_next;
};

/*
 * The primary message of a failed request, per kind, whole sentences so
 * that they can be translated (as aclchk.c's are): when it failed, and
 * when ZooKeeper denied it.
 */
static const struct
{
	const char *failed;
	const char *denied;
}			zkl_req_messages[] = {
	[ZKL_OP_CREATE_NODE] = {
		gettext_noop("could not create ZooKeeper node \"%s\""),
		gettext_noop("permission denied to create ZooKeeper node \"%s\"")
	},
	[ZKL_OP_CREATE_DIR] = {
		gettext_noop("could not create ZooKeeper node \"%s\""),
		gettext_noop("permission denied to create ZooKeeper node \"%s\"")
	},
	[ZKL_OP_CHILDREN] = {
		gettext_noop("could not list the children of ZooKeeper node \"%s\""),
		gettext_noop("permission denied to list the children of ZooKeeper node \"%s\"")
	},
	[ZKL_OP_WATCH] = {
		gettext_noop("could not watch ZooKeeper node \"%s\""),
		gettext_noop("permission denied to watch ZooKeeper node \"%s\"")
	},
	[ZKL_OP_WATCH_CHILDREN] = {
		gettext_noop("could not list the children of ZooKeeper node \"%s\""),
		gettext_noop("permission denied to list the children of ZooKeeper node \"%s\"")
	},
	[ZKL_OP_STAT] = {
		gettext_noop("could not read the status of ZooKeeper node \"%s\""),
		gettext_noop("permission denied to read the status of ZooKeeper node \"%s\"")
	},
	[ZKL_OP_GET] = {
		gettext_noop("could not read ZooKeeper node \"%s\""),
		gettext_noop("permission denied to read ZooKeeper node \"%s\"")
	},
	[ZKL_OP_ACL] = {
		gettext_noop("could not read the ACL of ZooKeeper node \"%s\""),
		gettext_noop("permission denied to read the ACL of ZooKeeper node \"%s\"")
	},
	[ZKL_OP_CLAIM] = {
		gettext_noop("could not create ZooKeeper node \"%s\""),
		gettext_noop("permission denied to create ZooKeeper node \"%s\"")
	},
};

/* Under mu. */
static uint64 zkl_req_watch_events = 0; /* data-watch notifications received */
static uint64 zkl_req_session_events = 0;
static char *zkl_req_deleted_path = NULL;	/* node of the last deletion notified */
static uint64 zkl_req_deleted_at = 0;	/* watch_events counted with it */
static ZklOp *zkl_req_limbo = NULL; /* refused ops the library may hold */

/* zklock.auth's id in ACLs; set at open, before any request. */
static char zkl_req_own_digest[160];

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
	for (int i = 0; op->multi_paths && i < op->nmulti; i++)
		free(op->multi_paths[i]);
	free(op->multi_paths);
	free(op->multi);
	free(op->multi_results);
	free(op->multi_created);
	free(op);
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
	if (op->kind == ZKL_OP_WATCH_CHILDREN && op->abandoned && op->rc == ZOK)
		zkl_sess_lease_uncover_dir_locked(op->path);	/* removed with it */
	if (op->kind == ZKL_OP_WATCH || op->kind == ZKL_OP_WATCH_CHILDREN)
		return op->abandoned && op->rc == ZOK &&
			zkl_sess_cleanup_queue_locked(op->kind == ZKL_OP_WATCH ?
								  ZKL_CLEAN_UNWATCH : ZKL_CLEAN_UNWATCH_CHILDREN,
								  op->path, NULL);
	if (op->kind != ZKL_OP_CREATE_NODE || op->claimed)
		return false;
	if (op->rc == ZOK)
	{
		zkl_sess_lease_forget_node_locked(op->path);
		return zkl_sess_cleanup_queue_locked(ZKL_CLEAN_DELETE, op->path, NULL);
	}
	if (zkl_sess_state_rc(op->rc) == ZKL_RC_CONNECTION_LOST)
		return zkl_sess_cleanup_queue_locked(ZKL_CLEAN_SWEEP, op->sweep_dir,
									 op->sweep_prefix);
	return false;
}

/*
 * Take an op out of limbo; false when it was not there (it was sent, and
 * counts as under way).  Caller holds mu.
 */
static bool
session_op_unlimbo(ZklOp *op)
{
	if (!op->limbo)
		return false;
	for (ZklOp **p = &zkl_req_limbo; *p; p = &(*p)->limbo_next)
	{
		if (*p == op)
		{
			*p = op->limbo_next;
			op->limbo = false;
			return true;
		}
	}
	return false;
}

/*
 * Finish an op on the IO thread, with mu held by the caller; an
 * abandoned one is freed here after its clean-up.  Returns whether clean-
 * ups were queued.
 */
static bool
session_finish_locked(ZklOp *op, int rc)
{
	bool		issue = false;

	if (!session_op_unlimbo(op))
		zkl_sess_state_answered_locked();
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

	pthread_mutex_lock(&zkl_sess_sync_mu);
	issue = session_finish_locked(op, rc);
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	if (issue)
		zkl_sess_cleanup_issue();
	zkl_sess_sync_kick();
}

/*
 * A create's answer.  A lock node is registered at once, so that the
 * lease covers it and an abandoned create still gets deleted; its answer
 * is a write the quorum committed, so it renews the lease.  The listing
 * sent behind it (zkl_session_list_own) says what tells us of its
 * deletion (see session_lease.c): no request of its own.  A node that
 * cannot be registered (no memory) is answered as failed and its delete
 * queued here: nobody will hold it, and it would block everyone behind
 * it.
 */
static void
session_created(int rc, const char *value, const struct Stat *stat,
				const void *data)
{
	ZklOp	   *op = (ZklOp *) data;
	bool		orphan = false;
	bool		issue;

	pthread_mutex_lock(&zkl_sess_sync_mu);
	if (rc == ZOK && op->kind == ZKL_OP_CREATE_NODE)
	{
		op->path = strdup(value);
		op->czxid = stat->czxid;
		if (op->path == NULL || !zkl_sess_lease_add_node_locked(op->path, true))
		{
			/* If even the delete cannot be queued, it goes with the session. */
			if (zkl_sess_cleanup_queue_locked(ZKL_CLEAN_DELETE, value, NULL))
				orphan = true;
			free(op->path);
			op->path = NULL;
			rc = ZSYSTEMERROR;
		}
		else
			zkl_sess_lease_renew_locked(&op->sent);
	}
	issue = session_finish_locked(op, rc) || orphan;
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	if (issue)
		zkl_sess_cleanup_issue();
	zkl_sess_sync_kick();
}

static void
session_listed(int rc, const struct String_vector *strings, const void *data)
{
	ZklOp	   *op = (ZklOp *) data;

	if (op->covers)
	{
		pthread_mutex_lock(&zkl_sess_sync_mu);
		zkl_sess_lease_listed_locked(op->path, rc == ZOK,
									 rc == ZOK ? strings->data : NULL,
									 rc == ZOK ? strings->count : 0);
		pthread_mutex_unlock(&zkl_sess_sync_mu);
	}

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
		op->ctime = stat->ctime;
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
		op->ctime = stat->ctime;
		op->owner = stat->ephemeralOwner;
	}
	session_finish(op, rc);
}

/*
 * A directory's ACL: note the first entry that lets an identity other than
 * this session's (zklock.auth's digest, its certificate's subject, its
 * SASL identity) delete children or change the ACL.
 */
static void
session_got_acl(int rc, struct ACL_vector *acl, struct Stat *stat,
				const void *data)
{
	ZklOp	   *op = (ZklOp *) data;
	const char *own = zkl_req_own_digest;

	(void) stat;
	for (int i = 0; rc == ZOK && op->acl_problem == NULL && i < acl->count; i++)
	{
		struct ACL *e = &acl->data[i];
		size_t		len;

		if (!(e->perms & (ZOO_PERM_DELETE | ZOO_PERM_ADMIN)) ||
			(strcmp(e->id.scheme, "digest") == 0 &&
			 strcmp(e->id.id, own) == 0) ||
			zkl_sess_tls_is_own_id(e->id.scheme, e->id.id) ||
			zkl_sess_sasl_is_own_id(e->id.scheme, e->id.id))
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
	pthread_mutex_lock(&zkl_sess_sync_mu);
	op->mark.watch_events = zkl_req_watch_events;
	op->mark.session_events = zkl_req_session_events;
	op->mark.node_losses = zkl_sess_lease_node_losses_locked();
	zkl_sess_state_sent_locked();
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	return op;
}

pg_noreturn static void session_raise_rc(ZklOpKind kind, int rc,
										 const char *path);

/*
 * Let go of an op: one still under way is freed by its completion, an
 * answered one now, with what it leaves in ZooKeeper cleaned up.  Caller
 * holds mu; returns whether clean-ups were queued.
 */
static bool
session_let_go_locked(ZklOp *op)
{
	bool		issue = false;

	if (!op->done)
		op->abandoned = true;
	else
	{
		issue = session_cleanup_unclaimed(op);
		session_free_op(op);
	}
	return issue;
}

/*
 * Account for the send of an op.  One the library refused because the
 * session is gone (an expired handle says ZINVALIDSTATE) is answered at
 * once with that code, so that callers treat it as they treat such an
 * answer; any other refusal is raised.  The op of a refusal is freed,
 * unless the library may hold it (ZMARSHALLINGERROR): then it is let go
 * as if under way, and waits in limbo for its completion or the close.
 */
static ZklOp *
session_sent(ZklOp *op, int rc, const char *path)
{
	ZklOpKind	kind = op->kind;
	bool		issue = false;

	if (rc == ZOK)
	{
		zkl_stats_session(ZKL_SS_REQUESTS, 1);
		return op;
	}
	pthread_mutex_lock(&zkl_sess_sync_mu);
	if (rc == ZMARSHALLINGERROR)
	{
		/* Its completion may have run already; if not, it will. */
		if (!op->done)
		{
			zkl_sess_state_answered_locked();
			op->limbo = true;
			op->limbo_next = zkl_req_limbo;
			zkl_req_limbo = op;
		}
		issue = session_let_go_locked(op);
		op = NULL;
	}
	else
	{
		zkl_sess_state_answered_locked();
		op->rc = rc;
		op->done = zkl_sess_state_rc(rc) == ZKL_RC_SESSION_LOST;
	}
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	if (issue)
		zkl_sess_cleanup_issue();
	if (op != NULL && op->done)
		return op;
	if (op != NULL)
		session_free_op(op);
	session_raise_rc(kind, rc, path);
}

static const struct ACL_vector *
session_acl(void)
{
	static struct ACL entries[2];
	static struct ACL_vector own = {2, entries};

	if (zkl_req_own_digest[0] == '\0' && !zkl_sess_tls_has_identity() &&
		!zkl_sess_sasl_has_identity())
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
		return session_sent(op, ZSYSTEMERROR, path);
	return session_sent(op,
						zoo_acreate2(zkl_sess_state_handle(), path, data, (int) strlen(data),
									 session_acl(), ZOO_EPHEMERAL_SEQUENTIAL,
									 session_created, op),
						path);
}

/* Send the create of a directory: a container, or a persistent parent. */
ZklOp *
zkl_session_create_dir(const char *path, bool container)
{
	ZklOp	   *op = session_new_op(ZKL_OP_CREATE_DIR);

	return session_sent(op,
						zoo_acreate2(zkl_sess_state_handle(), path, NULL, -1, session_acl(),
									 container ? ZOO_CONTAINER : ZOO_PERSISTENT,
									 session_created, op),
						path);
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
						zoo_acreate2(zkl_sess_state_handle(), path, data, (int) strlen(data),
									 session_acl(), ZOO_EPHEMERAL,
									 session_created, op),
						path);
}

static void
session_claimed(int rc, const void *data)
{
	session_finish((ZklOp *) data, rc);
}

/*
 * Create the plain ephemeral node path (no lock node: not in the lease,
 * not swept, gone with the session) only if every node of checks[0..n)
 * exists, in one transaction: the deadlock victim's claim, made only
 * while every member of the cycle still waits.  The answer is
 * ZKL_RC_EXISTS when path exists, ZKL_RC_NO_NODE when a checked node is
 * gone.
 */
ZklOp *
zkl_session_claim(const char *path, const char *const *checks, int n)
{
	ZklOp	   *op = session_new_op(ZKL_OP_CLAIM);
	size_t		created_len = strlen(path) + 1;

	op->nmulti = n + 1;
	op->multi = calloc(op->nmulti, sizeof(zoo_op_t));
	op->multi_results = calloc(op->nmulti, sizeof(zoo_op_result_t));
	op->multi_paths = calloc(op->nmulti, sizeof(char *));
	op->multi_created = malloc(created_len);
	if (op->multi == NULL || op->multi_results == NULL ||
		op->multi_paths == NULL || op->multi_created == NULL ||
		(op->multi_paths[0] = strdup(path)) == NULL)
		return session_sent(op, ZSYSTEMERROR, path);
	zoo_create_op_init(&op->multi[0], op->multi_paths[0], "", 0,
					   session_acl(), ZOO_EPHEMERAL, op->multi_created,
					   (int) created_len);
	for (int i = 0; i < n; i++)
	{
		if ((op->multi_paths[i + 1] = strdup(checks[i])) == NULL)
			return session_sent(op, ZSYSTEMERROR, path);
		zoo_check_op_init(&op->multi[i + 1], op->multi_paths[i + 1], -1);
	}
	return session_sent(op,
						zoo_amulti(zkl_sess_state_handle(), op->nmulti,
								   op->multi, op->multi_results,
								   session_claimed, op),
						path);
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
	pthread_mutex_lock(&zkl_sess_sync_mu);
	if (type == ZOO_SESSION_EVENT)
		zkl_req_session_events++;
	else
	{
		zkl_req_watch_events++;
		zkl_stats_session(ZKL_SS_NOTIFICATIONS, 1);
	}
	if (copy != NULL)
	{
		free(zkl_req_deleted_path);
		zkl_req_deleted_path = copy;
		zkl_req_deleted_at = zkl_req_watch_events;
	}
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	zkl_sess_sync_kick();
}

/*
 * Read path's data, with a data watch when watch says so; the watch's op
 * keeps the target, so that one answered after its waiter gave up is
 * removed again.
 */
static ZklOp *
session_read(const char *path, bool watch)
{
	ZklOp	   *op = session_new_op(watch ? ZKL_OP_WATCH : ZKL_OP_GET);

	if (watch && (op->path = strdup(path)) == NULL)
		return session_sent(op, ZSYSTEMERROR, path);
	return session_sent(op,
						zoo_awget(zkl_sess_state_handle(), path,
								  watch ? session_data_watcher : NULL, NULL,
								  session_got_data, op),
						path);
}

/* List path's children, with a child watch when watch says so; likewise. */
static ZklOp *
session_list(const char *path, bool watch)
{
	ZklOp	   *op = session_new_op(watch ? ZKL_OP_WATCH_CHILDREN :
									ZKL_OP_CHILDREN);

	if (watch && (op->path = strdup(path)) == NULL)
		return session_sent(op, ZSYSTEMERROR, path);
	return session_sent(op,
						zoo_awget_children(zkl_sess_state_handle(), path,
										   watch ? session_data_watcher : NULL,
										   NULL, session_listed, op),
						path);
}

ZklOp *
zkl_session_children(const char *path)
{
	return session_list(path, false);
}

/*
 * List a lock directory right behind the create of a node of ours in it,
 * with the child watch that covers that node from then on (see
 * session_lease.c): its deletion is heard of at no request of its own.
 * A listing not sent covers nothing: the node gets a data watch.
 */
ZklOp *
zkl_session_list_own(const char *path)
{
	ZklOp	   *op = session_new_op(ZKL_OP_CHILDREN);
	int			rc;

	op->covers = true;
	if ((op->path = strdup(path)) == NULL)
		rc = ZSYSTEMERROR;
	else
		rc = zoo_awget_children(zkl_sess_state_handle(), path,
								zkl_sess_lease_dir_watcher, NULL,
								session_listed, op);
	if (rc != ZOK)
	{
		pthread_mutex_lock(&zkl_sess_sync_mu);
		zkl_sess_lease_listed_locked(path, false, NULL, 0);
		pthread_mutex_unlock(&zkl_sess_sync_mu);
	}
	return session_sent(op, rc, path);
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
	return session_read(path, true);
}

/*
 * List path and set a child watch on it (the semaphore's waiter, which
 * must hear of a lease going).
 */
ZklOp *
zkl_session_watch_children(const char *path)
{
	return session_list(path, true);
}

/* Ask for a node's data (and czxid), without a watch. */
ZklOp *
zkl_session_get(const char *path)
{
	return session_read(path, false);
}

/* Ask for a node's Stat (czxid, ephemeral owner). */
ZklOp *
zkl_session_stat(const char *path)
{
	ZklOp	   *op = session_new_op(ZKL_OP_STAT);

	return session_sent(op,
						zoo_aexists(zkl_sess_state_handle(), path, 0, session_got_stat, op),
						path);
}

/*
 * Ask whether a directory's ACL lets another identity delete in it; NULL
 * when the session has no credentials, so that nothing is protected.
 */
ZklOp *
zkl_session_get_acl(const char *path)
{
	ZklOp	   *op;

	if (zkl_req_own_digest[0] == '\0' && !zkl_sess_tls_has_identity() &&
		!zkl_sess_sasl_has_identity())
		return NULL;
	op = session_new_op(ZKL_OP_ACL);
	return session_sent(op,
						zoo_aget_acl(zkl_sess_state_handle(), path, session_got_acl, op),
						path);
}

/*
 * The identity that zklock's ACLs give its nodes and directories, for
 * messages: a name (the certificate's subject when there is one, else the
 * SASL identity, else zklock.auth's digest, as the hint of a refusal
 * checks them) and the setting that makes it.
 */
const char *
zkl_session_identity_name(void)
{
	return zkl_sess_tls_has_identity() ? "the client certificate" :
		zkl_sess_sasl_has_identity() ? "the SASL identity" : "zklock.auth";
}

const char *
zkl_session_identity_setting(void)
{
	return zkl_sess_tls_has_identity() ? "the certificate in zklock.ssl_cert_file" :
		zkl_sess_sasl_has_identity() ? "zklock.sasl_user (or zklock.sasl_principal)" :
		"zklock.auth";
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
	return zkl_sess_wait_for(session_op_done, op, deadline);
}

/* Wait for an op's answer, which the session bounds; its code. */
ZklRc
zkl_session_answer(ZklOp *op)
{
	zkl_session_await(op, 0);
	return zkl_sess_state_rc(op->rc);
}

static bool
session_watch_fired(void *arg)
{
	const ZklWatchMark *m = (const ZklWatchMark *) arg;

	return zkl_req_watch_events != m->watch_events ||
		zkl_req_session_events != m->session_events ||
		zkl_sess_lease_node_losses_locked() != m->node_losses ||
		zkl_sess_lease_lost_locked();
}

/*
 * Wait until a data watch fired, the session's state changed, a node of
 * ours was deleted by someone else or the session's locks were lost since
 * the mark; false when the deadline came first.
 */
bool
zkl_session_await_watch(const ZklWatchMark *mark, TimestampTz deadline)
{
	return zkl_sess_wait_for(session_watch_fired, (void *) mark, deadline);
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

	pthread_mutex_lock(&zkl_sess_sync_mu);
	gone = zkl_req_deleted_path != NULL &&
		zkl_req_deleted_at > mark->watch_events &&
		strcmp(zkl_req_deleted_path, path) == 0;
	pthread_mutex_unlock(&zkl_sess_sync_mu);
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

/* A stat or get answer: when the node was created, ms since 1970. */
int64
zkl_session_op_ctime(ZklOp *op)
{
	return op->ctime;
}

/*
 * A stat answer: the node's czxid and whether this session owns it.  The
 * answer says so whatever the connection did since: a drop after it must
 * not make our node someone else's (a second create, a claim forgotten).
 */
bool
zkl_session_op_owned(ZklOp *op, int64 *czxid)
{
	bool		mine;

	pthread_mutex_lock(&zkl_sess_sync_mu);
	mine = op->owner != 0 && op->owner == zkl_sess_state_session_id_locked();
	pthread_mutex_unlock(&zkl_sess_sync_mu);
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
	bool		issue;

	if (op == NULL)
		return;
	pthread_mutex_lock(&zkl_sess_sync_mu);
	issue = session_let_go_locked(op);
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	if (issue)
		zkl_sess_cleanup_issue();
}

/*
 * Raise the error for a failed request of the given kind on path: the
 * primary message says what the request was for, the detail why it
 * failed.
 */
pg_noreturn static void
session_raise_rc(ZklOpKind kind, int rc, const char *path)
{
	const char *failed = zkl_req_messages[kind].failed;
	int			code;

	if (rc == ZSESSIONCLOSEDREQUIRESASLAUTH)
		zkl_sess_sasl_raise_required(failed, path);

	switch (zkl_sess_state_rc(rc))
	{
		case ZKL_RC_CONNECTION_LOST:
			code = ERRCODE_CONNECTION_FAILURE;
			break;
		case ZKL_RC_SESSION_LOST:
			ereport(ERROR,
					(errcode(ERRCODE_CONNECTION_EXCEPTION),
					 errmsg(failed, path),
					 errdetail("The ensemble expired, closed or moved this backend's session before it answered (%s).",
							   zerror(rc)),
					 rc != ZSESSIONMOVED ?
					 errhint("The next zklock call opens a new session.") : 0));
			break;
		case ZKL_RC_DENIED:
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg(zkl_req_messages[kind].denied, path),
					 errdetail_internal("%s", zerror(rc)),
					 errhint("The node belongs to another ZooKeeper identity: check %s and zklock.root.",
							 zkl_session_identity_setting())));
			break;
		default:
			code = ERRCODE_EXTERNAL_ROUTINE_EXCEPTION;
			break;
	}
	ereport(ERROR,
			(errcode(code),
			 errmsg(failed, path),
			 errdetail_internal("%s", zerror(rc))));
}

/* Raise the error for a failed request; the op's kind says what it was for. */
void
zkl_session_raise(ZklOp *op, const char *path)
{
	session_raise_rc(op->kind, op->rc, path);
}

/*
 * The digest id of zklock.auth as ACLs carry it, user:base64(sha1(auth));
 * empty without credentials.  Main thread, when a session opens.
 */
void
zkl_sess_request_set_identity(void)
{
	uint8		hash[SHA1_DIGEST_LENGTH];
	char		b64[64];
	const char *colon;
	pg_cryptohash_ctx *ctx;
	int			len;

	zkl_req_own_digest[0] = '\0';
	if (!zkl_guc_use_auth())
		return;
	colon = strchr(zkl_auth, ':');
	ctx = pg_cryptohash_create(PG_SHA1);
	if (pg_cryptohash_init(ctx) < 0 ||
		pg_cryptohash_update(ctx, (const uint8 *) zkl_auth, strlen(zkl_auth)) < 0 ||
		pg_cryptohash_final(ctx, hash, sizeof(hash)) < 0)
		elog(ERROR, "could not compute SHA-1 digest");
	pg_cryptohash_free(ctx);
	len = zkl_compat_b64_encode(hash, sizeof(hash), b64, sizeof(b64) - 1);
	if (len < 0)
		elog(ERROR, "could not encode SHA-1 digest");
	snprintf(zkl_req_own_digest, sizeof(zkl_req_own_digest),
			 "%.*s:%.*s", (int) (colon - zkl_auth), zkl_auth, len, b64);
}

/*
 * The handle is closed and the library's threads are gone: no completion
 * will come for the ops in limbo any more.  Caller holds mu.
 */
void
zkl_sess_request_free_limbo_locked(void)
{
	while (zkl_req_limbo != NULL)
	{
		ZklOp	   *op = zkl_req_limbo;

		zkl_req_limbo = op->limbo_next;
		session_free_op(op);
	}
}

/* The session watcher heard of a state change.  Caller holds mu. */
void
zkl_sess_request_session_event_locked(void)
{
	zkl_req_session_events++;
}

/* How many data-watch notifications came, for zk_session().  Under mu. */
uint64
zkl_sess_request_watch_events_locked(void)
{
	return zkl_req_watch_events;
}
