"""Subscriber: octd's images (SPEC 6) as (header, ndarray), zero-copy."""
from __future__ import annotations

import json
from typing import Any, Dict, Iterable, Iterator, Optional, Tuple, Union

import numpy as np
import zmq

DTYPES = {"u8": np.dtype("u1"), "f32": np.dtype("<f4")}


class Subscriber:
    """Subscribes to topic prefixes ("bscan/cfd", "enface", "" = all images).

    Iterating yields (header dict, ndarray); the array is a read-only view
    of the received ZeroMQ frame (no copy).  `gaps[topic]` counts images
    octd published but this subscriber did not receive (image_seq jumps);
    `received[topic]` counts what arrived.  The 2-part `status` messages are
    yielded as (status dict, None) only when "status" is subscribed.
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
        self.bytes = 0
        self._last: Dict[str, int] = {}

    def recv(self, timeout: Optional[float] = None) -> Optional[Tuple[Dict[str, Any],
                                                                      Optional[np.ndarray]]]:
        """The next message, or None when nothing came within timeout seconds
        (None = wait as long as it takes)."""
        if timeout is not None and not self._sock.poll(int(timeout * 1000)):
            return None
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
        self.received[topic] = self.received.get(topic, 0) + 1
        self.bytes += n
        return hdr, arr

    def __iter__(self) -> Iterator[Tuple[Dict[str, Any], Optional[np.ndarray]]]:
        while True:
            m = self.recv()
            if m is not None:
                yield m

    def close(self) -> None:
        self._sock.close(0)

    def __enter__(self) -> "Subscriber":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
