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
 * GSSAPI it is the host part of the servers' principal, each server's host
 * as written in zklock.hosts (named per connection by the prepare callback,
 * C client patch 0045), never an address looked up in reverse.
 * zklock.sasl_host overrides both.
 *
 * GSSAPI's credentials come from zklock.sasl_keytab alone, for
 * zklock.sasl_principal, into a memory cache of the session's own: never
 * the process's default cache, which KRB5CCNAME (or, on PostgreSQL 16 and
 * later, a client's delegated credentials) may fill with someone else's
 * tickets.  They are got when the session opens, by a thread of their own
 * (the KDC may take Kerberos' own timeouts, 18 to 27 s for one that never
 * answers) while the main thread waits with its latch, within
 * zklock.connect_timeout and open to a cancel; a thread given up on ends
 * by itself.  They are handed to each exchange with SASL_GSS_CREDS, and
 * renewed from the keytab before an exchange when less than
 * ZKL_SASL_TICKET_MARGIN remains (on the I/O thread: a KDC that never
 * answers then holds that thread for Kerberos' timeouts).  GSS's texts name neither Kerberos nor GSSAPI; the messages
 * here do.
 *
 * Threads: session_sasl_acquire_main runs on the acquiring thread, on its
 * own ZklSaslAcquire only (handed over under mu).  session_sasl_user,
 * session_sasl_secret and session_sasl_prepare_conn run on the I/O thread; they read sasl_session,
 * which the main thread writes before the handle starts and frees only
 * after it closed (zkl_sess_sasl_prepare of the next session), and only
 * session_sasl_prepare_conn changes it (the credentials and their cache)
 * while the handle runs.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gssapi/gssapi.h>
#include <gssapi/gssapi_ext.h>
#include <gssapi/gssapi_krb5.h>
#include <krb5/krb5.h>
#include <sasl/sasl.h>

#include "miscadmin.h"

#include "guc.h"
#include "hosts.h"
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

/*
 * GSSAPI: credentials with less time left than this are renewed from the
 * keytab before an exchange, so that a reconnect of a long-lived backend
 * never offers an expired ticket (MIT does not renew them by itself when
 * they are given to Cyrus explicitly).
 */
#define ZKL_SASL_TICKET_MARGIN 60

/* The longest name of a memory cache of credentials. */
#define ZKL_SASL_CCACHE_LEN 64

/* The DIGEST-MD5 server name of every ZooKeeper server. */
#define ZKL_SASL_DIGEST_HOST "zk-sasl-md5"

/* A server of the connect string, as GSSAPI names it. */
typedef struct ZklSaslServer
{
	struct sockaddr_storage addr;	/* where the library connects */
	char		host[256];		/* as written in zklock.hosts */
} ZklSaslServer;

/* One session's SASL parameters; malloc'd, see the threads above. */
typedef struct ZklSaslSession
{
	char	   *mechanism;
	char	   *service;
	char	   *host;			/* NULL: each server's own (GSSAPI) */
	char	   *user;			/* DIGEST-MD5's user, GSSAPI's principal */
	sasl_secret_t *secret;		/* the password, NULL without one */
	gss_cred_id_t cred;			/* GSSAPI: from the keytab */
	char		ccache[ZKL_SASL_CCACHE_LEN];	/* GSSAPI: their memory cache */
	char	   *keytab;			/* GSSAPI: the keytab's path */
	int			nservers;
	ZklSaslServer *servers;
	sasl_callback_t callbacks[4];
	zoo_sasl_params_t params;
} ZklSaslSession;

static ZklSaslSession *sasl_session = NULL;
static bool sasl_started = false;

static void session_sasl_drop_ccache(ZklSaslSession *s);

/*
 * The sasl id the server assigns this session (its answer to whoAmI), as
 * its ACLs carry it: known, unknown (a server that did not answer whoAmI
 * with an id: zklock never guesses it, since servers may strip the realm
 * or host, or map it by auth_to_local), or none (no SASL).  Written by the
 * main thread only, under mu, once per session open before the session's
 * first request; the main thread reads it freely, other threads under mu.
 */
typedef enum ZklSaslIdState
{
	ZKL_SASL_ID_NONE,
	ZKL_SASL_ID_KNOWN,
	ZKL_SASL_ID_UNKNOWN
} ZklSaslIdState;

static char sasl_own_id[512];
static ZklSaslIdState sasl_id_state = ZKL_SASL_ID_NONE;

/*
 * The whoAmI under way (under mu): its number, so that a late answer to an
 * earlier one is dropped, and the answer, which only the main thread
 * copies into sasl_own_id.
 */
static uint64 sasl_whoami_seq = 0;
static bool sasl_whoami_answered = false;
static int	sasl_whoami_rc = ZOK;
static char sasl_whoami_id[512];

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
	if (s->cred != GSS_C_NO_CREDENTIAL)
	{
		OM_uint32	minor;

		gss_release_cred(&minor, &s->cred);
	}
	session_sasl_drop_ccache(s);
	free(s->keytab);
	free(s->servers);
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
	char		buf[ZKL_SASL_PASSWORD_MAX + 2];
	ssize_t		n = 0;
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
	/* one byte more than a password may have: a longer one is refused */
	len = 0;
	while (len < ZKL_SASL_PASSWORD_MAX + 1)
	{
		n = read(fd, buf + len, ZKL_SASL_PASSWORD_MAX + 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += n;
	}
	if (n < 0)
	{
		int			save_errno = errno;

		close(fd);
		explicit_bzero(buf, sizeof(buf));
		errno = save_errno;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not read ZooKeeper SASL password file \"%s\": %m",
						path)));
	}
	close(fd);
	buf[len] = '\0';
	len = strcspn(buf, "\r\n");
	buf[len] = '\0';
	if (len > ZKL_SASL_PASSWORD_MAX)
	{
		explicit_bzero(buf, sizeof(buf));
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("password in ZooKeeper SASL password file \"%s\" is too long",
						path),
				 errdetail("The password is the file's first line, of at most %d bytes.",
						   ZKL_SASL_PASSWORD_MAX)));
	}
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

/*
 * Wipe and free the password of the last session (DIGEST-MD5): at its
 * close, and when zklock.sasl_mechanism becomes '' with no handle open (an
 * open handle keeps it for its reconnects, until its close).  Main thread.
 */
void
zkl_sess_sasl_wipe_password(void)
{
	if (sasl_session == NULL || sasl_session->secret == NULL ||
		zkl_sess_state_handle() != NULL)
		return;
	explicit_bzero(sasl_session->secret->data, sasl_session->secret->len);
	free(sasl_session->secret);
	sasl_session->secret = NULL;
}

/* GSS's own words for a major and minor status, into out. */
static void
session_sasl_gss_text(OM_uint32 major, OM_uint32 minor, char *out, size_t cap)
{
	size_t		used = 0;
	struct
	{
		OM_uint32	code;
		int			type;
	}			parts[2] = {{major, GSS_C_GSS_CODE}, {minor, GSS_C_MECH_CODE}};

	out[0] = '\0';
	for (int i = 0; i < 2; i++)
	{
		OM_uint32	ctx = 0;

		if (parts[i].code == 0)
			continue;
		do
		{
			OM_uint32	st;
			OM_uint32	lmin;
			gss_buffer_desc msg = GSS_C_EMPTY_BUFFER;

			st = gss_display_status(&lmin, parts[i].code, parts[i].type,
									GSS_C_NO_OID, &ctx, &msg);
			if (GSS_ERROR(st))
				break;
			if (used + 3 < cap)
				used += snprintf(out + used, cap - used, "%s%.*s",
								 used ? ": " : "", (int) msg.length,
								 (char *) msg.value);
			gss_release_buffer(&lmin, &msg);
		} while (ctx != 0);
	}
}

/*
 * The keytab's ownership and mode, as for the password file; a missing
 * keytab is named.
 */
static char *
session_sasl_keytab_path(void)
{
	const char *value = zkl_sasl_keytab;
	char	   *path;
	struct stat st;

	session_sasl_require("zklock.sasl_keytab", value);
	path = is_absolute_path(value) ? pstrdup(value) :
		psprintf("%s/%s", DataDir, value);
	if (stat(path, &st) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not access ZooKeeper Kerberos keytab \"%s\": %m",
						path),
				 errdetail("The file is zklock.sasl_keytab.")));
	if (!S_ISREG(st.st_mode))
		ereport(ERROR,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("ZooKeeper Kerberos keytab \"%s\" is not a regular file",
						path)));
	if ((st.st_uid != geteuid() && st.st_uid != 0) ||
		(st.st_uid == geteuid() && (st.st_mode & (S_IRWXG | S_IRWXO))) ||
		(st.st_uid == 0 && (st.st_mode & (S_IWGRP | S_IXGRP | S_IRWXO))))
		ereport(ERROR,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("ZooKeeper Kerberos keytab \"%s\" has group or world access, or another owner",
						path),
				 errdetail("File must be owned by the database user with permissions u=rw (0600) or less, or by root with permissions u=rw,g=r (0640) or less.")));
	return path;
}

/* Destroy a memory cache of credentials by name; plain C. */
static void
session_sasl_destroy_ccache(const char *name)
{
	krb5_context kc;
	krb5_ccache cc;

	if (krb5_init_context(&kc) == 0)
	{
		if (krb5_cc_resolve(kc, name, &cc) == 0)
			krb5_cc_destroy(kc, cc);
		krb5_free_context(kc);
	}
}

/* Destroy a session's memory cache of credentials, if any; plain C. */
static void
session_sasl_drop_ccache(ZklSaslSession *s)
{
	if (s->ccache[0] == '\0')
		return;
	session_sasl_destroy_ccache(s->ccache);
	s->ccache[0] = '\0';
}

/*
 * GSSAPI: credentials of principal from keytab alone, in a new memory
 * cache (its name into ccache, ZKL_SASL_CCACHE_LEN bytes), never the
 * process's default cache (KRB5CCNAME may hold anyone's tickets: a
 * client's delegated credentials, on PostgreSQL 16 and later).  MIT gets
 * the initial ticket from the KDC here, which may take Kerberos' own
 * timeouts.  Returns GSS's major status (*minor its minor one); on
 * failure nothing is left.  Plain C, any thread.
 */
static OM_uint32
session_sasl_get_cred(const char *principal, const char *keytab,
					  gss_cred_id_t *cred, char *ccache, OM_uint32 *minor)
{
	static unsigned int counter = 0;
	gss_buffer_desc name_buf;
	gss_name_t	name = GSS_C_NO_NAME;
	gss_key_value_element_desc elements[2];
	gss_key_value_set_desc store;
	gss_OID_set_desc mechs;
	OM_uint32	major;
	OM_uint32	lmin;

	*cred = GSS_C_NO_CREDENTIAL;
	snprintf(ccache, ZKL_SASL_CCACHE_LEN, "MEMORY:zklock-%d-%u", (int) getpid(),
			 __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED));
	name_buf.value = (void *) principal;
	name_buf.length = strlen(principal);
	major = gss_import_name(minor, &name_buf, GSS_KRB5_NT_PRINCIPAL_NAME,
							&name);
	if (!GSS_ERROR(major))
	{
		elements[0].key = "client_keytab";
		elements[0].value = keytab;
		elements[1].key = "ccache";
		elements[1].value = ccache;
		store.count = 2;
		store.elements = elements;
		mechs.count = 1;
		mechs.elements = (gss_OID) gss_mech_krb5;
		major = gss_acquire_cred_from(minor, name, GSS_C_INDEFINITE, &mechs,
									  GSS_C_INITIATE, &store, cred,
									  NULL, NULL);
		gss_release_name(&lmin, &name);
	}
	if (GSS_ERROR(major))
	{
		session_sasl_destroy_ccache(ccache);
		ccache[0] = '\0';
	}
	return major;
}

/*
 * New credentials for the session, in place of its own; on failure it
 * keeps them.  Plain C: the I/O thread, before an exchange whose ticket
 * runs out (session_sasl_prepare_conn).
 */
static OM_uint32
session_sasl_acquire(ZklSaslSession *s, OM_uint32 *minor)
{
	gss_cred_id_t cred;
	char		ccache[ZKL_SASL_CCACHE_LEN];
	OM_uint32	major = session_sasl_get_cred(s->user, s->keytab, &cred,
											  ccache, minor);
	OM_uint32	lmin;

	if (GSS_ERROR(major))
		return major;
	if (s->cred != GSS_C_NO_CREDENTIAL)
		gss_release_cred(&lmin, &s->cred);
	session_sasl_drop_ccache(s);
	s->cred = cred;
	strlcpy(s->ccache, ccache, sizeof(s->ccache));
	return major;
}

/*
 * The first credentials of a session, got on a thread of their own so
 * that the main thread waits for the KDC with its latch: a cancel is
 * served and zklock.connect_timeout bounds the wait.  A thread given up
 * on finishes by itself and frees what it got.  Under mu: done,
 * abandoned and the results.
 */
typedef struct ZklSaslAcquire
{
	char	   *principal;
	char	   *keytab;
	bool		done;
	bool		abandoned;
	OM_uint32	major;
	OM_uint32	minor;
	gss_cred_id_t cred;
	char		ccache[ZKL_SASL_CCACHE_LEN];
} ZklSaslAcquire;

static void
session_sasl_acquire_free(ZklSaslAcquire *a)
{
	OM_uint32	lmin;

	if (a->cred != GSS_C_NO_CREDENTIAL)
		gss_release_cred(&lmin, &a->cred);
	if (a->ccache[0] != '\0')
		session_sasl_destroy_ccache(a->ccache);
	free(a->principal);
	free(a->keytab);
	free(a);
}

/* The acquiring thread; plain C. */
static void *
session_sasl_acquire_main(void *arg)
{
	ZklSaslAcquire *a = arg;
	gss_cred_id_t cred;
	char		ccache[ZKL_SASL_CCACHE_LEN];
	OM_uint32	minor = 0;
	OM_uint32	major = session_sasl_get_cred(a->principal, a->keytab, &cred,
											  ccache, &minor);
	bool		abandoned;

	pthread_mutex_lock(&zkl_sess_sync_mu);
	a->major = major;
	a->minor = minor;
	a->cred = cred;
	strlcpy(a->ccache, ccache, sizeof(a->ccache));
	a->done = true;
	abandoned = a->abandoned;
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	if (abandoned)
		session_sasl_acquire_free(a);
	else
		zkl_sess_sync_kick();
	return NULL;
}

static bool
session_sasl_acquire_done(void *arg)
{
	return ((ZklSaslAcquire *) arg)->done;
}

/* Let go of an acquisition: freed now if done, else by its thread. */
static void
session_sasl_acquire_abandon(ZklSaslAcquire *a)
{
	if (zkl_sess_sync_let_go(&a->done, &a->abandoned))
		session_sasl_acquire_free(a);
}

/*
 * The session's first credentials, within zklock.connect_timeout, or
 * raise naming Kerberos and GSSAPI.  Main thread.
 */
static void
session_sasl_gss_creds(ZklSaslSession *s)
{
	ZklSaslAcquire *a;
	pthread_t	thread;
	pthread_attr_t attr;
	sigset_t	all;
	sigset_t	saved;
	int			err;
	bool		done = false;
	char		why[512];

	s->keytab = session_sasl_strdup(session_sasl_keytab_path());
	a = calloc(1, sizeof(ZklSaslAcquire));
	if (a == NULL || (a->principal = strdup(s->user)) == NULL ||
		(a->keytab = strdup(s->keytab)) == NULL)
	{
		if (a != NULL)
			session_sasl_acquire_free(a);
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	}
	a->cred = GSS_C_NO_CREDENTIAL;
	/* The thread takes no signal of the backend's. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &saved);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	err = pthread_create(&thread, &attr, session_sasl_acquire_main, a);
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &saved, NULL);
	if (err != 0)
	{
		session_sasl_acquire_free(a);
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("could not start a thread to get Kerberos credentials"),
				 errdetail_internal("%s", strerror(err))));
	}
	PG_TRY();
	{
		done = zkl_sess_wait_for_as(ZKL_WAIT_CONNECT, session_sasl_acquire_done, a,
									TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
																zkl_connect_timeout));
	}
	PG_CATCH();
	{
		session_sasl_acquire_abandon(a);
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (!done)
	{
		session_sasl_acquire_abandon(a);
		ereport(ERROR,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("could not get Kerberos credentials of \"%s\" for SASL GSSAPI",
						s->user),
				 errdetail("The KDC did not answer within %d ms.",
						   zkl_connect_timeout),
				 errhint("Check that the KDCs of krb5.conf are up and reachable, and zklock.connect_timeout.")));
	}
	if (GSS_ERROR(a->major))
	{
		session_sasl_gss_text(a->major, a->minor, why, sizeof(why));
		session_sasl_acquire_free(a);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION),
				 errmsg("could not get Kerberos credentials of \"%s\" for SASL GSSAPI from keytab \"%s\"",
						s->user, s->keytab),
				 errdetail_internal("GSS: %s", why),
				 errhint("Check the KDC, zklock.sasl_principal and zklock.sasl_keytab.")));
	}
	s->cred = a->cred;
	strlcpy(s->ccache, a->ccache, sizeof(s->ccache));
	a->cred = GSS_C_NO_CREDENTIAL;
	a->ccache[0] = '\0';
	session_sasl_acquire_free(a);
}

/*
 * GSSAPI: the connect string's servers, each with the host written in
 * zklock.hosts for the address the library connects to (hosts: the
 * resolved connect string, in the same order).
 */
static void
session_sasl_servers(ZklSaslSession *s, const char *hosts)
{
	int			max = zkl_hosts_count(zkl_hosts);
	ZklServer  *given = palloc0(sizeof(ZklServer) * max);
	char		problem[256];
	int			n = zkl_hosts_parse(zkl_hosts, given, problem, sizeof(problem));
	const char *p = hosts;
	const char *end = zkl_hosts_end(hosts);

	s->servers = calloc(Max(n, 1), sizeof(ZklSaslServer));
	if (s->servers == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	for (int i = 0; i < n && p < end; i++)
	{
		const char *comma = memchr(p, ',', end - p);
		size_t		len = comma ? (size_t) (comma - p) : (size_t) (end - p);
		char		text[ZKL_SERVER_ADDR_MAX];
		char	   *colon;
		ZklSaslServer *sv = &s->servers[s->nservers];

		if (len < sizeof(text) && given[i].host_len < sizeof(sv->host))
		{
			memcpy(text, p, len);
			text[len] = '\0';
			colon = strrchr(text, ':');
			if (colon != NULL)
			{
				*colon = '\0';
				if (inet_pton(AF_INET, text,
							  &((struct sockaddr_in *) &sv->addr)->sin_addr) == 1)
				{
					sv->addr.ss_family = AF_INET;
					((struct sockaddr_in *) &sv->addr)->sin_port = htons(atoi(colon + 1));
				}
				else if (inet_pton(AF_INET6, text,
								   &((struct sockaddr_in6 *) &sv->addr)->sin6_addr) == 1)
				{
					sv->addr.ss_family = AF_INET6;
					((struct sockaddr_in6 *) &sv->addr)->sin6_port = htons(atoi(colon + 1));
				}
				if (sv->addr.ss_family != 0)
				{
					memcpy(sv->host, given[i].host, given[i].host_len);
					sv->host[given[i].host_len] = '\0';
					s->nservers++;
				}
			}
		}
		p += len + (comma ? 1 : 0);
	}
	pfree(given);
}

/* Whether two socket addresses are the same address and port; plain C. */
static bool
session_sasl_same_addr(const struct sockaddr_storage *a, const struct sockaddr *b)
{
	if (a->ss_family != b->sa_family)
		return false;
	if (b->sa_family == AF_INET)
	{
		const struct sockaddr_in *x = (const struct sockaddr_in *) a;
		const struct sockaddr_in *y = (const struct sockaddr_in *) b;

		return x->sin_port == y->sin_port &&
			x->sin_addr.s_addr == y->sin_addr.s_addr;
	}
	if (b->sa_family == AF_INET6)
	{
		const struct sockaddr_in6 *x = (const struct sockaddr_in6 *) a;
		const struct sockaddr_in6 *y = (const struct sockaddr_in6 *) b;

		return x->sin6_port == y->sin6_port &&
			memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr)) == 0;
	}
	return false;
}

/* Seconds left on the session's credentials, 0 when expired; plain C. */
static OM_uint32
session_sasl_cred_lifetime(ZklSaslSession *s)
{
	OM_uint32	minor;
	OM_uint32	lifetime = 0;

	if (GSS_ERROR(gss_inquire_cred(&minor, s->cred, NULL, &lifetime, NULL,
								   NULL)))
		return 0;
	return lifetime;
}

/*
 * The library's prepare callback (C client patch 0045), GSSAPI only; the
 * I/O thread, plain C.  Without conn: the server's name as written in
 * zklock.hosts, for the service principal service/host.  With conn: the
 * session's credentials from the keytab.
 */
static int
session_sasl_prepare_conn(sasl_conn_t *conn, const struct sockaddr *server,
						  char *host, size_t hostlen, void *arg)
{
	ZklSaslSession *s = arg;

	if (conn == NULL)
	{
		for (int i = 0; i < s->nservers; i++)
			if (session_sasl_same_addr(&s->servers[i].addr, server))
			{
				strlcpy(host, s->servers[i].host, hostlen);
				break;
			}
		return SASL_OK;
	}
	if (session_sasl_cred_lifetime(s) < ZKL_SASL_TICKET_MARGIN)
	{
		OM_uint32	minor;

		/* On failure the old ones stay: the exchange names the cause. */
		(void) session_sasl_acquire(s, &minor);
	}
	return sasl_setprop(conn, SASL_GSS_CREDS, s->cred);
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
	pthread_mutex_lock(&zkl_sess_sync_mu);
	sasl_own_id[0] = '\0';
	sasl_id_state = ZKL_SASL_ID_NONE;
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	if (!zkl_sess_sasl_enabled())
		return;
	session_sasl_require("zklock.sasl_service", zkl_sasl_service);
	if (zkl_sess_sasl_gssapi())
		session_sasl_require("zklock.sasl_principal", zkl_sasl_principal);
	else
		session_sasl_require("zklock.sasl_user", zkl_sasl_user);
	session_sasl_start();

	s = calloc(1, sizeof(ZklSaslSession));
	if (s == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	sasl_session = s;
	s->cred = GSS_C_NO_CREDENTIAL;
	s->mechanism = session_sasl_strdup(zkl_sasl_mechanism);
	s->service = session_sasl_strdup(zkl_sasl_service);
	s->params.service = s->service;
	s->params.mechlist = s->mechanism;
	if (zkl_sess_sasl_gssapi())
	{
		s->host = session_sasl_strdup(zkl_sasl_host != NULL && zkl_sasl_host[0] ?
									  zkl_sasl_host : NULL);
		s->user = session_sasl_strdup(zkl_sasl_principal);
		session_sasl_gss_creds(s);
		s->callbacks[0].id = SASL_CB_LIST_END;
		s->params.host = s->host;
		s->params.callbacks = s->callbacks;
		s->params.prepare = session_sasl_prepare_conn;
		s->params.prepare_arg = s;
		return;
	}
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

	s->params.host = s->host;
	s->params.callbacks = s->callbacks;
}

/* Whether the session's mechanism is GSSAPI (Kerberos). */
bool
zkl_sess_sasl_gssapi(void)
{
	return zkl_sess_sasl_enabled() && strcmp(zkl_sasl_mechanism, "GSSAPI") == 0;
}

/*
 * GSSAPI: the servers of the session being opened (hosts: the resolved
 * connect string), each named as zklock.hosts writes it.  Before the
 * handle starts.
 */
void
zkl_sess_sasl_servers(const char *hosts)
{
	if (sasl_session != NULL && zkl_sess_sasl_gssapi())
		session_sasl_servers(sasl_session, hosts);
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
	uint64		seq = (uint64) (uintptr_t) data;

	pthread_mutex_lock(&zkl_sess_sync_mu);
	if (seq != sasl_whoami_seq)
	{
		/* an answer the main thread gave up on */
		pthread_mutex_unlock(&zkl_sess_sync_mu);
		return;
	}
	sasl_whoami_rc = rc;
	for (int i = 0; rc == ZOK && ids != NULL && i < ids->count; i++)
		if (ids->data[i].authScheme != NULL && ids->data[i].user != NULL &&
			strcmp(ids->data[i].authScheme, "sasl") == 0)
		{
			strlcpy(sasl_whoami_id, ids->data[i].user, sizeof(sasl_whoami_id));
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
 * not name it by the deadline, or refuses whoAmI (older than 3.7), leaves
 * it unknown: then no sasl entry is taken for another identity's (the
 * server's id for the session may be the principal without its realm or
 * host, or mapped by auth_to_local, so zklock does not guess it).  Main
 * thread.
 */
void
zkl_sess_sasl_learn_identity(zhandle_t *zh, TimestampTz deadline)
{
	int			rc;
	bool		answered;
	uint64		seq;

	pthread_mutex_lock(&zkl_sess_sync_mu);
	sasl_own_id[0] = '\0';
	sasl_id_state = ZKL_SASL_ID_NONE;
	seq = ++sasl_whoami_seq;
	sasl_whoami_answered = false;
	sasl_whoami_rc = ZOK;
	sasl_whoami_id[0] = '\0';
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	if (sasl_session == NULL)
		return;
	rc = zoo_awhoami(zh, session_sasl_whoami_done, (const void *) (uintptr_t) seq);
	answered = rc == ZOK &&
		zkl_sess_wait_for_as(ZKL_WAIT_CONNECT, session_sasl_whoami_ready, NULL,
							 deadline);
	pthread_mutex_lock(&zkl_sess_sync_mu);
	if (rc == ZOK)
		rc = answered ? sasl_whoami_rc : ZOPERATIONTIMEOUT;
	if (rc == ZOK && sasl_whoami_id[0] != '\0')
	{
		strlcpy(sasl_own_id, sasl_whoami_id, sizeof(sasl_own_id));
		sasl_id_state = ZKL_SASL_ID_KNOWN;
	}
	else
		sasl_id_state = ZKL_SASL_ID_UNKNOWN;
	/* a late answer is dropped */
	sasl_whoami_seq++;
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	if (sasl_id_state == ZKL_SASL_ID_UNKNOWN)
		ereport(LOG,
				(errmsg("ZooKeeper did not say which SASL identity it assigned this session"),
				 errdetail_internal("whoAmI: %s.  No sasl ACL entry of a lock directory is taken for another identity's.",
									rc == ZOK ? "no sasl id in the answer" : zerror(rc))));
}

/* Whether this session has a SASL identity (ACL scheme sasl).  Main thread. */
bool
zkl_sess_sasl_has_identity(void)
{
	return sasl_id_state != ZKL_SASL_ID_NONE;
}

/*
 * Whether an ACL entry's id may be this session's SASL identity: it is,
 * or the identity is unknown and the entry is a sasl one.  Any thread.
 */
bool
zkl_sess_sasl_is_own_id(const char *scheme, const char *id)
{
	bool		own;

	if (strcmp(scheme, "sasl") != 0)
		return false;
	pthread_mutex_lock(&zkl_sess_sync_mu);
	own = sasl_id_state == ZKL_SASL_ID_UNKNOWN ||
		(sasl_id_state == ZKL_SASL_ID_KNOWN && strcmp(id, sasl_own_id) == 0);
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	return own;
}

/* Raise the error for a SASL exchange that failed (why, from above). */
void
zkl_sess_sasl_raise_failed(const char *why)
{
	size_t		len = strlen(why);

	/* Cyrus' and GSS' text may end its sentence itself */
	const char *stop = len > 0 && why[len - 1] == '.' ? "" : ".";

	if (strcmp(sasl_session->mechanism, "GSSAPI") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION),
				 errmsg("SASL authentication (Kerberos, GSSAPI) with ZooKeeper at \"%s\" failed",
						zkl_hosts),
				 errdetail("Mechanism GSSAPI as principal \"%s\": %s%s",
						   sasl_session->user, why, stop),
				 errhint("Check the KDC, zklock.sasl_principal, zklock.sasl_keytab, and that the servers' principal is %s/<host as written in zklock.hosts> (or zklock.sasl_host).",
						 sasl_session->service)));
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION),
			 errmsg("SASL authentication with ZooKeeper at \"%s\" failed",
					zkl_hosts),
			 errdetail("Mechanism %s as user \"%s\": %s%s",
					   sasl_session->mechanism, sasl_session->user, why, stop),
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
			 errhint("Set zklock.sasl_mechanism and its credentials: zklock.sasl_user and zklock.sasl_password_file for DIGEST-MD5, zklock.sasl_principal and zklock.sasl_keytab for GSSAPI.")));
}
