"""ctypes binding of libeager.so (python/csrc/eager_py.c: libpcoll + the controller + the package's C side).

The library is found at $EAGER_SGD_LIB, else next to this file (pip install copies it there), else in
the repository's build folder (a checkout used with PYTHONPATH=python). With CUDA tensors the
package loads libeager_cuda.so instead (the same library with libpcoll's device data path: NCCL,
or staged through pinned host memory where ranks share a GPU; it serves host memory too); exactly
one of the two is loaded in a process, the first time a model's optimizer or init() needs one, so
that importing the package and CPU runs never load libeager_cuda.so (nor the CUDA runtime).
RTLD_GLOBAL: the MPI it links (Open MPI's plugins need libmpi's symbols global, as mpi4py loads it)
is then the process's MPI."""
import ctypes
import os

_lib = None
_which = None


def _candidates(cuda):
    name = "libeager_cuda.so" if cuda else "libeager.so"
    env = os.environ.get("EAGER_SGD_LIB", "")
    if env:
        yield os.path.join(os.path.dirname(env), name) if cuda and os.path.basename(env) == "libeager.so" else env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(here, name)
    yield os.path.join(os.path.dirname(os.path.dirname(here)), "build", name)


def loaded():
    """Which library is loaded: None, "host" (libeager.so) or "cuda" (libeager_cuda.so)."""
    return _which


def load(cuda=False):
    """The library (loaded once: a second call asking for the other variant is an error)."""
    global _lib, _which
    if _lib is not None:
        if cuda and _which != "cuda":
            raise RuntimeError("eager_sgd: libeager.so is loaded already; CUDA tensors need libeager_cuda.so "
                               "(create the first optimizer with the model on the GPU)")
        return _lib
    tried = []
    for path in _candidates(cuda):
        tried.append(path)
        if os.path.exists(path):
            lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            break
    else:
        raise RuntimeError("eager_sgd: %s not found (tried %s): run 'make build-all' in the repository%s, or set "
                           "EAGER_SGD_LIB" % ("libeager_cuda.so" if cuda else "libeager.so", ", ".join(tried),
                                              " on a machine with CUDA and NCCL" if cuda else ""))
    P, C, D, U64, SZ, I = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_double, ctypes.c_uint64, ctypes.c_size_t,
                           ctypes.c_int)
    DP = ctypes.POINTER(D)
    sig = {
        "eg_count_names": (C, []), "eg_error": (C, [P]), "eg_hash_init": (U64, []),
        "eg_hash": (U64, [U64, P, SZ]), "eg_share": (None, [D, D, D, D, DP]),
        "eg_mpi_init": (I, [ctypes.POINTER(I), ctypes.POINTER(I), C, SZ]), "eg_mpi_finalize": (None, []),
        "eg_abort": (None, [I]), "eg_mpi_version": (C, [C, SZ]), "eg_cpu": (C, [C, SZ]), "eg_agree": (I, [I, C, C, SZ]),
        "eg_same": (I, [U64, C, C, SZ]), "eg_bcast": (I, [P, SZ, I]), "eg_allreduce_sum": (I, [P, SZ, I]),
        "eg_new": (I, [C, I, U64, SZ, I, D, C, SZ, ctypes.POINTER(P)]), "eg_policy": (C, [P, C, SZ]),
        "eg_data_path": (C, [P]), "eg_begin": (I, [P, I, D]), "eg_step": (I, [P, P, D, D]),
        "eg_next": (I, [P, ctypes.POINTER(ctypes.POINTER(ctypes.c_float)), DP, DP]), "eg_join": (I, [P]),
        "eg_drain": (I, [P]), "eg_finish": (I, [P]), "eg_counts": (I, [P, DP, I]), "eg_decision_hash": (U64, [P]),
        "eg_nrecords": (SZ, [P]), "eg_record": (I, [P, SZ, DP, C, SZ]), "eg_nswitches": (SZ, [P]),
        "eg_switch": (I, [P, SZ, DP, C, C, SZ, C, SZ]), "eg_free": (None, [P]),
        "eg_state_save": (I, [P, P, SZ, ctypes.POINTER(SZ)]), "eg_state_rounds": (U64, [P]),
        "eg_state_read": (P, [P, P, SZ, I, C, SZ, ctypes.POINTER(I)]), "eg_state_adopt": (None, [P, P, U64]),
        "eg_state_free": (None, [P]), "eg_add_applied": (None, [P, D]),
    }
    for name, (res, args) in sig.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args
    _lib, _which = lib, "cuda" if cuda else "host"
    return lib


def buf(n=1024):
    return ctypes.create_string_buffer(n)
