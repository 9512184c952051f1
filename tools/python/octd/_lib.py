"""Loads liboct.so (the project's C library) for ctypes.

Search order: $OCTD_LIB (a file), the build tree this package sits in
(build/cuda, build/cpu, build), then the system's liboct.so.0.
"""
from __future__ import annotations

import ctypes
import os
from pathlib import Path
from typing import Optional

SONAME = "liboct.so.0"
_lib: Optional[ctypes.CDLL] = None


class OctError(RuntimeError):
    """An error reported by the C library, with its message."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


class Geometry(ctypes.Structure):
    _fields_ = [("samples", ctypes.c_uint32), ("ascans", ctypes.c_uint32),
                ("lines", ctypes.c_uint32), ("sample_type", ctypes.c_uint32),
                ("sample_shift", ctypes.c_uint32)]


class _Error(ctypes.Structure):
    _fields_ = [("msg", ctypes.c_char * 512)]


def _candidates():
    env = os.environ.get("OCTD_LIB")
    if env:
        yield env
    root = Path(__file__).resolve().parent.parent.parent.parent  # tools/python/octd -> repo
    for sub in ("build/cuda", "build/cpu", "build"):
        p = root / sub / SONAME
        if p.exists():
            yield str(p)
    try:  # written by make install: the prefix's lib directory
        from ._installed import LIBDIR
        yield os.path.join(LIBDIR, SONAME)
    except ImportError:
        pass
    yield SONAME


def lib() -> ctypes.CDLL:
    """The loaded library (loaded once); OSError naming what was tried."""
    global _lib
    if _lib is not None:
        return _lib
    tried = []
    for c in _candidates():
        try:
            l = ctypes.CDLL(c)
            break
        except OSError as exc:
            tried.append("%s (%s)" % (c, exc))
    else:
        raise OSError("liboct.so not found: tried " + "; ".join(tried) +
                      " (build it with make, or set OCTD_LIB)")
    P, u32, u64, i32 = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int
    E = ctypes.POINTER(_Error)
    l.oct_proc_open.argtypes = [ctypes.POINTER(P), ctypes.c_char_p, ctypes.POINTER(Geometry), i32,
                                i32, ctypes.c_char_p, ctypes.c_bool, E]
    l.oct_proc_close.argtypes = [P]
    l.oct_proc_close.restype = None
    l.oct_proc_geometry.argtypes = [P, ctypes.POINTER(Geometry)]
    l.oct_proc_geometry.restype = None
    l.oct_proc_backend.argtypes = [P]
    l.oct_proc_backend.restype = ctypes.c_char_p
    l.oct_proc_products.argtypes = [P]
    l.oct_proc_products.restype = u32
    l.oct_proc_frame.argtypes = [P, P, ctypes.c_size_t, ctypes.POINTER(ctypes.c_double), E]
    l.oct_proc_image.argtypes = [P, i32, i32, ctypes.POINTER(i32), ctypes.POINTER(u32 * 3),
                                 ctypes.POINTER(P), ctypes.POINTER(P), ctypes.POINTER(P),
                                 ctypes.POINTER(u32)]
    l.oct_proc_image.restype = ctypes.c_bool
    l.oct_ctl_set.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(u64), E]
    l.oct_ctl_get.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t, E]
    l.oct_ctl_command.argtypes = [ctypes.c_char_p, u32, u32, u32, ctypes.c_double,
                                  ctypes.POINTER(u64), E]
    l.oct_stat_copy.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t, E]
    for f in ("oct_proc_open", "oct_proc_frame", "oct_ctl_set", "oct_ctl_get",
              "oct_ctl_command", "oct_stat_copy"):
        getattr(l, f).restype = ctypes.c_int
    _lib = l
    return l


def call(fn, *args) -> None:
    """Calls a C function returning oct_err with a trailing oct_error*;
    raises OctError with its message on failure."""
    e = _Error()
    rc = fn(*args, ctypes.byref(e))
    if rc != 0:
        raise OctError(rc, e.msg.decode("utf-8", "replace"))
