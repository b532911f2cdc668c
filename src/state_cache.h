/*
 * state_cache.h -- read-modify-write of one key's state under the
 * transaction's lock on it, with a write-back cache for repeated keys.
 */
#ifndef RL_STATE_CACHE_H
#define RL_STATE_CACHE_H

#include "store.h"

/*
 * Computes the new state from the prior one (NULL for a new key).  Returns
 * whether *next must be stored.  Must not raise errors.
 */
typedef bool (*RlDecideFn) (const RlStateRow *prior, RlStateRow *next, void *arg);

/*
 * Runs decide on key's current state and stores the result atomically with
 * respect to concurrent transactions.  The first write of a key in a
 * transaction goes to the store at once (it takes the row lock); later calls
 * on the same key update a backend-local copy that is written once, before
 * commit, so many calls on one key cost O(1) each.
 */
extern void RlStateUpdate(text *key, RlDecideFn decide, void *arg);

#endif							/* RL_STATE_CACHE_H */
