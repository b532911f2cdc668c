/*
 * shmem_file.h -- the shmem store at server start (shmem_file.c).
 */
#ifndef RL_SHMEM_FILE_H
#define RL_SHMEM_FILE_H

#include "port/pg_crc32c.h"

/* Defines ratelimit.shmem_max_keys, which sizes the store (while preloading). */
extern void RlShmemStoreInit(void);

/* From the shmem hooks: asks for the store's memory, then sets it up. */
extern void RlShmemStoreRequest(void);
extern void RlShmemStoreStartup(void);

/*
 * Writing the store's file: Begin (the header, for count entries), Add
 * (each entry), Finish (the CRC, close, then durable_rename over the last
 * file).
 * Each returns or records failure; Finish LOGs it and leaves the last file
 * as it was.
 */
typedef struct RlShmemFileWriter
{
	FILE	   *file;
	char		tmp[MAXPGPATH];
	uint64		bytes;
	pg_crc32c	crc;			/* of the bytes written so far */
	bool		failed;
} RlShmemFileWriter;

extern bool RlShmemFileBegin(RlShmemFileWriter *writer, uint64 count);
extern void RlShmemFileAdd(RlShmemFileWriter *writer, const void *data, size_t bytes);
extern bool RlShmemFileFinish(RlShmemFileWriter *writer);

/* Removes the file (when saves are turned off). */
extern void RlShmemFileRemove(void);

#endif							/* RL_SHMEM_FILE_H */
