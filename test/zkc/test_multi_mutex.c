/*
 * ZOOKEEPER-4299 (patch 0013): the client must lock only mutexes it
 * initialised.  Linked with -Wl,--wrap for pthread_mutex_init, _destroy
 * and _lock: the wrappers note every mutex initialised (and destroyed) and
 * count the locks of any other.  A handle (on a server that accepts and
 * never answers, with callbacks on the IO thread as zklock runs it) is
 * given a zoo_amulti() request, then closed, which completes it with
 * ZCLOSING.  The 3.8.0 client locks the zero-filled mutex of the request's
 * sub-request list, on the caller's stack and again in the completion's
 * copy of it.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <zookeeper/zookeeper.h>

#include "zkc_test.h"

int			__real_pthread_mutex_init(pthread_mutex_t *m, const pthread_mutexattr_t *a);
int			__real_pthread_mutex_destroy(pthread_mutex_t *m);
int			__real_pthread_mutex_lock(pthread_mutex_t *m);
int			__wrap_pthread_mutex_init(pthread_mutex_t *m, const pthread_mutexattr_t *a);
int			__wrap_pthread_mutex_destroy(pthread_mutex_t *m);
int			__wrap_pthread_mutex_lock(pthread_mutex_t *m);

#define MAX_MUTEXES 4096

/* The registry's own lock is a static one, locked unwrapped. */
static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static const void *inited[MAX_MUTEXES];
static int	ninited;
static int	overflow;
static int	uninit_locks;
static int	zkc_calls;			/* locks while the client is being driven */

static int
find(const void *m)
{
	for (int i = 0; i < ninited; i++)
		if (inited[i] == m)
			return i;
	return -1;
}

int
__wrap_pthread_mutex_init(pthread_mutex_t *m, const pthread_mutexattr_t *a)
{
	__real_pthread_mutex_lock(&reg_mu);
	if (find(m) < 0)
	{
		if (ninited < MAX_MUTEXES)
			inited[ninited++] = m;
		else
			overflow = 1;
	}
	pthread_mutex_unlock(&reg_mu);
	return __real_pthread_mutex_init(m, a);
}

int
__wrap_pthread_mutex_destroy(pthread_mutex_t *m)
{
	int			i;

	__real_pthread_mutex_lock(&reg_mu);
	if ((i = find(m)) >= 0)
		inited[i] = inited[--ninited];
	pthread_mutex_unlock(&reg_mu);
	return __real_pthread_mutex_destroy(m);
}

int
__wrap_pthread_mutex_lock(pthread_mutex_t *m)
{
	__real_pthread_mutex_lock(&reg_mu);
	zkc_calls++;
	if (find(m) < 0)
		uninit_locks++;
	pthread_mutex_unlock(&reg_mu);
	return __real_pthread_mutex_lock(m);
}

static pthread_mutex_t done_mu;
static pthread_cond_t done_cv;
static int	done_rc = 1;		/* the completion's rc; 1: not called */

static void
multi_done(int rc, const void *data)
{
	(void) data;
	pthread_mutex_lock(&done_mu);
	done_rc = rc;
	pthread_cond_broadcast(&done_cv);
	pthread_mutex_unlock(&done_mu);
}

int
main(void)
{
	char		host[64];
	int			fd = -1;
	int			port = zkc_test_port(1, &fd);
	zhandle_t  *zh;
	zoo_op_t	ops[2];
	zoo_op_result_t results[2];
	int			rc = -1;
	int			before;
	int			uninit;

	zoo_set_debug_level(0);
	/* As zklock runs it (patch 0006): zookeeper_close answers on its caller. */
	zoo_set_io_completions(1);
	pthread_mutex_init(&done_mu, NULL);
	pthread_cond_init(&done_cv, NULL);
	snprintf(host, sizeof(host), "127.0.0.1:%d", port);
	zh = port > 0 ? zookeeper_init(host, NULL, 30000, NULL, NULL, 0) : NULL;
	check(zh != NULL, "a handle on a server that never answers");
	if (zh == NULL)
		return tap_done();

	__real_pthread_mutex_lock(&reg_mu);
	before = zkc_calls;
	pthread_mutex_unlock(&reg_mu);
	zoo_check_op_init(&ops[0], "/a", -1);
	zoo_delete_op_init(&ops[1], "/a/b", -1);
	rc = zoo_amulti(zh, 2, ops, results, multi_done, NULL);
	zookeeper_close(zh);
	pthread_mutex_lock(&done_mu);
	rc = rc == ZOK ? done_rc : rc;
	pthread_mutex_unlock(&done_mu);
	{
		char		what[128];

		snprintf(what, sizeof(what), "zoo_amulti is queued, and answered by zookeeper_close with ZCLOSING (%d)", rc);
		check(rc == ZCLOSING, what);
	}

	__real_pthread_mutex_lock(&reg_mu);
	uninit = uninit_locks;
	check(zkc_calls > before && !overflow, "the wrappers saw the client's locks");
	pthread_mutex_unlock(&reg_mu);
	{
		char		what[160];

		snprintf(what, sizeof(what),
				 "every mutex the client locked was initialised (%d locks of one that was not)",
				 uninit);
		check(uninit == 0, what);
	}
	close(fd);
	return tap_done();
}
