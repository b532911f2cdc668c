/*
 * shmem_scan.c -- the shmem store's keys as the monitoring views show them
 * (ratelimit.shmem_keys(), rl_keys): every key of this database, copied
 * set by set under the set's lock.
 */
#include "postgres.h"

#include "miscadmin.h"

#include "store/shmem_layout.h"
#include "store/shmem_store.h"

/* One entry as a key scan shows it. */
static void
VisitEntry(const ShmemEntry *entry, RlShmemKeyVisitor visit, void *arg)
{
	RlShmemKeyInfo info;

	memset(&info, 0, sizeof(info));
	info.zone_id = entry->zone_id;
	if (entry->key_len != RL_SHMEM_KEY_HASHED)
	{
		info.key = entry->key;
		info.key_len = entry->key_len;
	}
	if (entry->limit_kind == RL_SHMEM_KIND_BUCKET)
	{
		info.limit.is_bucket = true;
		info.limit.bucket = entry->limit.bucket;
	}
	else
		info.limit.zone = RlEntryZoneLimit(entry);
	EntryRow(entry, &info.state);
	visit(&info, arg);
}

/*
 * Copies each set's entries under its lock and shows them after it: no
 * allocation (nor a visitor's work) under a spinlock.
 */
void
RlShmemScanKeys(RlShmemKeyVisitor visit, void *arg)
{
	uint64		shape;

	if (rl_shmem == NULL)
		return;					/* not preloaded: no keys */
	/* No split while scanning: a key moved to a later set would show twice. */
	LWLockAcquire(rl_grow_lock, LW_SHARED);
	shape = pg_atomic_read_u64(&rl_shmem->shape);
	for (uint32 s = NextSetInUse(0, shape); s < rl_shmem->nsets; s = NextSetInUse(s + 1, shape))
	{
		ShmemSet   *set = SetAt(s);
		ShmemEntry	copies[RL_SHMEM_WAYS];
		int			count = 0;
		uint32		chain_done = 0; /* entries of the chain already shown */
		bool		chain_left;

		/* The set's own keys first, then its chain, a bufferful at a time. */
		SpinLockAcquire(&set->mutex);
		for (int i = 0; i < RL_SHMEM_WAYS; i++)
			if (NativeTag(set->tags[i]) && set->entries[i].dbid == MyDatabaseId)
				copies[count++] = set->entries[i];
		SpinLockRelease(&set->mutex);
		do
		{
			uint32		position = 0;

			for (int i = 0; i < count; i++)
				VisitEntry(&copies[i], visit, arg);
			count = 0;
			chain_left = false;
			SpinLockAcquire(&set->mutex);
			for (WayRef ref = rl_overflow_heads[s]; ref != 0; ref = ForeignEntry(ref)->overflow_next)
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
	LWLockRelease(rl_grow_lock);
}
