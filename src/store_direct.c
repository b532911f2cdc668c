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
 * without serialization errors.  New keys are created under a transaction
 * lock on the key's hash, so two sessions never race to insert one key.
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

#define STATE_COLUMNS 3
#define KEY_ATTNUM 1
#define TOKENS_ATTNUM 2
#define STAMP_ATTNUM 3

/* Distinguishes our key locks from users' pg_advisory_* locks in pg_locks. */
#define KEY_LOCK_CLASS 0x524C

typedef struct DirectTable
{
	Relation	rel;
	Relation	index;
} DirectTable;

static DirectTable
OpenStateTable(void)
{
	DirectTable t;
	Oid			indexid;

	t.rel = table_open(RlGetStateTable()->relid, RowExclusiveLock);
	indexid = RelationGetPrimaryKeyIndex(t.rel);
	if (!OidIsValid(indexid))
		elog(ERROR, "ratelimit state table has no primary key");
	t.index = index_open(indexid, RowExclusiveLock);
	return t;
}

static void
CloseStateTable(DirectTable *t)
{
	index_close(t->index, NoLock);
	table_close(t->rel, NoLock);
}

static void
StoreRowInSlot(TupleTableSlot *slot, text *key, const RlStateRow *row)
{
	ExecClearTuple(slot);
	slot->tts_values[KEY_ATTNUM - 1] = PointerGetDatum(key);
	slot->tts_values[TOKENS_ATTNUM - 1] = Float8GetDatum(row->tokens);
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
	TupleTableSlot *slot = table_slot_create(t->rel, NULL);
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

		row->tokens = DatumGetFloat8(slot_getattr(slot, TOKENS_ATTNUM, &isnull));
		row->stamp = DatumGetTimestampTz(slot_getattr(slot, STAMP_ATTNUM, &isnull));
		ItemPointerCopy(&slot->tts_tid, tid);
	}
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
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
DirectFetch(text *key, RlStateRow *row, RlRowRef *ref)
{
	DirectTable t = OpenStateTable();
	bool		found = FindRow(&t, key, row, &ref->tid);

	/* Seen, not locked: a following replace detects a concurrent change. */
	ref->locked = false;
	CloseStateTable(&t);
	return found;
}

static void
LockKey(Oid relid, text *key)
{
	LOCKTAG		tag;
	uint64		hash = hash_bytes_extended((const unsigned char *) VARDATA_ANY(key),
										   VARSIZE_ANY_EXHDR(key), relid);

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, (uint32) (hash >> 32), (uint32) hash,
						 KEY_LOCK_CLASS);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);
}

static bool
DirectInsert(text *key, const RlStateRow *row, RlRowRef *ref)
{
	DirectTable t = OpenStateTable();
	RlStateRow existing;
	ResultRelInfo *rri;
	EState	   *estate;
	TupleTableSlot *slot;

	/* Held to the end of the transaction, like the row lock it stands for. */
	LockKey(RelationGetRelid(t.rel), key);
	if (FindRow(&t, key, &existing, &ref->tid))
	{
		CloseStateTable(&t);
		return false;
	}

	estate = CreateStateTableEState(t.rel, &rri);
	slot = table_slot_create(t.rel, NULL);
	StoreRowInSlot(slot, key, row);
	ExecSimpleRelationInsert(rri, estate, slot);
	ItemPointerCopy(&slot->tts_tid, &ref->tid);
	ref->locked = true;
	ExecDropSingleTupleTableSlot(slot);
	FreeStateTableEState(estate, rri);
	CloseStateTable(&t);

	/* Let later lookups in this command see the row (as SPI would). */
	CommandCounterIncrement();
	return true;
}

static bool
DirectReplace(text *key, const RlStateRow *row, RlRowRef *ref)
{
	DirectTable t = OpenStateTable();
	TupleTableSlot *slot = table_slot_create(t.rel, NULL);
	TM_FailureData tmfd;
	LockTupleMode lockmode;
	bool		update_indexes;
	TM_Result	result;

	StoreRowInSlot(slot, key, row);
	result = table_tuple_update(t.rel, &ref->tid, slot, GetCurrentCommandId(true),
								InvalidSnapshot, InvalidSnapshot, true,
								&tmfd, &lockmode, &update_indexes);
	switch (result)
	{
		case TM_Ok:
			break;
		case TM_Updated:
		case TM_Deleted:
			ExecDropSingleTupleTableSlot(slot);
			CloseStateTable(&t);
			return false;
		default:
			elog(ERROR, "unexpected result %d updating ratelimit state", (int) result);
	}

	/* Only a non-HOT update needs new index entries. */
	if (update_indexes)
	{
		ResultRelInfo *rri;
		EState	   *estate = CreateStateTableEState(t.rel, &rri);

		ExecInsertIndexTuples(rri, slot, estate, true, false, NULL, NIL);
		FreeStateTableEState(estate, rri);
	}
	ItemPointerCopy(&slot->tts_tid, &ref->tid);
	ref->locked = true;
	ExecDropSingleTupleTableSlot(slot);
	CloseStateTable(&t);

	CommandCounterIncrement();
	return true;
}

const RlStoreOps RlDirectStore = {
	.name = "direct",
	.fetch = DirectFetch,
	.insert = DirectInsert,
	.replace = DirectReplace,
};
