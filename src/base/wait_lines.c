/*
 * wait_lines.c -- the lines rl_wait's callers wait in (wait_lines.h).
 *
 * A slot per backend says which line it waits in and when it arrived; the
 * first of a line is the waiting slot with the smallest arrival.  One
 * LWLock covers the slots: they are touched only by waiters (when they
 * arrive, when their tokens are due, when they leave) and by calls that
 * give tokens back to a key somebody waits for, never by a call that goes
 * through at once.  Such a call reads one counter of waiters per bucket of
 * lines and finds it zero.
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/memutils.h"

#include "base/key_hash.h"
#include "base/pg_compat.h"
#include "base/wait_lines.h"

#define BUSY_BUCKETS 1024
#define NO_LINE 0

typedef struct WaitSlot
{
	RlWaitLine	line;			/* NO_LINE: not waiting */
	uint64		arrival;
} WaitSlot;

typedef struct WaitLines
{
	uint64		next_arrival;
	int			nslots;
	pg_atomic_uint32 waiters[BUSY_BUCKETS]; /* per bucket of lines: how many wait */
	WaitSlot	slots[FLEXIBLE_ARRAY_MEMBER];	/* by process number */
} WaitLines;

static WaitLines *lines = NULL;
static LWLock *lines_lock = NULL;

/* The line this backend waits in; NO_LINE when none. */
static RlWaitLine my_line = NO_LINE;
static bool leave_at_exit = false;

/* Lines to wake when the transaction commits. */
static RlWaitLine *pending_wakes = NULL;
static int	npending = 0;
static int	pending_room = 0;
static bool xact_callback_registered = false;

static Size
LinesSize(void)
{
	return add_size(offsetof(WaitLines, slots), mul_size(MaxBackends, sizeof(WaitSlot)));
}

void
RlWaitLinesRequest(void)
{
	RequestAddinShmemSpace(LinesSize());
	RequestNamedLWLockTranche("ratelimit wait lines", 1);
}

void
RlWaitLinesStartup(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	lines = ShmemInitStruct("ratelimit wait lines", LinesSize(), &found);
	if (!found)
	{
		lines->next_arrival = 1;
		lines->nslots = MaxBackends;
		for (int i = 0; i < BUSY_BUCKETS; i++)
			pg_atomic_init_u32(&lines->waiters[i], 0);
		for (int i = 0; i < MaxBackends; i++)
			lines->slots[i].line = NO_LINE;
	}
	LWLockRelease(AddinShmemInitLock);
	lines_lock = &GetNamedLWLockTranche("ratelimit wait lines")[0].lock;
}

RlWaitLine
RlWaitLineOf(int32 zone_id, const text *key)
{
	/* Keyed by the server's secret: nobody can choose a key that shares a victim's line. */
	RlWaitLine	line = RlKeyPlacementHash(MyDatabaseId, zone_id, VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key), 0);

	return line == NO_LINE ? 1 : line;
}

bool
RlWaitLinesExist(void)
{
	return lines != NULL;
}

static pg_atomic_uint32 *
WaitersOf(RlWaitLine line)
{
	return &lines->waiters[line % BUSY_BUCKETS];
}

bool
RlWaitLineBusy(RlWaitLine line)
{
	return lines != NULL && pg_atomic_read_u32(WaitersOf(line)) > 0;
}

/* This backend's slot, or -1 when it has none (lines absent, not a backend). */
static int
MySlot(void)
{
	int			me;

	if (lines == NULL || MyProc == NULL)
		return -1;
	me = RlMyProcNumber();
	return me >= 0 && me < lines->nslots ? me : -1;
}

/* The slot first in line, or -1; the caller holds lines_lock. */
static int
FirstOf(RlWaitLine line)
{
	int			first = -1;

	for (int i = 0; i < lines->nslots; i++)
		if (lines->slots[i].line == line &&
			(first < 0 || lines->slots[i].arrival < lines->slots[first].arrival))
			first = i;
	return first;
}

static void
WakeSlot(int slot)
{
	if (slot >= 0)
		SetLatch(&GetPGProcByNumber(slot)->procLatch);
}

static void
LeaveAtExit(int code, Datum arg)
{
	RlWaitLineLeave();
}

void
RlWaitLineJoin(RlWaitLine line)
{
	int			me = MySlot();

	if (me < 0)
		return;
	if (!leave_at_exit)
	{
		/* A session ended while it waited (FATAL) must not hold up the line. */
		before_shmem_exit(LeaveAtExit, (Datum) 0);
		leave_at_exit = true;
	}
	RlWaitLineLeave();
	LWLockAcquire(lines_lock, LW_EXCLUSIVE);
	lines->slots[me].line = line;
	lines->slots[me].arrival = lines->next_arrival++;
	pg_atomic_fetch_add_u32(WaitersOf(line), 1);
	LWLockRelease(lines_lock);
	my_line = line;
}

bool
RlWaitLineFirst(void)
{
	int			me = MySlot();
	int			first;

	if (me < 0 || my_line == NO_LINE)
		return true;
	LWLockAcquire(lines_lock, LW_SHARED);
	first = FirstOf(my_line);
	LWLockRelease(lines_lock);
	return first == me;
}

void
RlWaitLineLeave(void)
{
	int			me = MySlot();
	RlWaitLine	line = my_line;
	int			first;

	if (me < 0 || line == NO_LINE)
		return;
	LWLockAcquire(lines_lock, LW_EXCLUSIVE);
	lines->slots[me].line = NO_LINE;
	pg_atomic_fetch_sub_u32(WaitersOf(line), 1);
	first = FirstOf(line);
	LWLockRelease(lines_lock);
	my_line = NO_LINE;
	/* Whether or not this backend was first, the first may go now. */
	WakeSlot(first);
}

void
RlWaitLineWake(RlWaitLine line)
{
	int			first;

	if (!RlWaitLineBusy(line))
		return;
	LWLockAcquire(lines_lock, LW_SHARED);
	first = FirstOf(line);
	LWLockRelease(lines_lock);
	WakeSlot(first);
}

static void
WakePendingLines(XactEvent event, void *arg)
{
	if (npending == 0)
		return;
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT)
		for (int i = 0; i < npending; i++)
			RlWaitLineWake(pending_wakes[i]);
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT ||
		event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
		npending = 0;
}

void
RlWaitLineWakeAfter(RlWaitLine line, bool at_commit)
{
	if (!RlWaitLineBusy(line))
		return;
	if (!at_commit)
	{
		RlWaitLineWake(line);
		return;
	}
	if (!xact_callback_registered)
	{
		RegisterXactCallback(WakePendingLines, NULL);
		xact_callback_registered = true;
	}
	for (int i = 0; i < npending; i++)
		if (pending_wakes[i] == line)
			return;
	if (npending == pending_room)
	{
		pending_room = Max(8, pending_room * 2);
		pending_wakes = pending_wakes == NULL
			? MemoryContextAlloc(TopMemoryContext, pending_room * sizeof(RlWaitLine))
			: repalloc(pending_wakes, pending_room * sizeof(RlWaitLine));
	}
	pending_wakes[npending++] = line;
}
