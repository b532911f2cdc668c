/*
 * decide.c -- one decision, whatever the store: look the store up, check
 * that the transaction may write it, run the algorithm through it, apply
 * what the store says when it had no room, count, record the history, and
 * apply shadow mode.  rl_limit, rl_sliding_window, rl_peek, rl_reset,
 * rl_gcra, rl_token_bucket and rl_limit_trigger all come through here.
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type_d.h"
#include "miscadmin.h"
#include "utils/builtins.h"

#include "base/args.h"
#include "base/clock.h"
#include "base/counters.h"
#include "base/settings.h"
#include "base/spi_exec.h"
#include "decision/algorithms.h"
#include "decision/decide.h"

static void
CheckCost(const RlCall *call)
{
	if (call->cost < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cost must not be negative"),
				 errdetail("cost is " INT64_FORMAT ".", call->cost)));
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
	RlZone		zone;

	memset(call, 0, sizeof(*call));
	call->what = text_to_cstring(zone_name);
	RlLookupZone(zone_name, &zone);
	call->store = zone.store;
	call->request.key.key = key;
	call->request.key.zone_id = zone.zone_id;
	call->request.key.part = 0;
	call->request.limit.zone = zone.limit;
	call->cost = cost;
	call->history = zone.history;
	call->shadow = zone.shadow;
	if (check_cost)
		CheckCost(call);
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
	const RlStore *store = RlStoreOf(call->store);

	if (store->locate != NULL)
		store->locate(&call->request);
	call->located_in = store;
}

/* The call's store, told the key: the store is chosen once per call. */
static const RlStore *
LocatedStore(RlCall *call)
{
	if (call->located_in == NULL)
		RlLocate(call);
	return call->located_in;
}

static bool
IsSlidingWindow(const RlCall *call)
{
	return !call->request.limit.is_bucket &&
		call->request.limit.zone.algorithm == RL_ALGORITHM_SLIDING_WINDOW;
}

/* The callback that runs the call's algorithm on a row. */
static RlDecideFn
AlgorithmOf(RlCall *call)
{
	if (call->request.limit.is_bucket)
		return RlDecideTokenBucket;
	if (IsSlidingWindow(call))
	{
		call->window = palloc(sizeof(RlSlidingWindowState));
		call->window_result = palloc(sizeof(RlSwDecision));
		call->request.lock_first = true;
		return RlDecideSlidingWindow;
	}
	return RlDecideCounter;
}

/* A write to a table in a read-only transaction fails here, naming why. */
static void
RequireWritable(const RlCall *call, const RlStore *store, const char *function)
{
	if (!XactReadOnly || !(store->writes_tables || call->history))
		return;
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

/* Appends the request to ratelimit.history (as its owner). */
static void
RecordHistory(RlCall *call)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[6] = {INT8OID, TIMESTAMPTZOID, TEXTOID, TEXTOID, INT4OID, BOOLOID};
	Datum		values[6];
	int64		txn_id = (int64) U64FromFullTransactionId(GetTopFullTransactionId());
	Oid			relid = RlInternalTable("history");
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
	if (SPI_execute_plan(RlKeepPlan(&plan, "INSERT INTO " RL_INTERNAL_SCHEMA ".history"
									" (txn_id, recorded_at, zone, key, cost, allowed)"
									" VALUES ($1, $2, $3, $4, $5, $6)", 6, argtypes),
						 values, NULL, false, 0) != SPI_OK_INSERT)
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

void
RlTake(RlCall *call, const char *function)
{
	const RlStore *store = LocatedStore(call);
	RlDecideFn	algorithm;

	RequireWritable(call, store, function);
	algorithm = AlgorithmOf(call);
	call->request.now = RlNow();
	if (store->update(&call->request, algorithm, call) == RL_STORE_NO_ROOM)
		store->no_room(&call->decision, call->what);
	if (IsSlidingWindow(call) && call->decision.state_changed)
		RlApplyChunkChanges(call, store);
	RlCountDecision(call->request.key.zone_id, call->decision.allowed);
	if (call->history)
		RecordHistory(call);
	ApplyShadow(call);
}

void
RlPeek(RlCall *call)
{
	const RlStore *store = LocatedStore(call);
	RlDecideFn	algorithm;

	algorithm = AlgorithmOf(call);
	call->request.now = RlNow();
	store->read(&call->request, algorithm, call);
	/* Nothing was taken. */
	call->decision.state_changed = false;
	ApplyShadow(call);
}

bool
RlForget(RlCall *call, const char *function)
{
	const RlStore *store = RlStoreOf(call->store);
	RlStateRow	removed;
	bool		existed;

	if (store->writes_tables)
		PreventCommandIfReadOnly(function);
	existed = store->remove(&call->request.key, &removed);
	/* The chunks of the log go with the head row. */
	if (existed && IsSlidingWindow(call))
		RlForgetChunks(call, store, &removed);
	return existed;
}

void
RlForgetZoneState(int32 zone_id)
{
	RlStoreOf(RL_STORE_TABLE)->forget_zone(zone_id);
	/* Not transactional, as everything in the shmem store. */
	RlStoreOf(RL_STORE_SHMEM)->forget_zone(zone_id);
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
