#!/usr/bin/env python3
"""octmulti.py - helpers of tests/e2e_multi.sh (several engines, issue 20).

  produce --ring NAME --geom M,N,L --frames F --fps R --id0 I
      a paced producer (octfault.py's ring writer) of random frames, each a
      function of its frame_id only (seeded by it), so two runs give the same
      frame for the same frame_id; closes the ring at the end; --prime F:
      frames at 10/s (ids from I on) until file F exists, then the F frames
  sub --endpoint EP --out FILE [--topic bscan/cfd] [--seconds S] [--idle S] [--ready F]
      records every image of that topic (exactly) as a JSON line: frame_id,
      frame_seq, image_seq, params_gen, mode, sha1 of the pixels; stops after
      S seconds or S idle seconds after the first image; creates F once
      connected (tests wait for it instead of sleeping: process start-up is
      slow on a loaded machine)
  check-order FILE [--one-gen]   frame_seq and image_seq contiguous and
                          increasing, frame_id increasing (online images);
                          --one-gen: all online images of one control generation
  compare FILE_A FILE_B   the images of the frame_ids both saw are bit-equal
"""
import argparse, base64, ctypes, hashlib, json, os, signal, struct, sys, time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import octfault  # noqa: E402


class Ring(octfault.Ring):
    """octfault's ring writer with the header's counters stored as single
    8-byte words: struct.pack_into zero-fills before it packs, so octd could
    read a heartbeat of 0 (a stale producer: detach, re-attach, the last frame
    again) or a sequence of 0 in between."""

    def __init__(self, *args):
        super().__init__(*args)
        self.u64 = np.frombuffer(self.m, np.uint64)

    def beat(self):
        if not hasattr(self, "u64"):
            return super().beat()
        self.u64[192 // 8] = time.monotonic_ns()

    def begin(self):
        off, arr = self.payload(self.n)
        self.u64[off // 8] = 2 * self.n + 1
        return off, arr

    def commit(self, off, fid):
        struct.pack_into("<QQI", self.m, off + 8, fid, time.time_ns(), 0)  # inside the seqlock
        self.u64[off // 8] = 2 * self.n + 2
        self.n += 1
        self.u64[128 // 8] = self.n
        self.beat()


def cmd_produce(a):
    M, N, L = (int(x) for x in a.geom.split(","))
    r = Ring(a.ring, M, N, L, "u16", 8)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    fid0 = a.id0
    if a.prime:  # 10 frames/s until the test says octd is processing (planning
        # can take seconds on a loaded machine), then the real sequence
        while not stop and not os.path.exists(a.prime):
            off, arr = r.begin()
            arr[...] = np.random.default_rng(fid0).integers(0, 4000, (L, N, M), dtype=np.uint16)
            r.commit(off, fid0)
            fid0 += 1
            time.sleep(0.1)
    t_next = time.monotonic()
    for fid in range(fid0, fid0 + a.frames):
        if stop:
            break
        frame = np.random.default_rng(fid).integers(0, 4000, (L, N, M), dtype=np.uint16)
        off, arr = r.begin()
        arr[...] = frame
        r.commit(off, fid)
        t_next += 1.0 / a.fps
        while not stop:
            d = t_next - time.monotonic()
            if d <= 0:
                break
            time.sleep(min(d, 0.05))
            r.beat()
    for _ in range(int(a.linger / 0.05)):  # let octd read the last frames
        if stop:
            break
        r.beat()
        time.sleep(0.05)
    struct.pack_into("<I", r.m, 256, 2)  # CLOSED


def cmd_sub(a):
    z = octfault.zmq_lib()
    ctx = z.zmq_ctx_new()
    s = octfault.sub_socket(z, ctx, a.endpoint, a.topic.encode(), timeout_ms=200, hwm=100000)
    buf = ctypes.create_string_buffer(16 << 20)
    if a.ready:  # connected and subscribed (give the subscription time to reach octd)
        time.sleep(0.3)
        open(a.ready, "w").close()
    end = time.monotonic() + a.seconds
    last = None
    with open(a.out, "w") as out:
        while time.monotonic() < end:
            if last is not None and time.monotonic() - last > a.idle:
                break
            p = octfault.recv_multipart(z, s, buf)
            if p is None:
                continue
            if p[0].decode() != a.topic or len(p) != 3:
                continue
            h = json.loads(p[1])
            rec = {k: h.get(k) for k in ("frame_id", "frame_seq", "image_seq", "params_gen",
                                         "mode")}
            rec["sha1"] = hashlib.sha1(p[2]).hexdigest()
            rec["u8"] = base64.b64encode(p[2]).decode()  # compare: SPEC 7 tolerance
            out.write(json.dumps(rec) + "\n")
            out.flush()
            last = time.monotonic()


def load(f):
    with open(f) as fh:
        return [json.loads(x) for x in fh if x.strip()]


def cmd_check_order(a):
    recs = load(a.file)
    online = [r for r in recs if r["mode"] == "online"]
    if len(online) < a.min:
        sys.exit("check-order: %d online images, want >= %d" % (len(online), a.min))
    for x, y in zip(recs, recs[1:]):
        if y["frame_seq"] != x["frame_seq"] + 1 or y["image_seq"] != x["image_seq"] + 1:
            sys.exit("check-order: gap or reorder: frame_seq %d -> %d, image_seq %d -> %d"
                     % (x["frame_seq"], y["frame_seq"], x["image_seq"], y["image_seq"]))
    for x, y in zip(online, online[1:]):
        if y["frame_id"] <= x["frame_id"]:
            sys.exit("check-order: frame_id %d after %d" % (y["frame_id"], x["frame_id"]))
    gens = sorted({r["params_gen"] for r in online})
    if a.one_gen and len(gens) != 1:
        sys.exit("check-order: online images of generations %s, want one" % gens)
    print("check-order: %d images, frame_seq %d..%d contiguous, frame_id increasing"
          % (len(recs), recs[0]["frame_seq"], recs[-1]["frame_seq"]))


def cmd_compare(a):
    """SPEC 7: gray images equal except pixels at a rounding boundary, never
    off by more than one level (two runs may plan FFTs and split threads
    differently, so float sums may differ in the last bit)."""
    ra = {r["frame_id"]: r for r in load(a.a) if r["mode"] == "online"}
    rb = {r["frame_id"]: r for r in load(a.b) if r["mode"] == "online"}
    common = sorted(set(ra) & set(rb))
    diff, off = [], []
    for f in common:
        if ra[f]["sha1"] == rb[f]["sha1"]:
            continue
        x = np.frombuffer(base64.b64decode(ra[f]["u8"]), np.uint8).astype(int)
        y = np.frombuffer(base64.b64decode(rb[f]["u8"]), np.uint8).astype(int)
        d = np.abs(x - y) if x.size == y.size else np.array([999])
        if d.max() > 1 or np.count_nonzero(d) > max(1, x.size // 1000):
            off.append(f)
        diff.append(f)
    print("compare: %d frames in both, %d bit-equal, %d within one level at a few pixels, %d off"
          % (len(common), len(common) - len(diff), len(diff) - len(off), len(off)))
    if off:
        sys.exit("compare: frames %s differ beyond SPEC 7" % off[:5])
    if len(common) < a.min:
        sys.exit("compare: only %d common frames, want >= %d" % (len(common), a.min))


def cmd_check_recording(a):
    """Waits for the recording in the status block (/dev/shm NAME) to be done,
    then checks its file: frame_ids increasing, every raw frame equal to the
    producer's frame of that id (np.random.default_rng(id), as cmd_produce)."""
    import h5py
    path = "/dev/shm" + a.status
    deadline = time.monotonic() + a.timeout
    while True:
        b = open(path, "rb").read()
        state, frames = struct.unpack_from("<I", b, 1104)[0], struct.unpack_from("<Q", b, 1112)[0]
        if state in (2, 3) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    dropped = struct.unpack_from("<Q", b, 1120)[0]
    name = b[1128:1128 + 256].split(b"\0")[0].decode()
    msg = b[1384:1384 + 128].split(b"\0")[0].decode()
    if state != 2:
        sys.exit("check-recording: record_state %d (%s), %d frames" % (state, msg, frames))
    with h5py.File(name, "r") as f:
        ids = f["frame_id"][:]
        raw = f["raw"]
        if len(ids) != frames or f.attrs["frames"] != frames:
            sys.exit("check-recording: %d ids, attribute %d, status %d frames"
                     % (len(ids), f.attrs["frames"], frames))
        if len(ids) < a.min:
            sys.exit("check-recording: %d frames, want >= %d (%d left out)" % (len(ids), a.min, dropped))
        if np.any(np.diff(ids.astype(np.int64)) <= 0):
            sys.exit("check-recording: frame ids not increasing: %s" % ids.tolist())
        if a.published:  # frames taken but never published are not in the file
            pub = {r["frame_id"] for r in load(a.published)}
            extra = sorted(set(ids.tolist()) - pub)
            if extra:
                sys.exit("check-recording: frames %s recorded but never published" % extra[:5])
        for i, fid in enumerate(ids):
            want = np.random.default_rng(int(fid)).integers(0, 4000, raw.shape[1:], dtype=np.uint16)
            if not np.array_equal(raw[i], want):
                sys.exit("check-recording: row %d (frame %d) is not that frame's spectra" % (i, fid))
    print("check-recording: %d frames (ids %d..%d) equal to the produced ones, %d left out (%s)"
          % (len(ids), ids[0], ids[-1], dropped, msg))


def main():
    ap = argparse.ArgumentParser()
    sp = ap.add_subparsers(dest="cmd", required=True)
    p = sp.add_parser("produce")
    p.add_argument("--ring", required=True)
    p.add_argument("--geom", default="256,32,1")
    p.add_argument("--frames", type=int, default=60)
    p.add_argument("--fps", type=float, default=20)
    p.add_argument("--id0", type=int, default=1)
    p.add_argument("--linger", type=float, default=1.0)
    p.add_argument("--prime", help="write frames at 10/s until this file exists first")
    p = sp.add_parser("sub")
    p.add_argument("--endpoint", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--topic", default="bscan/cfd")
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--idle", type=float, default=3)
    p.add_argument("--ready", help="file created once the socket is connected")
    p = sp.add_parser("check-order")
    p.add_argument("file")
    p.add_argument("--min", type=int, default=1)
    p.add_argument("--one-gen", action="store_true")
    p = sp.add_parser("compare")
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--min", type=int, default=1)
    p = sp.add_parser("check-recording")
    p.add_argument("status", help="the status block's shm name")
    p.add_argument("--min", type=int, default=1)
    p.add_argument("--timeout", type=float, default=30)
    p.add_argument("--published", help="the subscriber's images (sub --out): recorded ids among them")
    a = ap.parse_args()
    {"produce": cmd_produce, "sub": cmd_sub, "check-order": cmd_check_order,
     "compare": cmd_compare, "check-recording": cmd_check_recording}[a.cmd](a)


if __name__ == "__main__":
    main()
