/*
 * state_table.c -- ratelimit.state, looked up once per backend and again
 * after any change to it (relcache invalidation), never per call.
 */
#include "postgres.h"

#include "access/table.h"
#include "catalog/pg_am_d.h"
#include "catalog/pg_type_d.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "utils/inval.h"
#include "utils/rel.h"

#include "base/spi_exec.h"
#include "store/state_table.h"

static RlStateTable state_table;
static bool state_table_valid = false;

/*
 * On Citus a distributed table is an empty shell whose rows live in shards:
 * only SQL (SPI) reaches them.
 */
static bool
IsCitusDistributed(Oid relid)
{
	Oid			argtypes[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	bool		distributed = false;

	if (!OidIsValid(get_extension_oid("citus", true)))
		return false;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args("SELECT 1 FROM pg_catalog.pg_dist_partition"
							  " WHERE logicalrelid OPERATOR(pg_catalog.=) $1",
							  1, argtypes, values, NULL, true, 1) == SPI_OK_SELECT)
		distributed = SPI_processed > 0;
	SPI_finish();
	return distributed;
}

static void
InvalidateStateTable(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == state_table.relid)
		state_table_valid = false;
}

const RlStateTable *
RlGetStateTable(void)
{
	if (!state_table_valid)
	{
		Oid			relid = RlInternalTable("state");
		Relation	rel;

		if (!OidIsValid(relid))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_TABLE),
					 errmsg("ratelimit state table \"%s.state\" does not exist",
							RL_INTERNAL_SCHEMA),
					 errhint("Run CREATE EXTENSION ratelimit in this database.")));
		rel = table_open(relid, AccessShareLock);
		state_table.relid = relid;
		state_table.owner = rel->rd_rel->relowner;
		state_table.is_heap = (rel->rd_rel->relam == HEAP_TABLE_AM_OID);
		table_close(rel, AccessShareLock);
		state_table.is_distributed = IsCitusDistributed(relid);
		state_table_valid = true;
	}
	return &state_table;
}

void
RlStateTableInit(void)
{
	CacheRegisterRelcacheCallback(InvalidateStateTable, (Datum) 0);
}
