/*
 * shmem_layout.h -- the shmem store's table in shared memory, shared by
 * shmem_store.c (decisions), shmem_sets.c (room: growth, eviction,
 * overflow) and shmem_file.c (start, shutdown file).  Not for other files.
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
 * a free way of another set (below).  When no set has a free or recovered
 * way, the store is full: a key of the set and its chain is forgotten by
 * fair shares and least harm (shmem_eviction.c), or, if every one the new
 * key may push out would refuse its next call, ratelimit.shmem_full_policy
 * decides.
 *
 * Placement: a key's hash is keyed by a secret the server makes at its
 * first start (base/key_hash.h), so callers cannot choose keys that share
 * a set.
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
 * The table goes to RL_SHMEM_FILE (through a .tmp file and durable_rename)
 * at a clean shutdown, and every ratelimit.shmem_save_interval from the save
 * worker's copies of the sets changed since its last round (shmem_save.c,
 * which rl_sets_changed tells); a start, or the restart after a crash, loads
 * the last file.  With the interval 0 a crash leaves no file: the state
 * starts empty.
 */
#ifndef RL_SHMEM_LAYOUT_H
#define RL_SHMEM_LAYOUT_H

#include "postgres.h"

#include "port/atomics.h"
#include "storage/lwlock.h"
#include "storage/spin.h"
#include "utils/timestamp.h"

#include "base/key_hash.h"
#include "core/rl_core.h"
#include "store/store.h"

/*
 * As many ways as 16-bit tags fit beside the set's lock in its first cache
 * line: 31 where a spinlock is a byte (x86-64), 30 where it is an int
 * (arm64).
 */
#define RL_SHMEM_WAYS ((int) ((RL_CACHE_LINE - sizeof(slock_t)) / sizeof(uint16)))
#define RL_SHMEM_INLINE_KEY 48
#define RL_CACHE_LINE 64			/* x86-64's and most arm64's; PG_CACHE_LINE_SIZE is 128 */


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
	/* the save worker's last save (shmem_save.c), for ratelimit.shmem_save_status() */
	pg_atomic_uint64 saved_at;	/* TimestampTz; 0: none since the server started */
	pg_atomic_uint64 saved_keys;
	pg_atomic_uint64 saved_bytes;
	pg_atomic_uint64 save_micros;	/* copying, writing, syncing and renaming */
	pg_atomic_uint64 saves;		/* since the server started; a round with no change writes none */
	pg_atomic_uint32 worker_interval;	/* ms, as the worker applies it; PG_UINT32_MAX: not running */
} ShmemHeader;


/* ratelimit.shmem_max_keys: what the store is sized for */
extern int	rl_shmem_max_keys;
extern ShmemHeader *rl_shmem;
extern ShmemSet *rl_shmem_sets;	/* cache-line aligned */
extern LWLock *rl_grow_lock;	/* exclusive: a split; shared: a scan of all sets */
/* A bit per set of the current round: split ahead of its turn (it was full). */
extern pg_atomic_uint64 *rl_split_early;
/* A bit per set: changed since the save worker last copied it (shmem_save.c). */
extern pg_atomic_uint64 *rl_sets_changed;
/* Per set: the first way of its overflow chain (WayRef), under the set's lock. */
extern WayRef *rl_overflow_heads;

static inline bool SetInUse(uint32 index, uint64 shape);

#ifdef USE_ASSERT_CHECKING
/*
 * Whether a set is in use, read without the lock of a split under way.  A
 * split clears an early split's bit only after publishing a shape that
 * covers its set, so a shape read after a cleared bit says it is in use.
 */
static inline bool
SetInUseNow(uint32 index)
{
	if (SetInUse(index, pg_atomic_read_u64(&rl_shmem->shape)))
		return true;
	pg_read_barrier();
	return SetInUse(index, pg_atomic_read_u64(&rl_shmem->shape));
}
#endif

static inline ShmemSet *
SetAt(uint32 index)
{
	Assert(index < rl_shmem->nsets);
	Assert(SetInUseNow(index));
	return &rl_shmem_sets[index];
}

/* A set about to be put in use (a split's new half): not in use yet. */
static inline ShmemSet *
NewSetAt(uint32 index)
{
	Assert(index < rl_shmem->nsets);
	return &rl_shmem_sets[index];
}

static inline bool
NativeTag(uint16 tag)
{
	return tag != RL_TAG_FREE && tag != RL_TAG_FOREIGN && tag != RL_TAG_ORPHAN;
}

static inline WayRef
MakeWayRef(uint32 set_index, int way)
{
	return set_index * 32 + (uint32) way + 1;
}

static inline uint32
WayRefSet(WayRef ref)
{
	return (ref - 1) / 32;
}

static inline int
WayRefWay(WayRef ref)
{
	return (int) ((ref - 1) % 32);
}

/* The entry of a way lent to another set; its home's lock covers it. */
static inline ShmemEntry *
ForeignEntry(WayRef ref)
{
	Assert(ref != 0 && WayRefSet(ref) < rl_shmem->nsets);
	return &rl_shmem_sets[WayRefSet(ref)].entries[WayRefWay(ref)];
}

/*
 * The identity of a key in the table: its hash, and what is compared.  An
 * rl_token_bucket bucket is its id and its parameters: an id kept as it is
 * matches only the entry whose limit is the bucket's (match_bucket); a
 * hashed one is the hash of both.
 */
typedef struct ShmemKey
{
	uint32		hash_high;
	uint16		tag;
	Oid			dbid;
	int32		zone_id;
	uint8		key_len;
	char		key[RL_SHMEM_INLINE_KEY];
	bool		match_bucket;
	RlTokenBucketLimit bucket;
} ShmemKey;

static inline uint16
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
static inline int
HomeWay(uint16 tag)
{
	return tag % RL_SHMEM_WAYS;
}

static inline bool
EntryMatches(const ShmemEntry *entry, const ShmemKey *key)
{
	return entry->hash_high == key->hash_high && entry->dbid == key->dbid &&
		entry->zone_id == key->zone_id && entry->key_len == key->key_len &&
		memcmp(entry->key, key->key, key->key_len == RL_SHMEM_KEY_HASHED ? 16 : key->key_len) == 0 &&
		(!key->match_bucket ||
		 (entry->limit_kind == RL_SHMEM_KIND_BUCKET &&
		  entry->limit.bucket.refill_tokens == key->bucket.refill_tokens &&
		  entry->limit.bucket.refill_interval_us == key->bucket.refill_interval_us &&
		  entry->limit.bucket.capacity == key->bucket.capacity));
}

/* The entry of the set that holds key, or -1. */
static inline int
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

static inline bool
SplitEarly(uint32 index)
{
	return (pg_atomic_read_u64(&rl_split_early[index / 64]) >> (index % 64)) & 1;
}


static inline bool
SetInUse(uint32 index, uint64 shape)
{
	uint32		width = rl_shmem->base << SHAPE_LEVEL(shape);

	if (index < width + SHAPE_SPLIT(shape))
		return true;
	return index < 2 * width && SplitEarly(index - width);
}

/*
 * For a scan of every set in use (with splits held off): the first set in
 * use from index on, or rl_shmem->nsets when none is.
 */
static inline uint32
NextSetInUse(uint32 index, uint64 shape)
{
	uint32		limit = Min(rl_shmem->nsets, 2 * (rl_shmem->base << SHAPE_LEVEL(shape)));

	while (index < limit && !SetInUse(index, shape))
		index++;
	return index < limit ? index : rl_shmem->nsets;
}

/*
 * The set of a key whose hash's high half is hash_high, when shape is in
 * use.  Its top 16 bits pick one of the base sets (scaled by a
 * multiplication rather than a division, which costs ten times more); its
 * low 16 bits, level of them, which of the sets that base set has split
 * into.  The hash's low half is the tag.
 */
static inline uint32
SetIndexOf(uint32 hash_high, uint64 shape)
{
	uint32		level = SHAPE_LEVEL(shape);
	uint32		base_set = ((hash_high >> 16) * rl_shmem->base) >> 16;
	uint32		index = base_set + rl_shmem->base * (hash_high & ((1U << level) - 1));

	pg_read_barrier();			/* the bits no older than the shape */
	if (index < SHAPE_SPLIT(shape) || SplitEarly(index))
		index = base_set + rl_shmem->base * (hash_high & ((1U << (level + 1)) - 1));
	return index;
}

/* The set of a key once every set is in use: SetIndexOf of the last shape. */
static inline uint32
FinalSetIndexOf(uint32 hash_high)
{
	uint32		base_set = ((hash_high >> 16) * rl_shmem->base) >> 16;

	return base_set + rl_shmem->base * (hash_high & ((1U << rl_shmem->max_level) - 1));
}

/*
 * Set index is being changed (its lock is held): the save worker copies it
 * again.  Read first: the bit is mostly set already, and a read of a shared
 * line costs less than a write to it.
 */
static inline void
MarkSetChanged(uint32 index)
{
	pg_atomic_uint64 *word = &rl_sets_changed[index / 64];
	uint64		bit = UINT64CONST(1) << (index % 64);

	if ((pg_atomic_read_u64(word) & bit) == 0)
		(void) pg_atomic_fetch_or_u64(word, bit);
}

/*
 * The key's set, locked and marked changed (the caller may change it),
 * starting from index, the set the key was last found to belong to.  Its
 * place is worked out again under the lock: a split that moved the key
 * elsewhere published the shape (or the early bit) that says so before
 * releasing this set, and a later split of this set must wait for the
 * lock.
 */
static inline ShmemSet *
LockKeySet(uint32 hash_high, uint32 *index)
{
	for (;;)
	{
		ShmemSet   *set = SetAt(*index);
		uint32		locked_index;

		SpinLockAcquire(&set->mutex);
		locked_index = SetIndexOf(hash_high, pg_atomic_read_u64(&rl_shmem->shape));
		if (locked_index == *index)
		{
			MarkSetChanged(locked_index);
			return set;
		}
		SpinLockRelease(&set->mutex);
		*index = locked_index;
	}
}

/* ---- shmem_sets.c, which also defines the variables above ---- */

/* How the store grows: base sets at start, doubled max_level times. */
extern void RlStoreShape(uint32 *base, uint32 *max_level);
extern Size RlSetsSize(void);
extern Size RlEarlyBitsSize(void);
extern Size RlOverflowHeadsSize(void);

/* The entry's state and limit as the algorithms take them. */
extern RlTokenBucketState RlEntryBucketState(const ShmemEntry *entry);
extern RlCounterState RlEntryCounterState(const ShmemEntry *entry);
extern RlZoneLimit RlEntryZoneLimit(const ShmemEntry *entry);

extern void RlInitSet(ShmemSet *set);
extern int	RlSetKeys(const ShmemSet *set);
extern void RlFreeEntry(ShmemSet *set, int index);
extern int	RlFreeWay(const ShmemSet *set, uint16 tag);

/* Every set is in use: from now on a key that finds its set full borrows a way, or evicts. */
extern bool RlStoreFullyGrown(void);
extern bool RlSplitNextSet(void);
extern bool RlSplitFullSet(uint32 hash_high);
extern bool RlGrowStore(bool full, uint32 hash_high);

/* A key forgotten to make room: whose, and its debt; counted once no set lock is held. */
typedef struct RlEvicted
{
	bool		any;
	Oid			dbid;
	int32		zone_id;
	int64		forgiven;		/* its missing tokens (RlKeyDebt.missing) */
	bool		keys_replaced;	/* by a key of its zone: the zone's keys stay as they are */
} RlEvicted;

extern WayRef *RlFindInChain(uint32 home_index, const ShmemKey *key);
extern void RlReleaseForeignWay(WayRef ref);
extern void RlUnlinkForeign(WayRef *link);
extern void RlLinkForeign(uint32 home_index, WayRef ref);
extern WayRef RlReserveForeignWay(uint32 home, TimestampTz now, RlEvicted *evicted);

/*
 * Whether a search for a way to lend found none lately (in decision time):
 * the store is full, and a new key must make room where it is.
 */
extern bool RlStoreKnownFull(TimestampTz now);

/* ---- shmem_eviction.c ---- */

/* What forgetting the entry's key would cost at now. */
extern RlKeyDebt RlEntryDebt(const ShmemEntry *entry, TimestampTz now);

/* Room made in a full set for a new key: a way of the set, or an entry of its chain. */
typedef struct RlRoom
{
	int			way;			/* a way of the set, or -1 */
	WayRef	   *link;			/* else the chain's link to the entry */
	RlEvicted	evicted;		/* whose key it held */
} RlRoom;

/*
 * Room in the set at index (locked) and its chain for a new key: a key
 * that has recovered; once store_full, the least harmful key by fair shares
 * (shmem_eviction.c).  False when none may go: nothing recovered and, when
 * store_full, every key the new one may push out would refuse its next
 * call.
 */
extern bool RlLeastHarm(ShmemSet *set, uint32 index, const ShmemKey *key, TimestampTz now,
						bool store_full, RlRoom *room);

/* Counts an eviction: evicted and forgiven for its zone, one key less. */
extern void RlCountEvicted(const RlEvicted *evicted);

/* The entry's state as a stored row (no entries, nothing to refill). */
static inline void
EntryRow(const ShmemEntry *entry, RlStateRow *row)
{
	row->tokens = entry->tokens;
	row->fraction = entry->fraction;
	row->stamp = entry->stamp;
	row->counter = entry->counter;
	row->entries = NULL;
	row->refill_pending = false;
}

#endif							/* RL_SHMEM_LAYOUT_H */
