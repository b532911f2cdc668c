/*
 * client_address.h -- the client's address from a proxy header, free of
 * PostgreSQL headers.
 *
 * A proxy appends the address of the peer it received the request from to
 * X-Forwarded-For (or adds a Forwarded element, RFC 7239), after whatever
 * the client sent.  Behind N trusted proxies, the N entries at the right
 * were written by them and the Nth from the right is the client's address;
 * everything to its left is the client's own text.  So the header is read
 * from the right, only as far as the Nth entry, and nothing left of it can
 * change the result.
 */
#ifndef RL_CLIENT_ADDRESS_H
#define RL_CLIENT_ADDRESS_H

#include <stddef.h>

#include "rl_core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum RlProxyHeader
{
	RL_PROXY_HEADER_X_FORWARDED_FOR,
	RL_PROXY_HEADER_FORWARDED
} RlProxyHeader;

typedef enum RlClientAddressStatus
{
	RL_CLIENT_ADDRESS_OK = 0,
	RL_CLIENT_ADDRESS_NO_PROXY,		/* no header, or no proxy trusted */
	RL_CLIENT_ADDRESS_TOO_FEW_HOPS, /* fewer entries than trusted proxies */
	RL_CLIENT_ADDRESS_MALFORMED		/* that entry holds no IP address */
} RlClientAddressStatus;

/* Room for the longest normalised address (an IPv6 text) and its NUL. */
#define RL_CLIENT_ADDRESS_MAX 46

/* Most proxies a setting may trust. */
#define RL_MAX_TRUSTED_PROXIES 64

/*
 * The address the trusted_proxies-th proxy from the right saw, normalised
 * into out (at least RL_CLIENT_ADDRESS_MAX bytes): IPv4 dotted quad, IPv6
 * in RFC 5952 form, an IPv4-mapped IPv6 address as IPv4, ports dropped.
 * header may be NULL.  On anything but RL_CLIENT_ADDRESS_OK, out is "".
 */
RlClientAddressStatus rl_forwarded_client(const char *header, size_t length,
										  RlProxyHeader kind, int trusted_proxies,
										  char *out) RL_NOEXCEPT;

/*
 * A home line or a cloud VM gets a whole IPv6 /64 or /56 (RIPE-690: a /48
 * or /56 per customer), and its owner may use any address in it: keyed by
 * the address, one client would have 2^64 keys.  So an IPv6 client is keyed
 * by its network of ipv6_prefix bits, an IPv4 client (one address each) by
 * its address.  The prefixes a setting may give:
 */
#define RL_IPV6_PREFIX_MIN 32
#define RL_IPV6_PREFIX_MAX 128

/* Room for a client's network: an IPv6 text, "/128" and its NUL. */
#define RL_CLIENT_NETWORK_MAX (RL_CLIENT_ADDRESS_MAX + 4)

/*
 * The network that keys the client at address (a NUL-terminated IPv4 or
 * IPv6 address, as rl_forwarded_client writes it), into out (at least
 * RL_CLIENT_NETWORK_MAX bytes): an IPv4 address (an IPv4-mapped IPv6 one
 * too) as itself, "203.0.113.9"; an IPv6 address as its first ipv6_prefix
 * bits in RFC 5952 form with the prefix length, "2001:db8:1200::/56" (also
 * at 128: the length says how the key was made).  False, out "", when
 * address is no address or ipv6_prefix is out of range.
 */
bool		rl_client_network(const char *address, int ipv6_prefix, char *out) RL_NOEXCEPT;

#ifdef __cplusplus
}
#endif

#endif
