#!/bin/bash
# e2e_valgrind.sh - a short valgrind memcheck of the CPU path (issue 8.4):
# tools/build/valgrind.sh --short (octproc cfd+msi on a B-scan and a volume,
# an octd session with saves, SIGHUP and SIGTERM; ~15 s).  It runs the
# CPU-only programs in $VG_BIN (make check builds them: valgrind-progs).
# Exit 0 clean, 77 skip (no valgrind / programs not built), else fail.
set -u
VG_BIN=${VG_BIN:-build/cpu/bin}
command -v valgrind >/dev/null || { echo "SKIP e2e_valgrind: valgrind is not installed (tools/build/deps.sh)"; exit 77; }
[ -x "$VG_BIN/octd" ] || { echo "SKIP e2e_valgrind: no CPU-only programs in $VG_BIN (make valgrind-progs)"; exit 77; }
BIN=$VG_BIN exec tools/build/valgrind.sh --short
