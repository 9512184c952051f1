/* sys.h - octd's logging (stderr, syslog priority prefixes), the systemd
 * notification protocol (sd_notify datagrams, written here so octd does not
 * need libsystemd), and the real-time settings of its threads: placement on
 * a GPU's NUMA node (issue 20.1, from sysfs, without libnuma), timer slack,
 * locked memory, SCHED_FIFO, pre-faulted buffers (issue 19.2). */
#ifndef OCTD_SYS_H
#define OCTD_SYS_H

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <syslog.h>

#include "oct_types.h"

/* ---- logging: "<PRIO>octd: message" on stderr (journald reads the prefix) ---- */
void octd_log_set_level(int level); /* LOG_ERR .. LOG_DEBUG */
int octd_log_level(void);
void octd_log(int prio, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Called with every message of priority LOG_ERR or worse (any thread). */
typedef void (*octd_log_hook_fn)(void *arg, int prio, const char *msg);
void octd_log_set_hook(octd_log_hook_fn fn, void *arg);

/* ---- sd_notify ---- */
typedef struct octd_notify {
    int fd;                   /* -1 when not under systemd */
    struct sockaddr_un addr;
    socklen_t addr_len;
    uint64_t watchdog_usec;   /* 0: no watchdog */
} octd_notify;

/* Reads NOTIFY_SOCKET ('/path' or '@abstract') and WATCHDOG_USEC/WATCHDOG_PID.
 * Not an error when unset (fd = -1).  Returns false with a message in err
 * when NOTIFY_SOCKET is set but unusable. */
bool octd_notify_open(octd_notify *n, char *err, size_t err_len);
/* Sends one datagram of newline-separated assignments (no-op without systemd). */
void octd_notify_send(octd_notify *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void octd_notify_close(octd_notify *n);

/* ---- NUMA placement (issue 20.1) ----
 * Where an engine's threads and buffers belong: the CPUs local to its GPU's
 * PCI function, as the kernel reports them under sysfs:
 *   SYSFS/bus/pci/devices/BUS/numa_node       -1 or the node
 *   SYSFS/bus/pci/devices/BUS/local_cpulist   "0-7,16-23"
 *   SYSFS/devices/system/node/online          "0-1" (absent: one node)
 * `place` is false (affinity left alone, `why` says why) when the node is
 * -1 or the machine has one node. */
#define OCTD_SYSFS "/sys"
typedef struct octd_placement {
    bool place;          /* threads/pages go to `cpus` */
    int node;            /* -1: unknown */
    int nodes;           /* NUMA nodes online */
    int ncpus;           /* CPUs in `cpus` */
    cpu_set_t cpus;
    char bus[32];        /* normalised PCI id, "0000:41:00.0" */
    char cpulist[128];   /* local_cpulist as read (for the log) */
    char why[160];       /* when !place: why not */
} octd_placement;

/* Parses a kernel CPU list ("0-7,16-23", "3", "" is an error) into set;
 * OCT_EPARSE naming `what` and the offending text when it is malformed or
 * names a CPU >= CPU_SETSIZE; *count = CPUs in the list. */
oct_err octd_cpulist_parse(const char *text, const char *what, cpu_set_t *set, int *count,
                           oct_error *e);
/* Reads the placement of PCI function `bus` (as CUDA spells it: upper or
 * lower case, 4- or 8-digit domain) under sysfs root `sysfs` ("/sys"; tests
 * pass a fake tree).  OCT_EINVAL for a malformed bus id, OCT_ENOENT when the
 * device is not there, OCT_EPARSE for a malformed file, each naming the
 * file; OCT_OK with p->place false for node -1 or a single node. */
oct_err octd_placement_read(const char *sysfs, const char *bus, octd_placement *p,
                            oct_error *e);
/* Restricts thread th to p->cpus (those of them this process may use).
 * No-op (OCT_OK) when !p->place; OCT_EPERM/OCT_EINVAL naming the CPUs when
 * the kernel refuses or none of them is allowed. */
oct_err octd_placement_apply(pthread_t th, const octd_placement *p, oct_error *e);
/* Runs the calling thread on p's CPUs until octd_placement_leave (memory it
 * first touches meanwhile is then allocated on that node).  *saved receives
 * the affinity to restore; false (nothing changed) when !p->place or refused. */
bool octd_placement_enter(const octd_placement *p, cpu_set_t *saved);
void octd_placement_leave(bool entered, const cpu_set_t *saved);
/* "engine 1: GPU 0000:41:00.0, NUMA node 1, CPUs 16-31" (or why not placed). */
void octd_placement_describe(const octd_placement *p, int engine, char *out, size_t len);

/* The placement of an engine ([engine] numa): read from sysfs for a GPU
 * engine (oct_engine_pci_bus_id), nothing for a CPU engine; the line that
 * says where (or why not) is logged when it differs from `logged` (the last
 * one, updated; "" at first).  engine: its index, for the log. */
struct oct_engine;
void octd_engine_placement(bool numa, const struct oct_engine *eng, int engine,
                           octd_placement *p, char *logged, size_t logged_len);

/* The thread that drives the engines (octd's frame thread) on their node:
 * it and its OpenMP threads (which a GPU engine's staging copies run on) go
 * to the node when every placed engine is on it, and back where they were
 * otherwise; engines on several nodes are logged once. */
typedef struct octd_follow {
    cpu_set_t saved;   /* the thread's affinity before it was placed */
    bool placed;       /* the thread runs on `node` */
    int node;
    bool mixed;        /* placed engines on several nodes */
    bool warned_mixed;
} octd_follow;
/* Call from the thread itself whenever the engines change (p[0..n-1]). */
void octd_follow_engines(octd_follow *f, const octd_placement *const *p, int n);
/* Engines on several nodes: moves the calling thread and its OpenMP threads
 * to p's node for one staging copy; true (and *saved to restore) if moved. */
bool octd_follow_stage_enter(const octd_follow *f, const octd_placement *p, cpu_set_t *saved);
void octd_follow_stage_leave(bool moved, const cpu_set_t *saved);
/* Sets the affinity of each of the calling thread's OpenMP threads (they
 * keep the one they were started with otherwise). */
void octd_omp_team_affinity(const cpu_set_t *set);

/* ---- real-time settings (issue 19.2, [engine] keys) ---- */
/* PR_SET_TIMERSLACK for the calling thread (threads it starts inherit it);
 * ns 0 = the kernel's default (50 us). */
void octd_rt_timer_slack(unsigned long ns);
/* mlockall(MCL_CURRENT | MCL_FUTURE); a warning, never fatal, when refused
 * or when RLIMIT_MEMLOCK is finite (later allocations would then fail). */
void octd_rt_lock_memory(void);
/* SCHED_FIFO at `priority` (1..99) for the calling thread, SCHED_OTHER for
 * 0; a warning when refused (RLIMIT_RTPRIO, RestrictRealtime=). */
void octd_rt_priority(int priority);
/* Remembers the calling thread's nice as octd's own (main, before any
 * thread): background threads keep it whatever [engine] nice makes the
 * frame loop. */
void octd_rt_nice_base(void);
/* [engine] nice for the calling thread (the frame loop; the engine workers
 * and OpenMP threads it starts later inherit it) and, with team, for the
 * OpenMP team it made before: a value, OCT_NICE_AUTO (OCT_NICE_AUTO_VALUE
 * where RLIMIT_NICE / CAP_SYS_NICE allow, never nicer than octd's own) or
 * OCTD_NICE_OWN (octd's own).  Refused: octd's own nice, logged (a warning
 * for an explicit value, info for auto); false. */
#define OCTD_NICE_OWN 101
bool octd_rt_nice(int nice, bool team);
/* pthread_create for octd's background threads (the publisher and ZeroMQ's,
 * the recording writer, the registration workers): SCHED_OTHER and octd's
 * own nice whatever the creator runs at.  Threads inherit their creator's policy, and the frame
 * loop that starts them may be at SCHED_FIFO ([engine] priority): a busy
 * background thread at the frame loop's own real-time priority would hold
 * its core until it blocks (issue 21).  Returns pthread_create's result. */
int octd_thread_start_normal(pthread_t *t, void *(*fn)(void *), void *arg);
/* Writes one byte per page of [p, p + bytes) so that the page faults happen
 * now, not in the frame loop. */
void octd_prefault(void *p, size_t bytes);

#endif
