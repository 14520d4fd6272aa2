/*
 * delay_proxy.c: a TCP proxy on 127.0.0.1 that holds every byte for a fixed
 * time in each direction, to put a distance between the benchmark's clients
 * and its servers (this kernel has no netem).
 *
 *   delay_proxy DELAY_US TARGET_PORT [TARGET_PORT ...]
 *
 * Listens on one free loopback port per target, prints the listening ports
 * in target order on one line ("p1 p2 ...") and flushes, then forwards
 * every accepted connection to 127.0.0.1:TARGET, each chunk read on one
 * side written to the other DELAY_US microseconds later, in order.  A
 * round trip through it costs 2 * DELAY_US more.  Runs until SIGTERM or
 * SIGINT.  One thread: epoll, a timerfd on CLOCK_MONOTONIC for the next
 * due chunk (sub-millisecond), TCP_NODELAY on both sides.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define MAX_TARGETS 16
#define READ_SIZE 65536

enum
{
	K_LISTEN, K_TIMER, K_SOCK
};

typedef struct Chunk
{
	struct Chunk *next;
	int64_t		due_ns;
	size_t		len;
	size_t		off;
	char		data[];
} Chunk;

/* One socket of a connection and the bytes waiting to be written to it. */
typedef struct Sock
{
	int			kind;			/* K_SOCK */
	int			fd;
	struct Sock *peer;
	Chunk	   *head;
	Chunk	   *tail;
	int			eof_after;		/* the peer closed: shut down once drained */
	int			queued;			/* in the pending list */
	int			dead;			/* closed; freed at the end of the pass */
	struct Sock *next_dead;
} Sock;

typedef struct Listener
{
	int			kind;			/* K_LISTEN */
	int			fd;
	int			target;
} Listener;

static int64_t delay_ns;
static volatile sig_atomic_t stop;
static int ep;
static int timer_kind = K_TIMER;
static int tfd;

/* Closed sockets, freed once no event of the current pass can name them. */
static Sock *graveyard;

/* Sockets with bytes queued, scanned for the next due time. */
static Sock **pending;
static int	npending;
static int	cap_pending;

static int64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void
on_signal(int sig)
{
	(void) sig;
	stop = 1;
}

static void
die(const char *what)
{
	perror(what);
	exit(1);
}

static void
prepare(int fd)
{
	int			one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0)
		die("fcntl");
}

static void
pending_add(Sock *s)
{
	if (s->queued)
		return;
	if (npending == cap_pending)
	{
		cap_pending = cap_pending ? cap_pending * 2 : 64;
		pending = realloc(pending, sizeof(Sock *) * (size_t) cap_pending);
		if (pending == NULL)
			die("realloc");
	}
	pending[npending++] = s;
	s->queued = 1;
}

static void
pending_drop(Sock *s)
{
	if (!s->queued)
		return;
	for (int i = 0; i < npending; i++)
		if (pending[i] == s)
		{
			pending[i] = pending[--npending];
			break;
		}
	s->queued = 0;
}

static void
sock_kill(Sock *s)
{
	if (s->dead)
		return;
	s->dead = 1;
	pending_drop(s);
	epoll_ctl(ep, EPOLL_CTL_DEL, s->fd, NULL);
	close(s->fd);
	s->next_dead = graveyard;
	graveyard = s;
}

/* Close both sockets of a connection. */
static void
pair_kill(Sock *s)
{
	sock_kill(s);
	sock_kill(s->peer);
}

static void
bury(void)
{
	while (graveyard)
	{
		Sock	   *s = graveyard;
		Chunk	   *c = s->head;

		graveyard = s->next_dead;
		while (c)
		{
			Chunk	   *n = c->next;

			free(c);
			c = n;
		}
		free(s);
	}
}

/*
 * Write the chunks of s that are due.  Returns -1 when the connection is
 * broken.  A full socket buffer leaves the rest for the next pass.
 */
static int
sock_flush(Sock *s, int64_t now)
{
	while (s->head && s->head->due_ns <= now)
	{
		Chunk	   *c = s->head;
		ssize_t		w = write(s->fd, c->data + c->off, c->len - c->off);

		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (w <= 0)
			return -1;
		c->off += (size_t) w;
		if (c->off < c->len)
			continue;
		s->head = c->next;
		if (s->head == NULL)
			s->tail = NULL;
		free(c);
	}
	if (s->head == NULL)
	{
		pending_drop(s);
		if (s->eof_after)
			shutdown(s->fd, SHUT_WR);
	}
	return 0;
}

/* Set the timer to the earliest due chunk (a full buffer: 1 ms from now). */
static void
timer_arm(int64_t now)
{
	int64_t		next = INT64_MAX;
	struct itimerspec its;

	memset(&its, 0, sizeof(its));
	for (int i = 0; i < npending; i++)
	{
		int64_t		due = pending[i]->head->due_ns;

		if (due <= now)
			due = now + 1000000;
		if (due < next)
			next = due;
	}
	if (next != INT64_MAX)
	{
		its.it_value.tv_sec = next / 1000000000;
		its.it_value.tv_nsec = next % 1000000000;
	}
	timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

static void
accept_one(Listener *l)
{
	struct sockaddr_in a;
	int			c = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);
	int			srv;
	Sock	   *cs;
	Sock	   *ss;
	struct epoll_event ev;

	if (c < 0)
		return;
	srv = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t) l->target);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	/* A blocking connect on loopback: at once, or refused. */
	if (srv < 0 || connect(srv, (struct sockaddr *) &a, sizeof(a)) < 0)
	{
		close(c);
		if (srv >= 0)
			close(srv);
		return;
	}
	prepare(c);
	prepare(srv);
	cs = calloc(1, sizeof(Sock));
	ss = calloc(1, sizeof(Sock));
	if (cs == NULL || ss == NULL)
		die("calloc");
	cs->kind = ss->kind = K_SOCK;
	cs->fd = c;
	ss->fd = srv;
	cs->peer = ss;
	ss->peer = cs;
	ev.events = EPOLLIN;
	ev.data.ptr = cs;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev) < 0)
		die("epoll_ctl");
	ev.data.ptr = ss;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, srv, &ev) < 0)
		die("epoll_ctl");
}

/* Read what s has and queue it, stamped, for its peer. */
static void
sock_read(Sock *s, int64_t now)
{
	char		buf[READ_SIZE];
	ssize_t		n = read(s->fd, buf, sizeof(buf));
	Sock	   *to = s->peer;
	Chunk	   *c;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0)
	{
		/* EOF or reset: pass the close on once the bytes before it are out. */
		if (n < 0 || to->head == NULL)
		{
			pair_kill(s);
			return;
		}
		to->eof_after = 1;
		epoll_ctl(ep, EPOLL_CTL_DEL, s->fd, NULL);
		return;
	}
	c = malloc(sizeof(Chunk) + (size_t) n);
	if (c == NULL)
		die("malloc");
	memcpy(c->data, buf, (size_t) n);
	c->len = (size_t) n;
	c->off = 0;
	c->next = NULL;
	c->due_ns = now + delay_ns;
	if (to->tail)
		to->tail->next = c;
	else
		to->head = c;
	to->tail = c;
	pending_add(to);
}

int
main(int argc, char **argv)
{
	Listener	ls[MAX_TARGETS];
	int			n = argc - 2;
	struct epoll_event ev;

	if (argc < 3 || n > MAX_TARGETS)
	{
		fprintf(stderr, "usage: delay_proxy DELAY_US TARGET_PORT [TARGET_PORT ...]\n");
		return 2;
	}
	delay_ns = atoll(argv[1]) * 1000;
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	signal(SIGPIPE, SIG_IGN);
	if ((ep = epoll_create1(EPOLL_CLOEXEC)) < 0)
		die("epoll_create1");
	if ((tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK)) < 0)
		die("timerfd_create");
	ev.events = EPOLLIN;
	ev.data.ptr = &timer_kind;
	epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &ev);

	for (int i = 0; i < n; i++)
	{
		struct sockaddr_in a;
		socklen_t	alen = sizeof(a);
		int			one = 1;

		ls[i].kind = K_LISTEN;
		ls[i].target = atoi(argv[i + 2]);
		if ((ls[i].fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
			die("socket");
		setsockopt(ls[i].fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		memset(&a, 0, sizeof(a));
		a.sin_family = AF_INET;
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (bind(ls[i].fd, (struct sockaddr *) &a, sizeof(a)) < 0 ||
			listen(ls[i].fd, 1024) < 0 ||
			getsockname(ls[i].fd, (struct sockaddr *) &a, &alen) < 0)
			die("listen");
		ev.events = EPOLLIN;
		ev.data.ptr = &ls[i];
		epoll_ctl(ep, EPOLL_CTL_ADD, ls[i].fd, &ev);
		printf("%s%d", i ? " " : "", ntohs(a.sin_port));
	}
	printf("\n");
	fflush(stdout);

	while (!stop)
	{
		struct epoll_event evs[256];
		int			k = epoll_wait(ep, evs, 256, 1000);
		int64_t		now = now_ns();

		if (k < 0 && errno != EINTR)
			die("epoll_wait");
		for (int i = 0; i < k; i++)
		{
			int			kind = *(int *) evs[i].data.ptr;

			if (kind == K_LISTEN)
				accept_one((Listener *) evs[i].data.ptr);
			else if (kind == K_TIMER)
			{
				uint64_t	junk;

				(void) !read(tfd, &junk, sizeof(junk));
			}
		}
		for (int i = 0; i < k; i++)
			if (*(int *) evs[i].data.ptr == K_SOCK &&
				!((Sock *) evs[i].data.ptr)->dead)
				sock_read((Sock *) evs[i].data.ptr, now);
		now = now_ns();
		for (int i = npending - 1; i >= 0; i--)
			if (i < npending && sock_flush(pending[i], now) < 0)
				pair_kill(pending[i]);
		bury();
		timer_arm(now);
	}
	return 0;
}
