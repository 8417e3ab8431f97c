"""The runtime every compiling backend shares: programs cached by graph and by structure,
compiled on the first call or in a background thread, buffer slots and output arrays
kept across calls, and the interpret fallback with one warning.

A backend plugs in with two subclasses:

- :class:`Executable` (one compiled graph): ``_invoke`` runs it on prepared arrays,
  ``_compile`` compiles it for their types without running it, ``_state`` says how
  much the backend's compiler holds for it (to tell a compile from a cache hit),
  ``_reload`` writes and loads its module again after a damaged cache entry was purged.
- :class:`Backend`: ``name``, ``pipeline()`` (the passes before it), ``build(graph)``
  (generate, write and load the module: an ``Executable``), ``load_errors()`` (what a
  damaged cache entry raises).

``jittape.function`` and ``autodiff.py`` (a tape's backward program) talk to these two only
(through ``jittape.compiler.backends``): nothing above this package names a backend.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time
import warnings
from collections import OrderedDict

import numpy as np

from ... import config as _config
from .. import profiler as _profiler
from ...errors import InvalidArgumentError
from ..ir import Graph
from . import interpret
from .emit import Unsupported


class CompileWarning(UserWarning):
    """A graph could not be compiled and runs on the interpret backend instead."""


# Output arrays at least this large are kept for reuse (below it numpy's own cache of
# small blocks is as fast); 0 turns reuse off.
REUSE_MIN_BYTES = int(os.environ.get("JITTAPE_REUSE_OUTPUTS_MIN", 1 << 16))


def background_compile() -> bool:
    """Whether a new program compiles in a background thread while the calls meanwhile
    run its graph on the interpreter (``JITTAPE_BACKGROUND_COMPILE``, default on; ``0``
    compiles on the first call, which then waits for it)."""
    return os.environ.get("JITTAPE_BACKGROUND_COMPILE", "1") not in ("0", "", "false")


def frozen(a: np.ndarray) -> np.ndarray:
    """``a`` C-contiguous and read-only (a read-only view of a caller's writeable array):
    compilers type read-only and writeable arrays apart, and one type per input means one
    compile, whichever kind of array a call passes."""
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
    if a.flags.writeable:
        a = a.view()
        a.flags.writeable = False
    return a


def _unheld(pool: list, k: int) -> bool:
    """Nobody but the pool holds ``pool[k]``: the only references are the pool's list
    and getrefcount's own argument."""
    return sys.getrefcount(pool[k]) <= 2


class Executable:
    """One compiled graph: call it with the input arrays, get the output arrays.

    Buffers of the buffer plan (intermediate values) persist across calls. Output
    arrays belong to the caller; a large output array of an earlier call that nobody
    holds any more (the training loop dropped last step's gradients) is written again
    instead of allocating a fresh one: a fresh 32 MB array costs page faults on first
    touch (the chain backward at 8M: 3 ms of its 7) and, with numpy's huge-page advice,
    sometimes a stall of 100+ ms in the kernel's memory compaction. At most two
    generations are kept per output (``JITTAPE_REUSE_OUTPUTS_MIN=0`` turns it off).
    """

    def __init__(self, backend: "Backend", graph: Graph, source: str, path: str, name: str,
                 consts, kinfo):
        self.backend = backend
        self.graph = graph
        self.source = source
        self.path = path
        self.name = name
        self.consts = consts
        self.kernels = kinfo  # (kernel name, description) per kernel call
        self.in_types = graph.input_types
        self.out_types = [graph.types()[o] for o in graph.outputs]
        plan = graph.buffers
        self.slot_specs = list(plan.slots) if plan is not None else []
        self.slots = None
        self.lock = threading.Lock()
        self.warm_lock = threading.Lock()  # held by the call that compiles it
        self.key = None  # the structural key it is cached under
        self.pool: list = [[] for _ in self.out_types]
        self.compile_thread = None  # compiling in the background
        self._plain = None
        self.ready = False
        self.compile_seconds = 0.0
        self.loaded_from_disk = False
        self.origin = None  # "compiled", "disk" or "memory" once it has run
        self.fallback = None  # the reason, once the program runs on interpret

    # -- what a backend provides -------------------------------------------------
    def _invoke(self, args, slots, outs, mine: bool) -> None:
        """Run the compiled program (``mine``: this call holds the program's lock, so it
        may tune; otherwise it runs the plain way)."""
        raise NotImplementedError

    def _compile(self, args, slots, outs) -> None:
        """Compile for the types of these inputs, buffer slots and outputs (and the
        program's constants)."""
        raise NotImplementedError

    def _state(self) -> tuple:
        """(compiled variants, cache hits, cache misses) of the backend's compiler."""
        return (0, 0, 0)

    def _reload(self) -> None:
        """Write and load the module again (its cache entry was purged)."""
        raise NotImplementedError

    def _call_profiled(self, args) -> list:
        """A call while ``jt.profiler.profile()`` is open (default: a plain call)."""
        with _profiler.span(f"program {self.name[:10]}", "program"):
            return self._call(args)

    # -- calls ---------------------------------------------------------------------
    def _args(self, arrays):
        args = []
        for a, t in zip(arrays, self.in_types):
            a = np.asarray(a)
            if a.dtype.name != t.dtype:
                a = a.astype(t.dtype)
            if not a.flags.c_contiguous:
                a = np.ascontiguousarray(a)
            if a.shape != t.shape:
                raise ValueError(f"input of shape {a.shape} where the graph expects {t}")
            args.append(frozen(a))
        return args

    def _outputs(self) -> list:
        outs = []
        for k, t in enumerate(self.out_types):
            pool = self.pool[k]
            arr = None
            for j in range(len(pool)):
                if _unheld(pool, j):
                    arr = pool[j]
                    break
            if arr is None:
                arr = np.empty(t.shape, t.dtype)
                if REUSE_MIN_BYTES and arr.nbytes >= REUSE_MIN_BYTES:
                    pool.append(arr)
                    if len(pool) > 2:
                        pool.pop(0)
            else:
                arr.setflags(write=True)  # a tensor froze it; nobody holds it now
            outs.append(arr)
        return outs

    def _fresh(self) -> tuple:
        """Slots and outputs of a call's own (another thread holds the program's)."""
        return ([np.empty(n, d) for d, n in self.slot_specs],
                [np.empty(t.shape, t.dtype) for t in self.out_types])

    def _call(self, args) -> list:
        mine = self.lock.acquire(blocking=False)
        try:
            if mine:
                if self.slots is None:
                    self.slots = [np.empty(n, d) for d, n in self.slot_specs]
                slots, outs = self.slots, self._outputs()
            else:
                slots, outs = self._fresh()
            self._invoke(args, slots, outs, mine)
            return outs
        finally:
            if mine:
                self.lock.release()

    def __call__(self, arrays, trusted: bool = False) -> list:
        """Outputs for ``arrays``. ``trusted``: the caller guarantees each array's dtype
        and shape (``jt.function`` keys its traces by them); only contiguity is checked."""
        args = [frozen(a) for a in arrays] if trusted else self._args(arrays)
        if _profiler.ACTIVE and self.ready:
            return self._call_profiled(args)
        return self._call(args)

    def plain_graph(self) -> Graph:
        """The graph without its buffer plan, for the interpreter (which would copy
        every planned value into its slot)."""
        if self._plain is None:
            import dataclasses

            self._plain = dataclasses.replace(self.graph, buffers=None)
        return self._plain

    def interpret(self, arrays) -> list:
        """The outputs from the interpreter (while the program compiles); the program
        may have been made for another graph of the same structure, whose value ids
        differ: its inputs are fed by position."""
        plain = self.plain_graph()
        return interpret.run(plain, dict(zip(plain.inputs, arrays)))

    # -- compiling -----------------------------------------------------------------
    def wait(self, timeout=None) -> bool:
        """Wait for this program's background compiles; True when it is ready."""
        if self.compile_thread is not None:
            self.compile_thread.join(timeout)
        return self.ready

    def _note_origin(self, before: tuple) -> None:
        stats = self.backend.stats
        after = self._state()
        if after[0] == before[0]:
            self.origin = "memory"  # the same module, already compiled for these types
            stats["memory_hits"] += 1
        elif after[2] == before[2] and after[1] > before[1]:
            self.origin = "disk"
            stats["disk_hits"] += 1
        else:
            self.origin = "compiled"
            stats["compiled"] += 1
        self.loaded_from_disk = self.origin == "disk"
        stats["compile_seconds"] += self.compile_seconds

    def compile_only(self, arrays) -> None:
        """Compile (or load from the disk cache) for the types of ``arrays``."""
        before = self._state()
        t0 = time.perf_counter()
        slots, outs = self._fresh()
        self._compile(self._args(arrays), slots, outs)
        self.compile_seconds = time.perf_counter() - t0
        self._note_origin(before)
        self.ready = True

    def warm(self, arrays) -> list:
        """First call: the backend compiles the module, loads it from its disk cache, or
        finds it compiled already in this process (another graph generated the same
        source: a new batch size, say)."""
        before = self._state()
        t0 = time.perf_counter()
        res = self(arrays)
        self.compile_seconds = time.perf_counter() - t0
        self._note_origin(before)
        self.ready = True
        if _profiler.ACTIVE:
            _profiler.note_compile(self.compile_seconds, self.name[:10])
        return res

    def compile_in_background(self, arrays) -> None:
        """Start compiling in another thread (once); calls meanwhile interpret."""
        with self.lock:
            if self.compile_thread is not None:
                return
            self.compile_thread = in_background(
                self.backend.compile_program, (self, list(arrays)),
                f"jittape-compile-{self.name}")


_BACKGROUND = threading.Lock()  # held by the one background compile that runs
_EXITING = [False]
_RUNNING: list = [None]  # the thread inside a background compile's target, if any
_RUNNING_LOCK = threading.Lock()


class Abandoned(BaseException):
    """Raised inside a background compile when the process exits (see
    :func:`in_background`). A BaseException, so that the handlers that turn a failed
    compile into an interpret fallback (and its warning) let it through."""


def _flush_pending() -> None:
    """A Python call: an exception set for this thread fires here, at the latest."""


def in_background(target, args, name) -> threading.Thread:
    """Run ``target(*args)`` (a compile) in a daemon thread, one such compile at a time.

    An exiting program does not wait for compiles whose results nobody will use (a
    script's last traces used to hold its exit for seconds, the cold compile of its
    step): those still waiting never start, and the one under way is abandoned. It
    is stopped by an exception raised in its thread (:class:`Abandoned`), which fires
    between two Python bytecodes, never inside a call into LLVM (a daemon thread left
    running inside LLVM while the process tears down could crash its exit), and is
    waited for until it has unwound (a few ms; one LLVM call at most). What it leaves
    on disk is consistent: every cache file is written under a temporary name and
    renamed when complete (``_files.write_atomic``, Numba's ``_open_for_write``), so
    a stop mid-write leaves at most a stray temporary file; Numba writes a function's
    index before its data file, and an index entry whose data file is missing is a
    miss that compiles again; a kernel table's manifest is written after its entry
    compiled, and an entry without one is compiled again."""

    def run():
        try:
            with _BACKGROUND:
                if _EXITING[0]:
                    return
                with _RUNNING_LOCK:
                    _RUNNING[0] = threading.current_thread()
                try:
                    target(*args)
                finally:
                    with _RUNNING_LOCK:
                        _RUNNING[0] = None
                    _flush_pending()  # an Abandoned set just before fires in this try
        except Abandoned:
            pass

    t = threading.Thread(target=run, name=name, daemon=True)
    t.start()
    return t


@atexit.register
def _abandon_background_compile() -> None:
    import ctypes

    _EXITING[0] = True
    with _RUNNING_LOCK:
        t = _RUNNING[0]
        if t is not None and t.ident is not None:
            set_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc
            set_exc.argtypes = (ctypes.c_ulong, ctypes.py_object)
            set_exc(t.ident, Abandoned)
    # the compile unwinds (it may first finish the LLVM call it is in); a compile that
    # does not stop in time is left as a daemon thread, as before
    if _BACKGROUND.acquire(timeout=5.0):
        _BACKGROUND.release()


def _after_fork_in_child() -> None:
    """A child forked while a background compile ran has no such thread: its exit must
    not wait for the parent's."""
    global _BACKGROUND, _RUNNING_LOCK
    _BACKGROUND, _RUNNING_LOCK = threading.Lock(), threading.Lock()
    _RUNNING[0] = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class Backend:
    """A compiling backend: its pipeline, its programs and their fallback."""

    name = "?"
    compiles = True

    def __init__(self):
        self.stats = {"graphs": 0, "compiled": 0, "disk_hits": 0, "memory_hits": 0,
                      "fallbacks": 0, "compile_seconds": 0.0}
        self.lock = threading.RLock()
        # bounded by jt.config.set_cache_limits(programs=...) (JITTAPE_MAX_PROGRAMS)
        self.by_graph: "OrderedDict[int, tuple]" = OrderedDict()  # id(graph) -> (g, prog)
        self.by_key: "OrderedDict[str, Executable]" = OrderedDict()  # structural key -> prog
        self.failed: "OrderedDict[int, tuple]" = OrderedDict()  # id(graph) -> (g, why)
        self.warned: set = set()
        self.module_locks: dict = {}
        _config.on_cache_limit_change("programs", self._trim)

    # -- what a backend provides -------------------------------------------------
    def pipeline(self) -> tuple:
        raise NotImplementedError

    def build(self, graph: Graph) -> Executable:
        """Generate, write and load the module for ``graph``."""
        raise NotImplementedError

    def load_errors(self) -> tuple:
        """Exceptions that a damaged on-disk cache entry raises when it is loaded."""
        return ()

    def purge(self, prog: Executable) -> None:
        """Drop ``prog``'s on-disk cache entry (it raised on loading)."""

    # -- programs ------------------------------------------------------------------
    def executable(self, graph: Graph) -> Executable:
        """The program for ``graph`` (generated, written and loaded on a miss; it
        compiles on its first call)."""
        with self.lock:
            hit = self.by_graph.get(id(graph))
            if hit is not None and hit[0] is graph:
                self.by_graph.move_to_end(id(graph))
                if hit[1].key in self.by_key:  # used: both bounds keep it
                    self.by_key.move_to_end(hit[1].key)
                return hit[1]
            key = graph.structural_key()
            prog = self.by_key.get(key)
            if prog is None:
                self.stats["graphs"] += 1
                prog = self.build(graph)
                prog.key = key
                self.by_key[key] = prog
                _config.evict(self.by_key, "programs")
            else:
                self.by_key.move_to_end(key)
            self.by_graph[id(graph)] = (graph, prog)
            _config.evict(self.by_graph, "programs")
            return prog

    def _trim(self) -> None:
        """Drop the least recently used programs beyond a bound just lowered."""
        with self.lock:
            for c in (self.by_key, self.by_graph, self.failed):
                _config.evict(c, "programs")

    def _module_lock(self, name: str) -> threading.Lock:
        with self.lock:
            lock = self.module_locks.get(name)
            if lock is None:
                if len(self.module_locks) > 4096:
                    self.module_locks.clear()
                lock = self.module_locks[name] = threading.Lock()
            return lock

    def compile_program(self, prog: Executable, arrays) -> None:
        """Compile (or load from the disk cache) ``prog`` for the types of ``arrays``,
        without running it. A failure makes the program run on ``interpret``, with one
        warning. Safe to call from another thread (``jt.function`` compiles in the
        background while the first calls run on the interpreter)."""
        with self._module_lock(prog.name):  # programs of one source compile it once
            try:
                try:
                    prog.compile_only(arrays)
                except self.load_errors():
                    self._reload(prog)  # a damaged on-disk entry: compile afresh
                    prog.compile_only(arrays)
            except Exception as e:  # noqa: BLE001 - never a wrong answer: interpret instead
                self.fall_back(prog.graph, prog, e)

    def _reload(self, prog: Executable) -> None:
        with self.lock:
            self.purge(prog)
            prog._reload()

    # -- running -------------------------------------------------------------------
    def run(self, graph: Graph, feeds: dict) -> list:
        """Outputs of ``graph`` for ``feeds`` (input id -> ndarray), compiled."""
        if not graph.outputs:
            return []
        return self.run_arrays(graph, [feeds[v] for v in graph.inputs], feeds)

    def run_arrays(self, graph: Graph, arrays: list, feeds: dict | None = None) -> list:
        """:meth:`run` with the input arrays in ``graph.inputs`` order."""
        if not graph.outputs:
            return []
        if feeds is None:
            feeds = dict(zip(graph.inputs, arrays))
        failed = self.failed.get(id(graph))
        if failed is not None and failed[0] is graph:
            return interpret.run(graph, feeds)
        prog = None
        try:
            prog = self.executable(graph)
            if prog.fallback is not None:
                return interpret.run(graph, feeds)
            if prog.ready:
                return prog(arrays)
            if _EXITING[0]:
                # after the exit abandoned the background compile (an atexit handler
                # that runs a step, say): no new compile starts, Numba's locks may be
                # the abandoned compile's
                return prog.interpret(arrays)
            if background_compile():
                # compile in another thread; this call and the next ones run on the
                # interpreter until the compiled program is ready
                prog.compile_in_background(arrays)
                return prog.interpret(arrays)
            with prog.warm_lock:  # threads meeting a new program at once: one compiles
                if not prog.ready and prog.fallback is None:
                    return self._warm(graph, prog, arrays)
            if prog.fallback is not None:
                return interpret.run(graph, feeds)
            return prog(arrays)
        except InvalidArgumentError as e:  # bad data: the op's line, as eager names it
            interpret.name_op_line(e, graph.nodes)
            raise
        except Exception as e:  # noqa: BLE001 - never a wrong answer: interpret instead
            if prog is None:
                with self.lock:
                    self.failed[id(graph)] = (graph, repr(e))
                    _config.evict(self.failed, "programs")
            self.fall_back(graph, prog, e)
            return interpret.run(graph, feeds)

    def _warm(self, graph, prog, arrays) -> list:
        try:
            return prog.warm(arrays)
        except InvalidArgumentError:
            prog.ready = True  # compiled; the data was bad (check_numerics, an index)
            raise
        except self.load_errors():
            pass
        # a damaged on-disk entry raises on every load: drop it, compile afresh
        self._reload(prog)
        try:
            return prog.warm(arrays)
        except InvalidArgumentError:
            prog.ready = True
            raise
        except Exception as e:  # noqa: BLE001 - before a waiting thread retries
            self.fall_back(graph, prog, e)
            return interpret.run(graph, dict(zip(graph.inputs, arrays)))

    # -- falling back ---------------------------------------------------------------
    def _describe_failure(self, prog: Executable | None, err: BaseException) -> str:
        if isinstance(err, Unsupported):
            return f"op {err.op!r}: {err}"
        text = str(err)
        if prog is not None:
            for name, desc in prog.kernels:
                # k3( and .k3 name it in a traceback, " k3," in a kcall's arguments
                if any(f in text for f in (f"{name}(", f".{name}", f" {name} ", f" {name},")):
                    return f"kernel {name} ({desc}): {text.splitlines()[0]}"
        first = text.strip().splitlines()[0] if text.strip() else type(err).__name__
        return f"{type(err).__name__}: {first}"

    def fall_back(self, graph: Graph, prog, err) -> None:
        """Mark ``prog`` (when there is one) to run on ``interpret``; warn once per graph
        name and reason."""
        why = self._describe_failure(prog, err)
        self.stats["fallbacks"] += 1
        if prog is not None:
            prog.fallback = why
        key = (graph.name, why)
        if key not in self.warned:
            self.warned.add(key)
            warnings.warn(
                f"jittape: the {self.name} backend could not compile graph {graph.name!r} "
                f"({why}); it runs on the interpret backend instead",
                CompileWarning,
                stacklevel=4,
            )
