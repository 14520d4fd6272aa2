/*-------------------------------------------------------------------------
 *
 * session_tls.c
 *	  The session over TLS (zklock.ssl): the files checked and the TLS
 *	  context built before anything starts, the host each server's
 *	  certificate must name, the handle started with that context, the
 *	  certificate's subject as the session's identity in ACLs, and a
 *	  connection that never completes reported as the TLS failure it is.
 *
 * The backend reads the files itself before the handle starts, as PostgreSQL
 * reads its own ssl files (a key readable by group or others is refused),
 * raises an error that names the file, and builds one SSL_CTX, kept for
 * the backend's next session while every file is the same by stat(): TLS
 * 1.2 at least, the client certificate and key as read, its
 * chain completed from the CA file when the certificate file lacks an
 * intermediate.  The trust (ZklTlsTrust) is apart from it:
 * zklock.ssl_ca_file alone (never the system's default trust store) and
 * zklock.ssl_crl_file's revocations for every certificate of the chain,
 * built from the files' bytes as read and named by their SHA-256 digest.  The
 * client library (zookeeper_init_ssl_ctx, C client patch 0020) makes every
 * connection's SSL object from the context and calls tls_prepare on its I/O
 * thread before each handshake: there the server's entry names the host its
 * certificate must carry (the name written in zklock.hosts, or the address);
 * the CA and CRL files are stat()ed, read again when they are not the
 * files the trust was read from, and the trust rebuilt when their digest
 * changed, so that a reconnect verifies under the files in force; and
 * the TLS session that server gave last is offered, so that a reconnect
 * resumes it, only when it was verified under the same files, a full
 * handshake verified its server's chain less than zklock.ssl_ticket_max_age
 * ago (kept with each ticket, carried over resumptions) and its certificate
 * is still valid, unrevoked and under no CRL past its next update
 * (tls_resumable).  A certificate that does not verify, or files that cannot
 * be loaded, are recorded per server by tls_verify (or tls_refuse_files)
 * until a handshake with that server completes; once every server has
 * refused, the open fails at once with what the certificate carried,
 * escaped, and so does a call waiting for a reconnect
 * (zkl_sess_tls_refusal_detail).  When the session has not connected by half
 * of zklock.connect_timeout for another reason, a probe thread makes one TLS
 * handshake with each server in turn, with the same context, to learn why;
 * the error at the end of connect_timeout names the server and the cause.
 *
 * Threads: tls_prepare, tls_verify and tls_new_session run on the I/O
 * thread (and the probe's), plain C under the thread rules of
 * session_int.h: they read a session's server table, written before the
 * handle starts and freed only after it closed, and write its trust, its
 * refusals and resumable sessions under zkl_sess_sync_mu; a trust is
 * freed by whoever lets go of its last reference.
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
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/sha.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "lib/stringinfo.h"
#include "miscadmin.h"

#include "guc.h"
#include "hosts.h"
#include "session_int.h"
#include "session_tls.h"
#include "tls_shared.h"

/* How long the probe waits for the server's verdict on our certificate. */
#define ZKL_TLS_VERDICT_MS 1000

/*
 * A TLS session (ticket) is offered for resumption only while the last
 * full handshake that verified its server's chain is younger than
 * zklock.ssl_ticket_max_age (at most 300 s), whatever lifetime the server
 * announced; a ticket given on a resumed connection carries the time of
 * the full handshake it descends from.  In shared memory each ticket is
 * that time (8 bytes, big-endian seconds) followed by its DER.
 */
#define ZKL_TLS_VERIFIED_LEN 8

/* The largest CA or CRL file read (a CRL of some 400,000 revocations). */
#define ZKL_TLS_FILE_MAX (16 * 1024 * 1024)

/*
 * What the session trusts: the CA and CRL files as one load read them, the
 * store built from those bytes and their digest.  Built by the main thread
 * when the session opens, and again by the I/O (or probe) thread when a
 * connection attempt finds that the files' contents changed; counted
 * references under mu.
 */
typedef struct ZklTlsTrust
{
	int			refs;			/* under mu */
	X509_STORE *store;
	bool		has_crl;		/* zklock.ssl_crl_file was loaded */
	unsigned char digest[SHA256_DIGEST_LENGTH];
} ZklTlsTrust;

/*
 * A file as stat() sees it: what changes whenever its contents do (a write
 * sets its change time, ctime, which no utime() sets back), so that an
 * unchanged file need not be read again.  present: it was stat()ed; taken:
 * the wall-clock time just before (the clock file times come from).
 */
typedef struct ZklTlsFileId
{
	bool		present;
	dev_t		dev;
	ino_t		ino;
	off_t		size;
	struct timespec mtime;
	struct timespec ctime;
	struct timespec taken;
} ZklTlsFileId;

/*
 * A file's times advance by the tick of the kernel's file clock, or by
 * whole seconds on some filesystems: a file rewritten with the same size
 * within one tick of the stat() that took its identity keeps that
 * identity.  So, as git's "racily clean" rule, an identity whose mtime or
 * ctime is not older than the time it was taken minus this margin proves
 * nothing: the file is read and digested again (tls_file_same).
 */
#define ZKL_TLS_RACY_SECS 2

/* Why a load of the trust failed. */
typedef enum ZklTrustError
{
	ZKL_TRUST_OK,
	ZKL_TRUST_NOMEM,
	ZKL_TRUST_CA_READ,			/* errno says why */
	ZKL_TRUST_CA_PARSE,			/* no certificate in it */
	ZKL_TRUST_CRL_READ,			/* errno says why */
	ZKL_TRUST_CRL_PARSE,		/* no revocation list in it */
} ZklTrustError;

/* One server of the session's connect string, as TLS sees it. */
typedef struct ZklTlsServer
{
	struct sockaddr_storage addr;	/* where the library connects */
	char		host[256];		/* as written in zklock.hosts */
	int			port;
	bool		is_address;		/* host is an address, not a name */
	/* Under mu: */
	SSL_SESSION *resume;		/* the TLS session it gave last */
	ZklTlsTrust *resume_trust;	/* the trust that verified it */
	time_t		resume_verified;	/* when its chain was last verified */
	time_t		attempt_verified;	/* likewise for the session offered to the
									 * connection under way; 0: none */
	ZklTlsTrust *attempt_trust; /* the trust of the connection under way */
	uint64		resume_gen;		/* counts the sessions it gave */
	uint64		shared_gen;		/* the last of them shared */
	int			handshakes;		/* handshakes completed, and of them */
	int			resumed;		/* resumed from a ticket */
	bool		refused;		/* its certificate did not verify */
	long		verify_error;	/* why (X509_V_ERR_*) */
	char		names[512];		/* the names its certificate carries */
} ZklTlsServer;

/*
 * The TLS side of one session (or of a probe): the context, whether the
 * host is checked, the servers.  Written by the main thread before the
 * handle (or probe) starts; freed after it ended.
 */
typedef struct ZklTlsSession
{
	SSL_CTX    *ctx;
	ZklTlsTrust *trust;			/* the files in force; under mu */
	ZklTlsFileId trust_ids[2];	/* the CA and CRL files as trust read them;
								 * under mu */
	unsigned char identity[SHA256_DIGEST_LENGTH];	/* cert and key files' */
	/* The files in force, under mu (zkl_sess_tls_follow_settings): */
	char		ca_path[MAXPGPATH];
	char		crl_path[MAXPGPATH];	/* "" without zklock.ssl_crl_file */
	bool		check_host;
	int			ticket_max_age; /* zklock.ssl_ticket_max_age; under mu */
	int			nservers;
	ZklTlsServer servers[FLEXIBLE_ARRAY_MEMBER];
} ZklTlsSession;

/*
 * The files, context and identity of the backend's sessions; main thread.
 * Built by zkl_sess_tls_prepare and kept for the next session, which
 * builds them again only when a file's path or stat() identity changed
 * (tls_ids, taken before the files were read).
 */
static char *tls_ca = NULL;
static char *tls_cert = NULL;
static char *tls_key = NULL;
static char *tls_crl = NULL;
static SSL_CTX *tls_ctx = NULL;	/* each session takes a reference */
static ZklTlsTrust *tls_trust = NULL;	/* loaded with it */
static X509 *tls_cert_x509 = NULL;	/* the client certificate, as read */
static ZklTlsFileId tls_ids[4];	/* CA, CRL, certificate, key */
static bool tls_built = false;	/* all of the above are complete */
static unsigned char tls_identity[SHA256_DIGEST_LENGTH];
static ZklTlsSession *tls_session = NULL;

/* The SSL ex_data slot that holds a connection's ZklTlsServer. */
static int	tls_server_index = -1;

/*
 * The certificate's subject as the x509 provider names it; set before the
 * handle starts and unchanged while it lives, so the library's threads
 * read it without a lock, as they read own_digest.
 */
static char tls_own_id[1024];

/* One probe of the servers' handshakes; shared with its thread under mu. */
typedef struct ZklTlsProbe
{
	ZklTlsSession *session;		/* the probe's own copy */
	char	   *ca;
	char	   *cert;
	char	   *crl;			/* NULL without zklock.ssl_crl_file */
	int			budget_ms;
	char		server[300];	/* the first server that failed */
	char		detail[1024];	/* why, or "" when every handshake passed */
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

/* Raises the error for a file setting zklock.ssl needs and is not set. */
static void
tls_path_check(const char *setting, const char *value)
{
	if (value == NULL || value[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("%s is not set, but zklock.ssl is on", setting),
				 errhint("Set %s in postgresql.conf, or turn zklock.ssl off.",
						 setting)));
}

/*
 * A setting's file as an absolute path (malloc'd; relative to PGDATA), or
 * NULL without memory.  It raises nothing, so that a caller taking
 * several frees the others.
 */
static char *
tls_path(const char *value)
{
	size_t		n;
	char	   *path;

	if (is_absolute_path(value))
		return strdup(value);
	n = strlen(DataDir) + strlen(value) + 2;
	path = malloc(n);
	if (path != NULL)
		snprintf(path, n, "%s/%s", DataDir, value);
	return path;
}

/*
 * Read a whole file into malloc'd memory: 0, or an errno (EINVAL: not a
 * regular file; EFBIG: larger than ZKL_TLS_FILE_MAX).  It may run on the
 * I/O thread, so a FIFO or device is refused rather than waited on (opened
 * without blocking, then checked).  A buffer let go on the way (grown, or
 * on an error) is wiped first: the file may be a private key.  Plain C.
 */
static int
tls_read_all(const char *path, unsigned char **data, size_t *len)
{
	int			fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	size_t		cap = 8192;
	size_t		n = 0;
	unsigned char *buf;
	struct stat st;

	*data = NULL;
	*len = 0;
	if (fd < 0)
		return errno;
	if (fstat(fd, &st) != 0)
	{
		int			e = errno;

		close(fd);
		return e;
	}
	if (!S_ISREG(st.st_mode))
	{
		close(fd);
		return EINVAL;
	}
	buf = malloc(cap);
	while (buf != NULL)
	{
		ssize_t		r;

		if (n == cap)
		{
			unsigned char *more;
			size_t		grown = Min(cap * 2, (size_t) ZKL_TLS_FILE_MAX + 1);

			if (cap > ZKL_TLS_FILE_MAX)
			{
				OPENSSL_cleanse(buf, n);
				free(buf);
				close(fd);
				return EFBIG;
			}
			more = malloc(grown);
			if (more == NULL)
				break;
			memcpy(more, buf, n);
			OPENSSL_cleanse(buf, n);
			free(buf);
			buf = more;
			cap = grown;
		}
		r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
		{
			int			e = errno;

			OPENSSL_cleanse(buf, n);
			free(buf);
			close(fd);
			return e;
		}
		if (r == 0)
		{
			close(fd);
			*data = buf;
			*len = n;
			return 0;
		}
		n += r;
	}
	if (buf != NULL)
		OPENSSL_cleanse(buf, n);
	free(buf);
	close(fd);
	return ENOMEM;
}

/* Why tls_read_all failed, in words, into buf; plain C. */
static const char *
tls_read_error(int err_no, char *buf, size_t cap)
{
	if (err_no == EINVAL)
		return "not a regular file";
	if (err_no == EFBIG)
		return "larger than 16 MB";
	return strerror_r(err_no, buf, cap);
}

/* A file's identity (ZklTlsFileId); not present when it cannot be had. */
static void
tls_file_id(const char *path, ZklTlsFileId *id)
{
	struct stat st;

	memset(id, 0, sizeof(*id));
	if (path == NULL || path[0] == '\0' ||
		clock_gettime(CLOCK_REALTIME, &id->taken) != 0 || stat(path, &st) != 0 ||
		!S_ISREG(st.st_mode))
		return;
	id->present = true;
	id->dev = st.st_dev;
	id->ino = st.st_ino;
	id->size = st.st_size;
	id->mtime = st.st_mtim;
	id->ctime = st.st_ctim;
}

/* Whether time t is not older than taken minus ZKL_TLS_RACY_SECS. */
static bool
tls_time_racy(const struct timespec *t, const struct timespec *taken)
{
	time_t		limit = taken->tv_sec - ZKL_TLS_RACY_SECS;

	return t->tv_sec > limit ||
		(t->tv_sec == limit && t->tv_nsec >= taken->tv_nsec);
}

/*
 * Whether a file seen now (a) is the one seen before (b): both stat()ed,
 * same device, inode, size, modification and change times, and b not
 * racy: its times older than when it was taken by ZKL_TLS_RACY_SECS, so
 * that a rewrite since would have moved them.  Plain C.
 */
static bool
tls_file_same(const ZklTlsFileId *a, const ZklTlsFileId *b)
{
	return a->present && b->present &&
		!tls_time_racy(&b->mtime, &b->taken) &&
		!tls_time_racy(&b->ctime, &b->taken) && a->dev == b->dev &&
		a->ino == b->ino && a->size == b->size &&
		a->mtime.tv_sec == b->mtime.tv_sec &&
		a->mtime.tv_nsec == b->mtime.tv_nsec &&
		a->ctime.tv_sec == b->ctime.tv_sec &&
		a->ctime.tv_nsec == b->ctime.tv_nsec;
}

/*
 * Whether the CA file and the CRL file (crl "": none) are the ones ids
 * describes.  Plain C.
 */
static bool
tls_trust_files_same(const char *ca, const char *crl, const ZklTlsFileId *ids)
{
	ZklTlsFileId now;

	tls_file_id(ca, &now);
	if (!tls_file_same(&now, &ids[0]))
		return false;
	if (crl[0] == '\0')
		return !ids[1].present;
	tls_file_id(crl, &now);
	return tls_file_same(&now, &ids[1]);
}

/*
 * SHA-256 of some byte strings, each preceded by its length, so that no
 * two different sequences of them give the same input.  Plain C.
 */
static bool
tls_digest(unsigned char *out, int nparts, const unsigned char *const *parts,
		   const size_t *lens)
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	bool		ok = md != NULL && EVP_DigestInit_ex(md, EVP_sha256(), NULL) == 1;

	for (int i = 0; ok && i < nparts; i++)
	{
		unsigned char lb[8];

		for (int j = 0; j < 8; j++)
			lb[j] = (unsigned char) ((uint64) lens[i] >> (56 - 8 * j));
		ok = EVP_DigestUpdate(md, lb, sizeof(lb)) == 1 &&
			(lens[i] == 0 || EVP_DigestUpdate(md, parts[i], lens[i]) == 1);
	}
	ok = ok && EVP_DigestFinal_ex(md, out, NULL) == 1;
	EVP_MD_CTX_free(md);
	return ok;
}

/*
 * Add what PEM text holds to a store: certificates and revocation lists
 * from the CA file, revocation lists only from the CRL file (as OpenSSL's
 * file lookups load them).  Plain C.
 */
static ZklTrustError
tls_store_add(X509_STORE *store, const unsigned char *data, size_t len,
			  bool crl_file)
{
	BIO		   *bio = BIO_new_mem_buf(data, (int) len);
	STACK_OF(X509_INFO) *infos;
	int			found = 0;

	if (bio == NULL)
		return ZKL_TRUST_NOMEM;
	infos = PEM_X509_INFO_read_bio(bio, NULL, NULL, NULL);
	BIO_free(bio);
	for (int i = 0; infos != NULL && i < sk_X509_INFO_num(infos); i++)
	{
		X509_INFO  *xi = sk_X509_INFO_value(infos, i);

		if (!crl_file && xi->x509 != NULL &&
			X509_STORE_add_cert(store, xi->x509) == 1)
			found++;
		if (xi->crl != NULL && X509_STORE_add_crl(store, xi->crl) == 1 &&
			crl_file)
			found++;
	}
	sk_X509_INFO_pop_free(infos, X509_INFO_free);
	if (found > 0)
		return ZKL_TRUST_OK;
	return crl_file ? ZKL_TRUST_CRL_PARSE : ZKL_TRUST_CA_PARSE;
}

/*
 * Read the CA file and the CRL file (NULL for none) whole and digest them
 * as a trust names them: *ca_data and *crl_data (malloc'd; NULL for no
 * CRL) are the bytes read, for the caller to free.  Plain C, on any
 * thread.
 */
static ZklTrustError
tls_trust_read(const char *ca, const char *crl, unsigned char **ca_data,
			   size_t *ca_len, unsigned char **crl_data, size_t *crl_len,
			   unsigned char *digest, int *err_no)
{
	const unsigned char *parts[3];
	size_t		lens[3];
	unsigned char has_crl = crl != NULL;

	*ca_data = *crl_data = NULL;
	*ca_len = *crl_len = 0;
	*err_no = tls_read_all(ca, ca_data, ca_len);
	if (*err_no != 0)
		return ZKL_TRUST_CA_READ;
	if (crl != NULL && (*err_no = tls_read_all(crl, crl_data, crl_len)) != 0)
	{
		free(*ca_data);
		*ca_data = NULL;
		return ZKL_TRUST_CRL_READ;
	}
	parts[0] = *ca_data;
	lens[0] = *ca_len;
	parts[1] = *crl_data;
	lens[1] = *crl_len;
	parts[2] = &has_crl;
	lens[2] = 1;
	return tls_digest(digest, 3, parts, lens) ? ZKL_TRUST_OK : ZKL_TRUST_NOMEM;
}

/*
 * Load the trust from the CA file and the CRL file (NULL for none): each
 * read whole, the digest taken from the bytes read (tls_trust_read), the
 * store built from the same bytes, checking every certificate of a chain
 * against the CRLs (X509_V_FLAG_CRL_CHECK_ALL, as PostgreSQL does for its
 * own CRLs).  When the digest equals known's, nothing is built and *out
 * stays NULL.  *out has one reference.  Plain C, on any thread.
 */
static ZklTrustError
tls_trust_load(const char *ca, const char *crl, const ZklTlsTrust *known,
			   ZklTlsTrust **out, int *err_no)
{
	unsigned char *ca_data;
	unsigned char *crl_data;
	size_t		ca_len;
	size_t		crl_len;
	unsigned char digest[SHA256_DIGEST_LENGTH];
	ZklTlsTrust *t = NULL;
	ZklTrustError r;

	*out = NULL;
	r = tls_trust_read(ca, crl, &ca_data, &ca_len, &crl_data, &crl_len,
					   digest, err_no);
	if (r == ZKL_TRUST_OK &&
		(known == NULL || memcmp(digest, known->digest, sizeof(digest)) != 0))
	{
		if ((t = calloc(1, sizeof(ZklTlsTrust))) == NULL ||
			(t->store = X509_STORE_new()) == NULL)
			r = ZKL_TRUST_NOMEM;
		else if ((r = tls_store_add(t->store, ca_data, ca_len, false)) == ZKL_TRUST_OK &&
				 (crl == NULL ||
				  (r = tls_store_add(t->store, crl_data, crl_len, true)) == ZKL_TRUST_OK))
		{
			if (crl != NULL)
				X509_STORE_set_flags(t->store, X509_V_FLAG_CRL_CHECK |
									 X509_V_FLAG_CRL_CHECK_ALL);
			t->refs = 1;
			t->has_crl = crl != NULL;
			memcpy(t->digest, digest, sizeof(digest));
			*out = t;
			t = NULL;
		}
	}
	if (t != NULL)
	{
		X509_STORE_free(t->store);
		free(t);
	}
	free(ca_data);
	free(crl_data);
	return r;
}

/* Another reference to a trust (or NULL); under mu. */
static ZklTlsTrust *
tls_trust_ref_locked(ZklTlsTrust *t)
{
	if (t != NULL)
		t->refs++;
	return t;
}

/* Let go of a reference to a trust (or NULL); plain C, not under mu. */
static void
tls_trust_release(ZklTlsTrust *t)
{
	int			left;

	if (t == NULL)
		return;
	pthread_mutex_lock(&zkl_sess_sync_mu);
	left = --t->refs;
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	if (left == 0)
	{
		X509_STORE_free(t->store);
		free(t);
	}
}

/*
 * Whether the CRLs of the store forbid resuming with a certificate: one
 * from its issuer lists its serial, or is past its next update (a full
 * handshake would refuse it as expired).  Plain C.
 */
static bool
tls_crl_refuses(X509 *x, X509_STORE *store, time_t now)
{
	STACK_OF(X509_OBJECT) *objs;
	bool		refuses = false;

	if (!X509_STORE_lock(store))
		return true;
	objs = X509_STORE_get0_objects(store);
	for (int i = 0; objs != NULL && i < sk_X509_OBJECT_num(objs) && !refuses; i++)
	{
		X509_OBJECT *o = sk_X509_OBJECT_value(objs, i);
		X509_CRL   *crl = X509_OBJECT_get0_X509_CRL(o);
		const ASN1_TIME *next;
		X509_REVOKED *entry;

		if (crl == NULL ||
			X509_NAME_cmp(X509_CRL_get_issuer(crl), X509_get_issuer_name(x)) != 0)
			continue;
		next = X509_CRL_get0_nextUpdate(crl);
		if ((next != NULL && X509_cmp_time(next, &now) <= 0) ||
			X509_CRL_get0_by_cert(crl, &entry, x) == 1)
			refuses = true;
	}
	X509_STORE_unlock(store);
	return refuses;
}

/*
 * Whether a kept TLS session may be offered for resumption under a trust:
 * within its lifetime (the server's), its server's chain verified by a
 * full handshake less than max_age seconds ago (verified), and its server
 * certificate valid now and neither revoked nor covered by a CRL past its
 * next update.  The caller has checked that the session was made under
 * the same files (the trust's digest).  Plain C.
 */
static bool
tls_resumable(SSL_SESSION *session, const ZklTlsTrust *trust,
			  time_t verified, int max_age)
{
	X509	   *peer = SSL_SESSION_get0_peer(session);
	time_t		now = time(NULL);
	long		made = SSL_SESSION_get_time(session);
	long		life = SSL_SESSION_get_timeout(session);
	unsigned long hint = SSL_SESSION_get_ticket_lifetime_hint(session);

	if (!SSL_SESSION_is_resumable(session) || peer == NULL)
		return false;
	if (verified <= 0 || now < verified || now - verified >= max_age)
		return false;
	if (hint > 0 && hint < (unsigned long) life)
		life = (long) hint;
	if (now < made || now - made >= life)
		return false;
	if (X509_cmp_time(X509_get0_notAfter(peer), &now) <= 0 ||
		X509_cmp_time(X509_get0_notBefore(peer), &now) >= 0)
		return false;
	return !(trust->has_crl && tls_crl_refuses(peer, trust->store, now));
}

/*
 * Append bytes from a certificate to a message: printable ASCII as it is,
 * a backslash doubled, a double quote and any other byte as \xNN (a
 * certificate that did not verify may carry anything, and the message
 * quotes it).  Plain C.
 */
static size_t
tls_append_printable(char *out, size_t cap, size_t len,
					 const unsigned char *s, int n)
{
	for (int i = 0; i < n && len + 5 < cap; i++)
	{
		unsigned char c = s[i];

		if (c == '\\')
		{
			out[len++] = '\\';
			out[len++] = '\\';
		}
		else if (c >= 0x20 && c < 0x7f && c != '"')
			out[len++] = (char) c;
		else
			len += snprintf(out + len, cap - len, "\\x%02x", c);
	}
	if (len < cap)
		out[len] = '\0';
	return len;
}

/* Append text of our own to a message; plain C. */
static size_t
tls_append_text(char *out, size_t cap, size_t len, const char *text)
{
	if (len < cap)
		len += strlcpy(out + len, text, cap - len);
	return Min(len, cap - 1);
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

/* Free a session's TLS side (its handle or probe has ended); plain C. */
static void
tls_session_free(ZklTlsSession *ts)
{
	if (ts == NULL)
		return;
	for (int i = 0; i < ts->nservers; i++)
	{
		SSL_SESSION_free(ts->servers[i].resume);
		tls_trust_release(ts->servers[i].resume_trust);
		tls_trust_release(ts->servers[i].attempt_trust);
	}
	tls_trust_release(ts->trust);
	SSL_CTX_free(ts->ctx);
	free(ts);
}

/* Forget the files, context and identity of the last session. */
static void
tls_forget(void)
{
	free(tls_ca);
	free(tls_cert);
	free(tls_key);
	free(tls_crl);
	tls_ca = tls_cert = tls_key = tls_crl = NULL;
	tls_built = false;
	memset(tls_ids, 0, sizeof(tls_ids));
	X509_free(tls_cert_x509);
	tls_cert_x509 = NULL;
	SSL_CTX_free(tls_ctx);
	tls_ctx = NULL;
	tls_trust_release(tls_trust);
	tls_trust = NULL;
	tls_session_free(tls_session);
	tls_session = NULL;
	tls_own_id[0] = '\0';
}

/*
 * The names a server certificate carries, for a message, its bytes escaped
 * (tls_append_printable); plain C.
 */
static void
tls_cert_names(X509 *x, char *out, size_t cap)
{
	GENERAL_NAMES *sans = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
	size_t		len = 0;

	out[0] = '\0';
	for (int i = 0; sans && i < sk_GENERAL_NAME_num(sans) && len + 8 < cap; i++)
	{
		GENERAL_NAME *gn = sk_GENERAL_NAME_value(sans, i);
		char		ip[INET6_ADDRSTRLEN] = "?";

		if (gn->type == GEN_DNS)
		{
			len = tls_append_text(out, cap, len, len ? ", DNS:" : "DNS:");
			len = tls_append_printable(out, cap, len,
									   ASN1_STRING_get0_data(gn->d.dNSName),
									   ASN1_STRING_length(gn->d.dNSName));
		}
		else if (gn->type == GEN_IPADD)
		{
			int			n = ASN1_STRING_length(gn->d.iPAddress);

			if (n == 4 || n == 16)
				inet_ntop(n == 4 ? AF_INET : AF_INET6,
						  ASN1_STRING_get0_data(gn->d.iPAddress), ip, sizeof(ip));
			len = tls_append_text(out, cap, len, len ? ", IP:" : "IP:");
			len = tls_append_text(out, cap, len, ip);
		}
	}
	GENERAL_NAMES_free(sans);
	if (len == 0)
	{
		X509_NAME  *subject = X509_get_subject_name(x);
		int			at = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);

		if (at >= 0)
		{
			ASN1_STRING *cn = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, at));

			len = tls_append_text(out, cap, 0,
								  "no subject alternative name, only the common name \"");
			len = tls_append_printable(out, cap, len, ASN1_STRING_get0_data(cn),
									   ASN1_STRING_length(cn));
			(void) tls_append_text(out, cap, len, "\"");
		}
		else
			(void) tls_append_text(out, cap, 0, "no name");
	}
}

/*
 * The verify callback: a server certificate that does not verify is
 * recorded for its server, with the names it carries, and the open's wait
 * woken.  Plain C, on the I/O thread (or the probe's).
 */
static int
tls_verify(int ok, X509_STORE_CTX *xs)
{
	SSL		   *ssl;
	ZklTlsServer *sv;
	X509	   *leaf;
	char		names[sizeof(sv->names)] = "";

	if (ok)
		return ok;
	ssl = X509_STORE_CTX_get_ex_data(xs, SSL_get_ex_data_X509_STORE_CTX_idx());
	sv = ssl ? SSL_get_ex_data(ssl, tls_server_index) : NULL;
	if (sv == NULL)
		return ok;
	leaf = X509_STORE_CTX_get0_cert(xs);
	if (leaf != NULL)
		tls_cert_names(leaf, names, sizeof(names));
	pthread_mutex_lock(&zkl_sess_sync_mu);
	sv->refused = true;
	sv->verify_error = X509_STORE_CTX_get_error(xs);
	memcpy(sv->names, names, sizeof(names));
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	zkl_sess_sync_kick();
	return ok;
}

/* The server of an address in a session's table, or NULL; plain C. */
static ZklTlsServer *
tls_server_of(ZklTlsSession *ts, const struct sockaddr *addr)
{
	for (int i = 0; i < ts->nservers; i++)
	{
		ZklTlsServer *sv = &ts->servers[i];

		if (sv->addr.ss_family != addr->sa_family)
			continue;
		if (addr->sa_family == AF_INET &&
			memcmp(&((struct sockaddr_in *) &sv->addr)->sin_addr,
				   &((const struct sockaddr_in *) addr)->sin_addr,
				   sizeof(struct in_addr)) == 0 &&
			((struct sockaddr_in *) &sv->addr)->sin_port ==
			((const struct sockaddr_in *) addr)->sin_port)
			return sv;
		if (addr->sa_family == AF_INET6 &&
			memcmp(&((struct sockaddr_in6 *) &sv->addr)->sin6_addr,
				   &((const struct sockaddr_in6 *) addr)->sin6_addr,
				   sizeof(struct in6_addr)) == 0 &&
			((struct sockaddr_in6 *) &sv->addr)->sin6_port ==
			((const struct sockaddr_in6 *) addr)->sin6_port)
			return sv;
	}
	return NULL;
}

/*
 * A connection attempt could not load the files in force: refuse it, and
 * say why as the server's refusal (verify_error -1).  Plain C.
 */
static void
tls_refuse_files(ZklTlsServer *sv, const char *ca, const char *crl,
				 ZklTrustError r, int err_no)
{
	char		why[sizeof(sv->names)];
	char		buf[PG_STRERROR_R_BUFLEN];
	const char *path = (r == ZKL_TRUST_CRL_READ || r == ZKL_TRUST_CRL_PARSE) ?
		crl : ca;
	const char *setting = (r == ZKL_TRUST_CRL_READ || r == ZKL_TRUST_CRL_PARSE) ?
		"zklock.ssl_crl_file" : "zklock.ssl_ca_file";

	if (r == ZKL_TRUST_CA_READ || r == ZKL_TRUST_CRL_READ)
		snprintf(why, sizeof(why), "%s \"%s\" could not be read at a connection attempt: %s",
				 setting, path, tls_read_error(err_no, buf, sizeof(buf)));
	else if (r == ZKL_TRUST_NOMEM)
		snprintf(why, sizeof(why), "the TLS files could not be loaded at a connection attempt: out of memory");
	else
		snprintf(why, sizeof(why), "%s \"%s\" holds no %s at a connection attempt",
				 setting, path,
				 r == ZKL_TRUST_CRL_PARSE ? "PEM revocation list" : "PEM certificate");
	pthread_mutex_lock(&zkl_sess_sync_mu);
	sv->refused = true;
	sv->verify_error = -1;
	memcpy(sv->names, why, sizeof(why));
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	zkl_sess_sync_kick();
}

/*
 * The trust in force for a connection attempt.  The CA and CRL files are
 * stat()ed: when both are the files the session's trust was read from
 * (tls_file_same), it is that trust, nothing read.  Otherwise they are
 * read again and digested; when their contents changed, the session's
 * trust is rebuilt from what was read.  The identities are taken before
 * the files are read, so that a file changed meanwhile is read again next
 * time.  Returns a reference, or NULL (the attempt refused, why recorded
 * for the server).  Plain C, on the I/O thread or the probe's.
 */
static ZklTlsTrust *
tls_trust_now(ZklTlsSession *ts, ZklTlsServer *sv)
{
	ZklTlsTrust *known;
	ZklTlsTrust *fresh = NULL;
	ZklTlsTrust *old;
	ZklTrustError r;
	int			err_no = 0;
	char		ca[MAXPGPATH];
	char		crl[MAXPGPATH];
	ZklTlsFileId ids[2];
	ZklTlsFileId seen[2];

	pthread_mutex_lock(&zkl_sess_sync_mu);
	known = tls_trust_ref_locked(ts->trust);
	strlcpy(ca, ts->ca_path, sizeof(ca));
	strlcpy(crl, ts->crl_path, sizeof(crl));
	memcpy(ids, ts->trust_ids, sizeof(ids));
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	if (known != NULL && tls_trust_files_same(ca, crl, ids))
		return known;
	tls_file_id(ca, &seen[0]);
	tls_file_id(crl, &seen[1]);
	r = tls_trust_load(ca, crl[0] ? crl : NULL, known, &fresh, &err_no);
	ERR_clear_error();
	if (r != ZKL_TRUST_OK)
	{
		tls_trust_release(known);
		tls_refuse_files(sv, ca, crl, r, err_no);
		return NULL;
	}
	if (fresh == NULL)
	{
		/* The same contents: the trust stands for the files seen now. */
		pthread_mutex_lock(&zkl_sess_sync_mu);
		if (ts->trust == known && strcmp(ca, ts->ca_path) == 0 &&
			strcmp(crl, ts->crl_path) == 0)
			memcpy(ts->trust_ids, seen, sizeof(seen));
		pthread_mutex_unlock(&zkl_sess_sync_mu);
		return known;
	}
	pthread_mutex_lock(&zkl_sess_sync_mu);
	old = ts->trust;
	ts->trust = tls_trust_ref_locked(fresh);
	if (strcmp(ca, ts->ca_path) == 0 && strcmp(crl, ts->crl_path) == 0)
		memcpy(ts->trust_ids, seen, sizeof(seen));
	else
		memset(ts->trust_ids, 0, sizeof(ts->trust_ids));
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	tls_trust_release(old);
	tls_trust_release(known);
	return fresh;
}

/*
 * Take a server's kept TLS session and its trust out of the table, for the
 * caller to free once mu is let go.  Caller holds mu.
 */
static void
tls_take_resume_locked(ZklTlsServer *sv, SSL_SESSION **session,
					   ZklTlsTrust **trust)
{
	*session = sv->resume;
	*trust = sv->resume_trust;
	sv->resume = NULL;
	sv->resume_trust = NULL;
}

/*
 * Before each handshake (the library's prepare callback, and the probe's):
 * the host the certificate must name, with SNI for a name; the CA and CRL
 * files in force now (tls_trust_now); and the TLS session this server
 * gave last, offered only when it was verified under the same files, is
 * young enough and its certificate is still valid and not revoked
 * (tls_resumable); otherwise it is dropped and the handshake is a full
 * one.  A server not in the table is refused.  Plain C, on the I/O thread
 * or the probe's.
 */
static int
tls_prepare(SSL *ssl, const struct sockaddr *addr, void *arg)
{
	ZklTlsSession *ts = (ZklTlsSession *) arg;
	ZklTlsServer *sv = tls_server_of(ts, addr);
	ZklTlsTrust *trust;
	ZklTlsTrust *old;
	SSL_SESSION *offer = NULL;
	time_t		verified = 0;
	int			max_age;
	SSL_SESSION *dropped = NULL;
	ZklTlsTrust *dropped_trust = NULL;

	if (sv == NULL || SSL_set_ex_data(ssl, tls_server_index, sv) != 1)
		return -1;
	if (ts->check_host)
	{
		if (sv->is_address)
		{
			if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), sv->host) != 1)
				return -1;
		}
		else
		{
			SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
			if (SSL_set1_host(ssl, sv->host) != 1)
				return -1;
		}
	}
	if (!sv->is_address)
		(void) SSL_set_tlsext_host_name(ssl, sv->host);
	trust = tls_trust_now(ts, sv);
	if (trust == NULL)
		return -1;
	if (SSL_set1_verify_cert_store(ssl, trust->store) != 1)
	{
		tls_trust_release(trust);
		return -1;
	}
	if (trust->has_crl)
		X509_VERIFY_PARAM_set_flags(SSL_get0_param(ssl), X509_V_FLAG_CRL_CHECK |
									X509_V_FLAG_CRL_CHECK_ALL);
	pthread_mutex_lock(&zkl_sess_sync_mu);
	old = sv->attempt_trust;
	sv->attempt_trust = trust;	/* our reference moves there */
	sv->attempt_verified = 0;
	max_age = ts->ticket_max_age;
	if (sv->resume != NULL && sv->resume_trust != NULL &&
		memcmp(sv->resume_trust->digest, trust->digest, sizeof(trust->digest)) == 0)
	{
		offer = sv->resume;
		verified = sv->resume_verified;
		SSL_SESSION_up_ref(offer);
	}
	else if (sv->resume != NULL)
		tls_take_resume_locked(sv, &dropped, &dropped_trust);
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	tls_trust_release(old);
	if (offer != NULL && tls_resumable(offer, trust, verified, max_age) &&
		SSL_set_session(ssl, offer) == 1)
	{
		pthread_mutex_lock(&zkl_sess_sync_mu);
		sv->attempt_verified = verified;
		pthread_mutex_unlock(&zkl_sess_sync_mu);
	}
	else if (offer != NULL)
	{
		pthread_mutex_lock(&zkl_sess_sync_mu);
		if (sv->resume == offer)
			tls_take_resume_locked(sv, &dropped, &dropped_trust);
		pthread_mutex_unlock(&zkl_sess_sync_mu);
	}
	SSL_SESSION_free(offer);
	SSL_SESSION_free(dropped);
	tls_trust_release(dropped_trust);
	return 0;
}

/*
 * A server gave a TLS session (a TLS 1.3 ticket, or a 1.2 session): keep
 * it, with the trust its connection was verified under and when its chain
 * was verified: now after a full handshake, but on a resumed connection
 * the time of the full handshake the offered session descends from (a
 * resumption verifies no chain; OpenSSL restarts a new ticket's clock), so
 * that the next connection to that server may resume it within the bound.
 * Plain C.
 */
static int
tls_new_session(SSL *ssl, SSL_SESSION *session)
{
	ZklTlsServer *sv = SSL_get_ex_data(ssl, tls_server_index);
	bool		reused = SSL_session_reused(ssl);
	time_t		now = time(NULL);
	SSL_SESSION *old;
	ZklTlsTrust *old_trust;

	if (sv == NULL)
		return 0;
	pthread_mutex_lock(&zkl_sess_sync_mu);
	if (reused && sv->attempt_verified <= 0)
	{
		pthread_mutex_unlock(&zkl_sess_sync_mu);
		return 0;				/* not kept: OpenSSL frees it */
	}
	old = sv->resume;
	old_trust = sv->resume_trust;
	sv->resume = session;
	sv->resume_trust = tls_trust_ref_locked(sv->attempt_trust);
	sv->resume_verified = reused ? sv->attempt_verified : now;
	sv->resume_gen++;
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	SSL_SESSION_free(old);
	tls_trust_release(old_trust);
	return 1;
}

/*
 * A handshake completed: count it, and whether it resumed; the server no
 * longer stands refused.  Plain C.
 */
static void
tls_info(const SSL *ssl, int where, int ret)
{
	ZklTlsServer *sv;

	(void) ret;
	if (!(where & SSL_CB_HANDSHAKE_DONE))
		return;
	sv = SSL_get_ex_data(ssl, tls_server_index);
	if (sv == NULL)
		return;
	pthread_mutex_lock(&zkl_sess_sync_mu);
	sv->handshakes++;
	if (SSL_session_reused((SSL *) ssl))
		sv->resumed++;
	sv->refused = false;
	pthread_mutex_unlock(&zkl_sess_sync_mu);
}

/* Raise an error about a TLS file, with OpenSSL's reason. */
pg_noreturn static void
tls_file_error(const char *what, const char *path, const char *setting)
{
	ereport(ERROR,
			(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
			 errmsg("could not load %s from ZooKeeper TLS file \"%s\"",
					what, path),
			 errdetail("The file is %s (%s).", setting, tls_openssl_error())));
}

/*
 * The session's TLS context: the trust's store (tls_prepare sets the one in
 * force on each connection), TLS 1.2 at least, the client certificate chain
 * (PEM text, as read) and its key, a verify callback that records
 * refusals, and client-side session caching through tls_new_session.
 * Raises naming the file.
 */
static SSL_CTX *
tls_build_ctx(EVP_PKEY *key, const unsigned char *chain, size_t chain_len)
{
	SSL_CTX    *ctx;

	ERR_clear_error();
	if (tls_server_index < 0)
		tls_server_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
	ctx = SSL_CTX_new(TLS_client_method());
	if (ctx == NULL || tls_server_index < 0)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("could not create a TLS context: %s",
						tls_openssl_error())));
	PG_TRY();
	{
		BIO		   *bio;
		X509	   *x;
		bool		ok;

		SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
						   tls_verify);
		SSL_CTX_set_mode(ctx, SSL_MODE_AUTO_RETRY);
		/*
		 * The CA file also completes our own chain (a client certificate
		 * from an intermediate CA that zklock.ssl_cert_file does not hold):
		 * OpenSSL builds the chain it sends from the chain store.
		 */
		if (SSL_CTX_set1_verify_cert_store(ctx, tls_trust->store) != 1 ||
			SSL_CTX_set1_chain_cert_store(ctx, tls_trust->store) != 1)
			tls_file_error("the CA certificates", tls_ca, "zklock.ssl_ca_file");
		/* The chain as SSL_CTX_use_certificate_chain_file reads it. */
		bio = BIO_new_mem_buf(chain, (int) chain_len);
		x = bio ? PEM_read_bio_X509_AUX(bio, NULL, NULL, NULL) : NULL;
		ok = x != NULL && SSL_CTX_use_certificate(ctx, x) == 1;
		X509_free(x);
		while (ok && (x = PEM_read_bio_X509(bio, NULL, NULL, NULL)) != NULL)
		{
			ok = SSL_CTX_add0_chain_cert(ctx, x) == 1;
			if (!ok)
				X509_free(x);
		}
		BIO_free(bio);
		/* Only "no start line" is the end of the PEM text; else it is bad. */
		if (ok && ERR_peek_last_error() != 0 &&
			!(ERR_GET_LIB(ERR_peek_last_error()) == ERR_LIB_PEM &&
			  ERR_GET_REASON(ERR_peek_last_error()) == PEM_R_NO_START_LINE))
			ok = false;
		if (!ok)
			tls_file_error("the certificate chain", tls_cert, "zklock.ssl_cert_file");
		ERR_clear_error();		/* the end of the PEM text */
		if (SSL_CTX_use_PrivateKey(ctx, key) != 1 ||
			SSL_CTX_check_private_key(ctx) != 1)
			tls_file_error("the private key", tls_key, "zklock.ssl_key_file");
		SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT |
									   SSL_SESS_CACHE_NO_INTERNAL_STORE);
		SSL_CTX_sess_set_new_cb(ctx, tls_new_session);
		SSL_CTX_set_info_callback(ctx, tls_info);
	}
	PG_CATCH();
	{
		SSL_CTX_free(ctx);
		PG_RE_THROW();
	}
	PG_END_TRY();
	return ctx;
}

/* Raise for a file of a setting that tls_read_all could not read. */
pg_noreturn static void
tls_raise_read(const char *path, const char *setting, int err_no)
{
	if (err_no == EINVAL)
		ereport(ERROR,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("ZooKeeper TLS file \"%s\" is not a regular file", path),
				 errdetail("The file is %s.", setting)));
	if (err_no == EFBIG)
		ereport(ERROR,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("ZooKeeper TLS file \"%s\" is too large", path),
				 errdetail("The file is %s; at most %d bytes are read.",
						   setting, ZKL_TLS_FILE_MAX)));
	errno = err_no;
	ereport(ERROR,
			(errcode_for_file_access(),
			 errmsg("could not open ZooKeeper TLS file \"%s\": %m", path),
			 errdetail("The file is %s.", setting)));
}

/* A whole file of a setting, malloc'd, or raise naming it. */
static unsigned char *
tls_read_or_raise(const char *path, const char *setting, size_t *len)
{
	unsigned char *data;
	int			err_no = tls_read_all(path, &data, len);

	if (err_no != 0)
		tls_raise_read(path, setting, err_no);
	return data;
}

/* The CA and CRL files loaded (tls_trust_load), or raise naming the file. */
static ZklTlsTrust *
tls_load_trust(void)
{
	ZklTlsTrust *t = NULL;
	int			err_no = 0;
	ZklTrustError r = tls_trust_load(tls_ca, tls_crl, NULL, &t, &err_no);

	switch (r)
	{
		case ZKL_TRUST_OK:
			break;
		case ZKL_TRUST_NOMEM:
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory")));
			break;
		case ZKL_TRUST_CA_READ:
			tls_raise_read(tls_ca, "zklock.ssl_ca_file", err_no);
			break;
		case ZKL_TRUST_CRL_READ:
			tls_raise_read(tls_crl, "zklock.ssl_crl_file", err_no);
			break;
		case ZKL_TRUST_CA_PARSE:
			ereport(ERROR,
					(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
					 errmsg("could not load a certificate from ZooKeeper TLS file \"%s\"",
							tls_ca),
					 errdetail("The file is zklock.ssl_ca_file; it must hold PEM certificates (%s).",
							   tls_openssl_error())));
			break;
		case ZKL_TRUST_CRL_PARSE:
			tls_file_error("a certificate revocation list", tls_crl,
						   "zklock.ssl_crl_file");
			break;
	}
	return t;
}

/* Whether two paths (NULL: none) name the same file by text. */
static bool
tls_same_path(const char *a, const char *b)
{
	return (a == NULL && b == NULL) ||
		(a != NULL && b != NULL && strcmp(a, b) == 0);
}

/*
 * Whether the certificate and key files hold what the kept context was
 * built from: read again and digested as tls_identity was.  Plain C.
 */
static bool
tls_identity_unchanged(const char *cert, const char *key)
{
	unsigned char *data[2] = {NULL, NULL};
	size_t		lens[2] = {0, 0};
	unsigned char digest[SHA256_DIGEST_LENGTH];
	bool		same;

	same = tls_read_all(cert, &data[0], &lens[0]) == 0 &&
		tls_read_all(key, &data[1], &lens[1]) == 0 &&
		tls_digest(digest, 2, (const unsigned char *const *) data, lens) &&
		memcmp(digest, tls_identity, sizeof(digest)) == 0;
	free(data[0]);
	if (data[1] != NULL)
		OPENSSL_cleanse(data[1], lens[1]);
	free(data[1]);
	return same;
}

/*
 * Whether the CA and CRL files hold what the kept trust was loaded from:
 * read again and digested as the trust was (tls_trust_read).  Plain C.
 */
static bool
tls_trust_unchanged(const char *ca, const char *crl)
{
	unsigned char *ca_data = NULL;
	unsigned char *crl_data = NULL;
	size_t		ca_len;
	size_t		crl_len;
	unsigned char digest[SHA256_DIGEST_LENGTH];
	int			err_no;
	bool		same;

	same = tls_trust != NULL &&
		tls_trust_read(ca, crl, &ca_data, &ca_len, &crl_data, &crl_len,
					   digest, &err_no) == ZKL_TRUST_OK &&
		memcmp(digest, tls_trust->digest, sizeof(digest)) == 0;
	free(ca_data);
	free(crl_data);
	return same;
}

/*
 * Whether the context, trust and identity kept from the last session were
 * built from exactly the files the settings name now, as they are now:
 * the same paths, and each file the same by stat() (tls_file_same, CRL
 * included when one is set) or, where stat() cannot say (the file was
 * written again, or its identity was taken too soon after a change to
 * prove anything, as a postmaster started just after the files were
 * written leaves it to every backend), holding the same bytes: those
 * files are read and their digests compared with the build's, the CA and
 * CRL together, the certificate and key together.  The four identities
 * are left in ids; when the bytes proved the files the same, they are
 * kept as the build's (taken before the reads).
 */
pg_noinline static bool
tls_built_still_holds(const char *ca, const char *cert, const char *key,
					  const char *crl, ZklTlsFileId *ids)
{
	const char *paths[4] = {ca, crl, cert, key};
	bool		same_paths = tls_built && tls_same_path(ca, tls_ca) &&
		tls_same_path(cert, tls_cert) && tls_same_path(key, tls_key) &&
		tls_same_path(crl, tls_crl);
	bool		trust_stat = true;	/* CA and CRL the same by stat() */
	bool		identity_stat = true;	/* certificate and key likewise */

	for (int i = 0; i < 4; i++)
	{
		tls_file_id(paths[i], &ids[i]);
		/* a CRL file the build read and the settings no longer name too */
		if (paths[i] != NULL ? !tls_file_same(&ids[i], &tls_ids[i]) :
			tls_ids[i].present)
		{
			if (i < 2)
				trust_stat = false;
			else
				identity_stat = false;
		}
	}
	if (!same_paths)
		return false;
	if (trust_stat && identity_stat)
		return true;
	/* the certificate and key first: a few kB, where a CRL may be 16 MB */
	if ((!identity_stat && !tls_identity_unchanged(cert, key)) ||
		(!trust_stat && !tls_trust_unchanged(ca, crl)))
		return false;
	memcpy(tls_ids, ids, sizeof(tls_ids));
	ereport(DEBUG1,
			(errmsg_internal("ZooKeeper TLS files read again: unchanged since the TLS context was built")));
	return true;
}

/*
 * Before a session opens: with zklock.ssl on, check the files as the
 * server and the library would (readable, PEM, the key matches the
 * certificate, which is valid now; the key's mode; the CRL file), load the
 * trust, learn the identity and build the TLS context.  Each file is read
 * once for the build, and what is checked, used and digested is what was
 * read.  The context, trust and identity are kept for the backend's next
 * session, which reads and builds nothing while every file is the same
 * by stat(), and builds nothing while the files stat() cannot vouch for
 * hold the same bytes (tls_built_still_holds, which reads those; the
 * certificate's validity and the key file's mode are checked again).
 * Raises a class-08 error that names the file.
 */
void
zkl_sess_tls_prepare(void)
{
	X509	   *volatile cert = NULL;
	EVP_PKEY   *volatile key = NULL;
	unsigned char *volatile cert_data = NULL;
	unsigned char *volatile key_data = NULL;
	volatile size_t key_len = 0;
	StringInfoData dn;
	char	   *ca;
	char	   *certp;
	char	   *keyp;
	char	   *crl = NULL;
	bool		crl_oom = false;
	ZklTlsFileId ids[4];

	if (!zkl_ssl)
	{
		tls_forget();
		return;
	}
	/* every check that raises before the first path is allocated */
	tls_path_check("zklock.ssl_ca_file", zkl_ssl_ca_file);
	tls_path_check("zklock.ssl_cert_file", zkl_ssl_cert_file);
	tls_path_check("zklock.ssl_key_file", zkl_ssl_key_file);
	ca = tls_path(zkl_ssl_ca_file);
	certp = tls_path(zkl_ssl_cert_file);
	keyp = tls_path(zkl_ssl_key_file);
	if (zkl_ssl_crl_file != NULL && zkl_ssl_crl_file[0] != '\0' &&
		(crl = tls_path(zkl_ssl_crl_file)) == NULL)
		crl_oom = true;
	if (ca == NULL || certp == NULL || keyp == NULL || crl_oom)
	{
		free(ca);
		free(certp);
		free(keyp);
		free(crl);
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	}
	if (tls_built_still_holds(ca, certp, keyp, crl, ids))
	{
		free(ca);
		free(certp);
		free(keyp);
		free(crl);
		tls_session_free(tls_session);
		tls_session = NULL;
		tls_check_validity(tls_cert_x509, tls_cert);
		tls_check_key_file(tls_key);
		return;
	}
	tls_forget();
	tls_ca = ca;
	tls_cert = certp;
	tls_key = keyp;
	tls_crl = crl;
	if (strlen(tls_ca) >= MAXPGPATH || (tls_crl && strlen(tls_crl) >= MAXPGPATH))
		ereport(ERROR,
				(errcode(ERRCODE_NAME_TOO_LONG),
				 errmsg("ZooKeeper TLS file path is too long")));
	/* taken before the files are read: a change meanwhile reads them again */
	memcpy(tls_ids, ids, sizeof(tls_ids));
	tls_trust = tls_load_trust();

	PG_TRY();
	{
		size_t		cert_len;
		size_t		len;
		const unsigned char *parts[2];
		size_t		lens[2];
		BIO		   *bio;

		cert_data = tls_read_or_raise(tls_cert, "zklock.ssl_cert_file", &cert_len);
		bio = BIO_new_mem_buf(cert_data, (int) cert_len);
		cert = bio ? PEM_read_bio_X509(bio, NULL, NULL, NULL) : NULL;
		BIO_free(bio);
		if (cert == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
					 errmsg("could not load a certificate from ZooKeeper TLS file \"%s\"",
							tls_cert),
					 errdetail("The file is zklock.ssl_cert_file; it must hold PEM certificates (%s).",
							   tls_openssl_error())));
		tls_check_validity(cert, tls_cert);
		tls_check_key_file(tls_key);
		key_data = tls_read_or_raise(tls_key, "zklock.ssl_key_file", &len);
		key_len = len;
		bio = BIO_new_mem_buf(key_data, (int) key_len);
		key = bio ? PEM_read_bio_PrivateKey(bio, NULL, zkl_tls_no_passphrase, NULL) : NULL;
		BIO_free(bio);
		if (key == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
					 errmsg("could not load a private key from ZooKeeper TLS key file \"%s\"",
							tls_key),
					 errdetail("The file is zklock.ssl_key_file; it must hold an unencrypted PEM key, since zklock takes no passphrase (%s).",
							   tls_openssl_error())));
		if (X509_check_private_key(cert, key) != 1)
		{
			ERR_clear_error();
			ereport(ERROR,
					(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
					 errmsg("ZooKeeper TLS key file \"%s\" does not match certificate file \"%s\"",
							tls_key, tls_cert),
					 errdetail("The files are zklock.ssl_key_file and zklock.ssl_cert_file.")));
		}
		initStringInfo(&dn);
		if (!tls_format_dn(X509_get_subject_name(cert), &dn) ||
			dn.len >= (int) sizeof(tls_own_id))
			ereport(ERROR,
					(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
					 errmsg("could not read the subject of ZooKeeper TLS client certificate \"%s\"",
							tls_cert),
					 errdetail("The subject must be a name of at most %d bytes.",
							   (int) sizeof(tls_own_id) - 1)));
		tls_ctx = tls_build_ctx(key, cert_data, cert_len);
		parts[0] = cert_data;
		lens[0] = cert_len;
		parts[1] = key_data;
		lens[1] = key_len;
		if (!tls_digest(tls_identity, 2, parts, lens))
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory")));
		strlcpy(tls_own_id, dn.data, sizeof(tls_own_id));
		tls_cert_x509 = cert;
		cert = NULL;
		tls_built = true;
		ereport(DEBUG1,
				(errmsg_internal("ZooKeeper TLS context built from \"%s\"", tls_cert)));
	}
	PG_FINALLY();
	{
		X509_free(cert);
		EVP_PKEY_free(key);
		free(cert_data);
		if (key_data != NULL)
			OPENSSL_cleanse(key_data, key_len);
		free(key_data);
	}
	PG_END_TRY();
}

/*
 * In the postmaster (zklock in shared_preload_libraries, zklock.ssl on at
 * start; OpenSSL started by tls_shared.c): check the files, load the trust
 * and build the context as a backend's first session would, so that every
 * backend forks with them, as PostgreSQL builds its own server context in
 * the postmaster.  No thread exists yet: the client library's threads
 * start in a backend, after the fork, and use the context as one built
 * there (OpenSSL's objects are memory; their counts are atomic).  A backend
 * compares the files by stat() before it uses them
 * (tls_built_still_holds) and builds its own when one changed or
 * a reload named another: the postmaster does not build again at reload.
 * A file that cannot be used is logged and left to each backend to
 * report; never an error here.
 */
void
zkl_sess_tls_preload(void)
{
	MemoryContext mcxt = CurrentMemoryContext;

	if (!zkl_ssl)
		return;
	PG_TRY();
	{
		zkl_sess_tls_prepare();
	}
	PG_CATCH();
	{
		ErrorData  *e;

		MemoryContextSwitchTo(mcxt);
		e = CopyErrorData();
		FlushErrorState();
		tls_forget();
		ereport(LOG,
				(errmsg("could not prepare the ZooKeeper TLS context at server start: %s",
						e->message),
				 errdetail("Each backend reads the TLS files when it opens its first ZooKeeper session, and reports what fails then.")));
		FreeErrorData(e);
	}
	PG_END_TRY();
}

/*
 * One server of the library's connect string ("address:port", the
 * addresses zklock.hosts resolved to, in its order) with the host written
 * in zklock.hosts; plain C.
 */
static bool
tls_server_init(ZklTlsServer *sv, const char *addr, size_t len,
				const ZklServer *given)
{
	char		text[ZKL_SERVER_ADDR_MAX];
	char	   *colon;

	if (len >= sizeof(text) || given->host_len >= sizeof(sv->host))
		return false;
	memcpy(text, addr, len);
	text[len] = '\0';
	colon = strrchr(text, ':');
	if (colon == NULL)
		return false;
	*colon = '\0';
	memset(sv, 0, sizeof(*sv));
	if (inet_pton(AF_INET, text, &((struct sockaddr_in *) &sv->addr)->sin_addr) == 1)
	{
		sv->addr.ss_family = AF_INET;
		((struct sockaddr_in *) &sv->addr)->sin_port = htons(atoi(colon + 1));
	}
	else if (inet_pton(AF_INET6, text, &((struct sockaddr_in6 *) &sv->addr)->sin6_addr) == 1)
	{
		sv->addr.ss_family = AF_INET6;
		((struct sockaddr_in6 *) &sv->addr)->sin6_port = htons(atoi(colon + 1));
	}
	else
		return false;
	memcpy(sv->host, given->host, given->host_len);
	sv->host[given->host_len] = '\0';
	sv->port = given->port;
	sv->is_address = zkl_hosts_numeric(given, text);
	return true;
}

/*
 * The key of a server's ticket in shared memory: the server as reached,
 * whether its host was checked, the digest of the CA and CRL files that
 * verified it (a trust's) and that of the client certificate and key
 * files, as loaded.  False when it does not fit.
 */
static bool
tls_shared_key(const ZklTlsServer *sv, const ZklTlsSession *ts,
			   const unsigned char *trust_digest, char *out, size_t cap)
{
	char		addr[INET6_ADDRSTRLEN] = "?";
	char		hex[4 * SHA256_DIGEST_LENGTH + 1];
	int			n;

	if (sv->addr.ss_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *) &sv->addr)->sin_addr,
				  addr, sizeof(addr));
	else
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *) &sv->addr)->sin6_addr,
				  addr, sizeof(addr));
	for (int i = 0; i < SHA256_DIGEST_LENGTH; i++)
		snprintf(hex + 2 * i, 3, "%02x", trust_digest[i]);
	for (int i = 0; i < SHA256_DIGEST_LENGTH; i++)
		snprintf(hex + 2 * (SHA256_DIGEST_LENGTH + i), 3, "%02x", ts->identity[i]);
	n = snprintf(out, cap, "%s|%d|%s|%d|%s", sv->host, sv->port, addr,
				 ts->check_host ? 1 : 0, hex);
	return n > 0 && (size_t) n < cap;
}

/*
 * The ticket another backend kept for a server under the files this
 * session loaded, to resume (tls_prepare checks it again before it is
 * offered); or none.
 */
static void
tls_shared_load(ZklTlsSession *ts, ZklTlsServer *sv)
{
	char		key[ZKL_TLS_KEY_MAX];
	unsigned char *der;
	int			len;
	const unsigned char *p;

	if (!tls_shared_key(sv, ts, ts->trust->digest, key, sizeof(key)))
		return;
	der = palloc(ZKL_TLS_TICKET_MAX);
	len = zkl_tls_shared_get(key, der, ZKL_TLS_TICKET_MAX);
	p = der + ZKL_TLS_VERIFIED_LEN;
	if (len > ZKL_TLS_VERIFIED_LEN)
	{
		SSL_SESSION *session = d2i_SSL_SESSION(NULL, &p,
											   len - ZKL_TLS_VERIFIED_LEN);
		uint64		verified = 0;

		for (int i = 0; i < ZKL_TLS_VERIFIED_LEN; i++)
			verified = (verified << 8) | der[i];
		if (session != NULL && SSL_SESSION_is_resumable(session) &&
			verified > 0)
		{
			pthread_mutex_lock(&zkl_sess_sync_mu);
			sv->resume = session;
			sv->resume_trust = tls_trust_ref_locked(ts->trust);
			sv->resume_verified = (time_t) verified;
			pthread_mutex_unlock(&zkl_sess_sync_mu);
		}
		else
			SSL_SESSION_free(session);
	}
	ERR_clear_error();
	pfree(der);
}

/*
 * The TLS side of the session being opened, for the library's connect
 * string hosts (zklock.hosts' servers resolved, in their order): the trust
 * loaded by zkl_sess_tls_prepare, each server's address, the host its
 * certificate must name, and the ticket another backend kept for it.
 * Before the handle starts.
 */
void
zkl_sess_tls_servers(const char *hosts)
{
	int			max = zkl_hosts_count(zkl_hosts);
	ZklServer  *given = palloc0(sizeof(ZklServer) * max);
	ZklTlsSession *ts;
	char		problem[256];
	int			n = zkl_hosts_parse(zkl_hosts, given, problem, sizeof(problem));
	const char *p = hosts;
	const char *end = zkl_hosts_end(hosts);

	tls_session_free(tls_session);
	tls_session = NULL;
	if (!zkl_ssl)
		return;
	ts = calloc(1, offsetof(ZklTlsSession, servers) + sizeof(ZklTlsServer) * max);
	if (ts == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	ts->ctx = tls_ctx;
	SSL_CTX_up_ref(ts->ctx);
	pthread_mutex_lock(&zkl_sess_sync_mu);
	ts->trust = tls_trust_ref_locked(tls_trust);
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	memcpy(ts->trust_ids, tls_ids, sizeof(ts->trust_ids));
	memcpy(ts->identity, tls_identity, sizeof(ts->identity));
	strlcpy(ts->ca_path, tls_ca, sizeof(ts->ca_path));
	if (tls_crl != NULL)
		strlcpy(ts->crl_path, tls_crl, sizeof(ts->crl_path));
	ts->check_host = zkl_ssl_hostname_verification;
	ts->ticket_max_age = zkl_ssl_ticket_max_age;
	tls_session = ts;
	for (int i = 0; i < n; i++)
	{
		const char *comma = memchr(p, ',', end - p);
		size_t		len = comma ? (size_t) (comma - p) : (size_t) (end - p);

		if (!tls_server_init(&ts->servers[i], p, len, &given[i]))
			elog(ERROR, "could not read server %d of the connect string \"%s\"",
				 i + 1, hosts);
		ts->nservers++;
		tls_shared_load(ts, &ts->servers[i]);
		p += len + (comma ? 1 : 0);
	}
	pfree(given);
}

/*
 * A setting's file as an absolute path, into out (MAXPGPATH); raise when
 * it does not fit, as zkl_sess_tls_prepare does.
 */
static void
tls_setting_path(const char *value, char *out)
{
	int			n;

	if (is_absolute_path(value))
		n = (int) strlcpy(out, value, MAXPGPATH);
	else
		n = snprintf(out, MAXPGPATH, "%s/%s", DataDir, value);
	if (n < 0 || n >= MAXPGPATH)
		ereport(ERROR,
				(errcode(ERRCODE_NAME_TOO_LONG),
				 errmsg("ZooKeeper TLS file path is too long")));
}

/*
 * Before each call that uses the open session: when a reload made
 * zklock.ssl_ca_file or zklock.ssl_crl_file name other files, the
 * session's next connection attempt reads those (the client certificate
 * and key stay the session's until it closes).  An empty CA setting is
 * left to the next session to report.  Main thread.
 */
void
zkl_sess_tls_follow_settings(void)
{
	char		ca[MAXPGPATH];
	char		crl[MAXPGPATH] = "";
	bool		changed;

	if (tls_session == NULL || !zkl_ssl ||
		zkl_ssl_ca_file == NULL || zkl_ssl_ca_file[0] == '\0')
		return;
	tls_setting_path(zkl_ssl_ca_file, ca);
	if (zkl_ssl_crl_file != NULL && zkl_ssl_crl_file[0] != '\0')
		tls_setting_path(zkl_ssl_crl_file, crl);
	pthread_mutex_lock(&zkl_sess_sync_mu);
	tls_session->ticket_max_age = zkl_ssl_ticket_max_age;
	changed = strcmp(ca, tls_session->ca_path) != 0 ||
		strcmp(crl, tls_session->crl_path) != 0;
	if (changed)
	{
		strlcpy(tls_session->ca_path, ca, sizeof(tls_session->ca_path));
		strlcpy(tls_session->crl_path, crl, sizeof(tls_session->crl_path));
		memset(tls_session->trust_ids, 0, sizeof(tls_session->trust_ids));
	}
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	if (changed)
	{
		char	   *new_ca = strdup(ca);
		char	   *new_crl = crl[0] ? strdup(crl) : NULL;

		if (new_ca == NULL || (crl[0] && new_crl == NULL))
		{
			free(new_ca);
			free(new_crl);
			return;
		}
		free(tls_ca);
		free(tls_crl);
		tls_ca = new_ca;
		tls_crl = new_crl;
	}
}

/*
 * The session is open: keep the tickets its servers gave in shared
 * memory, for the next backend, each under the key of the files that
 * verified its server (which may be newer than the session's first).
 */
void
zkl_sess_tls_share(void)
{
	for (int i = 0; tls_session && i < tls_session->nservers; i++)
	{
		ZklTlsServer *sv = &tls_session->servers[i];
		SSL_SESSION *session = NULL;
		ZklTlsTrust *trust = NULL;
		uint64		verified = 0;
		char		key[ZKL_TLS_KEY_MAX];
		unsigned char *der;
		unsigned char *q;
		int			len;

		pthread_mutex_lock(&zkl_sess_sync_mu);
		if (sv->resume != NULL && sv->resume_trust != NULL &&
			sv->resume_gen != sv->shared_gen)
		{
			session = sv->resume;
			SSL_SESSION_up_ref(session);
			trust = tls_trust_ref_locked(sv->resume_trust);
			verified = (uint64) sv->resume_verified;
			sv->shared_gen = sv->resume_gen;
		}
		pthread_mutex_unlock(&zkl_sess_sync_mu);
		if (session == NULL)
			continue;
		len = i2d_SSL_SESSION(session, NULL);
		if (len > 0 && len <= ZKL_TLS_TICKET_MAX - ZKL_TLS_VERIFIED_LEN &&
			tls_shared_key(sv, tls_session, trust->digest, key, sizeof(key)))
		{
			der = palloc(ZKL_TLS_VERIFIED_LEN + len);
			for (int j = 0; j < ZKL_TLS_VERIFIED_LEN; j++)
				der[j] = (unsigned char) (verified >> (56 - 8 * j));
			q = der + ZKL_TLS_VERIFIED_LEN;
			if (i2d_SSL_SESSION(session, &q) == len)
				zkl_tls_shared_put(key, der, ZKL_TLS_VERIFIED_LEN + len);
			pfree(der);
		}
		SSL_SESSION_free(session);
		tls_trust_release(trust);
	}
}

/*
 * How the TLS handshakes of the session went, for zklock.log_sessions:
 * "" without TLS.
 */
const char *
zkl_sess_tls_describe(void)
{
	int			handshakes = 0;
	int			resumed = 0;

	if (tls_session == NULL)
		return "";
	pthread_mutex_lock(&zkl_sess_sync_mu);
	for (int i = 0; i < tls_session->nservers; i++)
	{
		handshakes += tls_session->servers[i].handshakes;
		resumed += tls_session->servers[i].resumed;
	}
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	return psprintf("; TLS: %d handshake%s, %d resumed", handshakes,
					handshakes == 1 ? "" : "s", resumed);
}

/*
 * Start the handle over TLS with the session's context and servers
 * (zkl_sess_tls_servers), authenticating with SASL when sasl is given
 * (C client patch 0042); called where zookeeper_init2 would be, with
 * every signal blocked.  NULL with errno set when it could not start.
 */
zhandle_t *
zkl_sess_tls_init(const char *hosts, watcher_fn watcher, int timeout_ms,
				  log_callback_fn log, zoo_sasl_params_t *sasl)
{
	if (tls_session == NULL)
	{
		errno = EINVAL;
		return NULL;
	}
	if (sasl != NULL)
		return zookeeper_init_ssl_ctx_sasl(hosts, tls_session->ctx,
										   tls_prepare, tls_session, watcher,
										   timeout_ms, NULL, NULL, 0, log,
										   sasl);
	return zookeeper_init_ssl_ctx(hosts, tls_session->ctx, tls_prepare,
								  tls_session, watcher, timeout_ms, NULL, NULL,
								  0, log);
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

/*
 * Whether every server of the session being opened refused over TLS
 * because its certificate did not verify: the open need not wait longer.
 * Under mu.
 */
bool
zkl_sess_tls_all_refused_locked(void)
{
	if (tls_session == NULL || tls_session->nservers == 0)
		return false;
	for (int i = 0; i < tls_session->nservers; i++)
		if (!tls_session->servers[i].refused)
			return false;
	return true;
}

/* A server as written in zklock.hosts, "host:port"; plain C. */
static void
tls_server_text(const ZklTlsServer *sv, char *out, size_t cap)
{
	snprintf(out, cap, strchr(sv->host, ':') ? "[%s]:%d" : "%s:%d",
			 sv->host, sv->port);
}

/*
 * Why a server's certificate was refused, in words (copied under mu by the
 * caller); plain C.
 */
static void
tls_refusal_text(const ZklTlsServer *sv, const char *ca, const char *crl,
				 char *out, size_t cap)
{
	if (sv->verify_error == -1)
		snprintf(out, cap, "%s", sv->names);
	else if (sv->verify_error == X509_V_ERR_HOSTNAME_MISMATCH ||
		sv->verify_error == X509_V_ERR_IP_ADDRESS_MISMATCH)
		snprintf(out, cap, "the server's certificate does not name \"%s\", the %s it was reached under; it carries %s",
				 sv->host, sv->is_address ? "address" : "host name", sv->names);
	else
		snprintf(out, cap, "the server's certificate did not verify with zklock.ssl_ca_file \"%s\"%s%s%s: %s (it carries %s)",
				 ca, crl ? " and zklock.ssl_crl_file \"" : "", crl ? crl : "",
				 crl ? "\"" : "",
				 X509_verify_cert_error_string(sv->verify_error), sv->names);
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
tls_explain(ZklTlsProbe *p, const ZklTlsServer *sv, int err, unsigned long e,
			char *out, size_t cap)
{
	int			reason = e ? ERR_GET_REASON(e) : 0;
	const char *text = e ? ERR_reason_error_string(e) : NULL;
	bool		refused;
	ZklTlsServer copy;

	pthread_mutex_lock(&zkl_sess_sync_mu);
	refused = sv->refused;
	copy = *sv;
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	if (refused)
		tls_refusal_text(&copy, p->ca, p->crl, out, cap);
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
 * One TLS handshake with one server, with the session's context and host
 * check, then a short read for the server's verdict on our certificate
 * (TLS 1.3 sends it after the handshake).  Returns false with *out set
 * when it failed; plain C.
 */
static bool
tls_probe_one(ZklTlsProbe *p, ZklTlsServer *sv, int64_t deadline,
			  char *out, size_t cap)
{
	SSL		   *ssl = NULL;
	int			fd;
	bool		ok = false;
	int64_t		verdict;
	char		buf[PG_STRERROR_R_BUFLEN];
	socklen_t	len = sv->addr.ss_family == AF_INET6 ?
		sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);

	out[0] = '\0';
	ERR_clear_error();
	fd = socket(sv->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
	{
		snprintf(out, cap, "could not create a socket: %s",
				 strerror_r(errno, buf, sizeof(buf)));
		return false;
	}
	if (connect(fd, (struct sockaddr *) &sv->addr, len) != 0 &&
		errno != EINPROGRESS)
	{
		snprintf(out, cap, "could not connect: %s",
				 strerror_r(errno, buf, sizeof(buf)));
		goto done;
	}
	ssl = SSL_new(p->session->ctx);
	if (ssl == NULL || SSL_set_fd(ssl, fd) != 1 ||
		tls_prepare(ssl, (struct sockaddr *) &sv->addr, p->session) != 0)
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
			snprintf(out, cap, "could not connect: %s",
				 strerror_r(errno, buf, sizeof(buf)));
			goto done;
		}
		tls_explain(p, sv, err, ERR_peek_last_error(), out, cap);
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
			tls_explain(p, sv, err, ERR_peek_last_error(), out, cap);
		else
			ok = true;
		break;
	}
done:
	if (ssl != NULL)
		SSL_free(ssl);
	close(fd);
	ERR_clear_error();
	return ok;
}

static void
tls_probe_free(ZklTlsProbe *p)
{
	tls_session_free(p->session);
	free(p->ca);
	free(p->cert);
	free(p->crl);
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

	detail[0] = '\0';
	for (int i = 0; i < p->session->nservers && detail[0] == '\0'; i++)
	{
		ZklTlsServer *sv = &p->session->servers[i];

		if (tls_now_ms() >= deadline)
			break;
		if (!tls_probe_one(p, sv, deadline, detail, sizeof(detail)))
			tls_server_text(sv, server, sizeof(server));
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

	if (p == NULL)
		return;
	tls_probe = NULL;
	if (zkl_sess_sync_let_go(&p->done, &p->abandoned))
		tls_probe_free(p);
}

/*
 * Start a probe with the session's context and a copy of its servers (the
 * probe may outlive the session); quietly none on failure.
 */
static void
tls_probe_start(int budget_ms)
{
	ZklTlsProbe *p = calloc(1, sizeof(ZklTlsProbe));
	size_t		size;
	pthread_t	thread;
	sigset_t	all;
	sigset_t	saved;
	bool		started;

	tls_probe_abandon();
	if (p == NULL || tls_session == NULL)
	{
		free(p);
		return;
	}
	size = offsetof(ZklTlsSession, servers) +
		sizeof(ZklTlsServer) * tls_session->nservers;
	p->session = malloc(size);
	p->ca = strdup(tls_ca);
	p->cert = strdup(tls_cert);
	p->crl = tls_crl ? strdup(tls_crl) : NULL;
	p->budget_ms = budget_ms;
	if (!p->session || !p->ca || !p->cert || (tls_crl && !p->crl))
	{
		free(p->session);
		p->session = NULL;
		tls_probe_free(p);
		return;
	}
	pthread_mutex_lock(&zkl_sess_sync_mu);
	memcpy(p->session, tls_session, size);
	(void) tls_trust_ref_locked(p->session->trust);
	for (int i = 0; i < p->session->nservers; i++)
	{
		p->session->servers[i].resume = NULL;
		p->session->servers[i].resume_trust = NULL;
		p->session->servers[i].resume_verified = 0;
		p->session->servers[i].attempt_trust = NULL;
		p->session->servers[i].attempt_verified = 0;
		p->session->servers[i].refused = false;
	}
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	SSL_CTX_up_ref(p->session->ctx);
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
	if (!zkl_ssl || tls_session == NULL)
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
 * Let go of the probe; if it found a server that failed, raise naming it
 * and why.  Returns whether the probe had finished (every handshake it
 * made was sound).
 */
static bool
tls_raise_probed(void)
{
	char		detail[sizeof(((ZklTlsProbe *) 0)->detail)] = "";
	char		server[sizeof(((ZklTlsProbe *) 0)->server)] = "";
	bool		done = false;

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
	return done;
}

static bool
tls_probe_done(void *arg)
{
	(void) arg;
	return tls_probe == NULL || tls_probe->done;
}

/*
 * Every server closed the connection at once before answering, with TLS
 * on: under TLS 1.3 that is also how a server refuses the client
 * certificate (its alert comes with the first read, after the handshake).
 * Probe the servers, within the deadline, and raise what the probe
 * learned; return when it found every handshake sound.
 */
void
zkl_sess_tls_explain_closed(TimestampTz deadline)
{
	TimestampTz now = GetCurrentTimestamp();

	if (!zkl_ssl || tls_session == NULL || now >= deadline)
		return;
	if (tls_probe == NULL)
		tls_probe_start((int) ((deadline - now) / 1000));
	PG_TRY();
	{
		zkl_sess_wait_for_as(ZKL_WAIT_CONNECT, tls_probe_done, NULL, deadline);
	}
	PG_CATCH();
	{
		tls_probe_abandon();
		PG_RE_THROW();
	}
	PG_END_TRY();
	tls_raise_probed();
}

/*
 * The first server whose certificate was refused, as error fields; false
 * when none was.
 */
static bool
tls_first_refusal(char *server, size_t server_cap, char *detail,
				  size_t detail_cap, bool *host_mismatch)
{
	ZklTlsServer copy;
	bool		found = false;

	pthread_mutex_lock(&zkl_sess_sync_mu);
	for (int i = 0; tls_session && i < tls_session->nservers && !found; i++)
		if (tls_session->servers[i].refused)
		{
			copy = tls_session->servers[i];
			found = true;
		}
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	if (!found)
		return false;
	tls_server_text(&copy, server, server_cap);
	tls_refusal_text(&copy, tls_ca, tls_crl, detail, detail_cap);
	*host_mismatch = copy.verify_error == X509_V_ERR_HOSTNAME_MISMATCH ||
		copy.verify_error == X509_V_ERR_IP_ADDRESS_MISMATCH;
	return true;
}

/*
 * The session did not connect over TLS within connect_timeout, or every
 * server's certificate was refused: raise what the verification or the
 * probe learned, naming the server and the file.  Returns only when TLS
 * is off.
 */
void
zkl_sess_tls_report_failure(void)
{
	char		detail[sizeof(((ZklTlsProbe *) 0)->detail)] = "";
	char		server[sizeof(((ZklTlsProbe *) 0)->server)] = "";
	bool		done;
	bool		host_mismatch = false;

	if (!zkl_ssl || tls_session == NULL)
		return;
	if (tls_first_refusal(server, sizeof(server), detail, sizeof(detail),
						  &host_mismatch))
	{
		tls_probe_abandon();
		/* A sentence; one that starts with a setting's name keeps its case. */
		if (strncmp(detail, "zklock.", 7) != 0)
			detail[0] = pg_toupper((unsigned char) detail[0]);
		ereport(ERROR,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("could not connect to ZooKeeper server \"%s\" over TLS",
						server),
				 errdetail("%s.", detail),
				 host_mismatch ?
				 errhint("Name each server in zklock.hosts as its certificate does, or turn zklock.ssl_hostname_verification off for an ensemble whose certificates name no hosts.") :
				 errhint("Check zklock.ssl_ca_file, zklock.ssl_crl_file and the servers' certificates.")));
	}
	done = tls_raise_probed();
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

/*
 * Why the open session's reconnects fail over TLS, when a server's
 * certificate or the CA and CRL files were refused at its last attempt:
 * "with SERVER, WHY" into out, for an errdetail; false when none was.
 * Main thread.
 */
bool
zkl_sess_tls_refusal_detail(char *out, size_t cap)
{
	char		detail[sizeof(((ZklTlsProbe *) 0)->detail)];
	char		server[sizeof(((ZklTlsProbe *) 0)->server)];
	bool		host_mismatch;

	if (!tls_first_refusal(server, sizeof(server), detail, sizeof(detail),
						   &host_mismatch))
		return false;
	snprintf(out, cap, "with %s, %s", server, detail);
	return true;
}
