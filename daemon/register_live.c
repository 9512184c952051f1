/* register_live.c - live volume registration in octd (register_live.h).
 *
 * The frame loop (main thread) chooses the reference, plans, and queues each
 * volume frame's product buffer (a reference on its slot: the intensities
 * are read where the engine left them, no copy) for a worker thread, which
 * registers it, makes the registered planes and their running averages
 * (oct_register_planes: only what is published, never a volume) and the
 * images; the frame loop publishes finished jobs (the publisher socket is
 * its own) at its next frame or periodic tick.  Several workers (config
 * [engine] registration_workers; each its own plan: on CUDA its own stream
 * and buffers, so one volume's host steps and syncs overlap the others'
 * device work) register volumes and make their planes concurrently (each
 * in its own oct_register_planes); the running averages and images are
 * then made in the volumes' order (a turn), so the averages and the
 * published sequence are those of one worker.  A volume that finds the
 * queue full is skipped for registration (status registration_skipped):
 * registering never blocks the frame loop.  Anything that changes the
 * registration's state (reference, geometry, plan, planes) first drains
 * the workers (rare: commands and control changes). */
#include "register_live.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>

#include "formulas.h"
#include "oct_register.h"
#include "octd.h"

#define STORE64(field, v) __atomic_store_n(&(field), (uint64_t)(v), __ATOMIC_RELEASE)
#define STORE32(field, v) __atomic_store_n(&(field), (uint32_t)(v), __ATOMIC_RELEASE)

enum { OUT_ENFACE, OUT_CONFOCAL, OUT_SLAB, OUT_MOTION, OUT_COUNT };
static const char *const out_kind[OUT_COUNT] = {"enface_reg", "confocal_reg", "slab_mean_reg",
                                                "motion"};

/* Per method: worker w's reg[w] and shifts[w] while it runs a job, the
 * planes the worker's whose turn it is; else the frame loop's. */
typedef struct reg_method {
    oct_register *reg[OCT_REG_WORKERS_MAX];   /* one plan per worker */
    oct_register_planes *planes;              /* the running averages */
    oct_register_planes *scratch[OCT_REG_WORKERS_MAX]; /* worker w's target planes */
    float *ref;     /* the reference volume (kept: new options re-plan against it) */
    float *best;    /* auto: the sharpest volume so far */
    float *shifts[OCT_REG_WORKERS_MAX];       /* [L][4] per worker */
} reg_method;

/* The planes asked for (SPEC 2.4 en-face indices, the slab clamped to [0, D]). */
typedef struct plane_spec {
    uint32_t q;
    int32_t idx[1024];
    int32_t requested, d0, d1;
} plane_spec;

enum { RJ_FREE, RJ_QUEUED, RJ_RUNNING, RJ_DONE };

/* One volume frame for the worker, then its images for the frame loop. */
typedef struct reg_job {
    int state;                       /* g->mu */
    octd_slot *slot;                 /* held until the worker is done with the volume */
    const float *vol[OCT_METHOD_COUNT];
    octd_frame_meta meta;
    oct_gray gray_enface, gray_confocal;
    bool restart;                    /* the averages restart with this volume */
    int32_t average;                 /* reg.average: volumes per averaging block */
    uint32_t methods;                /* methods with results */
    uint32_t reg_ok;                 /* methods registered (then their planes are made) */
    oct_image out[OCT_METHOD_COUNT][OUT_COUNT];
    uint32_t averaged[OCT_METHOD_COUNT];
    char err[256];                   /* the first error, for the frame loop's log */
    double ms, reg_ms;               /* worker time (not waiting for the turn), of it
                                      * oct_register_volume */
    oct_register_times tm;           /* oct_register_volume's stages, summed over methods */
} reg_job;

enum { WANT_NONE, WANT_SET, WANT_AUTO };

typedef struct octd_reglive {
    uint32_t L, N, D;
    int want;               /* pending `reference set|auto` */
    bool have_ref;
    uint32_t methods;       /* methods with a reference */
    oct_register_options opts;
    int32_t average;        /* reg.average of the current block */
    plane_spec spec;        /* of the planes in use */
    bool restart;           /* the next job restarts the averages */
    uint32_t auto_seen;     /* volumes scored since `reference auto` */
    double best_score;
    uint64_t best_seq;
    char last_err[256];
    double ms_sum, reg_sum; /* worker time per volume: all, oct_register_volume (the log line) */
    oct_register_times tm_sum;
    uint32_t ms_count;
    uint64_t registered, skipped; /* volumes: registered and published, skipped (queue full) */
    uint64_t seq[OCT_METHOD_COUNT][OUT_COUNT][2];
    reg_method m[OCT_METHOD_COUNT];
    /* the workers (their number fixed when the first starts) */
    int workers;
    uint32_t queue;         /* jobs held: 2 per worker (one running, one waiting) */
    struct reg_worker { struct octd_reglive *g; int w; pthread_t thread; } wk[OCT_REG_WORKERS_MAX];
    bool started, stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* a job queued, registered, finished, or stop */
    /* a ring of jobs: queued at tail, taken by a worker at run, finished
     * (planes and images, in order) at turn, published at head */
    uint64_t tail, run, turn, head;
    reg_job job[OCTD_REGLIVE_JOBS];
} octd_reglive;

static void free_image(oct_image *img)
{
    free(img->u8);
    free(img->f32);
    free(img->indices);
    memset(img, 0, sizeof *img);
}

static void method_free(reg_method *r)
{
    for (int w = 0; w < OCT_REG_WORKERS_MAX; w++) {
        oct_register_destroy(r->reg[w]);
        oct_register_planes_destroy(r->scratch[w]);
        free(r->shifts[w]);
    }
    oct_register_planes_destroy(r->planes);
    free(r->ref);
    free(r->best);
    memset(r, 0, sizeof *r);
}

/* Frame loop, worker drained. */
static void reset_all(octd_reglive *g)
{
    for (int m = 0; m < OCT_METHOD_COUNT; m++)
        method_free(&g->m[m]);
    g->have_ref = false;
    g->methods = 0;
    g->auto_seen = 0;
    g->best_score = -1;
}

static void set_status(octd *d, uint32_t state, uint64_t frame)
{
    STORE32(d->sb->reference_state, state);
    STORE64(d->sb->reference_frame, frame);
}

static void set_counts(octd *d, const octd_reglive *g)
{
    STORE64(d->sb->registration_volumes, g->registered);
    STORE64(d->sb->registration_skipped, g->skipped);
}

/* Logs a registration error once per distinct message. */
static void log_err(octd_reglive *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void log_err(octd_reglive *g, const char *fmt, ...)
{
    char buf[sizeof g->last_err];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (strcmp(buf, g->last_err) != 0) {
        octd_log(LOG_ERR, "registration: %s", buf);
        snprintf(g->last_err, sizeof g->last_err, "%s", buf);
    }
}

/* ---- the worker ---- */

static bool fit(oct_image *img, int ndim, const uint32_t *shape, size_t indices)
{
    img->ndim = ndim;
    size_t count = 1;
    for (int i = 0; i < ndim; i++)
        count *= (img->shape[i] = shape[i]);
    img->count = count;
    img->present = oct_image_reserve(img, count, true, indices) == OCT_OK;
    return img->present;
}

static void to_gray(oct_image *img, oct_gray gr)
{
    for (size_t i = 0; i < img->count; i++)
        img->u8[i] = oct_gray_level(img->f32[i], gr);
}

static void job_err(reg_job *j, int m, const oct_error *e)
{
    if (!j->err[0])
        snprintf(j->err, sizeof j->err, "%s: %.200s", oct_method_name(m), e->msg);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Registers job j's volumes with worker w's plans and makes their planes in
 * w's scratch (any order, concurrently with the other workers). */
static void register_job(octd_reglive *g, reg_job *j, int w)
{
    uint64_t t0 = now_ns();
    j->methods = j->reg_ok = 0;
    j->err[0] = '\0';
    j->reg_ms = 0;
    memset(&j->tm, 0, sizeof j->tm);
    for (int m = 0; m < OCT_METHOD_COUNT; m++) {
        reg_method *r = &g->m[m];
        for (int k = 0; k < OUT_COUNT; k++)
            j->out[m][k].present = false;
        if (!(g->methods & (1u << m)) || !j->vol[m])
            continue;
        oct_error e;
        uint64_t t1 = now_ns();
        if (oct_register_volume(r->reg[w], j->vol[m], r->shifts[w], &e) != OCT_OK) {
            job_err(j, m, &e);
            continue;
        }
        j->reg_ms += (double)(now_ns() - t1) / 1e6;
        if (oct_register_planes_compute(r->scratch[w], j->vol[m], r->shifts[w], &e) != OCT_OK) {
            job_err(j, m, &e);
            continue;
        }
        oct_register_times tm;
        oct_register_last_times(r->reg[w], &tm);
        j->tm.upload_ms += tm.upload_ms, j->tm.prep_ms += tm.prep_ms;
        j->tm.coarse_ms += tm.coarse_ms, j->tm.fine_ms += tm.fine_ms, j->tm.total_ms += tm.total_ms;
        j->reg_ok |= 1u << m;
    }
    j->ms = (double)(now_ns() - t0) / 1e6;
}

/* Job j's planes, averages and images from worker w's shifts (in the
 * volumes' order: the averages are those of one worker). */
static void finish_job(octd_reglive *g, reg_job *j, int w)
{
    const uint32_t L = g->L, N = g->N;
    const size_t LN = (size_t)L * N;
    const plane_spec *sp = &g->spec;
    uint64_t t0 = now_ns();
    for (int m = 0; m < OCT_METHOD_COUNT; m++) {
        reg_method *r = &g->m[m];
        oct_image *out = j->out[m];
        if (!(j->reg_ok & (1u << m)))
            continue;
        oct_error e;
        oct_err rc;
        uint32_t s2[2] = {L, N}, sm[2] = {L, 4}, s3[3] = {sp->q, L, N};
        if (fit(&out[OUT_MOTION], 2, sm, 0))
            memcpy(out[OUT_MOTION].f32, r->shifts[w], (size_t)L * 4 * sizeof(float));
        if (j->restart || oct_register_planes_count(r->planes) >= (uint32_t)(j->average > 0 ? j->average : 1))
            oct_register_planes_reset(r->planes);
        if ((rc = oct_register_planes_accumulate(r->planes, r->scratch[w], &e)) != OCT_OK) {
            job_err(j, m, &e);
            continue;
        }
        j->averaged[m] = oct_register_planes_count(r->planes);
        oct_image *ef = &out[OUT_ENFACE], *cf = &out[OUT_CONFOCAL], *sl = &out[OUT_SLAB];
        bool want_ef = sp->q > 0 && fit(ef, 3, s3, sp->q) && fit(cf, 2, s2, sp->q);
        bool want_sl = sp->d1 > sp->d0 && fit(sl, 2, s2, 2);
        oct_register_planes_get(r->planes, want_ef ? ef->f32 : NULL, want_sl ? sl->f32 : NULL);
        if (want_ef) {
            memcpy(ef->indices, sp->idx, sp->q * sizeof *sp->idx);
            memcpy(cf->indices, sp->idx, sp->q * sizeof *sp->idx);
            ef->n_indices = cf->n_indices = sp->q;
            ef->requested = (uint32_t)sp->requested;
            /* confocal: the sum of the averaged en-face planes (SPEC 2.4) */
            for (size_t i = 0; i < LN; i++) {
                float s = 0;
                for (uint32_t k = 0; k < sp->q; k++)
                    s += ef->f32[(size_t)k * LN + i];
                cf->f32[i] = s;
            }
            to_gray(ef, j->gray_enface);
            to_gray(cf, j->gray_confocal);
        } else {
            ef->present = cf->present = false;
        }
        if (want_sl) {
            sl->indices[0] = sp->d0, sl->indices[1] = sp->d1;
            sl->n_indices = 2;
            to_gray(sl, j->gray_enface);
        }
        j->methods |= 1u << m;
    }
    j->ms += (double)(now_ns() - t0) / 1e6;
}

static void *reg_worker_main(void *arg)
{
    struct reg_worker *wk = arg;
    octd_reglive *g = wk->g;
    pthread_mutex_lock(&g->mu);
    for (;;) {
        while (!g->stop && !(g->run < g->tail))
            pthread_cond_wait(&g->cv, &g->mu);
        if (g->stop)
            break;
        uint64_t seq = g->run++;
        reg_job *j = &g->job[seq % g->queue];
        j->state = RJ_RUNNING;
        pthread_mutex_unlock(&g->mu);
        register_job(g, j, wk->w);
        octd_slot_release(j->slot); /* the volume is no longer read */
        pthread_mutex_lock(&g->mu);
        j->slot = NULL;
        while (g->turn != seq) /* the earlier volumes' averages first */
            pthread_cond_wait(&g->cv, &g->mu);
        pthread_mutex_unlock(&g->mu);
        finish_job(g, j, wk->w);
        pthread_mutex_lock(&g->mu);
        j->state = RJ_DONE;
        g->turn++;
        pthread_cond_broadcast(&g->cv);
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

/* Stops and joins the workers started (none queued: drained before). */
static void stop_workers(octd_reglive *g)
{
    pthread_mutex_lock(&g->mu);
    g->stop = true;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    for (int w = 0; w < g->workers; w++)
        if (g->wk[w].g)
            pthread_join(g->wk[w].thread, NULL);
    memset(g->wk, 0, sizeof g->wk);
    g->started = false;
}

static bool start_workers(octd_reglive *g)
{
    if (g->started)
        return true;
    g->stop = false;
    g->started = true;
    for (int w = 0; w < g->workers; w++) {
        g->wk[w].g = g, g->wk[w].w = w;
        /* never the frame loop's SCHED_FIFO ([engine] priority): they may be busy for long */
        if (octd_thread_start_normal(&g->wk[w].thread, reg_worker_main, &g->wk[w]) != 0) {
            g->wk[w].g = NULL;
            log_err(g, "no thread for the registration (worker %d of %d)", w + 1, g->workers);
            stop_workers(g);
            return false;
        }
    }
    return true;
}

/* ---- publishing finished jobs (frame loop) ---- */

static void send_outputs(octd *d, octd_reglive *g, reg_job *j, int m)
{
    octd_frame_meta mm = j->meta;
    char topic[64];
    for (int k = 0; k < OUT_COUNT; k++) {
        oct_image *img = &j->out[m][k];
        if (!img->present)
            continue;
        mm.averaged = k == OUT_MOTION ? 0 : j->averaged[m];
        for (int f32 = 0; f32 < 2; f32++) {
            /* motion is float32 only; the others as the products ask */
            if (k == OUT_MOTION ? !f32 : f32 && !j->meta.want_f32)
                continue;
            snprintf(topic, sizeof topic, "%s/%s%s", out_kind[k], oct_method_name(m),
                     f32 && k != OUT_MOTION ? "/f32" : "");
            d->published += octd_pub_send_image(d->pub, topic, out_kind[k], m, img, f32 != 0,
                                                g->seq[m][k][f32]++, &mm, &d->drops);
        }
    }
}

/* Publishes the finished jobs in turn; wait: first waits for every queued one. */
static void collect(octd *d, octd_reglive *g, bool wait)
{
    for (;;) {
        pthread_mutex_lock(&g->mu);
        while (wait && g->started && g->head < g->tail &&
               g->job[g->head % g->queue].state != RJ_DONE)
            pthread_cond_wait(&g->cv, &g->mu);
        reg_job *j = g->head < g->tail ? &g->job[g->head % g->queue] : NULL;
        bool done = j && j->state == RJ_DONE;
        pthread_mutex_unlock(&g->mu);
        if (!done)
            return;
        if (j->err[0])
            log_err(g, "%s", j->err);
        for (int m = 0; m < OCT_METHOD_COUNT; m++)
            if (j->methods & (1u << m))
                send_outputs(d, g, j, m);
        if (j->methods)
            g->registered++;
        g->ms_sum += j->ms, g->reg_sum += j->reg_ms;
        oct_register_times *t = &g->tm_sum;
        t->upload_ms += j->tm.upload_ms, t->prep_ms += j->tm.prep_ms;
        t->coarse_ms += j->tm.coarse_ms, t->fine_ms += j->tm.fine_ms, t->total_ms += j->tm.total_ms;
        if (++g->ms_count == 20) {
            octd_log(LOG_INFO, "registration: %.1f ms per volume, %.1f of them oct_register_volume "
                               "(its stages: upload %.1f, prep %.1f, coarse %.1f, fine %.1f, "
                               "total %.1f), the rest the planes and images (%ux%ux%u, mean of "
                               "20; %d workers; %" PRIu64 " registered, %" PRIu64 " skipped: "
                               "registration busy)",
                     g->ms_sum / 20, g->reg_sum / 20, t->upload_ms / 20, t->prep_ms / 20,
                     t->coarse_ms / 20, t->fine_ms / 20, t->total_ms / 20, g->L, g->N, g->D,
                     g->workers, g->registered, g->skipped);
            g->ms_sum = g->reg_sum = 0, g->ms_count = 0;
            memset(t, 0, sizeof *t);
        }
        pthread_mutex_lock(&g->mu);
        j->state = RJ_FREE;
        g->head++;
        pthread_mutex_unlock(&g->mu);
    }
}

void octd_reglive_poll(octd *d)
{
    if (!d->reglive)
        return;
    collect(d, d->reglive, false);
    /* here, after main.c's counters: the status never shows more volumes
     * registered or skipped than frames processed */
    set_counts(d, d->reglive);
}

void octd_reglive_drain(octd *d)
{
    if (d->reglive)
        collect(d, d->reglive, true);
}

/* ---- commands, reference, plans (frame loop) ---- */

uint32_t octd_reglive_products(const octd *d)
{
    const octd_reglive *g = d->reglive;
    if (!g || (g->want == WANT_NONE && !g->have_ref))
        return 0;
    return OCT_PRODUCT_BIT(OCT_KIND_VOLUME) | OCT_PRODUCT_F32;
}

uint32_t octd_reglive_command(octd *d, uint32_t op, char *msg, size_t len)
{
    if (!d->reglive) {
        octd_reglive *g = calloc(1, sizeof *g);
        if (!g) {
            snprintf(msg, len, "reference: out of memory");
            return OCT_CMDRES_FAILED;
        }
        pthread_mutex_init(&g->mu, NULL);
        pthread_cond_init(&g->cv, NULL);
        g->workers = 1, g->queue = 2;
        d->reglive = g;
    }
    octd_reglive *g = d->reglive;
    switch (op) {
    case OCT_REFERENCE_CLEAR:
        collect(d, g, true);
        reset_all(g);
        g->want = WANT_NONE;
        set_status(d, OCT_REFSTATE_NONE, 0);
        snprintf(msg, len, "reference cleared");
        return OCT_CMDRES_OK;
    case OCT_REFERENCE_SET:
        g->want = WANT_SET;
        g->last_err[0] = '\0';
        if (d->mode == OCT_STATE_REVIEW) {
            d->review_dirty = true; /* the kept frame, re-processed, becomes it */
            snprintf(msg, len, "reference: the reviewed frame %" PRIu64, d->kept.info.frame_id);
        } else {
            snprintf(msg, len, "reference: the next volume");
        }
        return OCT_CMDRES_OK;
    case OCT_REFERENCE_AUTO:
        g->want = WANT_AUTO;
        g->auto_seen = 0;
        g->best_score = -1;
        g->last_err[0] = '\0';
        snprintf(msg, len, "reference: the sharpest of the next %d volumes", OCTD_REGLIVE_AUTO_K);
        return OCT_CMDRES_OK;
    default:
        snprintf(msg, len, "reference: unknown operation %u (0 set, 1 clear, 2 auto)", op);
        return OCT_CMDRES_REFUSED;
    }
}

/* Sharpness of a volume: normalised gradient energy of its en-face
 * projection P[l][n] = sum_d v along the fast axis,
 *   S = sum (P[l][n+1] - P[l][n])^2 / sum (P - mean P)^2.
 * Scale-free; defocus and blur lower it; along x because motion (which
 * tears the image along y) does not add to it. */
static double sharpness(const float *v, uint32_t L, uint32_t N, uint32_t D)
{
    double *p = malloc((size_t)L * N * sizeof *p);
    if (!p)
        return 0;
    double mean = 0;
    for (size_t i = 0; i < (size_t)L * N; i++) {
        double s = 0;
        for (uint32_t z = 0; z < D; z++)
            s += v[i * D + z];
        p[i] = s;
        mean += s;
    }
    mean /= (double)L * N;
    double grad = 0, var = 0;
    for (uint32_t l = 0; l < L; l++)
        for (uint32_t n = 0; n < N; n++) {
            double x = p[(size_t)l * N + n];
            var += (x - mean) * (x - mean);
            if (n + 1 < N) {
                double dx = p[(size_t)l * N + n + 1] - x;
                grad += dx * dx;
            }
        }
    free(p);
    return var > 0 ? grad / var : 0;
}

static oct_backend backend_of(const octd *d)
{
    return d->eng && strcmp(oct_engine_backend_name(d->eng), "cuda") == 0 ? OCT_BACKEND_CUDA
                                                                          : OCT_BACKEND_CPU;
}

static void options_of(const octd_reglive *g, const oct_params *p, oct_register_options *o)
{
    oct_register_options_default(o);
    oct_register_options_from_params(o, p);
    /* the control range allows more than a small volume can search */
    int32_t zmax = (int32_t)g->D / 2 - 1;
    if (o->search_z > zmax)
        o->search_z = zmax < 0 ? 0 : zmax;
    if (o->stripe > g->L)
        o->stripe = g->L;
}

/* The planes the control values ask for: en-face indices as SPEC 2.4
 * (start + step q, those < D), the slab clamped to [0, D]. */
static void spec_of(const oct_params *p, uint32_t D, plane_spec *s)
{
    memset(s, 0, sizeof *s);
    for (int32_t i = 0; i < p->enface_count && s->q < 1024; i++) {
        int64_t z = (int64_t)p->enface_start + (int64_t)p->enface_step * i;
        if (z >= 0 && z < (int64_t)D)
            s->idx[s->q++] = (int32_t)z;
    }
    s->requested = p->enface_count > 0 ? p->enface_count : 0;
    s->d0 = p->slab_start < 0 ? 0 : p->slab_start > (int64_t)D ? (int32_t)D : p->slab_start;
    s->d1 = p->slab_end < 0 ? 0 : p->slab_end > (int64_t)D ? (int32_t)D : p->slab_end;
}

static bool spec_same(const plane_spec *a, const plane_spec *b)
{
    return a->q == b->q && a->requested == b->requested && a->d0 == b->d0 && a->d1 == b->d1 &&
           memcmp(a->idx, b->idx, a->q * sizeof *a->idx) == 0;
}

/* (Re-)plans method m's registration against its kept reference: one plan
 * per worker. */
static bool plan_method(octd *d, octd_reglive *g, int m)
{
    reg_method *r = &g->m[m];
    oct_error e;
    for (int w = 0; w < OCT_REG_WORKERS_MAX; w++) {
        oct_register_destroy(r->reg[w]);
        r->reg[w] = NULL;
    }
    for (int w = 0; w < g->workers; w++)
        if (oct_register_create(&r->reg[w], g->L, g->N, g->D, &g->opts, backend_of(d), &e) != OCT_OK ||
            oct_register_set_reference(r->reg[w], r->ref, &e) != OCT_OK) {
            log_err(g, "%s: %s", oct_method_name(m), e.msg);
            return false;
        }
    return true;
}

/* The workers' number: the config's, else CUDA 4 (several streams keep the
 * device busy through each volume's host steps; a worker's host planes
 * take about as long as its registration: H200, 2026-11-24), CPU 1 (one
 * registration already uses every core). */
static int workers_of(const octd *d)
{
    int w = d->cfg.registration_workers;
    if (w <= 0)
        w = backend_of(d) == OCT_BACKEND_CUDA ? 4 : 1;
    return w > OCT_REG_WORKERS_MAX ? OCT_REG_WORKERS_MAX : w;
}

/* (Re-)makes method m's planes for g->spec (their averages start over). */
static bool plan_planes(octd_reglive *g, int m)
{
    reg_method *r = &g->m[m];
    oct_error e;
    oct_register_planes_destroy(r->planes);
    r->planes = NULL;
    for (int w = 0; w < OCT_REG_WORKERS_MAX; w++) {
        oct_register_planes_destroy(r->scratch[w]);
        r->scratch[w] = NULL;
    }
    bool ok = oct_register_planes_create(&r->planes, g->L, g->N, g->D, g->spec.idx, g->spec.q,
                                         g->spec.d0, g->spec.d1, &e) == OCT_OK;
    for (int w = 0; ok && w < g->workers; w++)
        ok = oct_register_planes_create(&r->scratch[w], g->L, g->N, g->D, g->spec.idx, g->spec.q,
                                        g->spec.d0, g->spec.d1, &e) == OCT_OK;
    if (!ok) {
        log_err(g, "%s: %s", oct_method_name(m), e.msg);
        return false;
    }
    return true;
}

static float *dup_volume(const float *v, size_t n)
{
    float *c = malloc(n * sizeof *c);
    if (c)
        memcpy(c, v, n * sizeof *c);
    return c;
}

/* Makes vol[m] (the methods present) the reference (worker drained). */
static bool take_reference(octd *d, octd_reglive *g, const float *const vol[OCT_METHOD_COUNT],
                           const oct_params *p)
{
    size_t n = (size_t)g->L * g->N * g->D;
    for (int m = 0; m < OCT_METHOD_COUNT; m++)
        method_free(&g->m[m]);
    g->methods = 0;
    options_of(g, p, &g->opts);
    spec_of(p, g->D, &g->spec);
    g->average = p->reg_average;
    g->restart = true;
    if (!g->started) { /* fixed while they run (the job ring's size) */
        g->workers = workers_of(d);
        g->queue = 2 * (uint32_t)g->workers;
    }
    for (int m = 0; m < OCT_METHOD_COUNT; m++) {
        if (!vol[m])
            continue;
        reg_method *r = &g->m[m];
        r->ref = dup_volume(vol[m], n);
        bool sh = true;
        for (int w = 0; w < g->workers; w++)
            sh &= (r->shifts[w] = malloc((size_t)g->L * 4 * sizeof(float))) != NULL;
        if (!r->ref || !sh) {
            log_err(g, "%s: out of memory for %zu-voxel volumes", oct_method_name(m), n);
            return false;
        }
        if (!plan_planes(g, m) || !plan_method(d, g, m))
            return false;
        g->methods |= 1u << m;
    }
    g->have_ref = g->methods != 0 && start_workers(g);
    return g->have_ref;
}

/* The reference: scores (auto) or takes this frame's volumes. */
static void choose_reference(octd *d, octd_reglive *g, const float *const vol[OCT_METHOD_COUNT],
                             const octd_frame_meta *meta)
{
    const oct_params *p = &d->params;
    const uint32_t L = g->L, N = g->N, D = g->D;
    bool now = g->want == WANT_SET;
    if (g->want == WANT_AUTO) {
        int first = vol[OCT_METHOD_CFD] ? OCT_METHOD_CFD : OCT_METHOD_MSI;
        double s = sharpness(vol[first], L, N, D);
        size_t n = (size_t)L * N * D;
        if (s > g->best_score) {
            g->best_score = s;
            g->best_seq = meta->frame_seq;
            for (int m = 0; m < OCT_METHOD_COUNT; m++) {
                reg_method *r = &g->m[m];
                if (!vol[m])
                    continue;
                if (!r->best && !(r->best = malloc(n * sizeof *r->best))) {
                    log_err(g, "out of memory for the auto reference");
                    return;
                }
                memcpy(r->best, vol[m], n * sizeof *r->best);
            }
        }
        now = ++g->auto_seen >= OCTD_REGLIVE_AUTO_K;
    }
    if (!now)
        return;
    bool aut = g->want == WANT_AUTO;
    float *best[OCT_METHOD_COUNT] = {0};
    const float *src[OCT_METHOD_COUNT] = {0};
    for (int m = 0; m < OCT_METHOD_COUNT; m++) {
        best[m] = g->m[m].best; /* take_reference frees the methods */
        g->m[m].best = NULL;
        src[m] = aut ? (vol[m] ? best[m] : NULL) : vol[m];
    }
    uint64_t seq = aut ? g->best_seq : meta->frame_seq;
    g->want = WANT_NONE;
    bool ok = take_reference(d, g, src, p);
    for (int m = 0; m < OCT_METHOD_COUNT; m++)
        free(best[m]);
    if (!ok) {
        reset_all(g);
        set_status(d, OCT_REFSTATE_NONE, 0);
        return;
    }
    set_status(d, aut ? OCT_REFSTATE_AUTO : OCT_REFSTATE_SET, seq);
    octd_log(LOG_INFO, "registration: reference %s, frame_seq %" PRIu64 " (%ux%ux%u, %s)",
             aut ? "chosen (sharpest of the last volumes)" : "set", seq, L, N, D,
             oct_register_backend_name(g->m[__builtin_ctz(g->methods)].reg[0]));
}

/* Live control values: a new stripe/search re-plans, new planes or
 * reg.average restart the averages (the worker drained first). */
static void follow_params(octd *d, octd_reglive *g)
{
    const oct_params *p = &d->params;
    oct_register_options o;
    options_of(g, p, &o);
    plane_spec s;
    spec_of(p, g->D, &s);
    bool replan = o.stripe != g->opts.stripe || o.search_xy != g->opts.search_xy ||
                  o.search_z != g->opts.search_z;
    bool replanes = !spec_same(&s, &g->spec);
    if (p->reg_average != g->average)
        g->restart = true;
    g->average = p->reg_average;
    if (!replan && !replanes)
        return;
    collect(d, g, true);
    g->opts = o;
    g->spec = s;
    if (replan)
        octd_log(LOG_INFO, "registration: re-planned: stripe %u, search_xy %g, search_z %d", o.stripe,
                 (double)o.search_xy, o.search_z);
    for (int m = 0; m < OCT_METHOD_COUNT; m++) {
        if (!(g->methods & (1u << m)))
            continue;
        if ((replan && !plan_method(d, g, m)) || (replanes && !plan_planes(g, m)))
            g->methods &= ~(1u << m);
    }
    if (!g->methods) {
        reset_all(g);
        set_status(d, OCT_REFSTATE_NONE, 0);
    }
}

void octd_reglive_frame(octd *d, octd_slot *slot, const octd_frame_meta *meta)
{
    octd_reglive *g = d->reglive;
    if (!g)
        return;
    collect(d, g, false);
    if (g->want == WANT_NONE && !g->have_ref)
        return;
    const float *vol[OCT_METHOD_COUNT] = {0};
    uint32_t L = 0, N = 0, D = 0;
    bool any = false;
    for (int m = 0; m < OCT_METHOD_COUNT; m++) {
        const oct_image *img = &slot->prod->img[m][OCT_KIND_VOLUME];
        if (!img->present || !img->f32 || img->ndim != 3)
            continue;
        if (any && (img->shape[0] != L || img->shape[1] != N || img->shape[2] != D))
            continue;
        L = img->shape[0], N = img->shape[1], D = img->shape[2];
        vol[m] = img->f32;
        any = true;
    }
    if (!any) {
        log_err(g, "no volume intensities in this frame (a B-scan ring, or the engine "
                   "made no volume): registration needs volume frames (lines >= 2)");
        return;
    }
    if (g->have_ref && (L != g->L || N != g->N || D != g->D)) {
        octd_log(LOG_WARNING, "registration: the geometry changed (%ux%ux%u -> %ux%ux%u): "
                              "reference cleared", g->L, g->N, g->D, L, N, D);
        collect(d, g, true);
        reset_all(g);
        set_status(d, OCT_REFSTATE_NONE, 0);
    }
    if (L < 2 || N < 8 || D < 8) {
        log_err(g, "volume %ux%ux%u too small to register (need L >= 2, N >= 8, D >= 8)", L, N, D);
        return;
    }
    if (g->want != WANT_NONE) {
        collect(d, g, true); /* a new reference: the queued volumes go against the old one */
        g->L = L, g->N = N, g->D = D;
        choose_reference(d, g, vol, meta);
    }
    if (!g->have_ref)
        return; /* none yet, or cleared by a new geometry */
    follow_params(d, g);
    if (!g->have_ref)
        return;

    pthread_mutex_lock(&g->mu);
    reg_job *j = &g->job[g->tail % g->queue];
    bool room = g->tail - g->head < g->queue && j->state == RJ_FREE;
    pthread_mutex_unlock(&g->mu);
    if (!room) {
        g->skipped++; /* registration busy: this volume is not registered */
        return;
    }
    atomic_fetch_add_explicit(&slot->refs, 1, memory_order_acq_rel);
    j->slot = slot;
    memcpy(j->vol, vol, sizeof j->vol);
    j->meta = *meta;
    oct_gray ge = {d->params.gsc[OCT_CLASS_ENFACE], d->params.contrast[OCT_CLASS_ENFACE],
                   d->params.brightness[OCT_CLASS_ENFACE], d->params.scale == OCT_SCALE_LOG};
    oct_gray gc = {d->params.gsc[OCT_CLASS_CONFOCAL], d->params.contrast[OCT_CLASS_CONFOCAL],
                   d->params.brightness[OCT_CLASS_CONFOCAL], d->params.scale == OCT_SCALE_LOG};
    j->gray_enface = ge, j->gray_confocal = gc;
    j->restart = g->restart;
    j->average = g->average;
    g->restart = false;
    pthread_mutex_lock(&g->mu);
    j->state = RJ_QUEUED;
    g->tail++;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

void octd_reglive_free(octd *d)
{
    octd_reglive *g = d->reglive;
    if (!g)
        return;
    if (g->started) {
        /* the publisher may be gone: finished jobs are dropped */
        pthread_mutex_lock(&g->mu);
        while (g->turn < g->tail)
            pthread_cond_wait(&g->cv, &g->mu);
        pthread_mutex_unlock(&g->mu);
        stop_workers(g);
    }
    reset_all(g);
    for (int q = 0; q < OCTD_REGLIVE_JOBS; q++)
        for (int m = 0; m < OCT_METHOD_COUNT; m++)
            for (int k = 0; k < OUT_COUNT; k++)
                free_image(&g->job[q].out[m][k]);
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
    free(g);
    d->reglive = NULL;
}
