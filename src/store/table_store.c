/*
 * table_store.c -- the table store: read-modify-write of one key's row of
 * ratelimit.state, atomic across transactions.  The first call on a key in
 * a transaction reads and writes the table (taking the row lock); later
 * calls change the transaction's copy (table_cache.c).  Both paths to the
 * table (row_direct.c, row_spi.c) run under that cache; each is one RlStore.
 */
#include "postgres.h"

#include "decision/zone.h"
#include "store/row_direct.h"
#include "store/row_spi.h"
#include "store/table_cache.h"
#include "store/table_store.h"

/* A path may report a concurrent change only while others keep writing. */
#define MAX_UPDATE_ATTEMPTS 1000

/* What decide reads parts through: the key's path to the table. */
typedef struct TableAccess
{
	RlStateAccess access;		/* first: decide sees only this */
	RlStateKey	key;
	const RlRowOps *rows;
	void	   *handle;			/* NULL until a part is read */
	bool		own_handle;		/* opened by ReadPart: close after decide */
} TableAccess;

static bool ReadPart(RlStateAccess *access, int32 part, RlStateRow *row);

static void
InitAccess(TableAccess *access, const RlStateKey *key, const RlRowOps *rows, void *handle)
{
	access->access.read_part = ReadPart;
	access->key = *key;
	access->rows = rows;
	access->handle = handle;
	access->own_handle = false;
}

static void
CloseAccess(TableAccess *access)
{
	if (access->own_handle)
		access->rows->end(access->handle);
}

static bool
ReadPart(RlStateAccess *access, int32 part, RlStateRow *row)
{
	TableAccess *table = (TableAccess *) access;
	RlStateKey	key = table->key;
	RlRowRef	ref;

	if (table->handle == NULL)
	{
		table->handle = table->rows->begin();
		table->own_handle = true;
	}
	key.part = part;
	return table->rows->fetch(table->handle, &key, RL_FETCH_PEEK, row, &ref);
}

/*
 * rl_zone_set(..., durable => ...) moves a zone's keys to the other state
 * table under a lock that makes calls wait.  A call that looked its zone up
 * before the move and got the lock after it would decide on the table the
 * keys just left, and its decision would be lost: it is refused instead,
 * having taken nothing (the fetch that waited changed nothing).
 */
static void
RequireZoneStillInTable(const RlStoreCall *call)
{
	if (call->zone_generation == 0 || call->zone_generation == RlZoneGeneration())
		return;
	if (RlZoneDurableNow(call->key.zone_id, call->key.durable) != call->key.durable)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("the rate-limit zone's keys moved to another table while this call waited"),
				 errdetail("rl_zone_set changed the zone's durable option; this call took nothing."),
				 errhint("Retry the call.")));
}

static RlStoreOutcome
TableUpdate(const RlRowOps *rows, RlStoreCall *call, RlDecideFn decide, void *arg)
{
	const RlStateKey *key = &call->key;
	void	   *handle;
	CachedState *entry;
	TableAccess access;
	RlStateRow	next;
	int			attempt;

	entry = RlCacheFind(key);
	if (entry != NULL)
	{
		bool		changed;

		InitAccess(&access, key, rows, NULL);
		changed = decide(&entry->row, &next, arg, &access.access);
		CloseAccess(&access);
		if (changed)
			RlCacheChange(entry, &next);
		return RL_STORE_DECIDED;
	}

	handle = rows->begin();
	InitAccess(&access, key, rows, handle);
	for (attempt = 0; attempt < MAX_UPDATE_ATTEMPTS; attempt++)
	{
		RlStateRow	current;
		RlRowRef	ref;
		bool		found = rows->fetch(handle, key,
										call->lock_first ? RL_FETCH_LOCK : RL_FETCH_UPDATE,
										&current, &ref);

		RequireZoneStillInTable(call);
		if (found)
		{
			if (!decide(&current, &next, arg, &access.access))
			{
				/* Cache only what we hold locked, or the copy could go stale. */
				if (ref.locked)
					RlCacheRemember(key, &current, &ref, rows);
				rows->end(handle);
				return RL_STORE_DECIDED;
			}
			if (!rows->replace(handle, key, &next, &ref))
				continue;		/* changed under us: decide again on the new row */
		}
		else
		{
			if (!decide(NULL, &next, arg, &access.access))
			{
				rows->end(handle);
				return RL_STORE_DECIDED;	/* nothing to store for a new key */
			}
			if (!rows->insert(handle, key, &next, &ref))
				continue;		/* created concurrently: fetch it */
		}
		RlCacheRemember(key, &next, &ref, rows);
		rows->end(handle);
		return RL_STORE_DECIDED;
	}
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("could not update rate-limit state after %d attempts",
					MAX_UPDATE_ATTEMPTS),
			 errhint("The key is being changed concurrently; retry the transaction.")));
	pg_unreachable();
}

/*
 * Holding a key takes its row lock (a key without state: the lock of the
 * row hold inserts) and puts the row in the transaction's cache; the
 * decisions then run on the cached rows, which no other transaction can
 * change until this one ends.
 */
static bool
TableUpdateTogether(const RlRowOps *rows, RlStoreCall **calls, void **args, int n,
					RlDecideFn decide, RlDecideFn hold, RlAdmitFn admit, void *admit_arg,
					RlStoreOutcome *outcomes)
{
	CachedState **entries = palloc(sizeof(CachedState *) * n);
	RlStateRow *next = palloc(sizeof(RlStateRow) * n);
	bool	   *changed = palloc(sizeof(bool) * n);

	for (int i = 0; i < n; i++)
	{
		bool		lock_first = calls[i]->lock_first;

		outcomes[i] = RL_STORE_DECIDED;
		calls[i]->lock_first = true;
		(void) TableUpdate(rows, calls[i], hold, args[i]);
		calls[i]->lock_first = lock_first;
		entries[i] = RlCacheFind(&calls[i]->key);
		if (entries[i] == NULL)
			elog(ERROR, "rate-limit state of a key was not held");
	}
	for (int i = 0; i < n; i++)
	{
		TableAccess access;

		InitAccess(&access, &calls[i]->key, rows, NULL);
		changed[i] = decide(&entries[i]->row, &next[i], args[i], &access.access);
		CloseAccess(&access);
	}
	if (!admit(admit_arg))
		return false;
	for (int i = 0; i < n; i++)
		if (changed[i])
			RlCacheChange(entries[i], &next[i]);
	return true;
}

static void
TableRead(const RlRowOps *rows, RlStoreCall *call, RlDecideFn decide, void *arg)
{
	CachedState *entry = RlCacheFind(&call->key);
	TableAccess access;
	RlStateRow	next;

	if (entry != NULL)
	{
		InitAccess(&access, &call->key, rows, NULL);
		(void) decide(&entry->row, &next, arg, &access.access);
		CloseAccess(&access);
	}
	else
	{
		void	   *handle = rows->begin();
		RlStateRow	current;
		RlRowRef	ref;
		bool		found = rows->fetch(handle, &call->key, RL_FETCH_PEEK, &current, &ref);

		InitAccess(&access, &call->key, rows, handle);
		(void) decide(found ? &current : NULL, &next, arg, &access.access);
		rows->end(handle);
	}
}

static void
TableWritePart(const RlRowOps *rows, const RlStateKey *key, const RlStateRow *row)
{
	void	   *handle = rows->begin();
	RlRowRef	ref;

	if (!rows->insert(handle, key, row, &ref))
	{
		/* A leftover row (hand-edited state): ours to overwrite under the head's lock. */
		RlStateRow	old;

		if (!rows->fetch(handle, key, RL_FETCH_UPDATE, &old, &ref) ||
			!rows->replace(handle, key, row, &ref))
			elog(ERROR, "could not write rate-limit state part %d", key->part);
	}
	rows->end(handle);
}

static bool
TableRemovePart(const RlRowOps *rows, const RlStateKey *key)
{
	void	   *handle = rows->begin();
	bool		removed = rows->remove(handle, key);

	rows->end(handle);
	return removed;
}

static bool
TableRemove(const RlRowOps *rows, const RlStateKey *key, RlStateRow *removed)
{
	CachedState *entry = RlCacheFind(key);
	void	   *handle = rows->begin();
	bool		existed;

	if (entry != NULL)
	{
		RlCacheForget(entry, removed);
		(void) rows->remove(handle, key);
		existed = true;
	}
	else
	{
		RlRowRef	ref;

		existed = rows->fetch(handle, key, RL_FETCH_LOCK, removed, &ref);
		if (existed)
			(void) rows->remove(handle, key);
	}
	rows->end(handle);
	return existed;
}

/* The table store needs no new limit: rl_gc reads the zone's current one. */
static void
TableRelimitZone(int32 zone_id, const RlZoneLimit *limit)
{
}

/* One RlStore per path to the table: the same cache over other row operations. */
#define TABLE_STORE(rows, store_name, locks_to_decide) \
static RlStoreOutcome \
rows##Update(RlStoreCall *call, RlDecideFn decide, void *arg) \
{ \
	return TableUpdate(&rows, call, decide, arg); \
} \
static bool \
rows##UpdateTogether(RlStoreCall **calls, void **args, int n, RlDecideFn decide, \
					 RlDecideFn hold, RlAdmitFn admit, void *admit_arg, \
					 RlStoreOutcome *outcomes) \
{ \
	return TableUpdateTogether(&rows, calls, args, n, decide, hold, admit, admit_arg, \
							   outcomes); \
} \
static void \
rows##Read(RlStoreCall *call, RlDecideFn decide, void *arg) \
{ \
	TableRead(&rows, call, decide, arg); \
} \
static bool \
rows##Remove(const RlStateKey *key, RlStateRow *removed) \
{ \
	return TableRemove(&rows, key, removed); \
} \
static void \
rows##WritePart(const RlStateKey *key, const RlStateRow *row) \
{ \
	TableWritePart(&rows, key, row); \
} \
static bool \
rows##RemovePart(const RlStateKey *key) \
{ \
	return TableRemovePart(&rows, key); \
} \
const RlStore store_name = { \
	.name = #store_name, \
	.writes_tables = true, \
	.refusal_may_lock = locks_to_decide, \
	.locate = NULL, \
	.update = rows##Update, \
	.update_together = rows##UpdateTogether, \
	.read = rows##Read, \
	.remove = rows##Remove, \
	.write_part = rows##WritePart, \
	.remove_part = rows##RemovePart, \
	.forget_zone = RlCacheForgetZone, \
	.relimit_zone = TableRelimitZone, \
	.flush_zone = RlCacheFlushZone, \
	.no_room = NULL, \
}

TABLE_STORE(RlDirectRows, RlTableDirectStore, false);
TABLE_STORE(RlSpiRows, RlTableSpiStore, true);
