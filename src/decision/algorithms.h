/*
 * algorithms.h -- the core's algorithms (src/core) over stored rows: the
 * decide callbacks a store runs on a key's row.  arg is the RlCall.
 */
#ifndef RL_ALGORITHMS_H
#define RL_ALGORITHMS_H

#include "decision/decide.h"

/* rl_token_bucket's ad-hoc bucket. */
extern bool RlDecideTokenBucket(const RlStateRow *prior, RlStateRow *next, void *arg,
								RlStateAccess *access);

/* Every zone algorithm whose state is one fixed-size row (and rl_gcra). */
extern bool RlDecideCounter(const RlStateRow *prior, RlStateRow *next, void *arg,
							RlStateAccess *access);

/*
 * The exact sliding window: a head row plus sealed chunks of its log in
 * parts; needs call->window and call->window_result.
 */
extern bool RlDecideSlidingWindow(const RlStateRow *prior, RlStateRow *next, void *arg,
								  RlStateAccess *access);

/* Writes the chunks a sliding-window decision sealed or emptied. */
extern void RlApplyChunkChanges(const RlCall *call, const RlStore *store);

/* Deletes the chunks of a forgotten sliding window whose head row was removed. */
extern void RlForgetChunks(const RlCall *call, const RlStore *store, const RlStateRow *removed);

#endif							/* RL_ALGORITHMS_H */
