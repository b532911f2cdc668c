/*
 * counters.c -- per-zone counts of allowed, refused, evicted and
 * refused-for-space calls, the tokens evictions forgave, the keys the
 * shmem store holds and the requests rl_http_guard found no key for, in
 * shared memory (atomics, no lock), for rl_counters and for the shmem
 * store's fair shares.  Every store counts here; nothing is counted
 * without ratelimit in shared_preload_libraries.  A zone's counters fill
 * one cache line: the tag and seven counts.
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"

#include "base/counters.h"

#define RL_COUNTER_SLOTS 8192
#define RL_CACHE_LINE 64

/*
 * A line per zone: every call adds to its zone's counters, and backends
 * counting for different zones must not bounce one line.
 */
typedef struct ZoneCounters
{
	/* database << 32 | (zone_id + 2): 0 is free (ad-hoc zone ids are 0 and -1) */
	pg_atomic_uint64 tag;
	pg_atomic_uint64 counts[RL_ZONE_COUNTS];
} pg_attribute_aligned(RL_CACHE_LINE) ZoneCounters;

StaticAssertDecl(sizeof(ZoneCounters) == RL_CACHE_LINE, "a zone's counters fill one cache line");

typedef struct CountersShmem
{
	pg_atomic_uint32 slots_warned;	/* the slots ran out: said once */
	ZoneCounters zones[RL_COUNTER_SLOTS];
} CountersShmem;

static CountersShmem *counters = NULL;

static uint64
CounterTag(Oid dbid, int32 zone_id)
{
	return ((uint64) dbid << 32) | (uint32) (zone_id + 2);
}

/* Where a zone's probe for its slot starts. */
static uint32
SlotStart(Oid dbid, int32 zone_id)
{
	return (uint32) (hash_bytes_uint32((uint32) zone_id) ^ dbid) % RL_COUNTER_SLOTS;
}

static ZoneCounters *
FindCounters(uint64 tag, Oid dbid, int32 zone_id)
{
	uint32		start = SlotStart(dbid, zone_id);

	for (uint32 probe = 0; probe < RL_COUNTER_SLOTS; probe++)
	{
		ZoneCounters *slot = &counters->zones[(start + probe) % RL_COUNTER_SLOTS];
		uint64		seen = pg_atomic_read_u64(&slot->tag);

		if (seen == tag)
			return slot;
		if (seen == 0)
		{
			uint64		expected = 0;

			if (pg_atomic_compare_exchange_u64(&slot->tag, &expected, tag) || expected == tag)
				return slot;
		}
	}
	/* More zones than slots: not counted, and said once. */
	if (pg_atomic_exchange_u32(&counters->slots_warned, 1) == 0)
		ereport(WARNING,
				(errmsg("ratelimit: the shmem counters of %d zones are in use; calls of further zones are not counted",
						RL_COUNTER_SLOTS),
				 errdetail("A zone keeps its counters until the server restarts, also once dropped.")));
	return NULL;
}

/*
 * A slot keeps its zone until the server stops, so a backend remembers the
 * last one it found: calls on one zone skip the probe.
 */
static ZoneCounters *
CountersOf(Oid dbid, int32 zone_id)
{
	static uint64 last_tag = 0;
	static ZoneCounters *last_slot = NULL;
	uint64		tag = CounterTag(dbid, zone_id);

	if (tag != last_tag || last_slot == NULL)
	{
		last_slot = FindCounters(tag, dbid, zone_id);
		last_tag = tag;
	}
	return last_slot;
}

static inline void
CountAdd(Oid dbid, int32 zone_id, RlZoneCount what, int64 delta)
{
	ZoneCounters *slot;

	if (counters == NULL || delta == 0)
		return;					/* not preloaded: nothing is counted */
	slot = CountersOf(dbid, zone_id);
	if (slot != NULL)
		pg_atomic_fetch_add_u64(&slot->counts[what], (uint64) delta);	/* two's complement: - too */
}

void
RlCount(Oid dbid, int32 zone_id, RlZoneCount what)
{
	CountAdd(dbid, zone_id, what, 1);
}

void
RlCountAdd(Oid dbid, int32 zone_id, RlZoneCount what, int64 delta)
{
	CountAdd(dbid, zone_id, what, delta);
}

int64
RlCountOf(Oid dbid, int32 zone_id, RlZoneCount what)
{
	uint64		tag = CounterTag(dbid, zone_id);

	if (counters == NULL)
		return 0;
	for (uint32 probe = 0, start = SlotStart(dbid, zone_id); probe < RL_COUNTER_SLOTS; probe++)
	{
		ZoneCounters *slot = &counters->zones[(start + probe) % RL_COUNTER_SLOTS];
		uint64		seen = pg_atomic_read_u64(&slot->tag);

		if (seen == tag)
			return (int64) pg_atomic_read_u64(&slot->counts[what]);
		if (seen == 0)
			break;
	}
	return 0;
}

void
RlCountersStartAfresh(Oid dbid, int32 zone_id)
{
	uint64		tag = CounterTag(dbid, zone_id);
	uint32		start;

	if (counters == NULL)
		return;
	start = SlotStart(dbid, zone_id);
	for (uint32 probe = 0; probe < RL_COUNTER_SLOTS; probe++)
	{
		ZoneCounters *slot = &counters->zones[(start + probe) % RL_COUNTER_SLOTS];
		uint64		seen = pg_atomic_read_u64(&slot->tag);

		if (seen == 0)
			return;				/* never counted */
		if (seen == tag)
		{
			/* The keys held are the store's, not the zone's history. */
			for (int what = 0; what < RL_ZONE_COUNTS; what++)
				if (what != RL_COUNT_KEYS)
					pg_atomic_write_u64(&slot->counts[what], 0);
			return;
		}
	}
}

void
RlCountDecision(int32 zone_id, bool allowed)
{
	RlCount(MyDatabaseId, zone_id, allowed ? RL_COUNT_ALLOWED : RL_COUNT_REFUSED);
}

void
RlVisitCounters(RlCountersVisitor visit, void *arg)
{
	if (counters == NULL)
		return;
	for (int i = 0; i < RL_COUNTER_SLOTS; i++)
	{
		ZoneCounters *c = &counters->zones[i];
		uint64		tag = pg_atomic_read_u64(&c->tag);
		int64		counts[RL_ZONE_COUNTS];

		/* This database's zones only: zone ids are per database. */
		if (tag == 0 || (Oid) (tag >> 32) != MyDatabaseId)
			continue;
		for (int what = 0; what < RL_ZONE_COUNTS; what++)
			counts[what] = (int64) pg_atomic_read_u64(&c->counts[what]);
		visit((int32) (uint32) tag - 2, counts, arg);
	}
}

void
RlCountersRequest(void)
{
	RequestAddinShmemSpace(sizeof(CountersShmem));
}

void
RlCountersStartup(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	counters = ShmemInitStruct("ratelimit counters", sizeof(CountersShmem), &found);
	if (!found)
	{
		pg_atomic_init_u32(&counters->slots_warned, 0);
		for (int i = 0; i < RL_COUNTER_SLOTS; i++)
		{
			pg_atomic_init_u64(&counters->zones[i].tag, 0);
			for (int what = 0; what < RL_ZONE_COUNTS; what++)
				pg_atomic_init_u64(&counters->zones[i].counts[what], 0);
		}
	}
	LWLockRelease(AddinShmemInitLock);
}
