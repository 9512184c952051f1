/* register_live.h - live volume registration in octd (SPEC 10.4, issue 17.3).
 *
 * `octctl reference set|clear|auto` (OCT_CMD_REFERENCE, cmd_flags enum
 * oct_reference_op) picks a reference volume; then every volume frame is
 * registered against it (oct_register.h), per method, and octd publishes
 *   motion/<method>         f32 [L][4]: dx, dy, dz, valid (NaN shifts where invalid)
 *   enface_reg/<method>     [Q][L][N]  en-face slices of the registered average
 *   confocal_reg/<method>   [L][N]     their sum (SPEC 2.4 confocal)
 *   slab_mean_reg/<method>  [L][N]     mean over [slab_start, slab_end)
 * (u8 gray levels of the en-face/confocal classes; "/f32" copies when the
 * products ask for float32; NaN, where no registered data landed, is gray 0).
 * The averages are of the registered planes (oct_register_planes: made
 * from each volume and its shifts, never a registered volume), per pixel
 * the mean of up to reg.average registered volumes: they restart after
 * reg.average volumes, a new reference, new planes (en-face or slab
 * values) or a new geometry; the header's "averaged" says how many they hold.
 *
 * The registration needs the [L][N][D] float intensities: while a reference
 * is set or being chosen, the engine makes the `volume` product with f32
 * (octd_reglive_products); the volume is published only when the operator
 * asked for it, and float32 copies only when asked for.  A worker thread
 * registers it where the engine left it (the frame's product buffer, held
 * until then) while the engine makes the next frames; W workers ([engine]
 * registration_workers, 0: CUDA 4, CPU 1) register concurrently and make
 * the planes in the volumes' order; up to 2W volumes wait or run, one more
 * is skipped for registration (status registration_skipped;
 * registration_volumes counts those registered and published).
 *
 * All calls from main.c's one thread (the frame loop). */
#ifndef OCTD_REGISTER_LIVE_H
#define OCTD_REGISTER_LIVE_H

#include <stddef.h>
#include <stdint.h>

#include "oct_config.h"
#include "oct_engine.h"

struct octd;
struct octd_frame_meta;
struct octd_slot;

/* Volumes scored by `reference auto` (the sharpest of them becomes the reference). */
#define OCTD_REGLIVE_AUTO_K 8
/* Volumes held for the workers: per worker one registering, one waiting. */
#define OCTD_REGLIVE_JOBS (2 * OCT_REG_WORKERS_MAX)

/* Product bits the engine must make in addition to the operator's (0 when idle). */
uint32_t octd_reglive_products(const struct octd *d);

/* OCT_CMD_REFERENCE: returns an OCT_CMDRES_* with its message in msg. */
uint32_t octd_reglive_command(struct octd *d, uint32_t op, char *msg, size_t len);

/* One processed frame (online or review), after its products were sent:
 * publishes the registrations finished meanwhile, takes/scores its volume as
 * the reference or queues it for registration (a reference on slot). */
void octd_reglive_frame(struct octd *d, struct octd_slot *slot, const struct octd_frame_meta *m);

/* Publishes the registrations finished meanwhile (main.c's periodic work). */
void octd_reglive_poll(struct octd *d);

/* Waits for the queued registrations and publishes them (before the frame
 * path drains: nothing holds a product buffer afterwards). */
void octd_reglive_drain(struct octd *d);

void octd_reglive_free(struct octd *d);

#endif
