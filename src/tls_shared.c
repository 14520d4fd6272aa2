/*-------------------------------------------------------------------------
 *
 * tls_shared.c
 *	  The servers' TLS session tickets in shared memory, for every backend
 *	  of the cluster, and OpenSSL initialised in the postmaster.  Only
 *	  with zklock in shared_preload_libraries.
 *
 * A backend's first session over TLS costs a full handshake: the server's
 * signature and certificate chain, the client's signature, and OpenSSL's
 * own start in a new process.  A session resumed from a ticket the server
 * gave another backend costs one key exchange.  The tickets are kept in a
 * few fixed slots, each under a key that names the server and everything
 * that decided to trust it (session_tls.c writes it: the host check and
 * the SHA-256 digests of the CA and CRL files that verified the server and
 * of the client certificate and key files, as loaded), so that a changed
 * file is never passed over by a resumption; the least recently written
 * slot is reused.  A backend checks a ticket again before it offers it
 * (session_tls.c keeps with each the time a full handshake last verified
 * its server's chain).  The slots hold secrets as the key file does: only
 * the cluster's own processes map them.
 *
 * The postmaster initialises OpenSSL and builds one client context (with
 * zklock.ssl on at start), as PostgreSQL does for its own ssl: backends
 * fork with OpenSSL's providers and algorithms ready (session_tls.c then
 * builds, in the postmaster too, the context the backends' sessions use).
 * Nothing here runs on a thread other than the main one.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"

#include "guc.h"
#include "tls_shared.h"

#define ZKL_TLS_SLOTS 16

typedef struct ZklTlsSlot
{
	uint64		written;		/* when, on the area's counter; 0: empty */
	int			len;
	char		key[ZKL_TLS_KEY_MAX];
	unsigned char der[ZKL_TLS_TICKET_MAX];
} ZklTlsSlot;

typedef struct ZklTlsArea
{
	LWLock	   *lock;
	uint64		counter;
	ZklTlsSlot	slots[ZKL_TLS_SLOTS];
} ZklTlsArea;

static ZklTlsArea *tls_area = NULL;
static shmem_startup_hook_type tls_prev_shmem_startup = NULL;
static shmem_request_hook_type tls_prev_shmem_request = NULL;

static void
tls_shmem_request(void)
{
	if (tls_prev_shmem_request)
		tls_prev_shmem_request();
	RequestAddinShmemSpace(MAXALIGN(sizeof(ZklTlsArea)));
	RequestNamedLWLockTranche("zklock tls", 1);
}

static void
tls_shmem_startup(void)
{
	bool		found;

	if (tls_prev_shmem_startup)
		tls_prev_shmem_startup();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	tls_area = ShmemInitStruct("zklock tls", sizeof(ZklTlsArea), &found);
	if (!found)
	{
		memset(tls_area, 0, sizeof(ZklTlsArea));
		tls_area->lock = &(GetNamedLWLockTranche("zklock tls"))->lock;
	}
	LWLockRelease(AddinShmemInitLock);
}

/*
 * OpenSSL's passphrase callback that never gives one: zklock has nowhere
 * to keep one, and the postmaster no one to ask (OpenSSL's default
 * callback prompts on the terminal).
 */
int
zkl_tls_no_passphrase(char *buf, int size, int rwflag, void *u)
{
	(void) buf;
	(void) size;
	(void) rwflag;
	(void) u;
	return -1;
}

/*
 * Read a PEM file of a setting and drop what it held: the decoders it
 * needs are then ready in every backend.  Quietly nothing on failure (the
 * backend reports the file when a session opens).
 */
static void
tls_warm_file(const char *setting_value, bool key)
{
	char	   *path;
	BIO		   *bio;

	if (setting_value == NULL || setting_value[0] == '\0')
		return;
	path = is_absolute_path(setting_value) ? pstrdup(setting_value) :
		psprintf("%s/%s", DataDir, setting_value);
	bio = BIO_new_file(path, "r");
	if (bio != NULL)
	{
		if (key)
			EVP_PKEY_free(PEM_read_bio_PrivateKey(bio, NULL, zkl_tls_no_passphrase, NULL));
		else
			X509_free(PEM_read_bio_X509(bio, NULL, NULL, NULL));
		BIO_free(bio);
	}
	pfree(path);
}

/* In _PG_init of the postmaster (shared_preload_libraries). */
void
zkl_tls_shared_init(void)
{
	tls_prev_shmem_request = shmem_request_hook;
	shmem_request_hook = tls_shmem_request;
	tls_prev_shmem_startup = shmem_startup_hook;
	shmem_startup_hook = tls_shmem_startup;
	if (!zkl_ssl)
		return;
	(void) OPENSSL_init_ssl(OPENSSL_INIT_LOAD_CONFIG, NULL);
	SSL_CTX_free(SSL_CTX_new(TLS_client_method()));
	tls_warm_file(zkl_ssl_ca_file, false);
	tls_warm_file(zkl_ssl_key_file, true);
	ERR_clear_error();
}

/* The slot of a key, or NULL; under the lock. */
static ZklTlsSlot *
tls_slot_of(const char *key)
{
	for (int i = 0; i < ZKL_TLS_SLOTS; i++)
		if (tls_area->slots[i].written != 0 &&
			strcmp(tls_area->slots[i].key, key) == 0)
			return &tls_area->slots[i];
	return NULL;
}

/*
 * The ticket kept under key, copied into buf (cap bytes): its length, or
 * 0 when there is none.
 */
int
zkl_tls_shared_get(const char *key, unsigned char *buf, int cap)
{
	ZklTlsSlot *slot;
	int			len = 0;

	if (tls_area == NULL || strlen(key) >= ZKL_TLS_KEY_MAX)
		return 0;
	LWLockAcquire(tls_area->lock, LW_SHARED);
	slot = tls_slot_of(key);
	if (slot != NULL && slot->len <= cap)
	{
		len = slot->len;
		memcpy(buf, slot->der, len);
	}
	LWLockRelease(tls_area->lock);
	return len;
}

/* Keep a ticket under key, in its slot or the least recently written. */
void
zkl_tls_shared_put(const char *key, const unsigned char *der, int len)
{
	ZklTlsSlot *slot;

	if (tls_area == NULL || strlen(key) >= ZKL_TLS_KEY_MAX ||
		len <= 0 || len > ZKL_TLS_TICKET_MAX)
		return;
	LWLockAcquire(tls_area->lock, LW_EXCLUSIVE);
	slot = tls_slot_of(key);
	if (slot == NULL)
	{
		slot = &tls_area->slots[0];
		for (int i = 1; i < ZKL_TLS_SLOTS; i++)
			if (tls_area->slots[i].written < slot->written)
				slot = &tls_area->slots[i];
		strlcpy(slot->key, key, sizeof(slot->key));
	}
	memcpy(slot->der, der, len);
	slot->len = len;
	slot->written = ++tls_area->counter;
	LWLockRelease(tls_area->lock);
}
