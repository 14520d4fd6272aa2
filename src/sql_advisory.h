/*-------------------------------------------------------------------------
 *
 * sql_advisory.h
 *	  PostgreSQL's pg_advisory_* calls routed to zklock for the keys
 *	  zklock.fleet_advisory_keys lists (sql_advisory.c), as _PG_init and
 *	  the DISCARD ALL hook see them.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_SQL_ADVISORY_H
#define ZKLOCK_SQL_ADVISORY_H

#if !defined(ZKL_SQL_LAYER)
#error "sql_advisory.h is for the SQL layer (zklock.c, sql_advisory.c) only"
#endif

extern void zkl_advisory_init(void);
extern void zkl_advisory_forget(void);

#endif							/* ZKLOCK_SQL_ADVISORY_H */
