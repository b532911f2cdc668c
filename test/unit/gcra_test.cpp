// GCRA zones and rl_gcra_limit against redis-cell's CL.THROTTLE :
// its documented numbers, its behaviours, and its algorithm as an exact
// reference model over random request sequences.
#include "zone_harness.h"

namespace {

using namespace zone_test;

RlZoneLimit CellLimit(int64_t max_burst, int64_t count, double period_s, int64_t quantity = 1)
{
	RlZoneLimit limit{};
	EXPECT_EQ(rl_gcra_limit(max_burst, count, period_s, quantity, &limit), RL_GCRA_OK);
	return limit;
}

CounterKey CellKey(int64_t max_burst, int64_t count, double period_s)
{
	return CounterKey{CellLimit(max_burst, count, period_s), std::nullopt};
}

void ExpectDecision(const RlDecision &d, bool allowed, int64_t capacity, int64_t remaining,
					int64_t retry_after_us, int64_t reset_after_us, const std::string &where)
{
	EXPECT_EQ(d.allowed, allowed) << where;
	EXPECT_EQ(d.capacity, capacity) << where;
	EXPECT_EQ(d.remaining, remaining) << where;
	EXPECT_EQ(d.retry_after_us, retry_after_us) << where;
	EXPECT_EQ(d.reset_after_us, reset_after_us) << where;
}

// redis-cell's README: CL.THROTTLE user123 15 30 60 1.
TEST(Gcra, RedisCellDocumentedNumbers)
{
	CounterKey key = CellKey(15, 30, 60.0);
	ExpectDecision(key.Take(kT0, 1), true, 16, 15, 0, 2 * kSecond, "first call");
	// The emission interval is 2 s: each call at the same instant pushes the
	// theoretical arrival time (and so reset_after) 2 s further.
	for (int64_t i = 1; i < 16; i++)
		ExpectDecision(key.Take(kT0, 1), true, 16, 15 - i, 0, (i + 1) * 2 * kSecond,
					   "call " + std::to_string(i + 1));
	ExpectDecision(key.Take(kT0, 1), false, 16, 0, 2 * kSecond, 32 * kSecond, "17th call");
	// Refused again one microsecond short of the retry time, then admitted.
	ExpectDecision(key.Take(kT0 + 2 * kSecond - 1, 1), false, 16, 0, 1, 32 * kSecond - 2 * kSecond + 1,
				   "1 us early");
	ExpectDecision(key.Take(kT0 + 2 * kSecond, 1), true, 16, 0, 0, 32 * kSecond, "after 2 s");
	EXPECT_FALSE(key.Take(kT0 + 2 * kSecond, 1).allowed);
}

TEST(Gcra, QuantityZeroIsAllowedAndChangesNothing)
{
	CounterKey key = CellKey(15, 30, 60.0);
	// A key never seen: full, nothing to reset.
	ExpectDecision(key.Take(kT0, 0), true, 16, 16, 0, 0, "new key");
	EXPECT_FALSE(key.stored.has_value());

	ASSERT_TRUE(key.Take(kT0, 3).allowed);
	const RlCounterState after_three = *key.stored;
	ExpectDecision(key.Take(kT0 + kSecond, 0), true, 16, 13, 0, 5 * kSecond, "peek after 3");
	EXPECT_TRUE(SameCounterState(*key.stored, after_three));

	// Even a limited key: quantity 0 passes and reports the state.
	while (key.Take(kT0 + kSecond, 1).allowed)
	{
	}
	const RlCounterState limited = *key.stored;
	const RlDecision peek = key.Take(kT0 + kSecond, 0);
	EXPECT_TRUE(peek.allowed);
	EXPECT_EQ(peek.remaining, 0);
	EXPECT_FALSE(peek.state_changed);
	EXPECT_TRUE(SameCounterState(*key.stored, limited));
}

TEST(Gcra, MaxBurstZeroAdmitsOnePerEmissionInterval)
{
	CounterKey key = CellKey(0, 1, 1.0);
	ExpectDecision(key.Take(kT0, 1), true, 1, 0, 0, kSecond, "first");
	ExpectDecision(key.Take(kT0, 1), false, 1, 0, kSecond, kSecond, "same instant");
	ExpectDecision(key.Take(kT0 + kSecond / 4, 1), false, 1, 0, 3 * kSecond / 4, 3 * kSecond / 4,
				   "a quarter later");
	ExpectDecision(key.Take(kT0 + kSecond, 1), true, 1, 0, 0, kSecond, "one interval later");
	// Idle for long: still only one at a time, no accumulated allowance.
	ExpectDecision(key.Take(kT0 + 100 * kSecond, 1), true, 1, 0, 0, kSecond, "after idling");
	EXPECT_FALSE(key.Take(kT0 + 100 * kSecond, 1).allowed);
}

TEST(Gcra, QuantityOfTheWholeLimitOnlyWhenFull)
{
	CounterKey key = CellKey(15, 30, 60.0);
	ExpectDecision(key.Take(kT0, 16), true, 16, 0, 0, 32 * kSecond, "full key");
	// One interval later there is room for one, not sixteen: wait for all 32 s.
	ExpectDecision(key.Take(kT0 + 2 * kSecond, 16), false, 16, 1, 30 * kSecond, 30 * kSecond,
				   "not yet full");
	EXPECT_FALSE(key.Take(kT0 + 32 * kSecond - 1, 16).allowed);
	ExpectDecision(key.Take(kT0 + 32 * kSecond, 16), true, 16, 0, 0, 32 * kSecond, "full again");
	// Part of it: 5 of 16 after 10 s of 32.
	ExpectDecision(key.Take(kT0 + 42 * kSecond, 5), true, 16, 0, 0, 32 * kSecond, "five after 10 s");
	ExpectDecision(key.Take(kT0 + 42 * kSecond, 1), false, 16, 0, 2 * kSecond, 32 * kSecond, "then one");
}

// A period that is not a multiple of count: the emission interval 1/3 s is
// not a whole number of microseconds, yet nothing drifts over thousands of
// intervals.  With a burst of 2 a call at the rounded-up due time does not
// move the theoretical arrival time, so the k-th is due at ceil(k / 3 s).
TEST(Gcra, FractionalEmissionIntervalDoesNotDrift)
{
	CounterKey key = CellKey(1, 3, 1.0);
	ASSERT_TRUE(key.Take(kT0, 2).allowed);
	for (int64_t k = 1; k <= 3000; k++)
	{
		const int64_t due = static_cast<int64_t>(CeilDiv(k * kSecond, 3));
		ASSERT_FALSE(key.Take(kT0 + due - 1, 1).allowed) << k;
		const RlDecision d = key.Take(kT0 + due, 1);
		ASSERT_TRUE(d.allowed) << k;
		ASSERT_EQ(d.remaining, 0) << k;
		ASSERT_EQ(d.reset_after_us, static_cast<int64_t>(CeilDiv((k + 2) * kSecond, 3)) - due) << k;
	}
}

// PostgreSQL's times before 2000 are negative.  The theoretical arrival time
// is stored as whole microseconds plus ticks of 1/rate: the split must floor,
// or each admission rounds it up to the next microsecond and a burst of
// calls at one instant runs out early.
TEST(Gcra, BurstBeforeTheEpoch)
{
	for (int64_t start : {int64_t{-1000}, kPgMinTime + 7, int64_t{0}, kT0})
	{
		// 10 per 15 us: 1.5 us apart, a burst of 4 at one instant.
		CounterKey key{MakeLimit(RL_ALGORITHM_GCRA, 10, 15, 4), std::nullopt};
		for (int64_t i = 1; i <= 4; i++)
		{
			const RlDecision d = key.Take(start, 1);
			EXPECT_TRUE(d.allowed) << start << " call " << i;
			EXPECT_EQ(d.remaining, 4 - i) << start << " call " << i;
			EXPECT_EQ(d.reset_after_us, (3 * i + 1) / 2) << start << " call " << i;	// ceil(1.5 i)
		}
		const RlDecision d = key.Take(start, 1);
		EXPECT_FALSE(d.allowed) << start;
		EXPECT_EQ(d.retry_after_us, 2) << start;	// ceil(1.5)
		EXPECT_FALSE(key.Take(start + 1, 1).allowed) << start;
		EXPECT_TRUE(key.Take(start + 2, 1).allowed) << start;
	}
}

// ---------------------------------------------------------------------------
// The reference model: redis-cell's algorithm on an exact rational clock.
// One tick is 1/count microsecond, so the emission interval period/count is
// period_us ticks exactly.  The theoretical arrival time is kept whole, in
// 128 bits, never split as the implementation stores it.
// ---------------------------------------------------------------------------

struct CellModel
{
	RlZoneLimit limit;
	std::optional<Wide> tat;		// ticks
	std::optional<int64_t> last;	// last decision that stored a state

	RlDecision Take(int64_t now_us, int64_t quantity, bool apply = true)
	{
		if (last)
			now_us = std::max(now_us, *last);	// the clock never goes back
		const Wide count = limit.rate;
		const Wide interval = limit.period_us;
		const Wide tolerance = interval * limit.capacity;
		const Wide now = static_cast<Wide>(now_us) * count;
		const Wide old_tat = tat ? *tat : now;
		const Wide new_tat = std::max(old_tat, now) + interval * quantity;
		const Wide allow_at = new_tat - tolerance;
		const bool limited = now < allow_at;
		const Wide ttl = limited ? old_tat - now : new_tat - now;

		RlDecision d{};
		d.allowed = !limited;
		d.capacity = limit.capacity;
		d.retry_after_us = limited ? static_cast<int64_t>(CeilDiv(allow_at - now, count)) : 0;
		const Wide next = tolerance - ttl;
		d.remaining = next > 0 ? static_cast<int64_t>(next / interval) : 0;
		d.reset_after_us = ttl > 0 ? static_cast<int64_t>(CeilDiv(ttl, count)) : 0;
		d.decided_at_us = now_us;
		d.state_changed = !limited && quantity > 0;
		if (d.state_changed && apply)
		{
			tat = new_tat;
			last = now_us;
		}
		return d;
	}
};

struct RandomCell
{
	int64_t count;
	int64_t period_us;
	int64_t max_burst;
};

RandomCell RandomParams(std::mt19937_64 &rng)
{
	RandomCell p{};
	switch (Uniform(rng, 0, 4))
	{
		case 0:			// small and slow
			p.count = Uniform(rng, 1, 10);
			p.period_us = Uniform(rng, 1, 10) * kSecond;
			break;
		case 1:			// periods that do not divide by count
			p.count = Uniform(rng, 1, 1000);
			p.period_us = Uniform(rng, 1, 100000);
			break;
		case 2:			// fast
			p.count = Uniform(rng, 1000, 1000000);
			p.period_us = Uniform(rng, 1, 10) * kSecond;
			break;
		case 3:			// huge
			p.count = Uniform(rng, 1, RL_MAX_LIMIT);
			p.period_us = Uniform(rng, 1, RL_MAX_PERIOD_US);
			break;
		default:		// tiny periods
			p.count = Uniform(rng, 1, 50);
			p.period_us = Uniform(rng, 1, 20);
			break;
	}
	p.max_burst = Chance(rng, 0.2) ? 0 : Uniform(rng, 0, 40);
	// Keep the burst's refill within the longest period.
	while (static_cast<Wide>(p.max_burst + 1) * p.period_us > static_cast<Wide>(p.count) * RL_MAX_PERIOD_US)
		p.max_burst /= 2;
	return p;
}

TEST(GcraModel, RandomSequencesMatchRedisCellExactly)
{
	std::mt19937_64 rng(0x9c7a5eedULL);
	int64_t allowed = 0;
	int64_t refused = 0;
	int64_t calls = 0;
	for (int sequence = 0; sequence < 3000; sequence++)
	{
		const RandomCell p = RandomParams(rng);
		RlZoneLimit limit{};
		ASSERT_EQ(rl_zone_limit(RL_ALGORITHM_GCRA, p.count, p.period_us, p.max_burst + 1, &limit),
				  RL_ZONE_OK);
		CounterKey key{limit, std::nullopt};
		CellModel model{limit, std::nullopt, std::nullopt};
		// Interval in whole microseconds, at least 1, to pace the steps.
		const int64_t interval = std::max<int64_t>(1, p.period_us / p.count);
		const int64_t start_choice = Uniform(rng, 0, 3);
		int64_t now = start_choice == 0 ? kT0
			: start_choice == 1 ? -Uniform(rng, 0, 1000) * kSecond	// before 2000
			: start_choice == 2 ? kPgMinTime + Uniform(rng, 0, kSecond)
			: Uniform(rng, -kSecond, kSecond);
		const int steps = static_cast<int>(Uniform(rng, 5, 60));
		for (int step = 0; step < steps; step++)
		{
			const int64_t kind = Uniform(rng, 0, 9);
			if (kind <= 2)
				;			// the same instant
			else if (kind <= 6)
				now += Uniform(rng, 0, std::min<int64_t>(2 * interval, INT64_C(1) << 40));
			else if (kind == 7)
				now += Uniform(rng, 0, std::min<int64_t>(interval * (p.max_burst + 2), INT64_C(1) << 50));
			else if (kind == 8)
				now -= Uniform(rng, 0, std::min<int64_t>(2 * interval, INT64_C(1) << 40));	// backwards
			else
				now += Uniform(rng, 0, 3);
			const int64_t cost = Chance(rng, 0.1) ? 0
				: Chance(rng, 0.7) ? 1 : Uniform(rng, 0, p.max_burst + 1);
			std::ostringstream where;
			where << "sequence " << sequence << " step " << step << " count " << p.count << " period "
				  << p.period_us << " max_burst " << p.max_burst << " now " << now << " cost " << cost;
			const RlDecision expected = model.Take(now, cost);
			const RlDecision actual = key.Take(now, cost);
			ASSERT_TRUE(SameDecision(actual, expected))
				<< where.str() << "\n  expected " << Describe(expected) << "\n  actual   " << Describe(actual);
			calls++;
			(actual.allowed ? allowed : refused)++;
		}
	}
	// Both outcomes are exercised often.
	EXPECT_GT(allowed, calls / 4);
	EXPECT_GT(refused, calls / 10);
}

// A refused call passes exactly retry_after later and not a microsecond
// before; after reset_after the key is back to its full limit, not before.
TEST(GcraModel, RetryAfterAndResetAfterAreExact)
{
	std::mt19937_64 rng(0x7e7a11ULL);
	int64_t refusals = 0;
	for (int sequence = 0; sequence < 1500; sequence++)
	{
		const RandomCell p = RandomParams(rng);
		const RlZoneLimit limit = MakeLimit(RL_ALGORITHM_GCRA, p.count, p.period_us, p.max_burst + 1);
		CounterKey key{limit, std::nullopt};
		const int64_t interval = std::max<int64_t>(1, p.period_us / p.count);
		int64_t now = kT0;
		for (int step = 0; step < 30; step++)
		{
			now += Chance(rng, 0.5) ? 0 : Uniform(rng, 0, std::min<int64_t>(interval, INT64_C(1) << 40));
			const int64_t cost = Chance(rng, 0.7) ? 1 : Uniform(rng, 1, p.max_burst + 1);
			const RlDecision d = key.Take(now, cost);
			if (!d.allowed)
			{
				refusals++;
				ASSERT_FALSE(key.Peek(now + d.retry_after_us - 1, cost).allowed) << sequence;
				ASSERT_TRUE(key.Peek(now + d.retry_after_us, cost).allowed) << sequence;
			}
			if (d.reset_after_us > 0)
			{
				ASSERT_LT(key.Peek(now + d.reset_after_us - 1, 0).remaining, limit.capacity) << sequence;
			}
			ASSERT_EQ(key.Peek(now + d.reset_after_us, 0).remaining, limit.capacity) << sequence;
		}
	}
	EXPECT_GT(refusals, 1000);
}

}  // namespace
