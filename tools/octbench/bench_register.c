/* bench_register.c - octbench --only register | register-512: volume
 * registration (SPEC 10.4) on simulated motion with ground truth
 * (tools/octsim/motion.h), measured against the targets:
 *   accuracy  >= 98 % of valid B-scans within 0.5 px (dx, dz) and 1 px (dy)
 *   drift     drift-only RMS error <= 0.15 px per axis
 *   saccades  >= 95 % of the B-scans sheared by a saccade flagged invalid
 *   SNR       mean of 10 registered volumes >= 2.5 x the SNR of one volume
 *   speed     CPU 128^3 <= 2 s per volume; GPU 512^3 <= 100 ms (device time)
 * `register` runs the accuracy scenes at 128^3 (--quick: 64^3) and times
 * them; `register-512` times 512^3 volumes (meant for a GPU); `register-live`
 * the live shape (200x192x1024 u16 frames: [192][200][513] intensities) on
 * 1..4 handles in as many threads, as octd's registration workers. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "oct_register.h"
#pragma GCC diagnostic ignored "-Wunused-function" /* motion.h: header-only */
#include "../octsim/motion.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct stats {
    int lines_valid_truth, lines_valid_both, lines_ok, sacc, sacc_flagged, false_invalid, sacc2, sacc2_flagged;
    double se[3];
    double ms[64];
    double dev_ms[64], up_ms[64];
    int nms;
    double full_ms[64]; /* scene(full): device time of the fine_full handle (CUDA A/B) */
    int nfull, full_same; /* its volumes, and those with the same validity flags */
    double snr_one, snr_one_reg, snr_avg, coverage;
} stats;

static double snr(const float *x, const float *clean, size_t n, double *coverage)
{
    double s = 0, err = 0;
    size_t t = 0, f = 0;
    for (size_t i = 0; i < n; i++) {
        if (clean[i] <= 0.1f) /* tissue voxels only */
            continue;
        t++;
        if (!isfinite(x[i]))
            continue;
        f++;
        s += (double)clean[i] * clean[i], err += ((double)x[i] - clean[i]) * ((double)x[i] - clean[i]);
    }
    if (coverage)
        *coverage = t ? (double)f / t : 0;
    return err > 0 ? sqrt(s / err) : INFINITY;
}

/* V volumes of configuration c registered against a motion-free reference
 * (full, CUDA: each also by a second handle with fine_full, timed apart) */
static int scene(const octbench_opts *o, const motion_cfg *c, uint32_t V, bool avg, bool full,
                 stats *st)
{
    memset(st, 0, sizeof *st);
    size_t vol = (size_t)c->L * c->N * c->D;
    motion_sample s;
    float *ref = malloc(sizeof(float) * vol), *clean = malloc(sizeof(float) * vol);
    float *tg = malloc(sizeof(float) * vol), *reg = malloc(sizeof(float) * vol);
    float *truth = malloc(sizeof(float) * 4 * c->L), *sh = malloc(sizeof(float) * 4 * c->L);
    oct_register *r = NULL, *rf = NULL;
    oct_register_avg *a = NULL;
    oct_error e = {{0}};
    int rc = 1;
    if (!ref || !clean || !tg || !reg || !truth || !sh || motion_sample_make(&s, c, motion_margin(c))) {
        fprintf(stderr, "octbench register: out of memory\n");
        goto out;
    }
    motion_acquire(&s, NULL, 1, ref, NULL);
    if (avg) /* the noise-free reference grid, for the SNR */
        motion_acquire(&s, NULL, 0, clean, NULL);
    oct_register_options ro;
    oct_register_options_default(&ro);
    ro.threads = o->threads;
    if (oct_register_create(&r, c->L, c->N, c->D, &ro, o->backend, &e) ||
        oct_register_set_reference(r, ref, &e) ||
        oct_register_avg_create(&a, c->L, c->N, c->D, &e)) {
        fprintf(stderr, "octbench register: %s\n", e.msg);
        goto out;
    }
    if (full && strcmp(oct_register_backend_name(r), "cuda") == 0) {
        oct_register_options fo = ro;
        fo.fine_full = true;
        if (oct_register_create(&rf, c->L, c->N, c->D, &fo, o->backend, &e) ||
            oct_register_set_reference(rf, ref, &e)) {
            fprintf(stderr, "octbench register (fine_full): %s\n", e.msg);
            goto out;
        }
    }
    if (avg)
        st->snr_one = snr(ref, clean, vol, NULL);
    for (uint32_t v = 0; v < V; v++) {
        motion_traj t;
        motion_traj_make(&t, c, v + 1);
        motion_acquire(&s, &t, v + 2, tg, truth);
        double t0 = now_ms();
        if (oct_register_volume(r, tg, sh, &e)) {
            fprintf(stderr, "octbench register: %s\n", e.msg);
            goto out;
        }
        if (st->nms < 64) {
            oct_register_times tm;
            oct_register_last_times(r, &tm);
            st->dev_ms[st->nms] = tm.total_ms, st->up_ms[st->nms] = tm.upload_ms;
            st->ms[st->nms++] = now_ms() - t0;
        }
        if (rf && st->nfull < 64) {
            float *sf = reg; /* free here: reconstructions come after */
            if (oct_register_volume(rf, tg, sf, &e)) {
                fprintf(stderr, "octbench register (fine_full): %s\n", e.msg);
                goto out;
            }
            oct_register_times tm;
            oct_register_last_times(rf, &tm);
            int same = 1;
            for (uint32_t l = 0; l < c->L; l++)
                same &= sf[4 * l + 3] == sh[4 * l + 3];
            st->full_ms[st->nfull++] = tm.total_ms, st->full_same += same;
        }
        for (uint32_t l = 0; l < c->L; l++) {
            const float *x = sh + 4 * l, *w = truth + 4 * l;
            if (w[3] == 0) {
                bool in = (double)l + w[1] >= 0 && (double)l + w[1] <= c->L - 1; /* sheared lines */
                st->sacc += in, st->sacc_flagged += in && x[3] == 0;
                if (in && motion_saccade_shear(&t, l) > 2.0) /* sheared by more than 2 px */
                    st->sacc2++, st->sacc2_flagged += x[3] == 0;
                continue;
            }
            st->lines_valid_truth++;
            if (x[3] == 0) {
                st->false_invalid++;
                continue;
            }
            st->lines_valid_both++;
            double ex = x[0] - w[0], ey = x[1] - w[1], ez = x[2] - w[2];
            st->se[0] += ex * ex, st->se[1] += ey * ey, st->se[2] += ez * ez;
            st->lines_ok += fabs(ex) <= 0.5 && fabs(ez) <= 0.5 && fabs(ey) <= 1.0;
        }
        if (avg) {
            if (oct_register_reconstruct(c->L, c->N, c->D, tg, sh, reg, &e)) {
                fprintf(stderr, "octbench register: %s\n", e.msg);
                goto out;
            }
            oct_register_avg_add(a, reg);
            if (v == 0) /* one registered volume: interpolation also smooths its noise */
                st->snr_one_reg = snr(reg, clean, vol, NULL);
        }
    }
    if (avg) {
        oct_register_avg_get(a, reg);
        st->snr_avg = snr(reg, clean, vol, &st->coverage);
    }
    printf("  backend %s, coarse factor %u\n", oct_register_backend_name(r), oct_register_coarse_factor(r));
    rc = 0;
out:
    if (s.re)
        motion_sample_free(&s);
    oct_register_destroy(r);
    oct_register_destroy(rf);
    oct_register_avg_destroy(a);
    free(ref), free(clean), free(tg), free(reg), free(truth), free(sh);
    return rc;
}

static double median(double *v, int n)
{
    if (!n)
        return NAN;
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static const char *mark(bool ok) { return ok ? "meets" : "MISSES"; }

static void json(const octbench_opts *o, const char *name, double value, const char *unit)
{
    if (!o->json)
        return;
    FILE *f = fopen(o->json, "a");
    if (f) {
        fprintf(f, "{\"part\": \"register\", \"name\": \"%s\", \"value\": %.6g, \"unit\": \"%s\"}\n", name,
                value, unit);
        fclose(f);
    }
}

/* ---- register-live: throughput of W handles on W threads ---- */
typedef struct live_thread {
    const octbench_opts *o;
    const motion_cfg *c;
    const float *ref, *const *tg;
    uint32_t V, count;        /* targets, volumes to register */
    int variant;              /* 0 default, 1 fine_full, 2 tf32 off (A/B) */
    pthread_barrier_t *bar;
    float *sh;                /* [V][L][4]: the shifts of each target (the last time) */
    double t0, t1;            /* after the barrier, at the end */
    oct_register_times tsum;
    double wall_sum;
    int rc;
    char err[256];
} live_thread;

static void *live_main(void *arg)
{
    live_thread *t = arg;
    const motion_cfg *c = t->c;
    oct_register *r = NULL;
    oct_error e = {{0}};
    oct_register_options ro;
    oct_register_options_default(&ro);
    ro.threads = t->o->threads;
    ro.fine_full = t->variant == 1;
    ro.tf32 = t->variant != 2;
    t->rc = oct_register_create(&r, c->L, c->N, c->D, &ro, t->o->backend, &e) ||
            oct_register_set_reference(r, t->ref, &e);
    if (!t->rc) /* warm: the first volume plans cuFFT's work areas */
        t->rc = oct_register_volume(r, t->tg[0], t->sh, &e) != OCT_OK;
    pthread_barrier_wait(t->bar);
    t->t0 = now_ms();
    for (uint32_t i = 0; !t->rc && i < t->count; i++) {
        uint32_t v = i % t->V;
        double w0 = now_ms();
        t->rc = oct_register_volume(r, t->tg[v], t->sh + (size_t)v * 4 * c->L, &e) != OCT_OK;
        t->wall_sum += now_ms() - w0;
        oct_register_times tm;
        oct_register_last_times(r, &tm);
        t->tsum.upload_ms += tm.upload_ms, t->tsum.prep_ms += tm.prep_ms;
        t->tsum.coarse_ms += tm.coarse_ms, t->tsum.fine_ms += tm.fine_ms, t->tsum.total_ms += tm.total_ms;
    }
    t->t1 = now_ms();
    if (t->rc)
        snprintf(t->err, sizeof t->err, "%.200s", e.msg);
    oct_register_destroy(r);
    return NULL;
}

static int register_live(const octbench_opts *o)
{
    motion_cfg c;
    motion_cfg_default(&c);
    c.L = 192, c.N = 200, c.D = 513; /* 200 A-scans x 192 lines x 1024 samples */
    const uint32_t V = 4, per = o->reps > 0 ? (uint32_t)o->reps : o->quick ? 2 : 20;
    const size_t vol = (size_t)c.L * c.N * c.D;
    printf("octbench register-live: %u x %u x %u volumes (200x192x1024 u16 frames), %u targets "
           "with simulated motion\n", c.L, c.N, c.D, V);
    motion_sample s;
    float *ref = malloc(sizeof(float) * vol), *tg[4] = {0}, *truth = malloc(sizeof(float) * 4 * c.L * V);
    int rc = 1;
    oct_engine *eng = NULL;
    bool ok = ref && truth && !motion_sample_make(&s, &c, motion_margin(&c));
    for (uint32_t v = 0; ok && v < V; v++)
        ok = (tg[v] = malloc(sizeof(float) * vol)) != NULL;
    if (!ok) {
        fprintf(stderr, "octbench register-live: out of memory\n");
        goto out;
    }
    motion_acquire(&s, NULL, 1, ref, NULL);
    for (uint32_t v = 0; v < V; v++) {
        motion_traj t;
        motion_traj_make(&t, &c, v + 1);
        motion_acquire(&s, &t, v + 2, tg[v], truth + (size_t)v * 4 * c.L);
    }
    motion_sample_free(&s);
    /* the targets in pinned (registered) memory, as octd's product buffers:
     * a small CUDA engine registers them */
    if (o->backend != OCT_BACKEND_CPU) {
        oct_setup su;
        oct_setup_default(&su);
        su.geom = (oct_geometry){64, 8, 2, OCT_SAMPLE_U16, 0};
        su.backend = OCT_BACKEND_CUDA;
        oct_params p;
        oct_params_default(&p);
        oct_error e;
        int pinned = 0;
        if (oct_engine_create(&eng, &su, &p, &e) == OCT_OK)
            for (uint32_t v = 0; v < V; v++)
                pinned += oct_engine_register_host(eng, tg[v], sizeof(float) * vol, &e) == OCT_OK;
        printf("  targets in %s host memory\n", pinned == (int)V ? "registered (pinned)" : "pageable");
    }
    float *sh1 = NULL;
    /* 1..4 handles, then 1 and 4 with the whole-surface fine path and with a
     * plain fp32 z GEMM (A/B) */
    static const struct { int W, variant; } runs[] = {{1, 0}, {2, 0}, {3, 0}, {4, 0},
                                                       {1, 1}, {4, 1}, {1, 2}, {4, 2}};
    for (size_t ri = 0; ri < sizeof runs / sizeof *runs; ri++) {
        const int W = runs[ri].W;
        const int variant = runs[ri].variant;
        static const char *const vname[] = {"", "fine_full: ", "fine_fp32: "}, *const vkey[] = {"", "-full", "-fp32"};
        if (variant && o->backend == OCT_BACKEND_CPU)
            break; /* a CUDA option */
        live_thread th[4];
        pthread_t id[4];
        pthread_barrier_t bar;
        pthread_barrier_init(&bar, NULL, (unsigned)W);
        for (int w = 0; w < W; w++) {
            th[w] = (live_thread){o, &c, ref, (const float *const *)tg, V, per, variant, &bar,
                                  calloc((size_t)V * 4 * c.L, sizeof(float)), 0, 0, {0, 0, 0, 0, 0}, 0, 0, {0}};
            if (!th[w].sh || pthread_create(&id[w], NULL, live_main, &th[w])) {
                fprintf(stderr, "octbench register-live: no thread\n");
                exit(1);
            }
        }
        double t0 = INFINITY, t1 = 0, wall = 0;
        oct_register_times ts;
        memset(&ts, 0, sizeof ts);
        int err = 0, differ = 0;
        for (int w = 0; w < W; w++) {
            pthread_join(id[w], NULL);
            if (th[w].rc) {
                fprintf(stderr, "octbench register-live: %s\n", th[w].err);
                err = 1;
            }
            t0 = fmin(t0, th[w].t0), t1 = fmax(t1, th[w].t1), wall += th[w].wall_sum;
            ts.upload_ms += th[w].tsum.upload_ms, ts.prep_ms += th[w].tsum.prep_ms;
            ts.coarse_ms += th[w].tsum.coarse_ms, ts.fine_ms += th[w].tsum.fine_ms;
            ts.total_ms += th[w].tsum.total_ms;
        }
        pthread_barrier_destroy(&bar);
        if (err)
            goto out;
        /* the same shifts from every handle (NaN == NaN) */
        if (!sh1) {
            sh1 = th[0].sh, th[0].sh = NULL;
        }
        for (int w = 0; w < W; w++)
            for (size_t i = 0; th[w].sh && i < (size_t)V * 4 * c.L; i++)
                differ += !(th[w].sh[i] == sh1[i] || (isnan(th[w].sh[i]) && isnan(sh1[i])));
        double n = (double)W * per, sec = (t1 - t0) / 1e3;
        printf("  %s%d handle%s on %d thread%s: %.0f volumes in %.2f s = %.1f volumes/s; per volume "
               "%.1f ms wall (upload %.1f, prep %.1f, coarse %.1f, fine %.1f; stream total %.1f); "
               "shifts differing from one handle's: %d\n",
               vname[variant], W, W > 1 ? "s" : "", W, W > 1 ? "s" : "", n, sec, n / sec,
               wall / n, ts.upload_ms / n,
               ts.prep_ms / n, ts.coarse_ms / n, ts.fine_ms / n, ts.total_ms / n, differ);
        char key[32];
        snprintf(key, sizeof key, "register-live-w%d%s", W, vkey[variant]);
        json(o, key, n / sec, "volumes/s");
        for (int w = 0; w < W; w++)
            free(th[w].sh);
    }
    /* accuracy at this shape, against the truth */
    int nv = 0, good = 0, sacc = 0, flagged = 0;
    for (uint32_t v = 0; v < V; v++)
        for (uint32_t l = 0; l < c.L; l++) {
            const float *x = sh1 + ((size_t)v * c.L + l) * 4, *w = truth + ((size_t)v * c.L + l) * 4;
            if (w[3] == 0) {
                sacc++, flagged += x[3] == 0;
                continue;
            }
            if (x[3] == 0)
                continue;
            nv++;
            good += fabs(x[0] - w[0]) <= 0.5 && fabs(x[2] - w[2]) <= 0.5 && fabs(x[1] - w[1]) <= 1.0;
        }
    printf("  accuracy (%u targets): %.2f %% of %d valid B-scans within 0.5 px (dx, dz) and 1 px (dy); "
           "%d of %d lines without a true match flagged\n", V, nv ? 100.0 * good / nv : 0.0, nv,
           flagged, sacc);
    free(sh1);
    rc = 0;
out:
    if (eng) {
        for (uint32_t v = 0; v < V; v++)
            oct_engine_unregister_host(eng, tg[v]);
        oct_engine_destroy(eng);
    }
    free(ref), free(truth);
    for (uint32_t v = 0; v < V; v++)
        free(tg[v]);
    return rc;
}

int octbench_register(const octbench_opts *o)
{
    if (!strcmp(o->only, "register-live"))
        return register_live(o);
    bool big = !strcmp(o->only, "register-512");
    uint32_t n = big ? 512 : o->quick ? 64 : 128;
    motion_cfg c;
    motion_cfg_default(&c);
    c.L = c.N = c.D = n;
    stats st;
    printf("octbench register: %u x %u x %u volumes, simulated motion (tools/octsim/motion.h)\n", n, n, n);
    if (big) {
        uint32_t V = o->reps > 0 ? (uint32_t)o->reps : 5;
        if (scene(o, &c, V, false, true, &st))
            return 1;
        double wall = median(st.ms, st.nms), dev = median(st.dev_ms, st.nms), up = median(st.up_ms, st.nms);
        printf("  %u volumes: median %.1f ms per volume wall, %.1f ms device/stream time without the "
               "%.1f ms upload (target GPU <= 100 ms: %s)\n", V, wall, dev, up, mark(dev <= 100));
        if (st.nfull) /* A/B: the whole-surface path on the same volumes */
            printf("  fine_full (whole C2R surfaces): median %.1f ms device/stream time; validity flags "
                   "equal on %d of %d volumes\n", median(st.full_ms, st.nfull), st.full_same, st.nfull);
        json(o, "register-512-wall", wall, "ms");
        json(o, "register-512-device", dev, "ms");
        return 0;
    }
    /* 1. the default motion: drift, tremor, axial pulse, a saccade, noise; 10 volumes averaged */
    uint32_t V = 10;
    if (scene(o, &c, V, true, false, &st))
        return 1;
    int nv = st.lines_valid_both;
    double acc = nv ? (double)st.lines_ok / nv : 0;
    double wall = median(st.ms, st.nms);
    printf("  default motion (drift %.1f, tremor %.1f, axial %.1f, %u saccade of %.0f px in %.0f lines, "
           "offset %.0f, noise %.2f), %u volumes:\n", c.drift, c.tremor, c.axial, c.saccades,
           c.saccade_size, c.saccade_lines, c.offset, c.noise, V);
    printf("    valid B-scans within 0.5 px (dx, dz) and 1 px (dy): %.2f %% of %d (target >= 98 %%: %s)\n",
           100 * acc, nv, mark(acc >= 0.98));
    printf("    RMS error dx %.3f dy %.3f dz %.3f px; lines wrongly invalid %d of %d\n", sqrt(st.se[0] / nv),
           sqrt(st.se[1] / nv), sqrt(st.se[2] / nv), st.false_invalid, st.lines_valid_truth);
    double fl = st.sacc ? (double)st.sacc_flagged / st.sacc : 1;
    printf("    saccade B-scans flagged: %d of %d = %.1f %% (target >= 95 %%: %s); of those sheared by "
           "more than 2 px: %d of %d\n", st.sacc_flagged, st.sacc, 100 * fl, mark(fl >= 0.95), st.sacc2_flagged,
           st.sacc2);
    double ratio = st.snr_avg / st.snr_one;
    printf("    SNR: one volume %.2f, mean of %u registered %.2f = %.2f x (target >= 2.5 x: %s; "
           "sqrt(%u) = %.2f); tissue covered %.1f %%\n", st.snr_one, V, st.snr_avg, ratio, mark(ratio >= 2.5),
           V, sqrt(V), 100 * st.coverage);
    printf("    (one registered volume: SNR %.2f, so %.2f x of it: the interpolation onto the reference "
           "grid smooths noise too)\n", st.snr_one_reg, st.snr_avg / st.snr_one_reg);
    printf("    time per volume (registration, median of %d): %.1f ms (target CPU 128^3 <= 2000 ms: %s)\n",
           st.nms, wall, n == 128 ? mark(wall <= 2000) : "n/a at this size");
    json(o, "register-accuracy", 100 * acc, "%");
    json(o, "register-saccade-flagged", 100 * fl, "%");
    json(o, "register-snr-ratio", ratio, "x");
    json(o, "register-ms", wall, "ms");
    /* 2. drift only */
    motion_cfg d = c;
    d.tremor = 0, d.axial = 0, d.saccades = 0;
    if (scene(o, &d, 5, false, false, &st))
        return 1;
    nv = st.lines_valid_both;
    double rx = sqrt(st.se[0] / nv), ry = sqrt(st.se[1] / nv), rz = sqrt(st.se[2] / nv);
    printf("  drift only (drift %.1f, offset %.0f), 5 volumes: RMS dx %.3f dy %.3f dz %.3f px "
           "(target <= 0.15: %s)\n", d.drift, d.offset, rx, ry, rz, mark(rx <= 0.15 && ry <= 0.15 && rz <= 0.15));
    json(o, "register-drift-rms-max", fmax(rx, fmax(ry, rz)), "px");
    /* 3. saccades: 3 per volume */
    motion_cfg s = c;
    s.saccades = 3;
    if (scene(o, &s, 5, false, false, &st))
        return 1;
    fl = st.sacc ? (double)st.sacc_flagged / st.sacc : 1;
    printf("  saccades (3 per volume of %.0f px in %.0f lines), 5 volumes: flagged %d of %d = %.1f %% "
           "(target >= 95 %%: %s; sheared > 2 px: %d of %d); valid lines wrongly invalid %d of %d\n",
           s.saccade_size, s.saccade_lines, st.sacc_flagged, st.sacc, 100 * fl, mark(fl >= 0.95), st.sacc2_flagged,
           st.sacc2, st.false_invalid, st.lines_valid_truth);
    json(o, "register-saccades3-flagged", 100 * fl, "%");
    return 0;
}
