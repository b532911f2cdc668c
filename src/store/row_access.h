/*
 * row_access.h -- how the table store reaches single rows of its state
 * table.  Two paths implement it: the executor's single-row primitives
 * without the planner (row_direct.c, heap tables only) and SPI with saved
 * plans (row_spi.c, any table access method: YugabyteDB, Citus shards).
 * Only table_store.c uses them, under its transaction cache.
 */
#ifndef RL_ROW_ACCESS_H
#define RL_ROW_ACCESS_H

#include "postgres.h"

#include "storage/itemptr.h"

#include "store/store.h"

/* Where a fetched or written row is, as far as the path needs to know. */
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

typedef struct RlRowOps
{
	const char *name;

	/*
	 * Opens the table for the few operations of one decision (or one flush);
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
} RlRowOps;

#endif							/* RL_ROW_ACCESS_H */
