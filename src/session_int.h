/*-------------------------------------------------------------------------
 *
 * session_int.h
 *	  Internals of the session file family, the only code that calls zoo_*;
 *	  nothing outside the family includes this header.
 *
 * Each file owns its state: its fields are static in it, and the others
 * reach them through the functions below (the one variable shared is the
 * mutex itself, zkl_sess_sync_mu).  The files call each other one
 * way only, down this list (a file may call the ones above it, never one
 * below); where a lower file must tell a higher one something, the higher
 * one registers a callback:
 *
 *	 session_clock.c	the clock (ZklStamp): no state
 *	 session_sync.c		the one mutex mu, the eventfd that wakes the main
 *						thread, the count of external descriptors
 *	 session_log.c		the client library's log, kept until the main thread
 *						emits it
 *	 session_wait.c		the main thread's waits (latch, eventfd, interrupts)
 *	 session_tls.c		TLS (session_tls.h): the files' checks, the handle's
 *						start with zookeeper_init_ssl, the certificate
 *						identity, the TLS error of a connection that never
 *						completes
 *	 session_sasl.c		SASL (session_sasl.h): the settings and the password
 *						file read, Cyrus SASL started, the callbacks and
 *						parameters of the handle's SASL login, the sasl
 *						identity (whoAmI), the errors of a refused login
 *	 session_state.c	the handle and what the library says of it: state,
 *						negotiated timeout, session id, loss, the requests
 *						under way, the meaning of its result codes
 *	 session_cleanup.c	the clean-up queue: deletes and unwatches retried
 *						until answered, sweeps (the lease registers to hear
 *						of answered deletes)
 *	 session_lease.c	this session's lock nodes, the lease, its proofs and
 *						its thread; releases
 *	 session_request.c	the asynchronous requests of the recipe (ZklOp), the
 *						watch notifications, the errors they raise
 *	 session.c			open and close, the resolver thread, the session
 *						watcher: it wires the others together
 *
 * Names: what session.h declares is zkl_session_*; what a family file
 * exports to the others is zkl_sess_<file>_* (zkl_sess_lease_renew_locked
 * is session_lease.c's), the clock's zkl_stamp_*; statics are session_*.
 * A function whose name ends in _locked is called with mu held.
 *
 * Thread rules for the whole family.  Six kinds of threads run its code:
 * the backend's main thread; the client library's IO thread (the session
 * and data watchers, completions, the log callback: zoo_set_io_completions,
 * a patch of ours, runs them there, and the library starts no completion
 * thread);
 * the lease thread of session_lease.c (while the session has lock nodes);
 * the resolver thread of session.c (while a session opens); the probe
 * thread of session_tls.c (while a TLS session is slow to open, a
 * handshake of its own that names the cause); and the Kerberos thread of
 * session_sasl.c (while a GSSAPI session opens, getting its credentials
 * from the KDC; one given up on ends by itself).  Code on the last five
 * kinds is plain C: it takes mu, copies results into
 * malloc'd memory, may send further asynchronous zoo_a* requests (clean-
 * ups, lease proofs) and writes the eventfd.  It never calls palloc, elog,
 * CHECK_FOR_INTERRUPTS or anything else of PostgreSQL.  Everything shared
 * between threads is read and written under mu, the one mutex, except
 * what the main thread alone writes before another thread can read it
 * (the eventfd, zklock.auth's ACL id) and the handle, which only the main
 * thread writes (under mu) and may read without it.  No zoo_* call is
 * made while holding mu: the library may run a completion, which takes
 * mu, inside it.
 *
 * The main thread sends only asynchronous requests and waits for them in
 * session_wait.c, where cancels and timeouts are served; with
 * zoo_set_caller_sends (another patch of ours) the library writes such a
 * request to the socket on the calling thread when the socket takes it at
 * once (never with TLS), else wakes its IO thread for it.  Two library
 * calls block it: zookeeper_init2 or zookeeper_init_ssl (the connect
 * string is resolved first, where a cancel is served, so it finds only
 * addresses) and
 * zookeeper_close (bounded by the library: about 4.5 s at most).
 *
 * A request the library refuses with ZMARSHALLINGERROR may still have its
 * completion registered: 3.8.0 registers the completion, then fails to
 * queue the request when out of memory, and the completion runs later
 * (when the next reply comes out of order and the library drops the
 * connection, or at close) with the object it was given.  So the sender
 * never frees such an object: it goes to its file's limbo list, whence
 * its completion takes and frees it, or the close does when none came.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_SESSION_INT_H
#define ZKLOCK_SESSION_INT_H

#include <pthread.h>
#include <stdint.h>
#include <zookeeper/zookeeper.h>

#if defined(ZKL_RECIPE_LAYER) || defined(ZKL_LOCKSET_LAYER) || defined(ZKL_SQL_LAYER)
#error "session_int.h is for the session files only"
#endif
#define ZKL_SESSION_LAYER

#include "session.h"

/* session_clock.c: a point in time, on two clocks. */
typedef struct ZklStamp
{
	int64_t		boot_ms;		/* CLOCK_BOOTTIME */
	int64_t		wall_ms;		/* CLOCK_REALTIME */
} ZklStamp;

extern void zkl_stamp_now(ZklStamp *s);
extern int64_t zkl_stamp_diff_ms(const ZklStamp *a, const ZklStamp *b);
extern int64_t zkl_stamp_age_ms(const ZklStamp *s);

/* session_sync.c */
extern pthread_mutex_t zkl_sess_sync_mu;
extern void zkl_sess_sync_open(void);
extern int	zkl_sess_sync_fd(void);
extern void zkl_sess_sync_kick(void);
extern void zkl_sess_sync_clear(void);
extern bool zkl_sess_sync_let_go(const bool *done, bool *abandoned);
extern void zkl_sess_sync_acquire_fds(int n);
extern void zkl_sess_sync_release_fds(int n);

/* session_log.c */
extern void zkl_sess_log_callback(const char *message);
extern void zkl_sess_log_flush(void);
extern void zkl_sess_log_closed_reset_locked(void);
extern int	zkl_sess_log_closed_locked(char *list, size_t size);

/* session_wait.c: ready(arg) is checked with mu held. */
typedef bool (*ZklReady) (void *arg);

extern void zkl_sess_wait_init(void);
extern bool zkl_sess_wait_for(ZklReady ready, void *arg, TimestampTz deadline);
extern bool zkl_sess_wait_for_as(ZklWaitKind kind, ZklReady ready, void *arg,
								 TimestampTz deadline);
extern ZklReleaseWait zkl_sess_wait_held(ZklReady ready, void *arg,
										 TimestampTz deadline);
extern void zkl_sess_wait_drain(ZklReady ready, void *arg, int timeout_ms);

/* session_state.c */
extern ZklRc zkl_sess_state_rc(int rc);
extern zhandle_t *zkl_sess_state_handle(void);
extern void zkl_sess_state_start(zhandle_t *zh);
extern void zkl_sess_state_reset_locked(void);
extern void zkl_sess_state_record_locked(int state, int timeout_ms,
										 int64_t session_id);
extern bool zkl_sess_state_connected_locked(void);
extern bool zkl_sess_state_ended_locked(void);
extern bool zkl_sess_state_auth_failed_locked(void);
extern bool zkl_sess_state_settled(void *arg);
extern bool zkl_sess_state_set_lost_locked(void);
extern bool zkl_sess_state_lost_locked(void);
extern int	zkl_sess_state_timeout_ms_locked(void);
extern int64_t zkl_sess_state_session_id_locked(void);
extern const char *zkl_sess_state_name_locked(void);
extern void zkl_sess_state_sent_locked(void);
extern void zkl_sess_state_answered_locked(void);
extern bool zkl_sess_state_all_answered(void *arg);

/* session_cleanup.c */
typedef enum ZklCleanupKind
{
	ZKL_CLEAN_DELETE,			/* delete path */
	ZKL_CLEAN_DELETE_OWN,		/* delete path if this session owns it */
	ZKL_CLEAN_SWEEP,			/* list path, delete children with prefix */
	ZKL_CLEAN_UNWATCH,			/* remove our data watch on path */
	ZKL_CLEAN_UNWATCH_CHILDREN	/* remove our child watch on path */
} ZklCleanupKind;

extern void zkl_sess_cleanup_on_delete(void (*hook) (const ZklStamp *sent));
extern void zkl_sess_cleanup_on_unwatched_children(void (*hook) (const char *dir));
extern bool zkl_sess_cleanup_queue_locked(ZklCleanupKind kind, const char *path,
										  const char *prefix);
extern void zkl_sess_cleanup_issue(void);
extern bool zkl_sess_cleanup_unsent_locked(void);
extern uint64 zkl_sess_cleanup_mark_locked(void);
extern bool zkl_sess_cleanup_pending_locked(uint64 mark);
extern void zkl_sess_cleanup_drop_all_locked(void);
extern void zkl_sess_cleanup_rearm_locked(void);
extern void zkl_sess_cleanup_write_answered_locked(const ZklStamp *sent);

/* session_lease.c */
extern bool zkl_sess_lease_add_node_locked(const char *path, bool listed);
extern void zkl_sess_lease_listed_locked(const char *dir, bool ok,
										 char **names, int count);
extern void zkl_sess_lease_uncover_dir_locked(const char *dir);
extern void zkl_sess_lease_dir_unwatched_locked(const char *dir);
extern void zkl_sess_lease_dir_watcher(zhandle_t *zh, int type, int state,
									   const char *path, void *ctx);
extern void zkl_sess_lease_forget_node_locked(const char *path);
extern void zkl_sess_lease_renew_locked(const ZklStamp *sent);
extern bool zkl_sess_lease_lost_locked(void);
extern uint64 zkl_sess_lease_node_losses_locked(void);
extern void zkl_sess_lease_mark_lost_locked(void);
extern void zkl_sess_lease_wake_locked(void);
extern void zkl_sess_lease_watch_nodes(void);
extern void zkl_sess_lease_reset_locked(void);
extern bool zkl_sess_lease_start(void);
extern void zkl_sess_lease_stop(void);

/* session_request.c */
extern void zkl_sess_request_set_identity(void);
extern void zkl_sess_request_session_event_locked(void);
extern uint64 zkl_sess_request_watch_events_locked(void);
extern void zkl_sess_request_free_limbo_locked(void);

#endif							/* ZKLOCK_SESSION_INT_H */
