/*
 * wait_lines.h -- the lines rl_wait's callers wait in, one per key, in
 * shared memory (with ratelimit in shared_preload_libraries): waiters on a
 * key are served in arrival order, and whoever gives tokens back wakes the
 * first of them.  Without the preload there are no lines: each waiter
 * tries again when its tokens are due, in no particular order.
 */
#ifndef RL_WAIT_LINES_H
#define RL_WAIT_LINES_H

#include "postgres.h"

/* A key's line: a hash of the database, the zone and the key. */
typedef uint64 RlWaitLine;

extern RlWaitLine RlWaitLineOf(int32 zone_id, const text *key);

/* Whether lines exist (the preload); without them every call below does nothing. */
extern bool RlWaitLinesExist(void);

/* Whether anybody waits in the line (a caller that finds none may go first). */
extern bool RlWaitLineBusy(RlWaitLine line);

/*
 * Joins the line at its end.  A backend is in at most one line; it leaves
 * it with RlWaitLineLeave, or by exiting.
 */
extern void RlWaitLineJoin(RlWaitLine line);

/* Whether this backend is first in its line (true when it is in none). */
extern bool RlWaitLineFirst(void);

/* Leaves the line (if in one) and wakes whoever is first in it now. */
extern void RlWaitLineLeave(void);

/* Wakes the first waiter of the line, if any: tokens came back. */
extern void RlWaitLineWake(RlWaitLine line);

/*
 * Wakes the line's first waiter when the transaction commits (tokens a
 * table zone gives back are nobody's before then), or at once when
 * at_commit is false.
 */
extern void RlWaitLineWakeAfter(RlWaitLine line, bool at_commit);

extern void RlWaitLinesRequest(void);
extern void RlWaitLinesStartup(void);

#endif							/* RL_WAIT_LINES_H */
