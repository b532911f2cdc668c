/*
 * http_guard.c -- what rl_http_guard() needs from C: the client's address
 * as the trusted proxies wrote it (rl_client_address()), and the guard's
 * own decision (rl_http_guard_limit()).
 *
 * The parsing and the IPv6 prefix are src/core/client_address.cpp; this
 * file maps the settings (ratelimit.trusted_proxies, ratelimit.proxy_header,
 * ratelimit.ipv6_prefix) and SQL values onto it.  rl_http_guard() itself is
 * PL/pgSQL (sql/ratelimit.sql): it reads the request's JSON settings and
 * writes PostgREST's response.
 */
#include "postgres.h"

#include "fmgr.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/inet.h"
#include "utils/json.h"
#include "utils/jsonb.h"

#include "api/result.h"
#include "base/args.h"
#include "base/counters.h"
#include "base/pg_compat.h"
#include "base/settings.h"
#include "core/client_address.h"
#include "decision/decide.h"

PG_FUNCTION_INFO_V1(rl_client_address);
PG_FUNCTION_INFO_V1(rl_http_guard_limit);

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

/* The trusted_proxies argument at argno, else the setting. */
static int
TrustedProxiesArg(FunctionCallInfo fcinfo, int argno)
{
	int			trusted = PG_ARGISNULL(argno) ? rl_trusted_proxies : PG_GETARG_INT32(argno);

	if (trusted < 0 || trusted > RL_MAX_TRUSTED_PROXIES)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("trusted_proxies must be between 0 and %d", RL_MAX_TRUSTED_PROXIES),
				 errdetail("Got %d.", trusted)));
	return trusted;
}

/* The proxy_header argument at argno, else the setting. */
static RlProxyHeader
ProxyHeaderArg(FunctionCallInfo fcinfo, int argno)
{
	return PG_ARGISNULL(argno) ? (RlProxyHeader) rl_proxy_header
		: ProxyHeaderFromText(PG_GETARG_TEXT_PP(argno));
}

/* The ipv6_prefix argument at argno, else the setting. */
static int
Ipv6PrefixArg(FunctionCallInfo fcinfo, int argno)
{
	int			prefix = PG_ARGISNULL(argno) ? rl_ipv6_prefix : PG_GETARG_INT32(argno);

	if (prefix < RL_IPV6_PREFIX_MIN || prefix > RL_IPV6_PREFIX_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("ipv6_prefix must be between %d and %d", RL_IPV6_PREFIX_MIN, RL_IPV6_PREFIX_MAX),
				 errdetail("Got %d.", prefix)));
	return prefix;
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
	int			trusted = TrustedProxiesArg(fcinfo, 2);
	RlProxyHeader kind = ProxyHeaderArg(fcinfo, 3);
	int			header_arg = (kind == RL_PROXY_HEADER_FORWARDED) ? 1 : 0;
	text	   *header;
	char		address[RL_CLIENT_ADDRESS_MAX];

	if (PG_ARGISNULL(header_arg))
		PG_RETURN_NULL();
	header = PG_GETARG_TEXT_PP(header_arg);
	if (rl_forwarded_client(VARDATA_ANY(header), VARSIZE_ANY_EXHDR(header), kind, trusted,
							address) != RL_CLIENT_ADDRESS_OK)
		PG_RETURN_NULL();
	return DirectFunctionCall1(inet_in, CStringGetDatum(address));
}

/*
 * The guard's charge must outlive the request's transaction: PostgREST
 * rolls it back when anything after the guard fails (a login RPC raising on
 * a wrong password, a constraint violation, Prefer: tx=rollback), and a
 * charge rolled back with it would make failed requests free.  A shmem
 * zone's charge is final; a table zone's and a history row are not.
 */
static void
RequireGuardZone(const RlCall *call)
{
	if (call->store == RL_STORE_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("rl_http_guard() needs a shmem zone: zone \"%s\" keeps its state in a table",
						RlMessageText(call->what)),
				 errdetail("A table zone's charge is part of the request's transaction: a request "
						   "that fails after the guard (a wrong password, a constraint violation, "
						   "Prefer: tx=rollback) would give its token back."),
				 errhint("Give the guard a zone with store => 'shmem', whose charge no rollback "
						 "undoes: rl_zone_set('%s', store => 'shmem', reset => true).",
						 RlMessageText(call->what))));
	if (call->history)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("rl_http_guard() needs a zone without history: zone \"%s\" records every request in a table",
						RlMessageText(call->what)),
				 errdetail("A history row is part of the request's transaction: a request that fails "
						   "after the guard would leave none, and a GET request (read-only) could "
						   "write none."),
				 errhint("Give the guard a zone with history => false: rl_zone_set('%s', history => false).",
						 RlMessageText(call->what))));
}

#define NO_ADDRESS_MESSAGE "no client address to rate-limit the request by"
#define NO_ADDRESS_HINT "Send the request through the API's proxy, or sign in. " \
	"(Operators: ratelimit.trusted_proxies and ratelimit.proxy_header must " \
	"describe the proxies in front of PostgREST.)"

/* "name": value, JSON-escaped, after a comma unless first. */
static void
AppendJsonField(StringInfo json, const char *name, const char *value, bool first)
{
	if (!first)
		appendStringInfoString(json, ", ");
	escape_json(json, name);
	appendStringInfoString(json, ": ");
	escape_json(json, value);
}

/*
 * A request with neither a key nor an address is refused, not keyed by a
 * bucket it would share with every such request (one client sending
 * garbage would exhaust it for all the others): HTTP 400, the reason in the
 * details, counted in rl_counters.unkeyed.  reason names the header, never
 * echoes it.
 */
static void
RefuseUnkeyed(const RlCall *call, const char *reason)
{
	StringInfoData body;

	RlCount(MyDatabaseId, call->zone.zone_id, RL_COUNT_UNKEYED);
	if (rl_guard_error == RL_GUARD_ERROR_PT429)
		ereport(ERROR,
				(errcode(MAKE_SQLSTATE('P', 'T', '4', '0', '0')),
				 errmsg(NO_ADDRESS_MESSAGE),
				 errdetail_internal("%s", reason),
				 errhint(NO_ADDRESS_HINT)));
	/*
	 * PostgREST takes the response from a PGRST error (see rl_http_guard()):
	 * the body from the message, the status from the detail, which must
	 * have headers, if none.
	 */
	initStringInfo(&body);
	appendStringInfoChar(&body, '{');
	AppendJsonField(&body, "code", "RL400", true);
	AppendJsonField(&body, "message", NO_ADDRESS_MESSAGE, false);
	AppendJsonField(&body, "details", reason, false);
	AppendJsonField(&body, "hint", NO_ADDRESS_HINT, false);
	appendStringInfoChar(&body, '}');
	ereport(ERROR,
			(errcode(MAKE_SQLSTATE('P', 'G', 'R', 'S', 'T')),
			 errmsg_internal("%s", body.data),
			 errdetail_internal("{\"status\": 400, \"status_text\": \"Bad Request\", \"headers\": {}}")));
}

/*
 * 'ip:' and the client's network (rl_client_network) from request_headers
 * (PostgREST's request.headers: an object, header names in lower case; NULL
 * when unset or unreadable), or the request is refused.
 */
static text *
ClientKey(const RlCall *call, Jsonb *headers, int trusted, RlProxyHeader kind, int ipv6_prefix)
{
	const char *name = kind == RL_PROXY_HEADER_FORWARDED ? "forwarded" : "x-forwarded-for";
	const char *shown = kind == RL_PROXY_HEADER_FORWARDED ? "Forwarded" : "X-Forwarded-For";
	char		address[RL_CLIENT_ADDRESS_MAX];
	char		network[RL_CLIENT_NETWORK_MAX];
	JsonbValue *header = NULL;
	RlClientAddressStatus status = RL_CLIENT_ADDRESS_MALFORMED;

	/* A server setting, not the client's doing: an error of the server. */
	if (trusted == 0)
	{
		RlCount(MyDatabaseId, call->zone.zone_id, RL_COUNT_UNKEYED);
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("rl_http_guard() has no client address to key a request without a JWT subject by"),
				 errdetail("No proxy is trusted (trusted_proxies is 0): any proxy header is the client's own text."),
				 errhint("Set ratelimit.trusted_proxies (or pass trusted_proxies) to the proxies in front of "
						 "PostgREST, or pass a key for requests without a subject.")));
	}
	if (headers != NULL && JB_ROOT_IS_OBJECT(headers))
		header = getKeyJsonValueFromContainer(&headers->root, name, strlen(name), NULL);
	if (header != NULL && header->type == jbvString)
		status = rl_forwarded_client(header->val.string.val, header->val.string.len, kind, trusted,
									 address);
	if (headers == NULL || !JB_ROOT_IS_OBJECT(headers))
		RefuseUnkeyed(call, "request.headers is not set, or not a JSON object.");
	else if (header == NULL || status == RL_CLIENT_ADDRESS_NO_PROXY)
		RefuseUnkeyed(call, psprintf("The request has no %s header.", shown));
	else if (status == RL_CLIENT_ADDRESS_TOO_FEW_HOPS)
		RefuseUnkeyed(call, psprintf("%s holds fewer entries than the trusted proxies append (%d).",
									 shown, trusted));
	else if (status != RL_CLIENT_ADDRESS_OK)
		RefuseUnkeyed(call, psprintf("%s: the entry %d from the right, which the outermost trusted "
									 "proxy wrote, is not an IP address.", shown, trusted));
	if (!rl_client_network(address, ipv6_prefix, network))
		elog(ERROR, "no network for a parsed client address");
	return cstring_to_text(psprintf("ip:%s", network));
}

/*
 * rl_http_guard_limit(zone text, key text, request_headers jsonb,
 *                     trusted_proxies int, proxy_header text, ipv6_prefix int)
 *     RETURNS rl_result
 *
 * rl_http_guard()'s decision: rl_limit(zone, key) on a zone whose charge
 * survives the request's rollback (RequireGuardZone), keyed by key, else
 * by the client's network from request_headers.  On Citus the zone is
 * decided on this node: the guard runs inside PostgREST's transaction on
 * the node PostgREST connects to, and cannot be delegated to the key's
 * worker.  NULL settings arguments mean ratelimit.trusted_proxies,
 * ratelimit.proxy_header and ratelimit.ipv6_prefix; they are checked on
 * every call, so that a misconfigured wrapper fails at once, not only for
 * anonymous requests.
 */
Datum
rl_http_guard_limit(PG_FUNCTION_ARGS)
{
	int			trusted = TrustedProxiesArg(fcinfo, 3);
	RlProxyHeader kind = ProxyHeaderArg(fcinfo, 4);
	int			ipv6_prefix = Ipv6PrefixArg(fcinfo, 5);
	RlCall		call;

	RlRequireNotNull(fcinfo, 0, "zone");
	RlPrepareZoneCall(&call, PG_GETARG_TEXT_PP(0), NULL, 1, true);
	RequireGuardZone(&call);
	if (!PG_ARGISNULL(1))
		call.request.key.key = RlCheckKey(PG_GETARG_TEXT_PP(1), "key");
	else
		call.request.key.key = ClientKey(&call, PG_ARGISNULL(2) ? NULL : PG_GETARG_JSONB_P(2),
										 trusted, kind, ipv6_prefix);
	call.shmem_here = true;
	RlTake(&call, "rl_http_guard()");
	return RlResultDatum(fcinfo, &call);
}
