"""Independent float64 references (SPEC 2.2, 2.5) written with numpy."""
import numpy as np


def cfd_bscan(frame, F, window="hann"):
    """I[d][a] of a B-scan frame (1, N, M) with no background: float64."""
    x = frame.reshape(-1, frame.shape[-1]).astype(np.float64)
    M = x.shape[1]
    n = np.arange(M)
    w = 0.5 - 0.5 * np.cos(2 * np.pi * n / (M - 1)) if window == "hann" else np.ones(M)
    X = np.abs(np.fft.fft(x * w, axis=1))[:, : M // 2 + 1]
    X[:, :F] = 0
    return X.T


def gray(I, gsc, contrast, brightness, log):
    v = gsc * I
    t = 20 * np.log10(np.maximum(v, 1e-12)) if log else v
    exact = brightness + contrast * t
    return np.clip(np.floor(exact + 0.5), 0, 255), exact


def rel_l2(a, b):
    return float(np.linalg.norm(a.astype(np.float64) - b) / np.linalg.norm(b))


def assert_gray_close(g, I, gsc, contrast, brightness, log):
    """SPEC 7: equal except near rounding boundaries, never off by more than 1."""
    ref, exact = gray(I, gsc, contrast, brightness, log)
    diff = np.abs(g.astype(np.int32) - ref.astype(np.int32))
    assert diff.max() <= 1, "gray off by %d" % diff.max()
    frac = np.abs((exact + 0.5) - np.round(exact + 0.5))
    near = frac < 0.01 * max(1.0, abs(contrast) * (20 if log else gsc))
    bad = (diff > 0) & ~near & (exact > -0.5) & (exact < 255.5)
    assert not bad.any(), "%d gray pixels differ away from a rounding boundary" % bad.sum()
