/*
 * decide.c -- one decision, whatever the store: look the store up, check
 * that the transaction may write it, run the algorithm through it, apply
 * what the store says when it had no room, count, record the history, and
 * apply shadow mode.  rl_limit, rl_sliding_window, rl_peek, rl_reset,
 * rl_gcra, rl_token_bucket and rl_limit_trigger all come through here.
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type_d.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/resowner.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"

#include "base/args.h"
#include "base/pg_compat.h"
#include "base/clock.h"
#include "base/counters.h"
#include "base/settings.h"
#include "base/spi_exec.h"
#include "base/wait_lines.h"
#include "decision/algorithms.h"
#include "decision/decide.h"
#include "store/state_table.h"

static void
RequireCostNotNegative(const RlCall *call)
{
	if (call->cost < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cost must not be negative"),
				 errdetail("cost is " INT64_FORMAT ".", call->cost)));
}

static void
CheckCost(const RlCall *call)
{
	RequireCostNotNegative(call);
	if (!rl_zone_cost_valid(&call->request.limit.zone, call->cost))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cost exceeds the capacity of zone \"%s\"", RlMessageText(call->what)),
				 errdetail("cost is " INT64_FORMAT "; the capacity is " INT64_FORMAT ".",
						   call->cost, call->request.limit.zone.capacity),
				 errhint("Such a call could never be admitted.")));
}

void
RlPrepareZoneCall(RlCall *call, text *zone_name, text *key, int64 cost, bool check_cost)
{
	RlZone	   *zone = &call->zone;

	memset(call, 0, sizeof(*call));
	call->what = text_to_cstring(zone_name);
	call->zone_name = zone_name;
	RlLookupZone(zone_name, zone);
	call->store = zone->store;
	call->request.key.key = key;
	call->request.key.zone_id = zone->zone_id;
	call->request.key.part = 0;
	call->request.limit.zone = zone->limit;
	call->cost = cost;
	call->history = zone->history;
	call->shadow = zone->shadow;
	if (check_cost)
		CheckCost(call);
}

void
RlPrepareAdHocCall(RlCall *call, const char *function, text *key, int32 zone_id, int64 cost)
{
	memset(call, 0, sizeof(*call));
	call->what = function;
	call->store = rl_default_store == RL_DEFAULT_STORE_SHMEM ? RL_STORE_SHMEM : RL_STORE_TABLE;
	call->request.key.key = key;
	call->request.key.zone_id = zone_id;
	call->request.key.part = 0;
	call->cost = cost;
}

void
RlLocate(RlCall *call)
{
	const RlStore *store = call->shmem_here && call->store == RL_STORE_SHMEM
		? RlStoreOf(call->store) : RlStoreForKey(call->store, call->request.key.key);

	if (store->locate != NULL)
		store->locate(&call->request);
	call->located_in = store;
}

/* The call's store, told the key: the store is chosen once per call. */
static const RlStore *
LocatedStore(RlCall *call)
{
	if (call->located_in == NULL)
		RlLocate(call);
	return call->located_in;
}

static bool
IsSlidingWindow(const RlCall *call)
{
	return !call->request.limit.is_bucket &&
		call->request.limit.zone.algorithm == RL_ALGORITHM_SLIDING_WINDOW;
}

static bool
IsConcurrency(const RlCall *call)
{
	return !call->request.limit.is_bucket &&
		call->request.limit.zone.algorithm == RL_ALGORITHM_CONCURRENCY;
}

/* A concurrency zone limits leases, not calls: rl_acquire is its call. */
static void
RequireRateZone(const RlCall *call, const char *function)
{
	if (IsConcurrency(call))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("zone \"%s\" limits concurrent leases, not calls", RlMessageText(call->what)),
				 errdetail("%s takes from a zone of requests per period; "
						   "a concurrency zone counts the leases held at once.", function),
				 errhint("Use rl_acquire() and rl_release() on it.")));
}

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

/* The callback that runs the call's algorithm on a row (kept in the call). */
static RlDecideFn
AlgorithmOf(RlCall *call)
{
	if (IsConcurrency(call))
		call->algorithm = RlPeekLeases;	/* what a look sees; rl_acquire runs its own */
	else if (call->request.limit.is_bucket)
		call->algorithm = RlDecideTokenBucket;
	else if (IsSlidingWindow(call))
	{
		call->window = palloc(sizeof(RlSlidingWindowState));
		call->window_result = palloc(sizeof(RlSwDecision));
		call->request.lock_first = true;
		call->algorithm = RlDecideSlidingWindow;
	}
	else
		call->algorithm = RlDecideCounter;
	return call->algorithm;
}

/* A write to a table in a read-only transaction fails here, naming why. */
static void
RequireWritable(const RlCall *call, const RlStore *store, const char *function)
{
	if (!XactReadOnly || !(store->writes_tables || call->history))
		return;
	if (call->request.limit.is_bucket)
		PreventCommandIfReadOnly(function);
	ereport(ERROR,
			(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
			 errmsg("cannot execute %s in a read-only transaction", function),
			 store->writes_tables
			 ? errdetail("Zone \"%s\" keeps its state in a table.", RlMessageText(call->what))
			 : errdetail("Zone \"%s\" records every request in its history table.",
						 RlMessageText(call->what)),
			 errhint("A read-only transaction (PostgREST runs GET and HEAD requests so, "
					 "a hot standby runs nothing else) can use a zone on the shmem store "
					 "without history: rl_zone_set(..., store => 'shmem', history => false).")));
}

#define HISTORY_COLUMNS "(txn_id, recorded_at, zone, key, cost, allowed) VALUES ($1, $2, $3, $4, $5, $6)"

static Oid	history_argtypes[6] = {INT8OID, TIMESTAMPTZOID, TEXTOID, TEXTOID, INT4OID, BOOLOID};

/* The prepared INSERT into each shard of the history placed here (Citus). */
typedef struct ShardInsert
{
	Oid			shard;
	SPIPlanPtr	plan;
} ShardInsert;

static HTAB *shard_inserts = NULL;

/*
 * On Citus a key's requests go into its history shard on this node as into
 * any local table: SQL on the distributed table would plan and execute it
 * through Citus (tens of microseconds a row).
 */
static SPIPlanPtr
HistoryInsertPlan(text *key)
{
	static SPIPlanPtr table_plan = NULL;
	Oid			shard = RlHistoryShardOfKey(key);
	ShardInsert *entry;
	bool		found;

	if (!OidIsValid(shard))
		return RlKeepPlan(&table_plan, "INSERT INTO " RL_INTERNAL_SCHEMA ".history " HISTORY_COLUMNS,
						  6, history_argtypes);
	if (shard_inserts == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(ShardInsert);
		shard_inserts = hash_create("ratelimit history shards", 64, &ctl, HASH_ELEM | HASH_BLOBS);
	}
	entry = hash_search(shard_inserts, &shard, HASH_ENTER, &found);
	if (!found)
		entry->plan = NULL;
	if (entry->plan == NULL)
	{
		char	   *name = quote_qualified_identifier(get_namespace_name(get_rel_namespace(shard)),
													  get_rel_name(shard));

		(void) RlKeepPlan(&entry->plan, psprintf("INSERT INTO %s " HISTORY_COLUMNS, name),
						  6, history_argtypes);
	}
	return entry->plan;
}

/* Appends the request to ratelimit.history (as its owner). */
static void
RecordHistory(RlCall *call)
{
	Datum		values[6];
	int64		txn_id = (int64) U64FromFullTransactionId(GetTopFullTransactionId());
	Oid			relid = RlHistoryTable();
	RlSpiSession session;

	if (!OidIsValid(relid))
		elog(ERROR, "ratelimit history table is missing");
	values[0] = Int64GetDatum(txn_id);
	values[1] = TimestampTzGetDatum(call->decision.decided_at_us);
	values[2] = CStringGetTextDatum(call->what);
	values[3] = PointerGetDatum(call->request.key.key);
	values[4] = Int32GetDatum((int32) call->cost);
	values[5] = BoolGetDatum(call->decision.allowed);

	RlSpiConnectAs(RlRelationOwner(relid), &session);
	if (SPI_execute_plan(HistoryInsertPlan(call->request.key.key), values, NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not record ratelimit history");
	RlSpiFinish(&session);
	call->recorded = true;
	call->txn_id = txn_id;
}

/* Shadow mode: the decision stands in would_allow, the call is let through. */
static void
ApplyShadow(RlCall *call)
{
	call->would_allow = call->decision.allowed;
	if (call->shadow)
		call->decision.allowed = true;
}

/* Runs the call's algorithm on the key's state, now, through its store. */
static void
DecideOnce(RlCall *call, const RlStore *store, RlDecideFn algorithm)
{
	call->request.now = RlNow();
	if (store->update(&call->request, algorithm, call) == RL_STORE_NO_ROOM)
		store->no_room(&call->decision, call->what);
	if (IsSlidingWindow(call) && call->decision.state_changed)
		RlApplyChunkChanges(call, store);
}

/* What happens once per call, however many times it was decided. */
static void
Conclude(RlCall *call)
{
	RlCountDecision(call->request.key.zone_id, call->decision.allowed);
	if (call->history)
		RecordHistory(call);
	ApplyShadow(call);
}

void
RlTake(RlCall *call, const char *function)
{
	const RlStore *store = LocatedStore(call);
	RlDecideFn	algorithm;

	RequireRateZone(call, function);
	RequireWritable(call, store, function);
	algorithm = AlgorithmOf(call);
	DecideOnce(call, store, algorithm);
	Conclude(call);
}

void
RlAcquire(RlCall *call, const char *function)
{
	const RlStore *store = LocatedStore(call);

	RequireConcurrencyZone(call, function);
	RequireWritable(call, store, function);
	call->cost = 1;				/* one slot, as history and counters see it */
	call->algorithm = RlAcquireLease;
	DecideOnce(call, store, RlAcquireLease);
	Conclude(call);
}

void
RlRelease(RlCall *call, const char *function)
{
	const RlStore *store = LocatedStore(call);

	RequireConcurrencyZone(call, function);
	RequireWritable(call, store, function);
	call->algorithm = RlReleaseLease;
	call->request.now = RlNow();
	(void) store->update(&call->request, RlReleaseLease, call);
	/* In the history as a negative cost, as a refund: sums stay the slots held. */
	if (call->history && call->lease_released)
	{
		call->cost = -1;
		RecordHistory(call);
	}
	if (call->lease_released)
		RlWaitLineWakeAfter(RlWaitLineOf(call->request.key.zone_id, call->request.key.key),
							store->writes_tables);
}

/* ---- Waiting until admitted ---- */

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
		DecideOnce(call, store, algorithm);
		return;
	}
	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(context);
	PG_TRY();
	{
		DecideOnce(call, store, algorithm);
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
	CheckCost(call);			/* a capacity lowered below the cost would never admit it */
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

	RequireRateZone(call, function);
	RequireWritable(call, store, function);
	algorithm = AlgorithmOf(call);
	if (timeout_us >= 0)
		deadline = GetCurrentTimestamp() + Min(timeout_us, RL_MAX_PERIOD_US);

	/* Nobody waits for the key: this call may go first (the usual case). */
	if (!RlWaitLineBusy(line))
	{
		AttemptWhileWaiting(call, store, algorithm);
		if (!MustWait(call, deadline, &sleep_us))
		{
			Conclude(call);
			return;
		}
	}
	/*
	 * Tries again once in line (slept_since_attempt stays true): tokens
	 * given back between the attempt above and the joining woke nobody.
	 */
	RlWaitLineJoin(line);
	WaitInLineUntilDone(call, store, algorithm, deadline, sleep_us, slept_since_attempt);
	Conclude(call);
}

void
RlRefund(RlCall *call, const char *function)
{
	const RlStore *store = LocatedStore(call);
	RlDecideFn	refund;

	RequireRateZone(call, function);
	RequireWritable(call, store, function);
	/* Above the capacity is fine: a refund never gives back more than that. */
	RequireCostNotNegative(call);
	(void) AlgorithmOf(call);	/* the refund runs it for a key without state */
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
		RecordHistory(call);
		call->cost = -call->cost;
	}
	call->would_allow = true;
	call->decision.allowed = true;
}

/* ---- Several zones, one decision ---- */

/* One store's share of a call on several zones. */
typedef struct StoreShare
{
	const RlStore *store;
	int			n;
	RlCall	  **calls;			/* the decide callback's args */
	RlStoreCall **requests;
	RlStoreOutcome *outcomes;	/* zeroed: RL_STORE_DECIDED until told */
} StoreShare;

typedef struct Together
{
	RlCall	   *calls;
	int			ncalls;
	StoreShare	outer;			/* held and decided first: the table store's keys */
	StoreShare	inner;			/* decided inside outer's admit: the shmem store's */
} Together;

/* Every zone decided so far admits (a shadow zone's refusal lets it through). */
static bool
DecidedAdmit(const Together *together)
{
	for (int i = 0; i < together->ncalls; i++)
	{
		const RlCall *call = &together->calls[i];

		if (call->decided && !call->excluded && !call->decision.allowed && !call->shadow)
			return false;
	}
	return true;
}

/* The inner store's admit: the last to decide, under its spinlocks. */
static bool
AdmitAll(void *arg)
{
	return DecidedAdmit((const Together *) arg);
}

/* Runs the zone's algorithm and notes that it ran. */
static bool
DecideAndNote(const RlStateRow *prior, RlStateRow *next, void *arg, RlStateAccess *access)
{
	RlCall	   *call = (RlCall *) arg;
	bool		changed = call->algorithm(prior, next, arg, access);

	call->decided = true;
	return changed;
}

/* Holds and decides a store's share together; admit says whether it stands. */
static bool
DecideShare(StoreShare *share, RlAdmitFn admit, Together *together)
{
	return share->store->update_together(share->requests, (void **) share->calls, share->n,
										 DecideAndNote, RlHoldKey, admit, together,
										 share->outcomes);
}

/* The outer store's admit: its own zones, then the inner store's as one. */
static bool
AdmitOuterThenInner(void *arg)
{
	Together   *together = (Together *) arg;

	if (!DecidedAdmit(together))
		return false;
	return together->inner.n == 0 || DecideShare(&together->inner, AdmitAll, together);
}

/* Whether a key of the share found no room to be held. */
static bool
ShareFoundNoRoom(const StoreShare *share)
{
	for (int i = 0; i < share->n; i++)
		if (share->outcomes[i] == RL_STORE_NO_ROOM)
			return true;
	return false;
}

static void
ShareCalls(StoreShare *share, RlCall *calls, int ncalls, bool tables)
{
	share->n = 0;
	share->calls = palloc(sizeof(RlCall *) * ncalls);
	share->requests = palloc(sizeof(RlStoreCall *) * ncalls);
	share->outcomes = palloc0(sizeof(RlStoreOutcome) * ncalls);
	for (int i = 0; i < ncalls; i++)
	{
		RlCall	   *call = &calls[i];

		if (call->excluded || call->located_in->writes_tables != tables)
			continue;
		share->store = call->located_in;
		share->calls[share->n] = call;
		share->requests[share->n] = &call->request;
		share->n++;
	}
}

/*
 * The most restrictive zone: of those whose limit refused (refusing zones
 * before shadow ones, which let the call through), the longest wait (one
 * that no time can be promised for first); when every limit admitted, the
 * fewest left, then the longest until full.
 */
static int
MostRestrictive(const RlCall *calls, int ncalls)
{
	int			best = -1;

	for (int i = 0; i < ncalls; i++)
	{
		const RlDecision *d = &calls[i].decision;
		const RlDecision *b;
		int			rank;
		int			best_rank;

		if (!calls[i].decided)
			continue;
		if (best < 0)
		{
			best = i;
			continue;
		}
		b = &calls[best].decision;
		/* 2: refuses the call; 1: a shadow zone's limit refused; 0: admits */
		rank = d->allowed ? 0 : calls[i].shadow ? 1 : 2;
		best_rank = b->allowed ? 0 : calls[best].shadow ? 1 : 2;
		if (rank != best_rank)
		{
			if (rank > best_rank)
				best = i;
		}
		else if (rank > 0)
		{
			if (b->retry_after_us >= 0 &&
				(d->retry_after_us < 0 || d->retry_after_us > b->retry_after_us))
				best = i;
		}
		else if (d->remaining < b->remaining ||
				 (d->remaining == b->remaining && d->reset_after_us > b->reset_after_us))
			best = i;
	}
	return best < 0 ? 0 : best;
}

/* Row locks in one order (the zones'), so that two such calls never deadlock. */
static int
CompareZoneIds(const void *a, const void *b)
{
	int32		x = ((const RlCall *) a)->request.key.zone_id;
	int32		y = ((const RlCall *) b)->request.key.zone_id;

	return x < y ? -1 : x > y;
}

int
RlTakeTogether(RlCall *calls, int ncalls, const char *function)
{
	Together	together;
	TimestampTz now = RlNow();
	bool		admitted = false;
	bool		would_allow = true;
	int			chosen;

	qsort(calls, ncalls, sizeof(RlCall), CompareZoneIds);
	for (int i = 0; i < ncalls; i++)
	{
		RlCall	   *call = &calls[i];

		RequireRateZone(call, function);
		(void) LocatedStore(call);
		RequireWritable(call, call->located_in, function);
		(void) AlgorithmOf(call);
		call->request.now = now;	/* one instant for every zone */
	}
	together.calls = calls;
	together.ncalls = ncalls;
	for (;;)
	{
		ShareCalls(&together.outer, calls, ncalls, true);
		ShareCalls(&together.inner, calls, ncalls, false);
		for (int i = 0; i < ncalls; i++)
			calls[i].decided = false;
		if (together.outer.n == 0 && together.inner.n == 0)
		{
			admitted = true;	/* every key found no room and was let through */
			break;
		}
		/* Without table zones, the shmem store's share is the whole call. */
		admitted = together.outer.n > 0
			? DecideShare(&together.outer, AdmitOuterThenInner, &together)
			: DecideShare(&together.inner, AdmitAll, &together);
		if (!ShareFoundNoRoom(&together.inner))
			break;
		/*
		 * A key found no room: the full policy says what its call gets.
		 * Refused: so is the whole call, and nothing is charged.  Let
		 * through: the key is decided as a new one, unstored, and the other
		 * zones decide again without it.
		 */
		for (int i = 0; i < together.inner.n; i++)
		{
			RlCall	   *call = together.inner.calls[i];

			if (together.inner.outcomes[i] != RL_STORE_NO_ROOM)
				continue;
			(void) call->algorithm(NULL, &(RlStateRow) {0}, call, NULL);
			call->located_in->no_room(&call->decision, call->what);
			call->decided = true;
			call->excluded = true;
			if (!call->decision.allowed && !call->shadow)
			{
				admitted = false;
				goto decided;
			}
		}
	}
decided:
	for (int i = 0; i < ncalls; i++)
	{
		RlCall	   *call = &calls[i];

		if (admitted && IsSlidingWindow(call) && call->decision.state_changed && !call->excluded)
			RlApplyChunkChanges(call, call->located_in);
		would_allow = would_allow && (!call->decided || call->decision.allowed);
	}
	chosen = MostRestrictive(calls, ncalls);
	for (int i = 0; i < ncalls; i++)
	{
		RlCall	   *call = &calls[i];
		bool		decision_allowed = call->decision.allowed;

		/* Each zone counts and records the call as it went: charged or not. */
		if (!call->decided)
			call->decision.decided_at_us = call->request.now;
		call->decision.allowed = admitted;
		RlCountDecision(call->request.key.zone_id, admitted);
		if (call->history)
			RecordHistory(call);
		call->decision.allowed = decision_allowed;
	}
	/* The transaction id finds the call's history rows, whichever zone kept them. */
	for (int i = 0; i < ncalls; i++)
		if (calls[i].recorded)
		{
			calls[chosen].recorded = true;
			calls[chosen].txn_id = calls[i].txn_id;
		}
	/* A refused call had a zone whose limit refused: would_allow is false. */
	calls[chosen].would_allow = would_allow;
	calls[chosen].decision.allowed = admitted;
	return chosen;
}

void
RlPeek(RlCall *call)
{
	const RlStore *store = LocatedStore(call);
	RlDecideFn	algorithm;

	algorithm = AlgorithmOf(call);
	call->request.now = RlNow();
	store->read(&call->request, algorithm, call);
	/* Nothing was taken. */
	call->decision.state_changed = false;
	ApplyShadow(call);
}

void
RlReadKey(RlCall *call, RlDecideFn read, void *arg)
{
	const RlStore *store = LocatedStore(call);

	call->request.now = RlNow();
	store->read(&call->request, read, arg);
}

bool
RlForget(RlCall *call, const char *function)
{
	const RlStore *store = LocatedStore(call);
	RlStateRow	removed;
	bool		existed;

	if (store->writes_tables)
		PreventCommandIfReadOnly(function);
	existed = store->remove(&call->request.key, &removed);
	if (existed)
		RlWaitLineWakeAfter(RlWaitLineOf(call->request.key.zone_id, call->request.key.key),
							store->writes_tables);
	/* The chunks of the log go with the head row. */
	if (existed && IsSlidingWindow(call))
		RlForgetChunks(call, store, &removed);
	return existed;
}

void
RlForgetZoneState(int32 zone_id)
{
	RlStoreOf(RL_STORE_TABLE)->forget_zone(zone_id);
	/* Not transactional, as everything in shared memory. */
	RlStoreOf(RL_STORE_SHMEM)->forget_zone(zone_id);
	RlStoreOf(RL_STORE_SHMEM_LEASES)->forget_zone(zone_id);
}

void
RlStartZoneIdAfresh(int32 zone_id)
{
	RlCountersStartAfresh(MyDatabaseId, zone_id);
	/* The table store's rows went with the dropped extension's table. */
	RlStoreOf(RL_STORE_SHMEM)->forget_zone(zone_id);
	RlStoreOf(RL_STORE_SHMEM_LEASES)->forget_zone(zone_id);
}

void
RlRetireZoneId(int32 zone_id)
{
	RlStoreOf(RL_STORE_SHMEM)->forget_zone(zone_id);
	RlStoreOf(RL_STORE_SHMEM_LEASES)->forget_zone(zone_id);
}

void
RlRelimitZoneState(RlStoreKind store, int32 zone_id, const RlZoneLimit *limit)
{
	RlStoreOf(store)->relimit_zone(zone_id, limit);
}

void
RlFlushZoneState(int32 zone_id)
{
	RlStoreOf(RL_STORE_TABLE)->flush_zone(zone_id);
}
