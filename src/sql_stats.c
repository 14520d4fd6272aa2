/*-------------------------------------------------------------------------
 *
 * sql_stats.c
 *	  The statistics views' functions: zk_stat_locks, zk_stat_sessions and
 *	  zk_stat_reset.  Who sees what follows pg_stat_statements: members of
 *	  pg_read_all_stats see every row, others the rows of their own user.
 *
 *-------------------------------------------------------------------------
 */
#define ZKL_SQL_LAYER
#include "postgres.h"

#include "catalog/pg_authid.h"
#include "commands/dbcommands.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "stats.h"

PG_FUNCTION_INFO_V1(zk_stat_locks_info);
PG_FUNCTION_INFO_V1(zk_stat_sessions_info);
PG_FUNCTION_INFO_V1(zk_stat_reset);

static const char *
stat_mode_name(ZklStatMode mode)
{
	switch (mode)
	{
		case ZKL_STAT_EXCLUSIVE:
			return "exclusive";
		case ZKL_STAT_SHARED:
			return "shared";
		case ZKL_STAT_LEASE:
			return "lease";
	}
	return "unknown";
}

/* One row per database, user, lock name and mode. */
Datum
zk_stat_locks_info(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	bool		all = has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_STATS);
	int64		dealloc;
	List	   *rows = zkl_stats_lock_rows(all, &dealloc);
	ListCell   *lc;

	InitMaterializedSRF(fcinfo, 0);
	foreach(lc, rows)
	{
		ZklLockStatRow *r = lfirst(lc);
		Datum		values[15];
		bool		nulls[15] = {0};
		char	   *db = get_database_name(r->dbid);
		char	   *user = GetUserNameFromId(r->userid, true);
		int			i = 0;

		values[i] = db ? CStringGetTextDatum(db) : (Datum) 0;
		nulls[i++] = db == NULL;
		values[i] = user ? CStringGetTextDatum(user) : (Datum) 0;
		nulls[i++] = user == NULL;
		values[i++] = CStringGetTextDatum(r->name);
		values[i++] = CStringGetTextDatum(stat_mode_name(r->mode));
		values[i++] = Int64GetDatum(r->c.acquisitions);
		values[i++] = Int64GetDatum(r->c.waited);
		values[i++] = Float8GetDatum(r->c.wait_time_total);
		values[i++] = Float8GetDatum(r->c.wait_time_max);
		values[i++] = Int64GetDatum(r->c.timeouts);
		values[i++] = Int64GetDatum(r->c.cancels);
		values[i++] = Int64GetDatum(r->c.deadlocks);
		values[i++] = Int64GetDatum(r->c.lost);
		values[i++] = Int64GetDatum(r->c.commits_refused);
		values[i++] = Float8GetDatum(r->c.hold_time_total);
		values[i++] = Float8GetDatum(r->c.hold_time_max);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/* The cluster's session counters, one row. */
Datum
zk_stat_sessions_info(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	int64		v[ZKL_SS_COUNT];
	int64		dealloc;
	TimestampTz reset;
	Datum		values[11];
	bool		nulls[11] = {0};

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	zkl_stats_session_values(v, &dealloc, &reset);
	values[0] = Int64GetDatum(v[ZKL_SS_OPENED]);
	values[1] = Int64GetDatum(v[ZKL_SS_EXPIRED]);
	values[2] = Int64GetDatum(v[ZKL_SS_RECONNECTS]);
	values[3] = Int64GetDatum(v[ZKL_SS_PROOFS]);
	values[4] = Int64GetDatum(v[ZKL_SS_PROOFS_FAILED]);
	values[5] = Int64GetDatum(v[ZKL_SS_REQUESTS]);
	values[6] = Int64GetDatum(v[ZKL_SS_NOTIFICATIONS]);
	values[7] = Int64GetDatum(v[ZKL_SS_REFUSED]);
	values[8] = Int64GetDatum(v[ZKL_SS_OPEN]);
	values[9] = Int64GetDatum(dealloc);
	values[10] = TimestampTzGetDatum(reset);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/* Reset both views; who may call it is a matter of grants. */
Datum
zk_stat_reset(PG_FUNCTION_ARGS)
{
	zkl_stats_reset();
	PG_RETURN_VOID();
}
