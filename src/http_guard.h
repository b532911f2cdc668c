/*
 * http_guard.h -- settings and helpers of the PostgREST guard.
 */
#ifndef RL_HTTP_GUARD_H
#define RL_HTTP_GUARD_H

extern void RlHttpGuardInit(void);

#endif
