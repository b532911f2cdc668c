/*
 * store.h -- the one interface to where a key's state is kept.
 *
 * The decision layer (decision/decide*.c) hands a store a key and an
 * algorithm (a decide callback); the store runs the algorithm on the key's
 * state and keeps the result, atomically with respect to concurrent calls.
 * Three stores implement it:
 *   - the table store on the planner-free path (row_direct.c),
 *   - the table store through SPI (row_spi.c), for any table access method,
 *     both behind the transaction's write-back cache (table_store.c);
 *   - the shmem store (shmem_store.c), shared memory, not transactional.
 * RlStoreOf picks one; nothing above this layer branches on the store.
 */
#ifndef RL_STORE_H
#define RL_STORE_H

#include "postgres.h"

#include "utils/timestamp.h"

#include "core/rl_core.h"

/* Where a zone keeps its state. */
typedef enum RlStoreKind
{
	RL_STORE_TABLE,
	RL_STORE_SHMEM,
	RL_STORE_SHMEM_LEASES		/* a concurrency zone's keys in shared memory */
} RlStoreKind;

/*
 * Which row: a key's state in a zone (zone_id 0 is rl_token_bucket's ad-hoc
 * buckets, -1 rl_gcra's), part 0 its head row; the exact sliding window
 * keeps sealed chunks of its log in parts 1 and up.  An ad-hoc bucket is
 * named by its parameters too ("rate:window", see token_bucket.c): a call
 * with other parameters has a bucket of its own.  The table's primary key
 * is (key, zone_id, part, params): every row of a key shards with the key
 * (Citus routes by the key alone).
 */
typedef struct RlStateKey
{
	text	   *key;
	int32		zone_id;
	int32		part;
	text	   *params;			/* NULL for every row but an ad-hoc bucket's ('' stored) */
	bool		durable;		/* in ratelimit.durable_state, not ratelimit.state */
} RlStateKey;

/* The longest params an ad-hoc bucket has: two float8s' shortest text and ':'. */
#define RL_MAX_PARAMS_BYTES 64

/* The params column of key's row: '' unless the key has parameters. */
extern text *RlStateKeyParams(const RlStateKey *key);

/* A 64-bit hash of key's row in relation relid (key, zone, part, params). */
extern uint64 RlStateKeyHash(Oid relid, const RlStateKey *key);

/* Whether two texts hold the same bytes (equality under the "C" collation). */
extern bool RlSameText(const text *a, const text *b);

#define RL_ZONE_ID_TOKEN_BUCKET 0
#define RL_ZONE_ID_GCRA (-1)

/* The stored state of one row; each algorithm gives the fields a meaning. */
typedef struct RlStateRow
{
	int64		tokens;
	double		fraction;
	TimestampTz stamp;
	int64		counter;
	bytea	   *entries;		/* NULL when the column is NULL */
	bool		refill_pending; /* cron refill: below capacity (false is stored as NULL) */
} RlStateRow;

/*
 * How a decision reads other rows (parts) of its key.  Stores whose
 * algorithms keep one row pass NULL.
 */
typedef struct RlStateAccess RlStateAccess;
struct RlStateAccess
{
	/* Reads part of the key being decided; false when it has none. */
	bool		(*read_part) (RlStateAccess *access, int32 part, RlStateRow *row);
};

/*
 * Computes the new state from the prior one (NULL for a new key).  Returns
 * whether *next must be stored.  May read parts through access; writes
 * nothing (a decision can be computed again on a newer row).
 */
typedef bool (*RlDecideFn) (const RlStateRow *prior, RlStateRow *next, void *arg,
							RlStateAccess *access);

/* The limit a key is decided with: how the shmem store tells it is idle. */
typedef struct RlKeyLimit
{
	bool		is_bucket;		/* rl_token_bucket's ad-hoc bucket */
	RlZoneLimit zone;
	RlTokenBucketLimit bucket;
} RlKeyLimit;

/* One decision's request to a store. */
typedef struct RlStoreCall
{
	RlStateKey	key;
	RlKeyLimit	limit;
	TimestampTz now;
	/*
	 * decide reads parts: the head row is locked before it runs, since only
	 * the holder of that lock changes them (else a concurrent change makes
	 * decide run again).
	 */
	bool		lock_first;
	/*
	 * RlZoneGeneration() when the zone was looked up (0: no zone): the table
	 * store checks that the zone still keeps its keys in the table it was
	 * given, after waiting for that table's lock.
	 */
	uint64		zone_generation;
	/* Where locate found the key (the shmem store's hash and set). */
	uint64		located_hash;
	uint32		located_set;
} RlStoreCall;

typedef enum RlStoreOutcome
{
	RL_STORE_DECIDED,			/* decided, and stored if it changed */
	RL_STORE_NO_ROOM			/* a new key found no room: decided, nothing stored */
} RlStoreOutcome;

/*
 * Whether a decision taken together may stand (every key's decide has run):
 * called with the store's keys held, so it must not raise errors.
 */
typedef bool (*RlAdmitFn) (void *admit_arg);

typedef struct RlStore
{
	const char *name;

	/* Writes go to tables (WAL): refused in a read-only transaction. */
	bool		writes_tables;

	/*
	 * A refused decision may keep the key locked until the transaction
	 * ends (SPI decides on a row read FOR UPDATE): a caller that sleeps
	 * after a refusal must undo it first.  Otherwise only a decision that
	 * locks first (lock_first) keeps a lock when it refuses.
	 */
	bool		refusal_may_lock;

	/*
	 * Starts finding the key, as early as it is known; raises nothing.
	 * NULL where there is nothing to start.
	 */
	void		(*locate) (RlStoreCall *call);

	/* Runs decide on the key's state and keeps what it returns. */
	RlStoreOutcome (*update) (RlStoreCall *call, RlDecideFn decide, void *arg);

	/*
	 * Decides n keys as one (rl_limit over several zones).  First each key
	 * is held: a key without state is stored as hold makes it (the state of
	 * a key never seen, which decides as no state does).  Then, with every
	 * key held at once, decide runs on each (args[i] its arg), and the new
	 * states are kept only if admit returns true; returns what admit said.  A key that
	 * found no room to be held gets outcomes[i] = RL_STORE_NO_ROOM and
	 * nothing is decided (returns false).
	 */
	bool		(*update_together) (RlStoreCall **calls, void **args, int n, RlDecideFn decide,
									RlDecideFn hold, RlAdmitFn admit, void *admit_arg,
									RlStoreOutcome *outcomes);

	/* Runs decide on the key's state (this transaction's included); keeps nothing. */
	void		(*read) (RlStoreCall *call, RlDecideFn decide, void *arg);

	/*
	 * Forgets the key's head row; *removed gets its latest state.  False
	 * when the key had no state.
	 */
	bool		(*remove) (const RlStateKey *key, RlStateRow *removed);

	/*
	 * Writes or deletes a part of a key whose head row the caller holds
	 * locked.  NULL where no algorithm keeps parts.
	 */
	void		(*write_part) (const RlStateKey *key, const RlStateRow *row);
	bool		(*remove_part) (const RlStateKey *key);

	/* Forgets every key of a dropped zone (the table store: its cached copies). */
	void		(*forget_zone) (int32 zone_id);

	/* A zone's limit changed: its keys are judged under the new one. */
	void		(*relimit_zone) (int32 zone_id, const RlZoneLimit *limit);

	/*
	 * Makes this transaction's cached changes of the zone visible to SQL
	 * and re-reads them before their next use (rl_cron_refill).
	 */
	void		(*flush_zone) (int32 zone_id);

	/*
	 * What a call gets when update found no room for its new key
	 * (ratelimit.shmem_full_policy); NULL for stores that never run out.
	 * what names the zone or function in messages.
	 */
	void		(*no_room) (RlDecision *decision, const char *what);
} RlStore;

/*
 * The store of that kind for key; the table store's path by
 * ratelimit.table_access and where the key's rows are (Citus).
 */
extern const RlStore *RlStoreForKey(RlStoreKind kind, const RlStateKey *key);

/* The store of that kind, for what concerns a whole zone. */
extern const RlStore *RlStoreOf(RlStoreKind kind);

#endif							/* RL_STORE_H */
