/*-------------------------------------------------------------------------
 *
 * session.c
 *	  The one ZooKeeper session of this backend: lazy open, session states,
 *	  health of its lock nodes, close at exit.
 *
 * A backend opens its session on its first zk_* call, never in the
 * postmaster or _PG_init: threads do not survive fork.  Every signal is
 * blocked while the library's threads and the lease thread start, so that
 * PostgreSQL's signals (SIGALRM for timeouts, SIGINT for cancel, SIGURG for
 * latches) reach the main thread only.  Host names in zklock.hosts are
 * resolved before, on a helper thread the main thread waits for where a
 * cancel is served, so zookeeper_init2 only parses addresses.
 *
 * session_watcher runs on the completion thread and keeps the thread rules
 * of session_int.h.  At exit, the releases already sent are given a
 * bounded time to be answered before the handle is closed: the library
 * closes its socket as soon as anything is readable after its close
 * request, and unread replies make that close a reset the server may act
 * on before it has read our deletes and the close itself.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cryptohash.h"
#include "common/sha1.h"
#include "miscadmin.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "guc.h"
#include "session_int.h"
#include "session_tls.h"

/* File descriptors the client library opens (socket, wake-up pipe). */
#define ZKL_LIBRARY_FDS 3

/* How long an exiting backend waits for its releases to be answered. */
#define ZKL_EXIT_DRAIN_MS 2000

ZklShared	zkl_shared = {.mu = PTHREAD_MUTEX_INITIALIZER, .efd = -1};

/* Main-thread state. */
static uint64 zkl_epoch = 0;	/* bumped for every new session */
static unsigned char zkl_uuid_bytes[10];
static uint32 zkl_uuid_counter = 0;
static char zkl_own_prefix[sizeof(ZKL_PROTECT_PREFIX) + ZKL_UUID_SESSION_LEN];
static bool zkl_exit_registered = false;

/* A name resolution the main thread waits for; shared with its thread. */
typedef struct ZklResolve
{
	char	   *hosts;			/* zklock.hosts, as given */
	char	   *result;			/* the same with addresses; NULL: failed */
	char	   *failed_host;
	int			gai_error;
	bool		done;
	bool		abandoned;		/* the main thread let go; the thread frees */
} ZklResolve;

/* Wake the main thread; any thread. */
void
session_kick(void)
{
	uint64_t	one = 1;

	if (zkl_shared.efd >= 0 &&
		write(zkl_shared.efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		return;					/* nothing better to do on a ZooKeeper thread */
}

/* Whether requests can go out now.  Caller holds mu. */
bool
session_connected_locked(void)
{
	return zkl_shared.state == ZOO_CONNECTED_STATE;
}

/* Connected, or known to be gone for good.  Caller holds mu. */
bool
session_settled_locked(void)
{
	return zkl_shared.state == ZOO_CONNECTED_STATE || zkl_shared.lost ||
		zkl_shared.state == ZOO_EXPIRED_SESSION_STATE ||
		zkl_shared.state == ZOO_AUTH_FAILED_STATE;
}

/*
 * The session's locks are lost, for good.  If the ensemble still knows the
 * session (a revived one), delete its nodes now: another contender may have
 * been told it expired.  Caller holds mu.
 */
void
session_mark_lost_locked(void)
{
	if (zkl_shared.lost)
		return;
	zkl_shared.lost = true;
	for (ZklNode *n = zkl_shared.nodes; n; n = n->next)
		session_queue_cleanup(ZKL_CLEAN_DELETE, n->path, NULL);
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
			zkl_shared.ever_connected = true;
			zkl_shared.timeout_ms = timeout;
			zkl_shared.session_id = id ? id->client_id : 0;
			reconnected = true;
		}
		else if (state == ZOO_EXPIRED_SESSION_STATE ||
				 state == ZOO_AUTH_FAILED_STATE)
			session_mark_lost_locked();
		zkl_shared.state = state;
		if (session_lease_lost_locked())
			session_mark_lost_locked();
		zkl_shared.session_events++;
		pthread_cond_signal(&zkl_shared.lease_cv);
	}
	pthread_mutex_unlock(&zkl_shared.mu);
	if (reconnected)
		session_issue_cleanups();
	session_kick();
}

/* Close the handle; main thread, never while holding mu. */
static void
session_close(void)
{
	zhandle_t  *zh;

	pthread_mutex_lock(&zkl_shared.mu);
	zh = zkl_shared.zh;
	pthread_mutex_unlock(&zkl_shared.mu);
	if (zh == NULL)
		return;

	session_lease_stop();
	/* Completions run (with ZCLOSING) during close: mu must be free. */
	zookeeper_close(zh);

	pthread_mutex_lock(&zkl_shared.mu);
	zkl_shared.zh = NULL;
	zkl_shared.state = 0;
	zkl_shared.ever_connected = false;
	zkl_shared.lost = false;
	zkl_shared.have_proof = false;
	zkl_shared.requests_out = 0;
	/* The library's threads are gone; the session's nodes went with it. */
	session_drop_cleanups();
	while (zkl_shared.nodes != NULL)
	{
		ZklNode    *n = zkl_shared.nodes;

		zkl_shared.nodes = n->next;
		free(n->path);
		free(n);
	}
	pthread_mutex_unlock(&zkl_shared.mu);
	for (int i = 0; i < ZKL_LIBRARY_FDS; i++)
		ReleaseExternalFD();
}

/*
 * on_proc_exit: the open transaction is aborted by now, its releases
 * sent.  Give them a bounded time to be answered, then close, which frees
 * every node left.
 */
static void
session_at_exit(int code, Datum arg)
{
	(void) code;
	(void) arg;
	if (zkl_shared.zh == NULL)
		return;
	session_issue_cleanups();
	session_drain(ZKL_EXIT_DRAIN_MS);
	session_close();
}

/*
 * Append one host:port of a connect string to out (of size cap), with the
 * host resolved to an address.  Plain C: runs on the resolver thread.
 */
static bool
session_resolve_one(ZklResolve *r, char *out, size_t cap, const char *entry,
					size_t len)
{
	char	   *item = strndup(entry, len);
	char	   *colon = item ? strrchr(item, ':') : NULL;
	struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM};
	struct addrinfo *res = NULL;
	char		addr[INET_ADDRSTRLEN];
	size_t		used = strlen(out);
	int			rc;

	if (item == NULL)
		return false;
	if (colon == NULL || strchr(item, '[') != NULL)
	{
		/* No port, or IPv6 in brackets: leave it to the library. */
		snprintf(out + used, cap - used, "%s", item);
		free(item);
		return true;
	}
	*colon = '\0';
	rc = getaddrinfo(item, NULL, &hints, &res);
	if (rc != 0 || res == NULL)
	{
		r->gai_error = rc;
		r->failed_host = item;
		return false;
	}
	inet_ntop(AF_INET, &((struct sockaddr_in *) res->ai_addr)->sin_addr,
			  addr, sizeof(addr));
	freeaddrinfo(res);
	snprintf(out + used, cap - used, "%s:%s", addr, colon + 1);
	free(item);
	return true;
}

/* The resolver thread: plain C, every signal blocked. */
static void *
session_resolve_main(void *arg)
{
	ZklResolve *r = (ZklResolve *) arg;
	const char *chroot = strchr(r->hosts, '/');
	size_t		hlen = chroot ? (size_t) (chroot - r->hosts) : strlen(r->hosts);

	/* An address is never longer than the name plus 16 bytes. */
	size_t		cap = strlen(r->hosts) * 2 + 64;
	char	   *buf = calloc(1, cap);
	bool		ok = buf != NULL;

	for (const char *p = r->hosts; ok && p < r->hosts + hlen;)
	{
		const char *comma = memchr(p, ',', hlen - (p - r->hosts));
		size_t		len = comma ? (size_t) (comma - p) : hlen - (p - r->hosts);

		if (buf[0] != '\0')
			strcat(buf, ",");
		ok = strlen(buf) + len + 24 < cap &&
			session_resolve_one(r, buf, cap, p, len);
		p += len + (comma ? 1 : 0);
	}
	if (ok && chroot)
		strcat(buf, chroot);
	pthread_mutex_lock(&zkl_shared.mu);
	r->result = ok ? buf : NULL;
	if (!ok)
		free(buf);
	r->done = true;
	if (r->abandoned)
	{
		free(r->result);
		free(r->failed_host);
		free(r->hosts);
		free(r);
	}
	pthread_mutex_unlock(&zkl_shared.mu);
	session_kick();
	return NULL;
}

/* Let the resolver thread free the request when it is done. */
static void
session_resolve_abandon(ZklResolve *r)
{
	bool		done;

	pthread_mutex_lock(&zkl_shared.mu);
	done = r->done;
	r->abandoned = true;
	pthread_mutex_unlock(&zkl_shared.mu);
	if (done)
	{
		free(r->result);
		free(r->failed_host);
		free(r->hosts);
		free(r);
	}
}

static bool
session_resolved(void *arg)
{
	return ((ZklResolve *) arg)->done;
}

/*
 * Resolve the host names of zklock.hosts where a cancel or
 * statement_timeout is served, within connect_timeout.  Returns the
 * connect string with addresses (malloc'd).
 */
static char *
session_resolve(void)
{
	ZklResolve *r = calloc(1, sizeof(ZklResolve));
	pthread_t	thread;
	sigset_t	all;
	sigset_t	saved;
	bool		started;
	bool		done;
	char	   *result = NULL;
	char	   *failed = NULL;
	int			gai_error = 0;

	if (r == NULL || (r->hosts = strdup(zkl_hosts)) == NULL)
	{
		free(r);
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	}
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &saved);
	started = pthread_create(&thread, NULL, session_resolve_main, r) == 0;
	pthread_sigmask(SIG_SETMASK, &saved, NULL);
	if (!started)
	{
		free(r->hosts);
		free(r);
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("could not start a thread to resolve zklock.hosts")));
	}
	pthread_detach(thread);
	PG_TRY();
	{
		session_wait_as(ZKL_WAIT_CONNECT, session_resolved, r,
					 TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
												 zkl_connect_timeout));
	}
	PG_CATCH();
	{
		session_resolve_abandon(r);
		PG_RE_THROW();
	}
	PG_END_TRY();
	pthread_mutex_lock(&zkl_shared.mu);
	done = r->done;
	pthread_mutex_unlock(&zkl_shared.mu);
	if (!done)
		session_resolve_abandon(r);
	else
	{
		result = r->result;
		failed = r->failed_host ? pstrdup(r->failed_host) : NULL;
		gai_error = r->gai_error;
		free(r->failed_host);
		free(r->hosts);
		free(r);
	}
	if (!done)
		ereport(ERROR,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("could not resolve the host names in zklock.hosts"),
				 errdetail("Name resolution did not finish within %d ms.",
						   zkl_connect_timeout)));
	if (result == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("could not resolve ZooKeeper host \"%s\"",
						failed ? failed : zkl_hosts),
				 gai_error != 0 ?
				 errdetail_internal("%s", gai_strerror(gai_error)) : 0,
				 errhint("Check the connect string in zklock.hosts.")));
	return result;
}

/* The digest id of zklock.auth as ACLs carry it: user:base64(sha1(auth)). */
static void
session_set_digest(void)
{
	uint8		hash[SHA1_DIGEST_LENGTH];
	char		b64[64];
	const char *colon = strchr(zkl_auth, ':');
	pg_cryptohash_ctx *ctx = pg_cryptohash_create(PG_SHA1);
	int			len;

	if (pg_cryptohash_init(ctx) < 0 ||
		pg_cryptohash_update(ctx, (const uint8 *) zkl_auth, strlen(zkl_auth)) < 0 ||
		pg_cryptohash_final(ctx, hash, sizeof(hash)) < 0)
		elog(ERROR, "could not compute SHA-1 digest");
	pg_cryptohash_free(ctx);
	len = zkl_compat_b64_encode(hash, sizeof(hash), b64, sizeof(b64) - 1);
	if (len < 0)
		elog(ERROR, "could not encode SHA-1 digest");
	snprintf(zkl_shared.own_digest, sizeof(zkl_shared.own_digest),
			 "%.*s:%.*s", (int) (colon - zkl_auth), zkl_auth, len, b64);
}

/* Completion for requests whose answer nobody needs: never NULL (3.8.0). */
static void
session_ignore(int rc, const void *data)
{
	(void) rc;
	(void) data;
}

/* Refuse settings that cannot work before anything is started. */
static void
session_check_settings(void)
{
	if (zkl_hosts == NULL || zkl_hosts[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("zklock.hosts is not set"),
				 errhint("Set zklock.hosts to the ZooKeeper connect string in postgresql.conf, or run LOAD 'zklock', then ALTER SYSTEM SET zklock.hosts = 'zk1:2181,zk2:2181,zk3:2181' and SELECT pg_reload_conf().")));
	if (zkl_use_auth() && strchr(zkl_auth, ':') == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("zklock.auth must have the form user:password")));

	/*
	 * In a backend that has not loaded zklock, zklock.auth from the
	 * configuration file is a placeholder any role can SHOW.  Only
	 * preloading hides it everywhere, so credentials demand it.
	 */
	if (zkl_use_auth() && !zkl_preloaded)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("zklock.auth requires zklock in shared_preload_libraries"),
				 errdetail("Without it, other roles can read the credentials in backends that have not loaded zklock."),
				 errhint("Add zklock to shared_preload_libraries and restart the server.")));
}

/* Start the handle and the lease thread with every signal blocked. */
static zhandle_t *
session_start_handle(const char *hosts, int *init_errno)
{
	sigset_t	all;
	sigset_t	saved;
	zhandle_t  *zh;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &saved);
	errno = 0;
	if (zkl_ssl)
		zh = zkl_tls_init(hosts, session_watcher, zkl_session_timeout,
						  session_log);
	else
		zh = zookeeper_init2(hosts, session_watcher, zkl_session_timeout,
							 NULL, NULL, 0, session_log);
	*init_errno = errno;
	if (zh != NULL)
	{
		/*
		 * The hosts are numeric addresses already (session_resolve).  By
		 * default the library resolves them again on every turn of its I/O
		 * loop, with three netlink dumps per host for AI_ADDRCONFIG: a cost on
		 * every request and reply, for an answer that cannot change.  It still
		 * resolves them when it has no connection.
		 */
		(void) zoo_set_servers_resolution_delay(zh, -1);
		pthread_mutex_lock(&zkl_shared.mu);
		zkl_shared.zh = zh;
		pthread_mutex_unlock(&zkl_shared.mu);
		session_lease_start();
	}
	pthread_sigmask(SIG_SETMASK, &saved, NULL);
	return zh;
}

static bool
session_settled_wait(void *arg)
{
	(void) arg;
	return session_settled_locked();
}

/* Open a new session and wait for it to connect, within connect_timeout. */
static void
session_open(void)
{
	zhandle_t  *zh;
	int			state;
	int			init_errno;
	char	   *hosts;

	session_check_settings();
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
	zkl_shared.own_digest[0] = '\0';
	if (zkl_use_auth())
		session_set_digest();
	zkl_tls_prepare();
	hosts = session_resolve();

	for (int i = 0; i < ZKL_LIBRARY_FDS; i++)
		ReserveExternalFD();
	zoo_set_debug_level(ZOO_LOG_LEVEL_WARN);
	pthread_mutex_lock(&zkl_shared.mu);
	zkl_shared.state = 0;
	zkl_shared.ever_connected = false;
	pthread_mutex_unlock(&zkl_shared.mu);

	zh = session_start_handle(hosts, &init_errno);
	free(hosts);
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

	/*
	 * Digest credentials go first, ahead of every request; the library
	 * sends them again after each reconnect.
	 */
	if (zkl_use_auth())
		(void) zoo_add_auth(zh, "digest", zkl_auth, (int) strlen(zkl_auth),
							session_ignore, NULL);
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

	PG_TRY();
	{
		zkl_tls_wait_connect(session_settled_wait,
							 TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
														 zkl_connect_timeout));
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
	zkl_tls_report_failure();
	ereport(ERROR,
			(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
			 errmsg("could not connect to ZooKeeper at \"%s\"", zkl_hosts),
			 errdetail("No server answered within %d ms.", zkl_connect_timeout),
			 errhint("Check that the ensemble is running and reachable, and zklock.connect_timeout.")));
}

/*
 * Make sure this backend has a connected session: open one lazily on the
 * first call or after loss; wait for a reconnect within connect_timeout.
 */
void
zkl_session_connect(void)
{
	bool		have;
	bool		lost;
	bool		connected;

	session_flush_log();
	pthread_mutex_lock(&zkl_shared.mu);
	have = zkl_shared.zh != NULL;
	lost = zkl_shared.lost || zkl_shared.state == ZOO_EXPIRED_SESSION_STATE ||
		zkl_shared.state == ZOO_AUTH_FAILED_STATE || session_lease_lost_locked();
	connected = session_connected_locked();
	pthread_mutex_unlock(&zkl_shared.mu);

	if (have && lost)
	{
		session_close();
		have = false;
	}
	if (!have)
	{
		session_open();
		return;
	}
	if (connected)
	{
		session_issue_cleanups();
		return;
	}
	if (!session_wait_as(ZKL_WAIT_CONNECT, session_settled_wait, NULL,
					  TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
												  zkl_connect_timeout)))
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("lost connection to ZooKeeper at \"%s\"", zkl_hosts),
				 errdetail("No server answered within %d ms.", zkl_connect_timeout)));
	/* Connected again, or lost: look again. */
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
 * Whether a lock node taken in the given epoch is still ours; a pure read.
 * Lost once the session is lost or replaced, the node was deleted by
 * someone else, or no proof came within the timeout; in doubt while the
 * lease is stale or the connection down; held otherwise.
 */
ZklLockHealth
zkl_session_health(uint64 epoch, const char *node)
{
	ZklLockHealth h;

	if (epoch != zkl_epoch)
		return ZKL_HEALTH_LOST;
	pthread_mutex_lock(&zkl_shared.mu);
	if (zkl_shared.zh == NULL || session_lease_lost_locked())
		h = ZKL_HEALTH_LOST;
	else if (!session_connected_locked() || !zkl_shared.have_proof ||
			 session_lease_age_locked() > session_lease_window_ms())
		h = ZKL_HEALTH_IN_DOUBT;
	else
		h = ZKL_HEALTH_HELD;
	for (ZklNode *n = zkl_shared.nodes; node && n; n = n->next)
		if (n->lost && strcmp(n->path, node) == 0)
			h = ZKL_HEALTH_LOST;
	pthread_mutex_unlock(&zkl_shared.mu);
	return h;
}

/* Forget a node of ours and delete it.  Never blocks, never raises. */
void
zkl_session_release(const char *path)
{
	ZklNode   **p;
	bool		queued;

	pthread_mutex_lock(&zkl_shared.mu);
	for (p = &zkl_shared.nodes; *p; p = &(*p)->next)
	{
		if (strcmp((*p)->path, path) == 0)
		{
			ZklNode    *n = *p;

			*p = n->next;
			free(n->path);
			free(n);
			break;
		}
	}
	queued = zkl_shared.zh != NULL &&
		session_queue_cleanup(ZKL_CLEAN_DELETE, path, NULL);
	pthread_mutex_unlock(&zkl_shared.mu);
	if (queued)
		session_issue_cleanups();
}

/* Whether path is a node this session created and still holds or queues. */
bool
zkl_session_tracks(const char *path)
{
	bool		found = false;

	pthread_mutex_lock(&zkl_shared.mu);
	for (ZklNode *n = zkl_shared.nodes; n && !found; n = n->next)
		found = strcmp(n->path, path) == 0;
	pthread_mutex_unlock(&zkl_shared.mu);
	return found;
}

static void
session_unwatch(ZklCleanupKind kind, const char *path)
{
	bool		queued;

	pthread_mutex_lock(&zkl_shared.mu);
	queued = zkl_shared.zh != NULL && session_queue_cleanup(kind, path, NULL);
	pthread_mutex_unlock(&zkl_shared.mu);
	if (queued)
		session_issue_cleanups();
}

/*
 * Remove our data watch on path, retried after a reconnect like a delete.
 * In the 3.8.0 client, removing one watcher only checks on the server and
 * drops it locally: the server keeps the watch until it fires.  Removing
 * all data watches of the path (only the recipe sets them, one wait at a
 * time) sends RemoveWatches; a local removal crashes.
 */
void
zkl_session_unwatch(const char *path)
{
	session_unwatch(ZKL_CLEAN_UNWATCH, path);
}

/* Remove our child watch on path (the semaphore's waiter sets them), likewise. */
void
zkl_session_unwatch_children(const char *path)
{
	session_unwatch(ZKL_CLEAN_UNWATCH_CHILDREN, path);
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
	else if (session_lease_lost_locked())
		info->state = "lost";
	else if (session_connected_locked())
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
