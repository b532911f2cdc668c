// Unit tests of the concurrency leases (leases.cpp): the stored byte layout,
// acquire / release / peek / idle at and around every boundary, the extremes
// of int64 times (see the sanitizer build in the README of test/unit), and
// a model of the key checked against the core over random calls.
#include "zone_harness.h"

#include <array>
#include <limits>

namespace {

using namespace zone_test;

constexpr int64_t kMs = 1000;

RlZoneLimit ConcurrencyLimit(int64_t slots, int64_t ttl_us = kMinute)
{
	return MakeLimit(RL_ALGORITHM_CONCURRENCY, slots, ttl_us);
}

// A limit whose capacity the zone no longer accepts or was since changed
// (rl_zone_limit is checked on its own below): as the glue would hand it
// over after the zone's rate was lowered.
RlZoneLimit WithCapacity(RlZoneLimit limit, int64_t capacity)
{
	limit.rate = capacity;
	limit.capacity = capacity;
	return limit;
}

RlLease Lease(uint64_t nonce, int64_t expires_us, int32_t pid = 0, int32_t proc = 0)
{
	return RlLease{nonce, expires_us, pid, proc};
}

bool SameLease(const RlLease &a, const RlLease &b)
{
	return a.nonce == b.nonce && a.expires_us == b.expires_us && a.holder_pid == b.holder_pid &&
		a.holder_proc == b.holder_proc;
}

std::vector<uint64_t> Nonces(const std::vector<RlLease> &leases)
{
	std::vector<uint64_t> nonces;
	for (const RlLease &lease : leases)
		nonces.push_back(lease.nonce);
	return nonces;
}

// One key stored as the glue stores it: the encoded leases and the stamp,
// written back only when the decision says the state changed; read back
// with room for the leases held and one more.
struct LeaseKey
{
	RlZoneLimit limit;
	std::vector<uint8_t> bytes;
	int64_t stamp = 0;

	explicit LeaseKey(const RlZoneLimit &zone) : limit(zone) {}

	std::vector<RlLease> Decode() const
	{
		const int32_t room = static_cast<int32_t>(bytes.size() / RL_LEASE_BYTES + 1);
		std::vector<RlLease> leases(static_cast<size_t>(room));
		int32_t count = -1;
		EXPECT_TRUE(rl_leases_decode(bytes.empty() ? nullptr : bytes.data(),
									 static_cast<int32_t>(bytes.size()), leases.data(), room, &count));
		leases.resize(static_cast<size_t>(count));
		return leases;
	}

	void Store(std::vector<RlLease> leases, int32_t count, const RlDecision &d)
	{
		if (!d.state_changed)
			return;
		leases.resize(static_cast<size_t>(count));
		bytes.assign(leases.size() * RL_LEASE_BYTES, 0xee);
		EXPECT_EQ(rl_leases_encode(leases.data(), count, bytes.data()),
				  static_cast<int32_t>(bytes.size()));
		stamp = d.decided_at_us;
	}

	RlDecision Acquire(int64_t now_us, const RlLease &wanted)
	{
		std::vector<RlLease> leases = Decode();
		int32_t count = static_cast<int32_t>(leases.size());
		leases.resize(leases.size() + 1);
		const RlDecision d = rl_leases_acquire(&limit, leases.data(), &count, stamp, now_us, &wanted);
		Store(leases, count, d);
		return d;
	}

	RlDecision Release(int64_t now_us, uint64_t nonce, bool *released)
	{
		std::vector<RlLease> leases = Decode();
		int32_t count = static_cast<int32_t>(leases.size());
		const RlDecision d = rl_leases_release(&limit, leases.data(), &count, stamp, now_us, nonce, released);
		Store(leases, count, d);
		return d;
	}

	RlDecision Peek(int64_t now_us) const
	{
		const std::vector<RlLease> leases = Decode();
		return rl_leases_peek(&limit, leases.data(), static_cast<int32_t>(leases.size()), stamp, now_us);
	}

	bool Idle(int64_t now_us) const
	{
		const std::vector<RlLease> leases = Decode();
		return rl_leases_idle(leases.data(), static_cast<int32_t>(leases.size()), now_us);
	}
};

void ExpectDecision(const RlDecision &d, bool allowed, int64_t remaining, int64_t retry_after,
					int64_t reset_after, int64_t decided_at, bool state_changed)
{
	EXPECT_EQ(d.allowed, allowed) << Describe(d);
	EXPECT_EQ(d.remaining, remaining) << Describe(d);
	EXPECT_EQ(d.retry_after_us, retry_after) << Describe(d);
	EXPECT_EQ(d.reset_after_us, reset_after) << Describe(d);
	EXPECT_EQ(d.decided_at_us, decided_at) << Describe(d);
	EXPECT_EQ(d.state_changed, state_changed) << Describe(d);
}

// ---------------------------------------------------------------------------
// The byte layout.
// ---------------------------------------------------------------------------

TEST(LeasesCodec, LayoutIsLittleEndianFixedFields)
{
	const RlLease lease = Lease(0x0102030405060708ULL, INT64_C(0x1112131415161718), 0x21222324,
								static_cast<int32_t>(0xf1f2f3f4u));
	std::array<uint8_t, RL_LEASE_BYTES> out{};
	ASSERT_EQ(rl_leases_encode(&lease, 1, out.data()), RL_LEASE_BYTES);
	const std::array<uint8_t, RL_LEASE_BYTES> expected = {
		0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,	// nonce
		0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11,	// expires_us
		0x24, 0x23, 0x22, 0x21,							// holder_pid
		0xf4, 0xf3, 0xf2, 0xf1,							// holder_proc
	};
	EXPECT_EQ(out, expected);
}

TEST(LeasesCodec, RoundTripKeepsEveryValueAndTheOrder)
{
	const std::vector<RlLease> leases = {
		Lease(0, 0, 0, 0),
		Lease(UINT64_MAX, INT64_MAX, INT32_MAX, INT32_MAX),
		Lease(1, INT64_MIN, INT32_MIN, INT32_MIN),
		Lease(0x8000000000000000ULL, -1, -1, -1),
		Lease(42, kPgMaxTime, 12345, 7),
		Lease(43, kPgMinTime, 1, 0),
		Lease(0xdeadbeefcafef00dULL, kT0 + 1, 99999, 1023),
	};
	std::vector<uint8_t> bytes(leases.size() * RL_LEASE_BYTES);
	const int32_t n = static_cast<int32_t>(leases.size());
	ASSERT_EQ(rl_leases_encode(leases.data(), n, bytes.data()), n * RL_LEASE_BYTES);

	std::vector<RlLease> back(leases.size());
	int32_t count = -1;
	ASSERT_TRUE(rl_leases_decode(bytes.data(), static_cast<int32_t>(bytes.size()), back.data(), n, &count));
	ASSERT_EQ(count, n);
	for (int32_t i = 0; i < n; i++)
		EXPECT_TRUE(SameLease(back[i], leases[i])) << "lease " << i;

	// Encoding again gives the same bytes.
	std::vector<uint8_t> again(bytes.size());
	ASSERT_EQ(rl_leases_encode(back.data(), count, again.data()), n * RL_LEASE_BYTES);
	EXPECT_EQ(again, bytes);
}

TEST(LeasesCodec, NoBytesIsNoLeases)
{
	RlLease lease{};
	int32_t count = -1;
	EXPECT_TRUE(rl_leases_decode(nullptr, 0, &lease, 1, &count));
	EXPECT_EQ(count, 0);
	count = -1;
	const uint8_t byte = 0;
	EXPECT_TRUE(rl_leases_decode(&byte, 0, &lease, 1, &count));
	EXPECT_EQ(count, 0);
	// Not even room is needed for nothing.
	count = -1;
	EXPECT_TRUE(rl_leases_decode(nullptr, 0, nullptr, 0, &count));
	EXPECT_EQ(count, 0);
	EXPECT_EQ(rl_leases_encode(nullptr, 0, nullptr), 0);
}

TEST(LeasesCodec, RejectsAPartialLease)
{
	std::vector<uint8_t> bytes(3 * RL_LEASE_BYTES + 1, 0);
	std::vector<RlLease> leases(4);
	for (int32_t len : {1, RL_LEASE_BYTES - 1, RL_LEASE_BYTES + 1, 2 * RL_LEASE_BYTES - 1,
						3 * RL_LEASE_BYTES + 1})
	{
		int32_t count = -1;
		EXPECT_FALSE(rl_leases_decode(bytes.data(), len, leases.data(), 4, &count)) << "len " << len;
	}
	int32_t count = -1;
	EXPECT_FALSE(rl_leases_decode(bytes.data(), -RL_LEASE_BYTES, leases.data(), 4, &count));
	EXPECT_FALSE(rl_leases_decode(bytes.data(), INT32_MIN, leases.data(), 4, &count));
}

TEST(LeasesCodec, RejectsMoreThanMax)
{
	std::vector<RlLease> leases(3);
	for (size_t i = 0; i < leases.size(); i++)
		leases[i] = Lease(i + 1, kT0 + static_cast<int64_t>(i));
	std::vector<uint8_t> bytes(3 * RL_LEASE_BYTES);
	ASSERT_EQ(rl_leases_encode(leases.data(), 3, bytes.data()), 3 * RL_LEASE_BYTES);

	// A sentinel after the room must stay untouched.
	std::vector<RlLease> room(4, Lease(777, 777, 777, 777));
	int32_t count = -1;
	EXPECT_FALSE(rl_leases_decode(bytes.data(), 3 * RL_LEASE_BYTES, room.data(), 2, &count));
	EXPECT_TRUE(SameLease(room[2], Lease(777, 777, 777, 777)));
	EXPECT_FALSE(rl_leases_decode(bytes.data(), 3 * RL_LEASE_BYTES, room.data(), 0, &count));
	EXPECT_FALSE(rl_leases_decode(bytes.data(), 3 * RL_LEASE_BYTES, room.data(), -1, &count));
	// Exactly max is fine.
	ASSERT_TRUE(rl_leases_decode(bytes.data(), 3 * RL_LEASE_BYTES, room.data(), 3, &count));
	EXPECT_EQ(count, 3);
	EXPECT_TRUE(SameLease(room[3], Lease(777, 777, 777, 777)));
}

// ---------------------------------------------------------------------------
// Acquire, release, peek.
// ---------------------------------------------------------------------------

TEST(Leases, AcquireUpToCapacityThenRefusedWithExactWaits)
{
	LeaseKey key(ConcurrencyLimit(3));
	// Three leases of different lengths, taken 1 ms apart.
	ExpectDecision(key.Acquire(kT0, Lease(1, kT0 + 10 * kSecond)), true, 2, 0, 10 * kSecond, kT0, true);
	ExpectDecision(key.Acquire(kT0 + kMs, Lease(2, kT0 + 5 * kSecond)), true, 1, 0,
				   10 * kSecond - kMs, kT0 + kMs, true);
	ExpectDecision(key.Acquire(kT0 + 2 * kMs, Lease(3, kT0 + 30 * kSecond)), true, 0, 0,
				   30 * kSecond - 2 * kMs, kT0 + 2 * kMs, true);
	EXPECT_EQ(key.Decode().size(), 3u);

	// Full: refused until the first lease (2) lapses, reset when the last (3) does.
	const std::vector<uint8_t> before = key.bytes;
	const int64_t now = kT0 + kSecond;
	const RlDecision refused = key.Acquire(now, Lease(4, now + kMinute));
	ExpectDecision(refused, false, 0, 4 * kSecond, 29 * kSecond, now, false);
	EXPECT_EQ(refused.capacity, 3);
	EXPECT_EQ(key.bytes, before);
	ExpectDecision(key.Peek(now), false, 0, 4 * kSecond, 29 * kSecond, now, false);

	// At the promised time it passes, lease 2's slot reclaimed.
	const int64_t retry = now + refused.retry_after_us;
	ExpectDecision(key.Acquire(retry, Lease(4, retry + kSecond)), true, 0, 0,
				   kT0 + 30 * kSecond - retry, retry, true);
	EXPECT_EQ(Nonces(key.Decode()), (std::vector<uint64_t>{1, 3, 4}));
}

TEST(Leases, ALeaseLapsesExactlyAtItsExpiry)
{
	LeaseKey key(ConcurrencyLimit(1));
	const int64_t expiry = kT0 + kSecond;
	ASSERT_TRUE(key.Acquire(kT0, Lease(1, expiry)).allowed);

	// One microsecond before: still held.
	ExpectDecision(key.Acquire(expiry - 1, Lease(2, expiry + kSecond)), false, 0, 1, 1, expiry - 1, false);
	ExpectDecision(key.Peek(expiry - 1), false, 0, 1, 1, expiry - 1, false);
	EXPECT_FALSE(key.Idle(expiry - 1));
	// At expires_us: lapsed, its slot is free.
	EXPECT_TRUE(key.Idle(expiry));
	ExpectDecision(key.Peek(expiry), true, 1, 0, 0, expiry, false);
	ExpectDecision(key.Acquire(expiry, Lease(2, expiry + kSecond)), true, 0, 0, kSecond, expiry, true);
	EXPECT_EQ(Nonces(key.Decode()), (std::vector<uint64_t>{2}));
}

TEST(Leases, ReleaseFreesASlotOnce)
{
	LeaseKey key(ConcurrencyLimit(2));
	ASSERT_TRUE(key.Acquire(kT0, Lease(10, kT0 + 20 * kSecond)).allowed);
	ASSERT_TRUE(key.Acquire(kT0, Lease(11, kT0 + 10 * kSecond)).allowed);
	ASSERT_FALSE(key.Acquire(kT0, Lease(12, kT0 + 10 * kSecond)).allowed);

	bool released = false;
	const int64_t now = kT0 + kSecond;
	// The decision is what an acquire would see next: one slot free.
	ExpectDecision(key.Release(now, 10, &released), true, 1, 0, 9 * kSecond, now, true);
	EXPECT_TRUE(released);
	EXPECT_EQ(Nonces(key.Decode()), (std::vector<uint64_t>{11}));
	EXPECT_EQ(key.stamp, now);

	// Twice: nothing held under that nonce, nothing to store.
	const std::vector<uint8_t> before = key.bytes;
	released = true;
	ExpectDecision(key.Release(now, 10, &released), true, 1, 0, 9 * kSecond, now, false);
	EXPECT_FALSE(released);
	EXPECT_EQ(key.bytes, before);
	// An unknown nonce neither.
	released = true;
	EXPECT_FALSE(key.Release(now, 999, &released).state_changed);
	EXPECT_FALSE(released);

	// The slot is taken by the next acquire, which the release did not take.
	ExpectDecision(key.Acquire(now, Lease(12, now + kSecond)), true, 0, 0, 9 * kSecond, now, true);
	// Releasing the last lease leaves the key with nothing to wait for.
	ASSERT_TRUE(key.Release(now, 11, &released).state_changed);
	ASSERT_TRUE(released);
	ExpectDecision(key.Release(now, 12, &released), true, 2, 0, 0, now, true);
	EXPECT_TRUE(released);
	EXPECT_TRUE(key.bytes.empty());
	EXPECT_TRUE(key.Idle(now));
}

// A nonce is 64 bits: one that matches a lease's low (or high) 32 bits
// only is another lease's, and releases nothing.
TEST(Leases, ANonceMatchingHalfTheBitsReleasesNothing)
{
	const uint64_t nonce = UINT64_C(0x89abcdef01234567);
	LeaseKey key(ConcurrencyLimit(1));
	ASSERT_TRUE(key.Acquire(kT0, Lease(nonce, kT0 + 10 * kSecond)).allowed);
	bool released = true;
	EXPECT_FALSE(key.Release(kT0, nonce ^ (UINT64_C(1) << 63), &released).state_changed);
	EXPECT_FALSE(released);
	EXPECT_FALSE(key.Release(kT0, nonce ^ 1, &released).state_changed);
	EXPECT_FALSE(released);
	EXPECT_FALSE(key.Release(kT0, nonce & UINT64_C(0xffffffff), &released).state_changed);
	EXPECT_FALSE(released);
	EXPECT_TRUE(key.Release(kT0, nonce, &released).state_changed);
	EXPECT_TRUE(released);
}

TEST(Leases, ReleasingALapsedLeaseIsNotARelease)
{
	LeaseKey key(ConcurrencyLimit(2));
	ASSERT_TRUE(key.Acquire(kT0, Lease(1, kT0 + kSecond)).allowed);
	ASSERT_TRUE(key.Acquire(kT0, Lease(2, kT0 + 5 * kSecond)).allowed);
	bool released = true;
	// Lease 1 lapsed at kT0 + 1 s: dropped (stored), but not released by this call.
	const int64_t now = kT0 + kSecond;
	ExpectDecision(key.Release(now, 1, &released), true, 1, 0, 4 * kSecond, now, true);
	EXPECT_FALSE(released);
	EXPECT_EQ(Nonces(key.Decode()), (std::vector<uint64_t>{2}));
}

TEST(Leases, ALeaseLapsedInTheStoredListIsNotReleasedEither)
{
	// The stored list still holds lease 1 (nothing ran since it lapsed).
	const RlZoneLimit limit = ConcurrencyLimit(2);
	RlLease leases[2] = {Lease(1, kT0 + kSecond), Lease(2, kT0 + 5 * kSecond)};
	int32_t count = 2;
	bool released = true;
	const RlDecision d = rl_leases_release(&limit, leases, &count, kT0, kT0 + 2 * kSecond, 1, &released);
	EXPECT_FALSE(released);
	EXPECT_TRUE(d.state_changed);
	ASSERT_EQ(count, 1);
	EXPECT_EQ(leases[0].nonce, 2u);
}

TEST(Leases, DroppingLapsedLeasesKeepsTheOrder)
{
	const RlZoneLimit limit = ConcurrencyLimit(10);
	// Lapsed at kT0 + 5 s: 2, 4, 5, 7.
	const int64_t t = kT0 + 5 * kSecond;
	RlLease leases[9] = {
		Lease(1, t + 9), Lease(2, t), Lease(3, t + 1), Lease(4, t - 1), Lease(5, INT64_MIN),
		Lease(6, t + 3, 66, 6), Lease(7, kT0), Lease(8, t + 2),
	};
	int32_t count = 8;
	const RlLease wanted = Lease(9, t + 4);
	const RlDecision d = rl_leases_acquire(&limit, leases, &count, 0, t, &wanted);
	ASSERT_TRUE(d.allowed);
	EXPECT_TRUE(d.state_changed);
	ASSERT_EQ(count, 5);
	const uint64_t expected[] = {1, 3, 6, 8, 9};
	for (int32_t i = 0; i < count; i++)
		EXPECT_EQ(leases[i].nonce, expected[i]) << "position " << i;
	EXPECT_EQ(leases[2].holder_pid, 66);
	EXPECT_EQ(leases[2].holder_proc, 6);
	EXPECT_EQ(d.remaining, 5);
	EXPECT_EQ(d.reset_after_us, 9);

	// Release keeps the order of the rest as well.
	bool released = false;
	const RlDecision r = rl_leases_release(&limit, leases, &count, t, t, 3, &released);
	EXPECT_TRUE(released);
	EXPECT_TRUE(r.state_changed);
	ASSERT_EQ(count, 4);
	const uint64_t after[] = {1, 6, 8, 9};
	for (int32_t i = 0; i < count; i++)
		EXPECT_EQ(leases[i].nonce, after[i]) << "position " << i;
}

TEST(Leases, NothingDroppedNothingAddedStoresNothing)
{
	const RlZoneLimit limit = ConcurrencyLimit(1);
	RlLease leases[2] = {Lease(1, kT0 + kSecond), Lease(0, 0)};
	int32_t count = 1;
	const RlLease wanted = Lease(2, kT0 + kSecond);
	const RlDecision d = rl_leases_acquire(&limit, leases, &count, kT0, kT0, &wanted);
	EXPECT_FALSE(d.allowed);
	EXPECT_FALSE(d.state_changed);
	EXPECT_EQ(count, 1);
	EXPECT_EQ(leases[0].nonce, 1u);
	EXPECT_EQ(leases[1].nonce, 0u);		// wanted not written past the list
}

TEST(Leases, PeekChangesNothingAndDoesNotCompact)
{
	const RlZoneLimit limit = ConcurrencyLimit(3);
	const RlLease leases[3] = {Lease(1, kT0), Lease(2, kT0 + kSecond), Lease(3, kT0 + 3 * kSecond)};
	// At kT0 lease 1 has lapsed: one slot free.
	ExpectDecision(rl_leases_peek(&limit, leases, 3, 0, kT0), true, 1, 0, 3 * kSecond, kT0, false);
	// Just before, all three are held.
	ExpectDecision(rl_leases_peek(&limit, leases, 3, 0, kT0 - 1), false, 0, 1, 3 * kSecond + 1, kT0 - 1, false);
	EXPECT_EQ(leases[0].nonce, 1u);
	ExpectDecision(rl_leases_peek(&limit, nullptr, 0, 0, kT0), true, 3, 0, 0, kT0, false);
}

TEST(Leases, ClockGoingBackCountsAsTheStamp)
{
	LeaseKey key(ConcurrencyLimit(1));
	const int64_t later = kT0 + kMinute;
	ASSERT_TRUE(key.Acquire(later, Lease(1, later + kSecond)).allowed);
	ASSERT_EQ(key.stamp, later);

	// A backend whose clock is a minute behind decides at the key's time.
	ExpectDecision(key.Acquire(kT0, Lease(2, kT0 + kSecond)), false, 0, kSecond, kSecond, later, false);
	ExpectDecision(key.Peek(kT0), false, 0, kSecond, kSecond, later, false);
	bool released = false;
	ExpectDecision(key.Release(kT0, 1, &released), true, 1, 0, 0, later, true);
	EXPECT_TRUE(released);

	// A lease that lapsed before the key's time has lapsed, whatever the
	// caller's clock says.
	const RlZoneLimit limit = ConcurrencyLimit(1);
	RlLease leases[2] = {Lease(1, kT0 + kSecond), Lease(0, 0)};
	int32_t count = 1;
	const RlLease wanted = Lease(2, later + kSecond);
	const RlDecision d = rl_leases_acquire(&limit, leases, &count, later, kT0, &wanted);
	ExpectDecision(d, true, 0, 0, kSecond, later, true);
	ASSERT_EQ(count, 1);
	EXPECT_EQ(leases[0].nonce, 2u);
}

TEST(Leases, CapacityLoweredBelowTheLeasesHeld)
{
	// Five leases held, then the zone's rate lowered to 2.
	const RlZoneLimit limit = WithCapacity(ConcurrencyLimit(5), 2);
	RlLease leases[6] = {
		Lease(1, kT0 + 5 * kSecond), Lease(2, kT0 + 1 * kSecond), Lease(3, kT0 + 4 * kSecond),
		Lease(4, kT0 + 2 * kSecond), Lease(5, kT0 + 3 * kSecond),
	};
	int32_t count = 5;
	const RlLease wanted = Lease(6, kT0 + kMinute);
	// Four must lapse for one slot to be free: the fourth expiry (4 s).
	RlDecision d = rl_leases_acquire(&limit, leases, &count, 0, kT0, &wanted);
	ExpectDecision(d, false, 0, 4 * kSecond, 5 * kSecond, kT0, false);
	ASSERT_EQ(count, 5);
	ExpectDecision(rl_leases_peek(&limit, leases, count, 0, kT0 + 4 * kSecond - 1), false, 0, 1,
				   kSecond + 1, kT0 + 4 * kSecond - 1, false);
	ExpectDecision(rl_leases_peek(&limit, leases, count, 0, kT0 + 4 * kSecond), true, 1, 0, kSecond,
				   kT0 + 4 * kSecond, false);

	// Releasing one still leaves the key over its capacity.
	bool released = false;
	d = rl_leases_release(&limit, leases, &count, 0, kT0, 2, &released);
	EXPECT_TRUE(released);
	ExpectDecision(d, false, 0, 4 * kSecond, 5 * kSecond, kT0, true);

	// Equal expiries: all lapse together.
	const RlLease same[4] = {Lease(1, kT0 + 7), Lease(2, kT0 + 7), Lease(3, kT0 + 7), Lease(4, kT0 + 9)};
	ExpectDecision(rl_leases_peek(&limit, same, 4, 0, kT0), false, 0, 7, 9, kT0, false);
	const RlZoneLimit one = WithCapacity(limit, 1);
	ExpectDecision(rl_leases_peek(&one, same, 4, 0, kT0), false, 0, 9, 9, kT0, false);
}

TEST(Leases, ALeaseLapsedOnArrivalIsGrantedButHoldsNoSlot)
{
	const RlZoneLimit limit = ConcurrencyLimit(1);
	RlLease leases[1] = {};
	int32_t count = 0;
	const RlLease wanted = Lease(1, kT0);	// a time to live of 0
	ExpectDecision(rl_leases_acquire(&limit, leases, &count, 0, kT0, &wanted), true, 1, 0, 0, kT0, false);
	EXPECT_EQ(count, 0);
}

TEST(Leases, HolderGoneMarkIsLapsed)
{
	// The glue marks a lease whose session is gone with INT64_MIN.
	const RlZoneLimit limit = ConcurrencyLimit(1);
	RlLease leases[2] = {Lease(1, INT64_MIN, 4242, 3), Lease(0, 0)};
	int32_t count = 1;
	const RlLease wanted = Lease(2, kT0 + kSecond);
	ExpectDecision(rl_leases_acquire(&limit, leases, &count, 0, kT0, &wanted), true, 0, 0, kSecond, kT0, true);
	ASSERT_EQ(count, 1);
	EXPECT_EQ(leases[0].nonce, 2u);
	const RlLease gone = Lease(1, INT64_MIN);
	EXPECT_TRUE(rl_leases_idle(&gone, 1, INT64_MIN));
}

TEST(Leases, ExtremeTimesDoNotOverflow)
{
	const RlZoneLimit limit = ConcurrencyLimit(2);
	// Held for ever, decided at the earliest time there is.
	{
		const RlLease leases[2] = {Lease(1, INT64_MAX), Lease(2, INT64_MAX)};
		ExpectDecision(rl_leases_peek(&limit, leases, 2, INT64_MIN, INT64_MIN), false, 0, INT64_MAX, INT64_MAX,
					   INT64_MIN, false);
		ExpectDecision(rl_leases_peek(&limit, leases, 2, INT64_MIN, -1), false, 0, INT64_MAX, INT64_MAX, -1, false);
		ExpectDecision(rl_leases_peek(&limit, leases, 2, INT64_MIN, 0), false, 0, INT64_MAX, INT64_MAX, 0, false);
		ExpectDecision(rl_leases_peek(&limit, leases, 2, INT64_MIN, INT64_MAX - 1), false, 0, 1, 1, INT64_MAX - 1, false);
		// Nothing outlives the end of time.
		ExpectDecision(rl_leases_peek(&limit, leases, 2, INT64_MIN, INT64_MAX), true, 2, 0, 0, INT64_MAX, false);
		EXPECT_FALSE(rl_leases_idle(leases, 2, INT64_MAX - 1));
		EXPECT_TRUE(rl_leases_idle(leases, 2, INT64_MAX));
	}
	// Acquire and release at both ends.
	{
		RlLease leases[3] = {Lease(1, INT64_MIN + 1), Lease(2, INT64_MAX)};
		int32_t count = 2;
		const RlLease wanted = Lease(3, INT64_MIN + 2);
		ExpectDecision(rl_leases_acquire(&limit, leases, &count, INT64_MIN, INT64_MIN, &wanted), false, 0, 1,
					   INT64_MAX, INT64_MIN, false);
		ExpectDecision(rl_leases_acquire(&limit, leases, &count, INT64_MIN, INT64_MIN + 1, &wanted), true, 0, 0,
					   INT64_MAX, INT64_MIN + 1, true);
		EXPECT_EQ(count, 2);
		bool released = false;
		ExpectDecision(rl_leases_release(&limit, leases, &count, INT64_MIN, INT64_MIN + 1, 2, &released), true,
					   1, 0, 1, INT64_MIN + 1, true);
		EXPECT_TRUE(released);
		ExpectDecision(rl_leases_release(&limit, leases, &count, INT64_MIN, INT64_MAX, 3, &released), true, 2, 0,
					   0, INT64_MAX, true);
		EXPECT_FALSE(released);
		EXPECT_EQ(count, 0);
	}
	// A stamp at the end of time: every lease has lapsed.
	{
		RlLease leases[2] = {Lease(1, INT64_MAX), Lease(0, 0)};
		int32_t count = 1;
		const RlLease wanted = Lease(2, INT64_MAX);
		ExpectDecision(rl_leases_acquire(&limit, leases, &count, INT64_MAX, INT64_MIN, &wanted), true, 2, 0, 0,
					   INT64_MAX, true);
		EXPECT_EQ(count, 0);
	}
	// Over capacity (2) with the widest spread of expiries: the search for
	// the expiry that frees a slot spans the whole int64 range.
	{
		const RlLease leases[4] = {Lease(1, INT64_MAX), Lease(2, INT64_MIN + 1), Lease(3, INT64_MAX - 1),
								   Lease(4, INT64_MIN + 2)};
		ExpectDecision(rl_leases_peek(&limit, leases, 4, INT64_MIN, INT64_MIN), false, 0, INT64_MAX, INT64_MAX, INT64_MIN,
					   false);
		ExpectDecision(rl_leases_peek(&limit, leases, 4, INT64_MIN, INT64_MIN + 1), false, 0, INT64_MAX, INT64_MAX,
					   INT64_MIN + 1, false);
		ExpectDecision(rl_leases_peek(&limit, leases, 4, INT64_MIN, 0), false, 0, INT64_MAX - 1, INT64_MAX, 0, false);
		const RlZoneLimit one = WithCapacity(limit, 1);
		ExpectDecision(rl_leases_peek(&one, leases, 4, INT64_MIN, 0), false, 0, INT64_MAX, INT64_MAX, 0, false);
		const RlLease spread[4] = {Lease(1, -5), Lease(2, INT64_MAX), Lease(3, 5), Lease(4, -3)};
		ExpectDecision(rl_leases_peek(&limit, spread, 4, INT64_MIN, -10), false, 0, 15, INT64_MAX, -10, false);
		ExpectDecision(rl_leases_peek(&one, spread, 4, INT64_MIN, -10), false, 0, INT64_MAX, INT64_MAX, -10, false);
	}
}

TEST(Leases, Idle)
{
	EXPECT_TRUE(rl_leases_idle(nullptr, 0, kT0));
	const RlLease leases[3] = {Lease(1, kT0 - 5), Lease(2, kT0 + 3), Lease(3, INT64_MIN)};
	EXPECT_FALSE(rl_leases_idle(leases, 3, kT0));
	EXPECT_FALSE(rl_leases_idle(leases, 3, kT0 + 2));
	EXPECT_TRUE(rl_leases_idle(leases, 3, kT0 + 3));
	EXPECT_TRUE(rl_leases_idle(leases, 1, kT0 - 5));
	EXPECT_FALSE(rl_leases_idle(leases, 1, kT0 - 6));
	EXPECT_TRUE(rl_leases_idle(&leases[2], 1, INT64_MIN));

	// An idle key decides as a new one.
	LeaseKey key(ConcurrencyLimit(2));
	ASSERT_TRUE(key.Acquire(kT0, Lease(1, kT0 + kSecond)).allowed);
	ASSERT_TRUE(key.Idle(kT0 + kSecond));
	LeaseKey fresh(ConcurrencyLimit(2));
	EXPECT_TRUE(SameDecision(key.Peek(kT0 + kSecond), fresh.Peek(kT0 + kSecond)));
	EXPECT_TRUE(SameDecision(key.Acquire(kT0 + kSecond, Lease(2, kT0 + 3 * kSecond)),
							 fresh.Acquire(kT0 + kSecond, Lease(2, kT0 + 3 * kSecond))));
}

// ---------------------------------------------------------------------------
// A model of the key: nonce -> (expiry, order of acquisition), checked
// against the core, as the glue stores it, over random calls.
// ---------------------------------------------------------------------------

struct ModelLease
{
	int64_t		expires_us;
	int64_t		sequence;
	int32_t		holder_pid;
};

struct Model
{
	std::map<uint64_t, ModelLease> leases;
	int64_t stamp = 0;
	int64_t next_sequence = 0;

	std::vector<int64_t> HeldExpiries(int64_t now) const
	{
		std::vector<int64_t> expiries;
		for (const auto &[nonce, lease] : leases)
			if (lease.expires_us > now)
				expiries.push_back(lease.expires_us);
		std::sort(expiries.begin(), expiries.end());
		return expiries;
	}

	RlDecision Look(int64_t capacity, int64_t now) const
	{
		const std::vector<int64_t> held = HeldExpiries(now);
		const int64_t n = static_cast<int64_t>(held.size());
		RlDecision d{};
		d.capacity = capacity;
		d.decided_at_us = now;
		d.allowed = n < capacity;
		d.remaining = d.allowed ? capacity - n : 0;
		if (!d.allowed)
			d.retry_after_us = held[static_cast<size_t>(n - capacity)] - now;	// the (n - capacity + 1)th
		d.reset_after_us = n > 0 ? held.back() - now : 0;
		return d;
	}

	bool DropLapsed(int64_t now)
	{
		bool dropped = false;
		for (auto it = leases.begin(); it != leases.end();)
		{
			if (it->second.expires_us <= now)
			{
				it = leases.erase(it);
				dropped = true;
			}
			else
				++it;
		}
		return dropped;
	}

	RlDecision Acquire(int64_t capacity, int64_t now, const RlLease &wanted)
	{
		now = std::max(now, stamp);
		const bool dropped = DropLapsed(now);
		RlDecision d = Look(capacity, now);
		const bool kept = d.allowed && wanted.expires_us > now;
		if (kept)
		{
			leases[wanted.nonce] = ModelLease{wanted.expires_us, next_sequence++, wanted.holder_pid};
			d.remaining--;
			d.reset_after_us = std::max(d.reset_after_us, wanted.expires_us - now);
		}
		d.state_changed = dropped || kept;
		if (d.state_changed)
			stamp = now;
		return d;
	}

	RlDecision Release(int64_t capacity, int64_t now, uint64_t nonce, bool *released)
	{
		now = std::max(now, stamp);
		bool changed = DropLapsed(now);
		*released = leases.erase(nonce) > 0;
		changed = changed || *released;
		RlDecision d = Look(capacity, now);
		d.state_changed = changed;
		if (changed)
			stamp = now;
		return d;
	}

	// The nonces in the order the core must keep: that of acquisition.
	std::vector<uint64_t> Order() const
	{
		std::vector<std::pair<int64_t, uint64_t>> by_sequence;
		for (const auto &[nonce, lease] : leases)
			by_sequence.emplace_back(lease.sequence, nonce);
		std::sort(by_sequence.begin(), by_sequence.end());
		std::vector<uint64_t> order;
		for (const auto &entry : by_sequence)
			order.push_back(entry.second);
		return order;
	}
};

TEST(LeasesModel, RandomCallsDecideAsTheModel)
{
	std::mt19937_64 rng(0x1ea5e5ULL);
	int64_t calls = 0;
	int64_t refusals = 0;
	int64_t releases = 0;
	for (int run = 0; run < 60; run++)
	{
		const int64_t slots = Uniform(rng, 1, run % 3 == 0 ? 3 : 40);
		const int64_t ttl = Uniform(rng, 1, 50);
		RlZoneLimit limit = ConcurrencyLimit(slots, ttl);
		LeaseKey key(limit);
		Model model;
		int64_t now = Chance(rng, 0.5) ? kT0 : Uniform(rng, -100, 100);
		int64_t latest = now;
		uint64_t next_nonce = rng();
		std::vector<uint64_t> issued;

		for (int step = 0; step < 3000; step++)
		{
			std::ostringstream where;
			where << "run " << run << " step " << step << " slots " << key.limit.capacity << " now " << now;

			const int op = static_cast<int>(Uniform(rng, 0, 99));
			if (op < 15)
			{
				// Time passes, sometimes not at all, now and then backwards.
				now += Chance(rng, 0.1) ? -Uniform(rng, 1, 30) : Uniform(rng, 0, 10);
				latest = std::max(latest, now);
				continue;
			}
			if (op < 17)
			{
				// The zone's rate changes (lowered below what is held, too).
				key.limit = WithCapacity(limit, Uniform(rng, 1, slots + 2));
				continue;
			}
			calls++;
			if (op < 60)
			{
				const int64_t life = Chance(rng, 0.05) ? 0 : Uniform(rng, 1, 2 * ttl);
				const uint64_t nonce = next_nonce++;
				const RlLease wanted = Lease(nonce, std::max(now, model.stamp) + life,
											 static_cast<int32_t>(Uniform(rng, 0, 3)), 1);
				const RlDecision core = key.Acquire(now, wanted);
				const RlDecision expected = model.Acquire(key.limit.capacity, now, wanted);
				ASSERT_TRUE(SameDecision(core, expected))
					<< where.str() << " acquire\n  core  " << Describe(core) << "\n  model " << Describe(expected);
				if (core.allowed)
					issued.push_back(nonce);
				else
					refusals++;
			}
			else if (op < 90)
			{
				uint64_t nonce = rng();		// unknown, mostly
				if (!issued.empty() && Chance(rng, 0.9))
					nonce = issued[static_cast<size_t>(Uniform(rng, 0, static_cast<int64_t>(issued.size()) - 1))];
				bool released = false;
				bool model_released = false;
				const RlDecision core = key.Release(now, nonce, &released);
				const RlDecision expected = model.Release(key.limit.capacity, now, nonce, &model_released);
				ASSERT_EQ(released, model_released) << where.str() << " release " << nonce;
				ASSERT_TRUE(SameDecision(core, expected))
					<< where.str() << " release\n  core  " << Describe(core) << "\n  model " << Describe(expected);
				releases += released;
			}
			else
			{
				const int64_t at = std::max(now, model.stamp);
				const RlDecision core = key.Peek(now);
				const RlDecision expected = model.Look(key.limit.capacity, at);
				ASSERT_TRUE(SameDecision(core, expected))
					<< where.str() << " peek\n  core  " << Describe(core) << "\n  model " << Describe(expected);
				EXPECT_EQ(key.Idle(at), model.HeldExpiries(at).empty()) << where.str();
			}

			// The stored state: the same leases in the same order, the stamp,
			// and never more held than the capacity lets an acquire add.
			const std::vector<RlLease> stored = key.Decode();
			ASSERT_EQ(Nonces(stored), model.Order()) << where.str();
			for (const RlLease &lease : stored)
				ASSERT_EQ(lease.expires_us, model.leases.at(lease.nonce).expires_us) << where.str();
			ASSERT_EQ(key.stamp, model.stamp) << where.str();
			ASSERT_LE(static_cast<int64_t>(model.HeldExpiries(model.stamp).size()),
					  std::max<int64_t>(slots + 2, 0)) << where.str();
		}
	}
	// The runs reached every kind of outcome.
	EXPECT_GT(calls, 100000);
	EXPECT_GT(refusals, 1000);
	EXPECT_GT(releases, 1000);
}

// Held never exceeds capacity while the capacity stays put: at every
// instant, whichever order acquires and releases come in.
TEST(LeasesModel, NeverMoreHeldThanCapacity)
{
	std::mt19937_64 rng(0xc0ffeeULL);
	for (int run = 0; run < 40; run++)
	{
		const int64_t slots = Uniform(rng, 1, 8);
		LeaseKey key(ConcurrencyLimit(slots, kSecond));
		int64_t now = kT0;
		std::vector<uint64_t> issued;
		for (int step = 0; step < 2000; step++)
		{
			now += Uniform(rng, 0, 20) * kMs;
			if (Chance(rng, 0.6))
			{
				const uint64_t nonce = rng();
				const RlDecision d = key.Acquire(now, Lease(nonce, std::max(now, key.stamp) + Uniform(rng, 1, 300) * kMs));
				if (d.allowed)
					issued.push_back(nonce);
				EXPECT_GE(d.remaining, 0);
				EXPECT_LE(d.remaining, slots);
				if (!d.allowed)
				{
					EXPECT_GE(d.retry_after_us, 1);
					EXPECT_GE(d.reset_after_us, d.retry_after_us);
				}
			}
			else if (!issued.empty())
			{
				bool released = false;
				(void) key.Release(now, issued[static_cast<size_t>(Uniform(rng, 0, static_cast<int64_t>(issued.size()) - 1))],
								   &released);
			}
			const std::vector<RlLease> stored = key.Decode();
			int64_t held = 0;
			for (const RlLease &lease : stored)
				held += lease.expires_us > std::max(now, key.stamp);
			ASSERT_LE(held, slots) << "run " << run << " step " << step;
			ASSERT_LE(static_cast<int64_t>(stored.size()), slots) << "run " << run << " step " << step;
		}
	}
}

// ---------------------------------------------------------------------------
// The zone.
// ---------------------------------------------------------------------------

TEST(LeasesZone, LimitOfAConcurrencyZone)
{
	RlZoneLimit limit{};
	ASSERT_EQ(rl_zone_limit(RL_ALGORITHM_CONCURRENCY, 5, 30 * kSecond, -1, &limit), RL_ZONE_OK);
	EXPECT_EQ(limit.algorithm, RL_ALGORITHM_CONCURRENCY);
	EXPECT_EQ(limit.rate, 5);
	EXPECT_EQ(limit.capacity, 5);
	EXPECT_EQ(limit.period_us, 30 * kSecond);
	EXPECT_EQ(limit.refill_tick_us, 0);

	// No burst, not even one equal to the rate.
	for (int64_t burst : {int64_t{0}, int64_t{1}, int64_t{5}, int64_t{6}})
		EXPECT_EQ(rl_zone_limit(RL_ALGORITHM_CONCURRENCY, 5, kSecond, burst, &limit),
				  RL_ZONE_BURST_NOT_APPLICABLE) << "burst " << burst;

	// At most RL_CONCURRENCY_MAX_SLOTS slots; the error leaves the limit alone.
	ASSERT_EQ(rl_zone_limit(RL_ALGORITHM_CONCURRENCY, RL_CONCURRENCY_MAX_SLOTS, kSecond, -1, &limit), RL_ZONE_OK);
	EXPECT_EQ(limit.capacity, RL_CONCURRENCY_MAX_SLOTS);
	RlZoneLimit untouched{RL_ALGORITHM_FIXED_WINDOW, -7, -7, -7, -7};
	EXPECT_EQ(rl_zone_limit(RL_ALGORITHM_CONCURRENCY, RL_CONCURRENCY_MAX_SLOTS + 1, kSecond, -1, &untouched),
			  RL_ZONE_TOO_MANY_SLOTS);
	EXPECT_EQ(untouched.capacity, -7);
	EXPECT_EQ(rl_zone_limit(RL_ALGORITHM_CONCURRENCY, RL_MAX_LIMIT, kSecond, -1, &limit), RL_ZONE_TOO_MANY_SLOTS);

	// The usual rate and period checks come first.
	EXPECT_EQ(rl_zone_limit(RL_ALGORITHM_CONCURRENCY, 0, kSecond, -1, &limit), RL_ZONE_RATE_INVALID);
	EXPECT_EQ(rl_zone_limit(RL_ALGORITHM_CONCURRENCY, RL_MAX_LIMIT + 1, kSecond, -1, &limit),
			  RL_ZONE_RATE_INVALID);
	EXPECT_EQ(rl_zone_limit(RL_ALGORITHM_CONCURRENCY, 5, 0, -1, &limit), RL_ZONE_PERIOD_INVALID);
	EXPECT_EQ(rl_zone_limit(RL_ALGORITHM_CONCURRENCY, 5, RL_MAX_PERIOD_US + 1, -1, &limit),
			  RL_ZONE_PERIOD_INVALID);
	EXPECT_EQ(rl_zone_limit(RL_ALGORITHM_CONCURRENCY, 5, RL_MAX_PERIOD_US, -1, &limit), RL_ZONE_OK);
	EXPECT_EQ(rl_zone_limit(RL_ALGORITHM_CONCURRENCY, 20000, 0, 3, &limit), RL_ZONE_PERIOD_INVALID);
}

TEST(LeasesZone, CounterCallsRefuseAConcurrencyZone)
{
	// Leases are not a counter: a glue bug must not admit through one.
	const RlZoneLimit limit = ConcurrencyLimit(3);
	RlCounterState next{};
	const RlDecision d = rl_counter_take(&limit, nullptr, kT0, 1, &next);
	EXPECT_FALSE(d.allowed);
	EXPECT_FALSE(d.state_changed);
	const RlCounterState state{};
	EXPECT_FALSE(rl_counter_idle(&limit, &state, kT0));
	EXPECT_FALSE(rl_counter_needs_refill(&limit, &state));
}

TEST(LeasesZone, AZoneAtItsLargestHoldsEverySlot)
{
	LeaseKey key(ConcurrencyLimit(RL_CONCURRENCY_MAX_SLOTS, kMinute));
	std::vector<RlLease> leases(static_cast<size_t>(RL_CONCURRENCY_MAX_SLOTS) + 1);
	int32_t count = 0;
	for (int64_t i = 0; i < RL_CONCURRENCY_MAX_SLOTS; i++)
	{
		const RlLease wanted = Lease(static_cast<uint64_t>(i) + 1, kT0 + kMinute + i);
		const RlDecision d = rl_leases_acquire(&key.limit, leases.data(), &count, kT0, kT0, &wanted);
		ASSERT_TRUE(d.allowed) << i;
		ASSERT_EQ(d.remaining, RL_CONCURRENCY_MAX_SLOTS - i - 1);
	}
	const RlLease wanted = Lease(0, kT0 + kMinute);
	ExpectDecision(rl_leases_acquire(&key.limit, leases.data(), &count, kT0, kT0, &wanted), false, 0, kMinute,
				   kMinute + RL_CONCURRENCY_MAX_SLOTS - 1, kT0, false);
	// The whole list round-trips through its bytes.
	std::vector<uint8_t> bytes(static_cast<size_t>(count) * RL_LEASE_BYTES);
	ASSERT_EQ(rl_leases_encode(leases.data(), count, bytes.data()), count * RL_LEASE_BYTES);
	std::vector<RlLease> back(static_cast<size_t>(count));
	int32_t decoded = 0;
	ASSERT_TRUE(rl_leases_decode(bytes.data(), static_cast<int32_t>(bytes.size()), back.data(), count, &decoded));
	ASSERT_EQ(decoded, count);
	for (int32_t i = 0; i < count; i++)
		ASSERT_TRUE(SameLease(back[static_cast<size_t>(i)], leases[static_cast<size_t>(i)]));
}

}  // namespace
