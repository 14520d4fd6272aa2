/*-------------------------------------------------------------------------
 *
 * guc.c
 *	  Every zklock.* setting.
 *
 * zklock.hosts and zklock.root are superuser-only: the first decides which
 * ensemble a backend trusts, the second which namespace every cluster of a
 * fleet must agree on.  Timeouts apply to the next session opened.
 * zklock.on_lock_loss picks what a lost lock does to its backend.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/guc.h"

#include "zklock.h"

char	   *zkl_hosts = NULL;
char	   *zkl_root = NULL;
int			zkl_session_timeout = 30000;
int			zkl_connect_timeout = 10000;
int			zkl_on_lock_loss = ZKL_LOSS_ERROR;

static const struct config_enum_entry guc_loss_options[] = {
	{"error", ZKL_LOSS_ERROR, false},
	{"terminate", ZKL_LOSS_TERMINATE, false},
	{NULL, 0, false}
};

/*
 * The root must be an absolute znode path below "/" that is not ZooKeeper's
 * own /zookeeper tree, without empty, "." or ".." components.
 */
static bool
guc_check_root(char **newval, void **extra, GucSource source)
{
	const char *p = *newval;

	(void) extra;
	(void) source;
	if (p == NULL || p[0] != '/' || p[1] == '\0')
	{
		GUC_check_errdetail("The root must be an absolute ZooKeeper path other than \"/\".");
		return false;
	}
	if (strncmp(p, "/zookeeper", 10) == 0 && (p[10] == '\0' || p[10] == '/'))
	{
		GUC_check_errdetail("The root must not be inside ZooKeeper's own \"/zookeeper\" tree.");
		return false;
	}
	while (*p == '/')
	{
		const char *end = strchr(p + 1, '/');
		size_t		len = end ? (size_t) (end - p - 1) : strlen(p + 1);

		if (len == 0 || (len == 1 && p[1] == '.') ||
			(len == 2 && p[1] == '.' && p[2] == '.'))
		{
			GUC_check_errdetail("The root must not contain empty, \".\" or \"..\" components, nor end with \"/\".");
			return false;
		}
		p += len + 1;
	}
	return true;
}

void
zkl_guc_define(void)
{
	DefineCustomStringVariable("zklock.hosts",
							   "ZooKeeper connect string (host:port,...[/chroot]).",
							   "Used when a backend opens its ZooKeeper session.",
							   &zkl_hosts,
							   "",
							   PGC_SUSET,
							   0,
							   NULL, NULL, NULL);
	DefineCustomStringVariable("zklock.root",
							   "ZooKeeper path under which lock directories live.",
							   "Every cluster that shares locks must use the same root.",
							   &zkl_root,
							   "/zklock",
							   PGC_SUSET,
							   0,
							   guc_check_root, NULL, NULL);
	DefineCustomIntVariable("zklock.session_timeout",
							"ZooKeeper session timeout requested for new sessions.",
							"The ensemble may negotiate it into its own bounds. Locks held by a backend that stopped answering are freed after it.",
							&zkl_session_timeout,
							30000, 100, 3600000,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("zklock.connect_timeout",
							"Time allowed to connect to ZooKeeper before an error.",
							NULL,
							&zkl_connect_timeout,
							10000, 100, 3600000,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomEnumVariable("zklock.on_lock_loss",
							 "What to do when a held lock's session is lost.",
							 "error refuses every commit until the lock is released; terminate ends the backend.",
							 &zkl_on_lock_loss,
							 ZKL_LOSS_ERROR,
							 guc_loss_options,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	MarkGUCPrefixReserved("zklock");
}
