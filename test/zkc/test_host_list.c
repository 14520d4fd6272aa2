/*
 * ZOOKEEPER-4699 (patch 0012): the IO thread's "Delaying connection after
 * exhaustively trying all servers [hosts]" warning must not read a host
 * list that zoo_set_servers() frees meanwhile.  Linked with
 * -Wl,--wrap=log_message and AddressSanitizer: when the IO thread logs
 * that warning (one server, on a port that refuses), the wrapper holds it
 * while the main thread replaces the list with zoo_set_servers(), then
 * asks AddressSanitizer whether the host list the warning was given has
 * been freed.  The 3.8.0 client passes the handle's own list, which
 * zoo_set_servers() has freed by then.
 */
#include <pthread.h>
#include <sanitizer/asan_interface.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <zookeeper/zookeeper.h>

#include "zkc_test.h"

void		__wrap_log_message(log_callback_fn callback, ZooLogLevel level,
							   int line, const char *func, const char *format,...);

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int	logged;				/* the warning is held in the wrapper */
static int	replaced;			/* zoo_set_servers() returned */
static int	checked;			/* the wrapper looked at the list */
static int	list_freed;
static char list_seen[128];

/* Wait on cv until *flag is set, at most 10 s; whether it was set. */
static int
wait_for(int *flag)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	while (!*flag)
		if (pthread_cond_timedwait(&cv, &mu, &until) != 0)
			break;
	return *flag;
}

void
__wrap_log_message(log_callback_fn callback, ZooLogLevel level, int line,
				   const char *func, const char *format,...)
{
	va_list		ap;
	const char *hosts;

	(void) callback;
	(void) level;
	(void) line;
	(void) func;
	if (strstr(format, "Delaying connection") == NULL)
		return;
	va_start(ap, format);
	hosts = va_arg(ap, const char *);
	va_end(ap);

	pthread_mutex_lock(&mu);
	if (!checked && !logged)
	{
		logged = 1;
		pthread_cond_broadcast(&cv);
		/* Bounded: a client that logs under the lock zoo_set_servers takes. */
		wait_for(&replaced);
		list_freed = hosts != NULL && __asan_address_is_poisoned(hosts);
		if (hosts != NULL && !list_freed)
			snprintf(list_seen, sizeof(list_seen), "%s", hosts);
		checked = 1;
		pthread_cond_broadcast(&cv);
	}
	pthread_mutex_unlock(&mu);
}

int
main(void)
{
	char		host[64];
	char		other[64];
	int			port = zkc_test_port(0, NULL);
	int			other_port = zkc_test_port(0, NULL);
	zhandle_t  *zh;
	int			warned;
	int			rc = -1;

	zoo_set_debug_level(ZOO_LOG_LEVEL_WARN);
	snprintf(host, sizeof(host), "127.0.0.1:%d", port);
	snprintf(other, sizeof(other), "127.0.0.1:%d", other_port);
	zh = zookeeper_init(host, NULL, 6000, NULL, NULL, 0);

	pthread_mutex_lock(&mu);
	warned = zh != NULL && wait_for(&logged);
	pthread_mutex_unlock(&mu);
	check(warned, "the IO thread warns that it tried every server");
	if (warned)
	{
		rc = zoo_set_servers(zh, other);
		pthread_mutex_lock(&mu);
		replaced = 1;
		pthread_cond_broadcast(&cv);
		wait_for(&checked);
		pthread_mutex_unlock(&mu);
		check(rc == ZOK, "zoo_set_servers replaced the host list");
		check(checked && !list_freed && strcmp(list_seen, host) == 0,
			  list_freed ? "the warning's host list was freed under it (use after free)" :
			  "the warning's host list is intact after zoo_set_servers");
	}
	if (zh)
		zookeeper_close(zh);
	return tap_done();
}
