// SipHash: a pseudorandom function of short inputs under a 128-bit key
// (Aumasson and Bernstein, "SipHash: a fast short-input PRF", 2012).
// Written from the paper: four 64-bit words of state, the message taken in
// little-endian 8-byte words, the last one holding the message's length in
// its top byte; c rounds per word, d rounds at the end.  Redis and Python
// key their hash tables with it for the reason we do: callers choose the
// keys.
#include "rl_core.h"

#include <cstring>

namespace {

inline uint64_t Rotate(uint64_t x, int bits) noexcept
{
	return (x << bits) | (x >> (64 - bits));
}

struct SipState
{
	uint64_t v0, v1, v2, v3;

	explicit SipState(const RlHashKey &key) noexcept
		: v0(key.k0 ^ UINT64_C(0x736f6d6570736575)),
		  v1(key.k1 ^ UINT64_C(0x646f72616e646f6d)),
		  v2(key.k0 ^ UINT64_C(0x6c7967656e657261)),
		  v3(key.k1 ^ UINT64_C(0x7465646279746573))
	{
	}

	void Round() noexcept
	{
		v0 += v1; v1 = Rotate(v1, 13); v1 ^= v0; v0 = Rotate(v0, 32);
		v2 += v3; v3 = Rotate(v3, 16); v3 ^= v2;
		v0 += v3; v3 = Rotate(v3, 21); v3 ^= v0;
		v2 += v1; v1 = Rotate(v1, 17); v1 ^= v2; v2 = Rotate(v2, 32);
	}

	void Compress(uint64_t word, int rounds) noexcept
	{
		v3 ^= word;
		for (int i = 0; i < rounds; i++)
			Round();
		v0 ^= word;
	}

	uint64_t Finish(int rounds) noexcept
	{
		v2 ^= 0xff;
		for (int i = 0; i < rounds; i++)
			Round();
		return v0 ^ v1 ^ v2 ^ v3;
	}
};

inline uint64_t LoadLittleEndian(const unsigned char *bytes, size_t len) noexcept
{
	uint64_t word = 0;
	for (size_t i = 0; i < len; i++)
		word |= static_cast<uint64_t>(bytes[i]) << (8 * i);
	return word;
}

// The message's bytes after any words already taken (total: their length
// with those words), then the length word.
inline uint64_t HashRest(SipState &state, int c_rounds, int d_rounds, const unsigned char *bytes,
						 size_t len, size_t total) noexcept
{
	size_t whole = len & ~static_cast<size_t>(7);
	for (size_t at = 0; at < whole; at += 8)
	{
		uint64_t word;
		std::memcpy(&word, bytes + at, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
		word = __builtin_bswap64(word);
#endif
		state.Compress(word, c_rounds);
	}
	const uint64_t last = LoadLittleEndian(bytes + whole, len - whole) |
		(static_cast<uint64_t>(total & 0xff) << 56);
	state.Compress(last, c_rounds);
	return state.Finish(d_rounds);
}

}  // namespace

extern "C" uint64_t
rl_siphash(const RlHashKey *key, int c_rounds, int d_rounds, const void *bytes, size_t len) noexcept
{
	SipState state(*key);
	return HashRest(state, c_rounds, d_rounds, static_cast<const unsigned char *>(bytes), len, len);
}

extern "C" uint64_t
rl_keyed_hash(const RlHashKey *key, uint64_t word, const void *bytes, size_t len) noexcept
{
	SipState state(*key);
	state.Compress(word, 1);
	return HashRest(state, 1, 3, static_cast<const unsigned char *>(bytes), len, len + 8);
}
