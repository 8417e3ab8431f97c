"""Helpers shared by the benchmarks."""

from __future__ import annotations


def settle(fn, calls: int | None = None):
    """Call ``fn`` until every compiled program it uses is in its steady state: compiled,
    its parallel variant compiled (after ``PARALLEL_AFTER`` calls, in a background
    thread by default) and the serial/parallel choice measured. Timing before that would
    time compiles."""
    from jittape.compiler.backends import cpu

    n = cpu.PARALLEL_AFTER + 4 if calls is None else calls
    for _ in range(n):
        fn()
    for prog in list(cpu._BY_KEY.values()):
        t = prog.par_thread
        if t is not None:
            t.join()
    for _ in range(4 * cpu._TUNE_CALLS):  # until every program chose how to run
        fn()
        if all(p.choice is not None for p in list(cpu._BY_KEY.values())
               if p.ready and (p.entry_par is not None or p.tunes_blas)):
            break


def record(benchmark, impl: str, ceilings: dict | None = None, floor: dict | None = None,
           **info) -> None:
    """``extra_info``: ``impl`` (``numpy`` marks the group's reference), the ceilings of
    this run, the workload's floor and anything else worth keeping in the JSON."""
    benchmark.extra_info["impl"] = impl
    if ceilings:
        benchmark.extra_info.update(ceilings)
    if floor:
        benchmark.extra_info.update(floor)
    benchmark.extra_info.update(info)


def compile_seconds(fn) -> float:
    """The compile time of a ``jt.function``'s programs (or a disk-cache load)."""
    return sum(cf.times.get("compile", 0.0) for cf in fn._cache.values())


def ready(step) -> dict:
    """Run a ``workloads`` step until it is settled (compiled, its way of running chosen);
    returns ``{"compile_s": ...}`` for a ``jt.function`` step, else ``{}``."""
    step()
    if step.function is not None:
        step.function.wait()
    settle(step)
    return {"compile_s": compile_seconds(step.function)} if step.function else {}


def record_times(benchmark, times) -> None:
    """Give ``benchmark`` rounds timed elsewhere (``times``, seconds, one per round: the
    steps a rank of an MPI job timed), so that its median, IQR and rounds in the JSON,
    ``report.py`` and ``compare.py`` are those steps' and not the launch's. pytest-benchmark
    has no public way in: this is what its ``pedantic`` does with each round it times
    (``_make_stats``, then ``update`` per round; pytest-benchmark 5.3)."""
    benchmark._mode = "benchmark.pedantic(...)"  # used: no "fixture was not used" warning
    if benchmark.disabled:
        return
    stats = benchmark._make_stats(1)
    for t in times:
        stats.update(t)
