/*-------------------------------------------------------------------------
 *
 * session_state.c
 *	  The handle of this backend's session and what the client library
 *	  says of it: its state, the negotiated timeout, the session id, whether
 *	  its locks are lost for good, how many requests are under way, and
 *	  what its result codes mean in zklock's terms (ZklRc).
 *
 * Only the main thread opens and closes the handle (session.c), so it
 * reads the handle without mu; every other field is read and written
 * under mu.  The session watcher records what it hears here; whether the
 * locks are lost is the lease's verdict (session_lease.c), recorded here
 * so that every file can tell a settled session.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "session_int.h"

/* Written by the main thread under mu; read by it at any time. */
static zhandle_t *zkl_state_zh = NULL;
static uint64 zkl_state_epoch = 0;	/* bumped for every new session */

/* Under mu. */
static int	zkl_state_state = 0;	/* last session state from the watcher */
static bool zkl_state_ever_connected = false;
static bool zkl_state_lost = false; /* this session's locks are lost, for good */
static int	zkl_state_timeout_ms = 0;	/* negotiated session timeout */
static int64_t zkl_state_session_id = 0;	/* of the connected session */
static uint64 zkl_state_requests_out = 0;	/* sent and not yet answered */

/*
 * ZooKeeper's code in zklock's terms; any thread.  A request's answer is
 * ZRUNTIMEINCONSISTENCY when the library dropped the connection over a
 * reply out of order (its completion list no longer matched what went
 * out): the request may or may not have been done, as after a connection
 * loss.
 */
ZklRc
zkl_sess_state_rc(int rc)
{
	switch (rc)
	{
		case ZOK:
			return ZKL_RC_OK;
		case ZNONODE:
			return ZKL_RC_NO_NODE;
		case ZNODEEXISTS:
			return ZKL_RC_EXISTS;
		case ZCONNECTIONLOSS:
		case ZOPERATIONTIMEOUT:
		case ZRUNTIMEINCONSISTENCY:
			return ZKL_RC_CONNECTION_LOST;
		case ZSESSIONEXPIRED:
		case ZSESSIONMOVED:
		case ZINVALIDSTATE:
		case ZCLOSING:
			return ZKL_RC_SESSION_LOST;
		case ZNOAUTH:
		case ZAUTHFAILED:
			return ZKL_RC_DENIED;
		default:
			return ZKL_RC_FAILED;
	}
}

/* The handle, NULL when closed: main thread, or any thread holding mu. */
zhandle_t *
zkl_sess_state_handle(void)
{
	return zkl_state_zh;
}

/* A new session's handle, before any request; main thread. */
void
zkl_sess_state_start(zhandle_t *zh)
{
	pthread_mutex_lock(&zkl_sess_sync_mu);
	zkl_state_zh = zh;
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	zkl_state_epoch++;
}

/* Which session lock nodes belong to; main thread. */
uint64
zkl_session_epoch(void)
{
	return zkl_state_epoch;
}

/* The handle is closed, its threads gone.  Main thread, holding mu. */
void
zkl_sess_state_reset_locked(void)
{
	zkl_state_zh = NULL;
	zkl_state_state = 0;
	zkl_state_ever_connected = false;
	zkl_state_lost = false;
	zkl_state_requests_out = 0;
}

/* What the session watcher heard.  Caller holds mu. */
void
zkl_sess_state_record_locked(int state, int timeout_ms, int64_t session_id)
{
	if (state == ZOO_CONNECTED_STATE)
	{
		zkl_state_ever_connected = true;
		zkl_state_timeout_ms = timeout_ms;
		zkl_state_session_id = session_id;
	}
	zkl_state_state = state;
}

/* Whether requests can go out now.  Caller holds mu. */
bool
zkl_sess_state_connected_locked(void)
{
	return zkl_state_state == ZOO_CONNECTED_STATE;
}

/* The ensemble expired the session or refused its credentials.  Under mu. */
bool
zkl_sess_state_ended_locked(void)
{
	return zkl_state_state == ZOO_EXPIRED_SESSION_STATE ||
		zkl_state_state == ZOO_AUTH_FAILED_STATE;
}

/* The ensemble refused the credentials.  Caller holds mu. */
bool
zkl_sess_state_auth_failed_locked(void)
{
	return zkl_state_state == ZOO_AUTH_FAILED_STATE;
}

/*
 * Connected, or known to be gone for good: a predicate for the waits
 * (arg unused).  Caller holds mu.
 */
bool
zkl_sess_state_settled(void *arg)
{
	(void) arg;
	return zkl_sess_state_connected_locked() || zkl_state_lost ||
		zkl_sess_state_ended_locked();
}

/*
 * Record that the session's locks are lost, for good; true when they were
 * not lost before.  Caller holds mu.
 */
bool
zkl_sess_state_set_lost_locked(void)
{
	if (zkl_state_lost)
		return false;
	zkl_state_lost = true;
	return true;
}

/* Whether the session's locks are recorded lost.  Caller holds mu. */
bool
zkl_sess_state_lost_locked(void)
{
	return zkl_state_lost;
}

/* The negotiated session timeout (0 before the first connect).  Under mu. */
int
zkl_sess_state_timeout_ms_locked(void)
{
	return zkl_state_timeout_ms;
}

/* The id of the session last connected.  Caller holds mu. */
int64_t
zkl_sess_state_session_id_locked(void)
{
	return zkl_state_session_id;
}

/* The library's state for zk_session(), handle open.  Caller holds mu. */
const char *
zkl_sess_state_name_locked(void)
{
	if (zkl_sess_state_connected_locked())
		return "connected";
	if (zkl_state_state == ZOO_EXPIRED_SESSION_STATE)
		return "expired";
	if (zkl_state_state == ZOO_AUTH_FAILED_STATE)
		return "auth failed";
	return zkl_state_ever_connected ? "disconnected" : "connecting";
}

/* A request is about to go out.  Caller holds mu. */
void
zkl_sess_state_sent_locked(void)
{
	zkl_state_requests_out++;
}

/* A request was answered, or will never be.  Caller holds mu. */
void
zkl_sess_state_answered_locked(void)
{
	zkl_state_requests_out--;
}

/*
 * Every request sent has its answer, or the connection is gone: the exit
 * drain's predicate (arg unused).  Caller holds mu.
 */
bool
zkl_sess_state_all_answered(void *arg)
{
	(void) arg;
	return zkl_state_requests_out == 0 ||
		zkl_state_state != ZOO_CONNECTED_STATE;
}
