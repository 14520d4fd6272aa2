/*-------------------------------------------------------------------------
 *
 * zklock.h
 *	  Shared declarations of the zklock extension: cluster-wide advisory
 *	  locks backed by a ZooKeeper ensemble.
 *
 * The layers, top to bottom: sql_api.c -> lockset.c -> recipe.c ->
 * session.c, with names.c (plain C) and guc.c beside them.  See
 * DESIGN.md for the rules each layer keeps.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_H
#define ZKLOCK_H

#include "datatype/timestamp.h"
#include "nodes/pg_list.h"
#include "names.h"

/* guc.c */
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
extern bool zkl_preloaded;
extern int	zkl_node_naming;
extern const char *zkl_guc_exclusive_infix(void);
extern void zkl_guc_define(void);

/* session.c */

/* What this backend's session says about locks taken in one epoch. */
typedef enum ZklLockHealth
{
	ZKL_HEALTH_HELD,			/* session connected, nodes are ours */
	ZKL_HEALTH_IN_DOUBT,		/* disconnected, session may still live */
	ZKL_HEALTH_LOST				/* session expired or replaced */
} ZklLockHealth;

/* One asynchronous ZooKeeper request; filled in by a ZooKeeper thread. */
typedef struct ZklOp ZklOp;

/* What zk_session() shows. */
typedef struct ZklSessionInfo
{
	const char *state;
	int64		session_id;
	char	   *server;
	int			timeout_ms;
	uint64		watch_events;
} ZklSessionInfo;

extern void zkl_session_connect(void);
extern uint64 zkl_session_epoch(void);
extern const char *zkl_session_own_prefix(void);
extern void zkl_session_next_uuid(char out[ZKL_UUID_LEN + 1]);
extern ZklLockHealth zkl_session_health(uint64 epoch);
extern ZklOp *zkl_session_create(const char *path, const char *data,
								 int flags, const char *sweep_dir,
								 const char *sweep_prefix);
extern ZklOp *zkl_session_children(const char *path);
extern ZklOp *zkl_session_watch(const char *path);
extern bool zkl_session_await(ZklOp *op, TimestampTz deadline);
extern bool zkl_session_await_watch(uint64 since, TimestampTz deadline);
extern uint64 zkl_session_watch_count(void);
extern int	zkl_session_op_rc(ZklOp *op);
extern char *zkl_session_op_take_node(ZklOp *op, int64 *czxid);
extern int	zkl_session_op_children(ZklOp *op, char ***children);
extern void zkl_session_op_free(ZklOp *op);
extern void zkl_session_unwatch(const char *path);
extern void zkl_session_delete(const char *path);
extern void zkl_session_hold(const char *path);
extern void zkl_session_release(const char *path);
extern ZklOp *zkl_session_stat(const char *path);
extern ZklOp *zkl_session_get(const char *path);
extern const char *zkl_session_op_data(ZklOp *op, int64 *czxid);
extern void zkl_session_info(ZklSessionInfo *info);
extern bool zkl_session_op_owned(ZklOp *op, int64 *czxid);
extern ZklLockHealth zkl_session_settle(uint64 epoch, TimestampTz deadline);
extern void zkl_session_raise(int rc, const char *what, const char *path)
			pg_attribute_noreturn();

/* recipe.c */

/* A row of zk_lock_queue(). */
typedef struct ZklQueueRow
{
	int			position;
	bool		shared;
	bool		holds;
	char	   *node;
	int64		token;
	char	   *data;
} ZklQueueRow;

extern List *zkl_recipe_queue(const char *dir);
extern bool zkl_recipe_acquire(const char *dir, bool shared,
							   const char *data, TimestampTz deadline,
							   char **node, int64 *token);

/* lockset.c */

/* A row of the zk_locks view. */
typedef struct ZklLockRow
{
	char	   *name;
	bool		shared;
	bool		xact;
	int			holds;
	char	   *node;
	int64		token;
	TimestampTz acquired_at;
	ZklLockHealth health;
} ZklLockRow;

extern bool zkl_lockset_acquire(const char *name, bool shared, bool xact,
								int64 timeout_ms, int64 *token);
extern bool zkl_lockset_release(const char *name, bool shared);
extern void zkl_lockset_release_all(void);
extern List *zkl_lockset_rows(void);
extern char *zkl_lockset_dir(const char *name);
extern int	zkl_lockset_count(void);

#endif							/* ZKLOCK_H */
