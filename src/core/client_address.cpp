// The client's address from X-Forwarded-For or Forwarded, read from the
// right: see client_address.h for why.
#include "client_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstdio>
#include <cstring>
#include <string_view>

namespace {

// Longer than any address with brackets and a port: such an entry is not
// an address, and nothing longer is ever copied.
constexpr size_t kMaxEntryBytes = 64;

bool IsOws(char c) noexcept
{
	return c == ' ' || c == '\t';
}

std::string_view Trim(std::string_view text) noexcept
{
	while (!text.empty() && IsOws(text.front()))
		text.remove_prefix(1);
	while (!text.empty() && IsOws(text.back()))
		text.remove_suffix(1);
	return text;
}

bool IsPort(std::string_view text) noexcept
{
	if (text.empty() || text.size() > 5)
		return false;
	for (char c : text)
		if (c < '0' || c > '9')
			return false;
	return true;
}

// inet_pton wants a NUL-terminated string.
bool ParseFamily(int family, std::string_view text, void *address) noexcept
{
	char buffer[kMaxEntryBytes + 1];

	if (text.empty() || text.size() > kMaxEntryBytes)
		return false;
	std::memcpy(buffer, text.data(), text.size());
	buffer[text.size()] = '\0';
	return inet_pton(family, buffer, address) == 1;
}

// One node: "192.0.2.1", "192.0.2.1:8080", "2001:db8::1", "[2001:db8::1]",
// "[2001:db8::1]:8080".  Writes the normalised address into out.
bool NormaliseNode(std::string_view node, char *out) noexcept
{
	struct in_addr v4;
	struct in6_addr v6;

	if (node.empty() || node.size() > kMaxEntryBytes)
		return false;
	// inet_pton stops at a NUL: only what an address is written with passes.
	for (char c : node)
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') ||
			  c == '.' || c == ':' || c == '[' || c == ']'))
			return false;
	if (node.front() == '[')
	{
		size_t close = node.find(']');

		if (close == std::string_view::npos)
			return false;
		std::string_view rest = node.substr(close + 1);
		if (!rest.empty() && !(rest.front() == ':' && IsPort(rest.substr(1))))
			return false;
		if (!ParseFamily(AF_INET6, node.substr(1, close - 1), &v6))
			return false;
	}
	else
	{
		size_t colons = 0;

		for (char c : node)
			colons += (c == ':');
		if (colons == 0 || colons == 1)
		{
			size_t colon = node.find(':');

			if (colons == 1 && !IsPort(node.substr(colon + 1)))
				return false;
			if (!ParseFamily(AF_INET, node.substr(0, colon), &v4))
				return false;
			return inet_ntop(AF_INET, &v4, out, RL_CLIENT_ADDRESS_MAX) != nullptr;
		}
		if (!ParseFamily(AF_INET6, node, &v6))
			return false;
	}
	// A dual-stack proxy writes an IPv4 client as ::ffff:a.b.c.d: one client,
	// one key, whichever way the proxy wrote it.
	if (IN6_IS_ADDR_V4MAPPED(&v6))
	{
		std::memcpy(&v4, &v6.s6_addr[12], sizeof(v4));
		return inet_ntop(AF_INET, &v4, out, RL_CLIENT_ADDRESS_MAX) != nullptr;
	}
	return inet_ntop(AF_INET6, &v6, out, RL_CLIENT_ADDRESS_MAX) != nullptr;
}

// A quoted-string's content, quoted-pairs resolved; false if unterminated
// or followed by anything.
bool Unquote(std::string_view quoted, char *out, size_t out_size) noexcept
{
	size_t n = 0;

	if (quoted.size() < 2 || quoted.front() != '"' || quoted.back() != '"')
		return false;
	for (size_t i = 1; i + 1 < quoted.size(); i++)
	{
		char c = quoted[i];

		if (c == '\\')
		{
			if (i + 2 >= quoted.size())
				return false;
			c = quoted[++i];
		}
		else if (c == '"')
			return false;
		if (n + 1 >= out_size)
			return false;
		out[n++] = c;
	}
	out[n] = '\0';
	return true;
}

bool EqualsIgnoringCase(std::string_view a, const char *b) noexcept
{
	size_t len = std::strlen(b);

	if (a.size() != len)
		return false;
	for (size_t i = 0; i < len; i++)
	{
		char c = a[i];

		if (c >= 'A' && c <= 'Z')
			c = static_cast<char>(c - 'A' + 'a');
		if (c != b[i])
			return false;
	}
	return true;
}

// A Forwarded element (RFC 7239): pairs name=value separated by ';'.  Its
// one "for" node, normalised into out.
bool NormaliseForwardedElement(std::string_view element, char *out) noexcept
{
	std::string_view node;
	bool found = false;
	char unquoted[kMaxEntryBytes + 1];

	while (!element.empty())
	{
		// A ';' inside a quoted value does not end the pair.
		size_t end = 0;
		bool in_quotes = false;

		for (; end < element.size(); end++)
		{
			char c = element[end];

			if (in_quotes && c == '\\')
				end++;
			else if (c == '"')
				in_quotes = !in_quotes;
			else if (c == ';' && !in_quotes)
				break;
		}
		if (in_quotes)
			return false;
		std::string_view pair = Trim(element.substr(0, end));
		element = end < element.size() ? element.substr(end + 1) : std::string_view();

		size_t equals = pair.find('=');
		if (equals == std::string_view::npos)
			return false;
		if (!EqualsIgnoringCase(pair.substr(0, equals), "for"))
			continue;
		if (found)
			return false;			/* a parameter occurs at most once */
		found = true;
		node = pair.substr(equals + 1);
	}
	if (!found)
		return false;
	if (!node.empty() && node.front() == '"')
	{
		if (!Unquote(node, unquoted, sizeof(unquoted)))
			return false;
		node = std::string_view(unquoted);
	}
	return NormaliseNode(node, out);
}

// The list element that ends at end (exclusive), found by scanning left to
// the nearest ',' outside a quoted-string; start receives where it begins.
// In reverse, a '"' preceded by an odd run of backslashes is an escaped
// quote (a backslash is never part of a token), any other '"' a delimiter.
bool PreviousElement(std::string_view header, size_t end, bool quotes, size_t *start) noexcept
{
	bool in_quotes = false;
	size_t i = end;

	while (i > 0)
	{
		char c = header[i - 1];

		if (c == ',' && !in_quotes)
			break;
		if (quotes && c == '"')
		{
			size_t backslashes = 0;

			while (i - 1 > backslashes && header[i - 2 - backslashes] == '\\')
				backslashes++;
			if (!(in_quotes && backslashes % 2 == 1))
				in_quotes = !in_quotes;
		}
		i--;
	}
	*start = i;
	return !in_quotes;
}

}  // namespace

RlClientAddressStatus rl_forwarded_client(const char *header, size_t length,
										  RlProxyHeader kind, int trusted_proxies,
										  char *out) noexcept
{
	const bool forwarded = (kind == RL_PROXY_HEADER_FORWARDED);
	std::string_view text = header ? std::string_view(header, length) : std::string_view();
	size_t end = text.size();
	int seen = 0;

	out[0] = '\0';
	if (trusted_proxies <= 0 || Trim(text).empty())
		return RL_CLIENT_ADDRESS_NO_PROXY;
	if (trusted_proxies > RL_MAX_TRUSTED_PROXIES)
		trusted_proxies = RL_MAX_TRUSTED_PROXIES;

	for (;;)
	{
		size_t start;
		bool balanced = PreviousElement(text, end, forwarded, &start);
		std::string_view element = Trim(text.substr(start, end - start));

		// Empty list elements are ignored (RFC 9110, 5.6.1).
		if (!element.empty() || !balanced)
		{
			if (++seen == trusted_proxies)
			{
				bool ok = balanced && (forwarded ? NormaliseForwardedElement(element, out)
											   : NormaliseNode(element, out));

				if (!ok)
				{
					out[0] = '\0';
					return RL_CLIENT_ADDRESS_MALFORMED;
				}
				return RL_CLIENT_ADDRESS_OK;
			}
			if (!balanced)
				return RL_CLIENT_ADDRESS_MALFORMED;
		}
		if (start == 0)
			return RL_CLIENT_ADDRESS_TOO_FEW_HOPS;
		end = start - 1;			/* before the ',' */
	}
}

bool rl_client_network(const char *address, int ipv6_prefix, char *out) noexcept
{
	struct in_addr v4;
	struct in6_addr v6;
	char text[RL_CLIENT_ADDRESS_MAX];

	out[0] = '\0';
	if (address == nullptr || ipv6_prefix < RL_IPV6_PREFIX_MIN || ipv6_prefix > RL_IPV6_PREFIX_MAX)
		return false;
	if (inet_pton(AF_INET, address, &v4) == 1)
		return inet_ntop(AF_INET, &v4, out, RL_CLIENT_NETWORK_MAX) != nullptr;
	if (inet_pton(AF_INET6, address, &v6) != 1)
		return false;
	if (IN6_IS_ADDR_V4MAPPED(&v6))
	{
		std::memcpy(&v4, &v6.s6_addr[12], sizeof(v4));
		return inet_ntop(AF_INET, &v4, out, RL_CLIENT_NETWORK_MAX) != nullptr;
	}
	// The host part goes: every address of the network gives one key.
	for (int bit = ipv6_prefix; bit < 128; bit++)
		v6.s6_addr[bit / 8] &= static_cast<unsigned char>(~(0x80u >> (bit % 8)));
	if (inet_ntop(AF_INET6, &v6, text, sizeof(text)) == nullptr)
		return false;
	std::snprintf(out, RL_CLIENT_NETWORK_MAX, "%s/%d", text, ipv6_prefix);
	return true;
}
