/*-------------------------------------------------------------------------
 *
 * lockset.c
 *	  This backend's held ZooKeeper locks: (name, mode) -> node, fencing
 *	  token, session holds and transaction holds by subtransaction, with the
 *	  transaction callbacks that end transaction-scoped holds.
 *
 * Scopes follow PostgreSQL's advisory locks.  One node serves both scopes
 * of a (name, mode); it is deleted when the last hold of either scope goes.
 * Session holds ignore ROLLBACK.  Transaction holds go at commit, at abort
 * and at ROLLBACK TO a savepoint taken before them, and move to the parent
 * when a subtransaction commits.
 *
 * The end-of-transaction callbacks must not raise: releases are
 * asynchronous deletes (the session retries them).  They run only at
 * XACT_EVENT_COMMIT / ABORT, never at PRE_COMMIT, so another cluster can
 * not take the lock before this transaction's commit is visible.  With
 * zklock.synchronous_release a release then waits, bounded, until the
 * ensemble has answered its deletes, like a commit waiting for
 * synchronous replication: a lock released by COMMIT, ROLLBACK or
 * zk_unlock is free for every other client once the command returns.  A
 * cancel or terminate request ends that wait with a WARNING.
 *
 * At PRE_COMMIT and PRE_PREPARE every transaction lock, and for a
 * transaction with a transaction id (one that wrote) every session lock
 * too, must be proven: inside the session's lease that costs nothing,
 * after it one bounded round trip, and a lock that is lost (or cannot be
 * proven before the ensemble may have expired its session) refuses the
 * commit.  The same locks are looked at again at XACT_EVENT_COMMIT, after
 * the commit record and any wait for synchronous replication: one lost
 * meanwhile gets a WARNING (the commit stands), or with
 * zklock.on_lock_loss = terminate the connection ends without a reply.
 * A transaction lock refuses even a read-only commit: its client
 * reads the COMMIT as "done under the lock", and a NOTIFY gets its
 * transaction id only after PRE_COMMIT.  Under a lost session lock alone
 * a read-only commit goes ahead, so that the views and the release
 * functions keep working.
 *
 * A semaphore's lease is an entry of its own (every acquire is a new lease,
 * with its own node and token, as in Curator), keyed by a number unique
 * in this backend, with one hold in one scope; everything else (loss,
 * commit, scopes, views) treats it as a lock.
 *
 * Nothing is allocated between a successful recipe and recording the
 * lock: an error there would leave a node nobody releases.
 *
 *-------------------------------------------------------------------------
 */
#define ZKL_LOCKSET_LAYER
#include "postgres.h"

#include <unistd.h>

#include "access/transam.h"
#include "access/xact.h"
#include "commands/dbcommands.h"
#include "miscadmin.h"
#include "postmaster/postmaster.h"
#include "storage/ipc.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "guc.h"
#include "lockset.h"
#include "names.h"
#include "owner.h"
#include "recipe.h"
#include "session_held.h"
#include "stats.h"

/* Keyed by the directory's znode name, which tells text and keys apart. */
typedef struct ZklLockKey
{
	bool		shared;
	uint32		lease;			/* a semaphore's lease: its number, else 0 */
	char		component[ZKL_ESCAPED_MAX];
} ZklLockKey;

/* Transaction holds taken in one subtransaction. */
typedef struct ZklXactHold
{
	SubTransactionId subid;
	int			count;
} ZklXactHold;

typedef struct ZklLock
{
	ZklLockKey	key;			/* hash key: must be first */
	char	   *name;			/* as the user wrote it */
	char	   *node;			/* full znode path */
	int64		token;			/* the node's czxid */
	TimestampTz acquired_at;
	uint64		epoch;			/* session that created the node */
	int			session_holds;
	bool		lost_counted;	/* its loss is in the statistics */
	int			nxact;			/* used entries of xact */
	int			maxxact;
	ZklXactHold *xact;
} ZklLock;

static HTAB *zkl_locks = NULL;
static bool zkl_released = false;	/* releases sent since the last wait */
static uint32 zkl_last_lease = 0;
static MemoryContext zkl_lock_cxt = NULL;

/* Where releases are waited for, for what the WARNINGs say. */
typedef enum ZklReleaseAt
{
	ZKL_AT_STATEMENT,
	ZKL_AT_COMMIT,
	ZKL_AT_ROLLBACK,
	ZKL_AT_ACQUIRE,				/* an acquisition that timed out gave up */
	ZKL_AT_GIVE_UP				/* an acquisition that raised gave up */
} ZklReleaseAt;

static void lockset_check_losses(bool at_commit, bool wrote);
static void lockset_await_releases(ZklReleaseAt at);
static void lockset_await_give_up(void);
static bool lockset_take(const ZklName *names, ZklLockKey *keys,
						 const int *fresh, int nfresh, bool shared,
						 int max_leases, bool xact, int64 timeout_ms,
						 ZklLock **held, int *blocked);
static void lockset_xact_callback(XactEvent event, void *arg);
static void lockset_subxact_callback(SubXactEvent event,
									 SubTransactionId mySubid,
									 SubTransactionId parentSubid, void *arg);

/* Create the table and register the callbacks, once, on first use. */
static void
lockset_init(void)
{
	HASHCTL		ctl;

	if (zkl_locks != NULL)
		return;
	zkl_lock_cxt = AllocSetContextCreate(TopMemoryContext, "zklock locks",
										 ALLOCSET_SMALL_SIZES);
	ctl.keysize = sizeof(ZklLockKey);
	ctl.entrysize = sizeof(ZklLock);
	ctl.hcxt = zkl_lock_cxt;
	zkl_locks = hash_create("zklock held locks", 16, &ctl,
							HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	RegisterXactCallback(lockset_xact_callback, NULL);
	RegisterSubXactCallback(lockset_subxact_callback, NULL);
}

static void
lockset_key(ZklLockKey *key, const ZklName *name, bool shared)
{
	memset(key, 0, sizeof(*key));
	key->shared = shared;
	strlcpy(key->component, name->component, sizeof(key->component));
}

static int
lockset_xact_holds(ZklLock *lock)
{
	int			n = 0;

	for (int i = 0; i < lock->nxact; i++)
		n += lock->xact[i].count;
	return n;
}

static const char *
lockset_mode(ZklLock *lock)
{
	if (lock->key.lease != 0)
		return "lease";
	return lock->key.shared ? "shared" : "exclusive";
}

static ZklStatMode
lockset_stat_mode(bool shared, bool lease)
{
	return lease ? ZKL_STAT_LEASE : shared ? ZKL_STAT_SHARED : ZKL_STAT_EXCLUSIVE;
}

/* Count an event of a held lock; never raises. */
static void
lockset_count(ZklLock *lock, const ZklLockCounts *add)
{
	zkl_stats_lock(lock->name, lockset_stat_mode(lock->key.shared,
												 lock->key.lease != 0), add);
}

/* A lock found lost counts once, however often it is found so. */
static void
lockset_count_lost(ZklLock *lock)
{
	ZklLockCounts add = {0};

	if (lock->lost_counted)
		return;
	lock->lost_counted = true;
	add.lost = 1;
	lockset_count(lock, &add);
}

typedef enum ZklAcqEnd
{
	ZKL_ACQ_ACQUIRED,
	ZKL_ACQ_TIMED_OUT,
	ZKL_ACQ_FAILED				/* raised: the report says how */
} ZklAcqEnd;

/*
 * Count how an acquisition of displays[0..n), begun at start, ended:
 * every lock acquired; the one not granted (displays[which]) timed out;
 * or it raised, cancelled or deadlocked as the recipe's report says.  A
 * wait counts, with the time since start, for the lock the report says
 * it waited for last, which in a set may be another one; an error ends
 * the wait it interrupted, so it counts there too.  The one place an
 * acquisition is counted; never raises.
 */
static void
lockset_count_end(const ZklWaitReport *report, TimestampTz start,
				  const char *const *displays, int n, int which,
				  ZklStatMode mode, ZklAcqEnd end)
{
	ZklLockCounts add = {0};
	const char *name = displays[which];
	const char *waited = report->waited_for;

	if (!zkl_stats_available())
		return;
	if (end == ZKL_ACQ_FAILED && waited != NULL)
		name = waited;
	if (end == ZKL_ACQ_ACQUIRED)
		add.acquisitions = 1;
	else if (end == ZKL_ACQ_TIMED_OUT)
		add.timeouts = 1;
	else if (report->canceled)
		add.cancels = 1;
	else if (report->deadlocked)
		add.deadlocks = 1;
	if (waited != NULL && strcmp(waited, name) != 0)
	{
		ZklLockCounts w = {0};

		w.waited = 1;
		w.wait_time_total = w.wait_time_max = zkl_stats_ms_since(start);
		zkl_stats_lock(waited, mode, &w);
	}
	else if (waited != NULL)
	{
		add.waited = 1;
		add.wait_time_total = add.wait_time_max = zkl_stats_ms_since(start);
	}
	zkl_stats_lock(name, mode, &add);
	/* each name of a set is an acquisition; the wait counted above */
	for (int k = 0; k < n && end == ZKL_ACQ_ACQUIRED; k++)
	{
		ZklLockCounts one = {0};

		if (k == which)
			continue;
		one.acquisitions = 1;
		zkl_stats_lock(displays[k], mode, &one);
	}
}

/*
 * Free a lock's entry (a new one whose recipe failed or timed out may be
 * partly filled in); its node is not touched.  Never raises.
 */
static void
lockset_discard(ZklLock *lock)
{
	if (lock->node)
		pfree(lock->node);
	if (lock->name)
		pfree(lock->name);
	if (lock->xact)
		pfree(lock->xact);
	hash_search(zkl_locks, &lock->key, HASH_REMOVE, NULL);
}

/* Drop the lock once no hold of either scope is left; never raises. */
static void
lockset_forget_if_unheld(ZklLock *lock)
{
	ZklLockCounts held = {0};

	if (lock->session_holds > 0 || lockset_xact_holds(lock) > 0)
		return;
	if (zkl_stats_available())
	{
		held.hold_time_total = held.hold_time_max =
			zkl_stats_ms_since(lock->acquired_at);
		lockset_count(lock, &held);
	}
	/* A node of an earlier session went with it. */
	if (lock->epoch == zkl_session_epoch())
	{
		zkl_session_release(lock->node);
		zkl_released = true;
	}
	lockset_discard(lock);
}

/* Add a transaction hold; lockset_reserve_xact_hold made room for it. */
static void
lockset_add_xact_hold(ZklLock *lock)
{
	SubTransactionId subid = GetCurrentSubTransactionId();

	if (lock->nxact > 0 && lock->xact[lock->nxact - 1].subid == subid)
	{
		lock->xact[lock->nxact - 1].count++;
		return;
	}
	Assert(lock->nxact < lock->maxxact);
	lock->xact[lock->nxact].subid = subid;
	lock->xact[lock->nxact].count = 1;
	lock->nxact++;
}

/*
 * The owner record that a lock node carries (owner.c formats it): who
 * holds or waits, for the fleet views; a semaphore's nodes add the
 * acquirer's max_leases.
 */
static ZklOwner *
lockset_owner(int max_leases)
{
	ZklOwner   *o = palloc0(sizeof(ZklOwner));
	char	   *host = palloc0(256);
	const char *dbname = get_database_name(MyDatabaseId);

	if (gethostname(host, 256) != 0)
		host[0] = '\0';
	host[255] = '\0';
	o->host = host;
	o->has_port = true;
	o->port = PostPortNumber;
	o->cluster_name = cluster_name ? cluster_name : "";
	o->has_pid = true;
	o->pid = MyProcPid;
	o->database = dbname ? dbname : "";
	o->user = GetUserNameFromId(GetUserId(), false);
	o->application_name = application_name ? application_name : "";
	o->acquired_at = pstrdup(timestamptz_to_str(GetCurrentTimestamp()));
	o->has_max_leases = max_leases > 0;
	o->max_leases = max_leases;
	return o;
}

/* The message of a commit refused, or a connection ended, by a loss. */
static int
lockset_lost_message(ZklLock *lock, bool terminate)
{
	if (terminate && lock->key.lease != 0)
		return errmsg("terminating connection because lease of ZooKeeper semaphore \"%s\" was lost",
					  lock->name);
	if (terminate)
		return errmsg("terminating connection because ZooKeeper lock \"%s\" (%s) was lost",
					  lock->name, lockset_mode(lock));
	if (lock->key.lease != 0)
		return errmsg("cannot commit while lease of ZooKeeper semaphore \"%s\" is lost",
					  lock->name);
	return errmsg("cannot commit while ZooKeeper lock \"%s\" (%s) is lost",
				  lock->name, lockset_mode(lock));
}

/* The detail of every message about a lost lock. */
static int
lockset_lost_detail(void)
{
	int64		unheard = zkl_session_unheard_ms();

	if (unheard < 0)
		return errdetail("The ZooKeeper session that held it is gone; another client may have taken it.");
	return errdetail("The ensemble last confirmed this backend's ZooKeeper session " INT64_FORMAT " ms ago; it may have expired the session or deleted the node, and another client may have taken the lock.",
					 unheard);
}

static void
lockset_raise_lost(ZklLock *lock)
{
	lockset_count_lost(lock);
	ereport(ERROR,
			(errcode(ERRCODE_CONNECTION_EXCEPTION),
			 lock->key.lease != 0 ?
			 errmsg("lease of ZooKeeper semaphore \"%s\" was lost",
					lock->name) :
			 errmsg("ZooKeeper lock \"%s\" (%s) was lost",
					lock->name, lockset_mode(lock)),
			 lockset_lost_detail(),
			 errhint("Release it with zk_unlock or zk_unlock_all before taking it again.")));
}

static void
lockset_warn_lost(ZklLock *lock)
{
	lockset_count_lost(lock);
	ereport(WARNING,
			(errcode(ERRCODE_WARNING),
			 lock->key.lease != 0 ?
			 errmsg("lease of ZooKeeper semaphore \"%s\" was lost before it was released",
					lock->name) :
			 errmsg("ZooKeeper lock \"%s\" (%s) was lost before it was released",
					lock->name, lockset_mode(lock)),
			 lockset_lost_detail()));
}

/*
 * End every session hold of a lock, with a WARNING if it was lost; the
 * lock goes once no transaction hold is left.  Returns whether it was held.
 */
static bool
lockset_end_session_holds(ZklLock *lock)
{
	bool		held = zkl_session_health(lock->epoch, lock->node) != ZKL_HEALTH_LOST;

	if (!held)
		lockset_warn_lost(lock);
	lock->session_holds = 0;
	lockset_forget_if_unheld(lock);
	return held;
}

/* What a WARNING about an unfinished release adds. */
static int
lockset_release_detail(ZklReleaseAt at)
{
	if (at == ZKL_AT_COMMIT)
		return errdetail("The transaction has committed and released its ZooKeeper locks, but other clients may find them taken until the ensemble deletes their nodes.");
	if (at == ZKL_AT_ACQUIRE || at == ZKL_AT_GIVE_UP)
		return errdetail("This backend gave up its place in the ZooKeeper queue, but other clients may find its node there until the ensemble deletes it.");
	return errdetail("The ZooKeeper locks are released here, but other clients may find them taken until the ensemble deletes their nodes.");
}

/* Wait for the ensemble to answer the releases sent; never raises. */
static void
lockset_await_answers(ZklReleaseAt at)
{
	int			timeout_ms;

	switch (zkl_session_await_releases(&timeout_ms, at == ZKL_AT_GIVE_UP))
	{
		case ZKL_RELEASE_CONFIRMED:
			break;
		case ZKL_RELEASE_CANCELED:
			ereport(WARNING,
					(errcode(ERRCODE_QUERY_CANCELED),
					 errmsg("canceling wait for ZooKeeper to confirm the release due to user request"),
					 lockset_release_detail(at)));
			break;
		case ZKL_RELEASE_TERMINATED:
			ereport(WARNING,
					(errcode(ERRCODE_ADMIN_SHUTDOWN),
					 errmsg("canceling the wait for ZooKeeper to confirm the release and terminating connection due to administrator command"),
					 lockset_release_detail(at)));
			/* As synchronous replication does: no reply to an ending client. */
			whereToSendOutput = DestNone;
			break;
		case ZKL_RELEASE_TIMED_OUT:
			ereport(WARNING,
					(errcode(ERRCODE_CONNECTION_EXCEPTION),
					 errmsg("ZooKeeper did not confirm the release within %d ms", timeout_ms),
					 lockset_release_detail(at),
					 errhint("The nodes go when the ensemble expires this backend's ZooKeeper session.")));
			break;
		case ZKL_RELEASE_DISCONNECTED:
			ereport(WARNING,
					(errcode(ERRCODE_CONNECTION_EXCEPTION),
					 errmsg("lost connection to ZooKeeper before it confirmed the release"),
					 lockset_release_detail(at),
					 errhint("The deletes are sent again once the connection is back; at the latest, the nodes go when the ensemble expires this backend's ZooKeeper session.")));
			break;
	}
}

/*
 * A delete the ensemble refused (ZNOAUTH: a lock directory made by
 * someone else whose ACL lets this backend create nodes but not delete
 * them): the node stays until the session ends and blocks the contenders
 * behind it.  An acquisition that gave up raises (the caller would else
 * hear "not granted" and try again, adding nodes); a release says so
 * with a WARNING, as the release itself has happened for this backend.
 */
static void
lockset_report_denied(ZklReleaseAt at)
{
	int			count;
	char	   *path = zkl_session_take_denied(&count);

	if (count == 0)
		return;
	ereport(at == ZKL_AT_ACQUIRE ? ERROR : WARNING,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("permission denied to delete ZooKeeper node \"%s\"",
					path ? path : "?"),
			 errdetail_plural("ZooKeeper refused %d delete of this backend's nodes: the lock directory lets this backend's ZooKeeper identity create nodes in it but not delete them. The node stays until the ZooKeeper session ends, and other clients find the lock taken until then.",
							  "ZooKeeper refused %d deletes of this backend's nodes: the lock directory lets this backend's ZooKeeper identity create nodes in it but not delete them. The nodes stay until the ZooKeeper session ends, and other clients find the locks taken until then.",
							  count, count),
			 errhint("Give zklock's ZooKeeper identity the delete right on the lock directory, or delete the directory so that zklock creates it again.")));
}

/*
 * With zklock.synchronous_release, wait until the ensemble has answered
 * every release sent, so that other clients can take the locks once the
 * command returns, as after pg_advisory_unlock.  Never raises, but for a
 * delete refused after an acquisition timed out (ZKL_AT_ACQUIRE): it runs
 * after a commit too.  An exiting backend does not wait here: its exit
 * gives the deletes their time before the session closes.
 */
static void
lockset_await_releases(ZklReleaseAt at)
{
	bool		released = zkl_released;

	zkl_released = false;
	if (!released || proc_exit_inprogress)
		return;
	if (zkl_synchronous_release)
		lockset_await_answers(at);
	lockset_report_denied(at);
}

/*
 * An acquisition is raising (a cancel, statement_timeout, an error): its
 * nodes' deletes and watch removals are queued.  Wait for them as a
 * release waits, before the error goes to the client, so that nothing
 * of the acquisition is left in ZooKeeper when the client hears of it.
 * Called with the error in flight: only WARNINGs.
 */
static void
lockset_await_give_up(void)
{
	zkl_released = true;
	lockset_await_releases(ZKL_AT_GIVE_UP);
}

/* Room for one more transaction hold, so that adding it cannot fail. */
static void
lockset_reserve_xact_hold(ZklLock *lock)
{
	if (lock->nxact < lock->maxxact)
		return;
	lock->maxxact = Max(4, lock->maxxact * 2);
	lock->xact = lock->xact
		? repalloc(lock->xact, sizeof(ZklXactHold) * lock->maxxact)
		: MemoryContextAlloc(zkl_lock_cxt, sizeof(ZklXactHold) * lock->maxxact);
}

/*
 * Enter a new lock, then allocate everything it needs (*slot is set
 * first, so that lockset_discard can take back whatever was done).
 */
static void
lockset_new(ZklLock **slot, ZklLockKey *key, const char *name,
			const char *dir)
{
	ZklLock    *lock = hash_search(zkl_locks, key, HASH_ENTER, NULL);

	memset(((char *) lock) + sizeof(ZklLockKey), 0,
		   sizeof(ZklLock) - sizeof(ZklLockKey));
	*slot = lock;
	lock->node = MemoryContextAllocZero(zkl_lock_cxt, strlen(dir) + 128);
	lock->name = MemoryContextStrdup(zkl_lock_cxt, name);
	lockset_reserve_xact_hold(lock);
}

/*
 * Record the node of a new lock of directory dir (lockset_new sized the
 * path for it) with one hold in the given scope; allocates nothing.
 */
static void
lockset_record(ZklLock *lock, const char *dir, const char *node, int64 token,
			   bool xact)
{
	strlcpy(lock->node, node, strlen(dir) + 128);
	lock->token = token;
	lock->acquired_at = GetCurrentTimestamp();
	lock->epoch = zkl_session_epoch();
	if (xact)
		lockset_add_xact_hold(lock);
	else
		lock->session_holds = 1;
}

/*
 * Take one hold of (name, mode) in the given scope: a set of one (see
 * zkl_lockset_acquire_set).  A lock already held in either scope only
 * gains a hold and keeps its node and token, once the lease vouches for
 * it; otherwise the recipe runs.  timeout_ms < 0 waits for ever.  Returns
 * false when the timeout passed first.
 */
bool
zkl_lockset_acquire(const ZklName *name, bool shared, bool xact,
					int64 timeout_ms, int64 *token)
{
	int			blocked;

	return zkl_lockset_acquire_set(name, 1, shared, xact, timeout_ms, token,
								   &blocked);
}

/*
 * Take one hold of each of names[0..n) in one mode and scope, as one: all
 * or nothing.  A name given twice counts once.  Names held already only
 * gain a hold, once the lease vouches for them; the others are acquired
 * together by the recipe, which may wait in their queues one at a time
 * but holds none of them unless it holds all.  tokens[i] is the token of
 * names[i].  timeout_ms < 0 waits for ever.  Returns false when the
 * timeout passed first, with *blocked the index of a name not granted and
 * nothing taken.
 */
bool
zkl_lockset_acquire_set(const ZklName *names, int n, bool shared, bool xact,
						int64 timeout_ms, int64 *tokens, int *blocked)
{
	ZklLockKey *keys = palloc(sizeof(ZklLockKey) * n);
	int		   *first = palloc(sizeof(int) * n);	/* first of the same name */
	ZklLock   **held = palloc0(sizeof(ZklLock *) * n);
	bool	   *is_fresh = palloc0(sizeof(bool) * n);
	int		   *fresh = palloc(sizeof(int) * n);	/* names to acquire */
	int			nfresh = 0;

	lockset_init();
	lockset_check_losses(false, false);
	for (int i = 0; i < n; i++)
	{
		lockset_key(&keys[i], &names[i], shared);
		first[i] = i;
		for (int j = 0; j < i && first[i] == i; j++)
			if (strcmp(keys[j].component, keys[i].component) == 0)
				first[i] = j;
		if (first[i] != i)
			continue;
		held[i] = hash_search(zkl_locks, &keys[i], HASH_FIND, NULL);
		if (held[i] == NULL)
		{
			is_fresh[i] = true;
			fresh[nfresh++] = i;
			continue;
		}
		if (xact)
			lockset_reserve_xact_hold(held[i]);
		if (zkl_session_prove(held[i]->epoch, held[i]->node, 0) != ZKL_HEALTH_HELD)
			lockset_raise_lost(held[i]);
	}
	if (nfresh > 0 &&
		!lockset_take(names, keys, fresh, nfresh, shared, 0, xact,
					  timeout_ms, held, blocked))
		return false;

	/* Nothing can fail from here: every hold was made room for. */
	for (int i = 0; i < n; i++)
	{
		if (first[i] != i || is_fresh[i])
			continue;
		if (xact)
			lockset_add_xact_hold(held[i]);
		else
			held[i]->session_holds++;
	}
	for (int i = 0; i < n; i++)
		tokens[i] = held[first[i]]->token;
	return true;
}

/*
 * Acquire names[fresh[0..nfresh)] (none of them held) as one set, or with
 * max_leases > 0 a new lease of names[fresh[0]] (keys[fresh[0]] numbers
 * it), and record each in held[] with one hold in the given scope.  False
 * when the timeout passed first, with *blocked set and nothing left
 * behind.  Counted once, however it ends.
 */
static bool
lockset_take(const ZklName *names, ZklLockKey *keys, const int *fresh,
			 int nfresh, bool shared, int max_leases, bool xact,
			 int64 timeout_ms, ZklLock **held, int *blocked)
{
	const char **dirs = palloc(sizeof(char *) * nfresh);
	const char **displays = palloc(sizeof(char *) * nfresh);
	char	  **nodes = palloc0(sizeof(char *) * nfresh);
	int64	   *tokens = palloc0(sizeof(int64) * nfresh);
	ZklLock   **locks = palloc0(sizeof(ZklLock *) * nfresh);
	TimestampTz deadline = 0;
	volatile ZklAcquire got = ZKL_TIMED_OUT;
	int			which = 0;
	ZklWaitReport report = {0};
	TimestampTz start;
	ZklStatMode mode = lockset_stat_mode(shared, max_leases > 0);

	if (timeout_ms >= 0)
		deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
											   timeout_ms);
	zkl_session_connect_until(deadline);
	for (int k = 0; k < nfresh; k++)
	{
		dirs[k] = zkl_lockset_dir(&names[fresh[k]]);
		displays[k] = names[fresh[k]].display;
	}
	start = GetCurrentTimestamp();
	PG_TRY();
	{
		for (int k = 0; k < nfresh; k++)
			lockset_new(&locks[k], &keys[fresh[k]], displays[k], dirs[k]);
		if (max_leases > 0)
			got = zkl_semaphore_lease(dirs[0], displays[0], max_leases,
									  lockset_owner(max_leases),
									  deadline, &nodes[0], &tokens[0],
									  &report);
		else
			got = zkl_recipe_acquire_set(nfresh, dirs, displays, shared,
										 lockset_owner(0), deadline,
										 nodes, tokens, &which, &report);
	}
	PG_CATCH();
	{
		for (int k = 0; k < nfresh; k++)
			if (locks[k] != NULL)
				lockset_discard(locks[k]);
		lockset_count_end(&report, start, displays, nfresh, 0, mode,
						  ZKL_ACQ_FAILED);
		lockset_await_give_up();
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (got != ZKL_ACQUIRED)
	{
		for (int k = 0; k < nfresh; k++)
			lockset_discard(locks[k]);
		lockset_count_end(&report, start, displays, nfresh, which, mode,
						  ZKL_ACQ_TIMED_OUT);
		*blocked = fresh[which];
		/* Our given-up nodes must not block the next try of another client. */
		zkl_released = true;
		lockset_await_releases(ZKL_AT_ACQUIRE);
		return false;
	}
	for (int k = 0; k < nfresh; k++)
	{
		lockset_record(locks[k], dirs[k], nodes[k], tokens[k], xact);
		held[fresh[k]] = locks[k];
	}
	lockset_count_end(&report, start, displays, nfresh, 0, mode,
					  ZKL_ACQ_ACQUIRED);

	/*
	 * A lease let go of the semaphore's mutex on its way out: wait for that
	 * release as for any other, so that the next acquirer finds the mutex
	 * free once this call returns.
	 */
	if (max_leases > 0)
	{
		zkl_released = true;
		lockset_await_releases(ZKL_AT_STATEMENT);
	}
	return true;
}

/*
 * Take a new lease of the semaphore name, with at most max_leases holders
 * fleet-wide, in the given scope.  Each call is a lease of its own, with
 * its own node and token.  timeout_ms < 0 waits for ever; false when the
 * timeout passed first.
 */
bool
zkl_lockset_lease(const ZklName *name, int max_leases, bool xact,
				  int64 timeout_ms, int64 *token)
{
	ZklLockKey	key;
	ZklLock    *held = NULL;
	int			fresh = 0;
	int			blocked;

	lockset_init();
	lockset_check_losses(false, false);
	lockset_key(&key, name, false);
	key.lease = ++zkl_last_lease;
	if (!lockset_take(name, &key, &fresh, 1, false, max_leases, xact,
					  timeout_ms, &held, &blocked))
		return false;
	*token = held->token;
	return true;
}

/*
 * Release one session lease of the semaphore name: the one with the given
 * token, else the newest.  None: false and a WARNING, as for a lock; a
 * lost lease is dropped with a WARNING.
 */
bool
zkl_lockset_release_lease(const ZklName *name, bool by_token, int64 token)
{
	HASH_SEQ_STATUS it;
	ZklLock    *lock;
	ZklLock    *pick = NULL;
	bool		held;

	if (zkl_locks != NULL)
	{
		hash_seq_init(&it, zkl_locks);
		while ((lock = hash_seq_search(&it)) != NULL)
			if (lock->key.lease != 0 && lock->session_holds > 0 &&
				strcmp(lock->key.component, name->component) == 0 &&
				(!by_token || lock->token == token) &&
				(pick == NULL || lock->key.lease > pick->key.lease))
				pick = lock;
	}
	if (pick == NULL)
	{
		ereport(WARNING,
				(errcode(ERRCODE_WARNING),
				 by_token ?
				 errmsg("you don't own a session lease of ZooKeeper semaphore \"%s\" with token " INT64_FORMAT,
						name->display, token) :
				 errmsg("you don't own a session lease of ZooKeeper semaphore \"%s\"",
						name->display)));
		return false;
	}
	held = lockset_end_session_holds(pick);
	lockset_await_releases(ZKL_AT_STATEMENT);
	return held;
}

/* Release every session lease of this backend; returns how many were held. */
int
zkl_lockset_release_leases(void)
{
	HASH_SEQ_STATUS it;
	ZklLock    *lock;
	int			n = 0;

	if (zkl_locks == NULL)
		return 0;
	hash_seq_init(&it, zkl_locks);
	while ((lock = hash_seq_search(&it)) != NULL)
		if (lock->key.lease != 0 && lock->session_holds > 0)
			n += lockset_end_session_holds(lock);
	lockset_await_releases(ZKL_AT_STATEMENT);
	return n;
}

/* The lock of (name, mode) when this backend has session holds of it. */
static ZklLock *
lockset_session_held(const ZklName *name, bool shared)
{
	ZklLockKey	key;
	ZklLock    *lock = NULL;

	lockset_key(&key, name, shared);
	if (zkl_locks != NULL)
		lock = hash_search(zkl_locks, &key, HASH_FIND, NULL);
	return lock != NULL && lock->session_holds > 0 ? lock : NULL;
}

/*
 * Release one session hold of (name, mode), the release not waited for.
 * Not held, or lost: false and a WARNING, as pg_advisory_unlock does; a
 * lost lock's holds are dropped.
 */
static bool
lockset_release_one(const ZklName *name, bool shared)
{
	ZklLock    *lock = lockset_session_held(name, shared);

	if (lock == NULL)
	{
		ereport(WARNING,
				(errcode(ERRCODE_WARNING),
				 errmsg("you don't own a ZooKeeper session lock \"%s\" in %s mode",
						name->display, shared ? "shared" : "exclusive")));
		return false;
	}
	if (zkl_session_health(lock->epoch, lock->node) == ZKL_HEALTH_LOST)
		return lockset_end_session_holds(lock);
	lock->session_holds--;
	lockset_forget_if_unheld(lock);
	return true;
}

/* Release one session hold of (name, mode); see lockset_release_one. */
bool
zkl_lockset_release(const ZklName *name, bool shared)
{
	bool		held = lockset_release_one(name, shared);

	lockset_await_releases(ZKL_AT_STATEMENT);
	return held;
}

/*
 * Release one session hold of each of names[0..n) (a name given twice
 * counts once), all released before it returns; true when every one was
 * held.
 */
bool
zkl_lockset_release_set(const ZklName *names, int n, bool shared)
{
	bool		all = true;

	for (int i = 0; i < n; i++)
	{
		bool		again = false;

		for (int j = 0; j < i && !again; j++)
			again = strcmp(names[j].component, names[i].component) == 0;
		if (!again)
			all &= lockset_release_one(&names[i], shared);
	}
	lockset_await_releases(ZKL_AT_STATEMENT);
	return all;
}

/*
 * Drop up to n session holds of (name, mode) without a WARNING, the
 * releases not waited for (zkl_lockset_await_releases does, once for
 * many): pg_advisory_unlock_all gives back its routed holds this way,
 * whatever is left of them (zk_unlock_all may have released them, or the
 * lock been lost), and says nothing, as PostgreSQL's says nothing.
 */
void
zkl_lockset_drop_session_holds(const ZklName *name, bool shared, int n)
{
	ZklLock    *lock = lockset_session_held(name, shared);

	if (lock == NULL)
		return;
	if (zkl_session_health(lock->epoch, lock->node) == ZKL_HEALTH_LOST)
		lock->session_holds = 0;
	else
		lock->session_holds -= Min(n, lock->session_holds);
	lockset_forget_if_unheld(lock);
}

/* Wait once for the releases zkl_lockset_drop_session_holds sent. */
void
zkl_lockset_await_releases(void)
{
	lockset_await_releases(ZKL_AT_STATEMENT);
}

/* Release every session hold of this backend. */
void
zkl_lockset_release_all(void)
{
	HASH_SEQ_STATUS it;
	ZklLock    *lock;

	if (zkl_locks == NULL)
		return;
	hash_seq_init(&it, zkl_locks);
	while ((lock = hash_seq_search(&it)) != NULL)
		if (lock->session_holds > 0)
			(void) lockset_end_session_holds(lock);
	lockset_await_releases(ZKL_AT_STATEMENT);
}

static void
lockset_add_row(List **rows, ZklLock *lock, bool xact, int holds)
{
	ZklLockRow *row = palloc(sizeof(ZklLockRow));

	row->name = pstrdup(lock->name);
	row->mode = lockset_mode(lock);
	row->xact = xact;
	row->holds = holds;
	row->node = pstrdup(lock->node);
	row->token = lock->token;
	row->acquired_at = lock->acquired_at;
	row->health = zkl_session_health(lock->epoch, lock->node);
	*rows = lappend(*rows, row);
}

/* The lock directory a name maps to under zklock.root. */
char *
zkl_lockset_dir(const ZklName *name)
{
	return psprintf("%s/%s", zkl_root, name->component);
}

/* This backend's session, and how many (name, mode) locks it holds. */
void
zkl_lockset_session(ZklSessionInfo *info, int *locks)
{
	zkl_session_info(info);
	*locks = zkl_locks ? (int) hash_get_num_entries(zkl_locks) : 0;
}

/*
 * In the postmaster (shared_preload_libraries): what the backends' first
 * session would prepare is prepared once, for every backend to inherit.
 */
void
zkl_lockset_preload(void)
{
	zkl_session_preload();
}

/* Whether this backend holds any lock, in either scope. */
bool
zkl_lockset_holds_any(void)
{
	return zkl_locks != NULL && hash_get_num_entries(zkl_locks) > 0;
}

/* Rows of the zk_locks view: one per (name, mode, scope) held. */
List *
zkl_lockset_rows(void)
{
	List	   *rows = NIL;
	HASH_SEQ_STATUS it;
	ZklLock    *lock;

	if (zkl_locks == NULL)
		return NIL;
	hash_seq_init(&it, zkl_locks);
	while ((lock = hash_seq_search(&it)) != NULL)
	{
		int			xholds = lockset_xact_holds(lock);

		if (lock->session_holds > 0)
			lockset_add_row(&rows, lock, false, lock->session_holds);
		if (xholds > 0)
			lockset_add_row(&rows, lock, true, xholds);
	}
	return rows;
}

/*
 * Act on lost locks.  Before commit or prepare (at_commit): prove every
 * transaction lock, and every session lock too if the transaction wrote,
 * where the lease no longer vouches for it, and refuse while any of them
 * is lost, since it may have protected this transaction's work; with
 * zklock.on_lock_loss = terminate, end the backend on any lost lock
 * instead.  Before a new lock request, only the terminate action applies.
 */
static void
lockset_check_losses(bool at_commit, bool wrote)
{
	HASH_SEQ_STATUS it;
	ZklLock    *lock;

	if (zkl_locks == NULL || (!at_commit && zkl_on_lock_loss != ZKL_LOSS_TERMINATE))
		return;
	hash_seq_init(&it, zkl_locks);
	while ((lock = hash_seq_search(&it)) != NULL)
	{
		bool		counts = at_commit && (wrote || lockset_xact_holds(lock) > 0);
		ZklLockHealth h = counts ?
		zkl_session_prove(lock->epoch, lock->node, 0) :
		zkl_session_health(lock->epoch, lock->node);

		if (h == ZKL_HEALTH_LOST)
			lockset_count_lost(lock);
		if (h != ZKL_HEALTH_LOST ||
			(!counts && zkl_on_lock_loss != ZKL_LOSS_TERMINATE))
			continue;
		hash_seq_term(&it);
		if (at_commit)
		{
			ZklLockCounts refused = {0};

			refused.commits_refused = 1;
			lockset_count(lock, &refused);
		}
		ereport(zkl_on_lock_loss == ZKL_LOSS_TERMINATE ? FATAL : ERROR,
				(errcode(ERRCODE_CONNECTION_EXCEPTION),
				 lockset_lost_message(lock, zkl_on_lock_loss == ZKL_LOSS_TERMINATE),
				 lockset_lost_detail(),
				 lock->session_holds == 0 ? 0 :
				 lock->key.lease != 0 ?
				 errhint("Release it with zk_semaphore_release or zk_unlock_all.") :
				 errhint("Release it with zk_unlock or zk_unlock_all.")));
	}
}

static void
lockset_refuse_prepare(void)
{
	HASH_SEQ_STATUS it;
	ZklLock    *lock;

	hash_seq_init(&it, zkl_locks);
	while ((lock = hash_seq_search(&it)) != NULL)
	{
		if (lockset_xact_holds(lock) == 0)
			continue;
		hash_seq_term(&it);
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot PREPARE a transaction that holds ZooKeeper transaction locks"),
				 errdetail("Lock \"%s\" is held by a ZooKeeper session, which cannot be handed to a prepared transaction.",
						   lock->name)));
	}
	/* A prepared transaction commits later: the same rule as a commit. */
	lockset_check_losses(true, TransactionIdIsValid(GetTopTransactionIdIfAny()));
}

/* The WARNING of a lock found lost once its transaction had committed. */
static int
lockset_committed_message(ZklLock *lock, bool terminate)
{
	if (terminate && lock->key.lease != 0)
		return errmsg("terminating connection because lease of ZooKeeper semaphore \"%s\" was lost before the commit completed",
					  lock->name);
	if (terminate)
		return errmsg("terminating connection because ZooKeeper lock \"%s\" (%s) was lost before the commit completed",
					  lock->name, lockset_mode(lock));
	if (lock->key.lease != 0)
		return errmsg("lease of ZooKeeper semaphore \"%s\" was lost before the commit completed",
					  lock->name);
	return errmsg("ZooKeeper lock \"%s\" (%s) was lost before the commit completed",
				  lock->name, lockset_mode(lock));
}

/*
 * After the commit record and any wait for synchronous replication: the
 * locks that the proof at PRE_COMMIT vouched for (the same ones: every
 * transaction lock, and the session locks of a transaction that wrote)
 * may have been lost while the commit waited, and another client may
 * have taken them.  Nothing can be taken back and nothing may raise now,
 * so say so with a WARNING, as synchronous replication says a cancelled
 * wait.  A pure read of their health, no round trip.  Returns whether
 * zklock.on_lock_loss = terminate asks to end the connection.
 */
static bool
lockset_check_committed(bool wrote)
{
	HASH_SEQ_STATUS it;
	ZklLock    *lock;
	bool		terminate = false;

	hash_seq_init(&it, zkl_locks);
	while ((lock = hash_seq_search(&it)) != NULL)
	{
		if ((!wrote && lockset_xact_holds(lock) == 0) ||
			zkl_session_health(lock->epoch, lock->node) != ZKL_HEALTH_LOST)
			continue;
		lockset_count_lost(lock);
		terminate = zkl_on_lock_loss == ZKL_LOSS_TERMINATE;
		ereport(WARNING,
				(errcode(ERRCODE_CONNECTION_EXCEPTION),
				 lockset_committed_message(lock, terminate),
				 errdetail("The transaction has already committed locally, but the lock was lost while the commit completed: another client may have taken it.")));
	}
	return terminate;
}

/*
 * End the connection once the commit is done, without a reply, as
 * synchronous replication does when terminated during its wait: the
 * client has the WARNING, and the backend exits at its next interrupt
 * check (CommitTransaction holds interrupts until it is done).
 */
static void
lockset_terminate_after_commit(void)
{
	whereToSendOutput = DestNone;
	ProcDiePending = true;
	InterruptPending = true;
}

/* End every transaction hold; for commit and abort.  Never raises. */
static void
lockset_end_xact_holds(void)
{
	HASH_SEQ_STATUS it;
	ZklLock    *lock;

	hash_seq_init(&it, zkl_locks);
	while ((lock = hash_seq_search(&it)) != NULL)
	{
		if (lock->nxact == 0)
			continue;
		lock->nxact = 0;
		lockset_forget_if_unheld(lock);
	}
}

static void
lockset_xact_callback(XactEvent event, void *arg)
{
	bool		terminate;

	(void) arg;
	if (hash_get_num_entries(zkl_locks) == 0)
		return;
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PARALLEL_PRE_COMMIT:
			lockset_check_losses(true, TransactionIdIsValid(GetTopTransactionIdIfAny()));
			break;
		case XACT_EVENT_PRE_PREPARE:
			lockset_refuse_prepare();
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			terminate = lockset_check_committed(TransactionIdIsValid(GetTopTransactionIdIfAny()));
			lockset_end_xact_holds();
			lockset_await_releases(ZKL_AT_COMMIT);
			if (terminate)
				lockset_terminate_after_commit();
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			lockset_end_xact_holds();
			lockset_await_releases(ZKL_AT_ROLLBACK);
			break;
		case XACT_EVENT_PREPARE:
			lockset_end_xact_holds();
			break;
	}
}

/*
 * ROLLBACK TO / subtransaction abort drops the holds taken in it (its
 * committed children's holds were moved into it already); subtransaction
 * commit moves them to the parent.
 */
static void
lockset_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						 SubTransactionId parentSubid, void *arg)
{
	HASH_SEQ_STATUS it;
	ZklLock    *lock;

	(void) arg;
	if (hash_get_num_entries(zkl_locks) == 0 ||
		(event != SUBXACT_EVENT_ABORT_SUB && event != SUBXACT_EVENT_COMMIT_SUB))
		return;
	hash_seq_init(&it, zkl_locks);
	while ((lock = hash_seq_search(&it)) != NULL)
	{
		int			keep = 0;

		for (int i = 0; i < lock->nxact; i++)
		{
			ZklXactHold h = lock->xact[i];

			if (h.subid == mySubid && event == SUBXACT_EVENT_ABORT_SUB)
				continue;
			if (h.subid == mySubid)
				h.subid = parentSubid;
			if (keep > 0 && lock->xact[keep - 1].subid == h.subid)
				lock->xact[keep - 1].count += h.count;
			else
				lock->xact[keep++] = h;
		}
		lock->nxact = keep;
		lockset_forget_if_unheld(lock);
	}
	if (event == SUBXACT_EVENT_ABORT_SUB)
		lockset_await_releases(ZKL_AT_ROLLBACK);
}
