/*
 * token_bucket.c -- rl_token_bucket(id, rate, window, cost): an ad-hoc
 * token bucket per id and parameters, no zone needed; returns the whole
 * tokens left, or -1 when refused.
 */
#include "postgres.h"

#include "common/shortest_dec.h"
#include "fmgr.h"
#include "utils/memutils.h"

#include "api/forward.h"
#include "base/args.h"
#include "base/pg_compat.h"
#include "decision/decide.h"

PG_FUNCTION_INFO_V1(rl_token_bucket);

static void
ReportTokenBucketError(RlParamError error, double rate, double window, int64 cost)
{
	switch (error)
	{
		case RL_PARAM_OK:
			return;
		case RL_PARAM_RATE_INVALID:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("rate must be a finite number greater than zero"),
					 errdetail("rate is %g.", rate)));
			break;
		case RL_PARAM_WINDOW_INVALID:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("window must be a finite number of seconds greater than zero"),
					 errdetail("window is %g.", window)));
			break;
		case RL_PARAM_CAPACITY_OVERFLOW:
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("bucket capacity rate * window is out of range"),
					 errdetail("rate %g * window %g exceeds %.0f tokens.",
							   rate, window, RL_MAX_CAPACITY)));
			break;
		case RL_PARAM_COST_NEGATIVE:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("cost must not be negative"),
					 errdetail("cost is " INT64_FORMAT ".", cost)));
			break;
		case RL_PARAM_COST_ABOVE_CAPACITY:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("cost exceeds the bucket capacity"),
					 errdetail("cost is " INT64_FORMAT "; capacity rate * window is %g.",
							   cost, rate * window),
					 errhint("Such a call could never be admitted.")));
			break;
	}
}

/*
 * What names the bucket beside its id: "rate:window", each the shortest
 * text that reads back as the same float8 (what float8out prints, whatever
 * extra_float_digits says; no two values share one, and neither holds a
 * ':').  A call with other parameters has a bucket of its own: a larger
 * rate cannot refill another caller's bucket of the same id.
 */
static text *
BucketParams(double rate, double window)
{
	/* Callers mostly pass the same parameters: the last text is kept. */
	static double last_rate = 0;	/* no call has rate 0 */
	static double last_window = 0;
	static text *last_params = NULL;
	char		buf[2 * DOUBLE_SHORTEST_DECIMAL_LEN];
	int			len;

	StaticAssertStmt(sizeof(buf) <= RL_MAX_PARAMS_BYTES, "params fit the shmem key buffer");
	/* Both are positive and finite (checked): == is float8 identity. */
	if (rate == last_rate && window == last_window)
		return last_params;
	len = double_to_shortest_decimal_bufn(rate, buf);
	buf[len++] = ':';
	len += double_to_shortest_decimal_bufn(window, buf + len);
	if (last_params != NULL)
		pfree(last_params);
	last_params = MemoryContextAlloc(TopMemoryContext, VARHDRSZ + len);
	SET_VARSIZE(last_params, VARHDRSZ + len);
	memcpy(VARDATA(last_params), buf, len);
	last_rate = rate;
	last_window = window;
	return last_params;
}

static Datum
TokenBucketHere(PG_FUNCTION_ARGS)
{
	RlCall		call;
	double		rate;
	double		window;
	int64		cost;

	RlPrepareAdHocCall(&call, "rl_token_bucket", RlCheckedKey(fcinfo, 0, "id"),
					   RL_ZONE_ID_TOKEN_BUCKET, 0);
	RlRequireNotNull(fcinfo, 1, "rate");
	RlRequireNotNull(fcinfo, 2, "window");
	RlRequireNotNull(fcinfo, 3, "cost");
	rate = PG_GETARG_FLOAT8(1);
	window = PG_GETARG_FLOAT8(2);
	cost = PG_GETARG_INT32(3);
	ReportTokenBucketError(rl_token_bucket_limit(rate, window, cost, &call.request.limit.bucket),
						   rate, window, cost);
	call.request.key.params = BucketParams(rate, window);
	RlLocate(&call);
	call.request.limit.is_bucket = true;
	call.cost = cost;
	RlTake(&call, "rl_token_bucket()");
	PG_RETURN_INT64(call.decision.allowed ? call.decision.remaining : -1);
}

RL_CALL_WHERE_KEY_IS(rl_token_bucket, 0, TokenBucketHere)
