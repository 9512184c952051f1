/* save.h - the save_raw and save_images commands (SPEC 4): files appear
 * atomically, and a failure leaves nothing behind. */
#ifndef OCTD_SAVE_H
#define OCTD_SAVE_H

#include <stddef.h>
#include <stdint.h>

#include "oct_config.h"
#include "oct_engine.h"
#include "oct_ipc.h"

typedef struct octd_saved_frame {
    const void *data;          /* the kept raw frame */
    oct_geometry geom;
    oct_frame_info info;
    const oct_control_values *values; /* control values in use */
    uint64_t params_gen;
    const oct_profile *profile;       /* for the mask / reference file names */
} octd_saved_frame;

/* Writes raw_<frame_id>_<UTC>.npy (L, N, M) of the sample type and its YAML
 * sidecar .yaml into dir.  *name gets the .npy's file name. */
oct_err octd_save_raw(const char *dir, const octd_saved_frame *f, char *name, size_t name_len,
                      oct_error *e);
/* Writes images_<frame_id>_<UTC>/ with one 8-bit PNG per image (en-face
 * stack: one per slice; volume: a u8 .npy), float32 .npy when present, and
 * params.yaml; built as a hidden temporary directory and renamed. */
oct_err octd_save_images(const char *dir, const octd_saved_frame *f, const oct_products *prod,
                         bool want_f32, char *name, size_t name_len, oct_error *e);

/* The YAML text (profile layout + frame description); returns its length,
 * cut (as snprintf) when cap is too small. */
size_t octd_sidecar_yaml(const octd_saved_frame *f, const char *file_name, char *buf, size_t cap);

#endif
