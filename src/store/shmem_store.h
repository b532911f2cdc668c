/*
 * shmem_store.h -- the shmem store: per-key state in shared memory, not
 * transactional, for ratelimit in shared_preload_libraries.
 */
#ifndef RL_SHMEM_STORE_H
#define RL_SHMEM_STORE_H

#include "store/store.h"

extern const RlStore RlShmemStore;

/* Raises the error of a server without ratelimit in shared_preload_libraries. */
extern void RlRequireShmemStore(void);

/* A key of this database as a scan of the store shows it. */
typedef struct RlShmemKeyInfo
{
	int32		zone_id;
	const char *key;			/* NULL: a long key, kept as a hash */
	int			key_len;
	RlKeyLimit	limit;			/* what the key was last decided with */
	RlStateRow	state;
} RlShmemKeyInfo;

typedef void (*RlShmemKeyVisitor) (const RlShmemKeyInfo *key, void *arg);

/* Visits every key of this database (none when the store is not preloaded). */
extern void RlShmemScanKeys(RlShmemKeyVisitor visit, void *arg);

/* The set a key of a zone of this database belongs to in the fully grown store (ratelimit.shmem_placement). */
extern int32 RlShmemPlacement(int32 zone_id, text *key);


#endif							/* RL_SHMEM_STORE_H */
