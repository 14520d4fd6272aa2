/*-------------------------------------------------------------------------
 *
 * sql_api.c
 *	  The SQL-callable functions: argument checks, then the lock set, or
 *	  for the fleet views their readers (views.h).
 *
 * The lock functions are not STRICT because a NULL timeout means "use
 * lock_timeout, else wait for ever"; a NULL name gives NULL.
 *
 *-------------------------------------------------------------------------
 */
#define ZKL_SQL_LAYER
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "common/string.h"
#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "mb/pg_wchar.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "lockset.h"
#include "names.h"
#include "owner.h"
#include "views.h"

/*
 * How a function names its lock: text, bigint, or a pair of integers.
 * API_TEXT_TT is a text name with the timeout given as text: the overload
 * that keeps zk_lock('x', '1s') unambiguous next to zk_lock(int, int).
 */
typedef enum ZklApiKey
{
	API_TEXT,
	API_TEXT_TT,
	API_INT8,
	API_INT4_PAIR
} ZklApiKey;

/* Arguments that name the lock; the timeout follows them. */
static int
api_key_args(ZklApiKey kind)
{
	return kind == API_INT4_PAIR ? 2 : 1;
}

/* Whether the lock-naming arguments hold a NULL. */
static bool
api_key_is_null(FunctionCallInfo fcinfo, ZklApiKey kind)
{
	for (int i = 0; i < api_key_args(kind); i++)
		if (PG_ARGISNULL(i))
			return true;
	return false;
}

/*
 * The lock the arguments name.  A text name must be non-empty and within
 * the byte limit, and is escaped into its directory's znode name.  Integer
 * keys, like pg_advisory_lock's, map to "key:<bigint>" and
 * "key:<int>:<int>": the colon never appears in an escaped text name, so
 * key 42 and the text name '42' are different locks, as are key 42 and
 * the pair (0, 42).
 */
static ZklName
api_key_name(const char *component)
{
	ZklName		name;

	name.component = component;
	name.display = component;
	return name;
}

static ZklName
api_text_name(text *t)
{
	ZklName		name;
	int			len = VARSIZE_ANY_EXHDR(t);
	char	   *escaped;

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
	escaped = palloc(ZKL_ESCAPED_MAX);
	zkl_names_escape(VARDATA_ANY(t), len, escaped);
	name.display = text_to_cstring(t);
	name.component = escaped;
	return name;
}

static ZklName
api_name(FunctionCallInfo fcinfo, ZklApiKey kind)
{
	if (kind == API_INT8)
		return api_key_name(psprintf("key:" INT64_FORMAT, PG_GETARG_INT64(0)));
	if (kind == API_INT4_PAIR)
		return api_key_name(psprintf("key:%d:%d", PG_GETARG_INT32(0),
									 PG_GETARG_INT32(1)));
	return api_text_name(PG_GETARG_TEXT_PP(0));
}

/*
 * The locks an array argument names (text names, or bigint keys), as the
 * single forms name them; false when an element is NULL (the caller
 * returns NULL, as for a NULL name).  The array must be one-dimensional,
 * neither empty nor longer than ZKL_SET_MAX.
 */
static bool
api_names(FunctionCallInfo fcinfo, bool keys, ZklName **names, int *n)
{
	ArrayType  *arr = PG_GETARG_ARRAYTYPE_P(0);
	Datum	   *elems;
	bool	   *nulls;

	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("lock names must be a one-dimensional array")));
	if (keys)
		deconstruct_array(arr, INT8OID, sizeof(int64), FLOAT8PASSBYVAL,
						  TYPALIGN_DOUBLE, &elems, &nulls, n);
	else
		deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems,
						  &nulls, n);
	if (*n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lock name array must not be empty")));
	if (*n > ZKL_SET_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("too many locks in one set"),
				 errdetail("A set is limited to %d locks; this one has %d.",
						   ZKL_SET_MAX, *n)));
	for (int i = 0; i < *n; i++)
		if (nulls[i])
			return false;
	*names = palloc(sizeof(ZklName) * *n);
	for (int i = 0; i < *n; i++)
		(*names)[i] = keys ?
			api_key_name(psprintf("key:" INT64_FORMAT, DatumGetInt64(elems[i]))) :
			api_text_name(DatumGetTextPP(elems[i]));
	return true;
}

/*
 * The timeout argument in milliseconds, -1 for "wait for ever".  NULL
 * means lock_timeout when that is set.  Months count as 30 days, as in
 * extract(epoch from interval).
 */
static int64
api_timeout_arg(FunctionCallInfo fcinfo, int arg, bool as_text)
{
	Interval   *iv;
	double		usecs;

	if (PG_NARGS() <= arg || PG_ARGISNULL(arg))
		return LockTimeout > 0 ? LockTimeout : -1;
	if (as_text)
		iv = DatumGetIntervalP(DirectFunctionCall3(interval_in,
												   CStringGetDatum(TextDatumGetCString(PG_GETARG_DATUM(arg))),
												   ObjectIdGetDatum(InvalidOid),
												   Int32GetDatum(-1)));
	else
		iv = PG_GETARG_INTERVAL_P(arg);
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

static int64
api_timeout_ms(FunctionCallInfo fcinfo, ZklApiKey kind)
{
	return api_timeout_arg(fcinfo, api_key_args(kind), kind == API_TEXT_TT);
}

/* The waiting forms: the token, or 55P03 when the timeout passes. */
static Datum
api_lock(FunctionCallInfo fcinfo, ZklApiKey kind, bool shared, bool xact)
{
	ZklName		name;
	int64		timeout;
	int64		token;

	if (api_key_is_null(fcinfo, kind))
		PG_RETURN_NULL();
	name = api_name(fcinfo, kind);
	timeout = api_timeout_ms(fcinfo, kind);
	if (!zkl_lockset_acquire(&name, shared, xact, timeout, &token))
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("could not obtain ZooKeeper lock \"%s\"", name.display),
				 errdetail("The lock was not granted within " INT64_FORMAT " ms.",
						   timeout)));
	PG_RETURN_INT64(token);
}

/* The try forms: false when the timeout passes. */
static Datum
api_try_lock(FunctionCallInfo fcinfo, ZklApiKey kind, bool shared, bool xact)
{
	ZklName		name;
	int64		token;

	if (api_key_is_null(fcinfo, kind))
		PG_RETURN_NULL();
	name = api_name(fcinfo, kind);
	PG_RETURN_BOOL(zkl_lockset_acquire(&name, shared, xact,
									   api_timeout_ms(fcinfo, kind), &token));
}

/* Unlock forms are STRICT: a NULL argument never gets here. */
static Datum
api_unlock(FunctionCallInfo fcinfo, ZklApiKey kind, bool shared)
{
	ZklName		name = api_name(fcinfo, kind);

	PG_RETURN_BOOL(zkl_lockset_release(&name, shared));
}

/* The znode path of a lock's directory, for other clients. */
static Datum
api_lock_path(FunctionCallInfo fcinfo, ZklApiKey kind)
{
	ZklName		name = api_name(fcinfo, kind);

	PG_RETURN_TEXT_P(cstring_to_text(zkl_lockset_dir(&name)));
}

/* The waiting forms of a set: the tokens, or 55P03 when the timeout passes. */
static Datum
api_lock_set(FunctionCallInfo fcinfo, bool keys, bool shared, bool xact)
{
	ZklName    *names;
	int			n;
	int64		timeout;
	int64	   *tokens;
	Datum	   *out;
	int			blocked;

	if (PG_ARGISNULL(0) || !api_names(fcinfo, keys, &names, &n))
		PG_RETURN_NULL();
	timeout = api_timeout_arg(fcinfo, 1, false);
	tokens = palloc(sizeof(int64) * n);
	if (!zkl_lockset_acquire_set(names, n, shared, xact, timeout, tokens,
								 &blocked))
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("could not obtain ZooKeeper lock \"%s\"",
						names[blocked].display),
				 errdetail("It was not granted within " INT64_FORMAT " ms; none of the %d locks requested with it was taken.",
						   timeout, n)));
	out = palloc(sizeof(Datum) * n);
	for (int i = 0; i < n; i++)
		out[i] = Int64GetDatum(tokens[i]);
	PG_RETURN_ARRAYTYPE_P(construct_array(out, n, INT8OID, sizeof(int64),
										  FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

/* The try forms of a set: false when the timeout passes. */
static Datum
api_try_lock_set(FunctionCallInfo fcinfo, bool keys, bool shared, bool xact)
{
	ZklName    *names;
	int			n;
	int64	   *tokens;
	int			blocked;

	if (PG_ARGISNULL(0) || !api_names(fcinfo, keys, &names, &n))
		PG_RETURN_NULL();
	tokens = palloc(sizeof(int64) * n);
	PG_RETURN_BOOL(zkl_lockset_acquire_set(names, n, shared, xact,
										   api_timeout_arg(fcinfo, 1, false),
										   tokens, &blocked));
}

/* The unlock forms of a set are STRICT; a NULL element gives NULL. */
static Datum
api_unlock_set(FunctionCallInfo fcinfo, bool keys, bool shared)
{
	ZklName    *names;
	int			n;

	if (!api_names(fcinfo, keys, &names, &n))
		PG_RETURN_NULL();
	PG_RETURN_BOOL(zkl_lockset_release_set(names, n, shared));
}

/* Text names and bigint keys of a set: fn_set and fn_set_int8. */
#define API_SET(fn, call, ...) \
PG_FUNCTION_INFO_V1(fn##_set); \
PG_FUNCTION_INFO_V1(fn##_set_int8); \
Datum fn##_set(PG_FUNCTION_ARGS) { return call(fcinfo, false, __VA_ARGS__); } \
Datum fn##_set_int8(PG_FUNCTION_ARGS) { return call(fcinfo, true, __VA_ARGS__); }

API_SET(zk_lock, api_lock_set, false, false)
API_SET(zk_lock_shared, api_lock_set, true, false)
API_SET(zk_xact_lock, api_lock_set, false, true)
API_SET(zk_xact_lock_shared, api_lock_set, true, true)
API_SET(zk_try_lock, api_try_lock_set, false, false)
API_SET(zk_try_lock_shared, api_try_lock_set, true, false)
API_SET(zk_try_xact_lock, api_try_lock_set, false, true)
API_SET(zk_try_xact_lock_shared, api_try_lock_set, true, true)
API_SET(zk_unlock, api_unlock_set, false)
API_SET(zk_unlock_shared, api_unlock_set, true)

/*
 * One SQL function name, several C entry points: text name, bigint key
 * and (int, int) key, and for the acquiring functions a text name with a
 * text timeout.  The 1.0 install script binds the text forms by their
 * plain names; the 1.1 upgrade adds the others.
 */
#define API_KEYED(fn, call, ...) \
PG_FUNCTION_INFO_V1(fn); \
PG_FUNCTION_INFO_V1(fn##_int8); \
PG_FUNCTION_INFO_V1(fn##_int4); \
Datum fn(PG_FUNCTION_ARGS) { return call(fcinfo, API_TEXT, __VA_ARGS__); } \
Datum fn##_int8(PG_FUNCTION_ARGS) { return call(fcinfo, API_INT8, __VA_ARGS__); } \
Datum fn##_int4(PG_FUNCTION_ARGS) { return call(fcinfo, API_INT4_PAIR, __VA_ARGS__); }

#define API_KEYED_ONLY(fn, call) \
PG_FUNCTION_INFO_V1(fn); \
PG_FUNCTION_INFO_V1(fn##_int8); \
PG_FUNCTION_INFO_V1(fn##_int4); \
Datum fn(PG_FUNCTION_ARGS) { return call(fcinfo, API_TEXT); } \
Datum fn##_int8(PG_FUNCTION_ARGS) { return call(fcinfo, API_INT8); } \
Datum fn##_int4(PG_FUNCTION_ARGS) { return call(fcinfo, API_INT4_PAIR); }

#define API_ACQUIRING(fn, call, ...) \
API_KEYED(fn, call, __VA_ARGS__) \
PG_FUNCTION_INFO_V1(fn##_tt); \
Datum fn##_tt(PG_FUNCTION_ARGS) { return call(fcinfo, API_TEXT_TT, __VA_ARGS__); }

API_ACQUIRING(zk_lock, api_lock, false, false)
API_ACQUIRING(zk_lock_shared, api_lock, true, false)
API_ACQUIRING(zk_xact_lock, api_lock, false, true)
API_ACQUIRING(zk_xact_lock_shared, api_lock, true, true)
API_ACQUIRING(zk_try_lock, api_try_lock, false, false)
API_ACQUIRING(zk_try_lock_shared, api_try_lock, true, false)
API_ACQUIRING(zk_try_xact_lock, api_try_lock, false, true)
API_ACQUIRING(zk_try_xact_lock_shared, api_try_lock, true, true)
API_KEYED(zk_unlock, api_unlock, false)
API_KEYED(zk_unlock_shared, api_unlock, true)

PG_FUNCTION_INFO_V1(zk_unlock_all);
PG_FUNCTION_INFO_V1(zk_locks_info);
PG_FUNCTION_INFO_V1(zk_lock_queue_raw);
PG_FUNCTION_INFO_V1(zk_session);

API_KEYED_ONLY(zk_lock_path, api_lock_path)

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
		values[1] = CStringGetTextDatum(row->mode);
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

/*
 * Node data as text: as it is when it is valid in the database encoding,
 * else in bytea's hex form, so that any client's bytes can be shown.
 */
static Datum
api_data_text(const char *data)
{
	size_t		len = strlen(data);
	StringInfoData buf;

	if (pg_verifymbstr(data, (int) len, true))
		return CStringGetTextDatum(data);
	initStringInfo(&buf);
	appendStringInfoString(&buf, "\\x");
	for (size_t i = 0; i < len; i++)
		appendStringInfo(&buf, "%02x", (unsigned char) data[i]);
	return CStringGetTextDatum(buf.data);
}

/* An owner field (UTF-8) as text, or NULL when this database can't hold it. */
static bool
api_owner_text(const char *s, Datum *out)
{
	int			enc = GetDatabaseEncoding();

	if (s == NULL)
		return false;
	if (enc != PG_UTF8 && enc != PG_SQL_ASCII && !pg_is_ascii(s))
		return false;
	*out = CStringGetTextDatum(s);
	return true;
}

/*
 * An owner's acquired_at as timestamptz, parsed without raising: another
 * client's data must not break the view.
 */
static bool
api_owner_time(const char *s, Datum *out)
{
	char		workbuf[MAXDATELEN + MAXDATEFIELDS];
	char	   *field[MAXDATEFIELDS];
	int			ftype[MAXDATEFIELDS];
	int			nf;
	int			dtype;
	int			tz;
	struct pg_tm tt;
	fsec_t		fsec;
	TimestampTz ts;

	if (s == NULL || strlen(s) >= MAXDATELEN ||
		ParseDateTime(s, workbuf, sizeof(workbuf), field, ftype,
					  MAXDATEFIELDS, &nf) != 0 ||
		zkl_compat_decode_datetime(field, ftype, nf, &dtype, &tt, &fsec, &tz) != 0 ||
		dtype != DTK_DATE || tm2timestamp(&tt, fsec, &tz, &ts) != 0 ||
		!IS_VALID_TIMESTAMP(ts))
		return false;
	*out = TimestampTzGetDatum(ts);
	return true;
}

/* Every contender of a lock, from ZooKeeper, with its raw node data. */
Datum
zk_lock_queue_raw(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ZklName		name = api_name(fcinfo, API_TEXT);
	ListCell   *lc;

	InitMaterializedSRF(fcinfo, 0);
	foreach(lc, zkl_recipe_queue(zkl_lockset_dir(&name)))
	{
		ZklQueueRow *row = lfirst(lc);
		Datum		values[6];
		bool		nulls[6] = {0};

		values[0] = Int32GetDatum(row->position);
		values[1] = CStringGetTextDatum(row->mode);
		values[2] = BoolGetDatum(row->holds);
		values[3] = CStringGetTextDatum(row->node);
		values[4] = Int64GetDatum(row->token);
		values[5] = api_data_text(row->data);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/* An owner column of the fleet views, from a node's owner record. */
typedef enum ZklOwnerCol
{
	OWNER_CLUSTER_NAME,
	OWNER_HOST,
	OWNER_PORT,
	OWNER_PID,
	OWNER_DATABASE,
	OWNER_USER,
	OWNER_APPLICATION_NAME,
	OWNER_ACQUIRED_AT,
	OWNER_DATA					/* the node's data itself */
} ZklOwnerCol;

/* zk_lock_queue, zk_semaphore_queue and zk_fleet_locks show all of them. */
static const ZklOwnerCol api_owner_all[] = {
	OWNER_CLUSTER_NAME, OWNER_HOST, OWNER_PORT, OWNER_PID, OWNER_DATABASE,
	OWNER_USER, OWNER_APPLICATION_NAME, OWNER_ACQUIRED_AT, OWNER_DATA
};

/* zk_lock_waits shows who blocks, briefly. */
static const ZklOwnerCol api_owner_brief[] = {
	OWNER_CLUSTER_NAME, OWNER_HOST, OWNER_PID, OWNER_DATA
};

/*
 * The one filler of owner columns: cols[0..ncols) into values and nulls
 * from a node's data (NULL: no data, every column NULL).  Data that is
 * not an owner record leaves the owner columns NULL and shows in the data
 * column only: the views never fail on what they read.
 */
static void
api_owner_values(const char *data, const ZklOwnerCol *cols, int ncols,
				 Datum *values, bool *nulls)
{
	size_t		len = data ? strlen(data) : 0;
	char	   *buf = palloc(ZKL_OWNER_BUF(len));
	ZklOwner	o;

	(void) zkl_owner_parse(data ? data : "", len, buf, &o);
	for (int i = 0; i < ncols; i++)
	{
		switch (cols[i])
		{
			case OWNER_CLUSTER_NAME:
				nulls[i] = !api_owner_text(o.cluster_name, &values[i]);
				break;
			case OWNER_HOST:
				nulls[i] = !api_owner_text(o.host, &values[i]);
				break;
			case OWNER_PORT:
				values[i] = Int32GetDatum(o.port);
				nulls[i] = !o.has_port;
				break;
			case OWNER_PID:
				values[i] = Int32GetDatum(o.pid);
				nulls[i] = !o.has_pid;
				break;
			case OWNER_DATABASE:
				nulls[i] = !api_owner_text(o.database, &values[i]);
				break;
			case OWNER_USER:
				nulls[i] = !api_owner_text(o.user, &values[i]);
				break;
			case OWNER_APPLICATION_NAME:
				nulls[i] = !api_owner_text(o.application_name, &values[i]);
				break;
			case OWNER_ACQUIRED_AT:
				nulls[i] = !api_owner_time(o.acquired_at, &values[i]);
				break;
			case OWNER_DATA:
				nulls[i] = data == NULL;
				if (data != NULL)
					values[i] = api_data_text(data);
				break;
		}
	}
}

/*
 * Every contender of a lock in queue order, fleet-wide, with the owner
 * that zklock's nodes name in their data.  Data that is not an owner
 * record (other clients, or anything malformed) leaves the owner columns
 * NULL and shows in data only: the view never fails on what it reads.
 */
static Datum
api_queue_rows(FunctionCallInfo fcinfo, List *queue)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ListCell   *lc;

	InitMaterializedSRF(fcinfo, 0);
	foreach(lc, queue)
	{
		ZklQueueRow *row = lfirst(lc);
		Datum		values[14];
		bool		nulls[14] = {0};

		values[0] = Int32GetDatum(row->position);
		values[1] = CStringGetTextDatum(row->mode);
		values[2] = BoolGetDatum(row->holds);
		values[3] = CStringGetTextDatum(row->node);
		values[4] = Int64GetDatum(row->token);
		api_owner_values(row->data, api_owner_all, lengthof(api_owner_all),
						 values + 5, nulls + 5);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

static Datum
api_lock_queue(FunctionCallInfo fcinfo, ZklApiKey kind)
{
	ZklName		name = api_name(fcinfo, kind);

	return api_queue_rows(fcinfo, zkl_recipe_queue(zkl_lockset_dir(&name)));
}

/*
 * The fleet's wait-for graph: every zklock backend that has waited at
 * least deadlock_timeout, with each node in its way and that node's owner
 * (NULL for other clients' nodes).
 */
PG_FUNCTION_INFO_V1(zk_lock_waits);

Datum
zk_lock_waits(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ListCell   *lc;

	InitMaterializedSRF(fcinfo, 0);
	foreach(lc, zkl_deadlock_waits())
	{
		ZklWaitRow *row = lfirst(lc);
		Datum		values[10];
		bool		nulls[10] = {0};

		nulls[0] = !api_owner_text(row->waiter_cluster, &values[0]);
		values[1] = Int32GetDatum(row->waiter_pid);
		values[2] = CStringGetTextDatum(row->dir);
		values[3] = CStringGetTextDatum(row->waiter_node);
		values[4] = CStringGetTextDatum(row->blocker_node);
		values[5] = BoolGetDatum(row->blocker_holds);
		api_owner_values(row->blocker_data, api_owner_brief,
						 lengthof(api_owner_brief), values + 6, nulls + 6);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

API_KEYED_ONLY(zk_lock_queue, api_lock_queue)

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

/*
 * Semaphores: (name, max_leases, timeout).  Like the lock functions, they
 * are not STRICT (a NULL timeout means lock_timeout, else for ever); a
 * NULL name or max_leases gives NULL.
 */
static int
api_max_leases(FunctionCallInfo fcinfo)
{
	int32		max = PG_GETARG_INT32(1);

	if (max < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_leases must be at least 1"),
				 errdetail("The value given was %d.", max)));
	return max;
}

static Datum
api_semaphore(FunctionCallInfo fcinfo, bool xact, bool try)
{
	ZklName		name;
	int			max;
	int64		timeout;
	int64		token;
	bool		got;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_NULL();
	name = api_name(fcinfo, API_TEXT);
	max = api_max_leases(fcinfo);
	timeout = api_timeout_arg(fcinfo, 2, false);
	got = zkl_lockset_lease(&name, max, xact, timeout, &token);
	if (try)
		PG_RETURN_BOOL(got);
	if (!got)
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("could not obtain a lease of ZooKeeper semaphore \"%s\"",
						name.display),
				 errdetail("No lease of %d was free within " INT64_FORMAT " ms.",
						   max, timeout)));
	PG_RETURN_INT64(token);
}

PG_FUNCTION_INFO_V1(zk_semaphore);
PG_FUNCTION_INFO_V1(zk_try_semaphore);
PG_FUNCTION_INFO_V1(zk_xact_semaphore);
PG_FUNCTION_INFO_V1(zk_try_xact_semaphore);
PG_FUNCTION_INFO_V1(zk_semaphore_release);
PG_FUNCTION_INFO_V1(zk_semaphore_release_all);
PG_FUNCTION_INFO_V1(zk_semaphore_queue);

Datum
zk_semaphore(PG_FUNCTION_ARGS)
{
	return api_semaphore(fcinfo, false, false);
}

Datum
zk_try_semaphore(PG_FUNCTION_ARGS)
{
	return api_semaphore(fcinfo, false, true);
}

Datum
zk_xact_semaphore(PG_FUNCTION_ARGS)
{
	return api_semaphore(fcinfo, true, false);
}

Datum
zk_try_xact_semaphore(PG_FUNCTION_ARGS)
{
	return api_semaphore(fcinfo, true, true);
}

/* One session lease: the one with this token, else the newest. */
Datum
zk_semaphore_release(PG_FUNCTION_ARGS)
{
	ZklName		name;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	name = api_name(fcinfo, API_TEXT);
	PG_RETURN_BOOL(zkl_lockset_release_lease(&name, !PG_ARGISNULL(1),
											 PG_ARGISNULL(1) ? 0 : PG_GETARG_INT64(1)));
}

Datum
zk_semaphore_release_all(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(zkl_lockset_release_leases());
}

/* A semaphore's leases and queued acquirers, fleet-wide. */
Datum
zk_semaphore_queue(PG_FUNCTION_ARGS)
{
	ZklName		name = api_name(fcinfo, API_TEXT);

	return api_queue_rows(fcinfo, zkl_semaphore_queue(zkl_lockset_dir(&name)));
}

/* ms since 1970 (a znode's ctime) as a timestamptz. */
static TimestampTz
api_from_unix_ms(int64 ms)
{
	return (TimestampTz) (ms - (int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) *
						  SECS_PER_DAY * 1000) * 1000;
}

/*
 * Every lock and semaphore with a contender under zklock.root: the name
 * (NULL where the directory is no name zklock makes, or one this database
 * cannot hold), the counts, how long the first waiter has queued, and the
 * first holder with its owner as zk_lock_queue shows it.
 */
PG_FUNCTION_INFO_V1(zk_fleet_locks);

Datum
zk_fleet_locks(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			max_locks = PG_ARGISNULL(0) ? -1 : PG_GETARG_INT32(0);
	TimestampTz now = GetCurrentTimestamp();
	ListCell   *lc;

	if (max_locks < 0 && !PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_locks must not be negative")));
	InitMaterializedSRF(fcinfo, 0);
	foreach(lc, zkl_fleet_locks(max_locks))
	{
		ZklFleetRow *r = lfirst(lc);
		Datum		values[16];
		bool		nulls[16] = {0};
		char	   *name = palloc(strlen(r->component) + 1);
		size_t		len;

		if (zkl_names_unescape(r->component, name, &len) &&
			memchr(name, '\0', len) == NULL &&
			pg_verifymbstr(name, (int) len, true))
			values[0] = CStringGetTextDatum(name);
		else
			nulls[0] = true;
		values[1] = CStringGetTextDatum(r->path);
		values[2] = CStringGetTextDatum(r->kind);
		values[3] = Int32GetDatum(r->holders);
		values[4] = Int32GetDatum(r->waiting);
		if (r->oldest_wait_ms != 0)
		{
			Interval   *iv = palloc0(sizeof(Interval));

			iv->time = Max(now - api_from_unix_ms(r->oldest_wait_ms), 0);
			values[5] = IntervalPGetDatum(iv);
		}
		else
			nulls[5] = true;
		if (r->holder_node)
		{
			values[6] = CStringGetTextDatum(r->holder_node);
			api_owner_values(r->holder_data, api_owner_all,
							 lengthof(api_owner_all), values + 7, nulls + 7);
		}
		else
			for (int i = 6; i < 16; i++)
				nulls[i] = true;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
