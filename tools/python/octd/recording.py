"""read_recording(path): an octd recording (SPEC 10.5) through h5py."""
from __future__ import annotations

import re
from typing import Any, Dict, List

import numpy as np


def _attr_text(v: Any) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def _parse_flow(text: str) -> Dict[str, Any]:
    """{a: 1, b: u16} -> dict (the geometry attribute)."""
    out: Dict[str, Any] = {}
    for k, v in re.findall(r"(\w+):\s*([^,}]+)", text):
        v = v.strip()
        out[k] = int(v) if re.fullmatch(r"-?\d+", v) else v
    return out


class Recording:
    """An open recording.

    raw: h5py dataset [count][L][N][M] (None without raw), sliced lazily;
    frame_id, t_acq_ns: numpy arrays; products: {topic: h5py dataset}
    (topics as published: "bscan/cfd", "enface/msi/f32"); geometry: dict;
    profile: YAML text; control: {key: value} at the start;
    control_changes: [{index, frame_id, generation, values}]; attrs: all
    attributes (frames, dropped, stop_reason, octd_version, ...).  Files of
    `octgrab --record` hold products only, each topic with its own rows:
    index[topic] = {frame_id, image_seq, t_acq_ns}.
    """

    def __init__(self, path: str):
        import h5py
        self.path = path
        try:
            self.file = h5py.File(path, "r")
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise OSError("%s: not a readable HDF5 recording (%s)" % (path, exc)) from None
        f = self.file
        self.attrs = {k: (_attr_text(v) if isinstance(v, (bytes, str)) else v)
                      for k, v in f.attrs.items()}
        self.raw = f["raw"] if "raw" in f else None
        # octgrab --record files have no frame-wide index: /index/<topic> instead
        empty = np.zeros(0, np.uint64)
        self.frame_id = f["frame_id"][...] if "frame_id" in f else empty
        self.t_acq_ns = f["t_acq_ns"][...] if "t_acq_ns" in f else empty
        self.geometry = _parse_flow(self.attrs.get("geometry", ""))
        self.profile = self.attrs.get("profile", "")
        self.control = dict(l.split("=", 1) for l in self.attrs.get("control", "").splitlines()
                            if "=" in l)
        self.products: Dict[str, Any] = {}
        if "products" in f:
            def visit(name: str, obj: Any) -> None:
                if isinstance(obj, h5py.Dataset):
                    t = obj.attrs.get("topic")
                    self.products[_attr_text(t) if t is not None else name] = obj
            f["products"].visititems(visit)
        # octgrab --record: per topic {frame_id, image_seq, t_acq_ns}
        self.index: Dict[str, Dict[str, np.ndarray]] = {}
        for topic, ds in self.products.items():
            key = "index/" + ds.name[len("/products/"):]
            if key in f:
                self.index[topic] = {k: v[...] for k, v in f[key].items()}
        self.control_changes: List[Dict[str, Any]] = []
        if "control_changes" in f:
            g = f["control_changes"]
            for i in range(g["index"].shape[0]):
                vals = _attr_text(g["values"][i])
                self.control_changes.append({
                    "index": int(g["index"][i]), "frame_id": int(g["frame_id"][i]),
                    "generation": int(g["generation"][i]),
                    "values": dict(l.split("=", 1) for l in vals.splitlines() if "=" in l)})

    def __len__(self) -> int:
        return int(self.frame_id.shape[0])

    @property
    def dropped(self) -> int:
        return int(self.attrs.get("dropped", 0))

    def frames(self, start: int = 0, stop: int = None) -> np.ndarray:
        """Raw frames [start:stop] as a numpy array."""
        if self.raw is None:
            raise KeyError("%s has no /raw (recorded products only)" % self.path)
        return self.raw[start:stop]

    def close(self) -> None:
        self.file.close()

    def __enter__(self) -> "Recording":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def read_recording(path: str) -> Recording:
    """Opens an octd recording (HDF5) for reading."""
    return Recording(path)
