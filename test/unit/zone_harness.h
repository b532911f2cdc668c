// Shared helpers for the zone tests: limits, one stored key per algorithm the
// way the glue keeps it (the state written back only when the decision says
// it changed), the exact sliding window's chunk-store protocol, and a few
// random helpers.  Everything is inline: each test file uses only some.
#ifndef ZONE_HARNESS_H
#define ZONE_HARNESS_H

#include "core/rl_core.h"
#include "../common/algorithm_name.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace zone_test {

using Wide = __int128;

constexpr int64_t kSecond = 1000000;	// microseconds
constexpr int64_t kMinute = 60 * kSecond;
constexpr int64_t kT0 = 757382400LL * kSecond;	// an arbitrary instant
// PostgreSQL's TimestampTz range (4714-11-24 BC .. 294276-12-31 AD).
constexpr int64_t kPgMinTime = -211813488000000000LL;
constexpr int64_t kPgMaxTime = 9223371331200000000LL;

inline RlZoneLimit MakeLimit(RlAlgorithm algorithm, int64_t rate, int64_t period_us,
							 int64_t burst = -1)
{
	RlZoneLimit limit{};
	EXPECT_EQ(rl_zone_limit(algorithm, rate, period_us, burst, &limit), RL_ZONE_OK)
		<< AlgorithmName(algorithm) << " rate " << rate << " period " << period_us
		<< " burst " << burst;
	return limit;
}

inline std::string Describe(const RlDecision &d)
{
	std::ostringstream out;
	out << "{allowed " << d.allowed << ", capacity " << d.capacity << ", remaining "
		<< d.remaining << ", retry_after " << d.retry_after_us << ", reset_after "
		<< d.reset_after_us << ", decided_at " << d.decided_at_us << ", state_changed "
		<< d.state_changed << "}";
	return out.str();
}

inline bool SameDecision(const RlDecision &a, const RlDecision &b)
{
	return a.allowed == b.allowed && a.capacity == b.capacity && a.remaining == b.remaining &&
		a.retry_after_us == b.retry_after_us && a.reset_after_us == b.reset_after_us &&
		a.decided_at_us == b.decided_at_us && a.state_changed == b.state_changed;
}

inline bool SameCounterState(const RlCounterState &a, const RlCounterState &b)
{
	return a.a == b.a && std::memcmp(&a.fraction, &b.fraction, sizeof a.fraction) == 0 &&
		a.stamp_us == b.stamp_us && a.b == b.b;
}

// Checks what holds for every decision of every algorithm.
inline void CheckDecisionInvariants(const RlZoneLimit &limit, int64_t now_us, int64_t cost,
									const RlDecision &d, const std::string &where)
{
	EXPECT_EQ(d.capacity, limit.capacity) << where;
	// Decided at now, or later if the clock went back.
	EXPECT_GE(d.decided_at_us, now_us) << where << " " << Describe(d);
	// Refusals and cost 0 change nothing; an admitted cost must be recorded.
	EXPECT_EQ(d.state_changed, d.allowed && cost > 0) << where << " " << Describe(d);
	EXPECT_GE(d.remaining, 0) << where;
	EXPECT_LE(d.remaining, limit.capacity) << where;
	// A cron token bucket that no job refills can promise no wait (-1).
	const bool unrefilled = limit.algorithm == RL_ALGORITHM_CRON_TOKEN_BUCKET && limit.refill_tick_us <= 0;
	if (d.allowed)
	{
		EXPECT_EQ(d.retry_after_us, 0) << where;
	}
	else
	{
		if (unrefilled)
		{
			EXPECT_EQ(d.retry_after_us, -1) << where << " " << Describe(d);
		}
		else
		{
			EXPECT_GE(d.retry_after_us, 1) << where << " " << Describe(d);
		}
		// Refused: what is left does not cover the cost.
		EXPECT_LT(d.remaining, cost) << where << " " << Describe(d);
	}
	if (unrefilled)
	{
		EXPECT_EQ(d.reset_after_us, d.remaining >= limit.capacity ? 0 : -1) << where << " " << Describe(d);
	}
	else
	{
		EXPECT_GE(d.reset_after_us, 0) << where;
	}
}

// Checks what holds for every refund's decision: never refused, what a
// look at the key reports.
inline void CheckRefundInvariants(const RlZoneLimit &limit, int64_t now_us, const RlDecision &d,
								  const std::string &where)
{
	EXPECT_TRUE(d.allowed) << where << " " << Describe(d);
	EXPECT_EQ(d.retry_after_us, 0) << where;
	EXPECT_EQ(d.capacity, limit.capacity) << where;
	EXPECT_GE(d.decided_at_us, now_us) << where;
	EXPECT_GE(d.remaining, 0) << where;
	EXPECT_LE(d.remaining, limit.capacity) << where;
	const bool unrefilled = limit.algorithm == RL_ALGORITHM_CRON_TOKEN_BUCKET && limit.refill_tick_us <= 0;
	EXPECT_GE(d.reset_after_us, unrefilled ? -1 : 0) << where;
}

// One key of a fixed-state algorithm, stored as the glue stores it.
struct CounterKey
{
	RlZoneLimit limit;
	std::optional<RlCounterState> stored;

	// The decision without storing anything.
	RlDecision Peek(int64_t now_us, int64_t cost, RlCounterState *next_out = nullptr) const
	{
		RlCounterState next{};
		const RlDecision d = rl_counter_take(&limit, stored ? &*stored : nullptr, now_us, cost, &next);
		if (next_out != nullptr)
			*next_out = next;
		return d;
	}

	RlDecision Take(int64_t now_us, int64_t cost)
	{
		const std::optional<RlCounterState> before = stored;
		RlCounterState next{};
		const RlDecision d = rl_counter_take(&limit, stored ? &*stored : nullptr, now_us, cost, &next);
		// prior is const: the stored state is never written through it.
		if (before)
		{
			EXPECT_TRUE(SameCounterState(*before, *stored));
		}
		CheckDecisionInvariants(limit, now_us, cost, d,
								std::string(AlgorithmName(limit.algorithm)) + " at " +
								std::to_string(now_us) + " cost " + std::to_string(cost));
		if (d.state_changed)
			stored = next;
		return d;
	}

	// A refund, stored as the glue stores it.
	RlDecision Refund(int64_t now_us, int64_t cost)
	{
		const std::optional<RlCounterState> before = stored;
		RlCounterState next{1, 1.0, 1, 1};	// must be overwritten
		const RlDecision d = rl_counter_refund(&limit, stored ? &*stored : nullptr, now_us, cost, &next);
		const std::string where = std::string(AlgorithmName(limit.algorithm)) + " refund at " +
			std::to_string(now_us) + " cost " + std::to_string(cost);
		if (before)
		{
			EXPECT_TRUE(SameCounterState(*before, *stored)) << where;
		}
		CheckRefundInvariants(limit, now_us, d, where);
		// state_changed exactly when next differs from what is stored.
		const RlCounterState unchanged = before ? *before : RlCounterState{};
		EXPECT_EQ(d.state_changed, !SameCounterState(next, unchanged)) << where << " " << Describe(d);
		EXPECT_TRUE(before.has_value() || !d.state_changed) << where;
		if (d.state_changed)
			stored = next;
		// The refund reports what a look at the stored key now reports.
		RlDecision look = Peek(now_us, 0);
		look.state_changed = d.state_changed;
		EXPECT_TRUE(SameDecision(d, look)) << where << "\n  refund " << Describe(d) << "\n  look   "
										   << Describe(look);
		return d;
	}
};

// ---------------------------------------------------------------------------
// Exact sliding window: one key stored as the glue stores it, the header
// (encoded) plus its admitted and stamp columns, and a row per sealed chunk.
// ---------------------------------------------------------------------------

inline bool SameBuffer(const RlSwBuffer &a, const RlSwBuffer &b)
{
	if (a.count != b.count || a.bytes != b.bytes)
		return false;
	for (int32_t i = 0; i < a.count; i++)
		if (a.entries[i].time_us != b.entries[i].time_us || a.entries[i].cost != b.entries[i].cost)
			return false;
	return true;
}

inline bool SameSwState(const RlSlidingWindowState &a, const RlSlidingWindowState &b)
{
	return a.admitted == b.admitted && a.stamp_us == b.stamp_us && a.newest_us == b.newest_us &&
		a.first_chunk == b.first_chunk && a.next_chunk == b.next_chunk &&
		SameBuffer(a.front, b.front) && SameBuffer(a.back, b.back);
}

struct SwKey
{
	RlZoneLimit limit;
	std::vector<uint8_t> header;	// empty: a key never seen
	int64_t admitted = 0;
	int64_t stamp_us = 0;
	std::map<uint32_t, std::vector<uint8_t>> chunks;
	// Statistics for the amortisation checks.
	int64_t chunk_loads = 0;
	int64_t sealed = 0;
	int64_t consumed = 0;
	uint32_t max_chunks = 0;
	size_t max_bytes = 0;

	// The stored state, decoded.
	RlSlidingWindowState Load() const
	{
		RlSlidingWindowState state;
		if (header.empty())
			rl_sw_init(&state);
		else
			EXPECT_TRUE(rl_sw_decode_header(header.data(), static_cast<int32_t>(header.size()),
											admitted, stamp_us, &state));
		return state;
	}

	size_t StoredBytes() const
	{
		size_t bytes = header.size();
		for (const auto &chunk : chunks)
			bytes += chunk.second.size();
		return bytes;
	}

	// One call with the chunk protocol.  Returns false (after reporting a
	// failure) if the algorithm did.  apply = false: a peek that stores nothing.
	bool Call(int64_t now_us, int64_t cost, RlSwDecision *out, bool apply = true)
	{
		const RlSlidingWindowState stored = Load();
		std::vector<RlSwChunk> loaded;
		RlSlidingWindowState state = stored;
		for (;;)
		{
			if (!rl_sw_take(&limit, &state, now_us, cost, loaded.data(),
							static_cast<int32_t>(loaded.size()), out))
			{
				ADD_FAILURE() << "rl_sw_take failed at " << now_us << " cost " << cost;
				return false;
			}
			if (out->need_chunks == 0)
				break;
			// A request for more chunks leaves the state untouched and asks for
			// chunks it has not been given yet, which exist.
			EXPECT_TRUE(SameSwState(state, stored));
			EXPECT_GT(out->need_chunks, static_cast<int32_t>(loaded.size()));
			if (out->need_chunks <= static_cast<int32_t>(loaded.size()) ||
				static_cast<uint32_t>(out->need_chunks) > rl_sw_chunk_count(&stored))
			{
				ADD_FAILURE() << "need_chunks " << out->need_chunks << " with " << loaded.size()
							  << " loaded of " << rl_sw_chunk_count(&stored);
				return false;
			}
			while (static_cast<int32_t>(loaded.size()) < out->need_chunks)
			{
				const uint32_t seq = rl_sw_chunk_seq(stored.first_chunk,
													 static_cast<uint32_t>(loaded.size()));
				const auto found = chunks.find(seq);
				if (found == chunks.end())
				{
					ADD_FAILURE() << "chunk " << seq << " asked for but not stored";
					return false;
				}
				loaded.push_back(RlSwChunk{found->second.data(),
										   static_cast<int32_t>(found->second.size())});
				chunk_loads++;
			}
		}
		const RlDecision &d = out->decision;
		CheckDecisionInvariants(limit, now_us, cost, d,
								"sliding_window at " + std::to_string(now_us) + " cost " +
								std::to_string(cost));
		if (!d.state_changed)
		{
			// Nothing to store: the state and the chunks stay as they are.
			EXPECT_TRUE(SameSwState(state, stored));
			EXPECT_EQ(out->consumed_chunks, 0);
			EXPECT_FALSE(out->sealed);
			return true;
		}
		if (!apply)
			return true;

		EXPECT_EQ(out->consumed_from, stored.first_chunk);
		for (int32_t i = 0; i < out->consumed_chunks; i++)
		{
			const uint32_t seq = rl_sw_chunk_seq(out->consumed_from, static_cast<uint32_t>(i));
			EXPECT_EQ(chunks.erase(seq), 1u) << "consumed chunk " << seq << " was not stored";
		}
		consumed += out->consumed_chunks;
		if (out->sealed)
		{
			EXPECT_GT(out->sealed_len, 0);
			EXPECT_LE(out->sealed_len, RL_SW_BUFFER_BYTES);
			EXPECT_EQ(chunks.count(out->sealed_seq), 0u) << "chunk " << out->sealed_seq << " overwritten";
			chunks[out->sealed_seq] =
				std::vector<uint8_t>(out->sealed_bytes, out->sealed_bytes + out->sealed_len);
			sealed++;
		}

		// Store the header and read it back: the round trip is exact.
		uint8_t bytes[RL_SW_MAX_HEADER_BYTES + 64];
		const int32_t len = rl_sw_encode_header(&state, bytes);
		EXPECT_GT(len, 0);
		EXPECT_LE(len, RL_SW_MAX_HEADER_BYTES);
		header.assign(bytes, bytes + len);
		admitted = state.admitted;
		stamp_us = state.stamp_us;
		const RlSlidingWindowState reloaded = Load();
		EXPECT_TRUE(SameSwState(reloaded, state)) << "header round trip";

		// The store holds exactly the chunks the state references.
		const uint32_t count = rl_sw_chunk_count(&state);
		EXPECT_EQ(chunks.size(), count) << "leaked or missing chunks";
		for (uint32_t i = 0; i < count; i++)
		{
			EXPECT_EQ(chunks.count(rl_sw_chunk_seq(state.first_chunk, i)), 1u)
				<< "chunk " << i << " of " << count << " missing";
		}
		max_chunks = std::max(max_chunks, count);
		max_bytes = std::max(max_bytes, StoredBytes());
		return true;
	}

	RlDecision Take(int64_t now_us, int64_t cost)
	{
		RlSwDecision result;
		if (!Call(now_us, cost, &result))
			return RlDecision{};
		return result.decision;
	}

	// Every entry, oldest first, reading the sealed chunks from the store.
	std::vector<RlSwEntry> Log() const
	{
		const RlSlidingWindowState state = Load();
		std::vector<RlSwEntry> log(state.front.entries, state.front.entries + state.front.count);
		for (uint32_t i = 0; i < rl_sw_chunk_count(&state); i++)
		{
			const auto found = chunks.find(rl_sw_chunk_seq(state.first_chunk, i));
			if (found == chunks.end())
			{
				ADD_FAILURE() << "chunk " << i << " missing";
				continue;
			}
			// A chunk decodes as the back of a header with an empty front.
			std::vector<uint8_t> bytes{1, 1, 1, 0, 0};
			bytes.insert(bytes.end(), found->second.begin(), found->second.end());
			RlSlidingWindowState chunk;
			EXPECT_TRUE(rl_sw_decode_header(bytes.data(), static_cast<int32_t>(bytes.size()), 0, 0, &chunk));
			log.insert(log.end(), chunk.back.entries, chunk.back.entries + chunk.back.count);
		}
		log.insert(log.end(), state.back.entries, state.back.entries + state.back.count);
		return log;
	}

	// A refund, stored as the glue stores it (the chunks are never touched).
	RlDecision Refund(int64_t now_us, int64_t cost)
	{
		const RlSlidingWindowState stored = Load();
		RlSlidingWindowState state = stored;
		RlDecision d{};
		const std::string where = "sliding_window refund at " + std::to_string(now_us) + " cost " +
			std::to_string(cost);
		if (!rl_sw_refund(&limit, &state, now_us, cost, &d))
		{
			ADD_FAILURE() << where << " failed";
			return d;
		}
		CheckRefundInvariants(limit, now_us, d, where);
		EXPECT_EQ(d.state_changed, !SameSwState(state, stored)) << where;
		if (!d.state_changed)
			return d;
		EXPECT_FALSE(header.empty()) << where << ": a key never seen has nothing to give back";
		EXPECT_EQ(state.first_chunk, stored.first_chunk) << where;
		EXPECT_EQ(state.next_chunk, stored.next_chunk) << where;
		EXPECT_LE(state.front.bytes, stored.front.bytes) << where;
		EXPECT_LE(state.back.bytes, stored.back.bytes) << where;
		uint8_t bytes[RL_SW_MAX_HEADER_BYTES + 64];
		const int32_t len = rl_sw_encode_header(&state, bytes);
		EXPECT_GT(len, 0);
		EXPECT_LE(len, RL_SW_MAX_HEADER_BYTES);
		header.assign(bytes, bytes + len);
		admitted = state.admitted;
		stamp_us = state.stamp_us;
		EXPECT_TRUE(SameSwState(Load(), state)) << where << ": header round trip";
		// admitted is still the cost of every stored entry.
		int64_t total = 0;
		for (const RlSwEntry &entry : Log())
			total += entry.cost;
		EXPECT_EQ(total, state.admitted) << where;
		return d;
	}

	RlDecision Peek(int64_t now_us, int64_t cost)
	{
		RlSwDecision result;
		if (!Call(now_us, cost, &result, false))
			return RlDecision{};
		return result.decision;
	}
};

// Any zone algorithm behind one interface.
struct ZoneKey
{
	RlZoneLimit limit;
	CounterKey counter;
	SwKey sw;

	explicit ZoneKey(const RlZoneLimit &zone) : limit(zone)
	{
		counter.limit = zone;
		sw.limit = zone;
	}

	bool IsSw() const { return limit.algorithm == RL_ALGORITHM_SLIDING_WINDOW; }

	RlDecision Take(int64_t now_us, int64_t cost)
	{
		return IsSw() ? sw.Take(now_us, cost) : counter.Take(now_us, cost);
	}

	RlDecision Peek(int64_t now_us, int64_t cost)
	{
		return IsSw() ? sw.Peek(now_us, cost) : counter.Peek(now_us, cost);
	}
};

// ---------------------------------------------------------------------------
// Random helpers.
// ---------------------------------------------------------------------------

inline int64_t Uniform(std::mt19937_64 &rng, int64_t lo, int64_t hi)	// inclusive
{
	return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

inline bool Chance(std::mt19937_64 &rng, double p)
{
	return std::bernoulli_distribution(p)(rng);
}

// ceil and floor of a / b for b > 0.
inline Wide CeilDiv(Wide a, Wide b)
{
	const Wide q = a / b;
	return (a % b != 0 && a > 0) ? q + 1 : q;
}

inline Wide FloorDiv(Wide a, Wide b)
{
	const Wide q = a / b;
	return (a % b != 0 && a < 0) ? q - 1 : q;
}

}  // namespace zone_test

#endif							/* ZONE_HARNESS_H */
