/*-------------------------------------------------------------------------
 *
 * session_held.h
 *	  The session as the lock set sees it: the face of the session family
 *	  (session*.c) for nodes that are held.  Open the session, name its
 *	  epoch, tell or prove a held node's health, release a node and wait
 *	  for the ensemble to answer releases, and what zk_session() shows.
 *	  Nothing here sends a lock request: acquiring is the recipe layer's.
 *
 * The lock set (ZKL_LOCKSET_LAYER), the recipe layer and the session files
 * include this header (session.h includes it for the latter two); the SQL
 * layer does not.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_SESSION_HELD_H
#define ZKLOCK_SESSION_HELD_H

#if !defined(ZKL_LOCKSET_LAYER) && !defined(ZKL_RECIPE_LAYER) && !defined(ZKL_SESSION_LAYER)
#error "session_held.h is for the lock set, the recipe layer and the session files only"
#endif

#include "datatype/timestamp.h"

#include "zkltypes.h"

extern void zkl_session_connect(void);
extern void zkl_session_connect_until(TimestampTz deadline);
extern uint64 zkl_session_epoch(void);
extern ZklLockHealth zkl_session_health(uint64 epoch, const char *node);
extern ZklLockHealth zkl_session_prove(uint64 epoch, const char *node,
									   TimestampTz deadline);
extern int64 zkl_session_unheard_ms(void);
extern void zkl_session_info(ZklSessionInfo *info);
extern void zkl_session_release(const char *path);
extern ZklReleaseWait zkl_session_await_releases(int *timeout_ms,
												  bool give_up);
extern char *zkl_session_take_denied(int *count);
extern void zkl_session_preload(void);

#endif							/* ZKLOCK_SESSION_HELD_H */
