/*
 * zone.h -- zones (named policies) as the decision path sees them: checked
 * definitions, and a per-backend cache so that a decision does not query
 * the catalog.
 */
#ifndef RL_ZONE_H
#define RL_ZONE_H

#include "postgres.h"

#include "utils/numeric.h"
#include "utils/timestamp.h"

#include "core/rl_core.h"
#include "store/store.h"

#define RL_MAX_ZONE_BYTES 128

/* Room for a zone's rate as a numeric (at most 2^53 with 6 decimals). */
#define RL_RATE_NUMERIC_BYTES 32

typedef struct RlZone
{
	int32		zone_id;
	RlZoneLimit limit;			/* in whole requests: 5.5 per second is 11 per 2 s */
	RlStoreKind store;
	bool		history;
	bool		shadow;			/* decide and count, refuse nothing */
	bool		durable;		/* table store: keys in the logged ratelimit.durable_state */
	/* the rate and period as defined, for rl_result */
	union
	{
		int32		align;		/* a varlena's header is an int32 */
		char		bytes[RL_RATE_NUMERIC_BYTES];
	}			rate;
	Interval	period;
} RlZone;

/* Copies the zone named name into *zone; 42704 when there is none. */
extern void RlLookupZone(text *name, RlZone *zone);

/*
 * Validates a zone definition (NULLs given as such), raising precise
 * errors; fills *limit.  A fractional rate (token_bucket and gcra only) is
 * kept exact as whole requests over a multiple of the period.
 */
extern void RlCheckZoneDefinition(const char *algorithm_name, Numeric rate,
								  const Interval *period, bool burst_null, int64 burst,
								  const char *store, RlZoneLimit *limit);

/*
 * Grows whenever this backend's zone cache is dropped (a zone changed
 * somewhere, at its commit): a call that looked its zone up at generation
 * g and sees another one later may hold a stale definition.
 */
extern uint64 RlZoneGeneration(void);

/* Whether the zone of that id keeps durable state now; if_missing when it is gone. */
extern bool RlZoneDurableNow(int32 zone_id, bool if_missing);

/* The name of the zone of that id, or NULL when there is none (palloc'd). */
extern char *RlZoneNameOfId(int32 zone_id);

extern const char *RlAlgorithmName(RlAlgorithm algorithm);

extern void RlZoneCacheInit(void);

#endif							/* RL_ZONE_H */
