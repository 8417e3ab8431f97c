"""The Numba CPU backend: its lowering table, its programs and its runtime hooks.

The path of one op, ``jt.tanh(x)`` in a backward graph::

    tanh node  --passes.fuse-->      fused loop node (body: ..., tanh, ...)
               --schedule-->         Loop(i0, ..., Let(v7, "_vm.jt_tanh(x5)", "tanh"))
                                     in Kernel k0; Call(k0, ...) in the entry
               --numba_cpu.render--> for i0 in prange(d0): v7 = _vm.jt_tanh(x5)  # tanh
                                     in module jk_<hash of its text>; the entry module
                                     calls it: kcall6(kp, 0, k0, ...)
               --runtime-->          entry(kp, in0, ..., o0) compiled by Numba, each
                                     module cached on disk by its own content

- ``schedule.py`` (backend-neutral) builds the kernel IR from the fused graph, asking
  this module's :func:`lowering` which rule lowers each op.
- ``numba_cpu.py`` prints it as ``@njit`` kernels and entries (serial and ``prange``).
- ``kernel_table.py`` fills the entry's table of kernel addresses (``kcall.py``): from
  its typing when Numba compiles it, from a manifest when Numba loads it from disk.
- :class:`Program` runs a module's entry the way that measured fastest (loops serial or
  on threads, BLAS on one thread or all); ``runtime.py`` caches, compiles and falls back.

A graph that cannot be compiled runs on ``interpret`` with one warning naming the op.
"""

from __future__ import annotations

import os
import sys
import time
import warnings

import numpy as np

from .. import cache as _cache
from ..ir import LOWERING_CHECKS, OP_TABLE, Graph
from . import blas, compile_pool, kcall, kernel_table, numba_cpu
from . import runtime as _runtime
from .emit import Unsupported  # noqa: F401 - cpu.Unsupported, for callers
from .schedule import PARALLEL_MIN, schedule  # noqa: F401 - cpu.PARALLEL_MIN too

blas.limit_threads()  # numpy's BLAS on one thread, scipy's loaded (see blas.py)

# ---------------------------------------------------------------------------
# The lowering table: how each op reaches generated code. Ops with a rule of their own
# by name; the rest by what their record says (an alias, an elementwise op with its
# scalar expression, a reduction with its monoid, a value from the input types). An op
# that has none must say in its record why it runs on ``interpret`` only; the registry
# asks ``check_lowering`` for every op, at this module's import and at each later
# ``defop``, so an op without a rule can never reach a wrong code path.

_OP_RULES = {
    "fused": "fused",
    "const": "op_const",
    "fill": "op_fill",
    "reshape": "op_reshape",
    "transpose": "op_transpose",
    "broadcast_to": "op_broadcast_to",
    "strided_slice": "op_strided_slice",
    "matmul": "op_matmul",  # a GEMM call (kgemm.gemm, scipy's BLAS)
    "argmax": "op_argmax",
    "argmin": "op_argmin",
    "gather": "op_gather",
    "scatter_add": "op_scatter_add",
    "one_hot": "op_one_hot",
    "concat": "op_concat",
    "strided_slice_grad": "op_strided_slice_grad",
    "check_numerics": "op_check_numerics",
    "cumsum": "op_cumsum",
    "cumprod": "op_cumprod",
    "argsort": "op_argsort",
    # collectives: MPI_Allreduce / MPI_Bcast called from the kernel, GIL released
    "allreduce": "op_allreduce",
    "broadcast": "op_broadcast",
    # linear algebra: a loop over the batch calling Numba's np.linalg (LAPACK)
    "matrix_inverse": "op_matrix_inverse",
    "matrix_determinant": "op_matrix_determinant",
    "log_abs_det": "op_log_abs_det",
    "det_sign": "op_det_sign",
    "matrix_solve": "op_matrix_solve",
    "cholesky": "op_cholesky",
    # convolution: a direct loop nest or packed windows and a GEMM (schedule_window.py)
    "conv": "op_conv",
    "conv_backprop_input": "op_conv_backprop_input",
    "conv_backprop_filter": "op_conv_backprop_filter",
    # pooling: direct loop nests, channels innermost (schedule_pool.py)
    "max_pool": "op_max_pool", "max_pool_grad": "op_max_pool_grad",
    "max_pool_grad_grad": "op_max_pool_grad_grad", "avg_pool": "op_avg_pool",
    "avg_pool_grad": "op_avg_pool_grad",
}
def lowering(op) -> str | None:
    """The name of the ``_Gen`` method that lowers ``op``, or None (interpret only)."""
    rule = _OP_RULES.get(op.name)
    if rule is not None:
        return rule
    if op.interpret_only is not None:
        return None
    if op.view == "alias":
        return "alias"
    if op.kind == "elementwise" and op.scalar is not None:
        return "elementwise"
    if op.kind == "reduction" and op.monoid is not None:
        return "reduction"
    if op.from_types is not None:
        return "from_types"
    return None


def check_lowering(op) -> None:
    """Raise when ``op`` has no lowering here and does not say why it has none."""
    if lowering(op) is None and op.interpret_only is None:
        raise ValueError(
            f"op {op.name!r} (kind {op.kind!r}) has no lowering on the cpu backend: add a "
            "rule to the lowering table in jittape/compiler/backends/cpu.py, or declare in its "
            "record why it runs on interpret only (interpret_only='...')")


def _check_registry() -> None:
    for op in list(OP_TABLE.values()):
        check_lowering(op)
    if check_lowering not in LOWERING_CHECKS:
        LOWERING_CHECKS.append(check_lowering)


_check_registry()


_vm_cache: list = []


def _vm_version() -> str:
    if not _vm_cache:
        from . import vmath

        _vm_cache.append(vmath.VERSION)
    return _vm_cache[0]


# ---------------------------------------------------------------------------
# Compiled programs


def generate(graph: Graph) -> tuple[numba_cpu.Sources, list, list]:
    """The modules for ``graph`` (the entry's and one per kernel; ``str()`` of them is
    the golden text), the constant arrays its entry takes, and ``(kernel name,
    description)`` per kernel call."""
    mod, consts, kinfo = schedule(graph, lowering)
    return numba_cpu.render(mod, _vm_version()), consts, kinfo


# Threads for kernels with parallel loops: chosen by measuring (see Program._run_tuned).
def _threads_env():
    v = os.environ.get("JITTAPE_NUM_THREADS", "").strip()
    try:
        return int(v) if v else None
    except ValueError:
        warnings.warn(f"JITTAPE_NUM_THREADS={v!r} is not an integer; ignored", UserWarning,
                      stacklevel=2)
        return None


_THREADS_ENV = _threads_env()
RETUNE_CALLS = 2000
_TUNE_CALLS = 8
# The parallel variant of a program is compiled on this call (then the two are timed
# against each other), not on the first: the first call compiles the serial one only.
PARALLEL_AFTER = int(os.environ.get("JITTAPE_PARALLEL_AFTER", 20))


def _kp_type():
    """Numba's type of a kernel table (int64, 1-d, C), which every entry takes first."""
    from numba import types

    return types.Array(types.int64, 1, "C")


def _quiet_numba():
    """A context in which Numba's performance hints are not shown."""
    import numba.core.errors as ne

    ctx = warnings.catch_warnings()
    ctx.__enter__()
    warnings.simplefilter("ignore", ne.NumbaPerformanceWarning)
    warnings.simplefilter("ignore", ne.NumbaWarning)
    return ctx


class Program(_runtime.Executable):
    """A generated module's ``entry`` (and ``entry_par``, its loops on threads), called
    the way that measured fastest. Each entry function runs with its own table of
    kernel addresses (``fns``: name -> (dispatcher, table))."""

    def __init__(self, backend, graph, sources, paths, kmods, mod, consts, kinfo):
        super().__init__(backend, graph, str(sources), paths[0], sources.name, consts, kinfo)
        self.sources = sources
        self.paths = paths  # the entry module's, then each kernel module's
        self._set_modules(mod, kmods)
        self.par_ready = False
        self.par_compile_seconds = 0.0
        self.par_thread = None  # compiling entry_par in the background
        self.threads = None  # chosen thread count for the parallel loops
        self.choice = None  # chosen (loop threads, BLAS threads or None), see _run_tuned
        # a program that calls BLAS measures whether its matmuls are faster on one thread
        self.tunes_blas = (any(d.startswith("matmul") or "GEMM" in d for _, d in kinfo)
                           and blas.cpu_count() > 1 and not blas.kernel_threads_fixed())
        self.trials: list = []
        self.calls = 0
        self._bp = None  # the buffer table of the consts and the program's own slots

    def _set_modules(self, mod, kmods):
        self.entries = kernel_table.Entries(mod, kmods, self.path, len(self.kernels), _load)

    @property
    def entry(self):
        return self.entries.mod.entry

    @property
    def entry_par(self):  # loops on threads, when any loop is worth it
        return getattr(self.entries.mod, "entry_par", None)

    def _fn(self, fname: str, rest) -> tuple:
        """``(dispatcher, kp)`` of entry function ``fname``, compiled or loaded for the
        types of ``rest`` (the arguments after ``kp``)."""
        import numba

        sig = (_kp_type(),) + tuple(numba.typeof(a) for a in rest)
        ctx = _quiet_numba()
        try:
            return self.entries.get(fname, sig)
        finally:
            ctx.__exit__(None, None, None)

    def _rest(self, args, slots, outs) -> tuple:
        """The entry's arguments after ``kp``: the inputs, the buffer table (constants and
        ``slots``), the outputs."""
        if slots is self.slots:  # the program's own (made once): so is its table
            if self._bp is None:
                self._bp = kcall.fill_table([*self.consts, *slots])
            bp = self._bp
        else:  # a call's own slots (another thread holds the program's)
            bp = kcall.fill_table([*self.consts, *slots])
        return (*args, bp, *outs)

    def _run_fn(self, fname: str, rest) -> None:
        fn, kp = self.entries.fns.get(fname) or self._fn(fname, rest)
        fn(kp, *rest)

    # -- the runtime's hooks ---------------------------------------------------------
    def _invoke(self, args, slots, outs, mine):
        if mine and (self.entry_par is not None or self.tunes_blas):
            self._run_tuned(args, slots, outs)
        else:
            self._run_fn("entry", self._rest(args, slots, outs))

    def _compile(self, args, slots, outs):
        self._fn("entry", self._rest(args, slots, outs))

    def _state(self) -> tuple:
        """(variants, hits, misses) of the entries and kernels, then the kernels' alone
        (their misses are compiles, their hits loads from disk)."""
        entries = [self.entry] + ([self.entry_par] if self.entry_par is not None else [])
        kernels = self.entries.kernels()

        def count(ds):
            return (sum(len(d.overloads) for d in ds),
                    sum(sum(d.stats.cache_hits.values()) for d in ds),
                    sum(sum(d.stats.cache_misses.values()) for d in ds))

        e, k = count(entries), count(kernels)
        return (e[0] + k[0], e[1] + k[1], e[2] + k[2], k[2], k[1])

    def _note_origin(self, before: tuple) -> None:
        super()._note_origin(before)
        after = self._state()
        self.kernels_compiled = after[3] - before[3]
        self.kernels_from_disk = after[4] - before[4]
        self.backend.stats["kernels_compiled"] += self.kernels_compiled
        self.backend.stats["kernels_from_disk"] += self.kernels_from_disk

    def _reload(self):
        for name in [self.name] + [m for _, m, _ in self.sources.kernels]:
            sys.modules.pop(f"jittape._generated.{name}", None)
        _, paths, kmods, mod = _write_and_load(self.sources)
        self.paths, self.path = paths, paths[0]
        self._set_modules(mod, kmods)

    def warm(self, arrays):
        ctx = _quiet_numba()
        try:
            return super().warm(arrays)
        finally:
            ctx.__exit__(None, None, None)

    def wait(self, timeout=None) -> bool:
        if self.par_thread is not None:
            self.par_thread.join(timeout)
        return super().wait(timeout)

    def _run_tuned(self, args, slots, outs):
        """Run the program the way that measured fastest: its loops serial (``entry``) or
        on all threads (``entry_par``), and, when it calls BLAS, scipy's BLAS on all
        cores or on one.

        Threads are not always faster: a memory-bound loop gains nothing from a second
        thread, and on a machine whose other cores are busy a parallel loop waits for a
        thread the scheduler has not run yet (on the project's shared 2-core machine the
        chain backward at 8M took 9 ms serial, 16 ms on two threads when quiet and up to
        150 ms when not). BLAS's own threads suffer the same way: with one core busy
        elsewhere, the small MLP step's matmuls on two BLAS threads took 15 ms instead of
        0.06. So after a warm-up (which compiles ``entry_par``) the calls cycle through
        the ways, and the fastest (by lower quartile) is kept; it is measured again every
        ``RETUNE_CALLS`` calls. ``JITTAPE_NUM_THREADS`` fixes the loops' choice (1:
        serial; more: that many threads) and ``JITTAPE_KERNEL_BLAS_THREADS`` BLAS's.
        """
        import numba

        rest = self._rest(args, slots, outs)
        if _THREADS_ENV:
            n = max(1, min(_THREADS_ENV, numba.config.NUMBA_NUM_THREADS, blas.cpu_count()))
            if n == 1 or self.entry_par is None:
                self._run_fn("entry", rest)
            else:
                numba.set_num_threads(n)
                self._run_fn("entry_par", rest)
            return
        self.calls += 1
        if self.choice is not None and self.calls % RETUNE_CALLS == 0:
            self.choice, self.threads, self.trials = None, None, []
        if self.choice is not None:
            self._run_way(self.choice, rest)
            return
        most = min(numba.config.NUMBA_NUM_THREADS, blas.cpu_count())
        if self.entry_par is not None and not self.par_ready:
            if self.calls <= PARALLEL_AFTER or self.par_thread is not None:
                # a program that runs only a few times never pays for compiling its
                # parallel variant (about as long again as the serial one)
                self._run_way((1, self._blas_most), rest)
                return
            if background_compile():
                # compiled by another thread; the serial entry runs meanwhile
                self.par_thread = _runtime.in_background(
                    self._compile_par, (rest,), f"jittape-compile-{self.name}")
                self._run_way((1, self._blas_most), rest)
                return
            # this call compiles the parallel variant; it is not a measurement
            numba.set_num_threads(most)
            t0 = time.perf_counter()
            self._run_fn("entry_par", rest)
            dt = time.perf_counter() - t0
            self.par_compile_seconds = dt
            self.backend.stats["compile_seconds"] += dt
            self.par_ready = True
            return
        ways = self._ways(most)
        if self.calls <= 2:  # the first calls compile or load: not measurements
            self._run_way(ways[0], rest)
            return
        # each way runs a block of _TUNE_CALLS calls in a row, and the first two of a
        # block are not counted: the pool of the way before (OpenMP's threads spin for a
        # while after a parallel loop) would slow them down (measured: the large MLP
        # step's BLAS-on-two-threads calls took 9.5 ms instead of 3.3 right after a
        # parallel-loop call, and the tuner kept the 5.3 ms way)
        way = ways[len(self.trials) // _TUNE_CALLS]
        t0 = time.perf_counter()
        self._run_way(way, rest)
        self.trials.append((way, time.perf_counter() - t0))
        if len(self.trials) >= _TUNE_CALLS * len(ways):
            # each way's lower quartile, not its median: interference only adds time,
            # and a stretch of it in one way's block decided the LeNet step's choice
            # (parallel loops, 9.5 ms, over BLAS on two threads, 7.5 ms) in one of two
            # runs when the medians were compared
            low = {}
            for w in ways:
                ts = sorted([t for m, t in self.trials if m == w][2:])
                low[w] = ts[len(ts) // 4]
            # the first way (serial, BLAS on all cores) unless another is 10% faster
            best = min(ways, key=lambda w: low[w])
            self.choice = best if low[best] < 0.9 * low[ways[0]] else ways[0]
            self.threads = self.choice[0]

    @property
    def _blas_most(self):
        return blas.cpu_count() if self.tunes_blas else None

    def _ways(self, most) -> list:
        """(loop threads, BLAS threads or None) to try. Parallel loops go with one BLAS
        thread only: Numba's and OpenBLAS's pools together oversubscribe the cores (the
        large MLP step: 40-56 ms against 3.8 ms, every time)."""
        par = self.entry_par is not None and most > 1
        if not self.tunes_blas:
            return [(1, None)] + ([(most, None)] if par else [])
        return [(1, self._blas_most), (1, 1)] + ([(most, 1)] if par else [])

    def _run_way(self, way, rest):
        n, b = way
        if b is not None:
            blas.set_kernel_threads(b)
        if n == 1:
            self._run_fn("entry", rest)
        else:
            import numba

            numba.set_num_threads(n)
            self._run_fn("entry_par", rest)

    def _call_profiled(self, args) -> list:
        """A call while a ``jt.profiler.profile()`` is open: ``entry_prof`` reads the
        cycle counter around each kernel; the parallel variant when the program runs
        its loops on threads."""
        import numba

        from .. import profiler
        from . import clock

        with profiler.span(f"program {self.name[:10]}", "program"):
            with self.lock:
                if self.slots is None:
                    self.slots = [np.empty(n, d) for d, n in self.slot_specs]
                slots, outs = self.slots, self._outputs()
                par = self.entry_par is not None and (self.threads or 1) > 1
                if self.choice is not None and self.choice[1] is not None:
                    blas.set_kernel_threads(self.choice[1])
                stamps = np.zeros(2 * len(self.kernels), np.int64)
                rest = (*self._rest(args, slots, outs), stamps)
                fname = "entry_prof_par" if par else "entry_prof"
                if not clock.AVAILABLE:  # no cycle counter: the program's own entry
                    fname, rest, stamps = ("entry_par" if par else "entry"), rest[:-1], None
                elif fname not in self.entries.fns:
                    t0 = time.perf_counter()
                    self._fn(fname, rest)
                    profiler.note_compile(time.perf_counter() - t0, f"{self.name[:10]} {fname}")
                fn, kp = self._fn(fname, rest)
                if par:
                    numba.set_num_threads(self.threads)
                t0 = time.perf_counter_ns()
                fn(kp, *rest)
                t1 = time.perf_counter_ns()
            profiler.record_program(self.name[:10], self.kernels, t0, t1, stamps)
        return outs

    def _compile_par(self, rest):
        t0 = time.perf_counter()
        try:
            self._fn("entry_par", rest)
        except Exception:  # noqa: BLE001 - the serial entry stays in use
            return
        dt = time.perf_counter() - t0
        self.par_compile_seconds = dt
        self.backend.stats["compile_seconds"] += dt
        self.par_ready = True



def _write_and_load(sources) -> tuple:
    """Write the kernel modules, then the entry module that imports them, and load them
    all: ``(entry name, paths, kernel modules, entry module)``."""
    names = {sources.name} | {m for _, m, _ in sources.kernels}
    paths, kmods = [], []
    for _, _, text in sources.kernels:
        name, path, _ = _cache.write_module(text, "jk", keep=names)
        paths.append(path)
        kmods.append(_load(name, path))
    name, path, _ = _cache.write_module(sources.entry, keep=names)
    return name, [path] + paths, kmods, _load(name, path)


def _load(name: str, path: str):
    return _cache.load_module(f"jittape._generated.{name}", path)


class CpuBackend(_runtime.Backend):
    """Numba ``@njit`` kernels and one entry per graph, cached on disk."""

    name = "cpu"

    def pipeline(self) -> tuple:
        """The passes this backend runs before compiling (fusion, buffers not in place:
        an exactly aliased input and output make LLVM's vectorizer give up)."""
        import passes

        return passes.cleanup_pipeline() + (
            passes.configured(passes.fuse, matmul_epilogue=True),
            passes.configured(passes.plan_buffers, inplace=False),
        )

    def __init__(self):
        super().__init__()
        self.stats.update(kernels_compiled=0, kernels_from_disk=0)

    def build(self, graph: Graph) -> Program:
        sources, consts, kinfo = generate(graph)
        d = _cache.cache_dir()
        if not kernel_table.compiled_before(d, sources.name) and not \
                kernel_table.kernels_indexed(d, [(m, "k") for _, m, _ in sources.kernels]):
            compile_pool.warm_up()  # workers import Numba while this one loads and types
        _, paths, kmods, mod = _write_and_load(sources)
        return Program(self, graph, sources, paths, kmods, mod, consts, kinfo)

    def load_errors(self) -> tuple:
        import pickle

        import numba.core.errors as ne

        # an explicit compile (kernel_table.prepare) meets a damaged index as it is:
        # an UnpicklingError, not wrapped by a lazy call's dispatch
        return (ne.NumbaError, NotImplementedError, TypeError, AttributeError, KeyError,
                IndexError, EOFError, OSError, ValueError, ImportError, SyntaxError,
                pickle.UnpicklingError)

    def purge(self, prog) -> None:
        """The entry module and its kernel modules: which one's cache entry is damaged
        the error does not say."""
        for name in [prog.name] + [m for _, m, _ in prog.sources.kernels]:
            _cache.purge(name)


BACKEND = CpuBackend()
# the module's functions are the backend's (tests and tools call them by these names)
stats = BACKEND.stats
_BY_GRAPH, _BY_KEY = BACKEND.by_graph, BACKEND.by_key
program = BACKEND.executable
compile_program = BACKEND.compile_program
pipeline = BACKEND.pipeline
background_compile = _runtime.background_compile
CompileWarning = _runtime.CompileWarning


def run(graph: Graph, feeds: dict) -> list:
    """Outputs of ``graph`` for ``feeds`` (input id -> ndarray), compiled."""
    return BACKEND.run(graph, feeds)


def run_arrays(graph: Graph, arrays: list, feeds: dict | None = None) -> list:
    """:func:`run` with the input arrays in ``graph.inputs`` order."""
    return BACKEND.run_arrays(graph, arrays, feeds)
