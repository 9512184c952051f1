/* engines.h - octd's engine planning (engines.c): set-ups for a geometry with
 * the profile's arrays, all engines of [engine] devices planned at once,
 * installed or destroyed, and values octd chose published as a control
 * generation.  octd_ensure_engine() is in octd.h. */
#ifndef OCTD_ENGINES_H
#define OCTD_ENGINES_H

#include <stdbool.h>
#include <stdint.h>

#include "oct_config.h"
#include "oct_engine.h"
#include "octd.h"

/* An engine set-up for geometry g with the profile's arrays (masks,
 * reference, k-lin positions, CMS calibration) from its loaded data. */
void octd_setup_for(oct_setup *s, const oct_profile *prof, const oct_profile_data *data,
                    const oct_geometry *g);
/* Loads the profile's arrays for M samples; on failure (masks made for
 * another M) goes on without them, saying so. */
void octd_load_data_for(const oct_profile *prof, uint32_t samples, oct_profile_data *data);
/* All engines of [engine] devices for geom: engine 0 with the wanted values
 * (clamped if needed), the others with the values it took, so every engine
 * runs the same generation.  On failure none is left. */
oct_err octd_plan_engines(const oct_daemon_config *cfg, const oct_profile *prof,
                          const oct_profile_data *data, const oct_geometry *geom,
                          const oct_params *want, oct_engine **engs, int *n_out,
                          oct_params *used, oct_error *e);
void octd_destroy_engines(octd *d);
/* Replaces d's engines by engs[0..n) (engine 0 becomes d->eng). */
void octd_install_engines(octd *d, oct_engine **engs, int n);
/* [engine] nice = auto for the installed engines (frame thread): -20 (or what
 * RLIMIT_NICE allows) with CPU engines only, octd's own nice otherwise. */
void octd_auto_nice(octd *d);
/* Writes values octd chose into the control block as a new generation;
 * expect != 0: only while the block still holds that generation (the one the
 * values replace), so that a writer's newer generation is never overwritten. */
void octd_publish_params(octd *d, const oct_params *p, const char *why, uint64_t expect);

#endif
