#!/usr/bin/python3
"""gen_corpus.py - writes the seed corpora of tests/fuzz/corpus/<target>/.

The binary seeds (ring headers, control blocks, .npy files) are built here
from the tables of SPEC 3.1 / 3.2 and the .npy format description, not from
the C structs, so that they also check the C layout.  Run from anywhere:
    /usr/bin/python3 tests/fuzz/gen_corpus.py
It rewrites only the files it names (hand-written seeds stay)."""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")


def put(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---------------------------------------------------------------- .npy
def npy(descr, shape, payload, version=1, fortran=False, extra=""):
    shp = "(%d,)" % shape[0] if len(shape) == 1 else "(" + ", ".join(str(n) for n in shape) + ")"
    d = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, %s}" % (
        descr, "True" if fortran else "False", shp, extra)
    pre = 10 if version == 1 else 12
    total = (pre + len(d) + 1 + 63) // 64 * 64
    d = d + " " * (total - pre - len(d) - 1) + "\n"
    head = b"\x93NUMPY" + bytes([version, 0])
    head += struct.pack("<H" if version == 1 else "<I", len(d))
    return head + d.encode("latin1") + payload


def ramp(n, fmt):
    return b"".join(struct.pack(fmt, (i * 7) % 100) for i in range(n))


def npy_seeds():
    s = {}
    s["u16_2x64.npy"] = npy("<u2", (2, 64), ramp(128, "<H"))
    s["i16_64.npy"] = npy("<i2", (64,), ramp(64, "<h"))
    s["f32_3x64.npy"] = npy("<f4", (3, 64), ramp(192, "<f"))
    s["f64_1x64.npy"] = npy("<f8", (1, 64), ramp(64, "<d"))
    s["u8_4x4.npy"] = npy("|u1", (4, 4), bytes(range(16)))
    s["be_f32_2x64.npy"] = npy(">f4", (2, 64), ramp(128, ">f"))
    s["v2_u16_64.npy"] = npy("<u2", (64,), ramp(64, "<H"), version=2)
    s["v3_f32_1x2x3x4.npy"] = npy("<f4", (1, 2, 3, 4), ramp(24, "<f"), version=3)
    s["scalar_f32.npy"] = npy("<f4", (), struct.pack("<f", 1.5))
    s["empty_0x64.npy"] = npy("<f4", (0, 64), b"")
    s["bad_fortran.npy"] = npy("<f4", (2, 2), ramp(4, "<f"), fortran=True)
    s["bad_short.npy"] = npy("<u2", (2, 64), ramp(100, "<H"))
    s["bad_dtype.npy"] = npy("<c8", (2,), b"\0" * 16)
    s["bad_key.npy"] = npy("<u2", (1,), b"\0\0", extra="'x': 1, ")
    s["bad_nan.npy"] = npy("<f4", (1, 64), struct.pack("<f", float("nan")) * 64)
    s["bad_huge_shape.npy"] = npy("<f8", (1 << 40, 1 << 40), b"")
    s["bad_magic.npy"] = b"\x93NUMPX\x01\x00\x10\x00{}" + b" " * 14
    return s


# ---------------------------------------------------------------- ring (SPEC 3.1)
def ring_header(M=64, N=1, L=1, stype=1, shift=0, K=2, state=1, write_seq=1,
                epoch=0x1234, hb=0, stride=None, slot0=4096, frame_bytes=None, magic=b"OCTRING\0",
                abi=(1, 0)):
    size = {1: 2, 2: 2, 3: 4}.get(stype, 2)
    fb = M * N * L * size if frame_bytes is None else frame_bytes
    if stride is None:
        stride = (4096 + fb + 4095) // 4096 * 4096
    h = bytearray(4096)
    h[0:8] = magic
    struct.pack_into("<IIII", h, 8, abi[0], abi[1], 4096, K)
    struct.pack_into("<QQ", h, 24, stride, slot0)
    struct.pack_into("<IIIIII", h, 40, M, N, L, stype, shift, 0)
    struct.pack_into("<QQQQ", h, 64, epoch, 4242, 1700000000000000000, fb)
    struct.pack_into("<Q", h, 128, write_seq)
    struct.pack_into("<Q", h, 192, hb)
    struct.pack_into("<I", h, 256, state)
    return bytes(h), slot0 + K * stride, stride, slot0


def ring_seed(flags=0, object_bytes=None, slot_seqs=(2,), **kw):
    h, need, stride, slot0 = ring_header(**kw)
    body = bytearray(h)
    # slot headers: seq, frame_id, t_acq_ns
    for s, seq in enumerate(slot_seqs):
        off = slot0 + s * stride
        if len(body) < off + 32:
            body.extend(b"\0" * (off + 32 - len(body)))
        struct.pack_into("<QQQ", body, off, seq, 100 + s, 1700000000000000000 + s)
    ob = (need if object_bytes is None else object_bytes) % (1 << 64)
    return struct.pack("<QB", ob, flags) + bytes(body)


def ring_seeds():
    s = {}
    s["valid_bscan_u16"] = ring_seed()
    s["valid_policy_all"] = ring_seed(flags=1, write_seq=2, slot_seqs=(2, 4))
    s["valid_peek"] = ring_seed(flags=2)
    s["valid_volume_f32"] = ring_seed(M=128, N=4, L=3, stype=3, K=4, write_seq=5,
                                      slot_seqs=(10,))  # frame 4 is in slot 0
    s["valid_i16_shift"] = ring_seed(stype=2, shift=4, K=8, write_seq=0, slot_seqs=())
    s["torn_odd_seq"] = ring_seed(slot_seqs=(1,))
    s["lapped"] = ring_seed(flags=1, write_seq=1000, slot_seqs=(2000, 1998))
    s["write_seq_max"] = ring_seed(write_seq=(1 << 64) - 1, slot_seqs=(0,))
    s["state_init"] = ring_seed(state=0)
    s["state_closed"] = ring_seed(state=2, write_seq=0, slot_seqs=())
    s["bad_magic"] = ring_seed(magic=b"OCTRINX\0")
    s["bad_abi"] = ring_seed(abi=(2, 0))
    s["bad_slot_count"] = ring_seed(K=3)
    s["bad_frame_bytes"] = ring_seed(frame_bytes=100)
    s["bad_stride"] = ring_seed(stride=4096)
    s["truncated_object"] = ring_seed(object_bytes=8192)
    s["overflow_stride"] = ring_seed(stride=(1 << 63), K=4, slot_seqs=())
    s["bad_samples"] = ring_seed(M=100)
    return s


# ---------------------------------------------------------------- control (SPEC 3.2)
DEFAULTS = dict(methods=1, window=1, window_param=0.0, freq=8, lag=(-10, 10), scale=0,
                background=0, enface=(20, 10, 40), xsec=(0, 100), gsc=(1.0, 1.0, 1.0),
                contrast=(1.0, 1.0, 1.0), brightness=(0.0, 0.0, 0.0), products=0x1f,
                command_seq=0, command=0, seq=2)


def control_block(magic=b"OCTCTRL\0", abi=(1, 0), block_bytes=4096, **kw):
    v = dict(DEFAULTS)
    v.update(kw)
    b = bytearray(4096)
    b[0:8] = magic
    struct.pack_into("<III", b, 8, abi[0], abi[1], block_bytes)
    struct.pack_into("<Q", b, 64, v["seq"])
    struct.pack_into("<IIfiiiIIiiiii", b, 128, v["methods"], v["window"], v["window_param"],
                     v["freq"], v["lag"][0], v["lag"][1], v["scale"], v["background"],
                     *v["enface"], *v["xsec"])
    struct.pack_into("<3f3f3fI", b, 180, *v["gsc"], *v["contrast"], *v["brightness"],
                     v["products"])
    struct.pack_into("<QI", b, 224, v["command_seq"], v["command"])
    return bytes(b[:240])  # the rest is zero; the target zero-fills


def control_seed(M=1024, stype=1, shift=0, ref=False, N=500, L=1, masks=0, object_bytes=4096,
                 small=0, **kw):
    log2 = M.bit_length() - 1
    pre = struct.pack("<QBBBBHHBB6x", object_bytes, log2, stype, shift, 1 if ref else 0, N, L,
                      masks, small)
    return pre + control_block(**kw)


def control_seeds():
    s = {}
    s["valid_default"] = control_seed()
    s["valid_msi_tukey"] = control_seed(masks=16, methods=3, window=5, window_param=0.5)
    s["valid_volume"] = control_seed(N=200, L=192, xsec=(96, 100), products=0x13f, scale=1,
                                     background=2, small=7)
    s["valid_reference"] = control_seed(ref=True, background=1, window=4, window_param=0.2)
    s["writer_inside"] = control_seed(seq=7)
    s["bad_msi_no_masks"] = control_seed(methods=2)
    s["bad_window"] = control_seed(window=6)
    s["bad_gaussian"] = control_seed(window=4, window_param=0.0)
    s["bad_nan_gsc"] = control_seed(gsc=(float("nan"), 1.0, 1.0))
    s["bad_inf_contrast"] = control_seed(contrast=(1.0, float("inf"), 1.0))
    s["bad_lags"] = control_seed(lag=(10, -10))
    s["bad_lag_range"] = control_seed(M=64, lag=(-32, 0))
    s["bad_freq"] = control_seed(freq=-1)
    s["bad_xsec"] = control_seed(xsec=(1, 0))
    s["bad_products"] = control_seed(products=0x200)
    s["bad_enface_count"] = control_seed(enface=(0, 1, 0))
    s["bad_geometry"] = control_seed(M=32)
    s["bad_magic"] = control_seed(magic=b"OCTCTRX\0")
    s["bad_abi"] = control_seed(abi=(9, 0))
    s["bad_size"] = control_seed(object_bytes=100)
    s["command_save"] = control_seed(command_seq=5, command=5)
    return s


# ---------------------------------------------------------------- spectra
def spectra_seeds():
    s = {}
    # byte 0: M = 64 << b; 1: raw type; 2: expected rows; 3: bit 0 = .npy name
    s["npy_2x64"] = bytes([0, 3, 2, 1]) + npy("<f4", (2, 64), ramp(128, "<f"))
    s["npy_64_as_raw_name"] = bytes([0, 3, 0, 0]) + npy("<u2", (64,), ramp(64, "<H"))
    s["npy_be_i16"] = bytes([0, 2, 1, 1]) + npy(">i2", (1, 64), ramp(64, ">h"))
    s["npy_wrong_rows"] = bytes([0, 3, 3, 1]) + npy("<f4", (2, 64), ramp(128, "<f"))
    s["npy_wrong_m"] = bytes([1, 3, 0, 1]) + npy("<f4", (2, 64), ramp(128, "<f"))
    s["npy_nan"] = bytes([0, 3, 0, 1]) + npy("<f4", (1, 64), struct.pack("<f", float("inf")) * 64)
    s["raw_u16_3x64"] = bytes([0, 1, 0, 0]) + ramp(192, "<H")
    s["raw_f32_1x128"] = bytes([1, 3, 1, 0]) + ramp(128, "<f")
    s["raw_i16_partial"] = bytes([0, 2, 0, 0]) + ramp(70, "<h")
    s["raw_bad_type"] = bytes([0, 4, 0, 0]) + ramp(64, "<H")
    s["raw_nan_f32"] = bytes([0, 3, 0, 0]) + struct.pack("<f", float("nan")) * 64
    s["empty_raw"] = bytes([0, 1, 0, 0])
    return s


def main():
    for name, data in npy_seeds().items():
        put("npy", name, data)
    for name, data in ring_seeds().items():
        put("ring", name, data)
    for name, data in control_seeds().items():
        put("control", name, data)
    for name, data in spectra_seeds().items():
        put("spectra", name, data)


if __name__ == "__main__":
    main()
