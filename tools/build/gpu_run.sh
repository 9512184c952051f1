#!/bin/bash
# gpu_run.sh [BUNDLE] - everything we run on the GPU machine, in one call:
# device check, the CUDA tests, the engine benchmark (fp32 3xTF32 with the GPU
# seed baseline and the GPU stream, fp32 plain SGEMM, tf32), the memory/GEMM
# ceilings.  GPU_STEPS selects steps (default: info test bench ceil).  Logs go to $OUT (or ./gpu-out).
# Usage there: tools/build/gpu_run.sh build/bundle   (the bundle of `make bundle`)
set -uo pipefail
B=${1:-build/bundle}
B=$(cd "$B" && pwd)
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$B/lib:${CUDA_HOME:-/usr/local/cuda}/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
STEPS=${GPU_STEPS:-"info test bench ceil"}
log() { echo "=== $* ($(date +%T))"; }

for step in $STEPS; do case $step in
info)
    log info
    { nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
      nvcc --version | tail -1; uname -r; ldd "$B/tests/test_cuda_engine" | grep -E 'not found|cu|fftw'; } 2>&1 | tee "$OUT/info.log"
    ;;
test)
    log tests
    "$B/tests/test_cuda_engine" >"$OUT/test_cuda.log" 2>&1
    echo "test_cuda_engine exit $?"
    grep -E '^[0-9]+%|SKIP|cuda: device' "$OUT/test_cuda.log"
    grep -E ':[EF]:' "$OUT/test_cuda.log" | head -20
    ;;
bench)
    log bench fp32 "(3xTF32 GEMM, seed baseline, GPU stream)"
    "$B/bin/octbench" --backend cuda --warmup 3 --reps ${REPS:-20} --json "$OUT/bench_fp32.json" 2>&1 | tee "$OUT/bench_fp32.log"
    log bench fp32 plain SGEMM
    OCT_CUDA_SGEMM=1 OCTBENCH_STREAM=0 "$B/bin/octbench" --backend cuda --warmup 3 --reps ${REPS:-20} --no-seed 2>&1 | tee "$OUT/bench_sgemm.log"
    log bench tf32
    OCTBENCH_STREAM=${TF32_STREAM:-0} "$B/bin/octbench" --backend cuda --warmup 3 --reps ${REPS:-20} --no-seed --precision tf32 2>&1 | tee "$OUT/bench_tf32.log"
    ;;
ceil)
    log ceilings
    python3 - <<'PY' 2>&1 | tee "$OUT/ceil.log"
import torch
t = torch.cuda
x = torch.empty(2**30 // 4 * 2, device='cuda'); y = torch.empty_like(x)
for _ in range(3): y.copy_(x)
s, e = t.Event(enable_timing=True), t.Event(enable_timing=True)
s.record(); [y.copy_(x) for _ in range(10)]; e.record(); t.synchronize()
print("d2d copy %.0f GB/s (read+write)" % (2 * x.numel() * 4 * 10 / (s.elapsed_time(e) * 1e-3) / 1e9))
torch.backends.cuda.matmul.allow_tf32 = False
for (m, n, k) in [(8192, 8192, 8192), (38400, 840, 1024), (500, 10752, 1024)]:
    a = torch.randn(m, k, device='cuda'); b = torch.randn(k, n, device='cuda')
    for _ in range(3): a @ b
    s.record(); [a @ b for _ in range(10)]; e.record(); t.synchronize()
    print("sgemm %dx%dx%d: %.1f TFLOP/s" % (m, n, k, 2 * m * n * k * 10 / (s.elapsed_time(e) * 1e-3) / 1e12))
h = torch.empty(2**28, dtype=torch.uint8).pin_memory(); d = torch.empty(2**28, dtype=torch.uint8, device='cuda')
d.copy_(h); t.synchronize()
s.record(); [d.copy_(h, non_blocking=True) for _ in range(5)]; e.record(); t.synchronize()
print("h2d pinned %.1f GB/s" % (h.numel() * 5 / (s.elapsed_time(e) * 1e-3) / 1e9))
PY
    ;;
esac; done
log done
