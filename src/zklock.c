/*-------------------------------------------------------------------------
 *
 * zklock.c
 *	  Module magic and _PG_init.
 *
 * _PG_init only defines settings: it may run in the postmaster
 * (shared_preload_libraries), and threads do not survive fork, so no
 * ZooKeeper session is opened before a backend's first zk_* call.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"

#include "guc.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

void
_PG_init(void)
{
	zkl_preloaded = process_shared_preload_libraries_in_progress;
	zkl_guc_define();
}
