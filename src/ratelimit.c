/*
 * ratelimit.c -- the module: what PostgreSQL calls when it loads the
 * library.  It wires the layers together and holds no logic of its own:
 *
 *   api/       SQL-callable functions: read arguments, build the result
 *   decision/  one decision, whatever the store (decide*.c), zones
 *   store/     where state lives: the table store and the shmem store,
 *              behind one interface (store.h)
 *   core/      the algorithms, pure C++, no PostgreSQL headers
 *   base/      settings, the clock, argument checks, SPI, counters
 *
 * Each layer calls only the layers below it.
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "utils/guc.h"

#include "api/privilege_hint.h"
#include "base/counters.h"
#include "base/key_hash.h"
#include "base/settings.h"
#include "base/wait_lines.h"
#include "decision/zone.h"
#include "store/shmem_file.h"
#include "store/shmem_leases.h"
#include "store/state_statements.h"
#include "store/state_table.h"
#include "store/table_cache.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static void
ShmemRequest(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RlCountersRequest();
	RlKeyHashRequest();
	RlShmemStoreRequest();
	RlWaitLinesRequest();
	RlShmemLeasesRequest();
}

static void
ShmemStartup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	RlCountersStartup();
	RlKeyHashStartup();		/* before the shmem store loads keys placed with it */
	RlShmemStoreStartup();
	RlWaitLinesStartup();
	RlShmemLeasesStartup();
}

void
_PG_init(void)
{
	RlDefineSettings();
	/* Shared memory can be had only while preloading. */
	if (process_shared_preload_libraries_in_progress)
	{
		RlShmemStoreInit();
		RlShmemLeasesInit();
		prev_shmem_request_hook = shmem_request_hook;
		shmem_request_hook = ShmemRequest;
		prev_shmem_startup_hook = shmem_startup_hook;
		shmem_startup_hook = ShmemStartup;
	}
	MarkGUCPrefixReserved("ratelimit");

	RlPrivilegeHintInit();
	RlStateTableInit();
	RlStateCacheInit();
	RlStateStatementsInit();
	RlZoneCacheInit();
}
