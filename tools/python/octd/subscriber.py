"""Subscriber: octd's images (SPEC 6) as (header, ndarray), zero-copy; on a
`[publish] shm_endpoint`, copied out of octd's image area (ipc/PROTOCOL.md
"Images in shared memory")."""
from __future__ import annotations

import json
import mmap
import os
import re
import time
from typing import Any, Dict, Iterable, Iterator, Optional, Tuple, Union

import numpy as np
import zmq

DTYPES = {"u8": np.dtype("u1"), "f32": np.dtype("<f4")}

# The image area's header (ipc/oct_ipc.h, oct_images_header): 4096 bytes,
# then slot_count slots of slot_stride bytes.
IMAGES_MAGIC = b"OCTIMGS\0"
IMAGES_ABI_MAJOR = 1
IMAGES_HEADER_BYTES = 4096
IMAGES_SLOTS_MAX = 504
_HEADER = np.dtype([("magic", "S8"), ("abi_major", "<u4"), ("abi_minor", "<u4"),
                    ("header_bytes", "<u4"), ("slot_count", "<u4"), ("slot_stride", "<u8"),
                    ("slot0_offset", "<u8"), ("id", "<u8"), ("owner_pid", "<u8"),
                    ("state", "<u4"), ("pad0", "<u4")])
_SHM_MEMBERS = ("shm_id", "shm_slot", "shm_seq", "shm_offset", "shm_bytes")
_SHM_NAME = re.compile(r"^/[^/\x00]{1,254}$")


class _ImageArea:
    """One read-only mapping of an image area (/dev/shm/<name>)."""

    def __init__(self, name: str):
        if not _SHM_NAME.match(name) or name in ("/.", "/.."):
            raise ValueError("shm_name %r is not a shared-memory object name" % name)
        self.name = name
        fd = os.open("/dev/shm/" + name[1:], os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            size = os.fstat(fd).st_size
            if size < IMAGES_HEADER_BYTES:
                raise ValueError("image area %s: object is %d bytes, less than its header"
                                 % (name, size))
            self._mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ)
        finally:
            os.close(fd)
        self._u8 = np.frombuffer(self._mm, dtype=np.uint8)
        h = self._u8[:_HEADER.itemsize].copy().view(_HEADER)[0]
        bad = None
        if bytes(self._u8[:8]) != IMAGES_MAGIC:
            bad = 'magic is not "OCTIMGS\\0": not an image area'
        elif int(h["abi_major"]) != IMAGES_ABI_MAJOR:
            bad = "abi_major = %d: this reader understands %d.x" % (h["abi_major"],
                                                                   IMAGES_ABI_MAJOR)
        elif (int(h["header_bytes"]) != IMAGES_HEADER_BYTES
              or int(h["slot0_offset"]) != IMAGES_HEADER_BYTES):
            bad = "header_bytes = %d, slot0_offset = %d: expected %d" % (
                h["header_bytes"], h["slot0_offset"], IMAGES_HEADER_BYTES)
        elif not 1 <= int(h["slot_count"]) <= IMAGES_SLOTS_MAX:
            bad = "slot_count = %d, not 1..%d" % (h["slot_count"], IMAGES_SLOTS_MAX)
        elif int(h["slot_stride"]) == 0 or int(h["slot_stride"]) % 4096:
            bad = "slot_stride = %d is not a multiple of 4096" % h["slot_stride"]
        elif IMAGES_HEADER_BYTES + int(h["slot_count"]) * int(h["slot_stride"]) > size:
            bad = "%d slots of %d bytes do not fit in the object's %d bytes" % (
                h["slot_count"], h["slot_stride"], size)
        if bad:
            self.close()
            raise ValueError("image area %s: %s" % (name, bad))
        # constant for the object's life (octd makes a new object, new id, for
        # a new layout; it never shrinks one it published)
        self.id = int(h["id"])
        self.slot_count = int(h["slot_count"])
        self.slot_stride = int(h["slot_stride"])
        # each slot's seqlock: aligned u64, one load each
        self._seq = self._u8[64:64 + 8 * IMAGES_SLOTS_MAX].view("<u8")

    def read(self, hdr: Dict[str, Any], out: np.ndarray) -> bool:
        """Copies the image hdr names into out (C-contiguous, shm_bytes
        bytes): True, or False when octd rewrote the slot before or during
        the copy (out is then not the image)."""
        slot, seq = int(hdr["shm_slot"]), int(hdr["shm_seq"])
        off, n = int(hdr["shm_offset"]), int(hdr["shm_bytes"])
        lo = IMAGES_HEADER_BYTES + slot * self.slot_stride
        if (slot >= self.slot_count or off < lo or n > self.slot_stride
                or off - lo > self.slot_stride - n):
            raise ValueError("image area %s: %d bytes at offset %d are not inside slot %d "
                             "(%d slots of %d bytes)" % (self.name, n, off, slot,
                                                         self.slot_count, self.slot_stride))
        # the seqlock (ipc/oct_ipc.h): seq, copy, seq again.  Each step is its
        # own C call through the interpreter, so the loads are issued in this
        # order (x86-64 keeps loads in order; elsewhere the interpreter's own
        # atomics between the calls order them).
        if seq & 1 or int(self._seq[slot]) != seq:
            return False
        np.copyto(out.reshape(-1).view(np.uint8), self._u8[off:off + n])
        return int(self._seq[slot]) == seq

    def close(self) -> None:
        self._seq = self._u8 = None  # the views first: mmap refuses to close under them
        try:
            self._mm.close()
        except BufferError:  # a view still held somewhere: the GC unmaps it
            pass


class Subscriber:
    """Subscribes to topic prefixes ("bscan/cfd", "enface", "" = all images).

    Iterating yields (header dict, ndarray); the array is a read-only view
    of the received ZeroMQ frame (no copy).  `gaps[topic]` counts images
    octd published but this subscriber did not receive (image_seq jumps);
    `received[topic]` counts what arrived.  The 2-part `status` messages are
    yielded as (status dict, None) only when "status" is subscribed.

    On octd's `[publish] shm_endpoint` the messages carry no payload but say
    where the image lies in octd's image area (the header members shm_name,
    shm_id, shm_slot, shm_seq, shm_offset, shm_bytes; ipc/PROTOCOL.md
    "Images in shared memory"): the image is then copied out of the area
    (mapped read-only, one mapping per name, mapped again when octd made a
    new object under the name) under the slot's seqlock and yielded the same
    way, as an array of its own (writeable).  An image octd rewrote before
    or during the copy, or whose object is gone, is not yielded: it is
    counted in `lost_shm[topic]` (not in `gaps`, which stays the count of
    messages that never arrived; images missing = gaps + lost_shm).  An
    object that is not an image area, or a reference outside it, raises
    ValueError; one that cannot be opened for another reason than being
    gone (permissions) raises OSError.
    """

    def __init__(self, endpoint: str = "tcp://127.0.0.1:5556",
                 topics: Union[str, Iterable[str]] = ("",), rcvhwm: int = 1000,
                 context: Optional[zmq.Context] = None):
        if isinstance(topics, str):
            topics = (topics,)
        self._ctx = context or zmq.Context.instance()
        self._sock = self._ctx.socket(zmq.SUB)
        self._sock.setsockopt(zmq.RCVHWM, rcvhwm)
        self._sock.setsockopt(zmq.LINGER, 0)
        for t in topics:
            self._sock.setsockopt(zmq.SUBSCRIBE, t.encode())
        self._sock.connect(endpoint)
        self.endpoint = endpoint
        self.gaps: Dict[str, int] = {}
        self.received: Dict[str, int] = {}
        self.lost_shm: Dict[str, int] = {}
        self.bytes = 0
        self._last: Dict[str, int] = {}
        self._areas: Dict[str, _ImageArea] = {}

    def recv(self, timeout: Optional[float] = None) -> Optional[Tuple[Dict[str, Any],
                                                                      Optional[np.ndarray]]]:
        """The next message, or None when nothing came within timeout seconds
        (None = wait as long as it takes).  Images lost in shared memory are
        counted and skipped, within the same timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if deadline is not None:
                left = max(0.0, deadline - time.monotonic())
                if not self._sock.poll(int(left * 1000)):
                    return None
            m = self._recv_one()
            if m is not None:
                return m

    def _recv_one(self) -> Optional[Tuple[Dict[str, Any], Optional[np.ndarray]]]:
        parts = self._sock.recv_multipart(copy=False)
        topic = parts[0].bytes.decode("utf-8", "replace")
        if len(parts) == 2:
            return json.loads(parts[1].bytes), None
        if len(parts) != 3:
            raise ValueError("message of %d parts on topic %r (expected 3)" % (len(parts), topic))
        hdr = json.loads(parts[1].bytes)
        dt = DTYPES.get(hdr.get("dtype"))
        if dt is None:
            raise ValueError("topic %s: unknown dtype %r" % (topic, hdr.get("dtype")))
        shape = tuple(int(x) for x in hdr["shape"])
        buf = parts[2].buffer
        n = int(np.prod(shape)) * dt.itemsize
        if len(buf) == 0 and "shm_name" in hdr:
            arr = self._read_shm(topic, hdr, shape, dt, n)  # None: lost
        else:
            if len(buf) != n:
                raise ValueError("topic %s: payload of %d bytes, header shape %s %s needs %d"
                                 % (topic, len(buf), shape, hdr["dtype"], n))
            arr = np.frombuffer(buf, dtype=dt).reshape(shape)
            arr.flags.writeable = False  # the message's memory, shared
        seq = int(hdr.get("image_seq", 0))
        last = self._last.get(topic)
        if last is not None and seq > last + 1:
            self.gaps[topic] = self.gaps.get(topic, 0) + seq - last - 1
        self._last[topic] = seq
        if arr is None:
            self.lost_shm[topic] = self.lost_shm.get(topic, 0) + 1
            return None
        self.received[topic] = self.received.get(topic, 0) + 1
        self.bytes += n
        return hdr, arr

    def _area(self, name: str, shm_id: int) -> Optional[_ImageArea]:
        """The mapping of name, mapped again when it is not object shm_id
        (octd made a new object under the name); None when the name is gone."""
        a = self._areas.get(name)
        if a is not None and a.id == shm_id:
            return a
        if a is not None:
            del self._areas[name]
            a.close()
        try:
            a = _ImageArea(name)
        except FileNotFoundError:
            return None  # octd stopped, or is between two objects: the image is lost
        self._areas[name] = a
        return a

    def _read_shm(self, topic: str, hdr: Dict[str, Any], shape: Tuple[int, ...],
                  dt: np.dtype, n: int) -> Optional[np.ndarray]:
        name = hdr["shm_name"]
        if not isinstance(name, str):
            raise ValueError("topic %s: shm_name %r is not a string" % (topic, name))
        for k in _SHM_MEMBERS:
            v = hdr.get(k)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError("topic %s: %s = %r is not a non-negative integer"
                                 % (topic, k, v))
        if hdr["shm_bytes"] != n:
            raise ValueError("topic %s: shm_bytes %d, header shape %s %s needs %d"
                             % (topic, hdr["shm_bytes"], shape, hdr["dtype"], n))
        a = self._area(name, hdr["shm_id"])
        if a is None or a.id != hdr["shm_id"]:
            return None  # still another object: the image's is gone
        out = np.empty(shape, dtype=dt)
        return out if a.read(hdr, out) else None

    def __iter__(self) -> Iterator[Tuple[Dict[str, Any], Optional[np.ndarray]]]:
        while True:
            m = self.recv()
            if m is not None:
                yield m

    def close(self) -> None:
        self._sock.close(0)
        for a in self._areas.values():
            a.close()
        self._areas.clear()

    def __enter__(self) -> "Subscriber":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
