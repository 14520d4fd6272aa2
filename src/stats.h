/*-------------------------------------------------------------------------
 *
 * stats.h
 *	  Cumulative statistics in shared memory (stats.c): per database, user,
 *	  lock name and mode for zk_stat_locks, and the cluster's session
 *	  counters for zk_stat_sessions.  A plain helper: any layer may count,
 *	  and counting never talks to ZooKeeper.  The session counters are
 *	  atomics, so that the client library's threads may count too; every
 *	  other function runs in the backend's main thread.
 *
 * Without zklock in shared_preload_libraries there is no shared memory:
 * counting does nothing, and the views raise.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_STATS_H
#define ZKLOCK_STATS_H

#include "datatype/timestamp.h"
#include "nodes/pg_list.h"

/* The modes a lock is counted in: the names zk_locks shows. */
typedef enum ZklStatMode
{
	ZKL_STAT_EXCLUSIVE,
	ZKL_STAT_SHARED,
	ZKL_STAT_LEASE
} ZklStatMode;

/* What one event adds to a lock's counters (times in milliseconds). */
typedef struct ZklLockCounts
{
	int64		acquisitions;
	int64		waited;
	double		wait_time_total;
	double		wait_time_max;
	int64		timeouts;
	int64		cancels;
	int64		deadlocks;
	int64		lost;
	int64		commits_refused;
	double		hold_time_total;
	double		hold_time_max;
} ZklLockCounts;

/* The cluster's session counters; ZKL_SS_OPEN is a gauge. */
typedef enum ZklSessionStat
{
	ZKL_SS_OPENED,
	ZKL_SS_EXPIRED,
	ZKL_SS_RECONNECTS,
	ZKL_SS_PROOFS,
	ZKL_SS_PROOFS_FAILED,
	ZKL_SS_REQUESTS,
	ZKL_SS_NOTIFICATIONS,
	ZKL_SS_REFUSED,				/* connections servers closed at once */
	ZKL_SS_OPEN,				/* sessions open now */
	ZKL_SS_COUNT
} ZklSessionStat;

/* A row of zk_stat_locks. */
typedef struct ZklLockStatRow
{
	Oid			dbid;
	Oid			userid;
	ZklStatMode mode;
	char	   *name;
	ZklLockCounts c;
} ZklLockStatRow;

extern void zkl_stats_init(void);
extern bool zkl_stats_available(void);
extern void zkl_stats_check_available(void);
extern void zkl_stats_lock(const char *name, ZklStatMode mode,
						   const ZklLockCounts *add);
extern void zkl_stats_session(ZklSessionStat what, int64 delta);
extern List *zkl_stats_lock_rows(bool all_users, int64 *dealloc);
extern void zkl_stats_session_values(int64 *values, int64 *dealloc,
									 TimestampTz *reset);
extern void zkl_stats_reset(void);
extern double zkl_stats_ms_since(TimestampTz start);

#endif							/* ZKLOCK_STATS_H */
