/* ipc_internal.h - helpers shared by ring.c, control.c and status.c (not installed). */
#ifndef OCT_IPC_INTERNAL_H
#define OCT_IPC_INTERNAL_H

#include <setjmp.h>
#include <stddef.h>
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

/* SIGBUS guard.  Another process with write access may ftruncate a shared
 * object smaller under our mapping (a producer shrinking the ring, a writer
 * the control block); touching a page past the new end raises SIGBUS.
 * Readers of such mappings run between oct_bus_arm() and oct_bus_disarm():
 *
 *     oct_bus_guard g;
 *     if (sigsetjmp(g.jb, 0)) return <error: object shrank>;   (disarmed)
 *     oct_bus_arm(&g, map, map_bytes);
 *     ... reads of map ...
 *     oct_bus_disarm(&g);
 *
 * The handler (installed once, SA_NODEFER so no signal mask needs saving)
 * jumps back only for a fault inside the armed range of the faulting
 * thread; any other SIGBUS goes to the previous handler (or kills as
 * before).  The state is per thread; guards nest. */
typedef struct oct_bus_guard {
    sigjmp_buf jb;
    const void *lo;
    size_t len;
    struct oct_bus_guard *prev;
} oct_bus_guard;
/* Installs the process's SIGBUS handler once (pthread_once); false if
 * sigaction failed (then the guard is not armed and a SIGBUS kills). */
bool oct_bus_install(void);
void oct_bus_arm(oct_bus_guard *g, const void *lo, size_t len);
void oct_bus_disarm(oct_bus_guard *g);

#endif
