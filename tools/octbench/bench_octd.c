/* bench_octd.c - the octd child of `octbench --e2e` (bench_e2e.c): started
 * (fork/exec before the parent touches CUDA) and stopped, its log's tail on
 * failure, and its CPU time, in all and per thread group (issue 21: whose
 * cost it is). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_e2e.h"

pid_t octd_last_pid;

pid_t start_octd(const char *octd_path, const char *ini, const char *log)
{
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        execl(octd_path, octd_path, "--config", ini, (char *)NULL);
        fprintf(stderr, "exec %s: %s\n", octd_path, strerror(errno));
        _exit(127);
    }
    octd_last_pid = pid;
    return pid;
}

int stop_octd(pid_t pid)
{
    int st = 0;
    kill(pid, SIGTERM);
    for (int i = 0; i < 200; i++) { /* 10 s */
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        sleep_ms(50);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return -1;
}

void print_log_tail(const char *log)
{
    FILE *f = fopen(log, "r");
    if (!f)
        return;
    char line[512];
    fprintf(stderr, "---- octd log (%s) ----\n", log);
    while (fgets(line, sizeof line, f))
        fputs(line, stderr);
    fclose(f);
}

/* CPU seconds (user + system) a process has used, from /proc; 0 if unknown. */
double octd_cpu_s(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the command may contain spaces */
    unsigned long ut = 0, st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        return 0;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

const char *const octd_thread_groups[OCTD_THREAD_GROUPS] = {"frame loop", "publisher",
                                                             "ZeroMQ", "engine/other"};

/* Per thread group: CPU, page faults and context switches (the frame loop
 * losing time to faults or to being woken or pre-empted: issue 21), from
 * /proc/PID/task/TID/stat and status. */
void octd_thread_counts_get(pid_t pid, octd_thread_counts out[OCTD_THREAD_GROUPS])
{
    memset(out, 0, OCTD_THREAD_GROUPS * sizeof *out);
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (de->d_name[0] < '0' || de->d_name[0] > '9')
            continue;
        char path[384], comm[32] = "", buf[2048];
        snprintf(path, sizeof path, "%s/%s/comm", dir, de->d_name);
        FILE *f = fopen(path, "r");
        if (f) {
            if (!fgets(comm, sizeof comm, f))
                comm[0] = '\0';
            fclose(f);
        }
        int g = atoi(de->d_name) == (int)pid       ? 0
                : !strncmp(comm, "octd-publish", 12) ? 1
                : !strncmp(comm, "ZMQbg", 5)         ? 2
                                                     : 3;
        snprintf(path, sizeof path, "%s/%s/stat", dir, de->d_name);
        if ((f = fopen(path, "r"))) {
            size_t n = fread(buf, 1, sizeof buf - 1, f);
            fclose(f);
            buf[n] = '\0';
            const char *p = strrchr(buf, ')');
            unsigned long minf = 0, majf = 0, ut = 0, stm = 0;
            if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %lu %*u %lu %*u %lu %lu", &minf,
                            &majf, &ut, &stm) == 4) {
                out[g].cpu_s += (double)(ut + stm) / (double)sysconf(_SC_CLK_TCK);
                out[g].minflt += minf;
                out[g].majflt += majf;
            }
        }
        /* schedstat: ns on a CPU, ns runnable waiting for one, timeslices */
        snprintf(path, sizeof path, "%s/%s/schedstat", dir, de->d_name);
        if ((f = fopen(path, "r"))) {
            unsigned long long run_ns = 0, wait_ns = 0;
            if (fscanf(f, "%llu %llu", &run_ns, &wait_ns) == 2)
                out[g].runq_s += (double)wait_ns / 1e9;
            fclose(f);
        }
        snprintf(path, sizeof path, "%s/%s/status", dir, de->d_name);
        if ((f = fopen(path, "r"))) {
            unsigned long v;
            while (fgets(buf, sizeof buf, f)) {
                if (sscanf(buf, "voluntary_ctxt_switches: %lu", &v) == 1)
                    out[g].vcsw += v;
                else if (sscanf(buf, "nonvoluntary_ctxt_switches: %lu", &v) == 1)
                    out[g].nvcsw += v;
            }
            fclose(f);
        }
    }
    if (d)
        closedir(d);
}

/* The machine's CPU time so far in interrupts, softirqs and steal (a
 * hypervisor running someone else on our vCPU), seconds over all CPUs,
 * from /proc/stat: time a thread loses without being switched out. */
void system_lost_cpu(double out[3])
{
    out[0] = out[1] = out[2] = 0;
    FILE *f = fopen("/proc/stat", "r");
    unsigned long long v[8] = {0};
    if (f && fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                    &v[4], &v[5], &v[6], &v[7]) == 8) {
        double hz = (double)sysconf(_SC_CLK_TCK);
        out[0] = (double)v[5] / hz; /* irq */
        out[1] = (double)v[6] / hz; /* softirq */
        out[2] = (double)v[7] / hz; /* steal */
    }
    if (f)
        fclose(f);
}

/* The machine's TLB shootdown interrupts so far (x86 /proc/interrupts
 * "TLB" row, all CPUs; 0 where there is none): munmap/madvise in any of
 * octd's threads interrupts every CPU its other threads run on. */
uint64_t system_tlb_shootdowns(void)
{
    FILE *f = fopen("/proc/interrupts", "r");
    char line[8192];
    uint64_t sum = 0;
    while (f && fgets(line, sizeof line, f)) {
        char *p = line;
        while (*p == ' ')
            p++;
        if (strncmp(p, "TLB:", 4) != 0)
            continue;
        p += 4;
        char *end;
        for (unsigned long long v; (v = strtoull(p, &end, 10)), end != p; p = end)
            sum += v;
    }
    if (f)
        fclose(f);
    return sum;
}
