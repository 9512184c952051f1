#!/bin/bash
# e2e_register.sh - volume registration end to end (SPEC 10.4): octsim motion
# makes volumes under eye motion with the true shifts; octproc --register
# registers them (--intensity float32 volumes, and raw frames through a
# profile); checks the files, shapes and the shifts against the truth (pure
# Python .npy reader: no numpy needed), and that bad input fails clearly.
# Exit 0 pass, 77 skip, else fail.
set -u
BIN=${BIN:-bin}
PYTHON=${PYTHON:-/usr/bin/python3}
for p in octproc octsim; do
    [ -x "$BIN/$p" ] || { echo "FAIL: $BIN/$p not built"; exit 1; }
done
T=$(mktemp -d /tmp/octd-e2e-register.XXXXXX)
[ -n "${KEEP:-}" ] || trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# 1. intensity volumes
"$BIN/octsim" motion --output "$T/sim" --lines 48 --ascans 48 --samples 128 --volumes 3 \
    --drift 2 --tremor 0.3 --saccades 0 --seed 3 --frames >"$T/sim.log" 2>&1 \
    || { cat "$T/sim.log"; fail "octsim motion"; }
"$BIN/octproc" --register "$T/sim/reference.npy" --input "$T/sim/targets.npy" --intensity \
    --output "$T/out" --backend cpu >"$T/reg.log" 2>&1 || { cat "$T/reg.log"; fail "octproc --register --intensity"; }
cat "$T/reg.log"
for f in shifts.npy registered.npy average.npy before_slow.png after_slow.png before_cscan.png after_cscan.png; do
    [ -s "$T/out/$f" ] || fail "missing $f"
done

# 2. raw frames through a profile (CFD, rect window: |DFT| = M x the volume)
cat >"$T/p.yaml" <<EOF
geometry: {samples: 128, ascans: 48, lines: 48, sample_type: f32}
methods: [cfd]
window: {type: rect}
freq_cutoff: 0
EOF
"$BIN/octproc" --register "$T/sim/reference_frame.npy" --input "$T/sim/frames.npy" --profile "$T/p.yaml" \
    --output "$T/raw" --backend cpu >"$T/raw.log" 2>&1 || { cat "$T/raw.log"; fail "octproc --register (frames)"; }
cat "$T/raw.log"

"$PYTHON" - "$T" <<'EOF' || fail "results"
import sys, struct, array, ast, math
t = sys.argv[1]
def load(path):
    with open(path, "rb") as f:
        b = f.read()
    assert b[:6] == b"\x93NUMPY", path
    hl = struct.unpack("<H", b[8:10])[0] if b[6] == 1 else struct.unpack("<I", b[8:12])[0]
    off = 10 if b[6] == 1 else 12
    h = ast.literal_eval(b[off:off + hl].decode())
    assert h["descr"] == "<f4", (path, h)
    a = array.array("f")
    a.frombytes(b[off + hl:])
    return h["shape"], a
ss, s = load(f"{t}/out/shifts.npy")
ts, tr = load(f"{t}/sim/truth.npy")
rs, _ = load(f"{t}/out/registered.npy")
av, a = load(f"{t}/out/average.npy")
assert ss == (3, 48, 4) and ts == ss, (ss, ts)
assert rs == (3, 48, 48, 65) and av == (48, 48, 65), (rs, av)
def score(s):
    n = ok = 0
    for i in range(0, len(s), 4):
        if tr[i + 3] != 1 or s[i + 3] != 1:
            if s[i + 3] == 0:
                assert all(math.isnan(v) for v in s[i:i + 3]), "invalid line with finite shifts"
            continue
        n += 1
        ok += abs(s[i] - tr[i]) <= 0.5 and abs(s[i + 1] - tr[i + 1]) <= 1 and abs(s[i + 2] - tr[i + 2]) <= 0.5
    return n, ok
tv = sum(1 for i in range(0, len(tr), 4) if tr[i + 3] == 1)
n, ok = score(s)
print(f"intensity: {n} of {tv} true-valid lines valid, {ok} within 0.5/1/0.5 px")
assert n >= 0.9 * tv and ok >= 0.98 * n, (n, ok, tv)
fin = sum(1 for v in a if not math.isnan(v))
assert fin > 0.8 * len(a), f"average: only {fin} of {len(a)} finite"
_, s2 = load(f"{t}/raw/shifts.npy")
n2, ok2 = score(s2)
print(f"frames: {n2} of {tv} true-valid lines valid, {ok2} within 0.5/1/0.5 px")
assert n2 >= 0.9 * tv and ok2 >= 0.98 * n2, (n2, ok2, tv)
EOF

# 3. bad input: usage, shapes, dtype
"$BIN/octproc" --register "$T/sim/reference_frame.npy" --input "$T/sim/frames.npy" --output "$T/x" >"$T/e1" 2>&1
[ $? -eq 64 ] && grep -q "need --profile" "$T/e1" || { cat "$T/e1"; fail "frames without --profile"; }
"$BIN/octproc" --register "$T/sim/reference.npy" --input "$T/sim/frames.npy" --intensity --output "$T/x" >"$T/e2" 2>&1
[ $? -eq 1 ] && grep -q "frames.npy" "$T/e2" || { cat "$T/e2"; fail "frames given as intensities"; }
"$BIN/octproc" --register "$T/out/shifts.npy" --input "$T/sim/targets.npy" --intensity --output "$T/x" >"$T/e3" 2>&1
[ $? -eq 1 ] && grep -q "shifts.npy" "$T/e3" || { cat "$T/e3"; fail "mismatched reference"; }
echo "PASS e2e_register"
