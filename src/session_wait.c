/*-------------------------------------------------------------------------
 *
 * session_wait.c
 *	  The main thread's wait for ZooKeeper: one WaitEventSet with the latch,
 *	  postmaster death and the eventfd that the other threads write.
 *
 * After each wake the latch is reset, the eventfd emptied and interrupts
 * served, so pg_cancel_backend, statement_timeout and pg_terminate_backend
 * work while a backend waits for a lock.  zkl_sess_wait_drain is the one
 * wait without the latch: at exit, where interrupts no longer matter.
 * What a wait waits for is a predicate of the caller's, checked under mu;
 * this file knows nothing of what it reads.
 *
 * Each wait reports what it waits for (ZklWaitKind); from PostgreSQL 17 on
 * pg_stat_activity shows it by name.  The names are registered on the
 * backend's first wait, not in _PG_init, which may run in the postmaster.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <errno.h>
#include <poll.h>

#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "session_int.h"

/* Main-thread state. */
static WaitEventSet *zkl_wait_set = NULL;

/* pg_stat_activity's wait_event for each ZklWaitKind (PostgreSQL 17 on). */
static const char *const zkl_wait_names[ZKL_WAIT_KINDS] = {
	[ZKL_WAIT_REQUEST] = "ZkRequest",
	[ZKL_WAIT_CONNECT] = "ZkConnect",
	[ZKL_WAIT_LOCK] = "ZkLock",
	[ZKL_WAIT_SEMAPHORE] = "ZkSemaphore",
	[ZKL_WAIT_PROOF] = "ZkProof",
	[ZKL_WAIT_RELEASE] = "ZkRelease",
};
static uint32 zkl_wait_events[ZKL_WAIT_KINDS];
static ZklWaitKind zkl_wait_kind = ZKL_WAIT_REQUEST;

/*
 * The wait set and eventfd live as long as the backend.  The wait events
 * are looked up first: that may raise, and then nothing is left to undo.
 */
void
zkl_sess_wait_init(void)
{
	if (zkl_wait_set != NULL)
		return;
	for (int i = 0; i < ZKL_WAIT_KINDS; i++)
		zkl_wait_events[i] = zkl_compat_wait_event(zkl_wait_names[i]);
	zkl_sess_sync_open();
	zkl_wait_set = zkl_compat_wait_event_set(3);
	AddWaitEventToSet(zkl_wait_set, WL_LATCH_SET, PGINVALID_SOCKET,
					  MyLatch, NULL);
	AddWaitEventToSet(zkl_wait_set, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET,
					  NULL, NULL);
	AddWaitEventToSet(zkl_wait_set, WL_SOCKET_READABLE, zkl_sess_sync_fd(),
					  NULL, NULL);
}

/* Whether ready(arg) holds, checked under mu. */
static bool
session_ready(ZklReady ready, void *arg)
{
	bool		ok;

	pthread_mutex_lock(&zkl_sess_sync_mu);
	ok = ready(arg);
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	return ok;
}

/*
 * Sleep until the latch, the eventfd or the deadline (0: none) wakes us,
 * reported as event; then reset the latch and empty the eventfd.
 */
static void
session_sleep(TimestampTz deadline, uint32 event)
{
	long		timeout = -1;
	WaitEvent	ev;

	if (deadline != 0)
		timeout = (long) Max((deadline - GetCurrentTimestamp() + 999) / 1000, 0);
	if (WaitEventSetWait(zkl_wait_set, timeout, &ev, 1, event) > 0 &&
		(ev.events & WL_SOCKET_READABLE))
		zkl_sess_sync_clear();
	ResetLatch(MyLatch);
}

/*
 * Wait until ready(arg) holds (checked under mu) or the deadline passes
 * (0: no deadline).  Interrupts are served on every wake, so a cancel or
 * timeout raises out of here.
 */
bool
zkl_sess_wait_for(ZklReady ready, void *arg, TimestampTz deadline)
{
	for (;;)
	{
		if (session_ready(ready, arg))
			return true;
		if (deadline != 0 && GetCurrentTimestamp() >= deadline)
			return false;
		session_sleep(deadline, zkl_wait_events[zkl_wait_kind]);
		CHECK_FOR_INTERRUPTS();
		zkl_sess_log_flush();
	}
}

/*
 * Wait until ready(arg) holds (checked under mu) or the deadline passes,
 * with interrupts left pending: for waits after a commit, which must not
 * raise.  A cancel (pg_cancel_backend, statement_timeout) or a terminate
 * request ends the wait, as it ends a wait for synchronous replication:
 * the cancel is consumed, the terminate left for the next interrupt check.
 * Reported as a release's wait, the only one of this kind.
 */
ZklReleaseWait
zkl_sess_wait_held(ZklReady ready, void *arg, TimestampTz deadline)
{
	for (;;)
	{
		if (session_ready(ready, arg))
			return ZKL_RELEASE_CONFIRMED;
		if (ProcDiePending)
			return ZKL_RELEASE_TERMINATED;
		if (QueryCancelPending)
		{
			QueryCancelPending = false;
			return ZKL_RELEASE_CANCELED;
		}
		if (GetCurrentTimestamp() >= deadline)
			return ZKL_RELEASE_TIMED_OUT;
		session_sleep(deadline, zkl_wait_events[ZKL_WAIT_RELEASE]);
		zkl_sess_log_flush();
	}
}

/*
 * At exit: wait up to timeout_ms until ready(arg) holds (checked under
 * mu).  No latch, no interrupts: only the eventfd, with poll.
 */
void
zkl_sess_wait_drain(ZklReady ready, void *arg, int timeout_ms)
{
	ZklStamp	start;

	zkl_stamp_now(&start);
	while (!session_ready(ready, arg))
	{
		struct pollfd p = {.fd = zkl_sess_sync_fd(), .events = POLLIN};
		int64_t		left = timeout_ms - zkl_stamp_age_ms(&start);

		if (left <= 0)
			return;
		if (poll(&p, 1, (int) left) < 0 && errno != EINTR)
			return;
		zkl_sess_sync_clear();
	}
}

/*
 * Set what the following waits report, returning what they reported
 * before, for the caller to restore.
 */
ZklWaitKind
zkl_session_wait_kind(ZklWaitKind kind)
{
	ZklWaitKind prev = zkl_wait_kind;

	zkl_wait_kind = kind;
	return prev;
}

/*
 * zkl_sess_wait_for reported as kind; the kind before is restored, on error
 * too.
 */
bool
zkl_sess_wait_for_as(ZklWaitKind kind, ZklReady ready, void *arg,
					 TimestampTz deadline)
{
	ZklWaitKind prev = zkl_session_wait_kind(kind);
	volatile bool ok = false;

	PG_TRY();
	{
		ok = zkl_sess_wait_for(ready, arg, deadline);
	}
	PG_FINALLY();
	{
		zkl_session_wait_kind(prev);
	}
	PG_END_TRY();
	return ok;
}
