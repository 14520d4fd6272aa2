/*-------------------------------------------------------------------------
 *
 * sql_api.c
 *	  The SQL-callable functions: argument checks, then the lock set.
 *
 * The lock functions are not STRICT because a NULL timeout means "use
 * lock_timeout, else wait for ever"; a NULL name gives NULL.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "lockset.h"

PG_FUNCTION_INFO_V1(zk_lock);
PG_FUNCTION_INFO_V1(zk_lock_shared);
PG_FUNCTION_INFO_V1(zk_try_lock);
PG_FUNCTION_INFO_V1(zk_try_lock_shared);
PG_FUNCTION_INFO_V1(zk_xact_lock);
PG_FUNCTION_INFO_V1(zk_xact_lock_shared);
PG_FUNCTION_INFO_V1(zk_try_xact_lock);
PG_FUNCTION_INFO_V1(zk_try_xact_lock_shared);
PG_FUNCTION_INFO_V1(zk_unlock);
PG_FUNCTION_INFO_V1(zk_unlock_shared);
PG_FUNCTION_INFO_V1(zk_unlock_all);
PG_FUNCTION_INFO_V1(zk_locks_info);
PG_FUNCTION_INFO_V1(zk_lock_path);
PG_FUNCTION_INFO_V1(zk_lock_queue_raw);
PG_FUNCTION_INFO_V1(zk_session);

/* The lock name argument, checked: non-empty, within the byte limit. */
static char *
api_name(FunctionCallInfo fcinfo)
{
	text	   *t = PG_GETARG_TEXT_PP(0);
	int			len = VARSIZE_ANY_EXHDR(t);

	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lock name must not be empty")));
	if (len > ZKL_NAME_MAX_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lock name is too long"),
				 errdetail("Lock names are limited to %d bytes; this one has %d.",
						   ZKL_NAME_MAX_BYTES, len)));
	return text_to_cstring(t);
}

/*
 * The timeout argument in milliseconds, -1 for "wait for ever".  NULL
 * means lock_timeout when that is set.  Months count as 30 days, as in
 * extract(epoch from interval).
 */
static int64
api_timeout_ms(FunctionCallInfo fcinfo)
{
	Interval   *iv;
	double		usecs;

	if (PG_NARGS() < 2 || PG_ARGISNULL(1))
		return LockTimeout > 0 ? LockTimeout : -1;
	iv = PG_GETARG_INTERVAL_P(1);
	usecs = (double) iv->time + (double) iv->day * USECS_PER_DAY +
		(double) iv->month * DAYS_PER_MONTH * USECS_PER_DAY;
	if (usecs < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lock timeout must not be negative")));
	if (usecs / 1000.0 >= (double) PG_INT64_MAX / 2)
		return -1;
	return (int64) ceil(usecs / 1000.0);
}

/* The waiting forms: the token, or 55P03 when the timeout passes. */
static Datum
api_lock(FunctionCallInfo fcinfo, bool shared, bool xact)
{
	char	   *name;
	int64		timeout;
	int64		token;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	name = api_name(fcinfo);
	timeout = api_timeout_ms(fcinfo);
	if (!zkl_lockset_acquire(name, shared, xact, timeout, &token))
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("could not obtain ZooKeeper lock \"%s\"", name),
				 errdetail("The lock was not granted within " INT64_FORMAT " ms.",
						   timeout)));
	PG_RETURN_INT64(token);
}

/* The try forms: false when the timeout passes. */
static Datum
api_try_lock(FunctionCallInfo fcinfo, bool shared, bool xact)
{
	char	   *name;
	int64		token;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	name = api_name(fcinfo);
	PG_RETURN_BOOL(zkl_lockset_acquire(name, shared, xact,
									   api_timeout_ms(fcinfo), &token));
}

Datum
zk_lock(PG_FUNCTION_ARGS)
{
	return api_lock(fcinfo, false, false);
}

Datum
zk_lock_shared(PG_FUNCTION_ARGS)
{
	return api_lock(fcinfo, true, false);
}

Datum
zk_xact_lock(PG_FUNCTION_ARGS)
{
	return api_lock(fcinfo, false, true);
}

Datum
zk_xact_lock_shared(PG_FUNCTION_ARGS)
{
	return api_lock(fcinfo, true, true);
}

Datum
zk_try_lock(PG_FUNCTION_ARGS)
{
	return api_try_lock(fcinfo, false, false);
}

Datum
zk_try_lock_shared(PG_FUNCTION_ARGS)
{
	return api_try_lock(fcinfo, true, false);
}

Datum
zk_try_xact_lock(PG_FUNCTION_ARGS)
{
	return api_try_lock(fcinfo, false, true);
}

Datum
zk_try_xact_lock_shared(PG_FUNCTION_ARGS)
{
	return api_try_lock(fcinfo, true, true);
}

Datum
zk_unlock(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(zkl_lockset_release(api_name(fcinfo), false));
}

Datum
zk_unlock_shared(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(zkl_lockset_release(api_name(fcinfo), true));
}

Datum
zk_unlock_all(PG_FUNCTION_ARGS)
{
	zkl_lockset_release_all();
	PG_RETURN_VOID();
}

static const char *
api_health(ZklLockHealth h)
{
	switch (h)
	{
		case ZKL_HEALTH_HELD:
			return "held";
		case ZKL_HEALTH_IN_DOUBT:
			return "in doubt";
		case ZKL_HEALTH_LOST:
			return "lost";
	}
	return "unknown";
}

/* This backend's locks, for the zk_locks view. */
Datum
zk_locks_info(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ListCell   *lc;

	InitMaterializedSRF(fcinfo, 0);
	foreach(lc, zkl_lockset_rows())
	{
		ZklLockRow *row = lfirst(lc);
		Datum		values[8];
		bool		nulls[8] = {0};

		values[0] = CStringGetTextDatum(row->name);
		values[1] = CStringGetTextDatum(row->shared ? "shared" : "exclusive");
		values[2] = CStringGetTextDatum(row->xact ? "transaction" : "session");
		values[3] = Int32GetDatum(row->holds);
		values[4] = CStringGetTextDatum(row->node);
		values[5] = Int64GetDatum(row->token);
		values[6] = TimestampTzGetDatum(row->acquired_at);
		values[7] = CStringGetTextDatum(api_health(row->health));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/* The znode path of a lock's directory, for other clients. */
Datum
zk_lock_path(PG_FUNCTION_ARGS)
{
	PG_RETURN_TEXT_P(cstring_to_text(zkl_lockset_dir(api_name(fcinfo))));
}

/* Every contender of a lock, from ZooKeeper; zk_lock_queue() parses it. */
Datum
zk_lock_queue_raw(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *name = api_name(fcinfo);
	ListCell   *lc;

	InitMaterializedSRF(fcinfo, 0);
	foreach(lc, zkl_lockset_queue(name))
	{
		ZklQueueRow *row = lfirst(lc);
		Datum		values[6];
		bool		nulls[6] = {0};

		values[0] = Int32GetDatum(row->position);
		values[1] = CStringGetTextDatum(row->shared ? "shared" : "exclusive");
		values[2] = BoolGetDatum(row->holds);
		values[3] = CStringGetTextDatum(row->node);
		values[4] = Int64GetDatum(row->token);
		values[5] = CStringGetTextDatum(row->data);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/* This backend's ZooKeeper session; never opens one. */
Datum
zk_session(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	ZklSessionInfo info;
	int			locks;
	Datum		values[6];
	bool		nulls[6] = {0};

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	zkl_lockset_session(&info, &locks);
	values[0] = CStringGetTextDatum(info.state);
	if (info.session_id != 0)
		values[1] = CStringGetTextDatum(psprintf("0x%llx",
												 (unsigned long long) info.session_id));
	else
		nulls[1] = true;
	if (info.server)
		values[2] = CStringGetTextDatum(info.server);
	else
		nulls[2] = true;
	values[3] = Int32GetDatum(info.timeout_ms);
	nulls[3] = info.timeout_ms == 0;
	values[4] = Int32GetDatum(locks);
	values[5] = Int64GetDatum((int64) info.watch_events);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}
