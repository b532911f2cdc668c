/*
 * row_hint.h -- where the direct path last found each key's row: a
 * backend-local hint that lets a lookup skip the primary key's index.
 */
#ifndef RL_ROW_HINT_H
#define RL_ROW_HINT_H

#include "storage/itemptr.h"
#include "utils/relcache.h"

#include "store/store.h"

/*
 * Where key's row in rel was last seen: the root of its chain of versions
 * (what its index entry points to) and the newest version this backend
 * found or wrote.  False when there is no hint.
 */
extern bool RlRowHintGet(Relation rel, const RlStateKey *key, ItemPointer root,
						 ItemPointer newest);

/* Remembers the root of key's row in rel and its newest version. */
extern void RlRowHintSet(Relation rel, const RlStateKey *key, ItemPointer root,
						 ItemPointer newest);

/* Remembers a newer version of key's row, in the chain the hint's root starts. */
extern void RlRowHintSetNewest(Relation rel, const RlStateKey *key, ItemPointer newest);

/* Forgets key's hint in rel: its row is gone. */
extern void RlRowHintForget(Relation rel, const RlStateKey *key);

/* Whether rel has block: below a size rel is known to have at least (row_hint.c). */
extern bool RlRowHintBlockExists(Relation rel, BlockNumber block);

#endif
