// Unit tests of rl_token_bucket_limit (parameter checks).
#include "core/rl_core.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kTwoPow52 = 4503599627370496.0;
constexpr double kTwoPow53 = 9007199254740992.0;

// A limit pre-filled with a recognisable value, to see whether it was written.
RlTokenBucketLimit Sentinel()
{
	return RlTokenBucketLimit{-12345.0, -1.0, -67890.0};
}

TEST(TokenBucketLimit, AcceptsValidParametersAndFillsLimit)
{
	RlTokenBucketLimit limit = Sentinel();
	ASSERT_EQ(rl_token_bucket_limit(2.0, 60.0, 1, &limit), RL_PARAM_OK);
	EXPECT_EQ(limit.refill_tokens, 2.0);
	EXPECT_EQ(limit.refill_interval_us, 1e6);
	EXPECT_EQ(limit.capacity, 120.0);

	limit = Sentinel();
	ASSERT_EQ(rl_token_bucket_limit(0.5, 7.0, 3, &limit), RL_PARAM_OK);
	EXPECT_EQ(limit.refill_tokens, 0.5);
	EXPECT_EQ(limit.refill_interval_us, 1e6);
	EXPECT_EQ(limit.capacity, 3.5);
}

TEST(TokenBucketLimit, CapacityIsRateTimesWindow)
{
	RlTokenBucketLimit limit = Sentinel();
	ASSERT_EQ(rl_token_bucket_limit(0.3, 10.0, 1, &limit), RL_PARAM_OK);
	EXPECT_EQ(limit.refill_tokens, 0.3);
	EXPECT_EQ(limit.refill_interval_us, 1e6);
	EXPECT_EQ(limit.capacity, 0.3 * 10.0);

	limit = Sentinel();
	ASSERT_EQ(rl_token_bucket_limit(1000.0 / 60.0, 60.0, 1, &limit), RL_PARAM_OK);
	EXPECT_DOUBLE_EQ(limit.capacity, 1000.0);
}

TEST(TokenBucketLimit, RejectsNonPositiveRate)
{
	for (double rate : {0.0, -0.0, -1.0, -1e-300, -std::numeric_limits<double>::max()})
	{
		RlTokenBucketLimit limit = Sentinel();
		EXPECT_EQ(rl_token_bucket_limit(rate, 10.0, 1, &limit), RL_PARAM_RATE_INVALID)
			<< "rate " << rate;
	}
}

TEST(TokenBucketLimit, RejectsNonFiniteRate)
{
	for (double rate : {kNaN, -kNaN, kInf, -kInf})
	{
		RlTokenBucketLimit limit = Sentinel();
		EXPECT_EQ(rl_token_bucket_limit(rate, 10.0, 1, &limit), RL_PARAM_RATE_INVALID)
			<< "rate " << rate;
	}
}

TEST(TokenBucketLimit, RejectsNonPositiveWindow)
{
	for (double window : {0.0, -0.0, -1.0, -1e-300, -std::numeric_limits<double>::max()})
	{
		RlTokenBucketLimit limit = Sentinel();
		EXPECT_EQ(rl_token_bucket_limit(2.0, window, 1, &limit), RL_PARAM_WINDOW_INVALID)
			<< "window " << window;
	}
}

TEST(TokenBucketLimit, RejectsNonFiniteWindow)
{
	for (double window : {kNaN, -kNaN, kInf, -kInf})
	{
		RlTokenBucketLimit limit = Sentinel();
		EXPECT_EQ(rl_token_bucket_limit(2.0, window, 1, &limit), RL_PARAM_WINDOW_INVALID)
			<< "window " << window;
	}
}

TEST(TokenBucketLimit, RejectsInfiniteCapacity)
{
	RlTokenBucketLimit limit = Sentinel();
	// Both finite, product overflows to +inf.
	EXPECT_EQ(rl_token_bucket_limit(1e300, 1e300, 1, &limit), RL_PARAM_CAPACITY_OVERFLOW);
	EXPECT_EQ(rl_token_bucket_limit(std::numeric_limits<double>::max(), 2.0, 1, &limit),
			  RL_PARAM_CAPACITY_OVERFLOW);
	EXPECT_EQ(rl_token_bucket_limit(2.0, std::numeric_limits<double>::max(), 1, &limit),
			  RL_PARAM_CAPACITY_OVERFLOW);
}

TEST(TokenBucketLimit, RejectsCapacityAboveMaximum)
{
	RlTokenBucketLimit limit = Sentinel();
	EXPECT_EQ(rl_token_bucket_limit(kTwoPow53, 2.0, 1, &limit), RL_PARAM_CAPACITY_OVERFLOW);
	EXPECT_EQ(rl_token_bucket_limit(1e10, 1e10, 1, &limit), RL_PARAM_CAPACITY_OVERFLOW);
	// The smallest double above 2^53.
	EXPECT_EQ(rl_token_bucket_limit(std::nextafter(kTwoPow53, kInf), 1.0, 1, &limit),
			  RL_PARAM_CAPACITY_OVERFLOW);
}

TEST(TokenBucketLimit, AcceptsCapacityAtMaximum)
{
	RlTokenBucketLimit limit = Sentinel();
	ASSERT_EQ(rl_token_bucket_limit(kTwoPow52, 2.0, 1, &limit), RL_PARAM_OK);
	EXPECT_EQ(limit.capacity, RL_MAX_CAPACITY);
	EXPECT_EQ(limit.refill_tokens, kTwoPow52);
	EXPECT_EQ(limit.refill_interval_us, 1e6);

	limit = Sentinel();
	ASSERT_EQ(rl_token_bucket_limit(2.0, kTwoPow52, static_cast<int64_t>(kTwoPow53), &limit),
			  RL_PARAM_OK);
	EXPECT_EQ(limit.capacity, RL_MAX_CAPACITY);
}

TEST(TokenBucketLimit, RejectsNegativeCost)
{
	for (int64_t cost : {int64_t{-1}, int64_t{-1000}, std::numeric_limits<int64_t>::min()})
	{
		RlTokenBucketLimit limit = Sentinel();
		EXPECT_EQ(rl_token_bucket_limit(2.0, 60.0, cost, &limit), RL_PARAM_COST_NEGATIVE)
			<< "cost " << cost;
	}
}

TEST(TokenBucketLimit, RejectsCostAboveCapacity)
{
	RlTokenBucketLimit limit = Sentinel();
	EXPECT_EQ(rl_token_bucket_limit(1.0, 10.0, 11, &limit), RL_PARAM_COST_ABOVE_CAPACITY);
	EXPECT_EQ(rl_token_bucket_limit(1.0, 10.0, std::numeric_limits<int64_t>::max(), &limit),
			  RL_PARAM_COST_ABOVE_CAPACITY);
	// 0.3 * 3 = 0.8999999999999999 tokens: cost 1 is above it.
	EXPECT_EQ(rl_token_bucket_limit(0.3, 3.0, 1, &limit), RL_PARAM_COST_ABOVE_CAPACITY);
	// Capacity 2.5: cost 3 is above it.
	EXPECT_EQ(rl_token_bucket_limit(0.5, 5.0, 3, &limit), RL_PARAM_COST_ABOVE_CAPACITY);
}

TEST(TokenBucketLimit, AcceptsCostEqualToCapacity)
{
	RlTokenBucketLimit limit = Sentinel();
	ASSERT_EQ(rl_token_bucket_limit(1.0, 10.0, 10, &limit), RL_PARAM_OK);
	EXPECT_EQ(limit.capacity, 10.0);

	// 0.29 * 100 = 28.999999999999996 in doubles; the capacity is meant as 29.
	limit = Sentinel();
	ASSERT_EQ(rl_token_bucket_limit(0.29, 100.0, 29, &limit), RL_PARAM_OK);
	EXPECT_NEAR(limit.capacity, 29.0, 1e-9);

	// 1/3 per second over 3 s.
	limit = Sentinel();
	ASSERT_EQ(rl_token_bucket_limit(1.0 / 3.0, 3.0, 1, &limit), RL_PARAM_OK);
	EXPECT_NEAR(limit.capacity, 1.0, 1e-9);
}

TEST(TokenBucketLimit, AcceptsZeroCost)
{
	RlTokenBucketLimit limit = Sentinel();
	ASSERT_EQ(rl_token_bucket_limit(2.0, 60.0, 0, &limit), RL_PARAM_OK);
	EXPECT_EQ(limit.capacity, 120.0);

	// Even a bucket holding less than one token accepts cost 0.
	limit = Sentinel();
	ASSERT_EQ(rl_token_bucket_limit(0.1, 2.0, 0, &limit), RL_PARAM_OK);
	EXPECT_DOUBLE_EQ(limit.capacity, 0.2);
}

TEST(TokenBucketLimit, TinyCapacityRefusesCostOne)
{
	RlTokenBucketLimit limit = Sentinel();
	EXPECT_EQ(rl_token_bucket_limit(0.5, 1.0, 1, &limit), RL_PARAM_COST_ABOVE_CAPACITY);
	EXPECT_EQ(rl_token_bucket_limit(0.001, 0.5, 1, &limit), RL_PARAM_COST_ABOVE_CAPACITY);
	EXPECT_EQ(rl_token_bucket_limit(0.999, 1.0, 1, &limit), RL_PARAM_COST_ABOVE_CAPACITY);
	EXPECT_EQ(rl_token_bucket_limit(1e-300, 1.0, 1, &limit), RL_PARAM_COST_ABOVE_CAPACITY);
}

// The cost is an int64 but the capacity is a double: compared as doubles,
// 2^53 + 1 would round to 2^53 and look equal to the maximum capacity (and
// rl_token_bucket_take would then admit 2^53 + 1 tokens from a bucket of
// 2^53).  Not reachable from SQL (cost is int4 there), only through the C
// interface.
TEST(TokenBucketLimit, CostJustAboveMaximumCapacityIsRejected)
{
	RlTokenBucketLimit limit = Sentinel();
	const int64_t cost = (int64_t{1} << 53) + 1;
	EXPECT_EQ(rl_token_bucket_limit(kTwoPow53, 1.0, cost, &limit),
			  RL_PARAM_COST_ABOVE_CAPACITY);
	EXPECT_EQ(rl_token_bucket_limit(kTwoPow53, 1.0, cost + 1, &limit),
			  RL_PARAM_COST_ABOVE_CAPACITY);
	EXPECT_EQ(rl_token_bucket_limit(kTwoPow53, 1.0, std::numeric_limits<int64_t>::max(), &limit),
			  RL_PARAM_COST_ABOVE_CAPACITY);
	// A refused cost leaves the limit alone.
	EXPECT_EQ(limit.capacity, Sentinel().capacity);
	EXPECT_EQ(rl_token_bucket_limit(kTwoPow53, 1.0, cost - 1, &limit), RL_PARAM_OK);
	EXPECT_EQ(limit.capacity, RL_MAX_CAPACITY);
}

}  // namespace
