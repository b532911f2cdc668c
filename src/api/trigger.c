/*
 * trigger.c -- rl_limit_trigger(): rate-limits row inserts and updates.
 *
 *   CREATE TRIGGER ... BEFORE INSERT OR UPDATE ON t FOR EACH ROW
 *       EXECUTE FUNCTION rl_limit_trigger('zone', 'key_column' [, 'cost_column']);
 *
 * Each row is one rl_limit() call on the zone, keyed by the column's text
 * form; a row over the limit raises RL_SQLSTATE_RATE_LIMITED, others pass
 * unchanged.  Calls on one key within a statement go through the
 * transaction cache, so a bulk INSERT ... SELECT stays linear.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type_d.h"
#include "commands/trigger.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "base/args.h"
#include "decision/decide.h"

/* What a row over the limit raises: "RL429", the HTTP status it means. */
#define RL_SQLSTATE_RATE_LIMITED MAKE_SQLSTATE('R', 'L', '4', '2', '9')

PG_FUNCTION_INFO_V1(rl_limit_trigger);

static void
TriggerUsageError(const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
			 errmsg("rl_limit_trigger() is misused"),
			 errdetail("%s", detail),
			 errhint("CREATE TRIGGER ... BEFORE INSERT OR UPDATE ON t FOR EACH ROW "
					 "EXECUTE FUNCTION rl_limit_trigger('zone', 'key_column' [, 'cost_column']).")));
}

/* The user column named name, by attribute number. */
static int
ColumnNumber(Relation rel, const char *name)
{
	TupleDesc	desc = RelationGetDescr(rel);

	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(desc, i);

		if (!attr->attisdropped && strcmp(NameStr(attr->attname), name) == 0)
			return i + 1;
	}
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_COLUMN),
			 errmsg("column \"%s\" of relation \"%s\" does not exist",
					RlMessageText(name), RelationGetRelationName(rel)),
			 errcontext("rl_limit_trigger() on relation \"%s\"", RelationGetRelationName(rel))));
	return 0;					/* not reached */
}

static int64
RowCost(Relation rel, HeapTuple tuple, const char *column)
{
	TupleDesc	desc = RelationGetDescr(rel);
	int			attnum = ColumnNumber(rel, column);
	Oid			type = TupleDescAttr(desc, attnum - 1)->atttypid;
	bool		isnull;
	Datum		value = heap_getattr(tuple, attnum, desc, &isnull);

	if (type != INT2OID && type != INT4OID && type != INT8OID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("cost column \"%s\" must be smallint, integer or bigint", RlMessageText(column))));
	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("cost column \"%s\" must not be null", RlMessageText(column))));
	return type == INT2OID ? DatumGetInt16(value)
		: type == INT4OID ? DatumGetInt32(value) : DatumGetInt64(value);
}

/* The key column's value in its text form, as rl_limit would be given it. */
static text *
RowKey(Relation rel, HeapTuple tuple, const char *column)
{
	TupleDesc	desc = RelationGetDescr(rel);
	int			attnum = ColumnNumber(rel, column);
	bool		isnull;
	Datum		value = heap_getattr(tuple, attnum, desc, &isnull);
	Oid			output;
	bool		varlena;

	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("key column \"%s\" must not be null", RlMessageText(column)),
				 errhint("A row without a key cannot be counted against a limit.")));
	getTypeOutputInfo(TupleDescAttr(desc, attnum - 1)->atttypid, &output, &varlena);
	return cstring_to_text(OidOutputFunctionCall(output, value));
}

static char *
SecondsText(int64 micros)
{
	return psprintf("%.3f s", (double) micros / USECS_PER_SEC);
}

Datum
rl_limit_trigger(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	Trigger    *trigger;
	HeapTuple	tuple;
	text	   *key;
	int64		cost = 1;
	RlCall		call;

	if (!CALLED_AS_TRIGGER(fcinfo))
		TriggerUsageError("It was not called as a trigger.");
	if (!TRIGGER_FIRED_BEFORE(trigdata->tg_event) || !TRIGGER_FIRED_FOR_ROW(trigdata->tg_event) ||
		!(TRIGGER_FIRED_BY_INSERT(trigdata->tg_event) || TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event)))
		TriggerUsageError("It must be fired BEFORE INSERT or UPDATE, FOR EACH ROW.");
	trigger = trigdata->tg_trigger;
	if (trigger->tgnargs < 2 || trigger->tgnargs > 3)
		TriggerUsageError("It takes a zone, a key column and optionally a cost column.");

	tuple = TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event) ? trigdata->tg_newtuple
		: trigdata->tg_trigtuple;
	key = RowKey(trigdata->tg_relation, tuple, trigger->tgargs[1]);
	if (trigger->tgnargs == 3)
		cost = RowCost(trigdata->tg_relation, tuple, trigger->tgargs[2]);

	RlPrepareZoneCall(&call, cstring_to_text(trigger->tgargs[0]), RlCheckKey(key, "key"), cost, true);
	RlTake(&call, "rl_limit_trigger()");
	if (!call.decision.allowed)
		ereport(ERROR,
				(errcode(RL_SQLSTATE_RATE_LIMITED),
				 call.decision.retry_after_us >= 0
				 ? errmsg("rate limit of zone \"%s\" exceeded for key \"%s\": retry after %s",
						  RlMessageText(trigger->tgargs[0]), RlMessageTextOfText(key),
						  SecondsText(call.decision.retry_after_us))
				 : errmsg("rate limit of zone \"%s\" exceeded for key \"%s\": no refill is scheduled",
						  RlMessageText(trigger->tgargs[0]), RlMessageTextOfText(key)),
				 errdetail("The row's cost is " INT64_FORMAT "; " INT64_FORMAT " of " INT64_FORMAT
						   " remain.", cost, call.decision.remaining, call.decision.capacity),
				 errtable(trigdata->tg_relation)));
	return PointerGetDatum(tuple);
}
