/*-------------------------------------------------------------------------
 *
 * tls_shared.h
 *	  What the TLS sessions of one cluster's backends share (tls_shared.c):
 *	  the servers' TLS session tickets, so that a new backend resumes a
 *	  TLS session instead of making a full handshake, and OpenSSL
 *	  initialised once in the postmaster.  A plain helper: only the session
 *	  files use it, on the backend's main thread.
 *
 * Without zklock in shared_preload_libraries there is no shared memory:
 * nothing is shared, and every backend makes its own full handshakes.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_TLS_SHARED_H
#define ZKLOCK_TLS_SHARED_H

#include <stddef.h>

/* Room for one serialised TLS session (DER), and for its key. */
#define ZKL_TLS_TICKET_MAX 8192
#define ZKL_TLS_KEY_MAX 1024

extern void zkl_tls_shared_init(void);
extern int	zkl_tls_no_passphrase(char *buf, int size, int rwflag, void *u);
extern int	zkl_tls_shared_get(const char *key, unsigned char *buf, int cap);
extern void zkl_tls_shared_put(const char *key, const unsigned char *der,
							   int len);

#endif							/* ZKLOCK_TLS_SHARED_H */
