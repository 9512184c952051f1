/* register.c - volume registration (SPEC 10.4): the backend-neutral logic
 * (stripes, candidates, choice of the match, validity) and the CPU backend
 * (FFTW, OpenMP).  See oct_register.h for the method; the reconstruction and
 * the running averages are in register_recon.c. */
#include <fftw3.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "register_internal.h"

void oct_register_options_default(oct_register_options *o)
{
    memset(o, 0, sizeof *o);
    o->stripe = 3;
    o->search_xy = 0.25f;
    o->search_z = 15;
    o->window = 2;
    o->min_pnr = 8.0f;
    o->jump = 3.0f;
    o->rel_pnr = 0.7f;
    o->split = 0.5f;
    o->edge = 0.3f;
    o->tf32 = true;
}

void oct_register_options_from_params(oct_register_options *o, const oct_params *p)
{
    o->stripe = p->reg_stripe > 0 ? (uint32_t)p->reg_stripe : 3;
    o->search_xy = p->reg_search_xy;
    o->search_z = p->reg_search_z;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* sum of the separable weight over a full spectrum, DC removed, and the
 * RMS of a phase-only surface of random phases: sqrt(sum W^2) / sum W */
static void weight_sums(const uint32_t *dims, int nd, double *sumw, double *noise)
{
    double s = 1, s2 = 1;
    for (int a = 0; a < nd; a++) {
        double t = 0, t2 = 0;
        for (uint32_t k = 0; k < dims[a]; k++) {
            double w = reg_hann((int)k, (int)dims[a]);
            t += w, t2 += w * w;
        }
        s *= t, s2 *= t2;
    }
    *sumw = s - 1.0, *noise = sqrt(s2 - 1.0) / (s - 1.0);
}

oct_err oct_register_create(oct_register **out, uint32_t L, uint32_t N, uint32_t D,
                            const oct_register_options *o, oct_backend backend, oct_error *e)
{
    *out = NULL;
    oct_register_options def;
    if (!o) {
        oct_register_options_default(&def);
        o = &def;
    }
    if (L < 2 || N < 8 || D < 8 || L > 65536 || N > 65536 || D > 65536)
        return oct_error_set(e, OCT_EINVAL,
                             "registration: volume [%u][%u][%u] (lines, A-scans, depths): needs "
                             "at least 2 lines, 8 A-scans and 8 depths (at most 65536 each)",
                             L, N, D);
    if (o->stripe < 1 || o->stripe > 64 || o->stripe > L)
        return oct_error_set(e, OCT_EINVAL, "reg.stripe %u is outside [1, min(64, lines %u)]",
                             o->stripe, L);
    if (!(o->search_xy > 0.0f && o->search_xy <= 0.5f))
        return oct_error_set(e, OCT_EINVAL, "reg.search_xy %g is outside (0, 0.5]",
                             (double)o->search_xy);
    if (o->search_z < 0 || o->search_z > 512)
        return oct_error_set(e, OCT_EINVAL, "reg.search_z %d is outside [0, 512]", o->search_z);
    if (o->window < 1 || o->window > 16)
        return oct_error_set(e, OCT_EINVAL, "registration window %d is outside [1, 16]", o->window);
    if (!(o->rel_pnr >= 0.0f && o->rel_pnr < 1.0f))
        return oct_error_set(e, OCT_EINVAL, "registration rel_pnr %g is outside [0, 1)",
                             (double)o->rel_pnr);
    if (!(o->split > 0.0f))
        return oct_error_set(e, OCT_EINVAL, "registration split %g: must be > 0", (double)o->split);
    if (!(o->edge > 0.0f))
        return oct_error_set(e, OCT_EINVAL, "registration edge %g: must be > 0 (px)", (double)o->edge);
    if (!(o->min_pnr >= 0.0f) || !(o->jump > 0.0f) || !isfinite(o->jump))
        return oct_error_set(e, OCT_EINVAL, "registration min_pnr %g / jump %g: must be >= 0 / > 0",
                             (double)o->min_pnr, (double)o->jump);
    uint32_t f = o->coarse_factor;
    if (f && (f > 16 || (f & (f - 1)) || N / f < 4 || D / f < 4))
        return oct_error_set(e, OCT_EINVAL,
                             "registration coarse factor %u: must be a power of two <= 16 leaving "
                             "at least 4 A-scans and depths (N %u, D %u)", f, N, D);
    if (!f)
        for (f = 8; f > 1 && (N / f < 64 || D / f < 64); f /= 2)
            ;
    oct_register *r = calloc(1, sizeof *r);
    if (!r)
        return oct_error_set(e, OCT_ENOMEM, "registration: out of memory");
    r->L = L, r->N = N, r->D = D, r->o = *o, r->f = f;
    r->Nc = N / f, r->Dc = D / f;
    r->sx = (int32_t)floorf(o->search_xy * (float)N);
    r->sy = (int32_t)floorf(o->search_xy * (float)L);
    r->sz = o->search_z;
    if (r->sx > (int32_t)N / 2 - 1) r->sx = (int32_t)N / 2 - 1;
    if (r->sz > (int32_t)D / 2 - 1) r->sz = (int32_t)D / 2 - 1;
    if (r->sy < 1) r->sy = 1;
    r->sxc = (r->sx + (int32_t)f - 1) / (int32_t)f;
    r->szc = (r->sz + (int32_t)f - 1) / (int32_t)f;
    if (r->sxc > (int32_t)r->Nc / 2 - 1) r->sxc = (int32_t)r->Nc / 2 - 1;
    if (r->szc > (int32_t)r->Dc / 2 - 1) r->szc = (int32_t)r->Dc / 2 - 1;
    uint32_t d2[2] = {N, D}, d3[3] = {L, r->Nc, r->Dc};
    weight_sums(d2, 2, &r->sumw2, &r->noise2);
    weight_sums(d3, 3, &r->sumw3, &r->noise3);
    r->inv_scale = 1.0f;
    r->pnr = malloc(sizeof(float) * L);
    r->dy_pred = malloc(sizeof(float) * L);
    if (!r->pnr || !r->dy_pred) {
        oct_register_destroy(r);
        return oct_error_set(e, OCT_ENOMEM, "registration: out of memory");
    }
    if (backend == OCT_BACKEND_AUTO) {
#ifdef OCT_HAVE_CUDA
        char name[128];
        oct_error pe;
        backend = oct_cuda_probe(o->device, name, sizeof name, &pe) == OCT_OK ? OCT_BACKEND_CUDA
                                                                             : OCT_BACKEND_CPU;
#else
        backend = OCT_BACKEND_CPU;
#endif
    }
    if (backend == OCT_BACKEND_CUDA) {
#ifdef OCT_HAVE_CUDA
        r->ops = &reg_cuda_ops;
#else
        oct_register_destroy(r);
        return oct_error_set(e, OCT_EUNSUPPORTED, "registration: CUDA backend not built in");
#endif
    } else {
        r->ops = &reg_cpu_ops;
    }
    oct_err err = r->ops->create(r, e);
    if (err) {
        r->ops = NULL;
        oct_register_destroy(r);
        return err;
    }
    *out = r;
    return OCT_OK;
}

void oct_register_destroy(oct_register *r)
{
    if (!r)
        return;
    if (r->ops)
        r->ops->destroy(r);
    free(r->pnr);
    free(r->dy_pred);
    free(r);
}

const char *oct_register_backend_name(const oct_register *r) { return r->ops->name; }
uint32_t oct_register_coarse_factor(const oct_register *r) { return r->f; }
bool oct_register_has_reference(const oct_register *r) { return r->have_ref; }

void oct_register_dims(const oct_register *r, uint32_t *L, uint32_t *N, uint32_t *D)
{
    if (L) *L = r->L;
    if (N) *N = r->N;
    if (D) *D = r->D;
}

/* First non-finite value, named by its position. */
static oct_err check_finite(const oct_register *r, const float *v, const char *what, oct_error *e)
{
    size_t n = (size_t)r->L * r->N * r->D, bad = n;
#pragma omp parallel for reduction(min : bad) schedule(static)
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i]) && i < bad)
            bad = i;
    if (bad == n)
        return OCT_OK;
    size_t d = bad % r->D, a = bad / r->D % r->N, l = bad / r->D / r->N;
    return oct_error_set(e, OCT_EINVAL, "registration: %s value at line %zu, A-scan %zu, depth %zu "
                                        "is not finite", what, l, a, d);
}

oct_err oct_register_set_reference(oct_register *r, const float *vol, oct_error *e)
{
    oct_err err = check_finite(r, vol, "reference", e);
    if (err)
        return err;
    size_t n = (size_t)r->L * r->N * r->D;
    double s = 0;
#pragma omp parallel for reduction(+ : s) schedule(static)
    for (size_t i = 0; i < n; i++)
        s += vol[i] > 0 ? vol[i] : 0;
    s /= (double)n;
    r->inv_scale = s > 0 ? (float)(1.0 / s) : 1.0f;
    r->have_ref = false;
    if ((err = r->ops->set_reference(r, vol, e)))
        return err;
    r->have_ref = true;
    return OCT_OK;
}

void oct_register_last_details(const oct_register *r, float *pnr, float *dy_pred)
{
    if (pnr)
        memcpy(pnr, r->pnr, sizeof(float) * r->L);
    if (dy_pred)
        memcpy(dy_pred, r->dy_pred, sizeof(float) * r->L);
}

void oct_register_last_times(const oct_register *r, oct_register_times *t) { *t = r->times; }

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Median of the finite values[i] for i in [lo, hi] with ok[i]; count in *cnt. */
static float side_median(const float *v, const bool *ok, int lo, int hi, int n, int stride,
                         int *cnt)
{
    float buf[16];
    int c = 0;
    for (int i = lo; i <= hi; i++)
        if (i >= 0 && i < n && ok[i] && c < 16)
            buf[c++] = v[(size_t)i * stride];
    *cnt = c;
    if (!c)
        return NAN;
    qsort(buf, (size_t)c, sizeof *buf, cmp_float);
    return c % 2 ? buf[c / 2] : 0.5f * (buf[c / 2 - 1] + buf[c / 2]);
}

/* Two-sided consistency (Do 2016's neighbour check, robust to a real jump
 * after a saccade): item i is kept when the medians of the `side` items
 * before it or of those after it agree with it within tol on every
 * component; a side with fewer than 2 valid items gives no evidence. */
static void consistency(const float *v, int stride, int ncomp, int n, int side, float tol,
                        const bool *ok, bool *keep)
{
    for (int i = 0; i < n; i++) {
        keep[i] = ok[i];
        if (!ok[i])
            continue;
        bool known = false, agree = false;
        for (int s = 0; s < 2; s++) {
            int lo = s ? i + 1 : i - side, hi = s ? i + side : i - 1, cnt = 0;
            float dmax = 0;
            for (int c = 0; c < ncomp; c++) {
                float m = side_median(v + c, ok, lo, hi, n, stride, &cnt);
                if (cnt < 2)
                    break;
                float dd = fabsf(v[(size_t)i * stride + c] - m);
                if (dd > dmax)
                    dmax = dd;
            }
            if (cnt >= 2) {
                known = true;
                if (dmax <= tol)
                    agree = true;
            }
        }
        if (known && !agree)
            keep[i] = false;
    }
}

/* y (sub-pixel, parabola) and x of the strongest of the candidates of one line */
static void best_of(const uint32_t *off, const int32_t *cand, const reg_peak *p, int l, float *y,
                    float *x, float *h)
{
    int bi = -1;
    for (uint32_t i = off[l]; i < off[l + 1]; i++)
        if (bi < 0 || p[i].h > p[bi].h)
            bi = (int)i;
    *y = *x = NAN, *h = 0;
    if (bi < 0)
        return;
    float hm = NAN, hp = NAN;
    for (uint32_t i = off[l]; i < off[l + 1]; i++) {
        if (cand[i] == cand[bi] - 1) hm = p[i].h;
        if (cand[i] == cand[bi] + 1) hp = p[i].h;
    }
    *y = (float)cand[bi], *x = (float)p[bi].x + p[bi].fx, *h = p[bi].h;
    float den = hm - 2 * p[bi].h + hp;
    if (isfinite(hm) && isfinite(hp) && den < 0) {
        float o = 0.5f * (hm - hp) / den;
        *y += o > 0.5f ? 0.5f : o < -0.5f ? -0.5f : o;
    }
}

/* The candidate reference lines of each line l (off[l]..off[l+1] in cand):
 * best[l].y +- K within the volume; none for a line without a coarse match
 * or, with `dir` ([L][4], read at dir[4 l]), whose direction is NaN.  The
 * number of candidates. */
static uint32_t candidates(const reg_peak *best, int L, int K, const float *dir, uint32_t *off,
                           int32_t *cand)
{
    uint32_t n = 0;
    for (int l = 0; l < L; l++) {
        off[l] = n;
        if (best[l].y < 0 || (dir && isnan(dir[4 * (size_t)l])))
            continue;
        for (int y = best[l].y - K; y <= best[l].y + K; y++)
            if (y >= 0 && y < L)
                cand[n++] = y;
    }
    off[L] = n;
    return n;
}

/* The saccade test: a line acquired while the eye jumped is sheared, so
 * its parts match different places.  Each half and each end third of every
 * matched line is correlated with the reference lines within +-3 of its
 * match (the thirds when N >= REG_THIRDS_MIN_N); a part's place is its
 * peak, sub-pixel in y (parabola across reference lines) and x (parabola
 * along x, reg_peak.fx).  The line is invalid (best.y = -1) when its halves
 * lie further apart than `split` px in x or y, when an end third lies
 * further than 1.1 split from the opposite half (its peak is noisier), or
 * when a part has no match.  The thirds catch lines at the start or end of
 * a saccade, where only one end of the line moved and the halves still
 * agree (octbench register, 128^3: 78.6 -> 92.9 % of saccade lines flagged,
 * 0 good lines flagged). */
#define REG_THIRDS_MIN_N 96
#define REG_PARTS 8 /* per line: (x, y) of the left half, right half, left third, right third */
static oct_err split_test(oct_register *r, reg_peak *best, float *parts, oct_error *e)
{
    /* parts: reg_half 1..4; the thirds only on lines of >= 96 A-scans (below,
     * their peaks are too noisy: good lines were flagged at 64) */
    const int L = (int)r->L, K = 3, P = r->N >= REG_THIRDS_MIN_N ? 4 : 2;
    uint32_t *off = malloc(sizeof *off * (size_t)(L + 1));
    int32_t *cand = malloc(sizeof *cand * (size_t)L * (2 * K + 1));
    reg_peak *p[4] = {NULL, NULL, NULL, NULL};
    for (int h = 0; h < P; h++)
        p[h] = malloc(sizeof(reg_peak) * (size_t)L * (2 * K + 1));
    oct_err err = OCT_OK;
    if (!off || !cand || !p[0] || !p[1] || (P == 4 && (!p[2] || !p[3]))) {
        err = oct_error_set(e, OCT_ENOMEM, "registration: out of memory");
        goto out;
    }
    for (size_t i = 0; i < (size_t)L * REG_PARTS; i++)
        parts[i] = NAN;
    if (!candidates(best, L, K, NULL, off, cand))
        goto out;
    if (r->ops->fine_parts) {
        if ((err = r->ops->fine_parts(r, off, cand, P, p, e)))
            goto out;
    } else {
        for (int h = 0; h < P; h++)
            if ((err = r->ops->fine(r, off, cand, h + 1, p[h], e)))
                goto out;
    }
    /* a part carries about its share of the energy: its noise level is the
     * same, its peak about that share; min_pnr x share is its threshold */
    const float share[4] = {0.5f, 0.5f, 1.0f / 3, 1.0f / 3};
    const float sh = r->o.split, st = 1.1f * r->o.split;
    for (int l = 0; l < L; l++) {
        if (best[l].y < 0)
            continue;
        float y[4], x[4], hh[4];
        bool weak = false;
        for (int h = 0; h < P; h++) {
            best_of(off, cand, p[h], l, &y[h], &x[h], &hh[h]);
            weak |= hh[h] / r->noise2 < share[h] * r->o.min_pnr;
        }
        /* NaN (no match) fails every comparison */
        bool apart = !(fabsf(y[0] - y[1]) <= sh) || !(fabsf(x[0] - x[1]) <= sh);
        if (P == 4)
            apart |= !(fabsf(y[2] - y[1]) <= st) || !(fabsf(x[2] - x[1]) <= st) ||
                     !(fabsf(y[3] - y[0]) <= st) || !(fabsf(x[3] - x[0]) <= st);
        if (weak || apart)
            best[l].y = -1;
        for (int h = 0; h < P; h++) /* for edge_test */
            parts[(size_t)l * REG_PARTS + 2 * h] = x[h], parts[(size_t)l * REG_PARTS + 2 * h + 1] = y[h];
    }
out:
    free(off), free(cand);
    for (int h = 0; h < P; h++)
        free(p[h]);
    return err;
}

/* The edge test: a saccade that starts late in line l (or ends early in
 * it) moves only the end of l nearest to it in time, by up to a few px at
 * the last (first) A-scans; the split test misses lines sheared so by 1-2
 * px (octbench register, 128^3: 7 of 8 missed saccade lines; their
 * whole-line shifts are within 0.1 px of the truth).  What gives them away
 * is the direction: next to a run of invalid lines (the saccade), the end
 * of l toward the run (right end when the run follows l, left end when it
 * precedes it; A-scans are acquired in order n = 0 .. N-1) has moved from
 * the opposite half toward the place of the first valid line across the
 * run.  That end's place (its fifth, correlated here for these few lines
 * only; the fifth, about the moving part of a line sheared by > 1 px,
 * shows ~2x the displacement of the end third) is projected on the unit
 * jump J (x, y; |J| >= 1 px; runs up to REG_EDGE_REACH lines): l is
 * invalid when it exceeds `edge` px, or, when the fifth found no match,
 * the end third's exceeds REG_EDGE_THIRD x edge.  Noise moves part peaks
 * alike in every direction (RMS ~0.1 px at 128^3): the one-sided
 * projection keeps false flags to a few lines beside saccades (octbench
 * register: 92.9 / 92.1 -> 96+ % flagged; see README).  Lines of fewer than
 * REG_THIRDS_MIN_N A-scans use the near half instead of the third. */
#define REG_EDGE_REACH 8
#define REG_EDGE_THIRD 0.4f /* the third's threshold, x edge: its signal is diluted */
static oct_err edge_test(oct_register *r, const reg_peak *best, const float *vec, const float *parts,
                         const bool *keep, bool *out, oct_error *e)
{
    const int L = (int)r->L, K = 3;
    const bool thirds = r->N >= REG_THIRDS_MIN_N;
    float *dir = malloc(sizeof *dir * 4 * (size_t)L); /* per line, side: unit jump (x, y) or NaN */
    uint32_t *off = malloc(sizeof *off * (size_t)(L + 1));
    int32_t *cand = malloc(sizeof *cand * (size_t)L * (2 * K + 1));
    reg_peak *pk = malloc(sizeof *pk * (size_t)L * (2 * K + 1));
    oct_err err = OCT_OK;
    if (!dir || !off || !cand || !pk) {
        err = oct_error_set(e, OCT_ENOMEM, "registration: out of memory");
        goto done;
    }
    for (int l = 0; l < L; l++) {
        out[l] = keep[l];
        for (int s = 0; s < 2; s++) {
            float *d = dir + 4 * (size_t)l + 2 * s;
            d[0] = d[1] = NAN;
            int side = s ? 1 : -1, j = l + side;
            if (!keep[l] || j < 0 || j >= L || keep[j])
                continue;
            while (j >= 0 && j < L && !keep[j] && abs(j - l) <= REG_EDGE_REACH)
                j += side;
            if (j < 0 || j >= L || !keep[j])
                continue;
            float jx = vec[3 * j] - vec[3 * l], jy = vec[3 * j + 1] - vec[3 * l + 1];
            float jn = hypotf(jx, jy);
            if (jn >= 1.0f)
                d[0] = jx / jn, d[1] = jy / jn;
        }
    }
    for (int s = 0; s < 2; s++) {
        /* the end fifth toward the run (5 left, 6 right) of the candidate lines */
        if (!candidates(best, L, K, dir + 2 * s, off, cand))
            continue;
        if ((err = r->ops->fine(r, off, cand, s ? 6 : 5, pk, e)))
            goto done;
        int near3 = s ? (thirds ? 3 : 1) : (thirds ? 2 : 0), far = s ? 0 : 1;
        for (int l = 0; l < L; l++) {
            const float *d = dir + 4 * (size_t)l + 2 * s, *p = parts + (size_t)l * REG_PARTS;
            if (off[l] == off[l + 1])
                continue;
            float y5, x5, h5;
            best_of(off, cand, pk, l, &y5, &x5, &h5);
            float p3 = (p[2 * near3] - p[2 * far]) * d[0] + (p[2 * near3 + 1] - p[2 * far + 1]) * d[1];
            float p5 = (x5 - p[2 * far]) * d[0] + (y5 - p[2 * far + 1]) * d[1];
            /* the fifth carries about a fifth of the line's energy: a peak
             * under 3/4 of that share is no match, then the third decides */
            bool five = h5 / r->noise2 >= 0.15f * r->pnr[l];
            if (five ? p5 > r->o.edge : p3 > REG_EDGE_THIRD * r->o.edge) /* NaN keeps the line */
                out[l] = false;
        }
    }
done:
    free(dir), free(off), free(cand), free(pk);
    return err;
}

oct_err oct_register_volume(oct_register *r, const float *target, float *shifts, oct_error *e)
{
    if (!r->have_ref)
        return oct_error_set(e, OCT_ESTATE, "registration: no reference volume set");
    const int L = (int)r->L, S = (int)r->o.stripe, W = r->o.window;
    double t0 = now_ms();
    oct_err err = r->ops->device_finite ? OCT_OK : check_finite(r, target, "target", e);
    if (!err && (err = r->ops->prep_target(r, target, e)) == OCT_EINVAL && r->ops->device_finite)
        check_finite(r, target, "target", e); /* names the first bad value */
    if (err)
        return err;
    double t1 = now_ms();

    /* 1. coarse: stripes spread along the target */
    uint32_t ns = r->o.stripes ? r->o.stripes : 32;
    if (ns > (uint32_t)(L / S))
        ns = (uint32_t)(L / S);
    if (ns < 1)
        ns = 1;
    uint32_t *l0 = malloc(sizeof *l0 * ns);
    int32_t *ylo = malloc(sizeof *ylo * ns), *yhi = malloc(sizeof *yhi * ns);
    reg_peak *sp = malloc(sizeof *sp * ns);
    float *sdy = malloc(sizeof *sdy * ns);
    bool *sok = malloc(ns), *skeep = malloc(ns);
    uint32_t *off = malloc(sizeof *off * (size_t)(L + 1));
    int32_t *cand = NULL;
    reg_peak *cp = NULL, *best = malloc(sizeof *best * (size_t)L);
    float *sub = malloc(sizeof *sub * 3 * (size_t)L), *vec = malloc(sizeof *vec * 3 * (size_t)L);
    float *parts = malloc(sizeof *parts * REG_PARTS * (size_t)L);
    bool *lok = calloc((size_t)L, 1), *lkeep = calloc((size_t)L, 1), *lfin = calloc((size_t)L, 1);
    float *lkeep_pnr = malloc(sizeof(float) * (size_t)L);
    if (!l0 || !ylo || !yhi || !sp || !sdy || !sok || !skeep || !off || !best || !sub || !vec ||
        !lok || !lkeep || !lkeep_pnr || !parts || !lfin) {
        err = oct_error_set(e, OCT_ENOMEM, "registration: out of memory");
        goto out;
    }
    for (uint32_t i = 0; i < ns; i++) {
        l0[i] = ns == 1 ? (uint32_t)(L - S) / 2
                        : (uint32_t)lround((double)i * (L - S) / (double)(ns - 1));
        int lo = (int)l0[i] - r->sy, hi = (int)l0[i] + r->sy;
        ylo[i] = lo < 0 ? 0 : lo;
        yhi[i] = hi > L - S ? L - S : hi;
    }
    if ((err = r->ops->coarse(r, ns, l0, ylo, yhi, sp, e)))
        goto out;
    for (uint32_t i = 0; i < ns; i++) {
        sdy[i] = (float)(sp[i].y - (int)l0[i]);
        sok[i] = sp[i].h / r->noise3 >= r->o.min_pnr;
    }
    consistency(sdy, 1, 1, (int)ns, 2, r->o.jump, sok, skeep);
    double t2 = now_ms();

    /* 2. candidates: +-W lines around the predictions of the kept stripes
     * before and after each line (their union), else the whole y window */
    size_t ncand = 0, cap = (size_t)L * (size_t)(4 * W + 2);
    cand = malloc(sizeof *cand * cap);
    if (!cand) {
        err = oct_error_set(e, OCT_ENOMEM, "registration: out of memory");
        goto out;
    }
    for (int l = 0; l < L; l++) {
        off[l] = (uint32_t)ncand;
        int prev = -1, next = -1;
        for (uint32_t i = 0; i < ns; i++) {
            if (!skeep[i])
                continue;
            float c = (float)l0[i] + 0.5f * (float)(S - 1);
            if (c <= (float)l)
                prev = (int)i;
            else if (next < 0)
                next = (int)i;
        }
        int lo[2], hi[2], nw = 0;
        if (prev < 0 && next < 0) {
            lo[0] = l - r->sy, hi[0] = l + r->sy, nw = 1;
            r->dy_pred[l] = NAN;
        } else {
            int ids[2] = {prev, next};
            for (int s = 0; s < 2; s++) {
                if (ids[s] < 0)
                    continue;
                int q = l + (int)sdy[ids[s]];
                lo[nw] = q - W, hi[nw] = q + W, nw++;
            }
            if (prev >= 0 && next >= 0) {
                float cp0 = (float)l0[prev] + 0.5f * (float)(S - 1);
                float cn0 = (float)l0[next] + 0.5f * (float)(S - 1);
                float t = ((float)l - cp0) / (cn0 - cp0);
                r->dy_pred[l] = (1 - t) * sdy[prev] + t * sdy[next];
            } else {
                r->dy_pred[l] = sdy[prev >= 0 ? prev : next];
            }
        }
        int ymin = l - r->sy < 0 ? 0 : l - r->sy, ymax = l + r->sy > L - 1 ? L - 1 : l + r->sy;
        for (int y = ymin; y <= ymax; y++) {
            bool in = false;
            for (int s = 0; s < nw; s++)
                in |= y >= lo[s] && y <= hi[s];
            if (!in)
                continue;
            if (ncand == cap) {
                int32_t *nc = realloc(cand, sizeof *cand * (cap *= 2));
                if (!nc) {
                    err = oct_error_set(e, OCT_ENOMEM, "registration: out of memory");
                    goto out;
                }
                cand = nc;
            }
            cand[ncand++] = y;
        }
    }
    off[L] = (uint32_t)ncand;
    cp = malloc(sizeof *cp * (ncand ? ncand : 1));
    if (!cp) {
        err = oct_error_set(e, OCT_ENOMEM, "registration: out of memory");
        goto out;
    }
    if (ncand && (err = r->ops->fine(r, off, cand, 0, cp, e)))
        goto out;

    /* 3. the strongest candidate per line; dy by a parabola through the
     * peaks of its neighbour lines */
    for (int l = 0; l < L; l++) {
        best[l].y = -1, best[l].h = -INFINITY;
        float hm = NAN, hp = NAN;
        int bi = -1;
        for (uint32_t i = off[l]; i < off[l + 1]; i++)
            if (cp[i].h > best[l].h)
                best[l] = cp[i], bi = (int)i;
        if (bi < 0) {
            best[l].h = 0, best[l].y = -1;
            vec[3 * l + 1] = NAN, r->pnr[l] = 0;
            continue;
        }
        for (uint32_t i = off[l]; i < off[l + 1]; i++) {
            if (cand[i] == best[l].y - 1) hm = cp[i].h;
            if (cand[i] == best[l].y + 1) hp = cp[i].h;
        }
        float dy = (float)(best[l].y - l), den = hm - 2 * best[l].h + hp;
        if (isfinite(hm) && isfinite(hp) && den < 0) {
            float o = 0.5f * (hm - hp) / den;
            dy += o > 0.5f ? 0.5f : o < -0.5f ? -0.5f : o;
        }
        vec[3 * l + 1] = dy;
        r->pnr[l] = (float)(best[l].h / r->noise2);
        if (r->pnr[l] < r->o.min_pnr)
            best[l].y = -1; /* no match: not refined */
    }
    if ((err = r->ops->refine(r, best, sub, e)))
        goto out;
    if ((err = split_test(r, best, parts, e)))
        goto out;
    double t3 = now_ms();

    /* 4. validity; a match much weaker than the volume's typical one is a
     * partial match (a line sheared by a saccade) */
    float med = 0;
    {
        int nm = 0;
        for (int l = 0; l < L; l++)
            if (best[l].y >= 0)
                lkeep_pnr[nm++] = r->pnr[l];
        if (nm) {
            qsort(lkeep_pnr, (size_t)nm, sizeof *lkeep_pnr, cmp_float);
            med = lkeep_pnr[nm / 2];
        }
    }
    for (int l = 0; l < L; l++) {
        if (r->pnr[l] < r->o.rel_pnr * med)
            best[l].y = -1;
        vec[3 * l] = sub[3 * l], vec[3 * l + 2] = sub[3 * l + 1];
        float y = (float)l + vec[3 * l + 1];
        lok[l] = best[l].y >= 0 && isfinite(vec[3 * l]) && isfinite(vec[3 * l + 2]) &&
                 y >= 0.0f && y <= (float)(L - 1);
    }
    consistency(vec, 3, 3, L, 3, r->o.jump, lok, lkeep);
    if ((err = edge_test(r, best, vec, parts, lkeep, lfin, e)))
        goto out;
    for (int l = 0; l < L; l++) {
        float *s = shifts + 4 * (size_t)l;
        if (lfin[l]) {
            s[0] = vec[3 * l], s[1] = vec[3 * l + 1], s[2] = vec[3 * l + 2], s[3] = 1.0f;
        } else {
            s[0] = s[1] = s[2] = NAN, s[3] = 0.0f;
        }
    }
    r->times.prep_ms = t1 - t0, r->times.coarse_ms = t2 - t1, r->times.fine_ms = t3 - t2;
    r->times.total_ms = now_ms() - t0;
    if (r->ops->times)
        r->ops->times(r, &r->times);
out:
    free(l0), free(ylo), free(yhi), free(sp), free(sdy), free(sok), free(skeep), free(off);
    free(cand), free(cp), free(best), free(sub), free(vec), free(lok), free(lkeep);
    free(lkeep_pnr), free(parts), free(lfin);
    return err;
}

oct_err oct_register_surface_line(oct_register *r, const float *target, uint32_t tl, uint32_t rl,
                                  float *surface, oct_error *e)
{
    if (!r->have_ref)
        return oct_error_set(e, OCT_ESTATE, "registration: no reference volume set");
    if (tl >= r->L || rl >= r->L)
        return oct_error_set(e, OCT_EINVAL, "registration: line %u / %u outside [0, %u)", tl, rl,
                             r->L);
    oct_err err = r->ops->prep_target(r, target, e);
    return err ? err : r->ops->surface_line(r, tl, rl, surface, e);
}

oct_err oct_register_surface_stripe(oct_register *r, const float *target, uint32_t l0,
                                    float *surface, oct_error *e)
{
    if (!r->have_ref)
        return oct_error_set(e, OCT_ESTATE, "registration: no reference volume set");
    if (l0 + r->o.stripe > r->L)
        return oct_error_set(e, OCT_EINVAL, "registration: stripe at %u of %u lines outside [0, %u)",
                             l0, r->o.stripe, r->L);
    oct_err err = r->ops->prep_target(r, target, e);
    return err ? err : r->ops->surface_stripe(r, l0, surface, e);
}

/* ---- CPU backend ---------------------------------------------------------- */

typedef struct cpu_reg {
    int threads;
    uint32_t Dh, Dch;
    fftwf_plan r2c2, c2r2, r2c3, c2r3;
    fftwf_complex *ref2;   /* [L][N][Dh] reference line spectra */
    fftwf_complex *ref3;   /* [L][Nc][Dch] coarse reference spectrum */
    float *t2, *t3;        /* transformed target [L][N][D], coarse [L][Nc][Dc] */
    float *wx, *wz, *wxc, *wzc, *wyc; /* spectral weights per axis */
} cpu_reg;

static pthread_once_t reg_fftw_once = PTHREAD_ONCE_INIT;
static void reg_fftw_init(void) { fftwf_make_planner_thread_safe(); }

static void cpu_destroy(oct_register *r)
{
    cpu_reg *c = r->be;
    if (!c)
        return;
    fftwf_plan p[4] = {c->r2c2, c->c2r2, c->r2c3, c->c2r3};
    for (int i = 0; i < 4; i++)
        if (p[i])
            fftwf_destroy_plan(p[i]);
    fftwf_free(c->ref2), fftwf_free(c->ref3), fftwf_free(c->t2), fftwf_free(c->t3);
    free(c->wx), free(c->wz), free(c->wxc), free(c->wzc), free(c->wyc);
    free(c);
    r->be = NULL;
}

static float *weights(uint32_t n, uint32_t count)
{
    float *w = malloc(sizeof *w * count);
    if (w)
        for (uint32_t k = 0; k < count; k++)
            w[k] = reg_hann((int)k, (int)n);
    return w;
}

static oct_err cpu_create(oct_register *r, oct_error *e)
{
    pthread_once(&reg_fftw_once, reg_fftw_init);
    cpu_reg *c = calloc(1, sizeof *c);
    if (!c)
        return oct_error_set(e, OCT_ENOMEM, "registration: out of memory");
    r->be = c;
    c->threads = r->o.threads > 0 ? r->o.threads : omp_get_max_threads();
    c->Dh = r->D / 2 + 1, c->Dch = r->Dc / 2 + 1;
    size_t n2 = (size_t)r->L * r->N * c->Dh, n3 = (size_t)r->L * r->Nc * c->Dch;
    c->ref2 = fftwf_malloc(sizeof(fftwf_complex) * n2);
    c->ref3 = fftwf_malloc(sizeof(fftwf_complex) * n3);
    c->t2 = fftwf_malloc(sizeof(float) * r->L * r->N * r->D);
    c->t3 = fftwf_malloc(sizeof(float) * r->L * r->Nc * r->Dc);
    c->wx = weights(r->N, r->N), c->wz = weights(r->D, c->Dh);
    c->wxc = weights(r->Nc, r->Nc), c->wzc = weights(r->Dc, c->Dch), c->wyc = weights(r->L, r->L);
    float *rb = fftwf_malloc(sizeof(float) * r->L * r->Nc * r->Dc);
    fftwf_complex *cb = fftwf_malloc(sizeof(fftwf_complex) * n3);
    if (!c->ref2 || !c->ref3 || !c->t2 || !c->t3 || !c->wx || !c->wz || !c->wxc || !c->wzc ||
        !c->wyc || !rb || !cb) {
        fftwf_free(rb), fftwf_free(cb);
        cpu_destroy(r);
        return oct_error_set(e, OCT_ENOMEM, "registration: out of memory (%zu MB of spectra)",
                             (n2 + n3) * sizeof(fftwf_complex) >> 20);
    }
    /* plans on scratch arrays of the same alignment; executed with the
     * new-array interface from each thread's buffers */
    unsigned fl = FFTW_ESTIMATE;
    c->r2c2 = fftwf_plan_dft_r2c_2d((int)r->N, (int)r->D, rb, cb, fl);
    c->c2r2 = fftwf_plan_dft_c2r_2d((int)r->N, (int)r->D, cb, rb, fl);
    c->r2c3 = fftwf_plan_dft_r2c_3d((int)r->L, (int)r->Nc, (int)r->Dc, rb, cb, fl);
    c->c2r3 = fftwf_plan_dft_c2r_3d((int)r->L, (int)r->Nc, (int)r->Dc, cb, rb, fl);
    fftwf_free(rb), fftwf_free(cb);
    if (!c->r2c2 || !c->c2r2 || !c->r2c3 || !c->c2r3) {
        cpu_destroy(r);
        return oct_error_set(e, OCT_EBACKEND, "registration: FFTW could not plan [%u][%u][%u]",
                             r->L, r->N, r->D);
    }
    return OCT_OK;
}

/* g, line mean removed, Tukey in x and z: full [L][N][D] and coarse
 * [L][Nc][Dc] (box mean of g over f x f, then the same). */
static void cpu_transform(const oct_register *r, const float *v, float *t2, float *t3)
{
    const uint32_t N = r->N, D = r->D, Nc = r->Nc, Dc = r->Dc, f = r->f;
    const float is = r->inv_scale;
#pragma omp parallel for schedule(static)
    for (int64_t l = 0; l < (int64_t)r->L; l++) {
        const float *in = v + (size_t)l * N * D;
        float *o = t2 + (size_t)l * N * D, *oc = t3 + (size_t)l * Nc * Dc;
        double s = 0;
        for (size_t i = 0; i < (size_t)N * D; i++)
            s += o[i] = reg_g(in[i], is);
        for (uint32_t a = 0; a < Nc; a++)
            for (uint32_t b = 0; b < Dc; b++) {
                float acc = 0;
                for (uint32_t i = 0; i < f; i++)
                    for (uint32_t j = 0; j < f; j++)
                        acc += o[(size_t)(a * f + i) * D + b * f + j];
                oc[(size_t)a * Dc + b] = acc / (float)(f * f);
            }
        float m = (float)(s / ((double)N * D));
        for (uint32_t a = 0; a < N; a++) {
            float wa = reg_tukey((int)a, (int)N);
            for (uint32_t d = 0; d < D; d++)
                o[(size_t)a * D + d] = wa * reg_tukey((int)d, (int)D) * (o[(size_t)a * D + d] - m);
        }
        double sc = 0;
        for (size_t i = 0; i < (size_t)Nc * Dc; i++)
            sc += oc[i];
        float mc = (float)(sc / ((double)Nc * Dc));
        for (uint32_t a = 0; a < Nc; a++) {
            float wa = reg_tukey((int)a, (int)Nc);
            for (uint32_t d = 0; d < Dc; d++)
                oc[(size_t)a * Dc + d] = wa * reg_tukey((int)d, (int)Dc) * (oc[(size_t)a * Dc + d] - mc);
        }
    }
}

static oct_err cpu_set_reference(oct_register *r, const float *vol, oct_error *e)
{
    cpu_reg *c = r->be;
    cpu_transform(r, vol, c->t2, c->t3);
#pragma omp parallel for schedule(static) num_threads(c->threads)
    for (int64_t l = 0; l < (int64_t)r->L; l++)
        fftwf_execute_dft_r2c(c->r2c2, c->t2 + (size_t)l * r->N * r->D,
                              c->ref2 + (size_t)l * r->N * c->Dh);
    fftwf_execute_dft_r2c(c->r2c3, c->t3, c->ref3);
    return OCT_OK;
}

static oct_err cpu_prep_target(oct_register *r, const float *vol, oct_error *e)
{
    cpu_reg *c = r->be;
    cpu_transform(r, vol, c->t2, c->t3);
    return OCT_OK;
}

/* Normalised phase-only surface of target line tl vs reference line rl
 * into sur [N][D]; X (N x Dh) scratch holds the target spectrum on entry
 * when have_x, else it is computed. */
static void cpu_line_surface(const oct_register *r, uint32_t tl, uint32_t rl, fftwf_complex *X,
                             fftwf_complex *Y, float *sur, bool have_x, int half)
{
    const cpu_reg *c = r->be;
    const uint32_t N = r->N, Dh = c->Dh, D = r->D;
    if (!have_x && !half) {
        fftwf_execute_dft_r2c(c->r2c2, c->t2 + (size_t)tl * N * D, X);
    } else if (!have_x) { /* sur is free until the inverse: the masked line */
        const float *in = c->t2 + (size_t)tl * N * D;
        for (uint32_t a = 0; a < N; a++) {
            float m = reg_half((int)a, (int)N, half);
            for (uint32_t d = 0; d < D; d++)
                sur[(size_t)a * D + d] = m * in[(size_t)a * D + d];
        }
        fftwf_execute_dft_r2c(c->r2c2, sur, X);
    }
    const fftwf_complex *R = c->ref2 + (size_t)rl * N * Dh;
    for (uint32_t a = 0; a < N; a++)
        for (uint32_t k = 0; k < Dh; k++) {
            size_t i = (size_t)a * Dh + k;
            reg_cross(R[i][0], R[i][1], X[i][0], X[i][1], c->wx[a] * c->wz[k], &Y[i][0], &Y[i][1]);
        }
    Y[0][0] = Y[0][1] = 0;
    fftwf_execute_dft_c2r(c->c2r2, Y, sur);
    const float s = (float)(1.0 / r->sumw2);
    for (size_t i = 0; i < (size_t)N * r->D; i++)
        sur[i] *= s;
}

static oct_err cpu_surface_line(oct_register *r, uint32_t tl, uint32_t rl, float *out, oct_error *e)
{
    cpu_reg *c = r->be;
    fftwf_complex *X = fftwf_malloc(sizeof *X * r->N * c->Dh), *Y = fftwf_malloc(sizeof *Y * r->N * c->Dh);
    float *s = fftwf_malloc(sizeof *s * r->N * r->D);
    if (X && Y && s) {
        cpu_line_surface(r, tl, rl, X, Y, s, false, 0);
        memcpy(out, s, sizeof *s * r->N * r->D);
    }
    fftwf_free(X), fftwf_free(Y), fftwf_free(s);
    return X && Y && s ? OCT_OK : oct_error_set(e, OCT_ENOMEM, "registration: out of memory");
}

/* Coarse surface of the stripe at l0 into sur [L][Nc][Dc]. */
static void cpu_stripe_surface(const oct_register *r, uint32_t l0, float *buf, fftwf_complex *X,
                               float *sur)
{
    const cpu_reg *c = r->be;
    const size_t plane = (size_t)r->Nc * r->Dc, n3 = (size_t)r->L * plane;
    memset(buf, 0, sizeof *buf * n3);
    memcpy(buf, c->t3 + (size_t)l0 * plane, sizeof *buf * plane * r->o.stripe);
    fftwf_execute_dft_r2c(c->r2c3, buf, X);
    const uint32_t Nc = r->Nc, Dch = c->Dch;
    for (uint32_t y = 0; y < r->L; y++)
        for (uint32_t a = 0; a < Nc; a++) {
            float wya = c->wyc[y] * c->wxc[a];
            for (uint32_t k = 0; k < Dch; k++) {
                size_t i = ((size_t)y * Nc + a) * Dch + k;
                reg_cross(c->ref3[i][0], c->ref3[i][1], X[i][0], X[i][1], wya * c->wzc[k],
                          &X[i][0], &X[i][1]);
            }
        }
    X[0][0] = X[0][1] = 0;
    fftwf_execute_dft_c2r(c->c2r3, X, sur);
    const float s = (float)(1.0 / r->sumw3);
    for (size_t i = 0; i < n3; i++)
        sur[i] *= s;
}

static oct_err cpu_surface_stripe(oct_register *r, uint32_t l0, float *out, oct_error *e)
{
    cpu_reg *c = r->be;
    size_t n3 = (size_t)r->L * r->Nc * r->Dc;
    float *b = fftwf_malloc(sizeof *b * n3);
    fftwf_complex *X = fftwf_malloc(sizeof *X * r->L * r->Nc * c->Dch);
    if (b && X)
        cpu_stripe_surface(r, l0, b, X, out);
    fftwf_free(b), fftwf_free(X);
    return b && X ? OCT_OK : oct_error_set(e, OCT_ENOMEM, "registration: out of memory");
}

/* Wraps a signed lag into [0, n). */
static inline size_t wrap(int s, uint32_t n) { return (size_t)((s % (int)n + (int)n) % (int)n); }

static oct_err cpu_coarse(oct_register *r, uint32_t n, const uint32_t *l0, const int32_t *ylo,
                          const int32_t *yhi, reg_peak *out, oct_error *e)
{
    cpu_reg *c = r->be;
    size_t n3 = (size_t)r->L * r->Nc * r->Dc;
    int fail = 0;
#pragma omp parallel num_threads(c->threads)
    {
        float *b = fftwf_malloc(sizeof *b * n3), *s = fftwf_malloc(sizeof *s * n3);
        fftwf_complex *X = fftwf_malloc(sizeof *X * r->L * r->Nc * c->Dch);
        if (!b || !s || !X) {
#pragma omp atomic write
            fail = 1;
        }
#pragma omp for schedule(dynamic)
        for (int64_t i = 0; i < (int64_t)n; i++) {
            if (!b || !s || !X)
                continue;
            cpu_stripe_surface(r, l0[i], b, X, s);
            reg_peak p = {-INFINITY, -1, 0, 0, 0.0f};
            for (int y = ylo[i]; y <= yhi[i]; y++)
                for (int x = -r->sxc; x <= r->sxc; x++)
                    for (int z = -r->szc; z <= r->szc; z++) {
                        float v = s[((size_t)y * r->Nc + wrap(x, r->Nc)) * r->Dc + wrap(z, r->Dc)];
                        if (v > p.h)
                            p.h = v, p.y = y, p.x = x, p.z = z;
                    }
            out[i] = p;
        }
        fftwf_free(b), fftwf_free(s), fftwf_free(X);
    }
    return fail ? oct_error_set(e, OCT_ENOMEM, "registration: out of memory") : OCT_OK;
}

static oct_err cpu_fine(oct_register *r, const uint32_t *off, const int32_t *cand, int half,
                        reg_peak *out, oct_error *e)
{
    cpu_reg *c = r->be;
    int fail = 0;
#pragma omp parallel num_threads(c->threads)
    {
        fftwf_complex *X = fftwf_malloc(sizeof *X * r->N * c->Dh);
        fftwf_complex *Y = fftwf_malloc(sizeof *Y * r->N * c->Dh);
        float *s = fftwf_malloc(sizeof *s * r->N * r->D);
        if (!X || !Y || !s) {
#pragma omp atomic write
            fail = 1;
        }
#pragma omp for schedule(dynamic)
        for (int64_t l = 0; l < (int64_t)r->L; l++) {
            if (!X || !Y || !s)
                continue;
            for (uint32_t i = off[l]; i < off[l + 1]; i++) {
                cpu_line_surface(r, (uint32_t)l, (uint32_t)cand[i], X, Y, s, i > off[l], half);
                reg_peak p = {-INFINITY, cand[i], 0, 0, 0.0f};
                for (int x = -r->sx; x <= r->sx; x++)
                    for (int z = -r->sz; z <= r->sz; z++) {
                        float v = s[wrap(x, r->N) * r->D + wrap(z, r->D)];
                        if (v > p.h)
                            p.h = v, p.x = x, p.z = z;
                    }
                p.fx = reg_parabola(s[wrap(p.x - 1, r->N) * r->D + wrap(p.z, r->D)], p.h,
                                    s[wrap(p.x + 1, r->N) * r->D + wrap(p.z, r->D)]);
                out[i] = p;
            }
        }
        fftwf_free(X), fftwf_free(Y), fftwf_free(s);
    }
    return fail ? oct_error_set(e, OCT_ENOMEM, "registration: out of memory") : OCT_OK;
}

static oct_err cpu_refine(oct_register *r, const reg_peak *best, float *sub, oct_error *e)
{
    cpu_reg *c = r->be;
    const uint32_t N = r->N, D = r->D, Dh = c->Dh;
    int fail = 0;
#pragma omp parallel num_threads(c->threads)
    {
        fftwf_complex *X = fftwf_malloc(sizeof *X * N * Dh), *Y = fftwf_malloc(sizeof *Y * N * Dh);
        double *ex = malloc(sizeof *ex * 2 * N), *ez = malloc(sizeof *ez * 2 * Dh);
        if (!X || !Y || !ex || !ez) {
#pragma omp atomic write
            fail = 1;
        }
#pragma omp for schedule(dynamic)
        for (int64_t l = 0; l < (int64_t)r->L; l++) {
            float *o = sub + 3 * l;
            o[0] = o[1] = o[2] = NAN;
            if (!X || !Y || !ex || best[l].y < 0)
                continue;
            fftwf_execute_dft_r2c(c->r2c2, c->t2 + (size_t)l * N * D, X);
            const fftwf_complex *R = c->ref2 + (size_t)best[l].y * N * Dh;
            for (size_t i = 0; i < (size_t)N * Dh; i++) {
                uint32_t a = (uint32_t)(i / Dh), k = (uint32_t)(i % Dh);
                reg_cross(R[i][0], R[i][1], X[i][0], X[i][1], c->wx[a] * c->wz[k], &Y[i][0],
                          &Y[i][1]);
            }
            Y[0][0] = Y[0][1] = 0;
            double sx = best[l].x, sz = best[l].z, h = NAN;
            for (int it = 0; it <= REG_NEWTON_STEPS; it++) {
                for (uint32_t a = 0; a < N; a++) {
                    double ph = 2 * M_PI * reg_freq((int)a, (int)N) * sx / N;
                    ex[2 * a] = cos(ph), ex[2 * a + 1] = sin(ph);
                }
                for (uint32_t k = 0; k < Dh; k++) {
                    double ph = 2 * M_PI * (double)k * sz / D;
                    ez[2 * k] = cos(ph), ez[2 * k + 1] = sin(ph);
                }
                double cv = 0, gx = 0, gz = 0, hxx = 0, hxz = 0, hzz = 0;
                for (uint32_t a = 0; a < N; a++) {
                    double ka = 2 * M_PI * reg_freq((int)a, (int)N) / N;
                    for (uint32_t k = 0; k < Dh; k++) {
                        size_t i = (size_t)a * Dh + k;
                        double m = (k == 0 || 2 * k == D) ? 1.0 : 2.0, kb = 2 * M_PI * k / D;
                        double pr = ex[2 * a] * ez[2 * k] - ex[2 * a + 1] * ez[2 * k + 1];
                        double pi = ex[2 * a] * ez[2 * k + 1] + ex[2 * a + 1] * ez[2 * k];
                        double zr = m * (Y[i][0] * pr - Y[i][1] * pi);
                        double zi = m * (Y[i][0] * pi + Y[i][1] * pr);
                        cv += zr, gx -= ka * zi, gz -= kb * zi;
                        hxx -= ka * ka * zr, hxz -= ka * kb * zr, hzz -= kb * kb * zr;
                    }
                }
                h = cv / r->sumw2;
                if (it == REG_NEWTON_STEPS)
                    break;
                double det = hxx * hzz - hxz * hxz;
                if (!(hxx < 0 && det > 0))
                    break;
                gx -= cv * reg_dlog_overlap(sx, (int)N), gz -= cv * reg_dlog_overlap(sz, (int)D);
                double dx = -(hzz * gx - hxz * gz) / det, dz = -(hxx * gz - hxz * gx) / det;
                dx = dx > 0.5 ? 0.5 : dx < -0.5 ? -0.5 : dx;
                dz = dz > 0.5 ? 0.5 : dz < -0.5 ? -0.5 : dz;
                sx += dx, sz += dz;
                if (fabs(dx) < 1e-4 && fabs(dz) < 1e-4)
                    break;
            }
            if (fabs(sx - best[l].x) > 1.0 || fabs(sz - best[l].z) > 1.0)
                sx = best[l].x, sz = best[l].z; /* diverged: keep the integer peak */
            o[0] = (float)sx, o[1] = (float)sz, o[2] = (float)h;
        }
        fftwf_free(X), fftwf_free(Y), free(ex), free(ez);
    }
    return fail ? oct_error_set(e, OCT_ENOMEM, "registration: out of memory") : OCT_OK;
}

const reg_ops reg_cpu_ops = {
    .name = "cpu",
    .create = cpu_create,
    .destroy = cpu_destroy,
    .set_reference = cpu_set_reference,
    .prep_target = cpu_prep_target,
    .coarse = cpu_coarse,
    .fine = cpu_fine,
    .refine = cpu_refine,
    .surface_line = cpu_surface_line,
    .surface_stripe = cpu_surface_stripe,
    .times = NULL,
};
