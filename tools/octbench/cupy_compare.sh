#!/bin/bash
# cupy_compare.sh BUNDLE [OUTDIR] - issue 19: octd's engine against the CuPy
# anchor (tools/octbench/cupy_anchor.py) in one call on the GPU machine.
# Runs octbench's engine workloads (CUDA, fp32 = 3xTF32 and tf32) and the CuPy
# versions (plain fp32 and tf32), then prints device-time ratios per workload.
# Usage there: tools/octbench/cupy_compare.sh build/bundle "$OUT"
set -uo pipefail
B=$(cd "${1:?usage: cupy_compare.sh BUNDLE [OUTDIR]}" && pwd)
OUT=${2:-${OUT:-$PWD/gpu-out}}
mkdir -p "$OUT"
HERE=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH="$B/lib:${CUDA_HOME:-/usr/local/cuda}/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
REPS=${REPS:-20}
W="bscan-cfd bscan-msi volume-cfd volume-msi volume-cfd+msi msi-volume-full"
rm -f "$OUT/octd_fp32.json" "$OUT/octd_tf32.json"
for w in $W; do
    "$B/bin/octbench" --backend cuda --warmup 3 --reps "$REPS" --no-seed --only "$w" \
        --json "$OUT/octd_fp32.part" >/dev/null 2>&1 && cat "$OUT/octd_fp32.part" >>"$OUT/octd_fp32.json"
    "$B/bin/octbench" --backend cuda --warmup 3 --reps "$REPS" --no-seed --only "$w" --precision tf32 \
        --json "$OUT/octd_tf32.part" >/dev/null 2>&1 && cat "$OUT/octd_tf32.part" >>"$OUT/octd_tf32.json"
done
rm -f "$OUT"/*.part
python3 "$HERE/cupy_anchor.py" --precision fp32 --reps "$REPS" --json "$OUT/cupy_fp32.json" --check
python3 "$HERE/cupy_anchor.py" --precision tf32 --reps "$REPS" --json "$OUT/cupy_tf32.json"
python3 - "$OUT" <<'PY'
import json, sys, os
out = sys.argv[1]
def load(name, part=None):
    rows = {}
    p = os.path.join(out, name)
    if os.path.exists(p):
        for line in open(p):
            r = json.loads(line)
            if part and r.get("part") != part:
                continue
            rows[r["workload"]] = r["device_ms"]
    return rows
o32, o16 = load("octd_fp32.json", "engine"), load("octd_tf32.json", "engine")
c32, c16 = load("cupy_fp32.json"), load("cupy_tf32.json")
print(f"{'workload':18s} {'octd fp32':>10s} {'cupy fp32':>10s} {'ratio':>6s} | {'octd tf32':>10s} {'cupy tf32':>10s} {'ratio':>6s}")
for w in c32:
    a, b = o32.get(w), c32.get(w)
    c, d = o16.get(w), c16.get(w)
    f = lambda x: f"{x:10.3f}" if x else f"{'-':>10s}"
    r = lambda x, y: f"{y / x:6.2f}" if x and y else f"{'-':>6s}"
    print(f"{w:18s} {f(a)} {f(b)} {r(a, b)} | {f(c)} {f(d)} {r(c, d)}")
PY
