"""octd.dask.process_recordings: offline processing of recordings over a
Dask cluster (Debian python3-distributed).

One task per chunk of frames: a worker opens the recording (h5py), reads
its raw frames [start:stop], runs the C engine (octd.Engine, one per worker
process and set-up, kept between tasks) and returns the chunk's products.
The client writes each recording's products, chunk by chunk as tasks
finish, into one HDF5 file: `<stem>.products.h5` beside the input (or in
output_dir), written aside and renamed when complete, with the layout of a
recording's /products (plus /frame_id, /t_acq_ns).
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

_ENGINES: Dict[Tuple[Any, ...], Any] = {}


def _engine(profile: str, backend: str, threads: int, sets: Optional[Dict[str, Any]]):
    from .engine import Engine
    key = (profile, backend, threads, tuple(sorted((sets or {}).items())))
    eng = _ENGINES.get(key)
    if eng is None:
        eng = _ENGINES[key] = Engine(profile, backend=backend, threads=threads, set=sets)
    return eng


def process_chunk(path: str, start: int, stop: int, profile: str, backend: str = "cpu",
                  threads: int = 1, sets: Optional[Dict[str, Any]] = None
                  ) -> Tuple[int, Dict[str, np.ndarray]]:
    """Processes frames [start:stop) of one recording; returns (start,
    {topic: array [stop-start][shape...]})."""
    import h5py
    with h5py.File(path, "r") as f:
        if "raw" not in f:
            raise KeyError("%s: no /raw dataset (a products-only recording cannot be "
                           "reprocessed)" % path)
        frames = f["raw"][start:stop]
    eng = _engine(profile, backend, threads, sets)
    out: Dict[str, List[np.ndarray]] = {}
    for fr in frames:
        for topic, a in eng.process(fr).items():
            out.setdefault(topic, []).append(a)
    return start, {t: np.stack(v) for t, v in out.items()}


def _dataset_path(topic: str) -> str:
    parts = topic.split("/")
    kind, method = parts[0], parts[1]
    return "products/%s/%s%s" % (kind, method, "_f32" if len(parts) > 2 else "")


def process_recordings(paths: Sequence[str], profile: str, client: Any,
                       output_dir: Optional[str] = None, chunk_frames: int = 16,
                       backend: str = "cpu", threads: int = 1,
                       sets: Optional[Dict[str, Any]] = None) -> List[str]:
    """Reprocesses every recording in `paths` with `profile` on the Dask
    `client`'s workers; returns the output files (one per recording, in
    order).  threads: CPU threads of each worker's engine (1 suits one
    worker process per core); backend "cuda" for GPU workers."""
    import h5py
    from distributed import as_completed

    if chunk_frames < 1:
        raise ValueError("chunk_frames = %d: must be >= 1" % chunk_frames)
    profile = os.path.abspath(profile)
    outs: List[str] = []
    futures = []
    meta: Dict[str, Dict[str, Any]] = {}
    source: Dict[str, str] = {}  # task key -> recording
    # every input checked before anything is written or submitted
    plan = []
    for p in paths:
        p = os.path.abspath(p)
        with h5py.File(p, "r") as f:
            if "raw" not in f:
                raise KeyError("%s: no /raw dataset (a products-only recording cannot be "
                               "reprocessed)" % p)
            n = int(f["raw"].shape[0])
        stem = os.path.basename(p)
        stem = stem[:-3] if stem.endswith(".h5") else stem
        out = os.path.join(output_dir or os.path.dirname(p), stem + ".products.h5")
        if out in outs:
            raise ValueError("%s: a second recording named %s (outputs would collide in %s)"
                             % (p, os.path.basename(p), os.path.dirname(out)))
        outs.append(out)
        plan.append((p, n, out))
    with open(profile) as f:
        profile_text = f.read()
    try:
        for p, n, out in plan:
            part = os.path.join(os.path.dirname(out), "." + os.path.basename(out) + ".part")
            h = h5py.File(part, "w")
            meta[p] = {"file": h, "part": part, "out": out, "n": n, "left": 0}
            with h5py.File(p, "r") as f:
                h["frame_id"] = f["frame_id"][...]
                h["t_acq_ns"] = f["t_acq_ns"][...]
            h.attrs["source"] = p
            h.attrs["profile"] = profile_text
            for s0 in range(0, n, chunk_frames):
                fut = client.submit(process_chunk, p, s0, min(n, s0 + chunk_frames), profile,
                                    backend, threads, sets, pure=False)
                futures.append(fut)
                source[fut.key] = p
                meta[p]["left"] += 1
            if n == 0:  # nothing to process: an empty products file
                h.close()
                os.replace(part, out)
        for fut in as_completed(futures):
            start, prods = fut.result()
            m = meta[source[fut.key]]
            h = m["file"]
            for topic, arr in prods.items():
                dp = _dataset_path(topic)
                if dp not in h:
                    ds = h.create_dataset(dp, shape=(m["n"],) + arr.shape[1:], dtype=arr.dtype,
                                          chunks=(1,) + arr.shape[1:])
                    ds.attrs["topic"] = topic
                h[dp][start:start + arr.shape[0]] = arr
            m["left"] -= 1
            if m["left"] == 0:
                h.close()
                os.replace(m["part"], m["out"])
    except BaseException:
        pending = [f for f in futures if not f.done()]
        if pending:
            client.cancel(pending)
        raise
    finally:
        for m in meta.values():
            if m["left"]:
                m["file"].close()
                try:
                    os.unlink(m["part"])
                except FileNotFoundError:
                    pass
    return outs
