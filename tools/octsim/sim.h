/* sim.h - octsim's physics: a swept-source OCT interferogram of a layered
 * sample, and the matching mirror masks for MSI. */
#ifndef OCTSIM_SIM_H
#define OCTSIM_SIM_H

#include <stdint.h>

#include "oct_types.h"

enum sim_sample { SIM_LAYERED = 0, SIM_RETINA = 1, SIM_LAMINATE = 2 };

typedef struct sim_optics {
    double kmap_a;    /* non-linear k-sampling: u(n) = n/M + a (n/M)^2 */
    double disp_b;    /* dispersion: phase 2 pi b (u - uc)^2 */
    double env_sigma; /* Gaussian source envelope, sigma as a fraction of the sweep */
} sim_optics;

void sim_optics_default(sim_optics *o);

/* Synthesises one frame (geometry g) of sample `sample` into dst, in the
 * ring's sample type: index `variant` changes speckle, noise and a small
 * axial motion.  Uses OpenMP over A-scans. */
oct_err sim_frame(const oct_geometry *g, const sim_optics *o, int sample, uint64_t seed,
                  uint32_t variant, void *dst, oct_error *e);

/* R mirror spectra (R x M floats): mask r is a mirror at the path
 * difference that CFD shows at depth bin r * (M/2) / R. */
oct_err sim_masks(uint32_t samples, uint32_t count, const sim_optics *o, uint64_t seed,
                  float *out, oct_error *e);

/* CMS calibration (Rivet et al. 2016): K mirror spectra (K x M floats), the
 * mirror of spectrum i at the path difference that linearised CFD shows at
 * depth bin depths[i] (the unit of the profile's cms.depths and grid). */
oct_err sim_cms_cal(uint32_t samples, const double *depths, uint32_t count, const sim_optics *o,
                    uint64_t seed, float *out, oct_error *e);

/* The true k-linearisation of the simulated k map: M positions p[n] (input
 * samples) with u(p[n]/M) = span * n/M, so that resampling at p makes the
 * fringe of depth bin b exactly b cycles over M samples. */
void sim_klin_positions(uint32_t samples, const sim_optics *o, double *pos);

/* The simulated dispersion in the engine's convention for the linearised
 * spectrum: theta = a2 (n/M - k0)^2 + a3 (n/M - k0)^3 (a3 = 0: the model's
 * phase is quadratic in u; k0 is its exact centre, 0.5 - 1/(2M)). */
void sim_dispersion_engine(uint32_t samples, const sim_optics *o, double *a2, double *a3,
                           double *k0);

#endif
