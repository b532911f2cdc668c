// token_bucket zones with refill => 'cron' (RL_ALGORITHM_CRON_TOKEN_BUCKET)
// through rl_counter_take: calls only take whole tokens, a refill job (SQL,
// rl_cron_refill) adds rate * tick / period tokens per tick.  The state of a
// key: a = whole tokens, b = the part token in units of 1 / period_us token,
// stamp = last decision time.  A missing key is full.
//
// The waits: with a tick, ceil(units_needed / (rate * tick_us)) * tick_us,
// where units_needed = tokens_needed * period_us - b; without one nothing
// refills, so no wait can be promised: -1 (0 when nothing is needed).
#include "zone_harness.h"

#include <limits>

namespace {

using namespace zone_test;

RlZoneLimit Cron(int64_t rate, int64_t period_us, int64_t burst = -1, int64_t tick_us = 0)
{
	RlZoneLimit limit = MakeLimit(RL_ALGORITHM_CRON_TOKEN_BUCKET, rate, period_us, burst);
	limit.refill_tick_us = tick_us;
	return limit;
}

CounterKey CronKey(int64_t rate, int64_t period_us, int64_t burst = -1, int64_t tick_us = 0)
{
	return CounterKey{Cron(rate, period_us, burst, tick_us), std::nullopt};
}

CounterKey CronKeyWith(const RlZoneLimit &limit, int64_t a, int64_t b, int64_t stamp_us = kT0)
{
	return CounterKey{limit, RlCounterState{a, 0.0, stamp_us, b}};
}

// rl_cron_refill on one stored row, exactly as the SQL does (numeric there,
// 128-bit integers here: a * p + b + rate * tick stays below 2^108):
//   s = tokens * p + counter + rate * tick_us
//   s >= cap * p: tokens = cap, counter = 0, refill_pending = NULL
//   otherwise:    tokens = s div p, counter = s mod p, refill_pending = true
// Only rows with refill_pending are visited.  Returns whether it was.
struct Row
{
	RlCounterState state;
	bool pending;
};

bool SqlRefill(const RlZoneLimit &limit, int64_t tick_us, Row *row)
{
	if (!row->pending)
		return false;
	const Wide p = limit.period_us;
	const Wide s = static_cast<Wide>(row->state.a) * p + row->state.b +
		static_cast<Wide>(limit.rate) * tick_us;
	if (s >= static_cast<Wide>(limit.capacity) * p)
	{
		row->state.a = limit.capacity;
		row->state.b = 0;
		row->pending = false;
	}
	else
	{
		row->state.a = static_cast<int64_t>(s / p);
		row->state.b = static_cast<int64_t>(s % p);
		row->pending = true;
	}
	return true;
}

// ---------------------------------------------------------------------------
// Worked examples.  Rate 10 per minute: one token = 60e6 units; with a 1 s
// tick 1e7 units a tick (1/6 token), with a 6 s tick one token.
// ---------------------------------------------------------------------------

TEST(CronTokenBucket, NewKeyIsFullAndTakesWholeTokens)
{
	CounterKey key = CronKey(10, kMinute);
	// A peek of cost 0 at a key never seen: full, nothing to wait for.
	RlDecision d = key.Take(kT0, 0);
	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.capacity, 10);
	EXPECT_EQ(d.remaining, 10);
	EXPECT_EQ(d.reset_after_us, 0);
	EXPECT_EQ(d.decided_at_us, kT0);
	EXPECT_FALSE(d.state_changed);
	EXPECT_FALSE(key.stored.has_value());

	// Take 3: 7 left; no job refills them, so no reset can be promised.
	d = key.Take(kT0, 3);
	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.remaining, 7);
	EXPECT_EQ(d.retry_after_us, 0);
	EXPECT_EQ(d.reset_after_us, -1);
	EXPECT_TRUE(d.state_changed);
	ASSERT_TRUE(key.stored.has_value());
	EXPECT_EQ(key.stored->a, 7);
	EXPECT_EQ(key.stored->b, 0);
	EXPECT_EQ(key.stored->stamp_us, kT0);
	EXPECT_TRUE(rl_counter_needs_refill(&key.limit, &*key.stored));

	// Calls never refill, however long after: 7 left an hour later.
	d = key.Take(kT0 + 3600 * kSecond, 7);
	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.remaining, 0);
	EXPECT_EQ(d.reset_after_us, -1);
	EXPECT_EQ(key.stored->stamp_us, kT0 + 3600 * kSecond);
	d = key.Take(kT0 + 7200 * kSecond, 1);
	EXPECT_FALSE(d.allowed);
	EXPECT_EQ(d.remaining, 0);
	EXPECT_EQ(d.retry_after_us, -1);
	EXPECT_EQ(d.reset_after_us, -1);
	// With a job every 6 s (one token a tick) the same state has waits.
	key.limit.refill_tick_us = 6 * kSecond;
	d = key.Take(kT0 + 7200 * kSecond, 1);
	EXPECT_FALSE(d.allowed);
	EXPECT_EQ(d.retry_after_us, 6 * kSecond);
	EXPECT_EQ(d.reset_after_us, kMinute);
}

TEST(CronTokenBucket, TheWholeCapacityAtOnceAndOneMore)
{
	CounterKey key = CronKey(10, kMinute, 25, 6 * kSecond);
	RlDecision d = key.Take(kT0, 25);
	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.capacity, 25);
	EXPECT_EQ(d.remaining, 0);
	EXPECT_EQ(d.reset_after_us, 150 * kSecond);	// 25 tokens at one a 6 s tick
	d = key.Take(kT0, 1);
	EXPECT_FALSE(d.allowed);
	EXPECT_EQ(d.retry_after_us, 6 * kSecond);
}

TEST(CronTokenBucket, RefusalsChangeNothing)
{
	const RlZoneLimit limit = Cron(10, kMinute, -1, kSecond);
	CounterKey key = CronKeyWith(limit, 1, 30000000, kT0);
	const RlCounterState before = *key.stored;
	RlCounterState next{};
	const RlDecision d = rl_counter_take(&limit, &before, kT0 + kSecond, 2, &next);
	EXPECT_FALSE(d.allowed);
	EXPECT_FALSE(d.state_changed);
	EXPECT_EQ(d.remaining, 1);
	// 1 token short, half a token held: 30e6 units at 1e7 a tick = 3 ticks.
	EXPECT_EQ(d.retry_after_us, 3 * kSecond);
	// 9 tokens short less half: 510e6 units = 51 ticks.
	EXPECT_EQ(d.reset_after_us, 51 * kSecond);
	// What the caller would store (it does not) is the prior state, untouched.
	EXPECT_TRUE(SameCounterState(next, before));
	// Refused again and again: still nothing changes.
	for (int i = 0; i < 5; i++)
	{
		const RlDecision again = key.Take(kT0 + i * kSecond, 2);
		EXPECT_FALSE(again.allowed);
		EXPECT_TRUE(SameCounterState(*key.stored, before));
	}
	// A refused call on a new key (it never is: a new key is full and the
	// cost at most the capacity) cannot happen; a cost above the capacity
	// is rejected before deciding.
	EXPECT_FALSE(rl_zone_cost_valid(&limit, 11));
	EXPECT_TRUE(rl_zone_cost_valid(&limit, 10));
}

TEST(CronTokenBucket, CostZeroLooksWithoutTaking)
{
	const RlZoneLimit limit = Cron(10, kMinute, -1, kSecond);
	CounterKey key = CronKeyWith(limit, 4, 10000000, kT0);
	const RlCounterState before = *key.stored;
	const RlDecision d = key.Take(kT0 + 5 * kSecond, 0);
	EXPECT_TRUE(d.allowed);
	EXPECT_FALSE(d.state_changed);
	EXPECT_EQ(d.remaining, 4);
	EXPECT_EQ(d.retry_after_us, 0);
	// 6 tokens less 1/6: 360e6 - 10e6 = 350e6 units = 35 ticks.
	EXPECT_EQ(d.reset_after_us, 35 * kSecond);
	EXPECT_EQ(d.decided_at_us, kT0 + 5 * kSecond);
	EXPECT_TRUE(SameCounterState(*key.stored, before));
}

TEST(CronTokenBucket, TakingKeepsThePartToken)
{
	const RlZoneLimit limit = Cron(10, kMinute, -1, kSecond);
	CounterKey key = CronKeyWith(limit, 5, 30000000, kT0);
	const RlDecision d = key.Take(kT0 + kSecond, 2);
	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.remaining, 3);
	// 7 tokens less half: 420e6 - 30e6 = 390e6 units at 1e7 a tick.
	EXPECT_EQ(d.reset_after_us, 39 * kSecond);
	ASSERT_TRUE(key.stored.has_value());
	EXPECT_EQ(key.stored->a, 3);
	EXPECT_EQ(key.stored->b, 30000000);
	EXPECT_EQ(key.stored->fraction, 0.0);
	EXPECT_EQ(key.stored->stamp_us, kT0 + kSecond);
}

// Without a refill job (no tick, or a tick <= 0) nothing refills: a wait at
// the zone's rate would be a promise nobody keeps.  Every wait that needs a
// refill is -1; a full bucket still resets in 0.
TEST(CronTokenBucket, WithoutATickNoWaitIsPromised)
{
	for (int64_t tick : {INT64_C(0), INT64_C(-1), INT64_MIN})
	{
		const RlZoneLimit limit = Cron(7, kMinute, -1, tick);
		const std::string where = "tick " + std::to_string(tick);
		// Empty: refused, neither the retry nor the reset is known.
		CounterKey key = CronKeyWith(limit, 0, 0, kT0);
		RlDecision d = key.Take(kT0, 1);
		EXPECT_FALSE(d.allowed) << where;
		EXPECT_EQ(d.remaining, 0) << where;
		EXPECT_EQ(d.retry_after_us, -1) << where;
		EXPECT_EQ(d.reset_after_us, -1) << where;
		// One unit short of a token: still nobody adds that unit.
		key = CronKeyWith(limit, 0, kMinute - 1, kT0);
		d = key.Take(kT0, 1);
		EXPECT_FALSE(d.allowed) << where;
		EXPECT_EQ(d.retry_after_us, -1) << where;
		EXPECT_EQ(d.reset_after_us, -1) << where;
		// Admitted below capacity: no retry (0), the reset unknown.
		key = CronKeyWith(limit, 3, 0, kT0);
		d = key.Take(kT0, 2);
		EXPECT_TRUE(d.allowed) << where;
		EXPECT_EQ(d.remaining, 1) << where;
		EXPECT_EQ(d.retry_after_us, 0) << where;
		EXPECT_EQ(d.reset_after_us, -1) << where;
		// One token short of full, looked at with cost 0.
		key = CronKeyWith(limit, 6, 0, kT0);
		d = key.Take(kT0, 0);
		EXPECT_EQ(d.remaining, 6) << where;
		EXPECT_EQ(d.reset_after_us, -1) << where;
		// Full (a new key, or a stored one at or above the capacity): the
		// reset is known, and 0; taking all of it makes it unknown.
		CounterKey fresh{limit, std::nullopt};
		d = fresh.Take(kT0, 0);
		EXPECT_EQ(d.remaining, 7) << where;
		EXPECT_EQ(d.reset_after_us, 0) << where;
		key = CronKeyWith(limit, 9, 0, kT0);
		EXPECT_EQ(key.Take(kT0, 0).reset_after_us, 0) << where;
		d = fresh.Take(kT0, 7);
		EXPECT_TRUE(d.allowed) << where;
		EXPECT_EQ(d.reset_after_us, -1) << where;
		// An unknown reset does not make a key idle: only a full one is.
		EXPECT_FALSE(rl_counter_idle(&limit, &*fresh.stored, kPgMaxTime)) << where;
		const RlCounterState full{7, 0.0, kT0, 0};
		EXPECT_TRUE(rl_counter_idle(&limit, &full, kT0)) << where;
	}
	// The same states with a job every microsecond get waits in whole ticks:
	// the -1 comes from the missing job alone.
	const RlZoneLimit ticking = Cron(7, kMinute, -1, 1);
	CounterKey key = CronKeyWith(ticking, 0, kMinute - 8, kT0);
	const RlDecision d = key.Take(kT0, 1);
	EXPECT_EQ(d.retry_after_us, 2);	// 8 units at 7 a tick
	EXPECT_EQ(d.reset_after_us, 51428573);	// 6 tokens and 8 units: ceil(360000008 / 7)
}

TEST(CronTokenBucket, WaitsWithATickCountWholeTicks)
{
	// Rate 10 per minute, tick 7 s: 70e6 units (7/6 token) a tick.
	const RlZoneLimit limit = Cron(10, kMinute, -1, 7 * kSecond);
	CounterKey key = CronKeyWith(limit, 0, 30000000, kT0);
	RlDecision d = key.Take(kT0, 1);
	EXPECT_FALSE(d.allowed);
	// Half a token short: one tick.
	EXPECT_EQ(d.retry_after_us, 7 * kSecond);
	// 600e6 - 30e6 = 570e6 units: 8.14 ticks, so 9 ticks = 63 s.
	EXPECT_EQ(d.reset_after_us, 63 * kSecond);
	// Cost 2: 120e6 - 30e6 = 90e6 units: 1.29 ticks, so 2 ticks.
	EXPECT_EQ(key.Take(kT0, 2).retry_after_us, 14 * kSecond);
	// A whole number of ticks takes no extra one: 1 token less 1/6 is 50e6
	// units, at 1 s ticks (10e6 a tick) exactly 5 ticks; the reset 590e6
	// units, 59 ticks.
	const RlZoneLimit second = Cron(10, kMinute, -1, kSecond);
	key = CronKeyWith(second, 0, 10000000, kT0);
	d = key.Take(kT0, 1);
	EXPECT_EQ(d.retry_after_us, 5 * kSecond);
	EXPECT_EQ(d.reset_after_us, 59 * kSecond);
	// A tick longer than the whole refill: one tick for anything.
	const RlZoneLimit hour = Cron(10, kMinute, -1, 3600 * kSecond);
	key = CronKeyWith(hour, 0, 0, kT0);
	d = key.Take(kT0, 1);
	EXPECT_EQ(d.retry_after_us, 3600 * kSecond);
	EXPECT_EQ(d.reset_after_us, 3600 * kSecond);
}

// The waits agree with what the SQL refill does: after exactly the ticks
// reported, the call passes (and the bucket is full), one tick earlier not.
TEST(CronTokenBucket, WaitsMatchTheRefill)
{
	std::mt19937_64 rng(0xc0ffee01ULL);
	for (int round = 0; round < 3000; round++)
	{
		const int64_t rate = Uniform(rng, 1, 50);
		const int64_t period = Chance(rng, 0.5) ? Uniform(rng, 1, 5000) : Uniform(rng, 1, 120) * kSecond;
		const int64_t burst = Chance(rng, 0.5) ? Uniform(rng, 1, 3 * rate) : -1;
		RlZoneLimit limit = Cron(rate, period, burst);
		// A tick of at least 1/200 of a token's time keeps the loops short.
		const int64_t min_tick = std::max<int64_t>(1, period / rate / 200);
		limit.refill_tick_us = Uniform(rng, min_tick, std::max(min_tick, 3 * period / rate + 1));
		const int64_t a = Uniform(rng, 0, limit.capacity - 1);
		const int64_t b = Uniform(rng, 0, period - 1);
		const int64_t cost = Uniform(rng, a + 1, limit.capacity);
		std::ostringstream where;
		where << "rate " << rate << " period " << period << " cap " << limit.capacity << " tick "
			  << limit.refill_tick_us << " a " << a << " b " << b << " cost " << cost;

		CounterKey key = CronKeyWith(limit, a, b, kT0);
		const RlDecision d = key.Take(kT0, cost);
		ASSERT_FALSE(d.allowed) << where.str();
		ASSERT_EQ(d.retry_after_us % limit.refill_tick_us, 0) << where.str();
		ASSERT_EQ(d.reset_after_us % limit.refill_tick_us, 0) << where.str();
		const int64_t retry_ticks = d.retry_after_us / limit.refill_tick_us;
		const int64_t reset_ticks = d.reset_after_us / limit.refill_tick_us;
		ASSERT_GE(retry_ticks, 1) << where.str();
		ASSERT_GE(reset_ticks, retry_ticks) << where.str();

		Row row{*key.stored, true};
		for (int64_t t = 1; t <= reset_ticks; t++)
		{
			ASSERT_TRUE(SqlRefill(limit, limit.refill_tick_us, &row)) << where.str() << " tick " << t;
			RlCounterState next{};
			const RlDecision after = rl_counter_take(&limit, &row.state, kT0, cost, &next);
			EXPECT_EQ(after.allowed, t >= retry_ticks) << where.str() << " tick " << t;
			EXPECT_EQ(row.state.a == limit.capacity, t == reset_ticks) << where.str() << " tick " << t;
			EXPECT_EQ(row.pending, t < reset_ticks) << where.str() << " tick " << t;
			if (HasFailure())
				return;
		}
	}
}

// ---------------------------------------------------------------------------
// Capacity changed since the state was stored.
// ---------------------------------------------------------------------------

TEST(CronTokenBucket, CapacityLoweredClampsToIt)
{
	// Stored under burst 20: 9 tokens and 5/6.  Now burst 5.
	const RlZoneLimit limit = Cron(10, kMinute, 5, kSecond);
	CounterKey key = CronKeyWith(limit, 9, 50000000, kT0);
	EXPECT_FALSE(rl_counter_needs_refill(&limit, &*key.stored));
	EXPECT_TRUE(rl_counter_idle(&limit, &*key.stored, kT0));
	RlDecision d = key.Take(kT0, 0);
	EXPECT_EQ(d.remaining, 5);
	EXPECT_EQ(d.reset_after_us, 0);
	// Taking from it starts from the capacity, with no part token.
	d = key.Take(kT0, 1);
	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.remaining, 4);
	EXPECT_EQ(key.stored->a, 4);
	EXPECT_EQ(key.stored->b, 0);
	EXPECT_EQ(d.reset_after_us, 6 * kSecond);
	EXPECT_TRUE(rl_counter_needs_refill(&limit, &*key.stored));

	// Exactly at the new capacity with a part token: full, the part dropped.
	key = CronKeyWith(limit, 5, 40000000, kT0);
	EXPECT_FALSE(rl_counter_needs_refill(&limit, &*key.stored));
	d = key.Take(kT0, 5);
	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.remaining, 0);
	EXPECT_EQ(key.stored->b, 0);
	EXPECT_EQ(d.reset_after_us, 30 * kSecond);
}

TEST(CronTokenBucket, CapacityRaisedLeavesRoomToRefill)
{
	// Full at burst 10 (refill_pending NULL); now burst 15.
	const RlZoneLimit limit = Cron(10, kMinute, 15, kSecond);
	CounterKey key = CronKeyWith(limit, 10, 0, kT0);
	EXPECT_TRUE(rl_counter_needs_refill(&limit, &*key.stored));
	EXPECT_FALSE(rl_counter_idle(&limit, &*key.stored, kT0));
	RlDecision d = key.Take(kT0, 0);
	EXPECT_EQ(d.remaining, 10);
	EXPECT_EQ(d.reset_after_us, 30 * kSecond);	// 5 tokens = 300e6 units = 30 ticks
	d = key.Take(kT0, 11);
	EXPECT_FALSE(d.allowed);
	EXPECT_EQ(d.retry_after_us, 6 * kSecond);
	// A key never seen has the new capacity.
	CounterKey fresh = CronKey(10, kMinute, 15, kSecond);
	EXPECT_EQ(fresh.Take(kT0, 0).remaining, 15);
}

TEST(CronTokenBucket, HandEditedStateIsReadWithinBounds)
{
	const RlZoneLimit limit = Cron(10, kMinute, -1, kSecond);
	// Negative tokens read as 0, a negative part as 0.
	CounterKey key = CronKeyWith(limit, -5, -7, kT0);
	RlDecision d = key.Take(kT0, 0);
	EXPECT_EQ(d.remaining, 0);
	EXPECT_EQ(d.reset_after_us, kMinute);
	// A part of a whole token or more reads as one unit short of a token.
	key = CronKeyWith(limit, 2, 5 * kMinute, kT0);
	d = key.Take(kT0, 3);
	EXPECT_FALSE(d.allowed);
	EXPECT_EQ(d.remaining, 2);
	EXPECT_EQ(d.retry_after_us, kSecond);	// 1 unit short: one tick
	d = key.Take(kT0, 1);
	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(key.stored->a, 1);
	EXPECT_EQ(key.stored->b, kMinute - 1);
}

// ---------------------------------------------------------------------------
// The clock.
// ---------------------------------------------------------------------------

TEST(CronTokenBucket, ClockGoingBackNeverLowersTheStamp)
{
	CounterKey key = CronKey(10, kMinute, -1, kSecond);
	ASSERT_TRUE(key.Take(kT0, 1).allowed);
	// An hour back: decided at kT0, stored at kT0.
	RlDecision d = key.Take(kT0 - 3600 * kSecond, 1);
	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.decided_at_us, kT0);
	EXPECT_EQ(key.stored->stamp_us, kT0);
	EXPECT_EQ(d.remaining, 8);
	// A refused or zero-cost call back in time reports kT0 too.
	EXPECT_EQ(key.Take(kT0 - 1, 0).decided_at_us, kT0);
	EXPECT_EQ(key.Take(kPgMinTime, 9).decided_at_us, kT0);
	// Forward: the stamp follows.
	d = key.Take(kT0 + 5, 1);
	EXPECT_EQ(d.decided_at_us, kT0 + 5);
	EXPECT_EQ(key.stored->stamp_us, kT0 + 5);
	// Time itself never changes the tokens: same decisions at any instant.
	for (int64_t at : {kPgMinTime, int64_t{0}, kT0, kPgMaxTime})
	{
		d = key.Take(at, 0);
		EXPECT_EQ(d.remaining, 7) << at;
		EXPECT_EQ(d.reset_after_us, 18 * kSecond) << at;
	}
}

// ---------------------------------------------------------------------------
// Extremes: rate and burst up to 2^53, period up to 2^53 us, ticks up to
// INT64_MAX.  The waits are computed in 128 bits and saturate at INT64_MAX.
// ---------------------------------------------------------------------------

// The reference: ceil(units / (rate * tick)) * tick, saturated, in 128
// bits; -1 (unknown) without a tick.
int64_t ExpectedWait(const RlZoneLimit &limit, Wide units)
{
	if (units <= 0)
		return 0;
	if (limit.refill_tick_us <= 0)
		return -1;
	const Wide wait =
		CeilDiv(units, static_cast<Wide>(limit.rate) * limit.refill_tick_us) * limit.refill_tick_us;
	return wait > INT64_MAX ? INT64_MAX : static_cast<int64_t>(wait);
}

TEST(CronTokenBucket, ExtremeParametersDoNotOverflow)
{
	struct Case
	{
		int64_t rate, period, burst;
	};
	const Case cases[] = {
		{RL_MAX_LIMIT, RL_MAX_PERIOD_US, -1},
		{1, RL_MAX_PERIOD_US, -1},
		{RL_MAX_LIMIT, 1, -1},
		{1, 1, -1},
		{1, 1, RL_MAX_LIMIT},
		{RL_MAX_LIMIT, RL_MAX_PERIOD_US, 1},
		{3, RL_MAX_PERIOD_US - 1, -1},
		{7, RL_MAX_PERIOD_US / 7, 7},
	};
	const int64_t ticks[] = {0, 1, 7, kSecond, kMinute, RL_MAX_PERIOD_US, INT64_C(1) << 62,
							 INT64_MAX};
	for (const Case &c : cases)
	{
		for (int64_t tick : ticks)
		{
			const RlZoneLimit limit = Cron(c.rate, c.period, c.burst, tick);
			std::ostringstream where;
			where << "rate " << c.rate << " period " << c.period << " burst " << c.burst << " tick " << tick;
			const Wide p = limit.period_us;
			const Wide cap = limit.capacity;

			CounterKey key = CronKey(c.rate, c.period, c.burst, tick);
			RlDecision d = key.Take(kT0, limit.capacity);
			ASSERT_TRUE(d.allowed) << where.str();
			EXPECT_EQ(d.remaining, 0) << where.str();
			EXPECT_EQ(d.reset_after_us, ExpectedWait(limit, cap * p)) << where.str();
			EXPECT_EQ(d.reset_after_us > 0, tick > 0) << where.str();
			d = key.Take(kT0, 1);
			ASSERT_FALSE(d.allowed) << where.str();
			EXPECT_EQ(d.retry_after_us, ExpectedWait(limit, p)) << where.str();
			EXPECT_GE(d.retry_after_us, tick > 0 ? 1 : -1) << where.str();
			d = key.Take(kT0, limit.capacity);
			EXPECT_EQ(d.retry_after_us, ExpectedWait(limit, cap * p)) << where.str();
			// The longest wait is the refill of the whole capacity (at most
			// 2^53 us, rl_zone_limit's bound), rounded up to a tick.
			if (tick == 0)
				EXPECT_EQ(d.retry_after_us, -1) << where.str();
			else
				EXPECT_LE(static_cast<Wide>(d.retry_after_us),
						  static_cast<Wide>(RL_MAX_PERIOD_US) + tick) << where.str();

			// One unit short of the whole capacity (the largest part token),
			// stamped at the end of time and asked at its start.
			CounterKey most = CronKeyWith(limit, limit.capacity - 1, c.period - 1, kPgMaxTime);
			d = most.Take(kPgMinTime, limit.capacity);
			EXPECT_FALSE(d.allowed) << where.str();
			EXPECT_EQ(d.remaining, limit.capacity - 1) << where.str();
			EXPECT_EQ(d.retry_after_us, ExpectedWait(limit, 1)) << where.str();
			EXPECT_EQ(d.reset_after_us, ExpectedWait(limit, 1)) << where.str();
			EXPECT_EQ(d.decided_at_us, kPgMaxTime) << where.str();
		}
	}
}

TEST(CronTokenBucket, ExtremeWorkedNumbers)
{
	// 2^53 tokens every 2^53 us, a tick every microsecond: one a tick.
	RlZoneLimit limit = Cron(RL_MAX_LIMIT, RL_MAX_PERIOD_US, -1, 1);
	CounterKey key{limit, std::nullopt};
	RlDecision d = key.Take(kT0, RL_MAX_LIMIT);
	EXPECT_EQ(d.reset_after_us, RL_MAX_PERIOD_US);
	d = key.Take(kT0, 1);
	EXPECT_EQ(d.retry_after_us, 1);
	// The same with a tick of 2^62 us and of INT64_MAX: one tick.
	limit.refill_tick_us = INT64_C(1) << 62;
	key.limit = limit;
	EXPECT_EQ(key.Take(kT0, 1).retry_after_us, INT64_C(1) << 62);
	EXPECT_EQ(key.Take(kT0, 0).reset_after_us, INT64_C(1) << 62);
	limit.refill_tick_us = INT64_MAX;
	key.limit = limit;
	EXPECT_EQ(key.Take(kT0, 1).retry_after_us, INT64_MAX);
	EXPECT_EQ(key.Take(kT0, 0).reset_after_us, INT64_MAX);

	// Rate 1 per 2^53 us, capacity 1, a tick every microsecond.
	key = CronKey(1, RL_MAX_PERIOD_US, -1, 1);
	ASSERT_TRUE(key.Take(kT0, 1).allowed);
	d = key.Take(kT0, 1);
	EXPECT_EQ(d.retry_after_us, RL_MAX_PERIOD_US);
	// Rate 1 per microsecond, burst 2^53; tick 7 us.
	key = CronKey(1, 1, RL_MAX_LIMIT, 7);
	d = key.Take(kT0, RL_MAX_LIMIT);
	EXPECT_EQ(d.remaining, 0);
	// ceil(2^53 / 7) * 7 = 1286742750677285 * 7
	EXPECT_EQ(d.reset_after_us, INT64_C(1286742750677285) * 7);
	EXPECT_EQ(key.Take(kT0, 1).retry_after_us, 7);
	// Huge costs are exact: 2^53 - 1 taken leaves 1.
	key = CronKey(RL_MAX_LIMIT, RL_MAX_PERIOD_US);
	d = key.Take(kT0, RL_MAX_LIMIT - 1);
	EXPECT_EQ(d.remaining, 1);
	EXPECT_FALSE(key.Take(kT0, 2).allowed);
	EXPECT_TRUE(key.Take(kT0, 1).allowed);
	EXPECT_EQ(key.stored->a, 0);
}

// ---------------------------------------------------------------------------
// rl_counter_needs_refill and rl_counter_idle: full <=> idle <=> no refill.
// ---------------------------------------------------------------------------

TEST(CronTokenBucket, NeedsRefillExactlyBelowCapacity)
{
	const RlZoneLimit limit = Cron(10, kMinute, 12, kSecond);
	for (int64_t a : {INT64_C(-1), INT64_C(0), INT64_C(1), INT64_C(11), INT64_C(12), INT64_C(13),
					  RL_MAX_LIMIT})
	{
		for (int64_t b : {INT64_C(0), INT64_C(1), kMinute - 1})
		{
			const RlCounterState state{a, 0.0, kT0, b};
			EXPECT_EQ(rl_counter_needs_refill(&limit, &state), a < 12) << a << " " << b;
			// Idle (a store may forget it: a new key is full) iff full, at
			// any time: calls never refill.
			for (int64_t at : {kT0, kT0 + 3600 * kSecond, kPgMaxTime})
				EXPECT_EQ(rl_counter_idle(&limit, &state, at), a >= 12) << a << " " << b << " at " << at;
		}
	}
	// The inline token bucket never needs the job.
	const RlZoneLimit inline_limit = MakeLimit(RL_ALGORITHM_TOKEN_BUCKET, 10, kMinute, 12);
	const RlCounterState low{0, 0.0, kT0, 0};
	EXPECT_FALSE(rl_counter_needs_refill(&inline_limit, &low));
	for (RlAlgorithm algorithm : {RL_ALGORITHM_GCRA, RL_ALGORITHM_FIXED_WINDOW,
								  RL_ALGORITHM_SLIDING_WINDOW_COUNTER})
	{
		const RlZoneLimit other = MakeLimit(algorithm, 10, kMinute);
		EXPECT_FALSE(rl_counter_needs_refill(&other, &low)) << AlgorithmName(algorithm);
	}
}

// ---------------------------------------------------------------------------
// The model: one key's row as the glue and rl_cron_refill keep it (tokens,
// counter, refill_pending; written by a call only when its decision changes
// the state), with every decision checked against a brute-force reference:
// the level in units, refilled tick by tick (or microsecond by microsecond,
// by bisection, without a tick) until the call would pass.
// ---------------------------------------------------------------------------

// The level in units as a call reads a row: full when missing or at (or
// above, after the capacity was lowered) the capacity.
Wide Level(const RlZoneLimit &limit, const std::optional<Row> &row)
{
	const Wide full = static_cast<Wide>(limit.capacity) * limit.period_us;
	if (!row || row->state.a >= limit.capacity)
		return full;
	return static_cast<Wide>(row->state.a) * limit.period_us + row->state.b;
}

// The first wait after which the level holds need tokens.
int64_t BruteWait(const RlZoneLimit &limit, Wide level, int64_t need)
{
	const Wide p = limit.period_us;
	const Wide full = static_cast<Wide>(limit.capacity) * p;
	const Wide target = static_cast<Wide>(need) * p;
	if (level >= target)
		return 0;
	if (limit.refill_tick_us > 0)
	{
		int64_t ticks = 0;
		while (level < target)
		{
			level = std::min(full, level + static_cast<Wide>(limit.rate) * limit.refill_tick_us);
			ticks++;
		}
		return ticks * limit.refill_tick_us;
	}
	return -1;					// nobody refills: no wait can be promised
}

TEST(CronTokenBucket, RandomisedAgainstModel)
{
	std::mt19937_64 rng(0x5eedc207ULL);
	int64_t calls = 0;
	int64_t refills = 0;
	int64_t admitted = 0;
	int64_t refused = 0;
	for (int sequence = 0; sequence < 400; sequence++)
	{
		const int64_t rate = Uniform(rng, 1, Chance(rng, 0.7) ? 12 : 200);
		const int64_t period = Chance(rng, 0.4) ? Uniform(rng, 1, 2000) : Uniform(rng, 1, 90) * kSecond;
		int64_t burst = Chance(rng, 0.5) ? Uniform(rng, 1, 3 * rate) : -1;
		RlZoneLimit limit = Cron(rate, period, burst);
		// Ticks of at least 1/100 of a token's time keep the reference short.
		const int64_t min_tick = std::max<int64_t>(1, period / rate / 100);
		auto random_tick = [&]() {
			return Chance(rng, 0.2) ? int64_t{0}
								   : Uniform(rng, min_tick, std::max(min_tick, 2 * period / rate + 1));
		};
		limit.refill_tick_us = random_tick();

		std::optional<Row> row;	// the stored row; none: a key never seen
		int64_t now = kT0;

		for (int step = 0; step < 150; step++)
		{
			std::ostringstream where;
			where << "sequence " << sequence << " step " << step << " rate " << rate << " period "
				  << period << " cap " << limit.capacity << " tick " << limit.refill_tick_us;
			const int64_t op = Uniform(rng, 0, 99);
			if (op < 55)
			{
				// A call (cost 0 .. capacity), at a time that may go back.
				now += Chance(rng, 0.15) ? -Uniform(rng, 0, 10 * kSecond) : Uniform(rng, 0, 10 * kSecond);
				const int64_t cost = Chance(rng, 0.1) ? 0
					: Chance(rng, 0.8) ? Uniform(rng, 1, std::min<int64_t>(3, limit.capacity))
					: Uniform(rng, 1, limit.capacity);
				const Wide p = period;
				const Wide level = Level(limit, row);
				const bool allowed = level / p >= cost;
				const Wide after = allowed ? level - static_cast<Wide>(cost) * p : level;
				const int64_t decided = row ? std::max(row->state.stamp_us, now) : now;

				RlCounterState next{};
				const std::optional<Row> before = row;
				const RlDecision d = rl_counter_take(&limit, row ? &row->state : nullptr, now, cost, &next);
				calls++;
				CheckDecisionInvariants(limit, now, cost, d, where.str());
				ASSERT_EQ(d.allowed, allowed) << where.str() << " cost " << cost << " " << Describe(d);
				EXPECT_EQ(d.remaining, static_cast<int64_t>(after / p)) << where.str();
				EXPECT_EQ(d.retry_after_us, allowed ? 0 : BruteWait(limit, level, cost)) << where.str();
				EXPECT_EQ(d.reset_after_us, BruteWait(limit, after, limit.capacity)) << where.str();
				EXPECT_EQ(d.decided_at_us, decided) << where.str();
				EXPECT_EQ(d.state_changed, allowed && cost > 0) << where.str();
				// The prior state is never written through.
				if (before)
				{
					EXPECT_TRUE(SameCounterState(before->state, row->state)) << where.str();
				}
				if (d.state_changed)
				{
					admitted += cost;
					// What the model stores: the level after, in whole tokens and units.
					EXPECT_EQ(next.a, static_cast<int64_t>(after / p)) << where.str();
					EXPECT_EQ(next.b, static_cast<int64_t>(after % p)) << where.str();
					EXPECT_EQ(next.stamp_us, decided) << where.str();
					// The glue stores refill_pending = rl_counter_needs_refill(next).
					row = Row{next, rl_counter_needs_refill(&limit, &next)};
					EXPECT_EQ(row->pending, after < static_cast<Wide>(limit.capacity) * p) << where.str();
				}
				else if (!allowed)
					refused++;
			}
			else if (op < 85)
			{
				// A run of the refill job (only with a tick: rl_cron_refill
				// refuses a zone without one).
				if (limit.refill_tick_us == 0)
					continue;
				refills++;
				if (row)
				{
					const Wide before = Level(limit, row);
					const Wide full = static_cast<Wide>(limit.capacity) * period;
					const bool visited = SqlRefill(limit, limit.refill_tick_us, &*row);
					// Below capacity: a tick's worth more, up to the capacity.
					EXPECT_EQ(Level(limit, row),
							  before < full ? std::min(full, before + static_cast<Wide>(rate) * limit.refill_tick_us)
											: full)
						<< where.str();
					EXPECT_TRUE(visited || before >= full) << where.str();
				}
			}
			else if (op < 95)
			{
				// rl_zone_set with another burst (rate, period and tick kept):
				// full rows now below the capacity get refill_pending.
				burst = Chance(rng, 0.3) ? -1 : Uniform(rng, 1, 3 * rate);
				const int64_t tick = limit.refill_tick_us;
				limit = Cron(rate, period, burst, tick);
				if (row && !row->pending && row->state.a < limit.capacity)
					row->pending = true;
			}
			else
			{
				// The job enabled, disabled or rescheduled.
				limit.refill_tick_us = random_tick();
			}

			// A bucket below capacity is always one the refill job visits;
			// full (idle) exactly when the level is the capacity.
			if (row)
			{
				EXPECT_GE(row->state.b, 0) << where.str();
				EXPECT_LT(row->state.b, period) << where.str();
				EXPECT_EQ(rl_counter_needs_refill(&limit, &row->state), row->state.a < limit.capacity)
					<< where.str();
				if (row->state.a < limit.capacity)
				{
					EXPECT_TRUE(row->pending) << where.str() << ": below capacity, but the refill skips it";
				}
				EXPECT_EQ(rl_counter_idle(&limit, &row->state, now),
						  Level(limit, row) >= static_cast<Wide>(limit.capacity) * period)
					<< where.str();
			}
			if (HasFailure())
				return;
		}
	}
	EXPECT_GT(calls, 25000);
	EXPECT_GT(refills, 10000);
	EXPECT_GT(admitted, 10000);
	EXPECT_GT(refused, 1000);
}

// Conservation: over any run with a fixed limit, what was admitted plus what
// is left equals the capacity plus what the refills added, exactly.
TEST(CronTokenBucket, NothingIsCreatedOrLost)
{
	std::mt19937_64 rng(0xba1a9ce5ULL);
	for (int sequence = 0; sequence < 300; sequence++)
	{
		const int64_t rate = Uniform(rng, 1, 30);
		const int64_t period = Uniform(rng, 1, 60) * kSecond + Uniform(rng, 0, 999999);
		const int64_t burst = Chance(rng, 0.5) ? Uniform(rng, 1, 3 * rate) : -1;
		const int64_t tick = Uniform(rng, 1, 2 * period / rate + 1);
		const RlZoneLimit limit = Cron(rate, period, burst, tick);
		CounterKey key{limit, std::nullopt};
		bool pending = false;
		const Wide p = period;
		Wide admitted_units = 0;
		Wide refilled_units = 0;
		for (int step = 0; step < 300; step++)
		{
			if (Chance(rng, 0.6))
			{
				const int64_t cost = Uniform(rng, 0, limit.capacity);
				const RlDecision d = key.Take(kT0 + step, cost);
				if (d.allowed)
				{
					admitted_units += static_cast<Wide>(cost) * p;
					if (cost > 0)
						pending = rl_counter_needs_refill(&limit, &*key.stored);
				}
			}
			else if (key.stored)
			{
				Row row{*key.stored, pending};
				const Wide before = Level(limit, row);
				if (SqlRefill(limit, tick, &row))
				{
					const Wide after = Level(limit, row);
					refilled_units += after - before;
					EXPECT_GE(after - before, 0);
					EXPECT_LE(after - before, static_cast<Wide>(rate) * tick);
					// Capped only when it reached the capacity.
					if (after - before < static_cast<Wide>(rate) * tick)
					{
						EXPECT_EQ(row.state.a, limit.capacity);
					}
				}
				key.stored = row.state;
				pending = row.pending;
			}
		}
		const Wide left = Level(limit, key.stored ? std::optional<Row>(Row{*key.stored, pending})
												  : std::nullopt);
		EXPECT_EQ(admitted_units + left, static_cast<Wide>(limit.capacity) * p + refilled_units)
			<< "sequence " << sequence;
	}
}

}  // namespace
