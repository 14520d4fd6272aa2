/*-------------------------------------------------------------------------
 *
 * session_lease.c
 *	  This session's lock nodes and their lease: when the ensemble last
 *	  answered this session, and the thread that keeps asking while the
 *	  session has lock nodes; what that says of each node (health), and
 *	  its release.
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
 * The session's lock nodes are registered here (by the create's
 * completion, or when a node is found again after a lost reply) and
 * forgotten when released; the lease is kept while one of them lives (a
 * node deleted by someone else is lost already: no proof covers it), and
 * the first node registered when none lives starts a new one.  Every
 * registered node is covered by a watch of our own, so that its deletion
 * by anyone else (an operator breaking the lock) makes its lock lost when
 * the ensemble tells us, not at the next proof; the only delay left is
 * the holder's server applying the delete later than the server of
 * whoever takes the lock next (README, "Deleted nodes").
 *
 * That cover costs no request of its own while nobody else comes: the
 * listing sent right behind the create (zkl_session_list_own) carries a
 * child watch on the directory, which fires when any child comes or goes,
 * ours among them.  A node it showed is covered by it (COVER_DIR).  When
 * it fires, the node may be gone or someone else may have come (another
 * contender, a stray sweep, another client's node in the same directory):
 * the node then gets a data watch of its own, whose answer says which
 * (ZNONODE: lost), and which keeps covering it while others queue; until
 * that answer, or a proof sent after the event, its lock is in doubt, so
 * that a commit then proves it first.  A node whose listing failed, or
 * one adopted after a lost reply, gets its data watch at once.  Our own release forgets the node before its
 * delete, so the notifications of that delete find nothing here.
 *
 * When the lease runs out or the ensemble ends the session, the locks are
 * lost for good (recorded in session_state.c) and every node still
 * registered is queued for deletion, in case the ensemble still knows the
 * session.
 *
 * The lease thread is plain C with every signal blocked, like the
 * library's threads (see session_int.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "utils/timestamp.h"

#include "session_int.h"
#include "stats.h"

/* What tells us of the deletion of a node of ours. */
typedef enum ZklCover
{
	COVER_NONE,					/* nothing yet: the lease thread sends a watch */
	COVER_LISTING,				/* the listing behind its create, under way */
	COVER_DIR,					/* that listing's child watch on its directory */
	COVER_NODE,					/* a data watch on it, set or under way */
	COVER_RETRY					/* its watch was refused: again next round */
} ZklCover;

/* A node this session created and has not deleted: held or queued. */
typedef struct ZklNode
{
	struct ZklNode *next;
	char	   *path;
	bool		lost;			/* deleted by someone else */
	ZklCover	cover;
	bool		watched;		/* COVER_NODE: its data watch was answered */
	uint64		doubt;			/* not 0: its child watch fired (that event's
								 * number) and nothing answered for it since */
} ZklNode;

/* One request for a watch on a node of ours; freed by its completion. */
typedef struct ZklOwnWatch
{
	struct ZklOwnWatch *next;	/* in limbo */
	bool		sending;		/* its zoo_awget has not returned yet */
	bool		answered;		/* its completion ran while sending */
	bool		limbo;			/* refused with ZMARSHALLINGERROR */
	char		path[FLEXIBLE_ARRAY_MEMBER];
} ZklOwnWatch;

/* One proof request; freed by its completion. */
typedef struct ZklProof
{
	struct ZklProof *next;		/* in limbo */
	ZklStamp	sent;
	int			n;
	char	  **paths;
	zoo_op_t   *ops;
	zoo_op_result_t *results;
	bool		done;
	uint64		doubts;			/* the last doubt begun before it was sent */
	bool		abandoned;		/* the main thread let go */
	bool		limbo;			/* refused with ZMARSHALLINGERROR */
	int			rc;
} ZklProof;

/* Under mu. */
static ZklNode *zkl_lease_nodes = NULL; /* our lock nodes */
static uint64 zkl_lease_node_losses = 0;	/* nodes found lost, ever */
static bool zkl_lease_have_proof = false;	/* proof_sent is set */
static ZklStamp zkl_lease_proof_sent;	/* send time of the last write answered */
static int	zkl_lease_proofs_in_flight = 0;
static bool zkl_lease_stop = false;
static uint64 zkl_lease_wakes = 0;	/* wakes sent to the lease thread */
static uint64 zkl_lease_doubts = 0; /* child events that put nodes in doubt */
static pthread_cond_t zkl_lease_cv; /* wakes the lease thread */
static ZklProof *zkl_lease_limbo = NULL;	/* see session_int.h */
static ZklOwnWatch *zkl_lease_watch_limbo = NULL;

/* Main-thread state. */
static pthread_t zkl_lease_thread;
static bool zkl_lease_running = false;
static bool zkl_lease_cv_ready = false;

/* A third of the negotiated timeout: how long an answer keeps a lock held. */
static int
session_lease_window_ms(void)
{
	return Max(zkl_sess_state_timeout_ms_locked() / 3, 1);
}

/* Age of the lease; caller holds mu, and the session has a proof. */
static int64_t
session_lease_age_locked(void)
{
	return zkl_stamp_age_ms(&zkl_lease_proof_sent);
}

/*
 * Whether the session has a node the lease must keep: one not known to be
 * deleted by someone else.  A node found deleted is lost already, and no
 * proof can cover it: with only such nodes left the lease stops, as with
 * none, and the next node starts a new one.  Caller holds mu.
 */
static bool
session_lease_live_locked(void)
{
	for (ZklNode *n = zkl_lease_nodes; n; n = n->next)
		if (!n->lost)
			return true;
	return false;
}

/*
 * Whether the ensemble may have expired the session by now: it has live
 * lock nodes and no proof younger than the timeout.  A pure read; caller
 * holds mu.
 */
bool
zkl_sess_lease_lost_locked(void)
{
	return zkl_sess_state_lost_locked() ||
		(session_lease_live_locked() && zkl_lease_have_proof &&
		 session_lease_age_locked() > zkl_sess_state_timeout_ms_locked());
}

/*
 * The session's locks are lost, for good.  If the ensemble still knows the
 * session (a revived one), delete its nodes now: another contender may have
 * been told it expired.  Caller holds mu.
 */
void
zkl_sess_lease_mark_lost_locked(void)
{
	if (!zkl_sess_state_set_lost_locked())
		return;
	for (ZklNode *n = zkl_lease_nodes; n; n = n->next)
		zkl_sess_cleanup_queue_locked(ZKL_CLEAN_DELETE, n->path, NULL);
}

/*
 * A write sent at `sent` was answered.  If the previous proof was older
 * than the timeout by then, the ensemble may have expired and revived the
 * session meanwhile: the locks are lost all the same.  Caller holds mu.
 */
void
zkl_sess_lease_renew_locked(const ZklStamp *sent)
{
	zkl_sess_cleanup_write_answered_locked(sent);
	if (session_lease_live_locked() && zkl_lease_have_proof &&
		zkl_stamp_diff_ms(&zkl_lease_proof_sent, sent) >
		zkl_sess_state_timeout_ms_locked())
		zkl_sess_lease_mark_lost_locked();
	if (!zkl_lease_have_proof ||
		zkl_stamp_diff_ms(&zkl_lease_proof_sent, sent) > 0)
		zkl_lease_proof_sent = *sent;
	zkl_lease_have_proof = true;
}

/*
 * A node of ours was deleted by someone else: its lock is lost, and a
 * waiter queued with it must hear of it (zkl_sess_lease_node_losses_locked)
 * even when nothing else in its queue changes.  Caller holds mu.
 */
static void
session_lease_node_lost_locked(ZklNode *n)
{
	if (n->lost)
		return;
	n->lost = true;
	zkl_lease_node_losses++;
}

/*
 * How many nodes of ours were found deleted by someone else so far: a wait
 * ends when this changes.  Caller holds mu.
 */
uint64
zkl_sess_lease_node_losses_locked(void)
{
	return zkl_lease_node_losses;
}

/*
 * Register a node of ours (held or queued); listed says that a listing of
 * its directory with our child watch was sent right after its create
 * (zkl_sess_lease_listed_locked then says what covers it).  Caller holds
 * mu.
 */
bool
zkl_sess_lease_add_node_locked(const char *path, bool listed)
{
	ZklNode    *n = malloc(sizeof(ZklNode));

	if (n == NULL || (n->path = strdup(path)) == NULL)
	{
		free(n);
		return false;
	}
	if (!session_lease_live_locked())
		zkl_lease_have_proof = false;	/* a new lease starts */
	n->lost = false;
	n->cover = listed ? COVER_LISTING : COVER_NONE;
	n->watched = false;
	n->doubt = 0;
	n->next = zkl_lease_nodes;
	zkl_lease_nodes = n;
	return true;
}

/* Forget a node of ours, if registered.  Caller holds mu. */
void
zkl_sess_lease_forget_node_locked(const char *path)
{
	for (ZklNode **p = &zkl_lease_nodes; *p; p = &(*p)->next)
	{
		if (strcmp((*p)->path, path) == 0)
		{
			ZklNode    *n = *p;

			*p = n->next;
			free(n->path);
			free(n);
			return;
		}
	}
}

/* Wake the lease thread to look again.  Caller holds mu. */
void
zkl_sess_lease_wake_locked(void)
{
	zkl_lease_wakes++;
	if (zkl_lease_cv_ready)
		pthread_cond_signal(&zkl_lease_cv);
}

/* The registered node at path, or NULL.  Caller holds mu. */
static ZklNode *
session_lease_find_locked(const char *path)
{
	for (ZklNode *n = zkl_lease_nodes; n; n = n->next)
		if (strcmp(n->path, path) == 0)
			return n;
	return NULL;
}

/*
 * Whether a node of ours still needs its watch (those refused wait for the
 * next round).  Caller holds mu.
 */
static bool
session_lease_unwatched_locked(void)
{
	for (ZklNode *n = zkl_lease_nodes; n; n = n->next)
		if (n->cover == COVER_NONE && !n->lost)
			return true;
	return false;
}

/* Whether path names a child of directory dir. */
static bool
session_lease_in_dir(const char *path, const char *dir)
{
	size_t		len = strlen(dir);

	return strncmp(path, dir, len) == 0 && path[len] == '/' &&
		strchr(path + len + 1, '/') == NULL;
}

/*
 * The nodes of ours in dir covered by a child watch there (COVER_DIR),
 * and with listing also those whose listing is under way, need a data
 * watch of their own; doubt (not 0) puts them in doubt until something
 * answers for them, and so the nodes there whose own watch is not
 * answered yet: the event may be of their deletion.  Wakes the lease
 * thread, which sends the watches.  Caller holds mu.
 */
static void
session_lease_uncover_locked(const char *dir, bool listing, uint64 doubt)
{
	bool		any = false;

	for (ZklNode *n = zkl_lease_nodes; n; n = n->next)
	{
		if (!session_lease_in_dir(n->path, dir))
			continue;
		if (n->cover == COVER_DIR || (listing && n->cover == COVER_LISTING))
		{
			n->cover = COVER_NONE;
			if (doubt != 0 && n->doubt == 0)
				n->doubt = doubt;
			any = true;
		}
		else if (doubt != 0 && n->doubt == 0 && !n->lost &&
				 !(n->cover == COVER_NODE && n->watched))
			n->doubt = doubt;
	}
	if (any)
		zkl_sess_lease_wake_locked();
}

/*
 * Our child watch on dir is about to be removed (or was, its waiter gone):
 * the nodes of ours there that it covers, or will cover once their
 * listing is answered, need a data watch of their own.  Caller holds mu.
 */
void
zkl_sess_lease_uncover_dir_locked(const char *dir)
{
	session_lease_uncover_locked(dir, true, 0);
}

/*
 * The removal of our child watches on dir was answered: the library then
 * dropped every child watcher of ours on dir, those of the listings
 * answered since the removal was queued too.  The nodes those listings
 * covered need a data watch of their own; a listing still under way sets
 * its watch after the removal, and keeps covering its nodes.  Caller
 * holds mu.
 */
void
zkl_sess_lease_dir_unwatched_locked(const char *dir)
{
	session_lease_uncover_locked(dir, false, 0);
}

/*
 * The listing of dir sent behind a create was answered (ok: with the
 * children names[0..count), and our child watch set) or failed: the nodes
 * of ours there that it was sent for are covered by the watch when it
 * shows them; any other needs a data watch (the lease thread is woken).
 * Caller holds mu.
 */
void
zkl_sess_lease_listed_locked(const char *dir, bool ok, char **names,
							 int count)
{
	bool		wake = false;
	size_t		len = strlen(dir);

	for (ZklNode *n = zkl_lease_nodes; n; n = n->next)
	{
		bool		shown = false;

		if (n->cover != COVER_LISTING || !session_lease_in_dir(n->path, dir))
			continue;
		for (int i = 0; ok && !shown && i < count; i++)
			shown = strcmp(names[i], n->path + len + 1) == 0;
		n->cover = shown ? COVER_DIR : COVER_NONE;
		wake |= !shown;
	}
	if (wake)
		zkl_sess_lease_wake_locked();
}

/*
 * A node of ours starts waiting behind another: it gets a data watch of
 * its own now (the lease thread sends it, off the waiting path), so that
 * its predecessor's deletion, which fires the child watch too, finds it
 * covered by its own watch and not in doubt, and the commit of the hand-off
 * needs no proof.  Waiting is contention: this costs no uncontended cycle
 * a request.
 */
void
zkl_session_watch_own(const char *path)
{
	ZklNode    *n;

	pthread_mutex_lock(&zkl_sess_sync_mu);
	n = session_lease_find_locked(path);
	if (n != NULL && !n->lost &&
		(n->cover == COVER_DIR || n->cover == COVER_LISTING))
	{
		n->cover = COVER_NONE;
		zkl_sess_lease_wake_locked();
	}
	pthread_mutex_unlock(&zkl_sess_sync_mu);
}

/*
 * The child watch of a listing sent behind a create, on the IO thread:
 * a child of the directory came or went, or the directory went.  Our
 * nodes there get a data watch each, whose answer tells a deletion from
 * anything else; nothing is lost here, but until that answer (or a proof
 * sent after this event) their locks are in doubt: ours may be the child
 * that went.  Session events (every watcher hears them) change nothing:
 * the library sets the watch again on reconnect.
 */
void
zkl_sess_lease_dir_watcher(zhandle_t *zh, int type, int state,
						   const char *path, void *ctx)
{
	(void) zh;
	(void) state;
	(void) ctx;
	if (path == NULL || type == ZOO_SESSION_EVENT)
		return;
	pthread_mutex_lock(&zkl_sess_sync_mu);
	session_lease_uncover_locked(path, true, ++zkl_lease_doubts);
	pthread_mutex_unlock(&zkl_sess_sync_mu);
}

/*
 * The watch on a node of ours, on the IO thread.  Its deletion makes its
 * lock lost: our own releases forget the node before they delete it, so
 * their notification finds nothing here.  A change of its data spends the
 * watch; the lease thread sets it again.
 */
static void
session_own_watcher(zhandle_t *zh, int type, int state, const char *path,
					void *ctx)
{
	ZklNode    *n;

	(void) zh;
	(void) state;
	(void) ctx;
	if (path == NULL || (type != ZOO_DELETED_EVENT && type != ZOO_CHANGED_EVENT))
		return;
	pthread_mutex_lock(&zkl_sess_sync_mu);
	n = session_lease_find_locked(path);
	if (n != NULL && type == ZOO_DELETED_EVENT)
		session_lease_node_lost_locked(n);
	else if (n != NULL)
	{
		n->cover = COVER_NONE;
		zkl_sess_lease_wake_locked();
	}
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	zkl_sess_sync_kick();
}

/* Take a watch request out of limbo; false when it is not there. */
static bool
session_own_watch_unlimbo(ZklOwnWatch *w)
{
	for (ZklOwnWatch **q = &zkl_lease_watch_limbo; *q; q = &(*q)->next)
	{
		if (*q == w)
		{
			*q = w->next;
			return true;
		}
	}
	return false;
}

/*
 * The answer to a watch on a node of ours, on the IO thread: set (the node
 * is there, and no longer in doubt), or the node is gone already (lost, as
 * if notified), or not set: the lease thread sends it again.  At once
 * (once connected) after a lost connection or a session moved to another
 * server; after any other error at its next round (COVER_RETRY), so that
 * an error answered every time does not spin.  A node in doubt stays so
 * until a watch or a proof is answered for it.
 */
static void
session_own_watched(int rc, const char *value, int value_len,
					const struct Stat *stat, const void *data)
{
	ZklOwnWatch *w = (ZklOwnWatch *) data;
	ZklNode    *n;
	bool		sender_frees;

	(void) value;
	(void) value_len;
	(void) stat;
	pthread_mutex_lock(&zkl_sess_sync_mu);
	if (w->limbo && session_own_watch_unlimbo(w))
	{
		free(w);
		pthread_mutex_unlock(&zkl_sess_sync_mu);
		return;
	}
	n = session_lease_find_locked(w->path);
	if (n != NULL && rc == ZNONODE)
		session_lease_node_lost_locked(n);
	else if (n != NULL && rc == ZOK)
	{
		n->doubt = 0;
		n->watched = n->cover == COVER_NODE;
	}
	else if (n != NULL && (zkl_sess_state_rc(rc) == ZKL_RC_CONNECTION_LOST ||
						   rc == ZSESSIONMOVED))
	{
		n->cover = COVER_NONE;
		zkl_sess_lease_wake_locked();
	}
	else if (n != NULL)
		n->cover = COVER_RETRY;
	/* Answered before its send returned: the sender frees it. */
	sender_frees = w->answered = w->sending;
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	if (!sender_frees)
		free(w);
	zkl_sess_sync_kick();
}

/*
 * Watch every node of ours that nothing covers yet, with get-data (a data
 * watch is not left behind on a node already gone): the ensemble then
 * tells us at once when anyone else deletes it, an operator breaking the
 * lock, say.  Sent by the lease thread (woken when a child watch fired, a
 * listing did not cover a node, or a watch must be set again) or by the
 * adoption of a node, never waited for; ZooKeeper runs a session's
 * requests in order, so a deletion before the watch is set is answered
 * ZNONODE, to the same effect.  Any thread, not holding mu; never blocks
 * nor raises.  A send that fails leaves the node to the lease thread's
 * next round.  One call sends at most one watch per node that needed one
 * when it began; the nodes uncovered meanwhile come with a wake of the
 * lease thread, which looks again before it sleeps.
 */
void
zkl_sess_lease_watch_nodes(void)
{
	int			budget = -1;

	for (;;)
	{
		ZklOwnWatch *w = NULL;
		zhandle_t  *zh;
		ZklNode    *n;
		int			rc;

		pthread_mutex_lock(&zkl_sess_sync_mu);
		if (budget < 0)
		{
			budget = 0;
			for (n = zkl_lease_nodes; n; n = n->next)
				budget += n->cover == COVER_NONE && !n->lost;
		}
		zh = budget > 0 ? zkl_sess_state_handle() : NULL;
		for (n = zkl_lease_nodes; zh != NULL && n && w == NULL; n = n->next)
		{
			if (n->cover != COVER_NONE || n->lost)
				continue;
			w = malloc(offsetof(ZklOwnWatch, path) + strlen(n->path) + 1);
			if (w == NULL)
				break;
			w->next = NULL;
			w->sending = true;
			w->answered = false;
			w->limbo = false;
			strcpy(w->path, n->path);
			n->cover = COVER_NODE;
			n->watched = false;
			budget--;
		}
		pthread_mutex_unlock(&zkl_sess_sync_mu);
		if (w == NULL)
			return;
		rc = zoo_awget(zh, w->path, session_own_watcher, NULL,
					   session_own_watched, w);
		pthread_mutex_lock(&zkl_sess_sync_mu);
		w->sending = false;
		if (rc != ZOK && (n = session_lease_find_locked(w->path)) != NULL)
			n->cover = COVER_RETRY;
		if (rc == ZMARSHALLINGERROR && !w->answered)
		{
			/* The library may hold it: its completion, or the close, frees it. */
			w->limbo = true;
			w->next = zkl_lease_watch_limbo;
			zkl_lease_watch_limbo = w;
		}
		else if (rc != ZOK || w->answered)
			free(w);
		pthread_mutex_unlock(&zkl_sess_sync_mu);
		if (rc != ZOK)
			return;
	}
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

/*
 * The session is closed, its threads gone: forget its nodes (they went
 * with it), its proof, and the proofs no completion came for.  Caller
 * holds mu.
 */
void
zkl_sess_lease_reset_locked(void)
{
	zkl_lease_have_proof = false;
	while (zkl_lease_nodes != NULL)
	{
		ZklNode    *n = zkl_lease_nodes;

		zkl_lease_nodes = n->next;
		free(n->path);
		free(n);
	}
	while (zkl_lease_limbo != NULL)
	{
		ZklProof   *p = zkl_lease_limbo;

		zkl_lease_limbo = p->next;
		session_proof_free(p);
	}
	while (zkl_lease_watch_limbo != NULL)
	{
		ZklOwnWatch *w = zkl_lease_watch_limbo;

		zkl_lease_watch_limbo = w->next;
		free(w);
	}
}

/*
 * A proof succeeded: every node in it was there when it ran, after every
 * event that put one in doubt before it was sent.  Caller holds mu.
 */
static void
session_proof_clear_doubts(ZklProof *p)
{
	for (ZklNode *n = zkl_lease_nodes; n; n = n->next)
		if (n->doubt != 0 && n->doubt <= p->doubts)
			n->doubt = 0;
}

/* Mark the node a failed check names as deleted by someone else. */
static void
session_proof_node_gone(ZklProof *p)
{
	for (int i = 0; i < p->n; i++)
	{
		if (p->results[i].err != ZNONODE)
			continue;
		for (ZklNode *n = zkl_lease_nodes; n; n = n->next)
			if (strcmp(n->path, p->paths[i]) == 0)
				session_lease_node_lost_locked(n);
	}
}

/* Take a proof out of limbo; false when it is not there.  Caller holds mu. */
static bool
session_proof_unlimbo(ZklProof *p)
{
	for (ZklProof **q = &zkl_lease_limbo; *q; q = &(*q)->next)
	{
		if (*q == p)
		{
			*q = p->next;
			return true;
		}
	}
	return false;
}

/* A proof's answer, on the IO thread. */
static void
session_proof_done(int rc, const void *data)
{
	ZklProof   *p = (ZklProof *) data;

	pthread_mutex_lock(&zkl_sess_sync_mu);
	if (p->limbo && session_proof_unlimbo(p))
	{
		/* Never sent: nothing to learn from it. */
		session_proof_free(p);
		pthread_mutex_unlock(&zkl_sess_sync_mu);
		return;
	}
	zkl_sess_state_answered_locked();
	zkl_lease_proofs_in_flight--;
	if (rc != ZOK && rc != ZCLOSING)
		zkl_stats_session(ZKL_SS_PROOFS_FAILED, 1);
	if (rc == ZOK)
	{
		zkl_sess_lease_renew_locked(&p->sent);
		session_proof_clear_doubts(p);
	}
	else if (rc == ZNONODE)
		session_proof_node_gone(p);
	else if (zkl_sess_state_rc(rc) == ZKL_RC_SESSION_LOST && rc != ZCLOSING)
		zkl_sess_lease_mark_lost_locked();
	p->rc = rc;
	p->done = true;
	if (p->abandoned)
		session_proof_free(p);
	zkl_sess_lease_wake_locked();
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	zkl_sess_sync_kick();
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
	zhandle_t  *zh = zkl_sess_state_handle();
	int			n = 0;
	int			rc;

	for (ZklNode *node = zkl_lease_nodes; node; node = node->next)
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
	for (ZklNode *node = zkl_lease_nodes; node; node = node->next)
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
	p->doubts = zkl_lease_doubts;
	zkl_sess_state_sent_locked();
	zkl_lease_proofs_in_flight++;
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	rc = zoo_amulti(zh, p->n, p->ops, p->results, session_proof_done, p);
	pthread_mutex_lock(&zkl_sess_sync_mu);
	if (rc == ZOK || p->done)
	{
		zkl_stats_session(ZKL_SS_PROOFS, 1);
		return p;				/* sent, or answered already */
	}
	zkl_sess_state_answered_locked();
	zkl_lease_proofs_in_flight--;
	if (rc == ZMARSHALLINGERROR)
	{
		/* The library may hold it: its completion, or the close, frees it. */
		p->limbo = true;
		p->next = zkl_lease_limbo;
		zkl_lease_limbo = p;
	}
	else
		session_proof_free(p);
	return NULL;
}

/* A new round: the watches refused last round go again.  Caller holds mu. */
static void
session_lease_retry_locked(void)
{
	for (ZklNode *n = zkl_lease_nodes; n; n = n->next)
		if (n->cover == COVER_RETRY)
			n->cover = COVER_NONE;
}

/*
 * The lease thread: send the watches our nodes need, and the clean-ups
 * whose send was refused; send a proof whenever the lease is half way to
 * stale, and declare the locks lost when no proof came within the
 * timeout, so that a waiting main thread wakes up for it.  A wake that
 * came while mu was released (around a send) makes it look again before
 * it sleeps.
 */
static void *
session_lease_main(void *arg)
{
	(void) arg;
	pthread_mutex_lock(&zkl_sess_sync_mu);
	while (!zkl_lease_stop)
	{
		int64_t		wait_ms = 100;
		uint64		wakes = zkl_lease_wakes;
		struct timespec until;

		if (zkl_sess_state_connected_locked() && !zkl_sess_state_lost_locked() &&
			session_lease_unwatched_locked())
		{
			pthread_mutex_unlock(&zkl_sess_sync_mu);
			zkl_sess_lease_watch_nodes();
			pthread_mutex_lock(&zkl_sess_sync_mu);
			if (zkl_lease_stop)
				break;
		}
		if (zkl_sess_state_connected_locked() &&
			zkl_sess_cleanup_unsent_locked())
		{
			/* Once a round: a send refused every time does not spin. */
			pthread_mutex_unlock(&zkl_sess_sync_mu);
			zkl_sess_cleanup_issue();
			pthread_mutex_lock(&zkl_sess_sync_mu);
			if (zkl_lease_stop)
				break;
		}
		if (session_lease_live_locked() && zkl_lease_have_proof &&
			!zkl_sess_state_lost_locked())
		{
			int64_t		age = session_lease_age_locked();
			int64_t		beat = session_lease_window_ms() / 2;
			int			timeout_ms = zkl_sess_state_timeout_ms_locked();

			if (age > timeout_ms)
			{
				zkl_sess_lease_mark_lost_locked();
				pthread_mutex_unlock(&zkl_sess_sync_mu);
				zkl_sess_sync_kick();
				pthread_mutex_lock(&zkl_sess_sync_mu);
				continue;
			}
			if (age >= beat && zkl_lease_proofs_in_flight == 0 &&
				zkl_sess_state_connected_locked())
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
				Min(beat, timeout_ms - age + 1);
		}
		if (zkl_lease_wakes != wakes)
			continue;
		if (zkl_sess_state_connected_locked() &&
			zkl_sess_cleanup_unsent_locked())
			wait_ms = Min(wait_ms, 100);
		clock_gettime(CLOCK_MONOTONIC, &until);
		wait_ms = Max(wait_ms, 5);
		until.tv_sec += wait_ms / 1000;
		until.tv_nsec += (wait_ms % 1000) * 1000000;
		if (until.tv_nsec >= 1000000000)
		{
			until.tv_sec++;
			until.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&zkl_lease_cv, &zkl_sess_sync_mu, &until);
		session_lease_retry_locked();
	}
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	return NULL;
}

/*
 * Start the lease thread; with every signal blocked by the caller.
 * Returns whether it started (not under a process or thread limit, or
 * short of memory; errno says why not): without it, held locks would go
 * unproven and be found lost.
 */
bool
zkl_sess_lease_start(void)
{
	int			rc;

	if (!zkl_lease_cv_ready)
	{
		pthread_condattr_t attr;

		pthread_condattr_init(&attr);
		pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
		pthread_cond_init(&zkl_lease_cv, &attr);
		pthread_condattr_destroy(&attr);
		zkl_lease_cv_ready = true;
	}
	zkl_lease_stop = false;
	rc = pthread_create(&zkl_lease_thread, NULL, session_lease_main, NULL);
	zkl_lease_running = rc == 0;
	if (rc != 0)
		errno = rc;
	return zkl_lease_running;
}

/* Stop and join the lease thread; main thread, not holding mu. */
void
zkl_sess_lease_stop(void)
{
	if (!zkl_lease_running)
		return;
	pthread_mutex_lock(&zkl_sess_sync_mu);
	zkl_lease_stop = true;
	pthread_cond_signal(&zkl_lease_cv);
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	pthread_join(zkl_lease_thread, NULL);
	zkl_lease_running = false;
}

/*
 * Whether a lock node taken in the given epoch is still ours; a pure read.
 * Lost once the session is lost or replaced, the node was deleted by
 * someone else, or no proof came within the timeout; in doubt while the
 * lease is stale or the connection down, or while the node's child watch
 * fired and neither its data watch nor a proof has answered for it since
 * (the event may be its deletion); held otherwise.
 */
ZklLockHealth
zkl_session_health(uint64 epoch, const char *node)
{
	ZklLockHealth h;

	if (epoch != zkl_session_epoch())
		return ZKL_HEALTH_LOST;
	pthread_mutex_lock(&zkl_sess_sync_mu);
	if (zkl_sess_state_handle() == NULL || zkl_sess_lease_lost_locked())
		h = ZKL_HEALTH_LOST;
	else if (!zkl_sess_state_connected_locked() || !zkl_lease_have_proof ||
			 session_lease_age_locked() > session_lease_window_ms())
		h = ZKL_HEALTH_IN_DOUBT;
	else
		h = ZKL_HEALTH_HELD;
	for (ZklNode *n = zkl_lease_nodes; node && n; n = n->next)
	{
		if (strcmp(n->path, node) != 0)
			continue;
		if (n->lost)
			h = ZKL_HEALTH_LOST;
		else if (n->doubt != 0 && h == ZKL_HEALTH_HELD)
			h = ZKL_HEALTH_IN_DOUBT;
	}
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	return h;
}

static bool
session_proof_answered(void *arg)
{
	return ((ZklProof *) arg)->done || !zkl_sess_state_connected_locked();
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

	pthread_mutex_lock(&zkl_sess_sync_mu);
	p = zkl_sess_state_connected_locked() ? session_proof_send_locked() : NULL;
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	if (p == NULL)
	{
		zkl_sess_wait_for_as(ZKL_WAIT_PROOF, zkl_sess_state_settled, NULL,
							 deadline);
		return false;
	}
	PG_TRY();
	{
		zkl_sess_wait_for_as(ZKL_WAIT_PROOF, session_proof_answered, p,
							 deadline);
	}
	PG_FINALLY();
	{
		pthread_mutex_lock(&zkl_sess_sync_mu);
		ok = p->done && p->rc == ZOK;
		if (p->done)
			session_proof_free(p);
		else
			p->abandoned = true;
		pthread_mutex_unlock(&zkl_sess_sync_mu);
	}
	PG_END_TRY();
	return ok;
}

/*
 * Make sure a lock node of the given epoch is still ours before a commit
 * or a re-entrant acquire relies on it.  Inside the lease this costs
 * nothing; otherwise proofs are sent (waiting for a reconnect if need be)
 * until one succeeds or the lease runs out, which bounds the wait by the
 * session timeout; a deadline (not 0) may end it earlier, in doubt.  A
 * lease with no proof yet (a node adopted while the connection was down)
 * runs out one session timeout after the first try.  Returns the health
 * then.
 */
ZklLockHealth
zkl_session_prove(uint64 epoch, const char *node, TimestampTz deadline)
{
	TimestampTz start = GetCurrentTimestamp();

	for (;;)
	{
		ZklLockHealth h = zkl_session_health(epoch, node);
		bool		had_proof;
		int			timeout_ms;
		int64_t		left;
		TimestampTz until;

		if (h != ZKL_HEALTH_IN_DOUBT)
			return h;
		pthread_mutex_lock(&zkl_sess_sync_mu);
		had_proof = zkl_lease_have_proof;
		timeout_ms = zkl_sess_state_timeout_ms_locked();
		left = had_proof ?
			timeout_ms - session_lease_age_locked() + 1 :
			timeout_ms - (GetCurrentTimestamp() - start) / 1000;
		pthread_mutex_unlock(&zkl_sess_sync_mu);
		until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), Max(left, 1));
		if (deadline != 0 && deadline < until)
			until = deadline;
		if (session_prove_once(until))
			continue;
		if (deadline != 0 && GetCurrentTimestamp() >= deadline)
			return zkl_session_health(epoch, node);
		if (!had_proof && GetCurrentTimestamp() >=
			TimestampTzPlusMilliseconds(start, timeout_ms))
			return ZKL_HEALTH_LOST;
	}
}

/* How long the ensemble has not answered this session (-1: no proof). */
int64
zkl_session_unheard_ms(void)
{
	int64		age;

	pthread_mutex_lock(&zkl_sess_sync_mu);
	age = zkl_lease_have_proof ? session_lease_age_locked() : -1;
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	return age;
}

/* Register a node found again after a lost create reply (see recipe.c). */
void
zkl_session_adopt_node(const char *path)
{
	bool		ok;

	pthread_mutex_lock(&zkl_sess_sync_mu);
	ok = zkl_sess_lease_add_node_locked(path, false);
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	zkl_sess_lease_watch_nodes();
}

/* Whether path is a node this session created and still holds or queues. */
bool
zkl_session_tracks(const char *path)
{
	bool		found = false;

	pthread_mutex_lock(&zkl_sess_sync_mu);
	for (ZklNode *n = zkl_lease_nodes; n && !found; n = n->next)
		found = strcmp(n->path, path) == 0;
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	return found;
}

/* Forget a node of ours and delete it.  Never blocks, never raises. */
void
zkl_session_release(const char *path)
{
	bool		queued;

	pthread_mutex_lock(&zkl_sess_sync_mu);
	zkl_sess_lease_forget_node_locked(path);
	queued = zkl_sess_state_handle() != NULL &&
		zkl_sess_cleanup_queue_locked(ZKL_CLEAN_DELETE, path, NULL);
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	if (queued)
		zkl_sess_cleanup_issue();
}

/*
 * Remove our child watch on path (the semaphore's waiter sets them),
 * retried after a reconnect like a delete.  The removal takes every child
 * watch of ours on path, the one covering our own nodes there too: they
 * get data watches of their own, now and again when the removal is
 * answered (zkl_sess_lease_dir_unwatched_locked).  Never blocks, never
 * raises.
 */
void
zkl_session_unwatch_children(const char *path)
{
	bool		queued;

	pthread_mutex_lock(&zkl_sess_sync_mu);
	zkl_sess_lease_uncover_dir_locked(path);
	queued = zkl_sess_state_handle() != NULL &&
		zkl_sess_cleanup_queue_locked(ZKL_CLEAN_UNWATCH_CHILDREN, path, NULL);
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	if (queued)
		zkl_sess_cleanup_issue();
}
