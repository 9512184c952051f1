#!/bin/bash
# tails.sh [BUNDLE_OR_BIN] - issue 19.2: latency tails of the volume end to
# end, plain and with k-linearisation + dispersion (octbench's
# volume-klin-disp: sinc 21, a2/a3, frame-mean background), each RUNS times
# (a fresh octd each) at RATE volumes/s with the commit producer; prints
# p50/p99/max per run, p99 over the runs, the distribution of all frames
# ("# tails" lines) and where the latency went per stage, from octd's header
# stamps ("# stages" lines); JSON lines in $OUT/tails.json.
#   RUNS (5), RATE (256), SECS (4: measured per run; not SECONDS, bash's own), PRODUCER (commit),
#   BACKEND (cuda), QUICK=1 (small geometries: a smoke test on the CPU),
#   ENGINE_KEYS (octd.ini [engine] keys, e.g. priority=50,lock_memory=yes), TAG
#   (a suffix of the log names, to keep runs with other keys apart).
# Usage: tools/octbench/tails.sh build/cuda/bundle      (GPU machine)
#        QUICK=1 BACKEND=cpu RATE=20 RUNS=2 tools/octbench/tails.sh bin
set -uo pipefail
B=$(cd "${1:-build/cuda/bundle}" && pwd)
BIN=$B
[ -x "$B/bin/octbench" ] && BIN=$B/bin
[ -d "$B/lib" ] && export LD_LIBRARY_PATH="$B/lib:${CUDA_HOME:-/usr/local/cuda}/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
RUNS=${RUNS:-5} RATE=${RATE:-256} SECONDS_PER_RUN=${SECS:-4}
ARGS=(--e2e --backend "${BACKEND:-cuda}" --producer "${PRODUCER:-commit}" --frame-rate "$RATE"
      --runs "$RUNS" --seconds "$SECONDS_PER_RUN" --json "$OUT/tails.part")
[ "${QUICK:-0}" = 1 ] && ARGS+=(--quick)
[ -n "${ENGINE_KEYS:-}" ] && ARGS+=(--engine-keys "$ENGINE_KEYS")
T=${TAG:-}
rm -f "$OUT/tails$T.json"
rc=0
for w in volume volume-klin-disp; do
    echo "=== tails $w: $RUNS runs at $RATE/s ($(date +%T))"
    timeout $((RUNS * 90)) "$BIN/octbench" "${ARGS[@]}" --only "$w" 2>&1 | tee "$OUT/tails_$w$T.log" ||
        rc=1
    cat "$OUT/tails.part" >>"$OUT/tails$T.json" 2>/dev/null
done
rm -f "$OUT/tails.part"
echo "=== summary${ENGINE_KEYS:+ ([engine] $ENGINE_KEYS)}"
grep -h -E "^# tails .*(p99 over|all [0-9]+ frames|bucket)|^# stages " "$OUT/tails_volume$T.log" \
    "$OUT/tails_volume-klin-disp$T.log"
exit $rc
