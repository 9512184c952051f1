/* ipc_internal.h - helpers shared by ring.c, control.c and status.c (not installed). */
#ifndef OCT_IPC_INTERNAL_H
#define OCT_IPC_INTERNAL_H

#include <stdint.h>
#include <time.h>

#include "oct_ipc.h"

/* 64/32-bit atomics on the plain fields of the mapped structs (SPEC 3:
 * release stores, acquire loads).  GCC's __atomic builtins are the C11
 * memory model applied to ordinary objects. */
#define OCT_LOAD_ACQ(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define OCT_LOAD_RLX(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define OCT_STORE_REL(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define OCT_STORE_RLX(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define OCT_FENCE_ACQ() __atomic_thread_fence(__ATOMIC_ACQUIRE)
#define OCT_FENCE_REL() __atomic_thread_fence(__ATOMIC_RELEASE)

/* Longest accepted shm name, with the leading '/' (NAME_MAX of tmpfs less
 * room for a suffix). */
#define OCT_SHM_NAME_MAX 200

/* Checks a POSIX shm name: "/name", no other '/', not too long. */
oct_err oct_ipc_name_check(const char *name, oct_error *e);
/* Sleeps about `ns` nanoseconds (one nanosleep; a signal may end it early,
 * which callers tolerate because they re-check their deadline). */
void oct_ipc_sleep_ns(uint64_t ns);
/* Returns a random non-zero 64-bit value (getrandom, clock fallback). */
uint64_t oct_ipc_random_nonzero(void);
/* Copies a NUL-terminated string into a fixed char array, always terminated. */
void oct_ipc_strlcpy(char *dst, size_t dst_len, const char *src);

#endif
