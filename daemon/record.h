/* record.h - full-rate recording into HDF5 (SPEC 10.5).
 *
 * The frame loop hands each frame (raw spectra when taken, its products
 * when published) to octd_record_take() / octd_record_frame(), which copy
 * them into one of a bounded set of preallocated buffers and return at
 * once, frames in flight on the engines too; a writer thread appends
 * the buffers to one HDF5 file, written aside (".NAME.part") and renamed
 * when complete.  When every buffer is still waiting for the disk the frame
 * is left out and counted (record_dropped): the frame loop never waits.
 *
 * File layout (count = frames in the file):
 *   /raw                [count][L][N][M] sample type, chunk = one frame
 *   /frame_id, /t_acq_ns [count] u64
 *   /products/<kind>/<method>       [count][shape...] u8 (the topic's gray image)
 *   /products/<kind>/<method>_f32   [count][shape...] f32 (the "/f32" topic)
 *   /control_changes/{index,frame_id,generation,values}: one row per control
 *        generation that took effect during the recording (index = the row
 *        of the first frame processed with it; values = "key=value" lines)
 *   attributes of /: geometry, profile (YAML text), control (values at
 *        start), octd_version, frames, dropped, stop_reason, start_utc
 * Disk full, a failed write or a removed directory stop the recording with a
 * reason; the datasets are cut to the last complete frame and the file is
 * closed (a small space reserve, freed on ENOSPC, lets HDF5 write its
 * metadata), so what remains is a valid file.
 */
#ifndef OCTD_RECORD_H
#define OCTD_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "octd.h"

/* OCT_CMD_RECORD / OCT_CMD_RECORD_STOP with the generation's arguments
 * (cmd_flags: OCT_RECORD_RAW | OCT_RECORD_PRODUCTS, 0 = raw; cmd_frames: 0 =
 * no limit; cmd_seconds: 0 = no limit).  Returns an oct_command_result and
 * the message for the status block. */
uint32_t octd_record_command(octd *d, uint32_t cmd, const oct_control_values *args, char *msg,
                             size_t msg_len);
/* The frame loop offers each frame it takes (its raw spectra, from the
 * ring slot or its copy, are copied now, while the engine works on them)
 * and then, once it is processed and published, its products; frames taken
 * but never published (torn, lost) are left out, and so is a frame taken
 * with data NULL (octd is behind the producer: counted as left out).
 * Neither call blocks on the disk or takes a lock. */
void octd_record_take(octd *d, const oct_geometry *geom, const oct_frame_info *info,
                      const void *data);
void octd_record_frame(octd *d, const oct_frame_info *info, const oct_products *prod);
/* Called from the loop: limits, status fields, joins a finished writer. */
void octd_record_poll(octd *d);
/* At exit (SIGTERM): ends the recording, waits for the file to be complete. */
void octd_record_shutdown(octd *d);

#endif
