/*
 * state_cache.h -- read-modify-write of one key's state under the
 * transaction's lock on it, with a write-back cache for repeated keys.
 */
#ifndef RL_STATE_CACHE_H
#define RL_STATE_CACHE_H

#include "store.h"

/* Lets a decision read other rows of its key (parts) through the store. */
typedef struct RlStateAccess RlStateAccess;

/*
 * Computes the new state from the prior one (NULL for a new key).  Returns
 * whether *next must be stored.  May read parts through access; writes
 * nothing (a decision can be computed again on a newer row).
 */
typedef bool (*RlDecideFn) (const RlStateRow *prior, RlStateRow *next, void *arg,
							RlStateAccess *access);

/*
 * Runs decide on the key's current state and stores the result atomically
 * with respect to concurrent transactions.  The first write of a key in a
 * transaction goes to the store at once (it takes the row lock); later calls
 * on the same key update a backend-local copy that is written once, before
 * commit, so many calls on one key cost O(1) each.  With lock_first the row
 * is locked before decide runs (decide reads other rows that only the lock
 * holder changes); otherwise a concurrent change makes decide run again.
 */
extern void RlStateUpdate(const RlStateKey *key, bool lock_first, RlDecideFn decide, void *arg);

/* Runs decide on the key's current state (this transaction's included); stores nothing. */
extern void RlStateRead(const RlStateKey *key, RlDecideFn decide, void *arg);

/* Reads another row of the key being decided; false when it has none. */
extern bool RlReadPart(RlStateAccess *access, int32 part, RlStateRow *row);

/* Writes or deletes a row directly, for rows the caller holds the head row's lock for. */
extern void RlInsertPart(const RlStateKey *key, const RlStateRow *row);
extern bool RlRemovePart(const RlStateKey *key);

/*
 * Deletes the key's head row; *removed gets its latest state (this
 * transaction's cached copy included).  False when the key had no state.
 */
extern bool RlStateRemove(const RlStateKey *key, RlStateRow *removed);

/* Drops this transaction's cached copies of a zone whose state is being deleted. */
extern void RlStateForgetZone(int32 zone_id);

/*
 * Writes this transaction's cached changes of the zone to the store and
 * re-reads them before their next use: for a statement that changes the
 * zone's rows itself (rl_cron_refill), under the row locks the calls hold.
 */
extern void RlStateFlushZone(int32 zone_id);

/* Whether this transaction has cached state (made a table-store call). */
extern bool RlStateCacheInUse(void);

#endif							/* RL_STATE_CACHE_H */
