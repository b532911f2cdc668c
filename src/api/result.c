/*
 * result.c -- rl_result, the row every zone check returns, from a call's
 * decision (zone_calls.c, http_guard.c).
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"

#include "api/result.h"

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

Datum
RlResultDatum(FunctionCallInfo fcinfo, const RlCall *call)
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
