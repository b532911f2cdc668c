/*
 * zone_sql.c -- zone-based checks (SPEC 2.2, 2.3): rl_limit,
 * rl_sliding_window, rl_peek, rl_reset and rl_gcra, all returning rl_result.
 *
 * Every algorithm runs through the same state cache and store; only the
 * exact sliding window reads and writes more than its head row (the sealed
 * chunks of its log), and it locks the head row before deciding so that
 * those rows cannot change under it.
 */
#include "ratelimit.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type_d.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "state_cache.h"
#include "store_shmem.h"
#include "zone.h"

PG_FUNCTION_INFO_V1(rl_limit);
PG_FUNCTION_INFO_V1(rl_sliding_window);
PG_FUNCTION_INFO_V1(rl_peek);
PG_FUNCTION_INFO_V1(rl_reset);
PG_FUNCTION_INFO_V1(rl_gcra);

typedef struct ZoneCall
{
	const char *zone_name;
	RlZone		zone;
	RlStateKey	key;
	int64		cost;
	TimestampTz now;
	RlDecision	decision;		/* allowed is overridden in shadow mode */
	bool		would_allow;	/* what the zone's limit decided */
	/* exact sliding window only */
	RlSlidingWindowState *window;
	RlSwDecision *window_result;
} ZoneCall;

static void
ReportCorruptState(const ZoneCall *call)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("rate-limit state of key \"%s\" in zone \"%s\" is corrupt",
					RlMessageTextOfText(call->key.key), RlMessageText(call->zone_name)),
			 errhint("rl_reset() forgets the key's state.")));
}

static bool
DecideCounter(const RlStateRow *prior, RlStateRow *next, void *arg, RlStateAccess *access)
{
	ZoneCall   *call = (ZoneCall *) arg;
	RlCounterState prior_state;
	RlCounterState next_state;

	if (prior != NULL)
	{
		prior_state.a = prior->tokens;
		prior_state.fraction = prior->fraction;
		prior_state.stamp_us = prior->stamp;
		prior_state.b = prior->counter;
	}
	call->decision = rl_counter_take(&call->zone.limit, prior != NULL ? &prior_state : NULL,
									 call->now, call->cost, &next_state);
	next->tokens = next_state.a;
	next->fraction = next_state.fraction;
	next->stamp = next_state.stamp_us;
	next->counter = next_state.b;
	next->entries = NULL;
	next->refill_pending = rl_counter_needs_refill(&call->zone.limit, &next_state);
	return call->decision.state_changed;
}

/*
 * Decodes the head row, hands the algorithm the sealed chunks it asks for
 * (read ahead in doubling batches, so a call that expires many chunks reads
 * each once), and encodes the new head row.
 */
static bool
DecideSlidingWindow(const RlStateRow *prior, RlStateRow *next, void *arg, RlStateAccess *access)
{
	ZoneCall   *call = (ZoneCall *) arg;
	RlSlidingWindowState *window = call->window;
	RlSwDecision *result = call->window_result;
	RlSwChunk  *chunks = NULL;
	int32		loaded = 0;
	bytea	   *header;

	if (prior == NULL)
		rl_sw_init(window);
	else if (prior->entries == NULL ||
			 !rl_sw_decode_header((const uint8_t *) VARDATA_ANY(prior->entries),
								  VARSIZE_ANY_EXHDR(prior->entries),
								  prior->tokens, prior->stamp, window))
		ReportCorruptState(call);

	for (;;)
	{
		uint32		available;
		int32		wanted;

		if (!rl_sw_take(&call->zone.limit, window, call->now, call->cost, chunks, loaded, result))
			ReportCorruptState(call);
		if (result->need_chunks == 0)
			break;
		available = rl_sw_chunk_count(window);
		wanted = Min((int32) available, Max(result->need_chunks, 2 * loaded));
		if (wanted <= loaded)
			ReportCorruptState(call);
		chunks = chunks == NULL ? palloc(sizeof(RlSwChunk) * wanted)
			: repalloc(chunks, sizeof(RlSwChunk) * wanted);
		for (; loaded < wanted; loaded++)
		{
			RlStateRow	row;

			if (!RlReadPart(access, (int32) rl_sw_chunk_seq(window->first_chunk, loaded), &row) ||
				row.entries == NULL)
				ReportCorruptState(call);
			chunks[loaded].bytes = (const uint8_t *) VARDATA_ANY(row.entries);
			chunks[loaded].len = VARSIZE_ANY_EXHDR(row.entries);
		}
	}
	call->decision = result->decision;
	if (!result->decision.state_changed)
		return false;

	header = palloc(VARHDRSZ + RL_SW_MAX_HEADER_BYTES);
	SET_VARSIZE(header, VARHDRSZ + rl_sw_encode_header(window, (uint8_t *) VARDATA(header)));
	next->tokens = window->admitted;
	next->fraction = 0.0;
	next->stamp = window->stamp_us;
	next->counter = rl_sw_chunk_count(window);
	next->entries = header;
	next->refill_pending = false;
	return true;
}

/* Writes the chunks a sliding-window decision sealed or emptied. */
static void
ApplyChunkChanges(const ZoneCall *call)
{
	const RlSwDecision *result = call->window_result;
	RlStateKey	part = call->key;

	for (int32 i = 0; i < result->consumed_chunks; i++)
	{
		part.part = (int32) rl_sw_chunk_seq(result->consumed_from, (uint32) i);
		(void) RlRemovePart(&part);
	}
	if (result->sealed)
	{
		RlStateRow	row;
		bytea	   *bytes = palloc(VARHDRSZ + result->sealed_len);

		SET_VARSIZE(bytes, VARHDRSZ + result->sealed_len);
		memcpy(VARDATA(bytes), result->sealed_bytes, result->sealed_len);
		row.tokens = 0;
		row.fraction = 0.0;
		row.stamp = call->now;
		row.counter = 0;
		row.entries = bytes;
		row.refill_pending = false;
		part.part = (int32) result->sealed_seq;
		RlInsertPart(&part, &row);
	}
}

static void
CheckCost(const ZoneCall *call)
{
	if (call->cost < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cost must not be negative"),
				 errdetail("cost is " INT64_FORMAT ".", call->cost)));
	if (!rl_zone_cost_valid(&call->zone.limit, call->cost))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cost exceeds the capacity of zone \"%s\"", RlMessageText(call->zone_name)),
				 errdetail("cost is " INT64_FORMAT "; the capacity is " INT64_FORMAT ".",
						   call->cost, call->zone.limit.capacity),
				 errhint("Such a call could never be admitted.")));
}

/* Looks the zone up and checks the cost (when has_cost). */
static void
PrepareZone(ZoneCall *call, text *zone_name, text *key, int64 cost, bool has_cost)
{
	call->zone_name = text_to_cstring(zone_name);
	call->key.key = key;
	call->cost = cost;
	RlLookupZone(zone_name, &call->zone);
	call->key.zone_id = call->zone.zone_id;
	call->key.part = 0;
	if (has_cost)
		CheckCost(call);
}

/* Reads zone, key and (with has_cost) cost arguments (0, 1, 2) and checks them. */
static void
PrepareZoneCall(FunctionCallInfo fcinfo, ZoneCall *call, bool has_cost)
{
	text	   *key;
	int64		cost = 0;

	RlRequireNotNull(fcinfo, 0, "zone");
	key = RlCheckedKey(fcinfo, 1, "key");
	if (has_cost)
	{
		RlRequireNotNull(fcinfo, 2, "cost");
		cost = PG_GETARG_INT32(2);
	}
	PrepareZone(call, PG_GETARG_TEXT_PP(0), key, cost, has_cost);
}

/* Shadow mode: the decision stands in the result, the call is let through. */
static void
ApplyShadow(ZoneCall *call)
{
	call->would_allow = call->decision.allowed;
	if (call->zone.shadow)
		call->decision.allowed = true;
}

/* An interval of micros in *interval, which must outlive the Datum's use. */
static Datum
IntervalDatum(int64 micros, Interval *interval)
{
	interval->time = micros;
	interval->day = 0;
	interval->month = 0;
	return IntervalPGetDatum(interval);
}

/* rl_result's descriptor, looked up once per call site. */
static TupleDesc
ResultDesc(FunctionCallInfo fcinfo)
{
	TupleDesc	desc = (TupleDesc) fcinfo->flinfo->fn_extra;

	if (desc == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);

		if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
			elog(ERROR, "rl_result is not a composite type");
		desc = BlessTupleDesc(CreateTupleDescCopy(desc));
		MemoryContextSwitchTo(old);
		fcinfo->flinfo->fn_extra = desc;
	}
	return desc;
}

#define RESULT_COLUMNS 7

static Datum
ResultDatum(FunctionCallInfo fcinfo, const ZoneCall *call, bool has_txn, int64 txn_id)
{
	TupleDesc	desc = ResultDesc(fcinfo);
	const RlDecision *decision = &call->decision;
	Datum		values[RESULT_COLUMNS];
	bool		nulls[RESULT_COLUMNS] = {false, false, false, false, false, false, false};
	Interval	retry_after;	/* heap_form_tuple copies them: no palloc */
	Interval	reset_after;

	/* An older rl_result (the update not run yet) lacks would_allow. */
	if (desc->natts > RESULT_COLUMNS || desc->natts < RESULT_COLUMNS - 1)
		elog(ERROR, "rl_result has %d attributes, expected %d", desc->natts, RESULT_COLUMNS);
	values[0] = BoolGetDatum(decision->allowed);
	values[1] = Int64GetDatum(decision->capacity);
	values[2] = Int64GetDatum(decision->remaining);
	values[3] = IntervalDatum(decision->retry_after_us, &retry_after);
	nulls[3] = call->would_allow;
	values[4] = IntervalDatum(decision->reset_after_us, &reset_after);
	values[5] = Int64GetDatum(txn_id);
	nulls[5] = !has_txn;
	values[6] = BoolGetDatum(call->would_allow);
	return HeapTupleGetDatum(heap_form_tuple(desc, values, nulls));
}

/* Appends the request to ratelimit.history (as its owner); returns txn_id. */
static int64
RecordHistory(const ZoneCall *call)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[6] = {INT8OID, TIMESTAMPTZOID, TEXTOID, TEXTOID, INT4OID, BOOLOID};
	Datum		values[6];
	int64		txn_id = (int64) U64FromFullTransactionId(GetTopFullTransactionId());
	Oid			nsp = get_namespace_oid(RL_INTERNAL_SCHEMA, false);
	Oid			relid = get_relname_relid("history", nsp);
	RlSpiSession session;

	if (!OidIsValid(relid))
		elog(ERROR, "ratelimit history table is missing");
	values[0] = Int64GetDatum(txn_id);
	values[1] = TimestampTzGetDatum(call->decision.decided_at_us);
	values[2] = CStringGetTextDatum(call->zone_name);
	values[3] = PointerGetDatum(call->key.key);
	values[4] = Int32GetDatum((int32) call->cost);
	values[5] = BoolGetDatum(call->decision.allowed);

	RlSpiConnectAs(RlRelationOwner(relid), &session);
	if (SPI_execute_plan(RlKeepPlan(&plan, "INSERT INTO " RL_INTERNAL_SCHEMA ".history"
									" (txn_id, recorded_at, zone, key, cost, allowed)"
									" VALUES ($1, $2, $3, $4, $5, $6)", 6, argtypes),
						 values, NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not record ratelimit history");
	RlSpiFinish(&session);
	return txn_id;
}

static bool
IsSlidingWindow(const ZoneCall *call)
{
	return call->zone.limit.algorithm == RL_ALGORITHM_SLIDING_WINDOW;
}

static void
PrepareSlidingWindow(ZoneCall *call)
{
	call->window = palloc(sizeof(RlSlidingWindowState));
	call->window_result = palloc(sizeof(RlSwDecision));
}

/* The shmem store's path: one decision under the key's set lock. */
static void
DecideInShmem(ZoneCall *call, const RlShmemSlot *slot, bool peek)
{
	RlShmemLimit limit;

	memset(&limit, 0, sizeof(limit));
	limit.is_bucket = false;
	limit.zone = call->zone.limit;
	if (RlShmemUpdate(&call->key, slot, &limit, call->now, DecideCounter, call, peek) == RL_SHMEM_FULL)
		RlApplyShmemFullPolicy(&call->decision, call->zone_name);
}

/*
 * Decides, stores, records, counts: the body of rl_limit, rl_sliding_window
 * and the trigger.  Returns the history's txn_id (0 without history).
 */
static int64
DecideZoneCall(ZoneCall *call, const char *function)
{
	int64		txn_id = 0;
	RlShmemSlot slot;

	if (call->zone.store == RL_STORE_SHMEM)
		RlShmemLocate(&call->key, &slot);
	/* The shmem store writes no WAL: it decides on a standby too. */
	if ((call->zone.store == RL_STORE_TABLE || call->zone.history) && XactReadOnly)
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot execute %s in a read-only transaction", function),
				 call->zone.store == RL_STORE_TABLE
				 ? errdetail("Zone \"%s\" keeps its state in a table.", RlMessageText(call->zone_name))
				 : errdetail("Zone \"%s\" records every request in its history table.",
							 RlMessageText(call->zone_name)),
				 errhint("A read-only transaction (PostgREST runs GET and HEAD requests so, "
						 "a hot standby runs nothing else) can use a zone on the shmem store "
						 "without history: rl_zone_set(..., store => 'shmem', history => false).")));
	call->now = RlNow();
	if (call->zone.store == RL_STORE_SHMEM)
		DecideInShmem(call, &slot, false);
	else if (IsSlidingWindow(call))
	{
		PrepareSlidingWindow(call);
		RlStateUpdate(&call->key, true, DecideSlidingWindow, call);
		if (call->decision.state_changed)
			ApplyChunkChanges(call);
	}
	else
		RlStateUpdate(&call->key, false, DecideCounter, call);
	RlShmemCount(call->zone.zone_id, call->decision.allowed);
	if (call->zone.history)
		txn_id = RecordHistory(call);
	ApplyShadow(call);
	return txn_id;
}

static Datum
TakeFromZone(FunctionCallInfo fcinfo, ZoneCall *call, const char *function)
{
	int64		txn_id = DecideZoneCall(call, function);

	return ResultDatum(fcinfo, call, call->zone.history, txn_id);
}

void
RlTakeFromZone(text *zone_name, text *key, int64 cost, const char *function,
			   RlZoneOutcome *outcome)
{
	ZoneCall	call;

	memset(&call, 0, sizeof(call));
	PrepareZone(&call, zone_name, RlCheckKey(key, "key"), cost, true);
	(void) DecideZoneCall(&call, function);
	outcome->decision = call.decision;
	outcome->would_allow = call.would_allow;
}

Datum
rl_limit(PG_FUNCTION_ARGS)
{
	ZoneCall	call;

	PrepareZoneCall(fcinfo, &call, true);
	return TakeFromZone(fcinfo, &call, "rl_limit()");
}

Datum
rl_sliding_window(PG_FUNCTION_ARGS)
{
	ZoneCall	call;

	PrepareZoneCall(fcinfo, &call, true);
	if (!IsSlidingWindow(&call))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("zone \"%s\" is a %s zone, not a sliding_window zone",
						RlMessageText(call.zone_name), RlAlgorithmName(call.zone.limit.algorithm)),
				 errhint("Use rl_limit() for zones of any algorithm.")));
	return TakeFromZone(fcinfo, &call, "rl_sliding_window()");
}

Datum
rl_peek(PG_FUNCTION_ARGS)
{
	ZoneCall	call;
	RlShmemSlot slot;

	PrepareZoneCall(fcinfo, &call, true);
	if (call.zone.store == RL_STORE_SHMEM)
		RlShmemLocate(&call.key, &slot);
	call.now = RlNow();
	if (call.zone.store == RL_STORE_SHMEM)
		DecideInShmem(&call, &slot, true);
	else if (IsSlidingWindow(&call))
	{
		PrepareSlidingWindow(&call);
		RlStateRead(&call.key, DecideSlidingWindow, &call);
	}
	else
		RlStateRead(&call.key, DecideCounter, &call);
	/* Nothing was taken. */
	call.decision.state_changed = false;
	ApplyShadow(&call);
	return ResultDatum(fcinfo, &call, false, 0);
}

Datum
rl_reset(PG_FUNCTION_ARGS)
{
	ZoneCall	call;
	RlStateRow	removed;
	bool		existed;

	PrepareZoneCall(fcinfo, &call, false);
	if (call.zone.store == RL_STORE_SHMEM)
		PG_RETURN_BOOL(RlShmemRemove(&call.key));
	PreventCommandIfReadOnly("rl_reset()");

	existed = RlStateRemove(&call.key, &removed);
	if (existed && IsSlidingWindow(&call) && removed.entries != NULL)
	{
		RlSlidingWindowState *window = palloc(sizeof(RlSlidingWindowState));

		/* The chunks of the log go with it (a corrupt head leaves them to GC). */
		if (rl_sw_decode_header((const uint8_t *) VARDATA_ANY(removed.entries),
								VARSIZE_ANY_EXHDR(removed.entries), removed.tokens,
								removed.stamp, window))
		{
			uint32		count = rl_sw_chunk_count(window);
			RlStateKey	part = call.key;

			for (uint32 i = 0; i < count; i++)
			{
				part.part = (int32) rl_sw_chunk_seq(window->first_chunk, i);
				(void) RlRemovePart(&part);
			}
		}
	}
	PG_RETURN_BOOL(existed);
}

static void
ReportGcraError(RlGcraError error, int64 max_burst, int64 count, double period, int64 quantity)
{
	switch (error)
	{
		case RL_GCRA_OK:
			return;
		case RL_GCRA_MAX_BURST_INVALID:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("max_burst must not be negative, and the burst must refill within 285 years"),
					 errdetail("max_burst is " INT64_FORMAT ".", max_burst)));
			break;
		case RL_GCRA_COUNT_INVALID:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("count must be greater than zero"),
					 errdetail("count is " INT64_FORMAT ".", count)));
			break;
		case RL_GCRA_PERIOD_INVALID:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("period must be a finite number of seconds, at least one microsecond and at most 285 years"),
					 errdetail("period is %g.", period)));
			break;
		case RL_GCRA_QUANTITY_NEGATIVE:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("quantity must not be negative"),
					 errdetail("quantity is " INT64_FORMAT ".", quantity)));
			break;
		case RL_GCRA_QUANTITY_ABOVE_LIMIT:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("quantity exceeds the limit max_burst + 1"),
					 errdetail("quantity is " INT64_FORMAT "; the limit is " INT64_FORMAT ".",
							   quantity, max_burst + 1),
					 errhint("Such a call could never be admitted.")));
			break;
	}
}

/* rl_gcra(key, max_burst, count, period, quantity): redis-cell's CL.THROTTLE. */
Datum
rl_gcra(PG_FUNCTION_ARGS)
{
	ZoneCall	call;
	int64		max_burst;
	int64		count;
	double		period;

	call.key.key = RlCheckedKey(fcinfo, 0, "key");
	RlRequireNotNull(fcinfo, 1, "max_burst");
	RlRequireNotNull(fcinfo, 2, "count");
	RlRequireNotNull(fcinfo, 3, "period");
	RlRequireNotNull(fcinfo, 4, "quantity");
	max_burst = PG_GETARG_INT32(1);
	count = PG_GETARG_INT32(2);
	period = PG_GETARG_FLOAT8(3);
	call.cost = PG_GETARG_INT32(4);
	ReportGcraError(rl_gcra_limit(max_burst, count, period, call.cost, &call.zone.limit),
					max_burst, count, period, call.cost);

	call.zone_name = "(rl_gcra)";
	call.zone.zone_id = RL_ZONE_ID_GCRA;
	call.zone.store = rl_default_store == RL_DEFAULT_STORE_SHMEM ? RL_STORE_SHMEM : RL_STORE_TABLE;
	call.zone.history = false;
	call.zone.shadow = false;
	call.key.zone_id = RL_ZONE_ID_GCRA;
	call.key.part = 0;
	return TakeFromZone(fcinfo, &call, "rl_gcra()");
}
