// Unit tests of rl_counter_debt and rl_token_bucket_debt: what forgetting a
// key costs.  Each answer is held to the take's own (the debt is worked out
// without it, for speed), and the bound the shmem store documents is checked
// by forgetting keys: a forgotten key lets through at most `missing` more
// calls than the limit would have.
#include "zone_harness.h"

#include <gtest/gtest.h>

#include <random>

namespace {

using namespace zone_test;

const RlAlgorithm kAlgorithms[] = {
	RL_ALGORITHM_TOKEN_BUCKET, RL_ALGORITHM_GCRA, RL_ALGORITHM_FIXED_WINDOW,
	RL_ALGORITHM_SLIDING_WINDOW_COUNTER, RL_ALGORITHM_CRON_TOKEN_BUCKET,
};

// The debt as the take defines it.
void ExpectDebtAgreesWithTake(const RlZoneLimit &limit, const RlCounterState &state, int64_t now,
							  const std::string &where)
{
	const RlKeyDebt debt = rl_counter_debt(&limit, &state, now);
	RlCounterState next{};
	const RlDecision peek = rl_counter_take(&limit, &state, now, 0, &next);
	const bool idle = rl_counter_idle(&limit, &state, now);
	const bool admits_one = rl_counter_take(&limit, &state, now, 1, &next).allowed;

	ASSERT_EQ(debt.idle, idle) << where;
	ASSERT_EQ(debt.missing, idle ? 0 : std::max<int64_t>(0, limit.capacity - peek.remaining)) << where;
	ASSERT_EQ(debt.refusing, !admits_one) << where;
	ASSERT_GE(debt.shortfall, 0.0) << where;
	// The fraction of a token refilled is what tells two keys of one limit
	// apart; it never exceeds the whole tokens missing, nor falls a token
	// below them.
	ASSERT_LE(debt.shortfall, static_cast<double>(debt.missing) + 1e-6) << where;
	ASSERT_GT(debt.shortfall, static_cast<double>(debt.missing) - 1.0 - 1e-6) << where;
	if (idle)
	{
		ASSERT_EQ(debt.shortfall, 0.0) << where;
	}
}

TEST(KeyDebt, NewKeyAfterOneCall)
{
	for (RlAlgorithm algorithm : kAlgorithms)
	{
		RlZoneLimit limit = MakeLimit(algorithm, 10, kMinute);
		limit.refill_tick_us = kSecond;
		RlCounterState state{};
		ASSERT_TRUE(rl_counter_take(&limit, nullptr, kT0, 3, &state).allowed);
		const RlKeyDebt debt = rl_counter_debt(&limit, &state, kT0);
		EXPECT_FALSE(debt.idle) << AlgorithmName(algorithm);
		EXPECT_EQ(debt.missing, 3) << AlgorithmName(algorithm);
		EXPECT_FALSE(debt.refusing) << AlgorithmName(algorithm);
	}
}

TEST(KeyDebt, DrainedKeyRefuses)
{
	for (RlAlgorithm algorithm : kAlgorithms)
	{
		RlZoneLimit limit = MakeLimit(algorithm, 5, kMinute);
		RlCounterState state{};
		ASSERT_TRUE(rl_counter_take(&limit, nullptr, kT0, 5, &state).allowed);
		const RlKeyDebt debt = rl_counter_debt(&limit, &state, kT0);
		EXPECT_TRUE(debt.refusing) << AlgorithmName(algorithm);
		EXPECT_EQ(debt.missing, 5) << AlgorithmName(algorithm);
	}
}

// A token bucket half a period after being drained has refilled half: the
// shortfall keeps the part token that ranks it against another key.
TEST(KeyDebt, TokenBucketShortfallKeepsTheRefilledFraction)
{
	const RlZoneLimit limit = MakeLimit(RL_ALGORITHM_TOKEN_BUCKET, 4, kSecond);
	RlCounterState state{};
	ASSERT_TRUE(rl_counter_take(&limit, nullptr, kT0, 4, &state).allowed);
	const RlKeyDebt debt = rl_counter_debt(&limit, &state, kT0 + 3 * kSecond / 8);	// 1.5 back
	EXPECT_EQ(debt.missing, 3);
	EXPECT_DOUBLE_EQ(debt.shortfall, 2.5);
	EXPECT_FALSE(debt.refusing);
}

TEST(KeyDebt, AdHocBucket)
{
	RlTokenBucketLimit limit{};
	ASSERT_EQ(rl_token_bucket_limit(1.5, 3, 1, &limit), RL_PARAM_OK);	// capacity 4.5
	const RlTokenBucketDecision first = rl_token_bucket_take(nullptr, kT0, &limit, 2);
	ASSERT_TRUE(first.allowed);
	RlKeyDebt debt = rl_token_bucket_debt(&first.next, kT0, &limit);
	EXPECT_EQ(debt.missing, 2);	// a new bucket admits 4 whole tokens, this one 2
	EXPECT_DOUBLE_EQ(debt.shortfall, 2.0);
	EXPECT_FALSE(debt.idle);
	debt = rl_token_bucket_debt(&first.next, kT0 + 2 * kSecond, &limit);
	EXPECT_TRUE(debt.idle);
	EXPECT_EQ(debt.missing, 0);
}

// Random keys, worked by random calls and refunds, then weighed at random
// times (before their clock too): the debt is what the take says.
TEST(KeyDebt, AgreesWithTheTakeOnRandomKeys)
{
	std::mt19937_64 rng(20261128);
	for (RlAlgorithm algorithm : kAlgorithms)
	{
		for (int run = 0; run < 300; run++)
		{
			const int64_t rate = Uniform(rng, 1, Chance(rng, 0.5) ? 10 : 1000000);
			const int64_t period = Uniform(rng, 1, Chance(rng, 0.5) ? kSecond : 1000 * kMinute);
			const bool has_burst = algorithm == RL_ALGORITHM_TOKEN_BUCKET || algorithm == RL_ALGORITHM_GCRA ||
				algorithm == RL_ALGORITHM_CRON_TOKEN_BUCKET;
			const int64_t burst = has_burst && Chance(rng, 0.5) ? Uniform(rng, 1, 3 * rate) : -1;
			RlZoneLimit limit{};
			if (rl_zone_limit(algorithm, rate, period, burst, &limit) != RL_ZONE_OK)
				continue;
			limit.refill_tick_us = Chance(rng, 0.5) ? Uniform(rng, 1, period) : 0;
			CounterKey key{limit, std::nullopt};
			int64_t now = kT0;
			for (int step = 0; step < 40; step++)
			{
				now += Uniform(rng, -period / 4, period / 2);
				if (Chance(rng, 0.2) && key.stored)
					(void) key.Refund(now, Uniform(rng, 1, limit.capacity));
				else
					(void) key.Take(now, Uniform(rng, 0, limit.capacity));
				if (!key.stored)
					continue;
				const int64_t at = now + Uniform(rng, -period, 2 * period);
				ExpectDebtAgreesWithTake(limit, *key.stored, at,
										 std::string(AlgorithmName(algorithm)) + " run " +
										 std::to_string(run) + " step " + std::to_string(step));
				if (HasFatalFailure())
					return;
			}
		}
	}
}

// The weighing a store ranks a set's keys by agrees with the debt: exactly
// for the window algorithms and GCRA, and for a token bucket to a millionth
// of a token (its flags may differ only that close to a boundary).
TEST(KeyDebt, WeighingAgreesWithTheDebt)
{
	std::mt19937_64 rng(99);
	for (RlAlgorithm algorithm : kAlgorithms)
	{
		for (int run = 0; run < 300; run++)
		{
			const int64_t rate = Uniform(rng, 1, Chance(rng, 0.5) ? 10 : 1000000);
			const int64_t period = Uniform(rng, 1, Chance(rng, 0.5) ? kSecond : 1000 * kMinute);
			RlZoneLimit limit{};
			if (rl_zone_limit(algorithm, rate, period, -1, &limit) != RL_ZONE_OK)
				continue;
			CounterKey key{limit, std::nullopt};
			int64_t now = kT0;
			for (int step = 0; step < 30; step++)
			{
				now += Uniform(rng, -period / 4, period / 2);
				(void) key.Take(now, Uniform(rng, 0, limit.capacity));
				if (!key.stored)
					continue;
				const int64_t at = now + Uniform(rng, -period, 2 * period);
				const RlKeyDebt debt = rl_counter_debt(&limit, &*key.stored, at);
				const RlKeyDebt weight = rl_counter_weigh(&limit, &*key.stored, at);
				const std::string where = std::string(AlgorithmName(algorithm)) + " run " + std::to_string(run) +
					" step " + std::to_string(step);
				ASSERT_EQ(weight.missing, 0) << where;
				ASSERT_NEAR(weight.shortfall, debt.shortfall, 1e-6 * std::max<double>(1.0, limit.capacity)) << where;
				const bool token_bucket = algorithm == RL_ALGORITHM_TOKEN_BUCKET;
				if (!token_bucket || std::abs(debt.shortfall - (static_cast<double>(limit.capacity) - 1.0)) > 1e-6)
				{
					ASSERT_EQ(weight.refusing, debt.refusing) << where;
				}
				if (!token_bucket || debt.idle || debt.shortfall > 1e-6)
				{
					ASSERT_EQ(weight.idle, debt.idle) << where;
				}
			}
		}
	}
}

// The bound the shmem store documents: forgetting a key at t lets through
// at most debt.missing more calls than keeping it.  For the token bucket,
// GCRA and the sliding-window counter (windows aligned to the clock) that
// holds over any calls after t.  A fixed window opens at a key's first
// call, so a forgotten key also moves its windows: two such keys drift
// apart over time (each within its own limit), and the bound holds over
// the window that was open at t, after which the key is limited as any new
// key.
TEST(KeyDebt, ForgettingAKeyAdmitsAtMostItsMissingTokensMore)
{
	std::mt19937_64 rng(7);
	for (RlAlgorithm algorithm : kAlgorithms)
	{
		if (algorithm == RL_ALGORITHM_CRON_TOKEN_BUCKET)
			continue;			// refilled by a job, not by time: the shmem store never holds it
		for (int run = 0; run < 300; run++)
		{
			const int64_t rate = Uniform(rng, 1, 20);
			const int64_t period = Uniform(rng, kSecond / 10, kMinute);
			const RlZoneLimit limit = MakeLimit(algorithm, rate, period);
			CounterKey kept{limit, std::nullopt};
			int64_t now = kT0;
			for (int step = 0, calls = static_cast<int>(Uniform(rng, 1, 30)); step < calls; step++)
			{
				now += Uniform(rng, 0, period / 5);
				(void) kept.Take(now, Uniform(rng, 1, limit.capacity));
			}
			if (!kept.stored)
				continue;
			const RlKeyDebt debt = rl_counter_debt(&limit, &*kept.stored, now);
			const int64_t window_end = kept.stored->stamp_us + period;
			const int64_t spacing = period / Uniform(rng, 1, 20);
			CounterKey forgotten{limit, std::nullopt};
			int64_t extra = 0;
			for (int step = 0; step < 300; step++)
			{
				now += Uniform(rng, 0, spacing);
				if (algorithm == RL_ALGORITHM_FIXED_WINDOW && now >= window_end)
					break;
				extra += forgotten.Take(now, 1).allowed;
				extra -= kept.Take(now, 1).allowed;
				ASSERT_LE(extra, debt.missing) << AlgorithmName(algorithm) << " run " << run << " step " << step;
			}
		}
	}
}

}  // namespace
