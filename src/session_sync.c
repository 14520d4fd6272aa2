/*-------------------------------------------------------------------------
 *
 * session_sync.c
 *	  What the threads of the session family share to meet: the one mutex
 *	  mu, and the eventfd by which the other threads wake the main thread.
 *
 * The eventfd is made on the backend's first session and lives as long
 * as the backend; the other threads only write it (zkl_sess_sync_kick),
 * the main thread waits on it and empties it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <errno.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "storage/fd.h"

#include "session_int.h"

pthread_mutex_t zkl_sess_sync_mu = PTHREAD_MUTEX_INITIALIZER;

/* Written once, on the main thread, before any other thread exists. */
static int	zkl_sync_efd = -1;

/* Make the eventfd, once per backend; main thread, may raise. */
void
zkl_sess_sync_open(void)
{
	if (zkl_sync_efd >= 0)
		return;
	if (!AcquireExternalFD())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("could not open ZooKeeper session"),
				 errdetail("There are too many open files in this backend.")));
	zkl_sync_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (zkl_sync_efd < 0)
	{
		ReleaseExternalFD();
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create eventfd: %m")));
	}
}

/* The eventfd, for the main thread's waits; -1 before the first session. */
int
zkl_sess_sync_fd(void)
{
	return zkl_sync_efd;
}

/* Wake the main thread; any thread. */
void
zkl_sess_sync_kick(void)
{
	uint64_t	one = 1;

	if (zkl_sync_efd >= 0 &&
		write(zkl_sync_efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		return;					/* nothing better to do on a ZooKeeper thread */
}

/* Empty the eventfd after a wake; main thread. */
void
zkl_sess_sync_clear(void)
{
	uint64_t	junk;

	while (zkl_sync_efd >= 0 && read(zkl_sync_efd, &junk, sizeof(junk)) > 0)
		;
}
