#!/bin/bash
# valgrind.sh [--short] - valgrind memcheck of the CPU path (issue 8.4):
#  1. octproc --backend cpu, cfd+msi, on a B-scan and on a volume frame with
#     every product (f32 too)
#  2. a short octd session (CPU backend) under memcheck: octsim -> octd ->
#     octgrab, a control change, snapshot / review / save raw / save images,
#     a SIGHUP reload, then SIGTERM
# Each run: --leak-check=full, definite and indirect leaks and every memory
# error are failures (--error-exitcode); suppressions for library internals
# are in tools/build/valgrind.supp.  --short: smaller frames and a shorter
# session (tests/e2e_valgrind.sh).  Logs in $OUT (default: a temp dir, kept
# on failure).  Exit 0 clean, 1 errors, 77 valgrind or a program missing.
set -u
cd "$(dirname "$0")/../.." || exit 1
BIN=${BIN:-bin}
PYTHON=${PYTHON:-/usr/bin/python3}
SHORT=0
[ "${1:-}" = --short ] && SHORT=1
command -v valgrind >/dev/null || { echo "SKIP valgrind: valgrind is not installed (tools/build/deps.sh)"; exit 77; }
for p in octd octsim octctl octgrab octproc; do
    [ -x "$BIN/$p" ] || { echo "SKIP valgrind: $BIN/$p not built"; exit 77; }
done
"$PYTHON" -c 'import numpy' 2>/dev/null || { echo "SKIP valgrind: no numpy for $PYTHON"; exit 77; }
OUT=${OUT:-$(mktemp -d /tmp/octd-valgrind.XXXXXX)}
mkdir -p "$OUT"
N=/octvg$$
OCTD="" SIM=""
cleanup() {
    for p in $SIM $OCTD; do kill "$p" 2>/dev/null; done
    for p in $SIM $OCTD; do wait "$p" 2>/dev/null; done
    rm -f /dev/shm"$N"-*
}
trap cleanup EXIT
# valgrind serialises threads: --short uses one, the full run two (the
# OpenMP / FFTW thread paths).
THREADS=$((2 - SHORT))
export OMP_NUM_THREADS=$THREADS
VG=(valgrind --tool=memcheck --error-exitcode=1 --leak-check=full
    --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect
    --track-origins=yes --num-callers=30 --gen-suppressions=all
    --suppressions=tools/build/valgrind.supp)
errors=0
# check_log NAME LOG RC: the summary must say 0 errors
check_log() {
    local sum
    sum=$(grep -E '== ERROR SUMMARY' "$2" | tail -1 | sed 's/.*ERROR SUMMARY: //')
    local leaks
    leaks=$(grep -E '(definitely|indirectly) lost:' "$2" | sed 's/^==[0-9]*== *//' | tr '\n' ' ')
    if [ "$3" = 0 ] && [ "${sum%% *}" = 0 ]; then
        echo "ok   $1: ${sum:-no summary} ${leaks:+($leaks)}"
    else
        echo "FAIL $1: exit $3, ${sum:-no summary}; log $2"
        grep -E '^==[0-9]+== (Invalid|Conditional|Use of|Syscall|Mismatched|Source and|[0-9,]+ bytes in)|^==[0-9]+==    (at|by) ' \
            "$2" | head -40
        [ -f "${2%.vg}.log" ] && tail -3 "${2%.vg}.log"
        errors=$((errors + 1))
    fi
}

# ---- data -------------------------------------------------------------------------
if [ $SHORT = 1 ]; then M=128 A=32 VN=16 VL=8 R=8 SECS=3; else M=512 A=128 VN=48 VL=24 R=32 SECS=6; fi
"$PYTHON" - "$OUT" $M $A $VN $VL $R <<'EOF' || { echo "FAIL: test data"; exit 1; }
import sys, numpy as np
out, M, A, VN, VL, R = sys.argv[1], *map(int, sys.argv[2:])
rng = np.random.default_rng(8)
n = np.arange(M)
def spectra(k):
    d = rng.integers(4, M // 2 - 4, size=(k, 1))
    return 2000 + 600 * np.cos(2 * np.pi * d * n / M) + rng.normal(0, 20, (k, M))
np.save(f"{out}/bscan.npy", spectra(A).clip(0, 65535).astype(np.uint16).reshape(1, A, M))
np.save(f"{out}/volume.npy", spectra(VN * VL).astype(np.float32).reshape(VL, VN, M))
np.save(f"{out}/masks.npy", np.stack([1000 * np.cos(2 * np.pi * (3 + 2 * r) * n / M)
                                      for r in range(R)]).astype(np.float32))
EOF
cat >"$OUT/profile.yaml" <<EOF
methods: [cfd, msi]
window: {type: hann}
freq_cutoff: 2
background: {mode: frame_mean}
msi:
  masks: {file: masks.npy, count: $R}
  lag_window: [-2, 2]
enface: {start: 2, step: 2, count: 3}
xsec: {h_index: 0, v_index: 1}
scale: log
products: [bscan, enface, confocal, xsec_h, xsec_v, volume, f32]
EOF

# ---- 1. octproc -------------------------------------------------------------------
for f in bscan volume; do
    "${VG[@]}" --log-file="$OUT/octproc_$f.vg" "$BIN/octproc" --profile "$OUT/profile.yaml" \
        --input "$OUT/$f.npy" --backend cpu --threads $THREADS --output "$OUT/proc_$f" >"$OUT/octproc_$f.log" 2>&1
    check_log "octproc $f (cfd+msi, every product)" "$OUT/octproc_$f.vg" $?
done

# ---- 2. an octd session -----------------------------------------------------------
mkdir -p "$OUT/save"
cat >"$OUT/octd.ini" <<EOF
[engine]
backend = cpu
threads = $THREADS
[ring]
frames = $N-frames
control = $N-control
status = $N-status
[publish]
endpoint = ipc://$OUT/pub
[profile]
path = $OUT/profile.yaml
[save]
directory = $OUT/save
EOF
sed -i 's/products: .*/products: [bscan, f32]/' "$OUT/profile.yaml"
CTL=("$BIN/octctl" --control "$N-control" --status "$N-status" --timeout 20)
st() { "${CTL[@]}" status 2>/dev/null | sed -n "s/^$1=//p"; }
wait_for() {
    local end=$((SECONDS + $1))
    while ! eval "$2"; do
        [ $SECONDS -ge $end ] && return 1
        sleep 0.1
    done
}
"${VG[@]}" --log-file="$OUT/octd.vg" "$BIN/octd" --config "$OUT/octd.ini" 2>"$OUT/octd.log" &
OCTD=$!
"$BIN/octsim" --ring "$N-frames" --samples $M --ascans $A --lines 1 --rate $((A * 20)) --quiet &
SIM=$!
session_ok=1
if wait_for 60 '[ "$(st frames_processed)" -gt 2 ] 2>/dev/null'; then
    "$BIN/octgrab" --endpoint "ipc://$OUT/pub" --topic bscan/ --count 4 --timeout 20 --quiet \
        >"$OUT/octgrab.txt" 2>&1 || { echo "FAIL octd session: octgrab got no images"; session_ok=0; }
    "${CTL[@]}" set window=tukey:0.5 lag_window=-3,3 >/dev/null || { echo "FAIL: set"; session_ok=0; }
    "${CTL[@]}" snapshot >/dev/null && "${CTL[@]}" review >/dev/null &&
        "${CTL[@]}" save raw >/dev/null && "${CTL[@]}" save images >/dev/null &&
        "${CTL[@]}" online >/dev/null || { echo "FAIL: snapshot/review/save"; session_ok=0; }
    kill -HUP $OCTD
    sleep $SECS
else
    echo "FAIL octd session: no frames processed in 60 s under valgrind"
    session_ok=0
fi
kill $SIM; wait $SIM 2>/dev/null; SIM=""
kill -TERM $OCTD
wait $OCTD
rc=$?
OCTD=""
[ $session_ok = 1 ] || errors=$((errors + 1))
check_log "octd session (octsim -> octd -> octgrab, set, snapshot/review/save raw+images, SIGHUP, SIGTERM)" \
    "$OUT/octd.vg" $rc
if [ $errors = 0 ]; then
    [ -n "${KEEP:-}" ] && echo "logs in $OUT" || rm -rf "$OUT"
    exit 0
fi
echo "valgrind: $errors failing run(s); logs kept in $OUT"
exit 1
