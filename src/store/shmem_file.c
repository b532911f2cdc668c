/*
 * shmem_file.c -- the shmem store's shared memory at server start, and its
 * file: a clean shutdown writes the table to RL_SHMEM_FILE (through a .tmp
 * file and durable_rename), and so does the save worker every
 * ratelimit.shmem_save_interval (shmem_save.c), from copies of the sets.
 * A start, or the restart after a crash, loads the last file written, if
 * whole (its size and CRC; else it is ignored, saying so in the log).  With
 * the interval 0 (no worker saves) the file is removed once loaded: after a
 * crash the state starts empty, as nothing vouches for it.
 */
#include "postgres.h"

#include <unistd.h>

#include <sys/stat.h>

#include "catalog/pg_control.h"
#include "common/controldata_utils.h"
#include "miscadmin.h"
#include "port/pg_crc32c.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/shmem.h"
#include "utils/guc.h"

#include "base/counters.h"
#include "store/shmem_layout.h"
#include "store/shmem_file.h"
#include "store/shmem_save.h"

#define RL_SHMEM_FILE "pg_stat/ratelimit_shmem.state"
#define RL_SHMEM_FILE_MAGIC 0x524C5348	/* "RLSH" */
#define RL_SHMEM_FILE_VERSION 7	/* 7: a CRC-32C of the whole file after it */
#define RL_SHMEM_FILE_VERSION_UNCHECKED 6	/* 0.5.0's, written at a clean shutdown only */

typedef struct ShmemFileHeader
{
	uint32		magic;
	uint32		version;
	uint32		entry_size;
	uint64		count;
	RlKeySecret secret;			/* the keys' hashes are keyed by it: it comes back with them */
} ShmemFileHeader;

/*
 * Version 7 ends with the CRC-32C of everything before it.  A file written
 * through .tmp and durable_rename is whole; one that is not (a disk's
 * damage, a hand's truncate, a copy cut short) is ignored at start rather
 * than loaded in part: a key's state half right may admit what it should
 * refuse.
 */
typedef pg_crc32c ShmemFileTrailer;

bool
RlShmemFileBegin(RlShmemFileWriter *writer, uint64 count)
{
	ShmemFileHeader header = {RL_SHMEM_FILE_MAGIC, RL_SHMEM_FILE_VERSION, sizeof(ShmemEntry), count};

	RlKeySecretGet(&header.secret);
	snprintf(writer->tmp, sizeof(writer->tmp), "%s.tmp", RL_SHMEM_FILE);
	writer->bytes = 0;
	writer->failed = false;
	INIT_CRC32C(writer->crc);
	writer->file = AllocateFile(writer->tmp, PG_BINARY_W);
	if (writer->file == NULL)
	{
		writer->failed = true;
		return RlShmemFileFinish(writer);
	}
	RlShmemFileAdd(writer, &header, sizeof(header));
	return !writer->failed;
}

void
RlShmemFileAdd(RlShmemFileWriter *writer, const void *data, size_t bytes)
{
	if (writer->failed || bytes == 0)
		return;
	if (fwrite(data, bytes, 1, writer->file) != 1)
		writer->failed = true;
	COMP_CRC32C(writer->crc, data, bytes);
	writer->bytes += bytes;
}

bool
RlShmemFileFinish(RlShmemFileWriter *writer)
{
	if (writer->file != NULL && !writer->failed)
	{
		ShmemFileTrailer crc = writer->crc;

		FIN_CRC32C(crc);
		if (fwrite(&crc, sizeof(crc), 1, writer->file) != 1)
			writer->failed = true;
		writer->bytes += sizeof(crc);
	}
	if (writer->file != NULL && FreeFile(writer->file) != 0)
		writer->failed = true;
	writer->file = NULL;
	if (!writer->failed && durable_rename(writer->tmp, RL_SHMEM_FILE, LOG) == 0)
		return true;
	if (writer->failed)
		ereport(LOG,
				(errcode_for_file_access(),
				 errmsg("could not write ratelimit shmem state file \"%s\": %m", writer->tmp)));
	unlink(writer->tmp);
	return false;
}

void
RlShmemFileRemove(void)
{
	if (unlink(RL_SHMEM_FILE) != 0 && errno != ENOENT)
		ereport(LOG,
				(errcode_for_file_access(),
				 errmsg("could not remove ratelimit shmem state file \"%s\": %m", RL_SHMEM_FILE)));
}

static void
SaveState(int code, Datum arg)
{
	RlShmemFileWriter writer;
	uint64		count = 0;
	ControlFileData *control;
	bool		crc_ok;
	uint64		shape;

	/* After a crash (or a failed start) the state is not to be trusted. */
	if (code != 0 || rl_shmem == NULL)
		return;

	/*
	 * The postmaster exits with code 0 after an immediate shutdown too; only
	 * a shutdown checkpoint marks a clean one.  The checkpointer wrote it
	 * before this runs.
	 */
	control = get_controlfile(DataDir, &crc_ok);
	if (!crc_ok || (control->state != DB_SHUTDOWNED &&
					control->state != DB_SHUTDOWNED_IN_RECOVERY))
		return;
	/* The postmaster, alone now: no lock. */
	shape = pg_atomic_read_u64(&rl_shmem->shape);
	for (uint32 s = NextSetInUse(0, shape); s < rl_shmem->nsets; s = NextSetInUse(s + 1, shape))
	{
		count += RlSetKeys(SetAt(s));
		for (WayRef ref = rl_overflow_heads[s]; ref != 0; ref = ForeignEntry(ref)->overflow_next)
			count++;
	}
	if (!RlShmemFileBegin(&writer, count))
		return;
	for (uint32 s = NextSetInUse(0, shape); s < rl_shmem->nsets; s = NextSetInUse(s + 1, shape))
	{
		ShmemSet   *set = SetAt(s);

		for (int i = 0; i < RL_SHMEM_WAYS; i++)
			if (NativeTag(set->tags[i]))
				RlShmemFileAdd(&writer, &set->entries[i], sizeof(ShmemEntry));
		for (WayRef ref = rl_overflow_heads[s]; ref != 0; ref = ForeignEntry(ref)->overflow_next)
			RlShmemFileAdd(&writer, ForeignEntry(ref), sizeof(ShmemEntry));
	}
	(void) RlShmemFileFinish(&writer);
}

/*
 * Whether the file holds what its header says, whole: its size, and from
 * version 7 on the CRC at its end (*why says what is wrong).  Reads it
 * through once, then leaves it just after the header.
 */
static bool
FileIsWhole(FILE *file, const ShmemFileHeader *header, const char **why)
{
	struct stat st;
	uint64		size;
	bool		checked = header->version != RL_SHMEM_FILE_VERSION_UNCHECKED;
	pg_crc32c	crc;
	ShmemFileTrailer stored;
	char	   *buffer;
	uint64		left;
	bool		whole = true;

	if (fstat(fileno(file), &st) != 0)
	{
		*why = "could not find its size";
		return false;
	}
	size = (uint64) st.st_size;
	if (header->count > (size - sizeof(ShmemFileHeader)) / sizeof(ShmemEntry) ||
		size != sizeof(ShmemFileHeader) + header->count * sizeof(ShmemEntry)
		+ (checked ? sizeof(ShmemFileTrailer) : 0))
	{
		*why = "its size is not what its header says (truncated or damaged)";
		return false;
	}
	if (!checked)
		return true;

	buffer = palloc(BLCKSZ * 8);
	INIT_CRC32C(crc);
	rewind(file);
	for (left = size - sizeof(ShmemFileTrailer); left > 0 && whole;)
	{
		size_t		chunk = (size_t) Min(left, (uint64) BLCKSZ * 8);

		whole = fread(buffer, chunk, 1, file) == 1;
		if (whole)
			COMP_CRC32C(crc, buffer, chunk);
		left -= chunk;
	}
	pfree(buffer);
	FIN_CRC32C(crc);
	if (!whole || fread(&stored, sizeof(stored), 1, file) != 1 || !EQ_CRC32C(crc, stored))
	{
		*why = "its checksum does not match (damaged)";
		return false;
	}
	return fseeko(file, sizeof(ShmemFileHeader), SEEK_SET) == 0;
}

static void
LoadState(void)
{
	FILE	   *file = AllocateFile(RL_SHMEM_FILE, PG_BINARY_R);
	ShmemFileHeader header;
	uint64		loaded = 0;
	uint64		dropped = 0;
	const char *why = NULL;

	if (file == NULL)
	{
		if (errno != ENOENT)
			ereport(LOG,
					(errcode_for_file_access(),
					 errmsg("could not read ratelimit shmem state file \"%s\": %m", RL_SHMEM_FILE)));
		return;
	}
	if (fread(&header, sizeof(header), 1, file) != 1 || header.magic != RL_SHMEM_FILE_MAGIC ||
		(header.version != RL_SHMEM_FILE_VERSION &&
		 header.version != RL_SHMEM_FILE_VERSION_UNCHECKED) ||
		header.entry_size != sizeof(ShmemEntry))
		ereport(LOG, (errmsg("ignoring ratelimit shmem state file \"%s\": not in this version's format",
							 RL_SHMEM_FILE)));
	else if (!FileIsWhole(file, &header, &why))
		ereport(LOG, (errmsg("ignoring ratelimit shmem state file \"%s\": %s", RL_SHMEM_FILE, why),
					  errdetail("The shmem store starts empty.")));
	else
	{
		RlKeySecretSet(&header.secret);
		for (uint64 n = 0; n < header.count; n++)
		{
			ShmemEntry	entry;
			ShmemSet   *set;
			int			way;

			uint32		set_index;
			WayRef		lent;
			RlEvicted	evicted = {0};

			if (fread(&entry, sizeof(entry), 1, file) != 1)
				break;
			if (!NativeTag(entry.tag))
				continue;
			entry.overflow_next = 0;
			/* The store grows as it does for new keys (the postmaster is alone). */
			do
			{
				set_index = SetIndexOf(entry.hash_high, pg_atomic_read_u64(&rl_shmem->shape));
				set = SetAt(set_index);
				way = RlFreeWay(set, entry.tag);
			} while (way < 0 && RlSplitFullSet(entry.hash_high));
			if (way >= 0)
			{
				set->entries[way] = entry;
				set->tags[way] = entry.tag;
				if (RlSetKeys(set) > RL_SHMEM_GROW_AT)
					(void) RlSplitNextSet();
			}
			else if ((lent = RlReserveForeignWay(set_index, GetCurrentTimestamp(), &evicted)) != 0)
			{
				*ForeignEntry(lent) = entry;
				RlLinkForeign(set_index, lent);
				RlCountEvicted(&evicted);
			}
			else
			{
				dropped++;		/* a smaller ratelimit.shmem_max_keys than before */
				continue;
			}
			loaded++;
			RlCountAdd(entry.dbid, entry.zone_id, RL_COUNT_KEYS, 1);
		}
		ereport(LOG,
				(errmsg("ratelimit: loaded " UINT64_FORMAT " keys of the shmem store from \"%s\"",
						loaded, RL_SHMEM_FILE),
				 dropped > 0 ? errdetail(UINT64_FORMAT " keys did not fit and were dropped.", dropped) : 0));
	}
	FreeFile(file);

	/*
	 * Without saves, loaded once: a crash later must not bring this state
	 * back.  With them, it stays the state to go back to until the first
	 * save replaces it.
	 */
	if (rl_shmem_save_interval == 0)
		unlink(RL_SHMEM_FILE);
}

void
RlShmemStoreRequest(void)
{
	RequestAddinShmemSpace(add_size(add_size(add_size(add_size(sizeof(ShmemHeader), RlSetsSize()),
													  RlEarlyBitsSize()),
											 RlOverflowHeadsSize()),
									RlEarlyBitsSize()));	/* rl_sets_changed: a bit per set too */
	RequestNamedLWLockTranche("ratelimit", 1);
}

void
RlShmemStoreStartup(void)
{
	bool		found;
	bool		found_sets;
	void	   *sets;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	rl_shmem = ShmemInitStruct("ratelimit shmem store", sizeof(ShmemHeader), &found);
	sets = ShmemInitStruct("ratelimit shmem store sets", RlSetsSize(), &found_sets);
	rl_split_early = ShmemInitStruct("ratelimit shmem store early splits", RlEarlyBitsSize(), &found_sets);
	rl_overflow_heads = ShmemInitStruct("ratelimit shmem store overflow chains", RlOverflowHeadsSize(), &found_sets);
	rl_sets_changed = ShmemInitStruct("ratelimit shmem store changed sets", RlEarlyBitsSize(), &found_sets);
	rl_shmem_sets = (ShmemSet *) TYPEALIGN(RL_CACHE_LINE, sets);
	rl_grow_lock = &GetNamedLWLockTranche("ratelimit")[0].lock;
	if (!found)
	{
		memset(rl_shmem, 0, sizeof(ShmemHeader));
		RlStoreShape(&rl_shmem->base, &rl_shmem->max_level);
		rl_shmem->nsets = rl_shmem->base << rl_shmem->max_level;
		pg_atomic_init_u64(&rl_shmem->shape, SHAPE(0, 0));
		pg_atomic_init_u32(&rl_shmem->overflow_cursor, 0);
		pg_atomic_init_u64(&rl_shmem->full_at, 0);
		pg_atomic_init_u64(&rl_shmem->last_full_warning, 0);
		pg_atomic_init_u64(&rl_shmem->saved_at, 0);
		pg_atomic_init_u64(&rl_shmem->saved_keys, 0);
		pg_atomic_init_u64(&rl_shmem->saved_bytes, 0);
		pg_atomic_init_u64(&rl_shmem->save_micros, 0);
		pg_atomic_init_u64(&rl_shmem->saves, 0);
		pg_atomic_init_u32(&rl_shmem->worker_interval, PG_UINT32_MAX);
		memset(rl_overflow_heads, 0, RlOverflowHeadsSize());
		for (uint32 w = 0; w < (rl_shmem->nsets + 63) / 64; w++)
		{
			pg_atomic_init_u64(&rl_split_early[w], 0);
			pg_atomic_init_u64(&rl_sets_changed[w], 0);
		}
		/* The others are set up when put in use: their pages stay untouched till then. */
		for (uint32 s = 0; s < rl_shmem->base; s++)
			RlInitSet(NewSetAt(s));
	}
	LWLockRelease(AddinShmemInitLock);

	/* The postmaster loads the saved state once and saves it at shutdown. */
	if (!IsUnderPostmaster)
	{
		if (!found)
			LoadState();
		on_shmem_exit(SaveState, (Datum) 0);
	}
}

void
RlShmemStoreInit(void)
{
	DefineCustomIntVariable("ratelimit.shmem_max_keys",
							"Number of keys the shmem store holds.",
							"Needs ratelimit in shared_preload_libraries; any this many keys fit, "
							"each taking about 132 bytes of shared memory, touched as keys arrive.",
							&rl_shmem_max_keys,
							100000, RL_SHMEM_WAYS, 100000000,
							PGC_POSTMASTER, 0, NULL, NULL, NULL);
	RlShmemSaveInit();
}
