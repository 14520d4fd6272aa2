/*-------------------------------------------------------------------------
 *
 * sql_advisory.c
 *	  PostgreSQL's own pg_advisory_* functions, made fleet-wide for the keys
 *	  zklock.fleet_advisory_keys lists: migration tools that serialize
 *	  their deployers with an advisory lock serialize them across clusters
 *	  without a change.
 *
 * The planner hook rewrites every call of a builtin pg_advisory_* function
 * (found by its fixed OID, whatever search_path says or how the call was
 * written) into a call of zklock's wrapper of the same signature
 * (zk_fleet_advisory_*, created by the 1.3 script; only functions of the
 * zklock extension that are this library's count, see adv_find_wrapper).
 * Every query a backend
 * runs is planned first: statements, prepared statements, PL/pgSQL (SPI),
 * SQL functions, views and rules, after they are expanded.  The calls a
 * SQL function's body brings in when the planner inlines it are found
 * again once the planner has processed the expressions (the hook on the
 * final upper relation).  The rewrite does not depend on the setting: a
 * wrapper reads it when it runs, so a plan cached before the setting
 * changed follows the new value, and a key the setting does not list
 * costs the builtin plus one look-up.  In a database without the wrappers
 * (zklock not installed there, or not updated to 1.3) the calls are left
 * alone, and the queries are not walked; plans made then are made again
 * once the wrappers arrive (adv_proc_changed).
 *
 * A listed key is taken in PostgreSQL first, with the builtin itself (its
 * queue, lock_timeout, cancel, deadlock detection, pg_locks), then in
 * ZooKeeper as zk_lock(key) takes it (the lock set: zk_locks, statistics,
 * log_lock_waits).  Local first, so that deployers of one cluster queue
 * in PostgreSQL and only one at a time queues in ZooKeeper; a session
 * without the setting still conflicts with a routed holder on its own
 * cluster.  When the ZooKeeper part fails (a timeout, a cancel, an error)
 * the local part is given back before the call returns or raises.  A
 * release gives ZooKeeper back first, then PostgreSQL, so a local waiter
 * woken finds the fleet's lock free.
 *
 * The session-scope holds a wrapper took are counted here, so that
 * pg_advisory_unlock and pg_advisory_unlock_all give back what was
 * routed even after the setting changed; transaction-scope holds end with
 * the transaction, in both places, as they always do.
 *
 *-------------------------------------------------------------------------
 */
#define ZKL_SQL_LAYER
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/transam.h"
#include "catalog/dependency.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/planner.h"
#include "storage/lock.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/plancache.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "guc.h"
#include "lockset.h"
#include "sql_advisory.h"

/* What a pg_advisory_* function does. */
typedef enum AdvOp
{
	ADV_LOCK,					/* waits */
	ADV_TRY,					/* returns false when taken */
	ADV_UNLOCK,
	ADV_UNLOCK_ALL
} AdvOp;

/* How it names its key. */
typedef enum AdvArgs
{
	ADV_INT8,
	ADV_INT4_PAIR,
	ADV_NONE
} AdvArgs;

/*
 * The C entry points, one per form, in adv_forms' order: (bigint) and
 * (int, int) of each name, then unlock_all.  Each is the only function a
 * wrapper of its form may call (adv_find_wrapper).
 */
static Datum adv_call(FunctionCallInfo fcinfo, int i);

#define ADV_WRAPPER(fn, i) \
PG_FUNCTION_INFO_V1(fn); \
Datum fn(PG_FUNCTION_ARGS) { return adv_call(fcinfo, i); }

ADV_WRAPPER(zk_fleet_advisory_lock_int8, 0)
ADV_WRAPPER(zk_fleet_advisory_lock_int4, 1)
ADV_WRAPPER(zk_fleet_advisory_lock_shared_int8, 2)
ADV_WRAPPER(zk_fleet_advisory_lock_shared_int4, 3)
ADV_WRAPPER(zk_fleet_advisory_xact_lock_int8, 4)
ADV_WRAPPER(zk_fleet_advisory_xact_lock_int4, 5)
ADV_WRAPPER(zk_fleet_advisory_xact_lock_shared_int8, 6)
ADV_WRAPPER(zk_fleet_advisory_xact_lock_shared_int4, 7)
ADV_WRAPPER(zk_fleet_try_advisory_lock_int8, 8)
ADV_WRAPPER(zk_fleet_try_advisory_lock_int4, 9)
ADV_WRAPPER(zk_fleet_try_advisory_lock_shared_int8, 10)
ADV_WRAPPER(zk_fleet_try_advisory_lock_shared_int4, 11)
ADV_WRAPPER(zk_fleet_try_advisory_xact_lock_int8, 12)
ADV_WRAPPER(zk_fleet_try_advisory_xact_lock_int4, 13)
ADV_WRAPPER(zk_fleet_try_advisory_xact_lock_shared_int8, 14)
ADV_WRAPPER(zk_fleet_try_advisory_xact_lock_shared_int4, 15)
ADV_WRAPPER(zk_fleet_advisory_unlock_int8, 16)
ADV_WRAPPER(zk_fleet_advisory_unlock_int4, 17)
ADV_WRAPPER(zk_fleet_advisory_unlock_shared_int8, 18)
ADV_WRAPPER(zk_fleet_advisory_unlock_shared_int4, 19)
ADV_WRAPPER(zk_fleet_advisory_unlock_all, 20)

/* A builtin and the wrapper a call of it becomes. */
typedef struct AdvForm
{
	Oid			builtin;
	PGFunction	fn;
	const char *wrapper;
	PGFunction	wrapper_fn;
	AdvArgs		args;
	AdvOp		op;
	bool		shared;
	bool		xact;
} AdvForm;

static const AdvForm adv_forms[] = {
	{F_PG_ADVISORY_LOCK_INT8, pg_advisory_lock_int8, "zk_fleet_advisory_lock", zk_fleet_advisory_lock_int8, ADV_INT8, ADV_LOCK, false, false},
	{F_PG_ADVISORY_LOCK_INT4_INT4, pg_advisory_lock_int4, "zk_fleet_advisory_lock", zk_fleet_advisory_lock_int4, ADV_INT4_PAIR, ADV_LOCK, false, false},
	{F_PG_ADVISORY_LOCK_SHARED_INT8, pg_advisory_lock_shared_int8, "zk_fleet_advisory_lock_shared", zk_fleet_advisory_lock_shared_int8, ADV_INT8, ADV_LOCK, true, false},
	{F_PG_ADVISORY_LOCK_SHARED_INT4_INT4, pg_advisory_lock_shared_int4, "zk_fleet_advisory_lock_shared", zk_fleet_advisory_lock_shared_int4, ADV_INT4_PAIR, ADV_LOCK, true, false},
	{F_PG_ADVISORY_XACT_LOCK_INT8, pg_advisory_xact_lock_int8, "zk_fleet_advisory_xact_lock", zk_fleet_advisory_xact_lock_int8, ADV_INT8, ADV_LOCK, false, true},
	{F_PG_ADVISORY_XACT_LOCK_INT4_INT4, pg_advisory_xact_lock_int4, "zk_fleet_advisory_xact_lock", zk_fleet_advisory_xact_lock_int4, ADV_INT4_PAIR, ADV_LOCK, false, true},
	{F_PG_ADVISORY_XACT_LOCK_SHARED_INT8, pg_advisory_xact_lock_shared_int8, "zk_fleet_advisory_xact_lock_shared", zk_fleet_advisory_xact_lock_shared_int8, ADV_INT8, ADV_LOCK, true, true},
	{F_PG_ADVISORY_XACT_LOCK_SHARED_INT4_INT4, pg_advisory_xact_lock_shared_int4, "zk_fleet_advisory_xact_lock_shared", zk_fleet_advisory_xact_lock_shared_int4, ADV_INT4_PAIR, ADV_LOCK, true, true},
	{F_PG_TRY_ADVISORY_LOCK_INT8, pg_try_advisory_lock_int8, "zk_fleet_try_advisory_lock", zk_fleet_try_advisory_lock_int8, ADV_INT8, ADV_TRY, false, false},
	{F_PG_TRY_ADVISORY_LOCK_INT4_INT4, pg_try_advisory_lock_int4, "zk_fleet_try_advisory_lock", zk_fleet_try_advisory_lock_int4, ADV_INT4_PAIR, ADV_TRY, false, false},
	{F_PG_TRY_ADVISORY_LOCK_SHARED_INT8, pg_try_advisory_lock_shared_int8, "zk_fleet_try_advisory_lock_shared", zk_fleet_try_advisory_lock_shared_int8, ADV_INT8, ADV_TRY, true, false},
	{F_PG_TRY_ADVISORY_LOCK_SHARED_INT4_INT4, pg_try_advisory_lock_shared_int4, "zk_fleet_try_advisory_lock_shared", zk_fleet_try_advisory_lock_shared_int4, ADV_INT4_PAIR, ADV_TRY, true, false},
	{F_PG_TRY_ADVISORY_XACT_LOCK_INT8, pg_try_advisory_xact_lock_int8, "zk_fleet_try_advisory_xact_lock", zk_fleet_try_advisory_xact_lock_int8, ADV_INT8, ADV_TRY, false, true},
	{F_PG_TRY_ADVISORY_XACT_LOCK_INT4_INT4, pg_try_advisory_xact_lock_int4, "zk_fleet_try_advisory_xact_lock", zk_fleet_try_advisory_xact_lock_int4, ADV_INT4_PAIR, ADV_TRY, false, true},
	{F_PG_TRY_ADVISORY_XACT_LOCK_SHARED_INT8, pg_try_advisory_xact_lock_shared_int8, "zk_fleet_try_advisory_xact_lock_shared", zk_fleet_try_advisory_xact_lock_shared_int8, ADV_INT8, ADV_TRY, true, true},
	{F_PG_TRY_ADVISORY_XACT_LOCK_SHARED_INT4_INT4, pg_try_advisory_xact_lock_shared_int4, "zk_fleet_try_advisory_xact_lock_shared", zk_fleet_try_advisory_xact_lock_shared_int4, ADV_INT4_PAIR, ADV_TRY, true, true},
	{F_PG_ADVISORY_UNLOCK_INT8, pg_advisory_unlock_int8, "zk_fleet_advisory_unlock", zk_fleet_advisory_unlock_int8, ADV_INT8, ADV_UNLOCK, false, false},
	{F_PG_ADVISORY_UNLOCK_INT4_INT4, pg_advisory_unlock_int4, "zk_fleet_advisory_unlock", zk_fleet_advisory_unlock_int4, ADV_INT4_PAIR, ADV_UNLOCK, false, false},
	{F_PG_ADVISORY_UNLOCK_SHARED_INT8, pg_advisory_unlock_shared_int8, "zk_fleet_advisory_unlock_shared", zk_fleet_advisory_unlock_shared_int8, ADV_INT8, ADV_UNLOCK, true, false},
	{F_PG_ADVISORY_UNLOCK_SHARED_INT4_INT4, pg_advisory_unlock_shared_int4, "zk_fleet_advisory_unlock_shared", zk_fleet_advisory_unlock_shared_int4, ADV_INT4_PAIR, ADV_UNLOCK, true, false},
	{F_PG_ADVISORY_UNLOCK_ALL, pg_advisory_unlock_all, "zk_fleet_advisory_unlock_all", zk_fleet_advisory_unlock_all, ADV_NONE, ADV_UNLOCK_ALL, false, false},
};

#define ADV_NFORMS lengthof(adv_forms)

/* Whether this database has the wrappers: looked up once, until pg_proc changes. */
typedef enum AdvWrappers
{
	ADV_UNKNOWN,
	ADV_ABSENT,
	ADV_PRESENT
} AdvWrappers;

static AdvWrappers adv_state = ADV_UNKNOWN;
static Oid	adv_wrapper_oids[ADV_NFORMS];
static uint64 adv_proc_changes = 0;
static bool adv_callback_registered = false;
static planner_hook_type adv_prev_planner = NULL;
static create_upper_paths_hook_type adv_prev_upper_paths = NULL;

/* A routed session-scope hold count, by key and mode. */
typedef struct AdvHold
{
	bool		pair;
	bool		shared;
	int64		key;
	int			count;
} AdvHold;

static AdvHold *adv_holds = NULL;
static int	adv_nholds = 0;
static int	adv_maxholds = 0;

/* The builtin with this OID, as an index into adv_forms, or -1. */
static int
adv_form_of(Oid funcid)
{
	if (funcid >= FirstGenbkiObjectId)
		return -1;
	for (int i = 0; i < (int) ADV_NFORMS; i++)
		if (adv_forms[i].builtin == funcid)
			return i;
	return -1;
}

/*
 * Any change to pg_proc (CREATE, ALTER or DROP EXTENSION among them) looks
 * again at the next planning.  A plan made while the wrappers were absent
 * calls the builtins, which are pinned: nothing it depends on changes when
 * the wrappers arrive, so every cached plan of the backend is made again
 * at its next use (a prepared statement, a PL/pgSQL plan of a long-lived
 * pooled session), as PostgreSQL does on a change to pg_namespace.  Only
 * a backend that planned without the wrappers pays, once per change; plans
 * that call the wrappers depend on them and are remade when they go.
 */
static void
adv_proc_changed(Datum arg, int cacheid, uint32 hashvalue)
{
	(void) arg;
	(void) cacheid;
	(void) hashvalue;
	if (adv_state == ADV_ABSENT)
		ResetPlanCache();
	adv_state = ADV_UNKNOWN;
	adv_proc_changes++;
}

/*
 * zklock's pg_extension row: its OID and schema; InvalidOid when it is not
 * installed in this database (read here: 15 does not export
 * get_extension_schema).
 */
static Oid
adv_extension(Oid *schema)
{
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;
	Oid			ext = InvalidOid;

	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber,
				F_NAMEEQ, CStringGetDatum("zklock"));
	scan = systable_beginscan(rel, ExtensionNameIndexId, true, NULL, 1, &key);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
	{
		Form_pg_extension form = (Form_pg_extension) GETSTRUCT(tuple);

		ext = form->oid;
		*schema = form->extnamespace;
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return ext;
}

/*
 * The wrapper of form i in zklock's schema, or InvalidOid.  Found by the
 * pg_proc key itself (name, argument types, schema): never through
 * search_path, and with no privilege check, since a role without USAGE on
 * zklock's schema runs the wrappers as it runs the builtins (EXECUTE is
 * all a call needs).  Only a member of the zklock extension whose entry
 * point is this library's function of the form counts: a function another
 * role created with the same name and signature (zklock older than 1.3,
 * in a schema where that role may create) would otherwise run in every
 * caller's pg_advisory_* calls, superusers' included.
 */
static Oid
adv_find_wrapper(int i, Oid ext, Oid nsp)
{
	Oid			argtypes[2];
	int			nargs = 0;
	Oid			oid;
	FmgrInfo	finfo;

	if (adv_forms[i].args == ADV_INT8)
		argtypes[nargs++] = INT8OID;
	else if (adv_forms[i].args == ADV_INT4_PAIR)
	{
		argtypes[nargs++] = INT4OID;
		argtypes[nargs++] = INT4OID;
	}
	oid = GetSysCacheOid3(PROCNAMEARGSNSP, Anum_pg_proc_oid,
						  CStringGetDatum(adv_forms[i].wrapper),
						  PointerGetDatum(buildoidvector(argtypes, nargs)),
						  ObjectIdGetDatum(nsp));
	if (!OidIsValid(oid) ||
		getExtensionOfObject(ProcedureRelationId, oid) != ext)
		return InvalidOid;
	fmgr_info(oid, &finfo);
	if (finfo.fn_addr != adv_forms[i].wrapper_fn)
		return InvalidOid;
	return oid;
}

/* Whether zklock's wrappers are all in this database (1.3 or later). */
static bool
adv_find_wrappers(void)
{
	Oid			ext;
	Oid			nsp = InvalidOid;

	ext = adv_extension(&nsp);
	if (!OidIsValid(ext))
		return false;
	for (int i = 0; i < (int) ADV_NFORMS; i++)
	{
		adv_wrapper_oids[i] = adv_find_wrapper(i, ext, nsp);
		if (!OidIsValid(adv_wrapper_oids[i]))
			return false;
	}
	return true;
}

/*
 * Settle adv_state.  The catalogs' locks taken by the look-up let
 * invalidations in; one of pg_proc during it means the answer may be
 * stale, so it looks again.
 */
static void
adv_lookup_wrappers(void)
{
	uint64		changes;
	bool		present;

	if (!adv_callback_registered)
	{
		CacheRegisterSyscacheCallback(PROCOID, adv_proc_changed, (Datum) 0);
		adv_callback_registered = true;
	}
	do
	{
		changes = adv_proc_changes;
		present = adv_find_wrappers();
	} while (changes != adv_proc_changes);
	adv_state = present ? ADV_PRESENT : ADV_ABSENT;
}

/*
 * Every call of a builtin pg_advisory_* function in the tree becomes a
 * call of its wrapper; the wrappers are present.
 */
static bool
adv_rewrite_walker(Node *node, void *context)
{
	(void) context;
	if (node == NULL)
		return false;
	if (IsA(node, FuncExpr))
	{
		FuncExpr   *f = (FuncExpr *) node;
		int			i = adv_form_of(f->funcid);

		if (i >= 0)
			f->funcid = adv_wrapper_oids[i];
	}
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, adv_rewrite_walker, context, 0);
	return expression_tree_walker(node, adv_rewrite_walker, context);
}

/*
 * Whether the wrappers are present, looked up at every planning after
 * pg_proc changed (not only one that calls a builtin: a later one may
 * remake a plan that does), else the state kept.
 */
static bool
adv_wrappers_present(void)
{
	if (adv_state == ADV_UNKNOWN)
		adv_lookup_wrappers();
	return adv_state == ADV_PRESENT;
}

/* Without the wrappers a query is not walked at all. */
static PlannedStmt *
adv_planner(Query *parse, const char *query_string, int cursorOptions,
			ParamListInfo boundParams)
{
	if (adv_wrappers_present())
		(void) query_tree_walker(parse, adv_rewrite_walker, NULL, 0);
	if (adv_prev_planner)
		return adv_prev_planner(parse, query_string, cursorOptions,
								boundParams);
	return standard_planner(parse, query_string, cursorOptions, boundParams);
}

/*
 * The planner inlines a one-SELECT SQL function's body into the calling
 * query after the planner hook ran; once the expressions are processed
 * (the final upper relation of each query level, before the plan is
 * made from them) the walk finds the calls the body brought in.
 */
static void
adv_upper_paths(PlannerInfo *root, UpperRelationKind stage,
				RelOptInfo *input_rel, RelOptInfo *output_rel, void *extra)
{
	if (adv_prev_upper_paths)
		adv_prev_upper_paths(root, stage, input_rel, output_rel, extra);
	if (stage != UPPERREL_FINAL || !adv_wrappers_present())
		return;
	(void) query_tree_walker(root->parse, adv_rewrite_walker, NULL, 0);
	(void) expression_tree_walker((Node *) root->processed_tlist,
								  adv_rewrite_walker, NULL);
}

/*
 * Installed by _PG_init, in front of any hooks loaded before.  Plans the
 * backend cached before zklock was loaded into it were not made through
 * the hook: they are made again at their next use.
 */
void
zkl_advisory_init(void)
{
	ResetPlanCache();
	adv_prev_planner = planner_hook;
	planner_hook = adv_planner;
	adv_prev_upper_paths = create_upper_paths_hook;
	create_upper_paths_hook = adv_upper_paths;
}

/*
 * The routed session holds of a key and mode, or NULL.  Only keys held
 * have an entry: a linear scan of what the session holds now.
 */
static AdvHold *
adv_hold_find(bool pair, int64 key, bool shared)
{
	for (int i = 0; i < adv_nholds; i++)
		if (adv_holds[i].pair == pair && adv_holds[i].key == key &&
			adv_holds[i].shared == shared)
			return &adv_holds[i];
	return NULL;
}

/* Room for one more entry, made before a hold is taken so counting it cannot fail. */
static void
adv_hold_reserve(void)
{
	if (adv_nholds < adv_maxholds)
		return;
	adv_maxholds = adv_maxholds ? adv_maxholds * 2 : 8;
	adv_holds = adv_holds ?
		repalloc(adv_holds, sizeof(AdvHold) * adv_maxholds) :
		MemoryContextAlloc(TopMemoryContext, sizeof(AdvHold) * adv_maxholds);
}

/* Count one routed session hold taken; adv_hold_reserve made room. */
static void
adv_hold_add(bool pair, int64 key, bool shared)
{
	AdvHold    *hold = adv_hold_find(pair, key, shared);

	if (hold == NULL)
	{
		Assert(adv_nholds < adv_maxholds);
		hold = &adv_holds[adv_nholds++];
		hold->pair = pair;
		hold->shared = shared;
		hold->key = key;
		hold->count = 0;
	}
	hold->count++;
}

/* One routed session hold given back; the entry goes with its last. */
static void
adv_hold_remove(AdvHold *hold)
{
	if (--hold->count == 0)
		*hold = adv_holds[--adv_nholds];
}

/* DISCARD ALL released both halves of every session hold. */
void
zkl_advisory_forget(void)
{
	adv_nholds = 0;
}

/* The zklock name of a key: zk_lock(key)'s. */
static ZklName
adv_name(bool pair, int64 key)
{
	ZklName		name;

	if (pair)
		name.component = psprintf("key:%d:%d", (int32) (key >> 32),
								  (int32) (uint32) key);
	else
		name.component = psprintf("key:" INT64_FORMAT, key);
	name.display = name.component;
	return name;
}

/*
 * Give back one local hold the builtin took, when its ZooKeeper half
 * failed: the tag and mode lockfuncs.c uses, in the scope it was taken.
 */
static void
adv_local_release(const AdvForm *form, int64 key)
{
	LOCKTAG		tag;

	if (form->args == ADV_INT4_PAIR)
		SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, (uint32) (key >> 32),
							 (uint32) key, 2);
	else
		SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, (uint32) (key >> 32),
							 (uint32) key, 1);
	LockRelease(&tag, form->shared ? ShareLock : ExclusiveLock, !form->xact);
}

/*
 * How long the ZooKeeper half may wait: the rest of lock_timeout after the
 * local wait, or for ever without it.  A try waits not at all.
 */
static int64
adv_zk_timeout(const AdvForm *form, TimestampTz start)
{
	int64		left;

	if (form->op == ADV_TRY)
		return 0;
	if (LockTimeout <= 0)
		return -1;
	left = LockTimeout -
		(GetCurrentTimestamp() - start) / 1000;
	return Max(left, 0);
}

/* A listed key's acquisition: locally, then in ZooKeeper. */
static Datum
adv_acquire(FunctionCallInfo fcinfo, const AdvForm *form, bool pair,
			int64 key)
{
	TimestampTz start = GetCurrentTimestamp();
	ZklName		name = adv_name(pair, key);
	Datum		result;
	int64		timeout;
	int64		token;
	volatile bool got = false;

	if (!form->xact)
		adv_hold_reserve();
	result = form->fn(fcinfo);
	if (form->op == ADV_TRY && !DatumGetBool(result))
		return result;
	timeout = adv_zk_timeout(form, start);
	PG_TRY();
	{
		got = zkl_lockset_acquire(&name, form->shared, form->xact, timeout,
								  &token);
	}
	PG_CATCH();
	{
		adv_local_release(form, key);
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (!got)
	{
		adv_local_release(form, key);
		if (form->op == ADV_TRY)
			PG_RETURN_BOOL(false);
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("canceling statement due to lock timeout"),
				 errdetail("ZooKeeper lock \"%s\" was not granted within " INT64_FORMAT " ms.",
						   name.display, timeout)));
	}
	if (!form->xact)
		adv_hold_add(pair, key, form->shared);
	return result;
}

/*
 * A routed key's release: ZooKeeper first, then the builtin.  The builtin
 * and the count follow even when the ZooKeeper half raises, so that the
 * local lock is never left held with the count saying it is gone.
 */
static Datum
adv_release(FunctionCallInfo fcinfo, const AdvForm *form, AdvHold *hold,
			bool pair, int64 key)
{
	ZklName		name = adv_name(pair, key);
	volatile bool zk_held = false;
	volatile bool local_held = false;

	PG_TRY();
	{
		zk_held = zkl_lockset_release(&name, form->shared);
	}
	PG_FINALLY();
	{
		local_held = DatumGetBool(form->fn(fcinfo));
		adv_hold_remove(hold);
	}
	PG_END_TRY();
	PG_RETURN_BOOL(local_held && zk_held);
}

/*
 * pg_advisory_unlock_all: every session hold, here and routed.  The routed
 * ones go quietly, whatever is left of them, and are waited for once.
 */
static Datum
adv_release_all(FunctionCallInfo fcinfo, const AdvForm *form)
{
	for (int i = 0; i < adv_nholds; i++)
	{
		ZklName		name = adv_name(adv_holds[i].pair, adv_holds[i].key);

		zkl_lockset_drop_session_holds(&name, adv_holds[i].shared,
									   adv_holds[i].count);
	}
	adv_nholds = 0;
	zkl_lockset_await_releases();
	return form->fn(fcinfo);
}

/*
 * Every wrapper: the builtin alone for a key the setting does not list
 * (and a release of what was not routed), else both halves.
 */
static Datum
adv_call(FunctionCallInfo fcinfo, int i)
{
	const AdvForm *form = &adv_forms[i];
	bool		pair = form->args == ADV_INT4_PAIR;
	int64		key;
	AdvHold    *hold;

	if (form->op == ADV_UNLOCK_ALL)
		return adv_release_all(fcinfo, form);
	key = pair ?
		(int64) (((uint64) (uint32) PG_GETARG_INT32(0) << 32) |
				 (uint32) PG_GETARG_INT32(1)) :
		PG_GETARG_INT64(0);
	if (form->op == ADV_UNLOCK)
	{
		hold = adv_hold_find(pair, key, form->shared);
		if (hold == NULL)
			return form->fn(fcinfo);
		return adv_release(fcinfo, form, hold, pair, key);
	}
	if (!zkl_guc_fleet_key(pair, key))
		return form->fn(fcinfo);
	return adv_acquire(fcinfo, form, pair, key);
}
