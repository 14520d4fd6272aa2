/*
 * Patches 0022 and 0023 over TLS, with a TLS server of this test's own on
 * loopback that answers the session handshake and then creates as each
 * case needs.
 *
 * 0023: a read that fails after the I/O thread read replies from a TLS
 * record (while SSL_pending said it held more) must not throw those
 * replies away.  One TLS record carries the whole reply to a first create
 * and the start of a second's, and the connection ends there (a FIN in the
 * same segment, without close_notify).  The client reads the first reply
 * and meets the end of file reading the second.  The server executed the
 * first create: its completion must say ZOK, the second's ZCONNECTIONLOSS.
 * Before, the lost connection freed the first reply unprocessed and both
 * said ZCONNECTIONLOSS.
 *
 * 0022: an error left on the I/O thread's OpenSSL error queue (here by a
 * watcher, run on the I/O thread with io_completions) must not turn the
 * WANT_WRITE of a request's SSL_write into a lost connection: SSL_get_error
 * reads that queue.  The server reads nothing until the client's 8 MB
 * create has filled the sockets, then all of it, and answers.  Before, the
 * create said ZCONNECTIONLOSS.
 */
#include <errno.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/time.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <zookeeper/zookeeper.h>

#include "zkc_test.h"

static SSL_CTX *server_ctx;
static int	listen_fd = -1;
static int	server_ok;			/* the server sent what it meant to */
static int	case_queue;			/* the error-queue case, not the read-error one */
static int	results[2] = {1, 1};	/* the creates' completions (1: none yet) */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

/* A self-signed certificate and its key, made here. */
static SSL_CTX *
make_server_ctx(void)
{
	EVP_PKEY   *key = EVP_EC_gen("P-256");
	X509	   *x = X509_new();
	X509_NAME  *n;
	SSL_CTX    *ctx = SSL_CTX_new(TLS_server_method());

	if (key == NULL || x == NULL || ctx == NULL)
		return NULL;
	X509_set_version(x, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
	X509_gmtime_adj(X509_getm_notBefore(x), -60);
	X509_gmtime_adj(X509_getm_notAfter(x), 3600);
	X509_set_pubkey(x, key);
	n = X509_get_subject_name(x);
	X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC,
							   (const unsigned char *) "localhost", -1, -1, 0);
	X509_set_issuer_name(x, n);
	if (X509_sign(x, key, EVP_sha256()) == 0 ||
		SSL_CTX_use_certificate(ctx, x) != 1 ||
		SSL_CTX_use_PrivateKey(ctx, key) != 1)
		return NULL;
	X509_free(x);
	EVP_PKEY_free(key);
	return ctx;
}

static int
read_exact(SSL *ssl, unsigned char *buf, int len)
{
	int			off = 0;

	while (off < len)
	{
		int			r = SSL_read(ssl, buf + off, len - off);

		if (r <= 0)
			return -1;
		off += r;
	}
	return 0;
}

static void
put32(unsigned char *p, uint32_t v)
{
	v = htonl(v);
	memcpy(p, &v, 4);
}

/* A create's reply frame: length, ReplyHeader (xid, zxid, err), path. */
static int
create_reply(unsigned char *p, uint32_t xid, const char *path)
{
	int			plen = (int) strlen(path);
	int			body = 4 + 8 + 4 + 4 + plen;

	put32(p, body);
	put32(p + 4, xid);
	memset(p + 8, 0, 4);
	put32(p + 12, 7);			/* zxid */
	put32(p + 16, 0);			/* err: ZOK */
	put32(p + 20, plen);
	memcpy(p + 24, path, plen);
	return 4 + body;
}

static void *
server(void *arg)
{
	int			fd;
	SSL		   *ssl;
	unsigned char buf[4096];
	unsigned char out[256];
	uint32_t	xids[2];
	int			creates = 0;
	int			n;
	int			one = 1;
	struct timeval tv = {10, 0};

	(void) arg;
	fd = accept(listen_fd, NULL, NULL);
	if (fd < 0)
		return NULL;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	ssl = SSL_new(server_ctx);
	SSL_set_fd(ssl, fd);
	if (SSL_accept(ssl) != 1)
		goto out;
	/* the session handshake: its request, and a ConnectResponse */
	if (read_exact(ssl, buf, 4) != 0)
		goto out;
	n = ntohl(*(uint32_t *) buf);
	if (n <= 0 || n > (int) sizeof(buf) || read_exact(ssl, buf, n) != 0)
		goto out;
	memset(out, 0, sizeof(out));
	put32(out, 37);
	put32(out + 4, 0);			/* protocolVersion */
	put32(out + 8, 30000);		/* timeOut */
	put32(out + 16, 0x47d);		/* sessionId (low half) */
	put32(out + 20, 16);		/* passwd: 16 bytes, then readOnly 0 */
	if (SSL_write(ssl, out, 4 + 37) != 4 + 37)
		goto out;
	if (case_queue)
	{
		int			last = -1;
		int			queued = 0;
		double		until = zkc_test_now() + 10;

		/*
		 * Read nothing until the client's create has filled both sockets
		 * (what waits here stopped growing), so that its SSL_write met
		 * WANT_WRITE; then read requests up to the create, and answer it.
		 */
		while (zkc_test_now() < until &&
			   (queued < 65536 || queued != last))
		{
			last = queued;
			usleep(200000);
			if (ioctl(fd, FIONREAD, &queued) != 0)
				goto out;
		}
		for (;;)
		{
			unsigned char *big;

			if (read_exact(ssl, buf, 4) != 0)
				goto out;
			n = ntohl(*(uint32_t *) buf);
			if (n < 8 || n > (64 << 20) || (big = malloc(n)) == NULL)
				goto out;
			if (read_exact(ssl, big, n) != 0)
			{
				free(big);
				goto out;
			}
			xids[0] = ntohl(*(uint32_t *) big);
			creates = ntohl(*(uint32_t *) (big + 4)) == ZOO_CREATE_OP;
			free(big);
			if (creates)
				break;
		}
		n = create_reply(out, xids[0], "/big");
		if (SSL_write(ssl, out, n) != n)
			goto out;
		server_ok = 1;
		while (SSL_read(ssl, buf, sizeof(buf)) > 0)
			;
		goto out;
	}
	/* requests until two creates (a ping, opcode 11, gets no answer) */
	while (creates < 2)
	{
		if (read_exact(ssl, buf, 4) != 0)
			goto out;
		n = ntohl(*(uint32_t *) buf);
		if (n < 8 || n > (int) sizeof(buf) || read_exact(ssl, buf, n) != 0)
			goto out;
		if (ntohl(*(uint32_t *) (buf + 4)) == ZOO_CREATE_OP)
			xids[creates++] = ntohl(*(uint32_t *) buf);
	}
	/*
	 * One record: the first reply and the second's first 4 bytes; corked,
	 * so that the FIN goes in the same segment and the client meets it on
	 * the read after the first reply.
	 */
	n = create_reply(out, xids[0], "/first");
	n += create_reply(out + n, xids[1], "/second") - (int) strlen("/second") - 20;
	setsockopt(fd, IPPROTO_TCP, TCP_CORK, &one, sizeof(one));
	if (SSL_write(ssl, out, n) != n)
		goto out;
	shutdown(fd, SHUT_WR);
	server_ok = 1;
	/* until the client lets the connection go */
	while (recv(fd, buf, sizeof(buf), 0) > 0)
		;
out:
	SSL_free(ssl);
	close(fd);
	return NULL;
}

static void
created(int rc, const char *value, const void *data)
{
	(void) value;
	pthread_mutex_lock(&mu);
	results[(intptr_t) data] = rc;
	pthread_mutex_unlock(&mu);
}

/* The watcher, on the I/O thread: leaves an error on its OpenSSL queue. */
static void
watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	(void) zh;
	(void) type;
	(void) state;
	(void) path;
	(void) ctx;
	ERR_raise(ERR_LIB_USER, ERR_R_INTERNAL_ERROR);
}

/* A handle over TLS on a server thread of this test's; NULL on failure. */
static zhandle_t *
start(int queue, SSL_CTX **client_ctx, pthread_t *th)
{
	int			port;
	char		host[64];

	case_queue = queue;
	server_ok = 0;
	results[0] = results[1] = 1;
	port = zkc_test_port(1, &listen_fd);
	*client_ctx = SSL_CTX_new(TLS_client_method());
	if (port < 0 || *client_ctx == NULL ||
		pthread_create(th, NULL, server, NULL) != 0)
		return NULL;
	SSL_CTX_set_verify(*client_ctx, SSL_VERIFY_NONE, NULL);
	snprintf(host, sizeof(host), "127.0.0.1:%d", port);
	return zookeeper_init_ssl_ctx(host, *client_ctx, NULL, NULL,
								  queue ? watcher : NULL, 30000,
								  NULL, NULL, 0, NULL);
}

static void
stop(zhandle_t *zh, SSL_CTX *client_ctx, pthread_t th)
{
	if (zh != NULL)
		zookeeper_close(zh);
	shutdown(listen_fd, SHUT_RDWR);
	close(listen_fd);
	pthread_join(th, NULL);
	SSL_CTX_free(client_ctx);
}

/* Waits (20 s at most) until the completions of n creates came. */
static int
wait_results(int n, int *r)
{
	double		until = zkc_test_now() + 20;

	while (zkc_test_now() < until)
	{
		int			done = 1;

		pthread_mutex_lock(&mu);
		for (int i = 0; i < n; i++)
		{
			r[i] = results[i];
			done &= r[i] != 1;
		}
		pthread_mutex_unlock(&mu);
		if (done)
			return 1;
		usleep(10000);
	}
	return 0;
}

int
main(void)
{
	SSL_CTX    *client_ctx = NULL;
	pthread_t	th;
	zhandle_t  *zh;
	int			r[2] = {1, 1};
	int			done = 0;

	zoo_set_debug_level(0);
	zoo_set_io_completions(1);
	server_ctx = make_server_ctx();
	if (server_ctx == NULL)
	{
		check(0, "a TLS certificate for the test's server");
		return tap_done();
	}

	/* 0023: a failed read after a reply read from the same record */
	zh = start(0, &client_ctx, &th);
	check(zh != NULL, "a handle over TLS on the test's server");
	if (zh != NULL &&
		zoo_acreate(zh, "/first", "x", 1, &ZOO_OPEN_ACL_UNSAFE, 0, created,
					(void *) (intptr_t) 0) == ZOK &&
		zoo_acreate(zh, "/second", "x", 1, &ZOO_OPEN_ACL_UNSAFE, 0, created,
					(void *) (intptr_t) 1) == ZOK)
		done = wait_results(2, r);
	check(done && server_ok,
		  "the server answered the first create and ended the connection mid-reply; both completed");
	printf("# first create: %d, second create: %d\n", r[0], r[1]);
	check(r[0] == ZOK, "the first create, read before the failed read, completes with ZOK");
	check(r[1] == ZCONNECTIONLOSS, "the second, cut off, with ZCONNECTIONLOSS");
	stop(zh, client_ctx, th);

	/* 0022: an error on the I/O thread's queue and a WANT_WRITE */
	done = 0;
	r[0] = 1;
	zh = start(1, &client_ctx, &th);
	if (zh != NULL)
	{
		double		until = zkc_test_now() + 20;
		char	   *data = malloc(8 << 20);

		while (zoo_state(zh) != ZOO_CONNECTED_STATE && zkc_test_now() < until)
			usleep(10000);
		if (data != NULL && zoo_state(zh) == ZOO_CONNECTED_STATE)
		{
			memset(data, 'z', 8 << 20);
			if (zoo_acreate(zh, "/big", data, 8 << 20, &ZOO_OPEN_ACL_UNSAFE, 0,
							created, (void *) (intptr_t) 0) == ZOK)
				done = wait_results(1, r);
		}
		free(data);
	}
	printf("# the 8 MB create: %d\n", r[0]);
	check(done && r[0] == ZOK,
		  "an 8 MB create written while the I/O thread's error queue held an error completes with ZOK");
	check(server_ok, "the server read it whole after the client's sockets were full");
	stop(zh, client_ctx, th);
	SSL_CTX_free(server_ctx);
	return tap_done();
}
