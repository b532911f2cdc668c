// rl_sw_refund: giving back cost on the exact sliding window, newest entries
// of the back buffer first, then of the front; sealed chunks are never read
// nor rewritten.  Worked examples, then random sequences of takes and
// refunds checked against a brute-force log (SwKey::Log reads the stored
// chunks), and corrupt states.
#include "zone_harness.h"

namespace {

using namespace zone_test;

SwKey Sw(int64_t rate, int64_t period_us)
{
	SwKey key;
	key.limit = MakeLimit(RL_ALGORITHM_SLIDING_WINDOW, rate, period_us);
	return key;
}

int64_t TotalCost(const std::vector<RlSwEntry> &log)
{
	int64_t total = 0;
	for (const RlSwEntry &entry : log)
		total += entry.cost;
	return total;
}

TEST(SlidingWindowRefund, NewestEntriesFirst)
{
	SwKey key = Sw(3, 100);
	ASSERT_TRUE(key.Take(1000, 1).allowed);
	ASSERT_TRUE(key.Take(1030, 2).allowed);
	RlDecision d = key.Refund(1040, 1);
	EXPECT_TRUE(d.state_changed);
	EXPECT_EQ(d.capacity, 3);
	EXPECT_EQ(d.remaining, 1);
	EXPECT_EQ(d.reset_after_us, 90);
	EXPECT_EQ(d.decided_at_us, 1040);
	std::vector<RlSwEntry> log = key.Log();
	ASSERT_EQ(log.size(), 2u);
	EXPECT_EQ(log[1].time_us, 1030);
	EXPECT_EQ(log[1].cost, 1);
	EXPECT_EQ(key.Load().admitted, 2);
	// The call at 1030 gone, then one of 1000's: nothing left.
	d = key.Refund(1040, 2);
	EXPECT_EQ(d.remaining, 3);
	EXPECT_EQ(d.reset_after_us, 0);
	EXPECT_TRUE(key.Log().empty());
	EXPECT_EQ(key.Load().admitted, 0);
	const RlSlidingWindowState emptied = key.Load();
	EXPECT_TRUE(rl_sw_idle(&key.limit, &emptied, 1040));
	// Nothing more to give back.
	EXPECT_FALSE(key.Refund(1041, 1).state_changed);
	EXPECT_TRUE(key.Take(1041, 3).allowed);
}

TEST(SlidingWindowRefund, ExpiredEntriesGiveNothingBack)
{
	SwKey key = Sw(3, 100);
	ASSERT_TRUE(key.Take(1000, 3).allowed);
	const std::vector<uint8_t> header = key.header;
	RlDecision d = key.Refund(1100, 3);
	EXPECT_FALSE(d.state_changed);
	EXPECT_EQ(d.remaining, 3);
	EXPECT_EQ(key.header, header);

	// Of an entry in the window and one that has left it, only the first.
	key = Sw(3, 100);
	ASSERT_TRUE(key.Take(1000, 1).allowed);
	ASSERT_TRUE(key.Take(1050, 1).allowed);
	d = key.Refund(1120, 2);
	EXPECT_TRUE(d.state_changed);
	EXPECT_EQ(d.remaining, 3);
	EXPECT_EQ(d.reset_after_us, 0);
	const RlSlidingWindowState state = key.Load();
	EXPECT_EQ(state.admitted, 1);		// the expired entry, popped by a later take
	EXPECT_EQ(state.newest_us, 1000);
	EXPECT_TRUE(key.Take(1120, 3).allowed);
}

TEST(SlidingWindowRefund, MergedEntryLosesCostThenGoes)
{
	SwKey key = Sw(1000, kSecond);
	for (int i = 0; i < 1000; i++)
		ASSERT_TRUE(key.Take(kT0, 1).allowed);
	RlDecision d = key.Refund(kT0 + 1, 1);
	EXPECT_EQ(d.remaining, 1);
	ASSERT_EQ(key.Log().size(), 1u);
	EXPECT_EQ(key.Log()[0].cost, 999);
	d = key.Refund(kT0 + 1, 999);
	EXPECT_EQ(d.remaining, 1000);
	EXPECT_TRUE(key.Log().empty());
	EXPECT_EQ(key.admitted, 0);
}

// A refund does not move the clock back, and moves it forward like a take.
TEST(SlidingWindowRefund, Clock)
{
	SwKey key = Sw(3, 100);
	ASSERT_TRUE(key.Take(1000, 3).allowed);
	RlDecision d = key.Refund(500, 1);
	EXPECT_EQ(d.decided_at_us, 1000);
	EXPECT_EQ(d.reset_after_us, 100);
	EXPECT_EQ(key.stamp_us, 1000);
	d = key.Refund(1010, 1);
	EXPECT_EQ(d.decided_at_us, 1010);
	EXPECT_EQ(key.stamp_us, 1010);
	// A take before 1010 decides as at 1010.
	EXPECT_EQ(key.Take(1005, 1).decided_at_us, 1010);
}

TEST(SlidingWindowRefund, NewKeyAndCostZeroGiveNothing)
{
	SwKey key = Sw(3, 100);
	for (int64_t cost : {INT64_C(0), INT64_C(1), INT64_MAX})
	{
		const RlDecision d = key.Refund(1000, cost);
		EXPECT_FALSE(d.state_changed);
		EXPECT_EQ(d.remaining, 3);
		EXPECT_TRUE(key.header.empty());
	}
	ASSERT_TRUE(key.Take(1000, 2).allowed);
	const std::vector<uint8_t> header = key.header;
	for (int64_t cost : {INT64_C(0), INT64_C(-1), INT64_MIN})
	{
		EXPECT_FALSE(key.Refund(1001, cost).state_changed);
		EXPECT_EQ(key.header, header);
	}
	// Huge costs give back what there is.
	const RlDecision d = key.Refund(1001, INT64_MAX);
	EXPECT_EQ(d.remaining, 3);
	EXPECT_EQ(key.Load().admitted, 0);
}

// Sealed chunks between the front and the back: the back gives first, then
// the front's newest entries; the chunks stay as stored.
TEST(SlidingWindowRefund, ChunksAreNeverTouched)
{
	SwKey key = Sw(5000, kSecond);
	int64_t now = kT0;
	for (int i = 0; i < 2000; i++, now += 1000)
	{
		ASSERT_TRUE(key.Take(now, 1 + i % 2).allowed);
		const RlSlidingWindowState state = key.Load();
		if (rl_sw_chunk_count(&state) >= 2 && state.back.count >= 3)
			break;
	}
	const RlSlidingWindowState before = key.Load();
	ASSERT_GE(rl_sw_chunk_count(&before), 2u);
	ASSERT_GT(before.back.count, 2);
	const auto chunks = key.chunks;
	int64_t back_cost = 0;
	for (int32_t i = 0; i < before.back.count; i++)
		back_cost += before.back.entries[i].cost;
	const int64_t front_newest_cost = before.front.entries[before.front.count - 1].cost;

	// Two entries' worth from the back.
	const std::vector<RlSwEntry> log_before = key.Log();
	RlDecision d = key.Refund(now, 3);
	EXPECT_TRUE(d.state_changed);
	EXPECT_EQ(key.chunks, chunks);
	std::vector<RlSwEntry> log = key.Log();
	EXPECT_EQ(TotalCost(log), TotalCost(log_before) - 3);
	EXPECT_TRUE(SameBuffer(key.Load().front, before.front));	// the back covered it
	// Every entry but the newest few is as it was.
	for (size_t i = 0; i + 3 < log.size(); i++)
	{
		EXPECT_EQ(log[i].time_us, log_before[i].time_us);
		EXPECT_EQ(log[i].cost, log_before[i].cost);
	}

	// All of the back and the front's newest entry, not the chunks.
	const RlSlidingWindowState mid = key.Load();
	int64_t mid_back = 0;
	for (int32_t i = 0; i < mid.back.count; i++)
		mid_back += mid.back.entries[i].cost;
	d = key.Refund(now, mid_back + front_newest_cost);
	EXPECT_EQ(key.chunks, chunks);
	const RlSlidingWindowState after = key.Load();
	EXPECT_EQ(after.back.count, 0);
	EXPECT_EQ(after.front.count, before.front.count - 1);
	EXPECT_EQ(after.first_chunk, before.first_chunk);
	EXPECT_EQ(after.next_chunk, before.next_chunk);
	// Only a chunk could tell the newest time now: the last known stays.
	EXPECT_EQ(after.newest_us, mid.newest_us);
	EXPECT_EQ(mid.newest_us, mid.back.entries[mid.back.count - 1].time_us);
	EXPECT_EQ(d.remaining, 5000 - TotalCost(key.Log()));
	EXPECT_GT(back_cost, 0);

	// Takes still follow the chunk protocol: the front is read from the
	// oldest chunk, admissions go to the back.
	EXPECT_TRUE(key.Take(now + 1, 1).allowed);
	EXPECT_EQ(TotalCost(key.Log()), key.admitted);
}

// ---------------------------------------------------------------------------
// Random takes and refunds against a brute-force log.  The refund's choice
// of entries is checked on the log as stored (front, chunks, back); every
// take decides exactly as a brute force over that log.
// ---------------------------------------------------------------------------

struct LogModel
{
	int64_t rate;
	int64_t period;
	std::optional<int64_t> stamp;
	std::optional<int64_t> newest;	// what the key may report as its newest entry

	RlDecision Take(const std::vector<RlSwEntry> &log, int64_t now, int64_t cost)
	{
		if (stamp)
			now = std::max(now, *stamp);
		const Wide horizon = static_cast<Wide>(now) - period;
		int64_t live = 0;
		for (const RlSwEntry &entry : log)
			if (entry.time_us > horizon)
				live += entry.cost;
		RlDecision d{};
		d.capacity = rate;
		d.decided_at_us = now;
		d.allowed = live + cost <= rate;
		if (!d.allowed)
		{
			const int64_t need = live + cost - rate;
			int64_t freed = 0;
			for (const RlSwEntry &entry : log)
			{
				if (entry.time_us <= horizon)
					continue;
				freed += entry.cost;
				if (freed >= need)
				{
					d.retry_after_us = static_cast<int64_t>(static_cast<Wide>(entry.time_us) + period - now);
					break;
				}
			}
		}
		d.state_changed = d.allowed && cost > 0;
		if (d.state_changed)
		{
			stamp = now;
			newest = now;
		}
		const int64_t after = d.allowed ? live + cost : live;
		d.remaining = rate - after;
		d.reset_after_us = after > 0 ? static_cast<int64_t>(static_cast<Wide>(*newest) + period - now) : 0;
		return d;
	}
};

// The log a refund should leave: the back's newest live entries lose the
// cost first, then (back emptied) the front's.
std::vector<RlSwEntry> ExpectedRefund(std::vector<RlSwEntry> log, const RlSlidingWindowState &state,
									  Wide horizon, int64_t cost, int64_t *refunded)
{
	*refunded = 0;
	if (cost <= 0)
		return log;
	const size_t front_end = static_cast<size_t>(state.front.count);
	const size_t back_begin = log.size() - static_cast<size_t>(state.back.count);
	auto take_off = [&](size_t begin, size_t end) {
		// Newest first, within [begin, end), stopping at an expired entry.
		size_t i = end;
		while (i > begin && *refunded < cost && log[i - 1].time_us > horizon)
		{
			const int64_t share = std::min(log[i - 1].cost, cost - *refunded);
			log[i - 1].cost -= share;
			*refunded += share;
			if (log[i - 1].cost > 0)
				break;
			i--;
		}
		return i == begin;		// emptied
	};
	const bool back_emptied = take_off(back_begin, log.size());
	if (back_emptied && *refunded < cost)
		take_off(0, front_end);
	std::vector<RlSwEntry> kept;
	for (const RlSwEntry &entry : log)
		if (entry.cost > 0)
			kept.push_back(entry);
	return kept;
}

TEST(SlidingWindowRefundModel, RandomTakesAndRefunds)
{
	std::mt19937_64 rng(0x5e1f0dd5ULL);
	// Refunds rarer at larger limits, so that the log grows past the two
	// buffers and seals chunks.
	struct Plan
	{
		int64_t rate;
		int sequences;
		int calls;
		double refunds;
	};
	const Plan plans[] = {{1, 300, 40, 0.3}, {5, 300, 80, 0.3}, {50, 100, 600, 0.2}, {200, 40, 3000, 0.1}, {1000, 40, 6000, 0.08}};
	int64_t refunds = 0;
	int64_t with_chunks = 0;
	int64_t from_front = 0;
	int64_t past_chunks = 0;	// the front's entries given back, chunks skipped
	int64_t unknown_expiry = 0;	// only a chunk could tell the exact remaining
	int64_t sealed = 0;
	for (const Plan &plan : plans)
	{
		for (int sequence = 0; sequence < plan.sequences; sequence++)
		{
			const int64_t period = Chance(rng, 0.3) ? Uniform(rng, 1, 100)
				: Chance(rng, 0.1) ? RL_MAX_PERIOD_US - Uniform(rng, 0, 1000)
				: Uniform(rng, 1000, 10 * kSecond);
			SwKey key = Sw(plan.rate, period);
			LogModel model{plan.rate, period, std::nullopt, std::nullopt};
			const int64_t gap = std::max<int64_t>(1, period / plan.rate * Uniform(rng, 1, 12) / 4);
			int64_t now = Chance(rng, 0.8) ? kT0 : kPgMinTime + Uniform(rng, 0, kSecond);
			for (int call = 0; call < plan.calls; call++)
			{
				// Jumps that expire much of the log about once per rate's
				// worth of calls, so that it fills up between them.
				const int64_t kind = Uniform(rng, 0, 99);
				if (Chance(rng, std::min(0.02, 2.0 / static_cast<double>(plan.rate))))
					now += Uniform(rng, period / 4, 2 * period);
				else if (kind < 15)
					;
				else if (kind < 95)
					now += Uniform(rng, 0, 2 * gap);
				else
					now -= Uniform(rng, 0, 5 * gap);
				std::ostringstream where;
				where << "rate " << plan.rate << " sequence " << sequence << " call " << call << " period "
					  << period << " now " << now;
				const std::vector<RlSwEntry> log = key.Log();
				if (!Chance(rng, plan.refunds))
				{
					const int64_t size = Uniform(rng, 0, 99);
					const int64_t cost = size < 5 ? 0 : size < 85 ? 1
						: size < 97 ? Uniform(rng, 1, std::min<int64_t>(plan.rate, 20)) : Uniform(rng, 1, plan.rate);
					const RlDecision expected = model.Take(log, now, cost);
					const RlDecision actual = key.Take(now, cost);
					ASSERT_TRUE(SameDecision(actual, expected))
						<< where.str() << " take " << cost << "\n  expected " << Describe(expected)
						<< "\n  actual   " << Describe(actual);
					continue;
				}
				const int64_t size = Uniform(rng, 0, 99);
				const int64_t cost = size < 5 ? 0 : size < 90 ? Uniform(rng, 1, 3)
					: size < 98 ? Uniform(rng, 1, plan.rate) : Uniform(rng, 1, 2 * plan.rate);
				const RlSlidingWindowState before = key.Load();
				const uint32_t chunk_count = rl_sw_chunk_count(&before);
				const int64_t at = std::max(now, before.stamp_us);
				const Wide horizon = static_cast<Wide>(at) - period;
				int64_t refunded = 0;
				const std::vector<RlSwEntry> expected_log = ExpectedRefund(log, before, horizon, cost, &refunded);
				const auto chunks = key.chunks;
				const RlDecision look = key.Peek(now, 0);
				const RlDecision d = key.Refund(now, cost);
				refunds++;
				with_chunks += chunk_count > 0 && refunded > 0;
				ASSERT_EQ(d.state_changed, refunded > 0) << where.str() << " refund " << cost;
				const std::vector<RlSwEntry> after = key.Log();
				ASSERT_EQ(after.size(), expected_log.size()) << where.str() << " refund " << cost;
				for (size_t i = 0; i < after.size(); i++)
				{
					ASSERT_EQ(after[i].time_us, expected_log[i].time_us) << where.str() << " entry " << i;
					ASSERT_EQ(after[i].cost, expected_log[i].cost) << where.str() << " entry " << i;
				}
				ASSERT_EQ(key.chunks, chunks) << where.str();
				const RlSlidingWindowState state = key.Load();
				from_front += refunded > 0 && state.front.count < before.front.count;
				past_chunks += chunk_count > 0 && !SameBuffer(state.front, before.front);
				if (refunded > 0)
				{
					model.stamp = at;
					// The newest entry's time, where the buffers tell it.
					if (state.back.count > 0)
						model.newest = state.back.entries[state.back.count - 1].time_us;
					else if (chunk_count == 0 && state.front.count > 0)
						model.newest = state.front.entries[state.front.count - 1].time_us;
					ASSERT_EQ(state.newest_us, *model.newest) << where.str();
				}

				// The refund reports what a look (which may read chunks) would
				// after it; without a chunk to read, exactly.
				const RlDecision look_after = key.Peek(now, 0);
				bool front_live = false;
				for (int32_t i = 0; i < state.front.count; i++)
					front_live = front_live || state.front.entries[i].time_us > horizon;
				if (chunk_count == 0 || front_live)
				{
					RlDecision same = look_after;
					same.state_changed = d.state_changed;
					ASSERT_TRUE(SameDecision(d, same))
						<< where.str() << " refund " << cost << "\n  refund " << Describe(d) << "\n  look   "
						<< Describe(look_after);
				}
				else
				{
					unknown_expiry++;
					ASSERT_LE(d.remaining, look_after.remaining) << where.str();
					ASSERT_GE(d.reset_after_us, look_after.reset_after_us) << where.str();
				}
				// Never more than the cost comes back, and never less than
				// what was still in the window, while the back or the front
				// holds it.
				ASSERT_LE(look_after.remaining, std::min(plan.rate, look.remaining + cost)) << where.str();
				ASSERT_GE(look_after.remaining, look.remaining) << where.str();
				if (HasFailure())
					return;
			}
			sealed += key.sealed;
		}
	}
	// Every path was taken.
	EXPECT_GT(refunds, 10000);
	EXPECT_GT(past_chunks, 50);
	EXPECT_GT(unknown_expiry, 20);
	EXPECT_GT(with_chunks, 500);
	EXPECT_GT(from_front, 1000);
	EXPECT_GT(sealed, 80);
}

// ---------------------------------------------------------------------------
// Corrupt states.
// ---------------------------------------------------------------------------

TEST(SlidingWindowRefundCorrupt, MalformedBuffersAreRejected)
{
	SwKey key = Sw(10, kSecond);
	ASSERT_TRUE(key.Take(kT0, 1).allowed);
	ASSERT_TRUE(key.Take(kT0 + 5, 2).allowed);
	const RlSlidingWindowState good = key.Load();
	ASSERT_EQ(good.front.count, 2);
	// Compared as bytes: a count out of range cannot be compared entry by entry.
	auto rejected = [&](const RlSlidingWindowState &bad) {
		RlSlidingWindowState state;
		std::memcpy(&state, &bad, sizeof state);
		RlDecision d{};
		const bool ok = rl_sw_refund(&key.limit, &state, kT0 + 10, 1, &d);
		EXPECT_EQ(std::memcmp(&state, &bad, sizeof state), 0) << "state written on failure";
		return !ok;
	};
	RlSlidingWindowState bad = good;
	bad.front.count = -1;
	EXPECT_TRUE(rejected(bad));
	bad = good;
	bad.back.count = RL_SW_BUFFER_ENTRIES + 1;
	EXPECT_TRUE(rejected(bad));
	bad = good;
	bad.front.entries[1].cost = 0;
	EXPECT_TRUE(rejected(bad));
	bad = good;
	bad.front.entries[0].cost = -3;
	EXPECT_TRUE(rejected(bad));
	bad = good;
	bad.front.entries[1].cost = RL_MAX_LIMIT + 1;
	EXPECT_TRUE(rejected(bad));
	bad = good;
	bad.front.entries[1].time_us = kT0 - 1;		// before its predecessor
	EXPECT_TRUE(rejected(bad));
	RlSlidingWindowState fine = good;
	RlDecision d{};
	EXPECT_TRUE(rl_sw_refund(&key.limit, &fine, kT0 + 10, 1, &d));
	EXPECT_TRUE(d.state_changed);
}

// Hand-edited admitted and stamp columns, and headers that decode from
// random bytes: a refund never overflows (the sanitizer build) and what it
// stores still encodes within the header's bound.
TEST(SlidingWindowRefundCorrupt, HandEditedColumnsAndHeaders)
{
	std::mt19937_64 rng(0xc0ffee02ULL);
	SwKey key = Sw(1000, kSecond);
	int64_t now = kT0;
	for (int i = 0; i < 600; i++, now += 1000)
		ASSERT_TRUE(key.Take(now, 1 + i % 2).allowed);
	int decoded = 0;
	for (int trial = 0; trial < 3000; trial++)
	{
		std::vector<uint8_t> header = key.header;
		if (trial % 3 != 0)
		{
			for (int64_t flips = Uniform(rng, 1, 4); flips > 0; flips--)
				header[static_cast<size_t>(Uniform(rng, 1, static_cast<int64_t>(header.size()) - 1))] ^=
					static_cast<uint8_t>(1 << Uniform(rng, 0, 7));
		}
		const int64_t admitted_choices[] = {INT64_MIN, -1, 0, key.admitted, RL_MAX_LIMIT + 1, INT64_MAX};
		const int64_t stamp_choices[] = {INT64_MIN, kPgMinTime, now, kPgMaxTime, INT64_MAX};
		const int64_t admitted = admitted_choices[Uniform(rng, 0, 5)];
		const int64_t stamp = stamp_choices[Uniform(rng, 0, 4)];
		RlSlidingWindowState state;
		if (!rl_sw_decode_header(header.data(), static_cast<int32_t>(header.size()), admitted, stamp, &state))
			continue;
		decoded++;
		const int64_t at = now + Uniform(rng, -2 * kSecond, 2 * kSecond);
		const int64_t cost = Chance(rng, 0.1) ? INT64_MAX : Uniform(rng, 0, 2000);
		RlDecision d{};
		ASSERT_TRUE(rl_sw_refund(&key.limit, &state, at, cost, &d));
		EXPECT_TRUE(d.allowed);
		EXPECT_GE(d.remaining, 0);
		EXPECT_LE(d.remaining, 1000);
		EXPECT_GE(d.reset_after_us, 0);
		if (d.state_changed)
		{
			EXPECT_GE(state.admitted, 0);
			uint8_t bytes[RL_SW_MAX_HEADER_BYTES + 1024];
			const int32_t len = rl_sw_encode_header(&state, bytes);
			EXPECT_LE(len, RL_SW_MAX_HEADER_BYTES);
			RlSlidingWindowState again;
			EXPECT_TRUE(rl_sw_decode_header(bytes, len, state.admitted, state.stamp_us, &again));
			EXPECT_TRUE(SameSwState(again, state));
		}
	}
	EXPECT_GT(decoded, 500);
}

}  // namespace
