/*-------------------------------------------------------------------------
 *
 * compat.h
 *	  Everything that differs between the PostgreSQL majors zklock is
 *	  written for (15, 16, 17, 18), behind PG_VERSION_NUM guards, so that
 *	  every other file reads the same on every major.
 *
 * 15 and 18 are built and tested; 16 and 17 follow their documented API
 * changes (the headers of those releases), not a build.  Include after
 * postgres.h.  Where a newer major offers something better (named wait
 * events from 17, the module's name and version in 18's magic block), the
 * older ones get the nearest equivalent, with the same behaviour.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_COMPAT_H
#define ZKLOCK_COMPAT_H

#include "common/base64.h"
#include "fmgr.h"
#include "storage/latch.h"
#include "utils/datetime.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/wait_event.h"

#if PG_VERSION_NUM < 150000
#error "zklock needs PostgreSQL 15 or later"
#endif

/*
 * Exports.  The module is compiled with -fvisibility=hidden on every major
 * (PGXS does it from 16 on), so only what PostgreSQL looks up by name is
 * exported: the magic block, _PG_init and the SQL functions with their
 * info records.  From 16 on, fmgr.h marks all of them PGDLLEXPORT; 15's
 * PGDLLEXPORT is empty on ELF, and its PG_FUNCTION_INFO_V1 marks only the
 * info record, so here they get what 16 gives them.
 */
#if PG_VERSION_NUM < 160000
#undef PGDLLEXPORT
#define PGDLLEXPORT __attribute__((visibility("default")))
#undef PG_FUNCTION_INFO_V1
#define PG_FUNCTION_INFO_V1(fn) \
extern PGDLLEXPORT Datum fn(PG_FUNCTION_ARGS); \
extern PGDLLEXPORT const Pg_finfo_record *CppConcat(pg_finfo_, fn)(void); \
const Pg_finfo_record * \
CppConcat(pg_finfo_, fn)(void) \
{ \
	static const Pg_finfo_record zkl_finfo = {1}; \
	return &zkl_finfo; \
} \
extern int no_such_variable
extern PGDLLEXPORT void _PG_init(void);
#endif

/*
 * The magic block: 18 also records the module's name and version, which
 * pg_get_loaded_modules() shows.  ZKL_VERSION comes from the Makefile.
 */
#if PG_VERSION_NUM >= 180000
#define ZKL_MODULE_MAGIC PG_MODULE_MAGIC_EXT(.name = "zklock", .version = ZKL_VERSION)
#else
#define ZKL_MODULE_MAGIC PG_MODULE_MAGIC
#endif

/* 18 replaced the pg_attribute_noreturn() suffix with a pg_noreturn prefix. */
#if PG_VERSION_NUM < 180000
#define pg_noreturn pg_attribute_noreturn()
#endif

/*
 * DecodeDateTime: from 16 on it reports what went wrong through a
 * DateTimeErrorExtra, which it writes on error paths, so it needs a real
 * one even when the caller only wants to know whether parsing failed.
 */
static inline int
zkl_compat_decode_datetime(char **field, int *ftype, int nf, int *dtype,
						   struct pg_tm *tm, fsec_t *fsec, int *tzp)
{
#if PG_VERSION_NUM >= 160000
	DateTimeErrorExtra extra = {0};

	return DecodeDateTime(field, ftype, nf, dtype, tm, fsec, tzp, &extra);
#else
	return DecodeDateTime(field, ftype, nf, dtype, tm, fsec, tzp);
#endif
}

/*
 * A wait event set that lives as long as the backend.  From 17 on the
 * first argument is a resource owner (NULL: none, the set lives until
 * freed, in TopMemoryContext); before, the memory context to allocate in.
 */
static inline WaitEventSet *
zkl_compat_wait_event_set(int nevents)
{
#if PG_VERSION_NUM >= 170000
	return CreateWaitEventSet(NULL, nevents);
#else
	return CreateWaitEventSet(TopMemoryContext, nevents);
#endif
}

/*
 * The wait event to report under a name.  From 17 on an extension names
 * its waits (WaitEventExtensionNew: a hash in the core's shared memory,
 * usable from any backend without shared_preload_libraries; call it in a
 * backend, never in the postmaster); pg_stat_activity then shows the name
 * with wait_event_type 'Extension'.  Before 17 every extension wait is
 * plain 'Extension'.
 */
static inline uint32
zkl_compat_wait_event(const char *name)
{
#if PG_VERSION_NUM >= 170000
	return WaitEventExtensionNew(name);
#else
	(void) name;
	return PG_WAIT_EXTENSION;
#endif
}

/* 18's pg_b64_encode takes bytes as uint8, older majors as char. */
static inline int
zkl_compat_b64_encode(const uint8 *src, int len, char *dst, int dstlen)
{
#if PG_VERSION_NUM >= 180000
	return pg_b64_encode(src, len, dst, dstlen);
#else
	return pg_b64_encode((const char *) src, len, dst, dstlen);
#endif
}

/*
 * A setting's extra (the parsed value a check hook hands its assign hook):
 * from 16 on the GUC machinery allocates and frees it in its own memory
 * context (guc_malloc, guc_free); 15 frees it with free().
 */
static inline void *
zkl_compat_guc_malloc(size_t size)
{
#if PG_VERSION_NUM >= 160000
	return guc_malloc(LOG, size);
#else
	return malloc(size);
#endif
}

static inline void
zkl_compat_guc_free(void *p)
{
#if PG_VERSION_NUM >= 160000
	guc_free(p);
#else
	free(p);
#endif
}

#endif							/* ZKLOCK_COMPAT_H */
