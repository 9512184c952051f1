"""octd.Control against a running octd: set/get round trip, rejection with
octd's reason, bad keys refused before anything is written, commands."""
import os
import resource
import time

import pytest

import octd


def test_set_get_roundtrip(daemon):
    c = daemon.control
    gen = c.set({"display.bscan.contrast": 2.5}, window="hamming")
    v = c.get()
    assert v["window"].startswith("hamming")
    assert float(v["display.bscan.contrast"]) == 2.5
    s = c.status()
    assert s["applied_gen"] >= gen and s["state"] == "online"
    c.set(window="hann", display__bscan__contrast=2.0)
    assert c.get()["window"].startswith("hann")


def test_set_rejected_with_reason(daemon):
    c = daemon.control
    before = c.get()
    with pytest.raises(octd.ControlRejected) as ei:
        c.set(freq_cutoff=200)  # > M/2 = 128
    assert "freq_cutoff" in str(ei.value) or "cut" in str(ei.value)
    assert c.get()["freq_cutoff"] == before["freq_cutoff"]


def test_set_bad_key_writes_nothing(daemon):
    c = daemon.control
    # after a rejection octd writes the last good values back as a new
    # generation: wait until it has applied what is in the block
    deadline = time.monotonic() + 10
    while c.status()["applied_gen"] < c.generation() and time.monotonic() < deadline:
        time.sleep(0.01)
    g0 = c.generation()
    with pytest.raises(octd.OctError, match="no_such_key"):
        c.set({"no_such_key": 1, "window": "rect"})
    assert c.generation() == g0  # nothing written
    assert c.get()["window"].startswith("hann")


def test_commands(daemon):
    c = daemon.control
    with pytest.raises(octd.CommandFailed, match="review"):
        c.save("raw")  # only in review
    c.snapshot()
    c.review()
    assert c.status()["state"] == "review"
    with pytest.raises(octd.CommandFailed, match="online"):
        c.record(frames=1)
    assert "online" in c.online() or True
    assert c.status()["state"] == "online"


def _threads_nice(pid):
    """{comm: [nice, ...]} of every thread of pid (field 19 of stat)."""
    out = {}
    for t in os.listdir("/proc/%d/task" % pid):
        try:
            stat = open("/proc/%d/task/%s/stat" % (pid, t)).read()
        except FileNotFoundError:  # a thread that just ended
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        out.setdefault(comm, []).append(int(stat.rsplit(")", 1)[1].split()[16]))
    return out


def test_frame_loop_nice_auto(daemon):
    """[engine] nice = auto (issue 21): the frame loop at nice -20 where it is
    permitted (CAP_SYS_NICE or RLIMIT_NICE), octd's background threads (the
    publisher, ZeroMQ's) at octd's own nice, as the log says."""
    base = os.getpriority(os.PRIO_PROCESS, 0)  # the fixture's octd inherits it
    soft = resource.getrlimit(resource.RLIMIT_NICE)[0]
    if os.geteuid() == 0:
        want = -20
    elif soft == resource.RLIM_INFINITY:
        want = -20
    else:
        want = min(base, max(-20, 20 - soft))
    pid = daemon.proc.pid
    threads = _threads_nice(pid)
    main = int(open("/proc/%d/task/%d/stat" % (pid, pid)).read().rsplit(")", 1)[1].split()[16])
    assert main == want, (main, want, threads)
    background = {k: v for k, v in threads.items() if k.startswith(("octd-publish", "ZMQbg"))}
    assert "octd-publish" in background and any(k.startswith("ZMQbg") for k in background), threads
    for comm, nices in background.items():
        assert all(n == base for n in nices), (comm, nices, base)
    if want != base:
        log = open(daemon.log.name).read()
        assert "frame loop at nice %d (octd's other threads at %d)" % (want, base) in log
