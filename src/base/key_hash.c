/*
 * key_hash.c -- hashes of callers' keys under the server's secret
 * (key_hash.h); SipHash itself is in core/keyed_hash.cpp.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"

#include "base/key_hash.h"

static RlKeySecret *shared_secret = NULL;
static const RlKeySecret no_secret;	/* without the preload: nothing shared to protect */

static const RlKeySecret *
Secret(void)
{
	return shared_secret != NULL ? shared_secret : &no_secret;
}

uint64
RlKeyPlacementHash(Oid dbid, int32 zone_id, const char *bytes, Size len, uint64 salt)
{
	return rl_keyed_hash(&Secret()->placement, (((uint64) dbid << 32) | (uint32) zone_id) ^ salt,
						 bytes, len);
}

uint64
RlKeyParamsSalt(const char *params, Size len)
{
	/* A word no database and zone make (database 0 holds none). */
	return rl_keyed_hash(&Secret()->placement, UINT64CONST(0xFFFFFFFF), params, len);
}

void
RlKeyDigest(const char *bytes, Size len, const char *params, Size params_len, uint64 digest[2])
{
	/* Two independent keys: a collision of both is out of reach without them. */
	for (int i = 0; i < 2; i++)
		digest[i] = params == NULL ? rl_keyed_hash(&Secret()->identity[i], len, bytes, len)
			: rl_keyed_hash_pair(&Secret()->identity[i], len, bytes, len, params, params_len);
}

void
RlKeySecretGet(RlKeySecret *secret)
{
	*secret = *Secret();
}

void
RlKeySecretSet(const RlKeySecret *secret)
{
	Assert(shared_secret != NULL && !IsUnderPostmaster);
	*shared_secret = *secret;
}

void
RlKeyHashRequest(void)
{
	RequestAddinShmemSpace(sizeof(RlKeySecret));
}

void
RlKeyHashStartup(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	shared_secret = ShmemInitStruct("ratelimit key hash secret", sizeof(RlKeySecret), &found);
	if (!found && !pg_strong_random(shared_secret, sizeof(RlKeySecret)))
		ereport(FATAL,
				(errmsg("ratelimit: could not make the secret that places keys in shared memory"),
				 errdetail("pg_strong_random() failed.")));
	LWLockRelease(AddinShmemInitLock);
}
