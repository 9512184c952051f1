"""Fixtures of the octd Python suite (run by tests/e2e_python.sh).

`daemon`: a Python Producer writes known frames (FRAMES[id % 8] with the id
in sample 0, paced) into a ring; an octd (CPU, policy all) processes them,
its save directory is a symlink that tests point where they need
(`daemon.save_to(dir)`).  BIN (programs) from the environment.
"""
import os
import shutil
import subprocess
import tempfile
import threading
import time

import numpy as np
import pytest

import octd

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.path.join(ROOT, os.environ.get("BIN", "bin"))
M, N, L = 256, 32, 1
RATE = 100.0  # frames per second


def make_frames(seed=1234, count=8, shape=(L, N, M)):
    rng = np.random.default_rng(seed)
    n = np.arange(shape[-1])
    base = 2000 + 800 * np.exp(-0.5 * ((n - shape[-1] / 2) / (shape[-1] / 5)) ** 2)
    out = []
    for _ in range(count):
        d = rng.uniform(5, shape[-1] / 2 - 5, size=shape[:-1] + (1,))
        x = base + 600 * np.cos(2 * np.pi * d * n / shape[-1] + rng.uniform(0, 6.3, d.shape))
        out.append((x + rng.normal(0, 30, x.shape)).clip(0, 65535).astype(np.uint16))
    return np.stack(out)


FRAMES = make_frames()


def expected_frame(fid, frames=None):
    frames = FRAMES if frames is None else frames
    f = frames[fid % len(frames)].copy()
    f[0, 0, 0] = fid & 0xFFFF
    return f


PROFILE = f"""geometry: {{samples: {M}, ascans: {N}, lines: {L}, sample_type: u16, sample_shift: 0}}
methods: [cfd]
window: {{type: hann}}
freq_cutoff: 4
scale: log
display:
  bscan: {{gsc: 1.0, contrast: 2.0, brightness: -20.0}}
products: [bscan, f32]
"""


class Daemon:
    def __init__(self, tmp, tag="a", profile=PROFILE, shape=(L, N, M), save_ini=""):
        self.tmp = tmp
        self.prefix = "/octpy%d%s" % (os.getpid(), tag)
        self.shape = shape
        self.frames = FRAMES if shape == (L, N, M) else make_frames(seed=4321, shape=shape)
        self.endpoint = "ipc://%s/pub" % tmp
        self.profile = os.path.join(tmp, "profile.yaml")
        with open(self.profile, "w") as f:
            f.write(profile)
        self.save_link = os.path.join(tmp, "save")
        os.makedirs(os.path.join(tmp, "disk"))
        os.symlink(os.path.join(tmp, "disk"), self.save_link)
        self.ini = os.path.join(tmp, "octd.ini")
        with open(self.ini, "w") as f:
            f.write(f"""[engine]
backend = cpu
threads = 1
[ring]
frames = {self.prefix}-frames
control = {self.prefix}-control
status = {self.prefix}-status
policy = all
[publish]
endpoint = {self.endpoint}
sndhwm = 64
[profile]
path = {self.profile}
[save]
directory = {self.save_link}
{save_ini}
[log]
level = info
""")
        self.producer = octd.Producer(self.prefix + "-frames", samples=shape[2], ascans=shape[1],
                                      lines=shape[0], sample_type="u16", slots=64)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._produce, daemon=True)
        self._thread.start()
        self.log = open(os.path.join(tmp, "octd.log"), "w")
        self.proc = subprocess.Popen([os.path.join(BIN, "octd"), "--config", self.ini],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        self.control = octd.Control(self.prefix + "-control", self.prefix + "-status",
                                    timeout=10.0)
        deadline = time.monotonic() + 20
        while True:
            try:
                s = self.control.status()
                if s["frames_processed"] > 0:
                    break
            except Exception:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("octd did not start: " + self.log_text())
            time.sleep(0.05)

    def _produce(self):
        fid = 0
        period = 1.0 / RATE
        t = time.monotonic()
        while not self._stop.is_set():
            self.producer.write(expected_frame(fid, self.frames), frame_id=fid)
            fid += 1
            t += period
            dt = t - time.monotonic()
            if dt > 0:
                time.sleep(dt)
            else:
                t = time.monotonic()

    def save_to(self, path):
        """Points the save directory (a symlink) at path."""
        tmp = self.save_link + ".new"
        os.symlink(path, tmp)
        os.replace(tmp, self.save_link)

    def log_text(self):
        self.log.flush()
        with open(os.path.join(self.tmp, "octd.log")) as f:
            return f.read()[-3000:]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._stop.set()
        self._thread.join()
        self.producer.close(unlink=True)
        for suffix in ("-control", "-status"):
            try:
                os.unlink("/dev/shm" + self.prefix + suffix)
            except FileNotFoundError:
                pass


@pytest.fixture(scope="session")
def tmpdir_session():
    d = tempfile.mkdtemp(prefix="octd-pytest.")
    yield d
    if not os.environ.get("KEEP"):
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def daemon(tmpdir_session):
    d = Daemon(tmpdir_session)
    yield d
    d.stop()
