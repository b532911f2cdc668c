/*
 * leases.c -- concurrency zones as SQL sees them: rl_acquire takes a slot
 * of a key and returns a lease, rl_release gives it back, and
 * ratelimit.leases() lists the leases held (the rl_leases view).
 *
 * A lease is a text, "<zone id>:<nonce>:<key>": it names the key, so that
 * rl_release finds it in one look, and its 64-bit nonce is random, so that
 * nobody releases a lease without having been given it (rl_release is
 * granted with rl_acquire, and PostgREST publishes both).
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "catalog/pg_type_d.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "api/forward.h"
#include "base/args.h"
#include "base/clock.h"
#include "base/pg_compat.h"
#include "base/spi_exec.h"
#include "decision/algorithms.h"
#include "decision/decide.h"
#include "store/shmem_leases.h"

PG_FUNCTION_INFO_V1(rl_acquire);
PG_FUNCTION_INFO_V1(rl_release);
PG_FUNCTION_INFO_V1(rl_leases);

#define LEASE_COLUMNS 9

static uint64
NewNonce(void)
{
	uint64		nonce = 0;

	while (nonce == 0)
		if (!pg_strong_random(&nonce, sizeof(nonce)))
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("could not generate a random lease id")));
	return nonce;
}

static text *
LeaseText(const RlCall *call)
{
	return cstring_to_text(psprintf("%d:%016llx:%s", call->request.key.zone_id,
									(unsigned long long) call->lease.nonce,
									text_to_cstring(call->request.key.key)));
}

/*
 * A lease lasts at most its zone's period: the zone's owner bounds how long
 * a caller may keep a slot (a 'limit' role could otherwise hold every slot
 * of another's key for a century).
 */
static void
RequireTtlWithinPeriod(const RlCall *call, int64 ttl_us)
{
	Interval	period = {.time = call->request.limit.zone.period_us};

	if (ttl_us <= call->request.limit.zone.period_us)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("ttl is longer than the period of zone \"%s\"", RlMessageText(call->what)),
			 errdetail("A lease of this zone lasts at most %s.",
					   DatumGetCString(DirectFunctionCall1(interval_out, IntervalPGetDatum(&period)))),
			 errhint("Ask for at most the zone's period, or NULL for all of it; the zone's owner sets "
					 "the period with rl_zone_set.")));
}

/* rl_acquire(zone, key, ttl DEFAULT NULL): a lease of one slot, or a refusal. */
static Datum
AcquireHere(PG_FUNCTION_ARGS)
{
	RlCall		call;
	TupleDesc	desc;
	Datum		values[LEASE_COLUMNS];
	bool		nulls[LEASE_COLUMNS] = {0};
	Interval	retry_after;
	bool		ttl_given = !PG_ARGISNULL(2);
	int64		ttl_us = 0;

	if (ttl_given)
	{
		__int128	micros = RlIntervalTotalMicros(PG_GETARG_INTERVAL_P(2));

		if (micros <= 0 || micros > RL_MAX_PERIOD_US)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("ttl must be greater than zero and at most 285 years"),
					 errhint("NULL takes the zone's period.")));
		ttl_us = (int64) micros;
	}
	RlRequireNotNull(fcinfo, 0, "zone");
	RlPrepareZoneCall(&call, PG_GETARG_TEXT_PP(0), RlCheckedKey(fcinfo, 1, "key"), 1, false);
	if (ttl_given && call.request.limit.zone.algorithm == RL_ALGORITHM_CONCURRENCY)
		RequireTtlWithinPeriod(&call, ttl_us);
	call.lease_ttl_us = ttl_given ? ttl_us : call.request.limit.zone.period_us;
	call.lease.nonce = NewNonce();
	if (call.store == RL_STORE_SHMEM_LEASES)
	{
		/* In shared memory a lease is the session's: it goes when the session ends. */
		call.lease.holder_pid = MyProcPid;
		call.lease.holder_proc = RlMyProcNumber();
		RlShmemLeasesHeldBySession();
	}
	RlAcquire(&call, "rl_acquire()");

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE || desc->natts != LEASE_COLUMNS)
		elog(ERROR, "rl_lease is not the composite type this library builds");
	desc = BlessTupleDesc(desc);
	values[0] = PointerGetDatum(LeaseText(&call));
	nulls[0] = !call.decision.allowed;
	values[1] = BoolGetDatum(call.decision.allowed);
	values[2] = Int64GetDatum(call.decision.capacity);
	values[3] = Int64GetDatum(call.decision.remaining);
	retry_after.time = call.decision.retry_after_us;
	retry_after.day = 0;
	retry_after.month = 0;
	values[4] = IntervalPGetDatum(&retry_after);
	nulls[4] = call.would_allow;
	values[5] = TimestampTzGetDatum(call.lease.expires_us);
	nulls[5] = !call.decision.allowed;
	values[6] = Int64GetDatum(call.txn_id);
	nulls[6] = !call.recorded;
	values[7] = BoolGetDatum(call.would_allow);
	values[8] = PointerGetDatum(call.zone_name);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
}

RL_CALL_WHERE_KEY_IS(rl_acquire, 1, AcquireHere)

/* Parses "<zone id>:<16 hex digits>:<key>"; false when it is not a lease. */
static bool
ParseLease(const char *lease, int32 *zone_id, uint64 *nonce, const char **key)
{
	char	   *end;
	long		id;

	errno = 0;
	id = strtol(lease, &end, 10);
	if (errno != 0 || end == lease || *end != ':' || id <= 0 || id > PG_INT32_MAX)
		return false;
	lease = end + 1;
	for (int i = 0; i < 16; i++)
		if (!isxdigit((unsigned char) lease[i]))
			return false;
	if (lease[16] != ':')
		return false;
	*nonce = strtoull(lease, NULL, 16);
	*zone_id = (int32) id;
	*key = lease + 17;
	return true;
}

/* rl_release(lease): true when the lease was held, false when it had lapsed or was released. */
Datum
rl_release(PG_FUNCTION_ARGS)
{
	char	   *lease;
	int32		zone_id;
	uint64		nonce;
	const char *key;
	char	   *zone_name;
	RlCall		call;

	RlRequireNotNull(fcinfo, 0, "lease");
	lease = text_to_cstring(PG_GETARG_TEXT_PP(0));
	if (!ParseLease(lease, &zone_id, &nonce, &key))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("\"%s\" is not a lease", RlMessageText(lease)),
				 errhint("Pass the lease column of what rl_acquire() returned.")));
	zone_name = RlZoneNameOfId(zone_id);
	/* A zone dropped since (or reset: a new id) took its leases with it. */
	if (zone_name == NULL)
		PG_RETURN_BOOL(false);
	RlPrepareZoneCall(&call, cstring_to_text(zone_name), RlCheckKey(cstring_to_text(key), "key"),
					  0, false);
	if (call.zone.zone_id != zone_id)
		PG_RETURN_BOOL(false);
	call.lease.nonce = nonce;
	RlRelease(&call, "rl_release()");
	PG_RETURN_BOOL(call.lease_released);
}

typedef struct LeaseScan
{
	ReturnSetInfo *rsinfo;
	TimestampTz now;
} LeaseScan;

static void
EmitLease(LeaseScan *scan, int32 zone_id, text *key, const RlLease *lease, const char *store)
{
	Datum		values[5];
	bool		nulls[5] = {0};

	if (lease->expires_us <= scan->now ||
		(lease->holder_pid != 0 && !RlLeaseHolderAlive(lease->holder_pid, lease->holder_proc)))
		return;
	values[0] = Int32GetDatum(zone_id);
	values[1] = PointerGetDatum(key);
	values[2] = TimestampTzGetDatum(lease->expires_us);
	values[3] = Int32GetDatum(lease->holder_pid);
	nulls[3] = lease->holder_pid == 0;
	values[4] = CStringGetTextDatum(store);
	tuplestore_putvalues(scan->rsinfo->setResult, scan->rsinfo->setDesc, values, nulls);
}

static void
EmitShmemLease(const RlShmemLeaseInfo *info, void *arg)
{
	EmitLease((LeaseScan *) arg, info->zone_id, info->key, &info->lease, "shmem");
}

/* A table-store key's leases as its transaction sees them (read callback). */
static bool
CollectLeases(const RlStateRow *prior, RlStateRow *next, void *arg, RlStateAccess *access)
{
	bytea	  **entries = (bytea **) arg;

	*entries = prior != NULL && prior->entries != NULL
		? DatumGetByteaPCopy(PointerGetDatum(prior->entries)) : NULL;
	return false;
}

/*
 * ratelimit.leases(): the leases held now, in both stores: zone id (the
 * view names the zone), key, expiry, holder session (shmem), store.  A
 * table-store key is read through the store, as rl_peek reads it: a
 * transaction sees its own acquires and releases, which the table may not
 * hold yet.  The nonces stay hidden: whoever reads the view must not
 * release them.
 */
Datum
rl_leases(PG_FUNCTION_ARGS)
{
	static SPIPlanPtr plan = NULL;
	LeaseScan	scan;
	RlSpiSession session;
	Oid			relid = RlInternalTable("state");
	MemoryContext caller = CurrentMemoryContext;
	List	   *zones = NIL;
	List	   *keys = NIL;
	ListCell   *zone_cell;
	ListCell   *key_cell;

	InitMaterializedSRF(fcinfo, 0);
	scan.rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	if (!OidIsValid(relid))
		elog(ERROR, "ratelimit state table is missing");
	RlSpiConnectAs(RlRelationOwner(relid), &session);
	if (SPI_execute_plan(RlKeepPlan(&plan,
									"SELECT z.zone, s.key FROM"
									" (SELECT key, zone_id, part FROM " RL_INTERNAL_SCHEMA ".state"
									"  UNION ALL SELECT key, zone_id, part"
									"  FROM " RL_INTERNAL_SCHEMA ".durable_state) s"
									" JOIN " RL_INTERNAL_SCHEMA ".zone z"
									" ON z.zone_id OPERATOR(pg_catalog.=) s.zone_id"
									" WHERE z.algorithm OPERATOR(pg_catalog.=) 'concurrency'"
									" AND z.store OPERATOR(pg_catalog.=) 'table'"
									" AND s.part OPERATOR(pg_catalog.=) 0",
									0, NULL),
						 NULL, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the leases of the state tables");
	for (uint64 row = 0; row < SPI_processed; row++)
	{
		HeapTuple	tuple = SPI_tuptable->vals[row];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		MemoryContext old = MemoryContextSwitchTo(caller);

		zones = lappend(zones, DatumGetTextPCopy(SPI_getbinval(tuple, desc, 1, &isnull)));
		keys = lappend(keys, DatumGetTextPCopy(SPI_getbinval(tuple, desc, 2, &isnull)));
		MemoryContextSwitchTo(old);
	}
	RlSpiFinish(&session);

	forboth(zone_cell, zones, key_cell, keys)
	{
		RlCall		call;
		bytea	   *entries = NULL;
		RlLease    *leases;
		int32		count;

		RlPrepareZoneCall(&call, (text *) lfirst(zone_cell), (text *) lfirst(key_cell), 0, false);
		RlReadKey(&call, CollectLeases, &entries);
		if (entries == NULL)
			continue;
		scan.now = call.request.now;
		leases = RlLeasesOfBytes(entries, &count);
		if (leases == NULL)
			continue;			/* corrupt: rl_reset's business, not the view's */
		for (int32 i = 0; i < count; i++)
			EmitLease(&scan, call.zone.zone_id, (text *) lfirst(key_cell), &leases[i], "table");
	}
	scan.now = RlNow();
	RlShmemScanLeases(EmitShmemLease, &scan);
	return (Datum) 0;
}
