/* flow.c - octsim's flow phantom (issue 18); see flow.h.
 *
 * Model of A-scan (g, r, a) (position g, repeat r, A-scan a), linear in k:
 *   x[n] = S(n) (DC + G Re sum_b E_b e^(2 pi i b n / M)) + read/shot noise,
 * S a Gaussian source envelope.  E_b is the field of depth cell b:
 *  - static tissue: one complex Gaussian per (g, a, b) times the layer's
 *    reflectivity, identical in every repeat (only the noise differs);
 *  - vessel: a moving random field.  Its scatterers, a complex Gaussian c_i
 *    every delta = 1/4 beam width along the flow, pass the beam with the
 *    lateral response h(u) = exp(-u^2 / (2 sigma^2)), sigma = 1/2 beam width:
 *        E_b(r) = rho sum_i c_i h(r * speed - i delta) / norm,
 *    so that repeats r and r' are correlated by exp(-(speed (r - r'))^2 / 4 sigma^2)
 *    in field (speed 0: static; 1.5: ~0.1 between neighbouring repeats).
 * The vessel runs along y (one ellipse per B-scan, its centre drifting in
 * x with y), inside a layered slab with a wavy surface. */
#include "flow.h"

#include <fftw3.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define FLOW_DELTA 0.25 /* scatterer spacing along the flow, beam widths */
#define FLOW_SIGMA 0.5  /* lateral response, beam widths */

void sim_flow_default(sim_flow *f, uint32_t samples, uint32_t ascans, uint32_t positions,
                      uint32_t repeats)
{
    memset(f, 0, sizeof *f);
    f->samples = samples;
    f->ascans = ascans;
    f->positions = positions;
    f->repeats = repeats;
    f->sample_type = OCT_SAMPLE_U16;
    f->speed = 1.5;
    f->vessel_x = 0.45;
    f->vessel_tilt = 0.15;
    f->vessel_z = 0.4;
    f->vessel_rx = 0.06 * ascans;
    f->vessel_rz = 0.04 * (samples / 2 + 1);
    f->noise = 2.0;
    f->shot = 0.5;
    f->seed = 1;
}

static uint64_t mix(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Two independent N(0, 1) deviates from a 64-bit key (Box-Muller). */
static void normal2(uint64_t key, double *a, double *b)
{
    uint64_t h1 = mix(key), h2 = mix(h1 ^ 0x632BE59BD9B4E019ull);
    double u1 = ((h1 >> 11) + 1.0) / 9007199254740993.0;
    double u2 = (h2 >> 11) / 9007199254740992.0;
    double rr = sqrt(-2 * log(u1));
    *a = rr * cos(2 * M_PI * u2);
    *b = rr * sin(2 * M_PI * u2);
}

/* Layered sample at (x, y) in [0, 1]: surface depth and bottom (bins),
 * reflectivity at bin b. */
typedef struct column {
    double surf, bottom;
    double z[6];
} column;

static const double layer_thick[5] = {0.08, 0.12, 0.15, 0.12, 0.13};
static const double layer_refl[5] = {0.8, 0.35, 0.6, 0.3, 0.5};

static void column_at(double x, double y, double D, column *c)
{
    c->surf = 0.12 * D + 0.03 * D * sin(2 * M_PI * (0.7 * x + 0.4 * y));
    double z = c->surf;
    for (int i = 0; i < 5; i++) {
        c->z[i] = z;
        z += layer_thick[i] * D;
    }
    c->z[5] = z;
    c->bottom = z;
}

static double refl_at(const column *c, double b, double D)
{
    if (b < c->surf || b >= c->bottom)
        return 0;
    int i = 0;
    while (i < 4 && b >= c->z[i + 1])
        i++;
    return layer_refl[i] * exp(-(b - c->surf) / (0.6 * D));
}

static double vessel_cx(const sim_flow *f, uint32_t g)
{
    double y = f->positions > 1 ? (double)g / (f->positions - 1) : 0.0;
    return (f->vessel_x + f->vessel_tilt * y) * f->ascans;
}

static int in_vessel(const sim_flow *f, uint32_t g, uint32_t a, uint32_t b, uint32_t D)
{
    double u = ((a + 0.5) - vessel_cx(f, g)) / f->vessel_rx;
    double v = (b - f->vessel_z * D) / f->vessel_rz;
    return u * u + v * v <= 1.0;
}

void sim_flow_slab(const sim_flow *f, uint32_t *d0, uint32_t *d1)
{
    const uint32_t D = f->samples / 2 + 1;
    double zc = f->vessel_z * D, m = f->vessel_rz + 4;
    double lo = zc - m, hi = zc + m + 1;
    *d0 = lo < 0 ? 0 : (uint32_t)lo;
    *d1 = hi > D ? D : (uint32_t)hi;
}

oct_err sim_flow_frame(const sim_flow *f, void *frame, uint8_t *labels, oct_error *e)
{
    const uint32_t M = f->samples, N = f->ascans, G = f->positions, R = f->repeats;
    oct_geometry geo = {M, N, G * R, f->sample_type, 0};
    if (!G || !R || (uint64_t)G * R > UINT32_MAX)
        return oct_error_set(e, OCT_EINVAL, "flow: positions = %u, repeats = %u: both must be >= 1",
                             G, R);
    oct_err err = oct_geometry_check(&geo, e);
    if (err)
        return err;
    if (f->sample_type != OCT_SAMPLE_U16 && f->sample_type != OCT_SAMPLE_F32)
        return oct_error_set(e, OCT_EINVAL, "flow: sample type must be u16 or f32");
    if (!(f->speed >= 0 && f->speed <= 100) || !(f->vessel_rx > 0) || !(f->vessel_rz > 0) ||
        !(f->noise >= 0) || !(f->shot >= 0) || !(fabs(f->motion) <= M / 8.0))
        return oct_error_set(e, OCT_EINVAL,
                             "flow: speed %g (must be in [0, 100]), vessel radii %g, %g (> 0), "
                             "noise %g, shot %g (>= 0), motion %g (|motion| <= M/8)",
                             f->speed, f->vessel_rx, f->vessel_rz, f->noise, f->shot, f->motion);
    const uint32_t D = M / 2 + 1;
    const double Dd = M / 2.0;
    /* fringe gain: ~250 counts rms for the column at the centre */
    column cc;
    column_at(0.5, 0.5, Dd, &cc);
    double pw = 0;
    for (uint32_t b = 1; b < M / 2; b++) {
        double rf = refl_at(&cc, b, Dd);
        pw += rf * rf;
    }
    const double gain = 250.0 / sqrt(0.5 * (pw > 1e-9 ? pw : 1.0));
    const double dc = 1800.0, rho_v = 0.5;
    /* scatterers that can reach the beam in repeats 0..R-1 */
    const int i0 = (int)floor(-4 * FLOW_SIGMA / FLOW_DELTA);
    const int i1 = (int)ceil(((R - 1) * f->speed + 4 * FLOW_SIGMA) / FLOW_DELTA);
    double nrm = 0;
    for (int i = -400; i <= 400; i++) {
        double h = exp(-0.5 * pow(i * FLOW_DELTA / FLOW_SIGMA, 2));
        nrm += h * h;
    }
    nrm = sqrt(nrm);
    fftwf_complex *tmpl = fftwf_malloc(sizeof(fftwf_complex) * M);
    if (!tmpl)
        return oct_error_set(e, OCT_ENOMEM, "flow: out of memory");
    fftwf_plan plan = fftwf_plan_dft_1d((int)M, tmpl, tmpl, FFTW_BACKWARD, FFTW_ESTIMATE);
    if (!plan) {
        fftwf_free(tmpl);
        return oct_error_set(e, OCT_EBACKEND, "flow: FFTW could not plan %u points", M);
    }
    int fail = 0;
#pragma omp parallel
    {
        fftwf_complex *Z = fftwf_malloc(sizeof(fftwf_complex) * M * (size_t)R);
        double *env = malloc(sizeof(double) * M);
        if (!Z || !env) {
#pragma omp atomic write
            fail = 1;
        } else {
            for (uint32_t n = 0; n < M; n++) {
                double t = ((double)n - 0.5 * (M - 1)) / (0.3 * M);
                env[n] = exp(-0.5 * t * t);
            }
        }
#pragma omp for schedule(dynamic, 8)
        for (long ga = 0; ga < (long)G * N; ga++) {
            if (fail)
                continue;
            const uint32_t g = (uint32_t)(ga / N), a = (uint32_t)(ga % N);
            column col;
            column_at((a + 0.5) / N, (g + 0.5) / G, Dd, &col);
            memset(Z, 0, sizeof(fftwf_complex) * M * (size_t)R);
            const uint64_t kcol = f->seed * 0xD1B54A32D192ED03ull ^ ((uint64_t)ga << 20);
            for (uint32_t b = 1; b < M / 2; b++) {
                const int vess = in_vessel(f, g, a, b, D);
                if (labels)
                    labels[(size_t)ga * D + b] =
                        vess ? SIM_FLOW_VESSEL : refl_at(&col, b, Dd) > 0 ? SIM_FLOW_TISSUE
                                                                           : SIM_FLOW_EMPTY;
                const double roll = exp(-1.5 * (b / Dd) * (b / Dd)); /* sensitivity roll-off */
                if (vess) {
                    for (uint32_t r = 0; r < R; r++) {
                        double s = r * f->speed, er = 0, ei = 0;
                        for (int i = i0; i <= i1; i++) {
                            double u = (s - i * FLOW_DELTA) / FLOW_SIGMA;
                            if (u * u > 32)
                                continue;
                            double h = exp(-0.5 * u * u), cr, ci;
                            normal2(kcol ^ mix(((uint64_t)b << 32) ^ (uint32_t)(i + 1000000)), &cr,
                                    &ci);
                            er += cr * h;
                            ei += ci * h;
                        }
                        double amp = rho_v * roll * 0.70710678 / nrm;
                        Z[(size_t)r * M + b][0] = (float)(amp * er);
                        Z[(size_t)r * M + b][1] = (float)(amp * ei);
                    }
                } else {
                    double rf = refl_at(&col, b, Dd);
                    if (rf == 0)
                        continue;
                    double cr, ci;
                    normal2(kcol ^ mix((uint64_t)b), &cr, &ci);
                    double amp = rf * roll * 0.70710678;
                    for (uint32_t r = 0; r < R; r++) {
                        Z[(size_t)r * M + b][0] = (float)(amp * cr);
                        Z[(size_t)r * M + b][1] = (float)(amp * ci);
                    }
                }
            }
            if (labels) {
                labels[(size_t)ga * D] = SIM_FLOW_EMPTY;
                labels[(size_t)ga * D + D - 1] = SIM_FLOW_EMPTY;
            }
            for (uint32_t r = 0; r < R; r++) {
                fftwf_complex *z = Z + (size_t)r * M;
                fftwf_execute_dft(plan, z, z);
                if (f->motion != 0 && r > 0) /* every depth b -> b + r*motion: a fringe ramp */
                    for (uint32_t n = 0; n < M; n++) {
                        double ph = 2 * M_PI * r * f->motion * n / M;
                        double c = cos(ph), sn = sin(ph), re = z[n][0], im = z[n][1];
                        z[n][0] = (float)(re * c - im * sn);
                        z[n][1] = (float)(re * sn + im * c);
                    }
                const size_t j = ((size_t)g * R + r) * N + a; /* spectrum index */
                uint64_t nk = mix(f->seed ^ 0x5851F42D4C957F2Dull ^ ((uint64_t)j << 16));
                for (uint32_t n = 0; n < M; n += 2) {
                    double w1, w2;
                    normal2(nk + n, &w1, &w2);
                    for (uint32_t q = 0; q < 2; q++) {
                        double I = env[n + q] * (dc + gain * z[n + q][0]);
                        I += f->noise * (q ? w2 : w1) + f->shot * sqrt(I > 0 ? I : 0) * (q ? w1 : w2);
                        if (f->sample_type == OCT_SAMPLE_F32) {
                            ((float *)frame)[j * M + n + q] = (float)I;
                        } else {
                            double v = floor(I + 0.5);
                            v = v < 0 ? 0 : v > 4095 ? 4095 : v;
                            ((uint16_t *)frame)[j * M + n + q] = (uint16_t)v;
                        }
                    }
                }
            }
        }
        fftwf_free(Z);
        free(env);
    }
    fftwf_destroy_plan(plan);
    fftwf_free(tmpl);
    if (fail)
        return oct_error_set(e, OCT_ENOMEM, "flow: out of memory");
    return OCT_OK;
}

void sim_flow_evaluate(const uint8_t *labels, const float *V, uint32_t G, uint32_t N, uint32_t D,
                       uint32_t d0, uint32_t d1, sim_flow_score *s)
{
    memset(s, 0, sizeof *s);
    double sv = 0, st = 0;
    size_t nv = 0, nt = 0;
    for (size_t i = 0; i < (size_t)G * N * D; i++) {
        if (labels[i] == SIM_FLOW_VESSEL) {
            sv += V[i];
            nv++;
        } else if (labels[i] == SIM_FLOW_TISSUE) {
            st += V[i];
            nt++;
        }
    }
    s->vessel_mean = nv ? sv / nv : 0;
    s->tissue_mean = nt ? st / nt : 0;
    s->ratio = s->tissue_mean > 0 ? s->vessel_mean / s->tissue_mean : INFINITY;
    double m[2] = {0, 0}, q[2] = {0, 0}, am[2] = {0, 0}, aq[2] = {0, 0};
    size_t c[2] = {0, 0};
    if (d1 > D)
        d1 = D;
    for (size_t p = 0; p < (size_t)G * N; p++) {
        float mx = -INFINITY;
        double mean = 0;
        int vessel = 0;
        for (uint32_t d = d0; d < d1; d++) {
            float v = V[p * D + d];
            mx = v > mx ? v : mx;
            mean += v / (double)(d1 - d0);
            vessel |= labels[p * D + d] == SIM_FLOW_VESSEL;
        }
        m[vessel] += mx;
        q[vessel] += (double)mx * mx;
        am[vessel] += mean;
        aq[vessel] += mean * mean;
        c[vessel]++;
    }
    for (int k = 0; k < 2; k++) {
        if (c[k]) {
            m[k] /= c[k];
            q[k] = q[k] / c[k] - m[k] * m[k];
            q[k] = q[k] > 0 ? sqrt(q[k]) : 0;
            am[k] /= c[k];
            aq[k] = aq[k] / c[k] - am[k] * am[k];
            aq[k] = aq[k] > 0 ? sqrt(aq[k]) : 0;
        }
    }
    s->enface_vessel_mean = m[1];
    s->enface_bg_mean = m[0];
    s->enface_vessel_sd = q[1];
    s->enface_bg_sd = q[0];
    s->cnr = q[0] > 0 ? (m[1] - m[0]) / q[0] : INFINITY;
    double den = sqrt(q[0] * q[0] + q[1] * q[1]);
    s->cnr_pooled = den > 0 ? (m[1] - m[0]) / den : INFINITY;
    s->cnr_mean = aq[0] > 0 ? (am[1] - am[0]) / aq[0] : INFINITY;
}
