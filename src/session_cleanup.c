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
 * A release is synchronous when its caller then waits, on the main
 * thread, until every delete queued before the wait is answered (see
 * zkl_session_await_releases): the deletes of one statement or commit go
 * out back to back, so that costs one round trip however many there are.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <stdlib.h>
#include <string.h>

#include "utils/timestamp.h"

#include "guc.h"
#include "session_int.h"

/*
 * Queue a clean-up.  Caller holds mu.  Returns false only when out of
 * memory; the node then goes with the session.
 */
bool
session_queue_cleanup(ZklCleanupKind kind, const char *path, const char *prefix)
{
	ZklCleanup *c = calloc(1, sizeof(ZklCleanup));

	if (c == NULL)
		return false;
	c->kind = kind;
	c->path = strdup(path);
	c->prefix = prefix ? strdup(prefix) : NULL;
	c->seq = ++zkl_shared.cleanups_queued;
	if (c->path == NULL || (prefix && c->prefix == NULL))
	{
		free(c->path);
		free(c->prefix);
		free(c);
		return false;
	}
	c->next = zkl_shared.cleanups;
	zkl_shared.cleanups = c;
	return true;
}

/* Unlink and free a clean-up entry.  Caller holds mu. */
static void
session_drop_cleanup(ZklCleanup *c)
{
	ZklCleanup **p = &zkl_shared.cleanups;

	while (*p && *p != c)
		p = &(*p)->next;
	if (*p)
		*p = c->next;
	free(c->path);
	free(c->prefix);
	free(c);
}

/* Forget every entry: the session is closed.  Caller holds mu. */
void
session_drop_cleanups(void)
{
	while (zkl_shared.cleanups != NULL)
		session_drop_cleanup(zkl_shared.cleanups);
}

/*
 * Settle one answered entry: done unless the connection was lost, in
 * which case it goes again after the reconnect.  Expiry and close remove
 * the session's nodes and watches anyway; ZNOWATCHER means the watch fired
 * first.  A delete's answer is a write the quorum committed: it renews the
 * lease.
 */
static void
session_cleanup_answered(ZklCleanup *c, int rc)
{
	zkl_shared.requests_out--;
	if (rc == ZOK && c->kind == ZKL_CLEAN_DELETE)
		session_lease_renew_locked(&c->sent);
	if (session_rc(rc) == ZKL_RC_CONNECTION_LOST)
		c->in_flight = false;
	else
		session_drop_cleanup(c);
}

static void
session_cleanup_done(int rc, const void *data)
{
	pthread_mutex_lock(&zkl_shared.mu);
	session_cleanup_answered((ZklCleanup *) data, rc);
	pthread_mutex_unlock(&zkl_shared.mu);
	session_kick();
}

/* A sweep's listing: queue deletes of the children with our prefix. */
static void
session_cleanup_listed(int rc, const struct String_vector *strings,
					   const void *data)
{
	ZklCleanup *c = (ZklCleanup *) data;

	pthread_mutex_lock(&zkl_shared.mu);
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
			session_queue_cleanup(ZKL_CLEAN_DELETE, path, NULL);
			free(path);
		}
	}
	session_cleanup_answered(c, rc);
	pthread_mutex_unlock(&zkl_shared.mu);
	if (rc == ZOK)
		session_issue_cleanups();
	session_kick();
}

/* Send one entry; returns the library's code for the send. */
static int
session_send_cleanup(zhandle_t *zh, ZklCleanup *c)
{
	switch (c->kind)
	{
		case ZKL_CLEAN_SWEEP:
			return zoo_aget_children(zh, c->path, 0, session_cleanup_listed, c);
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
		case ZKL_CLEAN_DELETE:
			break;
	}
	return zoo_adelete(zh, c->path, -1, session_cleanup_done, c);
}

/* Send every queued clean-up that is not under way; any thread. */
void
session_issue_cleanups(void)
{
	for (;;)
	{
		ZklCleanup *c;
		zhandle_t  *zh;
		int			rc;

		pthread_mutex_lock(&zkl_shared.mu);
		zh = zkl_shared.zh;
		for (c = zkl_shared.cleanups; c; c = c->next)
			if (!c->in_flight)
				break;
		if (c == NULL || zh == NULL || !session_connected_locked())
		{
			pthread_mutex_unlock(&zkl_shared.mu);
			return;
		}
		c->in_flight = true;
		zkl_stamp_now(&c->sent);
		zkl_shared.requests_out++;
		pthread_mutex_unlock(&zkl_shared.mu);

		rc = session_send_cleanup(zh, c);
		if (rc == ZOK)
			continue;
		pthread_mutex_lock(&zkl_shared.mu);
		zkl_shared.requests_out--;
		if (rc == ZNOWATCHER || rc == ZBADARGUMENTS || rc == ZINVALIDSTATE)
			session_drop_cleanup(c);	/* the watch fired, or the session is gone */
		else
			c->in_flight = false;	/* not sent: again after the reconnect */
		pthread_mutex_unlock(&zkl_shared.mu);
		if (rc != ZNOWATCHER && rc != ZBADARGUMENTS && rc != ZINVALIDSTATE)
			return;
	}
}

/* A delete queued up to the mark is still unanswered.  Caller holds mu. */
static bool
session_delete_pending_locked(uint64 mark)
{
	for (ZklCleanup *c = zkl_shared.cleanups; c; c = c->next)
		if (c->kind == ZKL_CLEAN_DELETE && c->seq <= mark)
			return true;
	return false;
}

/*
 * Whether the deletes queued up to the mark are settled: answered, or
 * gone with the session (expired or closed, so its nodes are gone, or
 * lost, so that the ensemble may have expired it and nothing this backend
 * waits for can make its nodes go sooner).  Caller holds mu.
 */
static bool
session_releases_settled(void *arg)
{
	return zkl_shared.zh == NULL ||
		zkl_shared.state == ZOO_EXPIRED_SESSION_STATE ||
		zkl_shared.state == ZOO_AUTH_FAILED_STATE ||
		session_lease_lost_locked() ||
		!session_delete_pending_locked(*(uint64 *) arg);
}

/*
 * Wait until every delete queued so far (releases, given-up waiters) is
 * answered, so that the nodes are gone for every other client.  Bounded
 * by the session timeout: a session disconnected that long is expired by
 * the ensemble, and its nodes go with it.  Interrupts are not served: this
 * runs after a commit too, where nothing may raise; a cancel or terminate
 * request ends the wait and the caller says so.  *timeout_ms gets the
 * bound used.
 */
ZklReleaseWait
zkl_session_await_releases(int *timeout_ms)
{
	uint64		mark;

	pthread_mutex_lock(&zkl_shared.mu);
	mark = zkl_shared.cleanups_queued;
	*timeout_ms = zkl_shared.timeout_ms > 0 ?
		zkl_shared.timeout_ms : zkl_session_timeout;
	pthread_mutex_unlock(&zkl_shared.mu);
	session_issue_cleanups();
	return session_wait_held(session_releases_settled, &mark,
							 TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
														 *timeout_ms));
}
