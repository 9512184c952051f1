#!/bin/bash
# gpu_round.sh NEW [OLD] - the GPU checks of a change in one call on the GPU
# machine: NEW and OLD are bundles (`make bundle`, build/cuda/bundle) of the
# change and of the code before it.  Steps (GPU_STEPS, default "info test
# bench e2e"):
#   info    the device
#   test    NEW's CUDA suite (float64 reference, CPU = GPU), the engine API and
#           planner tests on CUDA, e2e_issue7 and e2e_frames with BACKEND=cuda
#   bench   octbench engine workloads, OLD and NEW interleaved (ROUNDS x), and
#           a table of NEW / OLD device times
#   e2e     octbench --e2e volume and B-scan, OLD and NEW interleaved
#   hostile NEW: unpaced rate / p99 with stalled and churning subscribers
#   commit  NEW: --producer both (octd's own ceiling next to the copying producer)
#   cupy    NEW against the CuPy anchor (tools/octbench/cupy_compare.sh)
# Logs and JSON go to $OUT.  Usage there: tools/build/gpu_round.sh .bundle/new .bundle/base
set -uo pipefail
NEW=$(cd "${1:?usage: gpu_round.sh NEW [OLD]}" && pwd)
OLD=${2:+$(cd "$2" && pwd)}
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
HERE=$(cd "$(dirname "$0")/../.." && pwd)
CUDA_LIB=${CUDA_HOME:-/usr/local/cuda}/lib64
PY=${PYTHON:-python3}
ROUNDS=${ROUNDS:-2}
log() { echo "=== $* ($(date +%T))"; }
use() { export LD_LIBRARY_PATH="$1/lib:$CUDA_LIB"; }
WORK=${WORKLOADS:-"bscan-cfd bscan-msi volume-cfd volume-msi volume-cfd+msi msi-volume-full bscan-cfd-klin-disp volume-cms volume-cfd-rolling volume-cfd-fpn"}

for step in ${GPU_STEPS:-info test bench e2e}; do case $step in
info)
    log info
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | tee "$OUT/info.log"
    ;;
test)
    use "$NEW"
    log test_cuda_engine
    timeout 300 "$NEW/tests/test_cuda_engine" >"$OUT/test_cuda.log" 2>&1
    echo "test_cuda_engine exit $?"; grep -E '^[0-9]+%|SKIP' "$OUT/test_cuda.log"; grep -E ':[EF]:' "$OUT/test_cuda.log" | head -20
    for t in test_engine_api test_engine_plan; do
        [ -x "$NEW/tests/$t" ] || continue
        OCT_TEST_BACKEND=cuda timeout 200 "$NEW/tests/$t" >"$OUT/${t}_cuda.log" 2>&1
        echo "$t (cuda) exit $?"; grep -E '^[0-9]+%|SKIP' "$OUT/${t}_cuda.log"; grep -E ':[EF]:' "$OUT/${t}_cuda.log" | head -10
    done
    for s in ${E2E_SCRIPTS:-e2e_issue7 e2e_frames}; do
        log "$s BACKEND=cuda"
        (cd "$HERE" && BIN="$NEW/bin" BACKEND=cuda PYTHON=$PY timeout 240 bash "tests/$s.sh") >"$OUT/$s.log" 2>&1
        echo "$s exit $?"; grep -E '^FAIL|^ok' "$OUT/$s.log" | tail -4
    done
    ;;
bench)
    log "engine workloads, ${OLD:+OLD and }NEW interleaved, $ROUNDS rounds"
    rm -f "$OUT/bench_new.json" "$OUT/bench_old.json"
    for r in $(seq "$ROUNDS"); do for w in $WORK; do
        for side in ${OLD:+old} new; do
            b=$NEW; [ $side = old ] && b=$OLD
            use "$b"
            OCTBENCH_STREAM=0 timeout 120 "$b/bin/octbench" --backend cuda --warmup 3 --reps ${REPS:-20} --no-seed \
                --only "$w" --json "$OUT/part.json" >/dev/null 2>&1 && cat "$OUT/part.json" >>"$OUT/bench_$side.json"
        done
    done; done
    $PY - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
def load(side):
    rows = {}
    p = os.path.join(out, f"bench_{side}.json")
    if os.path.exists(p):
        for line in open(p):
            r = json.loads(line)
            if r.get("part") == "engine":
                rows.setdefault(r["workload"], []).append(r["device_ms"])
    return rows
new, old = load("new"), load("old")
print(f"{'workload':22s} {'old ms':>9s} {'new ms':>9s} {'new/old':>8s}   (best of rounds, median of reps)")
for w, v in new.items():
    o = min(old[w]) if w in old else None
    n = min(v)
    print(f"{w:22s} {o if o else float('nan'):9.3f} {n:9.3f} {n / o if o else float('nan'):8.3f}")
PY
    ;;
e2e)
    for r in $(seq "$ROUNDS"); do for w in volume bscan; do
        for side in ${OLD:+old} new; do
            b=$NEW; [ $side = old ] && b=$OLD
            use "$b"
            log "e2e $w $side round $r"
            timeout 120 "$b/bin/octbench" --e2e --backend cuda --only $w --seconds ${E2E_SECONDS:-3} \
                --json "$OUT/e2e_${w}_${side}_$r.json" >"$OUT/e2e_${w}_${side}_$r.log" 2>&1
            grep -E 'loss-free|lost|p99' "$OUT/e2e_${w}_${side}_$r.log" | tail -3
        done
    done; done
    ;;
hostile)
    use "$NEW"
    for w in bscan volume; do
        log "hostile $w"
        timeout 200 "$NEW/bin/octbench" --e2e --backend cuda --only $w --seconds 3 --producer commit \
            --hostile ${HOSTILE:-0:0,1:0,50:0,200:0,0:200,50:100} --json "$OUT/hostile_$w.json" 2>&1 | tee "$OUT/hostile_$w.log" | tail -12
    done
    ;;
commit)
    use "$NEW"
    log "producer copy vs commit"
    timeout 200 "$NEW/bin/octbench" --e2e --backend cuda --producer both --seconds 3 --json "$OUT/producers.json" 2>&1 | tee "$OUT/producers.log" | tail -12
    ;;
cupy)
    log "CuPy anchor"
    "$HERE/tools/octbench/cupy_compare.sh" "$NEW" "$OUT/cupy" 2>&1 | tail -10
    ;;
esac; done
log done
