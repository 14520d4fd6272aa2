/*-------------------------------------------------------------------------
 *
 * session_log.c
 *	  The client library's log, relayed to the server log.
 *
 * The library calls zkl_sess_log_callback from any of its threads: it only
 * copies the line into this file's buffer under mu, at most
 * ZKL_LOG_PER_MINUTE a minute.  It also notes, from every line, the
 * servers that closed a new connection at once, before their first
 * answer (as a server over its maxClientCnxns does): the connect wait
 * tells that apart from a server that never answers.  The main thread emits the kept lines with
 * ereport (zkl_sess_log_flush), to the server log only: they concern the
 * connection, not the query.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <errno.h>
#include <string.h>

#include "session_int.h"
#include "stats.h"

/* Messages of the client library kept between two flushes, and the rate. */
#define ZKL_LOG_SLOTS 16
#define ZKL_LOG_MSG_LEN 512
#define ZKL_LOG_PER_MINUTE 30

/* Under mu. */
static int	zkl_log_n = 0;
static char zkl_log_lines[ZKL_LOG_SLOTS][ZKL_LOG_MSG_LEN];
static int64_t zkl_log_window_ms = 0;
static int	zkl_log_in_window = 0;
static int	zkl_log_dropped = 0;

/* Servers that closed a connection at once since the reset.  Under mu. */
#define ZKL_LOG_CLOSED_MAX 16
#define ZKL_LOG_SERVER_LEN 64
static int	zkl_log_closed_n = 0;
static char zkl_log_closed[ZKL_LOG_CLOSED_MAX][ZKL_LOG_SERVER_LEN];

/*
 * A line that says a server closed the connection before answering:
 * "Socket [host:port] zk retcode=-4, errno=<EHOSTDOWN>(...): failed while
 * receiving a server response" (the library's errno for end of file).
 * Note the server once.  Returns whether the line was one.  Under mu.
 */
static bool
log_note_closed_locked(const char *message)
{
	char		eof[32];
	const char *p = strstr(message, "Socket ");
	const char *q;
	size_t		len;

	snprintf(eof, sizeof(eof), "errno=%d(", EHOSTDOWN);
	if (p == NULL || strstr(message, eof) == NULL ||
		strstr(message, "failed while receiving a server response") == NULL ||
		(q = strstr(p, " zk retcode")) == NULL)
		return false;
	p += strlen("Socket ");
	len = Min((size_t) (q - p), (size_t) ZKL_LOG_SERVER_LEN - 1);
	for (int i = 0; i < zkl_log_closed_n; i++)
		if (strncmp(zkl_log_closed[i], p, len) == 0 &&
			zkl_log_closed[i][len] == '\0')
			return true;
	if (zkl_log_closed_n < ZKL_LOG_CLOSED_MAX)
	{
		memcpy(zkl_log_closed[zkl_log_closed_n], p, len);
		zkl_log_closed[zkl_log_closed_n++][len] = '\0';
	}
	return true;
}

/* Forget the servers that closed at once (a new session begins). */
void
zkl_sess_log_closed_reset_locked(void)
{
	zkl_log_closed_n = 0;
}

/* How many servers closed at once since the reset, listed into list. */
int
zkl_sess_log_closed_locked(char *list, size_t size)
{
	size_t		used = 0;

	if (size > 0)
		list[0] = '\0';
	for (int i = 0; i < zkl_log_closed_n && used + 1 < size; i++)
		used += snprintf(list + used, size - used, "%s%s", i ? ", " : "",
						 zkl_log_closed[i]);
	return zkl_log_closed_n;
}

/* The library's log callback; any thread, plain C. */
void
zkl_sess_log_callback(const char *message)
{
	ZklStamp	now;
	size_t		len;
	bool		closed;

	zkl_stamp_now(&now);
	pthread_mutex_lock(&zkl_sess_sync_mu);
	closed = log_note_closed_locked(message);
	if (now.boot_ms - zkl_log_window_ms > 60000)
	{
		zkl_log_window_ms = now.boot_ms;
		zkl_log_in_window = 0;
	}
	if (zkl_log_n >= ZKL_LOG_SLOTS || zkl_log_in_window >= ZKL_LOG_PER_MINUTE)
		zkl_log_dropped++;
	else
	{
		char	   *slot = zkl_log_lines[zkl_log_n++];

		snprintf(slot, ZKL_LOG_MSG_LEN, "%s", message);
		len = strlen(slot);
		while (len > 0 && (slot[len - 1] == '\n' || slot[len - 1] == '\r'))
			slot[--len] = '\0';
		zkl_log_in_window++;
	}
	pthread_mutex_unlock(&zkl_sess_sync_mu);
	if (closed)
	{
		zkl_stats_session(ZKL_SS_REFUSED, 1);
		zkl_sess_sync_kick();	/* the connect wait may end sooner */
	}
}

/* Emit the kept lines to the server log; main thread only. */
void
zkl_sess_log_flush(void)
{
	char		lines[ZKL_LOG_SLOTS][ZKL_LOG_MSG_LEN];
	int			n;
	int			dropped;

	pthread_mutex_lock(&zkl_sess_sync_mu);
	n = zkl_log_n;
	memcpy(lines, zkl_log_lines, sizeof(lines[0]) * n);
	dropped = zkl_log_dropped;
	zkl_log_n = 0;
	zkl_log_dropped = 0;
	pthread_mutex_unlock(&zkl_sess_sync_mu);

	/* Errors and warnings to the log; informational lines are debug output. */
	for (int i = 0; i < n; i++)
		ereport(strstr(lines[i], "ZOO_INFO@") ? DEBUG1 :
				strstr(lines[i], "ZOO_DEBUG@") ? DEBUG2 : LOG,
				(errmsg_internal("zookeeper client: %s", lines[i]),
				 errhidestmt(true)));
	if (dropped > 0)
		ereport(LOG,
				(errmsg_internal("zookeeper client: %d further messages not logged",
								 dropped)));
}
