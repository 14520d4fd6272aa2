/*
 * ZOOKEEPER-4810 (patch 0011): the "address:port" text of
 * zoo_get_current_server() (format_endpoint_info) must be the calling
 * thread's own.  Two handles connect to two loopback servers that accept
 * and never answer (their current server stays put); two threads each ask
 * for their own handle's server, up to two million times (a thread stops
 * once it read a wrong one), and compare the text with what it must be.  With the 3.8.0 client's one static buffer a thread
 * reads the other's text.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <zookeeper/zookeeper.h>

#include "zkc_test.h"

#define ROUNDS 2000000
#define BOUND_S 20.0

typedef struct
{
	zhandle_t  *zh;
	char		want[64];
	long		wrong;
	long		rounds;
	char		seen[160];
} Asker;

static void *
ask(void *arg)
{
	Asker	   *a = arg;
	double		start = zkc_test_now();

	while (a->rounds < ROUNDS)
	{
		const char *s = zoo_get_current_server(a->zh);

		a->rounds++;
		if (s == NULL || strcmp(s, a->want) != 0)
		{
			if (a->wrong++ == 0)
				snprintf(a->seen, sizeof(a->seen), "%s", s ? s : "(null)");
		}
		if ((a->rounds & 1023) == 0 &&
			(a->wrong > 0 || zkc_test_now() - start > BOUND_S))
			break;
	}
	return NULL;
}

/* Until the handle's current server is the one it was given, or 10 s. */
static int
settled(Asker *a)
{
	double		start = zkc_test_now();

	while (zkc_test_now() - start < 10.0)
	{
		const char *s = zoo_get_current_server(a->zh);

		if (s != NULL && strcmp(s, a->want) == 0)
			return 1;
		usleep(10000);
	}
	return 0;
}

int
main(void)
{
	Asker		a[2];
	pthread_t	t[2];
	int			fds[2] = {-1, -1};
	int			ready = 1;

	zoo_set_debug_level(0);
	memset(a, 0, sizeof(a));
	for (int i = 0; i < 2; i++)
	{
		char		host[64];
		int			port = zkc_test_port(1, &fds[i]);

		snprintf(a[i].want, sizeof(a[i].want), "127.0.0.1:%d", port);
		snprintf(host, sizeof(host), "127.0.0.1:%d", port);
		a[i].zh = port > 0 ? zookeeper_init(host, NULL, 30000, NULL, NULL, 0) : NULL;
		ready = ready && a[i].zh != NULL && settled(&a[i]);
	}
	check(ready, "two handles, each on its own silent server");
	if (ready)
	{
		for (int i = 0; i < 2; i++)
			pthread_create(&t[i], NULL, ask, &a[i]);
		for (int i = 0; i < 2; i++)
			pthread_join(t[i], NULL);
		for (int i = 0; i < 2; i++)
		{
			char		what[256];

			snprintf(what, sizeof(what),
					 "thread %d read its own handle's server %s %ld times of %ld%s%s",
					 i + 1, a[i].want, a[i].rounds - a[i].wrong, a[i].rounds,
					 a[i].wrong ? "; once it read " : "", a[i].seen);
			check(a[i].wrong == 0 && a[i].rounds > 0, what);
		}
	}
	for (int i = 0; i < 2; i++)
	{
		if (a[i].zh)
			zookeeper_close(a[i].zh);
		if (fds[i] >= 0)
			close(fds[i]);
	}
	return tap_done();
}
