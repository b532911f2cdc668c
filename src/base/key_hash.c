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
RlKeyPlacementHash(Oid dbid, int32 zone_id, const char *bytes, Size len)
{
	return rl_keyed_hash(&Secret()->placement, ((uint64) dbid << 32) | (uint32) zone_id, bytes, len);
}

void
RlKeyDigest(const char *bytes, Size len, uint64 digest[2])
{
	/* Two independent keys: a collision of both is out of reach without them. */
	digest[0] = rl_keyed_hash(&Secret()->identity[0], len, bytes, len);
	digest[1] = rl_keyed_hash(&Secret()->identity[1], len, bytes, len);
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
