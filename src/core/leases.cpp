// Concurrency leases: at most capacity leases of a key held at once, each
// lapsing by itself at its expiry so that a client that never releases (it
// crashed, its connection dropped) gives its slot back in the end.
//
// A lease is held at t while t < expires_us.  Any int64 may be an expiry
// (the glue marks a gone holder with INT64_MIN) and any int64 a time, so
// every difference is taken in 128 bits and saturated.
#include "rl_core.h"

#include <algorithm>
#include <cstring>

namespace {

using Wide = __int128;

int64_t Saturate(Wide value) noexcept
{
	if (value > INT64_MAX)
		return INT64_MAX;
	if (value < INT64_MIN)
		return INT64_MIN;
	return static_cast<int64_t>(value);
}

// Little-endian whatever the host: the bytes are stored in rows and files
// that a server of another byte order may read back (a physical replica).
void StoreU64(uint64_t value, uint8_t *out) noexcept
{
	for (int i = 0; i < 8; i++)
		out[i] = static_cast<uint8_t>(value >> (8 * i));
}

uint64_t LoadU64(const uint8_t *in) noexcept
{
	uint64_t value = 0;
	for (int i = 0; i < 8; i++)
		value |= static_cast<uint64_t>(in[i]) << (8 * i);
	return value;
}

void StoreU32(uint32_t value, uint8_t *out) noexcept
{
	for (int i = 0; i < 4; i++)
		out[i] = static_cast<uint8_t>(value >> (8 * i));
}

uint32_t LoadU32(const uint8_t *in) noexcept
{
	uint32_t value = 0;
	for (int i = 0; i < 4; i++)
		value |= static_cast<uint32_t>(in[i]) << (8 * i);
	return value;
}

// Two's complement bit casts: memcpy, as an unsigned to signed conversion
// of a value above the signed maximum is implementation-defined before C++20.
template <typename To, typename From>
To BitCast(From from) noexcept
{
	static_assert(sizeof(To) == sizeof(From), "same size");
	To to;
	std::memcpy(&to, &from, sizeof to);
	return to;
}

bool Lapsed(const RlLease &lease, int64_t now_us) noexcept
{
	return lease.expires_us <= now_us;
}

// The clock never runs backwards for a key.
int64_t EffectiveNow(int64_t stamp_us, int64_t now_us) noexcept
{
	return std::max(now_us, stamp_us);
}

// Drops the leases lapsed at now_us, keeping the order of the rest; returns
// whether any was dropped.
bool DropLapsed(RlLease *leases, int32_t *count, int64_t now_us) noexcept
{
	int32_t kept = 0;
	for (int32_t i = 0; i < *count; i++)
		if (!Lapsed(leases[i], now_us))
			leases[kept++] = leases[i];
	const bool dropped = kept != *count;
	*count = std::max<int32_t>(kept, 0);
	return dropped;
}

// The leases held at now_us, as a decision needs them.
struct Held
{
	int64_t		count = 0;
	int64_t		first_expiry = INT64_MAX;	// meaningful when count > 0
	int64_t		last_expiry = INT64_MIN;
};

Held HeldAt(const RlLease *leases, int32_t count, int64_t now_us) noexcept
{
	Held held;
	for (int32_t i = 0; i < count; i++)
	{
		if (Lapsed(leases[i], now_us))
			continue;
		held.count++;
		held.first_expiry = std::min(held.first_expiry, leases[i].expires_us);
		held.last_expiry = std::max(held.last_expiry, leases[i].expires_us);
	}
	return held;
}

// The expiry at which so many of the held leases have lapsed that one slot
// is free: the first one's, unless the capacity was lowered below what the
// key holds, when as many more must lapse as the key holds beyond it.
// Found by bisection over the expiries rather than by sorting a copy: the
// core does not allocate, and a key is this far over only after its zone
// shrank.
int64_t SlotFreeAt(const RlLease *leases, int32_t count, int64_t now_us, const Held &held,
				   int64_t capacity) noexcept
{
	const int64_t must_lapse = held.count - std::max<int64_t>(capacity, 0) + 1;
	if (must_lapse <= 1)
		return held.first_expiry;
	if (must_lapse >= held.count)
		return held.last_expiry;
	auto lapsed_by = [&](Wide when) {
		int64_t n = 0;
		for (int32_t i = 0; i < count; i++)
			if (!Lapsed(leases[i], now_us) && leases[i].expires_us <= when)
				n++;
		return n;
	};
	// Invariant: fewer than must_lapse by low, at least must_lapse by high.
	Wide low = static_cast<Wide>(held.first_expiry) - 1;
	Wide high = held.last_expiry;
	while (high - low > 1)
	{
		const Wide middle = low + (high - low) / 2;
		if (lapsed_by(middle) >= must_lapse)
			high = middle;
		else
			low = middle;
	}
	return static_cast<int64_t>(high);
}

// What an acquire at now_us would decide on leases, without taking a slot.
RlDecision Look(const RlZoneLimit &limit, const RlLease *leases, int32_t count,
				int64_t now_us) noexcept
{
	const Held held = HeldAt(leases, count, now_us);
	RlDecision decision{};
	decision.capacity = limit.capacity;
	decision.decided_at_us = now_us;
	decision.allowed = held.count < limit.capacity;
	decision.remaining = decision.allowed ? limit.capacity - held.count : 0;
	// Held leases expire after now: every wait is at least 1.  Refused with
	// nothing held (a capacity of 0, which no zone has) no lapse can help.
	if (!decision.allowed)
		decision.retry_after_us = held.count > 0
			? Saturate(static_cast<Wide>(SlotFreeAt(leases, count, now_us, held, limit.capacity)) - now_us)
			: -1;
	decision.reset_after_us =
		held.count > 0 ? Saturate(static_cast<Wide>(held.last_expiry) - now_us) : 0;
	return decision;
}

}  // namespace

extern "C" bool
rl_leases_decode(const uint8_t *bytes, int32_t len, RlLease *leases, int32_t max,
				 int32_t *count) noexcept
{
	*count = 0;
	if (bytes == nullptr || len == 0)
		return true;
	if (len < 0 || len % RL_LEASE_BYTES != 0 || len / RL_LEASE_BYTES > max)
		return false;
	const int32_t n = len / RL_LEASE_BYTES;
	for (int32_t i = 0; i < n; i++)
	{
		const uint8_t *in = bytes + static_cast<size_t>(i) * RL_LEASE_BYTES;
		leases[i].nonce = LoadU64(in);
		leases[i].expires_us = BitCast<int64_t>(LoadU64(in + 8));
		leases[i].holder_pid = BitCast<int32_t>(LoadU32(in + 16));
		leases[i].holder_proc = BitCast<int32_t>(LoadU32(in + 20));
	}
	*count = n;
	return true;
}

extern "C" int32_t
rl_leases_encode(const RlLease *leases, int32_t count, uint8_t *out) noexcept
{
	for (int32_t i = 0; i < count; i++)
	{
		uint8_t *to = out + static_cast<size_t>(i) * RL_LEASE_BYTES;
		StoreU64(leases[i].nonce, to);
		StoreU64(BitCast<uint64_t>(leases[i].expires_us), to + 8);
		StoreU32(BitCast<uint32_t>(leases[i].holder_pid), to + 16);
		StoreU32(BitCast<uint32_t>(leases[i].holder_proc), to + 20);
	}
	return count > 0 ? count * RL_LEASE_BYTES : 0;
}

extern "C" RlDecision
rl_leases_acquire(const RlZoneLimit *limit, RlLease *leases, int32_t *count, int64_t stamp_us,
				  int64_t now_us, const RlLease *wanted) noexcept
{
	now_us = EffectiveNow(stamp_us, now_us);
	const bool dropped = DropLapsed(leases, count, now_us);
	RlDecision decision = Look(*limit, leases, *count, now_us);
	// A lease that has lapsed already is granted but not kept: it holds no
	// slot, and the next call would drop it anyway.
	const bool kept = decision.allowed && !Lapsed(*wanted, now_us);
	if (kept)
	{
		leases[(*count)++] = *wanted;
		decision.remaining--;
		decision.reset_after_us =
			std::max(decision.reset_after_us, Saturate(static_cast<Wide>(wanted->expires_us) - now_us));
	}
	decision.state_changed = dropped || kept;
	return decision;
}

extern "C" RlDecision
rl_leases_release(const RlZoneLimit *limit, RlLease *leases, int32_t *count, int64_t stamp_us,
				  int64_t now_us, uint64_t nonce, bool *released) noexcept
{
	now_us = EffectiveNow(stamp_us, now_us);
	bool changed = DropLapsed(leases, count, now_us);
	*released = false;
	for (int32_t i = 0; i < *count; i++)
	{
		if (leases[i].nonce != nonce)
			continue;
		std::memmove(&leases[i], &leases[i + 1], sizeof(RlLease) * static_cast<size_t>(*count - i - 1));
		(*count)--;
		*released = true;
		changed = true;
		break;
	}
	RlDecision decision = Look(*limit, leases, *count, now_us);
	decision.state_changed = changed;
	return decision;
}

extern "C" RlDecision
rl_leases_peek(const RlZoneLimit *limit, const RlLease *leases, int32_t count, int64_t stamp_us,
			   int64_t now_us) noexcept
{
	return Look(*limit, leases, count, EffectiveNow(stamp_us, now_us));
}

extern "C" bool
rl_leases_idle(const RlLease *leases, int32_t count, int64_t now_us) noexcept
{
	for (int32_t i = 0; i < count; i++)
		if (!Lapsed(leases[i], now_us))
			return false;
	return true;
}
