// libFuzzer target for the proxy-header parser (src/core/client_address.cpp),
// which reads bytes a client controls.  Beyond memory safety (ASan, UBSan),
// it checks the property the guard relies on: whatever a client sends,
// once the trusted proxies have appended their entries, the result is the
// one those entries give alone.
//
// The input: trusted proxies N (1..8), the header kind, N addresses
// (IPv4 or IPv6, written as proxies write them: with or without port,
// brackets, IPv4-mapped), then arbitrary bytes: the client's part.
// Checked, for header = client + ", " + appended:
//   * the result equals the result for appended alone, which is the first
//     appended address (the outermost proxy's), normalised;
//   * a successful result is a fixed point: parsed again it is itself;
//   * the arbitrary bytes alone, read with any N, never crash, and either
//     fail or yield an address that is a fixed point;
//   * the network that keys a result (rl_client_network, any prefix in
//     range) exists, is the address itself for IPv4, and for IPv6 is a
//     fixed point that every address of it maps to (the address with its
//     host bits changed gives the same network); the arbitrary bytes as an
//     address never crash it.
#include "core/client_address.h"

#include <fuzzer/FuzzedDataProvider.h>

#include <arpa/inet.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

[[noreturn]] void Fail(const char *what, const std::string &header, int trusted, RlProxyHeader kind)
{
	std::fprintf(stderr, "invariant violated: %s\n  kind %s, trusted %d, header [%s]\n", what,
				 kind == RL_PROXY_HEADER_FORWARDED ? "forwarded" : "x-forwarded-for", trusted,
				 header.c_str());
	std::abort();
}

struct Parsed
{
	RlClientAddressStatus status;
	std::string address;
};

Parsed Parse(const std::string &header, RlProxyHeader kind, int trusted)
{
	char out[RL_CLIENT_ADDRESS_MAX];
	RlClientAddressStatus status = rl_forwarded_client(header.data(), header.size(), kind, trusted, out);
	return Parsed{status, out};
}

// One address as a proxy writes it, and its normalised form.
void ProxyEntry(FuzzedDataProvider &in, RlProxyHeader kind, std::string *entry, std::string *normal)
{
	char text[INET6_ADDRSTRLEN];
	bool v6 = in.ConsumeBool();
	bool port = in.ConsumeBool();
	std::string node;

	if (!v6)
	{
		uint32_t a = in.ConsumeIntegral<uint32_t>();
		inet_ntop(AF_INET, &a, text, sizeof text);
		*normal = text;
		if (in.ConsumeBool())
			node = std::string("::ffff:") + text;	/* a dual-stack proxy's form */
		else
			node = text;
	}
	else
	{
		unsigned char a[16];
		for (unsigned char &b : a)
			b = in.ConsumeIntegral<unsigned char>();
		a[0] |= 0x20;		/* never IPv4-mapped */
		inet_ntop(AF_INET6, a, text, sizeof text);
		*normal = text;
		node = text;
	}
	bool brackets = node.find(':') != std::string::npos;
	if (brackets && (port || in.ConsumeBool()))
		node = "[" + node + "]";
	else if (brackets)
		port = false;
	if (port)
		node += ":" + std::to_string(in.ConsumeIntegralInRange<int>(1, 65535));
	if (kind == RL_PROXY_HEADER_FORWARDED)
	{
		bool quote = brackets || port || in.ConsumeBool();
		std::string pair = "for=" + (quote ? "\"" + node + "\"" : node);
		switch (in.ConsumeIntegralInRange<int>(0, 2))
		{
			case 0: *entry = pair; break;
			case 1: *entry = "proto=https;" + pair; break;
			default: *entry = pair + ";by=\"[2001:db8::1]\";host=\"a,b;c\""; break;
		}
	}
	else
		*entry = node;
}

// The network of an address that rl_forwarded_client gave: checks it.
void CheckNetwork(const std::string &address, int prefix, const std::string &header, int trusted,
				  RlProxyHeader kind)
{
	char network[RL_CLIENT_NETWORK_MAX];
	char again[RL_CLIENT_NETWORK_MAX];

	if (!rl_client_network(address.c_str(), prefix, network))
		Fail("an address has no network", header, trusted, kind);
	std::string text(network);
	size_t slash = text.find('/');
	if (address.find(':') == std::string::npos)
	{
		if (text != address)
			Fail("an IPv4 address is not its own key", header, trusted, kind);
		return;
	}
	if (slash == std::string::npos || text.substr(slash + 1) != std::to_string(prefix))
		Fail("an IPv6 network does not say its prefix", header, trusted, kind);
	std::string base = text.substr(0, slash);
	if (!rl_client_network(base.c_str(), prefix, again) || text != again)
		Fail("an IPv6 network is not a fixed point", header, trusted, kind);
	// The last address of the network: the same key.
	struct in6_addr last;
	char last_text[INET6_ADDRSTRLEN];
	if (inet_pton(AF_INET6, base.c_str(), &last) != 1)
		Fail("an IPv6 network's address does not parse", header, trusted, kind);
	for (int bit = prefix; bit < 128; bit++)
		last.s6_addr[bit / 8] |= static_cast<unsigned char>(0x80u >> (bit % 8));
	inet_ntop(AF_INET6, &last, last_text, sizeof last_text);
	if (IN6_IS_ADDR_V4MAPPED(&last))
		return;		/* ::ffff:0:0/96 and longer: keyed as IPv4 */
	if (!rl_client_network(last_text, prefix, again) || text != again)
		Fail("two addresses of one network have different keys", header, trusted, kind);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	FuzzedDataProvider in(data, size);
	RlProxyHeader kind = in.ConsumeBool() ? RL_PROXY_HEADER_FORWARDED : RL_PROXY_HEADER_X_FORWARDED_FOR;
	int trusted = in.ConsumeIntegralInRange<int>(1, 8);
	std::string appended, first_normal;

	for (int i = 0; i < trusted; i++)
	{
		std::string entry, normal;
		ProxyEntry(in, kind, &entry, &normal);
		if (i == 0)
			first_normal = normal;
		appended += (i ? (in.ConsumeBool() ? "," : " , ") : "") + entry;
	}
	int prefix = in.ConsumeIntegralInRange<int>(RL_IPV6_PREFIX_MIN, RL_IPV6_PREFIX_MAX);
	std::string client = in.ConsumeRemainingBytesAsString();

	Parsed alone = Parse(appended, kind, trusted);
	if (alone.status != RL_CLIENT_ADDRESS_OK || alone.address != first_normal)
		Fail("the appended entries alone do not give the outermost proxy's address", appended, trusted, kind);
	std::string header = client + ", " + appended;
	Parsed spoofed = Parse(header, kind, trusted);
	if (spoofed.status != alone.status || spoofed.address != alone.address)
		Fail("what the client sent changed the result", header, trusted, kind);
	CheckNetwork(alone.address, prefix, appended, trusted, kind);
	{
		char network[RL_CLIENT_NETWORK_MAX];
		rl_client_network(client.c_str(), prefix, network);	/* up to a NUL: never crashes */
	}

	for (int n = 0; n <= 9; n++)
	{
		Parsed any = Parse(client, kind, n);
		if (any.status == RL_CLIENT_ADDRESS_OK)
		{
			Parsed again = Parse(any.address, RL_PROXY_HEADER_X_FORWARDED_FOR, 1);
			if (again.status != RL_CLIENT_ADDRESS_OK || again.address != any.address)
				Fail("a result is not a fixed point", client, n, kind);
			CheckNetwork(any.address, prefix, client, n, kind);
		}
		else if (!any.address.empty())
			Fail("a failure wrote an address", client, n, kind);
	}
	return 0;
}
