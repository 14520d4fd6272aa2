/*-------------------------------------------------------------------------
 *
 * zklock.c
 *	  Module magic, _PG_init, and the hooks that make PostgreSQL commands
 *	  treat zklock's locks as they treat advisory locks.
 *
 * _PG_init only defines settings and installs hooks: it may run in the
 * postmaster (shared_preload_libraries), and threads do not survive fork,
 * so no ZooKeeper session is opened before a backend's first zk_* call.
 *
 * DISCARD ALL (a pooler's reset query) releases this backend's session
 * locks, as it releases advisory locks.  DROP EXTENSION zklock is refused
 * while this backend holds a lock, which could otherwise be neither seen
 * nor released.  Both hooks cost nothing for other statements.
 *
 * The planner hook (sql_advisory.c) makes pg_advisory_* calls on the keys
 * zklock.fleet_advisory_keys lists take zklock's lock of the key too.
 *
 *-------------------------------------------------------------------------
 */
#define ZKL_SQL_LAYER
#include "postgres.h"

#include "catalog/objectaccess.h"
#include "catalog/pg_extension.h"
#include "commands/extension.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "tcop/utility.h"

#include "compat.h"
#include "guc.h"
#include "lockset.h"
#include "sql_advisory.h"
#include "stats.h"
#include "tls_shared.h"

ZKL_MODULE_MAGIC;

static ProcessUtility_hook_type zkl_prev_utility = NULL;
static object_access_hook_type zkl_prev_object_access = NULL;

/* DISCARD ALL ends session locks once the command itself went through. */
static void
zkl_utility(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
			ProcessUtilityContext context, ParamListInfo params,
			QueryEnvironment *queryEnv, DestReceiver *dest,
			QueryCompletion *qc)
{
	Node	   *stmt = pstmt->utilityStmt;

	if (zkl_prev_utility)
		zkl_prev_utility(pstmt, queryString, readOnlyTree, context, params,
						 queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);
	if (IsA(stmt, DiscardStmt) &&
		((DiscardStmt *) stmt)->target == DISCARD_ALL)
	{
		zkl_lockset_release_all();
		zkl_advisory_forget();
	}
}

/* Refuse to drop the extension under this backend's own locks. */
static void
zkl_object_access(ObjectAccessType access, Oid classId, Oid objectId,
				  int subId, void *arg)
{
	if (zkl_prev_object_access)
		zkl_prev_object_access(access, classId, objectId, subId, arg);
	if (access != OAT_DROP || classId != ExtensionRelationId ||
		!zkl_lockset_holds_any())
		return;
	if (objectId != get_extension_oid("zklock", true))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_IN_USE),
			 errmsg("cannot drop extension zklock while this session holds ZooKeeper locks"),
			 errdetail("Its locks could no longer be seen or released by name."),
			 errhint("Release them with zk_unlock_all() and end the transaction that holds transaction locks, then drop the extension.")));
}

void
_PG_init(void)
{
	zkl_guc_preloaded = process_shared_preload_libraries_in_progress;
	zkl_guc_define();
	if (process_shared_preload_libraries_in_progress)
	{
		zkl_stats_init();
		zkl_tls_shared_init();
		zkl_lockset_preload();
	}
	zkl_prev_utility = ProcessUtility_hook;
	ProcessUtility_hook = zkl_utility;
	zkl_prev_object_access = object_access_hook;
	object_access_hook = zkl_object_access;
	zkl_advisory_init();
}
