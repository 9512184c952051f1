"""octd.Subscriber against octgrab on the same stream: the same images
(float32 payloads compared) and contiguous image_seq (no gaps at this rate)."""
import glob
import os
import subprocess
import time

import numpy as np

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
