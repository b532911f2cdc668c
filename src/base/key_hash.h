/*
 * key_hash.h -- hashes of callers' keys under the server's secret: where the
 * shmem store places a key, how it tells long keys apart, which lease entry
 * and which rl_wait line a key has.  Callers choose keys; with hashes they
 * cannot predict, chosen keys cannot pile onto one place of shared memory
 * (nor two keys be made to share one).
 *
 * The secret is made with pg_strong_random when the server first starts
 * (the postmaster, when ratelimit is preloaded) and kept across a clean
 * restart in the shmem store's state file, so that saved keys load back to
 * where they are looked for.  Without the preload there is no shared memory
 * to protect and no secret: the hashes use a key of zeros.
 */
#ifndef RL_KEY_HASH_H
#define RL_KEY_HASH_H

#include "postgres.h"

#include "core/rl_core.h"

/* The secret: a key for placement, and two for the 128-bit identity of long keys. */
typedef struct RlKeySecret
{
	RlHashKey	placement;
	RlHashKey	identity[2];
} RlKeySecret;

/*
 * 64 bits placing a key of a zone of a database, salted (0: no salt) with
 * RlKeyParamsSalt of an ad-hoc bucket's parameters.
 */
extern uint64 RlKeyPlacementHash(Oid dbid, int32 zone_id, const char *bytes, Size len, uint64 salt);

/* 64 bits of an ad-hoc bucket's parameters, as keyed as the rest. */
extern uint64 RlKeyParamsSalt(const char *params, Size len);

/*
 * 128 bits that stand for a key's bytes, and its parameters when not NULL
 * (out of reach of chosen collisions).
 */
extern void RlKeyDigest(const char *bytes, Size len, const char *params, Size params_len,
						uint64 digest[2]);

/* The secret as the state file keeps it, and one read back from it (the postmaster, at start). */
extern void RlKeySecretGet(RlKeySecret *secret);
extern void RlKeySecretSet(const RlKeySecret *secret);

extern void RlKeyHashRequest(void);
extern void RlKeyHashStartup(void);

#endif							/* RL_KEY_HASH_H */
