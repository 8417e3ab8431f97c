"""``jt.function``'s ``explain``: the report of what happens to a call (the traced IR,
the passes, the kernels after fusion, the generated source, the compile times)."""

from __future__ import annotations

from ..compiler.ir import print_graph
from .concrete import ConcreteFunction


class Explanation:
    """The report of :meth:`Function.explain`; ``str()`` it, or read its fields."""

    def __init__(self, fn, cf: ConcreteFunction):
        self.function = fn
        self.concrete = cf
        self.traced_graph = cf.traced
        self.graph = cf.graph
        self.reports = cf.reports
        self.kernels = cf.kernels()
        prog = cf.program
        self.source_path = None if prog is None else prog.path
        # the entry module's, then each kernel module's (cpu); one file elsewhere
        self.source_paths = [] if prog is None else list(getattr(prog, "paths", [prog.path]))
        self.source = None if prog is None else prog.source
        self.times = dict(cf.times)
        if prog is not None and prog.ready:
            self.times["compile"] = prog.compile_seconds

    def kernel_notes(self) -> dict:
        """value id -> the kernel (as the kernel list, the generated source and
        ``jt.profiler`` name it) that computes the node defining it."""
        prog = self.concrete.program
        calls = getattr(getattr(prog, "sources", None), "calls", ())
        notes: dict = {}
        for v, (name, _) in zip(calls, self.kernels):
            if v is not None:
                notes[v] = f"{notes[v]}, {name}" if v in notes else name
        return notes

    def __str__(self):
        cf = self.concrete
        fn = self.function
        lines = [f"jt.function {fn._name!r} on backend {cf.backend!r}"]
        args = [f"{ty}" for vid, ty in zip(cf.traced.inputs, cf.traced.input_types)
                if cf._source.get(vid, ("",))[0] == "arg"]
        nvars = sum(1 for s in cf._source.values() if s[0] == "var")
        lines.append(f"signature: ({', '.join(args)}); {nvars} variables read, "
                     f"{len(cf.writes)} written")
        lines.append(f"traced at call {cf.call_number} ({cf.cause}); Python side effects "
                     "(print, appends) ran then, not on the calls that reuse the trace")
        if cf.symbolic:
            syms = "; ".join(f"{r.name} is {r.origin}" for r in cf.roots)
            now = ", ".join(f"{r.name}={v}" for r, v in zip(cf.roots, cf.spec.sizes))
            lines.append(f"symbolic sizes: {syms}. One trace serves every size; this "
                         f"report is for {now} ({cf.specializations} size binding(s) so "
                         "far, each ran the passes and code generation, and gives the "
                         "same generated source)")
        lines.append("")
        lines.append(f"-- traced graph: {len(cf.traced.nodes)} nodes --")
        lines.append(print_graph(cf.traced, show_loc=True))
        lines.append("")
        lines.append("-- passes --")
        for r in self.reports:
            lines.append(str(r))
            lines.extend("    " + d for d in r.details[:20])
            if len(r.details) > 20:
                lines.append(f"    ... {len(r.details) - 20} more")
        lines.append("")
        lines.append(f"-- {len(self.kernels)} kernels after fusion --")
        for name, desc in self.kernels:
            lines.append(f"{name}: {desc}")
        if self.source_path:
            lines.append(f"generated source: {self.source_path}")
            lines.extend(f"  kernel module: {p}" for p in self.source_paths[1:])
        prog = cf.program
        t = self.times
        if prog is not None and prog.ready:
            how = {"compiled": "compiled by Numba", "disk": "loaded from the disk cache",
                   "memory": "the same source was compiled already in this process"}.get(
                prog.origin, prog.origin)
            comp = f"first run {t['compile']:.3f} s ({how})"
        elif prog is not None and prog.fallback:
            comp = f"runs on interpret: {prog.fallback}"
        elif cf._thread is not None:
            comp = "compiling in the background (calls run on the interpreter meanwhile)"
        else:
            comp = "not compiled yet (Numba compiles on the first call)"
        lines.append(f"times: trace {t['trace']:.3f} s, passes {t['passes']:.3f} s, "
                     f"codegen {t['codegen']:.3f} s, {comp}")
        lines.append("")
        lines.append("-- optimized graph --")
        lines.append(print_graph(cf.graph, notes=self.kernel_notes()))
        return "\n".join(lines)

    __repr__ = __str__
