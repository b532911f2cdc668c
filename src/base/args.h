/*
 * args.h -- checks of the arguments every SQL entry point shares, and how
 * an error message shows an input.
 */
#ifndef RL_ARGS_H
#define RL_ARGS_H

#include "postgres.h"

#include "fmgr.h"

/* Keys longer than this are refused; it keeps every key indexable. */
#define RL_MAX_KEY_BYTES 1024

/* Raises 22004 when a required argument is NULL. */
extern void RlRequireNotNull(FunctionCallInfo fcinfo, int argno, const char *argname);

/* Refuses NULL, empty and over-long keys with a precise SQLSTATE. */
extern text *RlCheckedKey(FunctionCallInfo fcinfo, int argno, const char *argname);
/* A key that is not empty and not too long (errors name it argname). */
extern text *RlCheckKey(text *key, const char *argname);

/*
 * An input as an error message may show it: at most RL_MESSAGE_INPUT_BYTES
 * bytes, cut at a character boundary, "..." when cut.  A message never
 * echoes unbounded input.
 */
#define RL_MESSAGE_INPUT_BYTES 128
extern const char *RlMessageText(const char *input);
extern const char *RlMessageTextOfText(const text *input);

#endif							/* RL_ARGS_H */
