/*
 * token_bucket_sql.c -- rl_token_bucket(id, rate, window, cost), SPEC 2.1.
 */
#include "ratelimit.h"

#include "fmgr.h"
#include "miscadmin.h"

#include "core/rl_core.h"
#include "state_cache.h"
#include "store_shmem.h"

PG_FUNCTION_INFO_V1(rl_token_bucket);

typedef struct TokenBucketCall
{
	RlTokenBucketLimit limit;
	int64		cost;
	TimestampTz now;
	RlTokenBucketDecision decision;
} TokenBucketCall;

static bool
DecideTokenBucket(const RlStateRow *prior, RlStateRow *next, void *arg, RlStateAccess *access)
{
	TokenBucketCall *call = (TokenBucketCall *) arg;
	RlTokenBucketState prior_state;

	if (prior != NULL)
	{
		prior_state.tokens = prior->tokens;
		prior_state.fraction = prior->fraction;
		prior_state.stamp_us = prior->stamp;
	}
	call->decision = rl_token_bucket_take(prior != NULL ? &prior_state : NULL,
										  call->now, &call->limit, call->cost);
	next->tokens = call->decision.next.tokens;
	next->fraction = call->decision.next.fraction;
	next->stamp = call->decision.next.stamp_us;
	next->counter = 0;
	next->entries = NULL;
	next->refill_pending = false;
	return call->decision.state_changed;
}

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

Datum
rl_token_bucket(PG_FUNCTION_ARGS)
{
	TokenBucketCall call;
	RlStateKey	key;
	RlShmemSlot slot;
	double		rate;
	double		window;

	key.key = RlCheckedKey(fcinfo, 0, "id");
	key.zone_id = RL_ZONE_ID_TOKEN_BUCKET;
	key.part = 0;
	if (rl_default_store == RL_DEFAULT_STORE_SHMEM)
		RlShmemLocate(&key, &slot);
	RlRequireNotNull(fcinfo, 1, "rate");
	RlRequireNotNull(fcinfo, 2, "window");
	RlRequireNotNull(fcinfo, 3, "cost");
	rate = PG_GETARG_FLOAT8(1);
	window = PG_GETARG_FLOAT8(2);
	call.cost = PG_GETARG_INT32(3);

	ReportTokenBucketError(rl_token_bucket_limit(rate, window, call.cost, &call.limit),
						   rate, window, call.cost);
	if (rl_default_store == RL_DEFAULT_STORE_TABLE)
		PreventCommandIfReadOnly("rl_token_bucket()");

	call.now = RlNow();
	if (rl_default_store == RL_DEFAULT_STORE_SHMEM)
	{
		RlShmemLimit limit;

		memset(&limit, 0, sizeof(limit));
		limit.is_bucket = true;
		limit.bucket = call.limit;
		if (RlShmemUpdate(&key, &slot, &limit, call.now, DecideTokenBucket, &call, false) == RL_SHMEM_FULL)
		{
			RlDecision decision = {.allowed = call.decision.allowed};

			RlApplyShmemFullPolicy(&decision, "rl_token_bucket");
			if (!decision.allowed)
				call.decision.remaining = -1;
		}
	}
	else
		RlStateUpdate(&key, false, DecideTokenBucket, &call);
	RlShmemCount(RL_ZONE_ID_TOKEN_BUCKET, call.decision.remaining >= 0);
	PG_RETURN_INT64(call.decision.remaining);
}
