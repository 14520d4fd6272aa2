/*-------------------------------------------------------------------------
 *
 * session_cleanup.c
 *	  The clean-up queue: nodes to delete (released locks, given-up
 *	  waiters, creates nobody claimed), watches to remove, and lock
 *	  directories to search for a node whose create reply was lost.
 *
 * Requests for it are sent at once and again after each reconnect, from
 * whichever thread notices, until the server answers; queuing therefore
 * never blocks and never raises, which the transaction callbacks need.
 * Entries are marked in flight under mu and sent without it.  Every entry
 * goes when the session closes: the server removes the session's nodes
 * and watches itself then.
 *
 * A delete's answer is a write the quorum committed; the lease, above
 * this file, registers to hear of it (zkl_sess_cleanup_on_delete).
 *
 * A sweep looks for the node of a create whose reply was lost: a sync
 * (through the leader), then the listing, back to back, so that the
 * listing shows every create the leader committed before.  A create can
 * still land later, from a connection of the session that the client
 * gave up but a server had not read yet (a server paused with the
 * request in its socket, as in a whole-ensemble pause): that server moves
 * the session to itself, and the connection in use is closed on its next
 * request.  So a sweep stays armed after its listing, and lists again
 * after every reconnect, until the session has an answer to a write sent
 * after that listing (zkl_sess_cleanup_write_answered_locked: a create,
 * a delete or a lease proof committed while this connection owned the
 * session).
 *
 * A release is synchronous when its caller then waits, on the main
 * thread, until every delete queued before the wait is answered (see
 * zkl_session_await_releases in session.c): the deletes of one statement
 * or commit go out back to back, so that costs one round trip however
 * many there are.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <stdlib.h>
#include <string.h>

#include "session_int.h"

typedef struct ZklCleanup
{
	struct ZklCleanup *next;
	bool		in_flight;
	bool		sending;		/* its zoo_a* call has not returned yet */
	bool		early;			/* answered while sending, with early_rc */
	int			early_rc;
	ZklCleanupKind kind;
	char	   *path;
	char	   *prefix;
	uint64		seq;			/* order of queuing: releases wait by it */
	ZklStamp	sent;
	bool		armed;			/* a sweep listed: again after a reconnect */
	ZklStamp	listed;			/* when its last listing was sent */
} ZklCleanup;

/* Under mu. */
static ZklCleanup *zkl_cleanups = NULL;
static uint64 zkl_cleanups_queued = 0;	/* seq of the last clean-up queued */
static void (*zkl_cleanup_delete_hook) (const ZklStamp *sent) = NULL;
static void (*zkl_cleanup_unwatched_hook) (const char *dir) = NULL;
static char *zkl_cleanup_denied = NULL; /* first delete refused, unreported */
static int	zkl_cleanup_ndenied = 0;
static bool zkl_cleanup_issuing = false;	/* a thread is sending entries */

/*
 * Entries whose send failed with ZMARSHALLINGERROR: the library may hold
 * them and run their completion later (see session_int.h).  Under mu.
 */
static ZklCleanup *zkl_cleanup_limbo = NULL;

/*
 * Who hears that a delete sent at *sent was answered: called on the
 * IO thread with mu held.  Main thread, before the session opens.
 */
void
zkl_sess_cleanup_on_delete(void (*hook) (const ZklStamp *sent))
{
	pthread_mutex_lock(&zkl_sess_sync_mu);
	zkl_cleanup_delete_hook = hook;
	pthread_mutex_unlock(&zkl_sess_sync_mu);
}

/*
 * Who hears that a removal of our child watches on dir was answered (the
 * library dropped every child watcher of ours there then): called on the
 * IO thread with mu held.  Main thread, before the session opens.
 */
void
zkl_sess_cleanup_on_unwatched_children(void (*hook) (const char *dir))
{
	pthread_mutex_lock(&zkl_sess_sync_mu);
	zkl_cleanup_unwatched_hook = hook;
	pthread_mutex_unlock(&zkl_sess_sync_mu);
}

static ZklCleanup *
session_cleanup_new(ZklCleanupKind kind, const char *path, const char *prefix,
					uint64 seq)
{
	ZklCleanup *c = calloc(1, sizeof(ZklCleanup));

	if (c == NULL)
		return NULL;
	c->kind = kind;
	c->path = strdup(path);
	c->prefix = prefix ? strdup(prefix) : NULL;
	c->seq = seq;
	if (c->path == NULL || (prefix && c->prefix == NULL))
	{
		free(c->path);
		free(c->prefix);
		free(c);
		return NULL;
	}
	return c;
}

static void
session_cleanup_free(ZklCleanup *c)
{
	free(c->path);
	free(c->prefix);
	free(c);
}

/* Append an entry to a list: entries go out in the order queued. */
static void
session_cleanup_append(ZklCleanup **list, ZklCleanup *c)
{
	ZklCleanup **p = list;

	while (*p)
		p = &(*p)->next;
	c->next = NULL;
	*p = c;
}

/*
 * Queue a clean-up.  Caller holds mu.  Returns false only when out of
 * memory; the node then goes with the session.  Entries are sent in the
 * order queued, after a reconnect too, and ZooKeeper runs one session's
 * requests in order: a delete queued after another is carried out after
 * it (a deadlock claim after its victim's node).
 */
bool
zkl_sess_cleanup_queue_locked(ZklCleanupKind kind, const char *path,
							  const char *prefix)
{
	ZklCleanup *c = session_cleanup_new(kind, path, prefix,
										zkl_cleanups_queued + 1);

	if (c == NULL)
		return false;
	zkl_cleanups_queued++;
	session_cleanup_append(&zkl_cleanups, c);
	return true;
}

/* Unlink an entry from a list, if it is there.  Caller holds mu. */
static bool
session_cleanup_unlink(ZklCleanup **list, ZklCleanup *c)
{
	ZklCleanup **p = list;

	while (*p && *p != c)
		p = &(*p)->next;
	if (*p == NULL)
		return false;
	*p = c->next;
	return true;
}

/* Unlink and free a queued entry.  Caller holds mu. */
static void
session_drop_cleanup(ZklCleanup *c)
{
	session_cleanup_unlink(&zkl_cleanups, c);
	session_cleanup_free(c);
}

/*
 * Forget every entry: the session is closed, and the library's threads
 * with it, so no completion holds one any more.  Caller holds mu.
 */
void
zkl_sess_cleanup_drop_all_locked(void)
{
	while (zkl_cleanups != NULL)
		session_drop_cleanup(zkl_cleanups);
	while (zkl_cleanup_limbo != NULL)
	{
		ZklCleanup *c = zkl_cleanup_limbo;

		zkl_cleanup_limbo = c->next;
		session_cleanup_free(c);
	}
	free(zkl_cleanup_denied);
	zkl_cleanup_denied = NULL;
	zkl_cleanup_ndenied = 0;
	zkl_cleanup_issuing = false;
}

/*
 * A delete the ensemble refused (ZNOAUTH: the directory's ACL lets this
 * session create children but not delete them).  The node stays until
 * the session ends; remember it for the caller to report.  Caller holds
 * mu.
 */
static void
session_cleanup_denied(ZklCleanup *c)
{
	if (zkl_cleanup_ndenied++ == 0)
		zkl_cleanup_denied = strdup(c->path);
}

/*
 * Settle one answered entry: done unless the connection was lost, in
 * which case it goes again after the reconnect.  ZSESSIONMOVED counts as
 * a connection loss: the session moved to another server, which did not
 * carry the request out, and this server closes the connection.  Expiry
 * and close remove the session's nodes and watches anyway; ZNOWATCHER
 * means the watch fired first.  A delete refused with ZNOAUTH is done,
 * and noted.  An entry in limbo was never sent: its completion only
 * frees it.  Caller holds mu.
 */
static void
session_cleanup_answered(ZklCleanup *c, int rc)
{
	if (session_cleanup_unlink(&zkl_cleanup_limbo, c))
	{
		session_cleanup_free(c);
		return;
	}
	zkl_sess_state_answered_locked();
	if (rc == ZOK && c->kind == ZKL_CLEAN_DELETE && zkl_cleanup_delete_hook)
		zkl_cleanup_delete_hook(&c->sent);
	if (rc == ZNOAUTH && c->kind == ZKL_CLEAN_DELETE)
		session_cleanup_denied(c);
	if (rc == ZOK && c->kind == ZKL_CLEAN_UNWATCH_CHILDREN &&
		zkl_cleanup_unwatched_hook)
		zkl_cleanup_unwatched_hook(c->path);
	if (zkl_sess_state_rc(rc) == ZKL_RC_CONNECTION_LOST || rc == ZSESSIONMOVED)
		c->in_flight = false;
	else
		session_drop_cleanup(c);
}

/*
 * An answer that came before its zoo_a* call returned is left to the
 * sender, who alone knows whether the send failed.  Caller holds mu;
 * returns whether the answer was kept for the sender.
 */
static bool
session_cleanup_early(ZklCleanup *c, int rc)
{
	if (!c->sending)
		return false;
	c->early = true;
	c->early_rc = rc;
	return true;
}

static void
session_cleanup_done(int rc, const void *data)
{
	ZklCleanup *c = (ZklCleanup *) data;

	pthread_mutex_lock(&zkl_sess_sync_mu);
	if (!session_cleanup_early(c, rc))
		session_cleanup_answered(c, rc);
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	zkl_sess_sync_kick();
}

/*
 * The owner check of a conditional delete: the node is this session's
 * (ephemeralOwner), so the delete is queued; gone or another session's,
 * nothing to do.  One answered before its send returned goes again.
 */
static void
session_cleanup_owner(int rc, const struct Stat *stat, const void *data)
{
	ZklCleanup *c = (ZklCleanup *) data;
	bool		queued = false;

	pthread_mutex_lock(&zkl_sess_sync_mu);
	if (session_cleanup_early(c, rc == ZOK ? ZCONNECTIONLOSS : rc))
	{
		pthread_mutex_unlock(&zkl_sess_sync_mu);
		return;
	}
	for (ZklCleanup *l = zkl_cleanup_limbo; l; l = l->next)
		if (l == c)
			rc = ZCLOSING;		/* never sent: nothing learnt */
	if (rc == ZOK && stat->ephemeralOwner != 0 &&
		stat->ephemeralOwner == zkl_sess_state_session_id_locked())
		queued = zkl_sess_cleanup_queue_locked(ZKL_CLEAN_DELETE, c->path, NULL);
	session_cleanup_answered(c, rc == ZNONODE ? ZOK : rc);
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	if (queued)
		zkl_sess_cleanup_issue();
	zkl_sess_sync_kick();
}

/* A sweep's sync: its listing, sent right after it, carries the answer. */
static void
session_cleanup_synced(int rc, const char *value, const void *data)
{
	(void) rc;
	(void) value;
	(void) data;
}

/*
 * A sweep's listing was answered (the directory listed or gone): keep the
 * sweep armed, not sent again until the next reconnect.  An entry in limbo
 * was never sent: its completion only frees it.  Caller holds mu.
 */
static void
session_cleanup_arm(ZklCleanup *c)
{
	if (session_cleanup_unlink(&zkl_cleanup_limbo, c))
	{
		session_cleanup_free(c);
		return;
	}
	zkl_sess_state_answered_locked();
	c->armed = true;
	c->in_flight = true;
	c->listed = c->sent;
}

/*
 * A sweep's listing: queue deletes of the children with our prefix.  One
 * answered before its send returned goes again (its listing is not kept).
 */
static void
session_cleanup_listed(int rc, const struct String_vector *strings,
					   const void *data)
{
	ZklCleanup *c = (ZklCleanup *) data;

	pthread_mutex_lock(&zkl_sess_sync_mu);
	if (session_cleanup_early(c, rc == ZOK ? ZCONNECTIONLOSS : rc))
	{
		pthread_mutex_unlock(&zkl_sess_sync_mu);
		return;
	}
	if (rc == ZOK)
	{
		size_t		plen = strlen(c->prefix);

		for (int i = 0; i < strings->count; i++)
		{
			size_t		len;
			char	   *path;

			if (strncmp(strings->data[i], c->prefix, plen) != 0)
				continue;
			len = strlen(c->path) + strlen(strings->data[i]) + 2;
			if ((path = malloc(len)) == NULL)
				continue;		/* the node goes with the session */
			snprintf(path, len, "%s/%s", c->path, strings->data[i]);
			zkl_sess_cleanup_queue_locked(ZKL_CLEAN_DELETE, path, NULL);
			free(path);
		}
	}
	if (rc == ZOK || rc == ZNONODE)
		session_cleanup_arm(c);
	else
		session_cleanup_answered(c, rc);
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	if (rc == ZOK)
		zkl_sess_cleanup_issue();
	zkl_sess_sync_kick();
}

/* Send one entry; returns the library's code for the send. */
static int
session_send_cleanup(zhandle_t *zh, ZklCleanup *c)
{
	switch (c->kind)
	{
		case ZKL_CLEAN_SWEEP:
			{
				int			rc = zoo_async(zh, c->path, session_cleanup_synced,
										   NULL);

				if (rc != ZOK)
					return rc;
				return zoo_aget_children(zh, c->path, 0,
										 session_cleanup_listed, c);
			}
		case ZKL_CLEAN_UNWATCH:

			/*
			 * The library declares this completion as void_completion_t *
			 * but stores and calls it as a plain void_completion_t.
			 */
			return zoo_aremove_all_watches(zh, c->path, ZWATCHTYPE_DATA, 0,
										   (void_completion_t *) session_cleanup_done,
										   c);
		case ZKL_CLEAN_UNWATCH_CHILDREN:
			return zoo_aremove_all_watches(zh, c->path, ZWATCHTYPE_CHILD, 0,
										   (void_completion_t *) session_cleanup_done,
										   c);
		case ZKL_CLEAN_DELETE_OWN:
			return zoo_aexists(zh, c->path, 0, session_cleanup_owner, c);
		case ZKL_CLEAN_DELETE:
			break;
	}
	return zoo_adelete(zh, c->path, -1, session_cleanup_done, c);
}

/*
 * A send failed with ZMARSHALLINGERROR: the library may hold the entry.
 * Move it to limbo and put a copy in its place in the queue, to go again
 * after the reconnect in the same order: ahead of the entries queued
 * after it (a victim's node ahead of its deadlock claim).  Caller holds
 * mu.
 */
static void
session_cleanup_to_limbo(ZklCleanup *c)
{
	ZklCleanup *copy;
	ZklCleanup **p = &zkl_cleanups;

	while (*p && *p != c)
		p = &(*p)->next;
	if (*p == NULL)
		return;
	copy = session_cleanup_new(c->kind, c->path, c->prefix, c->seq);
	if (copy != NULL)
	{
		copy->next = c->next;
		*p = copy;
	}
	else
		*p = c->next;			/* the node goes with the session */
	c->next = zkl_cleanup_limbo;
	zkl_cleanup_limbo = c;
}

/*
 * After the send of c returned rc: settle an answer that came meanwhile,
 * or a failed send.  Caller holds mu; returns whether to send on.
 */
static bool
session_cleanup_sent_locked(ZklCleanup *c, int rc)
{
	bool		dropped;

	c->sending = false;
	if (c->early)
	{
		/* Its completion ran: it was registered, and is answered. */
		c->early = false;
		session_cleanup_answered(c, c->early_rc);
		return rc == ZOK;
	}
	if (rc == ZOK)
		return true;
	zkl_sess_state_answered_locked();
	dropped = rc == ZNOWATCHER || rc == ZBADARGUMENTS || rc == ZINVALIDSTATE;
	if (dropped)
		session_drop_cleanup(c);	/* the watch fired, or the session is gone */
	else if (rc == ZMARSHALLINGERROR)
		session_cleanup_to_limbo(c);
	else
		c->in_flight = false;	/* not sent: again after the reconnect */
	return dropped;
}

/*
 * Send every queued clean-up that is not under way; any thread.  One
 * thread sends at a time, the others leave their entries to it (it looks
 * again after each send): two threads sending at once could put a later
 * entry on the wire first, a deadlock claim's delete ahead of its
 * victim's node.
 */
void
zkl_sess_cleanup_issue(void)
{
	pthread_mutex_lock(&zkl_sess_sync_mu);
	if (zkl_cleanup_issuing)
	{
		pthread_mutex_unlock(&zkl_sess_sync_mu);
		return;
	}
	zkl_cleanup_issuing = true;
	for (;;)
	{
		ZklCleanup *c;
		zhandle_t  *zh;
		int			rc;

		zh = zkl_sess_state_handle();
		for (c = zkl_cleanups; c; c = c->next)
			if (!c->in_flight)
				break;
		if (c == NULL || zh == NULL || !zkl_sess_state_connected_locked())
			break;
		c->in_flight = true;
		c->sending = true;
		c->armed = false;		/* armed again when its listing is answered */
		zkl_stamp_now(&c->sent);
		zkl_sess_state_sent_locked();
		pthread_mutex_unlock(&zkl_sess_sync_mu);

		rc = session_send_cleanup(zh, c);
		pthread_mutex_lock(&zkl_sess_sync_mu);
		if (!session_cleanup_sent_locked(c, rc))
			break;
	}
	zkl_cleanup_issuing = false;
	pthread_mutex_unlock(&zkl_sess_sync_mu);
}

/*
 * Whether an entry waits to be sent and no thread is sending: a send
 * refused with ZMARSHALLINGERROR leaves its copy so, and the lease thread
 * sends it again (zkl_sess_cleanup_issue) rather than leave the queue
 * stopped until something else sends.  Caller holds mu.
 */
bool
zkl_sess_cleanup_unsent_locked(void)
{
	if (zkl_cleanup_issuing)
		return false;
	for (ZklCleanup *c = zkl_cleanups; c; c = c->next)
		if (!c->in_flight)
			return true;
	return false;
}

/* The seq of the last clean-up queued, to wait for.  Caller holds mu. */
uint64
zkl_sess_cleanup_mark_locked(void)
{
	return zkl_cleanups_queued;
}

/* A delete queued up to the mark is still unanswered.  Caller holds mu. */
bool
zkl_sess_cleanup_pending_locked(uint64 mark)
{
	for (ZklCleanup *c = zkl_cleanups; c; c = c->next)
		if (c->kind == ZKL_CLEAN_DELETE && c->seq <= mark)
			return true;
	return false;
}

/*
 * The session is connected again: armed sweeps list again (a create of
 * a connection given up may have landed meanwhile).  Caller holds mu.
 */
void
zkl_sess_cleanup_rearm_locked(void)
{
	for (ZklCleanup *c = zkl_cleanups; c; c = c->next)
		if (c->armed)
			c->in_flight = false;
}

/*
 * A write sent at *sent was answered: the connection it went on owned the
 * session then, so no create of an earlier connection can land after a
 * listing sent before it without a reconnect; retire the sweeps listed
 * before it.  Caller holds mu.
 */
void
zkl_sess_cleanup_write_answered_locked(const ZklStamp *sent)
{
	ZklCleanup *c = zkl_cleanups;

	while (c != NULL)
	{
		ZklCleanup *next = c->next;

		if (c->armed && zkl_stamp_diff_ms(&c->listed, sent) > 0)
			session_drop_cleanup(c);
		c = next;
	}
}

/* Queue a clean-up of path and send it; never blocks, never raises. */
static void
session_queue_clean(ZklCleanupKind kind, const char *path)
{
	bool		queued;

	pthread_mutex_lock(&zkl_sess_sync_mu);
	queued = zkl_sess_state_handle() != NULL &&
		zkl_sess_cleanup_queue_locked(kind, path, NULL);
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	if (queued)
		zkl_sess_cleanup_issue();
}

/*
 * Delete path (no lock node: a deadlock claim whose create was not
 * answered) only if the ensemble says this session owns it: it may be
 * another session's.  Queued like a delete, in order; never blocks, never
 * raises.
 */
void
zkl_session_delete_if_own(const char *path)
{
	session_queue_clean(ZKL_CLEAN_DELETE_OWN, path);
}

/*
 * Remove our data watch on path, retried after a reconnect like a delete.
 * In the 3.8.0 client, removing one watcher only checks on the server and
 * drops it locally: the server keeps the watch until it fires.  Removing
 * all data watches of the path (only the recipe sets them, one wait at a
 * time) sends RemoveWatches; a local removal crashes.
 */
void
zkl_session_unwatch(const char *path)
{
	session_queue_clean(ZKL_CLEAN_UNWATCH, path);
}

/*
 * The first delete the ensemble refused since the last call (palloc'd;
 * NULL if none, or if it could not be kept), with how many were refused
 * in *count.  Main thread.
 */
char *
zkl_session_take_denied(int *count)
{
	char	   *first;
	char	   *path = NULL;

	pthread_mutex_lock(&zkl_sess_sync_mu);
	*count = zkl_cleanup_ndenied;
	first = zkl_cleanup_denied;
	zkl_cleanup_denied = NULL;
	zkl_cleanup_ndenied = 0;
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	if (first != NULL)
	{
		path = pstrdup(first);
		free(first);
	}
	return path;
}
