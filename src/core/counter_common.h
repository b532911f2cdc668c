// counter_common.h -- what the fixed-state zone algorithms share
// (counter_algorithms.cpp decides, key_debt.cpp tells what forgetting a
// key would cost): 128-bit arithmetic, the token bucket's limit of a zone
// and the sliding-window counter's two aligned windows.  Internal to
// src/core.
#ifndef RL_COUNTER_COMMON_H
#define RL_COUNTER_COMMON_H

#include "rl_core.h"

#include <algorithm>

namespace rl_counter_common {

using Wide = __int128;

constexpr Wide kInt64Max = INT64_MAX;

inline int64_t Saturate(Wide value) noexcept
{
	if (value > kInt64Max)
		return INT64_MAX;
	if (value < -kInt64Max)
		return -INT64_MAX;
	return static_cast<int64_t>(value);
}

// ceil(numerator / denominator) for numerator >= 0, denominator > 0.
inline Wide CeilDiv(Wide numerator, Wide denominator) noexcept
{
	return (numerator + denominator - 1) / denominator;
}

// floor(numerator / denominator) for any numerator, denominator > 0.
inline Wide FloorDiv(Wide numerator, Wide denominator) noexcept
{
	Wide q = numerator / denominator;
	if (numerator % denominator != 0 && numerator < 0)
		q -= 1;
	return q;
}

inline RlTokenBucketLimit BucketLimit(const RlZoneLimit &zone) noexcept
{
	return RlTokenBucketLimit{static_cast<double>(zone.rate), static_cast<double>(zone.period_us),
							  static_cast<double>(zone.capacity)};
}

// The two aligned windows of a sliding-window counter as a call at now_us
// sees them.
struct AlignedWindows
{
	int64_t		now_us;			// never before the key's last decision
	Wide		start;			// of the window now_us lies in
	Wide		current;
	Wide		previous;
};

inline AlignedWindows AlignToNow(const RlZoneLimit &zone, const RlCounterState *prior,
								 int64_t now_us) noexcept
{
	const Wide period = zone.period_us;
	// The clock never runs backwards for a key: fraction is how far into its
	// window the last decision was (a whole number below 2^53: exact).  The
	// window's start alone is not enough: back there the previous window
	// weighs fully again, and even a cost of 0 could be refused.
	if (prior != nullptr)
	{
		const double offset = prior->fraction >= 0.0 && prior->fraction < static_cast<double>(period)
			? prior->fraction : 0.0;
		now_us = std::max(now_us, Saturate(prior->stamp_us + static_cast<Wide>(offset)));
	}
	AlignedWindows windows{now_us, FloorDiv(now_us, period) * period, 0, 0};
	if (prior != nullptr)
	{
		const Wide stored = prior->stamp_us;
		if (stored == windows.start)
		{
			windows.current = std::max<int64_t>(prior->a, 0);
			windows.previous = std::max<int64_t>(prior->b, 0);
		}
		else if (stored + period == windows.start)
			windows.previous = std::max<int64_t>(prior->a, 0);
	}
	return windows;
}

inline RlCounterState StoredWindows(const AlignedWindows &windows) noexcept
{
	return RlCounterState{Saturate(windows.current), static_cast<double>(windows.now_us - windows.start),
						  Saturate(windows.start), Saturate(windows.previous)};
}

}  // namespace rl_counter_common

#endif							/* RL_COUNTER_COMMON_H */
