/*
 * clock.h -- the time every decision sees, and interval arithmetic.
 */
#ifndef RL_CLOCK_H
#define RL_CLOCK_H

#include "postgres.h"

#include "utils/guc.h"
#include "utils/timestamp.h"

/* The decision clock: ratelimit.now_override when set, else the wall clock. */
extern TimestampTz RlNow(void);

/*
 * An interval's microseconds, months as 30 days (as EXTRACT(epoch) counts
 * them below a year), without overflow.
 */
extern __int128 RlIntervalTotalMicros(const Interval *interval);

/* The check and assign hooks of ratelimit.now_override (settings.c). */
extern bool RlCheckNowOverride(char **newval, void **extra, GucSource source);
extern void RlAssignNowOverride(const char *newval, void *extra);

#endif							/* RL_CLOCK_H */
