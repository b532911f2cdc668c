/*
 * result.h -- rl_result, the row every zone check returns.
 */
#ifndef RL_RESULT_H
#define RL_RESULT_H

#include "postgres.h"

#include "fmgr.h"

#include "decision/decide.h"

/* The call's decision as an rl_result (the function's declared result type). */
extern Datum RlResultDatum(FunctionCallInfo fcinfo, const RlCall *call);

#endif							/* RL_RESULT_H */
