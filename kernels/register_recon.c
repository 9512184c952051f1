/* register_recon.c - the registered volume on the reference grid, the
 * running average of registered volumes, and the registered planes live
 * registration publishes (oct_register.h, SPEC 10.4).  Host code, no FFT.
 *
 * One set of rules serves the whole volume (octproc --register) and the
 * planes (octd): row_plan() lists, from the shifts alone, which target lines
 * contribute to reference line r and with which weights in y; contrib()
 * combines one contribution's sampled values with the NaN fallbacks; a voxel
 * is the mean of the finite contributions.  The whole volume samples each
 * target line bicubically at (n - dx, d - dz) (sample2); a plane at depth z
 * samples the same line's z-interpolation at z - dz, made once per line
 * (a "profile" [N]), in x only: the same sums in the same order.
 */
#include <math.h>
#include <omp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "oct_register.h"

/* Catmull-Rom weights of a point at fraction f after node 1 of 4 */
static inline void cr_weights(float f, float *w)
{
    float f2 = f * f, f3 = f2 * f;
    w[0] = 0.5f * (-f3 + 2 * f2 - f);
    w[1] = 0.5f * (3 * f3 - 5 * f2 + 2);
    w[2] = 0.5f * (-3 * f3 + 4 * f2 + f);
    w[3] = 0.5f * (f3 - f2);
}

static inline int clampi(int i, int n) { return i < 0 ? 0 : i > n - 1 ? n - 1 : i; }

/* Catmull-Rom interpolation along z of row [D] at z = j + f (wz of f),
 * edge samples repeated. */
static inline float interp_z(const float *row, uint32_t D, int j, const float *wz)
{
    float r = 0;
    for (int b = 0; b < 4; b++)
        r += wz[b] * row[clampi(j - 1 + b, (int)D)];
    return r;
}

/* Bicubic (Catmull-Rom) sample of line ln [N][D] at (x, z), edge samples
 * repeated; NaN outside [0, N-1] x [0, D-1]. */
static inline float sample2(const float *ln, uint32_t N, uint32_t D, float x, float z)
{
    if (!(x >= 0.0f && z >= 0.0f && x <= (float)(N - 1) && z <= (float)(D - 1)))
        return NAN;
    int i = (int)x, j = (int)z;
    float wx[4], wz[4];
    cr_weights(x - (float)i, wx);
    cr_weights(z - (float)j, wz);
    float acc = 0;
    for (int a = 0; a < 4; a++)
        acc += wx[a] * interp_z(ln + (size_t)clampi(i - 1 + a, (int)N) * D, D, j, wz);
    return acc;
}

/* Catmull-Rom sample of a profile [N] (a line already interpolated in z) at
 * x; NaN outside [0, N-1].  With sample2's inner sums as the profile, this
 * is sample2. */
static inline float sample1(const float *prof, uint32_t N, float x)
{
    if (!(x >= 0.0f && x <= (float)(N - 1)))
        return NAN;
    int i = (int)x;
    float wx[4];
    cr_weights(x - (float)i, wx);
    float acc = 0;
    for (int a = 0; a < 4; a++)
        acc += wx[a] * prof[clampi(i - 1 + a, (int)N)];
    return acc;
}

/* y of line l when valid (the line placed on the reference grid), else NaN */
static inline float line_y(const float *shifts, int64_t l, uint32_t L)
{
    if (l < 0 || l >= (int64_t)L || shifts[4 * l + 3] != 1.0f)
        return NAN;
    return (float)l + shifts[4 * l + 1];
}

/* The contributions to reference line r: lines ca..ca+3 (cubic in y,
 * Lagrange on their positions), or ca, ca+1 (linear), or ca alone (nearest). */
#define ROW_MAX 64
typedef struct row_plan {
    int nc;
    int ca[ROW_MAX], kind[ROW_MAX];
    float w[ROW_MAX][4];
} row_plan;

static void plan_row(const float *shifts, uint32_t L, int64_t r, row_plan *p)
{
    int nc = 0;
    for (int64_t l = 0; l + 1 < (int64_t)L && nc < ROW_MAX; l++) {
        float y0 = line_y(shifts, l, L), y1 = line_y(shifts, l + 1, L);
        if (!isfinite(y0) || !isfinite(y1) || fabsf(y1 - y0) > 2.0f)
            continue;
        float lo = fminf(y0, y1), hi = fmaxf(y0, y1), R = (float)r;
        if (R < lo || R > hi)
            continue;
        float ym = line_y(shifts, l - 1, L), yp = line_y(shifts, l + 2, L);
        bool mono = isfinite(ym) && isfinite(yp) && fabsf(y0 - ym) <= 2.0f && fabsf(yp - y1) <= 2.0f &&
                    (y1 - y0) * (y0 - ym) > 0.25f * (y1 - y0) * (y1 - y0) &&
                    (y1 - y0) * (yp - y1) > 0.25f * (y1 - y0) * (y1 - y0);
        if (mono) { /* four lines, evenly enough spaced */
            float ys[4] = {ym, y0, y1, yp};
            for (int a = 0; a < 4; a++) {
                double q = 1;
                for (int b = 0; b < 4; b++)
                    if (b != a)
                        q *= (R - ys[b]) / (ys[a] - ys[b]);
                p->w[nc][a] = (float)q;
            }
            p->ca[nc] = (int)l - 1, p->kind[nc] = 4, nc++;
        } else {
            float t = hi > lo ? (R - y0) / (y1 - y0) : 0.5f;
            p->w[nc][0] = 1 - t, p->w[nc][1] = t;
            p->ca[nc] = (int)l, p->kind[nc] = 2, nc++;
        }
    }
    if (!nc)
        for (int64_t l = 0; l < (int64_t)L && nc < ROW_MAX; l++) {
            float y = line_y(shifts, l, L);
            if (isfinite(y) && fabsf(y - (float)r) <= 0.5f)
                p->ca[nc] = (int)l, p->kind[nc] = 1, p->w[nc][0] = 1, nc++;
        }
    p->nc = nc;
}

/* Contribution c of row r from its lines' samples v[0..kind-1]: cubic when
 * all four are finite, else linear between the middle two, else the nearer
 * one alone. */
static inline float contrib(const row_plan *p, int c, const float *v, const float *shifts,
                            uint32_t L, int64_t r)
{
    int kind = p->kind[c];
    if (kind == 4 && isfinite(v[0]) && isfinite(v[1]) && isfinite(v[2]) && isfinite(v[3]))
        return p->w[c][0] * v[0] + p->w[c][1] * v[1] + p->w[c][2] * v[2] + p->w[c][3] * v[3];
    if (kind == 1)
        return v[0];
    float a = kind == 4 ? v[1] : v[0], b = kind == 4 ? v[2] : v[1];
    float ya = line_y(shifts, p->ca[c] + (kind == 4), L);
    float yb = line_y(shifts, p->ca[c] + (kind == 4) + 1, L);
    float t = yb != ya ? ((float)r - ya) / (yb - ya) : 0.5f;
    if (isfinite(a) && isfinite(b))
        return (1 - t) * a + t * b;
    return t <= 0.5f ? a : b;
}

/* Voxel (r, n, d) of the whole reconstruction. */
static inline float voxel(const row_plan *p, const float *target, const float *shifts,
                          uint32_t L, uint32_t N, uint32_t D, int64_t r, uint32_t n, uint32_t d)
{
    double sum = 0;
    int cnt = 0;
    for (int c = 0; c < p->nc; c++) {
        float v[4];
        for (int k = 0; k < p->kind[c]; k++) {
            const float *s = shifts + 4 * (size_t)(p->ca[c] + k);
            v[k] = sample2(target + (size_t)(p->ca[c] + k) * N * D, N, D, (float)n - s[0],
                           (float)d - s[2]);
        }
        float x = contrib(p, c, v, shifts, L, r);
        if (isfinite(x))
            sum += x, cnt++;
    }
    return cnt ? (float)(sum / cnt) : NAN;
}

/* Pixel (r, n) of a plane from per-line profiles prof + l * stride (NULL
 * where the line has no data at the plane's depth). */
static inline float pixel(const row_plan *p, const float *const *prof, const float *shifts,
                          uint32_t L, uint32_t N, int64_t r, uint32_t n)
{
    double sum = 0;
    int cnt = 0;
    for (int c = 0; c < p->nc; c++) {
        float v[4];
        for (int k = 0; k < p->kind[c]; k++) {
            int l = p->ca[c] + k;
            v[k] = prof[l] ? sample1(prof[l], N, (float)n - shifts[4 * (size_t)l]) : NAN;
        }
        float x = contrib(p, c, v, shifts, L, r);
        if (isfinite(x))
            sum += x, cnt++;
    }
    return cnt ? (float)(sum / cnt) : NAN;
}

oct_err oct_register_reconstruct(uint32_t L, uint32_t N, uint32_t D, const float *target,
                                 const float *shifts, float *out, oct_error *e)
{
    if (!L || !N || !D)
        return oct_error_set(e, OCT_EINVAL, "reconstruct: empty volume [%u][%u][%u]", L, N, D);
#pragma omp parallel for schedule(dynamic)
    for (int64_t r = 0; r < (int64_t)L; r++) {
        row_plan p;
        plan_row(shifts, L, r, &p);
        float *o = out + (size_t)r * N * D;
        for (uint32_t n = 0; n < N; n++)
            for (uint32_t d = 0; d < D; d++)
                o[(size_t)n * D + d] = voxel(&p, target, shifts, L, N, D, r, n, d);
    }
    return OCT_OK;
}

/* ---- running average of registered volumes ------------------------------ */

struct oct_register_avg {
    size_t n;
    uint32_t volumes;
    double *sum;
    uint32_t *cnt;
};

oct_err oct_register_avg_create(oct_register_avg **out, uint32_t L, uint32_t N, uint32_t D,
                                oct_error *e)
{
    oct_register_avg *a = calloc(1, sizeof *a);
    size_t n = (size_t)L * N * D;
    if (a && n) {
        a->n = n;
        a->sum = calloc(n, sizeof *a->sum);
        a->cnt = calloc(n, sizeof *a->cnt);
    }
    if (!a || !n || !a->sum || !a->cnt) {
        oct_register_avg_destroy(a);
        *out = NULL;
        return oct_error_set(e, n ? OCT_ENOMEM : OCT_EINVAL,
                             "registration average [%u][%u][%u]: %s", L, N, D,
                             n ? "out of memory" : "empty volume");
    }
    *out = a;
    return OCT_OK;
}

void oct_register_avg_destroy(oct_register_avg *a)
{
    if (!a)
        return;
    free(a->sum);
    free(a->cnt);
    free(a);
}

void oct_register_avg_reset(oct_register_avg *a)
{
    memset(a->sum, 0, a->n * sizeof *a->sum);
    memset(a->cnt, 0, a->n * sizeof *a->cnt);
    a->volumes = 0;
}

void oct_register_avg_add(oct_register_avg *a, const float *v)
{
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < a->n; i++)
        if (isfinite(v[i]))
            a->sum[i] += v[i], a->cnt[i]++;
    a->volumes++;
}

uint32_t oct_register_avg_count(const oct_register_avg *a) { return a->volumes; }

void oct_register_avg_get(const oct_register_avg *a, float *out)
{
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < a->n; i++)
        out[i] = a->cnt[i] ? (float)(a->sum[i] / a->cnt[i]) : NAN;
}

/* ---- registered planes -------------------------------------------------- */

struct oct_register_planes {
    uint32_t L, N, D, q;
    int32_t *depths;            /* [q] */
    int32_t z0, z1;             /* slab [z0, z1); z1 <= z0: none */
    uint32_t volumes;
    float *prof;                /* [L][q + 1][N]: en-face profiles, then the slab's */
    const float **ptr;          /* [q + 1][L]: profile of line l at plane k, or NULL */
    int32_t *da, *db;           /* [L]: the slab depths [da, db) whose z - dz lies in the line */
    double *pre;                /* [lines][pre_rows(D)][N]: prefix sums along z (rows partly in
                                 * the slab), every PRE_STEP-th */
    size_t pre_lines;           /* lines pre has room for (allocated when first needed) */
    uint32_t *pre_of;           /* [L]: line l's index in pre */
    float *cur;                 /* [q + 1][L][N]: this target's planes */
    bool have_cur;              /* cur holds a computed target */
    double *sum;                /* [q + 1][L][N] */
    uint32_t *cnt;
};

void oct_register_planes_destroy(oct_register_planes *p)
{
    if (!p)
        return;
    free(p->depths);
    free(p->prof);
    free(p->ptr);
    free(p->da);
    free(p->db);
    free(p->pre);
    free(p->pre_of);
    free(p->cur);
    free(p->sum);
    free(p->cnt);
    free(p);
}

oct_err oct_register_planes_create(oct_register_planes **out, uint32_t L, uint32_t N, uint32_t D,
                                   const int32_t *depths, uint32_t q, int32_t slab_start,
                                   int32_t slab_end, oct_error *e)
{
    *out = NULL;
    if (!L || !N || !D)
        return oct_error_set(e, OCT_EINVAL, "registered planes: empty volume [%u][%u][%u]", L, N,
                             D);
    for (uint32_t k = 0; k < q; k++)
        if (depths[k] < 0 || depths[k] >= (int32_t)D)
            return oct_error_set(e, OCT_EINVAL, "registered planes: en-face depth %u is %d, "
                                                "outside [0, %u)", k, depths[k], D);
    bool slab = slab_end > slab_start;
    if (slab && (slab_start < 0 || slab_end > (int32_t)D))
        return oct_error_set(e, OCT_EINVAL, "registered planes: slab [%d, %d) outside [0, %u]",
                             slab_start, slab_end, D);
    oct_register_planes *p = calloc(1, sizeof *p);
    size_t planes = (size_t)q + 1, LN = (size_t)L * N;
    if (p) {
        p->L = L, p->N = N, p->D = D, p->q = q;
        p->z0 = slab ? slab_start : 0, p->z1 = slab ? slab_end : 0;
        p->depths = malloc((q ? q : 1) * sizeof *p->depths);
        p->prof = malloc(planes * LN * sizeof *p->prof);
        p->ptr = malloc(planes * L * sizeof *p->ptr);
        p->da = malloc(L * sizeof *p->da);
        p->db = malloc(L * sizeof *p->db);
        p->pre_of = malloc(L * sizeof *p->pre_of);
        p->cur = malloc(planes * LN * sizeof *p->cur);
        p->sum = calloc(planes * LN, sizeof *p->sum);
        p->cnt = calloc(planes * LN, sizeof *p->cnt);
    }
    if (!p || !p->depths || !p->prof || !p->ptr || !p->da || !p->db || !p->pre_of || !p->cur ||
        !p->sum || !p->cnt) {
        oct_register_planes_destroy(p);
        return oct_error_set(e, OCT_ENOMEM, "registered planes [%u][%u][%u], %u en-face: out of "
                                            "memory", L, N, D, q);
    }
    if (q)
        memcpy(p->depths, depths, q * sizeof *depths);
    *out = p;
    return OCT_OK;
}

void oct_register_planes_reset(oct_register_planes *p)
{
    size_t n = ((size_t)p->q + 1) * p->L * p->N;
    memset(p->sum, 0, n * sizeof *p->sum);
    memset(p->cnt, 0, n * sizeof *p->cnt);
    p->volumes = 0;
}

uint32_t oct_register_planes_count(const oct_register_planes *p) { return p->volumes; }

/* Prefix sums along z are kept at every PRE_STEP-th index only (a whole-depth
 * slab needs them on every line: all D + 4 of them were 160 MB of doubles per
 * 192x200x513 volume, most of the time of the planes); prefix() adds the
 * samples after the kept one in the same order, so the sums are the same,
 * bit for bit. */
#define PRE_STEP 8
static inline size_t pre_rows(uint32_t D) { return (D + 3) / PRE_STEP + 1; }

/* C[k][n] = sum of E[i < k], E[i] = row[clamp(i - 1)] (row: line l's A-scan n) */
static inline double prefix(const double *C, const float *row, uint32_t N, uint32_t n, int k,
                            int D)
{
    int q = k / PRE_STEP;
    double c = C[(size_t)q * N + n];
    for (int i = q * PRE_STEP; i < k; i++)
        c += row[clampi(i - 1, D)];
    return c;
}

/* z - dz of depth d inside the line (sample2's test) */
static inline bool z_in(int32_t d, float dz, uint32_t D)
{
    float z = (float)d - dz;
    return z >= 0.0f && z <= (float)(D - 1);
}

/* The slab depths [*a, *b) of line l (shift dz) whose z - dz lies in it. */
static void slab_range(const oct_register_planes *p, float dz, int32_t *a, int32_t *b)
{
    int32_t lo = p->z0, hi = p->z1;
    /* about ceil(dz) .. D - 1 + floor(dz), then sample2's test decides */
    double c0 = ceil((double)dz) - 1, c1 = floor((double)dz) + p->D + 1;
    int32_t s0 = c0 > lo ? (c0 < hi ? (int32_t)c0 : hi) : lo;
    int32_t s1 = c1 < hi ? (c1 > lo ? (int32_t)c1 : lo) : hi;
    while (s0 < s1 && !z_in(s0, dz, p->D))
        s0++;
    while (s1 > s0 && !z_in(s1 - 1, dz, p->D))
        s1--;
    *a = s0, *b = s0 < s1 ? s1 : s0;
}

/* Line l's profiles: en-face plane k, its z-interpolation at z_k - dz
 * exactly as sample2 makes it (NULL where z_k - dz is outside the line);
 * the slab, when all of it shifted lies in the line, the mean over [z0, z1)
 * of the z-interpolations at d - dz: a fractional dz has the same fraction
 * at every d, so that is 4 window sums of the line's samples combined once.
 * Lines of rows that some line's shifted slab leaves get prefix sums along z
 * (pre), for those rows' depth segments. */
static void line_profiles(oct_register_planes *p, const float *target, const float *shifts,
                          uint32_t l)
{
    const uint32_t N = p->N, D = p->D, L = p->L, q = p->q;
    const float *s = shifts + 4 * (size_t)l, *ln = target + (size_t)l * N * D;
    float *prof = p->prof + (size_t)l * (q + 1) * N;
    for (uint32_t k = 0; k <= q; k++)
        p->ptr[(size_t)k * L + l] = NULL;
    if (s[3] != 1.0f)
        return; /* invalid lines contribute nothing */
    for (uint32_t k = 0; k < q; k++) {
        float z = (float)p->depths[k] - s[2];
        if (!(z >= 0.0f && z <= (float)(D - 1)))
            continue;
        int j = (int)z;
        float wz[4], *o = prof + (size_t)k * N;
        cr_weights(z - (float)j, wz);
        for (uint32_t n = 0; n < N; n++)
            o[n] = interp_z(ln + (size_t)n * D, D, j, wz);
        p->ptr[(size_t)k * L + l] = o;
    }
    if (p->z1 <= p->z0)
        return;
    if (p->pre_of[l] != UINT32_MAX) {
        /* prefix sums of each row with its edge samples repeated:
         * E[i] = row[clamp(i - 1)], i < D + 3; C[k][n] = sum of E[i < k],
         * kept at k = 0, PRE_STEP, 2 PRE_STEP, ... (n innermost: the
         * segments read them along n) */
        double *C = p->pre + (size_t)p->pre_of[l] * N * pre_rows(D);
        enum { NB = 8 }; /* A-scans at once: independent add chains */
        for (uint32_t n0 = 0; n0 < N; n0 += NB) {
            const uint32_t nb = N - n0 < NB ? N - n0 : NB;
            double c[NB] = {0};
            for (uint32_t b = 0; b < nb; b++)
                C[n0 + b] = 0;
            for (int i = 0; i < (int)D + 3; i++) {
                const float *col = ln + (size_t)n0 * D + clampi(i - 1, (int)D);
                for (uint32_t b = 0; b < nb; b++)
                    c[b] += col[(size_t)b * D];
                if ((i + 1) % PRE_STEP == 0)
                    for (uint32_t b = 0; b < nb; b++)
                        C[(size_t)((i + 1) / PRE_STEP) * N + n0 + b] = c[b];
            }
        }
    }
    if (p->da[l] != p->z0 || p->db[l] != p->z1)
        return; /* the shifted slab leaves the line: no profile */
    double z = (double)p->z0 - (double)s[2], j0 = floor(z);
    float wz[4], *o = prof + (size_t)q * N;
    cr_weights((float)(z - j0), wz);
    const int W = p->z1 - p->z0, j = (int)j0;
    for (uint32_t n = 0; n < N; n++) {
        const float *row = ln + (size_t)n * D;
        /* S_b = sum over t < W of row[clamp(j - 1 + b + t)], slid along b */
        double S = 0, acc = 0;
        for (int t = 0; t < W; t++)
            S += row[clampi(j - 1 + t, (int)D)];
        for (int b = 0; b < 4; b++) {
            acc += wz[b] * S;
            S += (double)row[clampi(j - 1 + b + W, (int)D)] - row[clampi(j - 1 + b, (int)D)];
        }
        o[n] = (float)(acc / W);
    }
    p->ptr[(size_t)q * L + l] = o;
}

/* Slab of row r when some of its lines are left by the shifted slab: the
 * depths split into segments where the same lines have data; on each, a
 * line's sum of z-interpolations at d - dz (j_d = d + J, from its prefix
 * sums) goes through the row's contributions like a profile.  A pixel with
 * a segment where no contribution has data is NaN (that depth is NaN). */
static void slab_segments(const oct_register_planes *p, const float *target, const float *shifts,
                          const row_plan *rp, int64_t r, const float **lp, float *buf, float *o)
{
    const uint32_t N = p->N, D = p->D, L = p->L;
    int lines[4 * ROW_MAX], nl = 0;
    for (int c = 0; c < rp->nc; c++)
        for (int k = 0; k < rp->kind[c]; k++) {
            int l = rp->ca[c] + k, i = 0;
            while (i < nl && lines[i] != l)
                i++;
            if (i == nl)
                lines[nl++] = l;
        }
    int32_t cut[2 + 8 * ROW_MAX];
    int nb = 0;
    cut[nb++] = p->z0, cut[nb++] = p->z1;
    for (int i = 0; i < nl; i++)
        cut[nb++] = p->da[lines[i]], cut[nb++] = p->db[lines[i]];
    for (int i = 1; i < nb; i++) /* insertion sort: a few dozen */
        for (int k = i; k > 0 && cut[k - 1] > cut[k]; k--) {
            int32_t t = cut[k];
            cut[k] = cut[k - 1], cut[k - 1] = t;
        }
    for (uint32_t n = 0; n < N; n++)
        o[n] = 0;
    for (int b = 0; b + 1 < nb; b++) {
        int32_t s0 = cut[b], s1 = cut[b + 1];
        if (s0 >= s1 || s0 < p->z0 || s1 > p->z1)
            continue;
        for (int i = 0; i < nl; i++) {
            int l = lines[i];
            lp[l] = NULL;
            if (!(p->da[l] <= s0 && s1 <= p->db[l]))
                continue; /* no data on this segment */
            double z = (double)s0 - (double)shifts[4 * (size_t)l + 2], jf;
            z = z < 0 ? 0 : z; /* sample2's float test said inside */
            jf = floor(z);
            float wz[4], *pr = buf + (size_t)i * N;
            cr_weights((float)(z - jf), wz);
            int J = (int)jf - s0;
            const double *C = p->pre + (size_t)p->pre_of[l] * N * pre_rows(D);
            const float *ln = target + (size_t)l * N * D;
            const int a0 = s0 + J, b0 = s1 + J;
            for (uint32_t n = 0; n < N; n++) {
                const float *row = ln + (size_t)n * D;
                double acc = 0;
                for (int k = 0; k < 4; k++)
                    acc += wz[k] * (prefix(C, row, N, n, b0 + k, (int)D) -
                                    prefix(C, row, N, n, a0 + k, (int)D));
                pr[n] = (float)acc;
            }
            lp[l] = pr;
        }
        for (uint32_t n = 0; n < N; n++)
            o[n] += pixel(rp, lp, shifts, L, N, r, n);
        for (int i = 0; i < nl; i++)
            lp[lines[i]] = NULL;
    }
    for (uint32_t n = 0; n < N; n++)
        o[n] /= (float)(p->z1 - p->z0);
}

/* Rows whose lines all hold the shifted slab take the slab profiles; the
 * others need prefix sums of their lines (marked in pre_of, then numbered). */
static bool row_uniform(const oct_register_planes *p, const row_plan *rp)
{
    for (int c = 0; c < rp->nc; c++)
        for (int k = 0; k < rp->kind[c]; k++) {
            int l = rp->ca[c] + k;
            if (p->da[l] != p->z0 || p->db[l] != p->z1)
                return false;
        }
    return true;
}

oct_err oct_register_planes_compute(oct_register_planes *p, const float *target,
                                    const float *shifts, oct_error *e)
{
    const uint32_t L = p->L, N = p->N, D = p->D, q = p->q;
    const size_t LN = (size_t)L * N;
    const bool slab = p->z1 > p->z0;
    /* the slab's depths in each line; lines of rows that need prefix sums */
    size_t npre = 0;
    if (slab) {
        for (uint32_t l = 0; l < L; l++) {
            const float *s = shifts + 4 * (size_t)l;
            if (s[3] == 1.0f)
                slab_range(p, s[2], &p->da[l], &p->db[l]);
            else
                p->da[l] = p->db[l] = p->z0; /* no data anywhere */
            p->pre_of[l] = UINT32_MAX;
        }
        for (uint32_t r = 0; r < L; r++) {
            row_plan rp;
            plan_row(shifts, L, r, &rp);
            if (!row_uniform(p, &rp))
                for (int c = 0; c < rp.nc; c++)
                    for (int k = 0; k < rp.kind[c]; k++)
                        p->pre_of[rp.ca[c] + k] = 0;
        }
        for (uint32_t l = 0; l < L; l++)
            if (p->pre_of[l] == 0 && shifts[4 * (size_t)l + 3] == 1.0f)
                p->pre_of[l] = (uint32_t)npre++;
            else
                p->pre_of[l] = UINT32_MAX;
        if (npre > p->pre_lines) {
            double *pre = realloc(p->pre, npre * N * pre_rows(D) * sizeof *pre);
            if (!pre)
                return oct_error_set(e, OCT_ENOMEM, "registered planes: out of memory for the "
                                                    "prefix sums of %zu lines", npre);
            p->pre = pre, p->pre_lines = npre;
        }
    }
    int nth = omp_get_max_threads();
    float *tbuf = malloc((size_t)nth * 4 * ROW_MAX * N * sizeof *tbuf);
    const float **tlp = calloc((size_t)nth * L, sizeof *tlp);
    if (!tbuf || !tlp) {
        free(tbuf), free(tlp);
        return oct_error_set(e, OCT_ENOMEM, "registered planes: out of memory");
    }
#pragma omp parallel num_threads(nth)
    {
        int me = omp_get_thread_num();
        float *buf = tbuf + (size_t)me * 4 * ROW_MAX * N;
        const float **lp = tlp + (size_t)me * L;
#pragma omp for schedule(static)
        for (int64_t l = 0; l < (int64_t)L; l++)
            line_profiles(p, target, shifts, (uint32_t)l);
#pragma omp for schedule(dynamic)
        for (int64_t r = 0; r < (int64_t)L; r++) {
            row_plan rp;
            plan_row(shifts, L, r, &rp);
            for (uint32_t k = 0; k < q; k++) {
                float *o = p->cur + k * LN + (size_t)r * N;
                for (uint32_t n = 0; n < N; n++)
                    o[n] = pixel(&rp, p->ptr + (size_t)k * L, shifts, L, N, r, n);
            }
            if (!slab)
                continue;
            float *o = p->cur + q * LN + (size_t)r * N;
            if (row_uniform(p, &rp))
                for (uint32_t n = 0; n < N; n++)
                    o[n] = pixel(&rp, p->ptr + (size_t)q * L, shifts, L, N, r, n);
            else
                slab_segments(p, target, shifts, &rp, r, lp, buf, o);
        }
    }
    free(tbuf);
    free(tlp);
    p->have_cur = true;
    return OCT_OK;
}

oct_err oct_register_planes_accumulate(oct_register_planes *dst, const oct_register_planes *src,
                                       oct_error *e)
{
    if (src->L != dst->L || src->N != dst->N || src->D != dst->D || src->q != dst->q ||
        src->z0 != dst->z0 || src->z1 != dst->z1 ||
        (src->q && memcmp(src->depths, dst->depths, src->q * sizeof *src->depths)))
        return oct_error_set(e, OCT_EINVAL, "registered planes: [%u][%u][%u] with %u en-face, "
                                            "slab [%d, %d) added to [%u][%u][%u] with %u, [%d, %d)",
                             src->L, src->N, src->D, src->q, src->z0, src->z1, dst->L, dst->N,
                             dst->D, dst->q, dst->z0, dst->z1);
    if (!src->have_cur)
        return oct_error_set(e, OCT_ESTATE, "registered planes: none computed to add");
    size_t n = (src->q + (size_t)(src->z1 > src->z0)) * src->L * src->N;
    for (size_t i = 0; i < n; i++)
        if (isfinite(src->cur[i]))
            dst->sum[i] += src->cur[i], dst->cnt[i]++;
    dst->volumes++;
    return OCT_OK;
}

oct_err oct_register_planes_add(oct_register_planes *p, const float *target, const float *shifts,
                                oct_error *e)
{
    oct_err err = oct_register_planes_compute(p, target, shifts, e);
    return err ? err : oct_register_planes_accumulate(p, p, e);
}

void oct_register_planes_get(const oct_register_planes *p, float *enface, float *slab)
{
    const size_t LN = (size_t)p->L * p->N;
    if (enface)
        for (size_t i = 0; i < p->q * LN; i++)
            enface[i] = p->cnt[i] ? (float)(p->sum[i] / p->cnt[i]) : NAN;
    if (slab)
        for (size_t i = 0; i < LN; i++) {
            size_t k = p->q * LN + i;
            slab[i] = p->z1 > p->z0 && p->cnt[k] ? (float)(p->sum[k] / p->cnt[k]) : NAN;
        }
}
