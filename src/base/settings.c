/*
 * settings.c -- the ratelimit.* parameters, defined in one place
 * (ratelimit.shmem_max_keys beside the store it sizes).
 *
 * The ones that decide who is limited how (the store, the clock, which
 * proxies are trusted) are superuser-only: a session that could set them
 * could lift its own limit.
 */
#include "postgres.h"

#include "base/clock.h"
#include "base/settings.h"
#include "core/client_address.h"

int			rl_table_access = RL_TABLE_ACCESS_AUTO;
int			rl_default_store = RL_DEFAULT_STORE_TABLE;
int			rl_shmem_full_policy = RL_SHMEM_FULL_ALLOW;
int			rl_trusted_proxies = 1;
int			rl_proxy_header = RL_PROXY_HEADER_X_FORWARDED_FOR;
int			rl_ipv6_prefix = RL_DEFAULT_IPV6_PREFIX;
int			rl_guard_error = RL_GUARD_ERROR_PGRST;

static char *now_override_text = NULL;

static const struct config_enum_entry table_access_options[] = {
	{"auto", RL_TABLE_ACCESS_AUTO, false},
	{"direct", RL_TABLE_ACCESS_DIRECT, false},
	{"spi", RL_TABLE_ACCESS_SPI, false},
	{NULL, 0, false}
};

static const struct config_enum_entry default_store_options[] = {
	{"table", RL_DEFAULT_STORE_TABLE, false},
	{"shmem", RL_DEFAULT_STORE_SHMEM, false},
	{NULL, 0, false}
};

static const struct config_enum_entry full_policy_options[] = {
	{"allow", RL_SHMEM_FULL_ALLOW, false},
	{"deny", RL_SHMEM_FULL_DENY, false},
	{"error", RL_SHMEM_FULL_ERROR, false},
	{NULL, 0, false}
};

const struct config_enum_entry rl_proxy_header_options[] = {
	{"x-forwarded-for", RL_PROXY_HEADER_X_FORWARDED_FOR, false},
	{"forwarded", RL_PROXY_HEADER_FORWARDED, false},
	{NULL, 0, false}
};

/* Read by rl_http_guard() through current_setting(). */
static const struct config_enum_entry guard_error_options[] = {
	{"pgrst", RL_GUARD_ERROR_PGRST, false},
	{"pt429", RL_GUARD_ERROR_PT429, false},
	{NULL, 0, false}
};

void
RlDefineSettings(void)
{
	DefineCustomStringVariable("ratelimit.now_override",
							   "Fixes the time every rate-limit decision sees (tests only).",
							   "A timestamp with time zone; empty means the real clock.",
							   &now_override_text,
							   "",
							   PGC_SUSET,
							   0,
							   RlCheckNowOverride,
							   RlAssignNowOverride,
							   NULL);

	DefineCustomEnumVariable("ratelimit.table_access",
							 "How the table store reaches its state table.",
							 "auto: the planner-free path on heap tables, SPI otherwise; "
							 "direct: always the planner-free path; spi: always SPI.",
							 &rl_table_access,
							 RL_TABLE_ACCESS_AUTO,
							 table_access_options,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);

	/* A fresh store is a full bucket for every key. */
	DefineCustomEnumVariable("ratelimit.default_store",
							 "Where rl_token_bucket and rl_gcra keep their state.",
							 "table: the transactional table store; shmem: shared memory "
							 "(needs ratelimit in shared_preload_libraries).",
							 &rl_default_store,
							 RL_DEFAULT_STORE_TABLE,
							 default_store_options,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomEnumVariable("ratelimit.shmem_full_policy",
							 "What a call on a new key does when the shmem store has no room.",
							 "allow: decide as for a new key without keeping state; "
							 "deny: refuse; error: raise an error.",
							 &rl_shmem_full_policy,
							 RL_SHMEM_FULL_ALLOW,
							 full_policy_options,
							 PGC_SUSET, 0, NULL, NULL, NULL);

	/*
	 * With a higher count than there are proxies, a client chooses its own
	 * key.  Hosted servers without a superuser pass the count to
	 * rl_http_guard() from their pre-request function instead.
	 */
	DefineCustomIntVariable("ratelimit.trusted_proxies",
							"How many proxies in front of PostgREST append to the proxy header.",
							"rl_http_guard() keys an anonymous request by the address the "
							"outermost of them saw: that many entries from the right. "
							"0 trusts no header.",
							&rl_trusted_proxies,
							1, 0, RL_MAX_TRUSTED_PROXIES,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);

	DefineCustomEnumVariable("ratelimit.proxy_header",
							 "The header the trusted proxies append the client's address to.",
							 "x-forwarded-for, or forwarded (RFC 7239). The other one is "
							 "ignored: a client could write it.",
							 &rl_proxy_header,
							 RL_PROXY_HEADER_X_FORWARDED_FOR,
							 rl_proxy_header_options,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);

	/*
	 * A shorter prefix than a client holds lets it spread its requests over
	 * several keys; a longer one puts several clients in one key.  Who may
	 * set it chooses how many keys a client gets: superuser-only.
	 */
	DefineCustomIntVariable("ratelimit.ipv6_prefix",
							"The IPv6 prefix length that keys one client in rl_http_guard().",
							"An IPv6 client is keyed by its network of this many bits (a home "
							"line or a cloud VM holds a whole /56 or /64); an IPv4 client by its "
							"address.",
							&rl_ipv6_prefix,
							RL_DEFAULT_IPV6_PREFIX, RL_IPV6_PREFIX_MIN, RL_IPV6_PREFIX_MAX,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);

	DefineCustomEnumVariable("ratelimit.guard_error",
							 "How rl_http_guard() refuses a request.",
							 "pgrst: PostgREST's PGRST error (PostgREST 11 and later), a 429 "
							 "with Retry-After and RateLimit headers; pt429: SQLSTATE PT429, "
							 "a bare 429, for older PostgREST.",
							 &rl_guard_error,
							 RL_GUARD_ERROR_PGRST,
							 guard_error_options,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
}
