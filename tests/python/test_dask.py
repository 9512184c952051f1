"""octd.dask.process_recordings on a LocalCluster of 2 worker processes,
against octproc on the same frames."""
import os
import subprocess

import numpy as np
import pytest

import octd
from conftest import BIN
from refs import rel_l2
from test_engine import _png_gray

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def recordings(daemon, tmp_path_factory):
    d = tmp_path_factory.mktemp("dask_rec")
    daemon.save_to(str(d))
    paths = []
    for frames in (23, 9):
        p = daemon.control.record(frames=frames, wait=True)
        paths.append(str(d / os.path.basename(p)))
    return paths


def test_process_recordings(daemon, recordings, tmp_path):
    import octd.dask as od
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        outs = od.process_recordings(recordings, daemon.profile, client, output_dir=str(out_dir),
                                     chunk_frames=4)
    assert [os.path.dirname(o) for o in outs] == [str(out_dir)] * 2
    assert sorted(os.listdir(out_dir)) == sorted(os.path.basename(o) for o in outs)
    import h5py
    for rec_path, out in zip(recordings, outs):
        with octd.read_recording(rec_path) as rec:
            raw = rec.frames()
            fid = rec.frame_id
        stack = tmp_path / "stack.npy"
        np.save(stack, raw)
        od_dir = tmp_path / ("octproc_" + os.path.basename(rec_path))
        r = subprocess.run([os.path.join(BIN, "octproc"), "--profile", daemon.profile,
                            "--backend", "cpu", "--input", str(stack), "--output", str(od_dir)],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        with h5py.File(out, "r") as h:
            assert np.array_equal(h["frame_id"][...], fid)
            g = h["products/bscan/cfd"]
            f = h["products/bscan/cfd_f32"]
            assert g.shape == (len(raw), 129, 32) and f.shape == g.shape
            for k in range(len(raw)):
                ref = np.load(od_dir / ("%06d" % k) / "bscan_cfd.npy")
                assert rel_l2(f[k], ref.astype(np.float64)) < 1e-4, "frame %d" % k
                diff = g[k].astype(int) - _png_gray(od_dir / ("%06d" % k) / "bscan_cfd.png")
                assert np.abs(diff).max() <= 1 and np.count_nonzero(diff) <= diff.size // 100


def test_process_recordings_bad_input(daemon, recordings, tmp_path):
    import octd.dask as od
    with pytest.raises(ValueError, match="collide"):
        od.process_recordings([recordings[0], recordings[0]], daemon.profile, client=None,
                              output_dir=str(tmp_path))
    assert os.listdir(tmp_path) == []  # nothing written
    with pytest.raises(FileNotFoundError):
        od.process_recordings([str(tmp_path / "none.h5")], daemon.profile, client=None)
    with pytest.raises(ValueError, match="chunk_frames"):
        od.process_recordings([], daemon.profile, client=None, chunk_frames=0)


def test_read_recording_bad_file(tmp_path):
    p = tmp_path / "x.h5"
    p.write_bytes(b"not hdf5")
    with pytest.raises(OSError, match="x.h5: not a readable HDF5 recording"):
        octd.read_recording(str(p))
