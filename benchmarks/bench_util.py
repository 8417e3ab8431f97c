"""Helpers shared by the benchmarks."""

from __future__ import annotations


def settle(fn, calls: int | None = None):
    """Call ``fn`` until every compiled program it uses is in its steady state: compiled,
    its parallel variant compiled (after ``PARALLEL_AFTER`` calls, in a background
    thread by default) and the serial/parallel choice measured. Timing before that would
    time compiles."""
    from jittape.backends import cpu

    n = cpu.PARALLEL_AFTER + 4 if calls is None else calls
    for _ in range(n):
        fn()
    for prog in list(cpu._BY_KEY.values()):
        t = prog.par_thread
        if t is not None:
            t.join()
    for _ in range(cpu._TUNE_CALLS + 4):
        fn()
