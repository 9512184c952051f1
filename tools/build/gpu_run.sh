#!/bin/bash
# gpu_run.sh [BUNDLE] - everything we run on the GPU machine, in one call:
# device check, the CUDA tests, the engine benchmark (fp32 3xTF32 with the GPU
# seed baseline and the GPU stream, fp32 plain SGEMM, tf32), the memory/GEMM
# ceilings, and (step sanitize, not in the default list) compute-sanitizer:
# memcheck of the CUDA test binary, memcheck / racecheck / synccheck of
# octproc --backend cuda on a B-scan and a volume frame (made there with the
# bundle's octsim + octctl ring --dump: no Python needed), and memcheck of a
# short octd session (CUDA backend).  GPU_STEPS selects steps (default: info
# test bench ceil; GPU_STEPS=sanitize for the sanitizer alone).  Logs go to
# $OUT (or ./gpu-out).
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
    # the backend-neutral engine API tests on the GPU
    OCT_TEST_BACKEND=cuda "$B/tests/test_engine_api" >"$OUT/test_engine_api_cuda.log" 2>&1
    echo "test_engine_api (cuda) exit $?"
    grep -E '^[0-9]+%|SKIP' "$OUT/test_engine_api_cuda.log"
    grep -E ':[EF]:' "$OUT/test_engine_api_cuda.log" | head -20
    # the planner's failed-prepare re-sync on the device (issue 13)
    if [ -x "$B/tests/test_engine_plan" ]; then
        OCT_TEST_BACKEND=cuda "$B/tests/test_engine_plan" >"$OUT/test_engine_plan_cuda.log" 2>&1
        echo "test_engine_plan (cuda) exit $?"
        grep -E '^[0-9]+%|SKIP|:[EF]:' "$OUT/test_engine_plan_cuda.log" | head -20
    fi
    ;;
bench)
    log bench fp32 "(3xTF32 GEMM, seed baseline, GPU stream)"
    "$B/bin/octbench" --backend cuda --warmup 3 --reps ${REPS:-20} --json "$OUT/bench_fp32.json" 2>&1 | tee "$OUT/bench_fp32.log"
    log bench fp32 plain SGEMM
    OCTBENCH_STREAM=0 "$B/bin/octbench" --backend cuda --gemm sgemm --warmup 3 --reps ${REPS:-20} --no-seed 2>&1 | tee "$OUT/bench_sgemm.log"
    log bench tf32
    OCTBENCH_STREAM=${TF32_STREAM:-0} "$B/bin/octbench" --backend cuda --warmup 3 --reps ${REPS:-20} --no-seed --precision tf32 2>&1 | tee "$OUT/bench_tf32.log"
    ;;
sanitize)
    # SAN_TOOLS [memcheck racecheck synccheck] for octproc; the test binary
    # and octd get memcheck only (racecheck/synccheck of the whole suite
    # take far longer than a device call); SAN_TIMEOUT bounds each run.
    log compute-sanitizer
    CS=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer")}
    [ -x "$CS" ] || { echo "sanitize: no compute-sanitizer ($CS)"; continue; }
    SD="$OUT/sanitize"; mkdir -p "$SD"
    TO=${SAN_TIMEOUT:-240}
    san_fails=0
    # san_verdict NAME RC LOG: exit code and the sanitizer's summary line
    san_verdict() {
        local sum
        sum=$(grep -E '^========= (ERROR|RACECHECK) SUMMARY' "$3" | tail -1)
        echo "sanitize $1: exit $2, ${sum:-no summary (timeout $TO s?)}"
        [ "$2" = 0 ] || { san_fails=$((san_fails + 1));
            grep -E '^========= (Invalid|Program hit|Race|Barrier|Leaked|Uninit|  *at )' "$3" | head -12; }
    }
    # san NAME TOOL CMD...: one sanitizer run
    san() {
        local name=$1 tool=$2; shift 2
        local extra=()
        [ "$tool" = memcheck ] && extra=(--leak-check full)
        timeout -s INT "$TO" "$CS" --tool "$tool" --error-exitcode 99 --print-limit 30 "${extra[@]}" \
            "$@" >"$SD/$name.$tool.log" 2>&1
        san_verdict "$name $tool" $? "$SD/$name.$tool.log"
    }
    # data from the bundle itself: frames dumped from octsim's ring, masks
    R=/octsan$$
    for g in "bscan 1024 256 1" "volume 512 64 16"; do
        read -r kind m n l <<<"$g"
        "$B/bin/octsim" --ring "$R-$kind" --samples "$m" --ascans "$n" --lines "$l" --quiet &
        sp=$!
        for _ in $(seq 50); do [ -e "/dev/shm$R-$kind" ] && break; sleep 0.1; done
        "$B/bin/octctl" ring --ring "$R-$kind" --dump "$SD/$kind.npy" --timeout 5000 >/dev/null ||
            echo "sanitize: no $kind frame from octsim"
        kill $sp; wait $sp 2>/dev/null
        "$B/bin/octsim" masks --samples "$m" --count 64 --output "$SD/masks_$kind.npy" >/dev/null
        printf '%s\n' "methods: [cfd, msi]" "window: {type: hann}" "freq_cutoff: 4" \
            "msi: {masks: {file: masks_$kind.npy, count: 64}, lag_window: [-3, 3]}" \
            "enface: {start: 4, step: 8, count: 6}" "xsec: {h_index: 0, v_index: 2}" "scale: log" \
            "products: [bscan, enface, confocal, xsec_h, xsec_v, f32]" >"$SD/$kind.yaml"
        for tool in ${SAN_TOOLS:-memcheck racecheck synccheck}; do
            san "octproc_$kind" "$tool" "$B/bin/octproc" --profile "$SD/$kind.yaml" \
                --input "$SD/$kind.npy" --backend cuda --output "$SD/out_${kind}_$tool"
        done
    done
    san test_cuda_engine memcheck "$B/tests/test_cuda_engine"
    # octd (CUDA backend, GPU ring path) for SAN_OCTD_SECONDS, then SIGTERM to
    # octd itself (the sanitizer's child), so it stops through its own path
    printf '%s\n' "[engine]" "backend = cuda" "[ring]" "frames = $R-frames" "control = $R-control" \
        "status = $R-status" "[publish]" "endpoint = ipc://$SD/pub" "[profile]" \
        "path = $SD/bscan.yaml" >"$SD/octd.ini"
    "$B/bin/octsim" --ring "$R-frames" --samples 1024 --ascans 256 --lines 1 --rate 2560000 --quiet &
    sp=$!
    timeout -s INT "$TO" "$CS" --tool memcheck --error-exitcode 99 --leak-check full --print-limit 30 \
        "$B/bin/octd" --config "$SD/octd.ini" >"$SD/octd.memcheck.log" 2>&1 &
    cp=$!
    sleep "${SAN_OCTD_SECONDS:-20}"
    "$B/bin/octctl" --control "$R-control" --status "$R-status" status 2>&1 |
        grep -E '^(state|backend|frames_processed|frames_torn)=' | tr '\n' ' '; echo
    # SIGTERM to octd itself wherever the sanitizer put it (its own command
    # line contains octd's too: match the executable, not the text)
    octd_exe=$(readlink -f "$B/bin/octd")
    t_term=$(date +%s.%N)
    for g in $(pgrep -f "bin/octd --config"); do
        [ "$(readlink -f /proc/$g/exe 2>/dev/null)" = "$octd_exe" ] && kill -TERM $g && echo "SIGTERM -> octd pid $g"
    done
    wait $cp
    rc=$?
    awk -v a="$t_term" -v b="$(date +%s.%N)" 'BEGIN { printf "octd under memcheck ended %.1f s after SIGTERM\n", b - a }'
    san_verdict "octd memcheck" $rc "$SD/octd.memcheck.log"
    kill $sp; wait $sp 2>/dev/null
    rm -f /dev/shm"$R"-*
    echo "sanitize: $san_fails failing run(s)"
    # the logs as one file (the device tool brings back few files)
    (cd "$SD" && tar -czf "$OUT/sanitize_logs.tgz" ./*.log) && rm -rf "$SD" &&
        echo "sanitize: logs in $OUT/sanitize_logs.tgz"
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
