/*
 * zone_admin.c -- what the zone table's SQL calls in C: the definition
 * check of rl_zone_set, the trigger that tells every backend a zone
 * changed, the stores' part of dropping a zone and of a cron refill, and
 * the decision clock the refill is metered by.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/rel.h"

#include "base/clock.h"
#include "base/spi_exec.h"
#include "decision/decide.h"
#include "decision/zone.h"
#include "store/shmem_store.h"

PG_FUNCTION_INFO_V1(rl_check_zone);
PG_FUNCTION_INFO_V1(rl_zone_changed);
PG_FUNCTION_INFO_V1(rl_zones_changed);
PG_FUNCTION_INFO_V1(rl_forget_zone_state);
PG_FUNCTION_INFO_V1(rl_flush_zone_state);
PG_FUNCTION_INFO_V1(rl_clock);

/* ratelimit.check_zone(algorithm, rate, period, burst, store) */
Datum
rl_check_zone(PG_FUNCTION_ARGS)
{
	RlZoneLimit limit;
	const char *store = PG_ARGISNULL(4) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(4));

	RlCheckZoneDefinition(PG_ARGISNULL(0) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(0)),
						PG_ARGISNULL(1) ? NULL : PG_GETARG_NUMERIC(1),
						PG_ARGISNULL(2) ? NULL : PG_GETARG_INTERVAL_P(2),
						PG_ARGISNULL(3), PG_ARGISNULL(3) ? 0 : PG_GETARG_INT64(3),
						store, &limit);
	/* A zone that every call would fail on is refused now, not at its first call. */
	if (strcmp(store, "shmem") == 0)
		RlRequireShmemStore();
	PG_RETURN_VOID();
}

static Datum
ColumnOf(TriggerData *trigdata, const char *name, bool *isnull)
{
	TupleDesc	desc = RelationGetDescr(trigdata->tg_relation);
	int			attnum = SPI_fnumber(desc, name);

	if (attnum <= 0)
		elog(ERROR, "ratelimit.zone has no column \"%s\"", name);
	return heap_getattr(trigdata->tg_newtuple, attnum, desc, isnull);
}

/* An altered shmem zone: its entries are judged idle under the new limit. */
static void
RelimitShmemEntries(TriggerData *trigdata)
{
	bool		isnull;
	bool		burst_null;
	Datum		store = ColumnOf(trigdata, "store", &isnull);
	Datum		burst;
	RlZoneLimit limit;

	if (isnull || strcmp(TextDatumGetCString(store), "shmem") != 0)
		return;
	burst = ColumnOf(trigdata, "burst", &burst_null);
	RlCheckZoneDefinition(TextDatumGetCString(ColumnOf(trigdata, "algorithm", &isnull)),
						DatumGetNumeric(ColumnOf(trigdata, "rate", &isnull)),
						DatumGetIntervalP(ColumnOf(trigdata, "period", &isnull)),
						burst_null, burst_null ? 0 : DatumGetInt64(burst), "shmem", &limit);
	RlRelimitZoneState(RL_STORE_SHMEM, DatumGetInt32(ColumnOf(trigdata, "zone_id", &isnull)), &limit);
}

/*
 * A zone id new to the table (a new zone, or a reset one) starts with no
 * counts and no shmem keys.  An id is never handed out twice in one CREATE
 * EXTENSION's life, so what is there belongs to a zone of a dropped
 * extension (whose ids started at 1 too).  An id that leaves the table (a
 * reset or dropped zone) takes its shmem keys with it, on every node where
 * the trigger fires (on Citus: every node holding the zone table).  Not
 * transactional, as the counters and the shmem store.
 */
static void
ZoneIdsChanged(TriggerData *trigdata)
{
	TupleDesc	desc = RelationGetDescr(trigdata->tg_relation);
	int			attnum = SPI_fnumber(desc, "zone_id");
	bool		old_null = true;
	bool		new_null = true;
	Datum		old_id = (Datum) 0;
	Datum		new_id = (Datum) 0;

	if (attnum <= 0)
		elog(ERROR, "ratelimit.zone has no column \"zone_id\"");
	if (TRIGGER_FIRED_BY_INSERT(trigdata->tg_event))
		new_id = heap_getattr(trigdata->tg_trigtuple, attnum, desc, &new_null);
	else if (TRIGGER_FIRED_BY_DELETE(trigdata->tg_event))
		old_id = heap_getattr(trigdata->tg_trigtuple, attnum, desc, &old_null);
	else
	{
		old_id = heap_getattr(trigdata->tg_trigtuple, attnum, desc, &old_null);
		new_id = heap_getattr(trigdata->tg_newtuple, attnum, desc, &new_null);
		if (!old_null && !new_null && DatumGetInt32(old_id) == DatumGetInt32(new_id))
			return;
	}
	if (!old_null)
		RlRetireZoneId(DatumGetInt32(old_id));
	if (!new_null)
		RlStartZoneIdAfresh(DatumGetInt32(new_id));
}

/*
 * Every session of this node drops its zone cache at commit.  The sessions
 * watch ratelimit.zone; on Citus the change is made in the table's shards
 * (where the trigger fires), and on a coordinator that holds no shard of it
 * nothing fires at all: rl_zone_set and rl_zone_drop announce it here.
 */
static void
AnnounceZoneChange(void)
{
	Oid			zone_table = RlInternalTable("zone");

	if (OidIsValid(zone_table))
		CacheInvalidateRelcacheByRelid(zone_table);
}

/* ratelimit.zones_changed() */
Datum
rl_zones_changed(PG_FUNCTION_ARGS)
{
	AnnounceZoneChange();
	PG_RETURN_VOID();
}

/* Trigger on ratelimit.zone (or its shard on Citus). */
Datum
rl_zone_changed(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("ratelimit.zone_changed() must be called as a trigger")));
	CacheInvalidateRelcacheByRelid(RelationGetRelid(trigdata->tg_relation));
	AnnounceZoneChange();
	if (TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event) && TRIGGER_FIRED_FOR_ROW(trigdata->tg_event))
		RelimitShmemEntries(trigdata);
	if (TRIGGER_FIRED_FOR_ROW(trigdata->tg_event))
		ZoneIdsChanged(trigdata);
	return PointerGetDatum(NULL);
}

/* ratelimit.forget_zone_state(zone_id) */
Datum
rl_forget_zone_state(PG_FUNCTION_ARGS)
{
	RlForgetZoneState(PG_GETARG_INT32(0));
	PG_RETURN_VOID();
}

/*
 * ratelimit.flush_zone_state(zone_id): this transaction's cached changes of
 * the zone go to the table now, and are read back after the caller's
 * statement changed them (rl_cron_refill).
 */
Datum
rl_flush_zone_state(PG_FUNCTION_ARGS)
{
	RlFlushZoneState(PG_GETARG_INT32(0));
	PG_RETURN_VOID();
}

/*
 * ratelimit.clock(): the time a decision would be taken at now (the test
 * clock, ratelimit.now_override, when a superuser set it).
 */
Datum
rl_clock(PG_FUNCTION_ARGS)
{
	PG_RETURN_TIMESTAMPTZ(RlNow());
}
