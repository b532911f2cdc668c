/*
 * shmem_leases.c -- concurrency zones in shared memory (shmem_leases.h).
 *
 * A key's leases do not fit the shmem store's fixed-size entries, so these
 * keys live in a hash table of their own: one entry per key with room for
 * RL_SHMEM_LEASE_SLOTS leases, partitioned by the key's hash under
 * LWLocks.  The decide callbacks (decision/algorithms.c) run under the
 * partition's lock on the row this store makes of the entry; they may
 * allocate and raise errors, which release the lock with the transaction.
 * A key whose leases are all gone leaves the table, so the table holds
 * only keys with leases held.
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/timestamp.h"

#include "base/args.h"
#include "base/counters.h"
#include "base/key_hash.h"
#include "base/settings.h"
#include "store/shmem_leases.h"

#define LEASE_PARTITIONS 16

typedef struct LeaseTag
{
	Oid			dbid;
	int32		zone_id;
	uint64		digest[2];		/* of the key's bytes */
} LeaseTag;

typedef struct LeaseEntry
{
	LeaseTag	tag;			/* hash key: first */
	int64		stamp;			/* the key's latest decision time */
	int32		count;
	int32		key_len;
	RlLease		leases[RL_SHMEM_LEASE_SLOTS];
	char		key[RL_MAX_KEY_BYTES];
} LeaseEntry;

/*
 * The earliest time at which a key of the table will have lapsed, as the
 * last sweep found it and every store since lowered it: a full table is
 * not swept again before then.  A sweep locks every partition and reads
 * every key, and a table full of live leases would otherwise be swept by
 * each new key's call.
 */
typedef struct LeaseSweep
{
	pg_atomic_uint64 next_lapse;	/* TimestampTz */
	/*
	 * Keys in the table.  A partitioned shared hash table holds a few more
	 * than it is sized for (its free lists are per partition): the setting
	 * is held to what it says here.
	 */
	pg_atomic_uint32 keys;
} LeaseSweep;

static int	shmem_max_lease_keys = 1000;
static HTAB *lease_keys = NULL;
static LeaseSweep *lease_sweep = NULL;
static LWLockPadded *lease_locks = NULL;
static bool release_at_exit = false;

static void LockAllPartitions(LWLockMode mode);
static void UnlockAllPartitions(void);

void
RlShmemLeasesInit(void)
{
	DefineCustomIntVariable("ratelimit.shmem_max_lease_keys",
							"Number of keys of concurrency zones the shmem store holds at once.",
							"Needs ratelimit in shared_preload_libraries; a key takes room only "
							"while it holds leases, about 2.6 kB.",
							&shmem_max_lease_keys,
							1000, 16, 10000000,
							PGC_POSTMASTER, 0, NULL, NULL, NULL);
}

void
RlShmemLeasesRequest(void)
{
	RequestAddinShmemSpace(add_size(hash_estimate_size(shmem_max_lease_keys, sizeof(LeaseEntry)),
									sizeof(LeaseSweep)));
	RequestNamedLWLockTranche("ratelimit leases", LEASE_PARTITIONS);
}

void
RlShmemLeasesStartup(void)
{
	HASHCTL		info;
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	lease_sweep = ShmemInitStruct("ratelimit shmem lease sweep", sizeof(LeaseSweep), &found);
	if (!found)
	{
		pg_atomic_init_u64(&lease_sweep->next_lapse, 0);
		pg_atomic_init_u32(&lease_sweep->keys, 0);
	}
	LWLockRelease(AddinShmemInitLock);
	info.keysize = sizeof(LeaseTag);
	info.entrysize = sizeof(LeaseEntry);
	info.num_partitions = LEASE_PARTITIONS;
	lease_keys = ShmemInitHash("ratelimit shmem leases", shmem_max_lease_keys,
							   shmem_max_lease_keys, &info,
							   HASH_ELEM | HASH_BLOBS | HASH_PARTITION | HASH_FIXED_SIZE);
	lease_locks = GetNamedLWLockTranche("ratelimit leases");
}

bool
RlLeaseHolderAlive(int32 holder_pid, int32 holder_proc)
{
	/*
	 * Read without ProcArrayLock: a slot's pid changes only when its
	 * session ends or another starts in it, and either way the lease's
	 * session is gone.
	 */
	if (holder_proc < 0 || holder_proc >= MaxBackends)
		return false;
	return GetPGProcByNumber(holder_proc)->pid == holder_pid;
}

/* Whether none of the entry's leases holds a slot at now any more. */
static bool
EntryLapsed(const LeaseEntry *entry, TimestampTz now)
{
	for (int32 i = 0; i < entry->count; i++)
	{
		const RlLease *lease = &entry->leases[i];

		if (lease->expires_us > now &&
			(lease->holder_pid == 0 || RlLeaseHolderAlive(lease->holder_pid, lease->holder_proc)))
			return false;
	}
	return true;
}

/* Removes a key found by a scan of the table (every partition locked). */
static void
RemoveKey(const LeaseTag *tag)
{
	hash_search(lease_keys, tag, HASH_REMOVE, NULL);
	pg_atomic_fetch_sub_u32(&lease_sweep->keys, 1);
}

/* When the last of the entry's leases lapses by its time (its holder may go sooner). */
static TimestampTz
EntryLapsesAt(const LeaseEntry *entry)
{
	TimestampTz last = 0;

	for (int32 i = 0; i < entry->count; i++)
		last = Max(last, entry->leases[i].expires_us);
	return last;
}

/* A key stored leases that lapse at at: no sweep may wait past it. */
static void
LowerNextLapse(TimestampTz at)
{
	uint64		seen = pg_atomic_read_u64(&lease_sweep->next_lapse);

	while ((TimestampTz) seen > at &&
		   !pg_atomic_compare_exchange_u64(&lease_sweep->next_lapse, &seen, (uint64) at))
		;
}

/*
 * Makes room: a key whose leases have all lapsed (or whose holders are
 * gone) decides as a key never seen, and nobody called it since to drop
 * them.  Returns how many keys went; none without a sweep before the
 * first key can have lapsed.
 */
static int
RemoveLapsedKeys(TimestampTz now)
{
	HASH_SEQ_STATUS scan;
	LeaseEntry *entry;
	int			removed = 0;
	TimestampTz next_lapse = PG_INT64_MAX;

	if (now < (TimestampTz) pg_atomic_read_u64(&lease_sweep->next_lapse))
		return 0;
	LockAllPartitions(LW_EXCLUSIVE);
	hash_seq_init(&scan, lease_keys);
	while ((entry = hash_seq_search(&scan)) != NULL)
	{
		if (EntryLapsed(entry, now))
		{
			RemoveKey(&entry->tag);
			removed++;
		}
		else
			next_lapse = Min(next_lapse, EntryLapsesAt(entry));
	}
	/* Under every partition's lock: no store lowers it meanwhile. */
	pg_atomic_write_u64(&lease_sweep->next_lapse, (uint64) next_lapse);
	UnlockAllPartitions();
	return removed;
}

static void
RequireLeaseTable(void)
{
	if (lease_keys == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the shmem store needs ratelimit in shared_preload_libraries"),
				 errhint("Add ratelimit to shared_preload_libraries and restart, "
						 "or use store => 'table'.")));
}

static LeaseTag
TagOf(const RlStateKey *key)
{
	LeaseTag	tag;
	const unsigned char *bytes = (const unsigned char *) VARDATA_ANY(key->key);
	Size		len = VARSIZE_ANY_EXHDR(key->key);

	memset(&tag, 0, sizeof(tag));
	tag.dbid = MyDatabaseId;
	tag.zone_id = key->zone_id;
	/* Keyed by the server's secret: chosen keys cannot crowd one bucket of the table. */
	RlKeyDigest((const char *) bytes, len, NULL, 0, tag.digest);
	return tag;
}

static LWLock *
PartitionLock(uint32 hashcode)
{
	return &lease_locks[hashcode % LEASE_PARTITIONS].lock;
}

/* Where a key's entry is: its tag, hash and partition lock. */
typedef struct KeyPlace
{
	LeaseTag	tag;
	uint32		hashcode;
	LWLock	   *lock;
} KeyPlace;

/* Locks the key's partition in mode and finds its entry (NULL: none). */
static LeaseEntry *
LockAndFind(const RlStateKey *key, LWLockMode mode, KeyPlace *place)
{
	place->tag = TagOf(key);
	place->hashcode = get_hash_value(lease_keys, &place->tag);
	place->lock = PartitionLock(place->hashcode);
	LWLockAcquire(place->lock, mode);
	return hash_search_with_hash_value(lease_keys, &place->tag, place->hashcode, HASH_FIND, NULL);
}

/*
 * Adds the key's entry (its partition locked exclusively), or NULL when the
 * table holds ratelimit.shmem_max_lease_keys keys already.
 */
static LeaseEntry *
EnterKey(const KeyPlace *place)
{
	LeaseEntry *entry = NULL;
	bool		found;

	if (pg_atomic_fetch_add_u32(&lease_sweep->keys, 1) < (uint32) shmem_max_lease_keys)
		entry = hash_search_with_hash_value(lease_keys, &place->tag, place->hashcode, HASH_ENTER_NULL, &found);
	if (entry == NULL)
		pg_atomic_fetch_sub_u32(&lease_sweep->keys, 1);
	return entry;
}

static void
RemoveEntry(const KeyPlace *place)
{
	hash_search_with_hash_value(lease_keys, &place->tag, place->hashcode, HASH_REMOVE, NULL);
	pg_atomic_fetch_sub_u32(&lease_sweep->keys, 1);
}

/* The entry as a row: palloc'd leases, as the table store would read them. */
static void
RowOf(const LeaseEntry *entry, RlStateRow *row)
{
	memset(row, 0, sizeof(*row));
	row->tokens = entry->count;
	row->stamp = entry->stamp;
	if (entry->count > 0)
	{
		bytea	   *bytes = palloc(VARHDRSZ + (Size) entry->count * RL_LEASE_BYTES);

		SET_VARSIZE(bytes, VARHDRSZ + rl_leases_encode(entry->leases, entry->count,
													   (uint8_t *) VARDATA(bytes)));
		row->entries = bytes;
	}
}

static int32
LeasesOfRow(const RlStateRow *row, RlLease *leases)
{
	int32		count = 0;

	if (row->entries != NULL &&
		!rl_leases_decode((const uint8_t *) VARDATA_ANY(row->entries),
						  VARSIZE_ANY_EXHDR(row->entries), leases, RL_SHMEM_LEASE_SLOTS, &count))
		elog(ERROR, "a concurrency key holds more leases than the shmem store keeps");
	return count;
}

static RlStoreOutcome
LeaseUpdate(RlStoreCall *call, RlDecideFn decide, void *arg)
{
	KeyPlace	place;
	LeaseEntry *entry;
	RlStateRow	prior;
	RlStateRow	next;
	RlLease		leases[RL_SHMEM_LEASE_SLOTS];
	int32		count;
	bool		swept = false;

	RequireLeaseTable();
retry:
	entry = LockAndFind(&call->key, LW_EXCLUSIVE, &place);
	if (entry != NULL)
		RowOf(entry, &prior);
	if (!decide(entry != NULL ? &prior : NULL, &next, arg, NULL))
	{
		LWLockRelease(place.lock);
		return RL_STORE_DECIDED;
	}
	count = LeasesOfRow(&next, leases);
	if (count == 0)
	{
		/* Nothing held: the key is as good as new. */
		if (entry != NULL)
			RemoveEntry(&place);
		LWLockRelease(place.lock);
		return RL_STORE_DECIDED;
	}
	if (entry == NULL)
	{
		entry = EnterKey(&place);
		if (entry == NULL)
		{
			LWLockRelease(place.lock);
			/* Decided again after the sweep: the key's row may have changed meanwhile. */
			if (!swept && RemoveLapsedKeys(call->now) > 0)
			{
				swept = true;
				goto retry;
			}
			RlCount(MyDatabaseId, call->key.zone_id, RL_COUNT_FULL);
			return RL_STORE_NO_ROOM;
		}
		entry->key_len = VARSIZE_ANY_EXHDR(call->key.key);
		memcpy(entry->key, VARDATA_ANY(call->key.key), entry->key_len);
	}
	memcpy(entry->leases, leases, sizeof(RlLease) * count);
	entry->count = count;
	entry->stamp = next.stamp;
	LowerNextLapse(EntryLapsesAt(entry));
	LWLockRelease(place.lock);
	return RL_STORE_DECIDED;
}

static void
LeaseRead(RlStoreCall *call, RlDecideFn decide, void *arg)
{
	KeyPlace	place;
	LeaseEntry *entry;
	RlStateRow	prior;
	RlStateRow	next;

	if (lease_keys == NULL)
	{
		(void) decide(NULL, &next, arg, NULL);
		return;
	}
	entry = LockAndFind(&call->key, LW_SHARED, &place);
	if (entry != NULL)
		RowOf(entry, &prior);
	(void) decide(entry != NULL ? &prior : NULL, &next, arg, NULL);
	LWLockRelease(place.lock);
}

static bool
LeaseRemove(const RlStateKey *key, RlStateRow *removed)
{
	KeyPlace	place;
	LeaseEntry *entry;

	if (lease_keys == NULL)
		return false;
	entry = LockAndFind(key, LW_EXCLUSIVE, &place);
	if (entry != NULL)
	{
		RowOf(entry, removed);
		RemoveEntry(&place);
	}
	LWLockRelease(place.lock);
	return entry != NULL;
}

static bool
LeaseUpdateTogether(RlStoreCall **calls, void **args, int n, RlDecideFn decide,
					RlDecideFn hold, RlAdmitFn admit, void *admit_arg, RlStoreOutcome *outcomes)
{
	/* decide_several_zones.c refuses concurrency zones in a call on several zones. */
	elog(ERROR, "leases are not decided together with other zones");
	pg_unreachable();
}

static void
LockAllPartitions(LWLockMode mode)
{
	for (int i = 0; i < LEASE_PARTITIONS; i++)
		LWLockAcquire(&lease_locks[i].lock, mode);
}

static void
UnlockAllPartitions(void)
{
	for (int i = LEASE_PARTITIONS - 1; i >= 0; i--)
		LWLockRelease(&lease_locks[i].lock);
}

/* Removes what matches: a zone's keys, or this session's leases. */
static void
RemoveWhere(int32 zone_id, int32 holder_pid)
{
	HASH_SEQ_STATUS scan;
	LeaseEntry *entry;

	if (lease_keys == NULL)
		return;
	LockAllPartitions(LW_EXCLUSIVE);
	hash_seq_init(&scan, lease_keys);
	while ((entry = hash_seq_search(&scan)) != NULL)
	{
		if (entry->tag.dbid != MyDatabaseId && holder_pid == 0)
			continue;
		if (holder_pid == 0)
		{
			if (entry->tag.zone_id == zone_id)
				RemoveKey(&entry->tag);
			continue;
		}
		for (int32 i = entry->count - 1; i >= 0; i--)
			if (entry->leases[i].holder_pid == holder_pid)
			{
				memmove(&entry->leases[i], &entry->leases[i + 1],
						sizeof(RlLease) * (entry->count - i - 1));
				entry->count--;
			}
		if (entry->count == 0)
			RemoveKey(&entry->tag);
	}
	UnlockAllPartitions();
}

static void
LeaseForgetZone(int32 zone_id)
{
	RemoveWhere(zone_id, 0);
}

static void
ReleaseSessionLeases(int code, Datum arg)
{
	RemoveWhere(0, MyProcPid);
}

void
RlShmemLeasesHeldBySession(void)
{
	if (release_at_exit)
		return;
	before_shmem_exit(ReleaseSessionLeases, (Datum) 0);
	release_at_exit = true;
}

/* A key's slots are counted under the zone's limit at each call: nothing to change. */
static void
LeaseRelimitZone(int32 zone_id, const RlZoneLimit *limit)
{
}

/* At most one warning every 10 seconds per session; rl_counters counts them all. */
static void
WarnNoRoom(const char *what)
{
	static TimestampTz last_warning = 0;
	TimestampTz now = GetCurrentTimestamp();

	if (now - last_warning < 10 * USECS_PER_SEC)
		return;
	last_warning = now;
	ereport(WARNING,
			(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
			 errmsg("the ratelimit shmem store has no room for the leases of a new key of %s: the lease was refused",
					RlMessageText(what)),
			 errdetail("ratelimit.shmem_max_lease_keys = %d keys hold leases that have not lapsed.  "
					   "A lease is refused rather than granted unstored, which would let more in than the zone's slots "
					   "(whatever ratelimit.shmem_full_policy says).  rl_counters counts these calls per zone in \"full\"; "
					   "this warning is repeated at most every 10 seconds.", shmem_max_lease_keys),
			 errhint("Raise ratelimit.shmem_max_lease_keys (a restart is needed), or keep the zone's leases "
					 "in the table store (store => 'table').")));
}

/*
 * A concurrency zone fails closed: a lease granted without being stored
 * would hold no slot, and a concurrency limit exists to keep in-flight work
 * within its slots.  So the call is refused whatever shmem_full_policy
 * says, but for error, which raises.
 */
static void
LeaseNoRoom(RlDecision *decision, const char *what)
{
	if (rl_shmem_full_policy == RL_SHMEM_FULL_ERROR)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("the ratelimit shmem store has no room for the leases of a new key of %s",
						RlMessageText(what)),
				 errdetail("ratelimit.shmem_max_lease_keys = %d keys hold leases.",
						   shmem_max_lease_keys),
				 errhint("Raise ratelimit.shmem_max_lease_keys (a restart is needed), or set "
						 "ratelimit.shmem_full_policy to deny.")));
	decision->allowed = false;
	decision->remaining = 0;
	decision->retry_after_us = USECS_PER_SEC;
	WarnNoRoom(what);
}

void
RlShmemScanLeases(RlShmemLeaseVisitor visit, void *arg)
{
	HASH_SEQ_STATUS scan;
	LeaseEntry *entry;
	List	   *copies = NIL;
	ListCell   *cell;

	if (lease_keys == NULL)
		return;
	/* Copied under the locks, visited without them: a visitor may do anything. */
	LockAllPartitions(LW_SHARED);
	hash_seq_init(&scan, lease_keys);
	while ((entry = hash_seq_search(&scan)) != NULL)
	{
		if (entry->tag.dbid != MyDatabaseId)
			continue;
		for (int32 i = 0; i < entry->count; i++)
		{
			RlShmemLeaseInfo *info = palloc(sizeof(RlShmemLeaseInfo));

			info->zone_id = entry->tag.zone_id;
			info->key = cstring_to_text_with_len(entry->key, entry->key_len);
			info->lease = entry->leases[i];
			copies = lappend(copies, info);
		}
	}
	UnlockAllPartitions();
	foreach(cell, copies)
		visit((const RlShmemLeaseInfo *) lfirst(cell), arg);
}

const RlStore RlShmemLeaseStore = {
	.name = "RlShmemLeaseStore",
	.writes_tables = false,
	.locate = NULL,
	.update = LeaseUpdate,
	.update_together = LeaseUpdateTogether,
	.read = LeaseRead,
	.remove = LeaseRemove,
	.write_part = NULL,
	.remove_part = NULL,
	.forget_zone = LeaseForgetZone,
	.relimit_zone = LeaseRelimitZone,
	.flush_zone = NULL,
	.no_room = LeaseNoRoom,
};
