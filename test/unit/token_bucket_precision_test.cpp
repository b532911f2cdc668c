// Precision of the fractional tokens at large capacities (the contract:
// "Fractions of tokens are kept: over any run, admitted <= capacity + rate x
// elapsed, and never more than one token below it").
//
// Were the tokens kept in one double, near a capacity C the spacing of
// doubles would be about C * 2^-52, and each call would round tokens + refill
// and tokens - cost to it.  When the refill per call is not a multiple of
// that spacing the rounding errors accumulate call after call, in one
// direction, instead of staying below one token as required (at
// 2^53 the spacing is a whole token).  The state therefore keeps whole
// tokens in an int64 and the fraction in a separate double in [0, 1).  The
// model tests keep capacities <= 10^6; these tests check the fractions up to
// the largest capacity rl_token_bucket_limit accepts.
#include "core/rl_core.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <optional>

namespace {

using i128 = __int128;

long double ToLd(i128 v)
{
	return v < 0 ? -static_cast<long double>(static_cast<unsigned __int128>(-v))
				 : static_cast<long double>(static_cast<unsigned __int128>(v));
}

struct Outcome
{
	long double stored_tokens;	 // the implementation's stored tokens at the end
	long double exact_tokens;	 // the exact model's
	long double drift;		 // stored - exact, computed without rounding the whole parts
	long double excess;		 // admitted - (capacity + rate * elapsed), in tokens
	int64_t admitted_calls;
};

// A new key at t = 0, then `calls` calls of cost 1 every `gap_us`, at an
// integer rate (tokens per second); then, at the same instant as the last
// call, one call asking for every whole token the implementation holds.
// The exact model counts in millionths of a token: rate r adds r per us.
Outcome RunCalls(int64_t rate, double window, int calls, int64_t gap_us)
{
	RlTokenBucketLimit limit{};
	EXPECT_EQ(rl_token_bucket_limit(static_cast<double>(rate), window, 1, &limit), RL_PARAM_OK);
	std::optional<RlTokenBucketState> stored;
	const i128 cap = static_cast<i128>(limit.capacity) * 1000000;	// capacity is whole here
	i128 exact = cap;
	i128 admitted = 0;
	int64_t now = 0;
	int64_t admitted_calls = 0;
	for (int k = 0; k <= calls; k++)
	{
		if (k > 0)
		{
			now += gap_us;
			exact = std::min(cap, exact + static_cast<i128>(rate) * gap_us);
		}
		const RlTokenBucketDecision d =
			rl_token_bucket_take(stored ? &*stored : nullptr, now, &limit, 1);
		if (d.state_changed)
			stored = d.next;
		if (d.allowed)
		{
			exact -= 1000000;
			admitted += 1000000;
			admitted_calls++;
		}
	}
	Outcome out;
	EXPECT_TRUE(stored->fraction >= 0.0 && stored->fraction < 1.0) << stored->fraction;
	out.stored_tokens = static_cast<long double>(stored->tokens) + stored->fraction;
	out.exact_tokens = ToLd(exact) / 1e6L;
	out.drift = ToLd(static_cast<i128>(stored->tokens) * 1000000 - exact) / 1e6L + stored->fraction;
	// Drain: ask for all the whole tokens the implementation says it holds
	// (what a cost-0 call reports as remaining).
	const int64_t all = rl_token_bucket_take(&*stored, now, &limit, 0).remaining;
	RlTokenBucketLimit drain{};
	EXPECT_EQ(rl_token_bucket_limit(static_cast<double>(rate), window, all, &drain), RL_PARAM_OK);
	const RlTokenBucketDecision d = rl_token_bucket_take(&*stored, now, &drain, all);
	if (d.allowed)
		admitted += static_cast<i128>(all) * 1000000;
	out.excess = ToLd(admitted - cap - static_cast<i128>(rate) * now) / 1e6L;
	out.admitted_calls = admitted_calls;
	return out;
}

// Sanity check of RunCalls() at a small capacity, where doubles are exact
// enough: the stored tokens follow the exact model and the drain brings the
// admitted total to within one token of capacity + rate * elapsed.
TEST(TokenBucketPrecision, SmallCapacityFollowsExactModel)
{
	// rate 3/s, capacity 3000; every 0.2 s: +0.6 -1.
	const Outcome o = RunCalls(3, 1000.0, 5000, 200000);
	EXPECT_EQ(o.admitted_calls, 5001);
	EXPECT_NEAR(static_cast<double>(o.stored_tokens), static_cast<double>(o.exact_tokens), 1e-6);
	EXPECT_NEAR(static_cast<double>(o.drift), 0.0, 1e-6);
	EXPECT_LE(o.excess, 1e-6L);
	EXPECT_GT(o.excess, -1.0L);
}

TEST(TokenBucketPrecision, MillionTokenCapacityStaysWithinOneToken)
{
	// rate 500/s, capacity 10^6, a call every 1357 us (0.6785 token).
	const Outcome o = RunCalls(500, 2000.0, 100000, 1357);
	EXPECT_NEAR(static_cast<double>(o.stored_tokens), static_cast<double>(o.exact_tokens), 1e-4);
	EXPECT_NEAR(static_cast<double>(o.drift), 0.0, 1e-4);
	EXPECT_LE(o.excess, 1e-4L);
	EXPECT_GT(o.excess, -1.0L);
}

// At the largest accepted capacity, 2^53 (rate 2/s, window 2^52 s), a double
// has no fractions: the 0.6 token refilled between calls 0.3 s apart would
// round up to a whole token every time (tokens stuck at 2^53 - 1 while the
// exact count falls by 0.4 per call, 400 tokens too many admitted after 1000
// calls).  Whole tokens plus a separate fraction keep it exact.
TEST(TokenBucketPrecision, MaximumCapacityKeepsFractionalRefill)
{
	const Outcome o = RunCalls(2, 4503599627370496.0, 1000, 300000);
	EXPECT_NEAR(static_cast<double>(o.stored_tokens - o.exact_tokens), 0.0, 1.0)
		<< "stored " << static_cast<double>(o.stored_tokens) << ", exact "
		<< static_cast<double>(o.exact_tokens);
	EXPECT_NEAR(static_cast<double>(o.drift), 0.0, 1.0)
		<< "stored " << static_cast<double>(o.stored_tokens) << ", exact "
		<< static_cast<double>(o.exact_tokens);
	EXPECT_LE(o.excess, 1e-6L) << "admitted above capacity + rate * elapsed";
	EXPECT_GT(o.excess, -1.0L) << "admitted more than one token below";
}

// The same at a capacity of 10^12 (rate 500/s, window 2e9 s; equally 10^6/s
// over 11.6 days): 100001 calls of cost 1 every 1357 us.  With tokens in one
// double the stored count drifted 3.3 below the exact one (999999967845.68
// against 999999967849), so the final drain admitted 4 tokens fewer than
// capacity + rate * elapsed (less than 1 is allowed); the drift grew
// with the capacity, about 0.08 token at 10^10, 660 at 10^14.
TEST(TokenBucketPrecision, LargeCapacityKeepsFractionalRefill)
{
	const Outcome o = RunCalls(500, 2e9, 100000, 1357);
	EXPECT_NEAR(static_cast<double>(o.stored_tokens - o.exact_tokens), 0.0, 1.0)
		<< "stored " << static_cast<double>(o.stored_tokens) << ", exact "
		<< static_cast<double>(o.exact_tokens);
	EXPECT_NEAR(static_cast<double>(o.drift), 0.0, 1.0)
		<< "stored " << static_cast<double>(o.stored_tokens) << ", exact "
		<< static_cast<double>(o.exact_tokens);
	EXPECT_LE(o.excess, 1e-6L) << "admitted above capacity + rate * elapsed";
	EXPECT_GT(o.excess, -1.0L) << "admitted more than one token below";
}

// Continuous demand starting at base_us: cost 1 every gap_us microseconds,
// calls + 1 calls; returns admitted - (capacity + rate * elapsed), in tokens.
double ContinuousDemandExcess(int64_t base_us, double rate, double window, int64_t gap_us,
							  int calls)
{
	RlTokenBucketLimit limit{};
	EXPECT_EQ(rl_token_bucket_limit(rate, window, 1, &limit), RL_PARAM_OK);
	std::optional<RlTokenBucketState> stored;
	int64_t admitted = 0;
	for (int k = 0; k <= calls; k++)
	{
		const RlTokenBucketDecision d =
			rl_token_bucket_take(stored ? &*stored : nullptr, base_us + k * gap_us, &limit, 1);
		if (d.state_changed)
			stored = d.next;
		admitted += d.allowed;
	}
	return static_cast<double>(admitted) -
		   (limit.capacity + rate * static_cast<double>(calls * gap_us) / 1e6);
}

struct DemandCase
{
	double rate;
	double window;
	int64_t gap_us;
};

// Demand (1 token per gap) outruns the refill in each case.
const DemandCase kDemandCases[] = {
	{1000.0, 0.01, 300},	// capacity 10, 0.3 token per gap
	{5e5, 2e-5, 1},			// capacity 10, 0.5 token per gap
	{3e5, 1e-4, 3},			// capacity 30, 0.9 token per gap
	{0.7, 10.0, 250000},	// capacity 7, 0.175 token per gap
};

TEST(TokenBucketPrecision, ContinuousDemandExactAtRealisticTimestamps)
{
	// 1970, 2000 (the PostgreSQL epoch), 2024, 2142, 2250.
	for (int64_t base : {int64_t{-946684800000000}, int64_t{0}, int64_t{757382400000000},
						 int64_t{1} << 52, int64_t{7900000000000000}})
		for (const DemandCase &c : kDemandCases)
		{
			const double excess = ContinuousDemandExcess(base, c.rate, c.window, c.gap_us, 1000);
			EXPECT_LE(excess, 1e-6) << "base " << base << " rate " << c.rate;
			EXPECT_GT(excess, -1.0) << "base " << base << " rate " << c.rate;
		}
}

// Beyond 2^53 us from the epoch (PostgreSQL epoch + 285 years, i.e. after
// 2285 or before 1715; still valid TimestampTz values, and reachable with
// ratelimit.now_override) an elapsed time computed as double(now_us) -
// double(prior.stamp_us) rounds both instants, so short intervals count as 0
// or as a whole double spacing: e.g. base 2^62 + 7 us, rate 5e5/s, window
// 2e-5 s (capacity 10), cost 1 every microsecond for 1000 us admitted 20
// calls instead of 510 (capacity + rate * elapsed).  The core subtracts in
// uint64, exact whenever now_us > stamp_us.
TEST(TokenBucketPrecision, ContinuousDemandExactAtFarTimestamps)
{
	for (int64_t base : {(int64_t{1} << 53) + 1, (int64_t{1} << 55) + 3, (int64_t{1} << 62) + 7,
						 int64_t{9223371331200000000 - 10000000}})
		for (const DemandCase &c : kDemandCases)
		{
			const double excess = ContinuousDemandExcess(base, c.rate, c.window, c.gap_us, 1000);
			EXPECT_LE(excess, 1e-6) << "base " << base << " rate " << c.rate;
			EXPECT_GT(excess, -1.0) << "base " << base << " rate " << c.rate;
		}
}

}  // namespace
