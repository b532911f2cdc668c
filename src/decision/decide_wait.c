/*
 * decide_wait.c -- waiting until admitted (rl_wait): a refused call sleeps
 * on the latch until its tokens are due and tries again, in its key's wait
 * line, until admitted or its deadline.
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"

#include "base/args.h"
#include "base/clock.h"
#include "base/pg_compat.h"
#include "base/wait_lines.h"
#include "decision/decide_internal.h"

/*
 * One attempt of a waiting call.  Where a refusal would keep the key's row
 * locked (the table store locks an exact sliding window's row before
 * deciding, and SPI reads every row FOR UPDATE), the attempt runs in a subtransaction that a refusal rolls
 * back: the waiter must not hold up the key's other callers while it
 * sleeps.
 */
static void
AttemptWhileWaiting(RlCall *call, const RlStore *store, RlDecideFn algorithm)
{
	MemoryContext context = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;

	if (!(store->refusal_may_lock || (store->writes_tables && call->request.lock_first)))
	{
		RlDecideOnce(call, store, algorithm);
		return;
	}
	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(context);
	PG_TRY();
	{
		RlDecideOnce(call, store, algorithm);
	}
	PG_CATCH();
	{
		ErrorData  *error;

		/* Left open, the subtransaction would be mistaken for a caller's savepoint. */
		MemoryContextSwitchTo(context);
		error = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(context);
		CurrentResourceOwner = owner;
		ReThrowError(error);
	}
	PG_END_TRY();
	if (call->decision.allowed)
		ReleaseCurrentSubTransaction();
	else
		RollbackAndReleaseCurrentSubTransaction();
	MemoryContextSwitchTo(context);
	CurrentResourceOwner = owner;
}

/*
 * After an attempt: how long to sleep before the next, or false when the
 * call is over (admitted, let through in shadow mode, no time can be
 * promised, or the tokens would come after the deadline: waiting would
 * only hold the session).
 */
static bool
MustWait(const RlCall *call, TimestampTz deadline, int64 *sleep_us)
{
	const RlDecision *decision = &call->decision;

	if (decision->allowed || call->shadow || decision->retry_after_us < 0)
		return false;
	if (deadline != DT_NOEND && GetCurrentTimestamp() + decision->retry_after_us > deadline)
		return false;
	*sleep_us = decision->retry_after_us;
	return true;
}

/*
 * Sleeps on the latch for sleep_us (-1: until woken), or until woken, then
 * serves interrupts (cancel, statement_timeout, termination).
 */
static void
SleepOnLatch(int64 sleep_us)
{
	int			events = WL_LATCH_SET | WL_EXIT_ON_PM_DEATH;
	long		sleep_ms = 0;

	if (sleep_us >= 0 && sleep_us < 1000)
	{
		/*
		 * The latch counts whole milliseconds: rounding up would return up
		 * to a millisecond late, on average half of one.  The last
		 * fraction is slept plainly (a signal cuts it short).
		 */
		pg_usleep(Max(sleep_us, 1));
		CHECK_FOR_INTERRUPTS();
		return;
	}
	if (sleep_us >= 0)
	{
		events |= WL_TIMEOUT;
		/* Rounded down: the rest is slept by the next round, plainly. */
		sleep_ms = (long) Min(sleep_us / 1000, (int64) INT_MAX);
	}
	(void) WaitLatch(MyLatch, events, sleep_ms, RlWaitEventInfo());
	ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
}

/* Whether the deadline has passed; how long is left in *left_us. */
static bool
PastDeadline(TimestampTz deadline, int64 *left_us)
{
	TimestampTz now;

	*left_us = -1;
	if (deadline == DT_NOEND)
		return false;
	now = GetCurrentTimestamp();
	*left_us = deadline - now;
	return now >= deadline;
}

/*
 * The zone as it is now, before another attempt: a change committed while
 * the call slept applies to it (a new rate, shadow mode, history), but a
 * zone dropped, reset or moved to another store is not the one the call
 * was waiting for.
 */
static void
RefreshZone(RlCall *call)
{
	RlZone		now;

	RlLookupZone(call->zone_name, &now);
	if (now.zone_id != call->zone.zone_id || now.store != call->zone.store)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("zone \"%s\" was reset or moved to another store while the call waited",
						RlMessageText(call->what)),
				 errhint("Call rl_wait() again.")));
	call->zone = now;
	call->request.limit.zone = now.limit;
	call->history = now.history;
	call->shadow = now.shadow;
	RlCheckCost(call);			/* a capacity lowered below the cost would never admit it */
}

/*
 * A waiter whose deadline came while others were ahead of it: refused,
 * with what the key holds now.
 */
static void
RefuseBehindOthers(RlCall *call, const RlStore *store, RlDecideFn algorithm)
{
	call->request.now = RlNow();
	store->read(&call->request, algorithm, call);
	call->decision.allowed = false;
	call->decision.state_changed = false;
	call->decision.retry_after_us = Max(call->decision.retry_after_us, 0);
}

/*
 * The waiting of a call in its key's line: tries when first in it, sleeps
 * until the tokens are due (or until woken, when others are ahead), until
 * admitted or the deadline.
 */
static void
WaitInLine(RlCall *call, const RlStore *store, RlDecideFn algorithm, TimestampTz deadline,
		   int64 sleep_us, bool slept_since_attempt)
{
	for (;;)
	{
		int64		left_us;

		if (slept_since_attempt)
		{
			RefreshZone(call);
			if (RlWaitLineFirst())
			{
				AttemptWhileWaiting(call, store, algorithm);
				if (!MustWait(call, deadline, &sleep_us))
					return;
			}
			else
			{
				/* Woken by whoever leaves the line ahead of it, or by the deadline. */
				if (PastDeadline(deadline, &left_us))
				{
					RefuseBehindOthers(call, store, algorithm);
					return;
				}
				sleep_us = left_us;
			}
		}
		SleepOnLatch(sleep_us);
		slept_since_attempt = true;
	}
}

/* WaitInLine, and out of the line however it ends (an error: cancel, timeout). */
static void
WaitInLineUntilDone(RlCall *call, const RlStore *store, RlDecideFn algorithm,
					TimestampTz deadline, int64 sleep_us, bool slept_since_attempt)
{
	PG_TRY();
	{
		WaitInLine(call, store, algorithm, deadline, sleep_us, slept_since_attempt);
	}
	PG_CATCH();
	{
		RlWaitLineLeave();
		PG_RE_THROW();
	}
	PG_END_TRY();
	RlWaitLineLeave();
}

void
RlWait(RlCall *call, int64 timeout_us, const char *function)
{
	const RlStore *store = LocatedStore(call);
	RlWaitLine	line = RlWaitLineOf(call->request.key.zone_id, call->request.key.key);
	TimestampTz deadline = DT_NOEND;
	RlDecideFn	algorithm;
	int64		sleep_us = 0;
	bool		slept_since_attempt = true;

	RlRequireRateZone(call, function);
	RlRequireWritable(call, store, function);
	algorithm = RlAlgorithmOf(call);
	if (timeout_us >= 0)
		deadline = GetCurrentTimestamp() + Min(timeout_us, RL_MAX_PERIOD_US);

	/* Nobody waits for the key: this call may go first (the usual case). */
	if (!RlWaitLineBusy(line))
	{
		AttemptWhileWaiting(call, store, algorithm);
		if (!MustWait(call, deadline, &sleep_us))
		{
			RlConclude(call);
			return;
		}
	}
	/*
	 * Tries again once in line (slept_since_attempt stays true): tokens
	 * given back between the attempt above and the joining woke nobody.
	 */
	RlWaitLineJoin(line);
	WaitInLineUntilDone(call, store, algorithm, deadline, sleep_us, slept_since_attempt);
	RlConclude(call);
}
