/*
 * table_cache.h -- the table store's transaction cache (table_cache.c).
 */
#ifndef RL_TABLE_CACHE_H
#define RL_TABLE_CACHE_H

#include "postgres.h"

#include "store/row_access.h"

typedef struct CachedState
{
	RlStateKey	key;			/* hash key; key.key is a copy in TopTransactionContext */
	RlStateRow	row;			/* row.entries is entries_buf, or NULL */
	bytea	   *entries_buf;	/* in TopTransactionContext, entries_cap bytes */
	Size		entries_cap;
	RlRowRef	ref;
	const RlRowOps *rows;		/* the path that wrote it (and holds its lock) */
	bool		dirty;			/* row is newer than what the table holds */
	bool		stale;			/* the table's row may be newer (another statement): re-read */
	bool		forgotten;		/* state deleted by this transaction: not a copy */
	SubTransactionId undo_subid;	/* last subtransaction that saved an undo */
} CachedState;

/* The copy of key, unless there is none or its state was deleted. */
extern CachedState *RlCacheFind(const RlStateKey *key);

/* Keeps a copy of a row this transaction holds locked. */
extern void RlCacheRemember(const RlStateKey *key, const RlStateRow *row, const RlRowRef *ref,
							const RlRowOps *rows);

/* Changes the copy (written back before commit; undone with its savepoint). */
extern void RlCacheChange(CachedState *entry, const RlStateRow *next);

/* The key's state was deleted: *removed gets the copy's last state. */
extern void RlCacheForget(CachedState *entry, RlStateRow *removed);

/* Drops the copies of a zone whose state is being deleted. */
extern void RlCacheForgetZone(int32 zone_id);

/*
 * Writes the zone's changed copies to the table and re-reads them before
 * their next use: for a statement that changes the zone's rows itself
 * (rl_cron_refill), under the row locks the calls hold.
 */
extern void RlCacheFlushZone(int32 zone_id);

/*
 * The same for every zone: before another statement of this transaction
 * reaches the state tables (state_statements.c).  A copy whose row is then
 * found gone becomes a key without state.
 */
extern void RlCacheFlushAll(void);

/* Whether this transaction has cached state (made a table-store call). */
extern bool RlStateCacheInUse(void);

extern void RlStateCacheInit(void);

#endif							/* RL_TABLE_CACHE_H */
