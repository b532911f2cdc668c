/*
 * store.h -- one storage interface for per-key rate-limit state.
 *
 * A store keeps one row per key.  The algorithms never see a store: the
 * transaction cache (state_cache.c) reads a key's row, lets the algorithm
 * compute the new state, and writes it back through these operations.
 *
 * Back ends: the planner-free path over the executor's single-row
 * primitives (store_direct.c, heap tables only) and SPI with saved plans
 * (store_spi.c, any table access method: YugabyteDB, Citus shards).
 */
#ifndef RL_STORE_H
#define RL_STORE_H

#include "postgres.h"

#include "storage/itemptr.h"
#include "utils/timestamp.h"

/* The stored state of one key. */
typedef struct RlStateRow
{
	int64		tokens;			/* whole tokens */
	double		fraction;		/* part of the next token, in [0, 1) */
	TimestampTz stamp;
} RlStateRow;

/* Where a fetched or written row is, as far as the back end needs to know. */
typedef struct RlRowRef
{
	ItemPointerData tid;		/* direct path: the row version we saw or wrote */
	bool		locked;			/* this transaction holds the row against others */
} RlRowRef;

typedef struct RlStoreOps
{
	const char *name;

	/*
	 * Opens the store for the few operations of one decision (or one flush);
	 * end closes it.  An error in between needs no end: transaction abort
	 * releases what begin took.
	 */
	void	   *(*begin) (void);
	void		(*end) (void *handle);

	/* Reads key's row into *row; false when the key has none. */
	bool		(*fetch) (void *handle, text *key, RlStateRow *row, RlRowRef *ref);

	/*
	 * Creates key's row; false when a concurrent transaction created it first
	 * (the caller fetches again).  On success the row is locked.
	 */
	bool		(*insert) (void *handle, text *key, const RlStateRow *row, RlRowRef *ref);

	/*
	 * Replaces the row last fetched or written through ref; false when a
	 * concurrent transaction changed it since the fetch (the caller fetches
	 * again).  On success the row is locked.
	 */
	bool		(*replace) (void *handle, text *key, const RlStateRow *row, RlRowRef *ref);
} RlStoreOps;

extern const RlStoreOps RlDirectStore;
extern const RlStoreOps RlSpiStore;

/* The back end chosen by ratelimit.table_access for the state table. */
extern const RlStoreOps *RlTableStore(void);

/* OID and properties of ratelimit.token_bucket, cached per backend. */
typedef struct RlStateTable
{
	Oid			relid;
	Oid			owner;
	bool		is_heap;
	bool		is_distributed; /* by Citus: rows live in shards */
} RlStateTable;

extern const RlStateTable *RlGetStateTable(void);

#endif							/* RL_STORE_H */
