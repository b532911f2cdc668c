/*
 * forward.h -- on Citus, a call whose key is held by another node is sent
 * to that node as one statement, which Citus delegates there.
 */
#ifndef RL_FORWARD_H
#define RL_FORWARD_H

#include "postgres.h"

#include "fmgr.h"

/* The call decided on this node: the SQL function's body. */
typedef Datum (*RlDecideHere) (FunctionCallInfo fcinfo);

/*
 * Runs the SQL function where its key (argument key_arg) lives: here when
 * the state table is not distributed or the key's shard is placed on this
 * node, else forwarded to the node that holds the shard.
 */
extern Datum RlCallWhereKeyIs(FunctionCallInfo fcinfo, int key_arg, RlDecideHere decide_here);

/* The SQL function name, whose body decide_here is, keyed by argument key_arg. */
#define RL_CALL_WHERE_KEY_IS(name, key_arg, decide_here) \
	Datum \
	name(PG_FUNCTION_ARGS) \
	{ \
		return RlCallWhereKeyIs(fcinfo, key_arg, decide_here); \
	}

#endif							/* RL_FORWARD_H */
