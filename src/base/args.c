/*
 * args.c -- argument checks shared by the SQL entry points.
 */
#include "postgres.h"

#include "mb/pg_wchar.h"

#include "base/args.h"
#include "base/pg_compat.h"

void
RlRequireNotNull(FunctionCallInfo fcinfo, int argno, const char *argname)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", argname)));
}

text *
RlCheckedKey(FunctionCallInfo fcinfo, int argno, const char *argname)
{
	RlRequireNotNull(fcinfo, argno, argname);
	return RlCheckKey(PG_GETARG_TEXT_PP(argno), argname);
}

text *
RlCheckKey(text *key, const char *argname)
{
	int			len = VARSIZE_ANY_EXHDR(key);

	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be empty", argname)));
	if (len > RL_MAX_KEY_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_STRING_DATA_RIGHT_TRUNCATION),
				 errmsg("%s is too long", argname),
				 errdetail("The %s is %d bytes; the limit is %d bytes.",
						   argname, len, RL_MAX_KEY_BYTES),
				 errhint("Hash long keys, e.g. with md5(), before passing them.")));
	return key;
}

const char *
RlMessageText(const char *input)
{
	int			len = strlen(input);

	if (len <= RL_MESSAGE_INPUT_BYTES)
		return input;
	return psprintf("%.*s...", pg_mbcliplen(input, len, RL_MESSAGE_INPUT_BYTES), input);
}

const char *
RlMessageTextOfText(const text *input)
{
	int			len = VARSIZE_ANY_EXHDR(input);
	const char *bytes = VARDATA_ANY(input);

	/* Never copy the whole of a huge input only to cut it. */
	if (len <= RL_MESSAGE_INPUT_BYTES)
		return pnstrdup(bytes, len);
	return psprintf("%.*s...", pg_mbcliplen(bytes, len, RL_MESSAGE_INPUT_BYTES), bytes);
}
