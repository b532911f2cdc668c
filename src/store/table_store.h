/*
 * table_store.h -- the table store: per-key state in ratelimit.state,
 * transactional, with a write-back cache for keys a transaction repeats.
 */
#ifndef RL_TABLE_STORE_H
#define RL_TABLE_STORE_H

#include "store/store.h"

/* Through the planner-free path (heap tables) and through SPI (any table). */
extern const RlStore RlTableDirectStore;
extern const RlStore RlTableSpiStore;

#endif							/* RL_TABLE_STORE_H */
