/*-------------------------------------------------------------------------
 *
 * session.h
 *	  The one ZooKeeper session of this backend, as the recipe sees it:
 *	  connect, health and lease, asynchronous requests with zklock's own
 *	  result codes, waiting, node clean-up.  Implemented by the session
 *	  file family (session*.c), the only code that calls zoo_*.  Only the
 *	  recipe layer (ZKL_RECIPE_LAYER) and the session files (through
 *	  session_int.h) include it.  What the lock set needs of held nodes is
 *	  in session_held.h, which this header includes.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_SESSION_H
#define ZKLOCK_SESSION_H

#if !defined(ZKL_RECIPE_LAYER) && !defined(ZKL_SESSION_LAYER)
#error "session.h is for the recipe layer and the session files only"
#endif

#include "datatype/timestamp.h"

#include "compat.h"
#include "names.h"
#include "session_held.h"
#include "zkltypes.h"

/* The answer to a request, in zklock's terms. */
typedef enum ZklRc
{
	ZKL_RC_OK,
	ZKL_RC_NO_NODE,
	ZKL_RC_EXISTS,
	ZKL_RC_CONNECTION_LOST,		/* may have happened; worth a retry */
	ZKL_RC_SESSION_LOST,		/* expired or closed */
	ZKL_RC_DENIED,				/* an ACL or the credentials said no */
	ZKL_RC_FAILED				/* anything else */
} ZklRc;

/* One asynchronous request; filled in by a ZooKeeper thread. */
typedef struct ZklOp ZklOp;

/* Where the watch notifications stood when a watch was sent. */
typedef struct ZklWatchMark
{
	uint64		watch_events;
	uint64		session_events;
	uint64		node_losses;	/* nodes of ours deleted by someone else */
} ZklWatchMark;

/*
 * What a backend waits for, as pg_stat_activity shows it (wait_event_type
 * 'Extension'; from PostgreSQL 17 on, wait_event names the kind: ZkRequest,
 * ZkConnect, ZkLock, ZkSemaphore, ZkProof, ZkRelease).  Waits that set no
 * kind are ZKL_WAIT_REQUEST.
 */
typedef enum ZklWaitKind
{
	ZKL_WAIT_REQUEST,			/* the answer to a request */
	ZKL_WAIT_CONNECT,			/* a session opening or reconnecting */
	ZKL_WAIT_LOCK,				/* a lock held by another contender */
	ZKL_WAIT_SEMAPHORE,			/* a lease of a full semaphore */
	ZKL_WAIT_PROOF,				/* the ensemble confirming the session */
	ZKL_WAIT_RELEASE			/* the ensemble answering releases */
} ZklWaitKind;

#define ZKL_WAIT_KINDS (ZKL_WAIT_RELEASE + 1)

extern const char *zkl_session_own_prefix(void);
extern void zkl_session_next_uuid(char out[ZKL_UUID_LEN + 1]);

extern ZklOp *zkl_session_create_node(const char *path, const char *data,
									  const char *sweep_dir,
									  const char *sweep_prefix);
extern ZklOp *zkl_session_create_dir(const char *path, bool container);
extern ZklOp *zkl_session_create_mark(const char *path, const char *data);
extern ZklOp *zkl_session_claim(const char *path, const char *const *checks,
								 int n);
extern ZklOp *zkl_session_children(const char *path);
extern ZklOp *zkl_session_list_own(const char *path);
extern ZklOp *zkl_session_watch(const char *path);
extern ZklOp *zkl_session_watch_children(const char *path);
extern ZklOp *zkl_session_get(const char *path);
extern ZklOp *zkl_session_stat(const char *path);
extern ZklOp *zkl_session_get_acl(const char *path);
extern bool zkl_session_await(ZklOp *op, TimestampTz deadline);
extern ZklRc zkl_session_answer(ZklOp *op);
extern bool zkl_session_await_watch(const ZklWatchMark *mark,
									TimestampTz deadline);
extern bool zkl_session_await_watch_as(ZklWaitKind kind,
									   const ZklWatchMark *mark,
									   TimestampTz deadline);
extern ZklWaitKind zkl_session_wait_kind(ZklWaitKind kind);
extern ZklWatchMark zkl_session_op_mark(ZklOp *op);
extern bool zkl_session_deleted_since(const ZklWatchMark *mark,
									  const char *path);
extern char *zkl_session_op_take_node(ZklOp *op, int64 *czxid);
extern int	zkl_session_op_children(ZklOp *op, char ***children);
extern const char *zkl_session_op_data(ZklOp *op, int64 *czxid);
extern bool zkl_session_op_owned(ZklOp *op, int64 *czxid);
extern int64 zkl_session_op_ctime(ZklOp *op);
extern char *zkl_session_op_acl_problem(ZklOp *op);
extern const char *zkl_session_identity_name(void);
extern const char *zkl_session_identity_setting(void);
extern void zkl_session_op_free(ZklOp *op);
pg_noreturn extern void zkl_session_raise(ZklOp *op, const char *path);

extern void zkl_session_adopt_node(const char *path);
extern bool zkl_session_tracks(const char *path);
extern void zkl_session_unwatch(const char *path);
extern void zkl_session_delete_if_own(const char *path);
extern void zkl_session_unwatch_children(const char *path);
extern void zkl_session_watch_own(const char *path);

#endif							/* ZKLOCK_SESSION_H */
