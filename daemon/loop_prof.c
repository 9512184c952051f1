/* loop_prof.c - see loop_prof.h. */
#include "loop_prof.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "octd.h"

static const char *const ph_name[PH_COUNT] = {"main loop", "ring", "submit", "input checks",
                                              "complete", "pipeline full", "publish", "sleep"};
static const uint32_t lat_edge_us[LOOP_LAT_BUCKETS - 1] = {50, 100, 200, 500, 1000, 2000, 5000};

uint64_t loop_prof_add(loop_prof *p, int ph, uint64_t t0)
{
    uint64_t t = oct_time_monotonic_ns(), dt = t - t0;
    p->ns[ph] += dt;
    if (dt > p->max[ph])
        p->max[ph] = dt;
    p->stalls[ph] += dt >= LOOP_STALL_NS;
    return t;
}

void loop_prof_latency(uint64_t *hist, uint64_t from_ns, uint64_t to_ns)
{
    uint64_t us = to_ns > from_ns ? (to_ns - from_ns) / 1000 : 0;
    int b = 0;
    while (b < LOOP_LAT_BUCKETS - 1 && us >= lat_edge_us[b])
        b++;
    hist[b]++;
}

static int lat_print(char *buf, size_t cap, const uint64_t *hist)
{
    int n = 0;
    for (int b = 0; b < LOOP_LAT_BUCKETS && n < (int)cap; b++)
        n += snprintf(buf + n, cap - (size_t)n, "%s%s%u: %" PRIu64, b ? ", " : "",
                      b < LOOP_LAT_BUCKETS - 1 ? "<" : ">=",
                      lat_edge_us[b < LOOP_LAT_BUCKETS - 1 ? b : b - 1], hist[b]);
    return n;
}

void loop_prof_log(loop_prof *p)
{
    if (p->frames == 0)
        return;
    char line[1024], rw[256], io[256];
    int n = 0;
    uint64_t known = 0;
    for (int i = 0; i < PH_COUNT; i++) {
        known += i == PH_MAIN ? 0 : p->ns[i];
        if (i == PH_SLEEP) /* idle: its long calls are no stalls */
            n += snprintf(line + n, sizeof line - (size_t)n, "%s %.1f; ", ph_name[i],
                          (double)p->ns[i] / 1e3 / (double)p->frames);
        else
            n += snprintf(line + n, sizeof line - (size_t)n, "%s %.1f (max %.0f, %" PRIu64
                          " over %.1f ms); ", ph_name[i], (double)p->ns[i] / 1e3 /
                          (double)p->frames, (double)p->max[i] / 1e3, p->stalls[i],
                          LOOP_STALL_NS / 1e6);
        if (n >= (int)sizeof line)
            break;
    }
    lat_print(rw, sizeof rw, p->ring_wait);
    lat_print(io, sizeof io, p->in_octd);
    uint64_t other = p->steps_ns > known ? p->steps_ns - known : 0;
    double wall = (double)(p->t_step_end - p->t_first) / 1e9;
    /* in doubles: with one frame in a long idle interval the sleeps can exceed
     * the steps (an unsigned difference printed 1.8e13 us) */
    double busy = ((double)p->steps_ns + (double)p->ns[PH_MAIN] - (double)p->ns[PH_SLEEP] -
                   (double)p->ns[PH_WAIT]) / 1e3 / (double)p->frames;
    if (busy < 0)
        busy = 0;
    octd_log(LOG_INFO, "frame loop: %" PRIu64 " frames in %.2f s; per frame, us (mean; max us, "
             "calls over the stall mark): %sother %.1f; busy %.1f us per frame (a host ceiling "
             "of ~%.0f frames/s)", p->frames, wall, n < (int)sizeof line ? line : "",
             (double)other / 1e3 / (double)p->frames, busy, busy > 0 ? 1e6 / busy : 0);
    octd_log(LOG_INFO, "frame loop: frames by time in the ring before taken, us: %s; taken to "
             "published, us: %s; at most %" PRIu64 " frames committed behind the one taken; %"
             PRIu64 " frames in copy-only product buffers", rw, io, p->backlog_max, p->copied);
    memset(p, 0, sizeof *p);
}
