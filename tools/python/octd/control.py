"""Control(name): the operators' side of octd (SPEC 3.2, 3.3, 4, 10.5).

Values are written as one generation through liboct.so (the same writers'
lock and seqlock as octctl), then octd's answer is awaited in the status
block: applied, or rejected with its reason (raised as ControlRejected).
"""
from __future__ import annotations

import ctypes
import struct
import time
from typing import Any, Dict, Mapping, Optional

from . import _lib

CMD_ONLINE, CMD_SNAPSHOT, CMD_REVIEW, CMD_SAVE_RAW, CMD_SAVE_IMAGES = 1, 2, 3, 4, 5
CMD_RECORD, CMD_RECORD_STOP, CMD_REFERENCE = 6, 7, 8
RECORD_RAW, RECORD_PRODUCTS = 1, 2
STATES = ("starting", "online", "review", "error", "stopping")
RECORD_STATES = ("idle", "active", "done", "failed")
RESULTS = ("ok", "refused", "failed")


class ControlRejected(RuntimeError):
    """octd rejected a generation of values; the message is octd's reason."""


class CommandFailed(RuntimeError):
    """octd refused a command or it failed; the message is octd's."""


def _text(b: bytes, off: int, n: int) -> str:
    return b[off:off + n].split(b"\0", 1)[0].decode("utf-8", "replace")


def parse_status(b: bytes) -> Dict[str, Any]:
    """The status block (4096 bytes, SPEC 3.3 with status ABI 1.1) as a dict."""
    if b[:8] != b"OCTSTAT\0":
        raise ValueError("not an octd status block (magic %r)" % b[:8])
    u32 = lambda o: struct.unpack_from("<I", b, o)[0]  # noqa: E731
    u64 = lambda o: struct.unpack_from("<Q", b, o)[0]  # noqa: E731
    st = u32(20)
    d = {
        "abi_minor": u32(12), "state": STATES[st] if st < len(STATES) else str(st),
        "pid": u64(24), "heartbeat_ns": u64(40), "backend": _text(b, 48, 32),
        "device": _text(b, 80, 96), "ring_epoch": u64(176),
        "geometry": (u32(192), u32(188), u32(184), u32(196)),
        "applied_gen": u64(200), "rejected_gen": u64(208), "rejected_reason": _text(b, 216, 128),
        "command_ack_seq": u64(344), "command_result": u32(352),
        "command_message": _text(b, 360, 128),
    }
    for i, k in enumerate(("frames_seen", "frames_processed", "frames_skipped", "frames_torn",
                           "ring_reattaches", "images_published", "publish_drops",
                           "last_frame_id", "last_latency_ns", "start_ns")):
        d[k] = u64(488 + 8 * i)
    rs = u32(1104)
    d.update({
        "ring_state": u32(568), "ring_message": _text(b, 576, 128), "warnings": _text(b, 704, 256),
        "last_error": _text(b, 960, 128), "frames_reprocessed": u64(1088),
        "frames_lost": u64(1096),
        "record_state": RECORD_STATES[rs] if rs < len(RECORD_STATES) else str(rs),
        "record_frames": u64(1112), "record_dropped": u64(1120),
        "record_file": _text(b, 1128, 256), "record_message": _text(b, 1384, 128),
        "reference_state": u32(1108), "reference_frame": u64(1512),
        "registration_volumes": u64(1520), "registration_skipped": u64(1528),
    })
    return d


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, (list, tuple)):
        return ",".join(_value(x) for x in v)
    return str(v)


class Control:
    """octd's control and status blocks by name.

    >>> c = Control()                       # /octd-control, /octd-status
    >>> c.set({"enface.start": 20}, window="hann")
    >>> c.get()["window"]
    'hann'
    """

    def __init__(self, name: str = "/octd-control", status: str = "/octd-status",
                 timeout: float = 5.0):
        self.name = name
        self.status_name = status
        self.timeout = timeout
        self._l = _lib.lib()

    # -- values ---------------------------------------------------------
    def get(self) -> Dict[str, str]:
        """All control values as {key: value text} (keys as in octctl get)."""
        buf = ctypes.create_string_buffer(65536)
        _lib.call(self._l.oct_ctl_get, self.name.encode(), buf, len(buf))
        out = {}
        for line in buf.value.decode().splitlines():
            k, _, v = line.partition("=")
            out[k] = v
        return out

    def set(self, values: Optional[Mapping[str, Any]] = None, wait: bool = True,
            **kw: Any) -> int:
        """Writes the values as one generation and (wait) returns once octd
        applied it; raises ControlRejected with octd's reason.  Keys with dots
        go in `values`; keyword names may use '__' for '.' (enface__start)."""
        items = dict(values or {})
        items.update({k.replace("__", "."): v for k, v in kw.items()})
        if not items:
            raise ValueError("set(): no values given")
        text = "\n".join("%s=%s" % (k, _value(v)) for k, v in items.items())
        gen = ctypes.c_uint64()
        _lib.call(self._l.oct_ctl_set, self.name.encode(), text.encode(), ctypes.byref(gen))
        if not wait:
            return gen.value
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            s = self.status()
            if s["rejected_gen"] == gen.value:
                raise ControlRejected(s["rejected_reason"])
            if s["applied_gen"] >= gen.value:
                return gen.value
            self._check_alive(s)
            time.sleep(0.005)
        raise TimeoutError("octd did not answer generation %d within %.1f s"
                           % (gen.value, self.timeout))

    def generation(self) -> int:
        """The control block's current generation (seq / 2), read directly."""
        import mmap
        import os
        fd = os.open("/dev/shm" + self.name, os.O_RDONLY)
        try:
            with mmap.mmap(fd, 4096, mmap.MAP_SHARED, mmap.PROT_READ) as m:
                return struct.unpack_from("<Q", m, 64)[0] // 2
        finally:
            os.close(fd)

    # -- status ---------------------------------------------------------
    def status(self) -> Dict[str, Any]:
        """A consistent copy of the status block, parsed (see parse_status)."""
        buf = ctypes.create_string_buffer(4096)
        _lib.call(self._l.oct_stat_copy, self.status_name.encode(), buf, 4096)
        return parse_status(buf.raw)

    @staticmethod
    def _check_alive(s: Dict[str, Any]) -> None:
        import os
        if s["state"] == "stopping":
            raise RuntimeError("octd is stopping")
        try:
            os.kill(s["pid"], 0)
        except ProcessLookupError:
            raise RuntimeError("octd (pid %d) is not running" % s["pid"]) from None
        except PermissionError:
            pass

    # -- commands -------------------------------------------------------
    def command(self, cmd: int, flags: int = 0, frames: int = 0, seconds: float = 0.0) -> str:
        """Issues a command, waits for octd's answer; returns its message,
        raises CommandFailed when refused or failed."""
        seq = ctypes.c_uint64()
        _lib.call(self._l.oct_ctl_command, self.name.encode(), cmd, flags, frames,
                  float(seconds), ctypes.byref(seq))
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            s = self.status()
            if s["command_ack_seq"] == seq.value:
                if s["command_result"] != 0:
                    raise CommandFailed(s["command_message"])
                return s["command_message"]
            if s["command_ack_seq"] > seq.value:
                raise CommandFailed("another command was issued before octd took this one")
            self._check_alive(s)
            time.sleep(0.005)
        raise TimeoutError("octd did not answer the command within %.1f s" % self.timeout)

    def online(self) -> str:
        return self.command(CMD_ONLINE)

    def snapshot(self) -> str:
        return self.command(CMD_SNAPSHOT)

    def review(self) -> str:
        return self.command(CMD_REVIEW)

    def save(self, what: str = "raw") -> str:
        """save raw|images (review only); returns octd's message (the path)."""
        if what not in ("raw", "images"):
            raise ValueError("save(%r): 'raw' or 'images'" % what)
        return self.command(CMD_SAVE_RAW if what == "raw" else CMD_SAVE_IMAGES)

    def reference(self, op: str = "set") -> str:
        """Registration reference (SPEC 10.4): set, clear or auto."""
        ops = {"set": 0, "clear": 1, "auto": 2}
        if op not in ops:
            raise ValueError("reference(%r): set, clear or auto" % op)
        return self.command(CMD_REFERENCE, flags=ops[op])

    def record(self, frames: int = 0, seconds: float = 0.0, raw: bool = True,
               products: bool = False, wait: bool = False,
               timeout: Optional[float] = None) -> str:
        """Starts a recording (SPEC 10.5) and returns the file's final path;
        wait=True also waits until it is complete (then raises CommandFailed
        when it failed)."""
        flags = (RECORD_RAW if raw else 0) | (RECORD_PRODUCTS if products else 0)
        if not flags:
            raise ValueError("record(): raw and/or products")
        self.command(CMD_RECORD, flags=flags, frames=frames, seconds=seconds)
        path = self.status()["record_file"]
        if wait:
            self.wait_record(timeout)
        return path

    def record_stop(self, wait: bool = True, timeout: Optional[float] = None) -> Dict[str, Any]:
        """Ends the recording in progress; wait: until the file is complete."""
        self.command(CMD_RECORD_STOP)
        return self.wait_record(timeout) if wait else self.status()

    def wait_record(self, timeout: Optional[float] = None) -> Dict[str, Any]:
        """Waits until no recording is active; returns the status; raises
        CommandFailed with record_message when the recording failed."""
        deadline = time.monotonic() + (timeout if timeout is not None else 60.0)
        while time.monotonic() < deadline:
            s = self.status()
            if s["record_state"] == "failed":
                raise CommandFailed(s["record_message"])
            if s["record_state"] != "active":
                return s
            self._check_alive(s)
            time.sleep(0.02)
        raise TimeoutError("recording still active after the timeout")
