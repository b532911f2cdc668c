/*
 * shmem_save.c -- the save worker: a background worker that writes the
 * shmem store to its file every ratelimit.shmem_save_interval, so that a
 * crash forgets at most that interval's decisions (a start loads the last
 * file: shmem_file.c).
 *
 * Incremental where it can be: whoever changes a set marks it
 * (MarkSetChanged, a bit per set), and the worker copies again only the
 * sets marked since its last round, into images of its own; a round that
 * finds nothing marked writes nothing.  A copy holds one set's spinlock for
 * as long as a decision does (a few kilobytes of memcpy), and no lock is
 * held while the file is written: decisions never wait for the disk.  The
 * file is written whole from the images, through a .tmp file renamed
 * durably over the last one, so that a crash in the middle of a save leaves
 * the previous save.
 *
 * The copies are consistent set by set: a key's state is as it was at some
 * moment of the round, never half written.  Splits (which move keys between
 * sets) wait for a round's copies (rl_grow_lock, shared), so no key is
 * copied twice or missed.
 */
#include "postgres.h"

#include <unistd.h>

#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "store/shmem_file.h"
#include "store/shmem_layout.h"
#include "store/shmem_save.h"

int			rl_shmem_save_interval = 1000;

/* A set as the worker last copied it. */
typedef struct SetImage
{
	ShmemEntry *entries;
	uint32		count;
	uint32		capacity;
} SetImage;

typedef struct SaveImages
{
	SetImage   *sets;			/* one per set of the store (nsets) */
	uint64	   *changed;		/* the bits taken from rl_sets_changed this round */
	uint32	   *in_use;			/* the sets in use when copied, in order: the ones written */
	uint32		nin_use;
	ShmemEntry *scratch;		/* a set's entries, copied under its lock */
	uint32		scratch_capacity;
	bool		complete;		/* every set in use has been copied once */
	uint64		shape;			/* the shape of the last round */
} SaveImages;

PGDLLEXPORT void RlShmemSaveWorkerMain(Datum arg);

void
RlShmemSaveInit(void)
{
	BackgroundWorker worker;

	DefineCustomIntVariable("ratelimit.shmem_save_interval",
							"Time between two saves of the shmem store's changes to disk.",
							"A crash forgets at most this much of the shmem store's decisions. "
							"0 saves only at a clean shutdown: a crash then empties the store.",
							&rl_shmem_save_interval,
							1000, 0, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS;
	worker.bgw_start_time = BgWorkerStart_PostmasterStart;
	worker.bgw_restart_time = 1;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "ratelimit");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "RlShmemSaveWorkerMain");
	snprintf(worker.bgw_name, BGW_MAXLEN, "ratelimit shmem save");
	snprintf(worker.bgw_type, BGW_MAXLEN, "ratelimit shmem save");
	RegisterBackgroundWorker(&worker);
}

bool
RlShmemSaveStatusGet(RlShmemSaveStatus *status)
{
	if (rl_shmem == NULL)
		return false;
	status->saved_at = (TimestampTz) pg_atomic_read_u64(&rl_shmem->saved_at);
	status->keys = (int64) pg_atomic_read_u64(&rl_shmem->saved_keys);
	status->bytes = (int64) pg_atomic_read_u64(&rl_shmem->saved_bytes);
	status->micros = (int64) pg_atomic_read_u64(&rl_shmem->save_micros);
	status->saves = (int64) pg_atomic_read_u64(&rl_shmem->saves);
	status->worker_interval = pg_atomic_read_u32(&rl_shmem->worker_interval);
	return true;
}

/* Copies set s (its keys and its overflow chain) into its image. */
static void
CopySet(SaveImages *images, uint32 s)
{
	ShmemSet   *set = SetAt(s);
	SetImage   *image = &images->sets[s];
	uint32		count;

	for (;;)
	{
		count = 0;
		SpinLockAcquire(&set->mutex);
		for (int i = 0; i < RL_SHMEM_WAYS; i++)
			if (NativeTag(set->tags[i]) && count++ < images->scratch_capacity)
				images->scratch[count - 1] = set->entries[i];
		for (WayRef ref = rl_overflow_heads[s]; ref != 0; ref = ForeignEntry(ref)->overflow_next)
			if (count++ < images->scratch_capacity)
				images->scratch[count - 1] = *ForeignEntry(ref);
		SpinLockRelease(&set->mutex);
		if (count <= images->scratch_capacity)
			break;
		/* A long overflow chain: room for it, and copy again (no allocation under a spinlock). */
		images->scratch_capacity = count * 2;
		images->scratch = repalloc_huge(images->scratch, sizeof(ShmemEntry) * images->scratch_capacity);
	}
	if (count > image->capacity)
	{
		image->capacity = Max(count, RL_SHMEM_WAYS);
		image->entries = image->entries == NULL
			? MemoryContextAllocHuge(TopMemoryContext, sizeof(ShmemEntry) * image->capacity)
			: repalloc_huge(image->entries, sizeof(ShmemEntry) * image->capacity);
	}
	memcpy(image->entries, images->scratch, sizeof(ShmemEntry) * count);
	image->count = count;
}

/*
 * One round: copies the sets changed since the last, then writes the file
 * if anything changed.  Returns whether it wrote one.
 */
static bool
SaveRound(SaveImages *images)
{
	uint32		words = (rl_shmem->nsets + 63) / 64;
	bool		changed = !images->complete;
	TimestampTz started = GetCurrentTimestamp();
	TimestampTz copied;
	RlShmemFileWriter writer;
	uint64		shape;
	uint64		keys = 0;

	/*
	 * No split until the copies are done: a split moves keys between two
	 * sets and marks both, and a round that copied one without the other
	 * would write its keys twice or not at all.
	 */
	LWLockAcquire(rl_grow_lock, LW_SHARED);
	/* The marks before the copies: a change after this is marked again, for the next round. */
	for (uint32 w = 0; w < words; w++)
	{
		images->changed[w] = pg_atomic_read_u64(&rl_sets_changed[w]) == 0 ? 0
			: pg_atomic_exchange_u64(&rl_sets_changed[w], 0);
		changed |= images->changed[w] != 0;
	}
	shape = pg_atomic_read_u64(&rl_shmem->shape);
	changed |= shape != images->shape;
	/*
	 * Which sets are in use is taken here too: it depends on the early
	 * splits' bits as well as the shape, and a split after the lock is
	 * released may clear one (a set written, or not, by another test than
	 * the one it was counted by would make the file's count wrong).
	 */
	images->nin_use = 0;
	for (uint32 s = NextSetInUse(0, shape); s < rl_shmem->nsets; s = NextSetInUse(s + 1, shape))
	{
		if (!images->complete || (images->changed[s / 64] >> (s % 64)) & 1)
			CopySet(images, s);
		keys += images->sets[s].count;
		images->in_use[images->nin_use++] = s;
	}
	LWLockRelease(rl_grow_lock);
	copied = GetCurrentTimestamp();
	images->complete = true;
	images->shape = shape;
	if (!changed)
		return false;

	if (RlShmemFileBegin(&writer, keys))
	{
		for (uint32 i = 0; i < images->nin_use; i++)
		{
			SetImage   *image = &images->sets[images->in_use[i]];

			RlShmemFileAdd(&writer, image->entries, sizeof(ShmemEntry) * image->count);
		}
		if (RlShmemFileFinish(&writer))
		{
			pg_atomic_write_u64(&rl_shmem->saved_at, (uint64) started);
			pg_atomic_write_u64(&rl_shmem->saved_keys, keys);
			pg_atomic_write_u64(&rl_shmem->saved_bytes, writer.bytes);
			pg_atomic_write_u64(&rl_shmem->save_micros,
								(uint64) Max(0, GetCurrentTimestamp() - started));
			pg_atomic_fetch_add_u64(&rl_shmem->saves, 1);
			/* The copies hold rl_grow_lock: a split that must happen waits that long. */
			elog(DEBUG1, "ratelimit: saved " UINT64_FORMAT " keys of the shmem store: "
				 "copied in %.1f ms (holding rl_grow_lock), written in %.1f ms",
				 keys, (copied - started) / 1000.0, (GetCurrentTimestamp() - copied) / 1000.0);
			return true;
		}
	}
	/* Not written: every set is copied again next round, and written then. */
	images->complete = false;
	return false;
}

static void
WorkerGone(int code, Datum arg)
{
	pg_atomic_write_u32(&rl_shmem->worker_interval, PG_UINT32_MAX);
}

void
RlShmemSaveWorkerMain(Datum arg)
{
	SaveImages	images;
	int			interval_before;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	BackgroundWorkerUnblockSignals();
	if (rl_shmem == NULL)
		proc_exit(0);

	memset(&images, 0, sizeof(images));
	images.sets = MemoryContextAllocHuge(TopMemoryContext, sizeof(SetImage) * rl_shmem->nsets);
	memset(images.sets, 0, sizeof(SetImage) * rl_shmem->nsets);
	images.in_use = MemoryContextAllocHuge(TopMemoryContext, sizeof(uint32) * rl_shmem->nsets);
	images.changed = MemoryContextAllocZero(TopMemoryContext,
											sizeof(uint64) * ((rl_shmem->nsets + 63) / 64));
	images.scratch_capacity = 4 * RL_SHMEM_WAYS;
	images.scratch = MemoryContextAllocHuge(TopMemoryContext, sizeof(ShmemEntry) * images.scratch_capacity);

	interval_before = rl_shmem_save_interval;
	pg_atomic_write_u32(&rl_shmem->worker_interval, (uint32) rl_shmem_save_interval);
	before_shmem_exit(WorkerGone, (Datum) 0);
	while (!ShutdownRequestPending)
	{
		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_EXIT_ON_PM_DEATH
						 | (rl_shmem_save_interval > 0 ? WL_TIMEOUT : 0),
						 rl_shmem_save_interval, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			/* Saves turned off: no file a crash could bring back, older than any interval. */
			if (rl_shmem_save_interval == 0 && interval_before > 0)
				RlShmemFileRemove();
			interval_before = rl_shmem_save_interval;
			/* Published once applied: whoever waits for it knows the file is gone too. */
			pg_atomic_write_u32(&rl_shmem->worker_interval, (uint32) rl_shmem_save_interval);
		}
		if (ShutdownRequestPending || rl_shmem_save_interval == 0)
			continue;
		(void) SaveRound(&images);
	}
	/* The postmaster saves the store at a clean shutdown, after every process has gone. */
	proc_exit(0);
}
