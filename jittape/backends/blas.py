"""One BLAS thread for numpy's and scipy's OpenBLAS.

``np.dot`` inside Numba code calls scipy's OpenBLAS; numpy's own matmuls (the eager
forward pass) call numpy's. Two thread pools that alternate fight for the cores: an
MLP step measured 16 ms instead of 3.7 (``NUMBA_NOTES.md``). At the sizes of a
training step one thread per pool loses nothing and keeps timings stable.

``JITTAPE_BLAS_THREADS`` sets the count (``0``: leave the libraries alone). Works
on Linux with the OpenBLAS builds numpy and scipy ship; elsewhere it does nothing.
"""

from __future__ import annotations

import ctypes
import os

_SETTERS = (
    "scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
    "openblas_set_num_threads64_", "openblas_set_num_threads",
)
_done: list = []


def _loaded_blas() -> list:
    try:
        with open("/proc/self/maps") as f:
            maps = f.read()
    except OSError:
        return []
    return sorted({ln.split()[-1] for ln in maps.splitlines()
                   if "openblas" in ln.lower() and ln.split()[-1].startswith("/")})


def limit_threads(n: int | None = None) -> list:
    """Set every loaded OpenBLAS to ``n`` threads; returns the libraries it set."""
    if n is None:
        try:
            n = int(os.environ.get("JITTAPE_BLAS_THREADS", "1"))
        except ValueError:
            n = 1
    if n <= 0:
        return []
    try:
        import scipy.linalg.cython_blas  # noqa: F401  (the library np.dot uses in Numba)
    except ImportError:
        pass
    done = []
    for path in _loaded_blas():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for sym in _SETTERS:
            fn = getattr(lib, sym, None)
            if fn is not None:
                fn.argtypes = [ctypes.c_int]
                fn(int(n))
                done.append(path)
                break
    _done[:] = done
    return done
