/*
 * store_direct.c -- the planner-free path to the state table.
 *
 * Built on the executor's single-row primitives, as logical replication's
 * apply worker is: an index lookup under a dirty snapshot, then
 * table_tuple_update on the row found.  No parser, planner or plan tree per
 * call.  Heap tables only; other table access methods take the SPI path.
 *
 * Concurrency: fetch waits for any transaction still writing the row, and
 * replace fails (the caller fetches again) when another transaction updated
 * it in between, so read-modify-write is atomic at every isolation level
 * without serialization errors.  New keys are created under a short lock on
 * the key's hash, so two sessions never race to insert one key.
 */
#include "ratelimit.h"

#include "access/genam.h"
#include "access/relscan.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_collation_d.h"
#include "common/hashfn.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "storage/lmgr.h"
#include "utils/fmgroids.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "store.h"

#define STATE_COLUMNS 4
#define KEY_ATTNUM 1
#define TOKENS_ATTNUM 2
#define FRACTION_ATTNUM 3
#define STAMP_ATTNUM 4

/* Distinguishes our key locks from users' pg_advisory_* locks in pg_locks. */
#define KEY_LOCK_CLASS 0x524C

typedef struct DirectTable
{
	Relation	rel;
	Relation	index;
	TupleTableSlot *slot;		/* scratch row for reads and writes */
} DirectTable;

static void *
DirectBegin(void)
{
	DirectTable *t = palloc(sizeof(DirectTable));
	Oid			indexid;

	t->rel = table_open(RlGetStateTable()->relid, RowExclusiveLock);
	indexid = RelationGetPrimaryKeyIndex(t->rel);
	if (!OidIsValid(indexid))
		elog(ERROR, "ratelimit state table has no primary key");
	t->index = index_open(indexid, RowExclusiveLock);
	t->slot = table_slot_create(t->rel, NULL);
	return t;
}

static void
DirectEnd(void *handle)
{
	DirectTable *t = handle;

	ExecDropSingleTupleTableSlot(t->slot);
	index_close(t->index, NoLock);
	table_close(t->rel, NoLock);
	pfree(t);
}

static void
StoreRowInSlot(TupleTableSlot *slot, text *key, const RlStateRow *row)
{
	ExecClearTuple(slot);
	slot->tts_values[KEY_ATTNUM - 1] = PointerGetDatum(key);
	slot->tts_values[TOKENS_ATTNUM - 1] = Int64GetDatum(row->tokens);
	slot->tts_values[FRACTION_ATTNUM - 1] = Float8GetDatum(row->fraction);
	slot->tts_values[STAMP_ATTNUM - 1] = TimestampTzGetDatum(row->stamp);
	memset(slot->tts_isnull, 0, sizeof(bool) * STATE_COLUMNS);
	ExecStoreVirtualTuple(slot);
}

/*
 * Finds the newest version of key's row.  A dirty snapshot also sees rows
 * that other transactions are still writing; we wait for those to finish
 * and look again, as RelationFindReplTupleByIndex does.
 */
static bool
FindRow(DirectTable *t, text *key, RlStateRow *row, ItemPointer tid)
{
	SnapshotData dirty;
	ScanKeyData skey;
	IndexScanDesc scan;
	TupleTableSlot *slot = t->slot;
	bool		found;

	InitDirtySnapshot(dirty);
	ScanKeyInit(&skey, 1, BTEqualStrategyNumber, F_TEXTEQ, PointerGetDatum(key));
	skey.sk_collation = t->index->rd_indcollation[0];
	scan = index_beginscan(t->rel, t->index, &dirty, 1, 0);

	for (;;)
	{
		TransactionId xwait;

		index_rescan(scan, &skey, 1, NULL, 0);
		found = index_getnext_slot(scan, ForwardScanDirection, slot);
		if (!found)
			break;
		xwait = TransactionIdIsValid(dirty.xmin) ? dirty.xmin : dirty.xmax;
		if (!TransactionIdIsValid(xwait))
			break;
		XactLockTableWait(xwait, t->rel, &slot->tts_tid, XLTW_None);
		CHECK_FOR_INTERRUPTS();
	}

	if (found)
	{
		bool		isnull;

		row->tokens = DatumGetInt64(slot_getattr(slot, TOKENS_ATTNUM, &isnull));
		row->fraction = DatumGetFloat8(slot_getattr(slot, FRACTION_ATTNUM, &isnull));
		row->stamp = DatumGetTimestampTz(slot_getattr(slot, STAMP_ATTNUM, &isnull));
		ItemPointerCopy(&slot->tts_tid, tid);
	}
	index_endscan(scan);
	return found;
}

/* An executor state for index maintenance, as the apply worker builds one. */
static EState *
CreateStateTableEState(Relation rel, ResultRelInfo **rri)
{
	EState	   *estate = CreateExecutorState();
	RangeTblEntry *rte = makeNode(RangeTblEntry);

	rte->rtekind = RTE_RELATION;
	rte->relid = RelationGetRelid(rel);
	rte->relkind = rel->rd_rel->relkind;
	rte->rellockmode = RowExclusiveLock;
	rte->updatedCols = bms_make_singleton(TOKENS_ATTNUM - FirstLowInvalidHeapAttributeNumber);
	rte->updatedCols = bms_add_member(rte->updatedCols, FRACTION_ATTNUM - FirstLowInvalidHeapAttributeNumber);
	rte->updatedCols = bms_add_member(rte->updatedCols, STAMP_ATTNUM - FirstLowInvalidHeapAttributeNumber);
	ExecInitRangeTable(estate, list_make1(rte));

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
DirectFetch(void *handle, text *key, RlStateRow *row, RlRowRef *ref)
{
	/* Seen, not locked: a following replace detects a concurrent change. */
	ref->locked = false;
	return FindRow(handle, key, row, &ref->tid);
}

/*
 * Serialises "look, then insert" for one key.  Held only until our index
 * entry exists: from then on a concurrent inserter's dirty-snapshot lookup
 * finds our uncommitted row and waits for our transaction instead.  (Held
 * to commit, a bulk insert of new keys would fill the lock table.)
 */
static void
KeyInsertLockTag(LOCKTAG *tag, Oid relid, text *key)
{
	uint64		hash = hash_bytes_extended((const unsigned char *) VARDATA_ANY(key),
										   VARSIZE_ANY_EXHDR(key), relid);

	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, (uint32) (hash >> 32), (uint32) hash,
						 KEY_LOCK_CLASS);
}

static bool
DirectInsert(void *handle, text *key, const RlStateRow *row, RlRowRef *ref)
{
	DirectTable *t = handle;
	RlStateRow	existing;
	LOCKTAG		tag;
	bool		inserted = false;

	KeyInsertLockTag(&tag, RelationGetRelid(t->rel), key);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);
	if (!FindRow(t, key, &existing, &ref->tid))
	{
		ResultRelInfo *rri;
		EState	   *estate = CreateStateTableEState(t->rel, &rri);

		StoreRowInSlot(t->slot, key, row);
		ExecSimpleRelationInsert(rri, estate, t->slot);
		ItemPointerCopy(&t->slot->tts_tid, &ref->tid);
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
DirectReplace(void *handle, text *key, const RlStateRow *row, RlRowRef *ref)
{
	DirectTable *t = handle;
	TupleTableSlot *slot = t->slot;
	TM_FailureData tmfd;
	LockTupleMode lockmode;
	bool		update_indexes;
	TM_Result	result;

	StoreRowInSlot(slot, key, row);
	result = table_tuple_update(t->rel, &ref->tid, slot, GetCurrentCommandId(true),
								InvalidSnapshot, InvalidSnapshot, true,
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
	if (update_indexes)
	{
		ResultRelInfo *rri;
		EState	   *estate = CreateStateTableEState(t->rel, &rri);

		ExecInsertIndexTuples(rri, slot, estate, true, false, NULL, NIL);
		FreeStateTableEState(estate, rri);
	}
	ItemPointerCopy(&slot->tts_tid, &ref->tid);
	ref->locked = true;

	CommandCounterIncrement();
	return true;
}

const RlStoreOps RlDirectStore = {
	.name = "direct",
	.begin = DirectBegin,
	.end = DirectEnd,
	.fetch = DirectFetch,
	.insert = DirectInsert,
	.replace = DirectReplace,
};
