/*
 * table_cache.c -- the table store's transaction cache: a backend-local copy
 * of each key's row that this transaction holds locked, written back once
 * before commit.
 *
 * Writing a row version per call makes a hot key quadratic: every lookup
 * walks the chain of versions the transaction already created.  So the
 * first write of a key in a transaction goes to the table (taking the row
 * lock), and later calls change the copy.  The lock makes the copy
 * authoritative: no other transaction can change the row until we commit.
 * Other statements of this transaction can: before one reaches a state
 * table, state_statements.c writes the copies back and has them read again.
 *
 * Savepoints: PostgreSQL rolls back what a subtransaction wrote to the
 * table, and we roll back what it changed in the cache, from an undo stack.
 * Records carry the subtransaction that pushed them; subtransaction ids grow
 * with time, so an abort of S pops exactly the records with id >= S.
 */
#include "postgres.h"

#include "access/xact.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "base/pg_compat.h"
#include "store/table_cache.h"

/* Above this many entries a cache is dropped whole rather than emptied. */
#define CACHE_KEEP_ENTRIES 256

typedef struct UndoRecord
{
	SubTransactionId subid;
	CachedState *entry;
	bool		existed;		/* false: undo by forgetting the entry */
	CachedState saved;
	bytea	   *saved_entries;	/* saved.row.entries' bytes, copied */
} UndoRecord;

static HTAB *cache = NULL;
static bool cache_in_use = false;	/* entries exist for this transaction */
static bool cache_changed = false;	/* a copy changed since the cache was last written back whole */
static UndoRecord *undo = NULL;	/* in TopTransactionContext */
static int	undo_len = 0;
static int	undo_cap = 0;

/* The row's hash (store.c), as the row hints and the insert lock use it. */
static uint32
HashKey(const void *key, Size keysize)
{
	return (uint32) RlStateKeyHash(InvalidOid, (const RlStateKey *) key);
}

static int
MatchKey(const void *key1, const void *key2, Size keysize)
{
	const RlStateKey *a = key1;
	const RlStateKey *b = key2;

	if (a->zone_id != b->zone_id || a->part != b->part || !RlSameText(a->key, b->key))
		return 1;
	if (a->params == NULL || b->params == NULL)
		return a->params != b->params;
	return !RlSameText(a->params, b->params);
}

/* A copy of a text or bytea (NULL stays NULL) in context. */
static void *
CopyVarlena(MemoryContext context, const struct varlena *value)
{
	struct varlena *copy;

	if (value == NULL)
		return NULL;
	copy = MemoryContextAlloc(context, VARSIZE_ANY(value));
	memcpy(copy, value, VARSIZE_ANY(value));
	return copy;
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
		record->saved_entries = CopyVarlena(TopTransactionContext, entry->row.entries);
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

/*
 * Reads the row a statement of this transaction may have changed under our
 * lock.  One that deleted it (DELETE, TRUNCATE) left the key without state,
 * as if this transaction had forgotten it.  Whatever it finds is ours to
 * keep until commit (the version we locked or one this transaction wrote;
 * a key we deleted cannot be created by another until we end): a peek, no
 * lock, so that a read-only transaction's rl_peek can refresh too.
 */
static void
RefreshEntry(CachedState *entry)
{
	void	   *handle = entry->rows->begin();
	RlStateRow	row;
	RlRowRef	ref;
	bool		found = entry->rows->fetch(handle, &entry->key, RL_FETCH_PEEK, &row, &ref);

	SaveForRollback(entry);
	if (found)
	{
		SetRow(entry, &row);
		entry->ref = ref;
	}
	else
	{
		entry->forgotten = true;
		entry->dirty = false;
	}
	entry->stale = false;
	entry->rows->end(handle);
}

/* The cached copy of key, unless there is none or its state was deleted. */
CachedState *
RlCacheFind(const RlStateKey *key)
{
	CachedState *entry;

	if (!cache_in_use)
		return NULL;
	entry = hash_search(cache, key, HASH_FIND, NULL);
	if (entry == NULL)
		return NULL;
	if (entry->stale && !entry->forgotten)
		RefreshEntry(entry);
	return entry->forgotten ? NULL : entry;
}

void
RlCacheRemember(const RlStateKey *key, const RlStateRow *row, const RlRowRef *ref,
		 const RlRowOps *rows)
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
		entry->key.key = CopyVarlena(TopTransactionContext, key->key);
		entry->key.params = CopyVarlena(TopTransactionContext, key->params);
		entry->entries_buf = NULL;
		entry->entries_cap = 0;
		entry->undo_subid = subid;
		if (subid != TopSubTransactionId)
			PushUndo(subid, entry, false);
	}
	SetRow(entry, row);
	entry->ref = *ref;
	entry->rows = rows;
	entry->dirty = false;
	entry->stale = false;
	entry->forgotten = false;
}

void
RlCacheForgetZone(int32 zone_id)
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
	const RlRowOps *open_rows = NULL;
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
		/* Entries of one transaction share a path unless the setting changed. */
		if (entry->rows != open_rows)
		{
			if (open_rows != NULL)
				open_rows->end(handle);
			else
			{
				/* Commit runs outside any portal: SPI needs a snapshot. */
				PushActiveSnapshot(GetTransactionSnapshot());
			}
			open_rows = entry->rows;
			handle = open_rows->begin();
		}
		if (!entry->rows->replace(handle, &entry->key, &entry->row, &entry->ref))
			elog(ERROR, "rate-limit state row vanished while locked");
		entry->dirty = false;
	}
	if (open_rows != NULL)
	{
		open_rows->end(handle);
		PopActiveSnapshot();
	}
}

/* Most transactions change no copy (one call per key): nothing to scan. */
static void
FlushCache(void)
{
	if (!cache_changed)
		return;
	FlushEntries(true, 0, false);
	cache_changed = false;
}

void
RlCacheFlushZone(int32 zone_id)
{
	FlushEntries(false, zone_id, true);
}

void
RlCacheFlushAll(void)
{
	FlushEntries(true, 0, true);
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
	cache_changed = false;
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

void
RlCacheChange(CachedState *entry, const RlStateRow *next)
{
	SaveForRollback(entry);
	SetRow(entry, next);
	entry->dirty = true;
	cache_changed = true;
}

void
RlCacheForget(CachedState *entry, RlStateRow *removed)
{
	*removed = entry->row;
	removed->entries = CopyVarlena(CurrentMemoryContext, entry->row.entries);
	SaveForRollback(entry);
	entry->forgotten = true;
	entry->dirty = false;
}
