// Unit tests of rl_counter_idle and rl_token_bucket_idle: a store may forget
// a key they call idle, so every later call must decide exactly as for a
// key never seen.
#include "zone_harness.h"

#include <gtest/gtest.h>

#include <random>

namespace {

using namespace zone_test;

const RlAlgorithm kFixedStateAlgorithms[] = {
	RL_ALGORITHM_TOKEN_BUCKET, RL_ALGORITHM_GCRA, RL_ALGORITHM_FIXED_WINDOW,
	RL_ALGORITHM_SLIDING_WINDOW_COUNTER,
};

// Decisions that matter to a caller (decided_at aside: a new key has no
// clock to hold back).
void ExpectSameAnswer(const RlDecision &a, const RlDecision &b, const std::string &where)
{
	EXPECT_EQ(a.allowed, b.allowed) << where;
	EXPECT_EQ(a.remaining, b.remaining) << where;
	EXPECT_EQ(a.retry_after_us, b.retry_after_us) << where;
	EXPECT_EQ(a.reset_after_us, b.reset_after_us) << where;
}

TEST(CounterIdle, NewKeyStateIsIdleOnlyWhenRecovered)
{
	for (RlAlgorithm algorithm : kFixedStateAlgorithms)
	{
		const RlZoneLimit limit = MakeLimit(algorithm, 10, kMinute);
		RlCounterState state{};
		const RlDecision first = rl_counter_take(&limit, nullptr, kT0, 1, &state);
		ASSERT_TRUE(first.allowed) << AlgorithmName(algorithm);
		EXPECT_FALSE(rl_counter_idle(&limit, &state, kT0)) << AlgorithmName(algorithm);
		// Two periods on, every algorithm is back to its full allowance.
		EXPECT_TRUE(rl_counter_idle(&limit, &state, kT0 + 2 * kMinute)) << AlgorithmName(algorithm);
	}
}

// A refund can leave a key full with a later clock than a backend's: at an
// earlier time it decides at its own time, which a new key would not; idle
// only where no caller could tell (found by test/fuzz/core_fuzz.cpp: a
// sliding_window_counter's reset_after differed).
TEST(CounterIdle, FullKeyWithALaterClockIsNotIdleBeforeIt)
{
	for (RlAlgorithm algorithm : kFixedStateAlgorithms)
	{
		const RlZoneLimit limit = MakeLimit(algorithm, 10, kMinute);
		const int64_t t = kT0 + 30 * kSecond;
		RlCounterState taken{};
		RlCounterState refunded{};
		ASSERT_TRUE(rl_counter_take(&limit, nullptr, t, 1, &taken).allowed) << AlgorithmName(algorithm);
		(void) rl_counter_refund(&limit, &taken, t, 1, &refunded);
		const int64_t earlier = t - kSecond / 1000;
		RlCounterState next{};
		const RlDecision kept = rl_counter_take(&limit, &refunded, earlier, 1, &next);
		const RlDecision fresh = rl_counter_take(&limit, nullptr, earlier, 1, &next);
		if (rl_counter_idle(&limit, &refunded, earlier))
			ExpectSameAnswer(kept, fresh, AlgorithmName(algorithm));
		EXPECT_TRUE(rl_counter_idle(&limit, &refunded, t + 2 * kMinute)) << AlgorithmName(algorithm);
	}
}

TEST(CounterIdle, IdleStateDecidesAsANewKey)
{
	std::mt19937_64 rng(20261121);
	int idle_seen = 0;
	int busy_seen = 0;
	for (RlAlgorithm algorithm : kFixedStateAlgorithms)
	{
		for (int sequence = 0; sequence < 300; sequence++)
		{
			const int64_t rate = Uniform(rng, 1, 50);
			const int64_t period = Uniform(rng, 1, 5 * kSecond);
			const bool has_burst = algorithm == RL_ALGORITHM_TOKEN_BUCKET || algorithm == RL_ALGORITHM_GCRA;
			const RlZoneLimit limit = MakeLimit(algorithm, rate, period,
												has_burst && Chance(rng, 0.5) ? Uniform(rng, 1, 60) : -1);
			RlCounterState state{};
			bool stored = false;
			int64_t now = kT0;
			for (int step = 0; step < 30; step++)
			{
				now += Chance(rng, 0.3) ? Uniform(rng, 0, 3 * period) : Uniform(rng, 0, period / 4 + 1);
				RlCounterState next{};
				const RlDecision d = rl_counter_take(&limit, stored ? &state : nullptr, now,
													 Uniform(rng, 0, limit.capacity), &next);
				if (d.state_changed)
				{
					state = next;
					stored = true;
				}
				if (!stored)
					continue;
				const int64_t later = now + Uniform(rng, 0, 2 * period);
				if (!rl_counter_idle(&limit, &state, later))
				{
					busy_seen++;
					continue;
				}
				idle_seen++;
				// From later on, a few calls: with the state and as a new key.
				RlCounterState with_state = state;
				std::optional<RlCounterState> fresh;
				int64_t t = later;
				for (int call = 0; call < 5; call++)
				{
					// The whole allowance first: what tells a full key from a new one.
					const int64_t cost = call == 0 ? limit.capacity : Uniform(rng, 0, limit.capacity);
					RlCounterState a{};
					RlCounterState b{};
					const RlDecision da = rl_counter_take(&limit, &with_state, t, cost, &a);
					const RlDecision db = rl_counter_take(&limit, fresh ? &*fresh : nullptr, t, cost, &b);
					ExpectSameAnswer(da, db, std::string(AlgorithmName(algorithm)) + " call " +
									 std::to_string(call));
					if (da.state_changed)
						with_state = a;
					if (db.state_changed)
						fresh = b;
					t += Uniform(rng, 0, period / 3 + 1);
				}
			}
		}
	}
	// Both branches were exercised.
	EXPECT_GT(idle_seen, 1000);
	EXPECT_GT(busy_seen, 1000);
}

TEST(TokenBucketIdle, FullAgainIsIdle)
{
	RlTokenBucketLimit limit{};
	ASSERT_EQ(rl_token_bucket_limit(1, 10, 1, &limit), RL_PARAM_OK);
	const RlTokenBucketDecision d = rl_token_bucket_take(nullptr, kT0, &limit, 3);
	ASSERT_TRUE(d.allowed);
	EXPECT_FALSE(rl_token_bucket_idle(&d.next, kT0, &limit));
	EXPECT_FALSE(rl_token_bucket_idle(&d.next, kT0 + 2 * kSecond, &limit));
	EXPECT_FALSE(rl_token_bucket_idle(&d.next, kT0 + 3 * kSecond - 1, &limit));
	EXPECT_TRUE(rl_token_bucket_idle(&d.next, kT0 + 3 * kSecond, &limit));
	// A clock behind the state counts as no time passing.
	EXPECT_FALSE(rl_token_bucket_idle(&d.next, kT0 - kMinute, &limit));
}

}  // namespace
