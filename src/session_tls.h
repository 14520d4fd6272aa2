/*-------------------------------------------------------------------------
 *
 * session_tls.h
 *	  TLS for the session files (session_tls.c): the files' checks and the
 *	  session's TLS context, the handle's start over TLS, the certificate
 *	  identity for ACLs, the servers whose certificates were refused, and
 *	  what a connection that never completes over TLS is reported as.  Only
 *	  the session files include it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_SESSION_TLS_H
#define ZKLOCK_SESSION_TLS_H

#include <zookeeper/zookeeper.h>

#include "utils/timestamp.h"

extern void zkl_sess_tls_prepare(void);
extern void zkl_sess_tls_preload(void);
extern void zkl_sess_tls_servers(const char *hosts);
extern void zkl_sess_tls_share(void);
extern void zkl_sess_tls_follow_settings(void);
extern const char *zkl_sess_tls_describe(void);
extern zhandle_t *zkl_sess_tls_init(const char *hosts, watcher_fn watcher,
							   int timeout_ms, log_callback_fn log,
							   zoo_sasl_params_t *sasl);
extern bool zkl_sess_tls_all_refused_locked(void);
extern bool zkl_sess_tls_refusal_detail(char *out, size_t cap);
extern bool zkl_sess_tls_wait_connect(bool (*ready) (void *), TimestampTz deadline);
extern void zkl_sess_tls_explain_closed(TimestampTz deadline);
extern void zkl_sess_tls_report_failure(void);
extern bool zkl_sess_tls_has_identity(void);
extern bool zkl_sess_tls_is_own_id(const char *scheme, const char *id);

#endif							/* ZKLOCK_SESSION_TLS_H */
