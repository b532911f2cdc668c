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
	bool		shadow;			/* decide and count, refuse nothing */
} RlZone;

/* A zone check made from C (rl_limit_trigger). */
typedef struct RlZoneOutcome
{
	RlDecision	decision;		/* allowed is true in shadow mode */
	bool		would_allow;	/* what the zone's limit decided */
} RlZoneOutcome;

/*
 * Checks key against the zone and takes cost when admitted, as rl_limit
 * does; function names the caller in errors.
 */
extern void RlTakeFromZone(text *zone_name, text *key, int64 cost, const char *function,
						   RlZoneOutcome *outcome);

/* Copies the zone named name into *zone; 42704 when there is none. */
extern void RlLookupZone(text *name, RlZone *zone);

extern const char *RlAlgorithmName(RlAlgorithm algorithm);

extern void RlZoneCacheInit(void);

#endif							/* RL_ZONE_H */
