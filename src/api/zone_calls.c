/*
 * zone_calls.c -- the zone checks as SQL sees them: rl_limit,
 * rl_sliding_window, rl_peek, rl_reset and rl_gcra, all returning
 * rl_result.  Each reads its arguments and hands the call to decision/
 * (decide.h).
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "catalog/pg_type_d.h"
#include "utils/array.h"
#include "utils/builtins.h"

#include "api/forward.h"
#include "api/result.h"
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

static Datum
LimitHere(PG_FUNCTION_ARGS)
{
	RlCall		call;

	PrepareZoneCall(fcinfo, &call, true);
	RlTake(&call, "rl_limit()");
	return RlResultDatum(fcinfo, &call);
}

/*
 * rl_wait(zone, key, cost, timeout): rl_limit that sleeps until admitted;
 * a NULL timeout waits as long as it takes (statement_timeout still applies).
 */
static Datum
WaitHere(PG_FUNCTION_ARGS)
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
	return RlResultDatum(fcinfo, &call);
}

/* Enough for any policy people write; each zone's key is held at once. */
#define RL_MAX_ZONES_PER_CALL 16

/* rl_limit(zones text[], key, cost): several limits, one decision. */
static Datum
LimitZonesHere(PG_FUNCTION_ARGS)
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
	return RlResultDatum(fcinfo, &calls[chosen]);
}

/* rl_refund(zone, key, cost): gives cost back to the key. */
static Datum
RefundHere(PG_FUNCTION_ARGS)
{
	RlCall		call;

	PrepareZoneCall(fcinfo, &call, false);
	RlRequireNotNull(fcinfo, 2, "cost");
	call.cost = PG_GETARG_INT32(2);
	RlRefund(&call, "rl_refund()");
	return RlResultDatum(fcinfo, &call);
}

static Datum
SlidingWindowHere(PG_FUNCTION_ARGS)
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
	return RlResultDatum(fcinfo, &call);
}

static Datum
PeekHere(PG_FUNCTION_ARGS)
{
	RlCall		call;

	PrepareZoneCall(fcinfo, &call, true);
	RlPeek(&call);
	return RlResultDatum(fcinfo, &call);
}

static Datum
ResetHere(PG_FUNCTION_ARGS)
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
static Datum
GcraHere(PG_FUNCTION_ARGS)
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
	return RlResultDatum(fcinfo, &call);
}

/* Each runs on the node that holds its key (forward.h). */
RL_CALL_WHERE_KEY_IS(rl_limit, 1, LimitHere)
RL_CALL_WHERE_KEY_IS(rl_wait, 1, WaitHere)
RL_CALL_WHERE_KEY_IS(rl_limit_zones, 1, LimitZonesHere)
RL_CALL_WHERE_KEY_IS(rl_refund, 1, RefundHere)
RL_CALL_WHERE_KEY_IS(rl_sliding_window, 1, SlidingWindowHere)
RL_CALL_WHERE_KEY_IS(rl_peek, 1, PeekHere)
RL_CALL_WHERE_KEY_IS(rl_reset, 1, ResetHere)
RL_CALL_WHERE_KEY_IS(rl_gcra, 0, GcraHere)
