/*-------------------------------------------------------------------------
 *
 * session_lease.c
 *	  The lease: when the ensemble last answered this session, and the
 *	  thread that keeps asking while the session has lock nodes.
 *
 * The server expires a session one negotiated timeout after it last heard
 * from the client.  The client library's own view ("connected") goes stale
 * when the process is frozen (SIGSTOP, swap, a paused VM): its threads were
 * frozen too.  So zklock counts only answers that prove something: the
 * answer to a write, which the leader committed with a quorum while the
 * session was alive (the lock-node create, a delete, and the proof below).
 * The lease starts when such a request was sent; the server cannot have
 * heard from us before that.  A read answered by a follower cut off from
 * the leader proves nothing and does not count.
 *
 * From the lease, for a backend with lock nodes:
 *   - held while the last proof is younger than a third of the timeout,
 *     so that a commit or re-entrant acquire needs no round trip;
 *   - in doubt after that, until a new proof arrives;
 *   - lost, for good, once it is older than the timeout: the ensemble may
 *     have expired the session by then, whatever the library believes.
 *
 * The proof is a multi of version-free check operations on every node of
 * ours: a transaction that changes nothing, fires no watch, and fails if
 * the session expired or a node is gone.  The lease thread sends one every
 * sixth of the timeout while the session has nodes, so an idle holder's
 * lease stays fresh; the main thread sends one itself when it finds the
 * lease stale (zkl_session_prove).
 *
 * Time is read on two clocks and the larger elapsed time wins:
 * CLOCK_BOOTTIME keeps counting while the process is stopped and while the
 * machine is suspended; a virtual machine paused by its hypervisor may
 * resume with its monotonic clocks not counting the pause, and then the
 * wall clock, once time synchronisation steps it, shows the gap.
 *
 * The lease thread is plain C with every signal blocked, like the
 * library's threads (see session_int.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "utils/timestamp.h"

#include "session_int.h"

/* One proof request; freed by its completion. */
typedef struct ZklProof
{
	ZklStamp	sent;
	int			n;
	char	  **paths;
	zoo_op_t   *ops;
	zoo_op_result_t *results;
	bool		done;
	bool		abandoned;		/* the main thread let go */
	int			rc;
} ZklProof;

static pthread_t zkl_lease_thread;
static bool zkl_lease_running = false;
static bool zkl_lease_cv_ready = false;

static int64_t
stamp_clock_ms(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void
zkl_stamp_now(ZklStamp *s)
{
	s->boot_ms = stamp_clock_ms(CLOCK_BOOTTIME);
	s->wall_ms = stamp_clock_ms(CLOCK_REALTIME);
}

/* How long from a to b, by whichever clock counted more. */
static int64_t
stamp_diff_ms(const ZklStamp *a, const ZklStamp *b)
{
	return Max(b->boot_ms - a->boot_ms, b->wall_ms - a->wall_ms);
}

int64_t
zkl_stamp_age_ms(const ZklStamp *s)
{
	ZklStamp	now;

	zkl_stamp_now(&now);
	return stamp_diff_ms(s, &now);
}

/* A third of the negotiated timeout: how long an answer keeps a lock held. */
int
session_lease_window_ms(void)
{
	return Max(zkl_shared.timeout_ms / 3, 1);
}

/* Age of the lease; caller holds mu, and the session has a proof. */
int64_t
session_lease_age_locked(void)
{
	return zkl_stamp_age_ms(&zkl_shared.proof_sent);
}

/*
 * Whether the ensemble may have expired the session by now: it has lock
 * nodes and no proof younger than the timeout.  A pure read; caller holds mu.
 */
bool
session_lease_lost_locked(void)
{
	return zkl_shared.lost ||
		(zkl_shared.nodes != NULL && zkl_shared.have_proof &&
		 session_lease_age_locked() > zkl_shared.timeout_ms);
}

/*
 * A write sent at `sent` was answered.  If the previous proof was older
 * than the timeout by then, the ensemble may have expired and revived the
 * session meanwhile: the locks are lost all the same.  Caller holds mu.
 */
void
session_lease_renew_locked(const ZklStamp *sent)
{
	if (zkl_shared.nodes != NULL && zkl_shared.have_proof &&
		stamp_diff_ms(&zkl_shared.proof_sent, sent) > zkl_shared.timeout_ms)
		session_mark_lost_locked();
	if (!zkl_shared.have_proof ||
		stamp_diff_ms(&zkl_shared.proof_sent, sent) > 0)
		zkl_shared.proof_sent = *sent;
	zkl_shared.have_proof = true;
}

static void
session_proof_free(ZklProof *p)
{
	for (int i = 0; i < p->n; i++)
		free(p->paths[i]);
	free(p->paths);
	free(p->ops);
	free(p->results);
	free(p);
}

/* Mark the node a failed check names as deleted by someone else. */
static void
session_proof_node_gone(ZklProof *p)
{
	for (int i = 0; i < p->n; i++)
	{
		if (p->results[i].err != ZNONODE)
			continue;
		for (ZklNode *n = zkl_shared.nodes; n; n = n->next)
			if (strcmp(n->path, p->paths[i]) == 0)
				n->lost = true;
	}
}

/* A proof's answer, on the completion thread. */
static void
session_proof_done(int rc, const void *data)
{
	ZklProof   *p = (ZklProof *) data;

	pthread_mutex_lock(&zkl_shared.mu);
	zkl_shared.requests_out--;
	zkl_shared.proofs_in_flight--;
	if (rc == ZOK)
		session_lease_renew_locked(&p->sent);
	else if (rc == ZNONODE)
		session_proof_node_gone(p);
	else if (session_rc(rc) == ZKL_RC_SESSION_LOST && rc != ZCLOSING)
		session_mark_lost_locked();
	p->rc = rc;
	p->done = true;
	if (p->abandoned)
		session_proof_free(p);
	pthread_cond_signal(&zkl_shared.lease_cv);
	pthread_mutex_unlock(&zkl_shared.mu);
	session_kick();
}

/*
 * Build and send a proof of every node not known lost.  Caller holds mu,
 * which is released around the send.  Returns the request, or NULL when
 * there is nothing to prove, no memory, or the send failed.
 */
static ZklProof *
session_proof_send_locked(void)
{
	ZklProof   *p = calloc(1, sizeof(ZklProof));
	zhandle_t  *zh = zkl_shared.zh;
	int			n = 0;
	int			rc;

	for (ZklNode *node = zkl_shared.nodes; node; node = node->next)
		n += node->lost ? 0 : 1;
	if (p == NULL || n == 0 || zh == NULL ||
		(p->paths = calloc(n, sizeof(char *))) == NULL ||
		(p->ops = calloc(n, sizeof(zoo_op_t))) == NULL ||
		(p->results = calloc(n, sizeof(zoo_op_result_t))) == NULL)
	{
		if (p)
			session_proof_free(p);
		return NULL;
	}
	for (ZklNode *node = zkl_shared.nodes; node; node = node->next)
	{
		if (node->lost)
			continue;
		if ((p->paths[p->n] = strdup(node->path)) == NULL)
		{
			session_proof_free(p);
			return NULL;
		}
		zoo_check_op_init(&p->ops[p->n], p->paths[p->n], -1);
		p->n++;
	}
	zkl_stamp_now(&p->sent);
	zkl_shared.requests_out++;
	zkl_shared.proofs_in_flight++;
	pthread_mutex_unlock(&zkl_shared.mu);
	rc = zoo_amulti(zh, p->n, p->ops, p->results, session_proof_done, p);
	pthread_mutex_lock(&zkl_shared.mu);
	if (rc != ZOK)
	{
		zkl_shared.requests_out--;
		zkl_shared.proofs_in_flight--;
		session_proof_free(p);
		return NULL;
	}
	return p;
}

/*
 * The lease thread: send a proof whenever the lease is half way to stale,
 * and declare the locks lost when no proof came within the timeout, so
 * that a waiting main thread wakes up for it.
 */
static void *
session_lease_main(void *arg)
{
	(void) arg;
	pthread_mutex_lock(&zkl_shared.mu);
	while (!zkl_shared.lease_stop)
	{
		int64_t		wait_ms = 100;
		struct timespec until;

		if (zkl_shared.nodes != NULL && zkl_shared.have_proof &&
			!zkl_shared.lost)
		{
			int64_t		age = session_lease_age_locked();
			int64_t		beat = session_lease_window_ms() / 2;

			if (age > zkl_shared.timeout_ms)
			{
				session_mark_lost_locked();
				pthread_mutex_unlock(&zkl_shared.mu);
				session_kick();
				pthread_mutex_lock(&zkl_shared.mu);
				continue;
			}
			if (age >= beat && zkl_shared.proofs_in_flight == 0 &&
				session_connected_locked())
			{
				ZklProof   *p = session_proof_send_locked();

				if (p != NULL)
				{
					if (p->done)
						session_proof_free(p);
					else
						p->abandoned = true;
					continue;
				}
			}
			wait_ms = age < beat ? beat - age :
				Min(beat, zkl_shared.timeout_ms - age + 1);
		}
		clock_gettime(CLOCK_MONOTONIC, &until);
		wait_ms = Max(wait_ms, 5);
		until.tv_sec += wait_ms / 1000;
		until.tv_nsec += (wait_ms % 1000) * 1000000;
		if (until.tv_nsec >= 1000000000)
		{
			until.tv_sec++;
			until.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&zkl_shared.lease_cv, &zkl_shared.mu, &until);
	}
	pthread_mutex_unlock(&zkl_shared.mu);
	return NULL;
}

/* Start the lease thread; with every signal blocked by the caller. */
void
session_lease_start(void)
{
	if (!zkl_lease_cv_ready)
	{
		pthread_condattr_t attr;

		pthread_condattr_init(&attr);
		pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
		pthread_cond_init(&zkl_shared.lease_cv, &attr);
		pthread_condattr_destroy(&attr);
		zkl_lease_cv_ready = true;
	}
	zkl_shared.lease_stop = false;
	zkl_lease_running =
		pthread_create(&zkl_lease_thread, NULL, session_lease_main, NULL) == 0;
}

/* Stop and join the lease thread; main thread, not holding mu. */
void
session_lease_stop(void)
{
	if (!zkl_lease_running)
		return;
	pthread_mutex_lock(&zkl_shared.mu);
	zkl_shared.lease_stop = true;
	pthread_cond_signal(&zkl_shared.lease_cv);
	pthread_mutex_unlock(&zkl_shared.mu);
	pthread_join(zkl_lease_thread, NULL);
	zkl_lease_running = false;
}

static bool
session_proof_answered(void *arg)
{
	return ((ZklProof *) arg)->done || !session_connected_locked();
}

static bool
session_settled_wait(void *arg)
{
	(void) arg;
	return session_settled_locked();
}

/*
 * One proof from the main thread, waited for until the deadline.  Returns
 * whether it was answered with success.
 */
static bool
session_prove_once(TimestampTz deadline)
{
	ZklProof   *p;
	bool		ok = false;

	pthread_mutex_lock(&zkl_shared.mu);
	p = session_connected_locked() ? session_proof_send_locked() : NULL;
	pthread_mutex_unlock(&zkl_shared.mu);
	if (p == NULL)
	{
		session_wait_as(ZKL_WAIT_PROOF, session_settled_wait, NULL, deadline);
		return false;
	}
	PG_TRY();
	{
		session_wait_as(ZKL_WAIT_PROOF, session_proof_answered, p, deadline);
	}
	PG_FINALLY();
	{
		pthread_mutex_lock(&zkl_shared.mu);
		ok = p->done && p->rc == ZOK;
		if (p->done)
			session_proof_free(p);
		else
			p->abandoned = true;
		pthread_mutex_unlock(&zkl_shared.mu);
	}
	PG_END_TRY();
	return ok;
}

/*
 * Make sure a lock node of the given epoch is still ours before a commit
 * or a re-entrant acquire relies on it.  Inside the lease this costs
 * nothing; otherwise proofs are sent (waiting for a reconnect if need be)
 * until one succeeds or the lease runs out, which bounds the wait by the
 * session timeout; a deadline (not 0) may end it earlier, in doubt.
 * Returns the health then.
 */
ZklLockHealth
zkl_session_prove(uint64 epoch, const char *node, TimestampTz deadline)
{
	for (;;)
	{
		ZklLockHealth h = zkl_session_health(epoch, node);
		bool		had_proof;
		int64_t		left;
		TimestampTz until;

		if (h != ZKL_HEALTH_IN_DOUBT)
			return h;
		pthread_mutex_lock(&zkl_shared.mu);
		had_proof = zkl_shared.have_proof;
		left = had_proof ?
			zkl_shared.timeout_ms - session_lease_age_locked() + 1 :
			zkl_shared.timeout_ms;
		pthread_mutex_unlock(&zkl_shared.mu);
		until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), Max(left, 1));
		if (deadline != 0 && deadline < until)
			until = deadline;
		if (session_prove_once(until))
			continue;
		if (deadline != 0 && GetCurrentTimestamp() >= deadline)
			return zkl_session_health(epoch, node);
		if (!had_proof)
			return ZKL_HEALTH_LOST;
	}
}

/* How long the ensemble has not answered this session (-1: no proof). */
int64
zkl_session_unheard_ms(void)
{
	int64		age;

	pthread_mutex_lock(&zkl_shared.mu);
	age = zkl_shared.have_proof ? session_lease_age_locked() : -1;
	pthread_mutex_unlock(&zkl_shared.mu);
	return age;
}
