/*
 * store_spi.c -- the portable path to the state table: SPI with plans
 * prepared once per backend.
 *
 * Works on any table access method (YugabyteDB's DocDB tables, Citus
 * shards) because it only issues SQL.  fetch takes the row lock with
 * SELECT ... FOR UPDATE, so replace never loses a race; insert relies on
 * ON CONFLICT DO NOTHING.  Every name and operator is schema-qualified, and
 * the statements run as the state table's owner so that callers need no
 * privilege on it.
 */
#include "ratelimit.h"

#include "catalog/pg_type_d.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"

#include "store.h"

typedef enum SpiStatement
{
	SPI_FETCH,
	SPI_INSERT,
	SPI_REPLACE,
	SPI_STATEMENT_COUNT
} SpiStatement;

static const char *const statement_sql[SPI_STATEMENT_COUNT] = {
	[SPI_FETCH] =
	"SELECT tokens, token_fraction, updated_at FROM " RL_INTERNAL_SCHEMA ".token_bucket"
	" WHERE id OPERATOR(pg_catalog.=) $1 FOR UPDATE",
	[SPI_INSERT] =
	"INSERT INTO " RL_INTERNAL_SCHEMA ".token_bucket (id, tokens, token_fraction, updated_at)"
	" VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO NOTHING",
	[SPI_REPLACE] =
	"UPDATE " RL_INTERNAL_SCHEMA ".token_bucket"
	" SET tokens = $2, token_fraction = $3, updated_at = $4"
	" WHERE id OPERATOR(pg_catalog.=) $1",
};

static const int statement_nargs[SPI_STATEMENT_COUNT] = {
	[SPI_FETCH] = 1,[SPI_INSERT] = 4,[SPI_REPLACE] = 4,
};

static SPIPlanPtr saved_plans[SPI_STATEMENT_COUNT];

typedef struct SpiSession
{
	Oid			save_userid;
	int			save_sec_context;
} SpiSession;

/* Connects to SPI as the state table's owner. */
static void *
SpiBegin(void)
{
	SpiSession *session = palloc(sizeof(SpiSession));

	GetUserIdAndSecContext(&session->save_userid, &session->save_sec_context);
	SetUserIdAndSecContext(RlGetStateTable()->owner,
						   session->save_sec_context | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	return session;
}

static void
SpiEnd(void *handle)
{
	SpiSession *session = handle;

	SPI_finish();
	SetUserIdAndSecContext(session->save_userid, session->save_sec_context);
	pfree(session);
}

/* Runs one statement; returns SPI_processed, copying a fetched row to *out. */
static uint64
RunStatement(SpiStatement which, text *key, const RlStateRow *in, RlStateRow *out)
{
	static Oid	argtypes[4] = {TEXTOID, INT8OID, FLOAT8OID, TIMESTAMPTZOID};
	Datum		values[4];
	uint64		processed;
	int			rc;

	values[0] = PointerGetDatum(key);
	if (in != NULL)
	{
		values[1] = Int64GetDatum(in->tokens);
		values[2] = Float8GetDatum(in->fraction);
		values[3] = TimestampTzGetDatum(in->stamp);
	}

	if (saved_plans[which] == NULL)
	{
		SPIPlanPtr	plan = SPI_prepare(statement_sql[which], statement_nargs[which], argtypes);

		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed for ratelimit statement: %s",
				 SPI_result_code_string(SPI_result));
		if (SPI_keepplan(plan) != 0)
			elog(ERROR, "SPI_keepplan failed");
		saved_plans[which] = plan;
	}

	rc = SPI_execute_plan(saved_plans[which], values, NULL, false, 0);
	if (rc < 0)
		elog(ERROR, "ratelimit statement failed: %s", SPI_result_code_string(rc));
	processed = SPI_processed;

	if (out != NULL && processed > 0)
	{
		bool		isnull;

		HeapTuple	tuple = SPI_tuptable->vals[0];
		TupleDesc	desc = SPI_tuptable->tupdesc;

		out->tokens = DatumGetInt64(SPI_getbinval(tuple, desc, 1, &isnull));
		out->fraction = DatumGetFloat8(SPI_getbinval(tuple, desc, 2, &isnull));
		out->stamp = DatumGetTimestampTz(SPI_getbinval(tuple, desc, 3, &isnull));
	}
	SPI_freetuptable(SPI_tuptable);
	return processed;
}

static bool
SpiFetch(void *handle, text *key, RlStateRow *row, RlRowRef *ref)
{
	bool		found = RunStatement(SPI_FETCH, key, NULL, row) > 0;

	ItemPointerSetInvalid(&ref->tid);
	ref->locked = found;
	return found;
}

static bool
SpiInsert(void *handle, text *key, const RlStateRow *row, RlRowRef *ref)
{
	bool		inserted = RunStatement(SPI_INSERT, key, row, NULL) > 0;

	ItemPointerSetInvalid(&ref->tid);
	/* Our uncommitted insert blocks every other writer of the key. */
	ref->locked = inserted;
	return inserted;
}

static bool
SpiReplace(void *handle, text *key, const RlStateRow *row, RlRowRef *ref)
{
	bool		replaced = RunStatement(SPI_REPLACE, key, row, NULL) > 0;

	ref->locked = replaced;
	return replaced;
}

const RlStoreOps RlSpiStore = {
	.name = "spi",
	.begin = SpiBegin,
	.end = SpiEnd,
	.fetch = SpiFetch,
	.insert = SpiInsert,
	.replace = SpiReplace,
};
