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

#include "guc.h"
#include "names.h"

char	   *zkl_hosts = NULL;
char	   *zkl_root = NULL;
int			zkl_session_timeout = 30000;
int			zkl_connect_timeout = 10000;
int			zkl_on_lock_loss = ZKL_LOSS_ERROR;
char	   *zkl_auth = NULL;
bool		zkl_preloaded = false;
int			zkl_node_naming = ZKL_NAMING_MUTEX;

static const struct config_enum_entry guc_naming_options[] = {
	{"mutex", ZKL_NAMING_MUTEX, false},
	{"readwrite", ZKL_NAMING_READWRITE, false},
	{NULL, 0, false}
};

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
	/*
	 * Credentials: superuser-only and hidden from SHOW ALL and pg_settings
	 * for everyone else.  No check hook, since a rejected value would be
	 * echoed in the error; the form is checked when a session opens.
	 */
	DefineCustomStringVariable("zklock.auth",
							   "ZooKeeper digest credentials (user:password) for new sessions.",
							   "With it set, lock nodes can be changed or deleted only by this identity.",
							   &zkl_auth,
							   "",
							   PGC_SUSET,
							   GUC_SUPERUSER_ONLY | GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE,
							   NULL, NULL, NULL);
	DefineCustomEnumVariable("zklock.node_naming",
							 "Node names of exclusive locks: Curator's InterProcessMutex or InterProcessReadWriteLock.",
							 "mutex names exclusive nodes -lock-, readwrite names them -__WRIT__; shared nodes are -__READ__ either way.",
							 &zkl_node_naming,
							 ZKL_NAMING_MUTEX,
							 guc_naming_options,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);
	MarkGUCPrefixReserved("zklock");
}

/* The infix of exclusive lock nodes under zklock.node_naming. */
const char *
zkl_guc_exclusive_infix(void)
{
	return zkl_node_naming == ZKL_NAMING_READWRITE ?
		ZKL_WRITE_INFIX : ZKL_EXCLUSIVE_INFIX;
}

/* Whether new sessions authenticate (zklock.auth is set). */
bool
zkl_use_auth(void)
{
	return zkl_auth != NULL && zkl_auth[0] != '\0';
}
