/*
 * state_statements.c -- the statements of a transaction, other than the
 * table store's own, that reach a state table while the transaction cache
 * (table_cache.c) holds copies of its rows.
 *
 * The cache trusts each copy because the transaction holds the row's lock,
 * and writes it back at commit where it left the row (the direct path: by
 * its place).  But a statement of the same transaction passes that lock: a
 * DELETE or UPDATE moves or removes the row, TRUNCATE gives the table a new
 * file, and a SELECT reads what the copies have not written yet.  So before
 * such a statement starts, the changed copies are written back and every
 * copy is read again before its next use (a row then gone is a key without
 * state).  The statement runs under a snapshot that sees what was written.
 *
 * The executor's statements are recognised by their range tables.  Utility
 * statements (TRUNCATE, COPY, LOCK, ALTER TABLE, CLUSTER, ...) are not
 * examined: all flush but transaction control, SET and SHOW, and those that
 * reach tables only through the executor (flushed there).  While the
 * transaction has no cached row -- every transaction that made no table
 * store call -- each hook costs one flag test.
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/executor.h"
#include "nodes/parsenodes.h"
#include "tcop/utility.h"
#include "utils/snapmgr.h"

#include "store/row_spi.h"
#include "store/state_statements.h"
#include "store/state_table.h"
#include "store/table_cache.h"

static ExecutorStart_hook_type prev_executor_start = NULL;
static ProcessUtility_hook_type prev_process_utility = NULL;

/*
 * Set while a flush (or the look-up of the tables before it) runs: its own
 * statements -- the SPI path's writes, Citus's shard map, a user's trigger
 * on the table -- must not flush again.
 */
static bool flushing = false;

static bool
ReachesStateTable(List *rtable)
{
	ListCell   *cell;

	foreach(cell, rtable)
	{
		RangeTblEntry *rte = lfirst_node(RangeTblEntry, cell);

		if (rte->rtekind == RTE_RELATION && RlIsStateRelation(rte->relid))
			return true;
	}
	return false;
}

/*
 * Whether a utility statement may reach a state table other than through
 * the executor.  Savepoints keep working on the cache's undo stack.
 */
static bool
UtilityMayReachStateTable(Node *stmt)
{
	switch (nodeTag(stmt))
	{
		case T_TransactionStmt:
		case T_VariableSetStmt:
		case T_VariableShowStmt:
			return false;
			/* Their queries start the executor (and CALL, DO may commit). */
		case T_ExecuteStmt:
		case T_DeclareCursorStmt:
		case T_ExplainStmt:
		case T_CreateTableAsStmt:
		case T_CallStmt:
		case T_DoStmt:
			return false;
		case T_CopyStmt:
			return ((CopyStmt *) stmt)->query == NULL;
		default:
			return true;
	}
}

/*
 * Writes the cached copies back and marks them to be read again, for a
 * utility statement or a query whose range table reaches a state table
 * (unless it is one of the SPI path's own).  Rows written move the command
 * counter.
 */
static void
Flush(List *rtable, const char *source_text, bool utility)
{
	flushing = true;
	PG_TRY();
	{
		if (utility ||
			(ReachesStateTable(rtable) && !RlSpiRowsStatement(source_text)))
			RlCacheFlushAll();
	}
	PG_FINALLY();
	{
		flushing = false;
	}
	PG_END_TRY();
}

/*
 * A copy of snapshot that also sees the rows the flush just wrote, when
 * snapshot was current before it (a read-only function's query runs on its
 * caller's older snapshot: left as it is); InvalidSnapshot when there is
 * none to make.
 * Without it the statement would see the rows' old versions, and an UPDATE
 * or DELETE of them would fail as changed by a later command.  Left active
 * (the caller pops it).
 */
static Snapshot
PushSnapshotSeeingFlush(Snapshot snapshot, CommandId before)
{
	if (snapshot == InvalidSnapshot || snapshot->curcid != before)
		return InvalidSnapshot;
	PushCopiedSnapshot(snapshot);
	UpdateActiveSnapshotCommandId();
	return GetActiveSnapshot();
}

static void
StartExecutor(QueryDesc *queryDesc, int eflags)
{
	if (RlStateCacheInUse() && !flushing)
	{
		CommandId	before = GetCurrentCommandId(false);

		Flush(queryDesc->plannedstmt->rtable, queryDesc->sourceText, false);
		if (GetCurrentCommandId(false) != before)
		{
			Snapshot	seeing = PushSnapshotSeeingFlush(queryDesc->snapshot, before);

			if (seeing != InvalidSnapshot)
			{
				/* The query desc holds its snapshot registered (CreateQueryDesc). */
				UnregisterSnapshot(queryDesc->snapshot);
				queryDesc->snapshot = RegisterSnapshot(seeing);
				PopActiveSnapshot();
			}
		}
	}
	if (prev_executor_start)
		prev_executor_start(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);
}

static void
ProcessUtilityFlushing(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
					   ProcessUtilityContext context, ParamListInfo params,
					   QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc)
{
	Snapshot	seeing = InvalidSnapshot;

	if (RlStateCacheInUse() && !flushing && UtilityMayReachStateTable(pstmt->utilityStmt))
	{
		CommandId	before = GetCurrentCommandId(false);

		Flush(NIL, NULL, true);
		/* COPY ... TO reads the table under the active snapshot. */
		if (GetCurrentCommandId(false) != before && ActiveSnapshotSet())
			seeing = PushSnapshotSeeingFlush(GetActiveSnapshot(), before);
	}
	if (prev_process_utility)
		prev_process_utility(pstmt, queryString, readOnlyTree, context, params, queryEnv,
							 dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params, queryEnv,
								dest, qc);
	if (seeing != InvalidSnapshot)
		PopActiveSnapshot();
}

void
RlStateStatementsInit(void)
{
	prev_executor_start = ExecutorStart_hook;
	ExecutorStart_hook = StartExecutor;
	prev_process_utility = ProcessUtility_hook;
	ProcessUtility_hook = ProcessUtilityFlushing;
}
