#!/bin/bash
# e2e_angio.sh - repeated B-scans and angiography end to end (issue 18):
# octsim flow writes a phantom with its truth; octproc (CPU) processes it
# with a profile that has geometry.repeats and an angio: section; the
# float32 struct/median/sv/decor/ssada are compared with a numpy float64
# evaluation of SPEC 10.3 (numpy's FFT: an independent implementation), for
# one group ([D][N]) and several ([G][N][D]); the vessel must stand out in
# ssada; a repeats value that does not divide the lines is refused by name.
# The CUDA backend too when octproc can use a device (else said and skipped).
# Exit 0 pass, 77 skip, else fail.
set -u
BIN=${BIN:-bin}
PYTHON=${PYTHON:-/usr/bin/python3}
for p in octsim octproc; do
    [ -x "$BIN/$p" ] || { echo "FAIL: $BIN/$p not built"; exit 1; }
done
if ! "$PYTHON" -c 'import numpy' 2>/dev/null; then
    echo "SKIP e2e_angio: $PYTHON has no numpy"; exit 77
fi
T=$(mktemp -d /tmp/octd-e2e-angio.XXXXXX)
[ -n "${KEEP:-}" ] || trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

M=256 N=32 R=4
BACKENDS=cpu
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    BACKENDS="cpu cuda"
else
    echo "(no GPU: the CUDA backend is not checked)"
fi
for BK in $BACKENDS; do
for G in 1 6; do
    "$BIN/octsim" flow --samples $M --ascans $N --positions $G --repeats $R \
        --output "$T/f$G.npy" --truth "$T/t$G.npy" --seed $((G + 3)) > "$T/sim$G.log" \
        || fail "octsim flow G=$G: $(cat "$T/sim$G.log")"
    cat > "$T/p$G.yaml" <<EOF
geometry: {samples: $M, ascans: $N, lines: $((G * R)), sample_type: u16, repeats: $R}
window: {type: hann}
background: {mode: frame_mean}
freq_cutoff: 4
products: [f32, slab_mean, slab_max]
slab: {start: 30, end: 100}
angio: {metrics: [struct, median, sv, decor, ssada], bands: 3, band_width: 1.2}
EOF
    rm -rf "$T/o$G" && mkdir -p "$T/o$G"
    "$BIN/octproc" --backend $BK --profile "$T/p$G.yaml" --input "$T/f$G.npy" --output "$T/o$G" \
        > "$T/proc$G.log" 2>&1 || fail "octproc $BK G=$G: $(cat "$T/proc$G.log")"
    for m in struct median sv decor ssada; do
        [ -s "$T/o$G/${m}_cfd.png" ] && [ -s "$T/o$G/${m}_cfd.npy" ] || fail "G=$G: no ${m}_cfd files"
    done
    for m in sv decor ssada; do  # en-face angiograms: the metric in place of the method
        for s in slab_mean slab_max; do
            [ -s "$T/o$G/${s}_${m}.png" ] && [ -s "$T/o$G/${s}_${m}.npy" ] || fail "G=$G: no ${s}_${m} files"
        done
    done
    "$PYTHON" - "$T" $G $M $N $R <<'EOF' || fail "G=$G: numpy comparison"
import sys, numpy as np
t, G, M, N, R = sys.argv[1], *map(int, sys.argv[2:])
D, F, K, width = M // 2 + 1, 4, 3, 1.2
x = np.load(f"{t}/f{G}.npy").astype(np.float64).reshape(G * R * N, M)
x -= x.mean(axis=0)
n = np.arange(M)
xt = (0.5 - 0.5 * np.cos(2 * np.pi * n / (M - 1))) * x
def mag(y):
    a = np.abs(np.fft.rfft(y, axis=-1))
    a[..., :F] = 0
    return a.reshape(G, R, N, D)
def c(a, b):
    den = a * a + b * b
    return np.where(den > 0, 2 * a * b / np.where(den > 0, den, 1), 1.0)
def decor(A):
    return 1 - sum(c(A[:, r], A[:, r + 1]) for r in range(R - 1)) / (R - 1)
A = mag(xt)
ref = {"struct": A.mean(axis=1), "median": np.median(A, axis=1),
       "sv": ((A - A.mean(axis=1, keepdims=True)) ** 2).mean(axis=1), "decor": decor(A)}
w = width * M / K
ref["ssada"] = sum(decor(mag(np.exp(-4 * np.log(2) * ((n - (k + 0.5) * M / K) / w) ** 2) * xt))
                   for k in range(K)) / K
for m, r in ref.items():
    got = np.load(f"{t}/o{G}/{m}_cfd.npy").astype(np.float64)
    want = (G, N, D) if G > 1 else (D, N)
    assert got.shape == want, f"{m}: shape {got.shape}, want {want}"
    if G == 1:
        got = got.T[None]
    err = np.linalg.norm(got - r) / np.linalg.norm(r)
    assert err <= 1e-4, f"{m}: relative L2 {err:.3g} > 1e-4"
    print(f"  G={G} {m}: rel L2 {err:.2e}")
# en-face angiograms [G][N]: slabs of the float64 metrics over depths [30, 100)
for m in ("sv", "decor", "ssada"):
    for s, f in (("slab_mean", np.mean), ("slab_max", np.max)):
        got = np.load(f"{t}/o{G}/{s}_{m}.npy").astype(np.float64)
        want = f(ref[m][:, :, 30:100], axis=2)
        assert got.shape == want.shape, f"{s}_{m}: shape {got.shape}, want {want.shape}"
        err = np.linalg.norm(got - want) / np.linalg.norm(want)
        assert err <= 1e-4, f"{s}_{m}: relative L2 {err:.3g} > 1e-4"
        print(f"  G={G} {s}/{m}: rel L2 {err:.2e}")
lab = np.load(f"{t}/t{G}.npy")
s = ref["ssada"]
ratio = s[lab == 2].mean() / s[lab == 1].mean()
print(f"  G={G} ssada vessel/tissue {ratio:.2f}")
assert ratio >= 4, f"ssada vessel/tissue {ratio:.2f} < 4"
EOF
done
echo "ok: backend $BK"
done
# repeats must divide the lines; the error names the key
sed 's/repeats: 4/repeats: 5/' "$T/p6.yaml" > "$T/bad.yaml"
if "$BIN/octproc" --backend cpu --profile "$T/bad.yaml" --input "$T/f6.npy" --output "$T/o6" \
    > "$T/bad.log" 2>&1; then
    fail "repeats 5 of 24 lines accepted"
fi
grep -q "geometry.repeats" "$T/bad.log" || fail "no key in: $(cat "$T/bad.log")"
echo "ok (refused): $(head -c 200 "$T/bad.log")"
echo "e2e_angio: all checks passed"
