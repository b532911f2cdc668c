// Unit tests of the zone parameter checks: rl_zone_limit, rl_zone_cost_valid
// and rl_gcra_limit.
#include "zone_harness.h"

#include <cmath>
#include <limits>

namespace {

using namespace zone_test;

constexpr RlAlgorithm kAll[] = {RL_ALGORITHM_TOKEN_BUCKET, RL_ALGORITHM_GCRA,
								RL_ALGORITHM_SLIDING_WINDOW, RL_ALGORITHM_SLIDING_WINDOW_COUNTER,
								RL_ALGORITHM_FIXED_WINDOW};
constexpr RlAlgorithm kWindows[] = {RL_ALGORITHM_SLIDING_WINDOW,
									RL_ALGORITHM_SLIDING_WINDOW_COUNTER,
									RL_ALGORITHM_FIXED_WINDOW};
constexpr RlAlgorithm kBursty[] = {RL_ALGORITHM_TOKEN_BUCKET, RL_ALGORITHM_GCRA,
								   RL_ALGORITHM_CRON_TOKEN_BUCKET};

// The error, leaving a sentinel limit untouched when there is one.
RlZoneError Check(RlAlgorithm algorithm, int64_t rate, int64_t period_us, int64_t burst,
				  RlZoneLimit *out = nullptr)
{
	RlZoneLimit limit{RL_ALGORITHM_FIXED_WINDOW, -7, -7, -7, -7};
	const RlZoneError error = rl_zone_limit(algorithm, rate, period_us, burst, &limit);
	if (error != RL_ZONE_OK)
	{
		EXPECT_EQ(limit.rate, -7) << "limit written on error " << error;
		EXPECT_EQ(limit.period_us, -7);
		EXPECT_EQ(limit.capacity, -7);
	}
	if (out != nullptr)
		*out = limit;
	return error;
}

TEST(ZoneLimit, ValidParametersWithoutBurstHaveCapacityRate)
{
	for (RlAlgorithm algorithm : kAll)
	{
		RlZoneLimit limit;
		ASSERT_EQ(Check(algorithm, 10, kMinute, -1, &limit), RL_ZONE_OK) << AlgorithmName(algorithm);
		EXPECT_EQ(limit.algorithm, algorithm);
		EXPECT_EQ(limit.rate, 10);
		EXPECT_EQ(limit.period_us, kMinute);
		EXPECT_EQ(limit.capacity, 10);
		// Any negative burst means "not given".
		ASSERT_EQ(Check(algorithm, 3, 1, -12345, &limit), RL_ZONE_OK);
		EXPECT_EQ(limit.capacity, 3);
		ASSERT_EQ(Check(algorithm, 1, 1, INT64_MIN, &limit), RL_ZONE_OK);
		EXPECT_EQ(limit.capacity, 1);
	}
}

TEST(ZoneLimit, BurstIsTheCapacityOfTokenBucketAndGcra)
{
	for (RlAlgorithm algorithm : kBursty)
	{
		RlZoneLimit limit;
		ASSERT_EQ(Check(algorithm, 10, kMinute, 25, &limit), RL_ZONE_OK);
		EXPECT_EQ(limit.rate, 10);
		EXPECT_EQ(limit.capacity, 25);
		ASSERT_EQ(Check(algorithm, 10, kMinute, 1, &limit), RL_ZONE_OK);
		EXPECT_EQ(limit.capacity, 1);
		ASSERT_EQ(Check(algorithm, 10, kMinute, 10, &limit), RL_ZONE_OK);
		EXPECT_EQ(limit.capacity, 10);
	}
}

TEST(ZoneLimit, RateOutOfRange)
{
	for (RlAlgorithm algorithm : kAll)
	{
		for (int64_t rate : {int64_t{0}, int64_t{-1}, INT64_MIN, RL_MAX_LIMIT + 1, INT64_MAX})
			EXPECT_EQ(Check(algorithm, rate, kSecond, -1), RL_ZONE_RATE_INVALID)
				<< AlgorithmName(algorithm) << " rate " << rate;
		EXPECT_EQ(Check(algorithm, 1, kSecond, -1), RL_ZONE_OK);
	}
	// The largest rate is accepted where the algorithm allows it.
	for (RlAlgorithm algorithm : {RL_ALGORITHM_TOKEN_BUCKET, RL_ALGORITHM_GCRA,
								  RL_ALGORITHM_SLIDING_WINDOW_COUNTER, RL_ALGORITHM_FIXED_WINDOW})
	{
		RlZoneLimit limit;
		ASSERT_EQ(Check(algorithm, RL_MAX_LIMIT, kSecond, -1, &limit), RL_ZONE_OK);
		EXPECT_EQ(limit.capacity, RL_MAX_LIMIT);
	}
}

TEST(ZoneLimit, PeriodOutOfRange)
{
	for (RlAlgorithm algorithm : kAll)
	{
		for (int64_t period : {int64_t{0}, int64_t{-1}, INT64_MIN, RL_MAX_PERIOD_US + 1, INT64_MAX})
			EXPECT_EQ(Check(algorithm, 5, period, -1), RL_ZONE_PERIOD_INVALID)
				<< AlgorithmName(algorithm) << " period " << period;
		EXPECT_EQ(Check(algorithm, 5, 1, -1), RL_ZONE_OK);
		EXPECT_EQ(Check(algorithm, 5, RL_MAX_PERIOD_US, -1), RL_ZONE_OK);
	}
}

TEST(ZoneLimit, RateIsCheckedBeforePeriod)
{
	EXPECT_EQ(Check(RL_ALGORITHM_GCRA, 0, 0, -1), RL_ZONE_RATE_INVALID);
	EXPECT_EQ(Check(RL_ALGORITHM_FIXED_WINDOW, 1, 0, 5), RL_ZONE_PERIOD_INVALID);
}

TEST(ZoneLimit, BurstGivenToWindowAlgorithms)
{
	for (RlAlgorithm algorithm : kWindows)
	{
		// Any given burst, even one equal to the rate, or 0.
		for (int64_t burst : {int64_t{0}, int64_t{1}, int64_t{10}, int64_t{11}, RL_MAX_LIMIT + 1})
			EXPECT_EQ(Check(algorithm, 10, kSecond, burst), RL_ZONE_BURST_NOT_APPLICABLE)
				<< AlgorithmName(algorithm) << " burst " << burst;
	}
}

TEST(ZoneLimit, BurstOutOfRange)
{
	for (RlAlgorithm algorithm : kBursty)
	{
		EXPECT_EQ(Check(algorithm, 10, kSecond, 0), RL_ZONE_BURST_INVALID);
		EXPECT_EQ(Check(algorithm, 10, kSecond, RL_MAX_LIMIT + 1), RL_ZONE_BURST_INVALID);
		EXPECT_EQ(Check(algorithm, 10, kSecond, INT64_MAX), RL_ZONE_BURST_INVALID);
	}
}

TEST(ZoneLimit, BurstWhoseRefillOutlastsTheLongestPeriod)
{
	for (RlAlgorithm algorithm : kBursty)
	{
		// Refilling burst tokens takes burst * period / rate: at most 2^53 us.
		EXPECT_EQ(Check(algorithm, 1, RL_MAX_PERIOD_US, 1), RL_ZONE_OK);
		EXPECT_EQ(Check(algorithm, 1, RL_MAX_PERIOD_US, 2), RL_ZONE_BURST_INVALID);
		EXPECT_EQ(Check(algorithm, 2, RL_MAX_PERIOD_US, 2), RL_ZONE_OK);
		EXPECT_EQ(Check(algorithm, 2, RL_MAX_PERIOD_US, 3), RL_ZONE_BURST_INVALID);
		// Exactly the longest period: 2^20 tokens at 1 per 2^33 us.
		EXPECT_EQ(Check(algorithm, 1, int64_t{1} << 33, int64_t{1} << 20), RL_ZONE_OK);
		EXPECT_EQ(Check(algorithm, 1, int64_t{1} << 33, (int64_t{1} << 20) + 1), RL_ZONE_BURST_INVALID);
		// The largest burst with a refill fast enough.
		EXPECT_EQ(Check(algorithm, RL_MAX_LIMIT, 1, RL_MAX_LIMIT), RL_ZONE_OK);
		EXPECT_EQ(Check(algorithm, 1, 1, RL_MAX_LIMIT), RL_ZONE_OK);
		EXPECT_EQ(Check(algorithm, 1, 2, RL_MAX_LIMIT), RL_ZONE_BURST_INVALID);
		EXPECT_EQ(Check(algorithm, 10, kSecond, RL_MAX_LIMIT), RL_ZONE_BURST_INVALID);
	}
	// Without a burst the capacity is the rate: the refill is one period.
	for (RlAlgorithm algorithm : kAll)
	{
		if (algorithm != RL_ALGORITHM_SLIDING_WINDOW)
		{
			EXPECT_EQ(Check(algorithm, RL_MAX_LIMIT, RL_MAX_PERIOD_US, -1), RL_ZONE_OK);
		}
	}
}

TEST(ZoneLimit, ExactSlidingWindowHasALimitOfItsOwn)
{
	RlZoneLimit limit;
	ASSERT_EQ(Check(RL_ALGORITHM_SLIDING_WINDOW, RL_SLIDING_WINDOW_MAX_LIMIT, kSecond, -1, &limit),
			  RL_ZONE_OK);
	EXPECT_EQ(limit.capacity, RL_SLIDING_WINDOW_MAX_LIMIT);
	EXPECT_EQ(Check(RL_ALGORITHM_SLIDING_WINDOW, RL_SLIDING_WINDOW_MAX_LIMIT + 1, kSecond, -1),
			  RL_ZONE_LIMIT_TOO_LARGE_FOR_EXACT);
	EXPECT_EQ(Check(RL_ALGORITHM_SLIDING_WINDOW, RL_MAX_LIMIT, kSecond, -1),
			  RL_ZONE_LIMIT_TOO_LARGE_FOR_EXACT);
	// Beyond RL_MAX_LIMIT the rate itself is invalid.
	EXPECT_EQ(Check(RL_ALGORITHM_SLIDING_WINDOW, RL_MAX_LIMIT + 1, kSecond, -1),
			  RL_ZONE_RATE_INVALID);
	// The approximate counter takes what the exact window refuses.
	EXPECT_EQ(Check(RL_ALGORITHM_SLIDING_WINDOW_COUNTER, RL_SLIDING_WINDOW_MAX_LIMIT + 1, kSecond, -1),
			  RL_ZONE_OK);
}

TEST(ZoneCost, ZeroToCapacityIsValid)
{
	const RlZoneLimit bucket = MakeLimit(RL_ALGORITHM_TOKEN_BUCKET, 10, kSecond, 25);
	for (int64_t cost = 0; cost <= 25; cost++)
		EXPECT_TRUE(rl_zone_cost_valid(&bucket, cost)) << cost;
	for (int64_t cost : {int64_t{-1}, INT64_MIN, int64_t{26}, INT64_MAX})
		EXPECT_FALSE(rl_zone_cost_valid(&bucket, cost)) << cost;

	const RlZoneLimit window = MakeLimit(RL_ALGORITHM_FIXED_WINDOW, 10, kSecond);
	EXPECT_TRUE(rl_zone_cost_valid(&window, 0));
	EXPECT_TRUE(rl_zone_cost_valid(&window, 10));
	EXPECT_FALSE(rl_zone_cost_valid(&window, 11));
	EXPECT_FALSE(rl_zone_cost_valid(&window, -1));

	const RlZoneLimit huge = MakeLimit(RL_ALGORITHM_SLIDING_WINDOW_COUNTER, RL_MAX_LIMIT, kSecond);
	EXPECT_TRUE(rl_zone_cost_valid(&huge, RL_MAX_LIMIT));
	EXPECT_FALSE(rl_zone_cost_valid(&huge, RL_MAX_LIMIT + 1));
}

// ---------------------------------------------------------------------------
// rl_gcra_limit: redis-cell's parameters.
// ---------------------------------------------------------------------------

RlGcraError Gcra(int64_t max_burst, int64_t count, double period_s, int64_t quantity,
				 RlZoneLimit *out = nullptr)
{
	RlZoneLimit limit{};
	const RlGcraError error = rl_gcra_limit(max_burst, count, period_s, quantity, &limit);
	if (out != nullptr)
		*out = limit;
	return error;
}

TEST(GcraLimit, RedisCellExampleParameters)
{
	RlZoneLimit limit;
	ASSERT_EQ(Gcra(15, 30, 60.0, 1, &limit), RL_GCRA_OK);
	EXPECT_EQ(limit.algorithm, RL_ALGORITHM_GCRA);
	EXPECT_EQ(limit.rate, 30);
	EXPECT_EQ(limit.period_us, 60 * kSecond);
	EXPECT_EQ(limit.capacity, 16);
}

TEST(GcraLimit, PeriodIsRoundedToMicroseconds)
{
	RlZoneLimit limit;
	ASSERT_EQ(Gcra(0, 1, 0.0000014, 1, &limit), RL_GCRA_OK);
	EXPECT_EQ(limit.period_us, 1);
	ASSERT_EQ(Gcra(0, 1, 0.0000016, 1, &limit), RL_GCRA_OK);
	EXPECT_EQ(limit.period_us, 2);
	ASSERT_EQ(Gcra(0, 3, 1.5, 1, &limit), RL_GCRA_OK);
	EXPECT_EQ(limit.period_us, 1500000);
	ASSERT_EQ(Gcra(0, 1, 9007199254.740992, 1, &limit), RL_GCRA_OK);	// 2^53 us
	EXPECT_EQ(limit.period_us, RL_MAX_PERIOD_US);
}

TEST(GcraLimit, MaxBurstZeroIsALimitOfOne)
{
	RlZoneLimit limit;
	ASSERT_EQ(Gcra(0, 5, 1.0, 1, &limit), RL_GCRA_OK);
	EXPECT_EQ(limit.capacity, 1);
	EXPECT_EQ(Gcra(0, 5, 1.0, 0), RL_GCRA_OK);
	EXPECT_EQ(Gcra(0, 5, 1.0, 2), RL_GCRA_QUANTITY_ABOVE_LIMIT);
}

TEST(GcraLimit, Errors)
{
	EXPECT_EQ(Gcra(-1, 30, 60.0, 1), RL_GCRA_MAX_BURST_INVALID);
	EXPECT_EQ(Gcra(INT64_MIN, 30, 60.0, 1), RL_GCRA_MAX_BURST_INVALID);
	EXPECT_EQ(Gcra(RL_MAX_LIMIT, 30, 60.0, 1), RL_GCRA_MAX_BURST_INVALID);	// limit 2^53 + 1
	// The burst refills within 2^53 us or is refused.
	EXPECT_EQ(Gcra(1, 1, 9007199254.740992, 1), RL_GCRA_MAX_BURST_INVALID);
	EXPECT_EQ(Gcra(RL_MAX_LIMIT - 1, 1, 1e-6, 1), RL_GCRA_OK);
	EXPECT_EQ(Gcra(RL_MAX_LIMIT - 1, 1, 2e-6, 1), RL_GCRA_MAX_BURST_INVALID);

	EXPECT_EQ(Gcra(15, 0, 60.0, 1), RL_GCRA_COUNT_INVALID);
	EXPECT_EQ(Gcra(15, -3, 60.0, 1), RL_GCRA_COUNT_INVALID);
	EXPECT_EQ(Gcra(15, RL_MAX_LIMIT + 1, 60.0, 1), RL_GCRA_COUNT_INVALID);

	const double nan = std::numeric_limits<double>::quiet_NaN();
	const double inf = std::numeric_limits<double>::infinity();
	for (double period : {nan, inf, -inf, 0.0, -0.0, -1.0, 1e-7, 0.49e-6, 9007199254.740994, 1e300})
		EXPECT_EQ(Gcra(15, 30, period, 1), RL_GCRA_PERIOD_INVALID) << period;

	EXPECT_EQ(Gcra(15, 30, 60.0, -1), RL_GCRA_QUANTITY_NEGATIVE);
	EXPECT_EQ(Gcra(15, 30, 60.0, INT64_MIN), RL_GCRA_QUANTITY_NEGATIVE);
	EXPECT_EQ(Gcra(15, 30, 60.0, 16), RL_GCRA_OK);
	EXPECT_EQ(Gcra(15, 30, 60.0, 17), RL_GCRA_QUANTITY_ABOVE_LIMIT);
	EXPECT_EQ(Gcra(15, 30, 60.0, INT64_MAX), RL_GCRA_QUANTITY_ABOVE_LIMIT);
	EXPECT_EQ(Gcra(15, 30, 60.0, 0), RL_GCRA_OK);
}

}  // namespace
