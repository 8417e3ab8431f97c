"""The pointer table of a generated entry, and the manifest that refills it.

An entry calls its kernels through ``kcall<n>(kp, SLOT, ...)`` (``kcall.py``): ``kp``
holds one kernel address per call site. When the entry is compiled, its typing says
which kernel, for which argument types, each slot holds; that is written down as a
manifest, one per (entry module, entry function, entry signature), beside Numba's cache
files of the module. When Numba serves the entry from its disk cache nothing is typed,
and the manifest is what fills the table. Without a readable manifest the entry never
runs: its cache is flushed and it is compiled again (:class:`Stale`).

A :class:`Table` keeps the kernel dispatchers alive: the addresses belong to their
libraries. :class:`Entries` holds a loaded entry module's functions, each with its table.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import sys

import numpy as np

from ... import _files
from . import compile_pool, kcall

_FORMAT = 1  # the manifest's layout; part of its content, with Numba's version


class Stale(Exception):
    """An entry loaded from Numba's disk cache that has no usable manifest."""


class Table:
    """``kp`` (int64, one address per slot) and the dispatchers it points into."""

    def __init__(self, slots: dict):
        self.slots = slots  # slot -> (dispatcher, argument types)
        compile_pool.compile_kernels(slots.values())
        self.kp = np.zeros(max(slots) + 1 if slots else 1, np.int64)
        for s, (disp, argtypes) in slots.items():
            self.kp[s] = kcall.kernel_address(disp, argtypes)
        self.keep = [d for d, _ in slots.values()]


def compiled_before(cache_dir: str, module: str) -> bool:
    """Whether an entry of ``module`` was compiled before (it left a manifest)."""
    try:
        names = os.listdir(os.path.join(cache_dir, "__pycache__"))
    except OSError:
        return False
    return any(n.startswith(module + ".") and n.endswith(".kman") for n in names)


def kernels_indexed(cache_dir: str, functions) -> bool:
    """Whether each ``(kernel module, function)`` has a Numba cache index on disk: some
    process compiled it before, and it loads from there (nothing to compile early)."""
    try:
        names = os.listdir(os.path.join(cache_dir, "__pycache__"))
    except OSError:
        return False
    indexed = {n.split("-")[0] for n in names if n.endswith(".nbi")}  # "<module>.<fn>"
    return all(f"{m}.{f}" in indexed for m, f in functions)


def _kernels_cached(entry, cache_dir: str) -> bool:
    """:func:`kernels_indexed` for the kernels ``entry`` calls: the names its code
    reads (the module imports ``k_par`` beside ``k`` for ``entry_par``; a serial entry
    must not wait for parallel variants nobody compiled)."""
    g = entry.py_func.__globals__
    kernels = [g[n] for n in entry.py_func.__code__.co_names if n in g]
    return kernels_indexed(cache_dir, [
        (v.py_func.__module__.rsplit(".", 1)[1], v.py_func.__name__) for v in kernels
        if getattr(getattr(v, "py_func", None), "__module__", "").startswith(
            "jittape._generated.jk_")])


def manifest_path(cache_dir: str, module: str, fname: str, sig: tuple) -> str:
    """The manifest's file: the key holds the full signature (dtypes, layouts, readonly
    flags): one entry compiled for other argument types calls other kernel variants."""
    import numba

    key = hashlib.sha256(f"{numba.__version__} {sig!r}".encode()).hexdigest()[:16]
    return os.path.join(cache_dir, "__pycache__", f"{module}.{fname}.{key}.kman")


def _write(path: str, slots: dict) -> None:
    import numba

    man = {s: (d.py_func.__module__, d.py_func.__name__, at) for s, (d, at) in slots.items()}
    data = pickle.dumps((_FORMAT, numba.__version__, man))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    _files.write_atomic(path, data)  # a reader sees the whole manifest or none


def _read(path: str):
    """The manifest's slots (dispatchers found in the loaded kernel modules), or None:
    missing, unreadable, of another format or Numba, or naming a module not loaded."""
    import numba

    try:
        with open(path, "rb") as f:
            fmt, version, man = pickle.load(f)
        if fmt != _FORMAT or version != numba.__version__:
            return None
        return {s: (getattr(sys.modules[m], fn), tuple(at)) for s, (m, fn, at) in man.items()}
    except Exception:  # noqa: BLE001 - any damage means: compile again
        return None


def prepare(entry, sig: tuple, cache_dir: str, module: str, calls: int) -> Table:
    """Compile ``entry`` (a dispatcher) for ``sig`` or load it from the disk cache, and
    its table of ``calls`` slots. Raises :class:`Stale` when Numba served it from disk
    and no manifest says what all its slots hold (the caller flushes the cache and
    loads a fresh dispatcher). A table made once is kept on the dispatcher."""
    tables = entry.__dict__.setdefault("_jittape_tables", {})
    table = tables.get(sig)
    if table is not None:
        return table
    fname = entry.py_func.__name__
    path = manifest_path(cache_dir, module, fname, sig)
    hits = sum(entry.stats.cache_hits.values())
    had = sig in entry.overloads
    early = None
    if not had and not os.path.exists(path) and not _kernels_cached(entry, cache_dir):
        # a new entry: its kernels start compiling (in the workers) while it compiles
        try:
            early = compile_pool.start(kcall.typed_slots(entry, sig).values())
        except Exception:  # noqa: BLE001 - typing alone failed: the usual order then
            pass
    with entry_opt_level():
        entry.compile(sig)
    if early is not None:
        early.finish()
    if had or sum(entry.stats.cache_hits.values()) > hits:  # not typed now
        slots = _read(path)
        if slots is None or set(slots) != set(range(calls)):
            raise Stale(f"{module}.{fname}: loaded from Numba's cache without a manifest")
    else:
        slots = kcall.slots(entry.overloads[sig])
        if set(slots) != set(range(calls)):  # never run with a slot left at 0
            raise RuntimeError(f"{module}.{fname}: the compiled entry's kernel calls are "
                               f"slots {sorted(slots)}, not 0..{calls - 1}")
        _write(path, slots)
    table = tables[sig] = Table(slots)
    return table


ENTRY_OPT = int(os.environ.get("JITTAPE_ENTRY_OPT", "1"))


class entry_opt_level:  # noqa: N801 - a context manager
    """LLVM's optimization level for an entry's compile: ``JITTAPE_ENTRY_OPT`` (default
    1; Numba's is 3). An entry is glue (dims, views, calls through the table), which
    -O1 leaves as fast (the MLP steps' times did not move) and compiles sooner (the large
    Adam step's new entry: 0.75 -> 0.68 s). Numba reads ``config.OPT`` when it builds a
    pass manager, so it is set for this compile only, under Numba's compiler lock: no
    kernel compiles meanwhile."""

    def __enter__(self):
        from numba.core import config
        from numba.core.compiler_lock import global_compiler_lock

        self.lock = global_compiler_lock
        self.lock.acquire()
        self.saved = config.OPT
        level = getattr(config, "_OptLevel", None)  # Numba's own type for it (0.68)
        if level is not None:
            config.OPT = level(ENTRY_OPT)
        return self

    def __exit__(self, *exc):
        from numba.core import config

        config.OPT = self.saved
        self.lock.release()
        return False


def flush(entry) -> None:
    """Drop ``entry``'s overloads from Numba's disk cache (the next load compiles)."""
    cache = getattr(entry, "_cache", None)
    if cache is not None:
        cache.flush()


class Entries:
    """The functions of a loaded entry module (``entry``, ``entry_par``, ``entry_prof``,
    ``entry_prof_par``), each ready with its own table once asked for (``fns``: name ->
    (dispatcher, kp)); ``kmods``: the kernel modules it imports. ``load(name, path)``
    imports a module afresh once ``sys.modules`` no longer holds it."""

    def __init__(self, mod, kmods, path: str, calls: int, load):
        self.mod, self.kmods, self.path, self.calls, self.load = mod, kmods, path, calls, load
        self.name = os.path.basename(path)[:-3]
        self.fns: dict = {}
        self.tables: dict = {}  # name -> Table: keeps the kernels' dispatchers alive

    def get(self, fname: str, sig: tuple) -> tuple:
        """``(dispatcher, kp)`` of ``fname`` compiled or loaded for ``sig``."""
        got = self.fns.get(fname)
        if got is not None:
            return got
        where = (os.path.dirname(self.path), self.name, self.calls)
        fn = getattr(self.mod, fname)
        try:
            table = prepare(fn, sig, *where)
        except Stale:
            # served from Numba's disk cache with no manifest to fill its table: never
            # run it so; drop its cache, compile a fresh dispatcher (the module again)
            flush(fn)
            sys.modules.pop(f"jittape._generated.{self.name}", None)
            self.mod, self.fns, self.tables = self.load(self.name, self.path), {}, {}
            fn = getattr(self.mod, fname)
            table = prepare(fn, sig, *where)
        got = self.fns[fname] = (fn, table.kp)
        self.tables[fname] = table
        return got

    def kernels(self) -> list:
        """The kernel dispatchers (``k``, and ``k_par`` where there is one)."""
        out = []
        for m in self.kmods:
            out += [m.k] + ([m.k_par] if hasattr(m, "k_par") else [])
        return out
