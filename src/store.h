/*
 * store.h -- one storage interface for per-key rate-limit state.
 *
 * A store keeps rows keyed by (key, zone, part).  The algorithms never see a store: the
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

/*
 * Which row: a key's state in a zone (zone_id 0 is rl_token_bucket's ad-hoc
 * buckets, -1 rl_gcra's), part 0 its head row; the exact sliding window
 * keeps sealed chunks of its log in parts 1 and up.  The primary key is
 * (key, zone_id, part): every row of a key shards with the key.
 */
typedef struct RlStateKey
{
	text	   *key;
	int32		zone_id;
	int32		part;
} RlStateKey;

#define RL_ZONE_ID_TOKEN_BUCKET 0
#define RL_ZONE_ID_GCRA (-1)

/* The stored state of one row; each algorithm gives the fields a meaning. */
typedef struct RlStateRow
{
	int64		tokens;
	double		fraction;
	TimestampTz stamp;
	int64		counter;
	bytea	   *entries;		/* NULL when the column is NULL */
	bool		refill_pending; /* cron refill: below capacity (false is stored as NULL) */
} RlStateRow;

/* Where a fetched or written row is, as far as the back end needs to know. */
typedef struct RlRowRef
{
	ItemPointerData tid;		/* direct path: the row version we saw or wrote */
	bool		locked;			/* this transaction holds the row against others */
} RlRowRef;

typedef enum RlFetchMode
{
	RL_FETCH_PEEK,				/* latest committed (and own) version; no lock, no wait */
	RL_FETCH_UPDATE,			/* to replace next: a later replace detects changes */
	RL_FETCH_LOCK				/* locked against other writers before returning */
} RlFetchMode;

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

	/* Reads the row into *row; false when there is none. */
	bool		(*fetch) (void *handle, const RlStateKey *key, RlFetchMode mode,
						  RlStateRow *row, RlRowRef *ref);

	/*
	 * Creates the row; false when a concurrent transaction created it first
	 * (the caller fetches again).  On success the row is locked.
	 */
	bool		(*insert) (void *handle, const RlStateKey *key, const RlStateRow *row,
						   RlRowRef *ref);

	/*
	 * Replaces the row last fetched or written through ref; false when a
	 * concurrent transaction changed it since the fetch (the caller fetches
	 * again).  On success the row is locked.
	 */
	bool		(*replace) (void *handle, const RlStateKey *key, const RlStateRow *row,
							RlRowRef *ref);

	/* Deletes the row; false when there was none. */
	bool		(*remove) (void *handle, const RlStateKey *key);
} RlStoreOps;

extern const RlStoreOps RlDirectStore;
extern const RlStoreOps RlSpiStore;

/* The back end chosen by ratelimit.table_access for the state table. */
extern const RlStoreOps *RlTableStore(void);

/* OID and properties of ratelimit.state, cached per backend. */
typedef struct RlStateTable
{
	Oid			relid;
	Oid			owner;
	bool		is_heap;
	bool		is_distributed; /* by Citus: rows live in shards */
} RlStateTable;

extern const RlStateTable *RlGetStateTable(void);

#endif							/* RL_STORE_H */
