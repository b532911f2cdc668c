/*
 * spi_exec.c -- internal SQL through SPI, as the owner of the extension's
 * tables: callers need EXECUTE on a function, never a privilege on a table.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "miscadmin.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "base/spi_exec.h"

Oid
RlInternalTable(const char *name)
{
	Oid			nsp = get_namespace_oid(RL_INTERNAL_SCHEMA, true);

	return OidIsValid(nsp) ? get_relname_relid(name, nsp) : InvalidOid;
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
