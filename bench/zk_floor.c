/*
 * zk_floor.c - the floor of the zklock benchmark: the least work the
 * ZooKeeper C client can do for a lock, with no PostgreSQL in the way.
 *
 *   zk_floor cycle    HOSTS WARM N OUT       create EPHEMERAL_SEQUENTIAL + delete,
 *                                            one session, each reply awaited
 *   zk_floor async    HOSTS WARM N OUT       as cycle, but the delete is sent
 *                                            without waiting for its reply (as
 *                                            zklock's unlock does); the next
 *                                            create waits for both replies
 *   zk_floor read     HOSTS WARM N OUT       one get_children round trip
 *   zk_floor handoff  HOSTS CLIENTS SECS OUT the lock recipe at its leanest
 *                                            (create and listing sent back to
 *                                            back, watch the predecessor,
 *                                            delete), one session per thread,
 *                                            all on one lock
 *   zk_floor distinct HOSTS CLIENTS SECS OUT create + delete under one parent
 *                                            per thread, one session each
 *   zk_floor latency  HOSTS WARM N OUT       the hand-off floor: one session
 *                                            deletes a node that another
 *                                            watches; from the delete sent to
 *                                            the watch event
 *   zk_floor session  HOSTS WARM N OUT       a cron job's floor: a new
 *                                            session, create + delete, close
 *   zk_floor session-fork HOSTS WARM N OUT   the same, each session in a
 *                                            new child process (fork)
 *
 * Writes OUT.lat (one latency in microseconds per line: the cycle, or for
 * handoff the acquire) and OUT.sum (key=value lines).  Every wait for a
 * reply is bounded; the program exits non-zero on any error.
 *
 * Build: gcc -O2 -DTHREADED zk_floor.c -lzookeeper_mt -lpthread
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>
#include <zookeeper/zookeeper.h>

#include "proc_cpu.h"

#define REPLY_TIMEOUT_S 30
#define ROOT "/bench-floor"

typedef struct Samples
{
	long	   *v;
	long		n;
	long		cap;
} Samples;

typedef struct Client
{
	int			idx;
	zhandle_t  *zh;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int			connected;
	int			expired;
	int			pending;		/* replies still expected */
	int			create_rc;
	char		created[512];
	int			list_rc;
	char	  **kids;
	int			nkids;
	int			del_rc;
	int			get_rc;
	int			watch_fired;
	char		parent[256];
	Samples		lat;
	long		cycles;
	double		finish;
	int			failed;
} Client;

static const char *g_hosts;
static double g_end;
static pthread_barrier_t g_ready;
static pthread_barrier_t g_go;

static void
die(const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	fprintf(stderr, "zk_floor: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void
add_sample(Samples *s, double seconds)
{
	if (s->n == s->cap)
	{
		s->cap = s->cap ? s->cap * 2 : 4096;
		s->v = realloc(s->v, s->cap * sizeof(long));
		if (!s->v)
			die("out of memory");
	}
	s->v[s->n++] = (long) (seconds * 1e6 + 0.5);
}

/* ---- completions and watchers: only copy results and signal ---- */

static void
done(Client *c)
{
	c->pending--;
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
}

static void
session_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	Client	   *c = ctx;

	(void) zh;
	(void) path;
	if (type != ZOO_SESSION_EVENT)
		return;
	pthread_mutex_lock(&c->mu);
	if (state == ZOO_CONNECTED_STATE)
		c->connected = 1;
	else if (state == ZOO_EXPIRED_SESSION_STATE || state == ZOO_AUTH_FAILED_STATE)
		c->expired = 1;
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
}

static void
create_done(int rc, const char *value, const void *data)
{
	Client	   *c = (Client *) data;

	pthread_mutex_lock(&c->mu);
	c->create_rc = rc;
	if (rc == ZOK && value)
		snprintf(c->created, sizeof(c->created), "%s", value);
	done(c);
}

static void
list_done(int rc, const struct String_vector *sv, const void *data)
{
	Client	   *c = (Client *) data;

	pthread_mutex_lock(&c->mu);
	for (int i = 0; i < c->nkids; i++)
		free(c->kids[i]);
	free(c->kids);
	c->kids = NULL;
	c->nkids = 0;
	c->list_rc = rc;
	if (rc == ZOK && sv && sv->count > 0)
	{
		c->kids = malloc(sizeof(char *) * sv->count);
		for (int i = 0; i < sv->count; i++)
			c->kids[i] = strdup(sv->data[i]);
		c->nkids = sv->count;
	}
	done(c);
}

static void
delete_done(int rc, const void *data)
{
	Client	   *c = (Client *) data;

	pthread_mutex_lock(&c->mu);
	c->del_rc = rc;
	done(c);
}

static void
get_done(int rc, const char *value, int len, const struct Stat *stat,
		 const void *data)
{
	Client	   *c = (Client *) data;

	(void) value;
	(void) len;
	(void) stat;
	pthread_mutex_lock(&c->mu);
	c->get_rc = rc;
	done(c);
}

static void
pred_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	Client	   *c = ctx;

	(void) zh;
	(void) type;
	(void) state;
	(void) path;
	pthread_mutex_lock(&c->mu);
	c->watch_fired = 1;
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
}

/* ---- waiting on the calling thread, always bounded ---- */

static int
wait_until(Client *c, int *flag, int want_zero)
{
	struct timespec dl;
	int			ok = 1;

	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += REPLY_TIMEOUT_S;
	pthread_mutex_lock(&c->mu);
	while ((want_zero ? *flag != 0 : *flag == 0) && !c->expired)
	{
		if (pthread_cond_timedwait(&c->cv, &c->mu, &dl) == ETIMEDOUT)
		{
			ok = 0;
			break;
		}
	}
	if (c->expired)
		ok = 0;
	pthread_mutex_unlock(&c->mu);
	return ok;
}

static void
expect(Client *c, int n)
{
	pthread_mutex_lock(&c->mu);
	c->pending = n;
	pthread_mutex_unlock(&c->mu);
}

static int
await_replies(Client *c)
{
	return wait_until(c, &c->pending, 1);
}

static void
client_connect(Client *c)
{
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	c->zh = zookeeper_init(g_hosts, session_watcher, 30000, NULL, c, 0);
	if (!c->zh)
		die("zookeeper_init failed: %s", strerror(errno));
	/* numeric hosts: no re-resolution on every I/O turn, as zklock does */
	zoo_set_servers_resolution_delay(c->zh, -1);
	if (!wait_until(c, &c->connected, 0))
		die("client %d: no connection within %d s", c->idx, REPLY_TIMEOUT_S);
}

static void
ensure_node(zhandle_t *zh, const char *path)
{
	int			rc = zoo_create(zh, path, "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);

	if (rc != ZOK && rc != ZNODEEXISTS)
		die("create %s: %s", path, zerror(rc));
}

/* One create + delete, each reply awaited.  0 on success. */
static int
create_delete(Client *c, const char *prefix)
{
	expect(c, 1);
	if (zoo_acreate(c->zh, prefix, "", 0, &ZOO_OPEN_ACL_UNSAFE,
					ZOO_EPHEMERAL_SEQUENTIAL, create_done, c) != ZOK)
		return -1;
	if (!await_replies(c) || c->create_rc != ZOK)
		return -1;
	expect(c, 1);
	if (zoo_adelete(c->zh, c->created, -1, delete_done, c) != ZOK)
		return -1;
	if (!await_replies(c) || c->del_rc != ZOK)
		return -1;
	return 0;
}

static long
seq_of(const char *name)
{
	const char *d = strrchr(name, '-');

	return d ? atol(d + 1) : -1;
}

/* The leanest lock: create and list back to back, watch the predecessor. */
static int
recipe_acquire(Client *c)
{
	char		prefix[300];
	char		pred[600];
	long		mine;

	snprintf(prefix, sizeof(prefix), "%s/lock-", c->parent);
	expect(c, 2);
	if (zoo_acreate(c->zh, prefix, "", 0, &ZOO_OPEN_ACL_UNSAFE,
					ZOO_EPHEMERAL_SEQUENTIAL, create_done, c) != ZOK ||
		zoo_aget_children(c->zh, c->parent, 0, list_done, c) != ZOK)
		return -1;
	if (!await_replies(c) || c->create_rc != ZOK)
		return -1;
	mine = seq_of(c->created);
	for (;;)
	{
		long		best = -1;
		int			bi = -1;

		if (c->list_rc != ZOK)
			return -1;
		for (int i = 0; i < c->nkids; i++)
		{
			long		s = seq_of(c->kids[i]);

			if (s < mine && s > best)
			{
				best = s;
				bi = i;
			}
		}
		if (bi < 0)
			return 0;			/* no earlier contender: held */
		snprintf(pred, sizeof(pred), "%s/%s", c->parent, c->kids[bi]);
		pthread_mutex_lock(&c->mu);
		c->watch_fired = 0;
		c->pending = 1;
		pthread_mutex_unlock(&c->mu);
		if (zoo_awget(c->zh, pred, pred_watcher, c, get_done, c) != ZOK)
			return -1;
		if (!await_replies(c))
			return -1;
		if (c->get_rc == ZOK)
		{
			if (!wait_until(c, &c->watch_fired, 0))
				return -1;
		}
		else if (c->get_rc != ZNONODE)
			return -1;
		expect(c, 1);
		if (zoo_aget_children(c->zh, c->parent, 0, list_done, c) != ZOK)
			return -1;
		if (!await_replies(c))
			return -1;
	}
}

static int
recipe_release(Client *c)
{
	expect(c, 1);
	if (zoo_adelete(c->zh, c->created, -1, delete_done, c) != ZOK)
		return -1;
	if (!await_replies(c) || c->del_rc != ZOK)
		return -1;
	return 0;
}

/* ---- multi-client modes ---- */

static int g_handoff;

static void *
client_main(void *arg)
{
	Client	   *c = arg;
	char		prefix[300];

	client_connect(c);
	pthread_barrier_wait(&g_ready);
	pthread_barrier_wait(&g_go);
	snprintf(prefix, sizeof(prefix), "%s/lock-", c->parent);
	while (now_s() < g_end)
	{
		double		t0 = now_s();

		if (g_handoff)
		{
			if (recipe_acquire(c) != 0)
			{
				c->failed = 1;
				break;
			}
			add_sample(&c->lat, now_s() - t0);
			if (recipe_release(c) != 0)
			{
				c->failed = 1;
				break;
			}
		}
		else
		{
			if (create_delete(c, prefix) != 0)
			{
				c->failed = 1;
				break;
			}
			add_sample(&c->lat, now_s() - t0);
		}
		c->cycles++;
	}
	c->finish = now_s();
	return NULL;
}

static void
write_results(const char *out, Client *cs, int n, double seconds,
			  const char *extra)
{
	char		path[1024];
	FILE	   *f;
	long		cycles = 0;

	snprintf(path, sizeof(path), "%s.lat", out);
	if (!(f = fopen(path, "w")))
		die("cannot write %s", path);
	for (int i = 0; i < n; i++)
	{
		cycles += cs[i].cycles;
		for (long j = 0; j < cs[i].lat.n; j++)
			fprintf(f, "%ld\n", cs[i].lat.v[j]);
	}
	fclose(f);
	snprintf(path, sizeof(path), "%s.sum", out);
	if (!(f = fopen(path, "w")))
		die("cannot write %s", path);
	fprintf(f, "cycles=%ld\nseconds=%.6f\nclients=%d\n%s", cycles, seconds, n,
			extra ? extra : "");
	fclose(f);
}

static int
run_multi(int clients, double secs, const char *out, int handoff)
{
	Client	   *cs = calloc(clients, sizeof(Client));
	pthread_t  *th = calloc(clients, sizeof(pthread_t));
	double		start,
				last = 0,
				cpu0,
				cpu1;
	long		cycles = 0;
	char		extra[64] = "";
	Client		setup = {0};

	g_handoff = handoff;
	setup.idx = -1;
	client_connect(&setup);
	ensure_node(setup.zh, ROOT);
	for (int i = 0; i < clients; i++)
	{
		cs[i].idx = i;
		if (handoff)
			snprintf(cs[i].parent, sizeof(cs[i].parent), ROOT "/h");
		else
			snprintf(cs[i].parent, sizeof(cs[i].parent), ROOT "/d%d", i);
		ensure_node(setup.zh, cs[i].parent);
	}
	zookeeper_close(setup.zh);

	pthread_barrier_init(&g_ready, NULL, clients + 1);
	pthread_barrier_init(&g_go, NULL, clients + 1);
	for (int i = 0; i < clients; i++)
		pthread_create(&th[i], NULL, client_main, &cs[i]);
	pthread_barrier_wait(&g_ready);
	cpu0 = cpu_us(0);			/* this process's CPU while timed */
	start = now_s();
	g_end = start + secs;
	pthread_barrier_wait(&g_go);
	for (int i = 0; i < clients; i++)
	{
		pthread_join(th[i], NULL);
		if (cs[i].failed)
			die("client %d failed", i);
		if (cs[i].finish > last)
			last = cs[i].finish;
		cycles += cs[i].cycles;
	}
	cpu1 = cpu_us(0);
	if (cycles > 0 && cpu0 >= 0 && cpu1 >= 0)
		snprintf(extra, sizeof(extra), "cpu_client_us=%.1f\n", (cpu1 - cpu0) / cycles);
	write_results(out, cs, clients, last - start, extra);
	for (int i = 0; i < clients; i++)
		zookeeper_close(cs[i].zh);
	return 0;
}

/* create, then the delete sent without waiting: replies come in order */
static int
create_async_delete(Client *c, const char *prefix)
{
	pthread_mutex_lock(&c->mu);
	c->pending++;				/* plus the previous delete, if any */
	pthread_mutex_unlock(&c->mu);
	if (zoo_acreate(c->zh, prefix, "", 0, &ZOO_OPEN_ACL_UNSAFE,
					ZOO_EPHEMERAL_SEQUENTIAL, create_done, c) != ZOK)
		return -1;
	if (!await_replies(c) || c->create_rc != ZOK || c->del_rc != ZOK)
		return -1;
	pthread_mutex_lock(&c->mu);
	c->pending++;
	pthread_mutex_unlock(&c->mu);
	if (zoo_adelete(c->zh, c->created, -1, delete_done, c) != ZOK)
		return -1;
	return 0;
}

/* mode: 0 create + delete, 1 get_children, 2 create + unawaited delete */
static int
run_single(int mode, int warm, int n, const char *out)
{
	Client		c = {0};
	char		prefix[300];
	double		t_all;

	client_connect(&c);
	ensure_node(c.zh, ROOT);
	snprintf(c.parent, sizeof(c.parent), ROOT "/u");
	ensure_node(c.zh, c.parent);
	snprintf(prefix, sizeof(prefix), "%s/lock-", c.parent);
	t_all = now_s();
	for (int i = 0; i < warm + n; i++)
	{
		double		t0;

		if (i == warm)
			t_all = now_s();
		t0 = now_s();
		if (mode == 1)
		{
			expect(&c, 1);
			if (zoo_aget_children(c.zh, c.parent, 0, list_done, &c) != ZOK ||
				!await_replies(&c) || c.list_rc != ZOK)
				die("get_children failed");
		}
		else if ((mode == 2 ? create_async_delete(&c, prefix) :
				  create_delete(&c, prefix)) != 0)
			die("create/delete cycle failed (create %s, delete %s)",
				zerror(c.create_rc), zerror(c.del_rc));
		if (i >= warm)
		{
			add_sample(&c.lat, now_s() - t0);
			c.cycles++;
		}
	}
	if (!await_replies(&c) || c.del_rc != ZOK)
		die("last delete failed");
	write_results(out, &c, 1, now_s() - t_all, NULL);
	zookeeper_close(c.zh);
	return 0;
}

/* the watcher of the latency mode: stamps the event */
static double g_fired_at;

static void
stamp_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	Client	   *c = ctx;

	(void) zh;
	(void) state;
	(void) path;
	if (type != ZOO_DELETED_EVENT)
		return;
	pthread_mutex_lock(&c->mu);
	g_fired_at = now_s();
	c->watch_fired = 1;
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
}

static void
sync_done(int rc, const char *value, const void *data)
{
	Client	   *c = (Client *) data;

	(void) value;
	pthread_mutex_lock(&c->mu);
	c->get_rc = rc;
	done(c);
}

static void
exists_done(int rc, const struct Stat *stat, const void *data)
{
	Client	   *c = (Client *) data;

	(void) stat;
	pthread_mutex_lock(&c->mu);
	c->get_rc = rc;
	done(c);
}

/*
 * Hand-off floor: holder h creates a node, waiter w watches it (the watch
 * set and answered), then h sends the delete; the sample runs from the
 * send to w's watch event.
 */
static int
run_latency(int warm, int n, const char *out)
{
	Client		h = {0},
				w = {0};
	double		t_all = 0;
	char		path[sizeof(h.created)];

	h.idx = 0;
	w.idx = 1;
	client_connect(&h);
	client_connect(&w);
	ensure_node(h.zh, ROOT);
	ensure_node(h.zh, ROOT "/l");
	for (int i = 0; i < warm + n; i++)
	{
		double		t0;

		if (i == warm)
			t_all = now_s();
		expect(&h, 1);
		if (zoo_acreate(h.zh, ROOT "/l/lock-", "", 0, &ZOO_OPEN_ACL_UNSAFE,
						ZOO_EPHEMERAL_SEQUENTIAL, create_done, &h) != ZOK ||
			!await_replies(&h) || h.create_rc != ZOK)
			die("create failed");
		snprintf(path, sizeof(path), "%s", h.created);
		/* w's server may not have the create yet: catch up first */
		expect(&w, 1);
		if (zoo_async(w.zh, path, sync_done, &w) != ZOK || !await_replies(&w))
			die("sync failed");
		w.watch_fired = 0;
		expect(&w, 1);
		if (zoo_awexists(w.zh, path, stamp_watcher, &w, exists_done, &w) != ZOK ||
			!await_replies(&w) || w.get_rc != ZOK)
			die("exists failed");
		expect(&h, 1);
		t0 = now_s();
		if (zoo_adelete(h.zh, path, -1, delete_done, &h) != ZOK)
			die("delete failed");
		if (!wait_until(&w, &w.watch_fired, 0) || !await_replies(&h) ||
			h.del_rc != ZOK)
			die("no deletion event");
		if (i >= warm)
		{
			pthread_mutex_lock(&w.mu);
			add_sample(&h.lat, g_fired_at - t0);
			pthread_mutex_unlock(&w.mu);
			h.cycles++;
		}
	}
	write_results(out, &h, 1, now_s() - t_all, NULL);
	zookeeper_close(h.zh);
	zookeeper_close(w.zh);
	return 0;
}

/* The cron floor's directories, made once. */
static void
session_setup(void)
{
	Client		setup = {0};

	client_connect(&setup);
	ensure_node(setup.zh, ROOT);
	ensure_node(setup.zh, ROOT "/s");
	zookeeper_close(setup.zh);
}

/* One session: connect, create + delete, close; t: the four moments. */
static void
session_once(double t[4])
{
	Client		c = {0};

	t[0] = now_s();
	client_connect(&c);
	t[1] = now_s();
	if (create_delete(&c, ROOT "/s/lock-") != 0)
		die("create/delete failed");
	t[2] = now_s();
	zookeeper_close(c.zh);
	t[3] = now_s();
	pthread_mutex_destroy(&c.mu);
	pthread_cond_destroy(&c.cv);
}

/*
 * session_once in a new child process (after the setup, if asked), which
 * reports its moments through a pipe; the sample runs from the fork to the
 * child's exit.
 */
static void
session_forked(double t[4], bool setup_first)
{
	const size_t size = 4 * sizeof(double);
	int			fd[2];
	pid_t		pid;
	int			status;
	double		t0;

	if (pipe(fd) != 0)
		die("pipe failed");
	t0 = now_s();
	if ((pid = fork()) < 0)
		die("fork failed");
	if (pid == 0)
	{
		close(fd[0]);
		if (setup_first)
			session_setup();
		session_once(t);
		_exit(write(fd[1], t, size) == (ssize_t) size ? 0 : 1);
	}
	close(fd[1]);
	if (read(fd[0], t, size) != (ssize_t) size)
		die("session child failed");
	close(fd[0]);
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
		WEXITSTATUS(status) != 0)
		die("session child failed");
	t[0] = t0;
	t[3] = now_s();
}

/*
 * A cron job's floor: connect, create + delete, close, each sample whole.
 * With fork, each session runs in a new child process of a parent that
 * never starts the library itself, as PostgreSQL forks a backend per
 * connection.
 */
static int
run_session(int warm, int n, const char *out, bool fork_each)
{
	Client		acc = {0};
	double		t_all = 0,
				t_conn = 0,
				t_work = 0,
				t_close = 0;
	char		extra[256];

	if (!fork_each)
		session_setup();
	for (int i = 0; i < warm + n; i++)
	{
		double		t[4];

		if (i == warm)
			t_all = now_s();
		if (fork_each)
			session_forked(t, i == 0);
		else
			session_once(t);
		if (i >= warm)
		{
			add_sample(&acc.lat, t[3] - t[0]);
			acc.cycles++;
			t_conn += t[1] - t[0];
			t_work += t[2] - t[1];
			t_close += t[3] - t[2];
		}
	}
	/* the breakdown: session open, create + delete, close */
	snprintf(extra, sizeof(extra),
			 "mean_connect_us=%.1f\nmean_lock_us=%.1f\nmean_close_us=%.1f\n",
			 t_conn / n * 1e6, t_work / n * 1e6, t_close / n * 1e6);
	write_results(out, &acc, 1, now_s() - t_all, extra);
	return 0;
}

int
main(int argc, char **argv)
{
	if (argc != 6)
	{
		fprintf(stderr,
				"usage: zk_floor cycle|async|read|latency|session|session-fork HOSTS WARM N OUT\n"
				"       zk_floor handoff|distinct HOSTS CLIENTS SECONDS OUT\n");
		return 2;
	}
	zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
	g_hosts = argv[2];
	if (strcmp(argv[1], "cycle") == 0 || strcmp(argv[1], "read") == 0 ||
		strcmp(argv[1], "async") == 0)
		return run_single(strcmp(argv[1], "read") == 0 ? 1 :
						  strcmp(argv[1], "async") == 0 ? 2 : 0,
						  atoi(argv[3]), atoi(argv[4]), argv[5]);
	if (strcmp(argv[1], "handoff") == 0 || strcmp(argv[1], "distinct") == 0)
		return run_multi(atoi(argv[3]), atof(argv[4]), argv[5],
						 strcmp(argv[1], "handoff") == 0);
	if (strcmp(argv[1], "latency") == 0)
		return run_latency(atoi(argv[3]), atoi(argv[4]), argv[5]);
	if (strcmp(argv[1], "session") == 0 || strcmp(argv[1], "session-fork") == 0)
		return run_session(atoi(argv[3]), atoi(argv[4]), argv[5],
						   strcmp(argv[1], "session-fork") == 0);
	fprintf(stderr, "zk_floor: unknown mode %s\n", argv[1]);
	return 2;
}
