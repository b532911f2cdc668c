// Zone algorithms with a fixed-size state: token bucket, GCRA (redis-cell),
// fixed window and sliding-window counter.
//
// Times are int64 microseconds; products and sums that could leave 64 bits
// are computed in 128 bits, so no parameter the zone checks accept can
// overflow.
#include "rl_core.h"
#include "counter_common.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace {

using namespace rl_counter_common;

// Microseconds a debt of `deficit` tokens takes to refill, rounded up so
// that a retry at that moment passes.  The take admits a level short of
// the cost by RL_TOKEN_EPSILON, so that is the debt to refill: the exact
// wait is usually a whole number of microseconds (from a whole stamp), and
// rounding up a product a few ulps above it would report one too many.
int64_t RefillMicros(double deficit, const RlTokenBucketLimit &limit) noexcept
{
	if (!(deficit > RL_TOKEN_EPSILON))
		return 0;
	const double micros =
		std::ceil((deficit - RL_TOKEN_EPSILON) * limit.refill_interval_us / limit.refill_tokens);
	return micros >= 9.2e18 ? INT64_MAX : std::max<int64_t>(1, static_cast<int64_t>(micros));
}

// A wait computed in floating point can miss, by a few microseconds over
// long periods, the first moment at which the take itself (working from the
// stored state, with its RL_TOKEN_EPSILON) admits: search for that moment
// around the estimate.  passes(t) is monotonic in t (refills only grow).
template <typename Passes>
int64_t SettleWait(int64_t at_us, int64_t wait_us, Passes passes) noexcept
{
	auto passes_after = [&](int64_t wait) { return passes(at_us + wait); };

	if (static_cast<Wide>(at_us) + wait_us >= kInt64Max)
		return wait_us;			// beyond the clock: nothing to check against
	int64_t good;				// passes
	int64_t bad;				// does not (-1: not known to fail anywhere)
	if (passes_after(wait_us))
	{
		good = wait_us;
		bad = -1;
		for (int64_t step = 1; good > 0; step *= 2)
		{
			const int64_t probe = good > step ? good - step : 0;
			if (!passes_after(probe))
			{
				bad = probe;
				break;
			}
			good = probe;
		}
		if (bad < 0)
			return good;		// passes at once
	}
	else
	{
		bad = wait_us;
		for (int64_t step = 1;; step *= 2)
		{
			if (static_cast<Wide>(at_us) + bad + step >= kInt64Max || step > (INT64_C(1) << 61))
				return wait_us;
			if (passes_after(bad + step))
			{
				good = bad + step;
				break;
			}
			bad += step;
		}
	}
	while (good - bad > 1)
	{
		const int64_t middle = bad + (good - bad) / 2;
		if (passes_after(middle))
			good = middle;
		else
			bad = middle;
	}
	return good;
}

RlDecision TokenBucketTake(const RlZoneLimit &zone, const RlCounterState *prior,
						   int64_t now_us, int64_t cost, RlCounterState *next) noexcept
{
	const RlTokenBucketLimit limit = BucketLimit(zone);
	RlTokenBucketState prior_state{};
	if (prior != nullptr)
		prior_state = RlTokenBucketState{prior->a, prior->fraction, prior->stamp_us};
	const RlTokenBucketDecision taken =
		rl_token_bucket_take(prior != nullptr ? &prior_state : nullptr, now_us, &limit, cost);

	// After the call (or, refused, at now): whole tokens plus a fraction.
	const int64_t whole = taken.next.tokens;
	const double fraction = taken.next.fraction;
	RlDecision decision{};
	decision.allowed = taken.allowed;
	decision.capacity = zone.capacity;
	decision.remaining = whole + (fraction + RL_TOKEN_EPSILON >= 1.0 ? 1 : 0);
	decision.retry_after_us = taken.allowed ? 0
		: RefillMicros(static_cast<double>(cost - whole) - fraction, limit);
	decision.reset_after_us =
		RefillMicros(static_cast<double>(zone.capacity - whole) - fraction, limit);
	decision.decided_at_us = taken.next.stamp_us;
	decision.state_changed = taken.allowed && cost > 0;
	*next = RlCounterState{whole, fraction, taken.next.stamp_us, 0};

	// The waits, checked against the state as stored after this call.
	const RlTokenBucketState *stored = decision.state_changed ? &taken.next
		: prior != nullptr ? &prior_state : nullptr;
	if (stored != nullptr)
	{
		if (!decision.allowed)
			decision.retry_after_us = SettleWait(decision.decided_at_us, decision.retry_after_us,
				[&](int64_t when) { return rl_token_bucket_take(stored, when, &limit, cost).allowed; });
		decision.reset_after_us = SettleWait(decision.decided_at_us, decision.reset_after_us,
			[&](int64_t when) { return rl_token_bucket_take(stored, when, &limit, zone.capacity).allowed; });
	}
	return decision;
}

// Generic cell rate algorithm, as redis-cell computes it, in exact integer
// arithmetic: one tick is 1/rate microsecond, so the emission interval
// period/rate is exactly period_us ticks.
RlDecision GcraTake(const RlZoneLimit &zone, const RlCounterState *prior,
					int64_t now_us, int64_t cost, RlCounterState *next) noexcept
{
	const Wide rate = zone.rate;
	const Wide emission = zone.period_us;
	const Wide tolerance = emission * zone.capacity;
	const Wide increment = emission * cost;

	// The clock never runs backwards for a key: b is the last decision time.
	if (prior != nullptr)
		now_us = std::max(now_us, prior->b);
	const Wide now = static_cast<Wide>(now_us) * rate;
	const Wide tat = prior != nullptr
		? static_cast<Wide>(prior->stamp_us) * rate + std::clamp<int64_t>(prior->a, 0, zone.rate - 1)
		: now;

	const Wide new_tat = std::max(tat, now) + increment;
	const Wide allow_at = new_tat - tolerance;
	const Wide diff = now - allow_at;

	RlDecision decision{};
	decision.capacity = zone.capacity;
	decision.decided_at_us = now_us;
	Wide ttl;
	if (diff < 0)
	{
		decision.allowed = false;
		// Costs above capacity are refused before: increment <= tolerance.
		decision.retry_after_us = Saturate(CeilDiv(-diff, rate));
		ttl = tat - now;
		*next = prior != nullptr ? *prior : RlCounterState{};
	}
	else
	{
		decision.allowed = true;
		decision.retry_after_us = 0;
		ttl = new_tat - now;
		decision.state_changed = cost > 0;
		// Floor division: before the epoch (times are negative) / and %
		// truncate towards zero and would give a negative remainder, which
		// the read above clamps away.
		const Wide stamp = FloorDiv(new_tat, rate);
		*next = RlCounterState{Saturate(new_tat - stamp * rate), 0.0, Saturate(stamp), now_us};
	}
	const Wide left = tolerance - ttl;
	decision.remaining = left > 0 ? Saturate(left / emission) : 0;
	decision.reset_after_us = ttl > 0 ? Saturate(CeilDiv(ttl, rate)) : 0;
	return decision;
}

// The whole allowance comes back period after the first call of a window.
// A window in which nothing is admitted (all of it refunded) is no window:
// the boundary is set by the next admission, not by a state that holds
// nothing.
RlDecision FixedWindowTake(const RlZoneLimit &zone, const RlCounterState *prior,
						   int64_t now_us, int64_t cost, RlCounterState *next) noexcept
{
	int64_t start = now_us;
	int64_t used = 0;
	if (prior != nullptr)
	{
		// The clock never runs backwards for a key: b is the last decision
		// time, which a retry_after or reset_after counts from.
		now_us = std::max({now_us, prior->stamp_us, prior->b});
		start = now_us;
		if (static_cast<Wide>(now_us) < static_cast<Wide>(prior->stamp_us) + zone.period_us &&
			prior->a > 0)
		{
			start = prior->stamp_us;
			used = std::min<int64_t>(prior->a, zone.rate);
		}
	}
	const Wide window_end = static_cast<Wide>(start) + zone.period_us;

	RlDecision decision{};
	decision.capacity = zone.capacity;
	decision.decided_at_us = now_us;
	decision.allowed = used + cost <= zone.rate;	// both <= 2^53
	if (decision.allowed)
		used += cost;
	decision.remaining = zone.rate - used;
	decision.retry_after_us = decision.allowed ? 0 : Saturate(window_end - now_us);
	decision.reset_after_us = used > 0 ? Saturate(window_end - now_us) : 0;
	decision.state_changed = decision.allowed && cost > 0;
	*next = RlCounterState{used, 0.0, start, now_us};
	return decision;
}

// Cloudflare's approximation: the previous aligned window's count, weighted
// by how much of it still overlaps the trailing period, plus the current
// window's.  Compared in integers scaled by the period, so it is exact.
RlDecision SlidingWindowCounterTake(const RlZoneLimit &zone, const RlCounterState *prior,
									int64_t now_us, int64_t cost, RlCounterState *next) noexcept
{
	const Wide period = zone.period_us;
	AlignedWindows windows = AlignToNow(zone, prior, now_us);
	now_us = windows.now_us;
	const Wide start = windows.start;
	Wide &current = windows.current;
	const Wide previous = windows.previous;
	const Wide left_in_window = start + period - now_us;	// 1 .. period
	const Wide rate = zone.rate;
	// estimate * period, with estimate = previous * left / period + current
	auto scaled_estimate = [&](Wide cur) { return previous * left_in_window + cur * period; };

	RlDecision decision{};
	decision.capacity = zone.capacity;
	decision.decided_at_us = now_us;
	decision.allowed = scaled_estimate(current + cost) <= rate * period;
	if (decision.allowed)
		current += cost;
	const Wide spare = rate * period - scaled_estimate(current);
	decision.remaining = spare > 0 ? Saturate(spare / period) : 0;

	if (!decision.allowed)
	{
		// Earliest wait x with the estimate low enough at now + x.
		const Wide room = rate - current - cost;	// for previous's share
		Wide wait;
		if (room >= 0 && previous > 0 && left_in_window - room * period / previous < left_in_window)
			wait = std::max<Wide>(1, left_in_window - room * period / previous);
		else
		{
			// In the next window, current becomes the previous one.
			const Wide next_room = rate - cost;
			Wide into = current > 0 ? period - next_room * period / current : 0;
			wait = left_in_window + std::max<Wide>(0, into);
		}
		decision.retry_after_us = Saturate(wait);
	}
	decision.reset_after_us = current > 0 ? Saturate(left_in_window + period)
		: previous > 0 ? Saturate(left_in_window) : 0;
	decision.state_changed = decision.allowed && cost > 0;
	*next = StoredWindows(windows);
	return decision;
}

// Calls only take; the refill job adds rate * tick / period tokens a tick.
// A missing key is full.  The waits count whole ticks from now (the next
// tick may come sooner).  Without a scheduled job nothing refills: any wait
// would be a promise nobody keeps, so it is unknown (-1).
int64_t CronWaitMicros(const RlZoneLimit &zone, Wide units_needed) noexcept
{
	if (units_needed <= 0)
		return 0;
	if (zone.refill_tick_us <= 0)
		return -1;
	const Wide per_tick = static_cast<Wide>(zone.rate) * zone.refill_tick_us;
	return Saturate(CeilDiv(units_needed, per_tick) * zone.refill_tick_us);
}

RlDecision CronTokenBucketTake(const RlZoneLimit &zone, const RlCounterState *prior,
							   int64_t now_us, int64_t cost, RlCounterState *next) noexcept
{
	RlDecision decision{};
	int64_t tokens = zone.capacity;
	int64_t part = 0;
	int64_t stamp = now_us;

	if (prior != nullptr)
	{
		stamp = std::max(prior->stamp_us, now_us);
		// Above a capacity lowered since, the key holds the capacity.
		if (prior->a < zone.capacity)
		{
			tokens = std::max<int64_t>(prior->a, 0);
			part = std::clamp<int64_t>(prior->b, 0, zone.period_us - 1);
		}
	}
	decision.capacity = zone.capacity;
	decision.decided_at_us = stamp;
	decision.allowed = tokens >= cost;
	if (decision.allowed)
		tokens -= cost;
	else
		decision.retry_after_us =
			CronWaitMicros(zone, static_cast<Wide>(cost - tokens) * zone.period_us - part);
	decision.remaining = tokens;
	decision.reset_after_us = tokens >= zone.capacity ? 0
		: CronWaitMicros(zone, static_cast<Wide>(zone.capacity - tokens) * zone.period_us - part);
	// Refusals and cost 0 change nothing: a missing key is full.
	decision.state_changed = decision.allowed && cost > 0;
	if (decision.state_changed)
		*next = RlCounterState{tokens, 0.0, stamp, part};
	else
		*next = prior != nullptr ? *prior : RlCounterState{};
	return decision;
}

// ---------------------------------------------------------------------------
// Refunds: each returns the state after giving back cost > 0 at now_us, or
// prior itself when there is nothing to give back (a full key), so that
// nothing is stored for nothing.
// ---------------------------------------------------------------------------

RlCounterState TokenBucketRefund(const RlZoneLimit &zone, const RlCounterState &prior,
								 int64_t now_us, int64_t cost) noexcept
{
	const RlTokenBucketLimit limit = BucketLimit(zone);
	const RlTokenBucketState prior_state{prior.a, prior.fraction, prior.stamp_us};
	// Refilled first, so that the refund and the refill are not both counted
	// on the time since the stamp.
	const RlTokenBucketState level = rl_token_bucket_take(&prior_state, now_us, &limit, 0).next;
	if (level.tokens >= zone.capacity)
		return prior;
	if (static_cast<Wide>(level.tokens) + cost >= zone.capacity)
		return RlCounterState{zone.capacity, 0.0, level.stamp_us, 0};
	return RlCounterState{level.tokens + cost, level.fraction, level.stamp_us, 0};
}

RlCounterState GcraRefund(const RlZoneLimit &zone, const RlCounterState &prior,
						  int64_t now_us, int64_t cost) noexcept
{
	const Wide rate = zone.rate;
	now_us = std::max(now_us, prior.b);
	const Wide now = static_cast<Wide>(now_us) * rate;
	const Wide tat = static_cast<Wide>(prior.stamp_us) * rate + std::clamp<int64_t>(prior.a, 0, zone.rate - 1);
	// A theoretical arrival time at or before now is a full key; one before
	// now would mean nothing more (a take starts from max(tat, now)), so the
	// refund stops at now.
	if (tat <= now)
		return prior;
	const Wide new_tat = std::max(tat - static_cast<Wide>(zone.period_us) * cost, now);
	const Wide stamp = FloorDiv(new_tat, rate);
	return RlCounterState{Saturate(new_tat - stamp * rate), 0.0, Saturate(stamp), now_us};
}

RlCounterState FixedWindowRefund(const RlZoneLimit &zone, const RlCounterState &prior,
								 int64_t now_us, int64_t cost) noexcept
{
	now_us = std::max({now_us, prior.stamp_us, prior.b});
	// An expired window's cost no longer counts: nothing to give back.
	if (static_cast<Wide>(now_us) >= static_cast<Wide>(prior.stamp_us) + zone.period_us ||
		prior.a <= 0)
		return prior;
	const int64_t used = std::min<int64_t>(prior.a, zone.rate);
	return RlCounterState{cost >= used ? 0 : used - cost, 0.0, prior.stamp_us, now_us};
}

RlCounterState SlidingWindowCounterRefund(const RlZoneLimit &zone, const RlCounterState &prior,
										  int64_t now_us, int64_t cost) noexcept
{
	AlignedWindows windows = AlignToNow(zone, &prior, now_us);
	if (windows.current == 0 && windows.previous == 0)
		return prior;
	// The refunded request is most likely in the current window; what it
	// does not hold was charged before the last rotation.
	const Wide from_current = std::min<Wide>(windows.current, cost);
	windows.current -= from_current;
	windows.previous -= std::min<Wide>(windows.previous, cost - from_current);
	return StoredWindows(windows);
}

RlCounterState CronTokenBucketRefund(const RlZoneLimit &zone, const RlCounterState &prior,
									 int64_t now_us, int64_t cost) noexcept
{
	if (prior.a >= zone.capacity)
		return prior;
	const int64_t stamp = std::max(prior.stamp_us, now_us);
	const int64_t tokens = std::max<int64_t>(prior.a, 0);
	// Full, the part token goes, as when the refill job fills the bucket.
	if (static_cast<Wide>(tokens) + cost >= zone.capacity)
		return RlCounterState{zone.capacity, 0.0, stamp, 0};
	return RlCounterState{tokens + cost, 0.0, stamp,
						  std::clamp<int64_t>(prior.b, 0, zone.period_us - 1)};
}

bool SameCounterState(const RlCounterState &a, const RlCounterState &b) noexcept
{
	// Bitwise for the double: a NaN read back from a hand-edited row is the
	// same state, not a change to store on every call.
	return a.a == b.a && a.stamp_us == b.stamp_us && a.b == b.b &&
		std::memcmp(&a.fraction, &b.fraction, sizeof a.fraction) == 0;
}

}  // namespace

extern "C" RlZoneError
rl_zone_limit(RlAlgorithm algorithm, int64_t rate, int64_t period_us, int64_t burst,
			  RlZoneLimit *limit) noexcept
{
	if (rate <= 0 || rate > RL_MAX_LIMIT)
		return RL_ZONE_RATE_INVALID;
	if (period_us <= 0 || period_us > RL_MAX_PERIOD_US)
		return RL_ZONE_PERIOD_INVALID;
	const bool has_burst = algorithm == RL_ALGORITHM_TOKEN_BUCKET || algorithm == RL_ALGORITHM_GCRA ||
		algorithm == RL_ALGORITHM_CRON_TOKEN_BUCKET;
	if (burst >= 0 && !has_burst)
		return RL_ZONE_BURST_NOT_APPLICABLE;
	const int64_t capacity = burst >= 0 ? burst : rate;
	if (capacity <= 0 || capacity > RL_MAX_LIMIT)
		return RL_ZONE_BURST_INVALID;
	// Refilling from empty to full must fit the longest period, or times
	// stored as microseconds could leave 64 bits.
	if (static_cast<Wide>(capacity) * period_us > static_cast<Wide>(rate) * RL_MAX_PERIOD_US)
		return RL_ZONE_BURST_INVALID;
	if (algorithm == RL_ALGORITHM_SLIDING_WINDOW && rate > RL_SLIDING_WINDOW_MAX_LIMIT)
		return RL_ZONE_LIMIT_TOO_LARGE_FOR_EXACT;
	// A concurrency zone's state lists every lease held; its period is the
	// default lease time to live.
	if (algorithm == RL_ALGORITHM_CONCURRENCY && rate > RL_CONCURRENCY_MAX_SLOTS)
		return RL_ZONE_TOO_MANY_SLOTS;
	*limit = RlZoneLimit{algorithm, rate, period_us, capacity, 0};
	return RL_ZONE_OK;
}

extern "C" bool
rl_zone_cost_valid(const RlZoneLimit *limit, int64_t cost) noexcept
{
	return cost >= 0 && cost <= limit->capacity;
}

extern "C" RlDecision
rl_counter_take(const RlZoneLimit *limit, const RlCounterState *prior, int64_t now_us,
				int64_t cost, RlCounterState *next) noexcept
{
	switch (limit->algorithm)
	{
		case RL_ALGORITHM_TOKEN_BUCKET:
			return TokenBucketTake(*limit, prior, now_us, cost, next);
		case RL_ALGORITHM_GCRA:
			return GcraTake(*limit, prior, now_us, cost, next);
		case RL_ALGORITHM_FIXED_WINDOW:
			return FixedWindowTake(*limit, prior, now_us, cost, next);
		case RL_ALGORITHM_SLIDING_WINDOW_COUNTER:
			return SlidingWindowCounterTake(*limit, prior, now_us, cost, next);
		case RL_ALGORITHM_CRON_TOKEN_BUCKET:
			return CronTokenBucketTake(*limit, prior, now_us, cost, next);
		case RL_ALGORITHM_SLIDING_WINDOW:
			break;				// has a state of its own: rl_sw_take
		case RL_ALGORITHM_CONCURRENCY:
			break;				// holds leases, not a counter: rl_leases_acquire
	}
	RlDecision refused{};
	refused.capacity = limit->capacity;
	refused.decided_at_us = now_us;
	*next = prior != nullptr ? *prior : RlCounterState{};
	return refused;
}

extern "C" RlDecision
rl_counter_refund(const RlZoneLimit *limit, const RlCounterState *prior, int64_t now_us,
				  int64_t cost, RlCounterState *next) noexcept
{
	RlCounterState refunded = prior != nullptr ? *prior : RlCounterState{};
	if (prior != nullptr && cost > 0)
	{
		switch (limit->algorithm)
		{
			case RL_ALGORITHM_TOKEN_BUCKET:
				refunded = TokenBucketRefund(*limit, *prior, now_us, cost);
				break;
			case RL_ALGORITHM_GCRA:
				refunded = GcraRefund(*limit, *prior, now_us, cost);
				break;
			case RL_ALGORITHM_FIXED_WINDOW:
				refunded = FixedWindowRefund(*limit, *prior, now_us, cost);
				break;
			case RL_ALGORITHM_SLIDING_WINDOW_COUNTER:
				refunded = SlidingWindowCounterRefund(*limit, *prior, now_us, cost);
				break;
			case RL_ALGORITHM_CRON_TOKEN_BUCKET:
				refunded = CronTokenBucketRefund(*limit, *prior, now_us, cost);
				break;
			case RL_ALGORITHM_SLIDING_WINDOW:
				break;			// has a state of its own: rl_sw_refund
			case RL_ALGORITHM_CONCURRENCY:
				break;			// a lease is released, not refunded: rl_leases_release
		}
	}
	const bool changed = prior != nullptr && !SameCounterState(refunded, *prior);
	// What a look at the key now reports, on the state that will be stored.
	RlCounterState unused{};
	RlDecision decision = rl_counter_take(limit, changed ? &refunded : prior, now_us, 0, &unused);
	if (limit->algorithm != RL_ALGORITHM_SLIDING_WINDOW)
	{
		// Even where a look would be refused (a rate lowered since the
		// key's costs were admitted), a refund is not.
		decision.allowed = true;
		decision.retry_after_us = 0;
	}
	decision.state_changed = changed;
	*next = refunded;
	return decision;
}

extern "C" bool
rl_counter_needs_refill(const RlZoneLimit *limit, const RlCounterState *state) noexcept
{
	return limit->algorithm == RL_ALGORITHM_CRON_TOKEN_BUCKET && state->a < limit->capacity;
}

extern "C" bool
rl_counter_idle(const RlZoneLimit *limit, const RlCounterState *state, int64_t now_us) noexcept
{
	if (limit->algorithm == RL_ALGORITHM_TOKEN_BUCKET)
	{
		// Exactly the ad-hoc bucket's test, on the same state.
		const RlTokenBucketLimit bucket = BucketLimit(*limit);
		const RlTokenBucketState tokens{state->a, state->fraction, state->stamp_us};
		return rl_token_bucket_idle(&tokens, now_us, &bucket);
	}
	// Idle when a call of the full capacity would pass with the whole
	// allowance left before it: exactly what a new key shows.
	RlCounterState next{};
	const RlDecision full = rl_counter_take(limit, state, now_us, limit->capacity, &next);
	if (!full.allowed)
		return false;
	// An earlier clock than the key's is decided at the key's time (a refund
	// can leave a full key with a later one).  Only the counter's aligned
	// windows make that show: its waits count from the decision time.
	if (limit->algorithm == RL_ALGORITHM_SLIDING_WINDOW_COUNTER && full.decided_at_us > now_us)
		return false;
	const RlDecision peek = rl_counter_take(limit, state, now_us, 0, &next);
	return peek.remaining >= limit->capacity && peek.reset_after_us == 0;
}

extern "C" RlGcraError
rl_gcra_limit(int64_t max_burst, int64_t count, double period_s, int64_t quantity,
			  RlZoneLimit *limit) noexcept
{
	if (max_burst < 0 || max_burst >= RL_MAX_LIMIT)
		return RL_GCRA_MAX_BURST_INVALID;
	if (count <= 0 || count > RL_MAX_LIMIT)
		return RL_GCRA_COUNT_INVALID;
	if (!std::isfinite(period_s) || period_s <= 0.0)
		return RL_GCRA_PERIOD_INVALID;
	const double period_us = std::round(period_s * 1e6);
	if (period_us < 1.0 || period_us > static_cast<double>(RL_MAX_PERIOD_US))
		return RL_GCRA_PERIOD_INVALID;
	if (rl_zone_limit(RL_ALGORITHM_GCRA, count, static_cast<int64_t>(period_us), max_burst + 1,
					  limit) != RL_ZONE_OK)
		return RL_GCRA_MAX_BURST_INVALID;	// burst's refill time beyond 285 years
	if (quantity < 0)
		return RL_GCRA_QUANTITY_NEGATIVE;
	if (!rl_zone_cost_valid(limit, quantity))
		return RL_GCRA_QUANTITY_ABOVE_LIMIT;
	return RL_GCRA_OK;
}
