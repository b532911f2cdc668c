/*
 * decide_several_zones.c -- several zones, one decision
 * (rl_limit(zones[], ...)): admitted only if every zone admits; when one
 * refuses, none is charged.
 */
#include "postgres.h"

#include "base/clock.h"
#include "base/counters.h"
#include "decision/algorithms.h"
#include "decision/decide_internal.h"

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

		RlRequireRateZone(call, function);
		(void) LocatedStore(call);
		RlRequireWritable(call, call->located_in, function);
		(void) RlAlgorithmOf(call);
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
			RlRecordHistory(call);
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
