"""octring - a pure-Python producer for octd's frame ring (SPEC 3.1, ABI 1.0).

numpy + mmap of /dev/shm/<name>; no compiled part.  Usage:

    from octring import RingProducer
    with RingProducer("/octd-frames", samples=1024, ascans=500, lines=1,
                      sample_type="u16") as ring:
        frame = ring.begin()          # numpy view (lines, ascans, samples) into the slot
        frame[...] = my_spectra
        ring.commit(frame_id=n)       # publishes it; also updates the heartbeat

Memory ordering: the protocol needs release stores (slot seq odd, payload,
slot seq even, write_seq).  This module writes each 64-bit field with one
aligned 8-byte store (a numpy uint64 element assignment) and CPython runs
the statements in program order.  On x86-64 (TSO) stores become visible in
program order, so no fences are needed; on weakly ordered CPUs (ARM,
POWER) this module is NOT safe - use the C library (liboctipc) there.
"""

import grp
import mmap
import os
import struct
import threading
import time

import numpy as np

ABI_MAJOR, ABI_MINOR = 1, 0
HEADER_BYTES = 4096
SLOT_HEADER_BYTES = 4096
PAGE = 4096
STATE_INIT, STATE_READY, STATE_CLOSED = 0, 1, 2
SAMPLE_TYPES = {"u16": (1, np.dtype("<u2")), "i16": (2, np.dtype("<i2")),
                "f32": (3, np.dtype("<f4"))}

# header offsets (SPEC 3.1)
OFF_WRITE_SEQ, OFF_HEARTBEAT, OFF_STATE = 128, 192, 256


def _monotonic_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def _shm_path(name):
    if not name.startswith("/") or "/" in name[1:] or len(name) < 2:
        raise ValueError("ring name %r: must be '/name' without further '/'" % name)
    return "/dev/shm" + name



def _give_octd_group(fd, group="octd"):
    """As liboctipc does (README, set-up): octd reads the ring through group
    octd, so a ring made by an acquirer whose primary group is another gets
    group octd when that group exists and this process is root or a member;
    otherwise it stays as created."""
    try:
        gid = grp.getgrnam(group).gr_gid
    except KeyError:
        return
    if os.geteuid() == 0 or gid == os.getegid() or gid in os.getgroups():
        try:
            os.fchown(fd, -1, gid)
        except OSError:
            pass

class RingProducer:
    """Creates (re-creates) a frame ring and writes frames into it."""

    def __init__(self, name="/octd-frames", samples=1024, ascans=500, lines=1,
                 sample_type="u16", sample_shift=0, slots=8, mode=0o660,
                 heartbeat_thread=True):
        if sample_type not in SAMPLE_TYPES:
            raise ValueError("sample_type %r: must be u16, i16 or f32" % sample_type)
        if samples < 64 or samples > 8192 or samples & (samples - 1):
            raise ValueError("samples = %d: must be a power of two from 64 to 8192" % samples)
        if ascans < 1 or lines < 1:
            raise ValueError("ascans and lines must be at least 1")
        if slots < 2 or slots > 65536 or slots & (slots - 1):
            raise ValueError("slots = %d: must be a power of two from 2 to 65536" % slots)
        code, dtype = SAMPLE_TYPES[sample_type]
        if sample_type == "f32" and sample_shift != 0 or not 0 <= sample_shift < 16:
            raise ValueError("sample_shift = %d: 0 for f32, < 16 otherwise" % sample_shift)
        self.name = name
        self.shape = (lines, ascans, samples)
        self.dtype = dtype
        self.frame_bytes = samples * ascans * lines * dtype.itemsize
        self.slot_count = slots
        self.slot_stride = (SLOT_HEADER_BYTES + self.frame_bytes + PAGE - 1) // PAGE * PAGE
        self.slot0 = HEADER_BYTES
        total = self.slot0 + slots * self.slot_stride
        path = _shm_path(name)
        # a restart replaces the object: consumers see a new inode and epoch
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, mode)
        try:
            os.fchmod(fd, mode)          # the umask must not narrow the mode
            _give_octd_group(fd)
            os.ftruncate(fd, total)
            self._mm = mmap.mmap(fd, total, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(fd)
            os.unlink(path)
            raise
        os.close(fd)
        # 64-bit views for the atomic fields: element stores are single
        # aligned 8-byte stores
        self._u64 = np.frombuffer(self._mm, dtype="<u8", count=HEADER_BYTES // 8)
        self._u32 = np.frombuffer(self._mm, dtype="<u4", count=HEADER_BYTES // 4)
        self.epoch = int.from_bytes(os.urandom(8), "little") or 1
        struct.pack_into("<8sIIII QQ IIIIII QQQQ", self._mm, 0,
                         b"OCTRING\0", ABI_MAJOR, ABI_MINOR, HEADER_BYTES, slots,
                         self.slot_stride, self.slot0,
                         samples, ascans, lines, code, sample_shift, 0,
                         self.epoch, os.getpid(), time.time_ns(), self.frame_bytes)
        self._n = 0
        self._in_frame = False
        self._u64[OFF_WRITE_SEQ // 8] = 0
        self.heartbeat()
        self._u32[OFF_STATE // 4] = STATE_READY   # last: publishes the header
        self._hb_stop = threading.Event()
        self._hb = None
        if heartbeat_thread:
            self._hb = threading.Thread(target=self._hb_loop, daemon=True)
            self._hb.start()

    # -- protocol ---------------------------------------------------------
    def _slot_off(self, n):
        return self.slot0 + (n % self.slot_count) * self.slot_stride

    def begin(self):
        """Marks slot n as being written (seq = 2n+1); returns a numpy view
        (lines, ascans, samples) of its payload to fill."""
        off = self._slot_off(self._n)
        self._u64_slot = np.frombuffer(self._mm, dtype="<u8", count=4, offset=off)
        self._u64_slot[0] = 2 * self._n + 1
        self._in_frame = True
        return np.frombuffer(self._mm, dtype=self.dtype, count=self.frame_bytes // self.dtype.itemsize,
                             offset=off + SLOT_HEADER_BYTES).reshape(self.shape)

    def commit(self, frame_id=None, t_acq_ns=None):
        """Publishes the frame begun last (seq = 2n+2, then write_seq = n+1)."""
        if not self._in_frame:
            raise RuntimeError("commit() without begin()")
        s = self._u64_slot
        s[1] = self._n if frame_id is None else frame_id
        s[2] = time.time_ns() if t_acq_ns is None else t_acq_ns
        np.frombuffer(self._mm, dtype="<u4", count=1, offset=self._slot_off(self._n) + 24)[0] = 0
        s[0] = 2 * self._n + 2
        self._n += 1
        self._u64[OFF_WRITE_SEQ // 8] = self._n
        self.heartbeat()
        self._in_frame = False
        del self._u64_slot

    def write(self, frame, frame_id=None, t_acq_ns=None):
        """begin + copy + commit of a whole (lines, ascans, samples) array."""
        view = self.begin()
        view[...] = np.asarray(frame).reshape(self.shape)
        del view
        self.commit(frame_id, t_acq_ns)

    def heartbeat(self):
        self._u64[OFF_HEARTBEAT // 8] = _monotonic_ns()

    def _hb_loop(self):
        while not self._hb_stop.wait(0.05):   # every 50 ms (SPEC: <= 100 ms)
            self.heartbeat()

    @property
    def write_seq(self):
        return self._n

    def close(self, unlink=False):
        """Marks the ring CLOSED (consumers see it) and unmaps it."""
        if self._mm is None:
            return
        if self._hb is not None:
            self._hb_stop.set()
            self._hb.join()
        self._u32[OFF_STATE // 4] = STATE_CLOSED
        del self._u64, self._u32
        try:
            self._mm.close()
        except BufferError:
            pass  # a caller still holds a view from begin(): leave the mapping
        self._mm = None
        if unlink:
            try:
                os.unlink(_shm_path(self.name))
            except FileNotFoundError:
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
