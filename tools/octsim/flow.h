/* flow.h - octsim's flow phantom (issue 18): repeated B-scans of a static
 * layered sample with a vessel (tube) whose scatterers move between repeats,
 * and the known ground truth, so that an angiogram can be scored.
 *
 * Also linked into test_angio and octbench (Makefile), hence self-contained
 * (libc, libm, FFTW, oct_error). */
#ifndef OCTSIM_FLOW_H
#define OCTSIM_FLOW_H

#include <stdint.h>

#include "oct_types.h"

typedef struct sim_flow {
    uint32_t samples;     /* M */
    uint32_t ascans;      /* N: A-scans per B-scan (x) */
    uint32_t positions;   /* G: B-scan positions (y); the frame has L = G*R lines */
    uint32_t repeats;     /* R >= 1: B-scans per position, line l = g*R + r */
    uint32_t sample_type; /* OCT_SAMPLE_U16 (12-bit ADC) or OCT_SAMPLE_F32 */
    double speed;         /* vessel scatterer displacement between repeats, in beam
                             widths (the speckle's correlation length); 0 = no flow */
    double vessel_x;      /* vessel centre, x as a fraction of N at the first position */
    double vessel_tilt;   /* x drift of the centre over the G positions (fraction of N) */
    double vessel_z;      /* centre depth, fraction of D = M/2 + 1 */
    double vessel_rx;     /* radius across A-scans (A-scans) */
    double vessel_rz;     /* radius in depth (CFD bins) */
    double noise;         /* read-noise rms in counts (12-bit scale) */
    double shot;          /* shot noise: rms = shot * sqrt(counts) */
    double motion;        /* bulk axial motion: repeat r lies r * motion CFD bins deeper
                             (the whole sample; the truth is that of repeat 0) */
    uint64_t seed;
} sim_flow;

/* Defaults for M x N x G x R: speed 1.5, vessel at x 0.45 (tilt 0.15), z 0.4,
 * radii 0.06 N and 0.04 D, noise 2 counts, shot 0.5, u16, seed 1. */
void sim_flow_default(sim_flow *f, uint32_t samples, uint32_t ascans, uint32_t positions,
                      uint32_t repeats);

/* Labels of the ground truth, [G][N][D] u8 */
enum { SIM_FLOW_EMPTY = 0, SIM_FLOW_TISSUE = 1, SIM_FLOW_VESSEL = 2 };

/* Writes the frame (G*R lines x N x M of sample_type, linear in k, no
 * dispersion: CFD shows depth bin b at b) into frame, and, if labels is not
 * NULL, the truth [G][N][D] (D = M/2 + 1).  OpenMP over A-scans. */
oct_err sim_flow_frame(const sim_flow *f, void *frame, uint8_t *labels, oct_error *e);

/* The depth slab [d0, d1) that holds the vessel with a margin, inside the tissue. */
void sim_flow_slab(const sim_flow *f, uint32_t *d0, uint32_t *d1);

/* Scores a metric volume V [G][N][D] against the labels: mean in the vessel /
 * mean in static tissue (ratio), and the contrast-to-noise ratio of the
 * en-face maximum over [d0, d1) (slab_max), vessel pixels = columns with a
 * vessel voxel in the slab, background = the others:
 *     CNR = (mu_v - mu_b) / s_b
 * (the form of Jia et al. 2012's decorrelation SNR); also with the pooled
 * deviation sqrt(s_v^2 + s_b^2), and the CNR of the en-face mean (slab_mean). */
typedef struct sim_flow_score {
    double vessel_mean, tissue_mean, ratio;
    double enface_vessel_mean, enface_bg_mean, enface_vessel_sd, enface_bg_sd, cnr;
    double cnr_pooled; /* (mu_v - mu_b) / sqrt(s_v^2 + s_b^2) */
    double cnr_mean;   /* (mu_v - mu_b) / s_b of the en-face mean over the slab */
} sim_flow_score;
void sim_flow_evaluate(const uint8_t *labels, const float *V, uint32_t G, uint32_t N, uint32_t D,
                       uint32_t d0, uint32_t d1, sim_flow_score *s);

#endif
