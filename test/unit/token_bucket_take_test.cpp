// Unit tests of rl_token_bucket_take (the token bucket's semantics), hand-picked cases.
#include "core/rl_core.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace {

constexpr int64_t kSecond = 1000000;  // microseconds
constexpr int64_t kT0 = 757382400LL * kSecond;  // an arbitrary instant

RlTokenBucketLimit Limit(double rate, double window, int64_t cost = 1)
{
	RlTokenBucketLimit limit{};
	EXPECT_EQ(rl_token_bucket_limit(rate, window, cost, &limit), RL_PARAM_OK)
		<< "rate " << rate << " window " << window << " cost " << cost;
	return limit;
}

// One key as the glue keeps it: the state is written back only when the
// decision says it changed.
struct Key
{
	std::optional<RlTokenBucketState> stored;

	RlTokenBucketDecision Take(int64_t now_us, const RlTokenBucketLimit &limit, int64_t cost)
	{
		const RlTokenBucketDecision d =
			rl_token_bucket_take(stored ? &*stored : nullptr, now_us, &limit, cost);
		if (d.state_changed)
			stored = d.next;
		return d;
	}
};

// Bit for bit: the fraction is compared by representation (so -0.0 differs
// from 0.0, and a NaN would differ from everything but itself).
bool SameState(const RlTokenBucketState &a, const RlTokenBucketState &b)
{
	return a.tokens == b.tokens &&
		   std::memcmp(&a.fraction, &b.fraction, sizeof a.fraction) == 0 &&
		   a.stamp_us == b.stamp_us;
}

TEST(TokenBucketTake, SpecExampleTwelveCallsThenRefill)
{
	const RlTokenBucketLimit limit = Limit(1.0, 10.0);
	Key key;
	const int64_t expected[] = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0, -1, -1};
	for (int i = 0; i < 12; i++)
	{
		const RlTokenBucketDecision d = key.Take(kT0, limit, 1);
		EXPECT_EQ(d.remaining, expected[i]) << "call " << i;
		EXPECT_EQ(d.allowed, expected[i] >= 0) << "call " << i;
	}
	const RlTokenBucketDecision d = key.Take(kT0 + 4 * kSecond, limit, 1);
	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.remaining, 3);
	ASSERT_TRUE(key.stored.has_value());
	EXPECT_EQ(key.stored->tokens, 3);
	EXPECT_EQ(key.stored->fraction, 0.0);
	EXPECT_EQ(key.stored->stamp_us, kT0 + 4 * kSecond);
}

TEST(TokenBucketTake, NewKeyStartsFull)
{
	const RlTokenBucketLimit limit = Limit(2.0, 60.0);
	const RlTokenBucketDecision d = rl_token_bucket_take(nullptr, kT0, &limit, 5);
	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.remaining, 115);
	EXPECT_TRUE(d.state_changed);
	EXPECT_EQ(d.next.tokens, 115);
	EXPECT_EQ(d.next.fraction, 0.0);
	EXPECT_EQ(d.next.stamp_us, kT0);
}

TEST(TokenBucketTake, NewKeyWithZeroCostIsStoredFull)
{
	const RlTokenBucketLimit limit = Limit(2.0, 60.0, 0);
	const RlTokenBucketDecision d = rl_token_bucket_take(nullptr, kT0, &limit, 0);
	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.remaining, 120);
	EXPECT_TRUE(d.state_changed);
	EXPECT_EQ(d.next.tokens, 120);
	EXPECT_EQ(d.next.fraction, 0.0);
	EXPECT_EQ(d.next.stamp_us, kT0);
}

TEST(TokenBucketTake, RemainingIsFloorOfTokensLeft)
{
	const RlTokenBucketLimit limit = Limit(1.0, 10.0);
	const RlTokenBucketState prior{2, 0.75, kT0};
	const RlTokenBucketDecision d = rl_token_bucket_take(&prior, kT0, &limit, 1);
	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.remaining, 1);
	EXPECT_TRUE(d.state_changed);
	EXPECT_EQ(d.next.tokens, 1);
	EXPECT_DOUBLE_EQ(d.next.fraction, 0.75);
	EXPECT_EQ(d.next.stamp_us, kT0);
}

TEST(TokenBucketTake, FractionalTokensKeptAcrossRefusedCalls)
{
	const RlTokenBucketLimit limit = Limit(1.0, 10.0);
	Key key;
	for (int i = 0; i < 10; i++)
		ASSERT_TRUE(key.Take(kT0, limit, 1).allowed);
	ASSERT_FALSE(key.Take(kT0, limit, 1).allowed);
	ASSERT_TRUE(key.stored.has_value());
	const RlTokenBucketState empty = *key.stored;
	EXPECT_EQ(empty.tokens, 0);
	EXPECT_EQ(empty.fraction, 0.0);

	// Nine refused calls 0.1 s apart: each sees less than one token.
	for (int i = 1; i <= 9; i++)
	{
		const RlTokenBucketDecision d = key.Take(kT0 + i * (kSecond / 10), limit, 1);
		EXPECT_FALSE(d.allowed) << "call at +" << i * 100 << " ms";
		EXPECT_EQ(d.remaining, -1);
		EXPECT_FALSE(d.state_changed);
		EXPECT_TRUE(SameState(*key.stored, empty));
	}
	// 1.05 s after emptying the bucket holds 1.05 tokens whatever happened.
	const RlTokenBucketDecision d = key.Take(kT0 + kSecond + kSecond / 20, limit, 1);
	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.remaining, 0);
	EXPECT_TRUE(d.state_changed);
	EXPECT_EQ(key.stored->tokens, 0);
	EXPECT_NEAR(key.stored->fraction, 0.05, 1e-12);
	EXPECT_EQ(key.stored->stamp_us, kT0 + kSecond + kSecond / 20);
}

TEST(TokenBucketTake, RefusedCallChangesNothing)
{
	const RlTokenBucketLimit limit = Limit(1.0, 10.0, 3);
	const RlTokenBucketState prior{2, 0.5, kT0};
	const RlTokenBucketState copy = prior;
	// 0.4 s later: 2.9 tokens, cost 3 is refused.
	const RlTokenBucketDecision d = rl_token_bucket_take(&prior, kT0 + 400000, &limit, 3);
	EXPECT_FALSE(d.allowed);
	EXPECT_EQ(d.remaining, -1);
	EXPECT_FALSE(d.state_changed);
	EXPECT_TRUE(SameState(prior, copy));
	// Still refused at the same instant, admitted once the 0.5 s are up.
	EXPECT_FALSE(rl_token_bucket_take(&prior, kT0 + 499999, &limit, 3).allowed);
	const RlTokenBucketDecision later = rl_token_bucket_take(&prior, kT0 + 500000, &limit, 3);
	EXPECT_TRUE(later.allowed);
	EXPECT_EQ(later.remaining, 0);
}

TEST(TokenBucketTake, RefusedCallsDoNotDelayRefill)
{
	// Two keys see the same requests; one also gets a storm of refused ones
	// after each refusal.  Their decisions and stored states must stay
	// identical: refusals never delay the refill.
	const RlTokenBucketLimit limit = Limit(3.0, 2.0, 6);	// capacity 6
	Key quiet;
	Key noisy;
	int64_t now = kT0;
	int refusals = 0;
	for (int step = 0; step < 200; step++)
	{
		now += 137000;	// 0.137 s: 0.411 token, less than the cost of 2
		const RlTokenBucketDecision q = quiet.Take(now, limit, 2);
		const RlTokenBucketDecision n = noisy.Take(now, limit, 2);
		EXPECT_EQ(q.allowed, n.allowed) << "step " << step;
		EXPECT_EQ(q.remaining, n.remaining) << "step " << step;
		ASSERT_TRUE(quiet.stored && noisy.stored);
		EXPECT_TRUE(SameState(*quiet.stored, *noisy.stored)) << "step " << step;
		if (n.allowed)
			continue;
		refusals++;
		const RlTokenBucketState before = *noisy.stored;
		for (int i = 1; i <= 5; i++)
		{
			// The same instant and cost: refused again.
			const RlTokenBucketDecision same = noisy.Take(now, limit, 2);
			EXPECT_FALSE(same.allowed);
			EXPECT_FALSE(same.state_changed);
			// Slightly later, the whole capacity: the bucket (< 2.3 tokens) is not full.
			const RlTokenBucketDecision all = noisy.Take(now + i * 10000, limit, 6);
			EXPECT_FALSE(all.allowed);
			EXPECT_FALSE(all.state_changed);
		}
		EXPECT_TRUE(SameState(*noisy.stored, before)) << "step " << step;
	}
	// Demand 2 per 0.137 s against a refill of 3/s: most calls are refused.
	EXPECT_GT(refusals, 100);
}

TEST(TokenBucketTake, ZeroCostPeeksWithoutChangingState)
{
	const RlTokenBucketLimit limit = Limit(1.0, 10.0, 0);
	const RlTokenBucketState prior{3, 0.7, kT0};
	const RlTokenBucketDecision d = rl_token_bucket_take(&prior, kT0 + kSecond / 2, &limit, 0);
	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.remaining, 4);	// floor(4.2)
	EXPECT_FALSE(d.state_changed);

	// A full bucket reports its whole capacity.
	const RlTokenBucketDecision full = rl_token_bucket_take(&prior, kT0 + 60 * kSecond, &limit, 0);
	EXPECT_TRUE(full.allowed);
	EXPECT_EQ(full.remaining, 10);
	EXPECT_FALSE(full.state_changed);

	// An empty bucket reports 0, and cost 0 is still allowed.
	const RlTokenBucketState empty{0, 0.0, kT0};
	const RlTokenBucketDecision zero = rl_token_bucket_take(&empty, kT0 + 999999, &limit, 0);
	EXPECT_TRUE(zero.allowed);
	EXPECT_EQ(zero.remaining, 0);
	EXPECT_FALSE(zero.state_changed);
}

TEST(TokenBucketTake, ZeroCostDoesNotDisturbLaterCalls)
{
	const RlTokenBucketLimit limit = Limit(0.7, 10.0);
	Key key;
	for (int i = 0; i < 7; i++)
		ASSERT_TRUE(key.Take(kT0, limit, 1).allowed);
	const RlTokenBucketState empty = *key.stored;
	for (int i = 1; i <= 13; i++)
	{
		const RlTokenBucketDecision d = key.Take(kT0 + i * 100000, limit, 0);
		EXPECT_TRUE(d.allowed);
		EXPECT_EQ(d.remaining, 0);	// 0.07 * i < 1 token
		EXPECT_FALSE(d.state_changed);
		EXPECT_TRUE(SameState(*key.stored, empty));
	}
	// 1/0.7 s = 1428571.4 us after emptying: one token.
	EXPECT_FALSE(key.Take(kT0 + 1428571, limit, 1).allowed);
	EXPECT_TRUE(key.Take(kT0 + 1428572, limit, 1).allowed);
}

TEST(TokenBucketTake, ClockGoingBackwardsCountsAsNoTimePassing)
{
	const RlTokenBucketLimit limit = Limit(1.0, 10.0);
	const RlTokenBucketState prior{5, 0.5, kT0};
	const RlTokenBucketDecision d = rl_token_bucket_take(&prior, kT0 - 5 * kSecond, &limit, 1);
	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.remaining, 4);
	EXPECT_TRUE(d.state_changed);
	EXPECT_EQ(d.next.tokens, 4);  // no refill, and no negative refill
	EXPECT_DOUBLE_EQ(d.next.fraction, 0.5);
	EXPECT_EQ(d.next.stamp_us, kT0);		  // never moves backwards

	// Far backwards, beyond the window.
	const RlTokenBucketDecision far =
		rl_token_bucket_take(&prior, kT0 - 1000000 * kSecond, &limit, 1);
	EXPECT_TRUE(far.allowed);
	EXPECT_EQ(far.next.tokens, 4);
	EXPECT_DOUBLE_EQ(far.next.fraction, 0.5);
	EXPECT_EQ(far.next.stamp_us, kT0);

	// A refused call backwards: nothing stored, and the computed state does
	// not move the stamp back either.
	const RlTokenBucketState low{0, 0.5, kT0};
	const RlTokenBucketDecision refused = rl_token_bucket_take(&low, kT0 - kSecond, &limit, 1);
	EXPECT_FALSE(refused.allowed);
	EXPECT_FALSE(refused.state_changed);
	EXPECT_GE(refused.next.stamp_us, kT0);
	EXPECT_EQ(refused.next.tokens, 0);
	EXPECT_DOUBLE_EQ(refused.next.fraction, 0.5);
}

TEST(TokenBucketTake, ClockGoingBackwardsThenForwardCreditsEachSecondOnce)
{
	const RlTokenBucketLimit limit = Limit(1.0, 10.0);
	Key key;
	for (int i = 0; i < 10; i++)
		ASSERT_TRUE(key.Take(kT0, limit, 1).allowed);
	// 2 s later: 2 tokens.  Take one.
	ASSERT_TRUE(key.Take(kT0 + 2 * kSecond, limit, 1).allowed);
	// Clock jumps 1.5 s back: no refill, take the last whole token.
	const RlTokenBucketDecision back = key.Take(kT0 + kSecond / 2, limit, 1);
	EXPECT_TRUE(back.allowed);
	EXPECT_EQ(back.remaining, 0);
	EXPECT_EQ(key.stored->stamp_us, kT0 + 2 * kSecond);
	// The clock is back at +2.5 s: only the 0.5 s since +2 s count.
	EXPECT_FALSE(key.Take(kT0 + 2 * kSecond + kSecond / 2, limit, 1).allowed);
	EXPECT_FALSE(key.Take(kT0 + 3 * kSecond - 1, limit, 1).allowed);
	const RlTokenBucketDecision d = key.Take(kT0 + 3 * kSecond, limit, 1);
	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.remaining, 0);
}

TEST(TokenBucketTake, HugeElapsedTimeFillsBucket)
{
	const RlTokenBucketLimit limit = Limit(1000.0, 60.0);
	const RlTokenBucketState empty{0, 0.0, 0};
	const RlTokenBucketDecision d =
		rl_token_bucket_take(&empty, std::numeric_limits<int64_t>::max(), &limit, 1);
	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.remaining, 59999);
	EXPECT_TRUE(std::isfinite(d.next.fraction));
	EXPECT_EQ(d.next.tokens, 59999);
	EXPECT_EQ(d.next.fraction, 0.0);
	EXPECT_EQ(d.next.stamp_us, std::numeric_limits<int64_t>::max());

	// Across most of the int64 range, without overflowing the subtraction.
	const RlTokenBucketState old{0, 0.0, -4000000000000000000LL};
	const RlTokenBucketDecision far =
		rl_token_bucket_take(&old, 4000000000000000000LL, &limit, 1);
	EXPECT_TRUE(far.allowed);
	EXPECT_EQ(far.remaining, 59999);
	EXPECT_EQ(far.next.tokens, 59999);
	EXPECT_EQ(far.next.fraction, 0.0);
}

// Regression: the elapsed time was once an int64 subtraction, which overflows
// (undefined behaviour; wrapped to -1 us with g++ -O1, refusing the call) when
// the two instants are more than INT64_MAX apart.
TEST(TokenBucketTake, ExtremeTimestampsDoNotOverflow)
{
	const RlTokenBucketLimit limit = Limit(1.0, 10.0);
	const RlTokenBucketState empty{0, 0.0, std::numeric_limits<int64_t>::min()};
	const RlTokenBucketDecision d =
		rl_token_bucket_take(&empty, std::numeric_limits<int64_t>::max(), &limit, 1);
	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.remaining, 9);
	EXPECT_EQ(d.next.tokens, 9);
	EXPECT_EQ(d.next.fraction, 0.0);
	EXPECT_EQ(d.next.stamp_us, std::numeric_limits<int64_t>::max());

	// PostgreSQL's own TimestampTz range (4713 BC .. 294276 AD) is wider
	// than INT64_MAX microseconds.
	const RlTokenBucketState ancient{0, 0.0, -211813488000000000LL};
	const RlTokenBucketDecision far =
		rl_token_bucket_take(&ancient, 9223371331200000000LL - 1, &limit, 1);
	EXPECT_TRUE(far.allowed);
	EXPECT_EQ(far.remaining, 9);

	// Backwards across the whole range: no refill at all.
	const RlTokenBucketState late{0, 0.0, std::numeric_limits<int64_t>::max()};
	const RlTokenBucketDecision back =
		rl_token_bucket_take(&late, std::numeric_limits<int64_t>::min(), &limit, 1);
	EXPECT_FALSE(back.allowed);
	EXPECT_EQ(back.next.tokens, 0);
	EXPECT_EQ(back.next.fraction, 0.0);
	EXPECT_EQ(back.next.stamp_us, std::numeric_limits<int64_t>::max());
}

TEST(TokenBucketTake, MicrosecondResolutionAtRealisticTimestamps)
{
	// One token per microsecond, so every microsecond counts.  Instants from
	// 1970 (negative on the PostgreSQL epoch) to the year 2250.
	const RlTokenBucketLimit limit = Limit(1e6, 1e-5);	// capacity 10
	for (int64_t base : {int64_t{-946684800} * kSecond, int64_t{0}, kT0,
						 int64_t{1} << 52, int64_t{7900000000000000}})
	{
		const RlTokenBucketState empty{0, 0.0, base};
		for (int64_t us = 1; us <= 9; us++)
		{
			const RlTokenBucketDecision d = rl_token_bucket_take(&empty, base + us, &limit, 1);
			EXPECT_TRUE(d.allowed) << base << " + " << us;
			EXPECT_EQ(d.remaining, us - 1) << base << " + " << us;
			EXPECT_EQ(d.next.tokens, us - 1) << base << " + " << us;
			EXPECT_EQ(d.next.fraction, 0.0) << base << " + " << us;
		}
		EXPECT_FALSE(rl_token_bucket_take(&empty, base, &limit, 1).allowed) << base;
	}
}

TEST(TokenBucketTake, HugeRateDoesNotOverflow)
{
	// rate * elapsed_us overflows to +inf: the bucket is simply full.
	const double rate = std::numeric_limits<double>::max();
	const RlTokenBucketLimit limit = Limit(rate, 1e-300);
	ASSERT_TRUE(std::isfinite(limit.capacity));
	const RlTokenBucketState empty{0, 0.0, kT0};
	// The capacity, about 1.8e8, is not a whole number of tokens.
	const double cap_whole = std::floor(limit.capacity);
	ASSERT_NE(cap_whole, limit.capacity);
	for (int64_t elapsed : {int64_t{1}, int64_t{1000}, kSecond, 1000000 * kSecond})
	{
		const RlTokenBucketDecision d = rl_token_bucket_take(&empty, kT0 + elapsed, &limit, 1);
		EXPECT_TRUE(d.allowed) << "elapsed " << elapsed;
		EXPECT_TRUE(std::isfinite(d.next.fraction)) << "elapsed " << elapsed;
		EXPECT_FALSE(std::isnan(d.next.fraction)) << "elapsed " << elapsed;
		// capacity - 1 exactly: whole part and fraction of the capacity.
		EXPECT_EQ(d.next.tokens, static_cast<int64_t>(cap_whole) - 1) << "elapsed " << elapsed;
		EXPECT_EQ(d.next.fraction, limit.capacity - cap_whole) << "elapsed " << elapsed;
		EXPECT_EQ(d.remaining, static_cast<int64_t>(std::floor(limit.capacity - 1.0)));
	}

	// Largest capacity with a very long idle time.
	const RlTokenBucketLimit big = Limit(4503599627370496.0, 2.0);
	const RlTokenBucketState none{0, 0.0, 0};
	const RlTokenBucketDecision d =
		rl_token_bucket_take(&none, std::numeric_limits<int64_t>::max(), &big, 1);
	EXPECT_TRUE(d.allowed);
	EXPECT_TRUE(std::isfinite(d.next.fraction));
	EXPECT_EQ(d.next.tokens, (int64_t{1} << 53) - 1);
	EXPECT_EQ(d.next.fraction, 0.0);
	EXPECT_EQ(d.remaining, (int64_t{1} << 53) - 1);
}

TEST(TokenBucketTake, LoweredCapacityClampsTokens)
{
	// The bucket was filled under a capacity of 100; the limit is now 10.
	const RlTokenBucketLimit limit = Limit(1.0, 10.0, 0);
	const RlTokenBucketState prior{100, 0.0, kT0};

	const RlTokenBucketDecision peek = rl_token_bucket_take(&prior, kT0, &limit, 0);
	EXPECT_TRUE(peek.allowed);
	EXPECT_EQ(peek.remaining, 10);

	const RlTokenBucketDecision take = rl_token_bucket_take(&prior, kT0, &limit, 1);
	EXPECT_TRUE(take.allowed);
	EXPECT_EQ(take.remaining, 9);
	EXPECT_TRUE(take.state_changed);
	EXPECT_EQ(take.next.tokens, 9);
	EXPECT_EQ(take.next.fraction, 0.0);

	// Also with time passing and with the clock going backwards.
	EXPECT_EQ(rl_token_bucket_take(&prior, kT0 + 5 * kSecond, &limit, 1).remaining, 9);
	EXPECT_EQ(rl_token_bucket_take(&prior, kT0 - 5 * kSecond, &limit, 1).remaining, 9);
}

TEST(TokenBucketTake, RaisedCapacityDoesNotInventTokens)
{
	const RlTokenBucketLimit limit = Limit(1.0, 100.0, 0);
	const RlTokenBucketState prior{5, 0.0, kT0};
	EXPECT_EQ(rl_token_bucket_take(&prior, kT0, &limit, 0).remaining, 5);
	EXPECT_EQ(rl_token_bucket_take(&prior, kT0 + 3 * kSecond, &limit, 0).remaining, 8);
	EXPECT_FALSE(rl_token_bucket_take(&prior, kT0, &limit, 6).allowed);
}

TEST(TokenBucketTake, CostEqualToCapacityEmptiesFullBucket)
{
	const RlTokenBucketLimit limit = Limit(1.0, 10.0, 10);

	// New key.
	const RlTokenBucketDecision first = rl_token_bucket_take(nullptr, kT0, &limit, 10);
	EXPECT_TRUE(first.allowed);
	EXPECT_EQ(first.remaining, 0);
	EXPECT_EQ(first.next.tokens, 0);
	EXPECT_EQ(first.next.fraction, 0.0);

	// Stored full bucket.
	const RlTokenBucketState full{10, 0.0, kT0};
	const RlTokenBucketDecision d = rl_token_bucket_take(&full, kT0, &limit, 10);
	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.remaining, 0);
	EXPECT_TRUE(d.state_changed);
	EXPECT_EQ(d.next.tokens, 0);
	EXPECT_EQ(d.next.fraction, 0.0);
	EXPECT_FALSE(rl_token_bucket_take(&d.next, kT0, &limit, 1).allowed);

	// A capacity a few ulps below a whole number still gives the whole token.
	const RlTokenBucketLimit odd = Limit(0.29, 100.0, 29);
	const RlTokenBucketDecision o = rl_token_bucket_take(nullptr, kT0, &odd, 29);
	EXPECT_TRUE(o.allowed);
	EXPECT_EQ(o.remaining, 0);
	EXPECT_EQ(o.next.tokens, 0);
	EXPECT_GE(o.next.fraction, 0.0);
	EXPECT_LT(o.next.fraction, RL_TOKEN_EPSILON);
	const RlTokenBucketDecision refill = rl_token_bucket_take(&o.next, kT0 + 100 * kSecond, &odd, 29);
	EXPECT_TRUE(refill.allowed);
	EXPECT_EQ(refill.remaining, 0);
}

TEST(TokenBucketTake, EpsilonKeepsWholeTokensFromDecimalRates)
{
	// rate 0.3, window 10: capacity 3.
	const RlTokenBucketLimit limit = Limit(0.3, 10.0, 0);
	const RlTokenBucketState empty{0, 0.0, kT0};

	const RlTokenBucketDecision three_s = rl_token_bucket_take(&empty, kT0 + 3 * kSecond, &limit, 0);
	EXPECT_EQ(three_s.remaining, 0);
	EXPECT_EQ(three_s.next.tokens, 0);
	EXPECT_NEAR(three_s.next.fraction, 0.9, 1e-12);
	// token_bucket.cpp multiplies by the microsecond count before dividing
	// so that this is the double nearest 0.9, not 0.3 * 3 = 0.8999999999999999.
	EXPECT_EQ(three_s.next.fraction, 0.9);

	const RlTokenBucketDecision ten_s = rl_token_bucket_take(&empty, kT0 + 10 * kSecond, &limit, 0);
	EXPECT_EQ(ten_s.remaining, 3);
	const RlTokenBucketDecision take3 = rl_token_bucket_take(&empty, kT0 + 10 * kSecond, &limit, 3);
	EXPECT_TRUE(take3.allowed);
	EXPECT_EQ(take3.remaining, 0);

	// 0.9 + 0.3 + 0.3 + ... : after 10/3 s worth of refill one whole token.
	const RlTokenBucketDecision one = rl_token_bucket_take(&three_s.next, kT0 + 3 * kSecond + 333334, &limit, 1);
	EXPECT_TRUE(one.allowed);
	EXPECT_EQ(one.remaining, 0);
}

TEST(TokenBucketTake, EpsilonKeepsWholeTokensAcrossStoredFractions)
{
	// rate 0.7, a call every second after emptying: exact arithmetic gives
	// 0.7 R, 1.4 A, 1.1 A, 0.8 R, 1.5 A, 1.2 A, 0.9 R, 1.6 A, 1.3 A, 1.0 A.
	// The last one is 0.3 + 0.7, which doubles put a hair below 1.
	const RlTokenBucketLimit limit = Limit(0.7, 10.0);
	Key key;
	for (int i = 0; i < 7; i++)
		ASSERT_TRUE(key.Take(kT0, limit, 1).allowed);
	ASSERT_FALSE(key.Take(kT0, limit, 1).allowed);
	const bool expected[] = {false, true, true, false, true, true, false, true, true, true};
	int admitted = 0;
	for (int i = 1; i <= 10; i++)
	{
		const RlTokenBucketDecision d = key.Take(kT0 + i * kSecond, limit, 1);
		EXPECT_EQ(d.allowed, expected[i - 1]) << "second " << i;
		admitted += d.allowed;
	}
	EXPECT_EQ(admitted, 7);
	EXPECT_EQ(key.stored->tokens, 0);
	EXPECT_NEAR(key.stored->fraction, 0.0, 1e-9);
	EXPECT_GE(key.stored->fraction, 0.0);
}

TEST(TokenBucketTake, FractionReachingOneCarriesIntoWholeToken)
{
	const RlTokenBucketLimit limit = Limit(1.0, 10.0, 0);
	// 0.5 stored + 0.5 refilled is exactly one token, not 0 + a fraction of 1.
	const RlTokenBucketState half{2, 0.5, kT0};
	const RlTokenBucketDecision peek = rl_token_bucket_take(&half, kT0 + kSecond / 2, &limit, 0);
	EXPECT_TRUE(peek.allowed);
	EXPECT_EQ(peek.remaining, 3);
	EXPECT_EQ(peek.next.tokens, 3);
	EXPECT_EQ(peek.next.fraction, 0.0);
	const RlTokenBucketDecision take = rl_token_bucket_take(&half, kT0 + kSecond / 2, &limit, 1);
	EXPECT_TRUE(take.allowed);
	EXPECT_EQ(take.remaining, 2);
	EXPECT_EQ(take.next.tokens, 2);
	EXPECT_EQ(take.next.fraction, 0.0);
	// Refused with the carry: cost 4 against exactly 3 tokens.
	const RlTokenBucketDecision refused = rl_token_bucket_take(&half, kT0 + kSecond / 2, &limit, 4);
	EXPECT_FALSE(refused.allowed);
	EXPECT_EQ(refused.next.tokens, 3);
	EXPECT_EQ(refused.next.fraction, 0.0);
	// The largest fraction below 1 plus a refill of 0.75 carries too.
	const RlTokenBucketState almost{0, std::nextafter(1.0, 0.0), kT0};
	const RlTokenBucketDecision a = rl_token_bucket_take(&almost, kT0 + 3 * kSecond / 4, &limit, 0);
	EXPECT_EQ(a.next.tokens, 1);
	EXPECT_NEAR(a.next.fraction, 0.75, 1e-15);
	EXPECT_LT(a.next.fraction, 1.0);
}

TEST(TokenBucketTake, StateCarriesTokensAndStamp)
{
	const RlTokenBucketLimit limit = Limit(2.0, 5.0);	 // capacity 10
	Key key;
	const RlTokenBucketDecision a = key.Take(kT0, limit, 4);
	EXPECT_EQ(a.remaining, 6);
	const RlTokenBucketDecision b = key.Take(kT0 + 1250000, limit, 3);	// +2.5 tokens
	EXPECT_TRUE(b.allowed);
	EXPECT_EQ(b.remaining, 5);
	EXPECT_TRUE(b.state_changed);
	EXPECT_EQ(b.next.tokens, 5);
	EXPECT_DOUBLE_EQ(b.next.fraction, 0.5);
	EXPECT_EQ(b.next.stamp_us, kT0 + 1250000);
	// Refill stops at the capacity.
	const RlTokenBucketDecision c = key.Take(kT0 + 100 * kSecond, limit, 1);
	EXPECT_EQ(c.remaining, 9);
	EXPECT_EQ(c.next.tokens, 9);
	EXPECT_EQ(c.next.fraction, 0.0);
}

// ---- Hand-edited stored state ----
//
// The glue stores the state in a table that a superuser can edit.  Whatever
// is there, a decision must be sane and free of undefined behaviour: a whole
// token count outside [0, 2^53] is clamped into it, a fraction outside
// [0, 1) (NaN included) counts as 0, and the result is then clamped to the
// capacity as usual.

constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// The state rl_token_bucket_take is documented to use in place of `bad`.
RlTokenBucketState Sanitised(const RlTokenBucketState &bad)
{
	RlTokenBucketState s = bad;
	s.tokens = std::clamp<int64_t>(bad.tokens, 0, RL_MAX_CAPACITY_INT);
	if (!(bad.fraction >= 0.0 && bad.fraction < 1.0))
		s.fraction = 0.0;
	return s;
}

// A sane decision: remaining in [-1, capacity] (-1 exactly when refused),
// and a next state that is itself valid for the limit.
void ExpectSane(const RlTokenBucketDecision &d, const RlTokenBucketState &prior, int64_t now,
				const RlTokenBucketLimit &limit, int64_t cost, const std::string &where)
{
	// RL_TOKEN_EPSILON lets a capacity a few ulps below a whole number
	// report that whole number.
	const int64_t max_remaining = static_cast<int64_t>(std::floor(limit.capacity + RL_TOKEN_EPSILON));
	if (d.allowed)
	{
		EXPECT_GE(d.remaining, 0) << where;
		EXPECT_LE(d.remaining, max_remaining) << where;
	}
	else
		EXPECT_EQ(d.remaining, -1) << where;
	EXPECT_EQ(d.state_changed, d.allowed && cost > 0) << where;
	EXPECT_GE(d.next.tokens, 0) << where;
	EXPECT_LE(d.next.tokens, static_cast<int64_t>(std::floor(limit.capacity))) << where;
	EXPECT_TRUE(d.next.fraction >= 0.0 && d.next.fraction < 1.0)
		<< where << ": next.fraction " << d.next.fraction;
	// Exact: tokens <= floor(capacity) <= 2^53, so the sum is compared as a
	// long double with 64 bits of mantissa, rounded monotonically.
	EXPECT_LE(static_cast<long double>(d.next.tokens) + d.next.fraction,
			  static_cast<long double>(limit.capacity))
		<< where;
	EXPECT_EQ(d.next.stamp_us, std::max(prior.stamp_us, now)) << where;
}

std::string Describe(const RlTokenBucketState &s, int64_t now, double capacity, int64_t cost)
{
	std::ostringstream os;
	os.precision(17);
	os << "state {" << s.tokens << ", " << s.fraction << ", " << s.stamp_us << "} now " << now
	   << " capacity " << capacity << " cost " << cost;
	return os.str();
}

TEST(TokenBucketTake, NegativeStoredTokensCountAsEmpty)
{
	const RlTokenBucketLimit limit = Limit(1.0, 10.0);
	for (int64_t tokens : {int64_t{-1}, int64_t{-5}, int64_t{-1000000000000}, kInt64Min})
	{
		const RlTokenBucketState prior{tokens, 0.0, kT0};
		// Empty: refused at the same instant, nothing stored.
		const RlTokenBucketDecision now = rl_token_bucket_take(&prior, kT0, &limit, 1);
		EXPECT_FALSE(now.allowed) << tokens;
		EXPECT_EQ(now.remaining, -1) << tokens;
		EXPECT_FALSE(now.state_changed) << tokens;
		// 2.5 s later: 2.5 tokens, no debt carried over.
		const RlTokenBucketDecision later =
			rl_token_bucket_take(&prior, kT0 + 2 * kSecond + kSecond / 2, &limit, 1);
		EXPECT_TRUE(later.allowed) << tokens;
		EXPECT_EQ(later.remaining, 1) << tokens;
		EXPECT_TRUE(later.state_changed) << tokens;
		EXPECT_EQ(later.next.tokens, 1) << tokens;
		EXPECT_EQ(later.next.fraction, 0.5) << tokens;
		// With a valid fraction beside it, the fraction is kept.
		const RlTokenBucketState half{tokens, 0.5, kT0};
		const RlTokenBucketDecision h = rl_token_bucket_take(&half, kT0 + kSecond / 2, &limit, 1);
		EXPECT_TRUE(h.allowed) << tokens;
		EXPECT_EQ(h.remaining, 0) << tokens;
		EXPECT_EQ(h.next.tokens, 0) << tokens;
		EXPECT_EQ(h.next.fraction, 0.0) << tokens;
	}
}

TEST(TokenBucketTake, HugeStoredTokensAreClampedToCapacity)
{
	// Capacity 10, and the largest capacity, 2^53: tokens + refill must not
	// overflow the int64 whole part however large the stored count is.
	const RlTokenBucketLimit small = Limit(1.0, 10.0);
	const RlTokenBucketLimit big = Limit(4503599627370496.0, 2.0);
	ASSERT_EQ(big.capacity, RL_MAX_CAPACITY);
	for (int64_t tokens : {RL_MAX_CAPACITY_INT, RL_MAX_CAPACITY_INT + 1, kInt64Max - 1, kInt64Max})
		for (double fraction : {0.0, 0.5, std::nextafter(1.0, 0.0)})
		{
			const RlTokenBucketState prior{tokens, fraction, kT0};
			const std::string where = std::to_string(tokens) + " + " + std::to_string(fraction);

			const RlTokenBucketDecision s = rl_token_bucket_take(&prior, kT0 + kSecond, &small, 1);
			EXPECT_TRUE(s.allowed) << where;
			EXPECT_EQ(s.remaining, 9) << where;
			EXPECT_EQ(s.next.tokens, 9) << where;
			EXPECT_EQ(s.next.fraction, 0.0) << where;

			// Same instant, 1 us and 1 s later (refills of 0, 4.5e9 and 2^52
			// tokens added to the clamped count): always the full 2^53.
			for (int64_t later : {int64_t{0}, int64_t{1}, kSecond})
			{
				const RlTokenBucketDecision b = rl_token_bucket_take(&prior, kT0 + later, &big, 1);
				EXPECT_TRUE(b.allowed) << where << " +" << later;
				EXPECT_EQ(b.remaining, RL_MAX_CAPACITY_INT - 1) << where << " +" << later;
				EXPECT_EQ(b.next.tokens, RL_MAX_CAPACITY_INT - 1) << where << " +" << later;
				EXPECT_EQ(b.next.fraction, 0.0) << where << " +" << later;
				const RlTokenBucketDecision peek = rl_token_bucket_take(&prior, kT0 + later, &big, 0);
				EXPECT_EQ(peek.remaining, RL_MAX_CAPACITY_INT) << where << " +" << later;
			}
		}
}

TEST(TokenBucketTake, InvalidStoredFractionCountsAsZero)
{
	const RlTokenBucketLimit limit = Limit(1.0, 10.0);
	for (double fraction : {kNaN, -kNaN, kInf, -kInf, -0.5, 1.5, 1.0, -1e-300,
							std::nextafter(1.0, 2.0), 1e300, -1e300})
	{
		const RlTokenBucketState prior{3, fraction, kT0};
		const std::string where = "fraction " + std::to_string(fraction);
		// Three whole tokens: cost 3 admitted, cost 4 refused.
		const RlTokenBucketDecision d = rl_token_bucket_take(&prior, kT0, &limit, 1);
		EXPECT_TRUE(d.allowed) << where;
		EXPECT_EQ(d.remaining, 2) << where;
		EXPECT_EQ(d.next.tokens, 2) << where;
		EXPECT_EQ(d.next.fraction, 0.0) << where;
		EXPECT_TRUE(rl_token_bucket_take(&prior, kT0, &limit, 3).allowed) << where;
		const RlTokenBucketDecision four = rl_token_bucket_take(&prior, kT0, &limit, 4);
		EXPECT_FALSE(four.allowed) << where;
		EXPECT_EQ(four.remaining, -1) << where;
		// 0.25 s of refill adds 0.25, not 0.25 + the bad fraction.
		const RlTokenBucketDecision r = rl_token_bucket_take(&prior, kT0 + kSecond / 4, &limit, 0);
		EXPECT_EQ(r.remaining, 3) << where;
		EXPECT_EQ(r.next.tokens, 3) << where;
		EXPECT_EQ(r.next.fraction, 0.25) << where;
		EXPECT_FALSE(rl_token_bucket_take(&prior, kT0 + kSecond / 4, &limit, 4).allowed) << where;
	}
}

// Every combination of bad fields, limits, instants and costs: a sane
// decision, identical to the one for the sanitised state.
TEST(TokenBucketTake, HandEditedStateGivesSaneDecision)
{
	struct Case
	{
		double rate;
		double window;
	};
	const Case limits[] = {
		{1.0, 10.0},				  // capacity 10
		{0.5, 5.0},					  // capacity 2.5
		{0.29, 100.0},				  // capacity a few ulps below 29
		{4503599627370496.0, 2.0},	  // capacity 2^53
		{std::numeric_limits<double>::max(), 1e-300},	// refill always overflows
	};
	const int64_t token_values[] = {kInt64Min, -RL_MAX_CAPACITY_INT, -1, 0, 1, 3,
									RL_MAX_CAPACITY_INT - 1, RL_MAX_CAPACITY_INT,
									RL_MAX_CAPACITY_INT + 1, kInt64Max};
	const double fraction_values[] = {kNaN, -kNaN, kInf, -kInf, -0.5, -0.0, 0.0, 0.5,
									  std::nextafter(1.0, 0.0), 1.0, 1.5,
									  std::numeric_limits<double>::denorm_min()};
	const int64_t stamps[] = {kT0, kInt64Min, kInt64Max};
	const int64_t offsets[] = {0, 1, kSecond / 4, 1000 * kSecond, -kSecond};
	int64_t checked = 0;
	for (const Case &c : limits)
	{
		RlTokenBucketLimit base{};
		ASSERT_EQ(rl_token_bucket_limit(c.rate, c.window, 0, &base), RL_PARAM_OK);
		const int64_t cap_floor = static_cast<int64_t>(std::floor(base.capacity));
		std::vector<int64_t> costs = {0, 1, 2, cap_floor / 2, cap_floor};
		for (int64_t tokens : token_values)
			for (double fraction : fraction_values)
				for (int64_t stamp : stamps)
					for (int64_t offset : offsets)
						for (int64_t cost : costs)
						{
							RlTokenBucketLimit limit{};
							// Every cost is <= floor(capacity).
							ASSERT_EQ(rl_token_bucket_limit(c.rate, c.window, cost, &limit), RL_PARAM_OK);
							// Saturating: stamp + offset stays in the int64 range.
							int64_t now;
							if (__builtin_add_overflow(stamp, offset, &now))
								now = offset > 0 ? kInt64Max : kInt64Min;
							const RlTokenBucketState prior{tokens, fraction, stamp};
							const std::string where = Describe(prior, now, limit.capacity, cost);
							const RlTokenBucketDecision d =
								rl_token_bucket_take(&prior, now, &limit, cost);
							ExpectSane(d, prior, now, limit, cost, where);

							const RlTokenBucketState clean = Sanitised(prior);
							const RlTokenBucketDecision e =
								rl_token_bucket_take(&clean, now, &limit, cost);
							EXPECT_EQ(d.allowed, e.allowed) << where;
							EXPECT_EQ(d.remaining, e.remaining) << where;
							EXPECT_EQ(d.state_changed, e.state_changed) << where;
							EXPECT_TRUE(SameState(d.next, e.next)) << where;
							checked++;
							if (::testing::Test::HasFailure())
								return;	// one broken case is enough to read
						}
	}
	EXPECT_GT(checked, 20000);
}

}  // namespace
