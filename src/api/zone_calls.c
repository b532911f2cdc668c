/*
 * zone_calls.c -- the zone checks as SQL sees them: rl_limit,
 * rl_sliding_window, rl_peek, rl_reset and rl_gcra, all returning
 * rl_result.  Each reads its arguments and hands the call to decide.c.
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "catalog/pg_type_d.h"
#include "utils/array.h"
#include "utils/builtins.h"

#include "base/args.h"
#include "base/clock.h"
#include "decision/decide.h"

PG_FUNCTION_INFO_V1(rl_limit);
PG_FUNCTION_INFO_V1(rl_limit_zones);
PG_FUNCTION_INFO_V1(rl_wait);
PG_FUNCTION_INFO_V1(rl_refund);
PG_FUNCTION_INFO_V1(rl_sliding_window);
PG_FUNCTION_INFO_V1(rl_peek);
PG_FUNCTION_INFO_V1(rl_reset);
PG_FUNCTION_INFO_V1(rl_gcra);

/* Reads zone, key and (with has_cost) cost arguments (0, 1, 2) and checks them. */
static void
PrepareZoneCall(FunctionCallInfo fcinfo, RlCall *call, bool has_cost)
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
	RlPrepareZoneCall(call, PG_GETARG_TEXT_PP(0), key, cost, has_cost);
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

#define RESULT_COLUMNS 10

/*
 * An interval shown as a count of microseconds where the core says none can
 * be promised (-1: a cron zone that no job refills).
 */
static void
SetInterval(Datum *value, bool *isnull, int64 micros, Interval *interval)
{
	*isnull = micros < 0;
	*value = IntervalDatum(micros, interval);
}

static Datum
ResultDatum(FunctionCallInfo fcinfo, const RlCall *call)
{
	TupleDesc	desc = ResultDesc(fcinfo);
	const RlDecision *decision = &call->decision;
	Datum		values[RESULT_COLUMNS];
	bool		nulls[RESULT_COLUMNS] = {0};
	Interval	retry_after;	/* heap_form_tuple copies them: no palloc */
	Interval	reset_after;
	Interval	period;

	if (desc->natts != RESULT_COLUMNS)
		elog(ERROR, "rl_result has %d attributes, expected %d", desc->natts, RESULT_COLUMNS);
	values[0] = BoolGetDatum(decision->allowed);
	values[1] = Int64GetDatum(decision->capacity);
	values[2] = Int64GetDatum(decision->remaining);
	SetInterval(&values[3], &nulls[3], decision->retry_after_us, &retry_after);
	nulls[3] = nulls[3] || call->would_allow;
	SetInterval(&values[4], &nulls[4], decision->reset_after_us, &reset_after);
	values[5] = Int64GetDatum(call->txn_id);
	nulls[5] = !call->recorded;
	values[6] = BoolGetDatum(call->would_allow);
	values[7] = PointerGetDatum(call->zone_name);
	nulls[7] = call->zone_name == NULL;
	if (call->zone_name != NULL)
	{
		values[8] = PointerGetDatum(call->zone.rate.bytes);
		values[9] = IntervalPGetDatum(&call->zone.period);
	}
	else
	{
		/* rl_gcra: its count per its period */
		values[8] = DirectFunctionCall1(int8_numeric, Int64GetDatum(call->request.limit.zone.rate));
		values[9] = IntervalDatum(call->request.limit.zone.period_us, &period);
	}
	return HeapTupleGetDatum(heap_form_tuple(desc, values, nulls));
}

Datum
rl_limit(PG_FUNCTION_ARGS)
{
	RlCall		call;

	PrepareZoneCall(fcinfo, &call, true);
	RlTake(&call, "rl_limit()");
	return ResultDatum(fcinfo, &call);
}

/*
 * rl_wait(zone, key, cost, timeout): rl_limit that sleeps until admitted;
 * a NULL timeout waits as long as it takes (statement_timeout still applies).
 */
Datum
rl_wait(PG_FUNCTION_ARGS)
{
	RlCall		call;
	int64		timeout_us = -1;

	if (!PG_ARGISNULL(3))
	{
		__int128	micros = RlIntervalTotalMicros(PG_GETARG_INTERVAL_P(3));

		if (micros < 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("timeout must not be negative"),
					 errhint("Use 0 for a single attempt, NULL to wait as long as it takes.")));
		/* Beyond the longest period nothing changes: as good as no deadline. */
		if (micros <= RL_MAX_PERIOD_US)
			timeout_us = (int64) micros;
	}
	PrepareZoneCall(fcinfo, &call, true);
	RlWait(&call, timeout_us, "rl_wait()");
	return ResultDatum(fcinfo, &call);
}

/* Enough for any policy people write; each zone's key is held at once. */
#define RL_MAX_ZONES_PER_CALL 16

/* rl_limit(zones text[], key, cost): several limits, one decision. */
Datum
rl_limit_zones(PG_FUNCTION_ARGS)
{
	ArrayType  *zones;
	Datum	   *names;
	bool	   *nulls;
	int			nzones;
	text	   *key;
	int64		cost;
	RlCall	   *calls;
	int			chosen;

	RlRequireNotNull(fcinfo, 0, "zones");
	key = RlCheckedKey(fcinfo, 1, "key");
	RlRequireNotNull(fcinfo, 2, "cost");
	cost = PG_GETARG_INT32(2);
	zones = PG_GETARG_ARRAYTYPE_P(0);
	if (ARR_NDIM(zones) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("zones must be a one-dimensional array")));
	deconstruct_array(zones, TEXTOID, -1, false, TYPALIGN_INT, &names, &nulls, &nzones);
	if (nzones == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("zones must name at least one zone")));
	if (nzones > RL_MAX_ZONES_PER_CALL)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a call may name at most %d zones", RL_MAX_ZONES_PER_CALL),
				 errdetail("zones names %d.", nzones)));
	calls = palloc(sizeof(RlCall) * nzones);
	for (int i = 0; i < nzones; i++)
	{
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("zones must not contain null")));
		RlPrepareZoneCall(&calls[i], DatumGetTextPP(names[i]), key, cost, true);
		for (int j = 0; j < i; j++)
			if (calls[j].request.key.zone_id == calls[i].request.key.zone_id)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("zone \"%s\" is named twice", RlMessageText(calls[i].what)),
						 errhint("Each zone takes the call's cost once.")));
	}
	chosen = RlTakeTogether(calls, nzones, "rl_limit()");
	return ResultDatum(fcinfo, &calls[chosen]);
}

/* rl_refund(zone, key, cost): gives cost back to the key. */
Datum
rl_refund(PG_FUNCTION_ARGS)
{
	RlCall		call;

	PrepareZoneCall(fcinfo, &call, false);
	RlRequireNotNull(fcinfo, 2, "cost");
	call.cost = PG_GETARG_INT32(2);
	RlRefund(&call, "rl_refund()");
	return ResultDatum(fcinfo, &call);
}

Datum
rl_sliding_window(PG_FUNCTION_ARGS)
{
	RlCall		call;

	PrepareZoneCall(fcinfo, &call, true);
	if (call.request.limit.zone.algorithm != RL_ALGORITHM_SLIDING_WINDOW)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("zone \"%s\" is a %s zone, not a sliding_window zone",
						RlMessageText(call.what), RlAlgorithmName(call.request.limit.zone.algorithm)),
				 errhint("Use rl_limit() for zones of any algorithm.")));
	RlTake(&call, "rl_sliding_window()");
	return ResultDatum(fcinfo, &call);
}

Datum
rl_peek(PG_FUNCTION_ARGS)
{
	RlCall		call;

	PrepareZoneCall(fcinfo, &call, true);
	RlPeek(&call);
	return ResultDatum(fcinfo, &call);
}

Datum
rl_reset(PG_FUNCTION_ARGS)
{
	RlCall		call;

	PrepareZoneCall(fcinfo, &call, false);
	PG_RETURN_BOOL(RlForget(&call, "rl_reset()"));
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
	RlCall		call;
	text	   *key;
	int64		max_burst;
	int64		count;
	double		period;
	int64		quantity;

	key = RlCheckedKey(fcinfo, 0, "key");
	RlRequireNotNull(fcinfo, 1, "max_burst");
	RlRequireNotNull(fcinfo, 2, "count");
	RlRequireNotNull(fcinfo, 3, "period");
	RlRequireNotNull(fcinfo, 4, "quantity");
	max_burst = PG_GETARG_INT32(1);
	count = PG_GETARG_INT32(2);
	period = PG_GETARG_FLOAT8(3);
	quantity = PG_GETARG_INT32(4);
	RlPrepareAdHocCall(&call, "(rl_gcra)", key, RL_ZONE_ID_GCRA, quantity);
	ReportGcraError(rl_gcra_limit(max_burst, count, period, quantity, &call.request.limit.zone),
					max_burst, count, period, quantity);
	RlTake(&call, "rl_gcra()");
	return ResultDatum(fcinfo, &call);
}
