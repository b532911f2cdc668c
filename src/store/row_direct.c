/*
 * row_direct.c -- the planner-free path to the state table.
 *
 * Built on the executor's single-row primitives, as logical replication's
 * apply worker is: an index lookup under a dirty snapshot, then
 * table_tuple_update on the row found.  No parser, planner or plan tree per
 * call.  Heap tables only; other table access methods take the SPI path.
 *
 * Concurrency: fetch waits for any transaction still writing the row, and
 * replace fails (the caller fetches again) when another transaction updated
 * it in between, so read-modify-write is atomic at every isolation level
 * without serialization errors (RL_FETCH_LOCK locks the row first, for
 * algorithms that read more rows under it).  New keys are created under a short lock on
 * the key's hash, so two sessions never race to insert one key.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/relscan.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_collation_d.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "storage/lmgr.h"
#include "utils/fmgroids.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "base/pg_compat.h"
#include "store/row_direct.h"
#include "store/row_hint.h"
#include "store/state_table.h"

/* ratelimit.state's columns; the first three and the last are the primary key. */
#define STATE_COLUMNS 10
#define KEY_ATTNUM 1
#define ZONE_ATTNUM 2
#define PART_ATTNUM 3
#define TOKENS_ATTNUM 4
#define FRACTION_ATTNUM 5
#define STAMP_ATTNUM 6
#define COUNTER_ATTNUM 7
#define ENTRIES_ATTNUM 8
#define REFILL_ATTNUM 9
#define PARAMS_ATTNUM 10
#define KEY_COLUMNS 4			/* key, zone_id, part, params: the index's order */

/* Distinguishes our key locks from users' pg_advisory_* locks in pg_locks. */
#define KEY_LOCK_CLASS 0x524C

/*
 * The relation is opened at the first key: on Citus each key's rows are in
 * the shard of its hash, so a handle follows the keys it is given.
 */
typedef struct DirectTable
{
	Relation	rel;			/* NULL until a key is given */
	Relation	index;			/* NULL until a lookup needs it */
	TupleTableSlot *slot;		/* scratch row for reads and writes */
} DirectTable;

static void *
DirectBegin(void)
{
	DirectTable *t = palloc(sizeof(DirectTable));

	t->rel = NULL;
	return t;
}

static void
CloseRelation(DirectTable *t)
{
	if (t->rel == NULL)
		return;
	ExecDropSingleTupleTableSlot(t->slot);
	if (t->index != NULL)
		index_close(t->index, NoLock);
	table_close(t->rel, NoLock);
	t->rel = NULL;
}

/* Opens the relation that holds key's rows, unless the handle has it open. */
static void
UseRelationOf(DirectTable *t, const RlStateKey *key)
{
	Oid			relid = RlStateRelationOfKey(key->key, key->durable);

	if (!OidIsValid(relid))
		elog(ERROR, "the shard of rate-limit key is not on this node");
	if (t->rel != NULL && RelationGetRelid(t->rel) == relid)
		return;
	CloseRelation(t);
	t->rel = table_open(relid, RowExclusiveLock);
	t->index = NULL;
	t->slot = table_slot_create(t->rel, NULL);
}

/* The primary key of the open relation. */
static Relation
IndexOf(DirectTable *t)
{
	if (t->index == NULL)
	{
		Oid			indexid = RlPrimaryKeyIndex(t->rel);

		if (!OidIsValid(indexid))
			elog(ERROR, "ratelimit state table has no primary key");
		t->index = index_open(indexid, RowExclusiveLock);
	}
	return t->index;
}

static void
DirectEnd(void *handle)
{
	DirectTable *t = handle;

	CloseRelation(t);
	pfree(t);
}

static void
StoreRowInSlot(TupleTableSlot *slot, const RlStateKey *key, const RlStateRow *row)
{
	ExecClearTuple(slot);
	memset(slot->tts_isnull, 0, sizeof(bool) * STATE_COLUMNS);
	slot->tts_values[KEY_ATTNUM - 1] = PointerGetDatum(key->key);
	slot->tts_values[ZONE_ATTNUM - 1] = Int32GetDatum(key->zone_id);
	slot->tts_values[PART_ATTNUM - 1] = Int32GetDatum(key->part);
	slot->tts_values[PARAMS_ATTNUM - 1] = PointerGetDatum(RlStateKeyParams(key));
	slot->tts_values[TOKENS_ATTNUM - 1] = Int64GetDatum(row->tokens);
	slot->tts_values[FRACTION_ATTNUM - 1] = Float8GetDatum(row->fraction);
	slot->tts_values[STAMP_ATTNUM - 1] = TimestampTzGetDatum(row->stamp);
	slot->tts_values[COUNTER_ATTNUM - 1] = Int64GetDatum(row->counter);
	slot->tts_values[ENTRIES_ATTNUM - 1] = PointerGetDatum(row->entries);
	slot->tts_isnull[ENTRIES_ATTNUM - 1] = (row->entries == NULL);
	/* NULL, not false: only rows the refill job must visit are indexed. */
	slot->tts_values[REFILL_ATTNUM - 1] = BoolGetDatum(true);
	slot->tts_isnull[REFILL_ATTNUM - 1] = !row->refill_pending;
	ExecStoreVirtualTuple(slot);
}

/* Copies the row out of the slot; entries into CurrentMemoryContext. */
static void
ReadRowFromSlot(TupleTableSlot *slot, RlStateRow *row)
{
	bool		isnull;
	Datum		entries;

	row->tokens = DatumGetInt64(slot_getattr(slot, TOKENS_ATTNUM, &isnull));
	row->fraction = DatumGetFloat8(slot_getattr(slot, FRACTION_ATTNUM, &isnull));
	row->stamp = DatumGetTimestampTz(slot_getattr(slot, STAMP_ATTNUM, &isnull));
	row->counter = DatumGetInt64(slot_getattr(slot, COUNTER_ATTNUM, &isnull));
	entries = slot_getattr(slot, ENTRIES_ATTNUM, &isnull);
	row->entries = isnull ? NULL : DatumGetByteaPCopy(entries);
	row->refill_pending = DatumGetBool(slot_getattr(slot, REFILL_ATTNUM, &isnull)) && !isnull;
}

/* Whether the row in the slot is key's: the primary key's four columns. */
static bool
SlotHoldsKey(TupleTableSlot *slot, const RlStateKey *key)
{
	bool		isnull;

	return DatumGetInt32(slot_getattr(slot, ZONE_ATTNUM, &isnull)) == key->zone_id &&
		DatumGetInt32(slot_getattr(slot, PART_ATTNUM, &isnull)) == key->part &&
		RlSameText(DatumGetTextPP(slot_getattr(slot, KEY_ATTNUM, &isnull)), key->key) &&
		RlSameText(DatumGetTextPP(slot_getattr(slot, PARAMS_ATTNUM, &isnull)),
				   RlStateKeyParams(key));
}

/*
 * One lookup at a hint in PRUNE_EVERY follows the row's chain from its
 * root, as an index scan does, and so prunes the page of dead versions
 * (heap_page_prune_opt) when the page is short of room, which on a page
 * filled to its fillfactor is at nearly every visit.  The others read the
 * newest version the hint remembers: no pruning and no chain to walk.  A
 * HOT update needs the room pruning makes on its page; with the page
 * pruned at one visit in four, a few dead versions at most wait there.
 */
#define PRUNE_EVERY 4

static uint32 lookups_at_hint = 0;

/*
 * Whether the version at tid is key's row, into the slot: seen by the
 * snapshot (the version another transaction has since replaced is not) and
 * holding the key (a freed line pointer may hold another key's row).
 */
static bool
FetchVersion(DirectTable *t, const RlStateKey *key, Snapshot snapshot, ItemPointer tid)
{
	return RlRowHintBlockExists(t->rel, ItemPointerGetBlockNumber(tid)) &&
		table_tuple_fetch_row_version(t->rel, tid, snapshot, t->slot) &&
		SlotHoldsKey(t->slot, key);
}

/*
 * Key's row at its hint (row_hint.c), into the slot: the newest version
 * the hint remembers, else the version the snapshot sees in the chain the
 * hint's root starts.  False when there is no hint, or neither holds the
 * key's row: the caller then asks the index.
 */
static bool
FetchAtHint(DirectTable *t, const RlStateKey *key, Snapshot snapshot)
{
	ItemPointerData root;
	ItemPointerData newest;
	IndexFetchTableData *fetch;
	bool		call_again = false;
	bool		all_dead = false;
	bool		found;

	if (!RlRowHintGet(t->rel, key, &root, &newest))
		return false;
	if (++lookups_at_hint % PRUNE_EVERY != 0 && FetchVersion(t, key, snapshot, &newest))
		return true;
	if (!RlRowHintBlockExists(t->rel, ItemPointerGetBlockNumber(&root)))
		return false;
	fetch = table_index_fetch_begin(t->rel);
	found = table_index_fetch_tuple(fetch, &root, snapshot, t->slot, &call_again, &all_dead);
	table_index_fetch_end(fetch);
	if (!found || !SlotHoldsKey(t->slot, key))
		return false;
	RlRowHintSetNewest(t->rel, key, &t->slot->tts_tid);
	return true;
}

/*
 * Key's row through the primary key, into the slot; the scan is begun at
 * the first use.  The root TID of the entry that led to it becomes the key's
 * hint.
 */
static bool
FetchThroughIndex(DirectTable *t, const RlStateKey *key, Snapshot snapshot,
				  IndexScanDesc *scan, ScanKey skey)
{
	if (*scan == NULL)
	{
		Relation	index = IndexOf(t);

		ScanKeyInit(&skey[0], 1, BTEqualStrategyNumber, F_TEXTEQ, PointerGetDatum(key->key));
		skey[0].sk_collation = index->rd_indcollation[0];
		ScanKeyInit(&skey[1], 2, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(key->zone_id));
		ScanKeyInit(&skey[2], 3, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(key->part));
		ScanKeyInit(&skey[3], 4, BTEqualStrategyNumber, F_TEXTEQ,
					PointerGetDatum(RlStateKeyParams(key)));
		skey[3].sk_collation = index->rd_indcollation[3];
		*scan = RlIndexBeginScan(t->rel, index, snapshot, KEY_COLUMNS);
	}
	index_rescan(*scan, skey, KEY_COLUMNS, NULL, 0);
	for (;;)
	{
		ItemPointer entry = index_getnext_tid(*scan, ForwardScanDirection);
		ItemPointerData root;

		if (entry == NULL)
			return false;
		/* The fetch moves xs_heaptid along the HOT chain: keep where it starts. */
		ItemPointerCopy(entry, &root);
		if (index_fetch_heap(*scan, t->slot))
		{
			RlRowHintSet(t->rel, key, &root, &t->slot->tts_tid);
			return true;
		}
	}
}

/*
 * Finds the newest version of key's row.  A dirty snapshot also sees rows
 * that other transactions are still writing; we wait for those to finish
 * and look again, as RelationFindReplTupleByIndex does.  A peek reads under
 * the latest snapshot instead: committed rows and our own, never waiting.
 */
static bool
FindRow(DirectTable *t, const RlStateKey *key, bool peek, RlStateRow *row, ItemPointer tid)
{
	SnapshotData dirty;
	Snapshot	snapshot;
	ScanKeyData skey[KEY_COLUMNS];
	IndexScanDesc scan = NULL;
	TupleTableSlot *slot = t->slot;
	bool		found;

	if (peek)
		snapshot = RegisterSnapshot(GetLatestSnapshot());
	else
	{
		InitDirtySnapshot(dirty);
		snapshot = &dirty;
	}

	for (;;)
	{
		TransactionId xwait;

		found = FetchAtHint(t, key, snapshot) ||
			FetchThroughIndex(t, key, snapshot, &scan, skey);
		if (!found || peek)
			break;
		xwait = TransactionIdIsValid(dirty.xmin) ? dirty.xmin : dirty.xmax;
		if (!TransactionIdIsValid(xwait))
			break;
		XactLockTableWait(xwait, t->rel, &slot->tts_tid, XLTW_None);
		CHECK_FOR_INTERRUPTS();
	}

	if (found)
	{
		if (row != NULL)
			ReadRowFromSlot(slot, row);
		ItemPointerCopy(&slot->tts_tid, tid);
	}
	if (scan != NULL)
		index_endscan(scan);
	if (peek)
		UnregisterSnapshot(snapshot);
	return found;
}

/*
 * Locks the row version at tid against other writers.  False when it was
 * updated or deleted since we found it: the caller looks it up again.
 */
static bool
LockRow(DirectTable *t, ItemPointer tid)
{
	TM_FailureData tmfd;
	TM_Result	result;

	result = table_tuple_lock(t->rel, tid, GetLatestSnapshot(), t->slot,
							  GetCurrentCommandId(false), LockTupleNoKeyExclusive,
							  LockWaitBlock, 0, &tmfd);
	switch (result)
	{
		case TM_Ok:
			return true;
		case TM_Updated:
		case TM_Deleted:
			return false;
		default:
			elog(ERROR, "unexpected result %d locking ratelimit state", (int) result);
	}
	return false;
}

/* An executor state for index maintenance, as the apply worker builds one. */
static EState *
CreateStateTableEState(Relation rel, ResultRelInfo **rri)
{
	EState	   *estate = CreateExecutorState();
	RangeTblEntry *rte = makeNode(RangeTblEntry);
	Bitmapset  *updated_cols = NULL;

	rte->rtekind = RTE_RELATION;
	rte->relid = RelationGetRelid(rel);
	rte->relkind = rel->rd_rel->relkind;
	rte->rellockmode = RowExclusiveLock;
	for (int attnum = TOKENS_ATTNUM; attnum <= REFILL_ATTNUM; attnum++)
		updated_cols = bms_add_member(updated_cols, attnum - FirstLowInvalidHeapAttributeNumber);
	RlInitRangeTable(estate, rte, updated_cols);

	*rri = makeNode(ResultRelInfo);
	InitResultRelInfo(*rri, rel, 1, NULL, 0);
	ExecOpenIndices(*rri, false);
	estate->es_output_cid = GetCurrentCommandId(true);
	return estate;
}

static void
FreeStateTableEState(EState *estate, ResultRelInfo *rri)
{
	ExecCloseIndices(rri);
	FreeExecutorState(estate);
}

static bool
DirectFetch(void *handle, const RlStateKey *key, RlFetchMode mode, RlStateRow *row,
			RlRowRef *ref)
{
	DirectTable *t = handle;

	UseRelationOf(t, key);
	ref->locked = false;
	if (mode != RL_FETCH_LOCK)
	{
		/* Seen, not locked: a following replace detects a concurrent change. */
		return FindRow(t, key, mode == RL_FETCH_PEEK, row, &ref->tid);
	}
	for (;;)
	{
		if (!FindRow(t, key, false, NULL, &ref->tid))
			return false;
		if (LockRow(t, &ref->tid))
		{
			/* The slot holds the version we locked. */
			ReadRowFromSlot(t->slot, row);
			ref->locked = true;
			return true;
		}
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * Serialises "look, then insert" for one key.  Held only until our index
 * entry exists: from then on a concurrent inserter's dirty-snapshot lookup
 * finds our uncommitted row and waits for our transaction instead.  (Held
 * to commit, a bulk insert of new keys would fill the lock table.)
 */
static void
KeyInsertLockTag(LOCKTAG *tag, Oid relid, const RlStateKey *key)
{
	uint64		hash = RlStateKeyHash(relid, key);

	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, (uint32) (hash >> 32), (uint32) hash,
						 KEY_LOCK_CLASS);
}

static bool
DirectInsert(void *handle, const RlStateKey *key, const RlStateRow *row, RlRowRef *ref)
{
	DirectTable *t = handle;
	LOCKTAG		tag;
	bool		inserted = false;

	UseRelationOf(t, key);
	KeyInsertLockTag(&tag, RelationGetRelid(t->rel), key);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);
	if (!FindRow(t, key, false, NULL, &ref->tid))
	{
		ResultRelInfo *rri;
		EState	   *estate = CreateStateTableEState(t->rel, &rri);

		StoreRowInSlot(t->slot, key, row);
		ExecSimpleRelationInsert(rri, estate, t->slot);
		ItemPointerCopy(&t->slot->tts_tid, &ref->tid);
		RlRowHintSet(t->rel, key, &ref->tid, &ref->tid);
		ref->locked = true;		/* our uncommitted row blocks other writers */
		FreeStateTableEState(estate, rri);
		inserted = true;
	}
	LockRelease(&tag, ExclusiveLock, false);

	/* Let later lookups in this command see the row (as SPI would). */
	if (inserted)
		CommandCounterIncrement();
	return inserted;
}

static bool
DirectReplace(void *handle, const RlStateKey *key, const RlStateRow *row, RlRowRef *ref)
{
	DirectTable *t = handle;
	TupleTableSlot *slot;
	TM_FailureData tmfd;
	LockTupleMode lockmode;
	RlUpdateIndexes update_indexes;
	TM_Result	result;

	UseRelationOf(t, key);
	slot = t->slot;
	StoreRowInSlot(slot, key, row);
	result = RlTupleUpdate(t->rel, &ref->tid, slot, GetCurrentCommandId(true),
						   &tmfd, &lockmode, &update_indexes);
	switch (result)
	{
		case TM_Ok:
			break;
		case TM_Updated:
		case TM_Deleted:
			return false;
		default:
			elog(ERROR, "unexpected result %d updating ratelimit state", (int) result);
	}

	/* Only a non-HOT update needs new index entries. */
	if (update_indexes != RL_UPDATE_NO_INDEXES)
	{
		ResultRelInfo *rri;
		EState	   *estate = CreateStateTableEState(t->rel, &rri);

		RlInsertIndexTuplesAfterUpdate(rri, slot, estate, update_indexes);
		FreeStateTableEState(estate, rri);
		/* The new version starts a chain of its own. */
		RlRowHintSet(t->rel, key, &slot->tts_tid, &slot->tts_tid);
	}
	else
		RlRowHintSetNewest(t->rel, key, &slot->tts_tid);
	ItemPointerCopy(&slot->tts_tid, &ref->tid);
	ref->locked = true;

	CommandCounterIncrement();
	return true;
}

static bool
DirectRemove(void *handle, const RlStateKey *key)
{
	DirectTable *t = handle;
	ItemPointerData tid;

	UseRelationOf(t, key);
	for (;;)
	{
		TM_FailureData tmfd;
		TM_Result	result;

		if (!FindRow(t, key, false, NULL, &tid))
			return false;
		result = table_tuple_delete(t->rel, &tid, GetCurrentCommandId(true),
									InvalidSnapshot, InvalidSnapshot, true, &tmfd, false);
		switch (result)
		{
			case TM_Ok:
				RlRowHintForget(t->rel, key);
				CommandCounterIncrement();
				return true;
			case TM_SelfModified:	/* already deleted by this command */
				return false;
			case TM_Updated:
			case TM_Deleted:
				CHECK_FOR_INTERRUPTS();
				continue;		/* look again */
			default:
				elog(ERROR, "unexpected result %d deleting ratelimit state", (int) result);
		}
	}
}

const RlRowOps RlDirectRows = {
	.name = "direct",
	.begin = DirectBegin,
	.end = DirectEnd,
	.fetch = DirectFetch,
	.insert = DirectInsert,
	.replace = DirectReplace,
	.remove = DirectRemove,
};
