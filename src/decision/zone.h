/*
 * zone.h -- zones (named policies) as the decision path sees them: checked
 * definitions, and a per-backend cache so that a decision does not query
 * the catalog.
 */
#ifndef RL_ZONE_H
#define RL_ZONE_H

#include "postgres.h"

#include "core/rl_core.h"
#include "store/store.h"

#define RL_MAX_ZONE_BYTES 128

typedef struct RlZone
{
	int32		zone_id;
	RlZoneLimit limit;
	RlStoreKind store;
	bool		history;
	bool		shadow;			/* decide and count, refuse nothing */
} RlZone;

/* Copies the zone named name into *zone; 42704 when there is none. */
extern void RlLookupZone(text *name, RlZone *zone);

/*
 * Validates a zone definition (NULLs given as such), raising precise
 * errors; fills *limit.
 */
extern void RlCheckZoneDefinition(const char *algorithm_name, bool rate_null, int64 rate,
								  const Interval *period, bool burst_null, int64 burst,
								  const char *store, RlZoneLimit *limit);

extern const char *RlAlgorithmName(RlAlgorithm algorithm);

extern void RlZoneCacheInit(void);

#endif							/* RL_ZONE_H */
