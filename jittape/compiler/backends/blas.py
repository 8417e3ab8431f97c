"""BLAS threads: one for numpy's OpenBLAS, all cores for scipy's (compiled code).

The kernels' GEMM (``kgemm.gemm``) calls scipy's OpenBLAS; numpy's own matmuls (the eager
forward pass) call numpy's. Two multi-threaded pools that alternate fight for the
cores: an eager MLP step measured 8 ms instead of 0.5 with both at two threads. With
numpy's at one thread there is no fight, and the compiled code keeps every core for
its matmuls (the 784-512-256-10 Adam step: 3.0 ms on two threads, 5.5 ms on one).

``JITTAPE_BLAS_THREADS`` sets numpy's count (default 1) and
``JITTAPE_KERNEL_BLAS_THREADS`` scipy's (default: the library's own, all cores); ``0``
leaves a library alone. Works on Linux with the OpenBLAS builds numpy and scipy ship;
elsewhere it does nothing.

Between calls an OpenBLAS worker spins, by default for 2**28 cycles (a tenth of a
second), before it sleeps. A train step calls BLAS a few dozen times with serial
kernels in between, so the worker never sleeps, and on the project's 2-core machine
(KVM, AMD EPYC) the LeNet step then ran for seconds at a time at one thread's speed:
7.4 ms settled, 12 ms in those stretches, with both threads on their cores the whole
time (medians of 20-call windows over 25 s: 8 fast, 100 slow in one run). With the
spin cut to 2**16 cycles (``OPENBLAS_THREAD_TIMEOUT=16``, which jittape sets before it
loads scipy's OpenBLAS unless the variable is set already) the same runs gave 141 and
155 fast windows of 150, at 7.8 ms: waking the worker costs a little, the stretches
at one thread's speed go, and an idle worker no longer takes a core from other
processes. The variable is read when the library loads; set it before importing
``scipy.linalg`` to apply it when scipy comes first.
"""

from __future__ import annotations

import ctypes
import os

_SETTERS = (
    "scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
    "openblas_set_num_threads64_", "openblas_set_num_threads",
)
_done: list = []
SPIN = "16"  # OPENBLAS_THREAD_TIMEOUT: a worker spins 2**16 cycles, then sleeps


def _load_kernel_blas() -> None:
    """Load scipy's OpenBLAS (the library ``kgemm.gemm`` and the kernels' ``np.dot``
    call), its workers spinning briefly (see the module's docstring)."""
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", SPIN)
    try:
        import scipy.linalg.cython_blas  # noqa: F401
    except ImportError:
        pass


def _loaded_blas() -> list:
    try:
        with open("/proc/self/maps") as f:
            maps = f.read()
    except OSError:
        return []
    return sorted({ln.split()[-1] for ln in maps.splitlines()
                   if "openblas" in ln.lower() and ln.split()[-1].startswith("/")})


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, str(default)))
    except ValueError:
        return default


def limit_threads(n: int | None = None, kernel_n: int | None = None) -> list:
    """Set numpy's OpenBLAS to ``n`` threads and scipy's to ``kernel_n`` (``0``: leave
    it alone); returns the libraries it set."""
    n = _env_int("JITTAPE_BLAS_THREADS", 1) if n is None else n
    kernel_n = _env_int("JITTAPE_KERNEL_BLAS_THREADS", 0) if kernel_n is None else kernel_n
    _load_kernel_blas()
    done = []
    for path in _loaded_blas():
        want = n if "numpy" in os.path.basename(os.path.dirname(path)) else kernel_n
        if want <= 0:
            continue
        fn = _setter(path)
        if fn is not None:
            fn(int(want))
            done.append(path)
    _done[:] = done
    return done


def _setter(path: str):
    """The OpenBLAS library's set-threads function, or None."""
    try:
        lib = ctypes.CDLL(path)
    except OSError:
        return None
    for sym in _SETTERS:
        fn = getattr(lib, sym, None)
        if fn is not None:
            fn.argtypes = [ctypes.c_int]
            return fn
    return None


_kernel: list = []  # [setter for scipy's OpenBLAS or None, the count it was last set to]


def kernel_threads_fixed() -> bool:
    """``JITTAPE_KERNEL_BLAS_THREADS`` names a count: compiled programs do not tune it."""
    return _env_int("JITTAPE_KERNEL_BLAS_THREADS", 0) > 0


def set_kernel_threads(n: int) -> None:
    """Set scipy's OpenBLAS (the one compiled code calls) to ``n`` threads; a no-op when
    it is at ``n`` already, or when it cannot be set. Cheap enough to call per step."""
    if not _kernel:  # loaded now: the setter found (or not) is kept for good
        _load_kernel_blas()
        fns = [_setter(p) for p in _loaded_blas()
               if "numpy" not in os.path.basename(os.path.dirname(p))]
        _kernel[:] = [next((f for f in fns if f is not None), None), None]
    fn, cur = _kernel
    if fn is not None and cur != n:
        fn(int(n))
        _kernel[1] = n


_CAP: list = [0]  # threads per process, 0: no cap (see cap_threads)


def cpu_count() -> int:
    """The threads compiled code may use: the CPUs this process may use (what OpenBLAS
    starts with), or fewer under :func:`cap_threads`."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return min(n, _CAP[0]) if _CAP[0] > 0 else n


def cap_threads(n: int) -> None:
    """At most ``n`` threads for this process's compiled loops and BLAS calls (several
    ranks of a job on one machine share its cores: ``jittape.distributed.init``)."""
    import numba

    _CAP[0] = max(1, int(n))
    numba.set_num_threads(min(_CAP[0], numba.config.NUMBA_NUM_THREADS))
    set_kernel_threads(cpu_count())
