/*-------------------------------------------------------------------------
 *
 * session_sync.c
 *	  What the threads of the session family share to meet: the one mutex
 *	  mu, and the eventfd by which the other threads wake the main thread;
 *	  and the count of the external descriptors the session holds.
 *
 * The eventfd is made on the backend's first session and lives as long
 * as the backend; the other threads only write it (zkl_sess_sync_kick),
 * the main thread waits on it and empties it.  Descriptors opened outside
 * fd.c (the eventfd, the client library's socket and wake-up pipe) are
 * counted with AcquireExternalFD, so that fd.c keeps room for them, and a
 * backend out of descriptors gets a clear error instead of a library that
 * fails later.
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

/*
 * Count n more external descriptors, or raise with none of them counted.
 * Main thread.
 */
void
zkl_sess_sync_acquire_fds(int n)
{
	for (int i = 0; i < n; i++)
	{
		if (AcquireExternalFD())
			continue;
		zkl_sess_sync_release_fds(i);
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("could not open ZooKeeper session: too many open files"),
				 errhint("Raise the server's max_files_per_process and/or \"ulimit -n\" limits.")));
	}
}

/* Uncount n external descriptors; main thread. */
void
zkl_sess_sync_release_fds(int n)
{
	for (int i = 0; i < n; i++)
		ReleaseExternalFD();
}

/* Make the eventfd, once per backend; main thread, may raise. */
void
zkl_sess_sync_open(void)
{
	if (zkl_sync_efd >= 0)
		return;
	zkl_sess_sync_acquire_fds(1);
	zkl_sync_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (zkl_sync_efd < 0)
	{
		zkl_sess_sync_release_fds(1);
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

/*
 * Let go of what a detached helper thread of the main thread's works on
 * (a resolution, a TLS probe, Kerberos credentials): true when the thread
 * is done with it, for the caller to free it now; false when the thread
 * frees it as it ends (it sees *abandoned under mu).  Main thread.
 */
bool
zkl_sess_sync_let_go(const bool *done, bool *abandoned)
{
	bool		was_done;

	pthread_mutex_lock(&zkl_sess_sync_mu);
	was_done = *done;
	*abandoned = true;
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	return was_done;
}

/* Empty the eventfd after a wake; main thread. */
void
zkl_sess_sync_clear(void)
{
	uint64_t	junk;

	while (zkl_sync_efd >= 0 && read(zkl_sync_efd, &junk, sizeof(junk)) > 0)
		;
}
