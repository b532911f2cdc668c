// sliding_window_counter zones: Cloudflare's approximation.  Windows are
// aligned to multiples of the period; the estimate of the trailing period is
// previous * (time left in the current window) / period + current.
#include "zone_harness.h"

namespace {

using namespace zone_test;

CounterKey Counter(int64_t rate, int64_t period_us)
{
	return CounterKey{MakeLimit(RL_ALGORITHM_SLIDING_WINDOW_COUNTER, rate, period_us), std::nullopt};
}

TEST(SlidingWindowCounter, WindowsAreAlignedToMultiplesOfThePeriod)
{
	CounterKey key = Counter(5, 10 * kSecond);
	const int64_t base = kT0 - kT0 % (10 * kSecond);	// a multiple of 10 s
	RlDecision d = key.Take(base + 7 * kSecond, 5);
	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.remaining, 0);
	// Full until the window ends at base + 10 s, gone a period later.
	EXPECT_EQ(d.reset_after_us, 3 * kSecond + 10 * kSecond);
	ASSERT_TRUE(key.stored.has_value());
	EXPECT_EQ(key.stored->stamp_us, base);
	EXPECT_EQ(key.stored->a, 5);

	d = key.Take(base + 10 * kSecond - 1, 1);
	EXPECT_FALSE(d.allowed);
	// At base + 10 s the 5 become the previous window, weighing 5 * 10/10:
	// one more is admitted once 1/5 of the next window has passed.
	EXPECT_EQ(d.retry_after_us, 1 + 2 * kSecond);
	EXPECT_FALSE(key.Peek(base + 12 * kSecond - 1, 1).allowed);
	d = key.Take(base + 12 * kSecond, 1);
	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.remaining, 0);
	EXPECT_EQ(key.stored->stamp_us, base + 10 * kSecond);
	EXPECT_EQ(key.stored->a, 1);
	EXPECT_EQ(key.stored->b, 5);
}

TEST(SlidingWindowCounter, WeightedEstimate)
{
	// 10 per 100 us; 8 in the previous window.
	CounterKey key = Counter(10, 100);
	const int64_t base = 1000;	// a multiple of 100
	ASSERT_TRUE(key.Take(base + 50, 8).allowed);
	// 25 us into the next window: 8 * 75/100 = 6 estimated, 4 left.
	RlDecision d = key.Take(base + 125, 0);
	EXPECT_EQ(d.remaining, 4);
	EXPECT_EQ(d.reset_after_us, 75);
	d = key.Take(base + 125, 5);
	EXPECT_FALSE(d.allowed);
	// 8 * left / 100 + 5 <= 10 once left <= 62.5: at 38 us into the window.
	EXPECT_EQ(d.retry_after_us, 13);
	d = key.Take(base + 125, 4);
	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.remaining, 0);
	EXPECT_EQ(d.reset_after_us, 75 + 100);
	// 8 * 0.74 + 4 = 9.92: room for nothing but less than one short.
	d = key.Take(base + 126, 1);
	EXPECT_FALSE(d.allowed);
	EXPECT_EQ(d.remaining, 0);
	// 8 * left/100 + 5 <= 10 at left <= 62.
	EXPECT_EQ(d.retry_after_us, 138 - 126);
	// The 4 weigh 4 * 0.99 = 3.96 one microsecond into the next window.
	d = key.Take(base + 201, 0);
	EXPECT_EQ(d.remaining, 6);
	EXPECT_EQ(d.reset_after_us, 99);
	// Two windows on, nothing is left.
	d = key.Take(base + 300, 0);
	EXPECT_EQ(d.remaining, 10);
	EXPECT_EQ(d.reset_after_us, 0);
}

TEST(SlidingWindowCounter, NegativeTimesFloorToTheirWindow)
{
	CounterKey key = Counter(2, 100);
	// -150 lies in the window [-200, -100), not [-100, 0).
	ASSERT_TRUE(key.Take(-150, 2).allowed);
	EXPECT_EQ(key.stored->stamp_us, -200);
	RlDecision d = key.Take(-101, 1);
	EXPECT_FALSE(d.allowed);
	// At -100 the two weigh 2: the call passes half-way through, at -50.
	EXPECT_EQ(d.retry_after_us, 51);
	EXPECT_FALSE(key.Peek(-51, 1).allowed);
	EXPECT_TRUE(key.Take(-50, 1).allowed);
	EXPECT_EQ(key.stored->stamp_us, -100);
	EXPECT_EQ(key.stored->a, 1);
	EXPECT_EQ(key.stored->b, 2);
	// Across zero: the window [0, 100) sees the 1 as previous.
	d = key.Take(0, 0);
	EXPECT_EQ(d.remaining, 1);
	// The clock going back decides as at -50, the last stored decision (not
	// as at its window's start -100, where the 2 would weigh fully and even
	// a cost of 0 would be refused).
	d = key.Take(kPgMinTime + 1, 0);
	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.remaining, 0);
	EXPECT_EQ(d.reset_after_us, 150);
	d = key.Take(-99, 1);
	EXPECT_FALSE(d.allowed);
	EXPECT_EQ(d.retry_after_us, 50);	// from -50: 2 * left/100 + 2 <= 2 at the window's end

	CounterKey far = Counter(1, 7 * kSecond);
	const int64_t t = kPgMinTime + 3;
	ASSERT_TRUE(far.Take(t, 1).allowed);
	EXPECT_EQ(far.stored->stamp_us, static_cast<int64_t>(FloorDiv(t, 7 * kSecond) * 7 * kSecond));
	EXPECT_LE(far.stored->stamp_us, t);
	EXPECT_GT(far.stored->stamp_us + 7 * kSecond, t);
}

TEST(SlidingWindowCounter, LongIdleForgetsBothWindows)
{
	CounterKey key = Counter(3, kSecond);
	ASSERT_TRUE(key.Take(kT0 + 10, 3).allowed);
	// 10 us before the next window ends the 3 weigh 3 * 10/10^6.
	EXPECT_FALSE(key.Peek(kT0 + kSecond + 10, 1).allowed);
	ASSERT_TRUE(key.Take(kT0 + 2 * kSecond - 10, 1).allowed);
	const RlDecision d = key.Take(kT0 + 3 * kSecond, 3);
	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(key.stored->b, 0);
	EXPECT_EQ(key.stored->a, 3);
}

// ---------------------------------------------------------------------------
// Model: the counts of two aligned windows; retry_after and reset_after
// found by binary search over the estimate, which never grows with time.
// ---------------------------------------------------------------------------

struct CounterModel
{
	RlZoneLimit limit;
	std::optional<Wide> window;
	Wide current = 0;
	Wide previous = 0;
	int64_t last = 0;

	// The estimate (times the period) at t of the stored state plus extra
	// cost at decision time, and whether cost more fits.
	Wide Scaled(Wide t, Wide extra, Wide at_window) const
	{
		const Wide period = limit.period_us;
		const Wide start = FloorDiv(t, period) * period;
		Wide cur = 0;
		Wide prev = 0;
		// The state as it would be stored by an admission at at_window.
		const Wide cur_at = window && *window == at_window ? current + extra : extra;
		const Wide prev_at = window && *window == at_window ? previous
			: window && *window + period == at_window ? current : 0;
		if (start == at_window)
		{
			cur = cur_at;
			prev = prev_at;
		}
		else if (start == at_window + period)
			prev = cur_at;
		return prev * (start + period - t) + cur * period;
	}

	RlDecision Take(int64_t now_us, int64_t cost)
	{
		const Wide period = limit.period_us;
		const Wide budget = static_cast<Wide>(limit.rate) * period;
		if (window)
			now_us = std::max(now_us, last);
		const Wide now = now_us;
		const Wide start = FloorDiv(now, period) * period;
		RlDecision d{};
		d.capacity = limit.capacity;
		d.allowed = Scaled(now, cost, start) <= budget;
		const Wide extra = d.allowed ? cost : 0;
		const Wide spare = budget - Scaled(now, extra, start);
		d.remaining = spare > 0 ? static_cast<int64_t>(spare / period) : 0;
		auto first = [&](Wide lo, Wide hi, auto ok) {	// smallest x in [lo, hi] with ok(x)
			while (lo < hi)
			{
				const Wide mid = lo + (hi - lo) / 2;
				if (ok(mid))
					hi = mid;
				else
					lo = mid + 1;
			}
			return lo;
		};
		if (!d.allowed)
		{
			// A later call: its time's window, counts as stored at start.
			d.retry_after_us = static_cast<int64_t>(first(1, 2 * period + 1, [&](Wide x) {
				const Wide t = now + x;
				const Wide t_start = FloorDiv(t, period) * period;
				const Wide stored = Scaled(t, 0, start);
				// cost lands in t's window: the current count there grows.
				return stored + static_cast<Wide>(cost) * period <= budget || t_start < start;
			}));
		}
		d.reset_after_us = static_cast<int64_t>(first(0, 2 * period + 1, [&](Wide x) {
			return Scaled(now + x, extra, start) == 0;
		}));
		d.decided_at_us = now_us;
		d.state_changed = d.allowed && cost > 0;
		if (d.state_changed)
		{
			previous = window && *window == start ? previous
				: window && *window + period == start ? current : 0;
			current = (window && *window == start ? current : 0) + cost;
			window = start;
			last = now_us;
		}
		return d;
	}
};

TEST(SlidingWindowCounterModel, RandomSequencesMatchModel)
{
	std::mt19937_64 rng(0x5c0de7ULL);
	int64_t refused = 0;
	int64_t calls = 0;
	for (int sequence = 0; sequence < 2000; sequence++)
	{
		const int64_t rate = Chance(rng, 0.6) ? Uniform(rng, 1, 10) : Uniform(rng, 1, RL_MAX_LIMIT);
		const int64_t period = Chance(rng, 0.6) ? Uniform(rng, 1, 1000) : Uniform(rng, 1, RL_MAX_PERIOD_US);
		const RlZoneLimit limit = MakeLimit(RL_ALGORITHM_SLIDING_WINDOW_COUNTER, rate, period);
		CounterKey key{limit, std::nullopt};
		CounterModel model{limit, std::nullopt, 0, 0, 0};
		int64_t now = Chance(rng, 0.5) ? kT0 + Uniform(rng, 0, period)
			: kPgMinTime + Uniform(rng, 0, period);
		for (int step = 0; step < 40; step++)
		{
			const int64_t kind = Uniform(rng, 0, 9);
			if (kind <= 5)
				now += Uniform(rng, 0, period / 4);
			else if (kind == 6)
				now += Uniform(rng, 0, 3 * period);
			else if (kind == 7)
				now -= Uniform(rng, 0, period / 2);
			const int64_t cost = Chance(rng, 0.1) ? 0
				: rate <= 10 || Chance(rng, 0.5) ? Uniform(rng, 1, std::min<int64_t>(rate, 3))
				: Uniform(rng, 1, rate);
			const RlDecision expected = model.Take(now, cost);
			const RlDecision actual = key.Take(now, cost);
			ASSERT_TRUE(SameDecision(actual, expected))
				<< "sequence " << sequence << " step " << step << " rate " << rate << " period " << period
				<< " now " << now << " cost " << cost
				<< "\n  expected " << Describe(expected) << "\n  actual   " << Describe(actual);
			calls++;
			refused += !actual.allowed;
		}
	}
	EXPECT_GT(refused, calls / 10);
}

// retry_after is the earliest instant the same call passes.
TEST(SlidingWindowCounterModel, RetryAfterIsTheEarliestAdmission)
{
	std::mt19937_64 rng(0x7e77a1ULL);
	int64_t refusals = 0;
	for (int sequence = 0; sequence < 1000; sequence++)
	{
		const int64_t rate = Uniform(rng, 1, Chance(rng, 0.5) ? 5 : 1000);
		const int64_t period = Uniform(rng, 1, Chance(rng, 0.5) ? 100 : 100 * kSecond);
		const RlZoneLimit limit = MakeLimit(RL_ALGORITHM_SLIDING_WINDOW_COUNTER, rate, period);
		CounterKey key{limit, std::nullopt};
		int64_t now = kT0;
		for (int step = 0; step < 40; step++)
		{
			now += Chance(rng, 0.3) ? 0 : Uniform(rng, 0, 2 * period / rate);
			const int64_t cost = Chance(rng, 0.7) ? 1 : Uniform(rng, 1, rate);
			const RlDecision d = key.Take(now, cost);
			std::ostringstream where;
			where << "rate " << rate << " period " << period << " now " << now << " cost " << cost << " "
				  << Describe(d);
			if (!d.allowed)
			{
				refusals++;
				ASSERT_FALSE(key.Peek(now + d.retry_after_us - 1, cost).allowed) << where.str();
				ASSERT_TRUE(key.Peek(now + d.retry_after_us, cost).allowed) << where.str();
			}
			if (d.reset_after_us > 0)
			{
				ASSERT_LT(key.Peek(now + d.reset_after_us - 1, 0).remaining, rate) << where.str();
			}
			ASSERT_EQ(key.Peek(now + d.reset_after_us, 0).remaining, rate) << where.str();
		}
	}
	EXPECT_GT(refusals, 1000);
}

// The approximation's error is bounded: never more than rate admitted in
// one aligned window, never more than twice the rate in any trailing period.
TEST(SlidingWindowCounterModel, ErrorBound)
{
	std::mt19937_64 rng(0xe770b0ULL);
	int64_t admitted_total = 0;
	for (int sequence = 0; sequence < 300; sequence++)
	{
		const int64_t rate = Uniform(rng, 1, Chance(rng, 0.5) ? 5 : 200);
		const int64_t period = Uniform(rng, 1, Chance(rng, 0.5) ? 50 : 10 * kSecond);
		const RlZoneLimit limit = MakeLimit(RL_ALGORITHM_SLIDING_WINDOW_COUNTER, rate, period);
		CounterKey key{limit, std::nullopt};
		std::vector<std::pair<int64_t, int64_t>> admitted;	// time, cost
		int64_t now = Uniform(rng, -period, period);		// on both sides of zero
		std::map<int64_t, int64_t> per_window;
		for (int step = 0; step < 400; step++)
		{
			now += Chance(rng, 0.2) ? 0 : Uniform(rng, 0, 3 * period / rate + 1);
			const int64_t cost = Chance(rng, 0.8) ? 1 : Uniform(rng, 1, rate);
			if (!key.Take(now, cost).allowed)
				continue;
			admitted.emplace_back(now, cost);
			admitted_total += cost;
			const int64_t window = static_cast<int64_t>(FloorDiv(now, period));
			per_window[window] += cost;
			ASSERT_LE(per_window[window], rate) << "window " << window;
			int64_t trailing = 0;
			for (auto it = admitted.rbegin(); it != admitted.rend() && it->first > now - period; ++it)
				trailing += it->second;
			ASSERT_LE(trailing, 2 * rate) << "at " << now;
		}
	}
	EXPECT_GT(admitted_total, 10000);
}

}  // namespace
