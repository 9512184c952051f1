#!/usr/bin/env python3
# split_fp16_sim.py - issue 19.4 accuracy argument (kernels/CUDA_NOTES.md v5), no GPU:
# the operand error of split FP16 (power-of-two scaled, as engine_cuda.cu) against
# split TF32 on an MSI-like product, float64 accumulation (the tensor cores' FP32
# accumulation adds its own error, ~8.7e-6 measured for 3xTF32).  Needs numpy.
import numpy as np
rng = np.random.default_rng(1)
M, S, R, L = 1024, 64, 128, 21
n = np.arange(M)
w = 0.5 - 0.5*np.cos(2*np.pi*n/M)
raw = np.round(2048 + 1500*np.exp(-8*(n/M-0.5)**2)*np.cos(2*np.pi*rng.uniform(50,400,(S,1))*n/M + rng.uniform(0,6,(S,1))) + rng.normal(0,30,(S,M)))
raw = np.clip(raw, 0, 65535)
x = (raw - raw.mean(0)) * w
masks = rng.normal(0,1,(R,M)); masks /= np.linalg.norm(masks,axis=1,keepdims=True)
B = np.stack([np.roll(masks[r], l) for r in range(R) for l in range(-10,11)], axis=1)
ref = x @ B
def tf32(a):
    a = np.asarray(a, dtype=np.float32); u = a.view(np.uint32).astype(np.uint64)
    u = ((u + 0x1000) & 0xFFFFE000).astype(np.uint32)
    return u.view(np.float32).astype(np.float64)
def f16(a): return a.astype(np.float16).astype(np.float64)
def pow2(b): return 2.0**(14 - np.frexp(b)[1])
def rel(y, r=None):
    r = ref if r is None else r
    return np.linalg.norm(y-r)/np.linalg.norm(r)
x32, B32 = x.astype(np.float32).astype(np.float64), B.astype(np.float32).astype(np.float64)
print("fp32 operands          %.3g" % rel(x32 @ B32))
xh, Bh = tf32(x32), tf32(B32); xl, Bl = tf32(x32-xh), tf32(B32-Bh)
print("3xTF32 (split)         %.3g" % rel(xh@Bh + xh@Bl + xl@Bh))
print("1xTF32                 %.3g" % rel(xh@Bh))
sx = pow2((65536+65536)*w.max()); sm = pow2(np.abs(B32).max())
a, b = x32*sx, B32*sm
ah, bh = f16(a), f16(b); al, bl = f16(a-ah), f16(b-bh)
print("3xFP16 (split, scaled) %.3g  scales %g %g  max|a| %.1f max|b| %.1f" % (rel((ah@bh + ah@bl + al@bh)/(sx*sm)), sx, sm, np.abs(a).max(), np.abs(b).max()))
print("1xFP16 (scaled)        %.3g" % rel((ah@bh)/(sx*sm)))
for k in (1e3, 1e5):
    x2 = x/k; ref2 = x2 @ B
    a2 = x2.astype(np.float32).astype(np.float64)*sx; a2h = f16(a2); a2l = f16(a2-a2h)
    x2h = tf32(x2); x2l = tf32(x2.astype(np.float32)-x2h)
    print("signal/%g: 3xFP16 %.3g, 3xTF32 %.3g" % (k, rel((a2h@bh + a2h@bl + a2l@bh)/(sx*sm), ref2), rel(x2h@Bh + x2h@Bl + x2l@Bh, ref2)))
