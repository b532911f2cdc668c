/*
 * state_table.h -- the table store's tables, looked up once per backend:
 * ratelimit.state (UNLOGGED) and ratelimit.durable_state (logged, for
 * zones with durable => true).  Functions take durable to say which.
 */
#ifndef RL_STATE_TABLE_H
#define RL_STATE_TABLE_H

#include "postgres.h"

typedef struct RlStateTable
{
	Oid			relid;
	Oid			owner;
	bool		is_heap;
	bool		is_distributed; /* by Citus: rows live in shards */
} RlStateTable;

/* The table's OID and properties; 42P01 with a hint when it is missing. */
extern const RlStateTable *RlGetStateTable(bool durable);

/*
 * The relation that holds key's rows on this node: the state table, or on
 * Citus the key's shard when it is placed here (share-locked against moves
 * until the transaction ends); InvalidOid when it is placed on another node.
 */
extern Oid	RlStateRelationOfKey(text *key, bool durable);

/*
 * Whether relid holds rows of a state table: one of the two tables, or on
 * Citus one of their shards placed on this node.
 */
extern bool RlIsStateRelation(Oid relid);

/* ratelimit.history, looked up again after a change to it; InvalidOid when missing. */
extern Oid	RlHistoryTable(void);

/*
 * On Citus, the shard of ratelimit.history that holds key's requests when it
 * is placed on this node (locked as above); InvalidOid otherwise (not
 * distributed, or placed elsewhere): then SQL reaches the table.
 */
extern Oid	RlHistoryShardOfKey(text *key);

extern void RlStateTableInit(void);

#endif							/* RL_STATE_TABLE_H */
