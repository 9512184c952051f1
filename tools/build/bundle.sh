#!/bin/bash
# bundle.sh - a relocatable tree $BUILD/bundle for a machine without the build
# dependencies (the GPU machine, a lab workstation without internet):
#   bin/    every program of $BIN
#   tests/  the test programs of $BUILD/tests (normal build, with CUDA)
#   lib/    every shared library they need that is neither glibc's nor
#           CUDA's (cudart/cufft/cublas come from the target's CUDA_HOME,
#           libstdc++/libgcc_s from its system: newer ones are compatible)
# Binaries get the rpath $ORIGIN/../lib (patchelf) before CUDA_HOME/lib64;
# without patchelf, run them with LD_LIBRARY_PATH=<bundle>/lib.
set -euo pipefail
BUILD=${BUILD:-build}
BIN=${BIN:-bin}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
OUT="$BUILD/bundle"
rm -rf "$OUT"
mkdir -p "$OUT/bin" "$OUT/tests" "$OUT/lib"

progs=()
for f in "$BIN"/*; do [ -f "$f" ] && [ -x "$f" ] && cp -p "$f" "$OUT/bin/" && progs+=("$OUT/bin/$(basename "$f")"); done
for f in "$BUILD"/tests/test_*; do [ -f "$f" ] && [ -x "$f" ] && cp -p "$f" "$OUT/tests/" && progs+=("$OUT/tests/$(basename "$f")"); done
[ ${#progs[@]} -gt 0 ] || { echo "bundle: no programs in $BIN or $BUILD/tests: run make first" >&2; exit 1; }
# test data and scripts the tests read at run time
[ -d tests ] && mkdir -p "$OUT/tests/scripts" && cp -p tests/*.sh "$OUT/tests/scripts/" 2>/dev/null || true

skip_lib() {
    case "$1" in
    linux-vdso*|ld-linux*|libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|libresolv.so*|libutil.so*) return 0 ;;
    libstdc++.so*|libgcc_s.so*) return 0 ;;
    libcuda.so*|libcudart.so*|libcufft*.so*|libcublas*.so*|libnvidia*) return 0 ;;
    esac
    return 1
}
for p in "${progs[@]}"; do
    ldd "$p" 2>/dev/null | awk '/=> \// {print $1, $3}' | while read -r name path; do
        skip_lib "$name" && continue
        [ -e "$OUT/lib/$name" ] || cp -L "$path" "$OUT/lib/$name"
    done
done
# libraries' own dependencies (e.g. openblas -> gfortran -> quadmath)
for i in 1 2 3; do
    for l in "$OUT"/lib/*; do
        ldd "$l" 2>/dev/null | awk '/=> \// {print $1, $3}' | while read -r name path; do
            skip_lib "$name" && continue
            [ -e "$OUT/lib/$name" ] || cp -L "$path" "$OUT/lib/$name"
        done
    done
done
chmod u+w "$OUT"/lib/* 2>/dev/null || true
if command -v patchelf >/dev/null 2>&1; then
    for p in "${progs[@]}"; do patchelf --set-rpath "\$ORIGIN/../lib:$CUDA_HOME/lib64" "$p"; done
    for l in "$OUT"/lib/*; do patchelf --set-rpath '$ORIGIN' "$l" 2>/dev/null || true; done
    echo "bundle: rpath \$ORIGIN/../lib:$CUDA_HOME/lib64 set"
else
    echo "bundle: patchelf not found: run with LD_LIBRARY_PATH=$OUT/lib" >&2
fi
cp -p tools/build/gpu_run.sh "$OUT/" 2>/dev/null || true
echo "bundle: $OUT: $(ls "$OUT/bin" | wc -l) programs, $(ls "$OUT/tests" | grep -c '^test_') tests, $(ls "$OUT/lib" | wc -l) libraries, $(du -sh "$OUT" | cut -f1)"
