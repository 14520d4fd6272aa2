/*-------------------------------------------------------------------------
 *
 * session.c
 *	  The one ZooKeeper session of this backend: lazy connect, session
 *	  states, asynchronous requests, the wait loop, node clean-up and close
 *	  at exit.  The only file that calls zoo_*.
 *
 * Thread rules.  The multithreaded client runs an IO thread and a
 * completion thread.  Code that runs on them (session_watcher,
 * session_data_watcher, the *_done completions, session_log) is plain C:
 * it takes zkl_shared.mu, copies results into malloc'd memory, may issue
 * further asynchronous zoo_a* calls for clean-up, and writes the eventfd.
 * It never calls palloc, elog, CHECK_FOR_INTERRUPTS or anything else of
 * PostgreSQL.  The main thread waits on one WaitEventSet (latch,
 * postmaster death, eventfd) and issues only asynchronous zoo_a* calls,
 * so cancels, statement_timeout and pg_terminate_backend work while it
 * waits.  No zoo_* call is made while holding zkl_shared.mu.
 *
 * Every signal is blocked around zookeeper_init2 so that both library
 * threads start with a full mask: PostgreSQL's signals (SIGALRM for
 * timeouts, SIGINT for cancel, SIGURG for latches) must reach the main
 * thread only.
 *
 * Clean-up.  Nodes to delete (released locks, given-up waiters), watches
 * to remove, and lock directories to search for a node whose create reply
 * was lost go onto a queue.  Requests for it are sent at once and again after each
 * reconnect, from whichever thread notices, until the server answers;
 * zkl_session_delete therefore never blocks and never raises, which the
 * transaction callbacks need.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>
#include <zookeeper/zookeeper.h>

#include "miscadmin.h"
#include "pgstat.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "zklock.h"

/* Messages of the client library kept between two flushes, and the rate. */
#define ZKL_LOG_SLOTS 16
#define ZKL_LOG_MSG_LEN 512
#define ZKL_LOG_PER_MINUTE 30

/* File descriptors the client library opens (socket, wake-up pipe). */
#define ZKL_LIBRARY_FDS 3

typedef enum ZklOpKind
{
	ZKL_OP_CREATE,
	ZKL_OP_CHILDREN,
	ZKL_OP_WATCH,
	ZKL_OP_STAT,
	ZKL_OP_GET
} ZklOpKind;

struct ZklOp
{
	ZklOpKind	kind;
	bool		done;			/* completion has run */
	bool		abandoned;		/* main thread let go; completion frees */
	bool		claimed;		/* create: the caller owns the new node */
	int			rc;
	char	   *path;			/* create: path of the new node */
	int64_t		czxid;			/* create, stat: the node's czxid */
	int64_t		owner;			/* stat: ephemeralOwner */
	int			nchildren;		/* children: the list */
	char	  **children;
	char	   *data;			/* get: the node's data, NUL-terminated */
	char	   *sweep_dir;		/* create: where to find a lost reply's node */
	char	   *sweep_prefix;
};

/* A node of a held lock: deleted by the library's threads if the lock is
 * declared lost but the session comes back (lost means lost for everyone). */
typedef struct ZklHeld
{
	struct ZklHeld *next;
	char	   *path;
} ZklHeld;

typedef enum ZklCleanupKind
{
	ZKL_CLEAN_DELETE,			/* delete path */
	ZKL_CLEAN_SWEEP,			/* list path, delete children with prefix */
	ZKL_CLEAN_UNWATCH			/* remove our data watch on path */
} ZklCleanupKind;

typedef struct ZklCleanup
{
	struct ZklCleanup *next;
	bool		in_flight;
	ZklCleanupKind kind;
	char	   *path;
	char	   *prefix;
} ZklCleanup;

/* State shared with the library's threads; guarded by mu. */
static struct
{
	pthread_mutex_t mu;
	zhandle_t  *zh;
	int			efd;
	int			state;			/* last session state from the watcher */
	bool		ever_connected;
	bool		lost;			/* this session's locks are lost, for good */
	int64_t		disconnected_ms;	/* monotonic time of the last drop */
	int			timeout_ms;		/* negotiated session timeout */
	int64_t		session_id;		/* of the connected session */
	ZklHeld    *held;			/* nodes of the locks this backend holds */
	uint64		watch_events;	/* data-watch notifications received */
	uint64		session_events;
	ZklCleanup *cleanups;
	int			nlog;
	char		log[ZKL_LOG_SLOTS][ZKL_LOG_MSG_LEN];
	int64_t		log_window_ms;
	int			log_in_window;
	int			log_dropped;
}			zkl_shared = {.mu = PTHREAD_MUTEX_INITIALIZER, .efd = -1};

/* Main-thread state. */
static WaitEventSet *zkl_wait_set = NULL;
static bool zkl_use_auth = false;	/* this session authenticated */
static struct ACL zkl_acl_entries[2];
static struct ACL_vector zkl_auth_acl = {2, zkl_acl_entries};
static uint64 zkl_epoch = 0;	/* bumped for every new session */
static unsigned char zkl_uuid_bytes[10];
static uint32 zkl_uuid_counter = 0;
static char zkl_own_prefix[sizeof(ZKL_PROTECT_PREFIX) + ZKL_UUID_SESSION_LEN];
static bool zkl_exit_registered = false;

static void session_issue_cleanups(void);
static bool session_queue_cleanup(ZklCleanupKind kind, const char *path,
								  const char *prefix);

static int64_t
session_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wake the main thread; any thread. */
static void
session_kick(void)
{
	uint64_t	one = 1;

	if (zkl_shared.efd >= 0 &&
		write(zkl_shared.efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		return;					/* nothing better to do on a ZooKeeper thread */
}

/*
 * The client library's log callback, called on any thread: keep the line
 * for the main thread, at most ZKL_LOG_PER_MINUTE a minute.
 */
static void
session_log(const char *message)
{
	int64_t		now = session_now_ms();
	size_t		len;

	pthread_mutex_lock(&zkl_shared.mu);
	if (now - zkl_shared.log_window_ms > 60000)
	{
		zkl_shared.log_window_ms = now;
		zkl_shared.log_in_window = 0;
	}
	if (zkl_shared.nlog >= ZKL_LOG_SLOTS ||
		zkl_shared.log_in_window >= ZKL_LOG_PER_MINUTE)
		zkl_shared.log_dropped++;
	else
	{
		char	   *slot = zkl_shared.log[zkl_shared.nlog++];

		snprintf(slot, ZKL_LOG_MSG_LEN, "%s", message);
		len = strlen(slot);
		while (len > 0 && (slot[len - 1] == '\n' || slot[len - 1] == '\r'))
			slot[--len] = '\0';
		zkl_shared.log_in_window++;
	}
	pthread_mutex_unlock(&zkl_shared.mu);
}

/* Emit the kept library log lines to the server log; main thread only. */
static void
session_flush_log(void)
{
	char		lines[ZKL_LOG_SLOTS][ZKL_LOG_MSG_LEN];
	int			n;
	int			dropped;

	pthread_mutex_lock(&zkl_shared.mu);
	n = zkl_shared.nlog;
	memcpy(lines, zkl_shared.log, sizeof(lines[0]) * n);
	dropped = zkl_shared.log_dropped;
	zkl_shared.nlog = 0;
	zkl_shared.log_dropped = 0;
	pthread_mutex_unlock(&zkl_shared.mu);

	/*
	 * The library's errors and warnings concern the connection, not the
	 * query at hand: server log only.  Informational lines are debug output.
	 */
	for (int i = 0; i < n; i++)
		ereport(strstr(lines[i], "ZOO_INFO@") ? DEBUG1 :
				strstr(lines[i], "ZOO_DEBUG@") ? DEBUG2 : LOG,
				(errmsg_internal("zookeeper client: %s", lines[i]),
				 errhidestmt(true)));
	if (dropped > 0)
		ereport(LOG,
				(errmsg_internal("zookeeper client: %d further messages not logged",
								 dropped)));
}

/*
 * The session watcher, on the completion thread: record the state, send
 * queued clean-ups after a reconnect, wake the main thread.
 */
static void
session_watcher(zhandle_t *zh, int type, int state, const char *path,
				void *ctx)
{
	bool		reconnected = false;
	const clientid_t *id = NULL;
	int			timeout = 0;

	(void) path;
	(void) ctx;
	if (type != ZOO_SESSION_EVENT)
		return;
	if (state == ZOO_CONNECTED_STATE)
	{
		id = zoo_client_id(zh);
		timeout = zoo_recv_timeout(zh);
	}
	pthread_mutex_lock(&zkl_shared.mu);
	if (zkl_shared.zh == zh)
	{
		if (state == ZOO_CONNECTED_STATE)
		{
			/*
			 * Back after the locks were declared lost (or could have been):
			 * the ensemble revived the session, but another contender may
			 * have been told it expired.  Delete the nodes now.
			 */
			if (zkl_shared.ever_connected &&
				zkl_shared.state != ZOO_CONNECTED_STATE &&
				session_now_ms() - zkl_shared.disconnected_ms > zkl_shared.timeout_ms)
				zkl_shared.lost = true;
			if (zkl_shared.lost)
				for (ZklHeld *h = zkl_shared.held; h; h = h->next)
					session_queue_cleanup(ZKL_CLEAN_DELETE, h->path, NULL);
			zkl_shared.ever_connected = true;
			zkl_shared.timeout_ms = timeout;
			zkl_shared.session_id = id ? id->client_id : 0;
			reconnected = true;
		}
		else if (state == ZOO_EXPIRED_SESSION_STATE ||
				 state == ZOO_AUTH_FAILED_STATE)
			zkl_shared.lost = true;
		else if (zkl_shared.state == ZOO_CONNECTED_STATE)
			zkl_shared.disconnected_ms = session_now_ms();
		zkl_shared.state = state;
		zkl_shared.session_events++;
	}
	pthread_mutex_unlock(&zkl_shared.mu);
	if (reconnected)
		session_issue_cleanups();
	session_kick();
}

/* Data watches only count: the recipe lists the directory again on wake. */
static void
session_data_watcher(zhandle_t *zh, int type, int state, const char *path,
					 void *ctx)
{
	(void) zh;
	(void) state;
	(void) path;
	(void) ctx;
	pthread_mutex_lock(&zkl_shared.mu);
	if (type == ZOO_SESSION_EVENT)
		zkl_shared.session_events++;
	else
		zkl_shared.watch_events++;
	pthread_mutex_unlock(&zkl_shared.mu);
	session_kick();
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
	free(op->sweep_dir);
	free(op->sweep_prefix);
	free(op);
}

/*
 * Queue a clean-up.  Caller holds mu.  Returns false only when out of
 * memory; the node then goes with the session.
 */
static bool
session_queue_cleanup(ZklCleanupKind kind, const char *path, const char *prefix)
{
	ZklCleanup *c = calloc(1, sizeof(ZklCleanup));

	if (c == NULL)
		return false;
	c->kind = kind;
	c->path = strdup(path);
	c->prefix = prefix ? strdup(prefix) : NULL;
	if (c->path == NULL || (prefix && c->prefix == NULL))
	{
		free(c->path);
		free(c->prefix);
		free(c);
		return false;
	}
	c->next = zkl_shared.cleanups;
	zkl_shared.cleanups = c;
	return true;
}

/* Unlink and free a clean-up entry.  Caller holds mu. */
static void
session_drop_cleanup(ZklCleanup *c)
{
	ZklCleanup **p = &zkl_shared.cleanups;

	while (*p && *p != c)
		p = &(*p)->next;
	if (*p)
		*p = c->next;
	free(c->path);
	free(c->prefix);
	free(c);
}

/*
 * A clean-up request's answer: done unless the connection was lost, in
 * which case it goes again after the reconnect.  Expiry and close remove
 * the session's nodes and watches anyway; ZNOWATCHER means the watch fired
 * or was never set.
 */
static bool
session_cleanup_finished(int rc)
{
	return rc != ZCONNECTIONLOSS && rc != ZOPERATIONTIMEOUT;
}

static void
session_cleanup_deleted(int rc, const void *data)
{
	ZklCleanup *c = (ZklCleanup *) data;

	pthread_mutex_lock(&zkl_shared.mu);
	if (session_cleanup_finished(rc))
		session_drop_cleanup(c);
	else
		c->in_flight = false;
	pthread_mutex_unlock(&zkl_shared.mu);
}

/* A swept directory's children: queue a delete for each of ours. */
static void
session_cleanup_listed(int rc, const struct String_vector *strings,
					   const void *data)
{
	ZklCleanup *c = (ZklCleanup *) data;

	pthread_mutex_lock(&zkl_shared.mu);
	if (rc == ZOK)
	{
		size_t		plen = strlen(c->prefix);

		for (int i = 0; i < strings->count; i++)
		{
			size_t		len;
			char	   *path;

			if (strncmp(strings->data[i], c->prefix, plen) != 0)
				continue;
			len = strlen(c->path) + strlen(strings->data[i]) + 2;
			if ((path = malloc(len)) == NULL)
				continue;		/* the node goes with the session */
			snprintf(path, len, "%s/%s", c->path, strings->data[i]);
			session_queue_cleanup(ZKL_CLEAN_DELETE, path, NULL);
			free(path);
		}
	}
	if (session_cleanup_finished(rc))
		session_drop_cleanup(c);
	else
		c->in_flight = false;
	pthread_mutex_unlock(&zkl_shared.mu);
	if (rc == ZOK)
		session_issue_cleanups();
}

/*
 * Send every queued clean-up that is not under way; any thread.  Entries
 * are marked in flight under mu and sent without it.
 */
static void
session_issue_cleanups(void)
{
	for (;;)
	{
		ZklCleanup *c;
		zhandle_t  *zh;
		int			rc;

		pthread_mutex_lock(&zkl_shared.mu);
		zh = zkl_shared.zh;
		for (c = zkl_shared.cleanups; c; c = c->next)
			if (!c->in_flight)
				break;
		if (c == NULL || zh == NULL || zkl_shared.state != ZOO_CONNECTED_STATE)
		{
			pthread_mutex_unlock(&zkl_shared.mu);
			return;
		}
		c->in_flight = true;
		pthread_mutex_unlock(&zkl_shared.mu);

		if (c->kind == ZKL_CLEAN_SWEEP)
			rc = zoo_aget_children(zh, c->path, 0, session_cleanup_listed, c);
		else if (c->kind == ZKL_CLEAN_UNWATCH)
			rc = zoo_aremove_all_watches(zh, c->path, ZWATCHTYPE_DATA, 0,
										 (void_completion_t *) session_cleanup_deleted, c);
		else
			rc = zoo_adelete(zh, c->path, -1, session_cleanup_deleted, c);
		if (rc == ZNOWATCHER || rc == ZBADARGUMENTS || rc == ZINVALIDSTATE)
		{
			/* Nothing to do: the watch fired, or the session is gone. */
			pthread_mutex_lock(&zkl_shared.mu);
			session_drop_cleanup(c);
			pthread_mutex_unlock(&zkl_shared.mu);
		}
		else if (rc != ZOK)
		{
			/* Not sent: leave it for the next reconnect. */
			pthread_mutex_lock(&zkl_shared.mu);
			c->in_flight = false;
			pthread_mutex_unlock(&zkl_shared.mu);
			return;
		}
	}
}

/*
 * Queue the clean-up of a finished lock-node create nobody claimed: delete
 * the node when its path is known, search for it by its uuid when the reply
 * was lost.  Caller holds mu; returns whether anything was queued.
 */
static bool
session_cleanup_unclaimed(ZklOp *op)
{
	if (op->kind != ZKL_OP_CREATE || op->claimed || op->sweep_dir == NULL)
		return false;
	if (op->rc == ZOK)
		return session_queue_cleanup(ZKL_CLEAN_DELETE, op->path, NULL);
	if (!session_cleanup_finished(op->rc))
		return session_queue_cleanup(ZKL_CLEAN_SWEEP, op->sweep_dir, op->sweep_prefix);
	return false;
}

/*
 * Finish an operation on the completion thread; an abandoned one is freed
 * here, and its node cleaned up if it was an unclaimed create.
 */
static void
session_finish(ZklOp *op, int rc)
{
	bool		issue = false;

	pthread_mutex_lock(&zkl_shared.mu);
	op->rc = rc;
	op->done = true;
	if (op->abandoned)
	{
		issue = session_cleanup_unclaimed(op);
		session_free_op(op);
	}
	pthread_mutex_unlock(&zkl_shared.mu);
	if (issue)
		session_issue_cleanups();
	session_kick();
}

static void
session_created(int rc, const char *value, const struct Stat *stat,
				const void *data)
{
	ZklOp	   *op = (ZklOp *) data;

	if (rc == ZOK)
	{
		op->path = strdup(value);
		op->czxid = stat->czxid;
		if (op->path == NULL)
			rc = ZSYSTEMERROR;
	}
	session_finish(op, rc);
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

/* Completion for requests whose answer nobody needs. */
static void
session_ignore(int rc, const void *data)
{
	(void) rc;
	(void) data;
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
	return op;
}

/* A request the library refused to send: free it and raise. */
static void
session_not_sent(ZklOp *op, int rc, const char *what, const char *path)
{
	session_free_op(op);
	zkl_session_raise(rc, what, path);
}

/* Close the handle; main thread, never while holding mu. */
static void
session_close(void)
{
	zhandle_t  *zh;
	ZklCleanup *c;

	pthread_mutex_lock(&zkl_shared.mu);
	zh = zkl_shared.zh;
	pthread_mutex_unlock(&zkl_shared.mu);
	if (zh == NULL)
		return;

	/* Completions run (with ZCLOSING) during close: mu must be free. */
	zookeeper_close(zh);

	pthread_mutex_lock(&zkl_shared.mu);
	zkl_shared.zh = NULL;
	zkl_shared.state = 0;
	zkl_shared.ever_connected = false;
	zkl_shared.lost = false;
	/* The library's threads are gone; the session's nodes went with it. */
	while ((c = zkl_shared.cleanups) != NULL)
		session_drop_cleanup(c);
	while (zkl_shared.held != NULL)
	{
		ZklHeld    *h = zkl_shared.held;

		zkl_shared.held = h->next;
		free(h->path);
		free(h);
	}
	pthread_mutex_unlock(&zkl_shared.mu);
	for (int i = 0; i < ZKL_LIBRARY_FDS; i++)
		ReleaseExternalFD();
}

/* on_proc_exit: the open transaction is aborted by now; free our nodes. */
static void
session_at_exit(int code, Datum arg)
{
	(void) code;
	(void) arg;
	session_close();
}

/* The wait set and eventfd live as long as the backend. */
static void
session_init_waiting(void)
{
	if (zkl_wait_set != NULL)
		return;
	if (!AcquireExternalFD())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("could not open ZooKeeper session"),
				 errdetail("There are too many open files in this backend.")));
	zkl_shared.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (zkl_shared.efd < 0)
	{
		ReleaseExternalFD();
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create eventfd: %m")));
	}
	zkl_wait_set = CreateWaitEventSet(TopMemoryContext, 3);
	AddWaitEventToSet(zkl_wait_set, WL_LATCH_SET, PGINVALID_SOCKET,
					  MyLatch, NULL);
	AddWaitEventToSet(zkl_wait_set, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET,
					  NULL, NULL);
	AddWaitEventToSet(zkl_wait_set, WL_SOCKET_READABLE, zkl_shared.efd,
					  NULL, NULL);
}

/*
 * Wait until ready(arg) holds (checked under mu) or the deadline passes
 * (0: no deadline).  Interrupts are served on every wake, so a cancel or
 * timeout raises out of here.
 */
static bool
session_wait(bool (*ready) (void *), void *arg, TimestampTz deadline)
{
	for (;;)
	{
		bool		ok;
		long		timeout = -1;
		WaitEvent	ev;
		uint64_t	junk;

		pthread_mutex_lock(&zkl_shared.mu);
		ok = ready(arg);
		pthread_mutex_unlock(&zkl_shared.mu);
		if (ok)
			return true;
		if (deadline != 0)
		{
			TimestampTz now = GetCurrentTimestamp();

			if (now >= deadline)
				return false;
			timeout = (long) ((deadline - now + 999) / 1000);
		}

		if (WaitEventSetWait(zkl_wait_set, timeout, &ev, 1,
							 PG_WAIT_EXTENSION) > 0 &&
			(ev.events & WL_SOCKET_READABLE))
		{
			while (read(zkl_shared.efd, &junk, sizeof(junk)) > 0)
				;
		}
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		session_flush_log();
	}
}

static bool
session_is_connected(void *arg)
{
	(void) arg;
	return zkl_shared.state == ZOO_CONNECTED_STATE || zkl_shared.lost ||
		zkl_shared.state == ZOO_EXPIRED_SESSION_STATE ||
		zkl_shared.state == ZOO_AUTH_FAILED_STATE;
}

/* Open a new session and wait for it to connect, within connect_timeout. */
static void
session_open(void)
{
	sigset_t	all;
	sigset_t	saved;
	zhandle_t  *zh;
	int			state;
	int			init_errno;
	TimestampTz deadline;

	if (zkl_hosts == NULL || zkl_hosts[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("zklock.hosts is not set"),
				 errhint("Set zklock.hosts to the ZooKeeper connect string, for example ALTER SYSTEM SET zklock.hosts = 'zk1:2181,zk2:2181,zk3:2181'.")));

	if (zkl_auth != NULL && zkl_auth[0] != '\0' && strchr(zkl_auth, ':') == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("zklock.auth must have the form user:password")));

	/*
	 * In a backend that has not loaded zklock, zklock.auth from the
	 * configuration file is a placeholder any role can SHOW.  Only
	 * preloading hides it everywhere, so credentials demand it.
	 */
	if (zkl_auth != NULL && zkl_auth[0] != '\0' && !zkl_preloaded)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("zklock.auth requires zklock in shared_preload_libraries"),
				 errdetail("Without it, other roles can read the credentials in backends that have not loaded zklock."),
				 errhint("Add zklock to shared_preload_libraries and restart the server.")));
	session_init_waiting();
	if (!zkl_exit_registered)
	{
		on_proc_exit(session_at_exit, (Datum) 0);
		zkl_exit_registered = true;
	}
	if (!pg_strong_random(zkl_uuid_bytes, sizeof(zkl_uuid_bytes)))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not generate random lock node id")));
	for (int i = 0; i < ZKL_LIBRARY_FDS; i++)
		ReserveExternalFD();

	zoo_set_debug_level(ZOO_LOG_LEVEL_WARN);
	pthread_mutex_lock(&zkl_shared.mu);
	zkl_shared.state = 0;
	zkl_shared.ever_connected = false;
	pthread_mutex_unlock(&zkl_shared.mu);

	/* Both library threads inherit the full mask; restore ours after. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &saved);
	errno = 0;
	zh = zookeeper_init2(zkl_hosts, session_watcher, zkl_session_timeout,
						 NULL, NULL, 0, session_log);
	init_errno = errno;
	pthread_sigmask(SIG_SETMASK, &saved, NULL);
	if (zh == NULL)
	{
		for (int i = 0; i < ZKL_LIBRARY_FDS; i++)
			ReleaseExternalFD();
		session_flush_log();
		ereport(ERROR,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("could not open ZooKeeper session to \"%s\"",
						zkl_hosts),
				 init_errno != 0 ?
				 errdetail_internal("%s", strerror(init_errno)) : 0,
				 errhint("Check the connect string in zklock.hosts.")));
	}
	pthread_mutex_lock(&zkl_shared.mu);
	zkl_shared.zh = zh;
	pthread_mutex_unlock(&zkl_shared.mu);

	/*
	 * Digest credentials go first, ahead of every request; the library
	 * sends them again after each reconnect.  Nodes then get an ACL that
	 * lets only this identity change or delete them, and everyone read.
	 */
	zkl_use_auth = zkl_auth != NULL && zkl_auth[0] != '\0';
	if (zkl_use_auth)
	{
		zkl_acl_entries[0].perms = ZOO_PERM_ALL;
		zkl_acl_entries[0].id = ZOO_AUTH_IDS;
		zkl_acl_entries[1].perms = ZOO_PERM_READ;
		zkl_acl_entries[1].id = ZOO_ANYONE_ID_UNSAFE;
		(void) zoo_add_auth(zh, "digest", zkl_auth, (int) strlen(zkl_auth),
							session_ignore, NULL);
	}
	/* The watcher may have run before zh was published: read it again. */
	if (zoo_state(zh) == ZOO_CONNECTED_STATE)
		session_watcher(zh, ZOO_SESSION_EVENT, ZOO_CONNECTED_STATE, NULL, NULL);

	zkl_epoch++;
	zkl_uuid_counter = 0;
	{
		char		uuid[ZKL_UUID_LEN + 1];

		zkl_names_format_uuid(zkl_uuid_bytes, 0, uuid);
		snprintf(zkl_own_prefix, sizeof(zkl_own_prefix), "%s%.*s",
				 ZKL_PROTECT_PREFIX, ZKL_UUID_SESSION_LEN, uuid);
	}

	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
										   zkl_connect_timeout);
	PG_TRY();
	{
		session_wait(session_is_connected, NULL, deadline);
	}
	PG_CATCH();
	{
		session_close();
		PG_RE_THROW();
	}
	PG_END_TRY();

	pthread_mutex_lock(&zkl_shared.mu);
	state = zkl_shared.state;
	pthread_mutex_unlock(&zkl_shared.mu);
	if (state == ZOO_CONNECTED_STATE)
		return;
	session_close();
	if (state == ZOO_AUTH_FAILED_STATE)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION),
				 errmsg("ZooKeeper authentication failed"),
				 errhint("Check the credentials in zklock.auth.")));
	ereport(ERROR,
			(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
			 errmsg("could not connect to ZooKeeper at \"%s\"", zkl_hosts),
			 errdetail("No server answered within %d ms.", zkl_connect_timeout),
			 errhint("Check that the ensemble is running and reachable, and zklock.connect_timeout.")));
}

/*
 * Make sure this backend has a connected session: open one lazily on the
 * first call or after expiry; wait for a reconnect within connect_timeout.
 */
void
zkl_session_connect(void)
{
	int			state;
	bool		have;

	session_flush_log();
	pthread_mutex_lock(&zkl_shared.mu);
	have = zkl_shared.zh != NULL;
	state = zkl_shared.state;
	pthread_mutex_unlock(&zkl_shared.mu);

	if (have && (state == ZOO_EXPIRED_SESSION_STATE ||
				 state == ZOO_AUTH_FAILED_STATE ||
				 zkl_session_health(zkl_epoch) == ZKL_HEALTH_LOST))
	{
		session_close();
		have = false;
	}
	if (!have)
	{
		session_open();
		return;
	}
	if (state == ZOO_CONNECTED_STATE)
	{
		session_issue_cleanups();
		return;
	}
	if (!session_wait(session_is_connected, NULL,
					  TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
												  zkl_connect_timeout)))
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("lost connection to ZooKeeper at \"%s\"", zkl_hosts),
				 errdetail("No server answered within %d ms.", zkl_connect_timeout)));
	/* Connected again, or expired: the caller's next request tells. */
	zkl_session_connect();
}

uint64
zkl_session_epoch(void)
{
	return zkl_epoch;
}

/* Prefix shared by every node this session creates (its uuid's head). */
const char *
zkl_session_own_prefix(void)
{
	return zkl_own_prefix;
}

/* A fresh uuid for one create: the session's bytes and a counter. */
void
zkl_session_next_uuid(char out[ZKL_UUID_LEN + 1])
{
	zkl_names_format_uuid(zkl_uuid_bytes, ++zkl_uuid_counter, out);
}

/*
 * Whether locks taken in the given epoch are still ours: lost once the
 * session expired or was replaced, or stayed disconnected past its
 * negotiated timeout (the server has expired it by then, or will revive it
 * too late to be trusted); in doubt while disconnected for less.  Lost is
 * for good: a session that comes back has its lock nodes deleted.
 */
ZklLockHealth
zkl_session_health(uint64 epoch)
{
	ZklLockHealth h;

	if (epoch != zkl_epoch)
		return ZKL_HEALTH_LOST;
	pthread_mutex_lock(&zkl_shared.mu);
	if (zkl_shared.zh != NULL && !zkl_shared.lost &&
		zkl_shared.state != ZOO_CONNECTED_STATE &&
		session_now_ms() - zkl_shared.disconnected_ms > zkl_shared.timeout_ms)
		zkl_shared.lost = true;
	if (zkl_shared.zh == NULL || zkl_shared.lost)
		h = ZKL_HEALTH_LOST;
	else if (zkl_shared.state == ZOO_CONNECTED_STATE)
		h = ZKL_HEALTH_HELD;
	else
		h = ZKL_HEALTH_IN_DOUBT;
	pthread_mutex_unlock(&zkl_shared.mu);
	return h;
}

/*
 * Send an asynchronous create.  For a lock node, sweep_dir and sweep_prefix
 * say where it can be found if the reply is lost, so that an unclaimed
 * create never leaves an orphan; NULL for directories, which are kept.
 */
ZklOp *
zkl_session_create(const char *path, const char *data, int flags,
				   const char *sweep_dir, const char *sweep_prefix)
{
	ZklOp	   *op = session_new_op(ZKL_OP_CREATE);
	int			rc;

	if (sweep_dir != NULL)
	{
		op->sweep_dir = strdup(sweep_dir);
		op->sweep_prefix = strdup(sweep_prefix);
		if (op->sweep_dir == NULL || op->sweep_prefix == NULL)
			session_not_sent(op, ZSYSTEMERROR, "create", path);
	}
	rc = zoo_acreate2(zkl_shared.zh, path, data, data ? (int) strlen(data) : -1,
					  zkl_use_auth ? &zkl_auth_acl : &ZOO_OPEN_ACL_UNSAFE,
					  flags, session_created, op);
	if (rc != ZOK)
		session_not_sent(op, rc, "create", path);
	return op;
}

ZklOp *
zkl_session_children(const char *path)
{
	ZklOp	   *op = session_new_op(ZKL_OP_CHILDREN);
	int			rc;

	rc = zoo_aget_children(zkl_shared.zh, path, 0, session_listed, op);
	if (rc != ZOK)
		session_not_sent(op, rc, "list", path);
	return op;
}

/*
 * Set a data watch on path (get-data rather than exists: a data watch is
 * not left behind when the node is already gone, ZNONODE).
 */
ZklOp *
zkl_session_watch(const char *path)
{
	ZklOp	   *op = session_new_op(ZKL_OP_WATCH);
	int			rc;

	rc = zoo_awget(zkl_shared.zh, path, session_data_watcher, NULL,
				   session_got_data, op);
	if (rc != ZOK)
		session_not_sent(op, rc, "watch", path);
	return op;
}

/*
 * Remove our data watch on path, retried after a reconnect like a delete.
 * In the 3.8.0 client, removing one watcher only checks on the server and
 * drops it locally: the server keeps the watch until it fires.  Removing
 * all data watches of the path (only the recipe sets them, one wait at a
 * time) sends RemoveWatches; a local removal crashes.  The library declares
 * the completion as void_completion_t * but stores and calls it as a plain
 * void_completion_t, hence the cast where it is sent.
 */
void
zkl_session_unwatch(const char *path)
{
	bool		queued;

	pthread_mutex_lock(&zkl_shared.mu);
	queued = zkl_shared.zh != NULL &&
		session_queue_cleanup(ZKL_CLEAN_UNWATCH, path, NULL);
	pthread_mutex_unlock(&zkl_shared.mu);
	if (queued)
		session_issue_cleanups();
}

static bool
session_op_done(void *arg)
{
	return ((ZklOp *) arg)->done;
}

/* Wait for an operation's answer; false when the deadline came first. */
bool
zkl_session_await(ZklOp *op, TimestampTz deadline)
{
	return session_wait(session_op_done, op, deadline);
}

typedef struct ZklWatchWait
{
	uint64		watch_events;
	uint64		session_events;
} ZklWatchWait;

static bool
session_watch_fired(void *arg)
{
	ZklWatchWait *w = (ZklWatchWait *) arg;

	return zkl_shared.watch_events != w->watch_events ||
		zkl_shared.session_events != w->session_events;
}

/* Count of data-watch notifications; pass to zkl_session_await_watch. */
uint64
zkl_session_watch_count(void)
{
	uint64		n;

	pthread_mutex_lock(&zkl_shared.mu);
	n = zkl_shared.watch_events;
	pthread_mutex_unlock(&zkl_shared.mu);
	return n;
}

/*
 * Wait until a data watch fires after `since` or the session's state
 * changes; false when the deadline came first.
 */
bool
zkl_session_await_watch(uint64 since, TimestampTz deadline)
{
	ZklWatchWait w;

	pthread_mutex_lock(&zkl_shared.mu);
	w.watch_events = since;
	w.session_events = zkl_shared.session_events;
	pthread_mutex_unlock(&zkl_shared.mu);
	return session_wait(session_watch_fired, &w, deadline);
}

int
zkl_session_op_rc(ZklOp *op)
{
	return op->rc;
}

/*
 * Claim a create's node: freeing the operation no longer cleans it up.
 * Returns its path (palloc'd), NULL if the reply did not say it.
 */
char *
zkl_session_op_take_node(ZklOp *op, int64 *czxid)
{
	op->claimed = true;
	*czxid = op->czxid;
	return op->path ? pstrdup(op->path) : NULL;
}

/* The listed children; valid until the operation is freed. */
int
zkl_session_op_children(ZklOp *op, char ***children)
{
	*children = op->children;
	return op->nchildren;
}

/*
 * Let go of an operation.  One still under way is freed by its completion;
 * a create whose node nobody claimed is cleaned up either way.
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

/* Register the node of a newly held lock (see ZklHeld). */
void
zkl_session_hold(const char *path)
{
	ZklHeld    *h = malloc(sizeof(ZklHeld));

	if (h != NULL && (h->path = strdup(path)) == NULL)
	{
		free(h);
		h = NULL;
	}
	if (h == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	pthread_mutex_lock(&zkl_shared.mu);
	h->next = zkl_shared.held;
	zkl_shared.held = h;
	pthread_mutex_unlock(&zkl_shared.mu);
}

/* Release a held lock's node: forget it and delete it.  Never raises. */
void
zkl_session_release(const char *path)
{
	ZklHeld   **p;

	pthread_mutex_lock(&zkl_shared.mu);
	for (p = &zkl_shared.held; *p; p = &(*p)->next)
	{
		if (strcmp((*p)->path, path) == 0)
		{
			ZklHeld    *h = *p;

			*p = h->next;
			free(h->path);
			free(h);
			break;
		}
	}
	pthread_mutex_unlock(&zkl_shared.mu);
	zkl_session_delete(path);
}

/* Ask for a node's data (and czxid), without a watch. */
ZklOp *
zkl_session_get(const char *path)
{
	ZklOp	   *op = session_new_op(ZKL_OP_GET);
	int			rc;

	rc = zoo_aget(zkl_shared.zh, path, 0, session_got_data, op);
	if (rc != ZOK)
		session_not_sent(op, rc, "get", path);
	return op;
}

/* A get answer: the data (valid until the operation is freed), czxid. */
const char *
zkl_session_op_data(ZklOp *op, int64 *czxid)
{
	*czxid = op->czxid;
	return op->data;
}

/* What zk_session() shows; opens nothing. */
void
zkl_session_info(ZklSessionInfo *info)
{
	zhandle_t  *zh;

	memset(info, 0, sizeof(*info));
	pthread_mutex_lock(&zkl_shared.mu);
	zh = zkl_shared.zh;
	if (zh == NULL)
		info->state = "closed";
	else if (zkl_shared.lost)
		info->state = "lost";
	else if (zkl_shared.state == ZOO_CONNECTED_STATE)
		info->state = "connected";
	else if (zkl_shared.state == ZOO_EXPIRED_SESSION_STATE)
		info->state = "expired";
	else if (zkl_shared.state == ZOO_AUTH_FAILED_STATE)
		info->state = "auth failed";
	else
		info->state = zkl_shared.ever_connected ? "disconnected" : "connecting";
	info->session_id = zkl_shared.session_id;
	info->timeout_ms = zkl_shared.timeout_ms;
	info->watch_events = zkl_shared.watch_events;
	pthread_mutex_unlock(&zkl_shared.mu);
	if (zh != NULL && strcmp(info->state, "connected") == 0)
	{
		const char *server = zoo_get_current_server(zh);

		info->server = server ? pstrdup(server) : NULL;
	}
}

/* Ask for a node's Stat (czxid, ephemeral owner). */
ZklOp *
zkl_session_stat(const char *path)
{
	ZklOp	   *op = session_new_op(ZKL_OP_STAT);
	int			rc;

	rc = zoo_aexists(zkl_shared.zh, path, 0, session_got_stat, op);
	if (rc != ZOK)
		session_not_sent(op, rc, "stat", path);
	return op;
}

/* A stat answer: the node's czxid and whether this session owns it. */
bool
zkl_session_op_owned(ZklOp *op, int64 *czxid)
{
	bool		mine;

	pthread_mutex_lock(&zkl_shared.mu);
	mine = op->owner != 0 && op->owner == zkl_shared.session_id &&
		zkl_shared.state == ZOO_CONNECTED_STATE;
	pthread_mutex_unlock(&zkl_shared.mu);
	*czxid = op->czxid;
	return mine;
}

static bool
session_settled(void *arg)
{
	(void) arg;
	return zkl_shared.state == ZOO_CONNECTED_STATE || zkl_shared.lost ||
		zkl_shared.state == ZOO_EXPIRED_SESSION_STATE ||
		zkl_shared.state == ZOO_AUTH_FAILED_STATE;
}

/*
 * Wait, while locks of this epoch are in doubt, until the session is
 * connected again or known lost; bounded by the session timeout.  With a
 * deadline (not 0), give up earlier.  Returns the health then.
 */
ZklLockHealth
zkl_session_settle(uint64 epoch, TimestampTz deadline)
{
	for (;;)
	{
		ZklLockHealth h = zkl_session_health(epoch);
		int64_t		left;
		TimestampTz until;

		if (h != ZKL_HEALTH_IN_DOUBT)
			return h;
		pthread_mutex_lock(&zkl_shared.mu);
		left = zkl_shared.disconnected_ms + zkl_shared.timeout_ms -
			session_now_ms() + 1;
		pthread_mutex_unlock(&zkl_shared.mu);
		until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
											Max(left, 1));
		if (deadline != 0 && deadline < until)
			until = deadline;
		if (!session_wait(session_settled, NULL, until) && until == deadline)
			return zkl_session_health(epoch);
	}
}

/*
 * Delete a node of ours without waiting: for releases at commit/abort and
 * for given-up waiters.  Never blocks, never raises; retried after a
 * reconnect until the server confirms.
 */
void
zkl_session_delete(const char *path)
{
	bool		queued;

	pthread_mutex_lock(&zkl_shared.mu);
	queued = zkl_shared.zh != NULL && session_queue_cleanup(ZKL_CLEAN_DELETE, path, NULL);
	pthread_mutex_unlock(&zkl_shared.mu);
	if (queued)
		session_issue_cleanups();
}

/* Raise the error for a failed ZooKeeper request. */
void
zkl_session_raise(int rc, const char *what, const char *path)
{
	int			code;

	if (rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT ||
		rc == ZSESSIONMOVED)
		code = ERRCODE_CONNECTION_FAILURE;
	else if (rc == ZSESSIONEXPIRED || rc == ZINVALIDSTATE || rc == ZCLOSING)
		code = ERRCODE_CONNECTION_EXCEPTION;
	else if (rc == ZNOAUTH || rc == ZAUTHFAILED)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("ZooKeeper denied the %s request for \"%s\"", what, path),
				 errdetail_internal("%s", zerror(rc)),
				 errhint("The node belongs to another ZooKeeper identity: check zklock.auth and zklock.root.")));
	else
		code = ERRCODE_EXTERNAL_ROUTINE_EXCEPTION;
	ereport(ERROR,
			(errcode(code),
			 errmsg("ZooKeeper %s request for \"%s\" failed", what, path),
			 errdetail_internal("%s", zerror(rc))));
}
