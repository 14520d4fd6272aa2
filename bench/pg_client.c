/*
 * pg_client.c - libpq driver of the zklock benchmark.
 *
 *   pg_client cycle    CONNINFO MODE WARM N OUT        one connection
 *   pg_client pair     CONNINFO_A MODE_A CONNINFO_B MODE_B WARM N OUT_A OUT_B
 *                                                      two connections, one
 *                                                      cycle each in turn
 *   pg_client handoff  CONNINFO MODE CLIENTS SECS OUT  one lock, N connections
 *   pg_client distinct CONNINFO MODE CLIENTS SECS OUT  one lock per connection
 *   pg_client herd     CONNINFO WAITERS OUT            zklock: WAITERS backends
 *                                                      queue on one lock
 *   pg_client mem      CONNINFO BACKENDS OUT           RSS of backends before
 *                                                      and after a zklock session
 *   pg_client memall   CONNINFO BACKENDS OUT           the same with all of them
 *                                                      connected and using zklock
 *                                                      at once (PSS divides the
 *                                                      shared pages among them)
 *   pg_client latency  CONNINFO MODE WARM N SETTLE_US OUT
 *                                                      hand-off latency: from
 *                                                      the holder's unlock sent
 *                                                      to the waiter's lock
 *                                                      returning (two
 *                                                      connections, roles swap)
 *   pg_client cron     CONNINFO MODE WARM N OUT        a cron job: connect,
 *                                                      lock, unlock, disconnect
 *                                                      (MODE connect: only
 *                                                      connect and disconnect;
 *                                                      load: connect, SELECT
 *                                                      zk_session(), which
 *                                                      loads zklock and opens
 *                                                      no session)
 *
 * MODE: zklock   SELECT zk_lock($1) ; SELECT zk_unlock($1)
 *       zkxact   BEGIN ; SELECT zk_xact_lock($1) ; COMMIT
 *       advisory SELECT pg_advisory_lock($1) ; SELECT pg_advisory_unlock($1)
 *       semaphore SELECT zk_semaphore($1, 1) ; SELECT zk_semaphore_release($1)
 *       zkset    SELECT zk_lock(ARRAY[$1-1 .. $1-5]) ; SELECT zk_unlock(ARRAY[...])
 *       zkfive   the same five names, five zk_lock calls in one statement;
 *                five zk_unlock calls in another
 * Lock and unlock are prepared statements.
 *
 * Writes OUT.lat (microseconds, one per line: the cycle, or for handoff the
 * acquire) and OUT.sum (key=value lines).  herd writes OUT.ready once all
 * waiters wait, then waits (bounded) for the file OUT.go before releasing.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <libpq-fe.h>

#include "proc_cpu.h"

enum Mode
{
	M_ZKLOCK, M_ZKXACT, M_ADVISORY, M_ZKSEM, M_ZKSET, M_ZKFIVE
};

typedef struct Samples
{
	long	   *v;
	long		n;
	long		cap;
} Samples;

typedef struct Client
{
	int			idx;
	PGconn	   *conn;
	char		key[64];
	Samples		lat;
	long		cycles;
	double		t_lock,
				t_unlock,
				t_begin,
				t_commit;		/* summed step times, seconds */
	double		finish;
	double		cpu0;			/* its backend's CPU time when timing began */
	char		err[512];
	int			steps;			/* cycle mode: keep per-step samples */
	const char *lname;			/* its prepared statements: L and U, or */
	const char *uname;			/* others on a connection it shares */
	Samples		s_lock,
				s_unlock,
				s_begin,
				s_commit;
} Client;

static const char *g_conninfo;
static enum Mode g_mode;
static double g_end;
static int g_handoff;
static pthread_barrier_t g_ready;
static pthread_barrier_t g_go;

static void
die(const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	fprintf(stderr, "pg_client: ");
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

static PGconn *
connect_db(void)
{
	PGconn	   *conn = PQconnectdb(g_conninfo);

	if (PQstatus(conn) != CONNECTION_OK)
		die("connection failed: %s", PQerrorMessage(conn));
	return conn;
}

/* Run a simple statement; 0 on success, message in c->err otherwise. */
static int
simple(Client *c, const char *sql)
{
	PGresult   *r = PQexec(c->conn, sql);
	int			ok = PQresultStatus(r) == PGRES_COMMAND_OK ||
		PQresultStatus(r) == PGRES_TUPLES_OK;

	if (!ok)
		snprintf(c->err, sizeof(c->err), "%s: %s", sql,
				 PQerrorMessage(c->conn));
	PQclear(r);
	return ok ? 0 : -1;
}

static int
prepared(Client *c, const char *stmt)
{
	const char *params[1] = {c->key};
	PGresult   *r = PQexecPrepared(c->conn, stmt, 1, params, NULL, NULL, 0);
	int			ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 &&
		!PQgetisnull(r, 0, 0);

	/* unlock must report that it released something */
	if (ok && stmt[0] == 'U' && strcmp(PQgetvalue(r, 0, 0), "t") != 0)
		ok = 0;
	if (!ok)
		snprintf(c->err, sizeof(c->err), "%s(%s): %s %s", stmt, c->key,
				 PQresStatus(PQresultStatus(r)), PQerrorMessage(c->conn));
	PQclear(r);
	return ok ? 0 : -1;
}

static void
prepare_all(Client *c)
{
	const char *lock_sql,
			   *unlock_sql = NULL;
	PGresult   *r;

	switch (g_mode)
	{
		case M_ZKLOCK:
			lock_sql = "SELECT zk_lock($1::text)";
			unlock_sql = "SELECT zk_unlock($1::text)";
			break;
		case M_ZKXACT:
			lock_sql = "SELECT zk_xact_lock($1::text)";
			break;
		case M_ZKSEM:
			lock_sql = "SELECT zk_semaphore($1::text, 1)";
			unlock_sql = "SELECT zk_semaphore_release($1::text)";
			break;
		case M_ZKSET:			/* five names as one set */
			lock_sql = "SELECT zk_lock(ARRAY[$1::text || '-1', $1 || '-2', "
				"$1 || '-3', $1 || '-4', $1 || '-5'])";
			unlock_sql = "SELECT zk_unlock(ARRAY[$1::text || '-1', $1 || '-2', "
				"$1 || '-3', $1 || '-4', $1 || '-5'])";
			break;
		case M_ZKFIVE:			/* the same five, one zk_lock call each */
			lock_sql = "SELECT zk_lock($1::text || '-1'), zk_lock($1 || '-2'), "
				"zk_lock($1 || '-3'), zk_lock($1 || '-4'), zk_lock($1 || '-5')";
			unlock_sql = "SELECT zk_unlock($1::text || '-1') AND zk_unlock($1 || '-2') "
				"AND zk_unlock($1 || '-3') AND zk_unlock($1 || '-4') "
				"AND zk_unlock($1 || '-5')";
			break;
		default:
			lock_sql = "SELECT pg_advisory_lock($1::bigint)";
			unlock_sql = "SELECT pg_advisory_unlock($1::bigint)";
			break;
	}
	if (!c->lname)
	{
		c->lname = "L";
		c->uname = "U";
	}
	r = PQprepare(c->conn, c->lname, lock_sql, 1, NULL);
	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		die("prepare: %s", PQerrorMessage(c->conn));
	PQclear(r);
	if (unlock_sql)
	{
		r = PQprepare(c->conn, c->uname, unlock_sql, 1, NULL);
		if (PQresultStatus(r) != PGRES_COMMAND_OK)
			die("prepare: %s", PQerrorMessage(c->conn));
		PQclear(r);
	}
}

/*
 * One lock/unlock cycle; *acquire gets the time the lock statement took.
 * 0 on success.
 */
static int
cycle(Client *c, double *acquire)
{
	double		t0 = now_s(),
				t1,
				t2;

	if (g_mode == M_ZKXACT)
	{
		if (simple(c, "BEGIN") != 0)
			return -1;
		t1 = now_s();
		c->t_begin += t1 - t0;
		if (prepared(c, c->lname) != 0)
			return -1;
		t2 = now_s();
		*acquire = t2 - t1;
		c->t_lock += t2 - t1;
		if (simple(c, "COMMIT") != 0)
			return -1;
		c->t_commit += now_s() - t2;
		if (c->steps)
		{
			add_sample(&c->s_begin, t1 - t0);
			add_sample(&c->s_lock, t2 - t1);
			add_sample(&c->s_commit, now_s() - t2);
		}
		return 0;
	}
	if (prepared(c, c->lname) != 0)
		return -1;
	t1 = now_s();
	*acquire = t1 - t0;
	c->t_lock += t1 - t0;
	if (prepared(c, c->uname) != 0)
		return -1;
	c->t_unlock += now_s() - t1;
	if (c->steps)
	{
		add_sample(&c->s_lock, t1 - t0);
		add_sample(&c->s_unlock, now_s() - t1);
	}
	return 0;
}

static int
cmp_long(const void *a, const void *b)
{
	long		x = *(const long *) a,
				y = *(const long *) b;

	return x < y ? -1 : x > y;
}

static long
median(Samples *s)
{
	if (s->n == 0)
		return 0;
	qsort(s->v, s->n, sizeof(long), cmp_long);
	return s->v[(s->n - 1) / 2];
}

static void
write_results(const char *out, Client *cs, int n, double seconds)
{
	char		path[1024];
	FILE	   *f;
	long		cycles = 0;
	double		tl = 0,
				tu = 0,
				tb = 0,
				tc = 0;

	snprintf(path, sizeof(path), "%s.lat", out);
	if (!(f = fopen(path, "w")))
		die("cannot write %s", path);
	for (int i = 0; i < n; i++)
	{
		cycles += cs[i].cycles;
		tl += cs[i].t_lock;
		tu += cs[i].t_unlock;
		tb += cs[i].t_begin;
		tc += cs[i].t_commit;
		for (long j = 0; j < cs[i].lat.n; j++)
			fprintf(f, "%ld\n", cs[i].lat.v[j]);
	}
	fclose(f);
	snprintf(path, sizeof(path), "%s.sum", out);
	if (!(f = fopen(path, "w")))
		die("cannot write %s", path);
	fprintf(f, "cycles=%ld\nseconds=%.6f\nclients=%d\n", cycles, seconds, n);
	if (cycles > 0)
		fprintf(f, "mean_lock_us=%.1f\nmean_unlock_us=%.1f\n"
				"mean_begin_us=%.1f\nmean_commit_us=%.1f\n",
				tl / cycles * 1e6, tu / cycles * 1e6,
				tb / cycles * 1e6, tc / cycles * 1e6);
	fclose(f);
}

static void
set_key(Client *c, const char *base, int i)
{
	if (g_mode == M_ADVISORY)
		snprintf(c->key, sizeof(c->key), "%d", i < 0 ? 1 : 100 + i);
	else if (i < 0)
		snprintf(c->key, sizeof(c->key), "%s", base);
	else
		snprintf(c->key, sizeof(c->key), "%s%d", base, i);
}

static int
run_cycle(int warm, int n, const char *out)
{
	Client		c = {0};
	double		t_all = 0,
				acq;

	c.conn = connect_db();
	prepare_all(&c);
	set_key(&c, "bench-u", -1);
	for (int i = 0; i < warm + n; i++)
	{
		double		t0;

		if (i == warm)
		{
			c.t_lock = c.t_unlock = c.t_begin = c.t_commit = 0;
			c.steps = 1;
			t_all = now_s();
		}
		t0 = now_s();
		if (cycle(&c, &acq) != 0)
			die("%s", c.err);
		if (i >= warm)
		{
			add_sample(&c.lat, now_s() - t0);
			c.cycles++;
		}
	}
	write_results(out, &c, 1, now_s() - t_all);
	{
		char		path[1024];
		FILE	   *f;

		snprintf(path, sizeof(path), "%s.sum", out);
		if (!(f = fopen(path, "a")))
			die("cannot write %s", path);
		fprintf(f, "p50_lock_us=%ld\np50_unlock_us=%ld\np50_begin_us=%ld\n"
				"p50_commit_us=%ld\n", median(&c.s_lock), median(&c.s_unlock),
				median(&c.s_begin), median(&c.s_commit));
		fclose(f);
	}
	PQfinish(c.conn);
	return 0;
}

/*
 * Two contenders on one lock each, on connections of their own, one cycle
 * each in turn (the order swapped every other pair): both see the same
 * moments of the machine, so the ratio of their p50s is the cost of the
 * difference, not the drift between two runs.  OUT_A and OUT_B are written
 * as a cycle run's; OUT_B.sum also gets the median of the per-pair ratios
 * B / A (pair_ratio_p50).  CONNINFO_B "=" runs B on A's connection (its
 * own prepared statements): the same backend and ZooKeeper session, so
 * only the statements differ.
 */
static int
run_pair(const char *conninfo[2], const enum Mode modes[2], int warm, int n,
		 const char *out[2])
{
	Client		c[2] = {{0}};
	double		acq,
				last[2] = {0, 0},
				t_sum[2] = {0, 0};
	double	   *ratio = calloc(n > 0 ? n : 1, sizeof(double));
	int			nratio = 0;

	for (int k = 0; k < 2; k++)
	{
		g_conninfo = conninfo[k];
		g_mode = modes[k];
		if (k == 1 && strcmp(conninfo[1], "=") == 0)
		{
			c[1].conn = c[0].conn;
			c[1].lname = "LB";
			c[1].uname = "UB";
		}
		else
			c[k].conn = connect_db();
		prepare_all(&c[k]);
		set_key(&c[k], k == 0 ? "bench-pa" : "bench-pb", -1);
	}
	/*
	 * Two backends: the client and both on one CPU (they take turns: each
	 * waits for the other's answer), so that neither side of the pair is
	 * the one the scheduler happened to put beside a busy process.  One
	 * backend for both is compared with itself and stays where it is.
	 */
	if (c[1].conn != c[0].conn)
	{
		cpu_set_t	one;

		CPU_ZERO(&one);
		CPU_SET(0, &one);
		if (sched_setaffinity(0, sizeof(one), &one) != 0 ||
			sched_setaffinity(PQbackendPID(c[0].conn), sizeof(one), &one) != 0 ||
			sched_setaffinity(PQbackendPID(c[1].conn), sizeof(one), &one) != 0)
			die("pair: cannot pin to CPU 0: %s", strerror(errno));
	}
	for (int i = 0; i < warm + n; i++)
	{
		for (int j = 0; j < 2; j++)
		{
			int			k = i % 2 ? 1 - j : j;
			double		t0;

			g_mode = modes[k];
			t0 = now_s();
			if (cycle(&c[k], &acq) != 0)
				die("%s", c[k].err);
			last[k] = now_s() - t0;
			if (i >= warm)
			{
				add_sample(&c[k].lat, last[k]);
				c[k].cycles++;
				t_sum[k] += last[k];
			}
		}
		if (i >= warm && last[0] > 0)
			ratio[nratio++] = last[1] / last[0];
	}
	for (int k = 0; k < 2; k++)
	{
		write_results(out[k], &c[k], 1, t_sum[k]);
		if (k == 0 || c[1].conn != c[0].conn)
			PQfinish(c[k].conn);
	}
	{
		char		path[1024];
		FILE	   *f;
		double		tmp;

		/* the median ratio: sort the n ratios (n is a few hundred) */
		for (int a = 1; a < nratio; a++)
			for (int b = a; b > 0 && ratio[b - 1] > ratio[b]; b--)
			{
				tmp = ratio[b];
				ratio[b] = ratio[b - 1];
				ratio[b - 1] = tmp;
			}
		snprintf(path, sizeof(path), "%s.sum", out[1]);
		if (!(f = fopen(path, "a")))
			die("cannot write %s", path);
		fprintf(f, "pair_ratio_p50=%.4f\n",
				nratio ? ratio[(nratio - 1) / 2] : 0.0);
		fclose(f);
	}
	free(ratio);
	return 0;
}

static void *
client_main(void *arg)
{
	Client	   *c = arg;

	pthread_barrier_wait(&g_ready);
	pthread_barrier_wait(&g_go);
	while (now_s() < g_end)
	{
		double		t0 = now_s(),
					acq;

		if (cycle(c, &acq) != 0)
			break;
		add_sample(&c->lat, g_handoff ? acq : now_s() - t0);
		c->cycles++;
	}
	c->finish = now_s();
	return NULL;
}

static int
run_multi(int clients, double secs, const char *out, int handoff)
{
	Client	   *cs = calloc(clients, sizeof(Client));
	pthread_t  *th = calloc(clients, sizeof(pthread_t));
	double		start,
				last = 0,
				self0,
				self1,
				backends = 0;
	long		cycles = 0;

	g_handoff = handoff;
	/* Connect (and open each backend's ZooKeeper session) before timing. */
	for (int i = 0; i < clients; i++)
	{
		cs[i].idx = i;
		cs[i].conn = connect_db();
		prepare_all(&cs[i]);
		set_key(&cs[i], handoff ? "bench-h" : "bench-d", handoff ? -1 : i);
		if (g_mode != M_ADVISORY)
		{
			/* a first cycle on a private name: session, directories */
			char		saved[64];
			double		acq;

			memcpy(saved, cs[i].key, sizeof(saved));
			snprintf(cs[i].key, sizeof(cs[i].key), "bench-warm%d", i);
			if (cycle(&cs[i], &acq) != 0)
				die("warm-up: %s", cs[i].err);
			memcpy(cs[i].key, saved, sizeof(saved));
			cs[i].t_lock = cs[i].t_unlock = cs[i].t_begin = cs[i].t_commit = 0;
		}
	}
	pthread_barrier_init(&g_ready, NULL, clients + 1);
	pthread_barrier_init(&g_go, NULL, clients + 1);
	for (int i = 0; i < clients; i++)
		pthread_create(&th[i], NULL, client_main, &cs[i]);
	pthread_barrier_wait(&g_ready);
	/* the CPU the backends and this driver use while timed */
	for (int i = 0; i < clients; i++)
		cs[i].cpu0 = cpu_us(PQbackendPID(cs[i].conn));
	self0 = cpu_us(0);
	start = now_s();
	g_end = start + secs;
	pthread_barrier_wait(&g_go);
	for (int i = 0; i < clients; i++)
	{
		pthread_join(th[i], NULL);
		if (cs[i].err[0])
			die("client %d: %s", i, cs[i].err);
		if (cs[i].finish > last)
			last = cs[i].finish;
	}
	self1 = cpu_us(0);
	for (int i = 0; i < clients; i++)
	{
		double		c1 = cpu_us(PQbackendPID(cs[i].conn));

		if (c1 < 0 || cs[i].cpu0 < 0)
			backends = -1;
		else if (backends >= 0)
			backends += c1 - cs[i].cpu0;
		cycles += cs[i].cycles;
	}
	write_results(out, cs, clients, last - start);
	if (cycles > 0 && backends >= 0 && self0 >= 0)
	{
		char		path[1024];
		FILE	   *f;

		snprintf(path, sizeof(path), "%s.sum", out);
		if (!(f = fopen(path, "a")))
			die("cannot write %s", path);
		fprintf(f, "cpu_backends_us=%.1f\ncpu_driver_us=%.1f\n",
				backends / cycles, (self1 - self0) / cycles);
		fclose(f);
	}
	for (int i = 0; i < clients; i++)
		PQfinish(cs[i].conn);
	return 0;
}

/* ---- herd ---- */

static int
scalar_int(PGconn *conn, const char *sql)
{
	PGresult   *r = PQexec(conn, sql);
	int			v;

	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1)
		die("%s: %s", sql, PQerrorMessage(conn));
	v = atoi(PQgetvalue(r, 0, 0));
	PQclear(r);
	return v;
}

static void
touch(const char *out, const char *suffix)
{
	char		path[1024];
	FILE	   *f;

	snprintf(path, sizeof(path), "%s.%s", out, suffix);
	if (!(f = fopen(path, "w")))
		die("cannot write %s", path);
	fclose(f);
}

static int
exists(const char *out, const char *suffix)
{
	char		path[1024];

	snprintf(path, sizeof(path), "%s.%s", out, suffix);
	return access(path, F_OK) == 0;
}

/* Read every available result of a busy connection; 1 once it is idle. */
static int
drain(PGconn *conn, int *failed)
{
	PGresult   *r;

	if (!PQconsumeInput(conn))
	{
		*failed = 1;
		return 1;
	}
	while (!PQisBusy(conn))
	{
		r = PQgetResult(conn);
		if (r == NULL)
			return 1;
		if (PQresultStatus(r) != PGRES_TUPLES_OK)
		{
			fprintf(stderr, "pg_client: herd waiter: %s", PQerrorMessage(conn));
			*failed = 1;
		}
		PQclear(r);
	}
	return 0;
}

static int
run_herd(int n, const char *out)
{
	PGconn	   *holder = connect_db();
	PGconn	  **w = calloc(n, sizeof(PGconn *));
	int		   *state = calloc(n, sizeof(int));	/* 0 lock sent, 1 unlock sent, 2 done */
	struct pollfd *pfd = calloc(n, sizeof(struct pollfd));
	int			failed = 0,
				left = n,
				waiting = 0,
				notified = -1,
				notified_before;
	double		t0,
				deadline,
				t_conn = now_s();
	char		path[1024];
	FILE	   *f;
	PGresult   *r;

	r = PQexec(holder, "SELECT zk_lock('bench-herd')");
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		die("holder: %s", PQerrorMessage(holder));
	PQclear(r);
	for (int i = 0; i < n; i++)
	{
		w[i] = connect_db();
		if (!PQsendQuery(w[i], "SELECT zk_lock('bench-herd')"))
			die("send: %s", PQerrorMessage(w[i]));
	}
	t_conn = now_s() - t_conn;
	/* every waiter is parked in the lock wait (bounded) */
	deadline = now_s() + 180;
	while (now_s() < deadline)
	{
		waiting = scalar_int(holder,
							 "SELECT count(*) FROM pg_stat_activity "
							 "WHERE wait_event_type = 'Extension' "
							 "AND query = 'SELECT zk_lock(''bench-herd'')'");
		if (waiting == n)
			break;
		usleep(100 * 1000);
	}
	if (waiting != n)
		die("only %d of %d waiters queued within 180 s", waiting, n);
	touch(out, "ready");
	deadline = now_s() + 120;
	while (!exists(out, "go") && now_s() < deadline)
		usleep(20 * 1000);
	if (!exists(out, "go"))
		die("no go signal");

	notified_before = scalar_int(holder, "SELECT notifications FROM zk_session()");
	t0 = now_s();
	r = PQexec(holder, "SELECT zk_unlock('bench-herd')");
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		die("holder unlock: %s", PQerrorMessage(holder));
	PQclear(r);
	deadline = now_s() + 120;
	while (left > 0 && !failed && now_s() < deadline)
	{
		int			np = 0;
		int		   *map = calloc(n, sizeof(int));

		for (int i = 0; i < n; i++)
			if (state[i] < 2)
			{
				pfd[np].fd = PQsocket(w[i]);
				pfd[np].events = POLLIN;
				pfd[np].revents = 0;
				map[np++] = i;
			}
		if (poll(pfd, np, 1000) < 0 && errno != EINTR)
			die("poll: %s", strerror(errno));
		for (int k = 0; k < np; k++)
		{
			int			i = map[k];

			if (!(pfd[k].revents & (POLLIN | POLLERR | POLLHUP)))
				continue;
			if (!drain(w[i], &failed))
				continue;
			if (state[i] == 0)
			{
				/* got the lock: hand it on at once */
				if (!PQsendQuery(w[i], "SELECT zk_unlock('bench-herd')"))
					failed = 1;
				state[i] = 1;
			}
			else
			{
				state[i] = 2;
				left--;
			}
		}
		free(map);
	}
	/*
	 * What the sessions were notified of during the hand-offs, each by its
	 * own count (zk_session().notifications: its waits' watches on other
	 * sessions' nodes), so that a releasing backend's notification of its
	 * own node is not counted; the waiters' counts were 0 before (nothing
	 * of theirs fired while they queued), the holder's is read before too.
	 */
	if (left == 0 && !failed)
	{
		notified = -notified_before;
		for (int i = 0; i < n; i++)
			notified += scalar_int(w[i], "SELECT notifications FROM zk_session()");
		notified += scalar_int(holder, "SELECT notifications FROM zk_session()");
	}
	snprintf(path, sizeof(path), "%s.sum", out);
	if (!(f = fopen(path, "w")))
		die("cannot write %s", path);
	fprintf(f, "waiters=%d\nacquired=%d\nseconds=%.6f\nconnect_seconds=%.3f\nnotified=%d\n",
			n, n - left, now_s() - t0, t_conn, notified);
	fclose(f);
	for (int i = 0; i < n; i++)
		PQfinish(w[i]);
	PQfinish(holder);
	if (failed || left > 0)
		die("herd: %d of %d waiters did not finish", left, n);
	return 0;
}

/* ---- memory ---- */

typedef struct ProcMem
{
	long		rss,
				anon,
				file,
				shmem,
				threads,
				pss,
				priv;			/* Private_Clean + Private_Dirty (USS) */
} ProcMem;

static ProcMem
proc_mem(int pid)
{
	char		path[64],
				line[256];
	FILE	   *f;
	ProcMem		m = {-1, -1, -1, -1, -1, -1, -1};
	long		pc = 0,
				pd = 0;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	if (!(f = fopen(path, "r")))
		die("cannot read %s (run as root)", path);
	while (fgets(line, sizeof(line), f))
	{
		sscanf(line, "VmRSS: %ld", &m.rss);
		sscanf(line, "RssAnon: %ld", &m.anon);
		sscanf(line, "RssFile: %ld", &m.file);
		sscanf(line, "RssShmem: %ld", &m.shmem);
		sscanf(line, "Threads: %ld", &m.threads);
	}
	fclose(f);
	snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", pid);
	if ((f = fopen(path, "r")) != NULL)
	{
		while (fgets(line, sizeof(line), f))
		{
			sscanf(line, "Pss: %ld", &m.pss);
			sscanf(line, "Private_Clean: %ld", &pc);
			sscanf(line, "Private_Dirty: %ld", &pd);
		}
		fclose(f);
		m.priv = pc + pd;
	}
	return m;
}

static void
mem_one(FILE *f, const char *tag, int i, const char *lock_sql,
		const char *unlock_sql)
{
	PGconn	   *conn = connect_db();
	int			pid = scalar_int(conn, "SELECT pg_backend_pid()");
	ProcMem		a,
				b;
	PGresult   *r;

	PQclear(PQexec(conn, "SELECT 1"));
	usleep(200 * 1000);
	a = proc_mem(pid);
	r = PQexec(conn, lock_sql);
	if (PQresultStatus(r) != PGRES_TUPLES_OK ||
		strcmp(PQgetvalue(r, 0, 0), "t") != 0)
		die("%s: %s", lock_sql, PQerrorMessage(conn));
	PQclear(r);
	r = PQexec(conn, unlock_sql);
	if (PQresultStatus(r) != PGRES_TUPLES_OK ||
		strcmp(PQgetvalue(r, 0, 0), "t") != 0)
		die("%s: %s", unlock_sql, PQerrorMessage(conn));
	PQclear(r);
	usleep(200 * 1000);			/* let the ZooKeeper threads settle */
	b = proc_mem(pid);
	fprintf(f, "%s%d=pid:%d rss:%ld:%ld anon:%ld:%ld file:%ld:%ld shmem:%ld:%ld "
			"pss:%ld:%ld private:%ld:%ld threads:%ld:%ld\n",
			tag, i, pid, a.rss, b.rss, a.anon, b.anon, a.file, b.file,
			a.shmem, b.shmem, a.pss, b.pss, a.priv, b.priv, a.threads, b.threads);
	PQfinish(conn);
}

static int
run_mem(int n, const char *out)
{
	char		path[1024];
	FILE	   *f;

	snprintf(path, sizeof(path), "%s.sum", out);
	if (!(f = fopen(path, "w")))
		die("cannot write %s", path);
	for (int i = 0; i < n; i++)
		mem_one(f, "zk", i, "SELECT zk_try_lock('bench-mem')",
				"SELECT zk_unlock('bench-mem')");
	/* control: the same measurement with PostgreSQL's own advisory lock */
	for (int i = 0; i < n; i++)
		mem_one(f, "adv", i, "SELECT pg_try_advisory_lock(4242)",
				"SELECT pg_advisory_unlock(4242)");
	fclose(f);
	return 0;
}

/*
 * n backends that all use zklock at once: each measured after SELECT 1
 * and again after zk_try_lock + zk_unlock, while the others are connected
 * and have used it too, so that the pages they share (zklock.so, the
 * client library) divide among them in PSS as they do on a busy server.
 */
static int
run_mem_all(int n, const char *out)
{
	char		path[1024];
	FILE	   *f;
	PGconn	  **conns = calloc(n, sizeof(PGconn *));
	int		   *pids = calloc(n, sizeof(int));
	ProcMem    *a = calloc(n, sizeof(ProcMem));

	snprintf(path, sizeof(path), "%s.sum", out);
	if (!(f = fopen(path, "w")) || !conns || !pids || !a)
		die("cannot write %s", path);
	for (int i = 0; i < n; i++)
	{
		conns[i] = connect_db();
		pids[i] = scalar_int(conns[i], "SELECT pg_backend_pid()");
		PQclear(PQexec(conns[i], "SELECT 1"));
	}
	usleep(200 * 1000);
	for (int i = 0; i < n; i++)
		a[i] = proc_mem(pids[i]);
	for (int i = 0; i < n; i++)
	{
		char		sql[128];
		PGresult   *r;

		snprintf(sql, sizeof(sql),
				 "SELECT zk_try_lock('bench-memall-%d') AND zk_unlock('bench-memall-%d')",
				 i, i);
		r = PQexec(conns[i], sql);
		if (PQresultStatus(r) != PGRES_TUPLES_OK ||
			strcmp(PQgetvalue(r, 0, 0), "t") != 0)
			die("%s: %s", sql, PQerrorMessage(conns[i]));
		PQclear(r);
	}
	usleep(500 * 1000);			/* let the ZooKeeper threads settle */
	for (int i = 0; i < n; i++)
	{
		ProcMem		b = proc_mem(pids[i]);

		fprintf(f, "zk%d=pid:%d rss:%ld:%ld anon:%ld:%ld file:%ld:%ld shmem:%ld:%ld "
				"pss:%ld:%ld private:%ld:%ld threads:%ld:%ld\n",
				i, pids[i], a[i].rss, b.rss, a[i].anon, b.anon, a[i].file, b.file,
				a[i].shmem, b.shmem, a[i].pss, b.pss, a[i].priv, b.priv,
				a[i].threads, b.threads);
	}
	for (int i = 0; i < n; i++)
		PQfinish(conns[i]);
	fclose(f);
	return 0;
}

/* Read a busy connection's result; 0 if it is one row (and "t" for U). */
static int
collect(Client *c, const char *stmt)
{
	PGresult   *r;
	int			ok = 1;
	int			rows = 0;

	while ((r = PQgetResult(c->conn)) != NULL)
	{
		if (PQresultStatus(r) != PGRES_TUPLES_OK)
			ok = 0;
		else if (stmt[0] == 'U' && strcmp(PQgetvalue(r, 0, 0), "t") != 0)
			ok = 0;
		rows++;
		PQclear(r);
	}
	if (!ok || rows != 1)
		snprintf(c->err, sizeof(c->err), "%s(%s): %s", stmt, c->key,
				 PQerrorMessage(c->conn));
	return ok && rows == 1 ? 0 : -1;
}

static void
send_prepared(Client *c, const char *stmt)
{
	const char *params[1] = {c->key};

	if (!PQsendQueryPrepared(c->conn, stmt, 1, params, NULL, NULL, 0))
		die("send %s: %s", stmt, PQerrorMessage(c->conn));
}

/*
 * Hand-off latency.  The holder holds; the waiter sends its lock and
 * queues, then SETTLE_US more for its watch to be set; the sample runs from
 * the holder's unlock sent to the waiter's lock result.  Then the roles
 * swap.
 */
static int
run_latency(int warm, int n, long settle_us, const char *out)
{
	Client		a = {0},
				b = {0};
	Client	   *hold = &a,
			   *wait = &b;
	const char *wait_type = g_mode == M_ADVISORY ? "Lock" : "Extension";
	char		queued_a[200],
				queued_b[200];
	double		t_all = 0;

	if (g_mode == M_ZKXACT)
		die("latency: use zklock, semaphore or advisory");
	a.conn = connect_db();
	b.conn = connect_db();
	prepare_all(&a);
	prepare_all(&b);
	set_key(&a, "bench-lat", -1);
	set_key(&b, "bench-lat", -1);

	/*
	 * Queued: the waiter's backend waits (seen in pg_stat_activity, with no
	 * ZooKeeper request from the holder); SETTLE_US then covers the rest of
	 * its enqueue (create and listing, the watch).
	 */
	snprintf(queued_a, sizeof(queued_a),
			 "SELECT count(*) FROM pg_stat_activity WHERE pid = %d AND wait_event_type = '%s'",
			 scalar_int(a.conn, "SELECT pg_backend_pid()"), wait_type);
	snprintf(queued_b, sizeof(queued_b),
			 "SELECT count(*) FROM pg_stat_activity WHERE pid = %d AND wait_event_type = '%s'",
			 scalar_int(b.conn, "SELECT pg_backend_pid()"), wait_type);
	if (prepared(hold, "L") != 0)
		die("%s", hold->err);
	for (int i = 0; i < warm + n; i++)
	{
		double		t0,
					t1,
					limit = now_s() + 10;
		Client	   *t;

		if (i == warm)
			t_all = now_s();
		send_prepared(wait, "L");
		while (scalar_int(hold->conn, wait == &a ? queued_a : queued_b) != 1)
		{
			if (now_s() > limit)
				die("latency: the waiter did not queue within 10 s");
			usleep(200);
		}
		usleep((useconds_t) settle_us);
		t0 = now_s();
		send_prepared(hold, "U");
		if (collect(wait, "L") != 0)
			die("%s", wait->err);
		t1 = now_s();
		if (collect(hold, "U") != 0)
			die("%s", hold->err);
		if (i >= warm)
		{
			add_sample(&a.lat, t1 - t0);
			a.cycles++;
		}
		t = hold;
		hold = wait;
		wait = t;
	}
	if (prepared(hold, "U") != 0)
		die("%s", hold->err);
	write_results(out, &a, 1, now_s() - t_all);
	PQfinish(a.conn);
	PQfinish(b.conn);
	return 0;
}

/* A cron job's pattern: every sample a new connection. */
static int
run_cron(const char *what, int warm, int n, const char *out)
{
	Client		acc = {0};
	const char *lock_sql = NULL,
			   *unlock_sql = NULL;
	double		t_all = 0;

	if (strcmp(what, "zklock") == 0)
	{
		lock_sql = "SELECT zk_lock('bench-cron')";
		unlock_sql = "SELECT zk_unlock('bench-cron')";
	}
	else if (strcmp(what, "advisory") == 0)
	{
		lock_sql = "SELECT pg_advisory_lock(4243)";
		unlock_sql = "SELECT pg_advisory_unlock(4243)";
	}
	else if (strcmp(what, "load") == 0)
		lock_sql = "SELECT state FROM zk_session()";	/* loads zklock, opens nothing */
	else if (strcmp(what, "connect") != 0)
		die("cron: unknown mode %s", what);
	for (int i = 0; i < warm + n; i++)
	{
		Client		c = {0};
		double		t0;

		double		t1,
					t2,
					t3;

		if (i == warm)
			t_all = now_s();
		t0 = now_s();
		c.conn = connect_db();
		t1 = now_s();
		if (lock_sql && simple(&c, lock_sql) != 0)
			die("%s", c.err);
		t2 = now_s();
		if (unlock_sql && simple(&c, unlock_sql) != 0)
			die("%s", c.err);
		t3 = now_s();
		PQfinish(c.conn);
		if (i >= warm)
		{
			add_sample(&acc.lat, now_s() - t0);
			acc.cycles++;
			/* the breakdown: connect, first lock, unlock, disconnect */
			acc.t_begin += t1 - t0;
			acc.t_lock += t2 - t1;
			acc.t_unlock += t3 - t2;
			acc.t_commit += now_s() - t3;
		}
	}
	write_results(out, &acc, 1, now_s() - t_all);
	return 0;
}

static enum Mode
parse_mode(const char *s)
{
	if (strcmp(s, "zklock") == 0)
		return M_ZKLOCK;
	if (strcmp(s, "zkxact") == 0)
		return M_ZKXACT;
	if (strcmp(s, "advisory") == 0)
		return M_ADVISORY;
	if (strcmp(s, "semaphore") == 0)
		return M_ZKSEM;
	if (strcmp(s, "zkset") == 0)
		return M_ZKSET;
	if (strcmp(s, "zkfive") == 0)
		return M_ZKFIVE;
	die("unknown mode %s", s);
	return M_ZKLOCK;
}

int
main(int argc, char **argv)
{
	if (argc < 5)
	{
		fprintf(stderr,
				"usage: pg_client cycle CONNINFO MODE WARM N OUT\n"
				"       pg_client handoff|distinct CONNINFO MODE CLIENTS SECONDS OUT\n"
				"       pg_client herd CONNINFO WAITERS OUT\n"
				"       pg_client mem|memall CONNINFO BACKENDS OUT\n"
				"       pg_client latency CONNINFO MODE WARM N SETTLE_US OUT\n"
				"       pg_client cron CONNINFO zklock|advisory|connect WARM N OUT\n");
		return 2;
	}
	g_conninfo = argv[2];
	if (strcmp(argv[1], "herd") == 0)
		return run_herd(atoi(argv[3]), argv[4]);
	if (strcmp(argv[1], "mem") == 0)
		return run_mem(atoi(argv[3]), argv[4]);
	if (strcmp(argv[1], "memall") == 0 && argc == 5)
		return run_mem_all(atoi(argv[3]), argv[4]);
	if (strcmp(argv[1], "cron") == 0 && argc == 7)
		return run_cron(argv[3], atoi(argv[4]), atoi(argv[5]), argv[6]);
	if (strcmp(argv[1], "latency") == 0 && argc == 8)
	{
		g_mode = parse_mode(argv[3]);
		return run_latency(atoi(argv[4]), atoi(argv[5]), atol(argv[6]), argv[7]);
	}
	if (strcmp(argv[1], "pair") == 0 && argc == 10)
	{
		const char *ci[2] = {argv[2], argv[4]};
		const enum Mode modes[2] = {parse_mode(argv[3]), parse_mode(argv[5])};
		const char *outs[2] = {argv[8], argv[9]};

		return run_pair(ci, modes, atoi(argv[6]), atoi(argv[7]), outs);
	}
	if (argc != 7)
		die("wrong number of arguments");
	g_mode = parse_mode(argv[3]);
	if (strcmp(argv[1], "cycle") == 0)
		return run_cycle(atoi(argv[4]), atoi(argv[5]), argv[6]);
	if (strcmp(argv[1], "handoff") == 0 || strcmp(argv[1], "distinct") == 0)
		return run_multi(atoi(argv[4]), atof(argv[5]), argv[6],
						 strcmp(argv[1], "handoff") == 0);
	die("unknown command %s", argv[1]);
	return 2;
}
