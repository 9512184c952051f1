/* sim.c - octsim's physics.
 *
 * Model of one A-scan (normalised wavenumber u, sample n = 0..M-1):
 *   u(n)  = n/M + a (n/M)^2                       non-linear k-sampling
 *   S(n)  = exp(-((u - uc)/(sigma span))^2 / 2)    swept-source envelope
 *   phi(n)= 2 pi b (u - uc)^2                      unbalanced dispersion
 *   E(u)  = sum_d A_d exp(2 pi i d u)              sample field; A_d is the sum
 *           of many scatterers in depth cell d (complex Gaussian: speckle)
 *   I(n)  = S(n) (DC + G Re(exp(i phi) E(u(n)))) + shot/read noise -> ADC
 * A fringe exp(2 pi i d u) over the sweep has d*span cycles, so CFD shows
 * depth cell d at bin d*span (span = u(M-1) - u(0) ~ 1 + a).
 * E is evaluated with one 8x oversampled inverse FFT per A-scan and linear
 * interpolation at the non-uniform u(n): O(M log M) instead of O(M * depth).
 */
#include "sim.h"

#include <fftw3.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define OVERSAMPLE 8  /* E grid: P = 8M points over u in [0, 2) */
#define GAUSS_TABLE 65536

void sim_optics_default(sim_optics *o)
{
    o->kmap_a = 0.04;
    o->disp_b = 6.0;
    o->env_sigma = 0.3;
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

typedef struct spectral {
    uint32_t M;
    double span, uc;
    float *env;    /* S(n) */
    float *u;      /* u(n) */
    float *cphi, *sphi; /* cos/sin of the dispersion phase */
} spectral;

static int spectral_init(spectral *sp, uint32_t M, const sim_optics *o)
{
    sp->M = M;
    sp->env = malloc(sizeof(float) * M * 4);
    if (!sp->env)
        return -1;
    sp->u = sp->env + M;
    sp->cphi = sp->u + M;
    sp->sphi = sp->cphi + M;
    double u0 = 0, u1 = (double)(M - 1) / M + o->kmap_a * pow((double)(M - 1) / M, 2);
    sp->span = (u1 - u0) * M / (M - 1); /* cycles over the sweep per unit d */
    sp->uc = 0.5 * (u0 + u1);
    for (uint32_t n = 0; n < M; n++) {
        double t = (double)n / M, u = t + o->kmap_a * t * t;
        double z = (u - sp->uc) / (o->env_sigma * (u1 - u0));
        double ph = 2 * M_PI * o->disp_b * (u - sp->uc) * (u - sp->uc);
        sp->u[n] = (float)u;
        sp->env[n] = (float)exp(-0.5 * z * z);
        sp->cphi[n] = (float)cos(ph);
        sp->sphi[n] = (float)sin(ph);
    }
    return 0;
}

/* ---- samples: reflectivity r(b) at CFD depth bin b of A-scan (x, y) ---- */
typedef struct layer_model {
    int n;
    double z[16];      /* interface depths (bins), increasing */
    double refl[16];   /* backscatter of the region below interface i */
    double edge[16];   /* reflection of interface i */
} layer_model;

static void model_at(int sample, double x, double y, double D, double motion, layer_model *m)
{
    double surf;
    switch (sample) {
    case SIM_RETINA: {
        double r2 = (x - 0.5) * (x - 0.5) + (y - 0.5) * (y - 0.5);
        double pit = exp(-r2 / 0.012);                  /* foveal pit */
        surf = 0.18 * D + 0.10 * D * r2 * 2 + 0.05 * D * pit + motion;
        /* ILM RNFL GCL IPL INL OPL ONL ISOS RPE choroid */
        static const double thick[] = {0.05, 0.06, 0.05, 0.045, 0.04, 0.10, 0.012, 0.02, 0.12};
        static const double rf[] = {0.9, 0.35, 0.6, 0.25, 0.55, 0.12, 1.6, 1.1, 0.35};
        static const double thins[] = {1.0, 0.9, 0.8, 0.7, 0.5, 0.0, 0.0, 0.0, 0.0};
        m->n = 10;
        double z = surf;
        for (int i = 0; i < 9; i++) {
            m->z[i] = z;
            m->refl[i] = rf[i];
            m->edge[i] = i == 0 ? 2.0 : (i == 6 || i == 7 ? 1.5 : 0.4);
            /* inner layers thin out in the pit; ONL bulges slightly */
            double t = thick[i] * (1.0 - 0.85 * thins[i] * pit) + (i == 5 ? 0.03 * pit : 0);
            z += t * D;
        }
        m->z[9] = z;
        m->refl[9] = 0;
        m->edge[9] = 0.3;
        break;
    }
    case SIM_LAMINATE: {
        surf = 0.15 * D + 0.06 * D * x + 0.02 * D * y + motion;
        double dx = x - 0.3, dy = y - 0.6, bump = exp(-(dx * dx + dy * dy) / 0.01);
        m->n = 13;
        for (int i = 0; i < 13; i++) {
            /* a delamination: layers below the 6th are pushed down */
            m->z[i] = surf + i * 0.035 * D + (i >= 6 ? 0.05 * D * bump : 0);
            m->refl[i] = i == 12 ? 0 : (i % 2 ? 0.25 : 0.8);
            if (i == 5)
                m->refl[i] *= 1 - bump; /* the air gap does not scatter */
            m->edge[i] = 1.0;
        }
        break;
    }
    default: { /* layered: curved, wavy layers */
        surf = 0.12 * D + 0.06 * D * sin(2 * M_PI * (0.8 * x + 0.3 * y)) +
               0.12 * D * (x - 0.5) * (x - 0.5) + motion;
        static const double base[] = {0.0, 0.10, 0.22, 0.32, 0.48, 0.62};
        static const double rf[] = {0.7, 0.3, 0.9, 0.2, 0.5, 0};
        m->n = 6;
        for (int i = 0; i < 6; i++) {
            m->z[i] = surf + base[i] * D +
                      0.025 * D * i * sin(2 * M_PI * (1.5 * y + 0.5 * x + 0.3 * i));
            m->refl[i] = rf[i];
            m->edge[i] = 1.2;
        }
        break;
    }
    }
    for (int i = 1; i < m->n; i++) /* keep the order under any deformation */
        if (m->z[i] < m->z[i - 1] + 1)
            m->z[i] = m->z[i - 1] + 1;
}

oct_err sim_frame(const oct_geometry *g, const sim_optics *o, int sample, uint64_t seed,
                  uint32_t variant, void *dst, oct_error *e)
{
    oct_err err = oct_geometry_check(g, e);
    if (err)
        return err;
    const uint32_t M = g->samples, N = g->ascans, L = g->lines;
    const int P = OVERSAMPLE * (int)M;
    spectral sp;
    if (spectral_init(&sp, M, o))
        return oct_error_set(e, OCT_ENOMEM, "octsim: out of memory");
    float *gauss = malloc(sizeof(float) * GAUSS_TABLE);
    fftwf_complex *tmpl = fftwf_malloc(sizeof(fftwf_complex) * (size_t)P);
    if (!gauss || !tmpl) {
        free(sp.env);
        free(gauss);
        fftwf_free(tmpl);
        return oct_error_set(e, OCT_ENOMEM, "octsim: out of memory");
    }
    /* a table of normal deviates: the speckle and noise generators index it */
    uint64_t gs = 12345;
    for (int i = 0; i < GAUSS_TABLE; i += 2) {
        double u1 = ((splitmix(&gs) >> 11) + 1.0) / 9007199254740993.0;
        double u2 = (splitmix(&gs) >> 11) / 9007199254740992.0;
        double r = sqrt(-2 * log(u1));
        gauss[i] = (float)(r * cos(2 * M_PI * u2));
        gauss[i + 1] = (float)(r * sin(2 * M_PI * u2));
    }
    /* FFTW planning is not thread-safe: plan once, execute per thread on
     * its own (equally aligned) arrays */
    fftwf_plan plan = fftwf_plan_dft_1d(P, tmpl, tmpl, FFTW_BACKWARD, FFTW_ESTIMATE);
    if (!plan) {
        free(sp.env);
        free(gauss);
        fftwf_free(tmpl);
        return oct_error_set(e, OCT_EBACKEND, "octsim: FFTW could not plan %d points", P);
    }
    const double D = M / 2.0;
    const double motion = 0.004 * D * sin(0.9 * variant);
    /* fringe gain: an A-scan of typical reflectivity gives ~250 counts rms */
    layer_model mc;
    model_at(sample, 0.5, 0.5, D, 0, &mc);
    double pw = 0;
    for (int i = 0; i + 1 < mc.n; i++)
        pw += mc.refl[i] * mc.refl[i] * (mc.z[i + 1] - mc.z[i]) + mc.edge[i] * mc.edge[i];
    const double G = 250.0 / sqrt(pw > 1e-9 ? pw : 1.0);
    const double dc = 1800.0;
    int fail = 0;
#pragma omp parallel
    {
        fftwf_complex *E = fftwf_malloc(sizeof(fftwf_complex) * (size_t)P);
        float *prof = malloc(sizeof(float) * (size_t)M / 2);
        if (!E || !prof) {
#pragma omp atomic write
            fail = 1;
        }
#pragma omp for schedule(dynamic, 16)
        for (uint64_t j = 0; j < (uint64_t)N * L; j++) {
            if (fail)
                continue;
            uint32_t l = (uint32_t)(j / N), a = (uint32_t)(j % N);
            uint64_t rs = seed ^ (variant * 0xD1B54A32D192ED03ull) ^ (j * 0x9E3779B97F4A7C15ull);
            layer_model m;
            model_at(sample, (a + 0.5) / N, (l + 0.5) / L, D, motion, &m);
            /* reflectivity per depth bin: regions decay with depth
             * (attenuation), interfaces add a specular part */
            for (uint32_t b = 0; b < M / 2; b++)
                prof[b] = 0;
            for (int i = 0; i < m.n; i++) {
                int b0 = (int)m.z[i];
                int b1 = i + 1 < m.n ? (int)m.z[i + 1] : b0;
                for (int b = b0; b < b1 && b < (int)(M / 2); b++)
                    if (b >= 0)
                        prof[b] = (float)(m.refl[i] * exp(-(b - m.z[0]) / (0.6 * D)));
                if (b0 >= 0 && b0 < (int)(M / 2))
                    prof[b0] += (float)m.edge[i];
            }
            memset(E, 0, sizeof(fftwf_complex) * (size_t)P);
            for (uint32_t b = 1; b < M / 2; b++) {
                if (prof[b] == 0)
                    continue;
                /* cell at CFD bin b has d = b/span; grid frequency q = 2d */
                int q = (int)lrint(2.0 * b / sp.span);
                if (q <= 0 || q >= P / 2)
                    continue;
                double roll = exp(-1.5 * (b / D) * (b / D)); /* sensitivity roll-off */
                uint64_t r = splitmix(&rs);
                float amp = (float)(prof[b] * roll * 0.70710678);
                E[q][0] += amp * gauss[r & 0xffff];
                E[q][1] += amp * gauss[(r >> 16) & 0xffff];
            }
            fftwf_execute_dft(plan, E, E); /* E[m] = field at u = 2m/P */
            float *fo = g->sample_type == OCT_SAMPLE_F32 ? (float *)dst + j * M : NULL;
            uint16_t *uo = g->sample_type == OCT_SAMPLE_U16 ? (uint16_t *)dst + j * M : NULL;
            int16_t *io = g->sample_type == OCT_SAMPLE_I16 ? (int16_t *)dst + j * M : NULL;
            const int sh = (int)g->sample_shift;
            const double umax = 65535 >> sh, imax = 32767 >> sh;
            for (uint32_t n = 0; n < M; n++) {
                double pos = sp.u[n] * (P / 2.0);
                int m0 = (int)pos;
                double f = pos - m0;
                int m1 = (m0 + 1) % P;
                m0 %= P;
                double er = E[m0][0] * (1 - f) + E[m1][0] * f;
                double ei = E[m0][1] * (1 - f) + E[m1][1] * f;
                double fringe = sp.cphi[n] * er - sp.sphi[n] * ei; /* Re(e^{i phi} E) */
                double I = sp.env[n] * (dc + G * fringe);
                uint64_t r = splitmix(&rs);
                /* read noise + shot noise ~ sqrt(signal) */
                I += 2.0 * gauss[r & 0xffff] + 0.6 * sqrt(I > 0 ? I : 0) * gauss[(r >> 16) & 0xffff];
                if (fo) {
                    fo[n] = (float)I;
                } else if (uo) { /* 12-bit ADC, left-shifted by sample_shift */
                    double v = floor(I + 0.5);
                    v = v < 0 ? 0 : v > 4095 ? 4095 : v;
                    v = v > umax ? umax : v;
                    uo[n] = (uint16_t)((uint32_t)v << sh);
                } else { /* signed ADC centred on 0 */
                    double v = floor(I - 2048 + 0.5);
                    v = v < -2048 ? -2048 : v > 2047 ? 2047 : v;
                    v = v > imax ? imax : v < -imax - 1 ? -imax - 1 : v;
                    io[n] = (int16_t)((int32_t)v * (1 << sh));
                }
            }
        }
        fftwf_free(E);
        free(prof);
    }
    fftwf_destroy_plan(plan);
    fftwf_free(tmpl);
    free(gauss);
    free(sp.env);
    if (fail)
        return oct_error_set(e, OCT_ENOMEM, "octsim: out of memory");
    return OCT_OK;
}

/* One mirror spectrum at CFD bin `bin` (d = bin/span cycles per unit u). */
static void mirror_spectrum(const spectral *sp, double bin, uint64_t *rs, float *out)
{
    double d = bin / sp->span;
    for (uint32_t n = 0; n < sp->M; n++) {
        double ph = 2 * M_PI * d * sp->u[n];
        /* cos(2 pi d u + phi): the same fringe a mirror at d gives */
        double v = sp->cphi[n] * cos(ph) - sp->sphi[n] * sin(ph);
        /* a little detector noise, as in a recorded mask */
        double noise = ((double)(splitmix(rs) >> 11) / 9007199254740992.0 - 0.5) * 2.0;
        out[n] = (float)(sp->env[n] * 1000.0 * v + noise);
    }
}

oct_err sim_cms_cal(uint32_t samples, const double *depths, uint32_t count, const sim_optics *o,
                    uint64_t seed, float *out, oct_error *e)
{
    oct_geometry g = {samples, 1, 1, OCT_SAMPLE_F32, 0};
    oct_err err = oct_geometry_check(&g, e);
    if (err)
        return err;
    if (count < 2)
        return oct_error_set(e, OCT_EINVAL, "CMS calibration needs at least 2 depths, got %u",
                             count);
    for (uint32_t i = 0; i < count; i++)
        if (!(depths[i] > 0 && depths[i] < samples / 2.0))
            return oct_error_set(e, OCT_EINVAL, "depth %g: must lie in (0, M/2 = %u)", depths[i],
                                 samples / 2);
    spectral sp;
    if (spectral_init(&sp, samples, o))
        return oct_error_set(e, OCT_ENOMEM, "octsim: out of memory");
    uint64_t rs = seed;
    for (uint32_t i = 0; i < count; i++)
        mirror_spectrum(&sp, depths[i], &rs, out + (size_t)i * samples);
    free(sp.env);
    return OCT_OK;
}

void sim_klin_positions(uint32_t samples, const sim_optics *o, double *pos)
{
    const double M = samples, a = o->kmap_a;
    double t1 = (M - 1) / M, u1 = t1 + a * t1 * t1, span = u1 * M / (M - 1);
    for (uint32_t n = 0; n < samples; n++) {
        double u = span * n / M; /* the linear target */
        /* t + a t^2 = u; the stable root form avoids cancellation for small a */
        double t = a > 0 ? 2 * u / (1 + sqrt(1 + 4 * a * u)) : u;
        pos[n] = t * M;
    }
}

void sim_dispersion_engine(uint32_t samples, const sim_optics *o, double *a2, double *a3,
                           double *k0)
{
    const double M = samples, a = o->kmap_a;
    double t1 = (M - 1) / M, u1 = t1 + a * t1 * t1, span = u1 * M / (M - 1);
    double uc = 0.5 * u1; /* spectral_init: uc = (u0 + u1) / 2, u0 = 0 */
    /* phi = 2 pi b (u - uc)^2 with u = span x (x = n/M after linearisation) */
    *a2 = 2 * M_PI * o->disp_b * span * span;
    *a3 = 0.0;
    *k0 = uc / span;
}

oct_err sim_masks(uint32_t samples, uint32_t count, const sim_optics *o, uint64_t seed,
                  float *out, oct_error *e)
{
    oct_geometry g = {samples, 1, 1, OCT_SAMPLE_F32, 0};
    oct_err err = oct_geometry_check(&g, e);
    if (err)
        return err;
    if (count < 1 || count > samples)
        return oct_error_set(e, OCT_EINVAL, "count = %u: must be 1..%u (samples)", count, samples);
    spectral sp;
    if (spectral_init(&sp, samples, o))
        return oct_error_set(e, OCT_ENOMEM, "octsim: out of memory");
    uint64_t rs = seed;
    for (uint32_t r = 0; r < count; r++)
        mirror_spectrum(&sp, (double)r * (samples / 2.0) / count, &rs, out + (size_t)r * samples);
    free(sp.env);
    return OCT_OK;
}
