#!/bin/bash
# e2e_shm.sh - images in shared memory ([publish] shm_endpoint, ipc/PROTOCOL.md
# "Images in shared memory").  octd (CPU by default; BACKEND=cuda on a GPU
# machine) publishes on a normal endpoint and on a shm endpoint; a Python
# reader written here from the protocol text alone (raw mmap + the seqlock
# rule, not the library under test) checks that
#  1. every image read out of the area equals the full-payload message of the
#     same topic and image_seq, byte for byte, and the headers agree but for
#     the shm_* members and t_pub_ns; the shm messages' payloads are empty
#  2. a reader that stalls until octd has cycled through the area's slots is
#     told its image was overwritten (the slot's seq moved), never given it
#  3. a new geometry gives a new object (new shm_id) under the same name,
#     which a reader maps again, and images still match
#  4. at a clean stop octd marks the area closed and removes its name
# Producers are octsim at a fixed rate.  Exit 0 pass, 77 skip, else fail.
set -u
BIN=${BIN:-bin}
PYTHON=${PYTHON:-/usr/bin/python3}
BACKEND=${BACKEND:-cpu}
for p in octd octsim octctl; do
    [ -x "$BIN/$p" ] || { echo "SKIP e2e_shm: $BIN/$p not built"; exit 77; }
done
"$PYTHON" -c 'import numpy, zmq' 2>/dev/null || { echo "SKIP e2e_shm: no numpy/pyzmq for $PYTHON"; exit 77; }
T=$(mktemp -d /tmp/octd-e2e-shm.XXXXXX)
N=/octe2e-shm$$
. tests/helpers/e2e_lib.sh
CTL=("$BIN/octctl" --control "$N-control" --status "$N-status" --timeout 20)
st() { "${CTL[@]}" status 2>/dev/null | sed -n "s/^$1=//p"; }
sim() { # M N L: octsim in the background at 100 frames/s
    "$BIN/octsim" --ring "$N-frames" --samples "$1" --ascans "$2" --lines "$3" \
        --ascan-rate $((100 * $2 * $3)) --quiet 2>>"$T/sim.log" &
    SIM=$!
    PIDS+=($SIM)
}

cat >"$T/profile.yaml" <<EOF
methods: [cfd]
window: {type: hann}
freq_cutoff: 2
scale: log
enface: {start: 3, step: 5, count: 4}
products: [enface, confocal, xsec_h, xsec_v, volume, f32]
EOF
cat >"$T/octd.ini" <<EOF
[engine]
backend = $BACKEND
threads = 1
[ring]
frames = $N-frames
control = $N-control
status = $N-status
[publish]
endpoint = ipc://$T/pub
shm_endpoint = ipc://$T/shm
shm_name = $N-images
[profile]
path = $T/profile.yaml
[log]
level = info
EOF
"$BIN/octd" --config "$T/octd.ini" 2>"$T/octd.log" &
OCTD=$!
wait_for 10 '[ "$(st state)" = online ] 2>/dev/null' || fail "octd did not start"
sim 256 32 6
wait_for 20 '[ "$(st frames_processed)" -ge 5 ] 2>/dev/null' || fail "no frames processed"
[ -e "/dev/shm$N-images" ] || fail "no image area /dev/shm$N-images"
[ "$(stat -c %a "/dev/shm$N-images")" = 640 ] || fail "image area mode $(stat -c %a "/dev/shm$N-images")"

cat >"$T/reader.py" <<'EOF'
# The protocol as PROTOCOL.md gives it: header page, seq[slot] at 64 + 8 slot.
import json, mmap, os, struct, sys, time
import numpy as np
import zmq

T, NAME, PART = sys.argv[1], sys.argv[2], sys.argv[3]
ctx = zmq.Context()
def sub(ep):
    s = ctx.socket(zmq.SUB)
    s.setsockopt(zmq.RCVHWM, 100000)
    s.connect(ep)
    s.setsockopt(zmq.SUBSCRIBE, b"")
    return s
full, shm = sub(f"ipc://{T}/pub"), sub(f"ipc://{T}/shm")
maps = {}
def area(name):
    fd = os.open("/dev/shm" + name, os.O_RDONLY)
    size = os.fstat(fd).st_size
    m = mmap.mmap(fd, size, prot=mmap.PROT_READ)
    os.close(fd)
    assert m[:8] == b"OCTIMGS\0", m[:8]
    abi, _, hb, nslots, stride, slot0, oid = struct.unpack_from("<IIIIQQQ", m, 8)
    assert abi == 1 and hb == 4096 and slot0 == 4096 and stride % 4096 == 0, (abi, hb, slot0, stride)
    assert 4096 + nslots * stride <= size
    return {"m": m, "id": oid, "slots": nslots}
def seq_of(a, slot):
    return struct.unpack_from("<Q", a["m"], 64 + 8 * slot)[0]
def read(h):
    """The image's bytes, or None when the slot was rewritten (seqlock)."""
    name = h["shm_name"]
    a = maps.get(name)
    if a is None or a["id"] != h["shm_id"]:
        a = maps[name] = area(name)
    assert a["id"] == h["shm_id"], ("id", a["id"], h["shm_id"])
    if seq_of(a, h["shm_slot"]) != h["shm_seq"]:
        return None
    b = bytes(a["m"][h["shm_offset"]:h["shm_offset"] + h["shm_bytes"]])
    return b if seq_of(a, h["shm_slot"]) == h["shm_seq"] else None
def recv(s, timeout_ms=2000):
    if not s.poll(timeout_ms):
        raise SystemExit(f"no message within {timeout_ms} ms")
    parts = s.recv_multipart()  # "status" has 2 parts, images 3
    return parts[0].decode(), json.loads(parts[1]), parts[2] if len(parts) > 2 else b""
def drain(s):
    while s.poll(0):
        s.recv_multipart()

if PART == "match":
    time.sleep(0.3)  # both subscriptions in force
    drain(full), drain(shm)
    got_full, got_shm, lost = {}, {}, 0
    t0 = time.time()
    while time.time() - t0 < 2.0:
        for s in zmq.select([full, shm], [], [], 0.1)[0]:
            topic, h, p = recv(s)
            if topic == "status":
                continue
            key = (topic, h["image_seq"])
            if s is full:
                assert "shm_name" not in h, "shm_* members on the normal endpoint"
                got_full[key] = (h, p)
            else:
                assert len(p) == 0, f"shm message with a {len(p)}-byte payload"
                assert h["shm_seq"] % 2 == 0
                b = read(h)
                if b is None:
                    lost += 1
                else:
                    got_shm[key] = (h, b)
    both = sorted(set(got_full) & set(got_shm))
    topics = sorted({k[0] for k in both})
    assert len(both) >= 40, f"only {len(both)} images in both ({len(got_full)} full, {len(got_shm)} shm)"
    for want in ("enface/cfd", "confocal/cfd", "volume/cfd", "enface/cfd/f32", "xsec_v/cfd/f32"):
        assert want in topics, (want, topics)
    for k in both:
        hf, pf = got_full[k]
        hs, ps = got_shm[k]
        assert pf == ps, f"{k}: the shm image differs from the message's payload"
        a = {x: v for x, v in hs.items() if not x.startswith("shm_") and x != "t_pub_ns"}
        b = {x: v for x, v in hf.items() if x != "t_pub_ns"}
        assert a == b, f"{k}: headers differ: {a} vs {b}"
        n = int(np.prod(hs["shape"])) * (4 if hs["dtype"] == "f32" else 1)
        assert hs["shm_bytes"] == n, (k, hs["shm_bytes"], n)
    ids = {got_shm[k][0]["shm_id"] for k in both}
    print(f"ok match: {len(both)} images in both ({len(topics)} topics), all equal; "
          f"{lost} overwritten before read; ids {sorted(ids)}")
    open(f"{T}/id", "w").write(str(sorted(ids)[-1]))
elif PART == "stall":
    drain(shm)
    topic, h, _ = recv(shm)
    while topic == "status":
        topic, h, _ = recv(shm)
    a = maps.setdefault(h["shm_name"], area(h["shm_name"]))
    first = h["frame_seq"]
    deadline = time.time() + 60
    while True:  # octd keeps going; this reader only watches the frame count
        drain(shm)
        _, h2, _ = recv(shm)
        if h2.get("frame_seq", 0) > first + a["slots"] + 2:
            break
        assert time.time() < deadline, "octd did not cycle through the area in 60 s"
        time.sleep(0.2)
    assert read(h) is None, "a stalled reader got an image whose slot octd has rewritten"
    b = read(h2)
    assert b is not None and len(b) == h2["shm_bytes"], "a fresh header's image was not readable"
    print(f"ok stall: the image of frame {first} reads as overwritten after {h2['frame_seq'] - first} "
          f"frames ({a['slots']} slots); a fresh one reads")
elif PART == "newid":
    old = int(open(f"{T}/id").read())
    deadline = time.time() + 20
    while True:
        topic, h, _ = recv(shm)
        if topic != "status" and h["shm_id"] != old and h["shape"][-1] == 257:
            break
        assert time.time() < deadline, "no header of a new image area"
    for _ in range(50):  # the new object is mapped again, its images read
        topic, h, _ = recv(shm)
        if topic != "status" and read(h) is not None:
            break
    else:
        raise SystemExit("nothing readable in the new area")
    print(f"ok newid: a new geometry gave a new object under the name (id {old} -> {h['shm_id']}), read")
EOF
"$PYTHON" "$T/reader.py" "$T" "$N-images" match || fail "images in shared memory and in messages differ"
"$PYTHON" "$T/reader.py" "$T" "$N-images" stall || fail "a stalled reader was not told its image was overwritten"
kill $SIM; wait $SIM 2>/dev/null
sim 512 40 5
"$PYTHON" "$T/reader.py" "$T" "$N-images" newid || fail "the new geometry's area"
"$PYTHON" "$T/reader.py" "$T" "$N-images" match || fail "images of the new geometry differ"
grep -q "image area $N-images" "$T/octd.log" || fail "octd did not log its image area"
kill $SIM; wait $SIM 2>/dev/null
kill -TERM $OCTD; wait $OCTD; rc=$?
OCTD=""
[ $rc -eq 0 ] || fail "octd exited $rc"
[ ! -e "/dev/shm$N-images" ] || fail "the image area's name is still there after a clean stop"
echo "ok stop: the image area's name is gone"
echo "PASS e2e_shm"
