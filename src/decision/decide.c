/*
 * decide.c -- one decision, whatever the store: look the store up, check
 * that the transaction may write it, run the algorithm through it, apply
 * what the store says when it had no room, count, record the history, and
 * apply shadow mode.  rl_limit, rl_sliding_window, rl_peek, rl_reset,
 * rl_gcra, rl_token_bucket and rl_limit_trigger all come through here.
 * The other kinds of call, built on these steps (decide_internal.h), have
 * their own files: waiting (decide_wait.c), refunds (decide_refund.c),
 * leases (decide_leases.c) and several zones at once
 * (decide_several_zones.c).
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type_d.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"

#include "base/args.h"
#include "base/clock.h"
#include "base/counters.h"
#include "base/settings.h"
#include "base/spi_exec.h"
#include "base/wait_lines.h"
#include "decision/algorithms.h"
#include "decision/decide_internal.h"
#include "store/state_table.h"

void
RlRequireCostNotNegative(const RlCall *call)
{
	if (call->cost < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cost must not be negative"),
				 errdetail("cost is " INT64_FORMAT ".", call->cost)));
}

void
RlCheckCost(const RlCall *call)
{
	RlRequireCostNotNegative(call);
	if (!rl_zone_cost_valid(&call->request.limit.zone, call->cost))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cost exceeds the capacity of zone \"%s\"", RlMessageText(call->what)),
				 errdetail("cost is " INT64_FORMAT "; the capacity is " INT64_FORMAT ".",
						   call->cost, call->request.limit.zone.capacity),
				 errhint("Such a call could never be admitted.")));
}

void
RlPrepareZoneCall(RlCall *call, text *zone_name, text *key, int64 cost, bool check_cost)
{
	RlZone	   *zone = &call->zone;

	memset(call, 0, sizeof(*call));
	call->what = text_to_cstring(zone_name);
	call->zone_name = zone_name;
	RlLookupZone(zone_name, zone);
	call->store = zone->store;
	call->request.key.key = key;
	call->request.key.zone_id = zone->zone_id;
	call->request.key.part = 0;
	call->request.key.durable = zone->durable;
	call->request.zone_generation = RlZoneGeneration();
	call->request.limit.zone = zone->limit;
	call->cost = cost;
	call->history = zone->history;
	call->shadow = zone->shadow;
	if (check_cost)
		RlCheckCost(call);
}

void
RlPrepareAdHocCall(RlCall *call, const char *function, text *key, int32 zone_id, int64 cost)
{
	memset(call, 0, sizeof(*call));
	call->what = function;
	call->store = rl_default_store == RL_DEFAULT_STORE_SHMEM ? RL_STORE_SHMEM : RL_STORE_TABLE;
	call->request.key.key = key;
	call->request.key.zone_id = zone_id;
	call->request.key.part = 0;
	call->cost = cost;
}

void
RlLocate(RlCall *call)
{
	const RlStore *store = call->shmem_here && call->store == RL_STORE_SHMEM
		? RlStoreOf(call->store) : RlStoreForKey(call->store, &call->request.key);

	if (store->locate != NULL)
		store->locate(&call->request);
	call->located_in = store;
}

/* A concurrency zone limits leases, not calls: rl_acquire is its call. */
void
RlRequireRateZone(const RlCall *call, const char *function)
{
	if (IsConcurrency(call))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("zone \"%s\" limits concurrent leases, not calls", RlMessageText(call->what)),
				 errdetail("%s takes from a zone of requests per period; "
						   "a concurrency zone counts the leases held at once.", function),
				 errhint("Use rl_acquire() and rl_release() on it.")));
}

/* The callback that runs the call's algorithm on a row (kept in the call). */
RlDecideFn
RlAlgorithmOf(RlCall *call)
{
	if (IsConcurrency(call))
		call->algorithm = RlPeekLeases;	/* what a look sees; rl_acquire runs its own */
	else if (call->request.limit.is_bucket)
		call->algorithm = RlDecideTokenBucket;
	else if (IsSlidingWindow(call))
	{
		call->window = palloc(sizeof(RlSlidingWindowState));
		call->window_result = palloc(sizeof(RlSwDecision));
		call->request.lock_first = true;
		call->algorithm = RlDecideSlidingWindow;
	}
	else
		call->algorithm = RlDecideCounter;
	return call->algorithm;
}

/* A write to a table in a read-only transaction fails here, naming why. */
void
RlRequireWritable(const RlCall *call, const RlStore *store, const char *function)
{
	if (!XactReadOnly || !(store->writes_tables || call->history))
		return;
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot execute %s on a standby", function),
				 errdetail("This server is a standby in recovery: it cannot write, and %s.",
						   call->request.limit.is_bucket
						   ? "the ad-hoc buckets are kept in a table"
						   : store->writes_tables
						   ? psprintf("zone \"%s\" keeps its state in a table", RlMessageText(call->what))
						   : psprintf("zone \"%s\" records every request in its history table",
									  RlMessageText(call->what))),
				 errhint("Send rate-limit calls to the primary.  A zone on the shmem store without "
						 "history decides on a standby too, counting on its own, apart from the "
						 "primary: rl_zone_set(..., store => 'shmem', history => false).")));
	if (call->request.limit.is_bucket)
		PreventCommandIfReadOnly(function);
	ereport(ERROR,
			(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
			 errmsg("cannot execute %s in a read-only transaction", function),
			 store->writes_tables
			 ? errdetail("Zone \"%s\" keeps its state in a table.", RlMessageText(call->what))
			 : errdetail("Zone \"%s\" records every request in its history table.",
						 RlMessageText(call->what)),
			 errhint("A read-only transaction (PostgREST runs GET and HEAD requests so, "
					 "a hot standby runs nothing else) can use a zone on the shmem store "
					 "without history: rl_zone_set(..., store => 'shmem', history => false).")));
}

#define HISTORY_COLUMNS "(txn_id, recorded_at, zone, key, cost, allowed) VALUES ($1, $2, $3, $4, $5, $6)"

static Oid	history_argtypes[6] = {INT8OID, TIMESTAMPTZOID, TEXTOID, TEXTOID, INT4OID, BOOLOID};

/* The prepared INSERT into each shard of the history placed here (Citus). */
typedef struct ShardInsert
{
	Oid			shard;
	SPIPlanPtr	plan;
} ShardInsert;

static HTAB *shard_inserts = NULL;

/*
 * On Citus a key's requests go into its history shard on this node as into
 * any local table: SQL on the distributed table would plan and execute it
 * through Citus (tens of microseconds a row).
 */
static SPIPlanPtr
HistoryInsertPlan(text *key)
{
	static SPIPlanPtr table_plan = NULL;
	Oid			shard = RlHistoryShardOfKey(key);
	ShardInsert *entry;
	bool		found;

	if (!OidIsValid(shard))
		return RlKeepPlan(&table_plan, "INSERT INTO " RL_INTERNAL_SCHEMA ".history " HISTORY_COLUMNS,
						  6, history_argtypes);
	if (shard_inserts == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(ShardInsert);
		shard_inserts = hash_create("ratelimit history shards", 64, &ctl, HASH_ELEM | HASH_BLOBS);
	}
	entry = hash_search(shard_inserts, &shard, HASH_ENTER, &found);
	if (!found)
		entry->plan = NULL;
	if (entry->plan == NULL)
	{
		char	   *name = quote_qualified_identifier(get_namespace_name(get_rel_namespace(shard)),
													  get_rel_name(shard));

		(void) RlKeepPlan(&entry->plan, psprintf("INSERT INTO %s " HISTORY_COLUMNS, name),
						  6, history_argtypes);
	}
	return entry->plan;
}

/* Appends the request to ratelimit.history (as its owner). */
void
RlRecordHistory(RlCall *call)
{
	Datum		values[6];
	int64		txn_id = (int64) U64FromFullTransactionId(GetTopFullTransactionId());
	Oid			relid = RlHistoryTable();
	RlSpiSession session;

	if (!OidIsValid(relid))
		elog(ERROR, "ratelimit history table is missing");
	values[0] = Int64GetDatum(txn_id);
	values[1] = TimestampTzGetDatum(call->decision.decided_at_us);
	values[2] = CStringGetTextDatum(call->what);
	values[3] = PointerGetDatum(call->request.key.key);
	values[4] = Int32GetDatum((int32) call->cost);
	values[5] = BoolGetDatum(call->decision.allowed);

	RlSpiConnectAs(RlRelationOwner(relid), &session);
	if (SPI_execute_plan(HistoryInsertPlan(call->request.key.key), values, NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not record ratelimit history");
	RlSpiFinish(&session);
	call->recorded = true;
	call->txn_id = txn_id;
}

/* Shadow mode: the decision stands in would_allow, the call is let through. */
static void
ApplyShadow(RlCall *call)
{
	call->would_allow = call->decision.allowed;
	if (call->shadow)
		call->decision.allowed = true;
}

/* Runs the call's algorithm on the key's state, now, through its store. */
void
RlDecideOnce(RlCall *call, const RlStore *store, RlDecideFn algorithm)
{
	call->request.now = RlNow();
	if (store->update(&call->request, algorithm, call) == RL_STORE_NO_ROOM)
		store->no_room(&call->decision, call->what);
	if (IsSlidingWindow(call) && call->decision.state_changed)
		RlApplyChunkChanges(call, store);
}

/* What happens once per call, however many times it was decided. */
void
RlConclude(RlCall *call)
{
	RlCountDecision(call->request.key.zone_id, call->decision.allowed);
	if (call->history)
		RlRecordHistory(call);
	ApplyShadow(call);
}

void
RlTake(RlCall *call, const char *function)
{
	const RlStore *store = LocatedStore(call);
	RlDecideFn	algorithm;

	RlRequireRateZone(call, function);
	RlRequireWritable(call, store, function);
	algorithm = RlAlgorithmOf(call);
	RlDecideOnce(call, store, algorithm);
	RlConclude(call);
}

void
RlPeek(RlCall *call)
{
	const RlStore *store = LocatedStore(call);
	RlDecideFn	algorithm;

	algorithm = RlAlgorithmOf(call);
	call->request.now = RlNow();
	store->read(&call->request, algorithm, call);
	/* Nothing was taken. */
	call->decision.state_changed = false;
	ApplyShadow(call);
}

void
RlReadKey(RlCall *call, RlDecideFn read, void *arg)
{
	const RlStore *store = LocatedStore(call);

	call->request.now = RlNow();
	store->read(&call->request, read, arg);
}

bool
RlForget(RlCall *call, const char *function)
{
	const RlStore *store = LocatedStore(call);
	RlStateRow	removed;
	bool		existed;

	if (store->writes_tables)
		PreventCommandIfReadOnly(function);
	existed = store->remove(&call->request.key, &removed);
	if (existed)
		RlWaitLineWakeAfter(RlWaitLineOf(call->request.key.zone_id, call->request.key.key),
							store->writes_tables);
	/* The chunks of the log go with the head row. */
	if (existed && IsSlidingWindow(call))
		RlForgetChunks(call, store, &removed);
	return existed;
}

void
RlForgetZoneState(int32 zone_id)
{
	RlStoreOf(RL_STORE_TABLE)->forget_zone(zone_id);
	/* Not transactional, as everything in shared memory. */
	RlStoreOf(RL_STORE_SHMEM)->forget_zone(zone_id);
	RlStoreOf(RL_STORE_SHMEM_LEASES)->forget_zone(zone_id);
}

void
RlStartZoneIdAfresh(int32 zone_id)
{
	RlCountersStartAfresh(MyDatabaseId, zone_id);
	/* The table store's rows went with the dropped extension's table. */
	RlStoreOf(RL_STORE_SHMEM)->forget_zone(zone_id);
	RlStoreOf(RL_STORE_SHMEM_LEASES)->forget_zone(zone_id);
}

void
RlRetireZoneId(int32 zone_id)
{
	RlStoreOf(RL_STORE_SHMEM)->forget_zone(zone_id);
	RlStoreOf(RL_STORE_SHMEM_LEASES)->forget_zone(zone_id);
}

void
RlRelimitZoneState(RlStoreKind store, int32 zone_id, const RlZoneLimit *limit)
{
	RlStoreOf(store)->relimit_zone(zone_id, limit);
}

void
RlFlushZoneState(int32 zone_id)
{
	RlStoreOf(RL_STORE_TABLE)->flush_zone(zone_id);
}
