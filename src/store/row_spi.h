/*
 * row_spi.h -- the SPI path to the state table (any table access method).
 */
#ifndef RL_ROW_SPI_H
#define RL_ROW_SPI_H

#include "store/row_access.h"

extern const RlRowOps RlSpiRows;

/* Whether a statement with this text is one of the path's own (ExecutorStart). */
extern bool RlSpiRowsStatement(const char *source_text);

#endif
