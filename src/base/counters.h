/*
 * counters.h -- per-zone call counters in shared memory (rl_counters).
 */
#ifndef RL_COUNTERS_H
#define RL_COUNTERS_H

#include "postgres.h"

/* What rl_counters shows per zone, in its column order. */
typedef enum RlZoneCount
{
	RL_COUNT_ALLOWED,
	RL_COUNT_REFUSED,
	RL_COUNT_EVICTED,			/* a shmem key forgotten to make room */
	RL_COUNT_FULL,				/* a new shmem key found no room */
	RL_COUNT_FORGIVEN,			/* the tokens evicted keys were missing (their debt) */
	RL_COUNT_KEYS,				/* keys the shmem store holds now: a gauge, not a count */
	RL_COUNT_UNKEYED,			/* rl_http_guard found no client address to key a request by */
	RL_ZONE_COUNTS
} RlZoneCount;

/* Counts one event of a zone of a database (nothing when not preloaded). */
extern void RlCount(Oid dbid, int32 zone_id, RlZoneCount what);

/* Adds delta (may be negative: a gauge) to a zone's count. */
extern void RlCountAdd(Oid dbid, int32 zone_id, RlZoneCount what, int64 delta);

/*
 * A zone's count as it is now, 0 when it has none; takes no lock, raises
 * nothing and allocates nothing: safe under a spinlock.
 */
extern int64 RlCountOf(Oid dbid, int32 zone_id, RlZoneCount what);

/*
 * A zone id comes into use: counts left under it (by a zone of an earlier
 * CREATE EXTENSION in this database, whose ids started at 1 too) go.
 */
extern void RlCountersStartAfresh(Oid dbid, int32 zone_id);

/* Counts a decision of a zone of this database. */
extern void RlCountDecision(int32 zone_id, bool allowed);

typedef void (*RlCountersVisitor) (int32 zone_id, const int64 counts[RL_ZONE_COUNTS], void *arg);

/* Visits the counters of this database's zones. */
extern void RlVisitCounters(RlCountersVisitor visit, void *arg);

/* From the shmem hooks: asks for the counters' memory, then sets it up. */
extern void RlCountersRequest(void);
extern void RlCountersStartup(void);

#endif							/* RL_COUNTERS_H */
