/*
 * row_direct.h -- the planner-free path to the state table (heap tables only).
 */
#ifndef RL_ROW_DIRECT_H
#define RL_ROW_DIRECT_H

#include "store/row_access.h"

extern const RlRowOps RlDirectRows;

#endif
