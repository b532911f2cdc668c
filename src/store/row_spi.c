/*
 * row_spi.c -- the portable path to the state table: SPI with plans
 * prepared once per backend.
 *
 * Works on any table access method (YugabyteDB's DocDB tables, Citus
 * shards) because it only issues SQL.  fetch takes the row lock with
 * SELECT ... FOR UPDATE, so replace never loses a race; insert relies on
 * ON CONFLICT DO NOTHING.  Every name and operator is schema-qualified, and
 * the statements run as the state table's owner so that callers need no
 * privilege on it.
 */
#include "postgres.h"

#include "catalog/pg_type_d.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/plancache.h"

#include "base/spi_exec.h"
#include "store/row_spi.h"
#include "store/state_table.h"

typedef enum SpiStatement
{
	SPI_FETCH_FOR_UPDATE,
	SPI_PEEK,
	SPI_INSERT,
	SPI_REPLACE,
	SPI_REMOVE,
	SPI_STATEMENT_COUNT
} SpiStatement;

#define WHERE_KEY " WHERE key OPERATOR(pg_catalog.=) $1 AND zone_id OPERATOR(pg_catalog.=) $2" \
	" AND part OPERATOR(pg_catalog.=) $3 AND params OPERATOR(pg_catalog.=) $4"
#define ROW_COLUMNS "tokens, token_fraction, updated_at, counter, entries, refill_pending"

/* The statements on one of the two state tables (TABLE: its qualified name). */
#define STATE_STATEMENTS(TABLE) { \
	[SPI_FETCH_FOR_UPDATE] = "SELECT " ROW_COLUMNS " FROM " TABLE WHERE_KEY " FOR UPDATE", \
	[SPI_PEEK] = "SELECT " ROW_COLUMNS " FROM " TABLE WHERE_KEY, \
	[SPI_INSERT] = \
	"INSERT INTO " TABLE " (key, zone_id, part, params, " ROW_COLUMNS ")" \
	" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (key, zone_id, part, params) DO NOTHING", \
	[SPI_REPLACE] = \
	"UPDATE " TABLE " SET tokens = $5, token_fraction = $6, updated_at = $7," \
	" counter = $8, entries = $9, refill_pending = $10" WHERE_KEY, \
	[SPI_REMOVE] = "DELETE FROM " TABLE WHERE_KEY, \
}

/* Indexed by durable: ratelimit.state, then ratelimit.durable_state. */
static const char *const statement_sql[2][SPI_STATEMENT_COUNT] = {
	STATE_STATEMENTS(RL_INTERNAL_SCHEMA ".state"),
	STATE_STATEMENTS(RL_INTERNAL_SCHEMA ".durable_state"),
};

static const int statement_nargs[SPI_STATEMENT_COUNT] = {
	[SPI_FETCH_FOR_UPDATE] = 4,[SPI_PEEK] = 4,[SPI_INSERT] = 10,[SPI_REPLACE] = 10,[SPI_REMOVE] = 4,
};

static SPIPlanPtr saved_plans[2][SPI_STATEMENT_COUNT];

/* Connects to SPI as the state table's owner. */
static void *
SpiBegin(void)
{
	RlSpiSession *session = palloc(sizeof(RlSpiSession));

	RlSpiConnectAs(RlGetStateTable(false)->owner, session);
	return session;
}

static void
SpiEnd(void *handle)
{
	RlSpiFinish(handle);
	pfree(handle);
}

/* Runs one statement; returns SPI_processed, copying a fetched row to *out. */
static uint64
RunStatement(SpiStatement which, const RlStateKey *key, const RlStateRow *in, RlStateRow *out)
{
	static Oid	argtypes[10] = {TEXTOID, INT4OID, INT4OID, TEXTOID, INT8OID, FLOAT8OID,
	TIMESTAMPTZOID, INT8OID, BYTEAOID, BOOLOID};
	Datum		values[10];
	char		nulls[10] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	uint64		processed;
	int			rc;

	values[0] = PointerGetDatum(key->key);
	values[1] = Int32GetDatum(key->zone_id);
	values[2] = Int32GetDatum(key->part);
	values[3] = PointerGetDatum(RlStateKeyParams(key));
	if (in != NULL)
	{
		values[4] = Int64GetDatum(in->tokens);
		values[5] = Float8GetDatum(in->fraction);
		values[6] = TimestampTzGetDatum(in->stamp);
		values[7] = Int64GetDatum(in->counter);
		values[8] = PointerGetDatum(in->entries);
		if (in->entries == NULL)
			nulls[8] = 'n';
		/* NULL, not false: only rows the refill job must visit are indexed. */
		values[9] = BoolGetDatum(true);
		if (!in->refill_pending)
			nulls[9] = 'n';
	}

	/*
	 * Not read-only: at READ COMMITTED each statement takes a new snapshot,
	 * so rows read after FOR UPDATE locked a newer head row are as new.
	 */
	rc = SPI_execute_plan(RlKeepPlan(&saved_plans[key->durable][which],
									 statement_sql[key->durable][which],
									 statement_nargs[which], argtypes),
						  values, nulls, false, 0);
	if (rc < 0)
		elog(ERROR, "ratelimit statement failed: %s", SPI_result_code_string(rc));
	processed = SPI_processed;

	if (out != NULL && processed > 0)
	{
		bool		isnull;
		HeapTuple	tuple = SPI_tuptable->vals[0];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		Datum		entries;

		out->tokens = DatumGetInt64(SPI_getbinval(tuple, desc, 1, &isnull));
		out->fraction = DatumGetFloat8(SPI_getbinval(tuple, desc, 2, &isnull));
		out->stamp = DatumGetTimestampTz(SPI_getbinval(tuple, desc, 3, &isnull));
		out->counter = DatumGetInt64(SPI_getbinval(tuple, desc, 4, &isnull));
		entries = SPI_getbinval(tuple, desc, 5, &isnull);
		/* Outlives SPI_finish: copied into the caller's context. */
		out->entries = isnull ? NULL
			: (bytea *) SPI_datumTransfer(PointerGetDatum(PG_DETOAST_DATUM(entries)), false, -1);
		out->refill_pending = DatumGetBool(SPI_getbinval(tuple, desc, 6, &isnull)) && !isnull;
	}
	SPI_freetuptable(SPI_tuptable);
	return processed;
}

static bool
SpiFetch(void *handle, const RlStateKey *key, RlFetchMode mode, RlStateRow *row, RlRowRef *ref)
{
	bool		peek = (mode == RL_FETCH_PEEK);
	bool		found = RunStatement(peek ? SPI_PEEK : SPI_FETCH_FOR_UPDATE, key, NULL, row) > 0;

	ItemPointerSetInvalid(&ref->tid);
	ref->locked = found && !peek;
	return found;
}

static bool
SpiInsert(void *handle, const RlStateKey *key, const RlStateRow *row, RlRowRef *ref)
{
	bool		inserted = RunStatement(SPI_INSERT, key, row, NULL) > 0;

	ItemPointerSetInvalid(&ref->tid);
	/* Our uncommitted insert blocks every other writer of the key. */
	ref->locked = inserted;
	return inserted;
}

static bool
SpiReplace(void *handle, const RlStateKey *key, const RlStateRow *row, RlRowRef *ref)
{
	bool		replaced = RunStatement(SPI_REPLACE, key, row, NULL) > 0;

	ref->locked = replaced;
	return replaced;
}

static bool
SpiRemove(void *handle, const RlStateKey *key)
{
	return RunStatement(SPI_REMOVE, key, NULL, NULL) > 0;
}

/*
 * SPI runs a kept plan with its plan source's copy of the query text as the
 * statement's text: the same pointer each time, and never a user's.
 */
bool
RlSpiRowsStatement(const char *source_text)
{
	for (int durable = 0; durable < 2; durable++)
		for (int which = 0; which < SPI_STATEMENT_COUNT; which++)
		{
			SPIPlanPtr	plan = saved_plans[durable][which];
			CachedPlanSource *source;

			if (plan == NULL)
				continue;
			source = linitial(SPI_plan_get_plan_sources(plan));
			if (source->query_string == source_text)
				return true;
		}
	return false;
}

const RlRowOps RlSpiRows = {
	.name = "spi",
	.begin = SpiBegin,
	.end = SpiEnd,
	.fetch = SpiFetch,
	.insert = SpiInsert,
	.replace = SpiReplace,
	.remove = SpiRemove,
};
