/*
 * store.c -- which store keeps a zone's state: the one place that chooses.
 */
#include "postgres.h"

#include "common/hashfn.h"

#include "utils/memutils.h"

#include "base/settings.h"
#include "store/shmem_leases.h"
#include "store/shmem_store.h"
#include "store/state_table.h"
#include "store/store.h"
#include "store/table_store.h"

/*
 * The table store's path for key: ratelimit.table_access, within what the
 * table allows.  On Citus the planner-free path works on the key's shard
 * when it is placed on this node; elsewhere only SQL reaches the key.
 */
static const RlStore *
TableStoreForKey(const RlStateKey *key)
{
	const RlStateTable *table = RlGetStateTable(key->durable);
	bool		reachable = table->is_heap &&
		(!table->is_distributed || OidIsValid(RlStateRelationOfKey(key->key, key->durable)));

	switch (rl_table_access)
	{
		case RL_TABLE_ACCESS_DIRECT:
			if (!reachable)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("ratelimit.table_access = direct needs the key's rows in a local heap table"),
						 errdetail("ratelimit.%s is %s.", key->durable ? "durable_state" : "state",
								   table->is_distributed ? "held by Citus, and the key's shard is not a table of this node"
								   : "not a heap table"),
						 errhint("Set ratelimit.table_access to auto or spi.")));
			return &RlTableDirectStore;
		case RL_TABLE_ACCESS_SPI:
			return &RlTableSpiStore;
		default:
			return reachable ? &RlTableDirectStore : &RlTableSpiStore;
	}
}

/*
 * Shared memory is each node's own: on Citus a key's shmem state is kept on
 * the node that holds the key's shard, and a call decided anywhere else
 * would count apart from it.  Calls are forwarded there (api/forward.c);
 * one reaches this only when Citus did not delegate the forwarded call.
 */
static void
RequireShmemKeyHere(text *key)
{
	const RlStateTable *table = RlGetStateTable(false);

	if (table->is_distributed && !OidIsValid(RlStateRelationOfKey(key, false)))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("a shmem zone's key is decided on the Citus node that holds its shard, not on this one"),
				 errdetail("Shared memory is per node; deciding here would count the key twice."),
				 errhint("Run rl_citus_setup() on the coordinator, which distributes the functions "
						 "so that Citus delegates them to the key's node, or use a table zone.")));
}

const RlStore *
RlStoreForKey(RlStoreKind kind, const RlStateKey *key)
{
	if (kind == RL_STORE_SHMEM)
	{
		RequireShmemKeyHere(key->key);
		return &RlShmemStore;
	}
	if (kind == RL_STORE_SHMEM_LEASES)
	{
		RequireShmemKeyHere(key->key);
		return &RlShmemLeaseStore;
	}
	return TableStoreForKey(key);
}

text *
RlStateKeyParams(const RlStateKey *key)
{
	static text *none = NULL;

	if (key->params != NULL)
		return key->params;
	if (none == NULL)
	{
		none = MemoryContextAlloc(TopMemoryContext, VARHDRSZ);
		SET_VARSIZE(none, VARHDRSZ);
	}
	return none;
}

uint64
RlStateKeyHash(Oid relid, const RlStateKey *key)
{
	const text *params = RlStateKeyParams(key);
	uint64		seed = ((uint64) relid << 32) ^ ((uint64) (uint32) key->zone_id << 16) ^ (uint32) key->part;
	uint64		hash = hash_bytes_extended((const unsigned char *) VARDATA_ANY(key->key),
										   VARSIZE_ANY_EXHDR(key->key), seed);

	return hash_bytes_extended((const unsigned char *) VARDATA_ANY(params),
							   VARSIZE_ANY_EXHDR(params), hash);
}

bool
RlSameText(const text *a, const text *b)
{
	int			len = VARSIZE_ANY_EXHDR(a);

	return len == (int) VARSIZE_ANY_EXHDR(b) && memcmp(VARDATA_ANY(a), VARDATA_ANY(b), len) == 0;
}

/* For what concerns a whole zone (its keys on this node). */
const RlStore *
RlStoreOf(RlStoreKind kind)
{
	if (kind == RL_STORE_SHMEM)
		return &RlShmemStore;
	if (kind == RL_STORE_SHMEM_LEASES)
		return &RlShmemLeaseStore;
	return rl_table_access == RL_TABLE_ACCESS_SPI ? &RlTableSpiStore : &RlTableDirectStore;
}
