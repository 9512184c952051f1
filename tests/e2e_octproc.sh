#!/bin/bash
# e2e_octproc.sh - octproc end to end (SPEC 8): random frames and masks made
# with numpy, a CFD+MSI B-scan, a CFD volume with every product, a stack of
# frames; checks file names, PNG sizes, .npy shapes, the float32 B-scans
# against a numpy float64 evaluation of SPEC 2.2/2.3 (numpy's FFT is an
# independent implementation), and that bad inputs fail with a message.
# Exit 0 pass, 77 skip, else fail.
set -u
BIN=${BIN:-bin}
PYTHON=${PYTHON:-/usr/bin/python3}
OCTPROC=$BIN/octproc
if [ ! -x "$OCTPROC" ]; then
    echo "FAIL: $OCTPROC not built"; exit 1
fi
if ! "$PYTHON" -c 'import numpy' 2>/dev/null; then
    echo "SKIP e2e_octproc: $PYTHON has no numpy"; exit 77
fi
T=$(mktemp -d /tmp/octd-e2e-octproc.XXXXXX)
[ -n "${KEEP:-}" ] || trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$PYTHON" - "$T" <<'EOF' || fail "cannot make the test data"
import sys, numpy as np
t = sys.argv[1]
rng = np.random.default_rng(20240611)
M, N, R = 256, 33, 16
n = np.arange(M)
def fringes(count, M, depths, amp=1500.0):
    # a source envelope over DC (well inside the u16 range after the shift)
    x = 2000.0 + 1000.0 * np.exp(-0.5 * ((n - M / 2) / (M / 5)) ** 2)
    out = np.empty((count, M))
    for j in range(count):
        d = depths[j % len(depths)]
        out[j] = x + amp * np.cos(2 * np.pi * d * n / M + rng.uniform(0, 6.28)) \
                 + rng.normal(0, 50, M)
    return out
# B-scan, u16 with sample_shift 2 (values use the top 14 bits)
b = fringes(N, M, [10, 40, 77, 100]).clip(0, 16383).astype(np.uint16) << 2
np.save(f"{t}/bscan.npy", (b + rng.integers(0, 4, b.shape, dtype=np.uint16)).reshape(1, N, M))
masks = fringes(R, M, list(range(4, 4 + 7 * R, 7)), 1000.0).astype(np.float32)
np.save(f"{t}/masks.npy", masks)
# a volume of i16 frames and a stack of two of them
L2, N2, M2 = 4, 6, 128
n = np.arange(M2)
v = (fringes(L2 * N2, M2, [5, 20, 33]) - 3000).clip(-32768, 32767).astype(np.int16)
np.save(f"{t}/volume.npy", v.reshape(L2, N2, M2))
np.save(f"{t}/stack.npy", np.stack([v.reshape(L2, N2, M2), v[::-1].reshape(L2, N2, M2)]))
np.save(f"{t}/bad1d.npy", np.zeros(M, np.uint16))
np.save(f"{t}/f64.npy", np.zeros((1, 4, M)))
EOF

cat >"$T/bscan.yaml" <<'EOF'
geometry: {samples: 256, ascans: 33, lines: 1, sample_type: u16, sample_shift: 2}
methods: [cfd, msi]
window: {type: hann}
freq_cutoff: 4
msi:
  masks: {file: masks.npy, count: 16}
  lag_window: [-3, 5]
display:
  bscan: {gsc: 0.001}
products: [bscan, f32]
EOF
cat >"$T/volume.yaml" <<'EOF'
methods: [cfd]
window: {type: blackman}
freq_cutoff: 2
enface: {start: 2, step: 3, count: 3}
xsec: {h_index: 3, v_index: 5}
products: [enface, confocal, xsec_h, xsec_v, volume, slab_mean, slab_max, f32]
EOF

# ---- good runs ----
"$OCTPROC" --profile "$T/bscan.yaml" --input "$T/bscan.npy" --backend cpu --output "$T/out_b" \
    || fail "octproc on a B-scan failed"
"$OCTPROC" --profile "$T/volume.yaml" --input "$T/volume.npy" --output "$T/out_v/new/dir" \
    || fail "octproc on a volume failed"
"$OCTPROC" --profile "$T/volume.yaml" --input "$T/stack.npy" --output "$T/out_s" \
    || fail "octproc on a stack failed"
# SPEC 2.4: en-face indices past the last depth (M = 128: depths 0..63) are
# cut, and the cut is reported: 50, 55, 60 of 50..75 are used
sed 's/enface: {start: 2, step: 3, count: 3}/enface: {start: 50, step: 5, count: 6}/' \
    "$T/volume.yaml" >"$T/cut.yaml"
"$OCTPROC" --profile "$T/cut.yaml" --input "$T/volume.npy" --output "$T/out_cut" >"$T/cut.txt" 2>&1 \
    || { cat "$T/cut.txt"; fail "octproc with en-face indices past the last depth failed"; }
grep -q "en-face cfd: 6 depths requested, 3 used" "$T/cut.txt" || { cat "$T/cut.txt"; fail "the cut en-face count is not reported"; }
[ -e "$T/out_cut/enface_cfd_2.png" ] && [ ! -e "$T/out_cut/enface_cfd_3.png" ] || fail "cut en-face: wrong files"
echo "ok en-face cut reported: $(grep 'depths requested' "$T/cut.txt")"

"$PYTHON" - "$T" <<'EOF' || exit 1
import os, struct, sys, numpy as np
t = sys.argv[1]
def fail(msg):
    print("FAIL:", msg); sys.exit(1)
def png_size(path):
    with open(path, "rb") as f:
        h = f.read(33)
    if h[:8] != b"\x89PNG\r\n\x1a\n":
        fail(f"{path}: not a PNG")
    w, hh, depth, ctype = struct.unpack(">IIBB", h[16:26])
    if depth != 8 or ctype != 0:
        fail(f"{path}: not 8-bit gray")
    return hh, w
def expect(dirname, pngs, npys):
    names = set(os.listdir(dirname))
    want = set(pngs) | set(npys)
    if names != want:
        fail(f"{dirname}: files {sorted(names)}, expected {sorted(want)}")
    for name, shape in pngs.items():
        if png_size(f"{dirname}/{name}") != shape:
            fail(f"{dirname}/{name}: size {png_size(dirname + '/' + name)}, expected {shape}")
    for name, shape in npys.items():
        a = np.load(f"{dirname}/{name}")
        if a.dtype != np.float32 or a.shape != shape:
            fail(f"{dirname}/{name}: {a.dtype} {a.shape}, expected float32 {shape}")

# B-scan: files and shapes
M, N, R, F, W1, W2 = 256, 33, 16, 4, -3, 5
D = M // 2 + 1
expect(f"{t}/out_b", {"bscan_cfd.png": (D, N), "bscan_msi.png": (R, N)},
       {"bscan_cfd.npy": (D, N), "bscan_msi.npy": (R, N)})
# float64 reference of SPEC 2.1-2.3 with numpy's FFT
x = (np.load(f"{t}/bscan.npy")[0].astype(np.int64) >> 2).astype(np.float64)  # (N, M)
n = np.arange(M)
w = 0.5 - 0.5 * np.cos(2 * np.pi * n / (M - 1))
xt = x * w
X = np.fft.fft(xt, axis=1)
I = np.abs(X[:, :D])
I[:, :F] = 0
got = np.load(f"{t}/out_b/bscan_cfd.npy").astype(np.float64)
err = np.linalg.norm(got - I.T) / np.linalg.norm(I.T)
print(f"bscan_cfd: relative L2 error vs numpy float64 = {err:.3e}")
if not err < 1e-4:
    fail(f"bscan_cfd differs from the float64 reference: {err:.3e}")
k = np.arange(M)
H = ((k >= F) & (k <= M - F)).astype(np.float64)
masks = np.load(f"{t}/masks.npy").astype(np.float64)
Mk = np.fft.fft(masks * w, axis=1)
P = np.fft.ifft(X[:, None, :] * (H * np.conj(Mk))[None, :, :], axis=2)  # (N, R, M) by lag
lags = np.arange(W1, W2 + 1) % M
Imsi = np.abs(P[:, :, lags]).sum(axis=2)  # (N, R)
got = np.load(f"{t}/out_b/bscan_msi.npy").astype(np.float64)
err = np.linalg.norm(got - Imsi.T) / np.linalg.norm(Imsi.T)
print(f"bscan_msi: relative L2 error vs numpy float64 = {err:.3e}")
if not err < 1e-4:
    fail(f"bscan_msi differs from the float64 reference: {err:.3e}")

# volume: every product, en-face stack [Q, L, N]
L, N, M = 4, 6, 128
D = M // 2 + 1
vol = {f"enface_cfd_{q}.png": (L, N) for q in range(3)}
vol.update({"confocal_cfd.png": (L, N), "xsec_h_cfd.png": (D, N), "xsec_v_cfd.png": (D, L),
            "volume_cfd.png": (L * N, D), "slab_mean_cfd.png": (L, N), "slab_max_cfd.png": (L, N)})
vnp = {"enface_cfd.npy": (3, L, N), "confocal_cfd.npy": (L, N), "xsec_h_cfd.npy": (D, N),
       "xsec_v_cfd.npy": (D, L), "volume_cfd.npy": (L, N, D), "slab_mean_cfd.npy": (L, N),
       "slab_max_cfd.npy": (L, N)}
expect(f"{t}/out_v/new/dir", vol, vnp)
volume = np.load(f"{t}/out_v/new/dir/volume_cfd.npy")
enface = np.load(f"{t}/out_v/new/dir/enface_cfd.npy")
if not np.array_equal(enface, np.moveaxis(volume[:, :, [2, 5, 8]], 2, 0)):
    fail("en-face slices are not the volume at depths 2, 5, 8")
# slabs (SPEC 10.2), default range: every depth [0, D)
smean = np.load(f"{t}/out_v/new/dir/slab_mean_cfd.npy")
smax = np.load(f"{t}/out_v/new/dir/slab_max_cfd.npy")
if np.linalg.norm(smean - volume.astype(np.float64).mean(axis=2)) > 1e-5 * np.linalg.norm(smean):
    fail("slab_mean is not the mean of the volume over its depths")
if not np.array_equal(smax, volume.max(axis=2)):
    fail("slab_max is not the maximum of the volume over its depths")
# the stack: one numbered directory per frame, the first equal to the single frame
if sorted(os.listdir(f"{t}/out_s")) != ["000000", "000001"]:
    fail(f"stack output: {sorted(os.listdir(t + '/out_s'))}")
for k in ("000000", "000001"):
    expect(f"{t}/out_s/{k}", vol, vnp)
a = np.load(f"{t}/out_s/000000/volume_cfd.npy")
if np.linalg.norm(a - volume) > 1e-5 * np.linalg.norm(volume):
    fail("stack frame 0 differs from the same frame processed alone")
print("octproc outputs OK")
EOF

# ---- bad inputs: non-zero exit and a message naming what is wrong ----
expect_fail() { # want_rc fragment args...
    local want=$1 frag=$2; shift 2
    local out rc
    out=$("$OCTPROC" "$@" 2>&1); rc=$?
    [ "$rc" -ne 0 ] || fail "octproc $* succeeded"
    [ "$want" = any ] || [ "$rc" -eq "$want" ] || fail "octproc $*: exit $rc, expected $want ($out)"
    echo "$out" | grep -qF -- "$frag" || fail "octproc $*: message lacks '$frag': $out"
    echo "ok (exit $rc): $(echo "$out" | head -1)"
}
P="--profile $T/bscan.yaml"
expect_fail 1 "missing.npy" $P --input "$T/missing.npy" --output "$T/x"
expect_fail 1 "bad1d.npy" $P --input "$T/bad1d.npy" --output "$T/x"
expect_fail 1 "f64" $P --input "$T/f64.npy" --output "$T/x"
expect_fail 1 "bscan.yaml" $P --input "$T/volume.npy" --output "$T/x"
expect_fail 1 "nope.yaml" --profile "$T/nope.yaml" --input "$T/bscan.npy" --output "$T/x"
sed 's/count: 16/count: 17/' "$T/bscan.yaml" >"$T/badcount.yaml"
expect_fail 1 "(17, 256)" --profile "$T/badcount.yaml" --input "$T/bscan.npy" --output "$T/x"
# data files and checks against the frames' geometry name FILE:LINE: key (SPEC 5.2)
expect_fail 1 "badcount.yaml:6: msi.masks.file: " --profile "$T/badcount.yaml" --input "$T/bscan.npy" --output "$T/x"
sed 's/masks.npy/nomasks.npy/' "$T/bscan.yaml" >"$T/nomask.yaml"
expect_fail 1 "nomask.yaml:6: msi.masks.file: " --profile "$T/nomask.yaml" --input "$T/bscan.npy" --output "$T/x"
printf 'methods: [cfd]\n\nfreq_cutoff: 100\n' >"$T/fc.yaml"
expect_fail 1 "fc.yaml:3: freq_cutoff: freq_cutoff = 100" --profile "$T/fc.yaml" --input "$T/volume.npy" --output "$T/x"
printf 'methods: [cfd]\nwindow: {type: hann, size: 3}\n' >"$T/badkey.yaml"
expect_fail 1 "badkey.yaml:2: window.size" --profile "$T/badkey.yaml" --input "$T/bscan.npy" --output "$T/x"
expect_fail 64 "required" --input "$T/bscan.npy" --output "$T/x"
expect_fail 64 "--backend" $P --input "$T/bscan.npy" --output "$T/x" --backend gpu
expect_fail 64 "--frobnicate" $P --input "$T/bscan.npy" --output "$T/x" --frobnicate
[ ! -e "$T/x" ] || fail "a failed run created its output directory"
# CUDA: works on a GPU machine, else a clear refusal
out=$("$OCTPROC" $P --input "$T/bscan.npy" --output "$T/out_cuda" --backend cuda 2>&1); rc=$?
if [ $rc -eq 0 ]; then
    echo "cuda backend ran: $out"
else
    echo "$out" | grep -qi "cuda" || fail "--backend cuda failed without naming CUDA: $out"
    echo "ok (exit $rc, no CUDA here): $out"
fi
"$OCTPROC" --help | grep -q "usage: octproc" || fail "--help"
"$OCTPROC" --version | grep -q "octproc" || fail "--version"
echo "e2e_octproc: all checks passed"
exit 0
