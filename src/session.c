/*-------------------------------------------------------------------------
 *
 * session.c
 *	  The one ZooKeeper session of this backend: lazy open, the session
 *	  watcher, close at exit; the top of the session family, which wires
 *	  the other files together (see session_int.h).
 *
 * A backend opens its session on its first zk_* call, never in the
 * postmaster or _PG_init: threads do not survive fork.  Every signal is
 * blocked while the library's threads and the lease thread start, so that
 * PostgreSQL's signals (SIGALRM for timeouts, SIGINT for cancel, SIGURG for
 * latches) reach the main thread only.  Host names in zklock.hosts are
 * resolved before, on a helper thread the main thread waits for where a
 * cancel is served, so zookeeper_init2 only parses addresses.
 *
 * session_watcher runs on the library's IO thread and keeps the thread rules
 * of session_int.h: it records what it hears in session_state.c and tells
 * the lease and the request files.  At exit, the releases already sent
 * are given a bounded time to be answered before the handle is closed:
 * the library closes its socket as soon as anything is readable after its
 * close request, and unread replies make that close a reset the server
 * may act on before it has read our deletes and the close itself.
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

#include "miscadmin.h"
#include "storage/ipc.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "guc.h"
#include "hosts.h"
#include "session_int.h"
#include "session_sasl.h"
#include "session_tls.h"
#include "stats.h"

/* File descriptors the client library opens (socket, wake-up pipe). */
#define ZKL_LIBRARY_FDS 3

/* How long an exiting backend waits for its releases to be answered. */
#define ZKL_EXIT_DRAIN_MS 2000

/* Main-thread state. */
static unsigned char zkl_uuid_bytes[10];
static uint32 zkl_uuid_counter = 0;
static char zkl_own_prefix[sizeof(ZKL_PROTECT_PREFIX) + ZKL_UUID_SESSION_LEN];
static bool zkl_exit_registered = false;
static int	zkl_library_fds = 0;	/* external descriptors counted for it */

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

/*
 * This handle's part in zk_stat_sessions: whether its session counts as
 * open (once connected, until expired or closed), and whether it lost its
 * connection since (the next connect is a reconnect).  Under mu.
 */
static bool zkl_session_counted_open = false;
static bool zkl_session_disconnected = false;

static void
session_count_state_locked(int state)
{
	if (state == ZOO_CONNECTED_STATE && !zkl_session_counted_open)
	{
		zkl_session_counted_open = true;
		zkl_stats_session(ZKL_SS_OPENED, 1);
		zkl_stats_session(ZKL_SS_OPEN, 1);
	}
	else if (state == ZOO_CONNECTED_STATE && zkl_session_disconnected)
		zkl_stats_session(ZKL_SS_RECONNECTS, 1);
	if (state == ZOO_CONNECTED_STATE)
		zkl_session_disconnected = false;
	else if (zkl_session_counted_open && state == ZOO_EXPIRED_SESSION_STATE)
	{
		zkl_session_counted_open = false;
		zkl_stats_session(ZKL_SS_EXPIRED, 1);
		zkl_stats_session(ZKL_SS_OPEN, -1);
	}
	else if (zkl_session_counted_open)
		zkl_session_disconnected = true;
}

/*
 * Record a state of the published handle zh: the library's connected
 * session's id and timeout with it (zoo_client_id and zoo_recv_timeout
 * read fields of the handle and take none of the library's locks).
 * Whether it is a (re)connect.  Caller holds mu.
 */
static bool
session_record_locked(zhandle_t *zh, int state)
{
	int64_t		id = 0;
	int			timeout = 0;

	if (state == ZOO_CONNECTED_STATE)
	{
		id = zoo_client_id(zh)->client_id;
		timeout = zoo_recv_timeout(zh);
	}
	zkl_sess_state_record_locked(state, timeout, id);
	session_count_state_locked(state);
	if (state == ZOO_CONNECTED_STATE)
		zkl_sess_cleanup_rearm_locked();
	if (zkl_sess_state_ended_locked() || zkl_sess_lease_lost_locked())
		zkl_sess_lease_mark_lost_locked();
	zkl_sess_request_session_event_locked();
	zkl_sess_lease_wake_locked();
	return state == ZOO_CONNECTED_STATE;
}

/*
 * The session watcher, on the IO thread: record the state, send
 * queued clean-ups after a reconnect, wake the main thread.
 */
static void
session_watcher(zhandle_t *zh, int type, int state, const char *path,
				void *ctx)
{
	bool		reconnected = false;

	(void) path;
	(void) ctx;
	if (type != ZOO_SESSION_EVENT)
		return;
	pthread_mutex_lock(&zkl_sess_sync_mu);
	if (zkl_sess_state_handle() == zh)
		reconnected = session_record_locked(zh, state);
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	if (reconnected)
		zkl_sess_cleanup_issue();
	zkl_sess_sync_kick();
}

/*
 * The watcher drops what it hears before zh is published (the library may
 * connect that soon, and a SASL login may be refused that soon): once it
 * is, record the connection, or the refused authentication, if the
 * library has it.  The library's state is read under mu, which the watcher
 * records under: a later report of the IO thread (the connection gone
 * again) is recorded after this, and one made before is what this reads,
 * so an older state never overwrites a newer one.  zoo_state reads a
 * field and takes no lock.  Main thread.
 */
static void
session_catch_up(zhandle_t *zh)
{
	bool		connected = false;
	bool		refused = false;
	int			state;

	pthread_mutex_lock(&zkl_sess_sync_mu);
	state = zoo_state(zh);
	if (zkl_sess_state_handle() == zh && state == ZOO_CONNECTED_STATE)
		connected = session_record_locked(zh, ZOO_CONNECTED_STATE);
	else if (zkl_sess_state_handle() == zh && state == ZOO_AUTH_FAILED_STATE &&
			 !zkl_sess_state_auth_failed_locked())
	{
		(void) session_record_locked(zh, ZOO_AUTH_FAILED_STATE);
		refused = true;
	}
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	if (connected)
		zkl_sess_cleanup_issue();
	if (connected || refused)
		zkl_sess_sync_kick();
}

/* Close the handle; main thread, never while holding mu. */
static void
session_close(void)
{
	zhandle_t  *zh = zkl_sess_state_handle();

	if (zh == NULL)
		return;

	zkl_sess_lease_stop();
	/* Completions run (with ZCLOSING) during close: mu must be free. */
	zookeeper_close(zh);

	/* The library's threads are gone; the session's nodes went with it. */
	pthread_mutex_lock(&zkl_sess_sync_mu);
	if (zkl_session_counted_open)
		zkl_stats_session(ZKL_SS_OPEN, -1);
	zkl_session_counted_open = false;
	zkl_session_disconnected = false;
	zkl_sess_state_reset_locked();
	zkl_sess_lease_reset_locked();
	zkl_sess_cleanup_drop_all_locked();
	zkl_sess_request_free_limbo_locked();
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	zkl_sess_sync_release_fds(zkl_library_fds);
	zkl_library_fds = 0;
	zkl_sess_sasl_wipe_password();
}

/* Milliseconds from a to b. */
static double
session_ms(TimestampTz a, TimestampTz b)
{
	return (double) (b - a) / 1000.0;
}

/* This session's id as ZooKeeper shows it (0x...). */
static char *
session_id_text(void)
{
	int64		id;

	pthread_mutex_lock(&zkl_sess_sync_mu);
	id = zkl_sess_state_session_id_locked();
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	return psprintf("0x%llx", (unsigned long long) id);
}

/*
 * zklock.log_sessions: where the open's time went.  The first call of a
 * backend also loaded zklock and planned the statement before this began.
 */
static void
session_log_open(zhandle_t *zh, TimestampTz begin, TimestampTz resolved,
				 TimestampTz started)
{
	TimestampTz now = GetCurrentTimestamp();
	const char *server = zoo_get_current_server(zh);

	ereport(LOG,
			(errmsg("ZooKeeper session %s opened in %.3f ms",
					session_id_text(), session_ms(begin, now)),
			 errdetail("Setup and name resolution %.3f ms, start of the client library's and the lease threads %.3f ms, connection and session creation %.3f ms; server %s%s.",
					   session_ms(begin, resolved), session_ms(resolved, started),
					   session_ms(started, now), server ? server : "unknown",
					   zkl_sess_tls_describe())));
}

/*
 * on_proc_exit: the open transaction is aborted by now, its releases
 * sent.  Give them a bounded time to be answered, then close, which frees
 * every node left.  zklock.log_sessions logs the close with, over TLS, the
 * handshakes of the session's every connection and how many resumed.
 */
static void
session_at_exit(int code, Datum arg)
{
	TimestampTz begin;
	TimestampTz drained;
	char	   *id = NULL;

	(void) code;
	(void) arg;
	if (zkl_sess_state_handle() == NULL)
		return;
	begin = GetCurrentTimestamp();
	if (zkl_log_sessions)
		id = session_id_text();
	zkl_sess_cleanup_issue();
	zkl_sess_wait_drain(zkl_sess_state_all_answered, NULL, ZKL_EXIT_DRAIN_MS);
	drained = GetCurrentTimestamp();
	session_close();
	if (id != NULL)
	{
		TimestampTz end = GetCurrentTimestamp();

		ereport(LOG,
				(errmsg("ZooKeeper session %s closed in %.3f ms",
						id, session_ms(begin, end)),
				 errdetail("Releases answered in %.3f ms; threads stopped and session closed in %.3f ms%s.",
						   session_ms(begin, drained), session_ms(drained, end),
						   zkl_sess_tls_describe())));
	}
}

/*
 * The address of a host name, as "address:port" in out
 * (ZKL_SERVER_ADDR_MAX bytes): its first IPv4 address; if it has none,
 * its first IPv6 one.  IPv4 is asked for alone first, as before, so that
 * a resolver that drops IPv6 (AAAA) queries costs nothing where IPv4
 * answers.  The first lookup's error is the one reported.  Plain C: runs
 * on the resolver thread.
 */
static bool
session_lookup(ZklResolve *r, const ZklServer *sv, char *out)
{
	char	   *name = strndup(sv->host, sv->host_len);
	struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM};
	struct addrinfo *res = NULL;
	char		addr[INET6_ADDRSTRLEN];
	int			rc;

	if (name == NULL)
		return false;
	rc = getaddrinfo(name, NULL, &hints, &res);
	if (rc != 0)
	{
		hints.ai_family = AF_INET6;
		if (getaddrinfo(name, NULL, &hints, &res) != 0)
			res = NULL;
	}
	if (res == NULL)
	{
		r->gai_error = rc != 0 ? rc : EAI_NONAME;
		r->failed_host = name;
		return false;
	}
	if (res->ai_family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *) res->ai_addr)->sin6_addr,
				  addr, sizeof(addr));
	else
		inet_ntop(AF_INET, &((struct sockaddr_in *) res->ai_addr)->sin_addr,
				  addr, sizeof(addr));
	freeaddrinfo(res);
	free(name);
	snprintf(out, ZKL_SERVER_ADDR_MAX, "%s:%d", addr, sv->port);
	return true;
}

/*
 * The connect string the client library gets (malloc'd): every server as
 * "address:port", then the chroot.  With r, host names are looked up
 * (the resolver thread: a failure is recorded in r); without, NULL when
 * one is a name.  NULL also when out of memory.  hosts passed the
 * setting's check hook.  Plain C.
 */
static char *
session_hosts_for_library(const char *hosts, ZklResolve *r)
{
	int			max = zkl_hosts_count(hosts);
	const char *chroot = zkl_hosts_end(hosts);
	size_t		cap = (size_t) max * (ZKL_SERVER_ADDR_MAX + 1) + strlen(chroot) + 1;
	ZklServer  *sv = calloc(max, sizeof(ZklServer));
	char	   *out = calloc(1, cap);
	char		problem[256];
	int			n = sv && out ? zkl_hosts_parse(hosts, sv, problem, sizeof(problem)) : -1;

	for (int i = 0; i < n; i++)
	{
		char		addr[ZKL_SERVER_ADDR_MAX];

		if (!zkl_hosts_numeric(&sv[i], addr) &&
			(r == NULL || !session_lookup(r, &sv[i], addr)))
		{
			n = -1;
			break;
		}
		if (i > 0)
			strcat(out, ",");
		strcat(out, addr);
	}
	free(sv);
	if (n < 0)
	{
		free(out);
		return NULL;
	}
	strcat(out, chroot);
	return out;
}

/* The resolver thread: plain C, every signal blocked. */
static void *
session_resolve_main(void *arg)
{
	ZklResolve *r = (ZklResolve *) arg;
	char	   *buf = session_hosts_for_library(r->hosts, r);

	pthread_mutex_lock(&zkl_sess_sync_mu);
	r->result = buf;
	r->done = true;
	if (r->abandoned)
	{
		free(r->result);
		free(r->failed_host);
		free(r->hosts);
		free(r);
	}
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	zkl_sess_sync_kick();
	return NULL;
}

/* Let the resolver thread free the request when it is done. */
static void
session_resolve_abandon(ZklResolve *r)
{
	if (zkl_sess_sync_let_go(&r->done, &r->abandoned))
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
 * connect string with addresses (malloc'd).  A connect string of
 * addresses only needs no thread.
 */
static char *
session_resolve(void)
{
	ZklResolve *r;
	pthread_t	thread;
	sigset_t	all;
	sigset_t	saved;
	bool		started;
	bool		done;
	char	   *result = NULL;
	char	   *failed = NULL;
	int			gai_error = 0;

	result = session_hosts_for_library(zkl_hosts, NULL);
	if (result != NULL)
		return result;
	r = calloc(1, sizeof(ZklResolve));
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
		zkl_sess_wait_for_as(ZKL_WAIT_CONNECT, session_resolved, r,
							 TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
														 zkl_connect_timeout));
	}
	PG_CATCH();
	{
		session_resolve_abandon(r);
		PG_RE_THROW();
	}
	PG_END_TRY();
	pthread_mutex_lock(&zkl_sess_sync_mu);
	done = r->done;
	pthread_mutex_unlock(&zkl_sess_sync_mu);
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
	if (zkl_guc_use_auth() && strchr(zkl_auth, ':') == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("zklock.auth must have the form user:password")));

	/*
	 * In a backend that has not loaded zklock, zklock.auth from the
	 * configuration file is a placeholder any role can SHOW.  Only
	 * preloading hides it everywhere, so credentials demand it.
	 */
	if (zkl_guc_use_auth() && !zkl_guc_preloaded)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("zklock.auth requires zklock in shared_preload_libraries"),
				 errdetail("Without it, other roles can read the credentials in backends that have not loaded zklock."),
				 errhint("Add zklock to shared_preload_libraries and restart the server.")));
}

/*
 * Start the handle and the lease thread with every signal blocked.  With
 * a handle, *init_errno is 0, or why the lease thread did not start.
 */
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
		zh = zkl_sess_tls_init(hosts, session_watcher, zkl_session_timeout,
							   zkl_sess_log_callback, zkl_sess_sasl_params());
	else if (zkl_sess_sasl_params() != NULL)
		zh = zookeeper_init_sasl(hosts, session_watcher, zkl_session_timeout,
								 NULL, NULL, 0, zkl_sess_log_callback,
								 zkl_sess_sasl_params());
	else
		zh = zookeeper_init2(hosts, session_watcher, zkl_session_timeout,
							 NULL, NULL, 0, zkl_sess_log_callback);
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
		zkl_sess_state_start(zh);
		*init_errno = zkl_sess_lease_start() ? 0 : errno;
	}
	pthread_sigmask(SIG_SETMASK, &saved, NULL);
	return zh;
}

/* Servers in the connect string of the session being opened. */
static int	zkl_open_servers = 1;

/* When every server had closed a connection at once; 0: not yet. */
static TimestampTz zkl_open_all_closed_at = 0;

/*
 * The connect wait ends once connected (or settled otherwise), or once
 * every server has closed a connection at once and still no connection
 * has opened a fifth of connect_timeout later (at least a second): what
 * servers over their maxClientCnxns do.  Servers that are starting, or
 * electing a leader, close new connections too, but only until they serve;
 * a backend that came in that moment must wait for them, not fail.  The
 * closes wake this wait (zkl_sess_log_callback), and the library's next
 * attempts close again.  It also ends once every server's certificate
 * was refused over TLS (session_tls.c).  Under mu.
 */
static bool
session_open_settled(void *arg)
{
	char		unused[1];
	TimestampTz now;

	if (zkl_sess_state_settled(arg) || zkl_sess_tls_all_refused_locked())
		return true;
	if (zkl_sess_log_closed_locked(unused, sizeof(unused)) < zkl_open_servers)
		return false;
	now = GetCurrentTimestamp();
	if (zkl_open_all_closed_at == 0)
		zkl_open_all_closed_at = now;
	return now - zkl_open_all_closed_at >=
		(int64) Max(1000, zkl_connect_timeout / 5) * 1000;
}

/*
 * Every server closed its connections at once, before answering.  Without
 * zklock.ssl the likelier cause is a port that speaks only TLS (a server
 * answers a plain connect request there by closing); else what ZooKeeper
 * does past maxClientCnxns, the connections allowed from one client
 * address.
 */
pg_noreturn static void
session_raise_closed(const char *servers)
{
	int64		open = -1;
	char		cnxns[512];

	if (zkl_stats_available())
	{
		int64		v[ZKL_SS_COUNT];
		int64		dealloc;
		TimestampTz reset;

		zkl_stats_session_values(v, &dealloc, &reset);
		open = v[ZKL_SS_OPEN];
	}
	if (open >= 0)
		snprintf(cnxns, sizeof(cnxns), "ZooKeeper servers limit the connections from one client address (maxClientCnxns, per server); every backend that uses zklock holds one, and this cluster holds " INT64_FORMAT " open now (zk_stat_sessions.sessions_open). Raise maxClientCnxns on the servers, or use fewer backends with zklock (a pooler).",
				 open);
	else
		snprintf(cnxns, sizeof(cnxns), "ZooKeeper servers limit the connections from one client address (maxClientCnxns, per server), and every backend that uses zklock holds one. Raise maxClientCnxns on the servers, or use fewer backends with zklock (a pooler).");
	ereport(ERROR,
			(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
			 errmsg("could not connect to ZooKeeper at \"%s\"", zkl_hosts),
			 errdetail("Every server closed the connection at once, before answering: %s.",
					   servers),
			 zkl_ssl ? errhint("%s", cnxns) :
			 errhint("A port that serves only TLS (secureClientPort) closes plain-text connections so: if the servers' ports are TLS, turn zklock.ssl on and set its files. Otherwise: %s",
					 cnxns)));
}

/* Open a new session and wait for it to connect, within connect_timeout. */
static void
session_open(void)
{
	zhandle_t  *zh;
	bool		connected;
	bool		auth_failed;
	bool		sasl_failed = false;
	char		sasl_why[600];
	int			init_errno;
	char	   *hosts;
	int			closed;
	char		closed_list[512];

	TimestampTz t_begin = GetCurrentTimestamp();
	TimestampTz deadline;
	TimestampTz t_resolved;
	TimestampTz t_started;

	session_check_settings();
	zkl_sess_wait_init();
	if (!zkl_exit_registered)
	{
		on_proc_exit(session_at_exit, (Datum) 0);
		/*
		 * A delete's answer renews the lease; a removal of child watches
		 * uncovers the nodes that a later listing's watch covered.
		 */
		zkl_sess_cleanup_on_delete(zkl_sess_lease_renew_locked);
		zkl_sess_cleanup_on_unwatched_children(zkl_sess_lease_dir_unwatched_locked);
		zkl_exit_registered = true;
	}
	if (!pg_strong_random(zkl_uuid_bytes, sizeof(zkl_uuid_bytes)))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not generate random lock node id")));
	zkl_sess_request_set_identity();
	zkl_sess_tls_prepare();
	zkl_sess_sasl_prepare();
	hosts = session_resolve();
	t_resolved = GetCurrentTimestamp();
	zkl_open_servers = zkl_hosts_count(hosts);
	zkl_open_all_closed_at = 0;
	pthread_mutex_lock(&zkl_sess_sync_mu);
	zkl_sess_log_closed_reset_locked();
	pthread_mutex_unlock(&zkl_sess_sync_mu);

	PG_TRY();
	{
		zkl_sess_tls_servers(hosts);
		zkl_sess_sasl_servers(hosts);
		zkl_sess_sync_acquire_fds(ZKL_LIBRARY_FDS);
	}
	PG_CATCH();
	{
		free(hosts);
		PG_RE_THROW();
	}
	PG_END_TRY();
	zkl_library_fds = ZKL_LIBRARY_FDS;
	zoo_set_debug_level(ZOO_LOG_LEVEL_WARN);

	/*
	 * Each server's attempt gets its share of connect_timeout (at least a
	 * second, unless that is all of it): one that accepts and never
	 * answers, frozen or overloaded, must not use it all before the
	 * library tries the next.  Left to itself, the library waits two
	 * thirds of the session timeout.
	 */
	zoo_set_connect_timeout(Max(zkl_connect_timeout / zkl_open_servers,
								Min(zkl_connect_timeout, 1000)));

	/*
	 * Our callbacks only copy an answer under mu and kick the eventfd:
	 * run them on the IO thread, which read the answer, instead of handing
	 * each to a completion thread (two context switches fewer per answer,
	 * and one thread fewer per session).  And send a request from the
	 * main thread when the socket takes it at once, instead of waking the
	 * IO thread for it (not with TLS: the IO thread sends all there).
	 */
	zoo_set_io_completions(1);
	zoo_set_caller_sends(1);

	zh = session_start_handle(hosts, &init_errno);
	t_started = GetCurrentTimestamp();
	free(hosts);
	if (zh != NULL && init_errno != 0)
	{
		session_close();
		zkl_sess_log_flush();
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("could not start the lease thread of the ZooKeeper session"),
				 errdetail_internal("%s", strerror(init_errno)),
				 errhint("Check the limits on processes and threads of the server's user (ulimit -u, the cgroup's pids.max) and its memory.")));
	}
	if (zh == NULL && (init_errno == EAGAIN || init_errno == ENOMEM))
	{
		/* The client library's thread could not start (C client patch 0030). */
		zkl_sess_sync_release_fds(zkl_library_fds);
		zkl_library_fds = 0;
		zkl_sess_log_flush();
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("could not start the ZooKeeper client's thread"),
				 errdetail_internal("%s", strerror(init_errno)),
				 errhint("Check the limits on processes and threads of the server's user (ulimit -u, the cgroup's pids.max) and its memory.")));
	}
	if (zh == NULL)
	{
		zkl_sess_sync_release_fds(zkl_library_fds);
		zkl_library_fds = 0;
		zkl_sess_log_flush();
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
	 * sends them again after each reconnect, and keeps them while it is
	 * between two connection attempts (C client patch 0008).  A session
	 * without them must not open: its nodes would get no protecting ACL.
	 */
	if (zkl_guc_use_auth())
	{
		int			rc = zoo_add_auth(zh, "digest", zkl_auth,
									  (int) strlen(zkl_auth),
									  session_ignore, NULL);

		if (rc != ZOK)
		{
			session_close();
			ereport(ERROR,
					(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
					 errmsg("could not give the credentials of zklock.auth to the ZooKeeper session"),
					 errdetail_internal("%s", zerror(rc))));
		}
	}
	/* The watcher may have run before zh was published. */
	session_catch_up(zh);

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
		zkl_sess_tls_wait_connect(session_open_settled, deadline);
	}
	PG_CATCH();
	{
		session_close();
		PG_RE_THROW();
	}
	PG_END_TRY();

	pthread_mutex_lock(&zkl_sess_sync_mu);
	connected = zkl_sess_state_connected_locked();
	auth_failed = zkl_sess_state_auth_failed_locked();
	closed = zkl_sess_log_closed_locked(closed_list, sizeof(closed_list));
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	if (connected)
	{
		PG_TRY();
		{
			zkl_sess_sasl_learn_identity(zh,
										 TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
																	 zkl_connect_timeout));
		}
		PG_CATCH();
		{
			session_close();
			PG_RE_THROW();
		}
		PG_END_TRY();
		zkl_sess_tls_share();
		if (zkl_log_sessions)
			session_log_open(zh, t_begin, t_resolved, t_started);
		return;
	}
	if (auth_failed)
		sasl_failed = zkl_sess_sasl_failure(zh, sasl_why, sizeof(sasl_why));
	session_close();
	if (sasl_failed)
		zkl_sess_sasl_raise_failed(sasl_why);
	if (closed >= zkl_open_servers)
	{
		zkl_sess_tls_explain_closed(deadline);
		session_raise_closed(closed_list);
	}
	if (auth_failed)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION),
				 errmsg("ZooKeeper authentication failed"),
				 errhint("Check the credentials in zklock.auth.")));
	zkl_sess_tls_report_failure();
	ereport(ERROR,
			(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
			 errmsg("could not connect to ZooKeeper at \"%s\"", zkl_hosts),
			 errdetail("No server answered within %d ms.", zkl_connect_timeout),
			 errhint("Check that the ensemble is running and reachable, and zklock.connect_timeout.")));
}

/*
 * Close a lost session before a new one opens; zklock.log_sessions logs it
 * as it logs the close at exit, with how it was lost.
 */
static void
session_close_lost(bool ended)
{
	TimestampTz begin = GetCurrentTimestamp();
	char	   *id = zkl_log_sessions ? session_id_text() : NULL;

	session_close();
	if (id != NULL)
		ereport(LOG,
				(errmsg("ZooKeeper session %s closed in %.3f ms after it was lost",
						id, session_ms(begin, GetCurrentTimestamp())),
				 ended ?
				 errdetail("The ensemble expired it or refused its credentials.") :
				 errdetail("No answer within the session timeout proved that the ensemble still knew it.")));
}

static void session_connect(bool acquiring, TimestampTz deadline);

/*
 * The wait for a reconnect ends when the session is connected or lost, or
 * when every server was refused over TLS (its certificate, or the CA and
 * CRL files in force): the library keeps trying, but this call need not
 * wait for it.  Under mu.
 */
static bool
session_reconnect_settled(void *arg)
{
	return zkl_sess_state_settled(arg) || zkl_sess_tls_all_refused_locked();
}

/* The reconnect wait ended with every server refused, nothing settled. */
static bool
session_reconnect_refused(void)
{
	bool		refused;

	pthread_mutex_lock(&zkl_sess_sync_mu);
	refused = !zkl_sess_state_settled(NULL) && zkl_sess_tls_all_refused_locked();
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	return refused;
}

/*
 * The session did not reconnect: say why, with what a TLS refusal
 * recorded (a revoked certificate, a CA or CRL file that could not be
 * loaded) when there was one.
 */
pg_noreturn static void
session_raise_lost(long waited_ms)
{
	char		why[1400];

	if (zkl_sess_tls_refusal_detail(why, sizeof(why)))
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("lost connection to ZooKeeper at \"%s\"", zkl_hosts),
				 errdetail("A reconnect over TLS was refused: %s.", why),
				 errhint("Check zklock.ssl_ca_file, zklock.ssl_crl_file and the servers' certificates.")));
	ereport(ERROR,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 errmsg("lost connection to ZooKeeper at \"%s\"", zkl_hosts),
			 errdetail("No server answered within %ld ms.", waited_ms)));
}

/*
 * In the postmaster (shared_preload_libraries): prepare what every
 * backend's first session would (the TLS files, trust and context), before
 * any thread exists; the backends fork with it.
 */
void
zkl_session_preload(void)
{
	zkl_sess_tls_preload();
}

/*
 * Make sure this backend has a connected session: open one lazily on the
 * first call or after loss; wait for a reconnect within connect_timeout.
 */
void
zkl_session_connect(void)
{
	session_connect(false, 0);
}

/*
 * zkl_session_connect for an acquisition with a deadline (0: none).  A
 * session that is reconnecting lives until the ensemble expires it, so the
 * wait for the reconnect lasts until the deadline, or without one for the
 * session timeout, never less than connect_timeout: a lock timeout longer
 * than connect_timeout is not cut short while the session may come back.
 */
void
zkl_session_connect_until(TimestampTz deadline)
{
	session_connect(true, deadline);
}

/*
 * Both of the above: an acquisition waits for a reconnect until its
 * deadline, anything else within connect_timeout.
 */
static void
session_connect(bool acquiring, TimestampTz deadline)
{
	bool		have;
	bool		ended;
	bool		lost;
	bool		connected;
	int			timeout_ms;
	TimestampTz now;
	TimestampTz until;

	zkl_sess_log_flush();
	pthread_mutex_lock(&zkl_sess_sync_mu);
	have = zkl_sess_state_handle() != NULL;
	ended = zkl_sess_state_ended_locked();
	lost = ended || zkl_sess_lease_lost_locked();
	connected = zkl_sess_state_connected_locked();
	timeout_ms = zkl_sess_state_timeout_ms_locked() > 0 ?
		zkl_sess_state_timeout_ms_locked() : zkl_session_timeout;
	pthread_mutex_unlock(&zkl_sess_sync_mu);

	if (have && lost)
	{
		session_close_lost(ended);
		have = false;
	}
	if (!have)
	{
		session_open();
		return;
	}
	zkl_sess_tls_follow_settings();
	if (connected)
	{
		zkl_sess_cleanup_issue();
		return;
	}
	now = GetCurrentTimestamp();
	until = TimestampTzPlusMilliseconds(now, zkl_connect_timeout);
	if (acquiring && deadline != 0 && deadline > until)
		until = deadline;
	else if (acquiring && deadline == 0 && timeout_ms > zkl_connect_timeout)
		until = TimestampTzPlusMilliseconds(now, timeout_ms);
	if (!zkl_sess_wait_for_as(ZKL_WAIT_CONNECT, session_reconnect_settled, NULL,
							  until) ||
		session_reconnect_refused())
		session_raise_lost((long) ((until - now) / 1000));
	/* Connected again, or lost: look again. */
	session_connect(acquiring, deadline);
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

/* What zk_session() shows; opens nothing. */
void
zkl_session_info(ZklSessionInfo *info)
{
	zhandle_t  *zh;

	memset(info, 0, sizeof(*info));
	pthread_mutex_lock(&zkl_sess_sync_mu);
	zh = zkl_sess_state_handle();
	if (zh == NULL)
		info->state = "closed";
	else if (zkl_sess_lease_lost_locked())
		info->state = "lost";
	else
		info->state = zkl_sess_state_name_locked();
	info->session_id = zkl_sess_state_session_id_locked();
	info->timeout_ms = zkl_sess_state_timeout_ms_locked();
	info->watch_events = zkl_sess_request_watch_events_locked();
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	if (zh != NULL && strcmp(info->state, "connected") == 0)
	{
		const char *server = zoo_get_current_server(zh);

		info->server = server ? pstrdup(server) : NULL;
	}
}

/* The deletes a release waits for: queued up to mark; a give-up's wait. */
typedef struct ZklReleaseMark
{
	uint64		mark;
	bool		give_up;
} ZklReleaseMark;

/*
 * Whether the deletes queued up to the mark are settled: answered, or
 * gone with the session (expired or closed, so its nodes are gone, or
 * lost, so that the ensemble may have expired it and nothing this backend
 * waits for can make its nodes go sooner); for a give-up's wait, also
 * once the connection is down.  Caller holds mu.
 */
static bool
session_releases_settled(void *arg)
{
	const ZklReleaseMark *m = (const ZklReleaseMark *) arg;

	return zkl_sess_state_handle() == NULL ||
		zkl_sess_state_ended_locked() ||
		zkl_sess_lease_lost_locked() ||
		!zkl_sess_cleanup_pending_locked(m->mark) ||
		(m->give_up && !zkl_sess_state_connected_locked());
}

/*
 * Wait until every delete queued so far (releases, given-up waiters) is
 * answered, so that the nodes are gone for every other client.  Bounded
 * by the session timeout: a session disconnected that long is expired by
 * the ensemble, and its nodes go with it.  Interrupts are not served: this
 * runs after a commit too, where nothing may raise; a cancel or terminate
 * request ends the wait and the caller says so.  *timeout_ms gets the
 * bound used.
 *
 * An acquisition giving up (give_up) waits so only while the connection
 * is up: its error is on its way already (a cancel, statement_timeout),
 * and with the connection down its deletes can only go after the
 * reconnect (they stay queued): the wait ends as soon as the library
 * sees the connection down (at once when it is down already, within two
 * thirds of the session timeout for a connection gone silent), and says
 * so (ZKL_RELEASE_DISCONNECTED).
 */
ZklReleaseWait
zkl_session_await_releases(int *timeout_ms, bool give_up)
{
	ZklReleaseMark m;
	ZklReleaseWait result;

	m.give_up = give_up;
	pthread_mutex_lock(&zkl_sess_sync_mu);
	m.mark = zkl_sess_cleanup_mark_locked();
	*timeout_ms = zkl_sess_state_timeout_ms_locked() > 0 ?
		zkl_sess_state_timeout_ms_locked() : zkl_session_timeout;
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	zkl_sess_cleanup_issue();
	result = zkl_sess_wait_held(session_releases_settled, &m,
								TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
															*timeout_ms));
	if (result == ZKL_RELEASE_CONFIRMED && give_up)
	{
		pthread_mutex_lock(&zkl_sess_sync_mu);
		m.give_up = false;
		if (!session_releases_settled(&m))
			result = ZKL_RELEASE_DISCONNECTED;
		pthread_mutex_unlock(&zkl_sess_sync_mu);
	}
	return result;
}
