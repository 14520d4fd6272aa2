/*-------------------------------------------------------------------------
 *
 * guc.h
 *	  Every zklock.* setting (guc.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_GUC_H
#define ZKLOCK_GUC_H

typedef enum ZklLossAction
{
	ZKL_LOSS_ERROR,				/* refuse commits until released */
	ZKL_LOSS_TERMINATE			/* end the backend */
} ZklLossAction;

typedef enum ZklNodeNaming
{
	ZKL_NAMING_MUTEX,			/* Curator InterProcessMutex: -lock- */
	ZKL_NAMING_READWRITE		/* Curator InterProcessReadWriteLock: -__WRIT__ */
} ZklNodeNaming;

extern char *zkl_hosts;
extern char *zkl_root;
extern int	zkl_session_timeout;
extern int	zkl_connect_timeout;
extern int	zkl_on_lock_loss;
extern char *zkl_auth;
extern char *zkl_fleet_advisory_keys;
extern bool zkl_guc_preloaded;
extern int	zkl_node_naming;
extern bool zkl_synchronous_release;
extern int	zkl_stat_max;
extern bool zkl_log_lock_waits;
extern bool zkl_log_sessions;
extern bool zkl_ssl;
extern char *zkl_ssl_ca_file;
extern char *zkl_ssl_cert_file;
extern char *zkl_ssl_crl_file;
extern bool zkl_ssl_hostname_verification;
extern char *zkl_ssl_key_file;
extern int	zkl_ssl_ticket_max_age;
extern char *zkl_sasl_host;
extern char *zkl_sasl_keytab;
extern char *zkl_sasl_mechanism;
extern char *zkl_sasl_password_file;
extern char *zkl_sasl_principal;
extern char *zkl_sasl_service;
extern char *zkl_sasl_user;
extern const char *zkl_guc_exclusive_infix(void);
extern const char *zkl_guc_chroot(void);
extern bool zkl_guc_use_auth(void);
extern bool zkl_guc_fleet_key(bool pair, int64 key);
extern void zkl_guc_define(void);

#endif							/* ZKLOCK_GUC_H */
