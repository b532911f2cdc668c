/*
 * spi_exec.h -- internal SQL run as the owner of the tables it touches.
 */
#ifndef RL_SPI_EXEC_H
#define RL_SPI_EXEC_H

#include "postgres.h"

#include "executor/spi.h"

/* The schema that holds internal state; never on a user's search_path. */
#define RL_INTERNAL_SCHEMA "ratelimit"

/* The OID of table name in RL_INTERNAL_SCHEMA, InvalidOid when there is none. */
extern Oid	RlInternalTable(const char *name);

/* The owner of a relation: internal SQL runs as it. */
extern Oid	RlRelationOwner(Oid relid);

/*
 * Internal statements run through SPI as the owner of the table they touch,
 * so callers need no privilege on it; RlSpiFinish restores the caller.
 */
typedef struct RlSpiSession
{
	Oid			save_userid;
	int			save_sec_context;
} RlSpiSession;

extern void RlSpiConnectAs(Oid owner, RlSpiSession *session);
extern void RlSpiFinish(const RlSpiSession *session);

/* Prepares sql into *plan once per backend (a plan kept across transactions). */
extern SPIPlanPtr RlKeepPlan(SPIPlanPtr *plan, const char *sql, int nargs, Oid *argtypes);

#endif							/* RL_SPI_EXEC_H */
