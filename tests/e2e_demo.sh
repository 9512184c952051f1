#!/bin/bash
# e2e_demo.sh - `make demo` (tools/build/demo.sh) into a scratch directory:
# it must exit 0, print where the images are, and the images must show the
# simulated layers: in every cross-section (xsec_h/xsec_v, both methods) the
# mean gray level over depth varies (bright layers, dark gaps), and en-face
# images are not flat.  Exit 0 pass, 77 skip, else fail.
set -u
BIN=${BIN:-bin}
PYTHON=${PYTHON:-/usr/bin/python3}
"$PYTHON" -c 'import numpy' 2>/dev/null || { echo "SKIP e2e_demo: no numpy for $PYTHON"; exit 77; }
T=$(mktemp -d /tmp/octd-e2e-demo.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
DEMO_OUT="$T/demo" BIN="$BIN" timeout 60 tools/build/demo.sh >"$T/demo.txt" 2>&1 ||
    fail "demo.sh: $(tail -8 "$T/demo.txt")"
cat "$T/demo.txt"
grep -q "images in $T/demo/images/" "$T/demo.txt" || fail "demo does not say where the images are"
ls /dev/shm | grep -q "^octd-demo-" && fail "demo left shared memory behind: $(ls /dev/shm | grep octd-demo)"
"$PYTHON" - "$T/demo/images" <<'PY' || fail "the demo images do not show the layers"
import sys, glob, zlib, struct, numpy as np
def png(path):  # 8-bit gray, non-interlaced
    b = open(path, "rb").read()
    pos, idat = 8, b""
    while pos < len(b):
        ln, typ = struct.unpack(">I4s", b[pos:pos + 8])
        if typ == b"IHDR":
            w, h = struct.unpack(">II", b[pos + 8:pos + 16])
        elif typ == b"IDAT":
            idat += b[pos + 8:pos + 8 + ln]
        pos += 12 + ln
    raw = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(h, w + 1).astype(np.int32)
    out, prev = np.zeros((h, w), np.int32), np.zeros(w, np.int32)
    for y in range(h):
        f, x = raw[y, 0], raw[y, 1:].copy()
        for i in range(w):
            a = x[i - 1] if i else 0
            c = prev[i - 1] if i else 0
            p = a + prev[i] - c
            pa, pb, pc = abs(p - a), abs(p - prev[i]), abs(p - c)
            pr = a if pa <= pb and pa <= pc else prev[i] if pb <= pc else c
            x[i] = (x[i] + [0, a, prev[i], (a + prev[i]) // 2, pr][f]) & 255
        out[y] = prev = x
    return out
d = sys.argv[1]
for kind in ("xsec_h", "xsec_v"):
    for m in ("cfd", "msi"):
        f = sorted(glob.glob(f"{d}/{kind}_{m}_0*.png"))
        assert f, f"no {kind}/{m} image"
        img = png(f[0])
        prof = img.mean(axis=1)  # mean over A-scans, per depth
        lo, hi = np.percentile(prof, [10, 90])
        print(f"{f[0].split('/')[-1]}: {img.shape}, depth profile p10 {lo:.0f} p90 {hi:.0f}")
        assert hi - lo > 30, f"{f[0]}: no layers (depth profile p10 {lo:.0f} p90 {hi:.0f})"
for m in ("cfd", "msi"):
    f = sorted(glob.glob(f"{d}/enface_{m}_0*_*.png"))
    assert len(f) >= 8, f"enface/{m}: {len(f)} slices"
    s = [png(x).std() for x in f[:8]]
    assert max(s) > 10, f"enface/{m}: flat slices {s}"
PY
echo "PASS e2e_demo"
