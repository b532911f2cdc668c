/*
 * zone.h -- zones (named policies) as the decision path sees them.
 */
#ifndef RL_ZONE_H
#define RL_ZONE_H

#include "postgres.h"

#include "core/rl_core.h"

#define RL_MAX_ZONE_BYTES 128

/* Where a zone keeps its state. */
typedef enum RlStoreKind
{
	RL_STORE_TABLE,
	RL_STORE_SHMEM
} RlStoreKind;

typedef struct RlZone
{
	int32		zone_id;
	RlZoneLimit limit;
	RlStoreKind store;
	bool		history;
} RlZone;

/* Copies the zone named name into *zone; 42704 when there is none. */
extern void RlLookupZone(text *name, RlZone *zone);

extern const char *RlAlgorithmName(RlAlgorithm algorithm);

extern void RlZoneCacheInit(void);

#endif							/* RL_ZONE_H */
