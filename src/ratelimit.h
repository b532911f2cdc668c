/*
 * ratelimit.h -- declarations shared by the PostgreSQL side of ratelimit.
 */
#ifndef RATELIMIT_H
#define RATELIMIT_H

#include "postgres.h"

#include "executor/spi.h"
#include "utils/timestamp.h"

/* Keys longer than this are refused; it keeps every key indexable. */
#define RL_MAX_KEY_BYTES 1024

/* What rl_limit_trigger raises for a row over the limit. */
#define RL_SQLSTATE_RATE_LIMITED MAKE_SQLSTATE('R', 'L', '4', '2', '9')

/* The schema that holds internal state; never on a user's search_path. */
#define RL_INTERNAL_SCHEMA "ratelimit"

/* ratelimit.table_access */
typedef enum RlTableAccess
{
	RL_TABLE_ACCESS_AUTO,
	RL_TABLE_ACCESS_DIRECT,
	RL_TABLE_ACCESS_SPI
} RlTableAccess;

extern int	rl_table_access;

/* ratelimit.default_store: where rl_token_bucket and rl_gcra keep state */
typedef enum RlDefaultStore
{
	RL_DEFAULT_STORE_TABLE,
	RL_DEFAULT_STORE_SHMEM
} RlDefaultStore;

extern int	rl_default_store;

/*
 * An interval's microseconds, months as 30 days (as EXTRACT(epoch) counts
 * them below a year), without overflow.
 */
extern __int128 RlIntervalTotalMicros(const Interval *interval);

/* The decision clock: ratelimit.now_override when set, else the wall clock. */
extern TimestampTz RlNow(void);

/* Refuses NULL, empty and over-long keys with a precise SQLSTATE. */
extern text *RlCheckedKey(FunctionCallInfo fcinfo, int argno, const char *argname);
/* A key that is not empty and not too long (errors name it argname). */
extern text *RlCheckKey(text *key, const char *argname);

/*
 * An input as an error message may show it: at most RL_MESSAGE_INPUT_BYTES
 * bytes, cut at a character boundary, "..." when cut.  A message never
 * echoes unbounded input.
 */
#define RL_MESSAGE_INPUT_BYTES 128
extern const char *RlMessageText(const char *input);
extern const char *RlMessageTextOfText(const text *input);

/* Raises 22004 when a required argument is NULL. */
extern void RlRequireNotNull(FunctionCallInfo fcinfo, int argno, const char *argname);

/* The owner of a relation: internal SQL runs as it. */
extern Oid	RlRelationOwner(Oid relid);
extern void RlRequireColumn(Oid relid, const char *column);

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

/* Transaction-scoped state cache (state_cache.c). */
extern void RlStateCacheInit(void);

#endif							/* RATELIMIT_H */
