"""octd.Control against a running octd: set/get round trip, rejection with
octd's reason, bad keys refused before anything is written, commands."""
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
