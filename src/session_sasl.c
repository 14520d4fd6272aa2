/*-------------------------------------------------------------------------
 *
 * session_sasl.c
 *	  SASL authentication of the session (zklock.sasl_mechanism): the
 *	  settings and the password file checked and read before the handle
 *	  starts, Cyrus SASL started once per process, the parameters and
 *	  callbacks the client library authenticates with on every connection,
 *	  and a refused authentication, or a server that demands one, reported
 *	  as what it is.
 *
 * The client library (built WITH_CYRUS_SASL) runs the SASL exchange after
 * each connection's handshake, before the session counts as connected, on
 * its I/O thread; it calls our callbacks there for the user and the
 * password.  They only hand out what the main thread read when the session
 * opened: the password file is read once per session open (as
 * zklock.ssl_key_file is, with the same checks of owner and mode), never by
 * the I/O thread, and nothing ever prompts (C client patch 0041).  A failed
 * exchange ends the handle with ZOO_AUTH_FAILED_STATE, which the session
 * watcher hears (C client patch 0040), and zoo_sasl_failure gives Cyrus's
 * reason, or the server's refusal.
 *
 * Cyrus SASL is thread-safe only with mutexes of the caller's, given with
 * sasl_set_mutex before sasl_client_init: both are called once per process,
 * by the main thread, before the first handle with SASL starts.
 *
 * The server name of the exchange (zoo_sasl_params_t's host): for
 * DIGEST-MD5, ZooKeeper's servers call themselves zk-sasl-md5 (their
 * digest-uri is zookeeper/zk-sasl-md5) whatever host they run on; for
 * GSSAPI it is the host part of the servers' principal.  zklock.sasl_host
 * overrides both.
 *
 * Threads: session_sasl_user and session_sasl_secret run on the I/O thread;
 * they read sasl_session, which the main thread writes before the handle
 * starts and frees only after it closed (zkl_sess_sasl_prepare of the next
 * session, or the exit).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sasl/sasl.h>

#include "miscadmin.h"

#include "guc.h"
#include "session_int.h"
#include "session_sasl.h"

/* The longest password file read (its first line is the password). */
#define ZKL_SASL_PASSWORD_MAX 1024

/*
 * A callback as sasl_callback_t holds it: Cyrus calls it with the
 * arguments its id implies.  Through void (*)(void), the type GCC
 * accepts any function pointer cast to.
 */
#define ZKL_SASL_PROC(f) ((int (*) (void)) (void (*) (void)) (f))

/* The DIGEST-MD5 server name of every ZooKeeper server. */
#define ZKL_SASL_DIGEST_HOST "zk-sasl-md5"

/* One session's SASL parameters; malloc'd, see the threads above. */
typedef struct ZklSaslSession
{
	char	   *mechanism;
	char	   *service;
	char	   *host;			/* NULL: the library's choice */
	char	   *user;
	sasl_secret_t *secret;		/* the password, NULL without one */
	sasl_callback_t callbacks[4];
	zoo_sasl_params_t params;
} ZklSaslSession;

static ZklSaslSession *sasl_session = NULL;
static bool sasl_started = false;

/*
 * The sasl id the server assigns this session (its answer to whoAmI), as
 * its ACLs carry it; "" without SASL.  Written once per session open,
 * before the session's first request, by the whoAmI completion (I/O
 * thread, under mu) or the main thread; read by any thread after.
 */
static char sasl_own_id[512];
static bool sasl_whoami_answered = false;	/* under mu */
static int	sasl_whoami_rc = ZOK;	/* under mu */

/* Cyrus SASL's mutexes: plain pthread mutexes.  Any thread. */
static void *
session_sasl_mutex_alloc(void)
{
	pthread_mutex_t *m = malloc(sizeof(pthread_mutex_t));

	if (m != NULL && pthread_mutex_init(m, NULL) != 0)
	{
		free(m);
		m = NULL;
	}
	return m;
}

static int
session_sasl_mutex_lock(void *m)
{
	return pthread_mutex_lock(m) == 0 ? SASL_OK : SASL_FAIL;
}

static int
session_sasl_mutex_unlock(void *m)
{
	return pthread_mutex_unlock(m) == 0 ? SASL_OK : SASL_FAIL;
}

static void
session_sasl_mutex_free(void *m)
{
	if (m != NULL)
	{
		pthread_mutex_destroy(m);
		free(m);
	}
}

/* SASL_CB_USER and SASL_CB_AUTHNAME; the I/O thread, plain C. */
static int
session_sasl_user(void *context, int id, const char **result, unsigned *len)
{
	ZklSaslSession *s = context;

	if (result == NULL || (id != SASL_CB_USER && id != SASL_CB_AUTHNAME))
		return SASL_BADPARAM;
	*result = s->user;
	if (len != NULL)
		*len = (unsigned) strlen(s->user);
	return SASL_OK;
}

/* SASL_CB_PASS: the password as read at open; the I/O thread, plain C. */
static int
session_sasl_secret(sasl_conn_t *conn, void *context, int id,
					sasl_secret_t **psecret)
{
	ZklSaslSession *s = context;

	if (conn == NULL || psecret == NULL || id != SASL_CB_PASS ||
		s->secret == NULL)
		return SASL_BADPARAM;
	*psecret = s->secret;
	return SASL_OK;
}

/* Free a session's parameters, the password wiped first. */
static void
session_sasl_free(ZklSaslSession *s)
{
	if (s == NULL)
		return;
	if (s->secret != NULL)
	{
		explicit_bzero(s->secret->data, s->secret->len);
		free(s->secret);
	}
	free(s->mechanism);
	free(s->service);
	free(s->host);
	free(s->user);
	free(s);
}

/* strdup or raise; NULL stays NULL. */
static char *
session_sasl_strdup(const char *s)
{
	char	   *copy;

	if (s == NULL)
		return NULL;
	copy = strdup(s);
	if (copy == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	return copy;
}

/* Start Cyrus SASL's client side, once per process. */
static void
session_sasl_start(void)
{
	int			sr;

	if (sasl_started)
		return;
	sasl_set_mutex(session_sasl_mutex_alloc, session_sasl_mutex_lock,
				   session_sasl_mutex_unlock, session_sasl_mutex_free);
	sr = sasl_client_init(NULL);
	if (sr != SASL_OK)
		ereport(ERROR,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("could not initialize SASL authentication for ZooKeeper"),
				 errdetail_internal("Cyrus SASL: %s",
									sasl_errstring(sr, NULL, NULL))));
	sasl_started = true;
}

/* A setting that the mechanism needs, or raise. */
static void
session_sasl_require(const char *setting, const char *value)
{
	if (value == NULL || value[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s is not set, but zklock.sasl_mechanism is %s",
						setting, zkl_sasl_mechanism),
				 errhint("Set %s in postgresql.conf, or set zklock.sasl_mechanism to ''.",
						 setting)));
}

/*
 * The password file's ownership and mode, as for zklock.ssl_key_file (and
 * PostgreSQL's ssl_key_file): owned by the database user (then 0600 or
 * less) or by root (then 0640 or less).
 */
static void
session_sasl_check_mode(const char *path, const struct stat *st)
{
	if (!S_ISREG(st->st_mode))
		ereport(ERROR,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("ZooKeeper SASL password file \"%s\" is not a regular file",
						path)));
	if (st->st_uid != geteuid() && st->st_uid != 0)
		ereport(ERROR,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("ZooKeeper SASL password file \"%s\" must be owned by the database user or root",
						path)));
	if ((st->st_uid == geteuid() && (st->st_mode & (S_IRWXG | S_IRWXO))) ||
		(st->st_uid == 0 && (st->st_mode & (S_IWGRP | S_IXGRP | S_IRWXO))))
		ereport(ERROR,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("ZooKeeper SASL password file \"%s\" has group or world access",
						path),
				 errdetail("File must have permissions u=rw (0600) or less if owned by the database user, or permissions u=rw,g=r (0640) or less if owned by root.")));
}

/*
 * zklock.sasl_password_file's first line, as a Cyrus secret (malloc'd), or
 * raise naming the file.  A FIFO or device is refused, not waited on.
 */
static sasl_secret_t *
session_sasl_read_password(void)
{
	const char *value = zkl_sasl_password_file;
	char	   *path;
	int			fd;
	struct stat st;
	char		buf[ZKL_SASL_PASSWORD_MAX + 1];
	ssize_t		n;
	size_t		len;
	sasl_secret_t *secret;

	session_sasl_require("zklock.sasl_password_file", value);
	path = is_absolute_path(value) ? pstrdup(value) :
		psprintf("%s/%s", DataDir, value);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0 || fstat(fd, &st) != 0)
	{
		int			save_errno = errno;

		if (fd >= 0)
			close(fd);
		errno = save_errno;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not open ZooKeeper SASL password file \"%s\": %m",
						path),
				 errdetail("The file is zklock.sasl_password_file.")));
	}
	PG_TRY();
	{
		session_sasl_check_mode(path, &st);
	}
	PG_CATCH();
	{
		close(fd);
		PG_RE_THROW();
	}
	PG_END_TRY();
	do
		n = read(fd, buf, ZKL_SASL_PASSWORD_MAX);
	while (n < 0 && errno == EINTR);
	if (n < 0)
	{
		int			save_errno = errno;

		close(fd);
		errno = save_errno;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not read ZooKeeper SASL password file \"%s\": %m",
						path)));
	}
	close(fd);
	buf[n] = '\0';
	len = strcspn(buf, "\r\n");
	buf[len] = '\0';
	if (len == 0)
	{
		explicit_bzero(buf, sizeof(buf));
		ereport(ERROR,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("ZooKeeper SASL password file \"%s\" holds no password",
						path),
				 errdetail("The password is the file's first line.")));
	}
	secret = malloc(sizeof(sasl_secret_t) + len);
	if (secret == NULL)
	{
		explicit_bzero(buf, sizeof(buf));
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	}
	secret->len = len;
	memcpy(secret->data, buf, len + 1);
	explicit_bzero(buf, sizeof(buf));
	return secret;
}

/* Whether new sessions authenticate with SASL (zklock.sasl_mechanism). */
bool
zkl_sess_sasl_enabled(void)
{
	return zkl_sasl_mechanism != NULL && zkl_sasl_mechanism[0] != '\0';
}

/*
 * Before a session's handle starts (main thread, no handle open): check
 * the settings, read the password, start Cyrus SASL, and make the
 * parameters the handle authenticates with.  Nothing when SASL is off.
 */
void
zkl_sess_sasl_prepare(void)
{
	ZklSaslSession *s;

	session_sasl_free(sasl_session);
	sasl_session = NULL;
	sasl_own_id[0] = '\0';
	if (!zkl_sess_sasl_enabled())
		return;
	if (strcmp(zkl_sasl_mechanism, "GSSAPI") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("SASL mechanism GSSAPI (Kerberos) is not supported yet"),
				 errhint("Use DIGEST-MD5, or set zklock.sasl_mechanism to ''.")));
	session_sasl_require("zklock.sasl_service", zkl_sasl_service);
	session_sasl_require("zklock.sasl_user", zkl_sasl_user);
	session_sasl_start();

	s = calloc(1, sizeof(ZklSaslSession));
	if (s == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	sasl_session = s;
	s->mechanism = session_sasl_strdup(zkl_sasl_mechanism);
	s->service = session_sasl_strdup(zkl_sasl_service);
	s->host = session_sasl_strdup(zkl_sasl_host != NULL && zkl_sasl_host[0] ?
								  zkl_sasl_host : ZKL_SASL_DIGEST_HOST);
	s->user = session_sasl_strdup(zkl_sasl_user);
	s->secret = session_sasl_read_password();

	s->callbacks[0].id = SASL_CB_USER;
	s->callbacks[0].proc = ZKL_SASL_PROC(session_sasl_user);
	s->callbacks[0].context = s;
	s->callbacks[1].id = SASL_CB_AUTHNAME;
	s->callbacks[1].proc = ZKL_SASL_PROC(session_sasl_user);
	s->callbacks[1].context = s;
	s->callbacks[2].id = SASL_CB_PASS;
	s->callbacks[2].proc = ZKL_SASL_PROC(session_sasl_secret);
	s->callbacks[2].context = s;
	s->callbacks[3].id = SASL_CB_LIST_END;

	s->params.service = s->service;
	s->params.host = s->host;
	s->params.mechlist = s->mechanism;
	s->params.callbacks = s->callbacks;
}

/* The parameters of the session being opened, NULL without SASL. */
zoo_sasl_params_t *
zkl_sess_sasl_params(void)
{
	return sasl_session != NULL ? &sasl_session->params : NULL;
}

/*
 * The handle ended in ZOO_AUTH_FAILED_STATE with SASL on: whether the SASL
 * exchange was what failed, and then why into out.  zh is still open;
 * its I/O thread no longer touches the exchange once it failed.
 */
bool
zkl_sess_sasl_failure(zhandle_t *zh, char *out, size_t cap)
{
	if (sasl_session == NULL)
		return false;
	return zoo_sasl_failure(zh, out, cap) != 0;
}

/* The whoAmI answer; the I/O thread, plain C. */
static void
session_sasl_whoami_done(int rc, struct ClientInfo_vector *ids,
						 const void *data)
{
	(void) data;
	pthread_mutex_lock(&zkl_sess_sync_mu);
	sasl_whoami_rc = rc;
	for (int i = 0; rc == ZOK && ids != NULL && i < ids->count; i++)
		if (ids->data[i].authScheme != NULL && ids->data[i].user != NULL &&
			strcmp(ids->data[i].authScheme, "sasl") == 0)
		{
			strlcpy(sasl_own_id, ids->data[i].user, sizeof(sasl_own_id));
			break;
		}
	sasl_whoami_answered = true;
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	zkl_sess_sync_kick();
}

static bool
session_sasl_whoami_ready(void *arg)
{
	(void) arg;
	return sasl_whoami_answered;
}

/*
 * The session has connected, so it has authenticated: ask the server which
 * sasl id it assigned (whoAmI, C client patch 0044), the id that the
 * session's "auth" ACL entries name, so that the ACL checks of
 * session_request.c know this session's own entries.  A server that does
 * not answer it by the deadline, or refuses it (older than 3.7), leaves
 * the id DIGEST-MD5 servers assign: the user name.  Main thread.
 */
void
zkl_sess_sasl_learn_identity(zhandle_t *zh, TimestampTz deadline)
{
	int			rc;
	bool		answered;

	pthread_mutex_lock(&zkl_sess_sync_mu);
	sasl_own_id[0] = '\0';
	sasl_whoami_answered = false;
	sasl_whoami_rc = ZOK;
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	if (sasl_session == NULL)
		return;
	rc = zoo_awhoami(zh, session_sasl_whoami_done, NULL);
	answered = rc == ZOK &&
		zkl_sess_wait_for(session_sasl_whoami_ready, NULL, deadline);
	pthread_mutex_lock(&zkl_sess_sync_mu);
	if (rc == ZOK)
		rc = answered ? sasl_whoami_rc : ZOPERATIONTIMEOUT;
	if (sasl_own_id[0] == '\0')
		strlcpy(sasl_own_id, sasl_session->user, sizeof(sasl_own_id));
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	if (rc != ZOK)
		ereport(LOG,
				(errmsg("ZooKeeper did not say which SASL identity it assigned this session, assuming \"%s\"",
						sasl_own_id),
				 errdetail_internal("whoAmI: %s", zerror(rc))));
}

/* Whether this session has a SASL identity (ACL scheme sasl). */
bool
zkl_sess_sasl_has_identity(void)
{
	return sasl_own_id[0] != '\0';
}

/* Whether an ACL entry's id is this session's SASL identity; any thread. */
bool
zkl_sess_sasl_is_own_id(const char *scheme, const char *id)
{
	return sasl_own_id[0] != '\0' && strcmp(scheme, "sasl") == 0 &&
		strcmp(id, sasl_own_id) == 0;
}

/* Raise the error for a SASL exchange that failed (why, from above). */
void
zkl_sess_sasl_raise_failed(const char *why)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION),
			 errmsg("SASL authentication with ZooKeeper at \"%s\" failed",
					zkl_hosts),
			 errdetail("Mechanism %s as user \"%s\": %s.",
					   sasl_session->mechanism, sasl_session->user, why),
			 errhint("Check zklock.sasl_user and zklock.sasl_password_file against the users of the servers' JAAS Server section.")));
}

/*
 * Raise the error for a request the server refused because the session
 * has not authenticated with SASL (ZSESSIONCLOSEDREQUIRESASLAUTH): the
 * server closes the connection, and would close every one.  failed is the
 * request's primary message, for path.
 */
void
zkl_sess_sasl_raise_required(const char *failed, const char *path)
{
	if (zkl_sess_sasl_enabled())
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION),
				 errmsg(failed, path),
				 errdetail("The ZooKeeper server closed the session because it requires SASL authentication, which did not succeed for this session (mechanism %s).",
						   zkl_sasl_mechanism),
				 errhint("Check the servers' authProvider and enforce.auth settings and zklock.sasl_mechanism.")));
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION),
			 errmsg(failed, path),
			 errdetail("The ZooKeeper server closed the session because it requires SASL authentication, and zklock.sasl_mechanism is not set."),
			 errhint("Set zklock.sasl_mechanism and its credentials (zklock.sasl_user, zklock.sasl_password_file for DIGEST-MD5).")));
}
