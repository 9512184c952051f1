/* oct_handle.c - see oct_handle.h.  Mirrors octproc's set-up so that
 * octd.Engine gives octproc's products. */
#include "oct_handle.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "oct_config.h"
#include "oct_control_keys.h"
#include "oct_engine.h"
#include "oct_ipc.h"

struct oct_proc {
    oct_profile prof;
    oct_profile_data data;
    oct_geometry geom;
    oct_engine *eng;
    oct_products *pr;
};

/* Applies '\n'-separated assignments (empty lines ignored). */
static oct_err assign_lines(oct_control_values *v, const char *text, oct_error *e)
{
    if (!text)
        return OCT_OK;
    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        if (n) {
            char line[1024];
            if (n >= sizeof line)
                return oct_error_set(e, OCT_EINVAL, "assignment of %zu characters is too long", n);
            memcpy(line, p, n);
            line[n] = '\0';
            oct_err err = oct_control_assign(v, line, e);
            if (err)
                return err;
        }
        p += n + (nl ? 1 : 0);
    }
    return OCT_OK;
}

oct_err oct_proc_open(oct_proc **out, const char *profile, const oct_geometry *g, int backend,
                      int threads, const char *sets, bool quick_plan, oct_error *e)
{
    *out = NULL;
    if (!profile)
        return oct_error_set(e, OCT_EINVAL, "no profile given");
    if (backend < 0 || backend > 2)
        return oct_error_set(e, OCT_EINVAL, "backend %d: must be 0 auto, 1 cpu or 2 cuda", backend);
    oct_proc *p = calloc(1, sizeof *p);
    if (!p)
        return oct_error_set(e, OCT_ENOMEM, "out of memory");
    oct_err err = oct_profile_load(&p->prof, profile, e);
    if (err)
        goto fail;
    if (sets) {
        oct_control_values v;
        memset(&v, 0, sizeof v);
        oct_control_from_params(&v, &p->prof.params);
        if ((err = assign_lines(&v, sets, e)))
            goto fail;
        oct_params_from_control(&p->prof.params, &v);
    }
    if (g) {
        p->geom = *g;
        if (p->prof.has_geometry) {
            const oct_geometry *pg = &p->prof.geom;
            if (pg->samples != g->samples || pg->ascans != g->ascans || pg->lines != g->lines ||
                pg->sample_type != g->sample_type) {
                err = oct_error_set(e, OCT_ESIZE,
                                    "frame (lines %u, ascans %u, samples %u, %s) does not match "
                                    "the geometry of %s (lines %u, ascans %u, samples %u, %s)",
                                    g->lines, g->ascans, g->samples, oct_sample_name(g->sample_type),
                                    profile, pg->lines, pg->ascans, pg->samples,
                                    oct_sample_name(pg->sample_type));
                goto fail;
            }
            p->geom.sample_shift = pg->sample_shift;
        }
    } else if (p->prof.has_geometry) {
        p->geom = p->prof.geom;
    } else {
        err = oct_error_set(e, OCT_ESTATE, "%s has no geometry: give the frame's", profile);
        goto fail;
    }
    if ((err = oct_geometry_check(&p->geom, e)))
        goto fail;
    if ((err = oct_profile_load_data(&p->prof, p->geom.samples, &p->data, e)))
        goto fail;
    oct_setup s;
    oct_setup_default(&s);
    s.geom = p->geom;
    oct_profile_setup(&p->prof, &p->data, &s);
    s.backend = (oct_backend)backend;
    s.threads = threads;
    s.flags = quick_plan ? OCT_SETUP_QUICK_PLAN : 0;
    if ((err = oct_profile_check(&p->prof, &s, e)))
        goto fail;
    if ((err = oct_engine_create(&p->eng, &s, &p->prof.params, e)))
        goto fail;
    if (!(p->pr = oct_products_create())) {
        err = oct_error_set(e, OCT_ENOMEM, "out of memory");
        goto fail;
    }
    *out = p;
    return OCT_OK;
fail:
    oct_proc_close(p);
    return err;
}

void oct_proc_close(oct_proc *p)
{
    if (!p)
        return;
    oct_products_destroy(p->pr);
    oct_engine_destroy(p->eng);
    oct_profile_data_free(&p->data);
    free(p);
}

void oct_proc_geometry(const oct_proc *p, oct_geometry *g) { *g = p->geom; }
const char *oct_proc_backend(const oct_proc *p) { return oct_engine_backend_name(p->eng); }
uint32_t oct_proc_products(const oct_proc *p) { return oct_engine_params(p->eng)->products; }

oct_err oct_proc_frame(oct_proc *p, const void *frame, size_t bytes, double *ms, oct_error *e)
{
    size_t want = (size_t)oct_geometry_frame_bytes(&p->geom);
    if (bytes != want)
        return oct_error_set(e, OCT_ESIZE, "frame of %zu bytes: the geometry needs %zu", bytes,
                             want);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    oct_err err = oct_engine_process(p->eng, frame, bytes, p->pr, e);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (ms)
        *ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-6;
    return err;
}

bool oct_proc_image(const oct_proc *p, int method, int kind, int *ndim, uint32_t shape[3],
                    const uint8_t **u8, const float **f32, const int32_t **indices,
                    uint32_t *n_indices)
{
    if (method < 0 || method >= OCT_METHOD_COUNT || kind < 0 || kind >= OCT_KIND_COUNT)
        return false;
    const oct_image *img = &p->pr->img[method][kind];
    if (!img->present)
        return false;
    *ndim = img->ndim;
    memcpy(shape, img->shape, sizeof img->shape);
    *u8 = img->u8;
    *f32 = (oct_engine_params(p->eng)->products & OCT_PRODUCT_F32) ? img->f32 : NULL;
    *indices = img->indices;
    *n_indices = img->n_indices;
    return true;
}

/* ---- control / status ---- */
static void apply_cb(oct_control_values *v, void *arg)
{
    /* checked on a copy before: cannot fail here */
    assign_lines(v, arg, NULL);
}

oct_err oct_ctl_set(const char *control, const char *assignments, uint64_t *gen, oct_error *e)
{
    oct_control *c;
    oct_err err = oct_control_open(&c, control, true, e);
    if (err)
        return err;
    oct_control_values v;
    uint64_t g0;
    if (oct_control_read(c, 1000, &v, &g0) != OCT_OK) {
        oct_control_close(c, false);
        return oct_error_set(e, OCT_EAGAIN, "control %s: a writer stayed inside the block", control);
    }
    /* every assignment parsed before anything is written: a bad key or
     * value writes nothing; then applied under the writers' lock on top of
     * the values as they are then */
    if ((err = assign_lines(&v, assignments, e)) == OCT_OK)
        err = oct_control_write(c, apply_cb, (void *)assignments, gen, e);
    oct_control_close(c, false);
    return err;
}

oct_err oct_ctl_get(const char *control, char *buf, size_t len, oct_error *e)
{
    oct_control *c;
    oct_err err = oct_control_open(&c, control, false, e);
    if (err)
        return err;
    oct_control_values v;
    uint64_t g;
    err = oct_control_read(c, 1000, &v, &g);
    oct_control_close(c, false);
    if (err)
        return oct_error_set(e, err, "control %s: a writer stayed inside the block", control);
    if (oct_control_format_all(&v, buf, len) >= len)
        return oct_error_set(e, OCT_ESIZE, "control values do not fit %zu bytes", len);
    return OCT_OK;
}

oct_err oct_ctl_command(const char *control, uint32_t command, uint32_t flags, uint32_t frames,
                        double seconds, uint64_t *seq, oct_error *e)
{
    oct_control *c;
    oct_err err = oct_control_open(&c, control, true, e);
    if (err)
        return err;
    err = oct_control_command_args(c, command, flags, frames, seconds, seq, e);
    oct_control_close(c, false);
    return err;
}

oct_err oct_stat_copy(const char *status, void *block, size_t len, oct_error *e)
{
    if (len < sizeof(oct_status_block))
        return oct_error_set(e, OCT_ESIZE, "status copy needs %zu bytes", sizeof(oct_status_block));
    oct_status *s;
    oct_err err = oct_status_open(&s, status, e);
    if (err)
        return err;
    err = oct_status_read(s, block);
    oct_status_close(s, false);
    if (err)
        return oct_error_set(e, err, "status %s: no consistent copy", status);
    return OCT_OK;
}
