/* motion.h - simulated eye/sample motion for registration (SPEC 10.4):
 * a layered, speckled 3D sample, a motion trajectory (drift, tremor,
 * micro-saccades, axial pulse) and volumes acquired along it, with the true
 * per-B-scan shifts.  Header-only (static functions) so that octsim and
 * octbench share it without a library; include it in one file of each.
 *
 * Sample: I(y, x, z) = env(z - surface(x, y)) * |G(y, x, z)|^2 + floor, G
 * complex white noise blurred by a Gaussian (sigma `grain` px), tricubically
 * interpolated (so fractional positions are exact up to that
 * interpolation).  Acquisition of line l, A-scan n at time t = l + n/N:
 * V[l][n][d] = I(l + dy(t), n + dx(t), d + dz(t)) (1 + noise g), so that
 * V[l][n][d] ~ V_ref[l + dy][n + dx][d + dz] with the truth taken at the
 * middle of the line.  Lines that overlap a saccade's ramp are invalid in
 * the truth (their content is sheared and matches no reference line). */
#ifndef OCTSIM_MOTION_H
#define OCTSIM_MOTION_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct motion_cfg {
    uint32_t L, N, D;
    double drift;        /* px over the volume, each of x, y, z (random direction) */
    double tremor;       /* px amplitude in x and y (a few sinusoids) */
    double axial;        /* px amplitude of the axial pulse */
    uint32_t saccades;   /* per volume */
    double saccade_size; /* px step of a saccade in x and y */
    double saccade_lines;/* duration of a saccade, lines */
    double offset;       /* px: random constant offset per volume, x, y and z */
    double noise;        /* multiplicative Gaussian noise: v (1 + noise g), clipped at 0 */
    double grain;        /* speckle grain sigma, px */
    uint64_t seed;
} motion_cfg;

static void motion_cfg_default(motion_cfg *c)
{
    memset(c, 0, sizeof *c);
    c->L = c->N = c->D = 128;
    c->drift = 4, c->tremor = 0.3, c->axial = 1.0, c->saccades = 1, c->saccade_size = 10;
    c->saccade_lines = 2, c->offset = 2, c->noise = 0.3, c->grain = 1.5, c->seed = 1;
}

typedef struct motion_sample {
    int64_t y0, x0, z0;  /* grid origin (negative: margin) */
    uint32_t ny, nx, nz;
    float *re, *im;      /* blurred complex field */
    double mean;         /* mean tissue intensity */
    const motion_cfg *c;
} motion_sample;

static uint64_t motion_rng(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double motion_unif(uint64_t *s) { return (double)(motion_rng(s) >> 11) / 9007199254740992.0; }
static double motion_gauss(uint64_t *s)
{
    double u = motion_unif(s) + 1e-300, v = motion_unif(s);
    return sqrt(-2 * log(u)) * cos(2 * M_PI * v);
}

/* depth envelope: layers of a retina-like sample, relative to the surface;
 * edges smoothed over ~1.5 px (the axial resolution) */
static double motion_sm(double x) { return 0.5 * (1 + tanh(x / 1.5)); }
static double motion_band(double zr, double a, double b) { return motion_sm(zr - a) * motion_sm(b - zr); }
static double motion_env(double zr, double D)
{
    double t = zr / D;
    double v = (0.25 + 0.75 * exp(-4 * (t < 0 ? 0 : t))) * motion_band(zr, 0, 0.55 * D);
    v *= 1 + 1.0 * motion_band(zr, 0.08 * D, 0.12 * D);
    v *= 1 - 0.7 * motion_band(zr, 0.30 * D, 0.36 * D);
    v *= 1 + 1.5 * motion_band(zr, 0.45 * D, 0.50 * D);
    return v;
}

static double motion_surface(const motion_cfg *c, double y, double x)
{
    return 0.2 * c->D + 0.04 * c->D * sin(2 * M_PI * x / c->N * 0.8) +
           0.03 * c->D * cos(2 * M_PI * y / c->L * 0.6);
}

static void motion_blur1(float *a, size_t n, size_t stride, size_t count, size_t outer,
                         size_t ostride, double sigma)
{
    int r = (int)ceil(3 * sigma);
    float *k = malloc(sizeof *k * (size_t)(2 * r + 1));
    double s = 0;
    for (int i = -r; i <= r; i++)
        s += k[i + r] = (float)exp(-0.5 * i * i / (sigma * sigma));
    for (int i = 0; i <= 2 * r; i++)
        k[i] = (float)(k[i] / s);
#pragma omp parallel
    {
        float *tmp = malloc(sizeof *tmp * n);
#pragma omp for collapse(2) schedule(static)
        for (size_t o = 0; o < outer; o++)
            for (size_t j = 0; j < count; j++) {
                float *p = a + o * ostride + j;
                for (size_t i = 0; i < n; i++) {
                    double acc = 0;
                    for (int t = -r; t <= r; t++) {
                        int64_t q = (int64_t)i + t;
                        if (q < 0) q = -q;
                        if (q >= (int64_t)n) q = 2 * (int64_t)n - 2 - q;
                        if (q < 0) q = 0;
                        acc += k[t + r] * p[(size_t)q * stride];
                    }
                    tmp[i] = (float)acc;
                }
                for (size_t i = 0; i < n; i++)
                    p[i * stride] = tmp[i];
            }
        free(tmp);
    }
    free(k);
}

/* Builds the sample with a margin `m` px around the field. Returns 0 or -1 (memory). */
static int motion_sample_make(motion_sample *s, const motion_cfg *c, double margin)
{
    memset(s, 0, sizeof *s);
    s->c = c;
    int64_t m = (int64_t)ceil(margin) + 4;
    s->y0 = -m, s->x0 = -m, s->z0 = -m;
    s->ny = c->L + 2 * (uint32_t)m, s->nx = c->N + 2 * (uint32_t)m, s->nz = c->D + 2 * (uint32_t)m;
    size_t n = (size_t)s->ny * s->nx * s->nz;
    s->re = malloc(sizeof(float) * n), s->im = malloc(sizeof(float) * n);
    if (!s->re || !s->im)
        return -1;
    uint64_t st = c->seed * 7919 + 17;
    for (size_t i = 0; i < n; i++)
        s->re[i] = (float)motion_gauss(&st), s->im[i] = (float)motion_gauss(&st);
    float *f[2] = {s->re, s->im};
    size_t nz = s->nz, nx = s->nx, ny = s->ny;
    for (int q = 0; q < 2; q++) {
        motion_blur1(f[q], nz, 1, 1, ny * nx, nz, c->grain);           /* z */
        motion_blur1(f[q], nx, nz, nz, ny, nx * nz, c->grain);         /* x */
        motion_blur1(f[q], ny, nx * nz, nx * nz, 1, 0, c->grain);      /* y */
    }
    /* normalise |G|^2 to mean 1 */
    double acc = 0;
    for (size_t i = 0; i < n; i++)
        acc += (double)s->re[i] * s->re[i] + (double)s->im[i] * s->im[i];
    float g = (float)sqrt(n / acc);
    for (size_t i = 0; i < n; i++)
        s->re[i] *= g, s->im[i] *= g;
    s->mean = 0.5; /* about the mean of env over tissue */
    return 0;
}

static void motion_sample_free(motion_sample *s)
{
    free(s->re), free(s->im);
    memset(s, 0, sizeof *s);
}

/* Noise-free intensity at a continuous position: G tricubic (Catmull-Rom,
 * accurate for the blurred field, so shifted acquisitions agree with the
 * grid to ~1e-2), clamped to the grid. */
static double motion_eval(const motion_sample *s, double y, double x, double z)
{
    double p[3] = {y - s->y0, x - s->x0, z - s->z0}, w[3][4];
    uint32_t dims[3] = {s->ny, s->nx, s->nz};
    int64_t i0[3];
    for (int a = 0; a < 3; a++) {
        double v = p[a] < 1 ? 1 : p[a] > dims[a] - 3.001 ? dims[a] - 3.001 : p[a];
        i0[a] = (int64_t)floor(v);
        double f = v - i0[a], f2 = f * f, f3 = f2 * f;
        w[a][0] = 0.5 * (-f3 + 2 * f2 - f), w[a][1] = 0.5 * (3 * f3 - 5 * f2 + 2);
        w[a][2] = 0.5 * (-3 * f3 + 4 * f2 + f), w[a][3] = 0.5 * (f3 - f2);
    }
    double re = 0, im = 0;
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++) {
            size_t row = ((size_t)(i0[0] - 1 + a) * s->nx + (size_t)(i0[1] - 1 + b)) * s->nz;
            double wab = w[0][a] * w[1][b], rr = 0, ii = 0;
            for (int c = 0; c < 4; c++) {
                size_t idx = row + (size_t)(i0[2] - 1 + c);
                rr += w[2][c] * s->re[idx], ii += w[2][c] * s->im[idx];
            }
            re += wab * rr, im += wab * ii;
        }
    double env = motion_env(z - motion_surface(s->c, y, x), s->c->D);
    return env * (re * re + im * im) + 0.02;
}

/* Trajectory of one volume: positions at time t (lines). */
typedef struct motion_traj {
    double off[3], drift[3];
    double tr_amp[2][3], tr_f[2][3], tr_ph[2][3];
    double ax_f, ax_ph, axial;
    uint32_t ns;
    double st[16], sdx[16], sdy[16], sdur;
    uint32_t L;
} motion_traj;

static void motion_traj_make(motion_traj *t, const motion_cfg *c, uint64_t vol_seed)
{
    memset(t, 0, sizeof *t);
    uint64_t s = vol_seed * 104729 + c->seed;
    t->L = c->L;
    for (int a = 0; a < 3; a++) {
        t->off[a] = (2 * motion_unif(&s) - 1) * c->offset;
        t->drift[a] = (2 * motion_unif(&s) - 1) * c->drift;
    }
    for (int a = 0; a < 2; a++)
        for (int q = 0; q < 3; q++) {
            t->tr_amp[a][q] = c->tremor * (0.5 + 0.5 * motion_unif(&s)) / 2;
            t->tr_f[a][q] = 1.0 / (10 + 30 * motion_unif(&s)); /* periods of 10..40 lines */
            t->tr_ph[a][q] = 2 * M_PI * motion_unif(&s);
        }
    t->axial = c->axial, t->ax_f = 1.0 / (30 + 30 * motion_unif(&s)), t->ax_ph = 2 * M_PI * motion_unif(&s);
    t->ns = c->saccades > 16 ? 16 : c->saccades;
    t->sdur = c->saccade_lines;
    for (uint32_t i = 0; i < t->ns; i++) {
        t->st[i] = (0.15 + 0.7 * motion_unif(&s)) * c->L;
        double ang = 2 * M_PI * motion_unif(&s);
        t->sdx[i] = c->saccade_size * cos(ang), t->sdy[i] = c->saccade_size * sin(ang);
    }
}

static void motion_pos(const motion_traj *t, double tm, double *dx, double *dy, double *dz)
{
    double u = tm / t->L, v[3];
    for (int a = 0; a < 3; a++)
        v[a] = t->off[a] + t->drift[a] * u;
    for (int a = 0; a < 2; a++)
        for (int q = 0; q < 3; q++)
            v[a] += t->tr_amp[a][q] * sin(2 * M_PI * t->tr_f[a][q] * tm + t->tr_ph[a][q]);
    v[2] += t->axial * sin(2 * M_PI * t->ax_f * tm + t->ax_ph);
    for (uint32_t i = 0; i < t->ns; i++) {
        double r = (tm - t->st[i]) / (t->sdur > 0 ? t->sdur : 1e-9);
        r = r < 0 ? 0 : r > 1 ? 1 : r;
        v[0] += r * t->sdx[i], v[1] += r * t->sdy[i];
    }
    *dx = v[0], *dy = v[1], *dz = v[2];
}

/* Whether a saccade moves the eye by more than 1 px in x or y while line l
 * (times [l, l+1)) is acquired: its content is sheared and matches no
 * single reference line. */
static double motion_saccade_shear(const motion_traj *t, uint32_t l)
{
    double m = 0;
    for (uint32_t i = 0; i < t->ns; i++) {
        double d = t->sdur > 0 ? t->sdur : 1e-9;
        double a = ((double)l - t->st[i]) / d, b = ((double)l + 1 - t->st[i]) / d;
        a = a < 0 ? 0 : a > 1 ? 1 : a, b = b < 0 ? 0 : b > 1 ? 1 : b;
        m = fmax(m, (b - a) * hypot(t->sdx[i], t->sdy[i]));
    }
    return m;
}
static int motion_in_saccade(const motion_traj *t, uint32_t l) { return motion_saccade_shear(t, l) > 1.0; }

/* Acquires one volume [L][N][D] along trajectory t (NULL: no motion) with
 * noise seed nseed (0: noise-free); truth [L][4] (dx, dy, dz, valid) if non-NULL. */
static void motion_acquire(const motion_sample *s, const motion_traj *t, uint64_t nseed,
                           float *vol, float *truth)
{
    const motion_cfg *c = s->c;
    const uint32_t L = c->L, N = c->N, D = c->D;
#pragma omp parallel for schedule(dynamic)
    for (int64_t l = 0; l < (int64_t)L; l++) {
        uint64_t ns = nseed * 1000003 + (uint64_t)l * 7777 + 1;
        for (uint32_t n = 0; n < N; n++) {
            double dx = 0, dy = 0, dz = 0;
            if (t)
                motion_pos(t, (double)l + (n + 0.5) / N, &dx, &dy, &dz);
            float *o = vol + ((size_t)l * N + n) * D;
            for (uint32_t d = 0; d < D; d++) {
                double v = motion_eval(s, (double)l + dy, (double)n + dx, (double)d + dz);
                if (nseed) /* multiplicative: rarely clipped, so it averages out */
                    v *= fmax(0.0, 1.0 + c->noise * motion_gauss(&ns));
                o[d] = (float)v;
            }
        }
        if (truth) {
            double dx = 0, dy = 0, dz = 0;
            if (t)
                motion_pos(t, (double)l + 0.5, &dx, &dy, &dz);
            float *tr = truth + 4 * (size_t)l;
            tr[0] = (float)dx, tr[1] = (float)dy, tr[2] = (float)dz;
            double y = (double)l + dy;
            tr[3] = (t && motion_in_saccade(t, (uint32_t)l)) || y < 0 || y > L - 1 ? 0.0f : 1.0f;
        }
    }
}

/* margin needed for a configuration */
static double motion_margin(const motion_cfg *c)
{
    return c->offset + c->drift + c->tremor + c->axial + c->saccades * c->saccade_size + 2;
}

#endif
