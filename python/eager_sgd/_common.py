"""eager_sgd's shared pieces: the error every rank agrees on, MPI's start, the collective helpers the
optimizer and its checkpoints use (all through libeager.so)."""
import atexit
import ctypes
import os
import sys

from . import _lib


class EagerSGDError(SystemExit):
    """A refusal every rank agrees on (bad mode, models that differ across ranks, replicas that
    differ, a state_dict that does not load): raised on every rank with the same one-line message;
    uncaught, Python prints that line and exits with status 1 (MPI is finalized at exit). Raised on
    one rank only where that rank alone misused the package (state_dict() while an epoch is open)."""

    def __init__(self, line):
        super().__init__("eager_sgd: " + line)
        self.line = line


_state = {"rank": None, "size": None}


def init(cuda=False):
    """MPI_Init_thread(MPI_THREAD_MULTIPLE) through libeager.so unless MPI is initialised already
    (mpi4py: import it first); every rank checks that the level is MULTIPLE. Returns (rank, size).
    Idempotent. MPI is finalized at exit if this call initialised it. cuda=True loads
    libeager_cuda.so instead (the device data path): a script whose model is on a GPU and that calls
    init() before it creates the optimizer passes it (the first call decides, _lib.load)."""
    if _state["rank"] is not None:
        return _state["rank"], _state["size"]
    lib = _lib.load(cuda)
    r, s, err = ctypes.c_int(), ctypes.c_int(), _lib.buf()
    if lib.eg_mpi_init(ctypes.byref(r), ctypes.byref(s), err, len(err)):
        raise EagerSGDError(err.value.decode())
    _state["rank"], _state["size"] = r.value, s.value
    atexit.register(lib.eg_mpi_finalize)
    return r.value, s.value


def _fatal(line):
    """An error after which MPI cannot end cleanly (a peer died or hung, the engine is inside MPI):
    the line on stderr, then MPI_Abort, as pcollCheck does."""
    sys.stderr.write("eager_sgd: %s\n" % line)
    sys.stderr.flush()
    _lib.load().eg_abort(1)
    os._exit(1)


def _agree(ok, msg):
    lib, out = _lib.load(), _lib.buf()
    if lib.eg_agree(1 if ok else 0, msg.encode(), out, len(out)):
        raise EagerSGDError(out.value.decode())


def hash_bytes(tensors, h=None):
    """FNV-1a 64 (common/hash.h, through libeager.so) over the float32 bytes of the tensors in order."""
    import torch
    lib = _lib.load()
    h = lib.eg_hash_init() if h is None else h
    for t in tensors:
        c = t.detach().to("cpu", torch.float32).contiguous()
        h = lib.eg_hash(h, ctypes.c_void_p(c.data_ptr()), c.numel() * 4)
    return h


def allreduce_sum(t):
    """The sum over the ranks of a CPU float64 tensor, in place (MPI_Allreduce through libeager.so):
    for the script's own totals (evaluation counts). Collective. Returns t."""
    import torch
    if t.dtype != torch.float64 or t.device.type != "cpu" or not t.is_contiguous():
        raise ValueError("eager_sgd.allreduce_sum: a contiguous CPU float64 tensor")
    init()
    if _lib.load().eg_allreduce_sum(ctypes.c_void_p(t.data_ptr()), t.numel(), 1):
        _fatal("MPI_Allreduce failed")
    return t
