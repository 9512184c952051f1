#!/usr/bin/env python3
"""cupy_anchor.py - the CuPy version of octbench's engine workloads (issue 19).

What a Python user with a GPU would write for the same products, so that
octbench's figures have an anchor measured in the same call on the same GPU:
``cupy.fft.rfft`` for CFD, one matrix product with the matrix of shifted,
windowed masks for MSI (SPEC 2.3), the products of SPEC 2.4 and the gray
mapping of SPEC 2.5, from a u16 frame already on the device to 8-bit images
on the device (octbench's ``device_ms`` also excludes the copies).

Precision: ``fp32`` (plain fp32 GEMM: CUPY_TF32=0) or ``tf32`` (tensor cores,
CUPY_TF32=1, set before CuPy is imported: CuPy reads it once).

Usage (on the GPU machine, where CuPy is installed):
    python3 tools/octbench/cupy_anchor.py [--precision fp32|tf32] [--reps 20]
        [--warmup 3] [--only NAME ...] [--json FILE]
Prints one line per workload: name, median device ms (CUDA events), and the
same workload names as octbench so tools/octbench/cupy_compare.sh can join them.
"""
import argparse
import json
import os
import sys


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--precision", choices=["fp32", "tf32"], default="fp32")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--json", default=None)
    ap.add_argument("--check", action="store_true",
                    help="compare each workload's float intensities with a float64 evaluation "
                         "on a small slice (sanity of the anchor itself)")
    return ap.parse_args(argv)


ARGS = parse_args(sys.argv[1:])
os.environ["CUPY_TF32"] = "1" if ARGS.precision == "tf32" else "0"
try:
    import numpy as np  # noqa: E402
    import cupy as cp  # noqa: E402
except ImportError as exc:
    print(f"cupy_anchor: {exc} (CuPy and NumPy are on the GPU machine)", file=sys.stderr)
    sys.exit(77)

# name, M, N, L, R, methods, lag_lo, lag_hi, kind ("bscan", "enface", "volume")
WORKLOADS = [
    ("bscan-cfd", 1024, 500, 1, 0, "cfd", 0, 0, "bscan"),
    ("bscan-msi", 1024, 500, 1, 512, "msi", -10, 10, "bscan"),
    ("volume-cfd", 1024, 200, 192, 0, "cfd", 0, 0, "enface"),
    ("volume-msi", 1024, 200, 192, 512, "msi", -10, 10, "enface"),
    ("volume-cfd+msi", 1024, 200, 192, 512, "cfd+msi", -10, 10, "enface"),
    ("msi-volume-full", 1024, 200, 192, 512, "msi", 0, 0, "volume"),
]
ENFACE_START, ENFACE_STEP, ENFACE_COUNT = 20, 10, 40


def hann(M):
    n = np.arange(M, dtype=np.float64)
    return 0.5 - 0.5 * np.cos(2 * np.pi * n / (M - 1))


def shifted_mask_matrix(masks, w, lag_lo, lag_hi, depths):
    """[M][len(depths)*lags] float32: column (r, l) = m~_r[(n - l) mod M]."""
    M = masks.shape[1]
    mt = np.fft.irfft(np.fft.rfft(masks[depths] * w, axis=1), n=M, axis=1)  # F = 0: H = 1
    lags = np.arange(lag_lo, lag_hi + 1)
    n = np.arange(M)
    cols = mt[:, (n[None, :] - lags[:, None]) % M]          # [R'][lags][M]
    return np.ascontiguousarray(cols.reshape(-1, M).T).astype(np.float32)


def gray(x, gsc=1.0):
    return cp.clip(cp.floor(gsc * x + 0.5), 0, 255).astype(cp.uint8)


class Workload:
    def __init__(self, name, M, N, L, R, methods, lag_lo, lag_hi, kind):
        rng = np.random.default_rng(1)
        self.name, self.M, self.N, self.L, self.R = name, M, N, L, R
        self.methods, self.kind = methods, kind
        self.nlag = lag_hi - lag_lo + 1
        self.frame = cp.asarray(rng.integers(0, 4096, size=(L * N, M), dtype=np.uint16))
        self.w = cp.asarray(hann(M).astype(np.float32))
        self.q = [d for d in (ENFACE_START + ENFACE_STEP * q for q in range(ENFACE_COUNT))]
        self.xh, self.xv = L // 2, N // 2
        if R:
            masks = rng.standard_normal((R, M))
            wn = hann(M)
            if kind == "enface":
                qd = [d for d in self.q if d < R]
                self.q_msi = qd
                self.mat_q = cp.asarray(shifted_mask_matrix(masks, wn, lag_lo, lag_hi, qd))
            self.mat_all = cp.asarray(shifted_mask_matrix(masks, wn, lag_lo, lag_hi, list(range(R))))

    def msi(self, x, mat, depths):
        p = x @ mat                                         # [S][depths*lags]
        return cp.abs(p.reshape(x.shape[0], depths, self.nlag)).sum(axis=2)

    def run(self):
        x = self.frame.astype(cp.float32) * self.w          # background none, window
        out = []
        if "cfd" in self.methods:
            i = cp.abs(cp.fft.rfft(x, axis=1))              # [S][M/2+1]
            out += self.products(i, None)
        if "msi" in self.methods:
            if self.kind == "enface":
                # the Q en-face depths for every spectrum, all depths for the
                # two cross-sections' spectra (as octd computes them)
                e = self.msi(x, self.mat_q, len(self.q_msi))
                xs = x.reshape(self.L, self.N, self.M)
                h = self.msi(xs[self.xh], self.mat_all, self.R)
                v = self.msi(xs[:, self.xv], self.mat_all, self.R)
                out += self.products(e, (h, v))
            else:
                out += self.products(self.msi(x, self.mat_all, self.R), None)
        return out

    def products(self, i, xsecs):
        if self.kind == "bscan":
            return [gray(i.T)]
        if self.kind == "volume":
            return [gray(i.reshape(self.L, self.N, -1))]
        if xsecs is None:                                   # CFD: all depths present
            D = i.shape[1]
            qd = [d for d in self.q if d < D]
            e = i[:, qd]
            iv = i.reshape(self.L, self.N, D)
            h, v = iv[self.xh], iv[:, self.xv]
        else:
            e, (h, v) = i, xsecs
        en = e.T.reshape(-1, self.L, self.N)
        return [gray(en), gray(en.sum(axis=0)), gray(h.T), gray(v.T)]

    def check(self):
        """float64 direct evaluation of one B-scan line's intensities vs CuPy's."""
        x = cp.asnumpy(self.frame[: min(8, self.frame.shape[0])]).astype(np.float64) * hann(self.M)
        if "cfd" in self.methods:
            ref = np.abs(np.fft.rfft(x, axis=1))
            got = cp.asnumpy(cp.abs(cp.fft.rfft(cp.asarray(x.astype(np.float32)), axis=1)))
            return float(np.linalg.norm(got - ref) / np.linalg.norm(ref))
        return float("nan")


def median_ms(w, warmup, reps):
    for _ in range(warmup):
        w.run()
    cp.cuda.Device().synchronize()
    ts = []
    for _ in range(reps):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record()
        w.run()
        b.record()
        b.synchronize()
        ts.append(cp.cuda.get_elapsed_time(a, b))
    return float(np.median(ts))


def main():
    dev = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    print(f"cupy_anchor: CuPy {cp.__version__}, {dev}, precision {ARGS.precision} "
          f"(CUPY_TF32={os.environ['CUPY_TF32']}), warmup {ARGS.warmup}, reps {ARGS.reps}")
    rows = []
    for spec in WORKLOADS:
        if ARGS.only and spec[0] not in ARGS.only:
            continue
        w = Workload(*spec)
        ms = median_ms(w, ARGS.warmup, ARGS.reps)
        row = {"workload": spec[0], "precision": ARGS.precision, "device_ms": ms,
               "ascans_per_s": w.frame.shape[0] / (ms * 1e-3)}
        if ARGS.check:
            row["cfd_rel_l2"] = w.check()
        rows.append(row)
        print(f"{spec[0]:18s} {ms:9.3f} ms  {row['ascans_per_s'] / 1e6:8.2f} M A-scans/s")
        del w
        cp.get_default_memory_pool().free_all_blocks()
    if ARGS.json:
        with open(ARGS.json, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
