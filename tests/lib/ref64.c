/* ref64.c - float64 reference of SPEC section 2 by direct sums (see ref64.h).
 *
 * Deliberately naive: every DFT is a direct sum over a cos/sin table, every
 * correlation a direct sum over n.  Written from the SPEC text only. */
#include "ref64.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct ref64 {
    oct_geometry g;
    oct_params p;
    uint32_t M, NL, R;
    bool normalize;
    double *cos_t, *sin_t; /* cos/sin(2*pi*k/M), k = 0..M-1 */
    double *w;             /* window */
    double *xt;            /* NL x M: x~_j = w . x'_j (MSI) */
    double *xp;            /* NL x M: x'_j (CMS) */
    double *xk;            /* NL x M: CFD input w . klin(x'_j) (NULL: xt) */
    double *zr, *zi;       /* NL x M: dispersion-compensated analytic signal (NULL: off) */
    double *mt;            /* R x M: m~_r */
    uint32_t RC;           /* CMS depths */
    double *qr, *qi;       /* RC x M: CMS masks q_r */
    uint32_t D[OCT_METHOD_COUNT];
    double *cache[OCT_METHOD_COUNT]; /* NL x D, NAN = not computed yet */
};

void ref64_window(double *w, uint32_t M, uint32_t type, double param)
{
    const double D = (double)M - 1.0;
    for (uint32_t n = 0; n < M; n++) {
        double t = (double)n;
        double v = 1.0;
        switch (type) {
        case OCT_WINDOW_RECT: v = 1.0; break;
        case OCT_WINDOW_HANN: v = 0.5 - 0.5 * cos(2.0 * M_PI * t / D); break;
        case OCT_WINDOW_HAMMING: v = 0.54 - 0.46 * cos(2.0 * M_PI * t / D); break;
        case OCT_WINDOW_BLACKMAN:
            v = 0.42 - 0.5 * cos(2.0 * M_PI * t / D) + 0.08 * cos(4.0 * M_PI * t / D);
            break;
        case OCT_WINDOW_GAUSSIAN: {
            double z = (t - D / 2.0) / (param * (double)M);
            v = exp(-0.5 * z * z);
            break;
        }
        case OCT_WINDOW_TUKEY: {
            /* scipy.signal.windows.tukey(M, alpha, sym=True) */
            if (param <= 0.0) {
                v = 1.0;
            } else if (param >= 1.0) {
                v = 0.5 - 0.5 * cos(2.0 * M_PI * t / D);
            } else {
                double m = t < D - t ? t : D - t; /* mirror at the end */
                double edge = param * D / 2.0;
                v = m < edge ? 0.5 * (1.0 - cos(2.0 * M_PI * m / (param * D))) : 1.0;
            }
            break;
        }
        default: v = NAN; break;
        }
        w[n] = v;
    }
}

void ref64_convert(const void *frame, const oct_geometry *g, size_t j, double *x)
{
    const uint32_t M = g->samples;
    const double div = ldexp(1.0, (int)g->sample_shift);
    for (uint32_t n = 0; n < M; n++) {
        size_t i = j * M + n;
        switch (g->sample_type) {
        case OCT_SAMPLE_U16: {
            uint16_t v;
            memcpy(&v, (const uint8_t *)frame + 2 * i, 2);
            x[n] = floor((double)v / div); /* logical shift */
            break;
        }
        case OCT_SAMPLE_I16: {
            int16_t v;
            memcpy(&v, (const uint8_t *)frame + 2 * i, 2);
            x[n] = floor((double)v / div); /* arithmetic shift rounds toward -inf */
            break;
        }
        case OCT_SAMPLE_F32: {
            float v;
            memcpy(&v, (const uint8_t *)frame + 4 * i, 4);
            x[n] = (double)v;
            break;
        }
        default: x[n] = NAN; break;
        }
    }
}

double ref64_gray_value(double I, uint32_t scale, double gsc, double contrast, double brightness)
{
    double s = gsc * I;
    double t = scale == OCT_SCALE_LOG ? 20.0 * log10(s > 1e-12 ? s : 1e-12) : s;
    return brightness + contrast * t + 0.5;
}

uint8_t ref64_gray_level(double v)
{
    double f = floor(v);
    if (!(f > 0.0)) return 0; /* also NaN */
    if (f >= 255.0) return 255;
    return (uint8_t)f;
}

int ref64_kind_class(int kind)
{
    switch (kind) {
    case OCT_KIND_ENFACE:
    case OCT_KIND_SLAB_MEAN:
    case OCT_KIND_SLAB_MAX: return OCT_CLASS_ENFACE; /* SPEC 10.2: slabs are of class enface */
    case OCT_KIND_CONFOCAL: return OCT_CLASS_CONFOCAL;
    default: return OCT_CLASS_BSCAN;
    }
}

bool ref64_product_wanted(const oct_geometry *g, const oct_params *p, int method, int kind)
{
    if (!(p->methods & (1u << method))) return false;
    /* product bits: kind k for k < 8, k + 1 above (bit 8 is f32) */
    if (!(p->products & (kind < 8 ? 1u << kind : 1u << (kind + 1)))) return false;
    /* SPEC 2.4: a B-scan frame gives bscan only, a volume frame the others. */
    return g->lines == 1 ? kind == OCT_KIND_BSCAN : kind != OCT_KIND_BSCAN;
}

/* Real DFT bin k of y (length M) by direct sum. */
static void dft_bin(const ref64 *r, const double *y, uint32_t k, double *re, double *im)
{
    const uint32_t mask = r->M - 1;
    double sr = 0.0, si = 0.0;
    for (uint32_t n = 0; n < r->M; n++) {
        uint32_t idx = (uint32_t)(((uint64_t)k * n) & mask);
        sr += y[n] * r->cos_t[idx];
        si -= y[n] * r->sin_t[idx];
    }
    *re = sr;
    *im = si;
}

/* H[k] of SPEC 2.3: 0 for k < F or k > M - F. */
static bool bin_kept(const ref64 *r, uint32_t k)
{
    int64_t F = r->p.freq_cutoff;
    return !((int64_t)k < F || (int64_t)k > (int64_t)r->M - F);
}

static int filter_masks(ref64 *r, const float *masks)
{
    const uint32_t M = r->M, mask = M - 1;
    double *y = malloc(sizeof(double) * M);
    double *Xr = malloc(sizeof(double) * M);
    double *Xi = malloc(sizeof(double) * M);
    if (!y || !Xr || !Xi) {
        free(y); free(Xr); free(Xi);
        return -1;
    }
    for (uint32_t q = 0; q < r->R; q++) {
        for (uint32_t n = 0; n < M; n++) y[n] = r->w[n] * (double)masks[(size_t)q * M + n];
        for (uint32_t k = 0; k < M; k++) {
            if (bin_kept(r, k)) {
                dft_bin(r, y, k, &Xr[k], &Xi[k]);
            } else {
                Xr[k] = Xi[k] = 0.0;
            }
        }
        double *m = r->mt + (size_t)q * M;
        double norm2 = 0.0;
        for (uint32_t n = 0; n < M; n++) {
            /* real part of (1/M) sum_k X[k] e^{+2 pi i kn/M} */
            double s = 0.0;
            for (uint32_t k = 0; k < M; k++) {
                if (Xr[k] == 0.0 && Xi[k] == 0.0) continue;
                uint32_t idx = (uint32_t)(((uint64_t)k * n) & mask);
                s += Xr[k] * r->cos_t[idx] - Xi[k] * r->sin_t[idx];
            }
            m[n] = s / (double)M;
            norm2 += m[n] * m[n];
        }
        if (r->normalize && norm2 > 0.0) {
            double inv = 1.0 / sqrt(norm2);
            for (uint32_t n = 0; n < M; n++) m[n] *= inv;
        }
    }
    free(y); free(Xr); free(Xi);
    return 0;
}

int ref64_create(ref64 **out, const oct_setup *setup, const oct_params *p, const void *frame)
{
    return ref64_create_seq(out, setup, p, &frame, 1);
}

/* Interpolated sample at position x of oct_engine.h (direct formulas). */
static double klin_at(const double *v, uint32_t M, double x, uint32_t type, int T)
{
#define AT(i) v[(i) < 0 ? 0 : (i) > (int64_t)M - 1 ? M - 1 : (i)]
    int64_t i = (int64_t)floor(x);
    double f = x - (double)i;
    if (type == OCT_KLIN_LINEAR) return (1.0 - f) * AT(i) + f * AT(i + 1);
    if (type == OCT_KLIN_CUBIC) {
        double xm = AT(i - 1), x0 = AT(i), x1 = AT(i + 1), x2 = AT(i + 2);
        return x0 + f / 2 * (x1 - xm) + f * f / 2 * (2 * xm - 5 * x0 + 4 * x1 - x2) +
               f * f * f / 2 * (3 * x0 - xm - 3 * x1 + x2);
    }
    int64_t m0 = (int64_t)floor(x - (T - 1) / 2.0 + 0.5);
    double y = 0.0;
    for (int64_t m = m0; m < m0 + T; m++) {
        double u = x - (double)m;
        y += AT(m) * (u == 0.0 ? 1.0 : sin(M_PI * u) / (M_PI * u));
    }
    return y;
#undef AT
}

/* Fixed-pattern noise background of the frame's converted spectra x (S x M). */
static void fpn_bg(const double *x, size_t S, uint32_t M, size_t G0, double *bg)
{
    size_t G = S < G0 ? S : G0, nseg = S < G0 ? 1 : S / G0;
    for (uint32_t n = 0; n < M; n++) {
        double best = INFINITY;
        for (size_t sg = 0; sg < nseg; sg++) {
            double mean = 0.0, ss = 0.0;
            for (size_t j = sg * G; j < (sg + 1) * G; j++) mean += x[j * M + n];
            mean /= (double)G;
            for (size_t j = sg * G; j < (sg + 1) * G; j++) ss += (x[j * M + n] - mean) * (x[j * M + n] - mean);
            if (ss < best) { best = ss; bg[n] = mean; }
        }
    }
}

/* CMS calibration and masks, written from oct_setup's comment: direct DFT
 * sums, normal equations of the least squares, the F cut-off as the
 * subtraction of the removed bins. */
static int cms_build(ref64 *r, const oct_setup *s)
{
    const uint32_t M = r->M, K = s->cms_cal_count, mask = M - 1;
    double *phi = malloc(sizeof(double) * K * M), *Cr = malloc(sizeof(double) * M),
           *Ci = malloc(sizeof(double) * M), *y = malloc(sizeof(double) * M),
           *g = malloc(sizeof(double) * M), *h = malloc(sizeof(double) * M);
    if (!phi || !Cr || !Ci || !y || !g || !h) {
        free(phi); free(Cr); free(Ci); free(y); free(g); free(h);
        return -1;
    }
    for (uint32_t i = 0; i < K; i++) {
        const float *c = s->cms_cal + (size_t)i * M;
        double mean = 0.0;
        for (uint32_t n = 0; n < M; n++) mean += c[n];
        mean /= M;
        for (uint32_t n = 0; n < M; n++) y[n] = c[n] - mean;
        uint32_t kp = 1;
        double best = -1.0;
        for (uint32_t k = 0; k < M / 2; k++) {
            dft_bin(r, y, k, &Cr[k], &Ci[k]);
            double a = Cr[k] * Cr[k] + Ci[k] * Ci[k];
            if (k >= 1 && a > best) { best = a; kp = k; }
        }
        uint32_t k0 = kp / 4 > 1 ? kp / 4 : 1;
        double *ph = phi + (size_t)i * M;
        for (uint32_t n = 0; n < M; n++) {
            double re = 0.0, im = 0.0;
            for (uint32_t k = k0; k < M / 2; k++) {
                uint32_t idx = (uint32_t)(((uint64_t)k * n) & mask);
                re += Cr[k] * r->cos_t[idx] - Ci[k] * r->sin_t[idx];
                im += Cr[k] * r->sin_t[idx] + Ci[k] * r->cos_t[idx];
            }
            double a = atan2(im, re);
            if (n == 0) { ph[0] = a; continue; }
            double prev = remainder(ph[n - 1], 2.0 * M_PI); /* the wrapped previous phase */
            double d = a - prev;
            while (d > M_PI) d -= 2.0 * M_PI;
            while (d < -M_PI) d += 2.0 * M_PI;
            ph[n] = ph[n - 1] + d;
        }
    }
    /* normal equations of phi_i = z_i g + h */
    double Sz = 0, Szz = 0;
    for (uint32_t i = 0; i < K; i++) { Sz += s->cms_depths[i]; Szz += s->cms_depths[i] * s->cms_depths[i]; }
    double det = Szz * K - Sz * Sz;
    for (uint32_t n = 0; n < M; n++) {
        double Sp = 0, Szp = 0;
        for (uint32_t i = 0; i < K; i++) { Sp += phi[(size_t)i * M + n]; Szp += s->cms_depths[i] * phi[(size_t)i * M + n]; }
        g[n] = (K * Szp - Sz * Sp) / det;
        h[n] = (Szz * Sp - Sz * Szp) / det;
    }
    const int64_t F = r->p.freq_cutoff;
    for (uint32_t q = 0; q < r->RC; q++) {
        double z = s->cms_start + s->cms_step * q;
        double *qr = r->qr + (size_t)q * M, *qi = r->qi + (size_t)q * M;
        for (uint32_t n = 0; n < M; n++) { qr[n] = cos(z * g[n] + h[n]); qi[n] = -sin(z * g[n] + h[n]); }
        if (F > 0) {
            /* P c = c - (1/M) sum over the removed bins k of C[k] e^(2 pi i kn/M) */
            for (uint32_t k = 0; k < M; k++) {
                if (!((int64_t)k < F || (int64_t)k > (int64_t)M - F)) { Cr[k] = Ci[k] = 0.0; continue; }
                double re = 0, im = 0;
                for (uint32_t n = 0; n < M; n++) {
                    uint32_t idx = (uint32_t)(((uint64_t)k * n) & mask);
                    re += qr[n] * r->cos_t[idx] + qi[n] * r->sin_t[idx];
                    im += qi[n] * r->cos_t[idx] - qr[n] * r->sin_t[idx];
                }
                Cr[k] = re; Ci[k] = im;
            }
            for (uint32_t n = 0; n < M; n++) {
                double re = 0, im = 0;
                for (uint32_t k = 0; k < M; k++) {
                    if (Cr[k] == 0.0 && Ci[k] == 0.0) continue;
                    uint32_t idx = (uint32_t)(((uint64_t)k * n) & mask);
                    re += Cr[k] * r->cos_t[idx] - Ci[k] * r->sin_t[idx];
                    im += Cr[k] * r->sin_t[idx] + Ci[k] * r->cos_t[idx];
                }
                y[n] = re / M; /* reuse: the removed part, real */
                qr[n] -= y[n];
                qi[n] -= im / M;
            }
        }
        for (uint32_t n = 0; n < M; n++) { qr[n] *= r->w[n]; qi[n] *= r->w[n]; }
    }
    free(phi); free(Cr); free(Ci); free(y); free(g); free(h);
    return 0;
}

/* Dispersion of oct_engine.h: X by direct sums, analytic signal, phase. */
static void disp_build(ref64 *r, uint32_t j)
{
    const uint32_t M = r->M, mask = M - 1;
    const double *x = r->xk ? r->xk + (size_t)j * M : r->xt + (size_t)j * M;
    double *zr = r->zr + (size_t)j * M, *zi = r->zi + (size_t)j * M;
    double *Xr = malloc(sizeof(double) * (M / 2 + 1)), *Xi = malloc(sizeof(double) * (M / 2 + 1));
    if (!Xr || !Xi) { free(Xr); free(Xi); return; }
    for (uint32_t k = 0; k <= M / 2; k++) {
        if ((int64_t)k < r->p.freq_cutoff) { Xr[k] = Xi[k] = 0.0; continue; }
        dft_bin(r, x, k, &Xr[k], &Xi[k]);
    }
    for (uint32_t n = 0; n < M; n++) {
        double re = 0, im = 0;
        for (uint32_t k = 0; k <= M / 2; k++) {
            uint32_t idx = (uint32_t)(((uint64_t)k * n) & mask);
            re += Xr[k] * r->cos_t[idx] - Xi[k] * r->sin_t[idx];
            im += Xr[k] * r->sin_t[idx] + Xi[k] * r->cos_t[idx];
        }
        re /= M, im /= M;
        double u = (double)n / M - (double)r->p.disp_k0;
        double th = (double)r->p.disp_a2 * u * u + (double)r->p.disp_a3 * u * u * u;
        double c = cos(th), sn = sin(th);
        zr[n] = re * c + im * sn; /* z e^(-i theta) */
        zi[n] = im * c - re * sn;
    }
    free(Xr); free(Xi);
}

int ref64_create_seq(ref64 **out, const oct_setup *setup, const oct_params *p, const void *const *frames,
                     size_t nframes)
{
    *out = NULL;
    if (!frames || nframes == 0) return -1;
    const void *frame = frames[nframes - 1];
    const oct_geometry *g = &setup->geom;
    uint32_t M = g->samples;
    if (M < 2 || (M & (M - 1)) || g->ascans == 0 || g->lines == 0 || !frame) return -1;
    if (p->background == OCT_BG_REFERENCE && !setup->reference) return -1;
    ref64 *r = calloc(1, sizeof(*r));
    if (!r) return -1;
    r->g = *g;
    r->p = *p;
    r->M = M;
    r->NL = g->ascans * g->lines;
    r->R = setup->masks ? setup->mask_count : 0;
    r->normalize = setup->normalize_masks;
    r->D[OCT_METHOD_CFD] = M / 2 + 1;
    r->D[OCT_METHOD_MSI] = r->R;
    r->RC = setup->cms_count;
    r->D[OCT_METHOD_CMS] = r->RC;
    r->cos_t = malloc(sizeof(double) * M);
    r->sin_t = malloc(sizeof(double) * M);
    r->w = malloc(sizeof(double) * M);
    r->xt = malloc(sizeof(double) * M * r->NL);
    r->mt = malloc(sizeof(double) * M * (r->R ? r->R : 1));
    double *bg = calloc(M, sizeof(double));
    for (int m = 0; m < OCT_METHOD_COUNT; m++) {
        size_t n = (size_t)r->NL * (r->D[m] ? r->D[m] : 1);
        r->cache[m] = malloc(sizeof(double) * n);
        if (r->cache[m])
            for (size_t i = 0; i < n; i++) r->cache[m][i] = NAN;
    }
    r->xp = malloc(sizeof(double) * M * r->NL);
    if (p->klin) r->xk = malloc(sizeof(double) * M * r->NL);
    if (p->disp_a2 != 0.0f || p->disp_a3 != 0.0f) {
        r->zr = malloc(sizeof(double) * M * r->NL);
        r->zi = malloc(sizeof(double) * M * r->NL);
    }
    if (r->RC) {
        r->qr = malloc(sizeof(double) * M * r->RC);
        r->qi = malloc(sizeof(double) * M * r->RC);
    }
    if (!r->cos_t || !r->sin_t || !r->w || !r->xt || !r->mt || !bg || !r->cache[0] || !r->cache[1] ||
        !r->cache[2] || !r->xp || (p->klin && !r->xk) || ((p->disp_a2 != 0.0f || p->disp_a3 != 0.0f) &&
        (!r->zr || !r->zi)) || (r->RC && (!r->qr || !r->qi))) {
        free(bg);
        ref64_destroy(r);
        return -1;
    }
    for (uint32_t k = 0; k < M; k++) {
        double a = 2.0 * M_PI * (double)k / (double)M;
        r->cos_t[k] = cos(a);
        r->sin_t[k] = sin(a);
    }
    ref64_window(r->w, M, p->window, (double)p->window_param);

    /* conversion, then background over all N*L spectra, then window */
    for (uint32_t j = 0; j < r->NL; j++) ref64_convert(frame, g, j, r->xt + (size_t)j * M);
    if (p->background == OCT_BG_REFERENCE) {
        for (uint32_t n = 0; n < M; n++) bg[n] = (double)setup->reference[n];
    } else if (p->background == OCT_BG_FRAME_MEAN) {
        for (uint32_t j = 0; j < r->NL; j++)
            for (uint32_t n = 0; n < M; n++) bg[n] += r->xt[(size_t)j * M + n];
        for (uint32_t n = 0; n < M; n++) bg[n] /= (double)r->NL;
    } else if (p->background == OCT_BG_ROLLING) {
        /* the mean of each of the last K frames' mean spectra */
        size_t K = (size_t)p->background_param, f0 = nframes > K ? nframes - K : 0;
        double *x = malloc(sizeof(double) * M);
        if (!x) { free(bg); ref64_destroy(r); return -1; }
        for (size_t f = f0; f < nframes; f++)
            for (uint32_t j = 0; j < r->NL; j++) {
                ref64_convert(frames[f], g, j, x);
                for (uint32_t n = 0; n < M; n++) bg[n] += x[n] / (double)r->NL;
            }
        for (uint32_t n = 0; n < M; n++) bg[n] /= (double)(nframes - f0);
        free(x);
    } else if (p->background == OCT_BG_FPN) {
        fpn_bg(r->xt, r->NL, M, (size_t)p->background_param, bg);
    }
    for (uint32_t j = 0; j < r->NL; j++)
        for (uint32_t n = 0; n < M; n++) {
            double *x = &r->xt[(size_t)j * M + n];
            r->xp[(size_t)j * M + n] = *x - bg[n];
            *x = r->w[n] * (*x - bg[n]);
        }
    free(bg);
    if (p->klin) {
        double *pos = malloc(sizeof(double) * M);
        if (!pos) { ref64_destroy(r); return -1; }
        for (uint32_t n = 0; n < M; n++) {
            double t = (double)n / (double)M;
            pos[n] = p->klin_source == OCT_KLIN_FILE
                         ? (setup->klin_positions ? setup->klin_positions[n] : NAN)
                         : p->klin_coef[0] + p->klin_coef[1] * t + p->klin_coef[2] * t * t +
                               p->klin_coef[3] * t * t * t;
        }
        for (uint32_t j = 0; j < r->NL; j++)
            for (uint32_t n = 0; n < M; n++)
                r->xk[(size_t)j * M + n] =
                    r->w[n] * klin_at(r->xp + (size_t)j * M, M, pos[n], p->klin, p->klin_taps);
        free(pos);
    }
    if (r->zr)
        for (uint32_t j = 0; j < r->NL; j++) disp_build(r, j);
    if (r->RC && cms_build(r, setup) != 0) {
        ref64_destroy(r);
        return -1;
    }
    if (r->R && filter_masks(r, setup->masks) != 0) {
        ref64_destroy(r);
        return -1;
    }
    *out = r;
    return 0;
}

void ref64_destroy(ref64 *r)
{
    if (!r) return;
    free(r->cos_t); free(r->sin_t); free(r->w); free(r->xt); free(r->mt);
    free(r->xp); free(r->xk); free(r->zr); free(r->zi); free(r->qr); free(r->qi);
    for (int m = 0; m < OCT_METHOD_COUNT; m++) free(r->cache[m]);
    free(r);
}

void ref64_set_display(ref64 *r, const oct_params *p)
{
    r->p.methods = p->methods;
    r->p.products = p->products;
    r->p.enface_start = p->enface_start;
    r->p.enface_step = p->enface_step;
    r->p.enface_count = p->enface_count;
    r->p.xsec_h = p->xsec_h;
    r->p.xsec_v = p->xsec_v;
    r->p.scale = p->scale;
    memcpy(r->p.gsc, p->gsc, sizeof(p->gsc));
    memcpy(r->p.contrast, p->contrast, sizeof(p->contrast));
    memcpy(r->p.brightness, p->brightness, sizeof(p->brightness));
}

const oct_params *ref64_params(const ref64 *r) { return &r->p; }
uint32_t ref64_depths(const ref64 *r, int method) { return r->D[method]; }
const double *ref64_spectrum(const ref64 *r, uint32_t j) { return r->xt + (size_t)j * r->M; }
const double *ref64_mask(const ref64 *r, uint32_t rr) { return r->mt + (size_t)rr * r->M; }

static double cfd_intensity(const ref64 *r, uint32_t j, uint32_t d)
{
    if (!bin_kept(r, d)) return 0.0;
    double re, im;
    if (r->zr) {
        /* sum_n z[n] e^(-i theta) e^(-2 pi i dn/M) */
        const double *zr = r->zr + (size_t)j * r->M, *zi = r->zi + (size_t)j * r->M;
        re = im = 0.0;
        for (uint32_t n = 0; n < r->M; n++) {
            uint32_t idx = (uint32_t)(((uint64_t)d * n) & (r->M - 1));
            re += zr[n] * r->cos_t[idx] + zi[n] * r->sin_t[idx];
            im += zi[n] * r->cos_t[idx] - zr[n] * r->sin_t[idx];
        }
        return sqrt(re * re + im * im);
    }
    dft_bin(r, (r->xk ? r->xk : r->xt) + (size_t)j * r->M, d, &re, &im);
    return sqrt(re * re + im * im);
}

static double cms_intensity(const ref64 *r, uint32_t j, uint32_t q)
{
    const double *x = r->xp + (size_t)j * r->M, *qr = r->qr + (size_t)q * r->M, *qi = r->qi + (size_t)q * r->M;
    double re = 0.0, im = 0.0;
    for (uint32_t n = 0; n < r->M; n++) { re += x[n] * qr[n]; im += x[n] * qi[n]; }
    return sqrt(re * re + im * im);
}

static double msi_intensity(const ref64 *r, uint32_t j, uint32_t q)
{
    const uint32_t M = r->M;
    const double *x = r->xt + (size_t)j * M, *m = r->mt + (size_t)q * M;
    double sum = 0.0;
    for (int32_t l = r->p.lag_lo; l <= r->p.lag_hi; l++) {
        /* P[l] = sum_n x[n] m[(n - l) mod M] */
        uint32_t sh = (uint32_t)((((int64_t)l % (int64_t)M) + (int64_t)M) % (int64_t)M);
        double P = 0.0;
        for (uint32_t n = 0; n < M; n++) P += x[n] * m[(n + M - sh) & (M - 1)];
        sum += fabs(P);
    }
    return sum;
}

double ref64_intensity(ref64 *r, int method, uint32_t j, uint32_t d)
{
    if (method < 0 || method >= OCT_METHOD_COUNT || j >= r->NL || d >= r->D[method]) return NAN;
    double *c = &r->cache[method][(size_t)j * r->D[method] + d];
    if (isnan(*c))
        *c = method == OCT_METHOD_CFD   ? cfd_intensity(r, j, d)
             : method == OCT_METHOD_MSI ? msi_intensity(r, j, d)
                                        : cms_intensity(r, j, d);
    return *c;
}

void ref64_image_free(ref64_image *img)
{
    if (!img) return;
    free(img->I); free(img->v); free(img->gray); free(img->indices);
    memset(img, 0, sizeof(*img));
}

void ref64_image_regray(const ref64 *r, int kind, ref64_image *img)
{
    int c = ref64_kind_class(kind);
    for (size_t i = 0; i < img->count; i++) {
        img->v[i] = ref64_gray_value(img->I[i], r->p.scale, (double)r->p.gsc[c],
                                     (double)r->p.contrast[c], (double)r->p.brightness[c]);
        img->gray[i] = ref64_gray_level(img->v[i]);
    }
}

int ref64_product(ref64 *r, int method, int kind, ref64_image *img)
{
    memset(img, 0, sizeof(*img));
    const uint32_t N = r->g.ascans, L = r->g.lines, D = r->D[method];
    const oct_params *p = &r->p;
    /* en-face depths: idx_q = start + step*q, only those in [0, D) */
    uint32_t Q = 0;
    int32_t *idx = NULL;
    if (kind == OCT_KIND_ENFACE || kind == OCT_KIND_CONFOCAL) {
        uint32_t cnt = p->enface_count > 0 ? (uint32_t)p->enface_count : 0;
        idx = malloc(sizeof(int32_t) * (cnt ? cnt : 1));
        if (!idx) return -1;
        for (uint32_t q = 0; q < cnt; q++) {
            int64_t v = (int64_t)p->enface_start + (int64_t)p->enface_step * q;
            if (v >= 0 && v < (int64_t)D) idx[Q++] = (int32_t)v;
        }
    }
    switch (kind) {
    case OCT_KIND_BSCAN: img->ndim = 2; img->shape[0] = D; img->shape[1] = N; break;
    case OCT_KIND_ENFACE: img->ndim = 3; img->shape[0] = Q; img->shape[1] = L; img->shape[2] = N; break;
    case OCT_KIND_CONFOCAL: img->ndim = 2; img->shape[0] = L; img->shape[1] = N; break;
    case OCT_KIND_XSEC_H: img->ndim = 2; img->shape[0] = D; img->shape[1] = N; break;
    case OCT_KIND_XSEC_V: img->ndim = 2; img->shape[0] = D; img->shape[1] = L; break;
    case OCT_KIND_VOLUME: img->ndim = 3; img->shape[0] = L; img->shape[1] = N; img->shape[2] = D; break;
    case OCT_KIND_SLAB_MEAN:
    case OCT_KIND_SLAB_MAX: img->ndim = 2; img->shape[0] = L; img->shape[1] = N; break;
    default: free(idx); return -1;
    }
    /* slab depths (SPEC 10.2): [d0, d1) clamped to [0, D] */
    int64_t d0 = p->slab_start, d1 = p->slab_end;
    d0 = d0 < 0 ? 0 : d0 > (int64_t)D ? (int64_t)D : d0;
    d1 = d1 < 0 ? 0 : d1 > (int64_t)D ? (int64_t)D : d1;
    img->count = 1;
    for (int i = 0; i < img->ndim; i++) img->count *= img->shape[i];
    size_t cnt = img->count ? img->count : 1;
    img->I = malloc(sizeof(double) * cnt);
    img->v = malloc(sizeof(double) * cnt);
    img->gray = malloc(cnt);
    if (!img->I || !img->v || !img->gray) {
        free(idx);
        ref64_image_free(img);
        return -1;
    }
    size_t i = 0;
    switch (kind) {
    case OCT_KIND_BSCAN:
        for (uint32_t d = 0; d < D; d++)
            for (uint32_t a = 0; a < N; a++) img->I[i++] = ref64_intensity(r, method, a, d);
        break;
    case OCT_KIND_ENFACE:
        for (uint32_t q = 0; q < Q; q++)
            for (uint32_t l = 0; l < L; l++)
                for (uint32_t a = 0; a < N; a++)
                    img->I[i++] = ref64_intensity(r, method, l * N + a, (uint32_t)idx[q]);
        img->indices = idx;
        img->n_indices = Q;
        img->requested = p->enface_count > 0 ? (uint32_t)p->enface_count : 0;
        idx = NULL;
        break;
    case OCT_KIND_CONFOCAL:
        for (uint32_t l = 0; l < L; l++)
            for (uint32_t a = 0; a < N; a++) {
                double s = 0.0;
                for (uint32_t q = 0; q < Q; q++) s += ref64_intensity(r, method, l * N + a, (uint32_t)idx[q]);
                img->I[i++] = s;
            }
        break;
    case OCT_KIND_XSEC_H:
        for (uint32_t d = 0; d < D; d++)
            for (uint32_t a = 0; a < N; a++)
                img->I[i++] = ref64_intensity(r, method, (uint32_t)p->xsec_h * N + a, d);
        break;
    case OCT_KIND_XSEC_V:
        for (uint32_t d = 0; d < D; d++)
            for (uint32_t l = 0; l < L; l++)
                img->I[i++] = ref64_intensity(r, method, l * N + (uint32_t)p->xsec_v, d);
        break;
    case OCT_KIND_VOLUME:
        for (uint32_t l = 0; l < L; l++)
            for (uint32_t a = 0; a < N; a++)
                for (uint32_t d = 0; d < D; d++) img->I[i++] = ref64_intensity(r, method, l * N + a, d);
        break;
    case OCT_KIND_SLAB_MEAN:
    case OCT_KIND_SLAB_MAX:
        for (uint32_t l = 0; l < L; l++)
            for (uint32_t a = 0; a < N; a++) {
                double sum = 0.0, mx = -INFINITY;
                for (int64_t d = d0; d < d1; d++) {
                    double v = ref64_intensity(r, method, l * N + a, (uint32_t)d);
                    sum += v;
                    mx = v > mx ? v : mx;
                }
                img->I[i++] = kind == OCT_KIND_SLAB_MAX ? mx : (d1 > d0 ? sum / (double)(d1 - d0) : NAN);
            }
        break;
    }
    free(idx);
    if (kind == OCT_KIND_SLAB_MEAN || kind == OCT_KIND_SLAB_MAX) {
        img->indices = malloc(2 * sizeof(int32_t));
        if (!img->indices) {
            ref64_image_free(img);
            return -1;
        }
        img->indices[0] = (int32_t)d0, img->indices[1] = (int32_t)d1;
        img->n_indices = 2;
    }
    if (kind == OCT_KIND_XSEC_H || kind == OCT_KIND_XSEC_V) {
        img->indices = malloc(sizeof(int32_t));
        if (!img->indices) {
            ref64_image_free(img);
            return -1;
        }
        img->indices[0] = kind == OCT_KIND_XSEC_H ? p->xsec_h : p->xsec_v;
        img->n_indices = 1;
    }
    ref64_image_regray(r, kind, img);
    return 0;
}
