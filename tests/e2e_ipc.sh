#!/bin/bash
# e2e_ipc.sh - the frame ring across programs and languages:
#  Python producer (tools/python/octring.py) -> C consumer (octctl ring --dump),
#  octsim -> octctl ring --dump, octsim masks, and clear refusals.
# Exit 0 pass, 77 skip, else fail.
set -u
BIN=${BIN:-bin}
PYTHON=${PYTHON:-/usr/bin/python3}
for p in octsim octctl; do
    [ -x "$BIN/$p" ] || { echo "SKIP e2e_ipc: $BIN/$p not built"; exit 77; }
done
"$PYTHON" -c 'import numpy' 2>/dev/null || { echo "SKIP e2e_ipc: no numpy for $PYTHON"; exit 77; }
TMP=$(mktemp -d /tmp/octd-e2e-ipc.XXXXXX)
R=/octe2e-$$
cleanup() {
    [ -n "${PRODPID:-}" ] && kill "$PRODPID" 2>/dev/null
    rm -f /dev/shm"$R"-py /dev/shm"$R"-sim /dev/shm"$R"-bad /dev/shm"$R"-live
    rm -rf "$TMP"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
export PYTHONPATH=tools/python

# 1. Python producer, every sample type: the dump is the newest frame, bit-exact
for t in u16 i16 f32; do
    "$PYTHON" - "$R-py" "$t" <<'PY' || fail "python producer ($t)"
import sys, numpy as np
from octring import RingProducer
name, t = sys.argv[1], sys.argv[2]
p = RingProducer(name, samples=128, ascans=20, lines=3, sample_type=t, slots=4)
for k in range(7):
    rng = np.random.default_rng(k)
    p.write(rng.integers(-2000, 4000, size=(3, 20, 128)).astype(p.dtype), frame_id=100 + k)
p.close()
PY
    "$BIN/octctl" ring --ring "$R-py" --dump "$TMP/py_$t.npy" >"$TMP/py_$t.txt" || fail "octctl ring ($t)"
    grep -q "^state=CLOSED" "$TMP/py_$t.txt" || fail "state not CLOSED ($t)"
    grep -q "^write_seq=7" "$TMP/py_$t.txt" || fail "write_seq ($t)"
    grep -q "^dumped_frame_id=106" "$TMP/py_$t.txt" || fail "not the newest frame ($t)"
    "$PYTHON" - "$TMP/py_$t.npy" "$t" <<'PY' || fail "dump content ($t)"
import sys, numpy as np
a = np.load(sys.argv[1]); t = sys.argv[2]
want = np.random.default_rng(6).integers(-2000, 4000, size=(3, 20, 128)).astype({"u16": "<u2", "i16": "<i2", "f32": "<f4"}[t])
assert a.shape == (3, 20, 128) and a.dtype == want.dtype, (a.shape, a.dtype)
assert np.array_equal(a, want), "payload differs"
PY
    echo "ok python producer -> C consumer ($t)"
done

# 2. a live Python producer: every dump is one whole frame (frame_id tells which)
"$PYTHON" - "$R-live" <<'PY' &
import sys, time, numpy as np
from octring import RingProducer
p = RingProducer(sys.argv[1], samples=1024, ascans=256, lines=4, sample_type="u16", slots=4)
t0 = time.time(); k = 0
while time.time() - t0 < 4:
    v = p.begin(); v[...] = k % 65536; del v; p.commit(frame_id=k); k += 1
    time.sleep(0.0005)  # still laps the reader often, but leaves it a chance under load
p.close(unlink=True)
PY
PRODPID=$!
sleep 0.5
for i in 1 2 3; do
    "$BIN/octctl" ring --ring "$R-live" --dump "$TMP/live.npy" >"$TMP/live.txt" || fail "live dump"
    grep -q "^state=READY" "$TMP/live.txt" || fail "live state"
    fid=$(sed -n 's/^dumped_frame_id=//p' "$TMP/live.txt")
    "$PYTHON" -c "
import numpy as np, sys
a = np.load('$TMP/live.npy'); u = np.unique(a)
assert len(u) == 1 and int(u[0]) == $fid % 65536, (u[:5], $fid)" || fail "live dump torn"
    rate=$(sed -n 's/^write_rate=\([0-9.]*\).*/\1/p' "$TMP/live.txt")
    echo "ok live dump $i: frame $fid uniform, producer at $rate frames/s"
done
wait "$PRODPID"; PRODPID=

# 3. octsim -> octctl ring --dump: ADC range, structure
"$BIN/octsim" --ring "$R-sim" --samples 512 --ascans 64 --lines 16 --type u16 --shift 4 \
    --frames 6 --slots 4 --seed 3 --sample retina --quiet || fail "octsim"
"$BIN/octctl" ring --ring "$R-sim" --dump "$TMP/sim.npy" >"$TMP/sim.txt" || fail "octctl ring (octsim)"
grep -q "^geometry=16x64x512" "$TMP/sim.txt" || fail "octsim geometry"
grep -q "^sample_shift=4" "$TMP/sim.txt" || fail "octsim shift"
"$BIN/octsim" masks --samples 512 --count 64 --output "$TMP/masks.npy" || fail "octsim masks"
"$PYTHON" - "$TMP/sim.npy" "$TMP/masks.npy" <<'PY' || fail "octsim data"
import sys, numpy as np
a = np.load(sys.argv[1]); m = np.load(sys.argv[2])
assert a.shape == (16, 64, 512) and a.dtype == np.uint16
assert (a & 15).max() == 0, "shift 4: low bits must be 0"
x = (a >> 4).astype(np.float64)
assert x.max() <= 4095 and x.std() > 10, (x.max(), x.std())
# CFD of the A-scans: layers stand far above the noise floor
X = x - x.mean(axis=2, keepdims=True)
prof = np.abs(np.fft.rfft(X * np.hanning(512), axis=2)).mean(axis=(0, 1))[8:256]
assert prof.max() > 8 * np.median(prof[-60:]), (prof.max(), np.median(prof[-60:]))
# masks: mask r peaks at CFD bin ~ r*(M/2)/R
assert m.shape == (64, 512) and m.dtype == np.float32
for r in (8, 20, 40, 60):
    pk = np.argmax(np.abs(np.fft.rfft(m[r] * np.hanning(512)))[2:]) + 2
    assert abs(pk - r * 256 / 64) <= 3 + 0.05 * pk, (r, pk)
PY
echo "ok octsim -> octctl ring --dump, octsim masks"

# 4. refusals with clear messages
out=$("$BIN/octctl" ring --ring "$R-none" 2>&1) && fail "missing ring accepted"
echo "$out" | grep -q "does not exist" || fail "missing ring message: $out"
"$PYTHON" -c "
import os
f = os.open('/dev/shm$R-bad', os.O_CREAT | os.O_RDWR, 0o600)
os.write(f, b'NOTARING' + bytes(8192)); os.close(f)"
out=$("$BIN/octctl" ring --ring "$R-bad" 2>&1) && fail "bad magic accepted"
echo "$out" | grep -q "magic" || fail "bad magic message: $out"
"$PYTHON" - "$R-bad" <<'PY'
import sys, struct, os
from octring import RingProducer
p = RingProducer(sys.argv[1], samples=64, ascans=2, lines=1, heartbeat_thread=False)
struct.pack_into("<I", p._mm, 8, 2)      # abi_major = 2
p._mm.flush()
PY
out=$("$BIN/octctl" ring --ring "$R-bad" 2>&1) && fail "ABI 2 accepted"
echo "$out" | grep -q "abi_major = 2" || fail "ABI message: $out"
"$PYTHON" - "$R-bad" <<'PY'
import sys, struct
from octring import RingProducer
p = RingProducer(sys.argv[1], samples=64, ascans=2, lines=1, heartbeat_thread=False)
struct.pack_into("<I", p._mm, 40, 1000)  # samples = 1000
PY
out=$("$BIN/octctl" ring --ring "$R-bad" 2>&1) && fail "bad geometry accepted"
echo "$out" | grep -q "samples = 1000" || fail "geometry message: $out"
echo "ok refusals: missing, magic, ABI, geometry"
exit 0
