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
#include "ratelimit.h"

#include "utils/elog.h"

#include "privilege_hint.h"

static emit_log_hook_type prev_emit_log_hook = NULL;

/*
 * Whether message names one of our objects: an identifier starting with
 * "rl_" at its end, or followed only by a closing quote (translations
 * quote differently; the name itself is never translated).
 */
static bool
NamesOurObject(const char *message)
{
	const char *name = NULL;

	for (const char *p = strstr(message, "rl_"); p; p = strstr(p + 1, "rl_"))
		if (p == message || !(isalnum((unsigned char) p[-1]) || p[-1] == '_'))
			name = p;
	if (name == NULL)
		return false;
	while (isalnum((unsigned char) *name) || *name == '_')
		name++;
	while (*name != '\0' && !isalnum((unsigned char) *name) && *name != '_' && *name != ' ')
		name++;
	return *name == '\0';
}

static void
AddGrantHint(ErrorData *edata)
{
	if (edata->elevel >= ERROR &&
		edata->sqlerrcode == ERRCODE_INSUFFICIENT_PRIVILEGE &&
		edata->hint == NULL &&
		edata->message_id != NULL && edata->message != NULL &&
		NamesOurObject(edata->message))
	{
		if (strcmp(edata->message_id, "permission denied for function %s") == 0)
			edata->hint = pstrdup("PUBLIC executes no rate-limit function. The extension's owner "
								  "grants the decision functions to a role with "
								  "SELECT rl_grant('role_name'); zone management, reset and "
								  "garbage collection stay with the owner.");
		else if (strcmp(edata->message_id, "permission denied for view %s") == 0)
			edata->hint = pstrdup("The extension's owner grants the monitoring views to a role with "
								  "SELECT rl_grant('role_name', 'monitor').");
	}
	if (prev_emit_log_hook)
		prev_emit_log_hook(edata);
}

void
RlPrivilegeHintInit(void)
{
	prev_emit_log_hook = emit_log_hook;
	emit_log_hook = AddGrantHint;
}
