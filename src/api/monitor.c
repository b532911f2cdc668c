/*
 * monitor.c -- what the monitoring views read from C: rl_keys' shmem rows
 * (ratelimit.shmem_keys()), rl_counters' counts (ratelimit.shmem_counters())
 * and whether they must gather every Citus node's
 * (ratelimit.state_is_distributed()); and, for the owner, where the shmem
 * store places a key (ratelimit.shmem_placement()) and its last save
 * (ratelimit.shmem_save_status()).
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"

#include "base/clock.h"
#include "base/counters.h"
#include "store/shmem_save.h"
#include "store/shmem_store.h"
#include "store/state_table.h"

PG_FUNCTION_INFO_V1(rl_shmem_keys);
PG_FUNCTION_INFO_V1(rl_shmem_counters);
PG_FUNCTION_INFO_V1(rl_state_is_distributed);
PG_FUNCTION_INFO_V1(rl_shmem_placement);
PG_FUNCTION_INFO_V1(rl_shmem_save_status);

typedef struct KeysScan
{
	ReturnSetInfo *rsinfo;
	TimestampTz now;
} KeysScan;

/* One key as rl_keys shows it: what a call of cost 0 would see now. */
static void
PutKeyRow(const RlShmemKeyInfo *key, void *arg)
{
	KeysScan   *scan = (KeysScan *) arg;
	Datum		values[6];
	bool		nulls[6] = {false, false, false, false, false, false};

	values[0] = Int32GetDatum(key->zone_id);
	if (key->key == NULL)
		nulls[1] = true;		/* kept as a hash: the key itself is not known */
	else
		values[1] = PointerGetDatum(cstring_to_text_with_len(key->key, key->key_len));
	if (key->limit.is_bucket)
	{
		RlTokenBucketState state = {key->state.tokens, key->state.fraction, key->state.stamp};
		RlTokenBucketDecision peek = rl_token_bucket_take(&state, scan->now, &key->limit.bucket, 0);

		values[2] = Int64GetDatum((int64) key->limit.bucket.capacity);
		values[3] = Int64GetDatum(peek.remaining);
		nulls[4] = true;
	}
	else
	{
		RlCounterState state = {key->state.tokens, key->state.fraction, key->state.stamp,
		key->state.counter};
		RlCounterState next;
		RlDecision	peek = rl_counter_take(&key->limit.zone, &state, scan->now, 0, &next);
		Interval   *reset = palloc0(sizeof(Interval));

		reset->time = peek.reset_after_us;
		values[2] = Int64GetDatum(peek.capacity);
		values[3] = Int64GetDatum(peek.remaining);
		values[4] = IntervalPGetDatum(reset);
	}
	values[5] = TimestampTzGetDatum(key->state.stamp);
	tuplestore_putvalues(scan->rsinfo->setResult, scan->rsinfo->setDesc, values, nulls);
}

/*
 * This database's keys in the shmem store: zone_id, key (NULL when kept as
 * a hash), capacity, remaining, reset_after (NULL for rl_token_bucket), and
 * the time of the last change.
 */
Datum
rl_shmem_keys(PG_FUNCTION_ARGS)
{
	KeysScan	scan;

	InitMaterializedSRF(fcinfo, 0);
	scan.rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	scan.now = RlNow();
	RlShmemScanKeys(PutKeyRow, &scan);
	PG_RETURN_VOID();
}

static void
PutCountersRow(int32 zone_id, const int64 counts[RL_ZONE_COUNTS], void *arg)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) arg;
	Datum		values[1 + RL_ZONE_COUNTS];
	bool		nulls[1 + RL_ZONE_COUNTS] = {false};

	values[0] = Int32GetDatum(zone_id);
	for (int what = 0; what < RL_ZONE_COUNTS; what++)
		values[1 + what] = Int64GetDatum(counts[what]);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/* Counts per zone of this database: none when ratelimit is not preloaded. */
Datum
rl_shmem_counters(PG_FUNCTION_ARGS)
{
	InitMaterializedSRF(fcinfo, 0);
	RlVisitCounters(PutCountersRow, fcinfo->resultinfo);
	PG_RETURN_VOID();
}

/* ratelimit.state_is_distributed(): by Citus, on this node's catalog. */
Datum
rl_state_is_distributed(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(RlGetStateTable(false)->is_distributed);
}

/* ratelimit.shmem_placement(zone_id, key): the set the key maps to now. */
Datum
rl_shmem_placement(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(RlShmemPlacement(PG_GETARG_INT32(0), PG_GETARG_TEXT_PP(1)));
}

/*
 * ratelimit.shmem_save_status(): the save worker's last save (no row when
 * ratelimit is not preloaded; NULLs before the first save).
 */
Datum
rl_shmem_save_status(PG_FUNCTION_ARGS)
{
	RlShmemSaveStatus status;
	Datum		values[6];
	bool		nulls[6] = {false, false, false, false, false, false};

	InitMaterializedSRF(fcinfo, 0);
	if (!RlShmemSaveStatusGet(&status))
		PG_RETURN_VOID();
	/* The worker's, not this session's: it applies a reload a moment later. */
	values[0] = Int32GetDatum((int32) status.worker_interval);
	values[1] = TimestampTzGetDatum(status.saved_at);
	values[2] = Int64GetDatum(status.keys);
	values[3] = Int64GetDatum(status.bytes);
	values[4] = Float8GetDatum(status.micros / 1000.0);
	values[5] = Int64GetDatum(status.saves);
	nulls[0] = (status.worker_interval == PG_UINT32_MAX);
	nulls[1] = nulls[2] = nulls[3] = nulls[4] = (status.saved_at == 0);
	tuplestore_putvalues(((ReturnSetInfo *) fcinfo->resultinfo)->setResult,
						 ((ReturnSetInfo *) fcinfo->resultinfo)->setDesc, values, nulls);
	PG_RETURN_VOID();
}
