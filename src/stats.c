/*-------------------------------------------------------------------------
 *
 * stats.c
 *	  Cumulative statistics in shared memory, as pg_stat_statements keeps
 *	  its own: a hash table of at most zklock.stat_max entries, one per
 *	  database, user, lock name and mode, under one LWLock (shared to
 *	  count, exclusive to add or evict an entry) and a spinlock per entry;
 *	  and the cluster's session counters, atomics that any thread may add
 *	  to.  Only with zklock in shared_preload_libraries; kept until the
 *	  server stops or zk_stat_reset().
 *
 * When the table is full, the least used tenth of the entries (by events
 * counted) goes, and zk_stat_sessions.dealloc counts the entries evicted.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "guc.h"
#include "names.h"
#include "stats.h"

typedef struct ZklStatKey
{
	Oid			dbid;
	Oid			userid;
	int32		mode;
	char		name[ZKL_NAME_MAX_BYTES + 1];
} ZklStatKey;

typedef struct ZklStatEntry
{
	ZklStatKey	key;			/* hash key: must be first */
	slock_t		mutex;
	ZklLockCounts c;
} ZklStatEntry;

typedef struct ZklStatShared
{
	LWLock	   *lock;
	slock_t		mutex;			/* stats_reset, dealloc */
	TimestampTz stats_reset;
	int64		dealloc;
	pg_atomic_uint64 session[ZKL_SS_COUNT];
} ZklStatShared;

static ZklStatShared *zkl_stat_shared = NULL;
static HTAB *zkl_stat_hash = NULL;
static shmem_startup_hook_type zkl_prev_shmem_startup = NULL;
static shmem_request_hook_type zkl_prev_shmem_request = NULL;

static Size
stats_memsize(void)
{
	return add_size(MAXALIGN(sizeof(ZklStatShared)),
					hash_estimate_size(zkl_stat_max, sizeof(ZklStatEntry)));
}

static void
stats_shmem_request(void)
{
	if (zkl_prev_shmem_request)
		zkl_prev_shmem_request();
	RequestAddinShmemSpace(stats_memsize());
	RequestNamedLWLockTranche("zklock", 1);
}

static void
stats_shmem_startup(void)
{
	bool		found;
	HASHCTL		info;

	if (zkl_prev_shmem_startup)
		zkl_prev_shmem_startup();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	zkl_stat_shared = ShmemInitStruct("zklock stats", sizeof(ZklStatShared),
									  &found);
	if (!found)
	{
		zkl_stat_shared->lock = &(GetNamedLWLockTranche("zklock"))->lock;
		SpinLockInit(&zkl_stat_shared->mutex);
		zkl_stat_shared->stats_reset = GetCurrentTimestamp();
		zkl_stat_shared->dealloc = 0;
		for (int i = 0; i < ZKL_SS_COUNT; i++)
			pg_atomic_init_u64(&zkl_stat_shared->session[i], 0);
	}
	info.keysize = sizeof(ZklStatKey);
	info.entrysize = sizeof(ZklStatEntry);
	zkl_stat_hash = ShmemInitHash("zklock lock stats", zkl_stat_max,
								  zkl_stat_max, &info,
								  HASH_ELEM | HASH_BLOBS);
	LWLockRelease(AddinShmemInitLock);
}

/* From _PG_init while shared_preload_libraries is processed. */
void
zkl_stats_init(void)
{
	zkl_prev_shmem_request = shmem_request_hook;
	shmem_request_hook = stats_shmem_request;
	zkl_prev_shmem_startup = shmem_startup_hook;
	shmem_startup_hook = stats_shmem_startup;
}

bool
zkl_stats_available(void)
{
	return zkl_stat_shared != NULL && zkl_stat_hash != NULL;
}

/* For the views: raise unless the statistics exist. */
void
zkl_stats_check_available(void)
{
	if (!zkl_stats_available())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("zklock must be loaded via \"shared_preload_libraries\" to keep statistics"),
				 errhint("Add zklock to shared_preload_libraries and restart the server.")));
}

double
zkl_stats_ms_since(TimestampTz start)
{
	return (double) (GetCurrentTimestamp() - start) / 1000.0;
}

static int64
stats_usage(const ZklLockCounts *c)
{
	return c->acquisitions + c->timeouts + c->cancels + c->deadlocks +
		c->lost + c->commits_refused + 1;
}

static int
stats_cmp_usage(const void *a, const void *b)
{
	int64		x = stats_usage(&(*(ZklStatEntry *const *) a)->c);
	int64		y = stats_usage(&(*(ZklStatEntry *const *) b)->c);

	return x < y ? -1 : x > y;
}

/* Evict the least used tenth of the entries.  Exclusive lock held. */
static void
stats_evict(void)
{
	HASH_SEQ_STATUS it;
	ZklStatEntry *e;
	ZklStatEntry **all;
	int			n = 0;
	int			drop;

	all = MemoryContextAllocExtended(CurrentMemoryContext,
									 sizeof(ZklStatEntry *) *
									 Max(hash_get_num_entries(zkl_stat_hash), 1),
									 MCXT_ALLOC_NO_OOM);
	if (all == NULL)
	{
		/* no memory: evict one, the least used, by a scan */
		ZklStatEntry *least = NULL;

		hash_seq_init(&it, zkl_stat_hash);
		while ((e = hash_seq_search(&it)) != NULL)
			if (least == NULL || stats_usage(&e->c) < stats_usage(&least->c))
				least = e;
		if (least != NULL)
			hash_search(zkl_stat_hash, &least->key, HASH_REMOVE, NULL);
		SpinLockAcquire(&zkl_stat_shared->mutex);
		zkl_stat_shared->dealloc += least != NULL;
		SpinLockRelease(&zkl_stat_shared->mutex);
		return;
	}
	hash_seq_init(&it, zkl_stat_hash);
	while ((e = hash_seq_search(&it)) != NULL)
		all[n++] = e;
	qsort(all, n, sizeof(ZklStatEntry *), stats_cmp_usage);
	drop = Max(1, n / 10);
	for (int i = 0; i < drop && i < n; i++)
		hash_search(zkl_stat_hash, &all[i]->key, HASH_REMOVE, NULL);
	pfree(all);
	SpinLockAcquire(&zkl_stat_shared->mutex);
	zkl_stat_shared->dealloc += Min(drop, n);
	SpinLockRelease(&zkl_stat_shared->mutex);
}

static void
stats_add(ZklLockCounts *to, const ZklLockCounts *add)
{
	to->acquisitions += add->acquisitions;
	to->waited += add->waited;
	to->wait_time_total += add->wait_time_total;
	to->wait_time_max = Max(to->wait_time_max, add->wait_time_max);
	to->timeouts += add->timeouts;
	to->cancels += add->cancels;
	to->deadlocks += add->deadlocks;
	to->lost += add->lost;
	to->commits_refused += add->commits_refused;
	to->hold_time_total += add->hold_time_total;
	to->hold_time_max = Max(to->hold_time_max, add->hold_time_max);
}

/*
 * Count one event of a lock (name as zk_locks shows it) of this database
 * and user.  Never raises: it runs in transaction callbacks too, and an
 * entry that cannot be made is simply not counted.
 */
void
zkl_stats_lock(const char *name, ZklStatMode mode, const ZklLockCounts *add)
{
	ZklStatKey	key;
	ZklStatEntry *e;

	if (!zkl_stats_available() || name == NULL)
		return;
	memset(&key, 0, sizeof(key));
	key.dbid = MyDatabaseId;
	key.userid = GetUserId();
	key.mode = mode;
	strlcpy(key.name, name, sizeof(key.name));

	LWLockAcquire(zkl_stat_shared->lock, LW_SHARED);
	e = hash_search(zkl_stat_hash, &key, HASH_FIND, NULL);
	if (e == NULL)
	{
		bool		found;

		LWLockRelease(zkl_stat_shared->lock);
		LWLockAcquire(zkl_stat_shared->lock, LW_EXCLUSIVE);
		e = hash_search(zkl_stat_hash, &key, HASH_FIND, NULL);
		if (e == NULL && hash_get_num_entries(zkl_stat_hash) >= zkl_stat_max)
			stats_evict();
		if (e == NULL)
		{
			e = hash_search(zkl_stat_hash, &key, HASH_ENTER_NULL, &found);
			if (e != NULL && !found)
			{
				SpinLockInit(&e->mutex);
				memset(&e->c, 0, sizeof(e->c));
			}
		}
	}
	if (e != NULL)
	{
		SpinLockAcquire(&e->mutex);
		stats_add(&e->c, add);
		SpinLockRelease(&e->mutex);
	}
	LWLockRelease(zkl_stat_shared->lock);
}

/* Add to a session counter (or the gauge); any thread. */
void
zkl_stats_session(ZklSessionStat what, int64 delta)
{
	if (zkl_stat_shared == NULL)
		return;
	(void) pg_atomic_fetch_add_u64(&zkl_stat_shared->session[what],
								   (uint64) delta);
}

/* Rows of zk_stat_locks: all, or this user's; and the evictions so far. */
List *
zkl_stats_lock_rows(bool all_users, int64 *dealloc)
{
	HASH_SEQ_STATUS it;
	ZklStatEntry *e;
	List	   *rows = NIL;
	Oid			me = GetUserId();

	zkl_stats_check_available();
	LWLockAcquire(zkl_stat_shared->lock, LW_SHARED);
	hash_seq_init(&it, zkl_stat_hash);
	while ((e = hash_seq_search(&it)) != NULL)
	{
		ZklLockStatRow *row;

		if (!all_users && e->key.userid != me)
			continue;
		row = palloc(sizeof(ZklLockStatRow));
		row->dbid = e->key.dbid;
		row->userid = e->key.userid;
		row->mode = (ZklStatMode) e->key.mode;
		row->name = pstrdup(e->key.name);
		SpinLockAcquire(&e->mutex);
		row->c = e->c;
		SpinLockRelease(&e->mutex);
		rows = lappend(rows, row);
	}
	LWLockRelease(zkl_stat_shared->lock);
	SpinLockAcquire(&zkl_stat_shared->mutex);
	*dealloc = zkl_stat_shared->dealloc;
	SpinLockRelease(&zkl_stat_shared->mutex);
	return rows;
}

/*
 * The session counters (values[ZKL_SS_COUNT]), the entries evicted, and
 * when they were reset.
 */
void
zkl_stats_session_values(int64 *values, int64 *dealloc, TimestampTz *reset)
{
	zkl_stats_check_available();
	for (int i = 0; i < ZKL_SS_COUNT; i++)
		values[i] = (int64) pg_atomic_read_u64(&zkl_stat_shared->session[i]);
	SpinLockAcquire(&zkl_stat_shared->mutex);
	*reset = zkl_stat_shared->stats_reset;
	*dealloc = zkl_stat_shared->dealloc;
	SpinLockRelease(&zkl_stat_shared->mutex);
}

/* Forget every lock's counters and the session counters (not the gauge). */
void
zkl_stats_reset(void)
{
	HASH_SEQ_STATUS it;
	ZklStatEntry *e;

	zkl_stats_check_available();
	LWLockAcquire(zkl_stat_shared->lock, LW_EXCLUSIVE);
	hash_seq_init(&it, zkl_stat_hash);
	while ((e = hash_seq_search(&it)) != NULL)
		hash_search(zkl_stat_hash, &e->key, HASH_REMOVE, NULL);
	for (int i = 0; i < ZKL_SS_COUNT; i++)
		if (i != ZKL_SS_OPEN)
			pg_atomic_write_u64(&zkl_stat_shared->session[i], 0);
	SpinLockAcquire(&zkl_stat_shared->mutex);
	zkl_stat_shared->stats_reset = GetCurrentTimestamp();
	zkl_stat_shared->dealloc = 0;
	SpinLockRelease(&zkl_stat_shared->mutex);
	LWLockRelease(zkl_stat_shared->lock);
}
