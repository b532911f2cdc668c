/*
 * pg_compat.h -- the server APIs that differ between PostgreSQL 15 and 18,
 * each behind one wrapper, so that no other file tests PG_VERSION_NUM.
 */
#ifndef RL_PG_COMPAT_H
#define RL_PG_COMPAT_H

#include "postgres.h"

#include "access/genam.h"
#include "access/tableam.h"
#include "executor/executor.h"
#include "nodes/parsenodes.h"
#include "utils/datetime.h"
#include "utils/guc.h"
#include "utils/relcache.h"
#include "storage/proc.h"
#include "utils/wait_event.h"

#if PG_VERSION_NUM >= 160000
#include "parser/parse_relation.h"
/* The varlena macros (VARDATA, VARSIZE, ...): postgres.h's up to 15. */
#include "varatt.h"
#endif

/*
 * Memory for a GUC's extra data: 15 frees it with free(), 16 on as a
 * palloc'd chunk of its GUC context.
 */
static inline void *
RlGucMalloc(size_t size)
{
#if PG_VERSION_NUM >= 160000
	return guc_malloc(LOG, size);
#else
	return malloc(size);
#endif
}

/* 16 reports the details of a bad field through an extra argument. */
static inline int
RlDecodeDateTime(char **field, int *ftype, int nf, int *dtype, struct pg_tm *tm,
				 fsec_t *fsec, int *tzp)
{
#if PG_VERSION_NUM >= 160000
	DateTimeErrorExtra extra;

	return DecodeDateTime(field, ftype, nf, dtype, tm, fsec, tzp, &extra);
#else
	return DecodeDateTime(field, ftype, nf, dtype, tm, fsec, tzp);
#endif
}

/*
 * A range table of one relation whose columns updated_cols (offset by
 * FirstLowInvalidHeapAttributeNumber) an update changes.  From 16 they are
 * in the relation's RTEPermissionInfo; 18 also wants the unpruned
 * relations.
 */
static inline void
RlInitRangeTable(EState *estate, RangeTblEntry *rte, Bitmapset *updated_cols)
{
#if PG_VERSION_NUM >= 160000
	List	   *perminfos = NIL;
	RTEPermissionInfo *perminfo = addRTEPermissionInfo(&perminfos, rte);

	perminfo->updatedCols = updated_cols;
#if PG_VERSION_NUM >= 180000
	ExecInitRangeTable(estate, list_make1(rte), perminfos, bms_make_singleton(1));
#else
	ExecInitRangeTable(estate, list_make1(rte), perminfos);
#endif
#else
	rte->updatedCols = updated_cols;
	ExecInitRangeTable(estate, list_make1(rte));
#endif
}

/*
 * Which index entries an update needs: 15 says all or none, 16 adds
 * "summarizing indexes only" (a HOT update that changed a BRIN column).
 */
#if PG_VERSION_NUM >= 160000
typedef TU_UpdateIndexes RlUpdateIndexes;
#define RL_UPDATE_NO_INDEXES TU_None
#else
typedef bool RlUpdateIndexes;
#define RL_UPDATE_NO_INDEXES false
#endif

static inline TM_Result
RlTupleUpdate(Relation rel, ItemPointer otid, TupleTableSlot *slot, CommandId cid,
			  TM_FailureData *tmfd, LockTupleMode *lockmode, RlUpdateIndexes *update_indexes)
{
	return table_tuple_update(rel, otid, slot, cid, InvalidSnapshot, InvalidSnapshot, true,
							  tmfd, lockmode, update_indexes);
}

/* The index entries of an updated row, as table_tuple_update asked. */
static inline void
RlInsertIndexTuplesAfterUpdate(ResultRelInfo *rri, TupleTableSlot *slot, EState *estate,
							   RlUpdateIndexes update_indexes)
{
#if PG_VERSION_NUM >= 160000
	(void) ExecInsertIndexTuples(rri, slot, estate, true, false, NULL, NIL,
								 update_indexes == TU_Summarizing);
#else
	(void) ExecInsertIndexTuples(rri, slot, estate, true, false, NULL, NIL);
#endif
}

/* 18 asks whether a deferrable primary key will do (ours is not one). */
static inline Oid
RlPrimaryKeyIndex(Relation rel)
{
#if PG_VERSION_NUM >= 180000
	return RelationGetPrimaryKeyIndex(rel, false);
#else
	return RelationGetPrimaryKeyIndex(rel);
#endif
}

/* 18 takes instrumentation for EXPLAIN ANALYZE (none here). */
static inline IndexScanDesc
RlIndexBeginScan(Relation heap, Relation index, Snapshot snapshot, int nkeys)
{
#if PG_VERSION_NUM >= 180000
	return index_beginscan(heap, index, snapshot, NULL, nkeys, 0);
#else
	return index_beginscan(heap, index, snapshot, nkeys, 0);
#endif
}

/* This backend's slot in the process array: a number from 17, a field before. */
static inline int
RlMyProcNumber(void)
{
#if PG_VERSION_NUM >= 170000
	return MyProcNumber;
#else
	return MyProc->pgprocno;
#endif
}

/*
 * What pg_stat_activity shows while rl_wait sleeps: an event of its own
 * from 17, the generic "Extension" before.
 */
static inline uint32
RlWaitEventInfo(void)
{
#if PG_VERSION_NUM >= 170000
	static uint32 event = 0;

	if (event == 0)
		event = WaitEventExtensionNew("RateLimitWait");
	return event;
#else
	return PG_WAIT_EXTENSION;
#endif
}

#endif
