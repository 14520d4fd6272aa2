/*-------------------------------------------------------------------------
 *
 * session_log.c
 *	  The client library's log, relayed to the server log.
 *
 * The library calls session_log from any of its threads: it only copies
 * the line into zkl_shared under mu, at most ZKL_LOG_PER_MINUTE a minute.
 * The main thread emits the kept lines with ereport (session_flush_log),
 * to the server log only: they concern the connection, not the query.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <string.h>

#include "session_int.h"

/* The library's log callback; any thread, plain C. */
void
session_log(const char *message)
{
	ZklStamp	now;
	size_t		len;

	zkl_stamp_now(&now);
	pthread_mutex_lock(&zkl_shared.mu);
	if (now.boot_ms - zkl_shared.log_window_ms > 60000)
	{
		zkl_shared.log_window_ms = now.boot_ms;
		zkl_shared.log_in_window = 0;
	}
	if (zkl_shared.nlog >= ZKL_LOG_SLOTS ||
		zkl_shared.log_in_window >= ZKL_LOG_PER_MINUTE)
		zkl_shared.log_dropped++;
	else
	{
		char	   *slot = zkl_shared.log[zkl_shared.nlog++];

		snprintf(slot, ZKL_LOG_MSG_LEN, "%s", message);
		len = strlen(slot);
		while (len > 0 && (slot[len - 1] == '\n' || slot[len - 1] == '\r'))
			slot[--len] = '\0';
		zkl_shared.log_in_window++;
	}
	pthread_mutex_unlock(&zkl_shared.mu);
}

/* Emit the kept lines to the server log; main thread only. */
void
session_flush_log(void)
{
	char		lines[ZKL_LOG_SLOTS][ZKL_LOG_MSG_LEN];
	int			n;
	int			dropped;

	pthread_mutex_lock(&zkl_shared.mu);
	n = zkl_shared.nlog;
	memcpy(lines, zkl_shared.log, sizeof(lines[0]) * n);
	dropped = zkl_shared.log_dropped;
	zkl_shared.nlog = 0;
	zkl_shared.log_dropped = 0;
	pthread_mutex_unlock(&zkl_shared.mu);

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
