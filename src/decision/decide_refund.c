/*
 * decide_refund.c -- rl_refund: gives a call's cost back to its key, never
 * beyond full.
 */
#include "postgres.h"

#include "base/clock.h"
#include "base/wait_lines.h"
#include "decision/algorithms.h"
#include "decision/decide_internal.h"

void
RlRefund(RlCall *call, const char *function)
{
	const RlStore *store = LocatedStore(call);
	RlDecideFn	refund;

	RlRequireRateZone(call, function);
	RlRequireWritable(call, store, function);
	/* Above the capacity is fine: a refund never gives back more than that. */
	RlRequireCostNotNegative(call);
	(void) RlAlgorithmOf(call);	/* the refund runs it for a key without state */
	refund = IsSlidingWindow(call) ? RlRefundSlidingWindow : RlRefundCounter;
	call->request.now = RlNow();
	/* A refund never needs room: a key without state has nothing to get back. */
	(void) store->update(&call->request, refund, call);
	if (call->decision.state_changed)
		RlWaitLineWakeAfter(RlWaitLineOf(call->request.key.zone_id, call->request.key.key),
							store->writes_tables);
	/* Only what gave something back: a full key had nothing to refund. */
	if (call->history && call->decision.state_changed)
	{
		/* In the history as a negative cost, so that sums stay true. */
		call->cost = -call->cost;
		RlRecordHistory(call);
		call->cost = -call->cost;
	}
	call->would_allow = true;
	call->decision.allowed = true;
}
