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
	text	   *key;			/* hash key: a copy in TopTransactionContext */
	RlStateRow	row;
	RlRowRef	ref;
	const RlStoreOps *store;
	bool		dirty;			/* row is newer than what the store holds */
	SubTransactionId undo_subid;	/* last subtransaction that saved an undo */
} CachedState;

typedef struct UndoRecord
{
	SubTransactionId subid;
	CachedState *entry;
	bool		existed;		/* false: undo by forgetting the entry */
	CachedState saved;
} UndoRecord;

static HTAB *cache = NULL;
static bool cache_in_use = false;	/* entries exist for this transaction */
static UndoRecord *undo = NULL;	/* in TopTransactionContext */
static int	undo_len = 0;
static int	undo_cap = 0;

static uint32
HashKey(const void *key, Size keysize)
{
	const text *k = *(text *const *) key;

	return hash_bytes((const unsigned char *) VARDATA_ANY(k), VARSIZE_ANY_EXHDR(k));
}

static int
MatchKey(const void *key1, const void *key2, Size keysize)
{
	const text *a = *(text *const *) key1;
	const text *b = *(text *const *) key2;
	int			len = VARSIZE_ANY_EXHDR(a);

	if (len != (int) VARSIZE_ANY_EXHDR(b))
		return 1;
	return memcmp(VARDATA_ANY(a), VARDATA_ANY(b), len);
}

static void
EnsureCache(void)
{
	if (cache == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(text *);
		ctl.entrysize = sizeof(CachedState);
		ctl.hash = HashKey;
		ctl.match = MatchKey;
		cache = hash_create("ratelimit transaction state", 64, &ctl,
							HASH_ELEM | HASH_FUNCTION | HASH_COMPARE);
	}
	cache_in_use = true;
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
	if (existed)
		record->saved = *entry;
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

static void
Remember(text *key, const RlStateRow *row, const RlRowRef *ref, const RlStoreOps *store)
{
	SubTransactionId subid = GetCurrentSubTransactionId();
	CachedState *entry;
	bool		found;

	EnsureCache();
	entry = hash_search(cache, &key, HASH_ENTER, &found);
	Assert(!found);
	entry->key = MemoryContextAlloc(TopTransactionContext, VARSIZE_ANY(key));
	memcpy(entry->key, key, VARSIZE_ANY(key));
	entry->row = *row;
	entry->ref = *ref;
	entry->store = store;
	entry->dirty = false;
	entry->undo_subid = subid;
	if (subid != TopSubTransactionId)
		PushUndo(subid, entry, false);
}

void
RlStateUpdate(text *key, RlDecideFn decide, void *arg)
{
	const RlStoreOps *store;
	void	   *handle;
	CachedState *entry = NULL;
	RlStateRow	next;
	int			attempt;

	if (cache_in_use)
		entry = hash_search(cache, &key, HASH_FIND, NULL);
	if (entry != NULL)
	{
		if (decide(&entry->row, &next, arg))
		{
			SaveForRollback(entry);
			entry->row = next;
			entry->dirty = true;
		}
		return;
	}

	store = RlTableStore();
	handle = store->begin();
	for (attempt = 0; attempt < MAX_UPDATE_ATTEMPTS; attempt++)
	{
		RlStateRow	current;
		RlRowRef	ref;

		if (store->fetch(handle, key, &current, &ref))
		{
			if (!decide(&current, &next, arg))
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
			(void) decide(NULL, &next, arg);
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

/* Writes every changed copy back; the row locks guarantee it succeeds. */
static void
FlushCache(void)
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
		if (!entry->store->replace(handle, entry->key, &entry->row, &entry->ref))
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
			*record->entry = record->saved;
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
