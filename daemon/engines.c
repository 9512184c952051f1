/* engines.c - octd's engine planning: the engine set-up for a geometry with
 * the profile's arrays, control values clamped to the geometry, every engine
 * of [engine] devices planned (or none), installed in place of the old ones,
 * values octd chose written back into the control block, and
 * octd_ensure_engine(), which re-plans when the ring's geometry changes. */
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "oct_control_keys.h"
#include "engines.h"
#include "frames.h"
#include "octd.h"
#include "sys.h"

static bool geom_equal(const oct_geometry *a, const oct_geometry *b)
{
    return a->samples == b->samples && a->ascans == b->ascans && a->lines == b->lines &&
           a->sample_type == b->sample_type && a->sample_shift == b->sample_shift;
}

static int32_t clamp_i32(int32_t v, int32_t lo, int32_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Moves the geometry-dependent values into range; returns whether any moved. */
static bool clamp_params(oct_params *p, const oct_setup *su)
{
    const oct_geometry *g = &su->geom;
    uint32_t mask_count = su->mask_count;
    bool have_ref = su->reference != NULL;
    oct_params o = *p;
    int32_t half = (int32_t)(g->samples / 2);
    p->xsec_h = clamp_i32(p->xsec_h, 0, (int32_t)g->lines - 1);
    p->xsec_v = clamp_i32(p->xsec_v, 0, (int32_t)g->ascans - 1);
    p->lag_lo = clamp_i32(p->lag_lo, -half + 1, half - 1);
    p->lag_hi = clamp_i32(p->lag_hi, p->lag_lo, half - 1);
    p->freq_cutoff = clamp_i32(p->freq_cutoff, 0, half); /* F <= samples/2, as validated */
    if (mask_count == 0 && (p->methods & OCT_METHOD_BIT(OCT_METHOD_MSI)))
        p->methods &= ~OCT_METHOD_BIT(OCT_METHOD_MSI);
    if (su->cms_count == 0 && (p->methods & OCT_METHOD_BIT(OCT_METHOD_CMS)))
        p->methods &= ~OCT_METHOD_BIT(OCT_METHOD_CMS);
    if (!p->methods)
        p->methods = OCT_METHOD_BIT(OCT_METHOD_CFD);
    if (!have_ref && p->background == OCT_BG_REFERENCE)
        p->background = OCT_BG_NONE;
    /* positions made for another M (or none): no k-linearisation */
    if (p->klin_source == OCT_KLIN_FILE && !su->klin_positions)
        p->klin = OCT_KLIN_OFF;
    return memcmp(&o, p, sizeof o) != 0;
}

/* An engine set-up for geometry g with the profile's arrays (masks,
 * reference, k-lin positions, CMS calibration) from its loaded data. */
void octd_setup_for(oct_setup *s, const oct_profile *prof, const oct_profile_data *data,
                    const oct_geometry *g)
{
    oct_setup_default(s);
    s->geom = *g;
    oct_profile_setup(prof, data, s);
}

/* Loads the profile's arrays for M samples; on failure (masks made for
 * another M) goes on without them, saying so. */
void octd_load_data_for(const oct_profile *prof, uint32_t samples, oct_profile_data *data)
{
    oct_error e;
    memset(data, 0, sizeof *data);
    if (oct_profile_load_data(prof, samples, data, &e) != OCT_OK) {
        octd_log(LOG_ERR, "%s; going on without the profile's arrays (masks, reference, k-lin positions, CMS calibration) for %u samples", e.msg, samples);
        memset(data, 0, sizeof *data);
    }
}

/* Plans an engine for geom from cfg/data and the wanted values; the values
 * actually used (clamped if needed) go to *used.  No side effects on d. */
static oct_err plan_engine(const oct_daemon_config *cfg, const oct_profile *prof,
                           const oct_profile_data *data, const oct_geometry *geom,
                           const oct_params *want, int k, oct_engine **out, oct_params *used,
                           oct_error *e)
{
    oct_setup s;
    octd_setup_for(&s, prof, data, geom);
    s.backend = cfg->backend;
    s.device = cfg->device;
    s.threads = cfg->threads;
    if (cfg->devices_all) {
        s.backend = OCT_BACKEND_CUDA;
        s.device = k;
    } else if (cfg->device_count > 0 && cfg->devices[k] == OCT_DEVICE_CPU) {
        /* CPU engines share the cores: threads split between them */
        int ncpu = 0;
        for (int i = 0; i < cfg->device_count; i++)
            ncpu += cfg->devices[i] == OCT_DEVICE_CPU;
        long cores = cfg->threads ? cfg->threads : sysconf(_SC_NPROCESSORS_ONLN);
        s.backend = OCT_BACKEND_CPU;
        s.threads = cores / ncpu > 1 ? (int)(cores / ncpu) : 1;
    } else if (cfg->device_count > 0) {
        s.device = cfg->devices[k]; /* with [engine] backend (auto: CPU without a GPU) */
    }
    s.precision = cfg->precision;
    s.cuda.graph = cfg->cuda_graph;
    s.cuda.cfd = cfg->cuda_cfd;
    oct_params p = *want;
    oct_error ve;
    if (oct_params_check(&p, &s, &ve) != OCT_OK) {
        clamp_params(&p, &s);
        if (oct_params_check(&p, &s, e) != OCT_OK) {
            /* Values that clamping cannot fix: fall back to the profile's. */
            p = prof->params;
            clamp_params(&p, &s);
            octd_log(LOG_WARNING, "control values do not fit the geometry (%s); using the profile's",
                     e ? e->msg : "");
        } else {
            octd_log(LOG_WARNING, "control values clamped to the geometry %ux%ux%u: %s",
                     geom->lines, geom->ascans, geom->samples, ve.msg);
        }
    }
    /* A GPU engine's own host buffers (pinned staging) first-touched on its
     * NUMA node (issue 20.1; the frame path places its threads and pools). */
    octd_placement pl;
    cpu_set_t saved;
    char bus[32];
    bool placed = cfg->numa && s.backend != OCT_BACKEND_CPU &&
                  oct_cuda_pci_bus_id(s.device, bus, sizeof bus, NULL) == OCT_OK &&
                  octd_placement_read(OCTD_SYSFS, bus, &pl, NULL) == OCT_OK &&
                  octd_placement_enter(&pl, &saved);
    oct_err rc = oct_engine_create(out, &s, &p, e);
    octd_placement_leave(placed, &saved);
    if (rc == OCT_OK)
        *used = p;
    return rc;
}

/* Engines [engine] devices asks for (1 without the key); -1 and e set when
 * `all` finds no CUDA device. */
static int engine_count(const oct_daemon_config *cfg, oct_error *e)
{
    if (!cfg->devices_all)
        return cfg->device_count > 0 ? cfg->device_count : 1;
    int n = oct_cuda_device_count();
    if (n <= 0)
        return oct_error_set(e, OCT_EUNSUPPORTED, "%s: [engine] devices = all: no CUDA device "
                             "found", cfg->source_path), -1;
    return n < OCT_ENGINES_MAX ? n : OCT_ENGINES_MAX;
}

/* All engines of [engine] devices for geom: engine 0 with the wanted values
 * (clamped if needed, as plan_engine), the others with the values it took,
 * so every engine runs the same generation.  On failure none is left. */
oct_err octd_plan_engines(const oct_daemon_config *cfg, const oct_profile *prof,
                          const oct_profile_data *data, const oct_geometry *geom,
                          const oct_params *want, oct_engine **engs, int *n_out,
                          oct_params *used, oct_error *e)
{
    int n = engine_count(cfg, e);
    if (n < 0)
        return OCT_EUNSUPPORTED;
    oct_err rc = plan_engine(cfg, prof, data, geom, want, 0, &engs[0], used, e);
    int k = rc == OCT_OK ? 1 : 0;
    for (; rc == OCT_OK && k < n; k++) {
        oct_params p;
        if ((rc = plan_engine(cfg, prof, data, geom, used, k, &engs[k], &p, e)) != OCT_OK)
            oct_error_prefix(e, rc, "engine %d of [engine] devices", k);
    }
    if (rc != OCT_OK) {
        for (int i = 0; i < k; i++) {
            oct_engine_destroy(engs[i]);
            engs[i] = NULL;
        }
        return rc;
    }
    if (cfg->fail_after > 0)
        octd_log(LOG_WARNING, "[engine] fail_after = %d (a test knob): engine %d will fail%s",
                 cfg->fail_after, cfg->fail_engine >= 0 ? cfg->fail_engine : n - 1,
                 (cfg->fail_engine >= 0 ? cfg->fail_engine : n - 1) >= n ? " (there is no such "
                                                                            "engine)" : "");
    if (n > 1 && used->background == OCT_BG_ROLLING)
        octd_log(LOG_WARNING, "%d engines: each keeps its own rolling background (of the "
                              "frames dealt to it)", n);
    *n_out = n;
    return OCT_OK;
}

void octd_destroy_engines(octd *d)
{
    if (d->neng == 0)
        oct_engine_destroy(d->eng);
    for (int i = 0; i < d->neng; i++)
        oct_engine_destroy(d->engs[i]);
    memset(d->engs, 0, sizeof d->engs);
    d->neng = 0;
    d->eng = NULL;
}

/* [engine] nice = auto: the frame loop (and its OpenMP team, the CPU engine's
 * threads) less nice only with CPU engines, where it competes for the CPU
 * with whatever else runs (issue 21: a crowd of subscribers on 2 cores).  With
 * a GPU engine it mostly waits for the device, and nice -20 there lost more
 * B-scan runs at 10,000/s than octd's own nice (README). */
void octd_auto_nice(octd *d)
{
    if (d->cfg.nice != OCT_NICE_AUTO || d->neng == 0)
        return;
    int cpu = 1;
    for (int i = 0; i < d->neng; i++)
        if (strcmp(oct_engine_backend_name(d->engs[i]), "cpu") != 0)
            cpu = 0;
    if (cpu == d->nice_cpu)
        return;
    bool had = d->nice_cpu >= 0;
    d->nice_cpu = cpu;
    if (cpu || had)
        octd_rt_nice(cpu ? OCT_NICE_AUTO : OCTD_NICE_OWN, true);
}

void octd_install_engines(octd *d, oct_engine **engs, int n)
{
    octd_destroy_engines(d);
    memcpy(d->engs, engs, sizeof(oct_engine *) * (size_t)n);
    d->neng = n;
    d->eng = engs[0];
    d->engine_warning[0] = '\0'; /* all in again */
    d->engines_gen++;
    octd_auto_nice(d);
}

static void write_params_cb(oct_control_values *v, void *arg)
{
    oct_control_from_params(v, (const oct_params *)arg);
}

/* Writes values octd chose into the control block as a new generation
 * (expect: 0, or the generation they were derived from: skipped, and left
 * to the newer one, when a writer has written since). */
void octd_publish_params(octd *d, const oct_params *p, const char *why, uint64_t expect)
{
    oct_error e;
    uint64_t gen;
    oct_params copy = *p;
    oct_err rc = expect ? oct_control_write_if(d->ctl, expect, write_params_cb, &copy, &gen, &e)
                        : oct_control_write(d->ctl, write_params_cb, &copy, &gen, &e);
    if (rc == OCT_EAGAIN)
        octd_log(LOG_DEBUG, "control block: %s values not written: %s (the newer values are "
                 "checked next)", why, e.msg);
    else if (rc != OCT_OK)
        octd_log(LOG_ERR, "control block: cannot write %s values: %s", why, e.msg);
    else
        octd_log(LOG_DEBUG, "control block: %s values written as generation %" PRIu64, why, gen);
}

/* Makes the engine fit geom (plans when needed).  false: cannot process. */
static bool ensure_engine(octd *d, const oct_geometry *geom)
{
    if (d->eng && geom_equal(&d->eng_geom, geom))
        return true;
    if (d->data_samples != geom->samples) {
        oct_profile_data_free(&d->data);
        octd_load_data_for(&d->prof, geom->samples, &d->data);
        d->data_samples = geom->samples;
    }
    oct_engine *engs[OCT_ENGINES_MAX] = {0};
    int neng = 0;
    oct_params used;
    oct_error e;
    uint64_t t0 = oct_time_monotonic_ns();
    if (octd_plan_engines(&d->cfg, &d->prof, &d->data, geom, &d->params, engs, &neng, &used, &e) !=
        OCT_OK) {
        if (strcmp(d->proc_err, e.msg) != 0) {
            octd_log(LOG_ERR, "cannot plan the engine for %ux%ux%u %s: %s", geom->lines,
                     geom->ascans, geom->samples, oct_sample_name(geom->sample_type), e.msg);
            octd_copy_text(d->proc_err, sizeof d->proc_err, e.msg);
        }
        d->error_state = true;
        return false;
    }
    octd_frames_drain(d); /* nothing in flight on the old engine */
    bool shrink = d->eng && oct_geometry_frame_bytes(geom) < oct_geometry_frame_bytes(&d->eng_geom);
    octd_install_engines(d, engs, neng);
    if (shrink)
        malloc_trim(0); /* the larger geometry's engine memory goes back */
    oct_engine *eng = d->eng;
    d->eng_geom = *geom;
    d->error_state = false;
    d->proc_err[0] = '\0';
    octd_log(LOG_INFO, "engine planned: %s (%s), %ux%ux%u %s, %.0f ms",
             oct_engine_backend_name(eng), oct_engine_device_name(eng), geom->lines, geom->ascans,
             geom->samples, oct_sample_name(geom->sample_type),
             (double)(oct_time_monotonic_ns() - t0) / 1e6);
    for (int i = 1; i < neng; i++)
        octd_log(LOG_INFO, "engine %d planned: %s (%s), NUMA node %d", i,
                 oct_engine_backend_name(engs[i]), oct_engine_device_name(engs[i]),
                 oct_engine_numa_node(engs[i]));
    if (memcmp(&used, &d->params, sizeof used) != 0) {
        d->params = used;
        oct_control_from_params(&d->values, &used);
        octd_publish_params(d, &used, "clamped", d->applied_gen);
    }
    octd_status_engine(d);
    return true;
}

bool octd_ensure_engine(octd *d, const oct_geometry *geom) { return ensure_engine(d, geom); }
