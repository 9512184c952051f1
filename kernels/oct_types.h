/* oct_types.h - error codes and error details shared by every octd library.
 *
 * Every fallible function returns an oct_err and, where the caller passes a
 * non-NULL oct_error, fills its text with what exactly was wrong (file, line,
 * key, sizes).  oct_strerror() names the code; oct_error.msg says the detail.
 *
 * The definitions live in ipc/oct_ipc_types.h: the public IPC header must
 * stand alone for acquirers (`cc -Iipc`), and the engine shares its types.
 */
#ifndef OCT_TYPES_FWD_H
#define OCT_TYPES_FWD_H
#include "oct_ipc_types.h"
#endif
