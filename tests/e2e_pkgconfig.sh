#!/bin/bash
# e2e_pkgconfig.sh - liboctipc as an acquisition program sees it, without systemd:
#  - tools/build/install.sh into a temporary DESTDIR (PREFIX=/opt/octd);
#  - `pkg-config --cflags --libs octipc` (PKG_CONFIG_PATH into the DESTDIR,
#    PKG_CONFIG_SYSROOT_DIR so its paths point there) builds a tiny producer
#    against the installed header, which runs: it creates a ring, commits
#    frames, reads one back through the consumer API, and closes the ring;
#  - the installed oct_ipc.h compiles as C++ (g++ -std=c++11, its ABI static
#    asserts included) and a C++ program links against the library;
#  - from the build tree (issue 14.6): `cc -Iipc prod.c` compiles (the public
#    header stands alone: ipc/oct_ipc_types.h holds the types kernels/oct_types.h includes),
#    links with $BUILD/liboctipc.a, and with PKG_CONFIG_PATH=$BUILD against
#    octipc-uninstalled.pc and the versioned liboctipc.so.1.x (soname
#    liboctipc.so.1, .so.1 and .so links), running without LD_LIBRARY_PATH.
# Exit 0 pass, 77 skip (no pkg-config or C compiler), else fail.
set -u
BUILD=${BUILD:-build}
BIN=${BIN:-bin}
command -v pkg-config >/dev/null || { echo "SKIP e2e_pkgconfig: no pkg-config"; exit 77; }
CC=${CC:-cc}
command -v "$CC" >/dev/null || { echo "SKIP e2e_pkgconfig: no C compiler ($CC)"; exit 77; }
for p in octd octctl octgrab octsim octproc octbench; do
    [ -x "$BIN/$p" ] || { echo "SKIP e2e_pkgconfig: $BIN/$p not built (install.sh needs the programs)"; exit 77; }
done
T=$(mktemp -d /tmp/octd-e2e-pkgconfig.XXXXXX)
RING=/octpc-$$
trap 'rm -rf "$T"; rm -f /dev/shm$RING' EXIT
fail() { echo "FAIL: $*"; exit 1; }

. tests/helpers/install_destdir.sh
install_destdir "$T"
for f in opt/octd/include/octd/oct_ipc.h opt/octd/include/octd/oct_types.h \
         opt/octd/include/octd/oct_ipc_types.h opt/octd/lib/liboctipc.so opt/octd/lib/liboctipc.so.1 \
         opt/octd/lib/liboctipc.a opt/octd/lib/pkgconfig/octipc.pc; do
    [ -e "$R/$f" ] || fail "install: no $f"
done
export PKG_CONFIG_PATH="$R/opt/octd/lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$R"
pkg-config --exists octipc || fail "pkg-config does not find octipc"
[ "$(pkg-config --modversion octipc)" = 9.8.7 ] || fail "octipc version: $(pkg-config --modversion octipc)"
FLAGS=$(pkg-config --cflags --libs octipc) || fail "pkg-config --cflags --libs octipc"
echo "$FLAGS" | grep -q -- "-I$R/opt/octd/include/octd" || fail "cflags: $FLAGS"
echo "$FLAGS" | grep -q -- "-loctipc" || fail "libs: $FLAGS"
echo "ok   pkg-config octipc: $FLAGS"

cat >"$T/prod.c" <<'EOF'
#include <oct_ipc.h>
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv)
{
    oct_ring_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.geom.samples = 256; cfg.geom.ascans = 8; cfg.geom.lines = 1;
    cfg.geom.sample_type = OCT_SAMPLE_U16;
    cfg.slot_count = 4;
    oct_error e;
    oct_ring_producer *p;
    if (oct_ring_producer_create(&p, argv[1], &cfg, &e) != OCT_OK) { fprintf(stderr, "%s\n", e.msg); return 1; }
    oct_ring_consumer *c;
    if (oct_ring_consumer_open(&c, argv[1], &e) != OCT_OK) { fprintf(stderr, "%s\n", e.msg); return 1; }
    static uint16_t got[256 * 8];
    for (uint64_t n = 0; n < 3; n++) {
        uint16_t *f = (uint16_t *)oct_ring_producer_begin(p);
        for (int i = 0; i < 256 * 8; i++) f[i] = (uint16_t)(i + n);
        oct_ring_producer_commit(p, 100 + n, oct_time_realtime_ns());
        oct_frame_info info;
        if (oct_ring_consumer_next(c, OCT_POLICY_ALL, got, sizeof got, 1000, &info, &e) != OCT_OK) { fprintf(stderr, "%s\n", e.msg); return 1; }
        if (info.frame_id != 100 + n || got[7] != (uint16_t)(7 + n)) { fprintf(stderr, "wrong frame\n"); return 1; }
    }
    printf("abi=%u.%u write_seq=%llu\n", oct_ring_producer_header(p)->abi_major,
           oct_ring_producer_header(p)->abi_minor, (unsigned long long)oct_ring_producer_header(p)->write_seq);
    oct_ring_consumer_close(c);
    oct_ring_producer_close(p, argc > 2);
    return 0;
}
EOF
# shellcheck disable=SC2086
"$CC" -std=c11 -Wall -Wextra -Werror -o "$T/prod" "$T/prod.c" $FLAGS 2>"$T/cc.log" ||
    fail "a producer against the installed header + library does not build: $(head -5 "$T/cc.log")"
out=$(LD_LIBRARY_PATH="$R/opt/octd/lib" "$T/prod" "$RING" unlink) || fail "the producer does not run: $out"
[ "$out" = "abi=1.0 write_seq=3" ] || fail "producer output: $out"
[ ! -e /dev/shm$RING ] || fail "ring not removed"
echo "ok   a C producer built with pkg-config runs: $out"

# the installed header alone (no oct_types.h beside it) compiles
mkdir -p "$T/alone"
cp "$R/opt/octd/include/octd/oct_ipc.h" "$R/opt/octd/include/octd/oct_ipc_types.h" "$T/alone/"
"$CC" -std=c11 -Wall -Werror -fsyntax-only -I"$T/alone" "$T/prod.c" 2>"$T/cc.log" ||
    fail "oct_ipc.h + oct_ipc_types.h alone do not compile: $(head -5 "$T/cc.log")"
echo "ok   the installed oct_ipc.h stands alone (with oct_ipc_types.h only)"

# ---- from the build tree ----
grep -q '#include "oct_ipc_types.h"' kernels/oct_types.h ||
    fail "kernels/oct_types.h must take its definitions from ipc/oct_ipc_types.h"
echo "ok   kernels/oct_types.h includes ipc/oct_ipc_types.h (one definition)"
"$CC" -std=c11 -Wall -Wextra -Werror -Iipc -o "$T/prod_static" "$T/prod.c" "$BUILD/liboctipc.a" -lrt -pthread \
    2>"$T/cc.log" || fail "cc -Iipc prod.c $BUILD/liboctipc.a: $(head -5 "$T/cc.log")"
out=$("$T/prod_static" "$RING" unlink) || fail "the statically linked producer: $out"
echo "ok   cc -Iipc prod.c $BUILD/liboctipc.a builds and runs: $out"
for f in "$BUILD"/liboctipc.so.1.*.* "$BUILD/liboctipc.so.1" "$BUILD/liboctipc.so" "$BUILD/octipc-uninstalled.pc"; do
    [ -e "$f" ] || fail "build tree: no $f"
done
[ "$(readlink "$BUILD/liboctipc.so")" = liboctipc.so.1 ] || fail "$BUILD/liboctipc.so does not link to liboctipc.so.1"
soname=$(objdump -p "$BUILD/liboctipc.so" 2>/dev/null | awk '$1 == "SONAME" {print $2}')
[ "$soname" = liboctipc.so.1 ] || fail "soname of $BUILD/liboctipc.so: '$soname'"
FLAGS_U=$(PKG_CONFIG_PATH="$BUILD" PKG_CONFIG_SYSROOT_DIR= pkg-config --cflags --libs octipc) ||
    fail "PKG_CONFIG_PATH=$BUILD pkg-config octipc"
echo "$FLAGS_U" | grep -q -- "-I$(pwd)/ipc" || fail "uninstalled cflags: $FLAGS_U"
# shellcheck disable=SC2086
"$CC" -std=c11 -Wall -Wextra -Werror -o "$T/prod_u" "$T/prod.c" $FLAGS_U 2>"$T/cc.log" ||
    fail "a producer with octipc-uninstalled.pc does not build: $(head -5 "$T/cc.log")"
out=$(env -u LD_LIBRARY_PATH "$T/prod_u" "$RING" unlink) || fail "the producer built from the tree: $out"
objdump -p "$T/prod_u" | grep -q "NEEDED *liboctipc.so.1" || fail "prod_u does not need liboctipc.so.1"
echo "ok   PKG_CONFIG_PATH=$BUILD (octipc-uninstalled.pc): $FLAGS_U; runs: $out"

if command -v "${CXX:-g++}" >/dev/null; then
    CXX=${CXX:-g++}
    cp "$T/prod.c" "$T/prod.cpp"
    # shellcheck disable=SC2086
    "$CXX" -std=c++11 -Wall -Wextra -Werror -fsyntax-only $(pkg-config --cflags octipc) "$T/prod.cpp" \
        2>"$T/cxx.log" || fail "oct_ipc.h does not compile as C++11: $(head -5 "$T/cxx.log")"
    # shellcheck disable=SC2086
    "$CXX" -std=c++11 -o "$T/prodxx" "$T/prod.cpp" $FLAGS 2>"$T/cxx.log" ||
        fail "a C++ program does not link against liboctipc: $(head -5 "$T/cxx.log")"
    out=$(LD_LIBRARY_PATH="$R/opt/octd/lib" "$T/prodxx" "$RING" unlink) || fail "the C++ producer: $out"
    echo "ok   oct_ipc.h compiles as C++11 (g++ -std=c++11 -fsyntax-only) and links: $out"
else
    echo "note: no C++ compiler: the C++ check was not run"
fi
# the ABI static asserts are in the public header: every offset is checked there
n=$(grep -c "^OCT_ABI_ASSERT(" "$R/opt/octd/include/octd/oct_ipc.h")
[ "$n" -ge 90 ] || fail "only $n ABI static asserts in the installed oct_ipc.h"
echo "ok   installed oct_ipc.h carries $n ABI static asserts"
exit 0
