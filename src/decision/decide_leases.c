/*
 * decide_leases.c -- a concurrency zone's calls: rl_acquire takes a lease
 * (a slot held at once), rl_release gives it back.
 */
#include "postgres.h"

#include "base/args.h"
#include "base/clock.h"
#include "base/wait_lines.h"
#include "decision/algorithms.h"
#include "decision/decide_internal.h"

static void
RequireConcurrencyZone(const RlCall *call, const char *function)
{
	if (!IsConcurrency(call))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("zone \"%s\" is not a concurrency zone", RlMessageText(call->what)),
				 errdetail("%s holds a slot of a zone created with algorithm => 'concurrency'.",
						   function),
				 errhint("Use rl_limit() or rl_wait() on a zone of requests per period.")));
}

void
RlAcquire(RlCall *call, const char *function)
{
	const RlStore *store = LocatedStore(call);

	RequireConcurrencyZone(call, function);
	RlRequireWritable(call, store, function);
	call->cost = 1;				/* one slot, as history and counters see it */
	call->algorithm = RlAcquireLease;
	RlDecideOnce(call, store, RlAcquireLease);
	RlConclude(call);
}

void
RlRelease(RlCall *call, const char *function)
{
	const RlStore *store = LocatedStore(call);

	RequireConcurrencyZone(call, function);
	RlRequireWritable(call, store, function);
	call->algorithm = RlReleaseLease;
	call->request.now = RlNow();
	(void) store->update(&call->request, RlReleaseLease, call);
	/* In the history as a negative cost, as a refund: sums stay the slots held. */
	if (call->history && call->lease_released)
	{
		call->cost = -1;
		RlRecordHistory(call);
	}
	if (call->lease_released)
		RlWaitLineWakeAfter(RlWaitLineOf(call->request.key.zone_id, call->request.key.key),
							store->writes_tables);
}
