#!/bin/bash
# e2e_daemon.sh - octd end to end on the CPU backend (issue 4, SPEC 3.2-6, 8):
#  --check-config exit codes; octsim replay of a known frame -> octd -> octgrab,
#  images compared with octproc's for the same frame (u8 and f32); control
#  changes applied on the next frame (params_gen); a rejected generation;
#  modes and commands (snapshot, review, save raw/images, refusals, a failing
#  save leaves nothing); SIGHUP with a good and a bad profile; the sd_notify
#  protocol on an abstract socket (READY, STATUS, WATCHDOG, RELOADING,
#  STOPPING); a ring restart with a new geometry; no subscriber; SIGTERM
#  within a second.  Also: data files named by a profile without geometry
#  are checked (missing / unparsable: 78); a publish endpoint in use exits 69,
#  not 78; control values validated before any ring; every SPEC 6 header
#  field of a B-scan and an en-face message.  A sub-check that cannot run
#  here prints "SKIP (part): ..." (the script may still pass).
#  Exit 0 pass, 77 skip, else fail.  KEEP=1 keeps $T.
set -u
BIN=${BIN:-bin}
PYTHON=${PYTHON:-/usr/bin/python3}
for p in octd octsim octctl octgrab octproc; do
    [ -x "$BIN/$p" ] || { echo "SKIP e2e_daemon: $BIN/$p not built"; exit 77; }
done
"$PYTHON" -c 'import numpy' 2>/dev/null || { echo "SKIP e2e_daemon: no numpy for $PYTHON"; exit 77; }
T=$(mktemp -d /tmp/octd-e2e-daemon.XXXXXX)
N=/octe2e-d$$
. tests/helpers/e2e_lib.sh
E2E_TAIL=25
e2e_cleanup_extra() { [ -n "${MOUNTED:-}" ] && umount "$MOUNTED"; }
CTL=("$BIN/octctl" --control "$N-control" --status "$N-status" --timeout 5)
st() { "${CTL[@]}" status | sed -n "s/^$1=//p"; }

# ---- data: a B-scan of random fringes (u16) and MSI masks -------------------
M=256 A=64 R=16
"$PYTHON" - "$T" $M $A $R <<'EOF' || fail "cannot make the test data"
import sys, numpy as np
t, M, A, R = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = np.random.default_rng(4711)
n = np.arange(M)
env = 1500 + 800 * np.exp(-0.5 * ((n - M / 2) / (M / 5)) ** 2)
def fr(d, a):
    return env + a * np.cos(2 * np.pi * d * n / M + rng.uniform(0, 6.28))
f = np.stack([fr(rng.integers(10, 100), 600) + fr(rng.integers(20, 120), 300) - env
              + rng.normal(0, 30, M) for _ in range(A)])
np.save(f"{t}/frame.npy", f.clip(0, 4095).astype(np.uint16).reshape(1, A, M))
np.save(f"{t}/masks.npy", np.stack([fr(4 + 7 * r, 500) for r in range(R)]).astype(np.float32))
EOF
profile() { # gsc
    cat <<EOF
methods: [cfd, msi]
window: {type: hann}
freq_cutoff: 4
msi:
  masks: {file: masks.npy, count: $R}
  lag_window: [-3, 3]
enface: {start: 10, step: 20, count: 4}
xsec: {h_index: 0, v_index: 5}
scale: log
display:
  bscan: {gsc: $1, contrast: 2, brightness: -80}
  enface: {gsc: 0.00002}
  confocal: {gsc: 0.000005}
products: [bscan, f32]
EOF
}
profile 1 >"$T/profile.yaml"
mkdir -p "$T/save"
cat >"$T/octd.ini" <<EOF
[engine]
backend = cpu
threads = 1
[ring]
frames = $N-frames
control = $N-control
status = $N-status
policy = latest
zero_copy = ${OCTD_ZERO_COPY:-auto}
[publish]
endpoint = ipc://$T/pub
[profile]
path = $T/profile.yaml
[save]
directory = $T/save
[log]
level = debug
EOF

# ---- 1. --check-config -------------------------------------------------------
"$BIN/octd" --config "$T/octd.ini" --check-config >/dev/null 2>&1 || fail "--check-config of a good configuration"
sed 's/^policy = latest/policy = latest\nbogus = 1/' "$T/octd.ini" >"$T/bad.ini"
"$BIN/octd" --config "$T/bad.ini" --check-config >/dev/null 2>"$T/bad.txt"
rc=$?
[ $rc = 78 ] || fail "--check-config of an unknown key: exit $rc, not 78"
grep -q "bad.ini:9.*bogus" "$T/bad.txt" || fail "the message does not name file, line and key: $(cat "$T/bad.txt")"
sed "s#$T/profile.yaml#$T/badprof.yaml#" "$T/octd.ini" >"$T/bad2.ini"
profile 1 | sed 's/lag_window: \[-3, 3\]/lag_window: [3, -3]/' >"$T/badprof.yaml"
"$BIN/octd" --config "$T/bad2.ini" --check-config >/dev/null 2>"$T/bad2.txt"
rc=$?
[ $rc = 78 ] || fail "--check-config of a bad profile: exit $rc"
grep -q "badprof.yaml:6.*lag_window" "$T/bad2.txt" || fail "profile error message: $(cat "$T/bad2.txt")"
"$BIN/octd" --config "$T/none.ini" --check-config >/dev/null 2>&1
[ $? = 78 ] || fail "--check-config of a missing file"
# [log] level filters: a missing save directory is a warning (<4>)
sed "s#^directory = .*#directory = $T/nosuchdir#; s#^level = debug#level = warning#" "$T/octd.ini" >"$T/lw.ini"
sed "s#^level = warning#level = err#" "$T/lw.ini" >"$T/le.ini"
"$BIN/octd" --config "$T/lw.ini" --check-config >/dev/null 2>"$T/lw.txt" || fail "check-config lw.ini"
"$BIN/octd" --config "$T/le.ini" --check-config >/dev/null 2>"$T/le.txt" || fail "check-config le.ini"
grep -q "^<4>octd: .*nosuchdir" "$T/lw.txt" || fail "level warning: no <4> warning: $(cat "$T/lw.txt")"
! grep -q "^<[4-7]>" "$T/le.txt" || fail "level err lets through: $(cat "$T/le.txt")"
echo "ok   --check-config: 0 / 78 with file:line:key"
# data files of a profile without geometry: missing or unparsable -> 78 naming key and file
sed "s#$T/profile.yaml#$T/dataprof.yaml#" "$T/octd.ini" >"$T/data.ini"
for bad in missing garbage truncated rows; do
    profile 1 | sed "s#file: masks.npy#file: $bad.npy#" >"$T/dataprof.yaml"
    case $bad in
    garbage) echo "not an npy file" >"$T/$bad.npy" ;;
    truncated) head -c 200 "$T/masks.npy" >"$T/$bad.npy" ;;
    rows) "$PYTHON" -c "import numpy as n; n.save('$T/$bad.npy', n.ones(($R + 1, $M), n.float32))" ;;
    esac
    "$BIN/octd" --config "$T/data.ini" --check-config >/dev/null 2>"$T/data.txt"
    rc=$?
    [ $rc = 78 ] || fail "--check-config with a $bad mask file (no geometry): exit $rc, not 78"
    grep -q "dataprof.yaml:[0-9][0-9]*: msi.masks.file.*$bad.npy" "$T/data.txt" ||
        fail "$bad mask file: the message names no file, line and key: $(cat "$T/data.txt")"
    # and octd itself refuses to start on it
    if [ $bad = missing ]; then
        "$BIN/octd" --config "$T/data.ini" >/dev/null 2>&1
        rc=$?
        [ $rc = 78 ] || fail "octd started with a missing mask file: exit $rc, not 78"
    fi
done
profile 1 | sed 's#^background:.*##; s#^scale: log#scale: log\nbackground: {mode: reference, reference: noref.npy}#' >"$T/dataprof.yaml"
"$BIN/octd" --config "$T/data.ini" --check-config >/dev/null 2>"$T/data.txt"
[ $? = 78 ] && grep -q "dataprof.yaml:[0-9][0-9]*: background.reference.*noref.npy" "$T/data.txt" ||
    fail "missing background.reference (no geometry) passes or is not named: $(cat "$T/data.txt")"
echo "ok   --check-config without geometry: missing / unparsable / wrong-row mask file and missing reference: 78 naming file, line and key"
# a start-up failure that is not a configuration error: exit 69, not 78
PORT_FILE="$T/port"
"$PYTHON" - "$PORT_FILE" <<'EOF2' &
import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(1)
open(sys.argv[1] + ".tmp", "w").write(str(s.getsockname()[1]))
import os; os.rename(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(20)
EOF2
HOLDER=$!
PIDS+=($HOLDER)
wait_for 5 '[ -s "$PORT_FILE" ]' || fail "port holder"
sed -e "s#^endpoint = .*#endpoint = tcp://127.0.0.1:$(cat "$PORT_FILE")#" -e "s#$N-#$N-busy-#g" "$T/octd.ini" >"$T/busy.ini"
"$BIN/octd" --config "$T/busy.ini" --check-config >/dev/null 2>&1 || fail "busy.ini should be a valid configuration"
timeout 10 "$BIN/octd" --config "$T/busy.ini" >/dev/null 2>"$T/busy.txt"
rc=$?
rm -f "/dev/shm$N-busy-control" "/dev/shm$N-busy-status"
kill $HOLDER 2>/dev/null
[ $rc = 69 ] || fail "octd with its publish endpoint in use: exit $rc, not 69 (EX_UNAVAILABLE): $(tail -2 "$T/busy.txt")"
echo "ok   publish endpoint in use at start: exit 69, not 78 ($(grep -o 'tcp://[^ ]*.*' "$T/busy.txt" | head -1 | cut -c1-80))"

# ---- 2. start: sd_notify listener on an abstract socket, octd, producer ----
"$PYTHON" - "@octe2e-notify-$$" "$T/notify.txt" <<'EOF' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind("\0" + sys.argv[1][1:])
open(sys.argv[2] + ".ready", "w").close()
with open(sys.argv[2], "a") as f:
    s.settimeout(60)
    while True:
        try:
            m = s.recv(4096).decode()
        except socket.timeout:
            break
        f.write("%.3f %s\n" % (time.monotonic(), m.replace("\n", "|")))
        f.flush()
EOF
PIDS+=($!)
wait_for 5 '[ -f "$T/notify.txt.ready" ]' || fail "notify listener"
NOTIFY_SOCKET="@octe2e-notify-$$" WATCHDOG_USEC=400000 "$BIN/octd" --config "$T/octd.ini" 2>"$T/octd.log" &
OCTD=$!
wait_for 5 'grep -q "READY=1" "$T/notify.txt" 2>/dev/null' || fail "no READY=1"
grep -q "READY=1.*waiting for ring" "$T/notify.txt" || fail "READY without 'waiting for ring'"
[ "$(st state)" = online ] || fail "state $(st state) before the ring"
# no ring yet (no engine, no geometry in the profile): control values are
# still validated, with the reason in the status block; valid ones apply
for kv in lag_window=2,-2 freq_cutoff=-5 window=tukey:2 xsec.h_index=-1 lag_window=-5000,5000 methods=cms; do
    out=$("${CTL[@]}" set "$kv")
    rc=$?
    [ $rc = 1 ] || fail "no ring: octctl set $kv: exit $rc ($out), not 1"
    echo "$out" | grep -q "^rejected (generation [0-9]*): ${kv%%[.=_]*}" || fail "no ring: set $kv: $out"
    [ "$(st rejected_reason)" = "${out#*: }" ] || fail "no ring: status rejected_reason '$(st rejected_reason)' for $kv"
done
out=$("${CTL[@]}" set freq_cutoff=6 lag_window=-5,5) || fail "no ring: a valid generation: $out"
echo "$out" | grep -q "^applied" || fail "no ring: valid set printed $out"
[ "$("${CTL[@]}" get freq_cutoff lag_window | tr '\n' ' ')" = "freq_cutoff=6 lag_window=-5,5 " ] || fail "no ring: values not applied"
"${CTL[@]}" set freq_cutoff=4 lag_window=-3,3 >/dev/null || fail "no ring: restoring the profile's values"
echo "ok   no ring yet: invalid control values rejected with the reason (lag order/bounds, F < 0, tukey alpha, xsec < 0, cms), valid ones applied"
[ "$(stat -c %a "/dev/shm$N-control")" = 660 ] || fail "control block mode $(stat -c %a "/dev/shm$N-control")"
[ "$(stat -c %a "/dev/shm$N-status")" = 664 ] || fail "status block mode $(stat -c %a "/dev/shm$N-status")"
"$BIN/octsim" replay "$T/frame.npy" --ring "$N-frames" --loop --rate $((A * 25)) --quiet 2>"$T/sim.log" &
SIM=$!
PIDS+=($SIM)
wait_for 10 '[ "$(st frames_processed)" -gt 2 ] 2>/dev/null' || fail "octd processes no frames"
echo "ok   octd started (READY=1), frames processed: $(st frames_processed)"

# ---- 3. images equal octproc's for the same frame ------------------------------
"$BIN/octproc" --profile "$T/profile.yaml" --input "$T/frame.npy" --backend cpu --output "$T/ref" \
    >/dev/null || fail "octproc"
"$BIN/octgrab" --endpoint "ipc://$T/pub" --topic bscan/ --count 8 --timeout 10 --save-max 1 \
    --output "$T/g1" >"$T/g1.txt" || fail "octgrab: $(tail -3 "$T/g1.txt")"
cat >"$T/cmp.py" <<'EOF'
import sys, zlib, struct, numpy as np
def png(path):  # 8-bit gray, non-interlaced (what octd/octproc write)
    b = open(path, "rb").read()
    assert b[:8] == b"\x89PNG\r\n\x1a\n", path
    pos, idat, w = 8, b"", 0
    while pos < len(b):
        ln, typ = struct.unpack(">I4s", b[pos:pos + 8])
        data = b[pos + 8:pos + 8 + ln]
        if typ == b"IHDR":
            w, h, depth, color = struct.unpack(">IIBB", data[:10])
            assert depth == 8 and color == 0, (path, depth, color)
        elif typ == b"IDAT":
            idat += data
        pos += 12 + ln
    raw = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(h, w + 1).astype(np.int32)
    out = np.zeros((h, w), np.int32)
    prev = np.zeros(w, np.int32)
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
kind, a, b = sys.argv[1], sys.argv[2], sys.argv[3]
if kind == "npy":
    x, y = np.load(a), np.load(b)
    assert x.shape == y.shape and x.dtype == y.dtype == np.float32, (x.shape, y.shape, x.dtype)
    err = np.linalg.norm(x.astype(np.float64) - y) / max(np.linalg.norm(y.astype(np.float64)), 1e-30)
    assert err < 1e-5, f"{a} vs {b}: relative L2 error {err}"
    assert np.abs(y).max() > 0, "all zero"
elif kind == "png":
    x, y = png(a), png(b)
    assert x.shape == y.shape, (x.shape, y.shape)
    d = np.abs(x - y)
    assert d.max() <= 1 and (d > 0).mean() < 0.01, f"{a} vs {b}: max diff {d.max()}"
    assert 5 < y.mean() < 250 and y.std() > 3, f"{b}: flat image (mean {y.mean()}, std {y.std()})"
elif kind == "gray":  # png a == the log gray levels (contrast 2, brightness -80) of npy b at gsc
    x, f = png(a), np.load(b).astype(np.float64)
    t = 20 * np.log10(np.maximum(float(sys.argv[4]) * f, 1e-12))
    g = np.clip(np.floor(-80 + 2 * t + 0.5), 0, 255)
    d = np.abs(x - g)
    assert d.max() <= 1 and (d > 0).mean() < 0.01, f"{a}: not gsc {sys.argv[4]} of {b}: max diff {d.max()}"
elif kind == "raw":
    x, y = np.load(a), np.load(b)
    assert x.dtype == y.dtype and x.shape == y.shape and (x == y).all(), (x.dtype, x.shape, y.shape)
EOF
for m in cfd msi; do
    "$PYTHON" "$T/cmp.py" npy "$T"/g1/bscan_${m}_f32_*.npy "$T/ref/bscan_$m.npy" || fail "bscan/$m/f32 differs from octproc"
    "$PYTHON" "$T/cmp.py" png "$T"/g1/bscan_${m}_0*.png "$T/ref/bscan_$m.png" || fail "bscan/$m differs from octproc"
done
grep -q "^bscan/msi/f32 .*shape \[$R,$A\]" "$T/g1.txt" || fail "bscan/msi/f32 shape: $(head -3 "$T/g1.txt")"
# every SPEC 6 header field, with sensible values (octgrab --headers prints them)
cat >"$T/hdr.py" <<'EOF'
import json, sys, time
path, epoch, gen, M, N, L, R = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), *map(int, sys.argv[4:8])
want = sys.argv[8]  # kind/method
hs = [json.loads(l) for l in open(path) if l.startswith("{")]
assert hs, "no header line"
assert any(h.get("mode") == "online" for h in hs), "no ring frame's header"
fields = ["htype", "topic", "kind", "method", "frame_id", "frame_seq", "image_seq", "epoch",
          "t_acq_ns", "t_pub_ns", "shape", "dtype", "indices", "params_gen", "skipped", "torn"]
now = time.time_ns()
for h in hs:
    missing = [f for f in fields if f not in h]
    assert not missing, f"{h.get('topic')}: missing {missing}"
    assert h["htype"] == "octd-image-1", h["htype"]
    f32 = h["topic"].endswith("/f32")
    assert h["topic"] == want + ("/f32" if f32 else ""), (h["topic"], want)
    assert h["topic"] == f"{h['kind']}/{h['method']}" + ("/f32" if f32 else ""), h["topic"]
    assert h["epoch"] == epoch, (h["epoch"], epoch)
    assert h["dtype"] == ("f32" if f32 else "u8"), (h["topic"], h["dtype"])
    for f in ("frame_id", "frame_seq", "image_seq", "t_acq_ns", "t_pub_ns", "params_gen", "skipped", "torn"):
        assert isinstance(h[f], int) and h[f] >= 0, (f, h[f])
    assert h["frame_seq"] > 0 and 0 < h["params_gen"] <= gen, (h["frame_seq"], h["params_gen"], gen)
    assert 0 < h["t_acq_ns"] <= h["t_pub_ns"] <= now and now - h["t_pub_ns"] < 60e9, (h["t_acq_ns"], h["t_pub_ns"])
    if h["mode"] == "online":  # issue 19: octd's stamps of a ring frame, in order
        st = [h[f] for f in ("t_acq_ns", "t_take_ns", "t_sub_ns", "t_done_ns", "t_pub_ns")]
        assert st == sorted(st), (h["topic"], st)
    assert h["torn"] == 0, h["torn"]
    D = M // 2 + 1 if h["method"] == "cfd" else R  # depths: CFD 0..M/2, MSI one per mask
    if h["kind"] == "bscan":
        assert h["shape"] == [D, N] and h["indices"] == [], (h["shape"], h["indices"])
    else:  # enface start 10 step 20 count 4: the depths that exist (MSI: < R)
        q = len(h["indices"])
        assert h["shape"] == [q, L, N] and 1 <= q <= 4, (h["shape"], h["indices"])
        assert h["indices"] == [i for i in (10, 30, 50, 70) if i < D], (h["indices"], D)
seqs = {}
for h in hs:  # image_seq grows per topic
    assert h["image_seq"] > seqs.get(h["topic"], -1), (h["topic"], h["image_seq"])
    seqs[h["topic"]] = h["image_seq"]
EOF
"$BIN/octgrab" --endpoint "ipc://$T/pub" --topic bscan/cfd --count 4 --timeout 10 --headers --quiet >"$T/h1.txt" ||
    fail "octgrab --headers: $(tail -3 "$T/h1.txt")"
"$PYTHON" "$T/hdr.py" "$T/h1.txt" "$(st ring_epoch)" "$(st applied_gen)" $M $A 1 $R bscan/cfd ||
    fail "published B-scan headers: $(grep '^{' "$T/h1.txt" | head -2)"
echo "ok   published B-scans (u8 + f32, CFD + MSI) equal octproc's; their headers carry every SPEC 6 field"

# ---- 4. a control change takes effect on the next frame -------------------------
out=$("${CTL[@]}" set display.bscan.gsc=2 window=tukey:0.5) || fail "octctl set: $out"
gen=$(echo "$out" | sed -n 's/^applied (generation \([0-9]*\)).*/\1/p')
[ -n "$gen" ] || fail "octctl set printed '$out'"
"$BIN/octgrab" --endpoint "ipc://$T/pub" --topic bscan/cfd --count 4 --timeout 10 --save-max 4 \
    --output "$T/g2" >"$T/g2.txt" || fail "octgrab after set"
awk -v g="$gen" '{for (i = 1; i < NF; i++) if ($i == "gen" && $(i + 1) < g) bad = 1} END {exit bad}' "$T/g2.txt" ||
    fail "images after 'applied' carry an older params_gen than $gen: $(cat "$T/g2.txt")"
"$PYTHON" "$T/cmp.py" gray "$(ls "$T"/g2/bscan_cfd_0*.png | tail -1)" "$(ls "$T"/g2/bscan_cfd_f32_*.npy | tail -1)" 2 ||
    fail "the new gsc is not in the image"
[ "$("${CTL[@]}" get window)" = "window=tukey:0.5" ] || fail "get window: $("${CTL[@]}" get window)"
echo "ok   control generation $gen applied; the next images have params_gen $gen and the new values"

# ---- 5. a rejected generation ----------------------------------------------------
out=$("${CTL[@]}" set lag_window=2,-2 display.bscan.gsc=1)
rc=$?
[ $rc = 1 ] || fail "an invalid generation: exit $rc ($out)"
echo "$out" | grep -q "rejected.*lag" || fail "rejection reason: $out"
alive || fail "octd died after a rejected generation"
[ "$("${CTL[@]}" get lag_window display.bscan.gsc | tr '\n' ' ')" = "lag_window=-3,3 display.bscan.gsc=2 " ] ||
    fail "the last good values are not kept: $("${CTL[@]}" get lag_window display.bscan.gsc)"
[ -n "$(st rejected_reason)" ] || fail "no rejected_reason in the status block"
"${CTL[@]}" set no.such.key=1 >/dev/null 2>&1 && fail "octctl set of an unknown key succeeded"
p0=$(st frames_processed)
wait_for 5 '[ "$(st frames_processed)" -gt $((p0 + 2)) ]' || fail "octd stopped processing after a rejection"
echo "ok   invalid generation rejected ($out), last good values kept, octd goes on"

# ---- 6. no subscriber: the loop goes on, images are still published ------------
i0=$(st images_published)
sleep 0.5
i1=$(st images_published)
[ "$i1" -gt "$i0" ] || fail "nothing published without a subscriber ($i0 -> $i1)"
echo "ok   no subscriber: images_published $i0 -> $i1, publish_drops $(st publish_drops)"
# a stalled subscriber (connected, never reads, tiny buffers) does not slow
# octd, nor cost a live subscriber anything
"$PYTHON" - "ipc://$T/pub" <<'EOF' &
import ctypes, ctypes.util, sys, time
z = ctypes.CDLL(ctypes.util.find_library("zmq") or "libzmq.so.5")
z.zmq_ctx_new.restype = z.zmq_socket.restype = ctypes.c_void_p
ctx = z.zmq_ctx_new()
s = ctypes.c_void_p(z.zmq_socket(ctypes.c_void_p(ctx), 2))       # ZMQ_SUB
one, small = ctypes.c_int(1), ctypes.c_int(4096)
z.zmq_setsockopt(s, 24, ctypes.byref(one), 4)                     # ZMQ_RCVHWM
z.zmq_setsockopt(s, 12, ctypes.byref(small), 4)                   # ZMQ_RCVBUF
z.zmq_setsockopt(s, 6, b"", 0)                                    # ZMQ_SUBSCRIBE
assert z.zmq_connect(s, sys.argv[1].encode()) == 0
time.sleep(30)
EOF
STALL=$!
PIDS+=($STALL)
sleep 1.5
p0=$(st frames_processed)
"$BIN/octgrab" --endpoint "ipc://$T/pub" --count 40 --timeout 10 >"$T/g4.txt" || fail "octgrab beside a stalled subscriber"
p1=$(st frames_processed)
sed -n '/^topic/,$p' "$T/g4.txt" | awk '$1 ~ /\// && $4 != 0 {bad = 1} END {exit bad}' ||
    fail "gaps beside a stalled subscriber: $(cat "$T/g4.txt")"
[ "$(grep -c '^bscan/' "$T/g4.txt")" -ge 36 ] || fail "topics missing beside a stalled subscriber: $(tail -8 "$T/g4.txt")"
kill $STALL
echo "ok   stalled subscriber: a live one gets every image ($((p1 - p0)) frames meanwhile), $(grep -c 'sending copies' "$T/octd.log") fallback(s) to copies"
"${CTL[@]}" watch --count 2 --interval 0.3 >"$T/watch.txt" 2>&1 || fail "octctl watch: $(cat "$T/watch.txt")"
[ "$(grep -c "^online " "$T/watch.txt")" = 2 ] && grep -q processed "$T/watch.txt" || fail "octctl watch printed: $(cat "$T/watch.txt")"

# ---- 7. modes and commands -------------------------------------------------------
out=$("${CTL[@]}" save raw) && fail "save raw online was accepted: $out"
echo "$out" | grep -q "refused" || fail "save raw online: $out"
"${CTL[@]}" snapshot | grep -q "ok" || fail "snapshot"
"${CTL[@]}" review | grep -q "ok" || fail "review"
[ "$(st state)" = review ] || fail "state $(st state), not review"
out=$("${CTL[@]}" snapshot) && fail "snapshot in review was accepted: $out"
# review re-processing counts in frames_reprocessed, never in the ring's
# counters (issue 14.4: seen = processed + skipped + torn)
p0=$(st frames_processed) s0=$(st frames_skipped) r0=$(st frames_reprocessed)
sleep 1.3
p1=$(st frames_processed) s1=$(st frames_skipped) r1=$(st frames_reprocessed)
[ "$r1" -gt "$r0" ] || fail "review does not re-process at least once a second ($r0 -> $r1)"
[ $((p1 - p0)) -le 1 ] || fail "ring frames processed in review ($p0 -> $p1)"
[ "$s1" -gt "$s0" ] || fail "ring frames not taken off (skipped) in review ($s0 -> $s1)"
r0=$(st frames_reprocessed)
"${CTL[@]}" set display.bscan.gsc=3 >/dev/null || fail "set in review"
wait_for 2 '[ "$(st frames_reprocessed)" -gt $r0 ]' || fail "review: no re-processing after a change"
out=$("${CTL[@]}" save raw) || fail "save raw: $out"
raw=$(ls "$T"/save/raw_*.npy) || fail "no raw .npy: $out"
[ -f "${raw%.npy}.yaml" ] || fail "no YAML sidecar"
"$PYTHON" "$T/cmp.py" raw "$raw" "$T/frame.npy" || fail "the saved raw frame is not the frame"
grep -q "bscan: {gsc: 3," "${raw%.npy}.yaml" || fail "sidecar lacks the control values"
grep -q "samples: $M, ascans: $A, lines: 1" "${raw%.npy}.yaml" || fail "sidecar lacks the geometry"
out=$("${CTL[@]}" save images) || fail "save images: $out"
img=$(ls -d "$T"/save/images_*/) || fail "no images directory"
for f in bscan_cfd.png bscan_msi.png bscan_cfd.npy bscan_msi.npy; do
    [ -f "$img/$f" ] || fail "save images: no $f in $img ($(ls "$img"))"
done
# the sidecar less its frame: section is a profile: octproc on the saved frame
# with it gives the saved images
sed '/^frame:/,/^geometry:/{/^geometry:/!d}' "${raw%.npy}.yaml" >"$T/save.away.yaml"
"$BIN/octproc" --profile "$T/save.away.yaml" --input "$raw" --backend cpu --output "$T/ref2" >/dev/null 2>&1 ||
    fail "octproc on the saved raw frame + sidecar"
"$PYTHON" "$T/cmp.py" npy "$img/bscan_msi.npy" "$T/ref2/bscan_msi.npy" || fail "saved images differ from octproc's"
"$PYTHON" "$T/cmp.py" png "$img/bscan_cfd.png" "$T/ref2/bscan_cfd.png" || fail "saved PNG differs from octproc's"
# a failing save: the directory is gone -> FAILED, nothing partial anywhere
mv "$T/save" "$T/save.away"
out=$("${CTL[@]}" save images) && fail "save into a missing directory succeeded: $out"
echo "$out" | grep -q "failed" || fail "save into a missing directory: $out"
[ "$(st command_result)" = failed ] || fail "command_result $(st command_result)"
[ ! -e "$T/save" ] || fail "a failed save created $T/save"
mv "$T/save.away" "$T/save"
[ "$(ls -A "$T/save" | wc -l)" = 3 ] || fail "leftovers in the save directory: $(ls -A "$T/save")"
# disk full and read-only: a 16 KiB tmpfs over the save directory (needs root)
if mount -t tmpfs -o size=16k,mode=0777 octd-e2e "$T/save" 2>/dev/null; then
    MOUNTED=$T/save
    for what in raw images; do
        out=$("${CTL[@]}" save $what) && fail "save $what on a full disk succeeded: $out"
        echo "$out" | grep -qi "space" || fail "save $what on a full disk: $out"
        [ -z "$(ls -A "$T/save")" ] || fail "save $what on a full disk left $(ls -A "$T/save")"
    done
    mount -o remount,ro "$T/save" || fail "remount ro"
    out=$("${CTL[@]}" save raw) && fail "save raw on a read-only file system succeeded: $out"
    echo "$out" | grep -qi "read-only" || fail "save raw on a read-only file system: $out"
    umount "$T/save" && MOUNTED=""
    echo "ok   disk full / read-only: FAILED with the reason, nothing left behind"
else
    echo "SKIP (part): disk-full and read-only save checks NOT run: cannot mount a tmpfs on $T/save (needs root / CAP_SYS_ADMIN)"
fi
"${CTL[@]}" online | grep -q ok || fail "online"
p0=$(st frames_processed)
wait_for 3 '[ "$(st frames_processed)" -gt $((p0 + 3)) ]' || fail "online again: no frames"
echo "ok   snapshot, review (re-processing, ring skipped), save raw/images (= octproc), refusals, failed save"

# ---- 8. SIGHUP: a good, then a bad profile ------------------------------------------
profile 5 >"$T/profile.yaml"
kill -HUP $OCTD
wait_for 5 '[ "$("${CTL[@]}" get display.bscan.gsc)" = "display.bscan.gsc=5" ]' ||
    fail "SIGHUP did not load the new profile: $("${CTL[@]}" get display.bscan.gsc)"
wait_for 3 'grep -q "RELOADING=1|MONOTONIC_USEC=[0-9]" "$T/notify.txt"' || fail "no RELOADING=1 + MONOTONIC_USEC"
grep -A100 RELOADING "$T/notify.txt" | grep -q "READY=1" || fail "no READY=1 after the reload"
{ profile 7; echo "bogus_key: 1"; } >"$T/profile.yaml"
kill -HUP $OCTD
wait_for 5 'grep -q "reload refused" "$T/octd.log"' || fail "a bad profile was not refused"
grep "reload refused" "$T/octd.log" | grep -q "profile.yaml:15.*bogus_key" || fail "refusal names no file:line:key: $(grep "reload refused" "$T/octd.log")"
alive || fail "octd died on a bad reload"
[ "$("${CTL[@]}" get display.bscan.gsc)" = "display.bscan.gsc=5" ] || fail "bad reload changed the values"
p0=$(st frames_processed)
wait_for 3 '[ "$(st frames_processed)" -gt $p0 ]' || fail "no frames after a refused reload"
echo "ok   SIGHUP: good profile loaded, bad profile refused (file:line:key), octd goes on"
# new [publish] keys: the publisher is re-created on the same ipc:// endpoint, which it
# must let go of first (issue 21: a reload of sndhwm/nice/... used to be refused as
# "a live process listens on ...": itself)
profile 5 >"$T/profile.yaml"
sed -i "s#^endpoint = ipc://$T/pub\$#&\nnice = 3\nio_threads = 1#" "$T/octd.ini"
kill -HUP $OCTD
wait_for 5 'grep -q "publisher: 1 ZeroMQ I/O threads, sndbuf default 0, nice +3" "$T/octd.log"' ||
    fail "[publish] nice / io_threads not applied on reload: $(grep -E "reload|publisher" "$T/octd.log" | tail -3)"
"$BIN/octgrab" --endpoint "ipc://$T/pub" --topic bscan/ --count 2 --timeout 10 --quiet >"$T/g9.txt" 2>&1 ||
    fail "no images after the publisher was re-created: $(tail -3 "$T/g9.txt")"
echo "ok   SIGHUP with new [publish] keys: publisher re-created on its ipc:// endpoint, images flow"

# ---- 9. ring restart with a new geometry (volume) --------------------------------
"${CTL[@]}" set products=bscan,enface,confocal,xsec_h,xsec_v,f32 xsec.v_index=40 >/dev/null || fail "set products"
kill $SIM; wait $SIM 2>/dev/null
r0=$(st ring_reattaches)
"$BIN/octsim" --ring "$N-frames" --samples $M --ascans 24 --lines 6 --rate $((24 * 6 * 20)) --quiet 2>>"$T/sim.log" &
SIM=$!
PIDS+=($SIM)
wait_for 10 '[ "$(st ring_geometry)" = "6x24x$M u16" ]' || fail "no re-attach to the new geometry: $(st ring_geometry)"
[ "$(st ring_reattaches)" -gt "$r0" ] || fail "ring_reattaches did not grow"
grep -q "clamp" "$T/octd.log" || fail "xsec.v_index 40 >= 24 A-scans: no clamping warning"
[ "$("${CTL[@]}" get xsec.v_index)" = "xsec.v_index=23" ] || fail "clamped value not written back: $("${CTL[@]}" get xsec.v_index)"
"$BIN/octgrab" --endpoint "ipc://$T/pub" --topic enface/cfd --topic xsec_v/msi --count 4 --timeout 10 >"$T/g3.txt" ||
    fail "no images after the ring restart"
grep -q "^enface/cfd .*shape \[4,6,24\]" "$T/g3.txt" || fail "enface shape: $(cat "$T/g3.txt")"
grep -q "^xsec_v/msi .*shape \[$R,6\]" "$T/g3.txt" || fail "xsec_v shape: $(cat "$T/g3.txt")"
echo "ok   ring restart with a new geometry: re-attached, re-planned, clamped, volume products"
# every SPEC 6 header field of an en-face message of the volume (the B-scan: section 3)
"$BIN/octgrab" --endpoint "ipc://$T/pub" --topic enface/msi --count 4 --timeout 10 \
    --headers --quiet >"$T/h2.txt" || fail "octgrab --headers: $(tail -3 "$T/h2.txt")"
"$PYTHON" "$T/hdr.py" "$T/h2.txt" "$(st ring_epoch)" "$(st applied_gen)" $M 24 6 $R enface/msi ||
    fail "published en-face headers: $(grep '^{' "$T/h2.txt" | head -2)"
echo "ok   en-face headers (octgrab --headers) carry every SPEC 6 field with sensible values"

# ---- 10. watchdog and status notifications, then SIGTERM within a second ----------
w=$(grep -c "WATCHDOG=1" "$T/notify.txt")
[ "$w" -ge 5 ] || fail "only $w WATCHDOG=1 in $(($(date +%s) - 0)) s"
grep -q "STATUS=online: frames in [0-9]*, processed" "$T/notify.txt" || fail "no STATUS= with counters"
t0=$(date +%s%N)
kill -TERM $OCTD
wait $OCTD
rc=$?
t1=$(date +%s%N)
OCTD=""
[ $rc = 0 ] || fail "octd exit $rc after SIGTERM"
[ $(((t1 - t0) / 1000000)) -lt 3000 ] || fail "SIGTERM took $(((t1 - t0) / 1000000)) ms" # < 0.5 s idle; 3 s: a loaded machine
grep -q "STOPPING=1" "$T/notify.txt" || fail "no STOPPING=1"
[ "$(st state)" = stopping ] || fail "status state after exit: $(st state)"
echo "ok   watchdog pings ($w), STATUS=, SIGTERM -> exit 0 in $(((t1 - t0) / 1000000)) ms, state stopping"
# octd gone, blocks left: octctl set times out with exit 2
out=$("$BIN/octctl" --control "$N-control" --status "$N-status" --timeout 0.5 set enface.start=3 2>&1)
rc=$?
[ $rc = 2 ] && echo "$out" | grep -q "did not answer\|not running" || fail "octctl set without octd: exit $rc: $out"
echo "ok   octctl set without octd: exit 2 ($out)"
echo "PASS e2e_daemon"
