#!/bin/bash
# demo.sh - `make demo`: octsim (a simulated layered sample, volume frames)
# -> octd (CUDA when a GPU is there, else the CPU) -> octgrab saving a few
# images of every topic into out/demo/images/.  Private ring/block names and
# an ipc:// endpoint, so it does not disturb an installed octd; everything
# it started is stopped on exit.   BIN, PYTHON from make; DEMO_SECONDS.
set -u
cd "$(dirname "$0")/../.." || exit 1
BIN=${BIN:-bin}
OUT=${DEMO_OUT:-out/demo}
for p in octd octsim octgrab octctl; do
    [ -x "$BIN/$p" ] || { echo "demo: $BIN/$p is missing (make progs)" >&2; exit 1; }
done
rm -rf "$OUT"
mkdir -p "$OUT/images" "$OUT/saved" || exit 1
OUT=$(cd "$OUT" && pwd)
N=/octd-demo-$$
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
    rm -f "/dev/shm$N-frames" "/dev/shm$N-control" "/dev/shm$N-status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

M=1024 A=128 L=96 R=256
echo "demo: MSI masks ($R x $M) -> $OUT/masks.npy"
"$BIN/octsim" masks --samples $M --count $R --output "$OUT/masks.npy" || exit 1
cat >"$OUT/profile.yaml" <<EOT
# demo profile: a ${L}x${A}x${M} volume, both methods, log scale
geometry: {samples: $M, ascans: $A, lines: $L, sample_type: u16, sample_shift: 0}
methods: [cfd, msi]
window: {type: hann}
freq_cutoff: 8
msi:
  masks: {file: masks.npy, count: $R, normalize: true}
  lag_window: [-4, 4]
enface: {start: 40, step: 20, count: 8}
xsec: {h_index: $((L / 2)), v_index: $((A / 2))}
scale: log
display:
  bscan:    {gsc: 1.0, contrast: 5.0, brightness: -190.0}
  enface:   {gsc: 1.0, contrast: 5.0, brightness: -175.0}
  confocal: {gsc: 1.0, contrast: 8.0, brightness: -520.0}
products: [enface, confocal, xsec_h, xsec_v, f32]
EOT
cat >"$OUT/octd.ini" <<EOT
[engine]
backend = auto
[ring]
frames = $N-frames
control = $N-control
status = $N-status
[publish]
endpoint = ipc://$OUT/octd.sock
[profile]
path = $OUT/profile.yaml
[save]
directory = $OUT/saved
EOT
"$BIN/octd" --config "$OUT/octd.ini" 2>"$OUT/octd.log" &
PIDS+=($!)
"$BIN/octsim" --ring "$N-frames" --samples $M --ascans $A --lines $L --rate $((A * L * 5)) \
    --sample layered --quiet 2>"$OUT/octsim.log" &
PIDS+=($!)
echo "demo: octsim -> octd ($N-*) -> octgrab, endpoint ipc://$OUT/octd.sock"
"$BIN/octgrab" --endpoint "ipc://$OUT/octd.sock" --count 40 --save-max 2 --timeout 30 \
    --output "$OUT/images" --quiet
rc=$?
"$BIN/octctl" --control "$N-control" --status "$N-status" status | \
    grep -E '^(state|backend|device|frames_processed|images_published|last_latency)' | sed 's/^/  /'
echo
if [ $rc -ne 0 ] || ! ls "$OUT"/images/*.png >/dev/null 2>&1; then
    echo "demo: no images arrived; logs: $OUT/octd.log $OUT/octsim.log" >&2
    tail -5 "$OUT/octd.log" >&2
    exit 1
fi
echo "demo: $(ls "$OUT"/images/*.png | wc -l) PNG and $(ls "$OUT"/images/*.npy 2>/dev/null | wc -l) float32 .npy images in $OUT/images/"
echo "      e.g. $(ls "$OUT"/images/enface_msi_*.png | head -1)"
echo "           $(ls "$OUT"/images/xsec_h_cfd_*.png | head -1)"
echo "      logs: $OUT/octd.log; configuration: $OUT/octd.ini, $OUT/profile.yaml"
