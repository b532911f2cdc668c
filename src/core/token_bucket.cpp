// Token bucket with continuous refill and exact fractional tokens.
//
// The level is whole tokens (int64) plus a fraction in [0, 1): integer parts
// add and subtract exactly at any capacity, and the fraction keeps its full
// double precision however full the bucket is.
#include "rl_core.h"

#include <algorithm>
#include <cmath>

namespace {

constexpr double kMicrosPerSecond = 1e6;

struct Level
{
	int64_t whole;
	double fraction;
};

bool IsPositiveFinite(double value) noexcept
{
	return std::isfinite(value) && value > 0.0;
}

// Splits a finite, non-negative amount below 2^53 exactly.
Level Split(double amount) noexcept
{
	const double whole = std::floor(amount);
	return Level{static_cast<int64_t>(whole), amount - whole};
}

bool Above(const Level &a, const Level &b) noexcept
{
	return a.whole > b.whole || (a.whole == b.whole && a.fraction > b.fraction);
}

// Microseconds from earlier to later, exact: the unsigned difference of two
// int64 values never overflows, and converts to double exactly below 2^53.
double ElapsedMicros(int64_t earlier, int64_t later) noexcept
{
	if (later <= earlier)
		return 0.0;
	return static_cast<double>(static_cast<uint64_t>(later) - static_cast<uint64_t>(earlier));
}

// The level at now_us of a bucket that held prior at prior.stamp_us.
Level Refill(const RlTokenBucketState &prior, int64_t now_us,
			 const RlTokenBucketLimit &limit) noexcept
{
	const Level full = Split(limit.capacity);
	// Multiplying by the microsecond count before dividing keeps whole-token
	// refills exact (0.3/s over 3 s is 900000/1e6, not 0.899...).
	const double refill = limit.refill_tokens * ElapsedMicros(prior.stamp_us, now_us) / limit.refill_interval_us;
	if (!(refill < limit.capacity))
		return full;			// also an overflowing (+inf) refill

	// Stored state is ours, but a hand-edited row must not overflow below.
	const Level held{std::clamp<int64_t>(prior.tokens, 0, RL_MAX_CAPACITY_INT),
					 prior.fraction >= 0.0 && prior.fraction < 1.0 ? prior.fraction : 0.0};
	const Level added = Split(refill);
	Level level{held.whole + added.whole, held.fraction + added.fraction};
	if (level.fraction >= 1.0)
	{
		level.fraction -= 1.0;
		level.whole += 1;
	}
	// A smaller capacity than before clamps what the bucket holds.
	return Above(level, full) ? full : level;
}

}  // namespace

extern "C" RlParamError
rl_token_bucket_limit(double rate, double window, int64_t cost,
					  RlTokenBucketLimit *limit) noexcept
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
	// Compared as integers first: above 2^53 a double rounds the cost down.
	if (cost > RL_MAX_CAPACITY_INT || static_cast<double>(cost) > capacity + RL_TOKEN_EPSILON)
		return RL_PARAM_COST_ABOVE_CAPACITY;
	limit->refill_tokens = rate;
	limit->refill_interval_us = kMicrosPerSecond;
	limit->capacity = capacity;
	return RL_PARAM_OK;
}

extern "C" RlTokenBucketDecision
rl_token_bucket_take(const RlTokenBucketState *prior, int64_t now_us,
					 const RlTokenBucketLimit *limit, int64_t cost) noexcept
{
	RlTokenBucketDecision decision{};
	Level level{};
	int64_t stamp_us = now_us;

	if (prior == nullptr)
		level = Split(limit->capacity);
	else
	{
		level = Refill(*prior, now_us, *limit);
		// The clock never runs backwards for a bucket.
		stamp_us = std::max(prior->stamp_us, now_us);
	}

	// Admitted iff whole + fraction >= cost, allowing RL_TOKEN_EPSILON.
	// cost <= capacity <= 2^53 and whole <= 2^53: no overflow.
	const int64_t whole_after = level.whole - cost;
	const bool allowed = whole_after >= 0 ||
		(whole_after == -1 && level.fraction + RL_TOKEN_EPSILON >= 1.0);

	if (!allowed)
	{
		decision.allowed = false;
		decision.remaining = -1;
		// A new key starts full, so it can only be refused when cost exceeds
		// capacity, which rl_token_bucket_limit rejects; store it regardless.
		decision.state_changed = (prior == nullptr);
		decision.next = RlTokenBucketState{level.whole, level.fraction, stamp_us};
		return decision;
	}

	Level after = whole_after >= 0 ? Level{whole_after, level.fraction}
		: Level{0, 0.0};		// the epsilon's gift: at most 1e-9 token
	decision.allowed = true;
	decision.remaining = after.whole + (after.fraction + RL_TOKEN_EPSILON >= 1.0 ? 1 : 0);
	decision.state_changed = (prior == nullptr) || cost > 0;
	decision.next = RlTokenBucketState{after.whole, after.fraction, stamp_us};
	return decision;
}

extern "C" bool
rl_token_bucket_idle(const RlTokenBucketState *state, int64_t now_us,
					 const RlTokenBucketLimit *limit) noexcept
{
	const Level full = Split(limit->capacity);
	const Level level = Refill(*state, std::max(now_us, state->stamp_us), *limit);
	return !Above(full, level);
}

extern "C" RlKeyDebt
rl_token_bucket_debt(const RlTokenBucketState *state, int64_t now_us,
					 const RlTokenBucketLimit *limit) noexcept
{
	const Level full = Split(limit->capacity);
	const Level level = Refill(*state, std::max(now_us, state->stamp_us), *limit);
	// What a take of cost 0 reports as remaining, and of cost 1 admits.
	const int64_t remaining = level.whole + (level.fraction + RL_TOKEN_EPSILON >= 1.0 ? 1 : 0);
	RlKeyDebt debt{};

	debt.idle = !Above(full, level);
	debt.missing = debt.idle ? 0 : std::max<int64_t>(0, full.whole - remaining);
	debt.shortfall = debt.idle ? 0.0
		: std::max(0.0, static_cast<double>(full.whole - level.whole) + (full.fraction - level.fraction));
	debt.refusing = remaining < 1;
	return debt;
}

extern "C" RlKeyDebt
rl_token_bucket_weigh(const RlTokenBucketState *state, int64_t now_us,
					  const RlTokenBucketLimit *limit) noexcept
{
	const double held = static_cast<double>(std::clamp<int64_t>(state->tokens, 0, RL_MAX_CAPACITY_INT)) +
		(state->fraction >= 0.0 && state->fraction < 1.0 ? state->fraction : 0.0);
	const double refill = limit->refill_tokens * ElapsedMicros(state->stamp_us, now_us) / limit->refill_interval_us;
	const double level = std::min(limit->capacity, held + refill);
	RlKeyDebt weight{};

	weight.shortfall = std::max(0.0, limit->capacity - level);
	weight.idle = weight.shortfall <= 1e-6;
	weight.refusing = level + RL_TOKEN_EPSILON < 1.0;
	return weight;
}
