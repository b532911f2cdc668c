/*
 * privilege_hint.c -- a hint on "permission denied" for the extension's
 * functions and views, naming the grant that the caller is missing.
 *
 * PUBLIC executes none of the rate-limit functions, so a role that was
 * never granted them meets PostgreSQL's own 42501, raised before any of
 * our code runs.  emit_log_hook is the one place that sees that error
 * before it is sent; it adds the hint when the library is loaded in the
 * backend (always with shared_preload_libraries, otherwise once anything
 * of ours ran there).  It reads no catalog: at that point the transaction
 * is failing.
 */
#include "postgres.h"

#include "utils/elog.h"

#include "api/privilege_hint.h"

static emit_log_hook_type prev_emit_log_hook = NULL;

/*
 * What rl_grant does not grant: these stay with the extension's owner, and
 * their hint says so rather than pointing at rl_grant.
 */
static const char *const owner_only_functions[] = {
	"rl_zone_set", "rl_zone_drop", "rl_reset", "rl_gc",
	"rl_cron_enable", "rl_cron_disable", "rl_cron_refill",
	"rl_grant", "rl_revoke", NULL
};

/*
 * The name of ours that message ends with: an identifier starting with
 * "rl_", followed by nothing but a closing quote (translations quote
 * differently; the name itself is never translated).  Written into name.
 */
static bool
NamedObject(const char *message, char *name, size_t size)
{
	const char *start = NULL;
	const char *end;
	size_t		length;

	for (const char *p = strstr(message, "rl_"); p; p = strstr(p + 1, "rl_"))
		if (p == message || !(isalnum((unsigned char) p[-1]) || p[-1] == '_'))
			start = p;
	if (start == NULL)
		return false;
	for (end = start; isalnum((unsigned char) *end) || *end == '_'; end++)
		;
	length = end - start;
	while (*end != '\0' && !isalnum((unsigned char) *end) && *end != '_' && *end != ' ')
		end++;
	if (*end != '\0' || length >= size)
		return false;
	memcpy(name, start, length);
	name[length] = '\0';
	return true;
}

static bool
IsOwnerOnly(const char *name)
{
	for (const char *const *owner_only = owner_only_functions; *owner_only; owner_only++)
		if (strcmp(name, *owner_only) == 0)
			return true;
	return false;
}

/* The hint for edata, or NULL when it is not a refusal of one of ours. */
static char *
GrantHint(const ErrorData *edata)
{
	char		name[NAMEDATALEN];
	bool		function;

	if (edata->elevel < ERROR || edata->sqlerrcode != ERRCODE_INSUFFICIENT_PRIVILEGE ||
		edata->hint != NULL || edata->message_id == NULL || edata->message == NULL)
		return NULL;
	function = strcmp(edata->message_id, "permission denied for function %s") == 0;
	if (!function && strcmp(edata->message_id, "permission denied for view %s") != 0)
		return NULL;
	if (!NamedObject(edata->message, name, sizeof(name)))
		return NULL;
	if (!function)
		return pstrdup("The extension's owner grants the monitoring views to a "
					   "role with SELECT rl_grant('role_name', 'monitor').");
	if (IsOwnerOnly(name))
		return psprintf("%s is for the owner of extension ratelimit: zone management, "
						"reset, garbage collection and grants are not granted by rl_grant.",
						name);
	if (strcmp(name, "rl_refund") == 0)
		return pstrdup("PUBLIC executes no rate-limit function. The extension's owner "
					   "grants rl_refund to a role with "
					   "SELECT rl_grant('role_name', 'refund').");
	return pstrdup("PUBLIC executes no rate-limit function. The extension's owner "
				   "grants the decision functions to a role with "
				   "SELECT rl_grant('role_name').");
}

static void
AddGrantHint(ErrorData *edata)
{
	char	   *hint = GrantHint(edata);

	if (hint != NULL)
		edata->hint = hint;
	if (prev_emit_log_hook)
		prev_emit_log_hook(edata);
}

void
RlPrivilegeHintInit(void)
{
	prev_emit_log_hook = emit_log_hook;
	emit_log_hook = AddGrantHint;
}
