// What forgetting a zone's key would cost: the debt a store short of room
// weighs before it evicts (rl_counter_debt), and a quicker weighing to rank
// many keys by (rl_counter_weigh).  The common algorithms are worked out
// directly, without the waits a take computes, because a store weighs every
// key of a set for one eviction; the rest go through the take.
// test/unit/key_debt_test.cpp holds each of them to the take's answers.
#include "rl_core.h"
#include "counter_common.h"

#include <algorithm>

namespace {

using namespace rl_counter_common;

// remaining is worked out only when the caller wants missing (it takes a
// 128-bit division for GCRA and the sliding-window counter).
RlKeyDebt Debt(int64_t capacity, const int64_t *remaining, double shortfall, bool idle, bool refusing) noexcept
{
	RlKeyDebt debt{};
	debt.idle = idle;
	debt.missing = idle || remaining == nullptr ? 0 : std::max<int64_t>(0, capacity - *remaining);
	debt.shortfall = idle ? 0.0 : std::max(0.0, shortfall);
	debt.refusing = refusing;
	return debt;
}

// The theoretical arrival time's lead over now, in ticks of 1/rate us:
// what a take of cost 0 finds left is (tolerance - lead) / emission.
RlKeyDebt GcraDebt(const RlZoneLimit &zone, const RlCounterState &state, int64_t now_us,
				   bool with_missing) noexcept
{
	const Wide rate = zone.rate;
	const Wide emission = zone.period_us;
	const Wide tolerance = emission * zone.capacity;
	const Wide now = static_cast<Wide>(std::max(now_us, state.b)) * rate;
	const Wide tat = static_cast<Wide>(state.stamp_us) * rate + std::clamp<int64_t>(state.a, 0, zone.rate - 1);
	const Wide lead = std::max<Wide>(tat - now, 0);
	const Wide left = tolerance - lead;
	const int64_t remaining = with_missing && left > 0 ? Saturate(left / emission) : 0;

	return Debt(zone.capacity, with_missing ? &remaining : nullptr,
				static_cast<double>(lead) / static_cast<double>(emission), lead == 0, lead + emission > tolerance);
}

// The cost admitted in the window open at now (none once it has ended).
RlKeyDebt FixedWindowDebt(const RlZoneLimit &zone, const RlCounterState &state, int64_t now_us) noexcept
{
	const int64_t now = std::max({now_us, state.stamp_us, state.b});
	const bool open = static_cast<Wide>(now) < static_cast<Wide>(state.stamp_us) + zone.period_us &&
		state.a > 0;
	const int64_t used = open ? std::min<int64_t>(state.a, zone.rate) : 0;

	const int64_t remaining = zone.rate - used;

	return Debt(zone.capacity, &remaining, static_cast<double>(used), used == 0, used + 1 > zone.rate);
}

// The weighted count, scaled by the period as the take compares it.  A key
// whose last decision lies ahead of now decides at that time, which a new
// key would not: not idle (as rl_counter_idle).
RlKeyDebt SlidingWindowCounterDebt(const RlZoneLimit &zone, const RlCounterState &state,
								   int64_t now_us, bool with_missing) noexcept
{
	const AlignedWindows windows = AlignToNow(zone, &state, now_us);
	const Wide period = zone.period_us;
	const Wide left_in_window = windows.start + period - windows.now_us;
	const Wide scaled = windows.previous * left_in_window + windows.current * period;
	const Wide spare = static_cast<Wide>(zone.rate) * period - scaled;
	const int64_t remaining = with_missing && spare > 0 ? Saturate(spare / period) : 0;

	return Debt(zone.capacity, with_missing ? &remaining : nullptr,
				static_cast<double>(scaled) / static_cast<double>(period),
				scaled == 0 && windows.now_us <= now_us, scaled + period > static_cast<Wide>(zone.rate) * period);
}

// Anything else, through the take itself.
RlKeyDebt DebtByTaking(const RlZoneLimit &zone, const RlCounterState &state, int64_t now_us) noexcept
{
	RlCounterState next{};
	const RlDecision peek = rl_counter_take(&zone, &state, now_us, 0, &next);
	const bool refusing = !rl_counter_take(&zone, &state, now_us, 1, &next).allowed;

	return Debt(zone.capacity, &peek.remaining, static_cast<double>(zone.capacity - peek.remaining),
				rl_counter_idle(&zone, &state, now_us), refusing);
}

// The debt, or with_missing false its weighing (rl_counter_weigh).
RlKeyDebt CounterDebt(const RlZoneLimit &limit, const RlCounterState &state, int64_t now_us,
					  bool with_missing) noexcept
{
	switch (limit.algorithm)
	{
		case RL_ALGORITHM_TOKEN_BUCKET:
			{
				const RlTokenBucketLimit bucket = BucketLimit(limit);
				const RlTokenBucketState tokens{state.a, state.fraction, state.stamp_us};
				return with_missing ? rl_token_bucket_debt(&tokens, now_us, &bucket)
					: rl_token_bucket_weigh(&tokens, now_us, &bucket);
			}
		case RL_ALGORITHM_GCRA:
			return GcraDebt(limit, state, now_us, with_missing);
		case RL_ALGORITHM_FIXED_WINDOW:
			return FixedWindowDebt(limit, state, now_us);
		case RL_ALGORITHM_SLIDING_WINDOW_COUNTER:
			return SlidingWindowCounterDebt(limit, state, now_us, with_missing);
		default:
			return DebtByTaking(limit, state, now_us);
	}
}

}  // namespace

extern "C" RlKeyDebt
rl_counter_debt(const RlZoneLimit *limit, const RlCounterState *state, int64_t now_us) noexcept
{
	return CounterDebt(*limit, *state, now_us, true);
}

extern "C" RlKeyDebt
rl_counter_weigh(const RlZoneLimit *limit, const RlCounterState *state, int64_t now_us) noexcept
{
	RlKeyDebt weight = CounterDebt(*limit, *state, now_us, false);

	weight.missing = 0;
	return weight;
}
