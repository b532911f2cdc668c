/*
 * shmem_file.h -- the shmem store at server start (shmem_file.c).
 */
#ifndef RL_SHMEM_FILE_H
#define RL_SHMEM_FILE_H

/* Defines ratelimit.shmem_max_keys, which sizes the store (while preloading). */
extern void RlShmemStoreInit(void);

/* From the shmem hooks: asks for the store's memory, then sets it up. */
extern void RlShmemStoreRequest(void);
extern void RlShmemStoreStartup(void);

#endif							/* RL_SHMEM_FILE_H */
