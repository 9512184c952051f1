#!/usr/bin/env python3
"""example_producer.py - writes synthetic B-scans into an octd frame ring.

    example_producer.py [--ring /octd-frames] [--samples 1024] [--ascans 500]
                        [--type u16] [--frames 100] [--rate 20]

Each frame is a few mirror-like fringes over a Gaussian envelope plus noise,
as a 12-bit ADC would give; --frames 0 runs until Ctrl-C.
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from octring import RingProducer  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ring", default="/octd-frames")
    ap.add_argument("--samples", type=int, default=1024)
    ap.add_argument("--ascans", type=int, default=500)
    ap.add_argument("--lines", type=int, default=1)
    ap.add_argument("--type", default="u16", choices=["u16", "i16", "f32"])
    ap.add_argument("--frames", type=int, default=100)
    ap.add_argument("--rate", type=float, default=20.0, help="frames per second (0 = as fast as possible)")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()

    rng = np.random.default_rng(a.seed)
    M, N, L = a.samples, a.ascans, a.lines
    n = np.arange(M)
    env = np.exp(-0.5 * ((n - M / 2) / (0.3 * M)) ** 2)
    x = np.arange(N) / N
    depths = [0.1 * M + 0.03 * M * np.sin(2 * np.pi * x), 0.2 * M + 0.02 * M * x, 0.3 * M + 0 * x]
    fringe = sum(np.cos(2 * np.pi * d[:, None] * n[None, :] / M) for d in depths)
    base = env[None, :] * (1800 + 200 * fringe)               # (N, M)
    with RingProducer(a.ring, samples=M, ascans=N, lines=L, sample_type=a.type) as ring:
        print("ring %s: epoch %016x, %d slots" % (a.ring, ring.epoch, ring.slot_count), file=sys.stderr)
        k = 0
        t_next = time.monotonic()
        try:
            while a.frames == 0 or k < a.frames:
                spectra = base[None, :, :] + rng.normal(0, 3, (L, N, M))
                if a.type == "u16":
                    data = np.clip(np.rint(spectra), 0, 4095).astype(np.uint16)
                elif a.type == "i16":
                    data = np.clip(np.rint(spectra - 2048), -2048, 2047).astype(np.int16)
                else:
                    data = spectra.astype(np.float32)
                ring.write(data, frame_id=k)
                k += 1
                if a.rate > 0:
                    t_next += 1.0 / a.rate
                    time.sleep(max(0.0, t_next - time.monotonic()))
        except KeyboardInterrupt:
            pass
        print("wrote %d frames" % k, file=sys.stderr)


if __name__ == "__main__":
    main()
