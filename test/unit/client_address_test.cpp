// rl_forwarded_client: the client's address is the one the trusted proxies
// wrote, counted from the right; nothing a client sends left of it changes
// the result, and what is not an address is reported, never used.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "core/client_address.h"

namespace {

struct Result
{
	RlClientAddressStatus status;
	std::string address;
};

Result Client(const std::string &header, int trusted, RlProxyHeader kind = RL_PROXY_HEADER_X_FORWARDED_FOR)
{
	char out[RL_CLIENT_ADDRESS_MAX];

	std::memset(out, 'x', sizeof(out));
	RlClientAddressStatus status = rl_forwarded_client(header.data(), header.size(), kind, trusted, out);
	return Result{status, std::string(out)};
}

Result Forwarded(const std::string &header, int trusted)
{
	return Client(header, trusted, RL_PROXY_HEADER_FORWARDED);
}

void ExpectAddress(const Result &r, const std::string &address)
{
	EXPECT_EQ(r.status, RL_CLIENT_ADDRESS_OK) << address;
	EXPECT_EQ(r.address, address);
}

void ExpectStatus(const Result &r, RlClientAddressStatus status)
{
	EXPECT_EQ(r.status, status);
	EXPECT_EQ(r.address, "") << "nothing is written but on success";
}

TEST(ClientAddress, OneProxyTakesTheRightmostEntry)
{
	ExpectAddress(Client("203.0.113.7", 1), "203.0.113.7");
	// A client that sends its own X-Forwarded-For only adds entries on the
	// left: the proxy's entry stays the rightmost.
	ExpectAddress(Client("10.0.0.1, 203.0.113.7", 1), "203.0.113.7");
	ExpectAddress(Client("10.0.0.1,10.0.0.2,10.0.0.3,203.0.113.7", 1), "203.0.113.7");
}

TEST(ClientAddress, SpoofedEntriesNeverChooseTheAddress)
{
	for (int n = 0; n < 50; n++)
	{
		std::string spoofed = "10.0.0." + std::to_string(n) + ", ";
		ExpectAddress(Client(spoofed + "198.51.100.9", 1), "198.51.100.9");
	}
	// Garbage, quotes, an unterminated Forwarded quote: all left of the
	// trusted entries, never read.
	ExpectAddress(Client("not an address, \"[::1, 198.51.100.9", 1), "198.51.100.9");
	ExpectAddress(Forwarded("for=\"[::1, for=198.51.100.9", 1), "198.51.100.9");
	ExpectAddress(Forwarded("for=\"x\\\", for=10.0.0.1\", for=198.51.100.9", 1), "198.51.100.9");
}

TEST(ClientAddress, ManyHopsCountFromTheRight)
{
	const std::string chain = "192.0.2.1, 198.51.100.1, 198.51.100.2, 198.51.100.3";

	ExpectAddress(Client(chain, 1), "198.51.100.3");
	ExpectAddress(Client(chain, 2), "198.51.100.2");
	ExpectAddress(Client(chain, 3), "198.51.100.1");
	ExpectAddress(Client(chain, 4), "192.0.2.1");
	// More proxies trusted than entries: the request bypassed one of them.
	ExpectStatus(Client(chain, 5), RL_CLIENT_ADDRESS_TOO_FEW_HOPS);
	ExpectStatus(Client("192.0.2.1", 2), RL_CLIENT_ADDRESS_TOO_FEW_HOPS);

	std::string long_chain;
	for (int n = 0; n < 200; n++)
		long_chain += "10.1." + std::to_string(n / 250) + "." + std::to_string(n % 250) + ", ";
	long_chain += "192.0.2.99";
	ExpectAddress(Client(long_chain, 1), "192.0.2.99");
	ExpectAddress(Client(long_chain, RL_MAX_TRUSTED_PROXIES), "10.1.0.137");
	// Beyond the maximum, the maximum.
	ExpectAddress(Client(long_chain, 1000), "10.1.0.137");
}

TEST(ClientAddress, NoHeaderOrNoProxy)
{
	ExpectStatus(Client("", 1), RL_CLIENT_ADDRESS_NO_PROXY);
	ExpectStatus(Client("  \t ", 1), RL_CLIENT_ADDRESS_NO_PROXY);
	ExpectStatus(Client("203.0.113.7", 0), RL_CLIENT_ADDRESS_NO_PROXY);
	ExpectStatus(Client("203.0.113.7", -1), RL_CLIENT_ADDRESS_NO_PROXY);

	char out[RL_CLIENT_ADDRESS_MAX] = "x";
	EXPECT_EQ(rl_forwarded_client(nullptr, 0, RL_PROXY_HEADER_X_FORWARDED_FOR, 1, out),
			  RL_CLIENT_ADDRESS_NO_PROXY);
	EXPECT_EQ(out[0], '\0');
}

TEST(ClientAddress, EmptyElementsAreIgnored)
{
	ExpectAddress(Client("192.0.2.1, , 203.0.113.7", 2), "192.0.2.1");
	ExpectAddress(Client(", 203.0.113.7", 1), "203.0.113.7");
	ExpectAddress(Client("203.0.113.7 ,", 1), "203.0.113.7");
	ExpectStatus(Client(",,,", 1), RL_CLIENT_ADDRESS_TOO_FEW_HOPS);
}

TEST(ClientAddress, MalformedEntriesAreReported)
{
	for (const char *bad : {"unknown", "_hidden", "example.com", "256.0.0.1", "1.2.3", "1.2.3.4.5",
							"01.2.3.4", "1.2.3.4:", "1.2.3.4:123456", "1.2.3.4:80:80", "1.2.3.4 5.6.7.8",
							"2001:db8::g", "[2001:db8::1", "[2001:db8::1]x", "[2001:db8::1]:",
							"fe80::1%eth0", "\"192.0.2.1\"", "-", "0x7f.0.0.1"})
		ExpectStatus(Client(std::string("192.0.2.1, ") + bad, 1), RL_CLIENT_ADDRESS_MALFORMED);
	// An entry longer than any address.
	ExpectStatus(Client(std::string(100, '1'), 1), RL_CLIENT_ADDRESS_MALFORMED);
	// A malformed entry left of the chosen one does not matter.
	ExpectAddress(Client("unknown, 192.0.2.1, 198.51.100.1", 2), "192.0.2.1");
	// A NUL inside the header is just another byte that is no address.
	ExpectStatus(Client(std::string("192.0.2.1\0", 10), 1), RL_CLIENT_ADDRESS_MALFORMED);
}

TEST(ClientAddress, PortsAndSpacesAreDropped)
{
	ExpectAddress(Client("  203.0.113.7:51234\t", 1), "203.0.113.7");
	ExpectAddress(Client("[2001:db8::7]:443", 1), "2001:db8::7");
	ExpectAddress(Client("[2001:db8::7]", 1), "2001:db8::7");
}

TEST(ClientAddress, Ipv6IsNormalised)
{
	ExpectAddress(Client("2001:DB8:0:0:0:0:0:1", 1), "2001:db8::1");
	ExpectAddress(Client("2001:0db8::0001", 1), "2001:db8::1");
	ExpectAddress(Client("::1", 1), "::1");
	// IPv4-mapped addresses are the IPv4 client.
	ExpectAddress(Client("::ffff:192.0.2.5", 1), "192.0.2.5");
	ExpectAddress(Client("[::FFFF:c000:0205]:80", 1), "192.0.2.5");
}

TEST(ClientAddress, ForwardedHeader)
{
	ExpectAddress(Forwarded("for=192.0.2.43", 1), "192.0.2.43");
	ExpectAddress(Forwarded("For=\"192.0.2.43:47011\";proto=https;by=203.0.113.1", 1), "192.0.2.43");
	ExpectAddress(Forwarded("for=\"[2001:db8:cafe::17]:4711\"", 1), "2001:db8:cafe::17");
	ExpectAddress(Forwarded("proto=http;for=192.0.2.60;by=203.0.113.43", 1), "192.0.2.60");
	ExpectAddress(Forwarded("for=192.0.2.43, for=198.51.100.17", 1), "198.51.100.17");
	ExpectAddress(Forwarded("for=192.0.2.43, for=198.51.100.17", 2), "192.0.2.43");
	// A ',' or ';' inside a quoted value does not split.
	ExpectAddress(Forwarded("for=192.0.2.1;host=\"a,b;c\", for=198.51.100.17;host=\"x,y\"", 2),
				  "192.0.2.1");
	// Quoted-pairs.
	ExpectAddress(Forwarded("for=\"\\192.0.2.1\"", 1), "192.0.2.1");
	ExpectAddress(Forwarded("host=\"a\\\"b\";for=192.0.2.2, for=198.51.100.1", 2), "192.0.2.2");

	// Obfuscated or unknown nodes, a missing or repeated for, an unquoted
	// IPv6 address in brackets is accepted (proxies write it so) but an
	// unterminated quote is not.
	ExpectStatus(Forwarded("for=unknown", 1), RL_CLIENT_ADDRESS_MALFORMED);
	ExpectStatus(Forwarded("for=_gazonk", 1), RL_CLIENT_ADDRESS_MALFORMED);
	ExpectStatus(Forwarded("proto=https;by=203.0.113.1", 1), RL_CLIENT_ADDRESS_MALFORMED);
	ExpectStatus(Forwarded("for=192.0.2.1;for=192.0.2.2", 1), RL_CLIENT_ADDRESS_MALFORMED);
	ExpectStatus(Forwarded("for", 1), RL_CLIENT_ADDRESS_MALFORMED);
	ExpectStatus(Forwarded("for=\"192.0.2.1", 1), RL_CLIENT_ADDRESS_MALFORMED);
	ExpectStatus(Forwarded("for=\"192.0.2.1\"x", 1), RL_CLIENT_ADDRESS_MALFORMED);
	ExpectAddress(Forwarded("for=[2001:db8::5]", 1), "2001:db8::5");

	// X-Forwarded-For text in a Forwarded header is not an element.
	ExpectStatus(Forwarded("192.0.2.1", 1), RL_CLIENT_ADDRESS_MALFORMED);
	ExpectStatus(Forwarded("for=192.0.2.1", 2), RL_CLIENT_ADDRESS_TOO_FEW_HOPS);
}

std::string Network(const char *address, int prefix)
{
	char out[RL_CLIENT_NETWORK_MAX];

	std::memset(out, 'x', sizeof(out));
	if (!rl_client_network(address, prefix, out))
		return "false:" + std::string(out);
	return out;
}

TEST(ClientNetwork, Ipv4IsKeyedByItsAddress)
{
	// One IPv4 address is one client, whatever the IPv6 prefix.
	EXPECT_EQ(Network("203.0.113.9", 56), "203.0.113.9");
	EXPECT_EQ(Network("203.0.113.9", 32), "203.0.113.9");
	EXPECT_EQ(Network("203.0.113.9", 128), "203.0.113.9");
	// IPv4-mapped IPv6, as a dual-stack proxy writes an IPv4 client.
	EXPECT_EQ(Network("::ffff:203.0.113.9", 56), "203.0.113.9");
	EXPECT_EQ(Network("::FFFF:cb00:7109", 64), "203.0.113.9");
}

TEST(ClientNetwork, Ipv6IsKeyedByItsPrefix)
{
	EXPECT_EQ(Network("2001:db8:1234:5678:9abc:def0:1234:5678", 56), "2001:db8:1234:5600::/56");
	EXPECT_EQ(Network("2001:db8:1234:5678:9abc:def0:1234:5678", 64), "2001:db8:1234:5678::/64");
	EXPECT_EQ(Network("2001:db8:1234:5678:9abc:def0:1234:5678", 48), "2001:db8:1234::/48");
	EXPECT_EQ(Network("2001:db8:1234:5678:9abc:def0:1234:5678", 32), "2001:db8::/32");
	EXPECT_EQ(Network("2001:db8:1234:5678:9abc:def0:1234:5678", 128),
			  "2001:db8:1234:5678:9abc:def0:1234:5678/128");
	// A prefix inside a byte and inside a group: only its bits are kept.
	EXPECT_EQ(Network("2001:db8:12ff:ffff::1", 41), "2001:db8:1280::/41");
	EXPECT_EQ(Network("2001:db8:ffff::1", 33), "2001:db8:8000::/33");
	EXPECT_EQ(Network("2001:db8::7", 127), "2001:db8::6/127");
	// Written any way, one network is one key.
	EXPECT_EQ(Network("2001:DB8:0:12::1", 56), Network("2001:0db8:0000:00ff:ffff:ffff:ffff:ffff", 56));
}

TEST(ClientNetwork, EveryAddressOfANetworkHasItsKey)
{
	// The attack: addresses rotated inside one /64 (and one /56).
	for (int n = 0; n < 40; n++)
	{
		std::string address = "2001:db8:1200:" + std::to_string(n % 256) + ":" + std::to_string(n) + "::" +
			std::to_string(n * 7 + 1);
		EXPECT_EQ(Network(address.c_str(), 56), "2001:db8:1200::/56") << address;
	}
	EXPECT_NE(Network("2001:db8:1200::1", 56), Network("2001:db8:1300::1", 56));
}

TEST(ClientNetwork, RefusesWhatIsNoAddressOrPrefix)
{
	EXPECT_EQ(Network("2001:db8::1", RL_IPV6_PREFIX_MIN - 1), "false:");
	EXPECT_EQ(Network("2001:db8::1", RL_IPV6_PREFIX_MAX + 1), "false:");
	EXPECT_EQ(Network("203.0.113.9", 0), "false:");
	EXPECT_EQ(Network("", 56), "false:");
	EXPECT_EQ(Network("unknown", 56), "false:");
	EXPECT_EQ(Network("2001:db8::/56", 56), "false:");
	EXPECT_EQ(Network("[2001:db8::1]", 56), "false:");

	char out[RL_CLIENT_NETWORK_MAX] = "x";
	EXPECT_FALSE(rl_client_network(nullptr, 56, out));
	EXPECT_EQ(out[0], '\0');
}

TEST(ClientNetwork, TheLongestFits)
{
	std::string longest = Network("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 128);
	EXPECT_EQ(longest, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128");
	EXPECT_LT(longest.size(), static_cast<size_t>(RL_CLIENT_NETWORK_MAX));
	EXPECT_EQ(Network("1111:2222:3333:4444:5555:6666:7777:8888", 127),
			  "1111:2222:3333:4444:5555:6666:7777:8888/127");
}

}  // namespace
