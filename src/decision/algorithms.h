/*
 * algorithms.h -- the core's algorithms (src/core) over stored rows: the
 * decide callbacks a store runs on a key's row.  arg is the RlCall.
 */
#ifndef RL_ALGORITHMS_H
#define RL_ALGORITHMS_H

#include "decision/decide.h"

/* rl_token_bucket's ad-hoc bucket. */
extern bool RlDecideTokenBucket(const RlStateRow *prior, RlStateRow *next, void *arg,
								RlStateAccess *access);

/* Every zone algorithm whose state is one fixed-size row (and rl_gcra). */
extern bool RlDecideCounter(const RlStateRow *prior, RlStateRow *next, void *arg,
							RlStateAccess *access);

/*
 * The exact sliding window: a head row plus sealed chunks of its log in
 * parts; needs call->window and call->window_result.
 */
extern bool RlDecideSlidingWindow(const RlStateRow *prior, RlStateRow *next, void *arg,
								  RlStateAccess *access);

/*
 * Refunds: give call->cost back to the key (never beyond a full allowance);
 * call->decision is what a call of cost 0 sees afterwards.  A key without
 * state is full: nothing to give back.
 */
extern bool RlRefundCounter(const RlStateRow *prior, RlStateRow *next, void *arg,
							RlStateAccess *access);
extern bool RlRefundSlidingWindow(const RlStateRow *prior, RlStateRow *next, void *arg,
								  RlStateAccess *access);

/*
 * Holds a key for a decision taken together with others (rl_limit over
 * several zones): a key without state gets the state of a key never seen,
 * which decides exactly as no state does, so that the store holds it (a
 * row lock, an entry); a key with state stays as it is.  Decides nothing.
 */
extern bool RlHoldKey(const RlStateRow *prior, RlStateRow *next, void *arg,
					  RlStateAccess *access);

/*
 * Leases of a concurrency zone (call->lease): acquire it, release it, or
 * see what an acquire would decide.  A lease whose holder session is gone
 * (holder_pid set, its process slot now another's or empty) counts as
 * lapsed.
 */
/*
 * A key's leases as its row's bytes hold them (NULL: none), palloc'd with
 * room for one more; NULL when the bytes do not decode (corrupt state).
 */
extern RlLease *RlLeasesOfBytes(const bytea *bytes, int32 *count);

extern bool RlAcquireLease(const RlStateRow *prior, RlStateRow *next, void *arg,
						   RlStateAccess *access);
extern bool RlReleaseLease(const RlStateRow *prior, RlStateRow *next, void *arg,
						   RlStateAccess *access);
extern bool RlPeekLeases(const RlStateRow *prior, RlStateRow *next, void *arg,
						 RlStateAccess *access);

/* Writes the chunks a sliding-window decision sealed or emptied. */
extern void RlApplyChunkChanges(const RlCall *call, const RlStore *store);

/* Deletes the chunks of a forgotten sliding window whose head row was removed. */
extern void RlForgetChunks(const RlCall *call, const RlStore *store, const RlStateRow *removed);

#endif							/* RL_ALGORITHMS_H */
