"""One trace: a :class:`ConcreteFunction`, the traced graph and, per binding of its
symbolic sizes, the graph after the backend's passes, its feed plan and its compiled
program (:class:`_Spec`); running it and TF's introspection of it."""

from __future__ import annotations

import collections
import os
import threading
import time

import numpy as np

import passes

from ..compiler import backends
from .. import nest
from .. import printing as _printing
from ..compiler import profiler as _profiler
from ..ops import collective as _collective
from .. import config as _config
from ..compiler.dims import bind
from ..errors import InvalidArgumentError
from ..compiler.ir import ConcretizeError, concretize
from ..tensor import Tensor
from .spec import _describe_spec, _spec_of


def _log_enabled(topic: str) -> bool:
    want = os.environ.get("JITTAPE_LOG", "")
    if not want:
        return False
    topics = {t.strip() for t in want.split(",")}
    return topic in topics or "all" in topics


def _log(topic: str, msg: str) -> None:
    if _log_enabled(topic):
        _config.log(topic, msg)


_ARG, _VAR, _CAP, _RAND = 0, 1, 2, 3


class _Spec:
    """One binding of a trace's sizes: the graph after the passes, what feeds each of
    its inputs, its compiled program. A trace with known sizes has one; a trace with
    symbolic sizes one per distinct binding (the passes and code generation run for
    each, and the generated source is the same, so Numba compiles it once)."""

    __slots__ = ("graph", "reports", "feed_plan", "program", "ready", "thread", "sizes",
                 "draw_shapes", "times")

    def __init__(self, sizes):
        self.sizes = sizes  # the binding, as a tuple of sizes (() for known sizes)
        self.graph = None
        self.reports: list = []
        self.feed_plan: list = []  # (kind, x) per graph input
        self.program = None
        self.ready = False
        self.thread = None  # the background compile, once started
        self.draw_shapes: dict = {}  # random input id -> its shape for this binding
        self.times = {"passes": 0.0, "codegen": 0.0, "compile": 0.0}


class ConcreteFunction:
    """The traced, optimized and compiled program for one call signature."""

    def __init__(self, fn_name, backend, key, params):
        self.name = fn_name
        self.backend = backend
        self.key = key
        self.params = params
        self.traced = None  # the graph as traced (with symbolic sizes, if any)
        self.out_plan: list = []  # per flat output leaf: graph output index or ("py", obj)
        self.out_structure = None
        self.writes: list = []  # (variable, graph output index)
        self.times = {"trace": 0.0, "passes": 0.0, "codegen": 0.0, "compile": 0.0}
        self.cause = ""
        self.diff: list = []  # what changed from the closest earlier signature
        self.call_number = 0
        self.refill = False  # traced again after the trace cache's bound dropped it
        self._source: dict = {}
        self._captures: dict = {}  # graph input id -> captured array
        self.created: list = []
        self.draws: list = []
        self.prints: list = []  # jt.print calls, see printing.run_prints
        self.collectives: tuple = ()  # allreduce/broadcast nodes: a step across ranks
        self.input_structure = ((), {})  # (args, kwargs), TensorSpecs for the tensors
        # symbolic sizes: (argument leaf, dim, Dim) per symbolic size of an argument,
        # and the root symbols in order (a binding is their sizes); None: all known
        self.symbols_at = None
        self.roots: list = []
        self.leaf_types = None  # (shape, dtype) of each argument leaf as first called
        self.spec = _Spec(())  # the binding used last (introspection reads it)
        self._specs: collections.OrderedDict = collections.OrderedDict()
        self._spec_lock = threading.Lock()

    # the last binding's pieces, under the names they have always had; ``graph`` is the
    # trace itself while no binding of its symbolic sizes has run
    graph = property(lambda self: self.spec.graph if self.spec.graph is not None
                     else self.traced)
    reports = property(lambda self: self.spec.reports)
    feed_plan = property(lambda self: self.spec.feed_plan)
    ready = property(lambda self: self.spec.ready)
    _thread = property(lambda self: self.spec.thread)

    @property
    def program(self):
        return self.spec.program

    @program.setter
    def program(self, prog):
        self.spec.program = prog

    @property
    def symbolic(self) -> bool:
        """Traced with symbolic sizes: one trace serves every binding of them."""
        return self.symbols_at is not None

    @property
    def specializations(self) -> int:
        """Bindings of the symbolic sizes seen so far (1 for a trace with known sizes)."""
        return len(self._specs) if self.symbolic else 1

    # -- TF's introspection -----------------------------------------------------------
    @property
    def structured_input_signature(self) -> tuple:
        """``(args, kwargs)`` as traced: a ``jt.TensorSpec`` per tensor argument (None
        for a symbolic size), Python values as they were."""
        return self.input_structure

    @property
    def structured_outputs(self):
        """The outputs' structure, a ``jt.TensorSpec`` per tensor (None for a symbolic
        size), Python values as they were."""
        g = self.traced
        types = g.types()
        flat = []
        for p in self.out_plan:
            if type(p) is int:
                flat.append(_spec_of(types[g.outputs[p]]))
            else:
                flat.append(p[1])
        return nest.pack_sequence_as(self.out_structure, flat)

    def pretty_printed_signature(self, verbose=True) -> str:
        """The signature as TF prints it: input parameters, output type, captures."""
        args, kwargs = self.input_structure
        lines = ["Input Parameters:"]
        for j, a in enumerate(args):
            name = self.params[j] if j < len(self.params) else f"args[{j}]"
            lines.append(f"  {name} (POSITIONAL_OR_KEYWORD): {_describe_spec(a)}")
        for k, a in kwargs.items():
            lines.append(f"  {k} (KEYWORD_ONLY): {_describe_spec(a)}")
        lines.append("Output Type:")
        lines.append(f"  {_describe_spec(self.structured_outputs)}")
        lines.append("Captures:")
        caps = [f"  {ty}" for vid, ty in zip(self.traced.inputs, self.traced.input_types)
                if self._source.get(vid, ("",))[0] != "arg"]
        lines.extend(caps or ["  None"])
        return "\n".join(lines)

    def __call__(self, *args, **kwargs):
        """Run this trace (the arguments must fit its signature; no retrace)."""
        fn = getattr(self, "_function", None)
        fn = fn() if fn is not None else None
        if fn is None:
            raise RuntimeError(f"concrete function {self.name!r}: its jt.function is gone")
        args, kwargs = fn._canonical(args, kwargs)
        leaves: list = []
        key = fn._call_key(self.backend, args, kwargs, leaves)  # masked as the trace's
        if key != self.key:
            want = self.pretty_printed_signature().split("Output Type:")[0].rstrip()
            raise TypeError(
                f"concrete function {self.name!r}: the arguments do not fit its signature "
                f"(a concrete function never traces again; call the jt.function itself for "
                f"other arguments).\n{want}")
        return self.run(leaves)

    # -- specializing ----------------------------------------------------------------
    def specialize(self, graph, sizes=(), values=None):
        """The :class:`_Spec` for ``graph`` (the trace with its sizes bound): the
        backend's passes, the feed plan and the program."""
        spec = _Spec(sizes)
        t1 = time.perf_counter()
        spec.draw_shapes = {v: t.shape for v, t in zip(graph.inputs, graph.input_types)}
        pipeline = backends.pipeline(self.backend)
        if values:
            # the bound symbolic sizes are not folded into constants: every binding's
            # graph has one structure, so the generated source is the same
            vary = frozenset(v for v in values.values() if v > 1)
            pipeline = tuple(passes.configured(passes.fold_constants, vary=vary)
                             if passes.pass_key(p)[0] == "fold_constants" else p
                             for p in pipeline)
        spec.graph, spec.reports = backends.optimize(graph, pipeline)
        plan = []
        for vid in spec.graph.inputs:
            src = self._source.get(vid)
            if src is None:
                plan.append((_CAP, self._captures[vid]))
            elif src[0] == "arg":
                plan.append((_ARG, src[1]))
            elif src[0] == "rand":
                plan.append((_RAND, vid))
            else:
                plan.append((_VAR, src[1]))
        spec.feed_plan = plan
        t2 = time.perf_counter()
        spec.times["passes"] = t2 - t1
        backend = backends.get(self.backend)
        if backend.compiles and spec.graph.outputs:
            try:
                spec.program = backend.executable(spec.graph)
            except Exception:  # noqa: BLE001 - run_arrays falls back and warns
                spec.program = None
            spec.times["codegen"] = time.perf_counter() - t2
        self.times.update(passes=spec.times["passes"], codegen=spec.times["codegen"])
        self.spec = spec
        return spec

    def spec_for(self, leaves) -> _Spec:
        """The binding of the symbolic sizes that these argument arrays give."""
        if self.symbols_at is None:
            return self.spec
        sizes = [None] * len(self.roots)
        for k, j, r in self._bind_plan:  # (leaf, dim, root index), made once per trace
            n = leaves[k].shape[j]
            have = sizes[r]
            if have is None:
                sizes[r] = n
            elif have != n:
                try:
                    bind(self.symbols_at, [np.shape(a) for a in leaves])
                except ValueError as e:  # names the two arguments
                    raise InvalidArgumentError(f"jt.function {self.name!r}: {e}") from None
        sizes = tuple(sizes)
        spec = self._specs.get(sizes)
        if spec is not None:
            self.spec = spec
            return spec
        values = dict(zip(self.roots, sizes))
        with self._spec_lock:
            spec = self._specs.get(sizes)
            if spec is None:
                try:
                    graph = concretize(self.traced, values)
                except ConcretizeError as e:
                    loc = e.node.loc if e.node is not None else None
                    raise InvalidArgumentError(
                        f"jt.function {self.name!r}: the sizes of this call "
                        f"({', '.join(f'{r.name}={v}' for r, v in zip(self.roots, sizes))}) "
                        f"do not fit the trace: {e}" + (f" (at {loc})" if loc else "")
                    ) from None
                spec = self.specialize(graph, sizes, values)
                self._specs[sizes] = spec
                _config.evict(self._specs, "traces")
            else:
                self.spec = spec
        return spec

    # -- running -------------------------------------------------------------------
    def _arrays(self, leaves, spec):
        if self.draws:
            # every random value of the trace is drawn, in program order, also those
            # the passes found unused: the generator advances as the eager code's would
            shapes = spec.draw_shapes
            drawn = {vid: draw(shapes[vid]) for vid, draw in self.draws}
            return [leaves[x] if kind == _ARG else (x._value if kind == _VAR else (
                drawn[x] if kind == _RAND else x)) for kind, x in spec.feed_plan]
        return [leaves[x] if kind == _ARG else (x._value if kind == _VAR else x)
                for kind, x in spec.feed_plan]

    def run(self, leaves):
        if _profiler.ACTIVE:
            with _profiler.span(f"function {self.name}", "function"):
                return self._run(leaves)
        return self._run(leaves)

    def _run(self, leaves):
        if self.collectives:  # every rank checks the layout once, then a guarded step
            return _collective.WORLD[0].run_step(self, self._run_step, leaves)
        return self._run_step(leaves)

    def _run_step(self, leaves):
        spec = self.spec if self.symbols_at is None else self.spec_for(leaves)
        arrays = self._arrays(leaves, spec)
        prog = spec.program
        if prog is not None and prog.ready and prog.fallback is None:
            try:
                outs = prog(arrays, trusted=True)
            except InvalidArgumentError as e:  # bad data: name the op's line (the
                backends.name_op_line(e, spec.graph.nodes)  # program may be another trace's)
                raise
        elif (backend := backends.get(self.backend)).compiles:
            raw, arrays = arrays, [backends.frozen(a) for a in arrays]
            if prog is not None and not prog.ready and prog.fallback is None \
                    and backends.background_compile():
                # compile in the background; until it is done, the interpreter runs the
                # same graph (the first call returns at once, not after the compile)
                self._start_compile(spec, arrays)
                outs = self._interpret(spec, arrays, raw)
                self._compiled(spec)
            else:
                outs = backend.run_arrays(spec.graph, arrays)
                self._compiled(spec)
        else:
            outs = backends.run(spec.graph, dict(zip(spec.graph.inputs, arrays)), self.backend)
            outs = [self._owned(a, arrays) for a in outs]
        for v, k in self.writes:
            a = outs[k]
            if a.flags.writeable:
                a.setflags(write=False)
            v._value = a
            v._read_tensor = None
        if self.prints:
            _printing.run_prints(self.prints, outs)
        flat = [Tensor(outs[p], _own=True) if type(p) is int else p[1] for p in self.out_plan]
        return nest.pack_sequence_as(self.out_structure, flat)

    def _compiled(self, spec=None):
        spec = spec or self.spec
        prog = spec.program
        if prog is None or not prog.ready or spec.ready:
            return
        spec.times["compile"] = self.times["compile"] = prog.compile_seconds
        spec.ready = True
        how = {"compiled": "compiled by Numba", "disk": "loaded from the disk cache",
               "memory": "the same source was compiled already"}.get(prog.origin)
        distinct = len({k for k, _ in prog.kernels})
        _log("compile", f"{self.name}: {len(prog.kernels)} kernel calls "
             f"({distinct} distinct kernels), {how} in {prog.compile_seconds:.2f} s "
             f"[{self.cause}] -> {prog.path}")

    def _start_compile(self, spec, arrays):
        spec.program.compile_in_background(arrays)
        spec.thread = spec.program.compile_thread

    def _interpret(self, spec, arrays, raw):
        outs = spec.program.interpret(arrays)
        return [self._owned(np.asarray(a), raw) for a in outs]

    def _all_specs(self) -> list:
        return list(self._specs.values()) if self.symbolic else [self.spec]

    def wait(self, timeout=None) -> bool:
        """Wait for background compiles; True when the compiled programs are ready."""
        ready = True
        for spec in self._all_specs():
            if spec.program is None:
                continue
            ready = spec.program.wait(timeout) and ready
            self._compiled(spec)
        return ready

    @staticmethod
    def _owned(a, arrays):
        """An output of the interpret backend may be a fed array (or a view of one): a
        caller's writeable array is copied, never frozen or shared."""
        if not a.flags.writeable:
            return a
        for x in arrays:
            if x.flags.writeable and np.may_share_memory(a, x):
                return a.copy()
        return a

    # -- introspection ---------------------------------------------------------------
    def kernels(self) -> list:
        if self.program is not None:
            return list(self.program.kernels)
        if self.graph is None:
            return []
        from passes import kernels, is_fused

        out = []
        for k, n in enumerate(kernels(self.graph)):
            if is_fused(n):
                a = n.attr_dict
                ops = [b.op.name for b in a["body"].nodes]
                out.append((f"k{k}", f"{a['kind']}: " + ", ".join(ops)))
            else:
                out.append((f"k{k}", n.op.name))
        return out
