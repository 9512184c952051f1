"""Engine(profile, backend): the project's C engine (liboct.so) on numpy
frames - the same set-up and products as octproc."""
from __future__ import annotations

import ctypes
from typing import Dict, Mapping, Optional, Any

import numpy as np

from . import _lib

METHODS = ("cfd", "msi", "cms")
KINDS = ("bscan", "enface", "confocal", "xsec_h", "xsec_v", "volume")
BACKENDS = {"auto": 0, "cpu": 1, "cuda": 2}
SAMPLE_TYPES = {np.dtype("<u2"): 1, np.dtype("<i2"): 2, np.dtype("<f4"): 3}


class Engine:
    """Processes frames (L, N, M) or (N, M) of uint16, int16 or float32.

    process() returns {topic: ndarray} with the topics octd publishes
    ("bscan/cfd" u8 gray, "bscan/cfd/f32" float32 when the profile asks for
    f32) in the message shapes; `indices[topic]` holds the en-face depth
    indices / the cross-section index; `last_ms` the engine time of the
    last frame.  The engine is planned at the first frame when the profile
    has no geometry.  `set` = control assignments applied over the profile
    ({"enface.start": 3}), as octproc --set.  plan="measure" (default)
    times FFT plans at set-up as octd does (seconds, then the fastest
    engine); plan="quick" sets up at once (octproc for stacks of < 8 frames).
    """

    def __init__(self, profile: str, backend: str = "auto", threads: int = 0,
                 set: Optional[Mapping[str, Any]] = None, plan: str = "measure"):
        if plan not in ("measure", "quick"):
            raise ValueError("plan %r: measure or quick" % plan)
        self.quick_plan = plan == "quick"
        if backend not in BACKENDS:
            raise ValueError("backend %r: auto, cpu or cuda" % backend)
        self.profile = str(profile)
        self.backend_request = backend
        self.threads = threads
        self._sets = None
        if set:
            self._sets = "\n".join("%s=%s" % (k, v) for k, v in set.items()).encode()
        self._l = _lib.lib()
        self._h = ctypes.c_void_p()
        self.geometry: Optional[_lib.Geometry] = None
        self.indices: Dict[str, np.ndarray] = {}
        self.last_ms = 0.0
        try:
            self._open(None)
        except _lib.OctError as exc:
            if exc.code != 16:  # OCT_ESTATE: no geometry in the profile - plan at the first frame
                raise

    def _open(self, g: Optional[_lib.Geometry]) -> None:
        _lib.call(self._l.oct_proc_open, ctypes.byref(self._h), self.profile.encode(),
                  ctypes.byref(g) if g is not None else None, BACKENDS[self.backend_request],
                  self.threads, self._sets, self.quick_plan)
        geo = _lib.Geometry()
        self._l.oct_proc_geometry(self._h, ctypes.byref(geo))
        self.geometry = geo

    @property
    def backend(self) -> str:
        """"cpu" or "cuda" (None before the engine is planned)."""
        return self._l.oct_proc_backend(self._h).decode() if self._h else None

    def _frame(self, frame: np.ndarray) -> np.ndarray:
        a = np.asarray(frame)
        if a.dtype.newbyteorder("<") not in SAMPLE_TYPES and a.dtype not in SAMPLE_TYPES:
            raise TypeError("frame dtype %s: must be uint16, int16 or float32" % a.dtype)
        a = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<"))
        if a.ndim == 2:
            a = a[None]
        if a.ndim != 3:
            raise ValueError("frame of shape %s: expected (L, N, M) or (N, M)" % (a.shape,))
        if not self._h:
            L, N, M = a.shape
            self._open(_lib.Geometry(M, N, L, SAMPLE_TYPES[a.dtype], 0))
        g = self.geometry
        if a.shape != (g.lines, g.ascans, g.samples) or SAMPLE_TYPES[a.dtype] != g.sample_type:
            raise ValueError("frame %s %s does not match the engine's geometry (%d, %d, %d) type %d"
                             % (a.shape, a.dtype, g.lines, g.ascans, g.samples, g.sample_type))
        return a

    def process(self, frame: np.ndarray, copy: bool = True) -> Dict[str, np.ndarray]:
        """Processes one frame; returns {topic: array}.  copy=False returns
        views into the engine's buffers, valid until the next process()."""
        a = self._frame(frame)
        ms = ctypes.c_double()
        _lib.call(self._l.oct_proc_frame, self._h, a.ctypes.data_as(ctypes.c_void_p), a.nbytes,
                  ctypes.byref(ms))
        self.last_ms = ms.value
        out: Dict[str, np.ndarray] = {}
        self.indices = {}
        nd = ctypes.c_int()
        shape = (ctypes.c_uint32 * 3)()
        u8, f32, ind = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
        nind = ctypes.c_uint32()
        for mi, m in enumerate(METHODS):
            for ki, k in enumerate(KINDS):
                if not self._l.oct_proc_image(self._h, mi, ki, ctypes.byref(nd), ctypes.byref(shape),
                                              ctypes.byref(u8), ctypes.byref(f32), ctypes.byref(ind),
                                              ctypes.byref(nind)):
                    continue
                shp = tuple(shape[:nd.value])
                n = int(np.prod(shp))
                topic = "%s/%s" % (k, m)
                g = np.ctypeslib.as_array(ctypes.cast(u8, ctypes.POINTER(ctypes.c_uint8)),
                                          shape=(n,)).reshape(shp)
                out[topic] = g.copy() if copy else g
                if f32.value:
                    v = np.ctypeslib.as_array(ctypes.cast(f32, ctypes.POINTER(ctypes.c_float)),
                                              shape=(n,)).reshape(shp)
                    out[topic + "/f32"] = v.copy() if copy else v
                if ind.value and nind.value:
                    self.indices[topic] = np.ctypeslib.as_array(
                        ctypes.cast(ind, ctypes.POINTER(ctypes.c_int32)), shape=(nind.value,)).copy()
        return out

    def close(self) -> None:
        if self._h:
            self._l.oct_proc_close(self._h)
            self._h = ctypes.c_void_p()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
