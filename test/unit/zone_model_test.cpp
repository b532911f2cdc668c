// Properties every zone algorithm shares (rl_core.h): a clock going back
// counts as no time passing, refusals and cost 0 store nothing, and the
// extremes of every parameter and of PostgreSQL's time range neither
// overflow (see the sanitizer build in the README of test/unit) nor decide
// wrongly.
#include "zone_harness.h"

namespace {

using namespace zone_test;

constexpr RlAlgorithm kAll[] = {RL_ALGORITHM_TOKEN_BUCKET, RL_ALGORITHM_GCRA,
								RL_ALGORITHM_SLIDING_WINDOW, RL_ALGORITHM_SLIDING_WINDOW_COUNTER,
								RL_ALGORITHM_FIXED_WINDOW};

RlZoneLimit RandomLimit(std::mt19937_64 &rng, RlAlgorithm algorithm)
{
	const int64_t rate = Uniform(rng, 1, Chance(rng, 0.7) ? 10 : 300);
	const int64_t period = Chance(rng, 0.5) ? Uniform(rng, 1, 1000) : Uniform(rng, 1, 100) * kSecond;
	const bool bursty = algorithm == RL_ALGORITHM_TOKEN_BUCKET || algorithm == RL_ALGORITHM_GCRA;
	const int64_t burst = bursty && Chance(rng, 0.5) ? Uniform(rng, 1, 2 * rate) : -1;
	return MakeLimit(algorithm, rate, period, burst);
}

// Everything stored for a key, to compare before and after a call.
struct Stored
{
	std::optional<RlCounterState> counter;
	std::vector<uint8_t> header;
	int64_t admitted;
	int64_t stamp;
	std::map<uint32_t, std::vector<uint8_t>> chunks;

	explicit Stored(const ZoneKey &key)
		: counter(key.counter.stored), header(key.sw.header), admitted(key.sw.admitted),
		  stamp(key.sw.stamp_us), chunks(key.sw.chunks)
	{
	}

	bool operator==(const Stored &other) const
	{
		return counter.has_value() == other.counter.has_value() &&
			(!counter || SameCounterState(*counter, *other.counter)) && header == other.header &&
			admitted == other.admitted && stamp == other.stamp && chunks == other.chunks;
	}
};

// A call at an earlier time than the last one that stored a state decides
// exactly as at that time: same decision, and (when admitted) the same state.
TEST(ZoneModel, ClockGoingBackCountsAsNoTimePassing)
{
	std::mt19937_64 rng(0xbacc10c4ULL);
	int64_t probes = 0;
	for (RlAlgorithm algorithm : kAll)
	{
		for (int sequence = 0; sequence < 300; sequence++)
		{
			const RlZoneLimit limit = RandomLimit(rng, algorithm);
			ZoneKey key(limit);
			const int64_t gap = std::max<int64_t>(1, limit.period_us / limit.rate);
			int64_t now = Chance(rng, 0.5) ? kT0 : -Uniform(rng, 1, 1000) * kSecond;
			std::optional<int64_t> last;	// the time of the last stored decision
			for (int step = 0; step < 40; step++)
			{
				now += Chance(rng, 0.3) ? 0 : Uniform(rng, 0, 2 * gap);
				const int64_t cost = Chance(rng, 0.1) ? 0 : Uniform(rng, 1, std::min<int64_t>(3, limit.capacity));
				if (last && Chance(rng, 0.5))
				{
					const int64_t back = *last - Uniform(rng, 1, Chance(rng, 0.5) ? 3 * gap : limit.period_us * 3);
					ZoneKey twin = key;
					const RlDecision at_last = twin.Take(*last, cost);
					const Stored after_last(twin);
					const RlDecision earlier = key.Take(back, cost);
					std::ostringstream where;
					where << AlgorithmName(algorithm) << " rate " << limit.rate << " period " << limit.period_us
						  << " capacity " << limit.capacity << " last " << *last << " back " << back << " cost "
						  << cost << "\n  at last " << Describe(at_last) << "\n  earlier " << Describe(earlier);
					ASSERT_TRUE(SameDecision(earlier, at_last)) << where.str();
					ASSERT_TRUE(Stored(key) == after_last) << where.str();
					probes++;
					continue;
				}
				if (key.Take(now, cost).state_changed)
					last = std::max(now, last.value_or(now));
			}
		}
	}
	EXPECT_GT(probes, 10000);
}

// The time decided at: now, or the last stored decision's time if later.
TEST(ZoneModel, DecidedAt)
{
	for (RlAlgorithm algorithm : kAll)
	{
		ZoneKey key(MakeLimit(algorithm, 2, kSecond));
		EXPECT_EQ(key.Take(kPgMinTime, 0).decided_at_us, kPgMinTime) << AlgorithmName(algorithm);
		EXPECT_EQ(key.Take(kT0 + 100, 1).decided_at_us, kT0 + 100) << AlgorithmName(algorithm);
		EXPECT_EQ(key.Take(kT0 + 50, 0).decided_at_us, kT0 + 100) << AlgorithmName(algorithm);
		EXPECT_EQ(key.Take(kT0 + 60, 1).decided_at_us, kT0 + 100) << AlgorithmName(algorithm);
		// Refusals store nothing: the next call is not held to their time.
		EXPECT_FALSE(key.Take(kT0 + 200, 1).allowed) << AlgorithmName(algorithm);
		EXPECT_EQ(key.Take(kT0 + 150, 0).decided_at_us, kT0 + 150) << AlgorithmName(algorithm);
		EXPECT_EQ(key.Take(kT0 + 3 * kSecond, 0).decided_at_us, kT0 + 3 * kSecond) << AlgorithmName(algorithm);
	}
}

// Refused calls and calls of cost 0 leave everything stored as it was, and
// a refusal keeps refusing at the same instant however often it is retried.
TEST(ZoneModel, RefusalsAndCostZeroStoreNothing)
{
	std::mt19937_64 rng(0x0ff5e7ULL);
	int64_t refusals = 0;
	for (RlAlgorithm algorithm : kAll)
	{
		for (int sequence = 0; sequence < 200; sequence++)
		{
			const RlZoneLimit limit = RandomLimit(rng, algorithm);
			ZoneKey key(limit);
			const int64_t gap = std::max<int64_t>(1, limit.period_us / limit.rate);
			int64_t now = kT0;
			for (int step = 0; step < 40; step++)
			{
				now += Chance(rng, 0.5) ? 0 : Uniform(rng, 0, gap);
				const int64_t cost = Uniform(rng, 1, limit.capacity);
				const Stored before(key);
				const RlDecision peek = key.Take(now, 0);
				ASSERT_TRUE(peek.allowed) << AlgorithmName(algorithm);
				ASSERT_FALSE(peek.state_changed);
				ASSERT_TRUE(Stored(key) == before) << AlgorithmName(algorithm);
				const RlDecision d = key.Take(now, cost);
				if (d.allowed)
				{
					ASSERT_TRUE(d.state_changed);
					continue;
				}
				refusals++;
				ASSERT_TRUE(Stored(key) == before) << AlgorithmName(algorithm);
				for (int again = 0; again < 3; again++)
				{
					const RlDecision retry = key.Take(now, cost);
					ASSERT_TRUE(SameDecision(retry, d)) << AlgorithmName(algorithm);
					ASSERT_TRUE(Stored(key) == before) << AlgorithmName(algorithm);
				}
			}
		}
	}
	EXPECT_GT(refusals, 5000);
}

// ---------------------------------------------------------------------------
// Extremes.
// ---------------------------------------------------------------------------

struct Extreme
{
	RlAlgorithm algorithm;
	int64_t rate;
	int64_t period_us;
	int64_t burst;
};

// The largest parameters each algorithm accepts, and the fastest.
std::vector<Extreme> Extremes()
{
	std::vector<Extreme> extremes;
	for (RlAlgorithm algorithm : kAll)
	{
		const int64_t rate = algorithm == RL_ALGORITHM_SLIDING_WINDOW ? RL_SLIDING_WINDOW_MAX_LIMIT : RL_MAX_LIMIT;
		extremes.push_back({algorithm, rate, RL_MAX_PERIOD_US, -1});
		extremes.push_back({algorithm, 1, RL_MAX_PERIOD_US, -1});
		extremes.push_back({algorithm, rate, 1, -1});
		extremes.push_back({algorithm, 1, 1, -1});
		extremes.push_back({algorithm, 3, RL_MAX_PERIOD_US - 1, -1});
		if (algorithm == RL_ALGORITHM_TOKEN_BUCKET || algorithm == RL_ALGORITHM_GCRA)
		{
			extremes.push_back({algorithm, 1, 1, RL_MAX_LIMIT});	// 2^53 us to refill
			extremes.push_back({algorithm, RL_MAX_LIMIT, RL_MAX_PERIOD_US, 1});
			extremes.push_back({algorithm, 7, RL_MAX_PERIOD_US / 7, 7});
		}
	}
	return extremes;
}

// The whole capacity at once, then nothing until the wait reported; the
// wait and the reset lie within the longest refill (2^53 us, or two periods
// for the counter).  At both ends of PostgreSQL's time range.
TEST(ZoneModel, ExtremeParametersAndTimes)
{
	for (const Extreme &e : Extremes())
	{
		const RlZoneLimit limit = MakeLimit(e.algorithm, e.rate, e.period_us, e.burst);
		// The longest any wait can be.
		const int64_t longest = e.algorithm == RL_ALGORITHM_SLIDING_WINDOW_COUNTER ? 2 * e.period_us
			: static_cast<int64_t>(CeilDiv(static_cast<Wide>(limit.capacity) * e.period_us, e.rate));
		for (int64_t start : {kPgMinTime, kPgMinTime + 1, int64_t{-1}, int64_t{0}, kT0,
							  kPgMaxTime - 2 * RL_MAX_PERIOD_US, kPgMaxTime})
		{
			// A GCRA's theoretical arrival time is stored in int64
			// microseconds: it cannot lie beyond INT64_MAX (year 294,277).
			if (e.algorithm == RL_ALGORITHM_GCRA && static_cast<Wide>(start) + longest > INT64_MAX)
				continue;
			std::ostringstream where;
			where << AlgorithmName(e.algorithm) << " rate " << e.rate << " period " << e.period_us << " burst "
				  << e.burst << " at " << start;
			ZoneKey key(limit);
			RlDecision d = key.Take(start, limit.capacity);
			ASSERT_TRUE(d.allowed) << where.str();
			EXPECT_EQ(d.remaining, 0) << where.str();
			EXPECT_GT(d.reset_after_us, 0) << where.str();
			EXPECT_LE(d.reset_after_us, longest) << where.str();
			d = key.Take(start, 1);
			ASSERT_FALSE(d.allowed) << where.str() << " " << Describe(d);
			EXPECT_GE(d.retry_after_us, 1) << where.str();
			EXPECT_LE(d.retry_after_us, longest) << where.str();
			const int64_t retry = d.retry_after_us;
			if (static_cast<Wide>(start) + retry > INT64_MAX)
				continue;
			EXPECT_FALSE(key.Peek(start + retry - 1, 1).allowed) << where.str();
			d = key.Take(start + retry, 1);
			EXPECT_TRUE(d.allowed) << where.str() << " " << Describe(d);
			// Long after, everything is back, whatever the clock.
			if (static_cast<Wide>(start) + 3 * static_cast<Wide>(longest) <= INT64_MAX)
			{
				d = key.Take(start + 3 * longest, limit.capacity);
				EXPECT_TRUE(d.allowed) << where.str() << " " << Describe(d);
			}
			// A call from far in the past decides as at the latest.
			d = key.Take(kPgMinTime, 0);
			EXPECT_TRUE(d.allowed) << where.str();
		}
	}
}

// Near the top of int64, a GCRA's theoretical arrival time beyond INT64_MAX
// is saturated, not overflowed: the first call is still decided exactly.
TEST(ZoneModel, GcraBeyondInt64DoesNotOverflow)
{
	const RlZoneLimit limit = MakeLimit(RL_ALGORITHM_GCRA, RL_MAX_LIMIT, RL_MAX_PERIOD_US);
	CounterKey key{limit, std::nullopt};
	const RlDecision d = key.Take(kPgMaxTime, RL_MAX_LIMIT);
	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.remaining, 0);
	EXPECT_EQ(d.reset_after_us, RL_MAX_PERIOD_US);
	ASSERT_TRUE(key.stored.has_value());
	EXPECT_EQ(key.stored->stamp_us, INT64_MAX);
	EXPECT_GE(key.stored->a, 0);
	EXPECT_LT(key.stored->a, RL_MAX_LIMIT);
	// Whatever it decides next, nothing overflows (the sanitizer build).
	for (int64_t at : {kPgMaxTime, INT64_MAX, kPgMinTime})
		key.Take(at, 1);
}

// Huge costs against huge rates: sums stay exact (no double rounding).
TEST(ZoneModel, HugeCostsAreExact)
{
	for (RlAlgorithm algorithm : {RL_ALGORITHM_TOKEN_BUCKET, RL_ALGORITHM_GCRA,
								  RL_ALGORITHM_SLIDING_WINDOW_COUNTER, RL_ALGORITHM_FIXED_WINDOW})
	{
		const RlZoneLimit limit = MakeLimit(algorithm, RL_MAX_LIMIT, RL_MAX_PERIOD_US);
		ZoneKey key(limit);
		RlDecision d = key.Take(kT0, RL_MAX_LIMIT - 1);
		ASSERT_TRUE(d.allowed) << AlgorithmName(algorithm);
		EXPECT_EQ(d.remaining, 1) << AlgorithmName(algorithm);
		d = key.Take(kT0, 2);
		EXPECT_FALSE(d.allowed) << AlgorithmName(algorithm);
		EXPECT_EQ(d.remaining, 1) << AlgorithmName(algorithm);
		d = key.Take(kT0, 1);
		EXPECT_TRUE(d.allowed) << AlgorithmName(algorithm);
		EXPECT_EQ(d.remaining, 0) << AlgorithmName(algorithm);
		EXPECT_FALSE(key.Take(kT0, 1).allowed) << AlgorithmName(algorithm);
	}
	SwKey sw;
	sw.limit = MakeLimit(RL_ALGORITHM_SLIDING_WINDOW, RL_SLIDING_WINDOW_MAX_LIMIT, RL_MAX_PERIOD_US);
	EXPECT_TRUE(sw.Take(kT0, RL_SLIDING_WINDOW_MAX_LIMIT - 1).allowed);
	EXPECT_FALSE(sw.Take(kT0 + 1, 2).allowed);
	EXPECT_TRUE(sw.Take(kT0 + 2, 1).allowed);
	const RlDecision d = sw.Take(kT0 + 3, 1);
	EXPECT_FALSE(d.allowed);
	EXPECT_EQ(d.retry_after_us, RL_MAX_PERIOD_US - 3);
}

}  // namespace
