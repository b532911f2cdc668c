/*
 * privilege_hint.h -- the grant hint on permission errors.
 */
#ifndef RL_PRIVILEGE_HINT_H
#define RL_PRIVILEGE_HINT_H

extern void RlPrivilegeHintInit(void);

#endif
