/*
 * state_statements.h -- other statements on the state tables in a
 * transaction with cached rows (state_statements.c).
 */
#ifndef RL_STATE_STATEMENTS_H
#define RL_STATE_STATEMENTS_H

/* Installs the executor and utility hooks (_PG_init). */
extern void RlStateStatementsInit(void);

#endif							/* RL_STATE_STATEMENTS_H */
