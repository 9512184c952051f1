#!/bin/bash
# e2e_issue7.sh - issue 7 end to end (BACKEND=cpu by default; BACKEND=cuda on
# a GPU machine, as tools/build/gpu_run.sh does): k-linearisation,
# dispersion compensation, rolling / FPN background and Complex Master/Slave
# through octsim -> octproc -> octd/octctl.
#  1. octsim: a simulated B-scan (non-linear k, dispersion) dumped from the
#     ring, MSI masks, the CMS calibration + true k-lin positions + profile
#     snippet, and a set of mirror spectra (one mirror per A-scan).
#  2. octproc: every product of the new math against a numpy float64
#     evaluation written here from the definitions in kernels/oct_engine.h
#     (SPEC 7: 1e-4 relative L2): CFD with sinc / linear (file) and cubic
#     (polynomial) k-linearisation + dispersion (a2, a3), CMS from the
#     calibration, MSI, rolling and FPN background.  Physics: each mirror
#     lies at its true depth in linearised+compensated CFD, CMS and MSI, with
#     a narrower peak than plain CFD; the layers of the simulated sample lie
#     at the same depths in all three methods.  Bad values fail with a message.
#  3. octd: `octctl set` of every new name is applied (applied_gen grows,
#     `get` shows it, images keep coming, bscan/cms published); invalid
#     values are rejected with the reason in the status block; methods=cms on
#     an octd without a calibration is rejected; octd stays alive.
# Exit 0 pass, 77 skip, else fail.  KEEP=1 keeps the temp directory.
set -u
BIN=$(cd "${BIN:-bin}" 2>/dev/null && pwd) || { echo "SKIP e2e_issue7: no bin directory"; exit 77; }
BACKEND=${BACKEND:-cpu}
case $BACKEND in cpu|cuda) ;; *) echo "e2e_issue7: BACKEND must be cpu or cuda" >&2; exit 2 ;; esac
PYTHON=${PYTHON:-/usr/bin/python3}
for p in octd octsim octctl octgrab octproc; do
    [ -x "$BIN/$p" ] || { echo "SKIP e2e_issue7: $BIN/$p not built"; exit 77; }
done
"$PYTHON" -c 'import numpy' 2>/dev/null || { echo "SKIP e2e_issue7: no numpy for $PYTHON"; exit 77; }
T=$(mktemp -d /tmp/octd-e2e-issue7.XXXXXX)
N=/octe2e-i7-$$
. tests/helpers/e2e_lib.sh
E2E_LOGS=("$T/octd.log" "$T/octd2.log")
E2E_TAIL=15
M=1024 A=64 R=128
cd "$T" || exit 1

# ---- 1. data from octsim --------------------------------------------------------
"$BIN/octsim" --ring "$N-dump" --samples $M --ascans $A --lines 1 --frames 1 --distinct 1 \
    --quiet 2>sim.log || fail "octsim: $(cat sim.log)"
"$BIN/octctl" ring --ring "$N-dump" --dump frame.npy >dump.txt 2>&1 || fail "octctl ring --dump: $(cat dump.txt)"
rm -f "/dev/shm$N-dump"
grep -q "^dumped_shape=1,$A,$M" dump.txt || fail "dumped shape: $(grep dumped dump.txt)"
"$BIN/octsim" masks --samples $M --count $R --output masks.npy || fail "octsim masks"
"$BIN/octsim" masks --cms --samples $M --depths 64,128,256,384 --output cal.npy \
    --klin-out pos.npy --yaml snippet.yaml >snippet.out || fail "octsim masks --cms"
cmp -s snippet.yaml snippet.out || fail "--yaml differs from the printed snippet"
grep -q "^dispersion: {a2: [0-9.]*, a3: 0, k0: 0.49" snippet.yaml || fail "snippet: $(cat snippet.yaml)"
# mirrors: octsim's MSI mask generator (same optics) at bins 32, 64, ..., 480,
# one per A-scan of a float32 frame
"$BIN/octsim" masks --samples $M --count 16 --seed 99 --output mir16.npy || fail "octsim masks (mirrors)"
"$PYTHON" - <<'EOF' || fail "cannot make the mirror frame / stack"
import numpy as np
m = np.load("mir16.npy")
np.save("mirrors.npy", m[1:].reshape(1, 15, m.shape[1]).astype(np.float32))
f = np.load("frame.npy").astype(np.int64)
rng = np.random.default_rng(7)
# three different frames for the rolling background: scaled, shifted, noisy
st = [f, (f * 0.8 + 100).astype(np.int64), f + rng.integers(0, 300, f.shape)]
np.save("stack.npy", np.stack(st).clip(0, 65535).astype(np.uint16))
EOF
{
    cat <<EOF
methods: [cfd, msi, cms]
window: {type: hann}
freq_cutoff: 4
msi:
  masks: {file: masks.npy, count: $R}
  lag_window: [-2, 2]
products: [bscan, f32]
EOF
    cat snippet.yaml
} >p.yaml
sed '/^cms:/,/^  grid:/d; s/^methods: \[cfd, msi, cms\]/methods: [cfd, msi]/' p.yaml >p_nocms.yaml
grep -q "^cms:\|cms\]" p_nocms.yaml && fail "p_nocms.yaml still has cms: $(cat p_nocms.yaml)"
echo "ok   octsim: B-scan dumped from the ring, masks, CMS calibration, k-lin positions, snippet"

# ---- 2. octproc ------------------------------------------------------------------
proc() { # OUTDIR INPUT [args...]
    local o=$1 i=$2
    shift 2
    "$BIN/octproc" --profile p.yaml --input "$i" --backend "$BACKEND" --threads 2 --output "$o" "$@" \
        >"$o.log" 2>&1 || fail "octproc -> $o $*: $(cat "$o.log")"
}
proc out_f frame.npy
proc out_m mirrors.npy
proc out_m0 mirrors.npy --method cfd --set klin.interp=off --set dispersion.a2=0
proc out_c frame.npy --method cfd --set klin.interp=cubic --set klin.source=poly \
    --set klin.coefs=0.5,1000,20,-3 --set dispersion.a3=8
proc out_l frame.npy --method cfd --set klin.interp=linear --set dispersion.k0=0.45
proc out_r stack.npy --method cfd --set background=rolling:2 --set klin.interp=off --set dispersion.a2=0
proc out_p frame.npy --method cfd,cms --set background=fpn:8

"$PYTHON" - "$(sed -n 's/^dispersion: {a2: \([^,]*\),.*k0: \([^}]*\)}/\1 \2/p' snippet.yaml)" <<'EOF' || exit 1
import sys, numpy as np
a2, k0 = map(float, sys.argv[1].split())
M, F, R, W1, W2 = 1024, 4, 128, -2, 2
n = np.arange(M)
w = 0.5 - 0.5 * np.cos(2 * np.pi * n / (M - 1))
def fail(msg):
    print("FAIL:", msg); sys.exit(1)

# ---- float64 references, from the definitions in kernels/oct_engine.h ----
def resample(x, p, mode, T=21):
    i = np.floor(p).astype(np.int64)
    f = p - i
    g = lambda k: x[..., np.clip(k, 0, M - 1)]  # outside [0, M-1]: the edge sample
    if mode == "linear":
        return (1 - f) * g(i) + f * g(i + 1)
    if mode == "cubic":
        xm, x0, x1, x2 = g(i - 1), g(i), g(i + 1), g(i + 2)
        return (x0 + f / 2 * (x1 - xm) + f**2 / 2 * (2 * xm - 5 * x0 + 4 * x1 - x2)
                + f**3 / 2 * (3 * x0 - xm - 3 * x1 + x2))
    m0 = np.floor(p - (T - 1) / 2 + 0.5).astype(np.int64)
    return sum(g(m0 + s) * np.sinc(p - (m0 + s)) for s in range(T))
def cfd(x, p=None, mode=None, T=21, a2=0.0, a3=0.0, k0=0.5):
    y = resample(x, p, mode, T) if mode else x
    X = np.fft.fft(w * y, axis=-1)
    U = ((n >= F) & (n <= M // 2)).astype(float)
    z = np.fft.ifft(X * U, axis=-1)  # analytic signal
    u = n / M - k0
    I = np.abs(np.fft.fft(z * np.exp(-1j * (a2 * u**2 + a3 * u**3)), axis=-1))[..., :M // 2 + 1]
    I[..., :F] = 0
    return I.T  # [D][N]
def cms(x, cal, zc, grid):
    phi = []
    for c in cal:
        C = np.fft.fft(c - c.mean())
        kp = 1 + np.argmax(np.abs(C[1:M // 2]))
        lo = max(1, kp // 4)
        Af = np.zeros(M, complex)
        Af[lo:M // 2] = C[lo:M // 2]
        phi.append(np.unwrap(np.angle(np.fft.ifft(Af))))
    g, h = np.linalg.lstsq(np.stack([zc, np.ones_like(zc)], 1), np.array(phi), rcond=None)[0]
    c = np.exp(-1j * (grid[:, None] * g[None] + h[None]))
    H = ((n >= F) & (n <= M - F)).astype(float)
    q = w * np.fft.ifft(np.fft.fft(c, axis=-1) * H, axis=-1)
    return np.abs(x @ q.T).T
def msi(x, masks):
    H = ((n >= F) & (n <= M - F)).astype(float)
    P = np.fft.ifft(np.fft.fft(w * x, axis=1)[:, None, :] *
                    (H * np.conj(np.fft.fft(masks * w, axis=1)))[None], axis=2)
    return np.abs(P[:, :, np.arange(W1, W2 + 1) % M]).sum(axis=2).T
def fpn(x, G):
    S = x.shape[0]
    segs = [x] if S < G else [x[s * G:(s + 1) * G] for s in range(S // G)]
    mean = np.array([s.mean(0) for s in segs])
    ssd = np.array([((s - s.mean(0))**2).sum(0) for s in segs])
    return mean[np.argmin(ssd, axis=0), n]  # argmin: the lowest segment on ties
def check(name, got, ref):
    got = np.load(got).astype(np.float64)
    if got.shape != ref.shape:
        fail(f"{name}: shape {got.shape}, expected {ref.shape}")
    err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    print(f"ok   {name}: relative L2 error vs numpy float64 = {err:.2e}")
    if not err < 1e-4:
        fail(f"{name} differs from the float64 reference: {err:.3e}")

x = np.load("frame.npy")[0].astype(np.float64)
pos = np.load("pos.npy")
cal = np.load("cal.npy").astype(np.float64)
zc, grid = np.array([64.0, 128, 256, 384]), np.arange(512.0)
masks = np.load("masks.npy").astype(np.float64)
t = np.arange(M) / M
poly = 0.5 + 1000 * t + 20 * t**2 - 3 * t**3
check("bscan/cfd klin sinc 21 (file) + dispersion a2", "out_f/bscan_cfd.npy",
      cfd(x, pos, "sinc", 21, a2, 0, k0))
check("bscan/cfd klin linear (file) + dispersion k0 0.45", "out_l/bscan_cfd.npy",
      cfd(x, pos, "linear", 21, a2, 0, 0.45))
check("bscan/cfd klin cubic (polynomial) + dispersion a2, a3", "out_c/bscan_cfd.npy",
      cfd(x, poly, "cubic", 21, a2, 8.0, k0))
check("bscan/cms", "out_f/bscan_cms.npy", cms(x, cal, zc, grid))
check("bscan/msi", "out_f/bscan_msi.npy", msi(x, masks))
b = fpn(x, 8)
check("bscan/cfd background fpn:8", "out_p/bscan_cfd.npy", cfd(x - b, pos, "sinc", 21, a2, 0, k0))
check("bscan/cms background fpn:8", "out_p/bscan_cms.npy", cms(x - b, cal, zc, grid))
stack = np.load("stack.npy")[:, 0].astype(np.float64)
means = stack.mean(axis=1)
for f in range(3):
    bg = means[max(0, f - 1):f + 1].mean(axis=0)  # rolling mean of the last K = 2 frames
    check(f"bscan/cfd background rolling:2, frame {f}", f"out_r/{f:06d}/bscan_cfd.npy", cfd(stack[f] - bg))
# the FPN / rolling backgrounds must matter at all (else the checks above prove little)
if np.linalg.norm(cfd(x - b, pos, "sinc", 21, a2, 0, k0) - cfd(x, pos, "sinc", 21, a2, 0, k0)) < \
        1e-3 * np.linalg.norm(cfd(x, pos, "sinc", 21, a2, 0, k0)):
    fail("the FPN background changes nothing: a weak test")

# ---- physics: mirrors at bins 32..480 (one per A-scan) ----
def fwhm(a):
    k = int(np.argmax(a)); h = a[k] / 2
    l, r = k, k
    while l > 0 and a[l - 1] > h: l -= 1
    while r < len(a) - 1 and a[r + 1] > h: r += 1
    lx = l - 1 + (h - a[l - 1]) / (a[l] - a[l - 1]) if l > 0 else l
    rx = r + (a[r] - h) / (a[r] - a[r + 1]) if r < len(a) - 1 else r
    return rx - lx
c1, c0 = np.load("out_m/bscan_cfd.npy"), np.load("out_m0/bscan_cfd.npy")
cm, ms = np.load("out_m/bscan_cms.npy"), np.load("out_m/bscan_msi.npy")
step = (M // 2) // R  # MSI mask r is a mirror at CFD bin r * step
for j in range(15):
    z = 32 * (j + 1)
    got = {"cfd": np.argmax(c1[:, j]), "cfd-plain": np.argmax(c0[:, j]),
           "cms": np.argmax(cm[:, j]), "msi": np.argmax(ms[:, j]) * step}
    for k, v in got.items():
        if abs(int(v) - z) > (1 if k != "msi" else step // 2):
            fail(f"mirror at bin {z}: {k} peaks at {v}")
    w1, w0, wc = fwhm(c1[:, j]), fwhm(c0[:, j]), fwhm(cm[:, j])
    # hann window: ~2 bins; plain CFD is broadened by the k map and dispersion
    if not (w1 < 3.0 and wc < 3.0 and w0 > 2 * w1):
        fail(f"mirror at bin {z}: FWHM linearised+compensated CFD {w1:.2f}, CMS {wc:.2f}, "
             f"plain CFD {w0:.2f}")
    if j in (0, 7, 14):
        print(f"ok   mirror at bin {z}: peaks cfd/cms/msi {got['cfd']}/{got['cms']}/{got['msi']}, "
              f"FWHM linearised+compensated CFD {w1:.2f}, CMS {wc:.2f}, plain CFD {w0:.2f} bins")
# ---- physics: the layered sample, per A-scan ----
c1 = np.load("out_f/bscan_cfd.npy")[:M // 2].astype(np.float64)
cm = np.load("out_f/bscan_cms.npy").astype(np.float64)
ms = np.load("out_f/bscan_msi.npy").astype(np.float64)
top_c, top_m = np.argmax(c1, 0), np.argmax(cm, 0)
agree = np.mean(np.abs(top_c - top_m) <= 1)
print(f"ok   layered sample: brightest layer of CFD and CMS within 1 bin in {agree:.0%} of A-scans")
if agree < 0.9:
    fail(f"CFD and CMS put the brightest layer at different depths: {top_c} vs {top_m}")
# MSI has one depth per `step` bins: compare CFD smoothed and sampled on its
# grid.  Similar layers swap places as the brightest between methods of
# different depth responses, so compare the sample surface (first depth over
# 20% of the A-scan's maximum) and the shape of the depth profiles.
sm = np.apply_along_axis(lambda v: np.convolve(v, np.ones(step + 1) / (step + 1), "same"), 0, c1)[::step]
def surface(a):
    a = a.copy()
    a[:2] = 0  # below the cut-off F
    return np.argmax(a > 0.2 * a.max(axis=0), axis=0) * step
s_cfd, s_msi, s_cms = surface(sm), surface(ms), surface(cm[::step])
agree = np.mean(np.abs(s_cfd - s_msi) <= step)
agree_c = np.mean(np.abs(s_cfd - s_cms) <= step)
corr = np.median([np.corrcoef(sm[:, j], ms[:, j])[0, 1] for j in range(ms.shape[1])])
print(f"ok   layered sample: surface of CFD and MSI / CMS within {step} bins in {agree:.0%} / "
      f"{agree_c:.0%} of A-scans (at {s_cfd.min()}..{s_cfd.max()}), median depth-profile "
      f"correlation CFD-MSI {corr:.3f}")
if agree < 0.8 or agree_c < 0.8 or corr < 0.8:
    fail("MSI and CFD disagree on the layers")
EOF

# bad values: non-zero exit, a message naming the problem
expect_fail() { # fragment args...
    local frag=$1 out
    shift
    out=$("$BIN/octproc" --backend "$BACKEND" --input frame.npy --output bad "$@" 2>&1) && fail "octproc $* succeeded"
    echo "$out" | grep -qi -- "$frag" || fail "octproc $*: message lacks '$frag': $out"
    echo "ok   octproc $*: $(echo "$out" | head -1)"
}
expect_fail "taps" --profile p.yaml --set klin.taps=1
expect_fail "cms" --profile p_nocms.yaml --method cms
expect_fail "increase" --profile p.yaml --set klin.source=poly --set klin.coefs=1000,-900,0,0
[ ! -e bad ] || fail "a failed octproc run left its output directory"

# ---- 3. octd ---------------------------------------------------------------------
ini() { # SUFFIX PROFILE
    cat <<EOF
[engine]
backend = $BACKEND
threads = 1
[ring]
frames = $N-frames
control = $N-control$1
status = $N-status$1
[publish]
endpoint = ipc://$T/pub$1
[profile]
path = $T/$2
EOF
}
ini "" p.yaml >octd.ini
ini 2 p_nocms.yaml >octd2.ini
"$BIN/octd" --config octd.ini --check-config >/dev/null 2>&1 || fail "--check-config: $("$BIN/octd" --config octd.ini --check-config 2>&1)"
"$BIN/octd" --config octd.ini 2>octd.log &
PIDS+=($!)
OCTD=$!
"$BIN/octd" --config octd2.ini 2>octd2.log &
PIDS+=($!)
OCTD2=$!
# the dumped frame again and again: octd's images must equal octproc's
"$BIN/octsim" replay frame.npy --ring "$N-frames" --loop --rate $((A * 20)) --quiet 2>>sim.log &
PIDS+=($!)
SIM=$!
CTL=("$BIN/octctl" --control "$N-control" --status "$N-status" --timeout 5)
CTL2=("$BIN/octctl" --control "$N-control2" --status "$N-status2" --timeout 5)
st() { "${CTL[@]}" status 2>/dev/null | sed -n "s/^$1=//p"; }
wait_for 15 '[ "$(st frames_processed)" -gt 2 ] 2>/dev/null' || fail "octd processes no frames"
wait_for 10 '[ "$("${CTL2[@]}" status 2>/dev/null | sed -n "s/^frames_processed=//p")" -gt 0 ] 2>/dev/null' ||
    fail "the second octd processes no frames"
"$BIN/octgrab" --endpoint "ipc://$T/pub" --topic bscan/ --count 9 --timeout 10 --save-max 1 \
    --output g1 >grab1.txt ||
    fail "octgrab: $(tail -3 grab1.txt)"
for m in cfd msi cms; do
    grep -q "^bscan/$m/f32 .*shape \[$([ $m = cfd ] && echo $((M / 2 + 1)) || { [ $m = msi ] && echo $R || echo 512; }),$A\]" grab1.txt ||
        fail "no bscan/$m/f32 of the right shape: $(head -12 grab1.txt)"
done
cat >cmp.py <<'EOF'
import sys, numpy as np
for a, b in zip(sys.argv[1::2], sys.argv[2::2]):
    x, y = np.load(a).astype(np.float64), np.load(b).astype(np.float64)
    assert x.shape == y.shape, (a, x.shape, b, y.shape)
    err = np.linalg.norm(x - y) / np.linalg.norm(y)
    assert err < 1e-5 and np.abs(y).max() > 0, f"{a} vs {b}: relative L2 error {err}"
EOF
for m in cfd msi cms; do
    "$PYTHON" cmp.py g1/bscan_${m}_f32_*.npy out_f/bscan_$m.npy || fail "octd's bscan/$m/f32 differs from octproc's"
done
echo "ok   octd (CPU) with the profile: bscan/cfd, bscan/msi, bscan/cms published, equal to octproc's"

gen=$(st applied_gen)
apply() { # KEY=VALUE [expected get line]
    local out g want=${2:-$1}
    out=$("${CTL[@]}" set "$1" 2>&1) || fail "octctl set $1: $out"
    g=$(echo "$out" | sed -n 's/^applied (generation \([0-9]*\)).*/\1/p')
    [ -n "$g" ] && [ "$g" -gt "$gen" ] || fail "octctl set $1: '$out' (last generation $gen)"
    [ "$(st applied_gen)" -ge "$g" ] || fail "set $1: status applied_gen $(st applied_gen) < $g"
    gen=$g
    local key=${want%%=*}
    [ "$("${CTL[@]}" get "$key")" = "$want" ] || fail "set $1: get $key shows '$("${CTL[@]}" get "$key")', expected '$want'"
}
apply klin.interp=cubic
apply klin.taps=31
apply klin.interp=sinc
apply klin.coefs=0.5,1000,20,-3
apply klin.source=poly
apply klin.source=file
apply dispersion.a2=30.5
apply dispersion.a3=-2.25
apply dispersion.k0=0.4375  # exact in f32: get prints %.9g
apply background=rolling:4
apply background=fpn:8
apply methods=cfd,msi
apply methods=cfd,msi,cms
apply klin.source=poly
echo "ok   octctl set of every new name applied (generation $gen) and shown by get"
p0=$(st frames_processed)
wait_for 5 '[ "$(st frames_processed)" -gt $((p0 + 3)) ]' || fail "no frames after the changes"
"$BIN/octgrab" --endpoint "ipc://$T/pub" --topic bscan/cms/f32 --topic bscan/cfd/f32 --count 4 --timeout 10 \
    --save-max 4 --output g2 >grab2.txt || fail "no bscan/cms after the changes: $(tail -3 grab2.txt)"
awk -v g="$gen" '{for (i = 1; i < NF; i++) if ($i == "gen" && $(i + 1) < g) bad = 1} END {exit bad}' grab2.txt ||
    fail "bscan/cms images carry an older params_gen than $gen: $(cat grab2.txt)"
grep -q "^bscan/cms" grab2.txt || fail "octgrab bscan/cms printed: $(cat grab2.txt)"
# the values reached the engine: the same result as octproc with them
proc out_d frame.npy --method cfd,cms --set klin.taps=31 --set klin.coefs=0.5,1000,20,-3 \
    --set klin.source=poly --set dispersion.a2=30.5 --set dispersion.a3=-2.25 \
    --set dispersion.k0=0.4375 --set background=fpn:8
for m in cfd cms; do
    "$PYTHON" cmp.py "$(ls g2/bscan_${m}_f32_*.npy | tail -1)" out_d/bscan_$m.npy ||
        fail "octd's bscan/$m/f32 at generation $gen differs from octproc with the same values"
done
echo "ok   frames keep coming ($p0 -> $(st frames_processed)), bscan/cms at generation $gen"

reject() { # CTL-ARRAY-NAME fragment KEY=VALUE...
    local -n ctl=$1
    local frag=$2 out rc r0 r1
    shift 2
    r0=$("${ctl[@]}" status | sed -n 's/^rejected_gen=//p')
    out=$("${ctl[@]}" set "$@" 2>&1)
    rc=$?
    [ $rc -ne 0 ] || fail "octctl set $* was accepted: $out"
    echo "$out" | grep -qi -- "$frag" || fail "octctl set $*: message lacks '$frag': $out"
    if echo "$out" | grep -q "rejected"; then # octd's rejection: the status block says why
        r1=$("${ctl[@]}" status | sed -n 's/^rejected_gen=//p')
        [ "$r1" != "$r0" ] || fail "set $*: rejected_gen did not change"
        "${ctl[@]}" status | grep "^rejected_reason=" | grep -qi -- "$frag" ||
            fail "set $*: status rejected_reason: $("${ctl[@]}" status | grep rejected_reason)"
    fi
    echo "ok   rejected (exit $rc): set $* -> $(echo "$out" | head -1)"
}
before=$("${CTL[@]}" get)
reject CTL taps klin.taps=1
reject CTL "background" background=rolling:0
reject CTL "increase" klin.source=poly klin.coefs=1000,-900,0,0
reject CTL2 cms methods=cfd,msi,cms
kill -0 $OCTD 2>/dev/null || fail "octd died"
kill -0 $OCTD2 2>/dev/null || fail "the second octd died"
[ "$("${CTL[@]}" get)" = "$before" ] || fail "rejected values changed the control values: $(diff <(echo "$before") <("${CTL[@]}" get))"
p0=$(st frames_processed)
wait_for 5 '[ "$(st frames_processed)" -gt $((p0 + 3)) ]' || fail "no frames after the rejections"
"$BIN/octgrab" --endpoint "ipc://$T/pub" --topic bscan/cms --count 1 --timeout 10 >grab3.txt ||
    fail "no bscan/cms after the rejections"
echo "ok   octd alive, last good values kept, frames and bscan/cms keep coming"

# review holds the rolling history: three different frames in turn feed a
# rolling background; the kept frame, re-processed at least once a second
# in review, must give the same image every time (were it entering the
# history, the background would drift towards its own mean)
kill "$SIM" 2>/dev/null
wait "$SIM" 2>/dev/null
"$BIN/octsim" replay stack.npy --ring "$N-frames" --loop --rate $((A * 20)) --quiet 2>>sim.log &
PIDS+=($!)
apply methods=cfd,msi
apply background=rolling:64
p0=$(st frames_processed)
wait_for 15 '[ "$(st frames_processed)" -gt $((p0 + 12)) ]' || fail "no frames from the stack"
"${CTL[@]}" snapshot | grep -q ok || fail "snapshot"
"${CTL[@]}" review | grep -q ok || fail "review"
"$BIN/octgrab" --endpoint "ipc://$T/pub" --topic bscan/cfd/f32 --count 1 --timeout 10 --save-max 1 \
    --output r1 >grabr1.txt || fail "no review image: $(tail -3 grabr1.txt)"
p1=$(st frames_reprocessed) # review re-processing is not counted as ring frames
wait_for 10 '[ "$(st frames_reprocessed)" -gt $((p1 + 2)) ]' || fail "review does not re-process"
"$BIN/octgrab" --endpoint "ipc://$T/pub" --topic bscan/cfd/f32 --count 1 --timeout 10 --save-max 1 \
    --output r2 >grabr2.txt || fail "no later review image: $(tail -3 grabr2.txt)"
"$PYTHON" - r1/bscan_cfd_f32_*.npy r2/bscan_cfd_f32_*.npy <<'EOF' || fail "the review image drifted"
import sys, numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
assert a.shape == b.shape and np.array_equal(a, b), f"max difference {np.abs(a - b).max()}"
EOF
"${CTL[@]}" online | grep -q ok || fail "online"
echo "ok   review with a rolling background: the kept frame gives the same image after $(($(st frames_reprocessed) - p1)) re-processings"
echo "PASS e2e_issue7"
exit 0
