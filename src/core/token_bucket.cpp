// Token bucket with continuous refill and exact fractional tokens.
#include "rl_core.h"

#include <algorithm>
#include <cmath>

namespace {

constexpr double kMicrosPerSecond = 1e6;

bool IsPositiveFinite(double value) noexcept
{
	return std::isfinite(value) && value > 0.0;
}

// Tokens held at now_us by a bucket that held prior.tokens at prior.stamp_us.
double RefilledTokens(const RlTokenBucketState &prior, int64_t now_us,
					  const RlTokenBucketLimit &limit) noexcept
{
	// Multiplying by the microsecond count before dividing keeps whole-token
	// refills exact (0.3/s over 3 s is 900000/1e6, not 0.899...).  The
	// difference is taken in double: across the whole timestamp range an
	// int64 subtraction would overflow.
	const double elapsed_us =
		now_us > prior.stamp_us
			? static_cast<double>(now_us) - static_cast<double>(prior.stamp_us)
			: 0.0;
	const double refill = limit.rate_per_second * elapsed_us / kMicrosPerSecond;
	// An overflowing refill is +inf, which std::min turns into a full bucket.
	return std::min(limit.capacity, prior.tokens + refill);
}

}  // namespace

extern "C" RlParamError
rl_token_bucket_limit(double rate, double window, int64_t cost,
					  RlTokenBucketLimit *limit)
{
	if (!IsPositiveFinite(rate))
		return RL_PARAM_RATE_INVALID;
	if (!IsPositiveFinite(window))
		return RL_PARAM_WINDOW_INVALID;
	const double capacity = rate * window;
	if (!std::isfinite(capacity) || capacity > RL_MAX_CAPACITY)
		return RL_PARAM_CAPACITY_OVERFLOW;
	if (cost < 0)
		return RL_PARAM_COST_NEGATIVE;
	if (static_cast<double>(cost) > capacity + RL_TOKEN_EPSILON)
		return RL_PARAM_COST_ABOVE_CAPACITY;
	limit->rate_per_second = rate;
	limit->capacity = capacity;
	return RL_PARAM_OK;
}

extern "C" RlTokenBucketDecision
rl_token_bucket_take(const RlTokenBucketState *prior, int64_t now_us,
					 const RlTokenBucketLimit *limit, int64_t cost)
{
	RlTokenBucketDecision decision{};
	RlTokenBucketState current{};

	if (prior == nullptr)
		current = RlTokenBucketState{limit->capacity, now_us};
	else
		current = RlTokenBucketState{RefilledTokens(*prior, now_us, *limit),
									 std::max(prior->stamp_us, now_us)};

	const double wanted = static_cast<double>(cost);
	if (current.tokens + RL_TOKEN_EPSILON < wanted)
	{
		decision.allowed = false;
		decision.remaining = -1;
		// A new key starts full, so it can only be refused when cost exceeds
		// capacity, which rl_token_bucket_limit rejects; store it regardless.
		decision.state_changed = (prior == nullptr);
		decision.next = current;
		return decision;
	}

	current.tokens = std::max(0.0, current.tokens - wanted);
	decision.allowed = true;
	decision.remaining = static_cast<int64_t>(std::floor(current.tokens + RL_TOKEN_EPSILON));
	decision.state_changed = (prior == nullptr) || cost > 0;
	decision.next = current;
	return decision;
}
