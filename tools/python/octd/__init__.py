"""octd - Python access to the octd OCT processing daemon (SPEC 10.6).

    Subscriber(endpoint, topics)   images as (header, ndarray), zero-copy, gap counts
    Control(name)                  get()/set(**values) and the commands (record, ...)
    Producer(name, ...)            the frame-ring writer (acquirers in Python)
    read_recording(path)           an HDF5 recording of octd (raw, products)
    Engine(profile, backend)       the project's C engine (liboct.so) on numpy frames
    octd.dask.process_recordings   offline processing over a Dask cluster

Pure Python over numpy, pyzmq, h5py (recordings) and ctypes (liboct.so,
found in the build tree, through $OCTD_LIB or as the system's liboct.so.0).
"""
from .control import CommandFailed, Control, ControlRejected, parse_status
from .producer import Producer
from .recording import Recording, read_recording
from ._lib import OctError

__version__ = "0.1.0"


def __getattr__(name):
    # zmq and the C library load only when used
    if name == "Subscriber":
        from .subscriber import Subscriber
        return Subscriber
    if name == "Engine":
        from .engine import Engine
        return Engine
    raise AttributeError("module 'octd' has no attribute %r" % name)


__all__ = ["Subscriber", "Control", "ControlRejected", "CommandFailed", "Producer",
           "read_recording", "Recording", "Engine", "OctError", "parse_status"]
