// Unit tests of the keyed hash that places keys in shared memory: SipHash as
// its paper defines it, the keyed variant over a prefix word, and that the
// key (the server's secret) changes where keys land.
#include "core/rl_core.h"

#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>
#include <vector>

namespace {

const RlHashKey kPaperKey = {UINT64_C(0x0706050403020100), UINT64_C(0x0f0e0d0c0b0a0908)};

// The paper's worked example (appendix A): key 00 01 .. 0f, the 15 bytes
// 00 01 .. 0e, SipHash-2-4.
TEST(KeyedHash, SipHash24PaperExample)
{
	unsigned char message[15];
	for (int i = 0; i < 15; i++)
		message[i] = static_cast<unsigned char>(i);
	EXPECT_EQ(rl_siphash(&kPaperKey, 2, 4, message, sizeof message), UINT64_C(0xa129ca6149be45e5));
}

// The reference implementation's first vector: the empty message.
TEST(KeyedHash, SipHash24EmptyMessage)
{
	EXPECT_EQ(rl_siphash(&kPaperKey, 2, 4, "", 0), UINT64_C(0x726fdb47dd0e0e31));
}

// The keyed hash is SipHash-1-3 of the word's 8 little-endian bytes, then
// the bytes: every length around the word boundaries.
TEST(KeyedHash, IsSipHash13OfTheWordThenTheBytes)
{
	const RlHashKey key = {UINT64_C(0x0123456789abcdef), UINT64_C(0xfedcba9876543210)};
	const uint64_t word = (UINT64_C(16384) << 32) | 7;
	std::string bytes;
	for (int len = 0; len < 40; len++)
	{
		unsigned char message[48];
		for (int i = 0; i < 8; i++)
			message[i] = static_cast<unsigned char>(word >> (8 * i));
		std::memcpy(message + 8, bytes.data(), bytes.size());
		EXPECT_EQ(rl_keyed_hash(&key, word, bytes.data(), bytes.size()),
				  rl_siphash(&key, 1, 3, message, 8 + bytes.size()))
			<< "length " << len;
		bytes.push_back(static_cast<char>('a' + len % 26));
	}
}

// A pair hashes as the first, a NUL byte and the second, wherever the cut
// between them falls (across the word boundaries too): nothing is copied
// into one buffer, and ("ab", "c") is not ("a", "bc").
TEST(KeyedHash, APairIsItsPartsWithANulBetween)
{
	const RlHashKey key = {UINT64_C(0x243f6a8885a308d3), UINT64_C(0x13198a2e03707344)};
	const std::string message = "user:42 1000000:1000 and a few more bytes";
	for (size_t len = 0; len <= message.size(); len++)
		for (size_t cut = 0; cut <= len; cut++)
		{
			std::string joined = message.substr(0, cut);
			joined.push_back('\0');
			joined += message.substr(cut, len - cut);
			ASSERT_EQ(rl_keyed_hash_pair(&key, 77, message.data(), cut, message.data() + cut, len - cut),
					  rl_keyed_hash(&key, 77, joined.data(), joined.size()))
				<< "length " << len << " cut " << cut;
		}
	EXPECT_NE(rl_keyed_hash_pair(&key, 1, "ab", 2, "c", 1), rl_keyed_hash_pair(&key, 1, "a", 1, "bc", 2));
}

// What a caller controls (the bytes) and what the server does (the word:
// database and zone; the key: its secret) each change the hash.
TEST(KeyedHash, EveryInputCounts)
{
	const RlHashKey key = {1, 2};
	const RlHashKey other_key = {1, 3};
	const uint64_t h = rl_keyed_hash(&key, 5, "user:42", 7);
	EXPECT_NE(h, rl_keyed_hash(&other_key, 5, "user:42", 7));
	EXPECT_NE(h, rl_keyed_hash(&key, 6, "user:42", 7));
	EXPECT_NE(h, rl_keyed_hash(&key, 5, "user:43", 7));
	EXPECT_NE(h, rl_keyed_hash(&key, 5, "user:42\0", 8));
}

// Flipping one input bit flips about half of the output bits: no input bit
// leaves a part of the hash (the part that picks a set) alone.
TEST(KeyedHash, OneBitChangesHalfTheHash)
{
	const RlHashKey key = {UINT64_C(0x9e3779b97f4a7c15), UINT64_C(0xc2b2ae3d27d4eb4f)};
	unsigned char message[20] = "ip:203.0.113.9";
	const uint64_t base = rl_keyed_hash(&key, 1, message, sizeof message);
	int flips = 0;
	int trials = 0;
	for (size_t byte = 0; byte < sizeof message; byte++)
		for (int bit = 0; bit < 8; bit++)
		{
			message[byte] ^= static_cast<unsigned char>(1 << bit);
			flips += __builtin_popcountll(base ^ rl_keyed_hash(&key, 1, message, sizeof message));
			message[byte] ^= static_cast<unsigned char>(1 << bit);
			trials++;
		}
	const double average = static_cast<double>(flips) / trials;
	EXPECT_GT(average, 28.0);
	EXPECT_LT(average, 36.0);
}

// Keys chosen to share a set under one secret spread over the sets under
// another: 400 keys that one key puts in set 0 of 68 land in most sets
// under a second key.
TEST(KeyedHash, KeysChosenUnderOneSecretSpreadUnderAnother)
{
	const RlHashKey known = {11, 22};
	const RlHashKey secret = {UINT64_C(0x5851f42d4c957f2d), UINT64_C(0x14057b7ef767814f)};
	const uint32_t sets = 68;
	std::vector<std::string> chosen;
	for (int i = 0; chosen.size() < 400; i++)
	{
		const std::string k = "c" + std::to_string(i);
		if ((rl_keyed_hash(&known, 1, k.data(), k.size()) >> 32) % sets == 0)
			chosen.push_back(k);
	}
	std::set<uint32_t> places;
	for (const std::string &k : chosen)
		places.insert(static_cast<uint32_t>((rl_keyed_hash(&secret, 1, k.data(), k.size()) >> 32) % sets));
	EXPECT_GT(places.size(), 60u);
}

}  // namespace
