/*
 * drop_extension.c -- removes the pg_cron refill jobs when DROP EXTENSION ratelimit runs.
 *
 * An event trigger that belongs to the extension is gone by the end of the
 * extension's own drop, so this one acts at ddl_command_start, and reads
 * the statement itself (not the query text) to tell whether ratelimit is
 * among the extensions dropped.  The removal is part of the dropping
 * transaction: a DROP that fails keeps the jobs.
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "commands/event_trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "nodes/parsenodes.h"
#include "utils/lsyscache.h"

PG_FUNCTION_INFO_V1(rl_drop_refill_jobs);

static bool
DropsRatelimit(Node *parsetree)
{
	DropStmt   *drop;
	ListCell   *cell;

	if (parsetree == NULL || !IsA(parsetree, DropStmt))
		return false;
	drop = (DropStmt *) parsetree;
	if (drop->removeType != OBJECT_EXTENSION)
		return false;
	foreach(cell, drop->objects)
	{
		Node	   *object = lfirst(cell);

		if (IsA(object, String) && strcmp(strVal(object), "ratelimit") == 0)
			return true;
	}
	return false;
}

Datum
rl_drop_refill_jobs(PG_FUNCTION_ARGS)
{
	EventTriggerData *trigdata;
	bool		installed;

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		elog(ERROR, "rl_drop_refill_jobs() must be called as an event trigger");
	trigdata = (EventTriggerData *) fcinfo->context;
	if (!DropsRatelimit(trigdata->parsetree))
		PG_RETURN_VOID();

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");

	/*
	 * Only pg_cron's own schema (a member of the extension): a schema named
	 * cron that anyone with CREATE on the database made must not run as the
	 * superuser dropping us.
	 */
	if (SPI_execute("SELECT 1 FROM pg_catalog.pg_depend d"
					" JOIN pg_catalog.pg_extension e ON e.oid OPERATOR(pg_catalog.=) d.refobjid"
					" JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) d.objid"
					" WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_namespace'::pg_catalog.regclass"
					" AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass"
					" AND d.deptype OPERATOR(pg_catalog.=) 'e'"
					" AND e.extname OPERATOR(pg_catalog.=) 'pg_cron'"
					" AND n.nspname OPERATOR(pg_catalog.=) 'cron'",
					true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not look for pg_cron");
	installed = SPI_processed > 0;
	/* The jobs ratelimit.cron_job_name names: the prefix and a zone id. */
	if (installed && SPI_execute("SELECT pg_catalog.count(cron.unschedule(jobid)) FROM cron.job"
					" WHERE jobname OPERATOR(pg_catalog.~) '^ratelimit_refill:[0-9]+$'"
					" AND database OPERATOR(pg_catalog.=) pg_catalog.current_database()",
					false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not remove the ratelimit refill jobs");
	SPI_finish();
	PG_RETURN_VOID();
}
