/*-------------------------------------------------------------------------
 *
 * session_log.c
 *	  The client library's log, relayed to the server log.
 *
 * The library calls zkl_sess_log_callback from any of its threads: it only
 * copies the line into this file's buffer under mu, at most
 * ZKL_LOG_PER_MINUTE a minute.  The main thread emits the kept lines with
 * ereport (zkl_sess_log_flush), to the server log only: they concern the
 * connection, not the query.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <string.h>

#include "session_int.h"

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

/* The library's log callback; any thread, plain C. */
void
zkl_sess_log_callback(const char *message)
{
	ZklStamp	now;
	size_t		len;

	zkl_stamp_now(&now);
	pthread_mutex_lock(&zkl_sess_sync_mu);
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
