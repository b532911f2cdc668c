/*
 * forward.c -- on Citus, a call whose key's shard is on another node is
 * sent there as one statement, SELECT r FROM <the same function>(<the same
 * arguments>) r, which Citus delegates to that node (rl_citus_setup()
 * distributes the functions by key, with force_delegation so that Citus
 * delegates them inside a transaction block too).  There the call finds
 * its shard local and decides on it, with the planner-free path and the
 * node's shared memory.
 *
 * Without this a call Citus did not delegate itself -- its key computed in
 * the statement, (rl_limit(...)).allowed, two calls in one statement, a
 * call in a PL/pgSQL expression or a transaction block -- was decided here
 * through Citus's planner: BEGIN, SELECT ... FOR UPDATE, UPDATE and COMMIT,
 * four round trips to the worker; and a shmem zone's key was refused.
 * Forwarded, it takes one (a block's own BEGIN and COMMIT aside).
 *
 * Outside a transaction block the forwarded statement commits on the
 * worker as it returns, like a call Citus delegated itself: a statement or
 * a function of the caller's that fails after the call does not take the
 * decision back (a failed request still counts).  Inside a block it is part
 * of the block's distributed transaction.  Settings such as
 * ratelimit.default_store are the worker's there.
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"

#include "api/forward.h"
#include "base/args.h"
#include "store/state_table.h"

/*
 * Citus wraps a statement run from inside a function in a transaction block
 * on the worker (BEGIN, the statement, COMMIT: three round trips) unless
 * this is off; outside a block the forwarded statement needs none.
 */
#define OPENS_BLOCK_SETTING "citus.function_opens_transaction_block"

/* > 0 while this backend runs a forwarded statement. */
static int	forward_depth = 0;

/* OPENS_BLOCK_SETTING as the caller had it, while forward_depth > 0. */
static char opens_block_before[16];

/*
 * Each function's forwarded statement, parsed once per backend (Citus plans
 * it at each call, with the call's values: it delegates a call only when
 * its key is a constant).
 */
typedef struct ForwardPlan
{
	Oid			fn_oid;
	SPIPlanPtr	plan;
} ForwardPlan;

#define MAX_FORWARD_PLANS 32
static ForwardPlan forward_plans[MAX_FORWARD_PLANS];
static int	num_forward_plans = 0;

/*
 * Whether key_arg's shard is on another node.  A key the call would refuse
 * (NULL, empty, too long) is refused here, by the call itself.
 */
static bool
KeyIsElsewhere(FunctionCallInfo fcinfo, int key_arg)
{
	text	   *key;
	int			len;

	if (PG_ARGISNULL(key_arg) || !RlGetStateTable(false)->is_distributed)
		return false;
	key = PG_GETARG_TEXT_PP(key_arg);
	len = VARSIZE_ANY_EXHDR(key);
	if (len == 0 || len > RL_MAX_KEY_BYTES)
		return false;
	/* The durable table is colocated with the state: one node holds both. */
	return !OidIsValid(RlStateRelationOfKey(key, false));
}

/* The saved plan of SELECT r FROM schema.function($1, ...) r. */
static SPIPlanPtr
ForwardPlanOf(FunctionCallInfo fcinfo)
{
	Oid			fn_oid = fcinfo->flinfo->fn_oid;
	Oid		   *argtypes;
	int			nargs;
	StringInfoData sql;
	SPIPlanPtr	plan;

	for (int i = 0; i < num_forward_plans; i++)
		if (forward_plans[i].fn_oid == fn_oid)
			return forward_plans[i].plan;

	get_func_signature(fn_oid, &argtypes, &nargs);
	if (nargs != PG_NARGS())
		elog(ERROR, "function %u takes %d arguments, called with %d", fn_oid, nargs, PG_NARGS());
	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT r FROM %s.%s(",
					 quote_identifier(get_namespace_name(get_func_namespace(fn_oid))),
					 quote_identifier(get_func_name(fn_oid)));
	for (int i = 0; i < nargs; i++)
		appendStringInfo(&sql, "%s$%d", i > 0 ? ", " : "", i + 1);
	appendStringInfoString(&sql, ") r");
	plan = SPI_prepare(sql.data, nargs, argtypes);
	if (plan == NULL)
		elog(ERROR, "could not plan \"%s\": %s", sql.data, SPI_result_code_string(SPI_result));
	if (num_forward_plans == MAX_FORWARD_PLANS)
	{
		/* Functions dropped and made again (new OIDs): start over. */
		for (int i = 0; i < num_forward_plans; i++)
			SPI_freeplan(forward_plans[i].plan);
		num_forward_plans = 0;
	}
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "could not keep the plan of \"%s\"", sql.data);
	forward_plans[num_forward_plans].fn_oid = fn_oid;
	forward_plans[num_forward_plans].plan = plan;
	num_forward_plans++;
	return plan;
}

/* Runs the forwarded statement, forward_depth counting it. */
static int
ExecuteForwarded(SPIPlanPtr plan, Datum *values, const char *nulls)
{
	volatile int rc = 0;

	forward_depth++;
	PG_TRY();
	{
		rc = SPI_execute_plan(plan, values, nulls, false, 1);
	}
	PG_FINALLY();
	{
		forward_depth--;
	}
	PG_END_TRY();
	return rc;
}

/* The function's result, as the node that holds the key returned it. */
static Datum
Forward(FunctionCallInfo fcinfo)
{
	Datum		values[FUNC_MAX_ARGS];
	char		nulls[FUNC_MAX_ARGS];
	SPIPlanPtr	plan;
	int			nest_level;
	int			rc;
	Datum		result;
	bool		isnull;
	int16		typlen;
	bool		typbyval;
	const char *caller_setting;

	for (int i = 0; i < PG_NARGS(); i++)
	{
		values[i] = fcinfo->args[i].value;
		nulls[i] = fcinfo->args[i].isnull ? 'n' : ' ';
	}
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	plan = ForwardPlanOf(fcinfo);

	nest_level = NewGUCNestLevel();
	caller_setting = GetConfigOption(OPENS_BLOCK_SETTING, true, false);
	snprintf(opens_block_before, sizeof(opens_block_before), "%s", caller_setting != NULL ? caller_setting : "on");
	(void) set_config_option(OPENS_BLOCK_SETTING, "off", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	/* A generic plan would keep the key a parameter, which Citus does not delegate. */
	(void) set_config_option("plan_cache_mode", "force_custom_plan", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	rc = ExecuteForwarded(plan, values, nulls);
	AtEOXact_GUC(true, nest_level);

	if (rc != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "the forwarded call returned %s, " UINT64_FORMAT " rows",
			 SPI_result_code_string(rc), SPI_processed);
	result = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	get_typlenbyval(SPI_gettypeid(SPI_tuptable->tupdesc, 1), &typlen, &typbyval);
	if (!isnull)
		result = SPI_datumTransfer(result, typbyval, typlen);
	SPI_finish();
	fcinfo->isnull = isnull;
	return result;
}

/*
 * Citus ran a forwarded statement here rather than delegating it (the
 * function is not distributed, or the node has no metadata): the call
 * decides here through Citus's planner, as before forwarding existed.  Its
 * row statements must then run in a transaction block on the worker (the
 * row's lock is held from SELECT ... FOR UPDATE to the UPDATE), so the
 * setting goes back to the caller's.
 */
static Datum
DecideHereInsideForward(FunctionCallInfo fcinfo, RlDecideHere decide_here)
{
	int			nest_level = NewGUCNestLevel();
	Datum		result;

	(void) set_config_option(OPENS_BLOCK_SETTING, opens_block_before, PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	result = decide_here(fcinfo);
	AtEOXact_GUC(true, nest_level);
	return result;
}

/*
 * A read-only transaction is not forwarded: Citus would run the forwarded
 * statement in a read-write transaction on the worker (it passes READ ONLY
 * on only from BEGIN READ ONLY), so the call decides here, where a table
 * write is refused (25006) as on one node.
 */
Datum
RlCallWhereKeyIs(FunctionCallInfo fcinfo, int key_arg, RlDecideHere decide_here)
{
	if (forward_depth > 0)
		return DecideHereInsideForward(fcinfo, decide_here);
	if (!XactReadOnly && KeyIsElsewhere(fcinfo, key_arg))
		return Forward(fcinfo);
	return decide_here(fcinfo);
}
