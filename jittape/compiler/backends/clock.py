"""A cycle counter that nopython code can read, for the kernel profiler.

``cycles()`` is LLVM's ``readcyclecounter`` (``rdtsc`` on x86-64): a few
nanoseconds, no call into Python. The generated ``entry_prof`` reads it before and
after every kernel call; :func:`calibrate` relates cycles to ``perf_counter_ns``.

Only x86-64 has a counter that user code may read on every OS (on AArch64 Linux the
instruction LLVM picks can trap), so :data:`AVAILABLE` is false elsewhere and the
profiler then times whole programs only.
"""

from __future__ import annotations

import platform
import time

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

AVAILABLE = platform.machine().lower() in ("x86_64", "amd64")


@intrinsic
def cycles(typingctx):
    """The CPU's time-stamp counter, as an int64 (nopython only)."""

    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(ir.IntType(64), [])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.readcyclecounter")
        return builder.call(fn, [])

    return types.int64(), codegen


_now = None
_rate: list = []  # cycles per nanosecond, measured once per process


def now() -> int:
    """``cycles()`` from Python (compiled on first use)."""
    global _now
    if _now is None:
        import numba

        @numba.njit(nogil=True)
        def read():
            return cycles()

        read()
        _now = read
    return _now()


def calibrate() -> tuple[int, int, float]:
    """(cycles, perf_counter_ns, cycles per ns) at this moment; the rate is measured
    over 20 ms on the first call of the process."""
    if not _rate:
        c0, t0 = now(), time.perf_counter_ns()
        time.sleep(0.02)
        c1, t1 = now(), time.perf_counter_ns()
        _rate.append(max((c1 - c0) / max(t1 - t0, 1), 1e-9))
    t = time.perf_counter_ns()
    return now(), t, _rate[0]
