#!/usr/bin/python3
"""octfault.py - hostile peers of octd for tests/e2e_faults.sh (issue 8.2/8.4).

Written from SPEC section 3 (not from the C library), so the ABI is checked
independently.  Subcommands:
  produce   a ring producer; every frame is constant-valued (value_of(frame_id)),
            so any torn copy shows as columns that differ; optional death
            inside begin/commit (SIGKILL of itself) or truncation of the ring
  check     subscribes to bscan/cfd/f32 and checks every image is one legitimate
            frame (all columns equal, intensity proportional to value_of(frame_id))
  ctl-die   a control writer that dies inside a write (odd seq left behind)
  ctl-random  10^5 random generations, each waited for: applied or rejected
  subs      subscribers that connect, stall and vanish
"""
import argparse, ctypes, ctypes.util, fcntl, json, mmap, os, random, signal, struct, sys, time

import numpy as np

TYPES = {"u16": (1, np.uint16), "i16": (2, np.int16), "f32": (3, np.float32)}


def value_of(fid):
    return 100 + (fid * 37) % 3900


def shm_path(name):
    return "/dev/shm/" + name.lstrip("/")


# ---------------------------------------------------------------- ring producer
class Ring:
    def __init__(self, name, M, N, L, typ="u16", slots=4):
        self.code, self.dt = TYPES[typ]
        self.fb = M * N * L * np.dtype(self.dt).itemsize
        self.stride = 4096 + (self.fb + 4095) // 4096 * 4096
        self.slots, self.size = slots, 4096 + slots * self.stride
        self.shape = (L, N, M)
        p = shm_path(name)
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass
        self.fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o660)
        os.fchmod(self.fd, 0o660)  # the documented mode, whatever the umask
        os.ftruncate(self.fd, self.size)
        self.m = mmap.mmap(self.fd, self.size)
        h = struct.pack("<8sIIIIQQIIIIIIQQQQ", b"OCTRING\0", 1, 0, 4096, slots, self.stride,
                        4096, M, N, L, self.code, 0, 0,
                        int.from_bytes(os.urandom(8), "little") | 1, os.getpid(),
                        time.time_ns(), self.fb)
        self.m[:len(h)] = h
        self.n = 0
        self.beat()
        struct.pack_into("<I", self.m, 256, 1)  # READY last

    def beat(self):
        struct.pack_into("<Q", self.m, 192, time.monotonic_ns())

    def payload(self, n):
        off = 4096 + (n % self.slots) * self.stride
        return off, np.frombuffer(self.m, self.dt, self.fb // np.dtype(self.dt).itemsize,
                                  off + 4096).reshape(self.shape)

    def begin(self):
        off, arr = self.payload(self.n)
        struct.pack_into("<Q", self.m, off, 2 * self.n + 1)
        return off, arr

    def commit(self, off, fid):
        struct.pack_into("<QQI", self.m, off + 8, fid, time.time_ns(), 0)
        struct.pack_into("<Q", self.m, off, 2 * self.n + 2)
        self.n += 1
        struct.pack_into("<Q", self.m, 128, self.n)
        self.beat()


def cmd_produce(a):
    M, N, L = (int(x) for x in a.geom.split(","))
    r = Ring(a.ring, M, N, L, a.type, a.slots)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    period = 1.0 / a.fps if a.fps > 0 else 0
    t_next = time.monotonic()
    fid = a.id0
    while not stop and (a.frames <= 0 or r.n < a.frames):
        if a.truncate_go and os.path.exists(a.truncate_go):
            break  # the test saw the consumer attached: truncate now
        off, arr = r.begin()
        arr[...] = value_of(fid)
        r.commit(off, fid)
        fid += 1
        if period:
            t_next += period
            while not stop:
                d = t_next - time.monotonic()
                if d <= 0:
                    break
                time.sleep(min(d, 0.05))
                r.beat()
    if a.die_mid_frame:  # begin, half a frame, SIGKILL: the odd seq stays
        off, arr = r.begin()
        arr.reshape(-1)[: arr.size // 2] = 7
        os.kill(os.getpid(), signal.SIGKILL)
    if a.truncate is not None:  # shrink the ring under the consumer's mapping
        os.ftruncate(r.fd, a.truncate)
        open(a.ready, "w").close() if a.ready else None
        while not stop:
            time.sleep(0.05)
        os._exit(0)
    while a.hold and not stop:  # keep the heartbeat going, no more frames
        r.beat()
        time.sleep(0.05)
    struct.pack_into("<I", r.m, 256, 2)  # CLOSED


# ---------------------------------------------------------------- zmq subscriber
def zmq_lib():
    z = ctypes.CDLL(ctypes.util.find_library("zmq") or "libzmq.so.5")
    z.zmq_ctx_new.restype = ctypes.c_void_p
    z.zmq_socket.restype = ctypes.c_void_p
    z.zmq_socket.argtypes = [ctypes.c_void_p, ctypes.c_int]
    z.zmq_connect.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    z.zmq_setsockopt.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
    z.zmq_recv.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    z.zmq_getsockopt.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
                                 ctypes.POINTER(ctypes.c_size_t)]
    z.zmq_close.argtypes = [ctypes.c_void_p]
    z.zmq_ctx_term.argtypes = [ctypes.c_void_p]
    return z


def sub_socket(z, ctx, ep, topic=b"", timeout_ms=None, hwm=None):
    s = z.zmq_socket(ctx, 2)  # ZMQ_SUB
    if hwm is not None:
        v = ctypes.c_int(hwm)
        z.zmq_setsockopt(s, 24, ctypes.byref(v), 4)  # RCVHWM
    if timeout_ms is not None:
        v = ctypes.c_int(timeout_ms)
        z.zmq_setsockopt(s, 27, ctypes.byref(v), 4)  # RCVTIMEO
    z.zmq_setsockopt(s, 6, topic, len(topic))  # SUBSCRIBE
    assert z.zmq_connect(s, ep.encode()) == 0
    return s


def recv_multipart(z, s, buf):
    parts = []
    while True:
        n = z.zmq_recv(s, buf, len(buf), 0)
        if n < 0:
            return None
        assert n <= len(buf), "message part larger than the buffer"
        parts.append(bytes(buf[:n]))
        more, ln = ctypes.c_int(0), ctypes.c_size_t(4)
        z.zmq_getsockopt(s, 13, ctypes.byref(more), ctypes.byref(ln))  # RCVMORE
        if not more.value:
            return parts


def cmd_check(a):
    """Every bscan/cfd/f32 image must be a whole legitimate frame: all its
    columns equal (each A-scan of a frame is the same constant spectrum) and
    proportional to value_of(frame_id) with one common factor."""
    z = zmq_lib()
    ctx = z.zmq_ctx_new()
    s = sub_socket(z, ctx, a.endpoint, b"bscan/cfd/f32", timeout_ms=int(a.timeout * 1000))
    buf = ctypes.create_string_buffer(64 << 20)
    refs, n, bad = {}, 0, []
    end = time.monotonic() + a.seconds
    ids = set()
    while time.monotonic() < end and (a.count <= 0 or n < a.count):
        p = recv_multipart(z, s, buf)
        if p is None:
            break
        if len(p) != 3:
            bad.append("%d parts" % len(p))
            continue
        h = json.loads(p[1])
        img = np.frombuffer(p[2], np.float32).reshape(h["shape"]).astype(np.float64)
        col = img[:, 0]
        scale = max(np.abs(col).max(), 1e-30)
        if np.abs(img - col[:, None]).max() > 1e-5 * scale:
            bad.append("frame %d: columns differ (torn)" % h["frame_id"])
            continue
        unit = col / value_of(h["frame_id"])
        ref = refs.setdefault(unit.shape, unit)  # one per geometry
        if np.abs(unit - ref).max() > 1e-4 * np.abs(ref).max():
            bad.append("frame %d: intensity is not that of value %d" % (h["frame_id"],
                                                                       value_of(h["frame_id"])))
            continue
        ids.add(h["frame_id"])
        n += 1
    print("check: %d images of %d frames consistent, %d bad" % (n, len(ids), len(bad)))
    for b in bad[:5]:
        print("  " + b)
    sys.exit(1 if bad or n < a.min else 0)


def cmd_subs(a):
    """Subscribers that connect, stall (read nothing) and vanish: some close
    their socket, some are child processes killed with SIGKILL."""
    z = zmq_lib()
    kids = []
    for i in range(a.count):
        if i % 4 == 0:
            pid = os.fork()
            if pid == 0:
                ctx = z.zmq_ctx_new()
                sub_socket(z, ctx, a.endpoint, hwm=1)
                time.sleep(30)
                os._exit(0)
            kids.append(pid)
        else:
            ctx = z.zmq_ctx_new()
            s = sub_socket(z, ctx, a.endpoint, hwm=1)
            time.sleep(random.uniform(0, 0.02))
            zero = ctypes.c_int(0)
            z.zmq_setsockopt(s, 17, ctypes.byref(zero), 4)  # LINGER 0
            z.zmq_close(s)
            z.zmq_ctx_term(ctx)
    time.sleep(0.3)
    for pid in kids:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    print("subs: %d subscribers connected, stalled and vanished (%d killed)" % (a.count, len(kids)))


# ---------------------------------------------------------------- control block
CTL_FMT = "<IIfiiiIIiiiii3f3f3fI"   # offsets 128..219 (SPEC 3.2)
STATUS_APPLIED, STATUS_REJECTED, STATUS_REASON, STATUS_SEQ = 200, 208, 216, 32


def map_rw(name, size=4096):
    fd = os.open(shm_path(name), os.O_RDWR)
    m = mmap.mmap(fd, size)
    os.close(fd)
    return m


def cmd_ctl_die(a):
    m = map_rw(a.control)
    seq = struct.unpack_from("<Q", m, 64)[0]
    if seq % 2 == 0:
        struct.pack_into("<Q", m, 64, seq + 1)  # inside the write ...
    struct.pack_into("<I", m, 128, 0xffffffff)  # ... half-written garbage ...
    struct.pack_into("<f", m, 180, float("nan"))
    os.kill(os.getpid(), signal.SIGKILL)  # ... and gone


def status_read(st, seconds=10.0):
    """A consistent (seqlock) view of applied_gen, rejected_gen, reason.
    Retries with back-off (a few tight tries, then sleeps doubling up to
    10 ms): on a busy machine octd, or this reader, may be preempted inside
    the write; only a block odd or changing for `seconds` is an error."""
    end = time.monotonic() + seconds
    pause = 0.0
    tries = 0
    while True:
        s0 = struct.unpack_from("<Q", st, STATUS_SEQ)[0]
        if not s0 & 1:
            ap, rj = struct.unpack_from("<QQ", st, STATUS_APPLIED)
            reason = st[STATUS_REASON:STATUS_REASON + 128].split(b"\0")[0].decode(errors="replace")
            if struct.unpack_from("<Q", st, STATUS_SEQ)[0] == s0:
                return ap, rj, reason
        tries += 1
        if time.monotonic() > end:
            raise RuntimeError("status block never consistent in %.0f s (%d tries, seq %d)"
                               % (seconds, tries, s0))
        if tries > 10:
            pause = min(max(pause * 2, 0.0001), 0.01)
            time.sleep(pause)


def cmd_ctl_random(a):
    """Writes a.count generations, each waited for until octd applied or
    rejected it.  Three kinds: a known-good block with valid changes (must be
    applied), a good block with one field broken (must be rejected, with a
    reason), and random bytes (either, but one of them)."""
    rng = random.Random(a.seed)
    m = map_rw(a.control)
    lk = os.open(shm_path(a.control), os.O_RDWR)
    fd = os.open(shm_path(a.status), os.O_RDONLY)
    st = mmap.mmap(fd, 4096, prot=mmap.PROT_READ)
    os.close(fd)
    good = list(struct.unpack_from(CTL_FMT, m, 128))
    nan, inf = float("nan"), float("inf")
    # index in CTL_FMT -> values that no valid block has (ABI 1.1: methods
    # bit 2 is CMS, background 3 rolling and 4 FPN are valid)
    broken = [(0, [0, 8, 0xffffffff]), (1, [6, 99, 0x80000000]), (2, [nan, inf]),
              (3, [-1, 1 << 30]), (4, [1 << 30]), (5, [-(1 << 30)]), (6, [2, 77]), (7, [5, 9]),
              (13, [nan, -inf]), (14, [inf]), (16, [nan]), (19, [nan, inf]), (21, [-inf])]
    counts = {"valid": 0, "broken": 0, "random_applied": 0, "random_rejected": 0}
    t0 = time.monotonic()
    for i in range(a.count):
        kind = ("valid", "broken", "random")[i % 3]
        v = list(good)
        if kind == "valid":
            v[1] = rng.randrange(4)                     # window rect..blackman
            v[3] = rng.randrange(0, 5)                  # freq_cutoff
            v[6] = rng.randrange(2)                     # scale
            for k in range(13, 22):
                v[k] = rng.uniform(0.5, 2.0) if k < 19 else rng.uniform(-50, 50)
            v[22] = rng.choice([1, 1 | 256])            # bscan (+ f32)
        elif kind == "broken":
            k, vals = rng.choice(broken)
            v[k] = rng.choice(vals)
        raw = struct.pack(CTL_FMT, *v) if kind != "random" else os.urandom(92)
        # writers serialise with flock on the object (octd writes the last good
        # values back after a rejection: without the lock both may bump seq).
        # struct.pack_into stores seq byte by byte after zeroing it, so octd
        # can read a smaller even seq with these fields (ipc/control.c takes
        # it as a store in progress): a hostile writer on purpose
        fcntl.flock(lk, fcntl.LOCK_EX)
        seq = struct.unpack_from("<Q", m, 64)[0]
        struct.pack_into("<Q", m, 64, seq + 1)
        m[128:128 + 92] = raw
        struct.pack_into("<Q", m, 64, seq + 2)
        fcntl.flock(lk, fcntl.LOCK_UN)
        gen = (seq + 2) // 2
        end = time.monotonic() + 5
        while True:
            ap, rj, reason = status_read(st)
            # octd may write values back (clamped, or the last good ones
            # after a rejection) as a newer generation
            if ap >= gen or rj == gen:
                break
            if time.monotonic() > end:
                sys.exit("ctl-random: generation %d (%s) neither applied nor rejected in 5 s "
                         "(applied %d, rejected %d)" % (gen, kind, ap, rj))
            time.sleep(0.0002)
        # a rejection writes the last good values back as generation gen+1
        if kind == "valid" and rj == gen:
            sys.exit("valid generation %d rejected: %s (values %r)" % (gen, reason, v))
        if kind == "broken" and rj != gen:
            sys.exit("broken generation %d applied (status: applied %d, rejected %d %r; "
                     "values %r)" % (gen, ap, rj, reason, v))
        if rj == gen and not reason:
            sys.exit("generation %d rejected without a reason" % gen)
        if kind == "random":
            counts["random_rejected" if rj == gen else "random_applied"] += 1
        else:
            counts[kind] += 1
    # leave the known-good values behind
    fcntl.flock(lk, fcntl.LOCK_EX)
    seq = struct.unpack_from("<Q", m, 64)[0]
    struct.pack_into("<Q", m, 64, seq + 1)
    m[128:128 + 92] = struct.pack(CTL_FMT, *good)
    struct.pack_into("<Q", m, 64, seq + 2)
    fcntl.flock(lk, fcntl.LOCK_UN)
    os.close(lk)
    print("ctl-random: %d generations in %.1f s: %s" % (a.count, time.monotonic() - t0, counts))


def main():
    ap = argparse.ArgumentParser()
    sp = ap.add_subparsers(dest="cmd", required=True)
    p = sp.add_parser("produce")
    p.add_argument("--ring", required=True)
    p.add_argument("--geom", default="256,32,1")
    p.add_argument("--type", default="u16")
    p.add_argument("--slots", type=int, default=4)
    p.add_argument("--frames", type=int, default=0)
    p.add_argument("--fps", type=float, default=0)
    p.add_argument("--id0", type=int, default=0)
    p.add_argument("--die-mid-frame", action="store_true")
    p.add_argument("--truncate", type=int)
    p.add_argument("--truncate-go")  # produce until this file exists, then truncate
    p.add_argument("--ready")
    p.add_argument("--hold", action="store_true")
    p = sp.add_parser("check")
    p.add_argument("--endpoint", required=True)
    p.add_argument("--seconds", type=float, default=5)
    p.add_argument("--count", type=int, default=0)
    p.add_argument("--min", type=int, default=1)
    p.add_argument("--timeout", type=float, default=5)
    p = sp.add_parser("subs")
    p.add_argument("--endpoint", required=True)
    p.add_argument("--count", type=int, default=100)
    p = sp.add_parser("ctl-die")
    p.add_argument("--control", required=True)
    p = sp.add_parser("ctl-random")
    p.add_argument("--control", required=True)
    p.add_argument("--status", required=True)
    p.add_argument("--count", type=int, default=100000)
    p.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    {"produce": cmd_produce, "check": cmd_check, "subs": cmd_subs, "ctl-die": cmd_ctl_die,
     "ctl-random": cmd_ctl_random}[a.cmd](a)


if __name__ == "__main__":
    main()
