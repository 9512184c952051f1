/* oct_docs.h - where every program's --help points (issue 14.9): the
 * documents that ship with octd, installed by `make install` into
 * OCT_DOCDIR ($PREFIX/share/doc/octd, set by the Makefile), and the man
 * pages generated from --help. */
#ifndef OCT_DOCS_H
#define OCT_DOCS_H

#ifndef OCT_DOCDIR
#define OCT_DOCDIR "/usr/local/share/doc/octd"
#endif

#define OCT_DOCS_HINT                                                                          \
    "Documentation: man octd, octctl, octsim, octgrab, octproc, octbench, octweb; in " OCT_DOCDIR ":\n" \
    "  CONFIGURATION.md (octd.ini, the profile), PROTOCOL.md (shared memory, messages),\n"      \
    "  MATH.md (processing); in the source tree: config/, ipc/, kernels/, README.md.\n"

#endif
