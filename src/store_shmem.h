/*
 * store_shmem.h -- the shmem store (store_shmem.c).
 */
#ifndef RL_STORE_SHMEM_H
#define RL_STORE_SHMEM_H

#include "core/rl_core.h"
#include "state_cache.h"

/* ratelimit.shmem_full_policy */
typedef enum RlShmemFullPolicy
{
	RL_SHMEM_FULL_ALLOW,
	RL_SHMEM_FULL_DENY,
	RL_SHMEM_FULL_ERROR
} RlShmemFullPolicy;

extern int	rl_shmem_max_keys;
extern int	rl_shmem_full_policy;

/* The limit a key was last decided with: what tells whether it is idle. */
typedef struct RlShmemLimit
{
	bool		is_bucket;		/* rl_token_bucket's ad-hoc bucket */
	RlZoneLimit zone;
	RlTokenBucketLimit bucket;
} RlShmemLimit;

typedef enum RlShmemOutcome
{
	RL_SHMEM_DECIDED,			/* decided, and stored if it changed */
	RL_SHMEM_FULL				/* a new key found no room: nothing stored */
} RlShmemOutcome;

/* Where a key lives in the store. */
typedef struct RlShmemSlot
{
	uint64		hash;
	uint32		set_index;		/* the key's set when located (it may move) */
} RlShmemSlot;

/*
 * Finds the key's slot and starts fetching its memory: call it as early as
 * the key is known, before the work that precedes RlShmemUpdate.  Raises
 * nothing, preloaded or not.
 */
extern void RlShmemLocate(const RlStateKey *key, RlShmemSlot *slot);

/*
 * Runs decide on the key's state under its set's lock and stores the result
 * (unless peek).  decide must neither raise errors nor read parts.  slot is
 * RlShmemLocate's for this key.
 */
extern RlShmemOutcome RlShmemUpdate(const RlStateKey *key, const RlShmemSlot *slot,
									const RlShmemLimit *limit, TimestampTz now,
									RlDecideFn decide, void *arg, bool peek);

/* ratelimit.shmem_full_policy applied to a decision that found no room. */
extern void RlApplyShmemFullPolicy(RlDecision *decision, const char *what);

/* Forgets one key; false when it had no state. */
extern bool RlShmemRemove(const RlStateKey *key);

/* Forgets every key of a zone; returns how many. */
extern int64 RlShmemRemoveZone(int32 zone_id);

/*
 * A zone's limit changed: its entries are judged idle under the new one
 * from now on (a key full under a smaller burst is not idle under a larger).
 */
extern void RlShmemRelimitZone(int32 zone_id, const RlZoneLimit *limit);

/* Counts a decision of a zone (when preloaded). */
extern void RlShmemCount(int32 zone_id, bool allowed);

extern bool RlShmemAvailable(void);

extern void RlShmemInit(void);

#endif							/* RL_STORE_SHMEM_H */
