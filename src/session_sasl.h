/*-------------------------------------------------------------------------
 *
 * session_sasl.h
 *	  SASL for the session files (session_sasl.c): the settings and the
 *	  password file checked and read, the parameters the handle
 *	  authenticates with, and the errors of a refused or demanded SASL
 *	  authentication.  Only the session files include it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_SESSION_SASL_H
#define ZKLOCK_SESSION_SASL_H

#include <zookeeper/zookeeper.h>

#include "utils/timestamp.h"

extern bool zkl_sess_sasl_enabled(void);
extern bool zkl_sess_sasl_gssapi(void);
extern void zkl_sess_sasl_prepare(void);
extern void zkl_sess_sasl_wipe_password(void);
extern void zkl_sess_sasl_servers(const char *hosts);
extern zoo_sasl_params_t *zkl_sess_sasl_params(void);
extern bool zkl_sess_sasl_failure(zhandle_t *zh, char *out, size_t cap);
extern void zkl_sess_sasl_learn_identity(zhandle_t *zh, TimestampTz deadline);
extern bool zkl_sess_sasl_has_identity(void);
extern bool zkl_sess_sasl_is_own_id(const char *scheme, const char *id);
pg_noreturn extern void zkl_sess_sasl_raise_failed(const char *why);
pg_noreturn extern void zkl_sess_sasl_raise_required(const char *failed,
													 const char *path);

#endif							/* ZKLOCK_SESSION_SASL_H */
