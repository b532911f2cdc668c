/*
 * state_cache.c -- read-modify-write of one key's state, atomic across
 * transactions, O(1) per call when a transaction hits one key many times.
 *
 * Writing a row version per call makes a hot key quadratic: every lookup
 * walks the chain of versions the transaction already created.  So the
 * first write of a key in a transaction goes to the store (taking the row
 * lock), and later calls change a backend-local copy that is written once
 * before commit.  The lock makes the copy authoritative: no other
 * transaction can change the row until we commit.
 *
 * Savepoints: PostgreSQL rolls back what a subtransaction wrote to the
 * table, and we roll back what it changed in the cache, from an undo stack.
 * Records carry the subtransaction that pushed them; subtransaction ids grow
 * with time, so an abort of S pops exactly the records with id >= S.
 */
#include "ratelimit.h"

#include "access/xact.h"
#include "common/hashfn.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "state_cache.h"

/* A store may report a concurrent change only while others keep writing. */
#define MAX_UPDATE_ATTEMPTS 1000

/* Above this many entries a cache is dropped whole rather than emptied. */
#define CACHE_KEEP_ENTRIES 256

typedef struct CachedState
{
	RlStateKey	key;			/* hash key; key.key is a copy in TopTransactionContext */
	RlStateRow	row;			/* row.entries is entries_buf, or NULL */
	bytea	   *entries_buf;	/* in TopTransactionContext, entries_cap bytes */
	Size		entries_cap;
	RlRowRef	ref;
	const RlStoreOps *store;
	bool		dirty;			/* row is newer than what the store holds */
	bool		stale;			/* the store's row is newer (a refill wrote it): re-read */
	bool		forgotten;		/* state deleted by this transaction: not a copy */
	SubTransactionId undo_subid;	/* last subtransaction that saved an undo */
} CachedState;

typedef struct UndoRecord
{
	SubTransactionId subid;
	CachedState *entry;
	bool		existed;		/* false: undo by forgetting the entry */
	CachedState saved;
	bytea	   *saved_entries;	/* saved.row.entries' bytes, copied */
} UndoRecord;

struct RlStateAccess
{
	RlStateKey	key;
	const RlStoreOps *store;
	void	   *handle;			/* NULL until a part is read */
	bool		own_handle;		/* opened by RlReadPart: close after decide */
};

static HTAB *cache = NULL;
static bool cache_in_use = false;	/* entries exist for this transaction */
static UndoRecord *undo = NULL;	/* in TopTransactionContext */
static int	undo_len = 0;
static int	undo_cap = 0;

static uint32
HashKey(const void *key, Size keysize)
{
	const RlStateKey *k = key;
	uint32		hash = hash_bytes((const unsigned char *) VARDATA_ANY(k->key),
								  VARSIZE_ANY_EXHDR(k->key));

	hash = hash_combine(hash, murmurhash32((uint32) k->zone_id));
	return hash_combine(hash, murmurhash32((uint32) k->part));
}

static int
MatchKey(const void *key1, const void *key2, Size keysize)
{
	const RlStateKey *a = key1;
	const RlStateKey *b = key2;
	int			len = VARSIZE_ANY_EXHDR(a->key);

	if (a->zone_id != b->zone_id || a->part != b->part ||
		len != (int) VARSIZE_ANY_EXHDR(b->key))
		return 1;
	return memcmp(VARDATA_ANY(a->key), VARDATA_ANY(b->key), len);
}

static void
EnsureCache(void)
{
	if (cache == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(RlStateKey);
		ctl.entrysize = sizeof(CachedState);
		ctl.hash = HashKey;
		ctl.match = MatchKey;
		cache = hash_create("ratelimit transaction state", 64, &ctl,
							HASH_ELEM | HASH_FUNCTION | HASH_COMPARE);
	}
	cache_in_use = true;
}

static bytea *
CopyBytea(MemoryContext context, const bytea *value)
{
	bytea	   *copy;

	if (value == NULL)
		return NULL;
	copy = MemoryContextAlloc(context, VARSIZE(value));
	memcpy(copy, value, VARSIZE(value));
	return copy;
}

/* Sets the entry's row, copying entries into its own buffer. */
static void
SetRow(CachedState *entry, const RlStateRow *row)
{
	bytea	   *entries = row->entries;

	entry->row = *row;
	if (entries == NULL)
		return;
	if (entry->entries_cap < VARSIZE(entries))
	{
		Size		cap = Max(VARSIZE(entries), 2 * entry->entries_cap);

		entry->entries_buf = entry->entries_buf == NULL
			? MemoryContextAlloc(TopTransactionContext, cap)
			: repalloc(entry->entries_buf, cap);
		entry->entries_cap = cap;
	}
	memcpy(entry->entries_buf, entries, VARSIZE(entries));
	entry->row.entries = entry->entries_buf;
}

static void
PushUndo(SubTransactionId subid, CachedState *entry, bool existed)
{
	UndoRecord *record;

	if (undo_len == undo_cap)
	{
		int			newcap = undo_cap == 0 ? 16 : undo_cap * 2;

		undo = undo == NULL
			? MemoryContextAlloc(TopTransactionContext, newcap * sizeof(UndoRecord))
			: repalloc(undo, newcap * sizeof(UndoRecord));
		undo_cap = newcap;
	}
	record = &undo[undo_len++];
	record->subid = subid;
	record->entry = entry;
	record->existed = existed;
	record->saved_entries = NULL;
	if (existed)
	{
		record->saved = *entry;
		record->saved_entries = CopyBytea(TopTransactionContext, entry->row.entries);
	}
}

/* Before changing entry in the current subtransaction, keep what to restore. */
static void
SaveForRollback(CachedState *entry)
{
	SubTransactionId subid = GetCurrentSubTransactionId();

	/* A top-level abort discards the whole cache: nothing to keep. */
	if (subid == TopSubTransactionId || entry->undo_subid == subid)
		return;
	PushUndo(subid, entry, true);
	entry->undo_subid = subid;
}

/* Reads the row a statement of this transaction changed under our lock. */
static void
RefreshEntry(CachedState *entry)
{
	void	   *handle = entry->store->begin();
	RlStateRow	row;
	RlRowRef	ref;

	if (!entry->store->fetch(handle, &entry->key, RL_FETCH_LOCK, &row, &ref))
		elog(ERROR, "rate-limit state row vanished while locked");
	SaveForRollback(entry);
	SetRow(entry, &row);
	entry->ref = ref;
	entry->stale = false;
	entry->store->end(handle);
}

/* The cached copy of key, unless there is none or its state was deleted. */
static CachedState *
FindCached(const RlStateKey *key)
{
	CachedState *entry;

	if (!cache_in_use)
		return NULL;
	entry = hash_search(cache, key, HASH_FIND, NULL);
	if (entry == NULL || entry->forgotten)
		return NULL;
	if (entry->stale)
		RefreshEntry(entry);
	return entry;
}

static void
Remember(const RlStateKey *key, const RlStateRow *row, const RlRowRef *ref,
		 const RlStoreOps *store)
{
	SubTransactionId subid = GetCurrentSubTransactionId();
	CachedState *entry;
	bool		found;

	EnsureCache();
	entry = hash_search(cache, key, HASH_ENTER, &found);
	if (found)
	{
		/* A key whose state this transaction deleted, now created again. */
		Assert(entry->forgotten);
		SaveForRollback(entry);
	}
	else
	{
		entry->key.key = MemoryContextAlloc(TopTransactionContext, VARSIZE_ANY(key->key));
		memcpy(entry->key.key, key->key, VARSIZE_ANY(key->key));
		entry->entries_buf = NULL;
		entry->entries_cap = 0;
		entry->undo_subid = subid;
		if (subid != TopSubTransactionId)
			PushUndo(subid, entry, false);
	}
	SetRow(entry, row);
	entry->ref = *ref;
	entry->store = store;
	entry->dirty = false;
	entry->stale = false;
	entry->forgotten = false;
}

static void
InitAccess(RlStateAccess *access, const RlStateKey *key, const RlStoreOps *store, void *handle)
{
	access->key = *key;
	access->store = store;
	access->handle = handle;
	access->own_handle = false;
}

static void
CloseAccess(RlStateAccess *access)
{
	if (access->own_handle)
		access->store->end(access->handle);
}

bool
RlReadPart(RlStateAccess *access, int32 part, RlStateRow *row)
{
	RlStateKey	key = access->key;
	RlRowRef	ref;

	if (access->handle == NULL)
	{
		access->store = RlTableStore();
		access->handle = access->store->begin();
		access->own_handle = true;
	}
	key.part = part;
	return access->store->fetch(access->handle, &key, RL_FETCH_PEEK, row, &ref);
}

void
RlStateUpdate(const RlStateKey *key, bool lock_first, RlDecideFn decide, void *arg)
{
	const RlStoreOps *store;
	void	   *handle;
	CachedState *entry;
	RlStateAccess access;
	RlStateRow	next;
	int			attempt;

	entry = FindCached(key);
	if (entry != NULL)
	{
		bool		changed;

		InitAccess(&access, key, NULL, NULL);
		changed = decide(&entry->row, &next, arg, &access);
		CloseAccess(&access);
		if (changed)
		{
			SaveForRollback(entry);
			SetRow(entry, &next);
			entry->dirty = true;
		}
		return;
	}

	store = RlTableStore();
	handle = store->begin();
	InitAccess(&access, key, store, handle);
	for (attempt = 0; attempt < MAX_UPDATE_ATTEMPTS; attempt++)
	{
		RlStateRow	current;
		RlRowRef	ref;

		if (store->fetch(handle, key, lock_first ? RL_FETCH_LOCK : RL_FETCH_UPDATE,
						 &current, &ref))
		{
			if (!decide(&current, &next, arg, &access))
			{
				/* Cache only what we hold locked, or the copy could go stale. */
				if (ref.locked)
					Remember(key, &current, &ref, store);
				store->end(handle);
				return;
			}
			if (!store->replace(handle, key, &next, &ref))
				continue;		/* changed under us: decide again on the new row */
		}
		else
		{
			if (!decide(NULL, &next, arg, &access))
			{
				store->end(handle);
				return;			/* nothing to store for a new key */
			}
			if (!store->insert(handle, key, &next, &ref))
				continue;		/* created concurrently: fetch it */
		}
		Remember(key, &next, &ref, store);
		store->end(handle);
		return;
	}
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("could not update rate-limit state after %d attempts",
					MAX_UPDATE_ATTEMPTS),
			 errhint("The key is being changed concurrently; retry the transaction.")));
}

void
RlStateRead(const RlStateKey *key, RlDecideFn decide, void *arg)
{
	CachedState *entry = FindCached(key);
	RlStateAccess access;
	RlStateRow	next;

	if (entry != NULL)
	{
		InitAccess(&access, key, NULL, NULL);
		(void) decide(&entry->row, &next, arg, &access);
		CloseAccess(&access);
	}
	else
	{
		const RlStoreOps *store = RlTableStore();
		void	   *handle = store->begin();
		RlStateRow	current;
		RlRowRef	ref;
		bool		found = store->fetch(handle, key, RL_FETCH_PEEK, &current, &ref);

		InitAccess(&access, key, store, handle);
		(void) decide(found ? &current : NULL, &next, arg, &access);
		store->end(handle);
	}
}

void
RlInsertPart(const RlStateKey *key, const RlStateRow *row)
{
	const RlStoreOps *store = RlTableStore();
	void	   *handle = store->begin();
	RlRowRef	ref;

	if (!store->insert(handle, key, row, &ref))
	{
		/* A leftover row (hand-edited state): ours to overwrite under the head's lock. */
		RlStateRow	old;

		if (!store->fetch(handle, key, RL_FETCH_UPDATE, &old, &ref) ||
			!store->replace(handle, key, row, &ref))
			elog(ERROR, "could not write rate-limit state part %d", key->part);
	}
	store->end(handle);
}

bool
RlRemovePart(const RlStateKey *key)
{
	const RlStoreOps *store = RlTableStore();
	void	   *handle = store->begin();
	bool		removed = store->remove(handle, key);

	store->end(handle);
	return removed;
}

bool
RlStateRemove(const RlStateKey *key, RlStateRow *removed)
{
	CachedState *entry = FindCached(key);
	const RlStoreOps *store = RlTableStore();
	void	   *handle = store->begin();
	bool		existed;

	if (entry != NULL)
	{
		*removed = entry->row;
		removed->entries = CopyBytea(CurrentMemoryContext, entry->row.entries);
		SaveForRollback(entry);
		entry->forgotten = true;
		entry->dirty = false;
		(void) store->remove(handle, key);
		existed = true;
	}
	else
	{
		RlRowRef	ref;

		existed = store->fetch(handle, key, RL_FETCH_LOCK, removed, &ref);
		if (existed)
			(void) store->remove(handle, key);
	}
	store->end(handle);
	return existed;
}

void
RlStateForgetZone(int32 zone_id)
{
	HASH_SEQ_STATUS status;
	CachedState *entry;

	if (!cache_in_use)
		return;
	hash_seq_init(&status, cache);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		if (entry->key.zone_id != zone_id || entry->forgotten)
			continue;
		SaveForRollback(entry);
		entry->forgotten = true;
		entry->dirty = false;
	}
}

/*
 * Writes the changed copies back (of one zone, or all when all_zones); the
 * row locks guarantee it succeeds.  With mark_stale, the zone's copies are
 * read again before their next use: the caller is about to change the rows.
 */
static void
FlushEntries(bool all_zones, int32 zone_id, bool mark_stale)
{
	HASH_SEQ_STATUS status;
	CachedState *entry;
	const RlStoreOps *open_store = NULL;
	void	   *handle = NULL;

	if (!cache_in_use)
		return;
	hash_seq_init(&status, cache);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		if (entry->forgotten || (!all_zones && entry->key.zone_id != zone_id))
			continue;
		if (mark_stale)
		{
			SaveForRollback(entry);
			entry->stale = true;
		}
		if (!entry->dirty)
			continue;
		/* Entries of one transaction share a store unless the setting changed. */
		if (entry->store != open_store)
		{
			if (open_store != NULL)
				open_store->end(handle);
			else
			{
				/* Commit runs outside any portal: SPI needs a snapshot. */
				PushActiveSnapshot(GetTransactionSnapshot());
			}
			open_store = entry->store;
			handle = open_store->begin();
		}
		if (!entry->store->replace(handle, &entry->key, &entry->row, &entry->ref))
			elog(ERROR, "rate-limit state row vanished while locked");
		entry->dirty = false;
	}
	if (open_store != NULL)
	{
		open_store->end(handle);
		PopActiveSnapshot();
	}
}

static void
FlushCache(void)
{
	FlushEntries(true, 0, false);
}

void
RlStateFlushZone(int32 zone_id)
{
	FlushEntries(false, zone_id, true);
}

static void
ForgetCache(void)
{
	if (cache_in_use)
	{
		if (hash_get_num_entries(cache) > CACHE_KEEP_ENTRIES)
		{
			hash_destroy(cache);
			cache = NULL;
		}
		else
		{
			HASH_SEQ_STATUS status;
			CachedState *entry;

			hash_seq_init(&status, cache);
			while ((entry = hash_seq_search(&status)) != NULL)
				(void) hash_search(cache, &entry->key, HASH_REMOVE, NULL);
		}
	}
	/* Keys and undo records go away with TopTransactionContext. */
	cache_in_use = false;
	undo = NULL;
	undo_len = undo_cap = 0;
}

static void
RollbackSubtransaction(SubTransactionId subid)
{
	while (undo_len > 0 && undo[undo_len - 1].subid >= subid)
	{
		UndoRecord *record = &undo[--undo_len];

		if (record->existed)
		{
			CachedState *entry = record->entry;
			bytea	   *buf = entry->entries_buf;
			Size		cap = entry->entries_cap;

			/* The buffer may have moved since: keep the current one. */
			*entry = record->saved;
			entry->entries_buf = buf;
			entry->entries_cap = cap;
			entry->row.entries = NULL;
			if (record->saved_entries != NULL)
			{
				RlStateRow	row = entry->row;

				row.entries = record->saved_entries;
				SetRow(entry, &row);
			}
		}
		else
			(void) hash_search(cache, &record->entry->key, HASH_REMOVE, NULL);
	}
}

static void
OnXactEvent(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PRE_PREPARE:
			FlushCache();
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PREPARE:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PARALLEL_ABORT:
			ForgetCache();
			break;
		default:
			break;
	}
}

static void
OnSubXactEvent(SubXactEvent event, SubTransactionId mySubid,
			   SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB && cache_in_use)
		RollbackSubtransaction(mySubid);
}

void
RlStateCacheInit(void)
{
	RegisterXactCallback(OnXactEvent, NULL);
	RegisterSubXactCallback(OnSubXactEvent, NULL);
}

bool
RlStateCacheInUse(void)
{
	return cache_in_use;
}
