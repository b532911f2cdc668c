/*
 * state_table.c -- the table store's two tables, looked up once per backend
 * and again after any change to them (relcache invalidation), never per
 * call: ratelimit.state (UNLOGGED) and ratelimit.durable_state (logged, for
 * the zones created with durable => true).
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
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "base/spi_exec.h"
#include "store/state_table.h"

/* One shard of the distributed state table: a range of key hashes. */
typedef struct ShardRange
{
	int32		min_hash;
	int32		max_hash;
	uint64		shard_id;
	uint32		shard_index;	/* its place among the table's shards */
	uint32		colocation_id;
	Oid			local_relid;	/* InvalidOid: placed on another node */
} ShardRange;

/*
 * Citus's locks on shard metadata (its resource_lock.h), which a shard move
 * or split takes exclusively and its writers share: per shard index of a
 * colocation group, or per shard where the table has no group.
 */
#define CITUS_SHARD_METADATA_LOCK_CLASS 4
#define CITUS_COLOCATED_SHARDS_METADATA_LOCK_CLASS 8

/* A table's shards on Citus, sorted by hash range. */
typedef struct ShardMap
{
	ShardRange *ranges;
	int			count;
} ShardMap;

/* Indexed by durable: [0] ratelimit.state, [1] ratelimit.durable_state. */
static const char *const state_table_names[2] = {"state", "durable_state"};
static RlStateTable state_tables[2];
static bool state_table_valid[2] = {false, false};
static ShardMap state_shards[2];

/* ratelimit.history, distributed beside the state by rl_citus_setup(). */
static Oid	history_relid = InvalidOid;
static bool history_valid = false;
static bool history_distributed = false;
static ShardMap history_shards;

/*
 * Whether Citus distributes the table; if by hash, its shards sorted by hash
 * range.  A table Citus holds otherwise (a reference or Citus-local table)
 * gets no map: every key is then reached through SQL.
 */
static bool
LoadShardMap(Oid relid, ShardMap *map)
{
	Oid			argtypes[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	bool		distributed;
	int			n = 0;
	SPIPlanPtr	plan;

	if (map->ranges != NULL)
		pfree(map->ranges);
	map->ranges = NULL;
	map->count = 0;
	if (!OidIsValid(get_extension_oid("citus", true)))
		return false;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	/*
	 * Under the latest snapshot, not the statement's: a call that waited for
	 * a shard move must see where the move put the shard.
	 */
	plan = SPI_prepare("SELECT s.shardid, s.shardminvalue::pg_catalog.int4,"
					   " s.shardmaxvalue::pg_catalog.int4,"
					   " CASE WHEN EXISTS (SELECT 1 FROM pg_catalog.pg_dist_placement p"
					   "   WHERE p.shardid OPERATOR(pg_catalog.=) s.shardid"
					   "   AND p.groupid OPERATOR(pg_catalog.=)"
					   "       (SELECT groupid FROM pg_catalog.pg_dist_local_group))"
					   " THEN pg_catalog.to_regclass(pg_catalog.shard_name(s.logicalrelid, s.shardid))"
					   " END::pg_catalog.oid, d.colocationid"
					   " FROM pg_catalog.pg_dist_partition d"
					   " LEFT JOIN pg_catalog.pg_dist_shard s"
					   "   ON s.logicalrelid OPERATOR(pg_catalog.=) d.logicalrelid"
					   "   AND d.partmethod OPERATOR(pg_catalog.=) 'h'"
					   " WHERE d.logicalrelid OPERATOR(pg_catalog.=) $1"
					   " ORDER BY 2", 1, argtypes);
	if (plan == NULL ||
		SPI_execute_snapshot(plan, values, NULL, GetLatestSnapshot(), InvalidSnapshot,
							 true, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the Citus shards of %s", get_rel_name(relid));
	distributed = SPI_processed > 0;
	if (distributed)
	{
		ShardRange *ranges = MemoryContextAlloc(TopMemoryContext, sizeof(ShardRange) * SPI_processed);

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
			bool		no_group;
			Datum		colocation_id = SPI_getbinval(tuple, desc, 5, &no_group);

			if (no_shard || no_min || no_max)
				continue;
			ranges[n].shard_id = DatumGetInt64(shard_id);
			ranges[n].min_hash = DatumGetInt32(min_hash);
			ranges[n].max_hash = DatumGetInt32(max_hash);
			ranges[n].local_relid = elsewhere ? InvalidOid : DatumGetObjectId(local);
			ranges[n].shard_index = n;
			ranges[n].colocation_id = no_group ? 0 : DatumGetUInt32(colocation_id);
			n++;
		}
		map->ranges = ranges;
	}
	SPI_finish();
	map->count = n;
	return distributed;
}

static void
InvalidateStateTable(Datum arg, Oid relid)
{
	for (int durable = 0; durable < 2; durable++)
		if (relid == InvalidOid || relid == state_tables[durable].relid)
			state_table_valid[durable] = false;
	if (relid == InvalidOid || relid == history_relid)
		history_valid = false;
}

const RlStateTable *
RlGetStateTable(bool durable)
{
	RlStateTable *table = &state_tables[durable];

	if (!state_table_valid[durable])
	{
		Oid			relid = RlInternalTable(state_table_names[durable]);
		Relation	rel;

		if (!OidIsValid(relid))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_TABLE),
					 errmsg("ratelimit state table \"%s.%s\" does not exist",
							RL_INTERNAL_SCHEMA, state_table_names[durable]),
					 durable
					 ? errhint("Run ALTER EXTENSION ratelimit UPDATE: durable zones came with 0.6.0.")
					 : errhint("Run CREATE EXTENSION ratelimit in this database.")));
		rel = table_open(relid, AccessShareLock);
		table->relid = relid;
		table->owner = rel->rd_rel->relowner;
		table->is_heap = (rel->rd_rel->relam == HEAP_TABLE_AM_OID);
		table_close(rel, AccessShareLock);
		table->is_distributed = LoadShardMap(relid, &state_shards[durable]);
		state_table_valid[durable] = true;
	}
	return table;
}

/* The shard whose hash range holds key, as Citus routes it (hashtext, "C"). */
static const ShardRange *
ShardOfKey(const ShardMap *map, text *key)
{
	int32		hash = DatumGetInt32(DirectFunctionCall1Coll(hashtext, C_COLLATION_OID,
															 PointerGetDatum(key)));
	int			low = 0;
	int			high = map->count - 1;

	while (low <= high)
	{
		int			mid = low + (high - low) / 2;

		if (hash < map->ranges[mid].min_hash)
			high = mid - 1;
		else if (hash > map->ranges[mid].max_hash)
			low = mid + 1;
		else
			return &map->ranges[mid];
	}
	return NULL;
}

/*
 * Where the key's shard in map is, when it is placed on this node:
 * share-locked, as Citus's own writers do (a shard move or split waits for
 * us, and we for it).  False when the wait let in a change of the map: look
 * again (it may point elsewhere now).
 */
static bool
LocalShardOfKey(const ShardMap *map, const bool *map_valid, text *key, Oid *relid)
{
	const ShardRange *shard = ShardOfKey(map, key);
	LOCKTAG		tag;

	*relid = InvalidOid;
	if (shard == NULL || !OidIsValid(shard->local_relid))
		return true;
	if (shard->colocation_id != 0)
		SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, shard->shard_index, shard->colocation_id,
							 CITUS_COLOCATED_SHARDS_METADATA_LOCK_CLASS);
	else
		SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, (uint32) (shard->shard_id >> 32),
							 (uint32) shard->shard_id, CITUS_SHARD_METADATA_LOCK_CLASS);
	(void) LockAcquire(&tag, ShareLock, false, false);
	AcceptInvalidationMessages();
	if (!*map_valid)
		return false;
	*relid = shard->local_relid;
	return true;
}

Oid
RlStateRelationOfKey(text *key, bool durable)
{
	Oid			relid;

	for (;;)
	{
		const RlStateTable *table = RlGetStateTable(durable);

		if (!table->is_distributed)
			return table->relid;
		if (LocalShardOfKey(&state_shards[durable], &state_table_valid[durable], key, &relid))
			return relid;
	}
}

bool
RlIsStateRelation(Oid relid)
{
	for (int durable = 0; durable < 2; durable++)
	{
		const ShardMap *shards = &state_shards[durable];

		/* Invalid again after any change to the table (a TRUNCATE too). */
		if (!state_table_valid[durable])
		{
			/* Before 0.6.0 there is no durable table; after DROP EXTENSION, none. */
			if (!OidIsValid(RlInternalTable(state_table_names[durable])))
				continue;
			(void) RlGetStateTable(durable);
		}
		if (relid == state_tables[durable].relid)
			return true;
		for (int i = 0; i < shards->count; i++)
			if (relid == shards->ranges[i].local_relid)
				return true;
	}
	return false;
}

Oid
RlHistoryTable(void)
{
	if (!history_valid)
	{
		history_relid = RlInternalTable("history");
		if (!OidIsValid(history_relid))
			return InvalidOid;
		history_distributed = LoadShardMap(history_relid, &history_shards);
		history_valid = true;
	}
	return history_relid;
}

Oid
RlHistoryShardOfKey(text *key)
{
	Oid			relid;

	for (;;)
	{
		if (!OidIsValid(RlHistoryTable()) || !history_distributed)
			return InvalidOid;
		if (LocalShardOfKey(&history_shards, &history_valid, key, &relid))
			return relid;
	}
}

void
RlStateTableInit(void)
{
	CacheRegisterRelcacheCallback(InvalidateStateTable, (Datum) 0);
}
