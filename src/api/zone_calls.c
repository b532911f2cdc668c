/*
 * zone_calls.c -- the zone checks as SQL sees them: rl_limit,
 * rl_sliding_window, rl_peek, rl_reset and rl_gcra, all returning
 * rl_result.  Each reads its arguments and hands the call to decide.c.
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"

#include "base/args.h"
#include "decision/decide.h"

PG_FUNCTION_INFO_V1(rl_limit);
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

#define RESULT_COLUMNS 7

static Datum
ResultDatum(FunctionCallInfo fcinfo, const RlCall *call)
{
	TupleDesc	desc = ResultDesc(fcinfo);
	const RlDecision *decision = &call->decision;
	Datum		values[RESULT_COLUMNS];
	bool		nulls[RESULT_COLUMNS] = {false, false, false, false, false, false, false};
	Interval	retry_after;	/* heap_form_tuple copies them: no palloc */
	Interval	reset_after;

	if (desc->natts != RESULT_COLUMNS)
		elog(ERROR, "rl_result has %d attributes, expected %d", desc->natts, RESULT_COLUMNS);
	values[0] = BoolGetDatum(decision->allowed);
	values[1] = Int64GetDatum(decision->capacity);
	values[2] = Int64GetDatum(decision->remaining);
	values[3] = IntervalDatum(decision->retry_after_us, &retry_after);
	nulls[3] = call->would_allow;
	values[4] = IntervalDatum(decision->reset_after_us, &reset_after);
	values[5] = Int64GetDatum(call->txn_id);
	nulls[5] = !call->recorded;
	values[6] = BoolGetDatum(call->would_allow);
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
