// fixed_window zones: rate per window, the window starting at the first
// call that finds none open (not at a multiple of the period), the whole
// allowance back period after it.
#include "zone_harness.h"

namespace {

using namespace zone_test;

CounterKey Window(int64_t rate, int64_t period_us)
{
	return CounterKey{MakeLimit(RL_ALGORITHM_FIXED_WINDOW, rate, period_us), std::nullopt};
}

TEST(FixedWindow, AlignedToTheFirstCallNotTheEpoch)
{
	CounterKey key = Window(3, 10 * kSecond);
	const int64_t first = kT0 + 7 * kSecond + 123;	// not a multiple of 10 s
	RlDecision d = key.Take(first, 1);
	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.capacity, 3);
	EXPECT_EQ(d.remaining, 2);
	EXPECT_EQ(d.reset_after_us, 10 * kSecond);
	d = key.Take(first + kSecond, 1);
	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.remaining, 1);
	EXPECT_EQ(d.reset_after_us, 9 * kSecond);
	d = key.Take(first + 2 * kSecond, 1);
	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.remaining, 0);

	// Past the epoch-aligned boundary (kT0 + 10 s) the window still runs.
	d = key.Take(kT0 + 10 * kSecond, 1);
	EXPECT_FALSE(d.allowed);
	EXPECT_EQ(d.remaining, 0);
	EXPECT_EQ(d.retry_after_us, first + 10 * kSecond - (kT0 + 10 * kSecond));
	EXPECT_EQ(d.reset_after_us, d.retry_after_us);
	d = key.Take(first + 10 * kSecond - 1, 1);
	EXPECT_FALSE(d.allowed);
	EXPECT_EQ(d.retry_after_us, 1);

	// The whole allowance is back period after the first call, at once.
	d = key.Take(first + 10 * kSecond, 3);
	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.remaining, 0);
	EXPECT_EQ(d.reset_after_us, 10 * kSecond);
	ASSERT_TRUE(key.stored.has_value());
	EXPECT_EQ(key.stored->stamp_us, first + 10 * kSecond);
	EXPECT_EQ(key.stored->a, 3);
}

TEST(FixedWindow, AfterIdlingTheNextCallOpensTheWindow)
{
	CounterKey key = Window(2, kSecond);
	ASSERT_TRUE(key.Take(kT0, 2).allowed);
	const int64_t later = kT0 + 3 * kSecond + 777777;
	RlDecision d = key.Take(later, 1);
	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.remaining, 1);
	EXPECT_EQ(d.reset_after_us, kSecond);
	EXPECT_TRUE(key.Take(later + kSecond - 1, 1).allowed);
	d = key.Take(later + kSecond - 1, 1);
	EXPECT_FALSE(d.allowed);
	EXPECT_EQ(d.retry_after_us, 1);
}

TEST(FixedWindow, CostZeroAndRefusalsOpenNoWindow)
{
	CounterKey key = Window(2, kSecond);
	RlDecision d = key.Take(kT0, 0);
	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.remaining, 2);
	EXPECT_EQ(d.reset_after_us, 0);
	EXPECT_FALSE(key.stored.has_value());
	// The window starts at the first cost, half a second later.
	ASSERT_TRUE(key.Take(kT0 + kSecond / 2, 2).allowed);
	d = key.Take(kT0 + kSecond, 0);
	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.remaining, 0);
	EXPECT_EQ(d.reset_after_us, kSecond / 2);
	const RlCounterState full = *key.stored;
	EXPECT_FALSE(key.Take(kT0 + kSecond, 1).allowed);
	EXPECT_TRUE(SameCounterState(*key.stored, full));
	d = key.Take(kT0 + 3 * kSecond / 2, 0);
	EXPECT_EQ(d.remaining, 2);
	EXPECT_EQ(d.reset_after_us, 0);
	EXPECT_TRUE(SameCounterState(*key.stored, full));
}

// A stored window in which nothing is admitted (a refund gave it all back)
// is no window: the next admission opens one at its own time.
TEST(FixedWindow, AWindowWithNothingAdmittedDoesNotAnchor)
{
	const RlZoneLimit limit = MakeLimit(RL_ALGORITHM_FIXED_WINDOW, 3, 10 * kSecond);
	for (int64_t nothing : {INT64_C(0), INT64_C(-1), INT64_MIN})
	{
		const std::string where = "a = " + std::to_string(nothing);
		CounterKey key{limit, RlCounterState{nothing, 0.0, kT0, kT0}};
		EXPECT_TRUE(rl_counter_idle(&limit, &*key.stored, kT0)) << where;
		RlDecision d = key.Take(kT0 + 4 * kSecond, 0);
		EXPECT_EQ(d.remaining, 3) << where;
		EXPECT_EQ(d.reset_after_us, 0) << where;
		d = key.Take(kT0 + 4 * kSecond, 1);
		EXPECT_TRUE(d.allowed) << where;
		EXPECT_EQ(d.reset_after_us, 10 * kSecond) << where;	// not 6 s: kT0 fixes nothing
		EXPECT_EQ(key.stored->stamp_us, kT0 + 4 * kSecond) << where;
		EXPECT_EQ(key.stored->a, 1) << where;
		// The window runs from kT0 + 4 s, past kT0 + 10 s.
		EXPECT_TRUE(key.Take(kT0 + 13 * kSecond, 2).allowed) << where;
		d = key.Take(kT0 + 14 * kSecond - 1, 1);
		EXPECT_FALSE(d.allowed) << where;
		EXPECT_EQ(d.retry_after_us, 1) << where;
	}
	// The last decision time still holds the clock: a call from before it
	// opens the window at it.
	CounterKey key{limit, RlCounterState{0, 0.0, kT0, kT0 + 5 * kSecond}};
	RlDecision d = key.Take(kT0 + kSecond, 1);
	EXPECT_EQ(d.decided_at_us, kT0 + 5 * kSecond);
	EXPECT_EQ(d.reset_after_us, 10 * kSecond);
	EXPECT_EQ(key.stored->stamp_us, kT0 + 5 * kSecond);
	// With something admitted the window stays where it is.
	key = CounterKey{limit, RlCounterState{1, 0.0, kT0, kT0}};
	d = key.Take(kT0 + 4 * kSecond, 1);
	EXPECT_EQ(d.reset_after_us, 6 * kSecond);
	EXPECT_EQ(key.stored->stamp_us, kT0);
	EXPECT_EQ(key.stored->a, 2);
}

TEST(FixedWindow, CostsAddUpToTheRate)
{
	CounterKey key = Window(10, kMinute);
	EXPECT_TRUE(key.Take(kT0, 4).allowed);
	RlDecision d = key.Take(kT0 + 1, 7);
	EXPECT_FALSE(d.allowed);
	EXPECT_EQ(d.remaining, 6);
	EXPECT_EQ(d.retry_after_us, kMinute - 1);
	d = key.Take(kT0 + 2, 6);
	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.remaining, 0);
	EXPECT_EQ(d.reset_after_us, kMinute - 2);
}

// ---------------------------------------------------------------------------
// Model: the window opened by the first admitted cost; a clock going back
// decides as at the latest time a state was stored.
// ---------------------------------------------------------------------------

struct FixedWindowModel
{
	RlZoneLimit limit;
	std::optional<int64_t> start;
	int64_t used = 0;
	int64_t last = 0;

	RlDecision Take(int64_t now_us, int64_t cost)
	{
		const Wide period = limit.period_us;
		if (start)
			now_us = std::max(now_us, last);
		int64_t window = now_us;
		int64_t in_window = 0;
		if (start && now_us < *start + period)
		{
			window = *start;
			in_window = used;
		}
		RlDecision d{};
		d.capacity = limit.capacity;
		d.allowed = in_window + cost <= limit.rate;
		const int64_t after = d.allowed ? in_window + cost : in_window;
		d.remaining = limit.rate - after;
		const int64_t to_end = static_cast<int64_t>(window + period - now_us);
		d.retry_after_us = d.allowed ? 0 : to_end;
		d.reset_after_us = after > 0 ? to_end : 0;
		d.decided_at_us = now_us;
		d.state_changed = d.allowed && cost > 0;
		if (d.state_changed)
		{
			start = window;
			used = after;
			last = now_us;
		}
		return d;
	}
};

TEST(FixedWindowModel, RandomSequencesMatchModel)
{
	std::mt19937_64 rng(0xf1bed817ULL);
	int64_t refused = 0;
	int64_t calls = 0;
	for (int sequence = 0; sequence < 2000; sequence++)
	{
		const int64_t rate = Chance(rng, 0.5) ? Uniform(rng, 1, 10) : Uniform(rng, 1, RL_MAX_LIMIT);
		const int64_t period = Chance(rng, 0.5) ? Uniform(rng, 1, 1000) : Uniform(rng, 1, RL_MAX_PERIOD_US);
		const RlZoneLimit limit = MakeLimit(RL_ALGORITHM_FIXED_WINDOW, rate, period);
		CounterKey key{limit, std::nullopt};
		FixedWindowModel model{limit, std::nullopt, 0, 0};
		int64_t now = Chance(rng, 0.5) ? kT0 : kPgMinTime + Uniform(rng, 0, kSecond);
		for (int step = 0; step < 40; step++)
		{
			const int64_t kind = Uniform(rng, 0, 9);
			if (kind <= 5)
				now += Uniform(rng, 0, period / 4);
			else if (kind == 6)
				now += Uniform(rng, 0, 2 * period);
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

}  // namespace
