/*
 * shmem_leases.h -- the shmem store of concurrency zones: each key's leases
 * in shared memory (ratelimit in shared_preload_libraries), not
 * transactional, and held no longer than the session that took them.
 */
#ifndef RL_SHMEM_LEASES_H
#define RL_SHMEM_LEASES_H

#include "store/store.h"

/* Most slots of a concurrency zone in shared memory: each key keeps room for them. */
#define RL_SHMEM_LEASE_SLOTS 64

extern const RlStore RlShmemLeaseStore;

/* One held lease of this database, as the leases view shows it. */
typedef struct RlShmemLeaseInfo
{
	int32		zone_id;
	text	   *key;
	RlLease		lease;
} RlShmemLeaseInfo;

typedef void (*RlShmemLeaseVisitor) (const RlShmemLeaseInfo *lease, void *arg);

/* Visits every lease of this database (none without the preload). */
extern void RlShmemScanLeases(RlShmemLeaseVisitor visit, void *arg);

/*
 * This session took a lease in shared memory: its leases go when it ends
 * (the process slot tells later calls too, but a key nobody calls would
 * keep them till they lapse).
 */
extern void RlShmemLeasesHeldBySession(void);

/* Whether the session that took a lease (its pid and process slot) still runs. */
extern bool RlLeaseHolderAlive(int32 holder_pid, int32 holder_proc);

extern void RlShmemLeasesInit(void);
extern void RlShmemLeasesRequest(void);
extern void RlShmemLeasesStartup(void);

#endif							/* RL_SHMEM_LEASES_H */
