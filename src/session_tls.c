/*-------------------------------------------------------------------------
 *
 * session_tls.c
 *	  The session over TLS (zklock.ssl): the files checked before anything
 *	  starts, the handle started with zookeeper_init_ssl, the certificate's
 *	  subject as the session's identity in ACLs, and a connection that
 *	  never completes reported as the TLS failure it is.
 *
 * The 3.8.0 client checks little and says less: it reads the files on its
 * I/O thread at each connection attempt, and a failed handshake is only
 * another attempt that did not connect.  So the backend checks the files
 * itself before the handle starts, as PostgreSQL checks its own ssl files
 * (a key readable by group or others is refused), and raises an error that
 * names the file.  When the session has not connected by half of
 * zklock.connect_timeout, a probe thread makes one TLS handshake with each
 * server in turn, with the same files, to learn why; the error at the end
 * of connect_timeout names the server and the cause.  The probe is plain C
 * on its own thread with every signal blocked (the thread rules of
 * session_int.h): it shares only its own struct, under zkl_sess_sync_mu.
 *
 * The identity: ZooKeeper's x509 provider names a TLS session by its
 * client certificate's subject, as Java's X500Principal.getName() writes
 * it (RFC 2253).  tls_format_dn writes it the same way, so that the ACL
 * checks of session_request.c can tell our own entries from others'.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "lib/stringinfo.h"
#include "miscadmin.h"

#include "guc.h"
#include "session_int.h"
#include "session_tls.h"

/* How long the probe waits for the server's verdict on our certificate. */
#define ZKL_TLS_VERDICT_MS 1000

/* The files and identity of the session being opened; main thread. */
static char *tls_ca = NULL;
static char *tls_cert = NULL;
static char *tls_key = NULL;
static char *tls_cert_string = NULL;	/* "ca,cert,key" for the library */
static char *tls_hosts = NULL;	/* the resolved connect string */

/*
 * The certificate's subject as the x509 provider names it; set before the
 * handle starts and unchanged while it lives, so the library's threads
 * read it without a lock, as they read own_digest.
 */
static char tls_own_id[1024];

/* One probe of the servers' handshakes; shared with its thread under mu. */
typedef struct ZklTlsProbe
{
	char	   *hosts;
	char	   *ca;
	char	   *cert;
	char	   *key;
	int			budget_ms;
	char		server[64];		/* the first server that failed */
	char		detail[512];	/* why, or "" when every handshake passed */
	bool		done;
	bool		abandoned;		/* the main thread let go; the thread frees */
} ZklTlsProbe;

static ZklTlsProbe *tls_probe = NULL;

/* X500Principal's RFC 2253 keywords; other attributes are written as OIDs. */
static const struct
{
	int			nid;
	const char *keyword;
}			tls_keywords[] =
{
	{NID_commonName, "CN"},
	{NID_countryName, "C"},
	{NID_localityName, "L"},
	{NID_stateOrProvinceName, "ST"},
	{NID_organizationName, "O"},
	{NID_organizationalUnitName, "OU"},
	{NID_streetAddress, "STREET"},
	{NID_domainComponent, "DC"},
	{NID_userId, "UID"},
};

/* OpenSSL's last error as text, for errdetail_internal. */
static const char *
tls_openssl_error(void)
{
	unsigned long e = ERR_get_error();
	const char *reason = e ? ERR_reason_error_string(e) : NULL;

	ERR_clear_error();
	return reason ? reason : "no further information";
}

/* A setting's file as an absolute path (malloc'd): relative to PGDATA. */
static char *
tls_path(const char *setting, const char *value)
{
	char	   *path;

	if (value == NULL || value[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("%s is not set, but zklock.ssl is on", setting),
				 errhint("Set %s in postgresql.conf, or turn zklock.ssl off.",
						 setting)));
	path = is_absolute_path(value) ? strdup(value) :
		strdup(psprintf("%s/%s", DataDir, value));
	if (path == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	return path;
}

/*
 * The key file's ownership and mode, as PostgreSQL checks ssl_key_file: a
 * regular file, owned by the database user (then 0600 or less) or by root
 * (then 0640 or less).
 */
static void
tls_check_key_file(const char *path)
{
	struct stat st;

	if (stat(path, &st) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not access ZooKeeper TLS key file \"%s\": %m",
						path),
				 errdetail("The file is zklock.ssl_key_file.")));
	if (!S_ISREG(st.st_mode))
		ereport(ERROR,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("ZooKeeper TLS key file \"%s\" is not a regular file",
						path)));
	if (st.st_uid != geteuid() && st.st_uid != 0)
		ereport(ERROR,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("ZooKeeper TLS key file \"%s\" must be owned by the database user or root",
						path)));
	if ((st.st_uid == geteuid() && (st.st_mode & (S_IRWXG | S_IRWXO))) ||
		(st.st_uid == 0 && (st.st_mode & (S_IWGRP | S_IXGRP | S_IRWXO))))
		ereport(ERROR,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("ZooKeeper TLS key file \"%s\" has group or world access",
						path),
				 errdetail("File must have permissions u=rw (0600) or less if owned by the database user, or permissions u=rw,g=r (0640) or less if owned by root.")));
}

/* Open one of the files for reading, or raise naming it and its setting. */
static FILE *
tls_open(const char *path, const char *setting)
{
	FILE	   *f = fopen(path, "r");

	if (f == NULL)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not open ZooKeeper TLS file \"%s\": %m", path),
				 errdetail("The file is %s.", setting)));
	return f;
}

/* The first certificate of a PEM file, or raise. */
static X509 *
tls_read_cert(const char *path, const char *setting)
{
	FILE	   *f = tls_open(path, setting);
	X509	   *x = PEM_read_X509(f, NULL, NULL, NULL);

	fclose(f);
	if (x == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("could not load a certificate from ZooKeeper TLS file \"%s\"",
						path),
				 errdetail("The file is %s; it must hold PEM certificates (%s).",
						   setting, tls_openssl_error())));
	return x;
}

/* Refuse a key with a passphrase: zklock has nowhere to keep one. */
static int
tls_no_passphrase(char *buf, int size, int rwflag, void *u)
{
	(void) buf;
	(void) size;
	(void) rwflag;
	(void) u;
	return -1;
}

/* An ASN1 time as text, for a message. */
static char *
tls_time_text(const ASN1_TIME *t)
{
	BIO		   *bio = BIO_new(BIO_s_mem());
	char	   *data;
	long		len;
	char	   *text;

	if (bio == NULL || ASN1_TIME_print(bio, t) != 1)
	{
		BIO_free(bio);
		return pstrdup("?");
	}
	len = BIO_get_mem_data(bio, &data);
	text = pnstrdup(data, len);
	BIO_free(bio);
	return text;
}

/* The client certificate must be valid now: the server would refuse it. */
static void
tls_check_validity(X509 *x, const char *path)
{
	if (X509_cmp_current_time(X509_get0_notAfter(x)) <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("ZooKeeper TLS client certificate \"%s\" has expired",
						path),
				 errdetail("It was valid until %s; the file is zklock.ssl_cert_file.",
						   tls_time_text(X509_get0_notAfter(x)))));
	if (X509_cmp_current_time(X509_get0_notBefore(x)) >= 0)
		ereport(ERROR,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("ZooKeeper TLS client certificate \"%s\" is not yet valid",
						path),
				 errdetail("It is valid from %s; the file is zklock.ssl_cert_file.",
						   tls_time_text(X509_get0_notBefore(x)))));
}

/* Append an attribute value escaped as RFC 2253 (and X500Principal) do. */
static void
tls_append_escaped(StringInfo out, const unsigned char *v, int len)
{
	for (int i = 0; i < len; i++)
	{
		unsigned char c = v[i];

		if (strchr(",+<>;\"\\", c) != NULL ||
			(i == 0 && (c == '#' || c == ' ')) ||
			(i == len - 1 && c == ' '))
			appendStringInfoChar(out, '\\');
		appendStringInfoChar(out, (char) c);
	}
}

/* Append one attribute: keyword=value, or OID=#hex of its DER encoding. */
static bool
tls_append_entry(StringInfo out, X509_NAME_ENTRY *e)
{
	ASN1_OBJECT *obj = X509_NAME_ENTRY_get_object(e);
	ASN1_STRING *data = X509_NAME_ENTRY_get_data(e);
	int			nid = OBJ_obj2nid(obj);

	for (size_t k = 0; k < lengthof(tls_keywords); k++)
	{
		unsigned char *utf8 = NULL;
		int			len;

		if (tls_keywords[k].nid != nid)
			continue;
		len = ASN1_STRING_to_UTF8(&utf8, data);
		if (len < 0)
			return false;
		appendStringInfo(out, "%s=", tls_keywords[k].keyword);
		tls_append_escaped(out, utf8, len);
		OPENSSL_free(utf8);
		return true;
	}
	{
		char		oid[128];
		ASN1_TYPE  *t = ASN1_TYPE_new();
		unsigned char *der = NULL;
		int			len;

		if (t == NULL || OBJ_obj2txt(oid, sizeof(oid), obj, 1) <= 0 ||
			ASN1_TYPE_set1(t, ASN1_STRING_type(data), data) != 1 ||
			(len = i2d_ASN1_TYPE(t, &der)) < 0)
		{
			ASN1_TYPE_free(t);
			return false;
		}
		appendStringInfo(out, "%s=#", oid);
		for (int i = 0; i < len; i++)
			appendStringInfo(out, "%02x", der[i]);
		OPENSSL_free(der);
		ASN1_TYPE_free(t);
		return true;
	}
}

/*
 * The subject as X500Principal.getName() writes it: RDNs last first,
 * separated by ",", the values of one RDN by "+".
 */
static bool
tls_format_dn(const X509_NAME *name, StringInfo out)
{
	int			n = X509_NAME_entry_count(name);
	int			prev_set = -1;

	for (int i = n - 1; i >= 0; i--)
	{
		X509_NAME_ENTRY *e = X509_NAME_get_entry(name, i);
		int			set = X509_NAME_ENTRY_set(e);

		if (i != n - 1)
			appendStringInfoChar(out, set == prev_set ? '+' : ',');
		if (!tls_append_entry(out, e))
			return false;
		prev_set = set;
	}
	return n > 0;
}

/* Forget the files and identity of the last session. */
static void
tls_forget(void)
{
	free(tls_ca);
	free(tls_cert);
	free(tls_key);
	free(tls_cert_string);
	tls_ca = tls_cert = tls_key = tls_cert_string = NULL;
	tls_own_id[0] = '\0';
}

/*
 * Before a session opens: with zklock.ssl on, check the three files as the
 * server and the library would (readable, PEM, the key matches the
 * certificate, which is valid now; the key's mode) and learn the identity.
 * Raises a class-08 error that names the file.
 */
void
zkl_sess_tls_prepare(void)
{
	X509	   *ca;
	X509	   *cert;
	EVP_PKEY   *key;
	FILE	   *f;
	StringInfoData dn;

	tls_forget();
	if (!zkl_ssl)
		return;
	tls_ca = tls_path("zklock.ssl_ca_file", zkl_ssl_ca_file);
	tls_cert = tls_path("zklock.ssl_cert_file", zkl_ssl_cert_file);
	tls_key = tls_path("zklock.ssl_key_file", zkl_ssl_key_file);

	ca = tls_read_cert(tls_ca, "zklock.ssl_ca_file");
	X509_free(ca);
	cert = tls_read_cert(tls_cert, "zklock.ssl_cert_file");
	PG_TRY();
	{
		tls_check_validity(cert, tls_cert);
		tls_check_key_file(tls_key);
		f = tls_open(tls_key, "zklock.ssl_key_file");
		key = PEM_read_PrivateKey(f, NULL, tls_no_passphrase, NULL);
		fclose(f);
		if (key == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
					 errmsg("could not load a private key from ZooKeeper TLS key file \"%s\"",
							tls_key),
					 errdetail("The file is zklock.ssl_key_file; it must hold an unencrypted PEM key, since zklock takes no passphrase (%s).",
							   tls_openssl_error())));
		if (X509_check_private_key(cert, key) != 1)
		{
			EVP_PKEY_free(key);
			ERR_clear_error();
			ereport(ERROR,
					(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
					 errmsg("ZooKeeper TLS key file \"%s\" does not match certificate file \"%s\"",
							tls_key, tls_cert),
					 errdetail("The files are zklock.ssl_key_file and zklock.ssl_cert_file.")));
		}
		EVP_PKEY_free(key);
		initStringInfo(&dn);
		if (!tls_format_dn(X509_get_subject_name(cert), &dn) ||
			dn.len >= (int) sizeof(tls_own_id))
			ereport(ERROR,
					(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
					 errmsg("could not read the subject of ZooKeeper TLS client certificate \"%s\"",
							tls_cert),
					 errdetail("The subject must be a name of at most %d bytes.",
							   (int) sizeof(tls_own_id) - 1)));
		strlcpy(tls_own_id, dn.data, sizeof(tls_own_id));
	}
	PG_FINALLY();
	{
		X509_free(cert);
	}
	PG_END_TRY();
	tls_cert_string = strdup(psprintf("%s,%s,%s", tls_ca, tls_cert, tls_key));
	if (tls_cert_string == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
}

/*
 * Start the handle over TLS; called where zookeeper_init2 would be, with
 * every signal blocked.  zookeeper_init_ssl takes no log callback: the
 * library's first words before it is set go to the server's log.
 */
zhandle_t *
zkl_sess_tls_init(const char *hosts, watcher_fn watcher, int timeout_ms,
			 log_callback_fn log)
{
	zhandle_t  *zh;

	free(tls_hosts);
	tls_hosts = strdup(hosts);
	zh = zookeeper_init_ssl(hosts, tls_cert_string, watcher, timeout_ms,
							NULL, NULL, 0);
	if (zh != NULL)
		zoo_set_log_callback(zh, log);
	return zh;
}

/* Whether this session has a certificate identity (ACL scheme x509). */
bool
zkl_sess_tls_has_identity(void)
{
	return tls_own_id[0] != '\0';
}

/* Whether an ACL entry's id is this session's certificate; any thread. */
bool
zkl_sess_tls_is_own_id(const char *scheme, const char *id)
{
	return tls_own_id[0] != '\0' && strcmp(scheme, "x509") == 0 &&
		strcmp(id, tls_own_id) == 0;
}

/* Milliseconds on a monotonic clock; plain C. */
static int64_t
tls_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait until fd is ready for events, or the deadline; plain C. */
static bool
tls_poll(int fd, short events, int64_t deadline)
{
	struct pollfd p = {.fd = fd, .events = events};
	int64_t		left = deadline - tls_now_ms();

	if (left <= 0)
		return false;
	return poll(&p, 1, (int) left) > 0;
}

/* Why a handshake (or the read after it) failed, in words; plain C. */
static void
tls_explain(ZklTlsProbe *p, SSL *ssl, int err, unsigned long e,
			char *out, size_t cap)
{
	long		verify = SSL_get_verify_result(ssl);
	int			reason = e ? ERR_GET_REASON(e) : 0;
	const char *text = e ? ERR_reason_error_string(e) : NULL;

	if (verify != X509_V_OK)
		snprintf(out, cap, "the server's certificate did not verify with zklock.ssl_ca_file \"%s\": %s",
				 p->ca, X509_verify_cert_error_string(verify));
	else if (e != 0 && ERR_GET_LIB(e) == ERR_LIB_SSL &&
			 reason >= SSL_AD_REASON_OFFSET)
		snprintf(out, cap, "the server refused the client certificate in zklock.ssl_cert_file \"%s\": %s",
				 p->cert, text ? text : "alert");
	else if ((e != 0 && ERR_GET_LIB(e) == ERR_LIB_SSL &&
			  (reason == SSL_R_WRONG_VERSION_NUMBER ||
			   reason == SSL_R_PACKET_LENGTH_TOO_LONG ||
			   reason == SSL_R_UNEXPECTED_EOF_WHILE_READING)) ||
			 err == SSL_ERROR_SYSCALL || err == SSL_ERROR_ZERO_RETURN)
		snprintf(out, cap, "the server ended the connection during the TLS handshake (%s): it may be a plain-text client port, or it may not accept the client certificate in zklock.ssl_cert_file \"%s\"",
				 text ? text : "end of file", p->cert);
	else
		snprintf(out, cap, "the TLS handshake failed: %s",
				 text ? text : "no further information");
}

/*
 * One TLS handshake with one server, then a short read for the server's
 * verdict on our certificate (TLS 1.3 sends it after the handshake).
 * Returns false with *out set when it failed; plain C.
 */
static bool
tls_probe_one(ZklTlsProbe *p, const char *addr, int port, int64_t deadline,
			  char *out, size_t cap)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
	SSL_CTX    *ctx = NULL;
	SSL		   *ssl = NULL;
	int			fd = -1;
	bool		ok = false;
	int64_t		verdict;

	out[0] = '\0';
	if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1)
		return true;			/* not an address we can probe */
	ERR_clear_error();
	ctx = SSL_CTX_new(TLS_client_method());
	if (ctx == NULL ||
		SSL_CTX_load_verify_locations(ctx, p->ca, NULL) != 1 ||
		SSL_CTX_use_certificate_chain_file(ctx, p->cert) != 1 ||
		SSL_CTX_use_PrivateKey_file(ctx, p->key, SSL_FILETYPE_PEM) != 1)
	{
		snprintf(out, cap, "could not load the TLS files: %s",
				 ERR_reason_error_string(ERR_get_error()));
		goto done;
	}
	SSL_CTX_set_default_verify_paths(ctx);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
	{
		snprintf(out, cap, "could not create a socket: %s", strerror(errno));
		goto done;
	}
	if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) != 0 &&
		errno != EINPROGRESS)
	{
		snprintf(out, cap, "could not connect: %s", strerror(errno));
		goto done;
	}
	ssl = SSL_new(ctx);
	if (ssl == NULL || SSL_set_fd(ssl, fd) != 1)
	{
		snprintf(out, cap, "could not start TLS");
		goto done;
	}
	for (;;)
	{
		int			rc = SSL_connect(ssl);
		int			err = rc == 1 ? SSL_ERROR_NONE : SSL_get_error(ssl, rc);

		if (rc == 1)
			break;
		if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE)
		{
			if (!tls_poll(fd, err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT,
						  deadline))
			{
				snprintf(out, cap, "the server did not complete a TLS handshake in time");
				goto done;
			}
			continue;
		}
		if (err == SSL_ERROR_SYSCALL && errno == ECONNREFUSED)
		{
			snprintf(out, cap, "could not connect: %s", strerror(errno));
			goto done;
		}
		tls_explain(p, ssl, err, ERR_peek_last_error(), out, cap);
		goto done;
	}
	/* The server's verdict on our certificate, if it has one. */
	verdict = Min(deadline, tls_now_ms() + ZKL_TLS_VERDICT_MS);
	for (;;)
	{
		char		byte;
		int			rc = SSL_read(ssl, &byte, 1);
		int			err = rc > 0 ? SSL_ERROR_NONE : SSL_get_error(ssl, rc);

		if (err == SSL_ERROR_WANT_READ)
		{
			if (tls_poll(fd, POLLIN, verdict))
				continue;
			ok = true;			/* no complaint: it waits for our request */
			break;
		}
		if (err != SSL_ERROR_NONE)
			tls_explain(p, ssl, err, ERR_peek_last_error(), out, cap);
		else
			ok = true;
		break;
	}
done:
	if (ssl != NULL)
		SSL_free(ssl);
	if (fd >= 0)
		close(fd);
	SSL_CTX_free(ctx);
	ERR_clear_error();
	return ok;
}

static void
tls_probe_free(ZklTlsProbe *p)
{
	free(p->hosts);
	free(p->ca);
	free(p->cert);
	free(p->key);
	free(p);
}

/* The probe thread: each server of the connect string in turn. */
static void *
tls_probe_main(void *arg)
{
	ZklTlsProbe *p = (ZklTlsProbe *) arg;
	int64_t		deadline = tls_now_ms() + p->budget_ms;
	char		detail[sizeof(p->detail)];
	char		server[sizeof(p->server)] = "";
	char	   *slash = strchr(p->hosts, '/');

	detail[0] = '\0';
	if (slash)
		*slash = '\0';
	for (char *entry = strtok(p->hosts, ","); entry && detail[0] == '\0';
		 entry = strtok(NULL, ","))
	{
		char	   *colon = strrchr(entry, ':');

		if (colon == NULL || tls_now_ms() >= deadline)
			break;
		*colon = '\0';
		if (!tls_probe_one(p, entry, atoi(colon + 1), deadline, detail,
						   sizeof(detail)))
			snprintf(server, sizeof(server), "%s:%s", entry, colon + 1);
	}
	pthread_mutex_lock(&zkl_sess_sync_mu);
	memcpy(p->detail, detail, sizeof(detail));
	memcpy(p->server, server, sizeof(server));
	p->done = true;
	if (p->abandoned)
	{
		pthread_mutex_unlock(&zkl_sess_sync_mu);
		tls_probe_free(p);
		return NULL;
	}
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	return NULL;
}

/* Let go of the probe; its thread frees it if it still runs. */
static void
tls_probe_abandon(void)
{
	ZklTlsProbe *p = tls_probe;
	bool		done;

	if (p == NULL)
		return;
	tls_probe = NULL;
	pthread_mutex_lock(&zkl_sess_sync_mu);
	done = p->done;
	p->abandoned = true;
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	if (done)
		tls_probe_free(p);
}

/* Start a probe with the files of this session; quietly none on failure. */
static void
tls_probe_start(int budget_ms)
{
	ZklTlsProbe *p = calloc(1, sizeof(ZklTlsProbe));
	pthread_t	thread;
	sigset_t	all;
	sigset_t	saved;
	bool		started;

	tls_probe_abandon();
	if (p == NULL)
		return;
	p->hosts = tls_hosts ? strdup(tls_hosts) : NULL;
	p->ca = strdup(tls_ca);
	p->cert = strdup(tls_cert);
	p->key = strdup(tls_key);
	p->budget_ms = budget_ms;
	if (!p->hosts || !p->ca || !p->cert || !p->key)
	{
		tls_probe_free(p);
		return;
	}
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &saved);
	started = pthread_create(&thread, NULL, tls_probe_main, p) == 0;
	pthread_sigmask(SIG_SETMASK, &saved, NULL);
	if (!started)
	{
		tls_probe_free(p);
		return;
	}
	pthread_detach(thread);
	tls_probe = p;
}

/*
 * Wait for the session to connect until the deadline, as session_open
 * does; with TLS, start the probe at half time if it has not.
 */
bool
zkl_sess_tls_wait_connect(bool (*ready) (void *), TimestampTz deadline)
{
	TimestampTz now = GetCurrentTimestamp();
	TimestampTz half = now + (deadline - now) / 2;
	volatile bool ok = false;

	tls_probe_abandon();
	if (!zkl_ssl || tls_ca == NULL)
		return zkl_sess_wait_for_as(ZKL_WAIT_CONNECT, ready, NULL, deadline);
	if (zkl_sess_wait_for_as(ZKL_WAIT_CONNECT, ready, NULL, half))
		return true;
	/* Leave the probe a tenth of its time to report. */
	tls_probe_start((int) ((deadline - GetCurrentTimestamp()) / 1000 * 9 / 10));
	PG_TRY();
	{
		ok = zkl_sess_wait_for_as(ZKL_WAIT_CONNECT, ready, NULL, deadline);
	}
	PG_CATCH();
	{
		tls_probe_abandon();
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (ok)
		tls_probe_abandon();
	return ok;
}

/*
 * The session did not connect over TLS within connect_timeout: raise what
 * the probe learned, naming the server and the file.  Returns only when
 * TLS is off.
 */
void
zkl_sess_tls_report_failure(void)
{
	char		detail[sizeof(((ZklTlsProbe *) 0)->detail)] = "";
	char		server[sizeof(((ZklTlsProbe *) 0)->server)] = "";
	bool		done = false;

	if (!zkl_ssl || tls_ca == NULL)
		return;
	if (tls_probe != NULL)
	{
		pthread_mutex_lock(&zkl_sess_sync_mu);
		done = tls_probe->done;
		if (done)
		{
			memcpy(detail, tls_probe->detail, sizeof(detail));
			memcpy(server, tls_probe->server, sizeof(server));
		}
		pthread_mutex_unlock(&zkl_sess_sync_mu);
		tls_probe_abandon();
	}
	if (detail[0] != '\0')
		ereport(ERROR,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("could not connect to ZooKeeper server \"%s\" over TLS",
						server),
				 errdetail("No server of \"%s\" completed a session within %d ms; with %s, %s.",
						   zkl_hosts, zkl_connect_timeout, server, detail),
				 errhint("Check zklock.ssl_ca_file, zklock.ssl_cert_file and the servers' secureClientPort and TLS settings.")));
	ereport(ERROR,
			(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
			 errmsg("could not connect to ZooKeeper at \"%s\" over TLS",
					zkl_hosts),
			 done ?
			 errdetail("No server completed a session within %d ms, although TLS handshakes with them succeed.",
					   zkl_connect_timeout) :
			 errdetail("No server completed a TLS handshake and session within %d ms.",
					   zkl_connect_timeout),
			 errhint("Check that the ensemble is running and serves TLS on these ports (secureClientPort), and zklock.connect_timeout.")));
}
