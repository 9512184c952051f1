"""octd.Subscriber against octgrab on the same stream: the same images
(float32 payloads compared) and contiguous image_seq (no gaps at this rate).
Images in shared memory ([publish] shm_endpoint): Subscriber and octgrab
read header-only messages out of an image area made here."""
import glob
import json
import mmap
import os
import struct
import subprocess
import sys
import time

import numpy as np
import pytest
import zmq

import octd
from conftest import BIN


def test_subscriber_vs_octgrab(daemon, tmp_path):
    sub = octd.Subscriber(daemon.endpoint, ["bscan/cfd"])
    out = tmp_path / "grab"
    out.mkdir()
    grab = subprocess.Popen([os.path.join(BIN, "octgrab"), "--endpoint", daemon.endpoint,
                             "--topic", "bscan/cfd/f32", "--count", "30", "--timeout", "20",
                             "--quiet", "--output", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    got = {}
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (grab.poll() is None or len(got) < 40):
        m = sub.recv(timeout=0.2)
        if m is None:
            continue
        hdr, arr = m
        assert hdr["htype"] == "octd-image-1"
        assert tuple(hdr["shape"]) == arr.shape
        assert not arr.flags.owndata and not arr.flags.writeable  # the message's memory
        if hdr["topic"] == "bscan/cfd/f32":
            got[hdr["image_seq"]] = np.array(arr)
        else:
            assert arr.dtype == np.uint8 and arr.shape == (129, 32)
    rc = grab.wait(30)
    assert rc == 0, grab.stdout.read()
    files = sorted(glob.glob(str(out / "bscan_cfd_f32_*.npy")))
    assert len(files) == 30
    common = 0
    for f in files:
        seq = int(os.path.basename(f).split("_")[-1].split(".")[0])
        if seq in got:
            assert np.array_equal(np.load(f), got[seq])
            common += 1
    assert common >= 20, "only %d images in common" % common
    assert sub.received["bscan/cfd/f32"] >= common
    assert sub.gaps.get("bscan/cfd/f32", 0) == 0
    sub.close()


def test_octgrab_record(daemon, tmp_path):
    from test_engine import _png_gray
    out = tmp_path / "grab"
    rec = tmp_path / "grab.h5"
    r = subprocess.run([os.path.join(BIN, "octgrab"), "--endpoint", daemon.endpoint,
                        "--topic", "bscan/cfd", "--count", "30", "--timeout", "20", "--quiet",
                        "--output", str(out), "--record", str(rec)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "recorded 30 images" in r.stdout
    assert not os.path.exists(str(rec) + ".part")
    with octd.read_recording(str(rec)) as f:
        assert f.raw is None and f.attrs["source"] == "octgrab"
        n = 0
        for topic in ("bscan/cfd", "bscan/cfd/f32"):
            ds, idx = f.products[topic], f.index[topic]
            assert ds.shape[1:] == (129, 32) and len(idx["image_seq"]) == ds.shape[0]
            n += ds.shape[0]
            for i, seq in enumerate(idx["image_seq"]):
                if topic.endswith("f32"):
                    ref = np.load(out / ("bscan_cfd_f32_%06d.npy" % seq))
                else:
                    ref = _png_gray(out / ("bscan_cfd_%06d.png" % seq))
                assert np.array_equal(ds[i], ref), "%s seq %d" % (topic, seq)
        assert n == 30
    r = subprocess.run([os.path.join(BIN, "octgrab"), "--record", str(rec), "--count", "1"],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 64 and "exists" in r.stderr


# ---- images in shared memory ([publish] shm_endpoint) -----------------------
# An image area written here from ipc/oct_ipc.h's layout (not by octd or the
# library), header-only messages published on an XPUB the test binds.

AREA_HEADER = "<8sIIIIQQQQII"  # magic .. state, pad0 (64 bytes); then u64 seq[504] at 64


class Area:
    """An image area /dev/shm/<name> made as octd makes one (ABI 1.0)."""

    def __init__(self, name, slots=4, stride=65536):
        self.name, self.path = name, "/dev/shm" + name
        self._make(slots, stride)

    def _make(self, slots, stride):
        self.slots, self.stride = slots, stride
        self.id = int(np.random.default_rng().integers(1, 1 << 53))
        size = 4096 + slots * stride
        fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        try:
            os.ftruncate(fd, size)
            self.mm = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        struct.pack_into(AREA_HEADER, self.mm, 0, b"OCTIMGS\0", 1, 0, 4096, slots, stride,
                         4096, self.id, os.getpid(), 1, 0)

    def recreate(self, slots=3, stride=2 * 65536):
        """octd's new object under the same name: the old one unlinked (its
        mapping stays valid), a new one with a new id."""
        os.unlink(self.path)
        self._make(slots, stride)

    def seq(self, slot):
        return struct.unpack_from("<Q", self.mm, 64 + 8 * slot)[0]

    def set_seq(self, slot, v):
        struct.pack_into("<Q", self.mm, 64 + 8 * slot, v)

    def put(self, slot, arr, at=0):
        """Writes arr at byte `at` of the slot under its seqlock (odd while
        written); the shm_* members of its message."""
        raw = np.ascontiguousarray(arr).tobytes()
        assert at + len(raw) <= self.stride
        s = self.seq(slot)
        self.set_seq(slot, s | 1)
        off = 4096 + slot * self.stride + at
        self.mm[off:off + len(raw)] = raw
        self.set_seq(slot, (s | 1) + 1)
        return {"shm_name": self.name, "shm_id": self.id, "shm_slot": slot,
                "shm_seq": (s | 1) + 1, "shm_offset": off, "shm_bytes": len(raw)}

    def unlink(self):
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


@pytest.fixture
def area(request):
    a = Area("/octpy%d-img-%s" % (os.getpid(), request.node.name[-24:]))
    yield a
    a.unlink()


class Pub:
    """The shm endpoint's side of octd: an XPUB (so the test knows when a
    subscription arrived) publishing 3-part messages like octd's."""

    def __init__(self, endpoint):
        self.sock = zmq.Context.instance().socket(zmq.XPUB)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.bind(endpoint)
        self.endpoint = endpoint
        self.seq = {}

    def wait_subscriber(self, timeout=10.0):
        assert self.sock.poll(int(timeout * 1000)), "no subscription arrived"
        assert self.sock.recv()[:1] == b"\x01"

    def send(self, topic, arr, shm=None, payload=None, frame_id=None, **extra):
        """An image message of topic: header-only with shm (payload b"") or
        with the full payload when shm is None."""
        seq = self.seq.get(topic, 0) + 1
        self.seq[topic] = seq
        kind, method = topic.split("/")[:2]
        hdr = {"htype": "octd-image-1", "topic": topic, "kind": kind, "method": method,
               "frame_id": seq if frame_id is None else frame_id, "frame_seq": seq,
               "image_seq": seq, "epoch": 1, "t_acq_ns": time.time_ns(),
               "t_pub_ns": time.time_ns(), "shape": list(arr.shape),
               "dtype": "f32" if arr.dtype == np.float32 else "u8", "indices": [],
               "params_gen": 1, "skipped": 0, "torn": 0, "mode": "online"}
        hdr.update(shm or {})
        hdr.update(extra)
        if payload is None:
            payload = b"" if shm else np.ascontiguousarray(arr).tobytes()
        self.sock.send_multipart([topic.encode(), json.dumps(hdr).encode(), payload])
        return hdr

    def sync(self, sub, topic="bscan/sync"):
        """Sends a 2-part message and receives it: everything sent before it
        has been handled by sub (recv skips lost images on its way)."""
        self.nsync = getattr(self, "nsync", 0) + 1
        self.sock.send_multipart([topic.encode(), json.dumps({"sync": self.nsync}).encode()])
        assert sub.recv(timeout=10) == ({"sync": self.nsync}, None)

    def close(self):
        self.sock.close(0)


@pytest.fixture
def pub(tmp_path):
    p = Pub("ipc://%s/shm.pub" % tmp_path)
    yield p
    p.close()


def _images(rng):
    """(topic, array): u8 and f32, 2-D and 3-D, random."""
    return [("bscan/cfd", rng.integers(0, 256, (33, 17), dtype=np.uint8)),
            ("bscan/cfd/f32", rng.standard_normal((20, 30)).astype(np.float32)),
            ("enface/msi", rng.integers(0, 256, (3, 10, 12), dtype=np.uint8)),
            ("enface/msi/f32", rng.standard_normal((2, 5, 7)).astype(np.float32) * 1e3)]


def test_shm_images_read_from_area(area, pub):
    rng = np.random.default_rng(11)
    sub = octd.Subscriber(pub.endpoint, [""])
    pub.wait_subscriber()
    sent = []
    for i, (topic, arr) in enumerate(_images(rng)):
        # slots 0..3 at odd byte offsets: the copy is byte-wise
        sent.append((pub.send(topic, arr, area.put(i, arr, at=8 * i + 3)), arr))
    full = rng.integers(0, 256, (4, 5), dtype=np.uint8)
    sent.append((pub.send("confocal/cfd", full), full))  # a normal message, unchanged
    for hdr_sent, arr in sent:
        m = sub.recv(timeout=5)
        assert m is not None
        hdr, got = m
        assert hdr == hdr_sent
        assert got.dtype == arr.dtype and got.shape == arr.shape
        assert np.array_equal(got, arr), hdr["topic"]
        if "shm_name" in hdr:
            assert got.flags.owndata  # a copy of its own: the slot may be rewritten
        else:
            assert not got.flags.writeable
    # the area stays mapped, once: a second round reads the rewritten slots
    a = sub._areas[area.name]
    for i, (topic, arr) in enumerate(_images(rng)):
        h = pub.send(topic, arr, area.put(i, arr))
        hdr, got = sub.recv(timeout=5)
        assert hdr["image_seq"] == h["image_seq"] == 2 and np.array_equal(got, arr)
    assert sub._areas[area.name] is a
    assert sub.received == {"bscan/cfd": 2, "bscan/cfd/f32": 2, "enface/msi": 2,
                            "enface/msi/f32": 2, "confocal/cfd": 1}
    assert sub.lost_shm == {} and sub.gaps == {}
    pub.sync(sub)
    assert sub.lost_shm == {} and sub.gaps == {}
    sub.close()


def test_shm_overwritten_slot_is_lost(area, pub):
    rng = np.random.default_rng(12)
    sub = octd.Subscriber(pub.endpoint, ["bscan"])
    pub.wait_subscriber()
    a = rng.integers(0, 256, (16, 8), dtype=np.uint8)
    b = rng.integers(0, 256, (16, 8), dtype=np.uint8)
    # 1. rewritten (seq advanced, other bytes) before the reader copies it
    pub.send("bscan/cfd", a, area.put(0, a))
    area.put(0, b)
    # 2. being rewritten (seq odd) when the reader comes
    pub.send("bscan/cfd", a, area.put(1, a))
    area.set_seq(1, area.seq(1) + 1)
    # 3. a header naming an odd seq (never a complete image)
    ref = area.put(2, a)
    pub.send("bscan/cfd", a, dict(ref, shm_seq=ref["shm_seq"] - 1))
    # 4. the image is still there: yielded
    pub.send("bscan/cfd", b, area.put(3, b))
    hdr, got = sub.recv(timeout=5)
    assert hdr["image_seq"] == 4 and np.array_equal(got, b)
    assert sub.lost_shm == {"bscan/cfd": 3}
    assert sub.gaps == {} and sub.received == {"bscan/cfd": 1}
    # slot 1 complete again (seq even, but not the image's): still lost
    area.set_seq(1, area.seq(1) + 1)
    pub.send("bscan/cfd", a, dict(ref, shm_slot=1, shm_seq=area.seq(1) - 2,
                                  shm_offset=4096 + area.stride))
    pub.sync(sub)
    assert sub.lost_shm == {"bscan/cfd": 4}
    # a reference outside its slot is an error, not a loss
    pub.send("bscan/cfd", a, dict(area.put(0, a), shm_offset=4096 + area.stride - 10))
    with pytest.raises(ValueError, match="not inside slot"):
        sub.recv(timeout=5)
    sub.close()


def test_shm_recreated_object_is_mapped_again(area, pub):
    rng = np.random.default_rng(13)
    sub = octd.Subscriber(pub.endpoint, [""])
    pub.wait_subscriber()
    a = rng.standard_normal((7, 9)).astype(np.float32)
    old_ref = area.put(1, a)
    pub.send("bscan/cfd/f32", a, old_ref)
    hdr, got = sub.recv(timeout=5)
    assert np.array_equal(got, a) and sub._areas[area.name].id == old_ref["shm_id"]
    old_id = area.id
    area.recreate(slots=3, stride=2 * 65536)  # new id, another layout, same name
    assert area.id != old_id
    b = rng.standard_normal((3, 40, 50)).astype(np.float32)  # 24,000 bytes, in slot 2
    pub.send("enface/cfd/f32", b, area.put(2, b, at=65536 + 5))
    hdr, got = sub.recv(timeout=5)
    assert hdr["shm_id"] == area.id and np.array_equal(got, b)
    assert sub._areas[area.name].id == area.id
    # a message of the old object after the new one: its image is gone
    pub.send("bscan/cfd/f32", a, old_ref)
    pub.sync(sub)
    assert sub.lost_shm == {"bscan/cfd/f32": 1}
    # the name removed (octd stopped): lost, not an error
    area.unlink()
    ref = area.put(0, a)  # still the mapping of the unlinked object
    pub.send("bscan/cfd/f32", a, dict(ref, shm_id=ref["shm_id"] + 1))
    pub.sync(sub)
    assert sub.lost_shm == {"bscan/cfd/f32": 2}
    assert sub.received == {"bscan/cfd/f32": 1, "enface/cfd/f32": 1}
    sub.close()


WRITER = r"""
import json, mmap, os, struct, sys, time
import numpy as np
import zmq
name, endpoint, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
fd = os.open("/dev/shm" + name, os.O_RDWR)
mm = mmap.mmap(fd, os.fstat(fd).st_size)
os.close(fd)
area_id, stride = struct.unpack_from("<Q", mm, 40)[0], struct.unpack_from("<Q", mm, 24)[0]
seqv = np.frombuffer(mm, "<u8", 504, 64)
img = np.frombuffer(mm, np.uint8, 1 << 20, 4096)  # slot 0: 1 MiB
s = zmq.Context().socket(zmq.XPUB)
s.setsockopt(zmq.SNDHWM, 100000)
s.bind(endpoint)
assert s.poll(10000) and s.recv()[:1] == b"\x01"
t_end, v = time.monotonic() + seconds, 0
while time.monotonic() < t_end:
    v += 1
    seqv[0] += 1          # odd: being rewritten
    img[:] = v & 0xFF     # the frame's image: every byte v
    seqv[0] += 1          # even: complete
    h = {"htype": "octd-image-1", "topic": "volume/cfd", "frame_id": v, "image_seq": v,
         "shape": [64, 128, 128], "dtype": "u8", "shm_name": name, "shm_id": area_id,
         "shm_slot": 0, "shm_seq": int(seqv[0]), "shm_offset": 4096, "shm_bytes": 1 << 20}
    s.send_multipart([b"volume/cfd", json.dumps(h).encode(), b""])
    if v % 8 == 0:
        time.sleep(0.002)  # room for some reads to finish untouched
time.sleep(0.5)  # the last image stays: at least one is yielded
s.send_multipart([b"volume/cfd", b'{"end": %d}' % v])
time.sleep(0.5)
"""


def test_shm_torn_copy_is_never_yielded(tmp_path):
    """A writer process rewriting one 1 MiB slot as fast as it can: every
    image the Subscriber yields is one frame's (all bytes that frame's
    value), the others are counted lost; it fails when the check after the
    copy is removed."""
    a = Area("/octpy%d-img-torn" % os.getpid(), slots=1, stride=1 << 20)
    ep = "ipc://%s/torn.pub" % tmp_path
    w = subprocess.Popen([sys.executable, "-c", WRITER, a.name, ep, "2.0"],
                         stderr=subprocess.PIPE, text=True)
    try:
        sub = octd.Subscriber(ep, ["volume", "status"], rcvhwm=0)
        ok = 0
        sent = None
        deadline = time.monotonic() + 30
        while sent is None and time.monotonic() < deadline:
            m = sub.recv(timeout=1)
            if m is None:
                assert w.poll() is None, w.stderr.read()
                continue
            hdr, img = m
            if img is None:  # the 2-part end message
                sent = hdr["end"]
                break
            assert np.all(img == (hdr["frame_id"] & 0xFF)), "torn image yielded"
            ok += 1
        assert sent is not None, "the writer did not finish"
        lost = sub.lost_shm.get("volume/cfd", 0)
        assert ok + lost + sub.gaps.get("volume/cfd", 0) == sent
        assert ok > 0 and lost > 0, (ok, lost, sent)
        sub.close()
    finally:
        w.wait(30)
        a.unlink()


def test_octgrab_shm(area, pub, tmp_path):
    """octgrab on a shm endpoint: images read out of the area are printed,
    saved (PNG, .npy) and recorded as received payloads are; an overwritten
    one or one of a replaced object is lost, malformed shm_* members are
    malformed."""
    from test_engine import _png_gray
    rng = np.random.default_rng(14)
    out, rec = tmp_path / "grab", tmp_path / "grab.h5"
    grab = subprocess.Popen([os.path.join(BIN, "octgrab"), "--endpoint", pub.endpoint,
                             "--count", "4", "--timeout", "10", "--output", str(out),
                             "--record", str(rec)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        pub.wait_subscriber()
        imgs = dict(_images(rng))
        b = imgs["bscan/cfd"]
        ref = area.put(0, b)
        area.put(0, b[::-1])
        pub.send("bscan/cfd", b, ref)  # image_seq 1: rewritten before octgrab reads it
        ref = area.put(1, imgs["enface/msi"])     # image_seq 1: another object's id
        pub.send("enface/msi", imgs["enface/msi"], dict(ref, shm_id=ref["shm_id"] ^ 1))
        x = rng.integers(0, 256, (4, 4), dtype=np.uint8)
        pub.send("xsec_h/cfd", x, dict(area.put(2, x), shm_slot="2"))        # malformed
        pub.send("xsec_h/cfd", x, {k: v for k, v in area.put(2, x).items() if k != "shm_seq"})
        pub.send("xsec_h/cfd", x, dict(area.put(2, x), shm_bytes=15))
        pub.send("xsec_h/cfd", x, dict(area.put(2, x), shm_slot=1 << 32))
        pub.send("xsec_h/cfd", x, dict(area.put(2, x), shm_offset=-1))
        pub.send("xsec_h/cfd", x, dict(area.put(2, x), shm_name="/" + "n" * 255))
        for i, (topic, arr) in enumerate(imgs.items()):
            pub.send(topic, arr, area.put(i, arr, at=4 * i + 1))
        o, e = grab.communicate(timeout=30)
    finally:
        if grab.poll() is None:
            grab.kill()
            grab.wait()
    assert grab.returncode == 0, o + e
    assert "bscan/cfd          seq 1      frame 1        lost (overwritten in shared memory)" in o
    assert "enface/msi         seq 1      frame 1        lost (its image area is gone)" in o
    assert "total: 4 images, 0 status, 6 malformed, 2 lost (overwritten in shared memory)" in o, o
    assert e.count("malformed message skipped") == 5, e  # the first 5 are said
    for why in ("expected a number", "only some of the shm_* members",
                "shm_bytes 15 does not match the shape", "not a 32-bit slot number",
                "expected a non-negative integer"):
        assert why in e, e
    lines = o.splitlines()
    head = next(i for i, l in enumerate(lines) if l.startswith("topic "))
    assert lines[head].split()[-2:] == ["saved", "lost"]
    rows = {l.split()[0]: l.split() for l in lines[head + 1:] if "/" in l.split()[0]}
    # topic messages rate/s gaps p50 p99 max saved lost: the lost image is not a gap
    assert rows["bscan/cfd"][1] == "1" and rows["bscan/cfd"][3] == "0"
    assert rows["bscan/cfd"][7] == "1" and rows["bscan/cfd"][8] == "1"
    assert rows["bscan/cfd/f32"][7] == "1" and rows["bscan/cfd/f32"][8] == "0"
    assert "xsec_h/cfd" not in rows
    assert np.array_equal(_png_gray(out / "bscan_cfd_000002.png"), imgs["bscan/cfd"])
    for q in range(3):
        assert np.array_equal(_png_gray(out / ("enface_msi_000002_%d.png" % q)),
                              imgs["enface/msi"][q])
    assert np.array_equal(np.load(out / "bscan_cfd_f32_000001.npy"), imgs["bscan/cfd/f32"])
    assert np.array_equal(np.load(out / "enface_msi_f32_000001.npy"), imgs["enface/msi/f32"])
    assert sorted(os.listdir(out)) == sorted(
        ["bscan_cfd_000002.png", "bscan_cfd_f32_000001.npy", "enface_msi_f32_000001.npy"]
        + ["enface_msi_000002_%d.png" % q for q in range(3)])
    with octd.read_recording(str(rec)) as f:
        for topic, arr in imgs.items():
            assert np.array_equal(f.products[topic][0], arr), topic
            assert f.products[topic].shape[0] == 1
