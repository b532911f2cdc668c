// Exact sliding window: a request is admitted iff the cost admitted in the
// trailing period plus its own stays within the rate.
//
// The state is the log of admissions still in the period, oldest first:
// front buffer, sealed chunks (stored by the caller as rows of their own),
// back buffer.  Admissions append to the back; expiry pops from the front;
// when the back fills up it is sealed into a chunk, and when the front runs
// dry the oldest chunk (or the back) becomes the front.  Each entry is
// written once and popped once, and a call touches two bounded buffers plus
// at most one chunk in a few hundred calls: O(1) amortised.
//
// Encoding of a buffer: the first entry as zigzag(time) then cost, both
// LEB128 varints; each later entry as varint(delta << 1 | cost > 1), then
// varint(cost) when cost > 1.  Admissions at one microsecond merge into one
// entry.  A request a second apart costs 3 bytes, a millisecond apart 2:
// below the 8 bytes a raw admission time would take.
#include "rl_core.h"

#include <algorithm>
#include <cstring>

namespace {

using Wide = __int128;

constexpr uint8_t kHeaderFormat = 1;
// A popped front re-encodes its new first entry as absolute: it may exceed
// the sealing size by at most the largest absolute entry.
constexpr int32_t kMaxEntryBytes = 20;
constexpr int32_t kMaxBufferBytes = RL_SW_BUFFER_BYTES + kMaxEntryBytes;

int32_t VarintSize(uint64_t value) noexcept
{
	int32_t size = 1;
	while (value >= 0x80)
	{
		value >>= 7;
		size++;
	}
	return size;
}

uint8_t *PutVarint(uint8_t *out, uint64_t value) noexcept
{
	while (value >= 0x80)
	{
		*out++ = static_cast<uint8_t>(value | 0x80);
		value >>= 7;
	}
	*out++ = static_cast<uint8_t>(value);
	return out;
}

bool GetVarint(const uint8_t *&in, const uint8_t *end, uint64_t *value) noexcept
{
	uint64_t result = 0;
	for (int shift = 0; shift < 64 && in < end; shift += 7)
	{
		const uint8_t byte = *in++;
		result |= static_cast<uint64_t>(byte & 0x7f) << shift;
		if ((byte & 0x80) == 0)
		{
			*value = result;
			return true;
		}
	}
	return false;
}

uint64_t ZigZag(int64_t value) noexcept
{
	return (static_cast<uint64_t>(value) << 1) ^ static_cast<uint64_t>(value >> 63);
}

int64_t UnZigZag(uint64_t value) noexcept
{
	return static_cast<int64_t>(value >> 1) ^ -static_cast<int64_t>(value & 1);
}

uint64_t Delta(int64_t earlier, int64_t later) noexcept
{
	return static_cast<uint64_t>(later) - static_cast<uint64_t>(earlier);
}

int32_t FirstEntrySize(const RlSwEntry &entry) noexcept
{
	return VarintSize(ZigZag(entry.time_us)) + VarintSize(static_cast<uint64_t>(entry.cost));
}

int32_t NextEntrySize(const RlSwEntry &previous, const RlSwEntry &entry) noexcept
{
	const uint64_t delta = Delta(previous.time_us, entry.time_us);
	return VarintSize(delta << 1 | (entry.cost > 1 ? 1 : 0)) +
		(entry.cost > 1 ? VarintSize(static_cast<uint64_t>(entry.cost)) : 0);
}

int32_t EncodedSize(const RlSwBuffer &buffer) noexcept
{
	int32_t size = 0;
	for (int32_t i = 0; i < buffer.count; i++)
		size += i == 0 ? FirstEntrySize(buffer.entries[0])
			: NextEntrySize(buffer.entries[i - 1], buffer.entries[i]);
	return size;
}

uint8_t *Encode(const RlSwBuffer &buffer, uint8_t *out) noexcept
{
	for (int32_t i = 0; i < buffer.count; i++)
	{
		const RlSwEntry &entry = buffer.entries[i];
		if (i == 0)
		{
			out = PutVarint(out, ZigZag(entry.time_us));
			out = PutVarint(out, static_cast<uint64_t>(entry.cost));
			continue;
		}
		const uint64_t delta = Delta(buffer.entries[i - 1].time_us, entry.time_us);
		out = PutVarint(out, delta << 1 | (entry.cost > 1 ? 1 : 0));
		if (entry.cost > 1)
			out = PutVarint(out, static_cast<uint64_t>(entry.cost));
	}
	return out;
}

// Decodes and validates: costs >= 1, times non-decreasing without overflow.
bool Decode(const uint8_t *bytes, int32_t len, RlSwBuffer *buffer) noexcept
{
	const uint8_t *in = bytes;
	const uint8_t *end = bytes + len;
	buffer->count = 0;
	buffer->bytes = len;
	if (len < 0 || len > kMaxBufferBytes)
		return false;
	while (in < end)
	{
		RlSwEntry entry{};
		uint64_t word = 0;
		uint64_t cost = 1;
		if (buffer->count == RL_SW_BUFFER_ENTRIES || !GetVarint(in, end, &word))
			return false;
		if (buffer->count == 0)
		{
			entry.time_us = UnZigZag(word);
			if (!GetVarint(in, end, &cost))
				return false;
		}
		else
		{
			const int64_t previous = buffer->entries[buffer->count - 1].time_us;
			const uint64_t delta = word >> 1;
			if (delta > static_cast<uint64_t>(INT64_MAX) ||
				static_cast<Wide>(previous) + static_cast<Wide>(delta) > INT64_MAX)
				return false;
			entry.time_us = previous + static_cast<int64_t>(delta);
			if ((word & 1) != 0 && !GetVarint(in, end, &cost))
				return false;
		}
		if (cost < 1 || cost > static_cast<uint64_t>(RL_MAX_LIMIT))
			return false;
		entry.cost = static_cast<int64_t>(cost);
		buffer->entries[buffer->count++] = entry;
	}
	return true;
}

void Clear(RlSwBuffer *buffer) noexcept
{
	buffer->count = 0;
	buffer->bytes = 0;
}

// Drops the first n entries.
void PopFront(RlSwBuffer *buffer, int32_t n) noexcept
{
	if (n <= 0)
		return;
	std::memmove(buffer->entries, buffer->entries + n,
				 sizeof(RlSwEntry) * static_cast<size_t>(buffer->count - n));
	buffer->count -= n;
	buffer->bytes = EncodedSize(*buffer);
}

// Appends (or merges) entry if the buffer stays within the sealing size.
bool TryAppend(RlSwBuffer *buffer, const RlSwEntry &entry) noexcept
{
	if (buffer->count == 0)
	{
		const int32_t size = FirstEntrySize(entry);
		buffer->entries[0] = entry;
		buffer->count = 1;
		buffer->bytes = size;
		return true;
	}
	RlSwEntry &last = buffer->entries[buffer->count - 1];
	if (last.time_us == entry.time_us)
	{
		RlSwEntry merged{last.time_us, last.cost + entry.cost};
		const int32_t old_size = buffer->count == 1 ? FirstEntrySize(last)
			: NextEntrySize(buffer->entries[buffer->count - 2], last);
		const int32_t new_size = buffer->count == 1 ? FirstEntrySize(merged)
			: NextEntrySize(buffer->entries[buffer->count - 2], merged);
		if (buffer->bytes - old_size + new_size > RL_SW_BUFFER_BYTES)
			return false;
		last = merged;
		buffer->bytes += new_size - old_size;
		return true;
	}
	const int32_t size = NextEntrySize(last, entry);
	if (buffer->count == RL_SW_BUFFER_ENTRIES || buffer->bytes + size > RL_SW_BUFFER_BYTES)
		return false;
	buffer->entries[buffer->count++] = entry;
	buffer->bytes += size;
	return true;
}

uint32_t NextSeq(uint32_t seq) noexcept
{
	return seq >= RL_SW_MAX_CHUNK_SEQ ? 1 : seq + 1;
}

// What Decode guarantees of a buffer, for one handed in already decoded.
bool WellFormed(const RlSwBuffer &buffer) noexcept
{
	if (buffer.count < 0 || buffer.count > RL_SW_BUFFER_ENTRIES)
		return false;
	for (int32_t i = 0; i < buffer.count; i++)
	{
		const RlSwEntry &entry = buffer.entries[i];
		if (entry.cost < 1 || entry.cost > RL_MAX_LIMIT ||
			(i > 0 && entry.time_us < buffer.entries[i - 1].time_us))
			return false;
	}
	return true;
}

// Whether no entry is left in the trailing period (no chunk needs reading
// to tell: the newest entry has left it, or there is none).
bool NothingLive(const RlSlidingWindowState &state, uint32_t chunk_count, Wide horizon) noexcept
{
	return (state.front.count == 0 && chunk_count == 0 && state.back.count == 0) ||
		static_cast<Wide>(state.newest_us) <= horizon;
}

// Takes up to cost off the newest entries still in the trailing period,
// dropping those that reach 0; returns how much it took.  An entry's
// encoding only shrinks as its cost does (the caller recounts the bytes).
int64_t TakeOffNewest(RlSwBuffer *buffer, Wide horizon, int64_t cost) noexcept
{
	int64_t taken = 0;
	while (taken < cost && buffer->count > 0)
	{
		RlSwEntry &newest = buffer->entries[buffer->count - 1];
		if (newest.time_us <= horizon)
			break;				// so is every older entry
		const int64_t share = std::min(newest.cost, cost - taken);
		taken += share;
		newest.cost -= share;
		if (newest.cost > 0)
			break;
		buffer->count--;
	}
	return taken;
}

// The cost in the trailing period as rl_sw_take counts it, without reading
// a chunk: the expired entries ahead of the first one still in the period
// are counted out, oldest first.  Where that would go past the front into
// the sealed chunks, their entries count as still in the period, so
// remaining is never overstated.
int64_t AdmittedWithoutChunks(const RlSlidingWindowState &state, uint32_t chunk_count,
							  Wide horizon) noexcept
{
	if (NothingLive(state, chunk_count, horizon))
		return 0;
	int64_t admitted = std::clamp<int64_t>(state.admitted, 0, RL_MAX_LIMIT);
	for (const RlSwBuffer *buffer : {&state.front, &state.back})
	{
		for (int32_t i = 0; i < buffer->count; i++)
		{
			if (buffer->entries[i].time_us > horizon)
				return admitted;
			admitted = std::max<int64_t>(0, admitted - buffer->entries[i].cost);
		}
		if (chunk_count > 0)
			return admitted;
	}
	return 0;					// every entry expired (a newest_us edited by hand)
}

// What a decision reports of the allowance, from the cost still in the
// trailing period after it.
void ReportAllowance(const RlZoneLimit &limit, int64_t admitted, int64_t newest_us,
					 int64_t now_us, RlDecision *decision) noexcept
{
	decision->remaining = std::max<int64_t>(0, limit.rate - admitted);
	// Hand-edited times can put the difference past 64 bits: saturate.
	decision->reset_after_us = admitted > 0
		? static_cast<int64_t>(std::clamp<Wide>(static_cast<Wide>(newest_us) + limit.period_us - now_us,
												0, INT64_MAX))
		: 0;
}

}  // namespace

extern "C" void
rl_sw_init(RlSlidingWindowState *state) noexcept
{
	state->admitted = 0;
	state->stamp_us = INT64_MIN;
	state->newest_us = INT64_MIN;
	state->first_chunk = 1;
	state->next_chunk = 1;
	Clear(&state->front);
	Clear(&state->back);
}

extern "C" bool
rl_sw_idle(const RlZoneLimit *limit, const RlSlidingWindowState *state, int64_t now_us) noexcept
{
	// An earlier clock would be decided at the key's stamp, not at now.
	if (now_us < state->stamp_us)
		return false;
	if (state->front.count == 0 && state->back.count == 0 && rl_sw_chunk_count(state) == 0)
		return true;
	return static_cast<__int128>(state->newest_us) <= static_cast<__int128>(now_us) - limit->period_us;
}

extern "C" uint32_t
rl_sw_chunk_count(const RlSlidingWindowState *state) noexcept
{
	const uint32_t first = state->first_chunk;
	const uint32_t next = state->next_chunk;
	return next >= first ? next - first : RL_SW_MAX_CHUNK_SEQ - first + next;
}

extern "C" uint32_t
rl_sw_chunk_seq(uint32_t first, uint32_t index) noexcept
{
	const uint64_t zero_based = (static_cast<uint64_t>(first) - 1 + index) % RL_SW_MAX_CHUNK_SEQ;
	return static_cast<uint32_t>(zero_based + 1);
}

extern "C" bool
rl_sw_take(const RlZoneLimit *limit, RlSlidingWindowState *state, int64_t now_us,
		   int64_t cost, const RlSwChunk *chunks, int32_t nchunks,
		   RlSwDecision *result) noexcept
{
	*result = RlSwDecision{};
	RlDecision &decision = result->decision;
	decision.capacity = limit->rate;

	// The clock never runs backwards for a key.
	now_us = std::max(now_us, state->stamp_us);
	decision.decided_at_us = now_us;
	// An entry at t is in the window while t > now - period.
	const Wide horizon = static_cast<Wide>(now_us) - limit->period_us;
	auto expired = [horizon](const RlSwEntry &entry) { return entry.time_us <= horizon; };

	// Work on a copy: state changes only if the call is admitted.
	static_assert(sizeof(RlSlidingWindowState) < 16384, "state copy on the stack");
	RlSlidingWindowState next = *state;
	const uint32_t chunk_count = rl_sw_chunk_count(state);
	int32_t consumed = 0;
	// admitted comes from a column of its own: keep a hand-edited value from
	// overflowing as expired costs are taken off (it is repaired below).
	next.admitted = std::clamp<int64_t>(next.admitted, 0, RL_MAX_LIMIT);

	if (NothingLive(next, chunk_count, horizon))
	{
		// Everything expired: no need to read a single chunk.
		consumed = static_cast<int32_t>(chunk_count);
		next.admitted = 0;
		Clear(&next.front);
		Clear(&next.back);
	}
	else
	{
		for (;;)
		{
			int32_t popped = 0;
			while (popped < next.front.count && expired(next.front.entries[popped]))
				next.admitted = std::max<int64_t>(0, next.admitted - next.front.entries[popped++].cost);
			PopFront(&next.front, popped);
			if (next.front.count > 0)
				break;
			if (static_cast<uint32_t>(consumed) < chunk_count)
			{
				if (consumed >= nchunks)
				{
					result->need_chunks = consumed + 1;
					return true;
				}
				if (!Decode(chunks[consumed].bytes, chunks[consumed].len, &next.front) ||
					next.front.count == 0)
					return false;
				consumed++;
				continue;
			}
			if (next.back.count == 0)
				break;
			next.front = next.back;
			Clear(&next.back);
		}
	}
	next.first_chunk = rl_sw_chunk_seq(state->first_chunk, static_cast<uint32_t>(consumed));
	const uint32_t chunks_left = chunk_count - static_cast<uint32_t>(consumed);
	if (next.front.count == 0)
		next.admitted = 0;		// also repairs a hand-edited count
	next.admitted = std::clamp<int64_t>(next.admitted, 0, RL_MAX_LIMIT);

	decision.allowed = next.admitted + cost <= limit->rate;
	if (!decision.allowed)
	{
		// Wait until enough of the oldest cost has expired.
		const int64_t need = next.admitted + cost - limit->rate;
		int64_t freed = 0;
		int64_t expires_at = next.newest_us;
		bool found = false;
		RlSwBuffer scratch;
		for (int32_t part = 0; !found; part++)
		{
			const RlSwBuffer *buffer;
			if (part == 0)
				buffer = &next.front;
			else if (static_cast<uint32_t>(part) <= chunks_left)
			{
				const int32_t index = consumed + part - 1;
				if (index >= nchunks)
				{
					result->need_chunks = index + 1;
					return true;
				}
				if (!Decode(chunks[index].bytes, chunks[index].len, &scratch))
					return false;
				buffer = &scratch;
			}
			else if (static_cast<uint32_t>(part) == chunks_left + 1)
				buffer = &next.back;
			else
				break;			// a hand-edited count: the newest entry bounds it
			for (int32_t i = 0; i < buffer->count && !found; i++)
			{
				freed += buffer->entries[i].cost;
				if (freed >= need)
				{
					expires_at = buffer->entries[i].time_us;
					found = true;
				}
			}
		}
		const Wide wait = static_cast<Wide>(expires_at) + limit->period_us - now_us;
		decision.retry_after_us = static_cast<int64_t>(std::max<Wide>(1, wait));
	}
	else if (cost > 0)
	{
		const RlSwEntry entry{now_us, cost};
		// Entries stay in time order: front, chunks, back.
		RlSwBuffer *tail = next.front.count == 0 ? &next.front
			: (next.back.count > 0 || chunks_left > 0) ? &next.back : &next.front;
		if (!TryAppend(tail, entry))
		{
			if (tail == &next.front)
				(void) TryAppend(&next.back, entry);	// the back is empty here
			else
			{
				// The back is full: seal it as the newest chunk.
				result->sealed = true;
				result->sealed_seq = next.next_chunk;
				result->sealed_len = static_cast<int32_t>(Encode(next.back, result->sealed_bytes) -
														  result->sealed_bytes);
				next.next_chunk = NextSeq(next.next_chunk);
				Clear(&next.back);
				(void) TryAppend(&next.back, entry);
			}
		}
		next.admitted += cost;
		next.newest_us = now_us;
		next.stamp_us = now_us;
		decision.state_changed = true;
	}

	ReportAllowance(*limit, next.admitted, next.newest_us, now_us, &decision);
	if (decision.state_changed)
	{
		result->consumed_chunks = consumed;
		result->consumed_from = state->first_chunk;
		*state = next;
	}
	return true;
}

extern "C" bool
rl_sw_refund(const RlZoneLimit *limit, RlSlidingWindowState *state, int64_t now_us,
			 int64_t cost, RlDecision *decision) noexcept
{
	*decision = RlDecision{};
	if (!WellFormed(state->front) || !WellFormed(state->back))
		return false;
	decision->allowed = true;	// a refund is never refused
	decision->capacity = limit->rate;
	// The clock never runs backwards for a key.
	now_us = std::max(now_us, state->stamp_us);
	decision->decided_at_us = now_us;
	const Wide horizon = static_cast<Wide>(now_us) - limit->period_us;
	const uint32_t chunk_count = rl_sw_chunk_count(state);

	if (cost > 0 && !NothingLive(*state, chunk_count, horizon))
	{
		RlSlidingWindowState next = *state;
		int64_t refunded = TakeOffNewest(&next.back, horizon, cost);
		// Past the chunks, which stay as sealed: the front's entries are
		// older, so giving their cost back frees less, never more.
		if (refunded < cost && next.back.count == 0)
			refunded += TakeOffNewest(&next.front, horizon, cost - refunded);
		if (refunded > 0)
		{
			// Both recounted: a front decoded from a longer (non-minimal)
			// encoding would otherwise store a length its entries no longer
			// take.
			next.front.bytes = EncodedSize(next.front);
			next.back.bytes = EncodedSize(next.back);
			next.admitted = std::max<int64_t>(0, std::clamp<int64_t>(next.admitted, 0, RL_MAX_LIMIT) - refunded);
			// With the back emptied and chunks left, the newest entry is in a
			// chunk: the old time stays, an upper bound (a reset reported
			// later than it comes, never earlier).
			const RlSwBuffer &newest = next.back.count > 0 ? next.back : next.front;
			if (newest.count > 0 && (chunk_count == 0 || &newest == &next.back))
				next.newest_us = newest.entries[newest.count - 1].time_us;
			next.stamp_us = now_us;
			*state = next;
			decision->state_changed = true;
		}
	}
	ReportAllowance(*limit, AdmittedWithoutChunks(*state, chunk_count, horizon), state->newest_us,
					now_us, decision);
	return true;
}

extern "C" int32_t
rl_sw_encode_header(const RlSlidingWindowState *state, uint8_t *out) noexcept
{
	uint8_t *p = out;
	*p++ = kHeaderFormat;
	p = PutVarint(p, state->first_chunk);
	p = PutVarint(p, state->next_chunk);
	p = PutVarint(p, ZigZag(state->newest_us));
	p = PutVarint(p, static_cast<uint64_t>(state->front.bytes));
	p = Encode(state->front, p);
	p = Encode(state->back, p);
	return static_cast<int32_t>(p - out);
}

extern "C" bool
rl_sw_decode_header(const uint8_t *bytes, int32_t len, int64_t admitted, int64_t stamp_us,
					RlSlidingWindowState *state) noexcept
{
	const uint8_t *in = bytes;
	const uint8_t *end = bytes + len;
	uint64_t first = 0;
	uint64_t next = 0;
	uint64_t newest = 0;
	uint64_t front_len = 0;

	rl_sw_init(state);
	if (len < 1 || *in++ != kHeaderFormat ||
		!GetVarint(in, end, &first) || !GetVarint(in, end, &next) ||
		!GetVarint(in, end, &newest) || !GetVarint(in, end, &front_len))
		return false;
	if (first < 1 || first > RL_SW_MAX_CHUNK_SEQ || next < 1 || next > RL_SW_MAX_CHUNK_SEQ ||
		front_len > static_cast<uint64_t>(end - in))
		return false;
	const int32_t front_bytes = static_cast<int32_t>(front_len);
	const int32_t back_bytes = static_cast<int32_t>(end - in) - front_bytes;
	// Only the front may outgrow the sealing size (see kMaxBufferBytes): a
	// longer back would be sealed into more than sealed_bytes holds.
	if (back_bytes > RL_SW_BUFFER_BYTES || !Decode(in, front_bytes, &state->front) ||
		!Decode(in + front_bytes, back_bytes, &state->back))
		return false;
	state->first_chunk = static_cast<uint32_t>(first);
	state->next_chunk = static_cast<uint32_t>(next);
	state->newest_us = UnZigZag(newest);
	state->admitted = admitted;
	state->stamp_us = stamp_us;
	return true;
}
