/* record.h - octgrab --record FILE.h5: the images received, per topic, in
 * one HDF5 file (the layout of octd's recordings, SPEC 10.5, for products):
 *   /products/<kind>/<method>[_f32]   [count][shape...] (attribute topic)
 *   /index/<kind>/<method>[_f32]/{frame_id,image_seq,t_acq_ns}  [count] u64
 * written aside (FILE.h5.part) and renamed when octgrab ends.  A message
 * whose shape differs from its topic's first is left out and counted. */
#ifndef OCTGRAB_RECORD_H
#define OCTGRAB_RECORD_H

#include <stdbool.h>
#include <stddef.h>

#include "jsonhdr.h"

typedef struct grab_rec grab_rec;

grab_rec *grab_rec_open(const char *path, const char *endpoint, char *err, size_t err_len);
/* false with a reason when the file could not take it (the caller stops). */
bool grab_rec_add(grab_rec *r, const grab_header *h, const void *data, char *err, size_t err_len);
/* Images written and left out (shape changes). */
void grab_rec_counts(const grab_rec *r, unsigned long long *written, unsigned long long *skipped);
/* Closes and renames into place; false with a reason (the .part is removed). */
bool grab_rec_close(grab_rec *r, char *err, size_t err_len);

#endif
