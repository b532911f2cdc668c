// The exact sliding window (rl_sw_take) through the chunk protocol, as the
// glue drives it (SwKey in zone_harness.h), against a brute-force log of
// admissions; its encoding's size bounds; and corrupt stored states.
#include "zone_harness.h"

#include <deque>

namespace {

using namespace zone_test;

SwKey Sw(int64_t rate, int64_t period_us)
{
	SwKey key;
	key.limit = MakeLimit(RL_ALGORITHM_SLIDING_WINDOW, rate, period_us);
	return key;
}

TEST(SlidingWindow, ChunkSequenceNumbersCycle)
{
	EXPECT_EQ(rl_sw_chunk_seq(1, 0), 1u);
	EXPECT_EQ(rl_sw_chunk_seq(1, 5), 6u);
	EXPECT_EQ(rl_sw_chunk_seq(RL_SW_MAX_CHUNK_SEQ, 0), static_cast<uint32_t>(RL_SW_MAX_CHUNK_SEQ));
	EXPECT_EQ(rl_sw_chunk_seq(RL_SW_MAX_CHUNK_SEQ, 1), 1u);
	EXPECT_EQ(rl_sw_chunk_seq(RL_SW_MAX_CHUNK_SEQ - 1, 3), 2u);
	RlSlidingWindowState state;
	rl_sw_init(&state);
	EXPECT_EQ(rl_sw_chunk_count(&state), 0u);
	state.first_chunk = RL_SW_MAX_CHUNK_SEQ - 1;
	state.next_chunk = 3;	// RL_SW_MAX_CHUNK_SEQ - 1, RL_SW_MAX_CHUNK_SEQ, 1, 2
	EXPECT_EQ(rl_sw_chunk_count(&state), 4u);
	state.first_chunk = 5;
	state.next_chunk = 5;
	EXPECT_EQ(rl_sw_chunk_count(&state), 0u);
}

TEST(SlidingWindow, TrailingPeriodExactly)
{
	SwKey key = Sw(3, 100);
	RlDecision d = key.Take(1000, 1);
	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.capacity, 3);
	EXPECT_EQ(d.remaining, 2);
	EXPECT_EQ(d.reset_after_us, 100);
	EXPECT_TRUE(key.Take(1030, 1).allowed);
	d = key.Take(1060, 1);
	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.remaining, 0);
	EXPECT_EQ(d.reset_after_us, 100);
	// The call at 1000 leaves the window at 1100, not before.
	d = key.Take(1099, 1);
	EXPECT_FALSE(d.allowed);
	EXPECT_EQ(d.remaining, 0);
	EXPECT_EQ(d.retry_after_us, 1);
	EXPECT_EQ(d.reset_after_us, 61);
	d = key.Take(1100, 1);
	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.remaining, 0);
	// Two at once need the two oldest gone: 1030 and 1060.
	d = key.Take(1101, 2);
	EXPECT_FALSE(d.allowed);
	EXPECT_EQ(d.retry_after_us, 1160 - 1101);
	EXPECT_TRUE(key.Take(1160, 2).allowed);
	// Long idle: everything expires.
	d = key.Take(5000, 0);
	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.remaining, 3);
	EXPECT_EQ(d.reset_after_us, 0);
	EXPECT_TRUE(key.Take(5000, 3).allowed);
	EXPECT_EQ(key.Load().admitted, 3);
}

TEST(SlidingWindow, CallsAtOneMicrosecondMerge)
{
	SwKey key = Sw(1000, kSecond);
	for (int i = 0; i < 1000; i++)
		ASSERT_TRUE(key.Take(kT0, 1).allowed) << i;
	EXPECT_FALSE(key.Take(kT0, 1).allowed);
	const RlSlidingWindowState state = key.Load();
	EXPECT_EQ(state.admitted, 1000);
	EXPECT_EQ(state.front.count + state.back.count, 1);
	EXPECT_EQ(rl_sw_chunk_count(&state), 0u);
	EXPECT_LT(key.StoredBytes(), 32u);
	const RlDecision d = key.Take(kT0 + kSecond - 1, 1000);
	EXPECT_FALSE(d.allowed);
	EXPECT_EQ(d.retry_after_us, 1);
	EXPECT_TRUE(key.Take(kT0 + kSecond, 1000).allowed);
}

TEST(SlidingWindow, CostZeroAndRefusalsStoreNothing)
{
	SwKey key = Sw(2, kSecond);
	RlDecision d = key.Take(kT0, 0);
	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.remaining, 2);
	EXPECT_TRUE(key.header.empty());
	ASSERT_TRUE(key.Take(kT0, 2).allowed);
	const std::vector<uint8_t> header = key.header;
	EXPECT_FALSE(key.Take(kT0 + 1, 1).allowed);
	EXPECT_TRUE(key.Take(kT0 + 2, 0).allowed);
	EXPECT_EQ(key.header, header);
	EXPECT_EQ(key.stamp_us, kT0);
}

// A request a second apart takes 3 bytes, a millisecond apart 2, so the
// state stays well below the 8 bytes a raw admission time would take.
TEST(SlidingWindow, BytesPerAdmission)
{
	for (const auto &[gap, per_entry] : {std::pair<int64_t, size_t>{kSecond, 3}, {1000, 2}, {1, 1}})
	{
		const int64_t rate = 5000;
		SwKey key = Sw(rate, rate * gap);
		int64_t now = kT0;
		for (int64_t i = 0; i < 3 * rate; i++, now += gap)
			ASSERT_TRUE(key.Take(now, 1).allowed) << gap << " " << i;
		// Plus a few bytes a chunk for its first entry's absolute time.
		EXPECT_LE(key.max_bytes, per_entry * rate * 21 / 20 + 64) << gap;
		EXPECT_GE(key.max_bytes, per_entry * rate * 9 / 10) << gap;
		EXPECT_GT(key.sealed, 30) << gap;
		EXPECT_GT(key.consumed, 30) << gap;
		EXPECT_LE(key.max_chunks, (per_entry * rate) / 200 + 1) << gap;
		// As many chunk reads as chunks emptied: each chunk is read once.
		EXPECT_LE(key.chunk_loads, key.consumed + 1) << gap;
	}
}

// Chunk sequence numbers wrap around from RL_SW_MAX_CHUNK_SEQ to 1.
TEST(SlidingWindow, ChunkSequenceWrapsAround)
{
	SwKey key = Sw(2000, kSecond);
	ASSERT_TRUE(key.Take(kT0, 1).allowed);
	RlSlidingWindowState state = key.Load();
	state.first_chunk = RL_SW_MAX_CHUNK_SEQ - 2;
	state.next_chunk = RL_SW_MAX_CHUNK_SEQ - 2;
	uint8_t bytes[RL_SW_MAX_HEADER_BYTES];
	key.header.assign(bytes, bytes + rl_sw_encode_header(&state, bytes));
	uint32_t min_seq = UINT32_MAX;
	uint32_t max_seq = 0;
	for (int64_t i = 1; i < 6000; i++)
	{
		ASSERT_TRUE(key.Take(kT0 + i * 1000, 1).allowed) << i;
		for (const auto &chunk : key.chunks)
		{
			min_seq = std::min(min_seq, chunk.first);
			max_seq = std::max(max_seq, chunk.first);
		}
	}
	EXPECT_EQ(min_seq, 1u);
	EXPECT_EQ(max_seq, static_cast<uint32_t>(RL_SW_MAX_CHUNK_SEQ));
	EXPECT_GT(key.consumed, 10);
}

// ---------------------------------------------------------------------------
// Brute force: every admission ever, with prefix sums of the costs.
// ---------------------------------------------------------------------------

struct SwReference
{
	int64_t rate;
	int64_t period;
	std::vector<int64_t> times;
	std::vector<int64_t> prefix{0};		// prefix[i]: cost of the first i admissions
	std::optional<int64_t> stamp;

	// Index of the first admission still in the trailing period at now.
	size_t FirstLive(int64_t now) const
	{
		const Wide horizon = static_cast<Wide>(now) - period;
		return static_cast<size_t>(std::upper_bound(times.begin(), times.end(), horizon,
													[](Wide h, int64_t t) { return h < t; }) -
								   times.begin());
	}

	RlDecision Take(int64_t now, int64_t cost)
	{
		if (stamp)
			now = std::max(now, *stamp);
		const size_t first = FirstLive(now);
		const int64_t live = prefix.back() - prefix[first];
		RlDecision d{};
		d.capacity = rate;
		d.allowed = live + cost <= rate;
		if (!d.allowed)
		{
			// The oldest admissions whose expiry frees enough.
			const int64_t need = live + cost - rate;
			const size_t last = static_cast<size_t>(
				std::lower_bound(prefix.begin() + first + 1, prefix.end(), prefix[first] + need) -
				prefix.begin()) - 1;
			d.retry_after_us = static_cast<int64_t>(static_cast<Wide>(times[last]) + period - now);
		}
		const int64_t after = d.allowed ? live + cost : live;
		d.remaining = rate - after;
		d.decided_at_us = now;
		d.state_changed = d.allowed && cost > 0;
		if (d.state_changed)
		{
			times.push_back(now);
			prefix.push_back(prefix.back() + cost);
			stamp = now;
		}
		d.reset_after_us = after > 0 ? static_cast<int64_t>(static_cast<Wide>(times.back()) + period - now) : 0;
		return d;
	}
};

struct Traffic
{
	int64_t period;
	int64_t gap;	// typical time between calls
};

Traffic RandomTraffic(std::mt19937_64 &rng, int64_t rate)
{
	Traffic t{};
	switch (Uniform(rng, 0, 5))
	{
		case 0:
			t.period = Uniform(rng, 1, 100);
			break;
		case 1:
			t.period = Uniform(rng, 1, 1000) * kSecond;
			break;
		case 2:
			t.period = RL_MAX_PERIOD_US - Uniform(rng, 0, 1000);
			break;
		default:
			t.period = Uniform(rng, 1000, 10 * kSecond);
			break;
	}
	// Demand from a quarter to four times the rate.
	t.gap = std::max<int64_t>(1, t.period / rate * Uniform(rng, 1, 16) / 4);
	return t;
}

// The next call's time.  Expiring jumps are rare enough (about one per
// period's worth of calls) that the log fills up and seals chunks.
int64_t NextTime(std::mt19937_64 &rng, int64_t now, const Traffic &t, int64_t rate)
{
	const double jumps = std::min(0.05, 2.0 / static_cast<double>(rate));
	const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
	if (u < jumps * 0.8)
		return now + Uniform(rng, t.period / 4, t.period);	// partial expiry
	if (u < jumps)
		return now + Uniform(rng, t.period, 3 * t.period);	// everything expires
	const int64_t kind = Uniform(rng, 0, 99);
	if (kind < 15)
		return now;								// a burst at one microsecond
	if (kind < 25)
		return now + Uniform(rng, 1, 3);
	if (kind < 95)
		return now + Uniform(rng, 0, 2 * t.gap);
	return now - Uniform(rng, 0, 5 * t.gap);	// the clock goes back
}

int64_t RandomCost(std::mt19937_64 &rng, int64_t rate)
{
	const int64_t kind = Uniform(rng, 0, 99);
	if (kind < 5)
		return 0;
	if (kind < 85)
		return 1;
	if (kind < 97)
		return Uniform(rng, 1, std::min<int64_t>(rate, 20));
	return Uniform(rng, 1, rate);
}

// Fewer, longer sequences at larger limits, so that each seals and consumes
// many chunks.
struct Plan
{
	int64_t rate;
	int sequences;
	int calls;
};

TEST(SlidingWindowModel, RandomSequencesMatchBruteForce)
{
	std::mt19937_64 rng(0x51d1e7a11ULL);
	const Plan plans[] = {{1, 800, 40}, {10, 800, 80}, {100, 300, 600}, {1000, 40, 5000}, {5000, 8, 20000}};
	int64_t sealed = 0;
	int64_t consumed = 0;
	int64_t refused = 0;
	int64_t calls = 0;
	for (const Plan &plan : plans)
	{
		for (int sequence = 0; sequence < plan.sequences; sequence++)
		{
			const Traffic traffic = RandomTraffic(rng, plan.rate);
			SwKey key = Sw(plan.rate, traffic.period);
			SwReference reference{plan.rate, traffic.period, {}, {0}, std::nullopt};
			int64_t now = Chance(rng, 0.8) ? kT0 : kPgMinTime + Uniform(rng, 0, kSecond);
			for (int call = 0; call < plan.calls; call++)
			{
				now = NextTime(rng, now, traffic, plan.rate);
				const int64_t cost = RandomCost(rng, plan.rate);
				const RlDecision expected = reference.Take(now, cost);
				const RlDecision actual = key.Take(now, cost);
				ASSERT_TRUE(SameDecision(actual, expected))
					<< "rate " << plan.rate << " sequence " << sequence << " call " << call << " period "
					<< traffic.period << " now " << now << " cost " << cost
					<< "\n  expected " << Describe(expected) << "\n  actual   " << Describe(actual);
				refused += !actual.allowed;
				calls++;
			}
			// Bounded state: at most 8 bytes an admission (plus a fixed
			// header and a few bytes a chunk), and a chunk seals at least 30
			// admissions (245 bytes of at most 8 each).
			ASSERT_LE(key.max_bytes, static_cast<size_t>(8 * plan.rate + plan.rate / 10 + 32))
				<< "rate " << plan.rate << " period " << traffic.period;
			ASSERT_LE(key.max_chunks, static_cast<uint32_t>(plan.rate / 30))
				<< "rate " << plan.rate << " period " << traffic.period;
			sealed += key.sealed;
			consumed += key.consumed;
		}
	}
	EXPECT_GT(sealed, 200);
	EXPECT_GT(consumed, 200);
	EXPECT_GT(refused, calls / 10);
	EXPECT_LT(refused, calls * 9 / 10);
}

// ---------------------------------------------------------------------------
// Corrupt stored state: decoding fails or yields something the algorithm
// handles without crashing (run under -fsanitize=address,undefined).
// ---------------------------------------------------------------------------

struct Snapshot
{
	RlZoneLimit limit;
	std::vector<uint8_t> header;
	int64_t admitted;
	int64_t stamp;
	std::map<uint32_t, std::vector<uint8_t>> chunks;
	int64_t now;
};

std::vector<Snapshot> Snapshots(std::mt19937_64 &rng)
{
	std::vector<Snapshot> snapshots;
	for (int64_t rate : {3, 200, 3000})
	{
		const Traffic traffic = RandomTraffic(rng, rate);
		SwKey key = Sw(rate, traffic.period);
		int64_t now = kT0;
		for (int call = 0; call < 3 * rate; call++)
		{
			now = NextTime(rng, now, traffic, rate);
			key.Take(now, RandomCost(rng, rate));
			if (Chance(rng, 20.0 / rate) && !key.header.empty())
				snapshots.push_back(Snapshot{key.limit, key.header, key.admitted, key.stamp_us, key.chunks, now});
		}
	}
	return snapshots;
}

void Mutate(std::mt19937_64 &rng, std::vector<uint8_t> *bytes)
{
	switch (Uniform(rng, 0, 4))
	{
		case 0:			// flip a few bits
			for (int64_t i = Uniform(rng, 1, 3); i > 0 && !bytes->empty(); i--)
				(*bytes)[Uniform(rng, 0, static_cast<int64_t>(bytes->size()) - 1)] ^=
					static_cast<uint8_t>(1 << Uniform(rng, 0, 7));
			break;
		case 1:			// truncate
			bytes->resize(Uniform(rng, 0, static_cast<int64_t>(bytes->size())));
			break;
		case 2:			// random bytes
			bytes->resize(Uniform(rng, 0, 600));
			for (uint8_t &byte : *bytes)
				byte = static_cast<uint8_t>(Uniform(rng, 0, 255));
			break;
		case 3:			// overwrite a byte with a continuation byte
			if (!bytes->empty())
				(*bytes)[Uniform(rng, 0, static_cast<int64_t>(bytes->size()) - 1)] |= 0x80;
			break;
		default:		// append garbage
			for (int64_t i = Uniform(rng, 1, 300); i > 0; i--)
				bytes->push_back(static_cast<uint8_t>(Uniform(rng, 0, 255)));
			break;
	}
}

// Runs one call on a (possibly corrupt) stored key; tolerates missing chunks.
void RunOnCorrupt(const Snapshot &s, int64_t now, int64_t cost)
{
	RlSlidingWindowState state;
	if (!rl_sw_decode_header(s.header.data(), static_cast<int32_t>(s.header.size()), s.admitted, s.stamp,
							 &state))
		return;
	std::vector<RlSwChunk> loaded;
	RlSwDecision result;
	for (int rounds = 0; rounds < 100000; rounds++)
	{
		if (!rl_sw_take(&s.limit, &state, now, cost, loaded.data(), static_cast<int32_t>(loaded.size()),
						&result))
			return;
		if (result.need_chunks == 0)
			break;
		if (result.need_chunks <= static_cast<int32_t>(loaded.size()))
		{
			ADD_FAILURE() << "need_chunks " << result.need_chunks << " after " << loaded.size();
			return;
		}
		while (static_cast<int32_t>(loaded.size()) < result.need_chunks)
		{
			const auto found = s.chunks.find(rl_sw_chunk_seq(state.first_chunk, static_cast<uint32_t>(loaded.size())));
			if (found == s.chunks.end())
				return;			// the glue reports the state corrupt
			loaded.push_back(RlSwChunk{found->second.data(), static_cast<int32_t>(found->second.size())});
		}
	}
	const RlDecision &d = result.decision;
	EXPECT_GE(d.remaining, 0);
	EXPECT_LE(d.remaining, s.limit.rate);
	EXPECT_EQ(d.state_changed, d.allowed && cost > 0);
	if (d.state_changed)
	{
		// Whatever was decoded re-encodes within the header's bound.
		uint8_t bytes[RL_SW_MAX_HEADER_BYTES + 1024];
		EXPECT_LE(rl_sw_encode_header(&state, bytes), RL_SW_MAX_HEADER_BYTES);
		if (result.sealed)
		{
			EXPECT_GT(result.sealed_len, 0);
			EXPECT_LE(result.sealed_len, RL_SW_BUFFER_BYTES);
		}
	}
}

TEST(SlidingWindowCorrupt, RandomCorruptionsNeverCrash)
{
	std::mt19937_64 rng(0xc0ffeeULL);
	const std::vector<Snapshot> snapshots = Snapshots(rng);
	ASSERT_GT(snapshots.size(), 30u);
	int decoded = 0;
	int refused = 0;
	for (int trial = 0; trial < 4000; trial++)
	{
		Snapshot s = snapshots[static_cast<size_t>(Uniform(rng, 0, static_cast<int64_t>(snapshots.size()) - 1))];
		const std::vector<uint8_t> original = s.header;
		if (s.chunks.empty() || Chance(rng, 0.5))
			Mutate(rng, &s.header);
		else
		{
			auto chunk = s.chunks.begin();
			std::advance(chunk, Uniform(rng, 0, static_cast<int64_t>(s.chunks.size()) - 1));
			Mutate(rng, &chunk->second);
		}
		if (s.header.empty() || s.header[0] != original[0])
		{
			RlSlidingWindowState state;
			EXPECT_FALSE(rl_sw_decode_header(s.header.data(), static_cast<int32_t>(s.header.size()),
											 s.admitted, s.stamp, &state));
			refused++;
			continue;
		}
		RlSlidingWindowState state;
		if (rl_sw_decode_header(s.header.data(), static_cast<int32_t>(s.header.size()), s.admitted, s.stamp,
								&state))
			decoded++;
		const int64_t cost = Uniform(rng, 0, s.limit.rate);
		RunOnCorrupt(s, s.now + Uniform(rng, -s.limit.period_us, 2 * s.limit.period_us), cost);
		RunOnCorrupt(s, s.now, 1);
	}
	EXPECT_GT(decoded, 100);
	EXPECT_GT(refused, 0);	// the changed-version branch ran too
}

// A header cut short: decoding fails unless the cut falls between two
// entries of the back buffer (its end is the header's end), and then the
// back is what was before the cut.
TEST(SlidingWindowCorrupt, TruncatedHeaders)
{
	std::mt19937_64 rng(0x7a11ULL);
	const std::vector<Snapshot> snapshots = Snapshots(rng);
	int failed = 0;
	for (const Snapshot &s : snapshots)
	{
		RlSlidingWindowState full;
		ASSERT_TRUE(rl_sw_decode_header(s.header.data(), static_cast<int32_t>(s.header.size()), s.admitted,
										s.stamp, &full));
		uint8_t prefix_bytes[RL_SW_MAX_HEADER_BYTES];
		for (size_t len = 0; len < s.header.size(); len++)
		{
			RlSlidingWindowState cut;
			if (!rl_sw_decode_header(s.header.data(), static_cast<int32_t>(len), s.admitted, s.stamp, &cut))
			{
				failed++;
				continue;
			}
			EXPECT_TRUE(SameBuffer(cut.front, full.front)) << len;
			ASSERT_LT(cut.back.count, full.back.count) << len;
			for (int32_t i = 0; i < cut.back.count; i++)
			{
				EXPECT_EQ(cut.back.entries[i].time_us, full.back.entries[i].time_us);
				EXPECT_EQ(cut.back.entries[i].cost, full.back.entries[i].cost);
			}
			EXPECT_EQ(rl_sw_encode_header(&cut, prefix_bytes), static_cast<int32_t>(len));
		}
	}
	EXPECT_GT(failed, 1000);
}

// Hand-built encodings that must not decode.
TEST(SlidingWindowCorrupt, InvalidEncodingsAreRejected)
{
	SwKey key = Sw(10, kSecond);
	ASSERT_TRUE(key.Take(kT0, 1).allowed);
	ASSERT_TRUE(key.Take(kT0 + 5, 2).allowed);
	const std::vector<uint8_t> good = key.header;
	RlSlidingWindowState state;
	auto decodes = [&](const std::vector<uint8_t> &bytes) {
		return rl_sw_decode_header(bytes.data(), static_cast<int32_t>(bytes.size()), 3, kT0 + 5, &state);
	};
	ASSERT_TRUE(decodes(good));
	EXPECT_FALSE(decodes({}));
	std::vector<uint8_t> bad = good;
	bad[0] = 2;		// an unknown format
	EXPECT_FALSE(decodes(bad));
	EXPECT_FALSE(decodes({1, 0, 1, 0, 0}));		// chunk sequence 0
	EXPECT_FALSE(decodes({1, 1, 0, 0, 0}));
	EXPECT_TRUE(decodes({1, 1, 1, 0, 0}));		// empty
	EXPECT_FALSE(decodes({1, 0xff, 0xff, 0xff, 0xff, 0x0f, 1, 0, 0}));	// 2^32 - 1 > RL_SW_MAX_CHUNK_SEQ
	EXPECT_FALSE(decodes({1, 1, 1, 0, 5, 2, 1}));	// front longer than what follows
	EXPECT_FALSE(decodes({1, 1, 1, 0, 2, 2, 0}));	// an entry of cost 0
	EXPECT_TRUE(decodes({1, 1, 1, 0, 2, 2, 1}));
	EXPECT_FALSE(decodes({1, 1, 1, 0, 3, 2, 1, 1}));	// a delta with its cost flag but no cost
	EXPECT_FALSE(decodes({1, 1, 1, 0, 4, 2, 1, 3, 0}));	// flagged cost 0
	// An eleven-byte varint.
	EXPECT_FALSE(decodes({1, 1, 1, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0}));
	// Times past INT64_MAX: a first time of 2^62, then a delta of 2^62.
	auto with_delta = [](uint64_t delta) {
		std::vector<uint8_t> bytes{1, 1, 1, 0, 0};
		auto put = [&](uint64_t value) {
			while (value >= 0x80)
			{
				bytes.push_back(static_cast<uint8_t>(value | 0x80));
				value >>= 7;
			}
			bytes.push_back(static_cast<uint8_t>(value));
		};
		put(uint64_t{1} << 63);		// zigzag(2^62)
		put(1);
		put(delta << 1);			// cost flag clear: cost 1
		bytes[4] = static_cast<uint8_t>(bytes.size() - 5);
		return bytes;
	};
	EXPECT_TRUE(decodes(with_delta((uint64_t{1} << 62) - 1)));	// INT64_MAX
	EXPECT_EQ(state.front.entries[1].time_us, INT64_MAX);
	EXPECT_FALSE(decodes(with_delta(uint64_t{1} << 62)));
	EXPECT_FALSE(decodes(with_delta((uint64_t{1} << 63) - 1)));
	// A cost above RL_MAX_LIMIT.
	std::vector<uint8_t> costly{1, 1, 1, 0, 0, 2};
	for (uint8_t byte : {0x81, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x10})	// 2^53 + 1
		costly.push_back(byte);
	costly[4] = static_cast<uint8_t>(costly.size() - 5);
	EXPECT_FALSE(decodes(costly));
}

TEST(SlidingWindowCorrupt, InvalidChunksAreRejected)
{
	// Seal a few chunks, then spoil the oldest and expire the front.
	SwKey key = Sw(1000, kSecond);
	int64_t now = kT0;
	for (int i = 0; i < 600; i++, now += 1000)
		ASSERT_TRUE(key.Take(now, 1).allowed);
	ASSERT_GE(key.chunks.size(), 2u);
	const RlSlidingWindowState state = key.Load();
	const uint32_t oldest = state.first_chunk;
	const std::vector<uint8_t> good = key.chunks[oldest];
	// Late enough that the front has expired, not so late that all has.
	const int64_t later = state.front.entries[state.front.count - 1].time_us + kSecond;
	ASSERT_LT(later - kSecond, state.newest_us);
	for (const std::vector<uint8_t> &chunk : std::vector<std::vector<uint8_t>>{
			 {}, {2, 0}, {2, 1, 1}, {0x80}, std::vector<uint8_t>(300, 1)})
	{
		RlSlidingWindowState copy = state;
		const RlSwChunk spoilt{chunk.data(), static_cast<int32_t>(chunk.size())};
		RlSwDecision result;
		EXPECT_FALSE(rl_sw_take(&key.limit, &copy, later, 1, &spoilt, 1, &result)) << chunk.size();
	}
	RlSlidingWindowState copy = state;
	const RlSwChunk fine{good.data(), static_cast<int32_t>(good.size())};
	RlSwDecision result;
	EXPECT_TRUE(rl_sw_take(&key.limit, &copy, later, 1, &fine, 1, &result));
	EXPECT_TRUE(result.decision.allowed);
}

// The admitted and stamp columns are stored apart from the header: hand
// edits of them must not overflow either.
TEST(SlidingWindowCorrupt, HandEditedColumns)
{
	SwKey key = Sw(1000, kSecond);
	int64_t now = kT0;
	for (int i = 0; i < 600; i++, now += 1000)
		ASSERT_TRUE(key.Take(now, 1 + i % 2).allowed);
	for (int64_t admitted : {INT64_MIN, INT64_MIN + 1, int64_t{-1}, int64_t{0}, INT64_MAX, RL_MAX_LIMIT + 1})
	{
		for (int64_t stamp : {INT64_MIN, kPgMinTime, now, kPgMaxTime, INT64_MAX})
		{
			for (int64_t at : {now, now + kSecond / 2, now + 2 * kSecond})
			{
				for (int64_t cost : {0, 1, 1000})
				{
					const Snapshot s{key.limit, key.header, admitted, stamp, key.chunks, now};
					RunOnCorrupt(s, at, cost);
				}
			}
		}
	}
}

}  // namespace
