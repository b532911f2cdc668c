/*
 * ratelimit.c -- module initialisation, settings, the decision clock and
 * argument checks shared by every SQL entry point.
 */
#include "ratelimit.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_am_d.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type_d.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "http_guard.h"
#include "pg_compat.h"
#include "privilege_hint.h"
#include "store.h"
#include "store_shmem.h"
#include "zone.h"

PG_MODULE_MAGIC;

int			rl_table_access = RL_TABLE_ACCESS_AUTO;
int			rl_default_store = RL_DEFAULT_STORE_TABLE;

static char *rl_now_override_text = NULL;
static bool rl_now_is_overridden = false;
static TimestampTz rl_now_override_value = 0;

static const struct config_enum_entry table_access_options[] = {
	{"auto", RL_TABLE_ACCESS_AUTO, false},
	{"direct", RL_TABLE_ACCESS_DIRECT, false},
	{"spi", RL_TABLE_ACCESS_SPI, false},
	{NULL, 0, false}
};

static const struct config_enum_entry default_store_options[] = {
	{"table", RL_DEFAULT_STORE_TABLE, false},
	{"shmem", RL_DEFAULT_STORE_SHMEM, false},
	{NULL, 0, false}
};

void		_PG_init(void);

/*
 * Parses a timestamptz without raising: a GUC check hook must report bad
 * values through its return code, and at a configuration reload an error
 * would be FATAL.  PostgreSQL 15's DecodeDateTime raises for an unknown
 * time zone name rather than returning an error code, so that one error is
 * caught here; nothing it allocates outlives the call.
 */
static bool
ParseTimestampTz(const char *str, TimestampTz *result)
{
	char		workbuf[MAXDATELEN + MAXDATEFIELDS];
	char	   *field[MAXDATEFIELDS];
	int			ftype[MAXDATEFIELDS];
	int			nf;
	int			dtype = 0;
	struct pg_tm tt;
	fsec_t		fsec;
	int			tz;
	int			dterr = 0;
	MemoryContext context = CurrentMemoryContext;

	if (ParseDateTime(str, workbuf, sizeof(workbuf), field, ftype,
					  MAXDATEFIELDS, &nf) != 0)
		return false;
	PG_TRY();
	{
		dterr = RlDecodeDateTime(field, ftype, nf, &dtype, &tt, &fsec, &tz);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(context);
		FlushErrorState();
		dterr = -1;
	}
	PG_END_TRY();
	if (dterr != 0)
		return false;
	switch (dtype)
	{
		case DTK_DATE:
			return tm2timestamp(&tt, fsec, &tz, result) == 0;
		case DTK_EPOCH:
			*result = SetEpochTimestamp();
			return true;
		default:
			return false;		/* infinity and -infinity make no clock */
	}
}

static bool
CheckNowOverride(char **newval, void **extra, GucSource source)
{
	TimestampTz parsed;
	TimestampTz *stored;

	if (*newval == NULL || (*newval)[0] == '\0')
		return true;
	if (!ParseTimestampTz(*newval, &parsed))
	{
		GUC_check_errdetail("\"%s\" is not a finite timestamp with time zone.", RlMessageText(*newval));
		return false;
	}
	stored = RlGucMalloc(sizeof(TimestampTz));
	if (stored == NULL)
		return false;
	*stored = parsed;
	*extra = stored;
	return true;
}

static void
AssignNowOverride(const char *newval, void *extra)
{
	rl_now_is_overridden = (extra != NULL);
	if (extra != NULL)
		rl_now_override_value = *(TimestampTz *) extra;
}

__int128
RlIntervalTotalMicros(const Interval *interval)
{
	return (__int128) interval->time + (__int128) interval->day * USECS_PER_DAY +
		(__int128) interval->month * DAYS_PER_MONTH * USECS_PER_DAY;
}

TimestampTz
RlNow(void)
{
	if (rl_now_is_overridden)
		return rl_now_override_value;
	/* The moment of the call, not of the transaction's start. */
	return GetCurrentTimestamp();
}

void
RlRequireNotNull(FunctionCallInfo fcinfo, int argno, const char *argname)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", argname)));
}

text *
RlCheckedKey(FunctionCallInfo fcinfo, int argno, const char *argname)
{
	RlRequireNotNull(fcinfo, argno, argname);
	return RlCheckKey(PG_GETARG_TEXT_PP(argno), argname);
}

text *
RlCheckKey(text *key, const char *argname)
{
	int			len = VARSIZE_ANY_EXHDR(key);

	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be empty", argname)));
	if (len > RL_MAX_KEY_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_STRING_DATA_RIGHT_TRUNCATION),
				 errmsg("%s is too long", argname),
				 errdetail("The %s is %d bytes; the limit is %d bytes.",
						   argname, len, RL_MAX_KEY_BYTES),
				 errhint("Hash long keys, e.g. with md5(), before passing them.")));
	return key;
}

const char *
RlMessageText(const char *input)
{
	int			len = strlen(input);

	if (len <= RL_MESSAGE_INPUT_BYTES)
		return input;
	return psprintf("%.*s...", pg_mbcliplen(input, len, RL_MESSAGE_INPUT_BYTES), input);
}

const char *
RlMessageTextOfText(const text *input)
{
	int			len = VARSIZE_ANY_EXHDR(input);
	const char *bytes = VARDATA_ANY(input);

	/* Never copy the whole of a huge input only to cut it. */
	if (len <= RL_MESSAGE_INPUT_BYTES)
		return pnstrdup(bytes, len);
	return psprintf("%.*s...", pg_mbcliplen(bytes, len, RL_MESSAGE_INPUT_BYTES), bytes);
}

Oid
RlRelationOwner(Oid relid)
{
	HeapTuple	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Oid			owner;

	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for relation %u", relid);
	owner = ((Form_pg_class) GETSTRUCT(tuple))->relowner;
	ReleaseSysCache(tuple);
	return owner;
}

void
RlSpiConnectAs(Oid owner, RlSpiSession *session)
{
	GetUserIdAndSecContext(&session->save_userid, &session->save_sec_context);
	SetUserIdAndSecContext(owner, session->save_sec_context | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
}

void
RlSpiFinish(const RlSpiSession *session)
{
	SPI_finish();
	SetUserIdAndSecContext(session->save_userid, session->save_sec_context);
}

SPIPlanPtr
RlKeepPlan(SPIPlanPtr *plan, const char *sql, int nargs, Oid *argtypes)
{
	if (*plan == NULL)
	{
		SPIPlanPtr	prepared = SPI_prepare(sql, nargs, argtypes);

		if (prepared == NULL)
			elog(ERROR, "SPI_prepare failed for ratelimit statement: %s",
				 SPI_result_code_string(SPI_result));
		if (SPI_keepplan(prepared) != 0)
			elog(ERROR, "SPI_keepplan failed");
		*plan = prepared;
	}
	return *plan;
}

/* ---- the state table, looked up once per backend ---- */

static RlStateTable state_table;
static bool state_table_valid = false;

/*
 * On Citus a distributed table is an empty shell whose rows live in shards:
 * only SQL (SPI) reaches them.  Asked once per backend, not per call.
 */
static bool
IsCitusDistributed(Oid relid)
{
	Oid			argtypes[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	bool		distributed = false;

	if (!OidIsValid(get_extension_oid("citus", true)))
		return false;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args("SELECT 1 FROM pg_catalog.pg_dist_partition"
							  " WHERE logicalrelid OPERATOR(pg_catalog.=) $1",
							  1, argtypes, values, NULL, true, 1) == SPI_OK_SELECT)
		distributed = SPI_processed > 0;
	SPI_finish();
	return distributed;
}

static void
InvalidateStateTable(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == state_table.relid)
		state_table_valid = false;
}

/*
 * The library reads and writes the tables of its own version: in a database
 * whose extension is older (new binaries, ALTER EXTENSION UPDATE not run
 * yet) a column it needs is missing.
 */
void
RlRequireColumn(Oid relid, const char *column)
{
	if (get_attnum(relid, column) == InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the ratelimit extension in this database is older than its library"),
				 errdetail("Table %s has no column \"%s\".", get_rel_name(relid), column),
				 errhint("Run ALTER EXTENSION ratelimit UPDATE in this database.")));
}

const RlStateTable *
RlGetStateTable(void)
{
	if (!state_table_valid)
	{
		Oid			nsp = get_namespace_oid(RL_INTERNAL_SCHEMA, true);
		Oid			relid = OidIsValid(nsp) ? get_relname_relid("state", nsp) : InvalidOid;
		Relation	rel;

		if (!OidIsValid(relid))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_TABLE),
					 errmsg("ratelimit state table \"%s.state\" does not exist",
							RL_INTERNAL_SCHEMA),
					 errhint("Run CREATE EXTENSION ratelimit in this database, or "
							 "ALTER EXTENSION ratelimit UPDATE where an older version is installed.")));
		RlRequireColumn(relid, "refill_pending");
		rel = table_open(relid, AccessShareLock);
		state_table.relid = relid;
		state_table.owner = rel->rd_rel->relowner;
		state_table.is_heap = (rel->rd_rel->relam == HEAP_TABLE_AM_OID);
		table_close(rel, AccessShareLock);
		state_table.is_distributed = IsCitusDistributed(relid);
		state_table_valid = true;
	}
	return &state_table;
}

const RlStoreOps *
RlTableStore(void)
{
	const RlStateTable *table = RlGetStateTable();
	bool		local_heap = table->is_heap && !table->is_distributed;

	switch (rl_table_access)
	{
		case RL_TABLE_ACCESS_DIRECT:
			if (!local_heap)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("ratelimit.table_access = direct needs a local heap state table"),
						 errdetail("ratelimit.state is %s.",
								   table->is_distributed ? "distributed by Citus"
								   : "not a heap table"),
						 errhint("Set ratelimit.table_access to auto or spi.")));
			return &RlDirectStore;
		case RL_TABLE_ACCESS_SPI:
			return &RlSpiStore;
		default:
			return local_heap ? &RlDirectStore : &RlSpiStore;
	}
}

void
_PG_init(void)
{
	DefineCustomStringVariable("ratelimit.now_override",
							   "Fixes the time every rate-limit decision sees (tests only).",
							   "A timestamp with time zone; empty means the real clock.",
							   &rl_now_override_text,
							   "",
							   PGC_SUSET,
							   0,
							   CheckNowOverride,
							   AssignNowOverride,
							   NULL);

	DefineCustomEnumVariable("ratelimit.table_access",
							 "How the table store reaches its state table.",
							 "auto: the planner-free path on heap tables, SPI otherwise; "
							 "direct: always the planner-free path; spi: always SPI.",
							 &rl_table_access,
							 RL_TABLE_ACCESS_AUTO,
							 table_access_options,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);

	/* Superuser only: a fresh store is a full bucket for every key. */
	DefineCustomEnumVariable("ratelimit.default_store",
							 "Where rl_token_bucket and rl_gcra keep their state.",
							 "table: the transactional table store; shmem: shared memory "
							 "(needs ratelimit in shared_preload_libraries).",
							 &rl_default_store,
							 RL_DEFAULT_STORE_TABLE,
							 default_store_options,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);

	RlShmemInit();
	RlHttpGuardInit();
	RlPrivilegeHintInit();

	MarkGUCPrefixReserved("ratelimit");

	CacheRegisterRelcacheCallback(InvalidateStateTable, (Datum) 0);
	RlStateCacheInit();
	RlZoneCacheInit();
}
