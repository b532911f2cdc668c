/*
 * row_hint.h -- where the direct path last found each key's row: a
 * backend-local hint that lets a lookup skip the primary key's index.
 */
#ifndef RL_ROW_HINT_H
#define RL_ROW_HINT_H

#include "storage/itemptr.h"
#include "utils/relcache.h"

#include "store/store.h"

/* The root TID last seen for key's row in rel; false when there is none. */
extern bool RlRowHintGet(Relation rel, const RlStateKey *key, ItemPointer tid);

/* Remembers tid as the root of key's row in rel (what its index entry points to). */
extern void RlRowHintSet(Relation rel, const RlStateKey *key, ItemPointer tid);

/* Forgets key's hint in rel: its row is gone. */
extern void RlRowHintForget(Relation rel, const RlStateKey *key);

/* Whether rel's block is below the size rel had once locked in this (sub)transaction. */
extern bool RlRowHintBlockExists(Relation rel, BlockNumber block);

#endif
