#!/usr/bin/env python3
"""bench.py - the Python package's benchmarks (issue 15 targets):

  subscriber  octd.Subscriber decode rate (GB/s of products into numpy
              arrays, zero-copy) from a publisher process sending
              octd-image-1 messages over ipc://
  record      octsim -> octd recording raw frames (HDF5) vs `dd` sequential
              writes of the same size in the same directory, same run
              (oflag=direct when octd wrote with O_DIRECT, else
              conv=fdatasync), repeated, medians; octd's processed frames/s
              with and without recording, back to back
  engine      octd.Engine.process vs octproc's engine time (same profile,
              frames, threads)
  dask        octd.dask.process_recordings on a LocalCluster of 1 vs 2
              worker processes (cluster start not timed)

usage: PYTHONPATH=tools/python python3 tools/python/bench.py [--bin bin]
       [--dir /tmp] [--only subscriber,record,engine,dask]
       [--record-fps 250] [--record-io auto|direct|buffered] [--record-repeats 3]
       [--record-throttle MB/s]
Prints one line per measurement; numbers depend on the machine (say which).
"""
import argparse
import json
import multiprocessing as mp
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import octd  # noqa: E402

PROFILE = """geometry: {{samples: {M}, ascans: {N}, lines: {L}, sample_type: u16, sample_shift: 0}}
methods: [cfd]
window: {{type: hann}}
freq_cutoff: 4
products: [{products}]
"""


def _publisher(endpoint, nbytes, count, ready):
    import zmq
    ctx = zmq.Context()
    s = ctx.socket(zmq.PUB)
    s.setsockopt(zmq.SNDHWM, 64)
    s.bind(endpoint)
    ready.set()
    time.sleep(1.5)  # slow joiner: the subscriber reconnects
    n = nbytes // 4
    side = int(np.sqrt(n))
    payload = np.random.default_rng(1).random(side * side, dtype=np.float32).tobytes()
    for i in range(count):
        hdr = {"htype": "octd-image-1", "topic": "volume/cfd/f32", "kind": "volume",
               "method": "cfd", "frame_id": i, "image_seq": i + 1, "shape": [side, side],
               "dtype": "f32"}
        s.send_multipart([b"volume/cfd/f32", json.dumps(hdr).encode(), payload], copy=False)
    s.send_multipart([b"volume/cfd/f32", b"{}", b""])  # end marker (malformed on purpose)
    time.sleep(1)
    s.close(0)
    ctx.term()


def bench_subscriber(args):
    endpoint = "ipc://%s/bench-sub" % tempfile.mkdtemp()
    for mb in (1, 4, 16):
        count = max(40, 1000 // mb)
        sub = octd.Subscriber(endpoint, "volume", rcvhwm=64)  # connects before the bind
        ready = mp.Event()
        p = mp.Process(target=_publisher, args=(endpoint, mb << 20, count, ready))
        p.start()
        ready.wait()
        got = 0
        nbytes = 0
        t0 = None
        checksum = 0.0
        while True:
            try:
                m = sub.recv(timeout=10)
            except ValueError:
                break  # the end marker
            if m is None:
                break
            hdr, arr = m
            if t0 is None:
                t0 = time.perf_counter()
                continue
            checksum += float(arr[0, 0])  # touch the array
            got += 1
            nbytes += arr.nbytes
            t_last = time.perf_counter()
        dt = t_last - t0
        p.join()
        sub.close()
        print("subscriber: %2d MiB images: %d of %d received, %.2f GB/s decoded into numpy "
              "(zero-copy), %.0f images/s, gaps %d" % (mb, got, count - 1, nbytes / dt / 1e9, got / dt,
                                                        sum(sub.gaps.values())))


def _throttle(directory, mbps):
    """A cgroup v1 blkio group limiting writes to the disk under directory to
    mbps MB/s (a slower disk for octd and dd alike), or None (not available)."""
    st = os.stat(directory)
    dev = "%d:%d" % (os.major(st.st_dev), os.minor(st.st_dev))
    if os.path.exists("/sys/dev/block/%s/partition" % dev):  # throttled per disk
        dev = open("/sys/dev/block/%s/../dev" % dev).read().strip()
    cg = "/sys/fs/cgroup/blkio/octbench%d" % os.getpid()
    try:
        os.makedirs(cg, exist_ok=True)
        with open(cg + "/blkio.throttle.write_bps_device", "w") as f:
            f.write("%s %d" % (dev, int(mbps * 1e6)))
    except OSError as exc:
        print("record: no blkio throttle (%s): the disk as it is" % exc)
        return None
    return cg


def _dd(path, nbytes, direct, bs, cgroup=None):
    """dd's own rate (bytes/s) writing nbytes of zeros to path: oflag=direct
    (as the O_DIRECT writer) or conv=fdatasync (as the buffered writer,
    whose file is fsynced before its rename); in cgroup (throttled) if given."""
    count = max(1, nbytes // bs)
    cmd = ["dd", "if=/dev/zero", "of=" + path, "bs=%d" % bs, "count=%d" % count,
           "oflag=direct" if direct else "conv=fdatasync"]
    if cgroup:
        cmd = ["sh", "-c", 'echo $$ > %s/cgroup.procs && exec "$@"' % cgroup, "sh"] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True)
    os.unlink(path)
    m = re.search(r"([\d.]+) s, ", r.stderr)
    if r.returncode != 0 or not m:
        raise RuntimeError("dd failed: " + r.stderr.strip())
    return count * bs / float(m.group(1))


def bench_record(args):
    for fps in ((0,) if args.record_unpaced else ()) + (args.record_fps,):
        _bench_record(args, fps)


def _med(xs):
    return statistics.median(xs) if xs else float("nan")


def _runs(xs, fmt="%.0f"):
    return ", ".join(fmt % x for x in xs)


def _cpu_s(path):
    """utime + stime (s) of /proc/.../stat."""
    f = open(path).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def _busy_s():
    """CPU seconds of all cores not idle or waiting for I/O (/proc/stat)."""
    f = [int(x) for x in open("/proc/stat").readline().split()[1:8]]
    return (sum(f) - f[3] - f[4]) / os.sysconf("SC_CLK_TCK")


def _bench_record(args, fps):
    """Back to back, `--record-repeats` times: octd without recording, octd
    recording (same length), dd of the recording's size in the same directory
    with the writer's I/O mode; medians and ratios."""
    t = tempfile.mkdtemp(dir=args.dir, prefix="octd-bench-rec.")
    M, N, L = 2048, 512, 1  # 2 MiB frames
    frame_bytes = M * N * L * 2
    prefix = "/octbench%d" % os.getpid()
    with open(t + "/profile.yaml", "w") as f:
        # products: [confocal] by default - one value per A-scan, so octd's
        # loop runs near ring speed and the disk is what limits the recording
        # (an empty product list is refused since issue 14)
        f.write(PROFILE.format(M=M, N=N, L=L, products=args.record_products))
    os.makedirs(t + "/save")
    with open(t + "/octd.ini", "w") as f:
        f.write(f"""[engine]\nbackend = {args.backend}\nthreads = 0\n[ring]\nframes = {prefix}-frames
control = {prefix}-control\nstatus = {prefix}-status\npolicy = all\n[publish]
endpoint = ipc://{t}/pub\n[profile]\npath = {t}/profile.yaml\n[save]\ndirectory = {t}/save
record_io = {args.record_io}\n""")
    sim = subprocess.Popen([os.path.join(args.bin, "octsim"), "--ring", prefix + "-frames",
                            "--samples", str(M), "--ascans", str(N), "--lines", str(L),
                            "--slots", "32", "--rate", str(fps * N * L)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log = open(t + "/octd.log", "w")
    d = subprocess.Popen([os.path.join(args.bin, "octd"), "--config", t + "/octd.ini"],
                         stdout=log, stderr=subprocess.STDOUT)
    c = octd.Control(prefix + "-control", prefix + "-status", timeout=20)
    cg = _throttle(t, args.record_throttle) if args.record_throttle else None
    if cg:
        with open(cg + "/cgroup.procs", "w") as f:
            f.write(str(d.pid))
    try:
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                if c.status()["frames_processed"] > 5:
                    break
            except Exception:
                pass
            time.sleep(0.1)
        secs = args.seconds

        stat = "/proc/%d/stat" % d.pid

        def window(record):
            s0 = c.status()
            c0, b0 = _cpu_s(stat), _busy_s()
            t0 = time.time()
            if record:
                c.record(seconds=secs, wait=True, timeout=secs + 120)
            else:
                time.sleep(secs)
            s1 = c.status()
            dt = time.time() - t0
            n = max(1, s1["frames_processed"] - s0["frames_processed"])
            cpu.setdefault(record, []).append(1e3 * (_cpu_s(stat) - c0) / n)
            busy.setdefault(record, []).append(100 * (_busy_s() - b0) / dt)
            rate = (s1["frames_processed"] - s0["frames_processed"]) / dt
            skip = (s1["frames_skipped"] - s0["frames_skipped"]) / dt
            return s1, dt, rate, skip

        base, base_skip, rec, rec_skip, rec_mbs, dd_mbs, left_out, written = ([] for _ in range(8))
        modes = set()
        cpu, busy, writer_us, loop_us = {}, {}, [], []
        for _ in range(args.record_repeats):
            _, _, rate, skip = window(False)
            base.append(rate)
            base_skip.append(skip)
            s1, dt, rate, skip = window(True)
            rec.append(rate)
            rec_skip.append(skip)
            path = s1["record_file"]
            fsize = os.path.getsize(path)
            time.sleep(0.2)  # octd logs the writer's CPU time once it joined it
            octd_log = open(t + "/octd.log").read()
            # the file's attribute record_io, as octd's log line at the end gives it
            # (no h5py needed: the GPU machine's python has none)
            m = re.findall(r"left out: .*?; (.*?), writer CPU", octd_log)
            mode = m[-1] if m else "?"
            modes.add(mode)
            m = re.findall(r"writer CPU ([\d.]+) s \((\d+) us per frame\), frame loop (\d+) us",
                           octd_log)
            writer_us.append(float(m[-1][1]) if m else float("nan"))
            loop_us.append(float(m[-1][2]) if m else float("nan"))
            os.unlink(path)
            rec_mbs.append(fsize / dt / 1e6)
            written.append(s1["record_frames"])
            left_out.append(s1["record_dropped"])
            direct = mode == "direct"
            dd_mbs.append(_dd(t + "/dd.bin", fsize, direct, frame_bytes if direct else 1 << 20,
                              cg) / 1e6)
        ddhow = ("oflag=direct bs=%d" % frame_bytes if modes == {"direct"}
                 else "bs=1M conv=fdatasync")
        print("record: %dx%dx%d u16 frames (%.1f MiB), %s, products [%s], %s, %.0f s windows, "
              "%d repeats (octd, octd recording, dd), record_io %s -> %s%s:" %
              (L, N, M, frame_bytes / 1048576, args.backend, args.record_products,
               "octsim unpaced" if not fps else "octsim at %d frames/s (%.0f MB/s)"
               % (fps, fps * frame_bytes / 1e6), secs, args.record_repeats, args.record_io,
               " / ".join(sorted(modes)),
               ", octd and dd writing through a blkio throttle of %g MB/s" % args.record_throttle
               if cg else ""))
        # octd's CPU per frame includes OpenMP's spin-waiting between frames
        print("record:   octd without recording: median %.1f frames/s processed (%s), "
              "%.1f/s skipped; octd %.2f ms CPU per frame, machine %.0f %% busy" %
              (_med(base), _runs(base, "%.1f"), _med(base_skip), _med(cpu[False]),
               _med(busy[False])))
        print("record:   octd while recording:   median %.1f frames/s processed (%s), "
              "%.1f/s skipped -> %.1f %% of without; octd %.2f ms CPU per frame, machine "
              "%.0f %% busy" % (_med(rec), _runs(rec, "%.1f"), _med(rec_skip),
                                100 * _med(rec) / _med(base), _med(cpu[True]), _med(busy[True])))
        print("record:   file: median %.0f MB/s (%s; fsync before the rename included); "
              "frames written %s, left out (disk) %s; writer thread %s us CPU per frame; "
              "frame loop %s us per frame taken (the copy into the queue)" %
              (_med(rec_mbs), _runs(rec_mbs), _runs(written, "%d"), _runs(left_out, "%d"),
               _runs(writer_us), _runs(loop_us)))
        print("record:   dd %s, same directory, same size: median %.0f MB/s (%s) -> recording "
              "at %.0f %% of dd" % (ddhow, _med(dd_mbs), _runs(dd_mbs), 100 * _med(rec_mbs) / _med(dd_mbs)))
    finally:
        d.terminate()
        d.wait(30)
        sim.terminate()
        sim.wait(10)
        log.close()
        shutil.rmtree(t, ignore_errors=True)
        if cg:
            for _ in range(50):
                try:
                    os.rmdir(cg)
                    break
                except OSError:
                    time.sleep(0.1)
        for s in ("-control", "-status", "-frames"):
            try:
                os.unlink("/dev/shm" + prefix + s)
            except FileNotFoundError:
                pass


def _stack(M, N, L, K, seed=3):
    rng = np.random.default_rng(seed)
    return rng.integers(1000, 3000, size=(K, L, N, M), dtype=np.uint16)


def bench_engine(args):
    t = tempfile.mkdtemp(prefix="octd-bench-eng.")
    try:
        for (M, N, L) in ((1024, 500, 1), (1024, 200, 16)):
            K = 20
            prof = t + "/p.yaml"
            with open(prof, "w") as f:
                f.write(PROFILE.format(M=M, N=N, L=L,
                                       products="bscan" if L == 1 else "enface, confocal, xsec_h"))
            st = _stack(M, N, L, K)
            np.save(t + "/s.npy", st)
            r = subprocess.run([os.path.join(args.bin, "octproc"), "--profile", prof,
                                "--backend", args.backend, "--threads", str(args.threads),
                                "--input", t + "/s.npy", "--output", t + "/out"],
                               capture_output=True, text=True, check=True)
            ms = [float(x) for x in re.findall(r"([\d.]+) ms processing", r.stdout)][2:]
            eng = octd.Engine(prof, backend=args.backend, threads=args.threads)
            eng.process(st[0])
            eng.process(st[1])
            em, wall = [], []
            for k in range(2, K):
                t0 = time.perf_counter()
                eng.process(st[k])
                wall.append((time.perf_counter() - t0) * 1e3)
                em.append(eng.last_ms)
            # a shared machine: the best of each (median in brackets)
            print("engine: %dx%dx%d %s threads=%d: octproc %.2f (%.2f) ms/frame, Engine.process "
                  "%.2f (%.2f) ms engine, %.2f (%.2f) ms with the Python call and copies "
                  "(best: %+.1f %% vs octproc)"
                  % (L, N, M, eng.backend, args.threads, min(ms), np.median(ms), min(em),
                     np.median(em), min(wall), np.median(wall), 100 * (min(wall) / min(ms) - 1)))
    finally:
        shutil.rmtree(t, ignore_errors=True)


def bench_dask(args):
    import h5py
    from distributed import Client, LocalCluster
    import octd.dask as od
    t = tempfile.mkdtemp(prefix="octd-bench-dask.")
    try:
        M, N, L, K = 1024, 500, 1, 96
        prof = t + "/p.yaml"
        with open(prof, "w") as f:
            f.write(PROFILE.format(M=M, N=N, L=L, products="bscan, f32"))
        paths = []
        for i in range(2):
            p = "%s/rec%d.h5" % (t, i)
            with h5py.File(p, "w") as h:
                h["raw"] = _stack(M, N, L, K, seed=i)
                h["frame_id"] = np.arange(K, dtype=np.uint64)
                h["t_acq_ns"] = np.arange(K, dtype=np.uint64)
            paths.append(p)
        times = {}
        for workers in (1, 2):
            with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                              dashboard_address=None) as cl, Client(cl) as client:
                od.process_recordings(paths[:1], prof, client, output_dir=t, chunk_frames=8)
                t0 = time.perf_counter()
                od.process_recordings(paths, prof, client, output_dir=t, chunk_frames=8)
                times[workers] = time.perf_counter() - t0
            print("dask: %d worker process(es), 1 thread each: %d frames %dx%dx%d in %.2f s "
                  "(%.1f frames/s)" % (workers, 2 * K, L, N, M, times[workers],
                                       2 * K / times[workers]))
        print("dask: speed-up 1 -> 2 workers: %.2fx" % (times[1] / times[2]))
    finally:
        shutil.rmtree(t, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="bin")
    ap.add_argument("--dir", default="/tmp", help="directory for the recording benchmark")
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--threads", type=int, default=1,
                    help="engine threads (octproc and Engine; 1: steady on a shared machine)")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--record-fps", type=int, default=30,
                    help="paced run of the recording benchmark: octsim frames per second")
    ap.add_argument("--record-io", default="auto", choices=("auto", "direct", "buffered"),
                    help="[save] record_io of the recording benchmark's octd (default auto)")
    ap.add_argument("--record-repeats", type=int, default=3,
                    help="octd / octd recording / dd rounds of the recording benchmark")
    ap.add_argument("--no-record-unpaced", dest="record_unpaced", action="store_false",
                    help="the recording benchmark's paced pass only")
    ap.add_argument("--record-throttle", type=float, default=0,
                    help="MB/s: octd and dd write through a cgroup v1 blkio throttle (a "
                         "slower disk than octd's rate, root only); 0 = the disk as it is")
    ap.add_argument("--record-products", default="confocal",
                    help="products of the recording benchmark's profile (default confocal)")
    ap.add_argument("--only", default="subscriber,record,engine,dask")
    args = ap.parse_args()
    print("bench: %s, %s, %d CPUs" % (time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                      os.uname().nodename, os.cpu_count()))
    for name in args.only.split(","):
        globals()["bench_" + name.strip()](args)


if __name__ == "__main__":
    main()
