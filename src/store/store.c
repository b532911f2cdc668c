/*
 * store.c -- which store keeps a zone's state: the one place that chooses.
 */
#include "postgres.h"

#include "base/settings.h"
#include "store/shmem_store.h"
#include "store/state_table.h"
#include "store/store.h"
#include "store/table_store.h"

/* The table store's path: ratelimit.table_access, within what the table allows. */
static const RlStore *
TableStore(void)
{
	const RlStateTable *table = RlGetStateTable();
	bool		local_heap = table->is_heap && !table->is_distributed;

	switch (rl_table_access)
	{
		case RL_TABLE_ACCESS_DIRECT:
			if (!local_heap)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("ratelimit.table_access = direct needs a local heap state table"),
						 errdetail("ratelimit.state is %s.",
								   table->is_distributed ? "distributed by Citus"
								   : "not a heap table"),
						 errhint("Set ratelimit.table_access to auto or spi.")));
			return &RlTableDirectStore;
		case RL_TABLE_ACCESS_SPI:
			return &RlTableSpiStore;
		default:
			return local_heap ? &RlTableDirectStore : &RlTableSpiStore;
	}
}

const RlStore *
RlStoreOf(RlStoreKind kind)
{
	return kind == RL_STORE_SHMEM ? &RlShmemStore : TableStore();
}
