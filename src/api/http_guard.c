/*
 * http_guard.c -- what rl_http_guard() needs from C: the client's address
 * as the trusted proxies wrote it (rl_client_address()).
 *
 * The parsing is src/core/client_address.cpp; this file maps the settings
 * (ratelimit.trusted_proxies, ratelimit.proxy_header) and SQL values onto it.
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/inet.h"

#include "base/args.h"
#include "base/pg_compat.h"
#include "base/settings.h"
#include "core/client_address.h"

PG_FUNCTION_INFO_V1(rl_client_address);

static RlProxyHeader
ProxyHeaderFromText(text *name)
{
	char	   *value = text_to_cstring(name);

	for (const struct config_enum_entry *option = rl_proxy_header_options; option->name; option++)
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
