"""Producer: the frame-ring writer (SPEC 3.1) - tools/python/octring.py's
RingProducer, with whole-stack helpers."""
from __future__ import annotations

import time
from typing import Iterable, Optional

import numpy as np

try:
    from octring import RingProducer  # installed side by side / same directory
except ImportError:  # pragma: no cover - package imported from elsewhere
    import os
    import sys
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from octring import RingProducer


class Producer(RingProducer):
    """A ring producer (see octring.RingProducer for the protocol):

    >>> with Producer("/octd-frames", samples=1024, ascans=500) as p:
    ...     p.write(frame)                    # (lines, ascans, samples)
    """

    def write_frames(self, frames: Iterable[np.ndarray], rate: Optional[float] = None,
                     first_id: Optional[int] = None) -> int:
        """Writes frames in turn, `rate` frames per second at most (None = as
        fast as possible); frame_id counts from first_id (default: the ring's
        write_seq).  Returns the number written."""
        n = 0
        period = 1.0 / rate if rate else 0.0
        t_next = time.monotonic()
        base = self.write_seq if first_id is None else first_id
        for f in frames:
            if period:
                dt = t_next - time.monotonic()
                if dt > 0:
                    time.sleep(dt)
                t_next += period
            self.write(f, frame_id=base + n)
            n += 1
        return n


__all__ = ["Producer", "RingProducer"]
