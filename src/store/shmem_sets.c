/*
 * shmem_sets.c -- room in the shmem store: how many sets, free ways, how the
 * sets in use grow by splitting, and the overflow chains of ways lent to the
 * keys of full sets.  Which key is forgotten when nothing is free is
 * shmem_eviction.c's.  The layout and the reasons are in shmem_layout.h.
 */
#include "postgres.h"

#include "base/settings.h"
#include "store/shmem_layout.h"

int			rl_shmem_max_keys = 100000;
ShmemHeader *rl_shmem = NULL;
ShmemSet   *rl_shmem_sets = NULL;
LWLock	   *rl_grow_lock = NULL;
pg_atomic_uint64 *rl_split_early = NULL;
pg_atomic_uint64 *rl_sets_changed = NULL;
WayRef	   *rl_overflow_heads = NULL;

/*
 * How the store grows: base sets at start, doubled max_level times.  base
 * is at least 16 (when the store is that large), so that rounding the sets
 * of ratelimit.shmem_max_keys up to base << max_level adds at most 1/16.
 */
void
RlStoreShape(uint32 *base, uint32 *max_level)
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

	RlStoreShape(&base, &max_level);
	return base << max_level;
}

/* The sets, with room to align them to a cache line. */
Size
RlSetsSize(void)
{
	return add_size(mul_size(SetCount(), sizeof(ShmemSet)), RL_CACHE_LINE);
}

Size
RlEarlyBitsSize(void)
{
	return mul_size((SetCount() + 63) / 64, sizeof(pg_atomic_uint64));
}

Size
RlOverflowHeadsSize(void)
{
	return mul_size(SetCount(), sizeof(WayRef));
}

/* The entry's state and limit as the algorithms take them. */
RlTokenBucketState
RlEntryBucketState(const ShmemEntry *entry)
{
	RlTokenBucketState state = {entry->tokens, entry->fraction, entry->stamp};

	return state;
}

RlCounterState
RlEntryCounterState(const ShmemEntry *entry)
{
	RlCounterState state = {entry->tokens, entry->fraction, entry->stamp, entry->counter};

	return state;
}

RlZoneLimit
RlEntryZoneLimit(const ShmemEntry *entry)
{
	RlZoneLimit limit = {(RlAlgorithm) entry->limit_kind, entry->limit.zone.rate,
	entry->limit.zone.period_us, entry->limit.zone.capacity};

	return limit;
}

/* A way was given up: a search for a way to lend may find it. */
static void
ForgetStoreFull(void)
{
	if (pg_atomic_read_u64(&rl_shmem->full_at) != 0)
		pg_atomic_write_u64(&rl_shmem->full_at, 0);
}

void
RlFreeEntry(ShmemSet *set, int index)
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
int
RlFreeWay(const ShmemSet *set, uint16 tag)
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

bool
RlStoreFullyGrown(void)
{
	return SHAPE_LEVEL(pg_atomic_read_u64(&rl_shmem->shape)) >= rl_shmem->max_level;
}

/*
 * A way of the set whose own key has recovered (it tells nothing), taken:
 * *evicted says whose, to be counted once the set's lock is released; -1
 * when none has.
 */
static int
EvictIdle(ShmemSet *set, TimestampTz now, RlEvicted *evicted)
{
	for (int i = 0; i < RL_SHMEM_WAYS; i++)
	{
		if (NativeTag(set->tags[i]) && RlEntryDebt(&set->entries[i], now).idle)
		{
			evicted->any = true;
			evicted->dbid = set->entries[i].dbid;
			evicted->zone_id = set->entries[i].zone_id;
			evicted->forgiven = 0;
			return i;
		}
	}
	return -1;
}

/* The set's own keys (not the ways it lends). */
int
RlSetKeys(const ShmemSet *set)
{
	int			keys = 0;

	for (int i = 0; i < RL_SHMEM_WAYS; i++)
		keys += NativeTag(set->tags[i]);
	return keys;
}

void
RlInitSet(ShmemSet *set)
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
	ShmemSet   *to = NewSetAt(index + (rl_shmem->base << level));

	/* Keys overflow only once every set is in use: no split after that. */
	Assert(rl_overflow_heads[index] == 0);
	RlInitSet(to);				/* out of reach until the split is published */
	rl_overflow_heads[index + (rl_shmem->base << level)] = 0;
	SpinLockAcquire(&from->mutex);
	SpinLockAcquire(&to->mutex);
	MarkSetChanged(index);
	MarkSetChanged(index + (rl_shmem->base << level));
	for (int i = 0; i < RL_SHMEM_WAYS; i++)
	{
		int			way;

		if (!NativeTag(from->tags[i]) || (from->entries[i].hash_high & (1U << level)) == 0)
			continue;
		way = RlFreeWay(to, from->tags[i]);	/* to is empty: there is room */
		to->entries[way] = from->entries[i];
		to->tags[way] = from->tags[i];
		RlFreeEntry(from, i);
	}
	publish(index, level);
	SpinLockRelease(&to->mutex);
	SpinLockRelease(&from->mutex);
}

static void
PublishNextSplit(uint32 index, uint32 level)
{
	uint32		width = rl_shmem->base << level;

	pg_atomic_write_u64(&rl_shmem->shape,
						index + 1 == width ? SHAPE(level + 1, 0) : SHAPE(level, index + 1));
}

static void
PublishEarlySplit(uint32 index, uint32 level)
{
	pg_atomic_uint64 *word = &rl_split_early[index / 64];

	/* Only the holder of rl_grow_lock writes the bits. */
	pg_atomic_write_u64(word, pg_atomic_read_u64(word) | (UINT64CONST(1) << (index % 64)));
}

/*
 * Puts one more set in use: the next set in order gives the new one its
 * keys whose hash has the next bit set (a set already split early only
 * leaves the bits for the order).  false when every set is in use.  The
 * caller holds rl_grow_lock exclusively, or is alone (the postmaster).
 */
bool
RlSplitNextSet(void)
{
	uint64		shape = pg_atomic_read_u64(&rl_shmem->shape);
	uint32		level = SHAPE_LEVEL(shape);
	uint32		split = SHAPE_SPLIT(shape);

	if (level >= rl_shmem->max_level)
		return false;
	if (SplitEarly(split))
	{
		/*
		 * Its keys moved already: the order takes it over, then the bit
		 * goes, under its lock: a call that sees the bit gone must also see
		 * the order past it, or it would take this set for its key's.
		 */
		ShmemSet   *set = SetAt(split);
		pg_atomic_uint64 *word = &rl_split_early[split / 64];
		uint32		width = rl_shmem->base << level;

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
			pg_atomic_write_u64(&rl_shmem->shape, SHAPE(level, width));
			pg_atomic_write_u64(word, pg_atomic_read_u64(word) & ~(UINT64CONST(1) << (split % 64)));
			pg_write_barrier();
			pg_atomic_write_u64(&rl_shmem->shape, SHAPE(level + 1, 0));
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
 * in use.  The caller holds rl_grow_lock exclusively, or is alone.
 */
bool
RlSplitFullSet(uint32 hash_high)
{
	uint64		shape = pg_atomic_read_u64(&rl_shmem->shape);
	uint32		index = SetIndexOf(hash_high, shape);
	uint32		level = SHAPE_LEVEL(shape);

	if (level < rl_shmem->max_level && index < (rl_shmem->base << level) &&
		index >= SHAPE_SPLIT(shape) && !SplitEarly(index))
	{
		MoveSplitKeys(index, level, PublishEarlySplit);
		return true;
	}
	return RlSplitNextSet();
}

/*
 * A new key went into a set holding RL_SHMEM_GROW_AT keys: one more set in
 * use, in order, unless another backend is splitting or scanning (it will be
 * done by the next such key).  A new key whose set is full (hash_high)
 * waits for the lock and splits that set.
 */
bool
RlGrowStore(bool full, uint32 hash_high)
{
	bool		grown;

	if (full)
		LWLockAcquire(rl_grow_lock, LW_EXCLUSIVE);
	else if (!LWLockConditionalAcquire(rl_grow_lock, LW_EXCLUSIVE))
		return false;
	grown = full ? RlSplitFullSet(hash_high) : RlSplitNextSet();
	LWLockRelease(rl_grow_lock);
	return grown;
}

/* ---- overflow: ways lent to the keys of full sets ---- */

/*
 * The link (a set's chain head or an entry's overflow_next) that points at
 * the entry of home_index's chain holding key; NULL when none does.  The
 * home set's lock is held.
 */
WayRef *
RlFindInChain(uint32 home_index, const ShmemKey *key)
{
	WayRef	   *link = &rl_overflow_heads[home_index];

	while (*link != 0)
	{
		ShmemEntry *entry = ForeignEntry(*link);

		if (EntryMatches(entry, key))
			return link;
		link = &entry->overflow_next;
	}
	return NULL;
}

/* Gives a lent way back to its host, which may take it from now on. */
void
RlReleaseForeignWay(WayRef ref)
{
	pg_write_barrier();			/* every write to the entry before the host's */
	((volatile uint16 *) rl_shmem_sets[WayRefSet(ref)].tags)[WayRefWay(ref)] = RL_TAG_ORPHAN;
	ForgetStoreFull();
}

/* Takes the entry *link points at out of its chain (the home's lock is held) and lets it go. */
void
RlUnlinkForeign(WayRef *link)
{
	WayRef		ref = *link;
	ShmemEntry *entry = ForeignEntry(ref);

	*link = entry->overflow_next;
	entry->overflow_next = 0;
	RlReleaseForeignWay(ref);
}

/* Puts a reserved way at the head of home_index's chain (the home's lock is held). */
void
RlLinkForeign(uint32 home_index, WayRef ref)
{
	ForeignEntry(ref)->overflow_next = rl_overflow_heads[home_index];
	rl_overflow_heads[home_index] = ref;
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

bool
RlStoreKnownFull(TimestampTz now)
{
	TimestampTz full_at = (TimestampTz) pg_atomic_read_u64(&rl_shmem->full_at);

	return full_at != 0 && now >= full_at && now - full_at < RL_FULL_SEARCH_INTERVAL;
}

/*
 * Reserves a way of a set other than home for a key of home, whose set is
 * full: a free way, else one whose own key has recovered (*evicted says
 * whose).  0 when no set has one: the store holds as many keys as it was
 * sized for, and one of them must be forgotten (shmem_eviction.c).  Only
 * once every set is in use; takes one set's lock at a time.
 */
WayRef
RlReserveForeignWay(uint32 home, TimestampTz now, RlEvicted *evicted)
{
	uint32		nsets = rl_shmem->nsets;
	uint32		start = pg_atomic_fetch_add_u32(&rl_shmem->overflow_cursor, 1) % nsets;

	Assert(RlStoreFullyGrown());
	if (RlStoreKnownFull(now))
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
			if (evict)
				MarkSetChanged(index);	/* it may lose a key of its own */
			way = evict ? EvictIdle(set, now, evicted) : RlFreeWay(set, 1);
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
	pg_atomic_write_u64(&rl_shmem->full_at, (uint64) now);
	return 0;
}
