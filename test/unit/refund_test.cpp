// rl_counter_refund: giving back cost a key was charged (a request that
// failed should not count) for every fixed-state algorithm: worked numbers
// per algorithm, then properties over random sequences of takes and refunds
// (a refund right after its take undoes it, a refund of everything leaves a
// key as good as new, and never more than the cost comes back).
#include "zone_harness.h"

namespace {

using namespace zone_test;

constexpr RlAlgorithm kCounterAlgorithms[] = {RL_ALGORITHM_TOKEN_BUCKET, RL_ALGORITHM_GCRA,
											  RL_ALGORITHM_FIXED_WINDOW,
											  RL_ALGORITHM_SLIDING_WINDOW_COUNTER,
											  RL_ALGORITHM_CRON_TOKEN_BUCKET};

CounterKey Key(RlAlgorithm algorithm, int64_t rate, int64_t period_us, int64_t burst = -1,
			   int64_t tick_us = 0)
{
	CounterKey key{MakeLimit(algorithm, rate, period_us, burst), std::nullopt};
	key.limit.refill_tick_us = tick_us;
	return key;
}

CounterKey KeyWith(const RlZoneLimit &limit, const RlCounterState &state)
{
	return CounterKey{limit, state};
}

// ---------------------------------------------------------------------------
// Every algorithm: a key never seen is full, and cost <= 0 gives nothing.
// ---------------------------------------------------------------------------

TEST(CounterRefund, NothingToGiveBackToANewKey)
{
	for (RlAlgorithm algorithm : kCounterAlgorithms)
	{
		CounterKey key = Key(algorithm, 10, kMinute, -1, kSecond);
		for (int64_t cost : {INT64_C(0), INT64_C(1), INT64_C(10), INT64_MAX})
		{
			// CounterKey::Refund checks that next is zeroed: nothing to store.
			const RlDecision d = key.Refund(kT0, cost);
			EXPECT_FALSE(d.state_changed) << AlgorithmName(algorithm);
			EXPECT_EQ(d.remaining, 10) << AlgorithmName(algorithm);
			EXPECT_EQ(d.reset_after_us, 0) << AlgorithmName(algorithm);
			EXPECT_EQ(d.decided_at_us, kT0) << AlgorithmName(algorithm);
			EXPECT_FALSE(key.stored.has_value()) << AlgorithmName(algorithm);
		}
	}
}

TEST(CounterRefund, CostZeroOrNegativeGivesNothing)
{
	for (RlAlgorithm algorithm : kCounterAlgorithms)
	{
		CounterKey key = Key(algorithm, 10, kMinute, -1, kSecond);
		ASSERT_TRUE(key.Take(kT0, 4).allowed) << AlgorithmName(algorithm);
		const RlCounterState before = *key.stored;
		for (int64_t cost : {INT64_C(0), INT64_C(-1), INT64_MIN})
		{
			const RlDecision d = key.Refund(kT0 + kSecond, cost);
			EXPECT_FALSE(d.state_changed) << AlgorithmName(algorithm) << " " << cost;
			EXPECT_TRUE(SameCounterState(*key.stored, before)) << AlgorithmName(algorithm);
		}
	}
}

// The sliding window has a state of its own (rl_sw_refund): nothing here.
TEST(CounterRefund, ExactSlidingWindowIsNotACounter)
{
	const RlZoneLimit limit = MakeLimit(RL_ALGORITHM_SLIDING_WINDOW, 10, kMinute);
	const RlCounterState prior{3, 0.0, kT0, 0};
	RlCounterState next{1, 1.0, 1, 1};
	const RlDecision d = rl_counter_refund(&limit, &prior, kT0, 1, &next);
	EXPECT_FALSE(d.allowed);
	EXPECT_FALSE(d.state_changed);
	EXPECT_TRUE(SameCounterState(next, prior));
}

// ---------------------------------------------------------------------------
// token_bucket: refilled up to now first, then cost more, up to capacity.
// Rate 10 per minute: a token every 6 s.
// ---------------------------------------------------------------------------

TEST(TokenBucketRefund, GivesBackUpToCapacity)
{
	CounterKey key = Key(RL_ALGORITHM_TOKEN_BUCKET, 10, kMinute);
	ASSERT_TRUE(key.Take(kT0, 5).allowed);
	RlDecision d = key.Refund(kT0, 2);
	EXPECT_TRUE(d.state_changed);
	EXPECT_EQ(d.remaining, 7);
	EXPECT_EQ(d.reset_after_us, 18 * kSecond);
	EXPECT_EQ(key.stored->a, 7);
	EXPECT_EQ(key.stored->fraction, 0.0);
	EXPECT_EQ(key.stored->stamp_us, kT0);

	// 3 s later half a token has come back: 7.5, then 8.5.
	d = key.Refund(kT0 + 3 * kSecond, 1);
	EXPECT_EQ(d.remaining, 8);
	EXPECT_EQ(d.reset_after_us, 9 * kSecond);
	EXPECT_EQ(key.stored->a, 8);
	EXPECT_EQ(key.stored->fraction, 0.5);
	EXPECT_EQ(key.stored->stamp_us, kT0 + 3 * kSecond);

	// 10.5 is above the capacity: full, without the half token.
	d = key.Refund(kT0 + 3 * kSecond, 2);
	EXPECT_EQ(d.remaining, 10);
	EXPECT_EQ(d.reset_after_us, 0);
	EXPECT_EQ(key.stored->a, 10);
	EXPECT_EQ(key.stored->fraction, 0.0);
	EXPECT_TRUE(rl_counter_idle(&key.limit, &*key.stored, kT0 + 3 * kSecond));

	// Full: nothing more to give back, nothing to store.
	const RlCounterState full = *key.stored;
	d = key.Refund(kT0 + 4 * kSecond, 5);
	EXPECT_FALSE(d.state_changed);
	EXPECT_TRUE(SameCounterState(*key.stored, full));
}

TEST(TokenBucketRefund, ExactlyToCapacityWithAFraction)
{
	CounterKey key = Key(RL_ALGORITHM_TOKEN_BUCKET, 10, kMinute);
	ASSERT_TRUE(key.Take(kT0, 10).allowed);
	// 0.5 refilled plus 9: 9.5, the fraction kept.
	RlDecision d = key.Refund(kT0 + 3 * kSecond, 9);
	EXPECT_EQ(d.remaining, 9);
	EXPECT_EQ(d.reset_after_us, 3 * kSecond);
	EXPECT_EQ(key.stored->a, 9);
	EXPECT_EQ(key.stored->fraction, 0.5);
	// 9 whole plus 1 is the capacity: full, the fraction goes.
	d = key.Refund(kT0 + 3 * kSecond, 1);
	EXPECT_EQ(key.stored->a, 10);
	EXPECT_EQ(key.stored->fraction, 0.0);
	EXPECT_EQ(d.reset_after_us, 0);
}

// A bucket refilled to full by time alone has nothing to give back, though
// its stored tokens are low.
TEST(TokenBucketRefund, RefilledToFullHasNothingToGiveBack)
{
	CounterKey key = Key(RL_ALGORITHM_TOKEN_BUCKET, 10, kMinute);
	ASSERT_TRUE(key.Take(kT0, 10).allowed);
	const RlCounterState empty = *key.stored;
	const RlDecision d = key.Refund(kT0 + kMinute, 3);
	EXPECT_FALSE(d.state_changed);
	EXPECT_EQ(d.remaining, 10);
	EXPECT_TRUE(SameCounterState(*key.stored, empty));
}

TEST(TokenBucketRefund, ClockGoingBackCountsAsNoTimePassing)
{
	CounterKey key = Key(RL_ALGORITHM_TOKEN_BUCKET, 10, kMinute);
	ASSERT_TRUE(key.Take(kT0, 10).allowed);
	const RlDecision d = key.Refund(kT0 - kMinute, 1);
	EXPECT_EQ(d.decided_at_us, kT0);
	EXPECT_EQ(d.remaining, 1);
	EXPECT_EQ(key.stored->stamp_us, kT0);
	EXPECT_EQ(key.stored->a, 1);
}

TEST(TokenBucketRefund, ExtremeCostsSaturateAtCapacity)
{
	CounterKey key = Key(RL_ALGORITHM_TOKEN_BUCKET, RL_MAX_LIMIT, RL_MAX_PERIOD_US);
	ASSERT_TRUE(key.Take(kT0, RL_MAX_LIMIT).allowed);
	RlDecision d = key.Refund(kT0, RL_MAX_LIMIT - 1);
	EXPECT_EQ(d.remaining, RL_MAX_LIMIT - 1);
	EXPECT_EQ(key.stored->a, RL_MAX_LIMIT - 1);
	d = key.Refund(kT0, INT64_MAX);
	EXPECT_EQ(d.remaining, RL_MAX_LIMIT);
	EXPECT_EQ(key.stored->a, RL_MAX_LIMIT);
	// Hand-edited tokens far above the capacity read as full.
	CounterKey edited = KeyWith(key.limit, RlCounterState{INT64_MAX, 0.0, kT0, 0});
	EXPECT_FALSE(edited.Refund(kT0, INT64_MAX).state_changed);
}

// ---------------------------------------------------------------------------
// gcra: the theoretical arrival time moves back cost emission intervals, not
// before now.  redis-cell's 15 30 60: capacity 16, an interval of 2 s.
// ---------------------------------------------------------------------------

RlZoneLimit CellLimit(int64_t max_burst, int64_t count, double period_s)
{
	RlZoneLimit limit{};
	EXPECT_EQ(rl_gcra_limit(max_burst, count, period_s, 1, &limit), RL_GCRA_OK);
	return limit;
}

TEST(GcraRefund, MovesTheArrivalTimeBack)
{
	CounterKey key{CellLimit(15, 30, 60.0), std::nullopt};
	ASSERT_TRUE(key.Take(kT0, 16).allowed);
	RlDecision d = key.Refund(kT0, 1);
	EXPECT_TRUE(d.state_changed);
	EXPECT_EQ(d.remaining, 1);
	EXPECT_EQ(d.reset_after_us, 30 * kSecond);
	EXPECT_TRUE(key.Take(kT0, 1).allowed);
	d = key.Take(kT0, 1);
	EXPECT_FALSE(d.allowed);
	EXPECT_EQ(d.retry_after_us, 2 * kSecond);

	// 10 s on the arrival time is 22 s ahead: 5 left; 3 back make 8.
	d = key.Refund(kT0 + 10 * kSecond, 3);
	EXPECT_EQ(d.remaining, 8);
	EXPECT_EQ(d.reset_after_us, 16 * kSecond);
	EXPECT_EQ(key.stored->stamp_us, kT0 + 26 * kSecond);
	EXPECT_EQ(key.stored->a, 0);
	EXPECT_EQ(key.stored->b, kT0 + 10 * kSecond);

	// More than is owed: the arrival time stops at now, a full key.
	d = key.Refund(kT0 + 10 * kSecond, 100);
	EXPECT_EQ(d.remaining, 16);
	EXPECT_EQ(d.reset_after_us, 0);
	EXPECT_EQ(key.stored->stamp_us, kT0 + 10 * kSecond);
	EXPECT_TRUE(rl_counter_idle(&key.limit, &*key.stored, kT0 + 10 * kSecond));
	EXPECT_TRUE(key.Take(kT0 + 10 * kSecond, 16).allowed);

	// An arrival time already behind now: full, nothing stored.
	const RlCounterState owed = *key.stored;
	d = key.Refund(kT0 + 100 * kSecond, 1);
	EXPECT_FALSE(d.state_changed);
	EXPECT_EQ(d.remaining, 16);
	EXPECT_TRUE(SameCounterState(*key.stored, owed));
}

// An interval of 1/3 s: the arrival time keeps its thirds of a microsecond.
TEST(GcraRefund, FractionalEmissionIntervalStaysExact)
{
	CounterKey key{CellLimit(1, 3, 1.0), std::nullopt};
	ASSERT_TRUE(key.Take(kT0, 2).allowed);
	RlDecision d = key.Refund(kT0, 1);
	EXPECT_EQ(d.remaining, 1);
	EXPECT_EQ(d.reset_after_us, 333334);	// ceil(1e6 / 3)
	EXPECT_EQ(key.stored->stamp_us, kT0 + 333333);
	EXPECT_EQ(key.stored->a, 1);			// and 1/3 us
	// The take moves it forward by exactly what the refund moved it back.
	d = key.Take(kT0, 1);
	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.reset_after_us, 666667);
	EXPECT_EQ(key.stored->stamp_us, kT0 + 666666);
	EXPECT_EQ(key.stored->a, 2);
	// 100 ms later, one interval back would be before now: now it is.
	d = key.Refund(kT0 + 100000, 2);
	EXPECT_EQ(d.remaining, 2);
	EXPECT_EQ(key.stored->stamp_us, kT0 + 100000);
	EXPECT_EQ(key.stored->a, 0);
}

// Before 2000 the times are negative: the split into microseconds and
// ticks still floors.
TEST(GcraRefund, BeforeTheEpoch)
{
	for (int64_t start : {int64_t{-1000}, kPgMinTime + 7, int64_t{0}, kT0})
	{
		// 10 per 15 us, burst 4: 1.5 us an interval, 15 ticks of 1/10 us.
		CounterKey key{MakeLimit(RL_ALGORITHM_GCRA, 10, 15, 4), std::nullopt};
		ASSERT_TRUE(key.Take(start, 4).allowed) << start;
		const RlDecision d = key.Refund(start, 1);
		EXPECT_EQ(d.remaining, 1) << start;
		EXPECT_EQ(d.reset_after_us, 5) << start;	// ceil(4.5)
		EXPECT_EQ(key.stored->stamp_us, start + 4) << start;
		EXPECT_EQ(key.stored->a, 5) << start;
		EXPECT_TRUE(key.Take(start, 1).allowed) << start;
		EXPECT_FALSE(key.Take(start, 1).allowed) << start;
	}
}

TEST(GcraRefund, ClockGoingBackCountsAsNoTimePassing)
{
	CounterKey key{CellLimit(15, 30, 60.0), std::nullopt};
	ASSERT_TRUE(key.Take(kT0 + 10 * kSecond, 16).allowed);
	const RlDecision d = key.Refund(kT0, 1);
	EXPECT_EQ(d.decided_at_us, kT0 + 10 * kSecond);
	EXPECT_EQ(d.remaining, 1);
	EXPECT_EQ(d.reset_after_us, 30 * kSecond);
	EXPECT_EQ(key.stored->b, kT0 + 10 * kSecond);
}

// redis-cell's algorithm on an exact clock (ticks of 1/count us), with the
// refund: tat = max(tat - cost * interval, now) when tat > now.
struct GcraModel
{
	RlZoneLimit limit;
	std::optional<Wide> tat;
	std::optional<int64_t> last;

	RlDecision Look(int64_t now_us, int64_t cost, Wide *new_tat) const
	{
		const Wide count = limit.rate;
		const Wide interval = limit.period_us;
		const Wide tolerance = interval * limit.capacity;
		const Wide now = static_cast<Wide>(now_us) * count;
		const Wide old_tat = tat ? *tat : now;
		*new_tat = std::max(old_tat, now) + interval * cost;
		const bool limited = now < *new_tat - tolerance;
		const Wide ttl = limited ? old_tat - now : *new_tat - now;
		RlDecision d{};
		d.allowed = !limited;
		d.capacity = limit.capacity;
		d.retry_after_us = limited ? static_cast<int64_t>(CeilDiv(*new_tat - tolerance - now, count)) : 0;
		const Wide left = tolerance - ttl;
		d.remaining = left > 0 ? static_cast<int64_t>(left / interval) : 0;
		d.reset_after_us = ttl > 0 ? static_cast<int64_t>(CeilDiv(ttl, count)) : 0;
		d.decided_at_us = now_us;
		return d;
	}

	RlDecision Take(int64_t now_us, int64_t cost)
	{
		if (last)
			now_us = std::max(now_us, *last);
		Wide new_tat = 0;
		RlDecision d = Look(now_us, cost, &new_tat);
		d.state_changed = d.allowed && cost > 0;
		if (d.state_changed)
		{
			tat = new_tat;
			last = now_us;
		}
		return d;
	}

	RlDecision Refund(int64_t now_us, int64_t cost)
	{
		if (last)
			now_us = std::max(now_us, *last);
		const Wide now = static_cast<Wide>(now_us) * limit.rate;
		bool changed = false;
		if (tat && *tat > now && cost > 0)
		{
			tat = std::max(*tat - static_cast<Wide>(limit.period_us) * cost, now);
			last = now_us;
			changed = true;
		}
		Wide unused = 0;
		RlDecision d = Look(now_us, 0, &unused);
		d.state_changed = changed;
		return d;
	}
};

TEST(GcraRefund, RandomSequencesMatchModel)
{
	std::mt19937_64 rng(0x9efd0dULL);
	int64_t refunds = 0;
	int64_t changed = 0;
	for (int sequence = 0; sequence < 2000; sequence++)
	{
		const int64_t count = Chance(rng, 0.5) ? Uniform(rng, 1, 10) : Uniform(rng, 1, RL_MAX_LIMIT);
		const int64_t period = Chance(rng, 0.5) ? Uniform(rng, 1, 1000) : Uniform(rng, 1, RL_MAX_PERIOD_US);
		int64_t burst = Uniform(rng, 1, 20);
		while (static_cast<Wide>(burst) * period > static_cast<Wide>(count) * RL_MAX_PERIOD_US)
			burst = std::max<int64_t>(1, burst / 2);
		const RlZoneLimit limit = MakeLimit(RL_ALGORITHM_GCRA, count, period, burst);
		CounterKey key{limit, std::nullopt};
		GcraModel model{limit, std::nullopt, std::nullopt};
		const int64_t interval = std::max<int64_t>(1, std::min<int64_t>(period / count, INT64_C(1) << 40));
		int64_t now = Chance(rng, 0.5) ? kT0 : -Uniform(rng, 0, 1000) * kSecond;
		for (int step = 0; step < 40; step++)
		{
			const int64_t kind = Uniform(rng, 0, 9);
			if (kind <= 5)
				now += Uniform(rng, 0, interval);
			else if (kind == 6)
				now -= Uniform(rng, 0, interval);
			const bool refund = Chance(rng, 0.35);
			const int64_t cost = Chance(rng, 0.1) ? 0
				: Chance(rng, 0.7) ? Uniform(rng, 1, std::min<int64_t>(3, limit.capacity))
				: Uniform(rng, 1, 2 * limit.capacity);
			std::ostringstream where;
			where << "sequence " << sequence << " step " << step << " count " << count << " period " << period
				  << " burst " << burst << " now " << now << (refund ? " refund " : " take ") << cost;
			const RlDecision expected = refund ? model.Refund(now, cost)
				: model.Take(now, std::min(cost, limit.capacity));
			const RlDecision actual = refund ? key.Refund(now, cost)
				: key.Take(now, std::min(cost, limit.capacity));
			ASSERT_TRUE(SameDecision(actual, expected))
				<< where.str() << "\n  expected " << Describe(expected) << "\n  actual   " << Describe(actual);
			refunds += refund;
			changed += refund && actual.state_changed;
		}
	}
	EXPECT_GT(changed, refunds / 4);
}

// ---------------------------------------------------------------------------
// fixed_window: the open window admitted cost less; an expired one has
// nothing to give back.
// ---------------------------------------------------------------------------

TEST(FixedWindowRefund, GivesBackWithinTheOpenWindow)
{
	CounterKey key = Key(RL_ALGORITHM_FIXED_WINDOW, 3, 10 * kSecond);
	const int64_t first = kT0 + 7 * kSecond + 123;
	ASSERT_TRUE(key.Take(first, 3).allowed);
	RlDecision d = key.Refund(first + kSecond, 1);
	EXPECT_TRUE(d.state_changed);
	EXPECT_EQ(d.remaining, 1);
	EXPECT_EQ(d.reset_after_us, 9 * kSecond);
	EXPECT_EQ(key.stored->a, 2);
	EXPECT_EQ(key.stored->stamp_us, first);		// the window does not move
	EXPECT_EQ(key.stored->b, first + kSecond);
	EXPECT_TRUE(key.Take(first + 2 * kSecond, 1).allowed);
	d = key.Take(first + 2 * kSecond, 1);
	EXPECT_FALSE(d.allowed);
	EXPECT_EQ(d.retry_after_us, 8 * kSecond);
}

// Everything given back: the window holds nothing and no longer fixes the
// boundary; the next admission opens a window of its own.
TEST(FixedWindowRefund, AllGivenBackOpensNoWindow)
{
	CounterKey key = Key(RL_ALGORITHM_FIXED_WINDOW, 3, 10 * kSecond);
	ASSERT_TRUE(key.Take(kT0, 2).allowed);
	RlDecision d = key.Refund(kT0 + 5 * kSecond, 5);
	EXPECT_TRUE(d.state_changed);
	EXPECT_EQ(d.remaining, 3);
	EXPECT_EQ(d.reset_after_us, 0);
	EXPECT_EQ(key.stored->a, 0);
	EXPECT_TRUE(rl_counter_idle(&key.limit, &*key.stored, kT0 + 5 * kSecond));
	// An empty window has nothing more to give back.
	EXPECT_FALSE(key.Refund(kT0 + 6 * kSecond, 1).state_changed);
	d = key.Take(kT0 + 6 * kSecond, 1);
	EXPECT_EQ(d.reset_after_us, 10 * kSecond);
	EXPECT_EQ(key.stored->stamp_us, kT0 + 6 * kSecond);
	EXPECT_TRUE(key.Take(kT0 + 15 * kSecond, 2).allowed);
	EXPECT_FALSE(key.Take(kT0 + 16 * kSecond - 1, 1).allowed);
}

TEST(FixedWindowRefund, ExpiredWindowHasNothingToGiveBack)
{
	CounterKey key = Key(RL_ALGORITHM_FIXED_WINDOW, 3, 10 * kSecond);
	ASSERT_TRUE(key.Take(kT0, 3).allowed);
	const RlCounterState spent = *key.stored;
	RlDecision d = key.Refund(kT0 + 10 * kSecond, 3);
	EXPECT_FALSE(d.state_changed);
	EXPECT_EQ(d.remaining, 3);
	EXPECT_TRUE(SameCounterState(*key.stored, spent));
	// One microsecond earlier it is still open.
	d = key.Refund(kT0 + 10 * kSecond - 1, 1);
	EXPECT_TRUE(d.state_changed);
	EXPECT_EQ(d.remaining, 1);
	EXPECT_EQ(d.reset_after_us, 1);
}

TEST(FixedWindowRefund, ClockGoingBackAndHandEditedCounts)
{
	CounterKey key = Key(RL_ALGORITHM_FIXED_WINDOW, 3, 10 * kSecond);
	ASSERT_TRUE(key.Take(kT0 + 5 * kSecond, 3).allowed);
	RlDecision d = key.Refund(kT0, 1);
	EXPECT_EQ(d.decided_at_us, kT0 + 5 * kSecond);
	EXPECT_EQ(d.reset_after_us, 10 * kSecond);
	EXPECT_EQ(key.stored->b, kT0 + 5 * kSecond);
	// A count above the rate (lowered since) reads as the rate.
	key = KeyWith(key.limit, RlCounterState{1000, 0.0, kT0, kT0});
	d = key.Refund(kT0, 1);
	EXPECT_EQ(d.remaining, 1);
	EXPECT_EQ(key.stored->a, 2);
	// A negative count is an empty window.
	key = KeyWith(key.limit, RlCounterState{-5, 0.0, kT0, kT0});
	EXPECT_FALSE(key.Refund(kT0, 1).state_changed);
}

// ---------------------------------------------------------------------------
// sliding_window_counter: rotated to now, the current window's count first,
// then the previous window's.  10 per 100 us, windows at multiples of 100.
// ---------------------------------------------------------------------------

TEST(SlidingWindowCounterRefund, CurrentWindowFirstThenPrevious)
{
	CounterKey key = Key(RL_ALGORITHM_SLIDING_WINDOW_COUNTER, 10, 100);
	ASSERT_TRUE(key.Take(1050, 8).allowed);
	RlDecision d = key.Refund(1060, 3);
	EXPECT_TRUE(d.state_changed);
	EXPECT_EQ(d.remaining, 5);
	EXPECT_EQ(d.reset_after_us, 40 + 100);
	EXPECT_EQ(key.stored->a, 5);
	EXPECT_EQ(key.stored->b, 0);
	EXPECT_EQ(key.stored->stamp_us, 1000);
	EXPECT_EQ(key.stored->fraction, 60.0);

	// In the next window the 5 are the previous window's: 2 of them back,
	// 3 * 75/100 = 2.25 estimated.
	d = key.Refund(1125, 2);
	EXPECT_EQ(d.remaining, 7);
	EXPECT_EQ(d.reset_after_us, 75);
	EXPECT_EQ(key.stored->a, 0);
	EXPECT_EQ(key.stored->b, 3);
	EXPECT_EQ(key.stored->stamp_us, 1100);
	EXPECT_EQ(key.stored->fraction, 25.0);

	// 4 in the current window: a refund of 6 takes them and 2 of the 3.
	ASSERT_TRUE(key.Take(1125, 4).allowed);
	d = key.Refund(1130, 6);
	EXPECT_EQ(key.stored->a, 0);
	EXPECT_EQ(key.stored->b, 1);
	EXPECT_EQ(d.remaining, 9);		// 10 - 1 * 70/100
	EXPECT_EQ(d.reset_after_us, 70);

	// Everything: both windows empty, the key as good as new.
	d = key.Refund(1130, 100);
	EXPECT_EQ(d.remaining, 10);
	EXPECT_EQ(d.reset_after_us, 0);
	EXPECT_TRUE(rl_counter_idle(&key.limit, &*key.stored, 1130));
	EXPECT_FALSE(key.Refund(1131, 1).state_changed);
}

TEST(SlidingWindowCounterRefund, WindowsLeftBehindHaveNothingToGiveBack)
{
	CounterKey key = Key(RL_ALGORITHM_SLIDING_WINDOW_COUNTER, 10, 100);
	ASSERT_TRUE(key.Take(1050, 8).allowed);
	const RlCounterState stored = *key.stored;
	const RlDecision d = key.Refund(1200, 8);
	EXPECT_FALSE(d.state_changed);
	EXPECT_EQ(d.remaining, 10);
	EXPECT_TRUE(SameCounterState(*key.stored, stored));
}

// The clock never goes back: a refund before the last decision decides as
// at it (where the previous window weighs less than at its start).
TEST(SlidingWindowCounterRefund, ClockGoingBackCountsAsNoTimePassing)
{
	CounterKey key = Key(RL_ALGORITHM_SLIDING_WINDOW_COUNTER, 2, 100);
	ASSERT_TRUE(key.Take(-150, 2).allowed);
	ASSERT_TRUE(key.Take(-50, 1).allowed);	// window [-100, 0): 1, previous 2
	const RlDecision d = key.Refund(kPgMinTime, 1);
	EXPECT_EQ(d.decided_at_us, -50);
	EXPECT_EQ(key.stored->stamp_us, -100);
	EXPECT_EQ(key.stored->fraction, 50.0);
	EXPECT_EQ(key.stored->a, 0);
	EXPECT_EQ(key.stored->b, 2);
	EXPECT_EQ(d.remaining, 1);		// 2 - 2 * 50/100
}

// ---------------------------------------------------------------------------
// cron token bucket: tokens back up to capacity; full, the part token goes.
// Rate 10 per minute, 1 s ticks of 1/6 token (1e7 units).
// ---------------------------------------------------------------------------

RlZoneLimit Cron(int64_t rate, int64_t period_us, int64_t burst, int64_t tick_us)
{
	RlZoneLimit limit = MakeLimit(RL_ALGORITHM_CRON_TOKEN_BUCKET, rate, period_us, burst);
	limit.refill_tick_us = tick_us;
	return limit;
}

TEST(CronTokenBucketRefund, TokensBackPartTokenKept)
{
	const RlZoneLimit limit = Cron(10, kMinute, -1, kSecond);
	CounterKey key = KeyWith(limit, RlCounterState{3, 0.0, kT0, 30000000});
	RlDecision d = key.Refund(kT0 + 5 * kSecond, 2);
	EXPECT_TRUE(d.state_changed);
	EXPECT_EQ(d.remaining, 5);
	// 5 tokens less half: 270e6 units, 27 ticks.
	EXPECT_EQ(d.reset_after_us, 27 * kSecond);
	EXPECT_EQ(key.stored->a, 5);
	EXPECT_EQ(key.stored->b, 30000000);
	EXPECT_EQ(key.stored->stamp_us, kT0 + 5 * kSecond);
	EXPECT_TRUE(rl_counter_needs_refill(&limit, &*key.stored));

	// Up to the capacity: full, the part token dropped, no refill needed.
	d = key.Refund(kT0 + 6 * kSecond, 5);
	EXPECT_EQ(d.remaining, 10);
	EXPECT_EQ(d.reset_after_us, 0);
	EXPECT_EQ(key.stored->a, 10);
	EXPECT_EQ(key.stored->b, 0);
	EXPECT_FALSE(rl_counter_needs_refill(&limit, &*key.stored));
	EXPECT_TRUE(rl_counter_idle(&limit, &*key.stored, kT0 + 6 * kSecond));
	EXPECT_FALSE(key.Refund(kT0 + 7 * kSecond, 1).state_changed);
}

TEST(CronTokenBucketRefund, CapacityChangesAndHandEditedRows)
{
	// Above a capacity lowered since: full already.
	CounterKey key = KeyWith(Cron(10, kMinute, 5, kSecond), RlCounterState{9, 0.0, kT0, 500});
	EXPECT_FALSE(key.Refund(kT0, 1).state_changed);
	// Below a capacity raised since: room to give back.
	key = KeyWith(Cron(10, kMinute, 15, kSecond), RlCounterState{10, 0.0, kT0, 0});
	RlDecision d = key.Refund(kT0, 3);
	EXPECT_EQ(d.remaining, 13);
	EXPECT_EQ(key.stored->a, 13);
	// Negative tokens and part read as 0.
	key = KeyWith(Cron(10, kMinute, -1, kSecond), RlCounterState{-5, 0.0, kT0, -7});
	d = key.Refund(kT0, 1);
	EXPECT_EQ(d.remaining, 1);
	EXPECT_EQ(key.stored->a, 1);
	EXPECT_EQ(key.stored->b, 0);
	// A part of a whole token or more reads as one unit short of one.
	key = KeyWith(Cron(10, kMinute, -1, kSecond), RlCounterState{2, 0.0, kT0, 5 * kMinute});
	key.Refund(kT0, 1);
	EXPECT_EQ(key.stored->b, kMinute - 1);
}

TEST(CronTokenBucketRefund, ClockAndNoRefillJob)
{
	CounterKey key = KeyWith(Cron(10, kMinute, -1, 0), RlCounterState{3, 0.0, kT0, 0});
	RlDecision d = key.Refund(kT0 - 3600 * kSecond, 2);
	EXPECT_EQ(d.decided_at_us, kT0);
	EXPECT_EQ(key.stored->stamp_us, kT0);
	EXPECT_EQ(d.remaining, 5);
	EXPECT_EQ(d.reset_after_us, -1);	// nobody refills the other 5
	d = key.Refund(kT0 + 1, 5);
	EXPECT_EQ(d.remaining, 10);
	EXPECT_EQ(d.reset_after_us, 0);
	EXPECT_EQ(key.stored->stamp_us, kT0 + 1);
}

// ---------------------------------------------------------------------------
// Properties over random sequences, every algorithm.
// ---------------------------------------------------------------------------

RlZoneLimit RandomLimit(std::mt19937_64 &rng, RlAlgorithm algorithm)
{
	const int64_t rate = Chance(rng, 0.8) ? Uniform(rng, 1, 20) : Uniform(rng, 1, RL_MAX_LIMIT);
	const int64_t period = Chance(rng, 0.5) ? Uniform(rng, 1, 1000) : Uniform(rng, 1, 100) * kSecond;
	const bool bursty = algorithm == RL_ALGORITHM_TOKEN_BUCKET || algorithm == RL_ALGORITHM_GCRA ||
		algorithm == RL_ALGORITHM_CRON_TOKEN_BUCKET;
	int64_t burst = bursty && Chance(rng, 0.5) ? Uniform(rng, 1, 2 * std::min<int64_t>(rate, 20)) : -1;
	RlZoneLimit limit = MakeLimit(algorithm, rate, period, burst);
	if (algorithm == RL_ALGORITHM_CRON_TOKEN_BUCKET && Chance(rng, 0.7))
		limit.refill_tick_us = Uniform(rng, 1, 2 * period);
	return limit;
}

int64_t RandomCost(std::mt19937_64 &rng, const RlZoneLimit &limit)
{
	return Chance(rng, 0.7) ? Uniform(rng, 1, std::min<int64_t>(3, limit.capacity))
						   : Uniform(rng, 1, limit.capacity);
}

// A refund of what a take charged, at the same instant, undoes it: every
// later call decides as if the take had never been (the token bucket at
// that instant only: its refill from another stamp may differ in ulps).
TEST(CounterRefundModel, RefundRightAfterTheTakeUndoesIt)
{
	std::mt19937_64 rng(0x7e1f0dULL);
	int64_t undone = 0;
	for (RlAlgorithm algorithm : kCounterAlgorithms)
	{
		for (int sequence = 0; sequence < 300; sequence++)
		{
			const RlZoneLimit limit = RandomLimit(rng, algorithm);
			CounterKey key{limit, std::nullopt};
			const int64_t gap = std::max<int64_t>(1, limit.period_us / limit.rate);
			int64_t now = Chance(rng, 0.5) ? kT0 : kPgMinTime + Uniform(rng, 0, kSecond);
			for (int step = 0; step < 30; step++)
			{
				now += Chance(rng, 0.3) ? 0 : Uniform(rng, 0, 2 * gap);
				const int64_t cost = RandomCost(rng, limit);
				CounterKey twin = key;
				if (!twin.Take(now, cost).allowed)
				{
					key.Take(now, cost);
					continue;
				}
				twin.Refund(now, cost);
				undone++;
				std::ostringstream where;
				where << AlgorithmName(algorithm) << " rate " << limit.rate << " period " << limit.period_us
					  << " capacity " << limit.capacity << " tick " << limit.refill_tick_us << " now " << now
					  << " cost " << cost;
				const bool later_too = algorithm != RL_ALGORITHM_TOKEN_BUCKET;
				int64_t t = now;
				for (int probe = 0; probe < 6; probe++)
				{
					const int64_t probe_cost = Uniform(rng, 0, limit.capacity);
					const RlDecision original = key.Peek(t, probe_cost);
					const RlDecision undone_take = twin.Peek(t, probe_cost);
					// The token bucket's waits are searched from the stored
					// stamp: the same level from another stamp may land a
					// microsecond apart.
					const bool same = later_too ? SameDecision(original, undone_take)
						: original.allowed == undone_take.allowed && original.remaining == undone_take.remaining;
					ASSERT_TRUE(same)
						<< where.str() << " probe at " << t << " cost " << probe_cost << "\n  never taken "
						<< Describe(original) << "\n  taken, refunded " << Describe(undone_take);
					if (later_too)
						t += Uniform(rng, 0, 2 * gap);
				}
				// Go on with the take kept, or with it undone.
				if (Chance(rng, 0.5))
					key = twin;
				else
					key.Take(now, cost);
			}
		}
	}
	EXPECT_GT(undone, 3000);
}

// What comes back is at most the cost, and all of it below the capacity
// (where the sliding-window counter's previous window weighs less than one
// each, it is at most); a refund never refuses what was admitted before it;
// a refund of everything leaves the key as good as new.
TEST(CounterRefundModel, NeverMoreThanTheCostNorTheCapacity)
{
	std::mt19937_64 rng(0xb0a7ded0ULL);
	int64_t refunds = 0;
	int64_t capped = 0;
	for (RlAlgorithm algorithm : kCounterAlgorithms)
	{
		for (int sequence = 0; sequence < 300; sequence++)
		{
			const RlZoneLimit limit = RandomLimit(rng, algorithm);
			CounterKey key{limit, std::nullopt};
			const int64_t gap = std::max<int64_t>(1, limit.period_us / limit.rate);
			int64_t now = kT0;
			for (int step = 0; step < 40; step++)
			{
				now += Chance(rng, 0.15) ? -Uniform(rng, 0, gap) : Uniform(rng, 0, gap);
				if (Chance(rng, 0.6))
				{
					key.Take(now, RandomCost(rng, limit));
					continue;
				}
				std::ostringstream where;
				where << AlgorithmName(algorithm) << " rate " << limit.rate << " period " << limit.period_us
					  << " capacity " << limit.capacity << " tick " << limit.refill_tick_us << " now " << now;
				const int64_t cost = Chance(rng, 0.1) ? Uniform(rng, limit.capacity, 3 * limit.capacity)
														: RandomCost(rng, limit);
				const RlDecision before = key.Peek(now, 0);
				// Owed as of the time the refund decides at (a key's clock never goes back).
				const bool owed = key.stored && !rl_counter_idle(&limit, &*key.stored, std::max(now, before.decided_at_us));
				const int64_t probe_cost = Uniform(rng, 0, limit.capacity);
				const bool probe_before = key.Peek(now, probe_cost).allowed;
				const RlDecision d = key.Refund(now, cost);
				refunds++;
				EXPECT_EQ(d.decided_at_us, before.decided_at_us) << where.str();
				EXPECT_GE(d.remaining, before.remaining) << where.str();
				const int64_t most = std::min<int64_t>(limit.capacity, before.remaining + cost);
				if (algorithm == RL_ALGORITHM_SLIDING_WINDOW_COUNTER)
				{
					EXPECT_LE(d.remaining, most) << where.str() << " " << Describe(d);
				}
				else
				{
					EXPECT_EQ(d.remaining, most) << where.str() << " " << Describe(d);
				}
				capped += d.remaining == limit.capacity && before.remaining + cost > limit.capacity;
				if (probe_before)
				{
					EXPECT_TRUE(key.Peek(now, probe_cost).allowed) << where.str() << " probe " << probe_cost;
				}
				// Something given back exactly when something was owed.
				EXPECT_EQ(d.state_changed, owed) << where.str() << " " << Describe(d);
				if (Chance(rng, 0.2))
				{
					// Everything: a key as good as new (a store may forget it).
					const RlDecision all = key.Refund(now, Chance(rng, 0.5) ? INT64_MAX : 2 * limit.capacity);
					EXPECT_EQ(all.remaining, limit.capacity) << where.str();
					EXPECT_EQ(all.reset_after_us, 0) << where.str();
					if (key.stored)
					{
						EXPECT_TRUE(rl_counter_idle(&limit, &*key.stored, all.decided_at_us)) << where.str();
					}
				}
				if (HasFailure())
					return;
			}
		}
	}
	EXPECT_GT(refunds, 20000);
	EXPECT_GT(capped, 500);
}

}  // namespace
