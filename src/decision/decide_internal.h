/*
 * decide_internal.h -- the steps of a decision that decide.c defines and
 * its kin (decide_wait.c, decide_refund.c, decide_leases.c,
 * decide_several_zones.c) share.  Not for other files.
 */
#ifndef RL_DECIDE_INTERNAL_H
#define RL_DECIDE_INTERNAL_H

#include "decision/decide.h"

/* The call's store, told the key: the store is chosen once per call. */
static inline const RlStore *
LocatedStore(RlCall *call)
{
	if (call->located_in == NULL)
		RlLocate(call);
	return call->located_in;
}

static inline bool
IsSlidingWindow(const RlCall *call)
{
	return !call->request.limit.is_bucket &&
		call->request.limit.zone.algorithm == RL_ALGORITHM_SLIDING_WINDOW;
}

static inline bool
IsConcurrency(const RlCall *call)
{
	return !call->request.limit.is_bucket &&
		call->request.limit.zone.algorithm == RL_ALGORITHM_CONCURRENCY;
}

/* The checks: each raises an error naming what is wrong with the call. */
extern void RlRequireCostNotNegative(const RlCall *call);
extern void RlCheckCost(const RlCall *call);
extern void RlRequireRateZone(const RlCall *call, const char *function);
extern void RlRequireWritable(const RlCall *call, const RlStore *store, const char *function);

/* The steps of a decision. */
extern RlDecideFn RlAlgorithmOf(RlCall *call);
extern void RlDecideOnce(RlCall *call, const RlStore *store, RlDecideFn algorithm);
extern void RlConclude(RlCall *call);
extern void RlRecordHistory(RlCall *call);

#endif							/* RL_DECIDE_INTERNAL_H */
