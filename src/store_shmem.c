/*
 * store_shmem.c -- the shmem store: rate-limit state in shared memory.
 *
 * Not transactional: a decision is final when the call returns, whatever
 * the transaction does.  The algorithms are the same as on the table store:
 * this store runs the same decide callbacks on a row kept in shared memory.
 *
 * Layout: a set-associative table.  A key's hash picks one set of
 * RL_SHMEM_WAYS entries, 2 * RL_SHMEM_WAYS + 1 cache lines (63 on x86-64);
 * each set has its own spinlock,
 * held for the few hundred nanoseconds of one decision (the decide callbacks
 * of this store neither raise errors nor allocate), in a line of 16-bit tags
 * so that a lookup reads one entry, not all of them: three cache lines
 * per call.  Sets follow each other without padding to a page: were they
 * page-aligned, every set's first line (and every first entry) would map to
 * the same few sets of the CPU caches, and 10k keys would keep evicting
 * each other from L1 and L2 however small they are.  Calls on keys of different sets
 * never wait for each other, and there is no global lock on the decision
 * path.  When a set is full and the store can still grow (below), it
 * grows; once fully grown, an entry that has fully recovered (it decides
 * as a new key would) is evicted, and if none has, the key overflows into
 * a free way of another set (below).  Only when no set has a free or
 * recovered way does ratelimit.shmem_full_policy decide.
 *
 * Overflow: a fully grown store has a way for every key of
 * ratelimit.shmem_max_keys, but hashes do not spread keys evenly (a set of
 * 31 at 100 % average load overflows for a few percent of keys, and keys
 * can be chosen to collide).  So that any N keys fit, a key whose set is
 * full borrows a way of another set: that way's tag says FOREIGN, so the
 * host set's lookups, evictions and scans pass over it, and the key's own
 * set (its home) keeps a chain of its borrowed ways, reached only when a
 * key is not found at home.  The home set's lock covers the chain and its
 * entries; the host's lock covers taking a way.  No call holds two set
 * locks: a way is reserved under the host's lock alone, then linked under
 * the home's; a way the home lets go is marked ORPHAN, which the host
 * takes as free.
 *
 * The sets in use grow with the keys (linear hashing): a store starts with
 * a few dozen sets and splits one more, in order, whenever a new key finds
 * its set more than three quarters full, until every set of
 * ratelimit.shmem_max_keys is in use.  A new key whose set is full splits
 * that set ahead of its turn (a bit per set marks it until the order
 * reaches it): splitting every set before it in order would be thousands
 * of splits in one call.  Without this, 10k keys in a store sized for millions would sit in
 * 10k sets on 10k pages, more than the CPU's TLB maps, and every call
 * would wait for a page walk: a lookup costs about the same at any
 * capacity, and the memory of unused sets is never touched.  A split moves a set's keys under its lock and the new set's;
 * a call finds its set from the store's shape (how many sets are split),
 * locks it and checks the shape again, so it never decides on a set its
 * key has just left.  One LWLock orders splits against the scans that
 * must see every set once (the keys view, zone changes).
 *
 * Keys up to RL_SHMEM_INLINE_KEY bytes are stored as they are; longer keys
 * are matched by a 128-bit hash of their bytes.
 *
 * Clean shutdown writes the table to RL_SHMEM_FILE (through a .tmp file and
 * durable_rename); the next start loads it once and removes it.  After a
 * crash or an immediate shutdown there is no file: the state starts empty.
 *
 * Per-zone counters of allowed, refused, evicted and refused-for-space
 * calls live in shared memory too (atomics, no lock).
 */
#include "ratelimit.h"

#include <unistd.h>

#include "catalog/pg_control.h"
#include "common/controldata_utils.h"
#include "common/hashfn.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/builtins.h"
#include "utils/guc.h"

#include "store_shmem.h"

PG_FUNCTION_INFO_V1(rl_shmem_counters);
PG_FUNCTION_INFO_V1(rl_shmem_keys);

/*
 * As many ways as 16-bit tags fit beside the set's lock in its first cache
 * line: 31 where a spinlock is a byte (x86-64), 30 where it is an int
 * (arm64).
 */
#define RL_SHMEM_WAYS ((int) ((RL_CACHE_LINE - sizeof(slock_t)) / sizeof(uint16)))
#define RL_SHMEM_INLINE_KEY 48
#define RL_CACHE_LINE 64			/* x86-64's and most arm64's; PG_CACHE_LINE_SIZE is 128 */
#define RL_SHMEM_ZONE_SLOTS 1024
#define RL_SHMEM_FILE "pg_stat/ratelimit_shmem.state"
#define RL_SHMEM_FILE_MAGIC 0x524C5348	/* "RLSH" */
#define RL_SHMEM_FILE_VERSION 5	/* 5: tags 0xFFFE and 0xFFFF are reserved */

int			rl_shmem_max_keys = 100000;
int			rl_shmem_full_policy = RL_SHMEM_FULL_ALLOW;

/* ShmemEntry.limit_kind of rl_token_bucket's ad-hoc bucket; zones store their RlAlgorithm. */
#define RL_SHMEM_KIND_BUCKET 0xFF
/* ShmemEntry.key_len of a key kept as a 128-bit hash. */
#define RL_SHMEM_KEY_HASHED 0xFF

/*
 * ShmemSet.tags: 0 is a free way; these two mark a way lent to a key of
 * another set (see Overflow above); a key's own tag is anything else.
 */
#define RL_TAG_FREE 0
#define RL_TAG_FOREIGN 0xFFFE
#define RL_TAG_ORPHAN 0xFFFF	/* given back by its home: free for the host */

/* A way of the whole store, in an overflow chain: set * 32 + way + 1; 0 ends it. */
typedef uint32 WayRef;

/*
 * One key, in two cache lines: the first holds what a lookup compares, the
 * second what a decision reads and writes.  A lookup touches the set's first
 * line and these two, all in one page.
 */
typedef struct ShmemEntry
{
	uint32		hash_high;		/* the hash's high half: it picks the set */
	Oid			dbid;			/* zones and keys are per database */
	int32		zone_id;
	uint16		tag;			/* the set's tag for this entry (for loading) */
	uint8		key_len;		/* bytes of key, or RL_SHMEM_KEY_HASHED */
	uint8		limit_kind;		/* RL_SHMEM_KIND_BUCKET or the zone's RlAlgorithm */
	char		key[RL_SHMEM_INLINE_KEY];

	/* the state (RlStateRow without entries) */
	int64		tokens;
	double		fraction;
	TimestampTz stamp;
	int64		counter;
	/* the limit of the last write: what tells whether the entry is idle */
	union
	{
		RlTokenBucketLimit bucket;
		struct
		{
			int64		rate;
			int64		period_us;
			int64		capacity;
		}			zone;
	}			limit;
	WayRef		overflow_next;	/* the next entry of its home's chain, when FOREIGN */
	uint32		unused;
} ShmemEntry;

StaticAssertDecl(offsetof(ShmemEntry, tokens) == 64 && sizeof(ShmemEntry) == 128,
				 "a shmem entry is two cache lines");

/* A page: a line of lock and tags, then the entries. */
typedef struct ShmemSet
{
	slock_t		mutex;
	uint16		tags[RL_SHMEM_WAYS];	/* 16 bits of each entry's hash, or RL_TAG_* */
	ShmemEntry	entries[RL_SHMEM_WAYS] pg_attribute_aligned(64);
} ShmemSet;

/*
 * An odd number of lines (63 on x86-64, 61 on arm64), not 64: consecutive
 * sets start at different cache indices (mod 64), so the sets' lock lines
 * spread over all of a cache's sets.
 */
StaticAssertDecl(sizeof(ShmemSet) == (2 * RL_SHMEM_WAYS + 1) * RL_CACHE_LINE,
				 "a shmem set is its lock line and two lines per way");
StaticAssertDecl(RL_SHMEM_WAYS <= 32, "a WayRef numbers 32 ways per set");

/* What rl_counters shows per zone, in its column order. */
typedef enum ZoneCount
{
	COUNT_ALLOWED,
	COUNT_REFUSED,
	COUNT_EVICTED,
	COUNT_FULL,					/* calls that found their set full */
	ZONE_COUNTS
} ZoneCount;

/*
 * A line per zone: every call adds to its zone's counters, and backends
 * counting for different zones (or reading nsets) must not bounce one line.
 */
typedef struct ZoneCounters
{
	/* database << 32 | (zone_id + 2): 0 is free (ad-hoc zone ids are 0 and -1) */
	pg_atomic_uint64 tag;
	pg_atomic_uint64 counts[ZONE_COUNTS];
} pg_attribute_aligned(RL_CACHE_LINE) ZoneCounters;

/*
 * The sets in use: base << level, plus split.  Set s of the first
 * base << level splits into s and s + (base << level), in order.
 */
#define SHAPE(level, split) (((uint64) (level) << 32) | (split))
#define SHAPE_LEVEL(shape) ((uint32) ((shape) >> 32))
#define SHAPE_SPLIT(shape) ((uint32) (shape))
/* a key's set takes up to 16 of its hash's bits to grow: 65536 times base */
#define RL_SHMEM_MAX_LEVEL 16
/* a new key in a set holding this many splits the next set */
#define RL_SHMEM_GROW_AT 24

typedef struct ShmemHeader
{
	uint32		nsets;			/* allocated: base << max_level */
	uint32		base;			/* in use at start */
	uint32		max_level;
	pg_atomic_uint64 shape;		/* SHAPE(level, split) of the sets in use */
	pg_atomic_uint32 overflow_cursor;	/* where the next search for a way to lend starts */
	pg_atomic_uint64 full_at;	/* decision time a search found no way to lend; 0: none since a way was freed */
	pg_atomic_uint64 last_full_warning;	/* TimestampTz of the last "store is full" WARNING */
	pg_atomic_uint32 zone_slots_warned; /* the counters' slots ran out: said once */
	ZoneCounters zones[RL_SHMEM_ZONE_SLOTS];
} ShmemHeader;

static ShmemHeader *shmem = NULL;
static ShmemSet *shmem_sets = NULL;	/* cache-line aligned */
static LWLock *grow_lock = NULL;	/* exclusive: a split; shared: a scan of all sets */
/* A bit per set of the current round: split ahead of its turn (it was full). */
static pg_atomic_uint64 *split_early = NULL;
/* Per set: the first way of its overflow chain (WayRef), under the set's lock. */
static WayRef *overflow_heads = NULL;
static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static const struct config_enum_entry full_policy_options[] = {
	{"allow", RL_SHMEM_FULL_ALLOW, false},
	{"deny", RL_SHMEM_FULL_DENY, false},
	{"error", RL_SHMEM_FULL_ERROR, false},
	{NULL, 0, false}
};

/*
 * How the store grows: base sets at start, doubled max_level times.  base
 * is at least 16 (when the store is that large), so that rounding the sets
 * of ratelimit.shmem_max_keys up to base << max_level adds at most 1/16.
 */
static void
StoreShape(uint32 *base, uint32 *max_level)
{
	uint32		needed = (uint32) ((rl_shmem_max_keys + RL_SHMEM_WAYS - 1) / RL_SHMEM_WAYS);
	uint32		level = 0;

	while (level < RL_SHMEM_MAX_LEVEL && (needed >> (level + 1)) >= 16)
		level++;
	*max_level = level;
	*base = (needed + (1U << level) - 1) >> level;
}

static uint32
SetCount(void)
{
	uint32		base;
	uint32		max_level;

	StoreShape(&base, &max_level);
	return base << max_level;
}

/* The sets, with room to align them to a cache line. */
static Size
SetsSize(void)
{
	return add_size(mul_size(SetCount(), sizeof(ShmemSet)), RL_CACHE_LINE);
}

static Size
EarlyBitsSize(void)
{
	return mul_size((SetCount() + 63) / 64, sizeof(pg_atomic_uint64));
}

static Size
OverflowHeadsSize(void)
{
	return mul_size(SetCount(), sizeof(WayRef));
}

static bool SetInUse(uint32 index, uint64 shape);

#ifdef USE_ASSERT_CHECKING
/*
 * Whether a set is in use, read without the lock of a split under way.  A
 * split clears an early split's bit only after publishing a shape that
 * covers its set, so a shape read after a cleared bit says it is in use.
 */
static bool
SetInUseNow(uint32 index)
{
	if (SetInUse(index, pg_atomic_read_u64(&shmem->shape)))
		return true;
	pg_read_barrier();
	return SetInUse(index, pg_atomic_read_u64(&shmem->shape));
}
#endif

static ShmemSet *
SetAt(uint32 index)
{
	Assert(index < shmem->nsets);
	Assert(SetInUseNow(index));
	return &shmem_sets[index];
}

/* A set about to be put in use (a split's new half): not in use yet. */
static ShmemSet *
NewSetAt(uint32 index)
{
	Assert(index < shmem->nsets);
	return &shmem_sets[index];
}

static bool
NativeTag(uint16 tag)
{
	return tag != RL_TAG_FREE && tag != RL_TAG_FOREIGN && tag != RL_TAG_ORPHAN;
}

static WayRef
MakeWayRef(uint32 set_index, int way)
{
	return set_index * 32 + (uint32) way + 1;
}

static uint32
WayRefSet(WayRef ref)
{
	return (ref - 1) / 32;
}

static int
WayRefWay(WayRef ref)
{
	return (int) ((ref - 1) % 32);
}

/* The entry of a way lent to another set; its home's lock covers it. */
static ShmemEntry *
ForeignEntry(WayRef ref)
{
	Assert(ref != 0 && WayRefSet(ref) < shmem->nsets);
	return &shmem_sets[WayRefSet(ref)].entries[WayRefWay(ref)];
}

/* The identity of a key in the table: its hash, and what is compared. */
typedef struct ShmemKey
{
	uint32		hash_high;
	uint16		tag;
	Oid			dbid;
	int32		zone_id;
	uint8		key_len;
	char		key[RL_SHMEM_INLINE_KEY];
} ShmemKey;

static uint16
TagOf(uint64 hash)
{
	uint16		tag = (uint16) hash;

	/* 0 and the overflow marks are not a key's */
	return NativeTag(tag) ? tag : 1;
}

/*
 * The way a new key takes when it is free: most keys are found there, so
 * a call can fetch the entry together with the set's first line.
 */
static int
HomeWay(uint16 tag)
{
	return tag % RL_SHMEM_WAYS;
}

/* The hash of a key, its zone and the database: it picks the set and the tag. */
static uint64
KeyHash(const RlStateKey *key)
{
	return hash_bytes_extended((const unsigned char *) VARDATA_ANY(key->key),
							   VARSIZE_ANY_EXHDR(key->key),
							   ((uint64) MyDatabaseId << 32) | (uint32) key->zone_id);
}

static void
MakeShmemKey(const RlStateKey *key, uint64 hash, ShmemKey *out)
{
	const unsigned char *bytes = (const unsigned char *) VARDATA_ANY(key->key);
	int			len = VARSIZE_ANY_EXHDR(key->key);

	memset(out, 0, sizeof(*out));
	out->hash_high = (uint32) (hash >> 32);
	out->tag = TagOf(hash);
	out->dbid = MyDatabaseId;
	out->zone_id = key->zone_id;
	if (len <= RL_SHMEM_INLINE_KEY)
	{
		out->key_len = (uint8) len;
		memcpy(out->key, bytes, len);
	}
	else
	{
		/* Two independent 64-bit hashes: collisions are out of reach. */
		uint64		digest[2] = {hash_bytes_extended(bytes, len, UINT64CONST(0x9E3779B97F4A7C15)),
		hash_bytes_extended(bytes, len, UINT64CONST(0xC2B2AE3D27D4EB4F))};

		out->key_len = RL_SHMEM_KEY_HASHED;
		memcpy(out->key, digest, sizeof(digest));
	}
}

static bool
EntryMatches(const ShmemEntry *entry, const ShmemKey *key)
{
	return entry->hash_high == key->hash_high && entry->dbid == key->dbid &&
		entry->zone_id == key->zone_id && entry->key_len == key->key_len &&
		memcmp(entry->key, key->key, key->key_len == RL_SHMEM_KEY_HASHED ? 16 : key->key_len) == 0;
}

/* The entry of the set that holds key, or -1. */
static int
FindInSet(const ShmemSet *set, const ShmemKey *key)
{
	int			home = HomeWay(key->tag);

	/* Most keys sit in their home way, already being fetched. */
	if (set->tags[home] == key->tag && EntryMatches(&set->entries[home], key))
		return home;
	for (int i = 0; i < RL_SHMEM_WAYS; i++)
	{
		if (set->tags[i] != key->tag || i == home)
			continue;
#ifdef __GNUC__
		/* The state's line, fetched while the first one is compared. */
		__builtin_prefetch(&set->entries[i].tokens, 1);
#endif
		if (EntryMatches(&set->entries[i], key))
			return i;
	}
	return -1;
}

static bool
SplitEarly(uint32 index)
{
	return (pg_atomic_read_u64(&split_early[index / 64]) >> (index % 64)) & 1;
}


static bool
SetInUse(uint32 index, uint64 shape)
{
	uint32		width = shmem->base << SHAPE_LEVEL(shape);

	if (index < width + SHAPE_SPLIT(shape))
		return true;
	return index < 2 * width && SplitEarly(index - width);
}

/*
 * For a scan of every set in use (with splits held off): the first set in
 * use from index on, or shmem->nsets when none is.
 */
static uint32
NextSetInUse(uint32 index, uint64 shape)
{
	uint32		limit = Min(shmem->nsets, 2 * (shmem->base << SHAPE_LEVEL(shape)));

	while (index < limit && !SetInUse(index, shape))
		index++;
	return index < limit ? index : shmem->nsets;
}

/*
 * The set of a key whose hash's high half is hash_high, when shape is in
 * use.  Its top 16 bits pick one of the base sets (scaled by a
 * multiplication rather than a division, which costs ten times more); its
 * low 16 bits, level of them, which of the sets that base set has split
 * into.  The hash's low half is the tag.
 */
static uint32
SetIndexOf(uint32 hash_high, uint64 shape)
{
	uint32		level = SHAPE_LEVEL(shape);
	uint32		base_set = ((hash_high >> 16) * shmem->base) >> 16;
	uint32		index = base_set + shmem->base * (hash_high & ((1U << level) - 1));

	pg_read_barrier();			/* the bits no older than the shape */
	if (index < SHAPE_SPLIT(shape) || SplitEarly(index))
		index = base_set + shmem->base * (hash_high & ((1U << (level + 1)) - 1));
	return index;
}

/*
 * The key's set, locked, starting from index, the set the key was last
 * found to belong to.  Its place is worked out again under the lock: a
 * split that moved the key elsewhere published the shape (or the early
 * bit) that says so before releasing this set, and a later split of this
 * set must wait for the lock.
 */
static ShmemSet *
LockKeySet(uint32 hash_high, uint32 *index)
{
	for (;;)
	{
		ShmemSet   *set = SetAt(*index);
		uint32		locked_index;

		SpinLockAcquire(&set->mutex);
		locked_index = SetIndexOf(hash_high, pg_atomic_read_u64(&shmem->shape));
		if (locked_index == *index)
			return set;
		SpinLockRelease(&set->mutex);
		*index = locked_index;
	}
}

/* ---- per-zone counters ---- */

static uint64
CounterTag(Oid dbid, int32 zone_id)
{
	return ((uint64) dbid << 32) | (uint32) (zone_id + 2);
}

static ZoneCounters *
FindCounters(uint64 tag, Oid dbid, int32 zone_id)
{
	uint32		start = (uint32) (hash_bytes_uint32((uint32) zone_id) ^ dbid) % RL_SHMEM_ZONE_SLOTS;

	for (uint32 probe = 0; probe < RL_SHMEM_ZONE_SLOTS; probe++)
	{
		ZoneCounters *slot = &shmem->zones[(start + probe) % RL_SHMEM_ZONE_SLOTS];
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
	if (pg_atomic_exchange_u32(&shmem->zone_slots_warned, 1) == 0)
		ereport(WARNING,
				(errmsg("ratelimit: the shmem counters of %d zones are in use; calls of further zones are not counted",
						RL_SHMEM_ZONE_SLOTS),
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

static void
CountEvent(Oid dbid, int32 zone_id, ZoneCount what)
{
	ZoneCounters *counters = CountersOf(dbid, zone_id);

	if (counters != NULL)
		pg_atomic_fetch_add_u64(&counters->counts[what], 1);
}

void
RlShmemCount(int32 zone_id, bool allowed)
{
	if (shmem != NULL)
		CountEvent(MyDatabaseId, zone_id, allowed ? COUNT_ALLOWED : COUNT_REFUSED);
}

/* ---- decisions ---- */

static void
RequireShmem(void)
{
	if (shmem == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the shmem store needs ratelimit in shared_preload_libraries"),
				 errhint("Add ratelimit to shared_preload_libraries in postgresql.conf "
						 "(shared_preload_libraries = 'ratelimit') and restart the server.")));
}

bool
RlShmemAvailable(void)
{
	return shmem != NULL;
}

static void
EntryRow(const ShmemEntry *entry, RlStateRow *row)
{
	row->tokens = entry->tokens;
	row->fraction = entry->fraction;
	row->stamp = entry->stamp;
	row->counter = entry->counter;
	row->entries = NULL;
	row->refill_pending = false;
}

static void
SetEntryLimit(ShmemEntry *entry, const RlShmemLimit *limit)
{
	if (limit->is_bucket)
	{
		entry->limit_kind = RL_SHMEM_KIND_BUCKET;
		entry->limit.bucket = limit->bucket;
	}
	else
	{
		entry->limit_kind = (uint8) limit->zone.algorithm;
		entry->limit.zone.rate = limit->zone.rate;
		entry->limit.zone.period_us = limit->zone.period_us;
		entry->limit.zone.capacity = limit->zone.capacity;
	}
}

static void
SetEntryState(ShmemEntry *entry, const RlStateRow *row, const RlShmemLimit *limit)
{
	entry->tokens = row->tokens;
	entry->fraction = row->fraction;
	entry->stamp = row->stamp;
	entry->counter = row->counter;
	SetEntryLimit(entry, limit);
}

/* The entry's state and limit as the algorithms take them. */
static RlTokenBucketState
EntryBucketState(const ShmemEntry *entry)
{
	RlTokenBucketState state = {entry->tokens, entry->fraction, entry->stamp};

	return state;
}

static RlCounterState
EntryCounterState(const ShmemEntry *entry)
{
	RlCounterState state = {entry->tokens, entry->fraction, entry->stamp, entry->counter};

	return state;
}

static RlZoneLimit
EntryZoneLimit(const ShmemEntry *entry)
{
	RlZoneLimit limit = {(RlAlgorithm) entry->limit_kind, entry->limit.zone.rate,
	entry->limit.zone.period_us, entry->limit.zone.capacity};

	return limit;
}

static bool
EntryIdle(const ShmemEntry *entry, TimestampTz now)
{
	if (entry->limit_kind == RL_SHMEM_KIND_BUCKET)
	{
		RlTokenBucketState state = EntryBucketState(entry);

		return rl_token_bucket_idle(&state, now, &entry->limit.bucket);
	}
	else
	{
		RlCounterState state = EntryCounterState(entry);
		RlZoneLimit limit = EntryZoneLimit(entry);

		return rl_counter_idle(&limit, &state, now);
	}
}

static void
FillEntry(ShmemEntry *entry, const ShmemKey *key, const RlShmemLimit *limit, const RlStateRow *row)
{
	memset(entry, 0, sizeof(*entry));
	entry->hash_high = key->hash_high;
	entry->dbid = key->dbid;
	entry->zone_id = key->zone_id;
	entry->tag = key->tag;
	entry->key_len = key->key_len;
	memcpy(entry->key, key->key, sizeof(entry->key));
	SetEntryState(entry, row, limit);
}

/* A way was given up: a search for a way to lend may find it. */
static void
ForgetStoreFull(void)
{
	if (pg_atomic_read_u64(&shmem->full_at) != 0)
		pg_atomic_write_u64(&shmem->full_at, 0);
}

static void
FreeEntry(ShmemSet *set, int index)
{
	set->tags[index] = 0;
	memset(&set->entries[index], 0, sizeof(ShmemEntry));
	ForgetStoreFull();
}

/*
 * A way no key holds: free, or lent and given back.  The home of an
 * orphan writes its tag without the host's lock, after its last write to
 * the entry.
 */
static bool
WayFree(const ShmemSet *set, int way)
{
	uint16		tag = ((volatile const uint16 *) set->tags)[way];

	return tag == RL_TAG_FREE || tag == RL_TAG_ORPHAN;
}

/* A free entry of the set for a key of this tag, its home way first; -1 when none. */
static int
FreeWay(const ShmemSet *set, uint16 tag)
{
	int			way = -1;

	if (WayFree(set, HomeWay(tag)))
		way = HomeWay(tag);
	else
	{
		for (int i = 0; i < RL_SHMEM_WAYS && way < 0; i++)
			if (WayFree(set, i))
				way = i;
	}
	if (way >= 0)
		pg_read_barrier();		/* an orphan's entry is read and written after its tag */
	return way;
}

static bool
StoreFullyGrown(void)
{
	return SHAPE_LEVEL(pg_atomic_read_u64(&shmem->shape)) >= shmem->max_level;
}

/* A way of the set whose own key has recovered, evicted (counted); -1 when none. */
static int
EvictIdle(ShmemSet *set, TimestampTz now)
{
	for (int i = 0; i < RL_SHMEM_WAYS; i++)
	{
		if (NativeTag(set->tags[i]) && EntryIdle(&set->entries[i], now))
		{
			CountEvent(set->entries[i].dbid, set->entries[i].zone_id, COUNT_EVICTED);
			return i;
		}
	}
	return -1;
}

/*
 * A free entry of the set; when none is free, and only once the store is
 * fully grown (*can_grow false), an idle one evicted for it.  -1 when none.
 * A store that can still grow makes room rather than forget a key.
 */
static int
ClaimEntry(ShmemSet *set, uint16 tag, TimestampTz now, bool *can_grow)
{
	int			free_way = FreeWay(set, tag);

	*can_grow = false;
	if (free_way >= 0)
		return free_way;
	*can_grow = !StoreFullyGrown();
	if (*can_grow)
		return -1;
	return EvictIdle(set, now);
}

/* The set's own keys (not the ways it lends). */
static int
SetKeys(const ShmemSet *set)
{
	int			keys = 0;

	for (int i = 0; i < RL_SHMEM_WAYS; i++)
		keys += NativeTag(set->tags[i]);
	return keys;
}

static void
InitSet(ShmemSet *set)
{
	memset(set, 0, sizeof(*set));
	SpinLockInit(&set->mutex);
}

/*
 * Moves the keys of set index whose hash has bit level set to the set it
 * splits into, and publishes the split (publish) before releasing them.
 */
static void
MoveSplitKeys(uint32 index, uint32 level, void (*publish) (uint32 index, uint32 level))
{
	ShmemSet   *from = SetAt(index);
	ShmemSet   *to = NewSetAt(index + (shmem->base << level));

	/* Keys overflow only once every set is in use: no split after that. */
	Assert(overflow_heads[index] == 0);
	InitSet(to);				/* out of reach until the split is published */
	overflow_heads[index + (shmem->base << level)] = 0;
	SpinLockAcquire(&from->mutex);
	SpinLockAcquire(&to->mutex);
	for (int i = 0; i < RL_SHMEM_WAYS; i++)
	{
		int			way;

		if (!NativeTag(from->tags[i]) || (from->entries[i].hash_high & (1U << level)) == 0)
			continue;
		way = FreeWay(to, from->tags[i]);	/* to is empty: there is room */
		to->entries[way] = from->entries[i];
		to->tags[way] = from->tags[i];
		FreeEntry(from, i);
	}
	publish(index, level);
	SpinLockRelease(&to->mutex);
	SpinLockRelease(&from->mutex);
}

static void
PublishNextSplit(uint32 index, uint32 level)
{
	uint32		width = shmem->base << level;

	pg_atomic_write_u64(&shmem->shape,
						index + 1 == width ? SHAPE(level + 1, 0) : SHAPE(level, index + 1));
}

static void
PublishEarlySplit(uint32 index, uint32 level)
{
	pg_atomic_uint64 *word = &split_early[index / 64];

	/* Only the holder of grow_lock writes the bits. */
	pg_atomic_write_u64(word, pg_atomic_read_u64(word) | (UINT64CONST(1) << (index % 64)));
}

/*
 * Puts one more set in use: the next set in order gives the new one its
 * keys whose hash has the next bit set (a set already split early only
 * leaves the bits for the order).  false when every set is in use.  The
 * caller holds grow_lock exclusively, or is alone (the postmaster).
 */
static bool
SplitNextSet(void)
{
	uint64		shape = pg_atomic_read_u64(&shmem->shape);
	uint32		level = SHAPE_LEVEL(shape);
	uint32		split = SHAPE_SPLIT(shape);

	if (level >= shmem->max_level)
		return false;
	if (SplitEarly(split))
	{
		/*
		 * Its keys moved already: the order takes it over, then the bit
		 * goes, under its lock: a call that sees the bit gone must also see
		 * the order past it, or it would take this set for its key's.
		 */
		ShmemSet   *set = SetAt(split);
		pg_atomic_uint64 *word = &split_early[split / 64];
		uint32		width = shmem->base << level;

		SpinLockAcquire(&set->mutex);
		if (split + 1 < width)
		{
			PublishNextSplit(split, level);
			pg_atomic_write_u64(word, pg_atomic_read_u64(word) & ~(UINT64CONST(1) << (split % 64)));
		}
		else
		{
			/*
			 * The last set of the level: at the next level its bit would
			 * mean a split of the next round.  Every set of this level is
			 * split from SHAPE(level, width) on, which reads no bit; the bit
			 * goes, and only then the next level begins (SetIndexOf reads
			 * the shape before the bits).
			 */
			pg_atomic_write_u64(&shmem->shape, SHAPE(level, width));
			pg_atomic_write_u64(word, pg_atomic_read_u64(word) & ~(UINT64CONST(1) << (split % 64)));
			pg_write_barrier();
			pg_atomic_write_u64(&shmem->shape, SHAPE(level + 1, 0));
		}
		SpinLockRelease(&set->mutex);
	}
	else
		MoveSplitKeys(split, level, PublishNextSplit);
	return true;
}

/*
 * Makes room for a key whose set is full: splits that set ahead of its
 * turn, so that a full set costs one split, not a split of every set
 * before it in order.  A set split already in this round (its half of the
 * keys is at the next level) waits for the order.  false when every set is
 * in use.  The caller holds grow_lock exclusively, or is alone.
 */
static bool
SplitFullSet(uint32 hash_high)
{
	uint64		shape = pg_atomic_read_u64(&shmem->shape);
	uint32		index = SetIndexOf(hash_high, shape);
	uint32		level = SHAPE_LEVEL(shape);

	if (level < shmem->max_level && index < (shmem->base << level) &&
		index >= SHAPE_SPLIT(shape) && !SplitEarly(index))
	{
		MoveSplitKeys(index, level, PublishEarlySplit);
		return true;
	}
	return SplitNextSet();
}

/*
 * A new key went into a set holding RL_SHMEM_GROW_AT keys: one more set in
 * use, in order, unless another backend is splitting or scanning (it will be
 * done by the next such key).  A new key whose set is full (hash_high)
 * waits for the lock and splits that set.
 */
static bool
Grow(bool full, uint32 hash_high)
{
	bool		grown;

	if (full)
		LWLockAcquire(grow_lock, LW_EXCLUSIVE);
	else if (!LWLockConditionalAcquire(grow_lock, LW_EXCLUSIVE))
		return false;
	grown = full ? SplitFullSet(hash_high) : SplitNextSet();
	LWLockRelease(grow_lock);
	return grown;
}

/* ---- overflow: ways lent to the keys of full sets ---- */

/*
 * The link (a set's chain head or an entry's overflow_next) that points at
 * the entry of home_index's chain holding key; NULL when none does.  The
 * home set's lock is held.
 */
static WayRef *
FindInChain(uint32 home_index, const ShmemKey *key)
{
	WayRef	   *link = &overflow_heads[home_index];

	while (*link != 0)
	{
		ShmemEntry *entry = ForeignEntry(*link);

		if (EntryMatches(entry, key))
			return link;
		link = &entry->overflow_next;
	}
	return NULL;
}

/* The link to an entry of the chain whose key has recovered (counted as evicted), or NULL. */
static WayRef *
IdleInChain(uint32 home_index, TimestampTz now)
{
	WayRef	   *link = &overflow_heads[home_index];

	while (*link != 0)
	{
		ShmemEntry *entry = ForeignEntry(*link);

		if (EntryIdle(entry, now))
		{
			CountEvent(entry->dbid, entry->zone_id, COUNT_EVICTED);
			return link;
		}
		link = &entry->overflow_next;
	}
	return NULL;
}

/* Gives a lent way back to its host, which may take it from now on. */
static void
ReleaseForeignWay(WayRef ref)
{
	pg_write_barrier();			/* every write to the entry before the host's */
	((volatile uint16 *) shmem_sets[WayRefSet(ref)].tags)[WayRefWay(ref)] = RL_TAG_ORPHAN;
	ForgetStoreFull();
}

/* Takes the entry *link points at out of its chain (the home's lock is held) and lets it go. */
static void
UnlinkForeign(WayRef *link)
{
	WayRef		ref = *link;
	ShmemEntry *entry = ForeignEntry(ref);

	*link = entry->overflow_next;
	entry->overflow_next = 0;
	ReleaseForeignWay(ref);
}

/* Puts a reserved way at the head of home_index's chain (the home's lock is held). */
static void
LinkForeign(uint32 home_index, WayRef ref)
{
	ForeignEntry(ref)->overflow_next = overflow_heads[home_index];
	overflow_heads[home_index] = ref;
}

static bool
SetHasFreeWay(const ShmemSet *set)
{
	for (int i = 0; i < RL_SHMEM_WAYS; i++)
		if (WayFree(set, i))
			return true;
	return false;
}

/*
 * A search that finds no way to lend reads every set.  Once one has, calls
 * at the same decision time, or up to this much later, skip it (keys are
 * not recovering meanwhile), unless a way was freed since (a search under
 * way while it is freed may still miss it, for one interval at most): on a
 * store that is truly full a new key costs one search per interval, not
 * one per call.
 */
#define RL_FULL_SEARCH_INTERVAL USECS_PER_SEC

/*
 * Reserves a way of a set other than home for a key of home, whose set is
 * full: a free way, else one whose own key has recovered (evicted).  0 when
 * no set has one: the store holds more keys than it was sized for.  Only
 * once every set is in use; takes one set's lock at a time.
 */
static WayRef
ReserveForeignWay(uint32 home, TimestampTz now)
{
	uint32		nsets = shmem->nsets;
	uint32		start = pg_atomic_fetch_add_u32(&shmem->overflow_cursor, 1) % nsets;
	TimestampTz full_at = (TimestampTz) pg_atomic_read_u64(&shmem->full_at);

	Assert(StoreFullyGrown());
	if (full_at != 0 && now >= full_at && now - full_at < RL_FULL_SEARCH_INTERVAL)
		return 0;
	for (int pass = 0; pass < 2; pass++)
	{
		bool		evict = pass == 1;	/* only once no set has a free way */

		for (uint32 n = 0; n < nsets; n++)
		{
			uint32		index = (start + n) % nsets;
			ShmemSet   *set = SetAt(index);
			int			way;

			/* Looked at without the lock first: most sets have no room. */
			if (index == home || (!evict && !SetHasFreeWay(set)))
				continue;
			SpinLockAcquire(&set->mutex);
			way = evict ? EvictIdle(set, now) : FreeWay(set, 1);
			if (way >= 0)
			{
				memset(&set->entries[way], 0, sizeof(ShmemEntry));
				set->tags[way] = RL_TAG_FOREIGN;
			}
			SpinLockRelease(&set->mutex);
			if (way >= 0)
				return MakeWayRef(index, way);
		}
	}
	pg_atomic_write_u64(&shmem->full_at, (uint64) now);
	return 0;
}

/*
 * The set's first line and the key's home entry are fetched from here on,
 * while the caller checks arguments and reads the clock: with 10k keys and
 * more they are rarely in the CPU's caches, and the two fetches overlap
 * instead of following each other (the entry's place is known before the
 * tags are read when the key sits in its home way, as most do).
 */
void
RlShmemLocate(const RlStateKey *key, RlShmemSlot *slot)
{
	slot->hash = KeyHash(key);
	slot->set_index = 0;
	if (shmem != NULL)
	{
		slot->set_index = SetIndexOf((uint32) (slot->hash >> 32), pg_atomic_read_u64(&shmem->shape));
#ifdef __GNUC__
		{
			ShmemSet   *set = SetAt(slot->set_index);
			ShmemEntry *home = &set->entries[HomeWay(TagOf(slot->hash))];

			__builtin_prefetch(set, 1);
			__builtin_prefetch(home, 0);
			__builtin_prefetch(&home->tokens, 1);
		}
#endif
	}
}

RlShmemOutcome
RlShmemUpdate(const RlStateKey *key, const RlShmemSlot *slot, const RlShmemLimit *limit,
			  TimestampTz now, RlDecideFn decide, void *arg, bool peek)
{
	ShmemKey	skey;
	ShmemSet   *set;
	uint32		set_index = slot->set_index;
	ShmemEntry *found;
	RlStateRow	next;
	RlShmemOutcome outcome = RL_SHMEM_DECIDED;
	bool		grow = false;
	bool		need_room = false;
	bool		need_foreign_way = false;
	WayRef		reserved = 0;	/* a way lent by another set, not linked yet */
	int			index;

	RequireShmem();
	MakeShmemKey(key, slot->hash, &skey);

retry:
	set = LockKeySet(skey.hash_high, &set_index);
	found = NULL;
	/* decide neither raises nor allocates for the algorithms this store takes. */
	index = FindInSet(set, &skey);
	if (index >= 0)
		found = &set->entries[index];
	else if (overflow_heads[set_index] != 0)
	{
		WayRef	   *link = FindInChain(set_index, &skey);

		if (link != NULL)
			found = ForeignEntry(*link);
	}
	if (found != NULL)
	{
		RlStateRow	current;

		EntryRow(found, &current);
		if (decide(&current, &next, arg, NULL) && !peek)
			SetEntryState(found, &next, limit);
	}
	else if (decide(NULL, &next, arg, NULL) && !peek)
	{
		int			claimed = ClaimEntry(set, skey.tag, now, &need_room);

		if (claimed >= 0)
		{
			FillEntry(&set->entries[claimed], &skey, limit, &next);
			set->tags[claimed] = skey.tag;
			grow = SetKeys(set) > RL_SHMEM_GROW_AT;
		}
		else if (!need_room)
		{
			/* Fully grown and full: a recovered key's lent way, or a new one. */
			WayRef	   *idle = IdleInChain(set_index, now);

			if (idle != NULL)
			{
				ShmemEntry *entry = ForeignEntry(*idle);
				WayRef		chain_next = entry->overflow_next;

				FillEntry(entry, &skey, limit, &next);
				entry->overflow_next = chain_next;
			}
			else if (reserved != 0)
			{
				FillEntry(ForeignEntry(reserved), &skey, limit, &next);
				LinkForeign(set_index, reserved);
				reserved = 0;
			}
			else
				need_foreign_way = true;
		}
	}
	SpinLockRelease(&set->mutex);
	if (need_room)
	{
		/*
		 * Splits in order until this set's turn, unless room appears first;
		 * once the store is fully grown, the retry evicts or overflows.
		 */
		(void) Grow(true, skey.hash_high);
		need_room = false;
		goto retry;
	}
	if (need_foreign_way)
	{
		/* No lock held while searching; the retry decides again. */
		need_foreign_way = false;
		reserved = ReserveForeignWay(set_index, now);
		if (reserved != 0)
			goto retry;
		outcome = RL_SHMEM_FULL;
	}
	if (reserved != 0)
		ReleaseForeignWay(reserved);	/* the key found room at home, or nothing was stored */
	if (grow)
		(void) Grow(false, 0);
	if (outcome == RL_SHMEM_FULL)
		CountEvent(MyDatabaseId, key->zone_id, COUNT_FULL);
	return outcome;
}

/*
 * A store that refuses keys is a misconfiguration an operator must hear
 * of, but a flood of new keys must not flood the log: one WARNING every
 * RL_FULL_WARNING_INTERVAL for the whole server (counted per zone always).
 */
#define RL_FULL_WARNING_INTERVAL (10 * USECS_PER_SEC)

static void
WarnStoreFull(const char *what, const char *policy)
{
	TimestampTz real_now = GetCurrentTimestamp();
	uint64		last = pg_atomic_read_u64(&shmem->last_full_warning);

	if (real_now - (TimestampTz) last < RL_FULL_WARNING_INTERVAL ||
		!pg_atomic_compare_exchange_u64(&shmem->last_full_warning, &last, (uint64) real_now))
		return;
	ereport(WARNING,
			(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
			 errmsg("the ratelimit shmem store is full: a new key of %s found no room", what),
			 errdetail("ratelimit.shmem_full_policy = %s.  rl_counters counts these calls "
					   "per zone in \"full\"; this warning is repeated at most every 10 seconds.",
					   policy),
			 errhint("Raise ratelimit.shmem_max_keys (now %d; a restart is needed).",
					 rl_shmem_max_keys)));
}

/*
 * A new key found no room in the shmem store: ratelimit.shmem_full_policy
 * says what the call gets (allow: the decision for a new key, unstored).
 */
void
RlApplyShmemFullPolicy(RlDecision *decision, const char *what)
{
	switch (rl_shmem_full_policy)
	{
		case RL_SHMEM_FULL_ALLOW:
			WarnStoreFull(what, "allow: this call was decided as for a new key and its key is not limited");
			break;
		case RL_SHMEM_FULL_DENY:
			decision->allowed = false;
			decision->remaining = 0;
			decision->retry_after_us = USECS_PER_SEC;
			WarnStoreFull(what, "deny: this call was refused");
			break;
		case RL_SHMEM_FULL_ERROR:
			ereport(ERROR,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("the ratelimit shmem store has no room for a new key of %s", what),
					 errdetail("The store holds ratelimit.shmem_max_keys = %d keys and none of them has recovered.",
							   rl_shmem_max_keys),
					 errhint("Raise ratelimit.shmem_max_keys (a restart is needed), or set "
							 "ratelimit.shmem_full_policy to allow or deny.")));
	}
}

bool
RlShmemRemove(const RlStateKey *key)
{
	ShmemKey	skey;
	ShmemSet   *set;
	int			index;

	uint32		set_index;
	bool		removed = false;

	RequireShmem();
	MakeShmemKey(key, KeyHash(key), &skey);
	set_index = SetIndexOf(skey.hash_high, pg_atomic_read_u64(&shmem->shape));
	set = LockKeySet(skey.hash_high, &set_index);
	index = FindInSet(set, &skey);
	if (index >= 0)
	{
		FreeEntry(set, index);
		removed = true;
	}
	else
	{
		WayRef	   *link = FindInChain(set_index, &skey);

		if (link != NULL)
		{
			UnlinkForeign(link);
			removed = true;
		}
	}
	SpinLockRelease(&set->mutex);
	return removed;
}

/*
 * Visits this database's entries of a zone: removes them (relimit NULL) or
 * gives them a new limit.  Returns how many it visited.
 */
static int64
VisitZoneEntries(int32 zone_id, const RlZoneLimit *relimit)
{
	int64		visited = 0;
	uint64		shape;
	RlShmemLimit limit = {.is_bucket = false};

	if (shmem == NULL)
		return 0;
	if (relimit != NULL)
		limit.zone = *relimit;
	LWLockAcquire(grow_lock, LW_SHARED);
	shape = pg_atomic_read_u64(&shmem->shape);
	for (uint32 s = NextSetInUse(0, shape); s < shmem->nsets; s = NextSetInUse(s + 1, shape))
	{
		ShmemSet   *set = SetAt(s);

		SpinLockAcquire(&set->mutex);
		for (int i = 0; i < RL_SHMEM_WAYS; i++)
		{
			ShmemEntry *entry = &set->entries[i];

			if (!NativeTag(set->tags[i]) || entry->dbid != MyDatabaseId || entry->zone_id != zone_id)
				continue;
			if (relimit == NULL)
				FreeEntry(set, i);
			else
				SetEntryLimit(entry, &limit);
			visited++;
		}
		for (WayRef *link = &overflow_heads[s]; *link != 0;)
		{
			ShmemEntry *entry = ForeignEntry(*link);

			if (entry->dbid != MyDatabaseId || entry->zone_id != zone_id)
				link = &entry->overflow_next;
			else
			{
				visited++;
				if (relimit == NULL)
					UnlinkForeign(link);	/* *link is now the next one */
				else
				{
					SetEntryLimit(entry, &limit);
					link = &entry->overflow_next;
				}
			}
		}
		SpinLockRelease(&set->mutex);
	}
	LWLockRelease(grow_lock);
	return visited;
}

int64
RlShmemRemoveZone(int32 zone_id)
{
	return VisitZoneEntries(zone_id, NULL);
}

void
RlShmemRelimitZone(int32 zone_id, const RlZoneLimit *limit)
{
	(void) VisitZoneEntries(zone_id, limit);
}

/* ---- keys view: rl_shmem_keys() ---- */

/* One entry as rl_keys shows it: what a call of cost 0 would see now. */
static void
PutKeyRow(ReturnSetInfo *rsinfo, const ShmemEntry *entry, TimestampTz now)
{
	Datum		values[6];
	bool		nulls[6] = {false, false, false, false, false, false};

	values[0] = Int32GetDatum(entry->zone_id);
	if (entry->key_len == RL_SHMEM_KEY_HASHED)
		nulls[1] = true;		/* kept as a hash: the key itself is not known */
	else
		values[1] = PointerGetDatum(cstring_to_text_with_len(entry->key, entry->key_len));
	if (entry->limit_kind == RL_SHMEM_KIND_BUCKET)
	{
		RlTokenBucketState state = EntryBucketState(entry);
		RlTokenBucketDecision peek = rl_token_bucket_take(&state, now, &entry->limit.bucket, 0);

		values[2] = Int64GetDatum((int64) entry->limit.bucket.capacity);
		values[3] = Int64GetDatum(peek.remaining);
		nulls[4] = true;
	}
	else
	{
		RlCounterState state = EntryCounterState(entry);
		RlZoneLimit limit = EntryZoneLimit(entry);
		RlCounterState next;
		RlDecision	peek = rl_counter_take(&limit, &state, now, 0, &next);
		Interval   *reset = palloc0(sizeof(Interval));

		reset->time = peek.reset_after_us;
		values[2] = Int64GetDatum(peek.capacity);
		values[3] = Int64GetDatum(peek.remaining);
		values[4] = IntervalPGetDatum(reset);
	}
	values[5] = TimestampTzGetDatum(entry->stamp);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/*
 * This database's keys in the shmem store: zone_id, key (NULL when longer
 * than RL_SHMEM_INLINE_KEY: kept as a hash), capacity, remaining,
 * reset_after (NULL for rl_token_bucket), and the time of the last change.
 */
Datum
rl_shmem_keys(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	TimestampTz now = RlNow();
	uint64		shape;

	InitMaterializedSRF(fcinfo, 0);
	if (shmem == NULL)
		PG_RETURN_VOID();
	/* No split while scanning: a key moved to a later set would show twice. */
	LWLockAcquire(grow_lock, LW_SHARED);
	shape = pg_atomic_read_u64(&shmem->shape);
	for (uint32 s = NextSetInUse(0, shape); s < shmem->nsets; s = NextSetInUse(s + 1, shape))
	{
		ShmemSet   *set = SetAt(s);
		ShmemEntry	copies[RL_SHMEM_WAYS];
		int			count = 0;
		uint32		chain_done = 0; /* entries of the chain already shown */
		bool		chain_left;

		/*
		 * Copied under the lock, shown after it: no allocation under a
		 * spinlock.  The set's own keys first, then its chain, a bufferful
		 * at a time.
		 */
		SpinLockAcquire(&set->mutex);
		for (int i = 0; i < RL_SHMEM_WAYS; i++)
			if (NativeTag(set->tags[i]) && set->entries[i].dbid == MyDatabaseId)
				copies[count++] = set->entries[i];
		SpinLockRelease(&set->mutex);
		do
		{
			uint32		position = 0;

			for (int i = 0; i < count; i++)
				PutKeyRow(rsinfo, &copies[i], now);
			count = 0;
			chain_left = false;
			SpinLockAcquire(&set->mutex);
			for (WayRef ref = overflow_heads[s]; ref != 0; ref = ForeignEntry(ref)->overflow_next)
			{
				if (position++ < chain_done)
					continue;
				if (count == RL_SHMEM_WAYS)
				{
					chain_left = true;
					break;
				}
				chain_done++;
				if (ForeignEntry(ref)->dbid == MyDatabaseId)
					copies[count++] = *ForeignEntry(ref);
			}
			SpinLockRelease(&set->mutex);
		} while (count > 0 || chain_left);
	}
	LWLockRelease(grow_lock);
	PG_RETURN_VOID();
}

/* ---- counters view: rl_shmem_counters() ---- */

Datum
rl_shmem_counters(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	InitMaterializedSRF(fcinfo, 0);
	if (shmem == NULL)
		PG_RETURN_VOID();		/* not preloaded: no counters, no rows */
	for (int i = 0; i < RL_SHMEM_ZONE_SLOTS; i++)
	{
		ZoneCounters *c = &shmem->zones[i];
		uint64		tag = pg_atomic_read_u64(&c->tag);
		Datum		values[5];
		bool		nulls[5] = {false, false, false, false, false};

		/* This database's zones only: zone ids are per database. */
		if (tag == 0 || (Oid) (tag >> 32) != MyDatabaseId)
			continue;
		values[0] = Int32GetDatum((int32) (uint32) tag - 2);
		for (int what = 0; what < ZONE_COUNTS; what++)
			values[1 + what] = Int64GetDatum((int64) pg_atomic_read_u64(&c->counts[what]));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	PG_RETURN_VOID();
}

/* ---- save at clean shutdown, load once at start ---- */

typedef struct ShmemFileHeader
{
	uint32		magic;
	uint32		version;
	uint32		entry_size;
	uint64		count;
} ShmemFileHeader;

static void
SaveState(int code, Datum arg)
{
	char		tmp[MAXPGPATH];
	FILE	   *file;
	ShmemFileHeader header = {RL_SHMEM_FILE_MAGIC, RL_SHMEM_FILE_VERSION, sizeof(ShmemEntry), 0};

	ControlFileData *control;
	bool		crc_ok;
	uint64		shape;

	/* After a crash (or a failed start) the state is not to be trusted. */
	if (code != 0 || shmem == NULL)
		return;

	/*
	 * The postmaster exits with code 0 after an immediate shutdown too; only
	 * a shutdown checkpoint marks a clean one.  The checkpointer wrote it
	 * before this runs.
	 */
	control = get_controlfile(DataDir, &crc_ok);
	if (!crc_ok || (control->state != DB_SHUTDOWNED &&
					control->state != DB_SHUTDOWNED_IN_RECOVERY))
		return;
	snprintf(tmp, sizeof(tmp), "%s.tmp", RL_SHMEM_FILE);
	file = AllocateFile(tmp, PG_BINARY_W);
	if (file == NULL)
		goto error;
	/* The postmaster, alone now: no lock. */
	shape = pg_atomic_read_u64(&shmem->shape);
	for (uint32 s = NextSetInUse(0, shape); s < shmem->nsets; s = NextSetInUse(s + 1, shape))
	{
		header.count += SetKeys(SetAt(s));
		for (WayRef ref = overflow_heads[s]; ref != 0; ref = ForeignEntry(ref)->overflow_next)
			header.count++;
	}
	if (fwrite(&header, sizeof(header), 1, file) != 1)
		goto error;
	for (uint32 s = NextSetInUse(0, shape); s < shmem->nsets; s = NextSetInUse(s + 1, shape))
	{
		ShmemSet   *set = SetAt(s);

		for (int i = 0; i < RL_SHMEM_WAYS; i++)
			if (NativeTag(set->tags[i]) && fwrite(&set->entries[i], sizeof(ShmemEntry), 1, file) != 1)
				goto error;
		for (WayRef ref = overflow_heads[s]; ref != 0; ref = ForeignEntry(ref)->overflow_next)
			if (fwrite(ForeignEntry(ref), sizeof(ShmemEntry), 1, file) != 1)
				goto error;
	}
	if (FreeFile(file) != 0)
	{
		file = NULL;
		goto error;
	}
	(void) durable_rename(tmp, RL_SHMEM_FILE, LOG);
	return;

error:
	ereport(LOG,
			(errcode_for_file_access(),
			 errmsg("could not write ratelimit shmem state file \"%s\": %m", tmp)));
	if (file != NULL)
		FreeFile(file);
	unlink(tmp);
}

static void
LoadState(void)
{
	FILE	   *file = AllocateFile(RL_SHMEM_FILE, PG_BINARY_R);
	ShmemFileHeader header;
	uint64		loaded = 0;
	uint64		dropped = 0;

	if (file == NULL)
	{
		if (errno != ENOENT)
			ereport(LOG,
					(errcode_for_file_access(),
					 errmsg("could not read ratelimit shmem state file \"%s\": %m", RL_SHMEM_FILE)));
		return;
	}
	if (fread(&header, sizeof(header), 1, file) != 1 || header.magic != RL_SHMEM_FILE_MAGIC ||
		header.version != RL_SHMEM_FILE_VERSION || header.entry_size != sizeof(ShmemEntry))
		ereport(LOG, (errmsg("ignoring ratelimit shmem state file \"%s\": not in this version's format",
							 RL_SHMEM_FILE)));
	else
	{
		for (uint64 n = 0; n < header.count; n++)
		{
			ShmemEntry	entry;
			ShmemSet   *set;
			int			way;

			uint32		set_index;
			WayRef		lent;

			if (fread(&entry, sizeof(entry), 1, file) != 1)
				break;
			if (!NativeTag(entry.tag))
				continue;
			entry.overflow_next = 0;
			/* The store grows as it does for new keys (the postmaster is alone). */
			do
			{
				set_index = SetIndexOf(entry.hash_high, pg_atomic_read_u64(&shmem->shape));
				set = SetAt(set_index);
				way = FreeWay(set, entry.tag);
			} while (way < 0 && SplitFullSet(entry.hash_high));
			if (way >= 0)
			{
				set->entries[way] = entry;
				set->tags[way] = entry.tag;
				loaded++;
				if (SetKeys(set) > RL_SHMEM_GROW_AT)
					(void) SplitNextSet();
			}
			else if ((lent = ReserveForeignWay(set_index, GetCurrentTimestamp())) != 0)
			{
				*ForeignEntry(lent) = entry;
				LinkForeign(set_index, lent);
				loaded++;
			}
			else
				dropped++;		/* a smaller ratelimit.shmem_max_keys than before */
		}
		ereport(LOG,
				(errmsg("ratelimit: loaded " UINT64_FORMAT " keys of the shmem store from \"%s\"",
						loaded, RL_SHMEM_FILE),
				 dropped > 0 ? errdetail(UINT64_FORMAT " keys did not fit and were dropped.", dropped) : 0));
	}
	FreeFile(file);
	/* Loaded once: a crash later must not bring this state back. */
	unlink(RL_SHMEM_FILE);
}

static void
ShmemRequest(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(add_size(add_size(add_size(sizeof(ShmemHeader), SetsSize()),
											 EarlyBitsSize()),
									OverflowHeadsSize()));
	RequestNamedLWLockTranche("ratelimit", 1);
}

static void
ShmemStartup(void)
{
	bool		found;
	bool		found_sets;
	void	   *sets;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	shmem = ShmemInitStruct("ratelimit shmem store", sizeof(ShmemHeader), &found);
	sets = ShmemInitStruct("ratelimit shmem store sets", SetsSize(), &found_sets);
	split_early = ShmemInitStruct("ratelimit shmem store early splits", EarlyBitsSize(), &found_sets);
	overflow_heads = ShmemInitStruct("ratelimit shmem store overflow chains", OverflowHeadsSize(), &found_sets);
	shmem_sets = (ShmemSet *) TYPEALIGN(RL_CACHE_LINE, sets);
	grow_lock = &GetNamedLWLockTranche("ratelimit")[0].lock;
	if (!found)
	{
		memset(shmem, 0, sizeof(ShmemHeader));
		StoreShape(&shmem->base, &shmem->max_level);
		shmem->nsets = shmem->base << shmem->max_level;
		pg_atomic_init_u64(&shmem->shape, SHAPE(0, 0));
		pg_atomic_init_u32(&shmem->overflow_cursor, 0);
		pg_atomic_init_u64(&shmem->full_at, 0);
		pg_atomic_init_u64(&shmem->last_full_warning, 0);
		pg_atomic_init_u32(&shmem->zone_slots_warned, 0);
		memset(overflow_heads, 0, OverflowHeadsSize());
		for (uint32 w = 0; w < (shmem->nsets + 63) / 64; w++)
			pg_atomic_init_u64(&split_early[w], 0);
		/* The others are set up when put in use: their pages stay untouched till then. */
		for (uint32 s = 0; s < shmem->base; s++)
			InitSet(NewSetAt(s));
		for (int i = 0; i < RL_SHMEM_ZONE_SLOTS; i++)
		{
			pg_atomic_init_u64(&shmem->zones[i].tag, 0);
			for (int what = 0; what < ZONE_COUNTS; what++)
				pg_atomic_init_u64(&shmem->zones[i].counts[what], 0);
		}
	}
	LWLockRelease(AddinShmemInitLock);

	/* The postmaster loads the saved state once and saves it at shutdown. */
	if (!IsUnderPostmaster)
	{
		if (!found)
			LoadState();
		on_shmem_exit(SaveState, (Datum) 0);
	}
}

void
RlShmemInit(void)
{
	DefineCustomEnumVariable("ratelimit.shmem_full_policy",
							 "What a call on a new key does when the shmem store has no room.",
							 "allow: decide as for a new key without keeping state; "
							 "deny: refuse; error: raise an error.",
							 &rl_shmem_full_policy,
							 RL_SHMEM_FULL_ALLOW,
							 full_policy_options,
							 PGC_SUSET, 0, NULL, NULL, NULL);

	/* A server-start setting can only be defined while preloading. */
	if (!process_shared_preload_libraries_in_progress)
		return;

	DefineCustomIntVariable("ratelimit.shmem_max_keys",
							"Number of keys the shmem store holds.",
							"Needs ratelimit in shared_preload_libraries; any this many keys fit, "
							"each taking about 132 bytes of shared memory, touched as keys arrive.",
							&rl_shmem_max_keys,
							100000, RL_SHMEM_WAYS, 100000000,
							PGC_POSTMASTER, 0, NULL, NULL, NULL);

	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = ShmemRequest;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = ShmemStartup;
}
