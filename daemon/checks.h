/* checks.h - octd's checks that need no geometry: control values before a
 * ring (and so the number of samples M) is known, and the profile's data
 * files before their sizes can be compared with R x M. */
#ifndef OCTD_CHECKS_H
#define OCTD_CHECKS_H

#include "oct_config.h"
#include "oct_engine.h"

/* Every rule of the engine's validation (oct_params_check) that does not
 * need the geometry, with the engine's own messages; the rules that do need
 * it are checked as far as any allowed geometry permits (F >= 0, W1 <= W2,
 * |W| < OCT_SAMPLES_MAX/2, cross-section indices >= 0).  Masks, reference,
 * k-linearisation positions and the CMS calibration count as loaded when the
 * profile names them (their files are checked at start by
 * octd_profile_files_check).  Values that pass may still be clamped to the
 * ring's geometry when it appears (logged, written back). */
oct_err octd_params_check_nogeom(const oct_params *p, const oct_profile *prof, oct_error *e);

/* Each data file the profile names (msi.masks.file, background.reference,
 * klin.positions, cms.calibration) exists, is a readable regular file and
 * parses: a .npy header and data that fit the file, or a raw file whose
 * size is a whole number of elements (and of the declared rows).  Also the
 * files the chosen methods / background need are named.  Errors name the
 * profile, the key and the file. */
oct_err octd_profile_files_check(const oct_profile *prof, oct_error *e);

#endif
