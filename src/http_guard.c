/*
 * http_guard.c -- what rl_http_guard() needs from C: the client's address
 * as the trusted proxies wrote it (rl_client_address()), and the settings
 * that say which proxies are trusted and how a refusal is raised.
 *
 * The parsing is src/core/client_address.cpp; this file maps settings and
 * SQL values onto it.
 */
#include "ratelimit.h"

#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/inet.h"

#include "core/client_address.h"
#include "http_guard.h"

PG_FUNCTION_INFO_V1(rl_client_address);

static int	rl_trusted_proxies = 1;
static int	rl_proxy_header = RL_PROXY_HEADER_X_FORWARDED_FOR;
static int	rl_guard_error = 0;

static const struct config_enum_entry proxy_header_options[] = {
	{"x-forwarded-for", RL_PROXY_HEADER_X_FORWARDED_FOR, false},
	{"forwarded", RL_PROXY_HEADER_FORWARDED, false},
	{NULL, 0, false}
};

/* Read by rl_http_guard() through current_setting(). */
static const struct config_enum_entry guard_error_options[] = {
	{"pgrst", 0, false},
	{"pt429", 1, false},
	{NULL, 0, false}
};

static RlProxyHeader
ProxyHeaderFromText(text *name)
{
	char	   *value = text_to_cstring(name);

	for (const struct config_enum_entry *option = proxy_header_options; option->name; option++)
		if (pg_strcasecmp(value, option->name) == 0)
			return (RlProxyHeader) option->val;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("unknown proxy header \"%s\"", RlMessageText(value)),
			 errhint("Use 'x-forwarded-for' or 'forwarded'.")));
	pg_unreachable();
}

/*
 * rl_client_address(x_forwarded_for text, forwarded text,
 *                   trusted_proxies int DEFAULT NULL, proxy_header text DEFAULT NULL)
 *     RETURNS inet
 *
 * NULL when no trustworthy address is there: no header, fewer entries than
 * trusted proxies, or an entry that is no IP address.  NULL settings
 * arguments mean ratelimit.trusted_proxies and ratelimit.proxy_header.
 */
Datum
rl_client_address(PG_FUNCTION_ARGS)
{
	int			trusted = PG_ARGISNULL(2) ? rl_trusted_proxies : PG_GETARG_INT32(2);
	RlProxyHeader kind = PG_ARGISNULL(3) ? (RlProxyHeader) rl_proxy_header
		: ProxyHeaderFromText(PG_GETARG_TEXT_PP(3));
	int			header_arg = (kind == RL_PROXY_HEADER_FORWARDED) ? 1 : 0;
	text	   *header;
	char		address[RL_CLIENT_ADDRESS_MAX];

	if (trusted < 0 || trusted > RL_MAX_TRUSTED_PROXIES)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("trusted_proxies must be between 0 and %d", RL_MAX_TRUSTED_PROXIES),
				 errdetail("Got %d.", trusted)));
	if (PG_ARGISNULL(header_arg))
		PG_RETURN_NULL();
	header = PG_GETARG_TEXT_PP(header_arg);
	if (rl_forwarded_client(VARDATA_ANY(header), VARSIZE_ANY_EXHDR(header), kind, trusted,
							address) != RL_CLIENT_ADDRESS_OK)
		PG_RETURN_NULL();
	return DirectFunctionCall1(inet_in, CStringGetDatum(address));
}

void
RlHttpGuardInit(void)
{
	/*
	 * Superuser only: with a higher count than there are proxies, a client
	 * chooses its own key.  Hosted servers without a superuser pass the
	 * count to rl_http_guard() from their pre-request function instead.
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
							 proxy_header_options,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomEnumVariable("ratelimit.guard_error",
							 "How rl_http_guard() refuses a request.",
							 "pgrst: PostgREST's PGRST error (PostgREST 11 and later), a 429 "
							 "with Retry-After and RateLimit headers; pt429: SQLSTATE PT429, "
							 "a bare 429, for older PostgREST.",
							 &rl_guard_error,
							 0,
							 guard_error_options,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
}
