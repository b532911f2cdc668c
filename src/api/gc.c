/*
 * gc.c -- rl_gc(): deletes table-store state that no decision needs.
 *
 * A key whose state has fully recovered decides every later call exactly as
 * a key never seen, so deleting its rows changes no decision.  The scan
 * reads without locking; each delete names the row's values as read, so a
 * row that a concurrent call changed in between is not deleted (at READ
 * COMMITTED the delete re-checks them on the newest version), and a row a
 * call holds locked waits for that call's transaction.
 *
 * rl_token_bucket's buckets (zone 0, one per id and parameters) and
 * rl_gcra's (zone -1) are not judged by a zone's limit: they are removed
 * only when max_window is given and they were last written longer ago than
 * that (a bucket refills completely within its window).  Rows of a dropped
 * zone are removed whatever they hold, and so are rows left in the table a
 * zone's keys moved out of (rl_zone_set's durable).  Both state tables are
 * swept: ratelimit.state, then ratelimit.durable_state.
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type_d.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "base/clock.h"
#include "base/pg_compat.h"
#include "base/spi_exec.h"
#include "core/rl_core.h"
#include "decision/algorithms.h"
#include "decision/zone.h"
#include "store/state_table.h"
#include "store/table_cache.h"

PG_FUNCTION_INFO_V1(rl_gc);

#define GC_BATCH 1000

/* The statements on each state table, indexed by durable. */
#define FOR_EACH_STATE_TABLE(STATEMENT) \
	{STATEMENT(RL_INTERNAL_SCHEMA ".state"), STATEMENT(RL_INTERNAL_SCHEMA ".durable_state")}

/* A dropped zone's rows, every part. */
#define DELETE_ORPHAN(TABLE) "DELETE FROM " TABLE \
	" WHERE key OPERATOR(pg_catalog.=) $1 AND zone_id OPERATOR(pg_catalog.=) $2"
/* The head row, if it still holds what was read. */
#define DELETE_HEAD(TABLE) "DELETE FROM " TABLE \
	" WHERE key OPERATOR(pg_catalog.=) $1 AND zone_id OPERATOR(pg_catalog.=) $2" \
	" AND part OPERATOR(pg_catalog.=) 0 AND tokens OPERATOR(pg_catalog.=) $3" \
	" AND token_fraction OPERATOR(pg_catalog.=) $4 AND updated_at OPERATOR(pg_catalog.=) $5" \
	" AND counter OPERATOR(pg_catalog.=) $6" \
	" AND (($7 IS NULL AND entries IS NULL) OR entries OPERATOR(pg_catalog.=) $7)" \
	" AND params OPERATOR(pg_catalog.=) $8"
/* A sliding window's sealed chunks. */
#define DELETE_PARTS(TABLE) "DELETE FROM " TABLE \
	" WHERE key OPERATOR(pg_catalog.=) $1 AND zone_id OPERATOR(pg_catalog.=) $2" \
	" AND part OPERATOR(pg_catalog.<>) 0"
/* Every head row, with its zone's name (NULL: dropped). */
#define SCAN_HEADS(TABLE) "SELECT s.key, s.zone_id, s.tokens, s.token_fraction," \
	" s.updated_at, s.counter, s.entries, z.zone, s.params" \
	" FROM " TABLE " s LEFT JOIN " RL_INTERNAL_SCHEMA ".zone z" \
	" ON z.zone_id OPERATOR(pg_catalog.=) s.zone_id" \
	" WHERE s.part OPERATOR(pg_catalog.=) 0" \
	" AND ($1 IS NULL OR s.zone_id OPERATOR(pg_catalog.=) $1)"

static const char *const delete_orphan_sql[2] = FOR_EACH_STATE_TABLE(DELETE_ORPHAN);
static const char *const delete_head_sql[2] = FOR_EACH_STATE_TABLE(DELETE_HEAD);
static const char *const delete_parts_sql[2] = FOR_EACH_STATE_TABLE(DELETE_PARTS);
static const char *const scan_heads_sql[2] = FOR_EACH_STATE_TABLE(SCAN_HEADS);

typedef struct GcRow
{
	text	   *key;
	int32		zone_id;
	bool		durable;		/* read from ratelimit.durable_state */
	text	   *params;			/* an ad-hoc bucket's parameters; '' for zones */
	RlStateRow	row;
	char	   *zone_name;		/* NULL: the zone is gone */
} GcRow;

static bool
RowIdle(const GcRow *r, TimestampTz now, bool has_max_window, int64 max_window_us)
{
	RlZone		zone;

	/* A clock behind the row decides at the row's time, a new key at now. */
	if (r->row.stamp > now)
		return false;
	if (r->zone_id == RL_ZONE_ID_TOKEN_BUCKET || r->zone_id == RL_ZONE_ID_GCRA)
		return has_max_window && (__int128) now - r->row.stamp >= max_window_us;
	if (r->zone_name == NULL)
		return true;			/* orphan: no zone reads it */

	RlLookupZone(cstring_to_text(r->zone_name), &zone);
	if (zone.store != RL_STORE_TABLE || zone.zone_id != r->zone_id)
		return false;			/* changed since the scan: next time */
	if (zone.durable != r->durable)
		return true;			/* in the table the zone's keys left: no call reads it */
	if (zone.limit.algorithm == RL_ALGORITHM_SLIDING_WINDOW)
	{
		RlSlidingWindowState window;

		if (r->row.entries == NULL ||
			!rl_sw_decode_header((const uint8_t *) VARDATA_ANY(r->row.entries),
								 VARSIZE_ANY_EXHDR(r->row.entries), r->row.tokens,
								 r->row.stamp, &window))
			return false;		/* corrupt: rl_reset's business */
		return rl_sw_idle(&zone.limit, &window, now);
	}
	else if (zone.limit.algorithm == RL_ALGORITHM_CONCURRENCY)
	{
		/* Only once every lease has lapsed: a held lease is a slot taken. */
		int32		count;
		RlLease    *leases = RlLeasesOfBytes(r->row.entries, &count);

		if (leases == NULL)
			return false;		/* corrupt: rl_reset's business */
		return rl_leases_idle(leases, count, now);
	}
	else
	{
		RlCounterState state = {r->row.tokens, r->row.fraction, r->row.stamp, r->row.counter};

		return rl_counter_idle(&zone.limit, &state, now);
	}
}

/* Deletes the key's head row if it still holds what was read; then its chunks. */
static bool
DeleteKey(const GcRow *r)
{
	static SPIPlanPtr head_plans[2];
	static SPIPlanPtr orphan_plans[2];
	static SPIPlanPtr parts_plans[2];
	Oid			head_types[8] = {TEXTOID, INT4OID, INT8OID, FLOAT8OID, TIMESTAMPTZOID,
	INT8OID, BYTEAOID, TEXTOID};
	Datum		values[8];
	char		nulls[8] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};

	values[0] = PointerGetDatum(r->key);
	values[1] = Int32GetDatum(r->zone_id);
	if (r->zone_name == NULL && r->zone_id > 0)
	{
		/* A dropped zone's rows, every part. */
		if (SPI_execute_plan(RlKeepPlan(&orphan_plans[r->durable], delete_orphan_sql[r->durable],
										2, head_types),
							 values, nulls, false, 0) != SPI_OK_DELETE)
			elog(ERROR, "ratelimit gc delete failed");
		return SPI_processed > 0;
	}

	values[2] = Int64GetDatum(r->row.tokens);
	values[3] = Float8GetDatum(r->row.fraction);
	values[4] = TimestampTzGetDatum(r->row.stamp);
	values[5] = Int64GetDatum(r->row.counter);
	values[6] = PointerGetDatum(r->row.entries);
	if (r->row.entries == NULL)
		nulls[6] = 'n';
	values[7] = PointerGetDatum(r->params);
	if (SPI_execute_plan(RlKeepPlan(&head_plans[r->durable], delete_head_sql[r->durable],
									8, head_types),
						 values, nulls, false, 0) != SPI_OK_DELETE)
		elog(ERROR, "ratelimit gc delete failed");
	if (SPI_processed == 0)
		return false;			/* changed (or gone) since the scan */
	if (r->row.entries != NULL)
	{
		/* A sliding window's sealed chunks: all expired with the head. */
		if (SPI_execute_plan(RlKeepPlan(&parts_plans[r->durable], delete_parts_sql[r->durable],
										2, head_types),
							 values, nulls, false, 0) != SPI_OK_DELETE)
			elog(ERROR, "ratelimit gc delete failed");
	}
	return true;
}

static void
ReadGcRow(HeapTuple tuple, TupleDesc desc, bool durable, GcRow *r)
{
	bool		isnull;
	Datum		zone;
	Datum		entries;

	r->key = DatumGetTextPCopy(SPI_getbinval(tuple, desc, 1, &isnull));
	r->zone_id = DatumGetInt32(SPI_getbinval(tuple, desc, 2, &isnull));
	r->durable = durable;
	r->row.tokens = DatumGetInt64(SPI_getbinval(tuple, desc, 3, &isnull));
	r->row.fraction = DatumGetFloat8(SPI_getbinval(tuple, desc, 4, &isnull));
	r->row.stamp = DatumGetTimestampTz(SPI_getbinval(tuple, desc, 5, &isnull));
	r->row.counter = DatumGetInt64(SPI_getbinval(tuple, desc, 6, &isnull));
	entries = SPI_getbinval(tuple, desc, 7, &isnull);
	r->row.entries = isnull ? NULL : DatumGetByteaPCopy(entries);
	r->row.refill_pending = false;
	zone = SPI_getbinval(tuple, desc, 8, &isnull);
	r->zone_name = isnull ? NULL : TextDatumGetCString(zone);
	r->params = DatumGetTextPCopy(SPI_getbinval(tuple, desc, 9, &isnull));
}

/*
 * rl_gc(zone text DEFAULT NULL, max_window interval DEFAULT NULL): removes
 * the state of every key that has fully recovered (of one zone, or of all
 * and of dropped zones); returns how many keys it removed.
 */
Datum
rl_gc(PG_FUNCTION_ARGS)
{
	text	   *only_zone = PG_ARGISNULL(0) ? NULL : PG_GETARG_TEXT_PP(0);
	bool		has_max_window = !PG_ARGISNULL(1);
	int64		max_window_us = 0;
	TimestampTz now;
	RlSpiSession session;
	Oid			argtypes[1] = {INT4OID};
	Datum		values[1];
	char		nulls[1] = {' '};
	int64		removed = 0;
	MemoryContext batch_context;

	if (has_max_window)
	{
		Interval   *window = PG_GETARG_INTERVAL_P(1);
		__int128	micros = RlIntervalTotalMicros(window);

		if (micros < 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("max_window must not be negative")));
		/* Longer than any clock reading: no bucket is that old. */
		max_window_us = micros > PG_INT64_MAX ? PG_INT64_MAX : (int64) micros;
	}
	/* The transaction cache would write back rows deleted under it. */
	if (RlStateCacheInUse())
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("rl_gc() must run in a transaction that has made no rate-limit call"),
				 errhint("Run rl_gc() in a transaction of its own.")));
	PreventCommandIfReadOnly("rl_gc()");

	values[0] = Int32GetDatum(0);
	if (only_zone != NULL)
	{
		RlZone		zone;

		RlLookupZone(only_zone, &zone);
		values[0] = Int32GetDatum(zone.zone_id);
	}
	else
		nulls[0] = 'n';

	now = RlNow();
	batch_context = AllocSetContextCreate(CurrentMemoryContext, "rl_gc batch",
										  ALLOCSET_DEFAULT_SIZES);
	RlSpiConnectAs(RlGetStateTable(false)->owner, &session);
	for (int durable = 0; durable < 2; durable++)
	{
		Portal		portal;

		/* Before ALTER EXTENSION ratelimit UPDATE to 0.6.0 there is no durable table. */
		if (durable && !OidIsValid(RlInternalTable("durable_state")))
			break;
		portal = SPI_cursor_open_with_args(NULL, scan_heads_sql[durable],
										   1, argtypes, values, nulls, true, 0);
		for (;;)
		{
			SPITupleTable *batch;
			uint64		count;

			SPI_cursor_fetch(portal, true, GC_BATCH);
			batch = SPI_tuptable;
			count = SPI_processed;
			if (count == 0)
				break;
			for (uint64 i = 0; i < count; i++)
			{
				MemoryContext old = MemoryContextSwitchTo(batch_context);
				GcRow		r;
				bool		idle;

				ReadGcRow(batch->vals[i], batch->tupdesc, durable, &r);
				idle = RowIdle(&r, now, has_max_window, max_window_us);
				MemoryContextSwitchTo(old);
				if (idle && DeleteKey(&r))
					removed++;
				MemoryContextReset(batch_context);
			}
			SPI_freetuptable(batch);
			CHECK_FOR_INTERRUPTS();
		}
		SPI_cursor_close(portal);
	}
	RlSpiFinish(&session);
	MemoryContextDelete(batch_context);
	PG_RETURN_INT64(removed);
}
