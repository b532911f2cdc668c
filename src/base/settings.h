/*
 * settings.h -- the extension's configuration parameters (ratelimit.*).
 */
#ifndef RL_SETTINGS_H
#define RL_SETTINGS_H

#include "postgres.h"

#include "utils/guc.h"

/* ratelimit.table_access: how the table store reaches its state table */
typedef enum RlTableAccess
{
	RL_TABLE_ACCESS_AUTO,
	RL_TABLE_ACCESS_DIRECT,
	RL_TABLE_ACCESS_SPI
} RlTableAccess;

/* ratelimit.default_store: where rl_token_bucket and rl_gcra keep state */
typedef enum RlDefaultStore
{
	RL_DEFAULT_STORE_TABLE,
	RL_DEFAULT_STORE_SHMEM
} RlDefaultStore;

/* ratelimit.shmem_full_policy */
typedef enum RlShmemFullPolicy
{
	RL_SHMEM_FULL_ALLOW,
	RL_SHMEM_FULL_DENY,
	RL_SHMEM_FULL_ERROR
} RlShmemFullPolicy;

/* ratelimit.guard_error */
typedef enum RlGuardError
{
	RL_GUARD_ERROR_PGRST,
	RL_GUARD_ERROR_PT429
} RlGuardError;

extern int	rl_table_access;
extern int	rl_default_store;
extern int	rl_shmem_full_policy;
extern int	rl_trusted_proxies;
extern int	rl_proxy_header;	/* an RlProxyHeader */
extern int	rl_ipv6_prefix;
extern int	rl_guard_error;

/*
 * ratelimit.ipv6_prefix's default: express-rate-limit's, and the smallest
 * network RIPE-690 recommends giving a residential customer (a /64 is a
 * single LAN; many ISPs delegate a /56, some a /48).
 */
#define RL_DEFAULT_IPV6_PREFIX 56

/* ratelimit.proxy_header's values, also accepted as an argument. */
extern const struct config_enum_entry rl_proxy_header_options[];

/*
 * Defines the parameters but one: ratelimit.shmem_max_keys sizes the shmem
 * store, which defines it (shmem_store.c) while preloading.
 */
extern void RlDefineSettings(void);

#endif							/* RL_SETTINGS_H */
