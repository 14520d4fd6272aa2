/*
 * zkc_test.h: what the tests of the C client patches share (test/zkc/test_*.c,
 * one program each, linked with the built libzookeeper.a): loopback ports
 * that refuse or never answer, and the TAP output of test/unit/tap.h.
 */
#ifndef ZKC_TEST_H
#define ZKC_TEST_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../unit/tap.h"

/*
 * A loopback socket bound to a free port; listening when asked (a server
 * that accepts connections and never answers), else closed again (a port
 * that refuses).  Returns the port, or -1.
 */
static inline int
zkc_test_port(int listening, int *fdp)
{
	struct sockaddr_in a = {0};
	socklen_t	len = sizeof(a);
	int			fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *) &a, sizeof(a)) != 0 ||
		getsockname(fd, (struct sockaddr *) &a, &len) != 0 ||
		(listening && listen(fd, 16) != 0))
	{
		close(fd);
		return -1;
	}
	if (listening)
		*fdp = fd;
	else
		close(fd);
	return ntohs(a.sin_port);
}

/* Seconds on the monotonic clock, for the tests' bounds. */
static inline double
zkc_test_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

#endif							/* ZKC_TEST_H */
