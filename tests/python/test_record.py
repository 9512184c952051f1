"""Recording (SPEC 10.5) through the control block: the file read back is
what the Producer wrote; products equal octd.Engine's; control changes kept;
disk full, a removed directory and SIGTERM leave a valid file (or a clear
failure) and octd goes on."""
import os
import subprocess
import time

import numpy as np
import pytest

import octd
from conftest import PROFILE as DEFAULT_PROFILE
from conftest import Daemon, expected_frame
from refs import rel_l2


def _wait_frames(c, n, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        s = c.status()
        if s["record_frames"] >= n:
            return s
        time.sleep(0.02)
    raise TimeoutError("recording did not reach %d frames: %s" % (n, s))


def _direct_or_refused(mode):
    return mode == "direct" or mode.startswith(
        "buffered (the save directory's file system refuses O_DIRECT")


class WriterFreezer:
    """A cgroup v1 freezer for octd's writer thread alone (a disk that falls
    behind): skips the test where there is none; remove() thaws and removes."""

    def __init__(self, name):
        self.cg = os.path.join("/sys/fs/cgroup/freezer", "%s%d" % (name, os.getpid()))
        try:
            os.mkdir(self.cg)
        except OSError as exc:
            pytest.skip("no cgroup v1 freezer: %s" % exc)

    @staticmethod
    def writer_tids(pid):
        return [t for t in os.listdir("/proc/%d/task" % pid)
                if open("/proc/%d/task/%s/comm" % (pid, t)).read().strip() == "octd-record"]

    def _state(self, state):
        with open(os.path.join(self.cg, "freezer.state"), "w") as f:
            f.write(state)

    def freeze(self, tid):
        with open(os.path.join(self.cg, "tasks"), "w") as f:
            f.write(tid)
        self._state("FROZEN")

    def thaw(self):
        self._state("THAWED")

    def remove(self):
        self.thaw()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.rmdir(self.cg)
                break
            except OSError:
                time.sleep(0.1)


def test_record_raw_and_products(daemon, tmp_path):
    c = daemon.control
    d = tmp_path / "rec"
    d.mkdir()
    daemon.save_to(str(d))
    path = c.record(frames=40, raw=True, products=True)
    assert path.endswith(".h5") and path.startswith(daemon.save_link)
    with pytest.raises(octd.CommandFailed, match="in progress"):
        c.record(frames=1)
    time.sleep(0.1)
    c.set(display__bscan__brightness=-10.0)  # a control change during the recording
    s = c.wait_record(timeout=30)
    assert s["record_state"] == "done", s
    files = os.listdir(d)
    assert files == [os.path.basename(path)], files  # renamed; no .part, no reserve left
    with octd.read_recording(str(d / files[0])) as r:
        assert len(r) == 40 and r.raw.shape == (40, 1, 32, 256) and r.raw.dtype == np.uint16
        assert r.attrs["frames"] == 40
        assert r.geometry == {"samples": 256, "ascans": 32, "lines": 1, "sample_type": "u16",
                              "sample_shift": 0}
        assert "freq_cutoff: 4" in r.profile
        assert r.control["window"].startswith("hann")
        assert r.attrs["octd_version"]
        # 16 KiB frames: O_DIRECT (tmpfs takes it since Linux 6.6; before, the
        # fallback says why)
        assert _direct_or_refused(r.attrs["record_io"]), r.attrs["record_io"]
        raw = r.frames()
        fids = r.frame_id
        assert np.all(np.diff(fids.astype(np.int64)) >= 1)
        for i, fid in enumerate(fids):
            assert np.array_equal(raw[i], expected_frame(int(fid))), "frame %d" % fid
        assert np.all(np.diff(r.t_acq_ns.astype(np.int64)) > 0)
        assert set(r.products) == {"bscan/cfd", "bscan/cfd/f32"}
        assert r.products["bscan/cfd"].shape == (40, 129, 32)
        # products are octd's: equal to the engine's on the same raw frame,
        # with the control values of the generation in effect
        changes = r.control_changes
        assert len(changes) >= 1 and changes[-1]["values"]["display.bscan.brightness"] in ("-10", "-10.0")
        eng = octd.Engine(daemon.profile, backend="cpu", plan="quick")
        eng_b = octd.Engine(daemon.profile, backend="cpu",
                            set={"display.bscan.brightness": -10.0}, plan="quick")
        first_change = changes[-1]["index"]
        for i in range(40):
            e = (eng_b if i >= first_change else eng).process(raw[i])
            # octd plans its FFTs by measuring, the Engine quickly: SPEC 7 tolerances
            g = r.products["bscan/cfd"][i].astype(int) - e["bscan/cfd"]
            assert np.abs(g).max() <= 1 and np.count_nonzero(g) <= g.size // 100, "row %d" % i
            assert rel_l2(r.products["bscan/cfd/f32"][i], e["bscan/cfd/f32"]) < 1e-4
    c.set(display__bscan__brightness=-20.0)


def test_record_stop_and_seconds(daemon, tmp_path):
    c = daemon.control
    d = tmp_path / "rec2"
    d.mkdir()
    daemon.save_to(str(d))
    with pytest.raises(octd.CommandFailed, match="no recording"):
        c.record_stop()
    path = c.record()  # no limit
    _wait_frames(c, 5)
    s = c.record_stop()
    assert s["record_state"] == "done" and s["record_frames"] >= 5
    with octd.read_recording(path.replace(daemon.save_link, str(d))) as r:
        assert len(r) == s["record_frames"]
        assert r.attrs["stop_reason"] == "stopped by record_stop"
    path = c.record(seconds=0.5, wait=True)
    with octd.read_recording(path.replace(daemon.save_link, str(d))) as r:
        assert 10 <= len(r) <= 100 and r.attrs["stop_reason"] == "duration reached"


def test_record_directory_removed(daemon, tmp_path):
    c = daemon.control
    d = tmp_path / "doomed"
    d.mkdir()
    daemon.save_to(str(d))
    c.record()
    _wait_frames(c, 5)
    subprocess.run(["rm", "-rf", str(d)], check=True)
    with pytest.raises(octd.CommandFailed, match="removed"):
        c.wait_record(timeout=20)
    s = c.status()
    assert s["record_state"] == "failed" and "removed" in s["record_message"]
    n = s["frames_processed"]
    time.sleep(0.3)
    assert c.status()["frames_processed"] > n  # octd goes on


def test_record_disk_full(daemon, tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip("cannot mount a small tmpfs: " + r.stderr.strip())
    try:
        c = daemon.control
        daemon.save_to(str(mnt))
        path = c.record()  # 16 KiB frames: the 20 MiB fill up after ~1000 frames (10 s)
        with pytest.raises(octd.CommandFailed, match="disk full"):
            c.wait_record(timeout=60)
        s = c.status()
        assert s["record_state"] == "failed" and s["record_frames"] > 100
        files = os.listdir(mnt)
        assert files == [os.path.basename(path)], files
        with octd.read_recording(str(mnt / files[0])) as rec:
            n = len(rec)
            assert n == s["record_frames"] and rec.raw.shape[0] == n
            assert "disk full" in rec.attrs["stop_reason"]
            assert _direct_or_refused(rec.attrs["record_io"]), rec.attrs["record_io"]
            raw = rec.frames()
            for i in (0, n // 2, n - 1):
                assert np.array_equal(raw[i], expected_frame(int(rec.frame_id[i])))
    finally:
        subprocess.run(["umount", "-l", str(mnt)])


VOLUME_PROFILE = """geometry: {samples: 128, ascans: 16, lines: 4, sample_type: u16, sample_shift: 0}
methods: [cfd]
window: {type: hann}
freq_cutoff: 2
enface: {start: 3, step: 20, count: 10}
products: [enface, confocal, xsec_v, f32]
"""


def test_record_sigterm(tmp_path):
    """A volume recording (raw + 3-D products) ended by SIGTERM: valid file."""
    d = Daemon(str(tmp_path), tag="t", profile=VOLUME_PROFILE, shape=(4, 16, 128))
    try:
        c = d.control
        path = c.record(raw=True, products=True)
        _wait_frames(c, 10)
        d.proc.terminate()
        assert d.proc.wait(30) == 0
        final = path.replace(d.save_link, os.path.join(str(tmp_path), "disk"))
        assert os.listdir(os.path.dirname(final)) == [os.path.basename(final)]
        with octd.read_recording(final) as r:
            n = len(r)
            assert n >= 10 and r.raw.shape == (n, 4, 16, 128)
            assert r.attrs["stop_reason"] == "octd stopped"
            assert set(r.products) == {"%s/cfd%s" % (k, s) for k in ("enface", "confocal", "xsec_v")
                                       for s in ("", "/f32")}
            en = r.products["enface/cfd"]
            assert en.shape == (n, 4, 4, 16) and list(en.attrs["indices"]) == [3, 23, 43, 63]
            assert r.products["xsec_v/cfd/f32"].shape == (n, 65, 4)
            eng = octd.Engine(d.profile, backend="cpu", plan="quick")
            for i in range(n):
                assert np.array_equal(r.raw[i], expected_frame(int(r.frame_id[i]), d.frames))
            e = eng.process(r.raw[n - 1])
            assert rel_l2(r.products["enface/cfd/f32"][n - 1], e["enface/cfd/f32"]) < 1e-4
            assert rel_l2(r.products["confocal/cfd/f32"][n - 1], e["confocal/cfd/f32"]) < 1e-4
    finally:
        d.stop()


def test_record_disk_behind_frames_left_out(daemon, tmp_path):
    """The writer thread frozen (cgroup v1 freezer, that thread only) stands for
    a disk that falls behind: the queue fills, frames are left out and counted,
    processing goes on at the same rate, and the file holds the rest."""
    fz = WriterFreezer("octpy")
    c = daemon.control
    d = tmp_path / "behind"
    d.mkdir()
    daemon.save_to(str(d))
    try:
        path = c.record()
        # frames left out at the recording's start (queue buffers not yet
        # touched, counted too) come before the file's first frame, so they are
        # no gap: count only what is left out from here on
        pre = _wait_frames(c, 3)["record_dropped"]
        tids = WriterFreezer.writer_tids(daemon.proc.pid)
        assert len(tids) == 1, tids
        # the writer yields to the frame loop: nice 19 (field 19 of stat)
        stat = open("/proc/%d/task/%s/stat" % (daemon.proc.pid, tids[0])).read()
        assert int(stat.rsplit(")", 1)[1].split()[16]) == 19, stat
        fz.freeze(tids[0])
        s0 = c.status()
        deadline = time.monotonic() + 20
        while c.status()["record_dropped"] - pre < 20 and time.monotonic() < deadline:
            time.sleep(0.05)
        s1 = c.status()
        assert s1["record_dropped"] - pre >= 20, (pre, s1)
        assert s1["frames_processed"] - s0["frames_processed"] >= 100  # not held up
        assert s1["frames_skipped"] == s0["frames_skipped"]
        fz.thaw()
        # the queued frames (at most 256 entries, record.c's REC_ENTRIES_MAX) and
        # then some taken after the left-out ones, so the file has the gap (on a
        # loaded machine the stop could otherwise come before a later frame got in)
        _wait_frames(c, s1["record_frames"] + 256 + 3, timeout=60)
        s = c.record_stop()
        assert s["record_state"] == "done"
        with octd.read_recording(path.replace(daemon.save_link, str(d))) as r:
            assert len(r) == s["record_frames"] and r.dropped == s["record_dropped"] >= 20
            fid = r.frame_id.astype(np.int64)
            # the frames left out while the writer was frozen are the gap
            gap = int(np.sum(np.diff(fid) - 1))
            assert gap >= s1["record_dropped"] - pre, (gap, pre, s1["record_dropped"])
            for i in (0, len(r) // 2, len(r) - 1):
                assert np.array_equal(r.raw[i], expected_frame(int(fid[i])))
    finally:
        fz.remove()


ODD_PROFILE = """geometry: {samples: 128, ascans: 30, lines: 1, sample_type: u16, sample_shift: 0}
methods: [cfd]
window: {type: hann}
freq_cutoff: 2
products: [confocal]
"""


@pytest.mark.parametrize("save_ini,shape,want", [
    # [save] record_io = buffered: the page cache, dirty pages bounded
    ("record_io = buffered", (1, 32, 256), "buffered ([save] record_io = buffered)"),
    # auto, 7680-byte frames: O_DIRECT cannot take them, the fallback says why
    ("", (1, 30, 128), "buffered (the frame size is not a multiple of 4096 bytes)"),
    # direct, 7680-byte frames: the command fails, naming the key and why
    ("record_io = direct", (1, 30, 128), None),
])
def test_record_io_modes(tmp_path, save_ini, shape, want):
    prof = DEFAULT_PROFILE if shape == (1, 32, 256) else ODD_PROFILE
    d = Daemon(str(tmp_path), tag="io", profile=prof, shape=shape, save_ini=save_ini)
    try:
        c = d.control
        if want is None:
            with pytest.raises(octd.CommandFailed,
                               match=r"record_io = direct: the frame size is not a multiple"):
                c.record(frames=5)
            assert os.listdir(os.path.join(str(tmp_path), "disk")) == []
            return
        path = c.record(frames=30, wait=True)
        final = path.replace(d.save_link, os.path.join(str(tmp_path), "disk"))
        with octd.read_recording(final) as r:
            assert len(r) == 30 and r.raw.shape == (30,) + shape
            assert r.attrs["record_io"] == want
            for i in range(30):
                assert np.array_equal(r.raw[i], expected_frame(int(r.frame_id[i]), d.frames))
    finally:
        d.stop()


def test_record_backlog_disk_full(daemon, tmp_path):
    """A backlog (writer frozen, then thawed) is written 16 frames per write
    and runs into a full disk inside a batch: the file keeps exactly the frames
    completely written, in order, and says why it ended."""
    fz = WriterFreezer("octpyb")
    mnt = tmp_path / "small"
    mnt.mkdir()
    # 16 MiB go to the space reserve: about 3 MiB (~190 frames of 16 KiB) for data,
    # fewer than the 256 the queue holds
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=19m", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        fz.remove()
        pytest.skip("cannot mount a small tmpfs: " + r.stderr.strip())
    c = daemon.control
    try:
        daemon.save_to(str(mnt))
        path = c.record()
        _wait_frames(c, 2)
        fz.freeze(WriterFreezer.writer_tids(daemon.proc.pid)[0])
        deadline = time.monotonic() + 30
        while c.status()["record_dropped"] < 5 and time.monotonic() < deadline:
            time.sleep(0.05)  # the queue is full
        fz.thaw()
        with pytest.raises(octd.CommandFailed, match="disk full"):
            c.wait_record(timeout=60)
        s = c.status()
        assert s["record_state"] == "failed" and 20 < s["record_frames"] < 256, s
        files = os.listdir(mnt)
        assert files == [os.path.basename(path)], files
        with octd.read_recording(str(mnt / files[0])) as rec:
            n = len(rec)
            assert n == s["record_frames"] and rec.raw.shape[0] == n
            assert "disk full" in rec.attrs["stop_reason"]
            fid = rec.frame_id.astype(np.int64)
            raw = rec.frames()
            for i in range(n):
                assert np.array_equal(raw[i], expected_frame(int(fid[i]))), i
    finally:
        fz.thaw()
        subprocess.run(["umount", "-l", str(mnt)])
        fz.remove()


def test_record_o_direct_refused(daemon, tmp_path):
    """ramfs refuses O_DIRECT at open: auto falls back to the page cache, the
    file says why, and the frames are all there."""
    mnt = tmp_path / "ram"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "ramfs", "ramfs", str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip("cannot mount a ramfs: " + r.stderr.strip())
    try:
        c = daemon.control
        daemon.save_to(str(mnt))
        path = c.record(frames=20, wait=True)
        with octd.read_recording(path.replace(daemon.save_link, str(mnt))) as rec:
            assert len(rec) == 20
            assert rec.attrs["record_io"] == ("buffered (the save directory's file system "
                                              "refuses O_DIRECT (Invalid argument))")
            for i in range(20):
                assert np.array_equal(rec.raw[i], expected_frame(int(rec.frame_id[i])))
        daemon.log.flush()
        with open(os.path.join(daemon.tmp, "octd.log")) as f:
            assert "raw frames buffered: the save directory's file system refuses O_DIRECT" \
                in f.read()
    finally:
        subprocess.run(["umount", "-l", str(mnt)])
