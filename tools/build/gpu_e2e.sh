#!/bin/bash
# gpu_e2e.sh [BUNDLE] - issue 6 on the GPU machine, in one call: device info,
# the CUDA engine tests, then `octbench --e2e` for the volume and the B-scan
# (CUDA), and the CPU backend for comparison when E2E_CPU=1 (E2E_TEST=0 skips
# the tests, E2E_LATEST=0 the policy-latest run).  Logs to $OUT.
# Usage there: tools/build/gpu_e2e.sh build/cuda/bundle
set -uo pipefail
B=${1:-build/cuda/bundle}
B=$(cd "$B" && pwd)
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$B/lib:${CUDA_HOME:-/usr/local/cuda}/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
SECONDS_PER_PHASE=${E2E_SECONDS:-3}
log() { echo "=== $* ($(date +%T))"; }

log info
{ nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.current,pcie.link.width.current --format=csv
  nproc; free -g | head -2; df -h /dev/shm; uname -r; } 2>&1 | tee "$OUT/info.log"
if [ "${E2E_TEST:-1}" = 1 ]; then
    log test_cuda_engine
    timeout 240 "$B/tests/test_cuda_engine" >"$OUT/test_cuda.log" 2>&1
    echo "test_cuda_engine exit $?"
    grep -E '^[0-9]+%|SKIP' "$OUT/test_cuda.log"; grep -E ':[EF]:' "$OUT/test_cuda.log" | head -20
fi
for w in volume bscan; do
    log "e2e $w cuda policy all"
    timeout 150 "$B/bin/octbench" --e2e --backend cuda --only $w --seconds "$SECONDS_PER_PHASE" \
        --json "$OUT/e2e_$w.json" 2>&1 | tee "$OUT/e2e_$w.log"
done
if [ "${E2E_LATEST:-1}" = 1 ]; then
    log "e2e volume cuda policy latest"
    timeout 60 "$B/bin/octbench" --e2e --backend cuda --only volume --policy latest --seconds 2 2>&1 | tee "$OUT/e2e_volume_latest.log"
fi
if [ "${E2E_CPU:-0}" = 1 ]; then
    log "e2e cpu (comparison)"
    timeout 90 "$B/bin/octbench" --e2e --backend cpu --seconds 2 2>&1 | tee "$OUT/e2e_cpu.log"
fi
log done
