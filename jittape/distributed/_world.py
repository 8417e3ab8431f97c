"""The MPI world of a job: ranks, the communicator, and what keeps a job from hanging.

``init()`` makes one :class:`MPIWorld` per process and puts it where the collective
ops find it (``ops.collective.WORLD``), fills the tables the compiled kernels call
MPI through (``backends.collective``), caps this rank's threads, and installs:

- an exception hook: an uncaught exception on one rank prints its traceback and
  ends the whole job (``MPI_Abort``), instead of leaving the other ranks waiting in
  their next collective forever (MPI_NOTES.md: they do);
- a watchdog: every collective step is armed with a deadline (``timeout``); a step
  that has not completed by then names this rank and the step and aborts the job
  (MPI itself never times out). The collectives run with the GIL released (mpi4py's
  and the compiled kernels'), so the watchdog's thread runs while a step waits.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
import time

import numpy as np

from ..compiler.backends import blas, collective as _ctables
from ..ops import collective as _coll

DEFAULT_TIMEOUT = 300.0  # seconds; JITTAPE_COLLECTIVE_TIMEOUT or init(timeout=)
ABORT_CODE = 134  # the job's exit status when a rank aborts it


class LayoutError(ValueError):
    """The ranks of a job disagree on what they train: variables or collectives."""


def _mpi():
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise ImportError(
            "jittape.distributed needs mpi4py and an MPI library: pip install "
            "'jittape[mpi]' on a machine without MPI (mpi4py and MPICH's wheel), or "
            f"pip install mpi4py on a cluster that has its own MPI ({e})") from e
    return MPI


_MPI_TYPES = {"float32": "FLOAT", "float64": "DOUBLE", "int32": "INT32_T",
              "int64": "INT64_T"}


def _env_float(name, default):
    v = os.environ.get(name)
    if not v:
        return default
    try:
        return float(v)
    except ValueError:
        raise ValueError(f"{name}={v!r} is not a number of seconds") from None


class MPIWorld:
    """The job's communicator and this rank's place in it."""

    def __init__(self, timeout=None, threads_per_rank=None):
        MPI = self.MPI = _mpi()
        self.comm = MPI.COMM_WORLD.Dup()  # the job's own: no clash with user messages
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        local = self.comm.Split_type(MPI.COMM_TYPE_SHARED, key=self.rank)
        self.local_rank, self.local_size = local.Get_rank(), local.Get_size()
        local.Free()
        self.timeout = float(timeout if timeout is not None else _env_float(
            "JITTAPE_COLLECTIVE_TIMEOUT", DEFAULT_TIMEOUT))
        if self.timeout <= 0:
            raise ValueError(f"jittape.distributed: timeout must be positive, got {timeout}")
        self.step = 0  # collective steps this rank has started
        self._depth = 0
        self._armed = None  # (deadline, step, what) while a step runs
        self._checked: set = set()  # layouts all ranks agreed on
        self._aborting = False
        self.threads = self._cap_threads(threads_per_rank)
        self._fill_tables()
        self._watchdog = threading.Thread(target=self._watch, name="jittape-watchdog",
                                          daemon=True)
        self._watchdog.start()

    # -- threads -------------------------------------------------------------------
    def _cap_threads(self, n):
        if n is None:
            env = os.environ.get("JITTAPE_THREADS_PER_RANK")
            n = int(env) if env else max(1, blas.cpu_count() // self.local_size)
        n = int(n)
        if n < 1:
            raise ValueError(f"jittape.distributed: threads_per_rank must be >= 1, got {n}")
        if self.local_size > 1 or n < blas.cpu_count():
            blas.cap_threads(n)
        return n

    # -- the compiled kernels' tables ------------------------------------------------
    def _fill_tables(self):
        MPI = self.MPI
        try:
            lib = ctypes.CDLL(MPI.__file__)  # its dependencies hold the MPI library
            allreduce = ctypes.cast(lib.MPI_Allreduce, ctypes.c_void_p).value
            bcast = ctypes.cast(lib.MPI_Bcast, ctypes.c_void_p).value
        except (OSError, AttributeError):
            allreduce = bcast = 0
        self.compiled_collectives = bool(allreduce and bcast)
        comm, op = MPI._handleof(self.comm), MPI._handleof(MPI.SUM)
        for dt, name in _MPI_TYPES.items():
            if self.compiled_collectives:
                _ctables.fill(dt, allreduce, MPI._handleof(getattr(MPI, name)), op, comm,
                              self.size, bcast, int(MPI.IN_PLACE))
            else:  # ranks > 1 and no address: the kernels raise (never a silent copy)
                _ctables.fill(dt, 0, 0, 0, 0, self.size, 0, 0)

    # -- the watchdog -------------------------------------------------------------
    def _watch(self):
        while True:
            time.sleep(min(1.0, self.timeout / 4))
            armed = self._armed
            if armed is not None and time.monotonic() > armed[0] and not self._aborting:
                self.abort(f"{armed[2]} at step {armed[1]} did not complete within "
                           f"{self.timeout:g} s: another rank is stuck, or stopped without "
                           "ending the job (jittape.distributed timeout; "
                           "JITTAPE_COLLECTIVE_TIMEOUT sets it)")

    def abort(self, why: str, code: int = ABORT_CODE):
        """End the whole job: name this rank and why on stderr, then ``MPI_Abort``."""
        self._aborting = True
        try:
            sys.stderr.write(f"jittape.distributed: rank {self.rank} of {self.size}: {why}; "
                             "aborting the job\n")
            sys.stderr.flush()
        finally:
            self.comm.Abort(code)

    class _Guard:
        __slots__ = ("world", "what", "counts")

        def __init__(self, world, what, counts):
            self.world, self.what, self.counts = world, what, counts

        def __enter__(self):
            w = self.world
            w._depth += 1
            if w._depth == 1:
                if self.counts:
                    w.step += 1
                w._armed = (time.monotonic() + w.timeout, w.step + (not self.counts),
                            self.what)

        def __exit__(self, *exc):
            w = self.world
            w._depth -= 1
            if w._depth == 0:
                w._armed = None

    def guard(self, what: str, counts: bool = True):
        """A context in which a collective step runs with the watchdog's deadline;
        ``counts``: it is a step of its own (a check before a step is not)."""
        return self._Guard(self, what, counts)

    # -- the collectives the ops call (eagerly, and on the interpret backend) ------------
    def allreduce(self, x: np.ndarray, average: bool) -> np.ndarray:
        out = np.array(x, copy=True)
        if x.size:
            with self.guard(f"allreduce of {x.dtype}[{x.size}]"):
                self.comm.Allreduce(self.MPI.IN_PLACE, out, op=self.MPI.SUM)
        if average and self.size > 1:
            np.divide(out, self.size, out=out, casting="unsafe")
        return out

    def broadcast(self, x: np.ndarray, root: int) -> np.ndarray:
        if not 0 <= root < self.size:
            raise ValueError(f"broadcast: root {root} is not a rank of this job "
                             f"(ranks 0..{self.size - 1})")
        out = np.array(x, copy=True)
        if out.size:
            with self.guard(f"broadcast of {x.dtype}[{x.size}] from rank {root}"):
                self.comm.Bcast(out, root=root)
        return out

    # -- steps of compiled functions ------------------------------------------------
    def run_step(self, cf, run, leaves):
        if not getattr(cf, "_layout_checked", False):
            self.check_layout(describe_function(cf), f"jt.function {cf.name!r}")
            cf._layout_checked = True
        with self.guard(f"jt.function {cf.name!r}"):
            return run(leaves)

    def check_layout(self, desc, what: str) -> None:
        """All ranks compare ``desc`` (their variables and collectives); a difference
        raises :class:`LayoutError` on every rank, naming the first one."""
        with self.guard(f"the layout check of {what}", counts=False):
            descs = self.comm.allgather(desc)
        for r, d in enumerate(descs):
            if d != descs[0]:
                raise LayoutError(f"jittape.distributed: the ranks of this job disagree on "
                                  f"{what}: " + _first_difference(descs[0], d, r))

    def barrier(self):
        with self.guard("barrier"):
            self.comm.Barrier()


def describe_function(cf) -> dict:
    """What every rank must agree on for a traced function: its variables (name, shape,
    dtype, in trace order) and its collectives (op, dtype, shape, attributes)."""
    variables = [(src[1]._label, _shape(src[1].shape), src[1].dtype.name)
                 for src in cf._source.values() if src[0] == "var"]
    colls = [(n.op.name, n.types[0].dtype, _shape(n.types[0].shape),
              tuple((k, str(v)) for k, v in n.attrs)) for n in cf.collectives]
    return {"variables": variables, "collectives": colls}


def _shape(shape) -> tuple:
    return tuple(d if isinstance(d, int) else str(d) for d in shape)


def _fmt(entry) -> str:
    if len(entry) == 3 and isinstance(entry[0], str) and isinstance(entry[1], tuple):
        name, shape, dtype = entry  # a variable
        return f"{name!r} {dtype}[{','.join(map(str, shape))}]"
    if len(entry) == 4:  # a collective
        op, dtype, shape, attrs = entry
        a = ", ".join(f"{k}={v}" for k, v in attrs)
        return f"{op} of {dtype}[{','.join(map(str, shape))}]" + (f" ({a})" if a else "")
    return repr(entry)


def _first_difference(a: dict, b: dict, rank: int) -> str:
    for key in a:
        xs, ys = a[key], b.get(key, [])
        noun = key[:-1]
        for k, (x, y) in enumerate(zip(xs, ys)):
            if x != y:
                return (f"{noun} {k}: rank 0 has {_fmt(x)}, rank {rank} has {_fmt(y)}")
        if len(xs) != len(ys):
            more, fewer = (0, rank) if len(xs) > len(ys) else (rank, 0)
            extra = (xs if len(xs) > len(ys) else ys)[min(len(xs), len(ys))]
            return (f"rank {more} has {max(len(xs), len(ys))} {key} and rank {fewer} "
                    f"{min(len(xs), len(ys))}: the first one rank {fewer} lacks is "
                    f"{_fmt(extra)}")
    return f"rank {rank} differs from rank 0"


# ---------------------------------------------------------------------------
# This process's world (jittape.distributed's init, is_initialized, set_timeout)


def init(timeout: float | None = None, threads_per_rank: int | None = None) -> None:
    """Join the MPI job this process was started in (``mpiexec -n N``; a process started
    alone is a job of one rank). Calling it again does nothing.

    ``timeout``: seconds a collective step may take before the job is aborted (default
    ``JITTAPE_COLLECTIVE_TIMEOUT`` or 300). ``threads_per_rank``: threads for this
    rank's compiled loops and BLAS (default ``JITTAPE_THREADS_PER_RANK``, or the
    machine's cores divided by its ranks)."""
    if is_initialized():
        if timeout is not None:
            set_timeout(timeout)
        return
    world = MPIWorld(timeout, threads_per_rank)
    _coll.WORLD[0] = world
    _install_excepthook(world)


def is_initialized() -> bool:
    return isinstance(_coll.WORLD[0], MPIWorld)


def _the_world() -> MPIWorld:
    if not is_initialized():
        init()
    return _coll.WORLD[0]


def set_timeout(seconds: float) -> None:
    """Seconds a collective step may take before the job is aborted."""
    seconds = float(seconds)
    if seconds <= 0:
        raise ValueError(f"jittape.distributed: timeout must be positive, got {seconds}")
    _the_world().timeout = seconds


def _install_excepthook(world) -> None:
    previous = sys.excepthook

    def hook(kind, value, tb):
        try:
            previous(kind, value, tb)
        finally:
            if world.size > 1 and not world._aborting:
                world.abort(f"uncaught {kind.__name__} (traceback above)",
                            code=1)

    sys.excepthook = hook
