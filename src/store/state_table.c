/*
 * state_table.c -- ratelimit.state, looked up once per backend and again
 * after any change to it (relcache invalidation), never per call.
 *
 * On Citus the table is distributed by key: the table itself is an empty
 * shell and the rows live in shards, ordinary tables named after it.  The
 * shard map (hash ranges, and which shards are placed on this node) is read
 * with the table; Citus invalidates the table's relcache entry whenever a
 * shard or a placement changes, so the map is never older than the catalog.
 */
#include "postgres.h"

#include "access/table.h"
#include "catalog/pg_am_d.h"
#include "catalog/pg_collation_d.h"
#include "catalog/pg_type_d.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "base/spi_exec.h"
#include "store/state_table.h"

/* One shard of the distributed state table: a range of key hashes. */
typedef struct ShardRange
{
	int32		min_hash;
	int32		max_hash;
	uint64		shard_id;
	Oid			local_relid;	/* InvalidOid: placed on another node */
} ShardRange;

/* Citus's lock class for shard metadata (resource_lock.h): moves take it exclusively. */
#define CITUS_SHARD_METADATA_LOCK_CLASS 4

static RlStateTable state_table;
static bool state_table_valid = false;
static ShardRange *shards = NULL;
static int	shard_count = 0;

/*
 * Whether Citus distributes the table; if by hash, its shards sorted by hash
 * range.  A table Citus holds otherwise (a reference or Citus-local table)
 * gets no map: every key is then reached through SQL.
 */
static bool
LoadShardMap(Oid relid)
{
	Oid			argtypes[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	bool		distributed;
	int			n = 0;

	if (!OidIsValid(get_extension_oid("citus", true)))
		return false;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args("SELECT s.shardid, s.shardminvalue::pg_catalog.int4,"
							  " s.shardmaxvalue::pg_catalog.int4,"
							  " CASE WHEN EXISTS (SELECT 1 FROM pg_catalog.pg_dist_placement p"
							  "   WHERE p.shardid OPERATOR(pg_catalog.=) s.shardid"
							  "   AND p.groupid OPERATOR(pg_catalog.=)"
							  "       (SELECT groupid FROM pg_catalog.pg_dist_local_group))"
							  " THEN pg_catalog.to_regclass(pg_catalog.shard_name(s.logicalrelid, s.shardid))"
							  " END::pg_catalog.oid"
							  " FROM pg_catalog.pg_dist_partition d"
							  " LEFT JOIN pg_catalog.pg_dist_shard s"
							  "   ON s.logicalrelid OPERATOR(pg_catalog.=) d.logicalrelid"
							  "   AND d.partmethod OPERATOR(pg_catalog.=) 'h'"
							  " WHERE d.logicalrelid OPERATOR(pg_catalog.=) $1"
							  " ORDER BY 2",
							  1, argtypes, values, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the Citus shards of ratelimit.state");
	distributed = SPI_processed > 0;
	if (distributed)
	{
		ShardRange *map = MemoryContextAlloc(TopMemoryContext, sizeof(ShardRange) * SPI_processed);

		for (uint64 i = 0; i < SPI_processed; i++)
		{
			HeapTuple	tuple = SPI_tuptable->vals[i];
			TupleDesc	desc = SPI_tuptable->tupdesc;
			bool		no_shard;
			bool		no_min;
			bool		no_max;
			bool		elsewhere;
			Datum		shard_id = SPI_getbinval(tuple, desc, 1, &no_shard);
			Datum		min_hash = SPI_getbinval(tuple, desc, 2, &no_min);
			Datum		max_hash = SPI_getbinval(tuple, desc, 3, &no_max);
			Datum		local = SPI_getbinval(tuple, desc, 4, &elsewhere);

			if (no_shard || no_min || no_max)
				continue;
			map[n].shard_id = DatumGetInt64(shard_id);
			map[n].min_hash = DatumGetInt32(min_hash);
			map[n].max_hash = DatumGetInt32(max_hash);
			map[n].local_relid = elsewhere ? InvalidOid : DatumGetObjectId(local);
			n++;
		}
		shards = map;
	}
	SPI_finish();
	shard_count = n;
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
		if (shards != NULL)
		{
			pfree(shards);
			shards = NULL;
		}
		state_table.is_distributed = LoadShardMap(relid);
		state_table_valid = true;
	}
	return &state_table;
}

/* The shard whose hash range holds key, as Citus routes it (hashtext, "C"). */
static const ShardRange *
ShardOfKey(text *key)
{
	int32		hash = DatumGetInt32(DirectFunctionCall1Coll(hashtext, C_COLLATION_OID,
															 PointerGetDatum(key)));
	int			low = 0;
	int			high = shard_count - 1;

	while (low <= high)
	{
		int			mid = low + (high - low) / 2;

		if (hash < shards[mid].min_hash)
			high = mid - 1;
		else if (hash > shards[mid].max_hash)
			low = mid + 1;
		else
			return &shards[mid];
	}
	return NULL;
}

Oid
RlStateRelationOfKey(text *key)
{
	for (;;)
	{
		const RlStateTable *table = RlGetStateTable();
		const ShardRange *shard;
		LOCKTAG		tag;

		if (!table->is_distributed)
			return table->relid;
		shard = ShardOfKey(key);
		if (shard == NULL || !OidIsValid(shard->local_relid))
			return InvalidOid;

		/*
		 * As Citus's own writers do: a shard move or split waits for us, and
		 * we for it, after which the map is read again (it may point
		 * elsewhere now).
		 */
		SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, (uint32) (shard->shard_id >> 32),
							 (uint32) shard->shard_id, CITUS_SHARD_METADATA_LOCK_CLASS);
		(void) LockAcquire(&tag, ShareLock, false, false);
		AcceptInvalidationMessages();
		if (state_table_valid)
			return shard->local_relid;
	}
}

void
RlStateTableInit(void)
{
	CacheRegisterRelcacheCallback(InvalidateStateTable, (Datum) 0);
}
