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
  nproc; free -g | head -2; df -h /dev/shm; uname -r; lscpu | grep -E 'Model name|NUMA|Socket'
  nvidia-smi topo -m; } 2>&1 | tee "$OUT/info.log"
if [ "${E2E_TEST:-1}" = 1 ]; then
    log test_cuda_engine
    timeout 240 "$B/tests/test_cuda_engine" >"$OUT/test_cuda.log" 2>&1
    echo "test_cuda_engine exit $?"
    grep -E '^[0-9]+%|SKIP' "$OUT/test_cuda.log"; grep -E ':[EF]:' "$OUT/test_cuda.log" | head -20
fi
# E2E_AFFINITY=gpu runs octbench (its producer, subscriber and the octd it
# starts) on the CPUs of the GPU's NUMA node, so that the ring's pages are
# first touched there and the DMA does not cross the socket interconnect.
PIN=()
if [ "${E2E_AFFINITY:-}" = gpu ]; then
    bus=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader | head -1 | tr 'A-F' 'a-f')
    dev="/sys/bus/pci/devices/${bus#0000}"
    [ -e "$dev" ] || dev="/sys/bus/pci/devices/$(echo "$bus" | sed -E 's/^0*([0-9a-f]{4}:)/\1/')"
    cpus=$(cat "$dev/local_cpulist" 2>/dev/null)
    echo "GPU $bus: NUMA node $(cat "$dev/numa_node" 2>/dev/null), local CPUs ${cpus:-unknown}"
    [ -n "$cpus" ] && PIN=(taskset -c "$cpus")
fi
for w in ${E2E_WORK:-volume bscan}; do
    log "e2e $w cuda policy all ${PIN[*]}"
    timeout 150 "${PIN[@]}" "$B/bin/octbench" --e2e --backend cuda --only $w --seconds "$SECONDS_PER_PHASE" \
        --json "$OUT/e2e_$w${E2E_TAG:-}.json" 2>&1 | tee "$OUT/e2e_$w${E2E_TAG:-}.log"
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
