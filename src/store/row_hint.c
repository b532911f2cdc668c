/*
 * row_hint.c -- where the direct path last found each key's row.
 *
 * A call's lookup through the primary key (four columns, text compared
 * through fmgr) was the largest part of a decision on the direct path.  The
 * index entry of a row points to the root of its HOT chain, and that root
 * stays put while the row is updated in place; so this backend remembers,
 * per key, the root TID the index last gave, and the next lookup of the key
 * follows that chain first.
 *
 * A hint is only ever a place to look: row_direct.c checks that the tuple it
 * finds there is visible and holds exactly the key (the line pointer may
 * have been freed by VACUUM and reused by another key's row), and looks the
 * key up through the index whenever the hint finds nothing.  So a stale or
 * wrong hint costs a wasted page visit, never a wrong decision.
 *
 * Beside the root, a hint keeps the newest version of the row this backend
 * found or wrote, which row_direct.c reads first: while no other backend
 * has updated the row since, that is the row, with no chain to walk.
 *
 * Entries are identified by a 64-bit hash of the key (relation, zone, part,
 * key text, params) and hold no copy of the key: a collision is one more
 * hint that does not match.  The table is bounded; when full it starts over.
 */
#include "postgres.h"

#include "storage/bufmgr.h"
#include "storage/smgr.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "store/row_hint.h"

/* About 48 bytes an entry: 5 MB at most per backend. */
#define MAX_HINTS 100000

typedef struct RowHint
{
	uint64		hash;			/* the hash table's key */
	ItemPointerData root;
	ItemPointerData newest;
} RowHint;

static HTAB *hints = NULL;

/*
 * The hint the last lookup or write touched: a call reads its key's hint,
 * then records the version it wrote, and the second needs no search.
 * Entries stay put in a dynahash table until removed or the table is
 * destroyed, which reset this.
 */
static RowHint *last_hint = NULL;

/* The hint of hash (the last one touched, when it is that one), or NULL. */
static RowHint *
LookUpHint(uint64 hash, HASHACTION action)
{
	if (last_hint == NULL || last_hint->hash != hash)
		last_hint = hash_search(hints, &hash, action, NULL);
	return last_hint;
}

static void
EnsureHints(void)
{
	HASHCTL		ctl;

	if (hints != NULL && hash_get_num_entries(hints) < MAX_HINTS)
		return;
	if (hints != NULL)
		hash_destroy(hints);
	last_hint = NULL;
	ctl.keysize = sizeof(uint64);
	ctl.entrysize = sizeof(RowHint);
	ctl.hcxt = TopMemoryContext;
	hints = hash_create("ratelimit row hints", 1024, &ctl,
						HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
}

bool
RlRowHintGet(Relation rel, const RlStateKey *key, ItemPointer root, ItemPointer newest)
{
	uint64		hash;
	RowHint    *hint;

	if (hints == NULL)
		return false;
	hash = RlStateKeyHash(RelationGetRelid(rel), key);
	hint = LookUpHint(hash, HASH_FIND);
	if (hint == NULL)
		return false;
	ItemPointerCopy(&hint->root, root);
	ItemPointerCopy(&hint->newest, newest);
	return true;
}

void
RlRowHintSet(Relation rel, const RlStateKey *key, ItemPointer root, ItemPointer newest)
{
	uint64		hash = RlStateKeyHash(RelationGetRelid(rel), key);
	RowHint    *hint;

	EnsureHints();
	hint = LookUpHint(hash, HASH_ENTER);
	ItemPointerCopy(root, &hint->root);
	ItemPointerCopy(newest, &hint->newest);
}

void
RlRowHintSetNewest(Relation rel, const RlStateKey *key, ItemPointer newest)
{
	uint64		hash;
	RowHint    *hint;

	/* Without its root a hint is no use: none is made here. */
	if (hints == NULL)
		return;
	hash = RlStateKeyHash(RelationGetRelid(rel), key);
	hint = LookUpHint(hash, HASH_FIND);
	if (hint != NULL)
		ItemPointerCopy(newest, &hint->newest);
}

void
RlRowHintForget(Relation rel, const RlStateKey *key)
{
	uint64		hash;

	if (hints == NULL)
		return;
	hash = RlStateKeyHash(RelationGetRelid(rel), key);
	(void) hash_search(hints, &hash, HASH_REMOVE, NULL);
	last_hint = NULL;
}

/*
 * Reading a block past the end of a relation is an error, and VACUUM
 * truncates empty tail pages.  The storage manager keeps the size it last
 * saw of each relation this backend opened, which spares the system call
 * (lseek) that reads it at almost every call.  PostgreSQL trusts that size
 * only in recovery, because nothing tells a backend that another one
 * extended the relation: it can be too low, and a block at or past it is
 * checked by reading the size again (which also updates it).  It is never
 * too high: a truncation sends an invalidation that resets every backend's
 * copy (smgrtruncate; our own backend's copy it sets exactly), and it
 * needs an ACCESS EXCLUSIVE lock, so that invalidation is read at the
 * latest when this backend locks rel after it, before any call looks at a
 * hint; and no truncation happens while we hold our ROW EXCLUSIVE lock.
 */
bool
RlRowHintBlockExists(Relation rel, BlockNumber block)
{
	BlockNumber known = RelationGetSmgr(rel)->smgr_cached_nblocks[MAIN_FORKNUM];

	if (known != InvalidBlockNumber && block < known)
		return true;
	return block < RelationGetNumberOfBlocks(rel);
}
