/*
 * decide.h -- one decision: the SQL entry points describe the call (key,
 * limit, store, cost), and these functions run it through the store that
 * keeps the key's state.  The only place that dispatches on the store.
 */
#ifndef RL_DECIDE_H
#define RL_DECIDE_H

#include "postgres.h"

#include "core/rl_core.h"
#include "decision/zone.h"
#include "store/store.h"

typedef struct RlCall
{
	const char *what;			/* the zone's name, or the function's: for messages */
	text	   *zone_name;		/* the zone's name; NULL for the ad-hoc functions */
	RlZone		zone;			/* the zone as defined, for rl_result */
	RlStoreKind store;
	RlStoreCall request;		/* key, limit, now */
	int64		cost;
	bool		history;		/* record the call in ratelimit.history */
	bool		shadow;			/* decide and count, refuse nothing */
	const RlStore *located_in;	/* the store told the key (RlLocate); NULL: not yet */
	bool		shmem_here;		/* a shmem key is decided on this node wherever Citus
								 * places it (rl_http_guard: it cannot be delegated) */
	RlDecideFn	algorithm;		/* the call's decide callback (set by RlTake and kin) */
	bool		holding;		/* RlHoldKey runs the algorithm: encode the state */
	bool		decided;		/* RlTakeTogether: this zone's decide has run */
	bool		excluded;		/* RlTakeTogether: no room for the key, and let through */

	/* the outcome */
	RlDecision	decision;		/* allowed is true in shadow mode */
	bool		would_allow;	/* what the limit decided */
	bool		recorded;		/* written to the history: txn_id is set */
	int64		txn_id;

	/* a concurrency zone's lease: the one rl_acquire wants, or rl_release names */
	RlLease		lease;
	int64		lease_ttl_us;	/* rl_acquire: the lease lapses this long after its decision */
	bool		lease_released; /* rl_release: it was held */

	/* the exact sliding window's working state */
	RlSlidingWindowState *window;
	RlSwDecision *window_result;
} RlCall;

/* A call on a zone; checks cost against the zone when check_cost. */
extern void RlPrepareZoneCall(RlCall *call, text *zone_name, text *key, int64 cost,
							  bool check_cost);

/*
 * A call on rl_token_bucket's or rl_gcra's ad-hoc state (zone_id
 * RL_ZONE_ID_*), in ratelimit.default_store; the caller sets the limit.
 */
extern void RlPrepareAdHocCall(RlCall *call, const char *function, text *key, int32 zone_id,
							   int64 cost);

/*
 * Lets the store start finding the key while the caller still checks its
 * other arguments (RlTake does it otherwise).
 */
extern void RlLocate(RlCall *call);

/* Decides, takes cost when admitted, counts, records: rl_limit and its kin. */
extern void RlTake(RlCall *call, const char *function);

/*
 * One call on several zones (rl_limit(zones[], ...)): admitted only if
 * every zone admits; when one refuses, none is charged.  Each calls[i] is
 * prepared on its zone; returns the index of the most restrictive.
 */
extern int	RlTakeTogether(RlCall *calls, int ncalls, const char *function);

/*
 * Like RlTake, but a refused call sleeps on the latch until its tokens are
 * due and tries again, until admitted or timeout_us (-1: none) has passed;
 * waiters on one key go in arrival order where the wait lines exist.
 */
extern void RlWait(RlCall *call, int64 timeout_us, const char *function);

/*
 * A concurrency zone: acquires call->lease (its nonce, expiry and holder
 * set by the caller), or is refused; counted and recorded as a call of
 * cost 1.
 */
extern void RlAcquire(RlCall *call, const char *function);

/* Releases call->lease (by its nonce); call->lease_released says whether it was held. */
extern void RlRelease(RlCall *call, const char *function);

/* Gives call->cost back to the key (rl_refund); never beyond full. */
extern void RlRefund(RlCall *call, const char *function);

/* Decides as RlTake would, taking nothing (rl_peek). */
extern void RlPeek(RlCall *call);

/*
 * Hands read the key's state as this transaction sees it (its own changes
 * included), changing nothing: for views of the state.
 */
extern void RlReadKey(RlCall *call, RlDecideFn read, void *arg);

/* Forgets the key's state (rl_reset); false when it had none. */
extern bool RlForget(RlCall *call, const char *function);

/* A zone was dropped: every store forgets its keys. */
extern void RlForgetZoneState(int32 zone_id);

/*
 * A zone id comes into use: what a dropped extension's zone of that id left
 * in shared memory (counts, shmem keys) goes.  Not transactional.
 */
extern void RlStartZoneIdAfresh(int32 zone_id);

/* A zone id leaves use (a reset or dropped zone): its shmem keys go.  Not transactional. */
extern void RlRetireZoneId(int32 zone_id);

/* A zone's limit changed: the store keeping its keys judges them by it. */
extern void RlRelimitZoneState(RlStoreKind store, int32 zone_id, const RlZoneLimit *limit);

/* This transaction's cached changes of the zone become visible to SQL. */
extern void RlFlushZoneState(int32 zone_id);

#endif							/* RL_DECIDE_H */
