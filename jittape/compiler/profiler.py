"""Where a compiled step spends its time, kernel by kernel.

    with jt.profiler.profile() as prof:
        for _ in range(100):
            train_step(x, y)
    print(prof.table())
    prof.export_chrome_trace("step.json")   # chrome://tracing or ui.perfetto.dev

While a profile is open, every call of a compiled program (``@jt.function`` on the
cpu backend, or a compiled ``tape.gradient``) runs ``entry_prof``: the same kernels,
with the CPU's cycle counter read before and after each kernel call (a few ns each).
The first profiled call of a program compiles that variant; its compile time is
reported on its own line and kept out of the step's figures. With no profile open
the only cost is one test of an empty list per call.

The table has one row per kernel call site (a kernel called for several weight
matrices has one row per call), with its ops and shapes, then the time spent in the
entry between kernels (views, fills, copies) and outside compiled code (Python
dispatch, feeding variables, writing them back).
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from dataclasses import dataclass, field

__all__ = ["profile", "Profile", "KernelStats"]

ACTIVE: list = []  # the open profiles; the backends test this list on every call
_local = threading.local()


@dataclass
class KernelStats:
    """One kernel call site, summed over the profile."""

    program: str
    site: int
    kernel: str
    ops: str
    shapes: str
    calls: int = 0
    total_ns: int = 0

    @property
    def mean_ns(self) -> float:
        return self.total_ns / max(self.calls, 1)


@dataclass
class Profile:
    """What one ``with jt.profiler.profile()`` block saw. Safe to fill from several
    threads; each event keeps its thread id."""

    events: list = field(default_factory=list)  # chrome trace events (times in ns)
    kernels: dict = field(default_factory=dict)  # (program, site) -> KernelStats
    step_ns: int = 0  # outermost compiled calls, wall time, compiles excluded
    program_ns: int = 0  # inside compiled entries
    compile_ns: int = 0
    compiles: int = 0
    steps: int = 0
    per_kernel: bool = True  # False where no cycle counter can be read
    started_ns: int = 0
    stopped_ns: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __enter__(self) -> "Profile":
        from .backends import clock

        self.per_kernel = clock.AVAILABLE
        if self.per_kernel:
            clock.calibrate()
        self.started_ns = time.perf_counter_ns()
        ACTIVE.append(self)
        return self

    def __exit__(self, *exc) -> None:
        self.stopped_ns = time.perf_counter_ns()
        ACTIVE.remove(self)

    # -- recording (called by the backends and jt.function) ------------------------
    def _add(self, event: dict) -> None:
        with self._lock:
            self.events.append(event)

    def _kernel(self, prog_name, site, kernel, desc, start_ns, dur_ns, tid) -> None:
        with self._lock:
            ks = self.kernels.get((prog_name, site))
            if ks is None:
                ops, shapes = _split_desc(desc)
                ks = self.kernels[(prog_name, site)] = KernelStats(
                    prog_name, site, kernel, ops, shapes)
            ks.calls += 1
            ks.total_ns += dur_ns
            self.events.append(("kernel", ks, start_ns, dur_ns, tid))

    # -- reading -------------------------------------------------------------------
    @property
    def kernel_ns(self) -> int:
        return sum(k.total_ns for k in self.kernels.values())

    def rows(self) -> list:
        """KernelStats per call site, largest total first."""
        return sorted(self.kernels.values(), key=lambda k: -k.total_ns)

    def table(self, limit: int | None = None) -> str:
        """A plain-text table: one row per kernel call site, then the time between
        kernels and outside compiled code; shares are of the profiled steps' time."""
        step = max(self.step_ns, 1)
        head = ["kernel", "ops", "shapes", "calls", "total", "mean", "share"]
        body = []
        rows = self.rows()
        for k in rows[:limit] if limit else rows:
            body.append([f"{k.program[:10]}:{k.kernel}", _clip(k.ops, 48), _clip(k.shapes, 36),
                         str(k.calls), _fmt(k.total_ns), _fmt(k.mean_ns),
                         f"{100 * k.total_ns / step:.1f}%"])
        if limit and len(rows) > limit:
            rest = sum(k.total_ns for k in rows[limit:])
            body.append([f"({len(rows) - limit} more)", "", "", "", _fmt(rest), "",
                         f"{100 * rest / step:.1f}%"])
        glue = max(self.program_ns - self.kernel_ns, 0) if self.per_kernel else 0
        outside = max(self.step_ns - self.program_ns, 0)
        if self.per_kernel:
            body.append(["(between kernels)", "views, fills, copies in the entry", "", "",
                         _fmt(glue), "", f"{100 * glue / step:.1f}%"])
        else:
            body.append(["(compiled entries)", "no cycle counter on this machine: whole "
                         "programs only", "", "", _fmt(self.program_ns), "",
                         f"{100 * self.program_ns / step:.1f}%"])
        body.append(["(outside kernels)", "Python: dispatch, feeds, variable write-back",
                     "", "", _fmt(outside), "", f"{100 * outside / step:.1f}%"])
        body.append(["total", f"{self.steps} steps", "", "", _fmt(self.step_ns),
                     _fmt(self.step_ns / max(self.steps, 1)) + "/step", "100.0%"])
        widths = [max(len(r[j]) for r in [head] + body) for j in range(len(head))]
        right = {3, 4, 5, 6}

        def line(r):
            return "  ".join(c.rjust(w) if j in right else c.ljust(w)
                             for j, (c, w) in enumerate(zip(r, widths))).rstrip()

        out = [line(head), line(["-" * w for w in widths])] + [line(r) for r in body]
        if self.compiles:
            out.append(f"(not counted: {self.compiles} compile(s), {_fmt(self.compile_ns)})")
        return "\n".join(out)

    def __str__(self) -> str:
        return self.table()

    def export_chrome_trace(self, path) -> str:
        """Write the events as Chrome trace JSON (chrome://tracing, ui.perfetto.dev)."""
        t0 = self.started_ns
        pid = os.getpid()
        with self._lock:
            events = list(self.events)
        out = [{"name": "process_name", "ph": "M", "pid": pid,
                "args": {"name": "jittape"}}]
        for e in events:
            if type(e) is tuple:  # a kernel, kept compact while profiling
                _, ks, ts, dur, tid = e
                e = dict(name=f"{ks.kernel}: {ks.ops}", cat="kernel", ts=ts, dur=dur,
                         tid=tid, args={"program": ks.program, "site": ks.site,
                                        "shapes": ks.shapes})
            out.append({"name": e["name"], "cat": e["cat"], "ph": "X", "pid": pid,
                        "tid": e["tid"], "ts": (e["ts"] - t0) / 1000.0,
                        "dur": e["dur"] / 1000.0, "args": e.get("args", {})})
        out[1:] = sorted(out[1:], key=lambda e: (e["ts"], -e["dur"]))
        path = os.fspath(path)
        with open(path, "w") as f:
            json.dump({"traceEvents": out, "displayTimeUnit": "ns"}, f)
        return path


def profile() -> Profile:
    """A context manager that records every compiled call made inside it."""
    return Profile()


# -- hooks used by the backends and jt.function -------------------------------------
class _Span:
    """The wall time of one outermost compiled call (a ``jt.function`` call, or a
    compiled program called from eager code)."""

    __slots__ = ("name", "cat", "start", "compile_ns")

    def __init__(self, name, cat):
        self.name, self.cat = name, cat

    def __enter__(self):
        depth = getattr(_local, "depth", 0)
        _local.depth = depth + 1
        if depth == 0:
            _local.compile_ns = 0  # compiles and the profiler's own bookkeeping
        self.start = time.perf_counter_ns()
        return self

    def __exit__(self, *exc):
        end = time.perf_counter_ns()
        _local.depth -= 1
        outer = _local.depth == 0
        compile_ns = _local.compile_ns if outer else 0
        tid = threading.get_ident()
        for p in list(ACTIVE):
            p._add(dict(name=self.name, cat=self.cat, ts=self.start,
                        dur=end - self.start, tid=tid))
            if outer:
                with p._lock:
                    p.step_ns += end - self.start - compile_ns
                    p.steps += 1


def span(name: str, cat: str) -> _Span:
    return _Span(name, cat)


def note_compile(seconds: float, what: str) -> None:
    """A compile inside a profiled call: reported apart, not in the step's time."""
    ns = int(seconds * 1e9)
    if getattr(_local, "depth", 0):
        _local.compile_ns = getattr(_local, "compile_ns", 0) + ns
    end = time.perf_counter_ns()
    for p in list(ACTIVE):
        with p._lock:
            p.compile_ns += ns
            p.compiles += 1
        p._add(dict(name=f"compile {what}", cat="compile", ts=end - ns, dur=ns,
                    tid=threading.get_ident()))


def record_program(name: str, kinfo: list, start_ns: int, end_ns: int, stamps) -> None:
    """One compiled entry call: its span and, from ``stamps`` (cycle counts before and
    after each kernel call), its kernels. The time this takes is kept out of the
    step's time, like a compile."""
    t_in = time.perf_counter_ns()
    try:
        _record_program(name, kinfo, start_ns, end_ns, stamps)
    finally:
        if getattr(_local, "depth", 0):
            _local.compile_ns += time.perf_counter_ns() - t_in


def _record_program(name, kinfo, start_ns, end_ns, stamps) -> None:
    tid = threading.get_ident()
    profiles = list(ACTIVE)
    for p in profiles:
        with p._lock:
            p.program_ns += end_ns - start_ns
    if stamps is None:
        return
    from .backends import clock

    c0, t0, rate = clock.calibrate()
    for site, (kernel, desc) in enumerate(kinfo):
        a, b = int(stamps[2 * site]), int(stamps[2 * site + 1])
        start = t0 + int((a - c0) / rate)
        for p in profiles:
            p._kernel(name, site, kernel, desc, start, int((b - a) / rate), tid)


_TYPE = re.compile(r"[a-z]+\d*\[[\d,]*\]")


def _split_desc(desc: str) -> tuple[str, str]:
    """A kernel's description split into its ops and its shapes:
    ``"loop over f32[64,128]: add, relu"`` -> ``("add, relu", "f32[64,128]")``,
    ``"reduction of f32[64,10] reducing axes [1]: exp"`` ->
    ``("reduction, axes [1]: exp", "f32[64,10]")``."""
    head, sep, ops = desc.partition(": ")
    shapes = ", ".join(_TYPE.findall(head))
    words = [w for w in _TYPE.sub("", head).replace(",", " ").split()
             if w not in ("of", "over", "reducing")]
    kind = " ".join(words).replace("reduction axes", "reduction, axes")
    kind = "flat loop" if kind == "loop flat" else kind
    if not sep:
        return kind, shapes
    return (f"{kind}: {ops}" if kind and kind not in ("loop", "flat loop") else ops), shapes


def _clip(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def _fmt(ns: float) -> str:
    if ns >= 1e9:
        return f"{ns / 1e9:.2f} s"
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.1f} µs"
    return f"{ns:.0f} ns"
