"""octd.Engine (liboct.so through ctypes) against a float64 reference and
against octproc's files (bit-equal gray, float32 within SPEC 7)."""
import os
import subprocess

import numpy as np
import pytest

import octd
from conftest import BIN, PROFILE, make_frames
from refs import assert_gray_close, cfd_bscan, rel_l2


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    t = tmp_path_factory.mktemp("engine")
    prof = t / "profile.yaml"
    prof.write_text(PROFILE)
    frames = make_frames(seed=99, count=3)
    rng = np.random.default_rng(7)
    frames = (frames.astype(np.int32) + rng.integers(-200, 200, frames.shape)).clip(0, 65535)
    frames = frames.astype(np.uint16)
    np.save(t / "stack.npy", frames)
    r = subprocess.run([os.path.join(BIN, "octproc"), "--profile", str(prof), "--backend", "cpu",
                        "--input", str(t / "stack.npy"), "--output", str(t / "out")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return t, prof, frames


def test_engine_matches_reference(setup):
    t, prof, frames = setup
    eng = octd.Engine(str(prof), backend="cpu", plan="quick")
    assert eng.backend == "cpu"
    for fr in frames:
        out = eng.process(fr)
        assert set(out) == {"bscan/cfd", "bscan/cfd/f32"}
        I = cfd_bscan(fr, F=4)
        assert out["bscan/cfd/f32"].shape == I.shape == (129, 32)
        assert out["bscan/cfd/f32"].dtype == np.float32
        assert rel_l2(out["bscan/cfd/f32"], I) < 1e-4
        assert_gray_close(out["bscan/cfd"], I, 1.0, 2.0, -20.0, log=True)


def test_engine_matches_octproc(setup):
    t, prof, frames = setup
    eng = octd.Engine(str(prof), backend="cpu", plan="quick")
    for k, fr in enumerate(frames):
        out = eng.process(fr)
        ref = np.load(t / "out" / ("%06d" % k) / "bscan_cfd.npy")
        assert out["bscan/cfd/f32"].shape == ref.shape
        assert rel_l2(out["bscan/cfd/f32"], ref.astype(np.float64)) < 1e-4
        # gray levels: the same engine and set-up -> bit-equal to octproc's PNG
        # (read back through the f32 -> gray mapping octproc also applies)
        assert np.array_equal(out["bscan/cfd"], _png_gray(t / "out" / ("%06d" % k) / "bscan_cfd.png"))


def _png_gray(path):
    """8-bit gray PNG (as octproc writes: no interlace) -> array, with zlib."""
    import struct
    import zlib
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, w, h = 8, b"", 0, 0
    while pos < len(data):
        n, typ = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if typ == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and ctype == 0
        elif typ == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    out = np.zeros((h, w), np.uint8)
    prev = np.zeros(w, np.int32)
    for y in range(h):
        f = raw[y * (w + 1)]
        line = np.frombuffer(raw, np.uint8, w, y * (w + 1) + 1).astype(np.int32)
        cur = np.zeros(w, np.int32)
        for x in range(w):
            a = cur[x - 1] if x else 0
            b = prev[x]
            c = prev[x - 1] if x else 0
            if f == 0:
                p = 0
            elif f == 1:
                p = a
            elif f == 2:
                p = b
            elif f == 3:
                p = (a + b) // 2
            else:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                p = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
            cur[x] = (line[x] + p) & 255
        out[y] = cur
        prev = cur
    return out


def test_engine_bad_input(setup):
    t, prof, frames = setup
    eng = octd.Engine(str(prof), backend="cpu", plan="quick")
    with pytest.raises(ValueError, match="does not match"):
        eng.process(np.zeros((1, 16, 256), np.uint16))
    with pytest.raises(TypeError, match="dtype"):
        eng.process(np.zeros((1, 32, 256), np.float64))
    bad = t / "bad.yaml"
    bad.write_text("window: {type: hanning}\n")
    with pytest.raises(octd.OctError, match="window"):
        octd.Engine(str(bad), backend="cpu", plan="quick")


def test_engine_geometry_from_first_frame(setup):
    t, prof, frames = setup
    p2 = t / "nogeom.yaml"
    p2.write_text("\n".join(l for l in PROFILE.splitlines() if not l.startswith("geometry")))
    eng = octd.Engine(str(p2), backend="cpu", plan="quick")
    assert eng.geometry is None
    out = eng.process(frames[0].astype(np.float32))
    assert eng.geometry.samples == 256 and out["bscan/cfd/f32"].shape == (129, 32)


CUDA_CHECK = r"""
import sys, numpy as np, octd
sys.path.insert(0, sys.argv[2])
from refs import cfd_bscan, rel_l2, assert_gray_close
from conftest import make_frames
try:
    eng = octd.Engine(sys.argv[1], backend="cuda", plan="quick")
except octd.OctError as exc:
    print("NOCUDA", exc)
    sys.exit(0)
assert eng.backend == "cuda"
for fr in make_frames(seed=5, count=3):
    out = eng.process(fr)
    I = cfd_bscan(fr, F=4)
    assert rel_l2(out["bscan/cfd/f32"], I) < 1e-4
    assert_gray_close(out["bscan/cfd"], I, 1.0, 2.0, -20.0, log=True)
print("CUDA OK")
"""


def test_engine_cuda(setup):
    """backend="cuda" against the float64 reference, in a child process (CUDA
    is never initialised in the test process, which forks octd and octproc)."""
    import sys
    t, prof, frames = setup
    r = subprocess.run([sys.executable, "-c", CUDA_CHECK, str(prof), os.path.dirname(__file__)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    if "NOCUDA" in r.stdout:
        pytest.skip("no CUDA device: " + r.stdout.strip())
    assert "CUDA OK" in r.stdout


def test_engine_volume_matches_octproc(tmp_path):
    """A volume frame: every product kind (en-face stack with its indices,
    confocal, cross-sections, volume) equal to octproc's files."""
    prof = tmp_path / "vol.yaml"
    prof.write_text("""geometry: {samples: 128, ascans: 12, lines: 6, sample_type: i16, sample_shift: 0}
methods: [cfd]
window: {type: hamming}
freq_cutoff: 2
enface: {start: 5, step: 7, count: 20}
xsec: {h_index: 3, v_index: 7}
products: [enface, confocal, xsec_h, xsec_v, volume, f32]
""")
    rng = np.random.default_rng(11)
    frame = rng.integers(-3000, 3000, size=(6, 12, 128), dtype=np.int16)
    np.save(tmp_path / "f.npy", frame)
    r = subprocess.run([os.path.join(BIN, "octproc"), "--profile", str(prof), "--backend", "cpu",
                        "--input", str(tmp_path / "f.npy"), "--output", str(tmp_path / "out")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    eng = octd.Engine(str(prof), backend="cpu", plan="quick")
    out = eng.process(frame)
    kinds = ("enface", "confocal", "xsec_h", "xsec_v", "volume")
    assert set(out) == {"%s/cfd%s" % (k, s) for k in kinds for s in ("", "/f32")}
    assert out["enface/cfd"].shape == (9, 6, 12)  # indices 5, 12, ..., 61 < D = 65
    assert list(eng.indices["enface/cfd"]) == list(range(5, 65, 7))
    for k in kinds:
        ref = np.load(tmp_path / "out" / ("%s_cfd.npy" % k))
        assert out[k + "/cfd/f32"].shape == ref.shape, k
        assert rel_l2(out[k + "/cfd/f32"], ref.astype(np.float64)) < 1e-4, k
