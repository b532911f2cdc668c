/*
 * shmem_save.h -- the shmem store's save worker (shmem_save.c): every
 * ratelimit.shmem_save_interval it writes what changed to the store's file,
 * so that a crash forgets at most that interval's decisions.
 */
#ifndef RL_SHMEM_SAVE_H
#define RL_SHMEM_SAVE_H

#include "postgres.h"

#include "utils/timestamp.h"

/* ratelimit.shmem_save_interval, in milliseconds; 0: only at a clean shutdown */
extern int	rl_shmem_save_interval;

/* Defines the setting and registers the worker (while preloading). */
extern void RlShmemSaveInit(void);

/* The last save's figures; false when the store is not in shared memory. */
typedef struct RlShmemSaveStatus
{
	TimestampTz saved_at;		/* 0: none since the server started */
	int64		keys;
	int64		bytes;
	int64		micros;
	int64		saves;
	uint32		worker_interval;	/* ms, as the worker applies it; PG_UINT32_MAX: not running */
} RlShmemSaveStatus;

extern bool RlShmemSaveStatusGet(RlShmemSaveStatus *status);

#endif							/* RL_SHMEM_SAVE_H */
