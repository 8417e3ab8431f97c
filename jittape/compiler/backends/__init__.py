"""Backends run IR graphs.

- ``interpret`` (numpy, node by node) is the reference that every pass and every
  compiled backend is checked against.
- ``cpu`` (the default) generates Numba ``@njit`` kernels and one entry point per
  graph, cached in memory and on disk (``jittape.compiler.cache``).
"""

from __future__ import annotations

import os

from . import interpret
from .interpret import name_op_line  # noqa: F401 - bad data names the op's line

_NAMES = ("cpu", "interpret")
_PLANNED = ("cuda",)
_current = [os.environ.get("JITTAPE_BACKEND", "cpu")]
if _current[0] not in _NAMES:
    _current[0] = "cpu"


class _Interpret:
    """The reference backend behind the same interface: nothing to compile."""

    name = "interpret"
    compiles = False

    def pipeline(self) -> tuple:
        import passes

        return passes.cleanup_pipeline()

    def executable(self, graph):
        return None

    def run(self, graph, feeds: dict) -> list:
        return interpret.run(graph, feeds)

    def run_arrays(self, graph, arrays, feeds=None) -> list:
        return interpret.run(graph, feeds if feeds is not None
                             else dict(zip(graph.inputs, arrays)))


_INTERPRET = _Interpret()


def get(name: str | None = None):
    """The backend called ``name`` (default: the current one): a ``runtime.Backend``
    (``pipeline()``, ``executable(graph)``, ``run(graph, feeds)``, ``run_arrays``)."""
    name = name or _current[0]
    if name == "interpret":
        return _INTERPRET
    if name == "cpu":
        from . import cpu  # imports numba: only when first needed

        return cpu.BACKEND
    raise ValueError(f"unknown backend {name!r}; choose one of {list(_NAMES)}")


def check_backend(name: str) -> str:
    """``name`` if it is a backend that exists; a clear error otherwise."""
    if name in _NAMES:
        return name
    if name in _PLANNED:
        raise NotImplementedError(
            f"backend {name!r} is not built yet; choose one of {list(_NAMES)}")
    raise ValueError(f"unknown backend {name!r}; choose one of {list(_NAMES)}")


def set_backend(name: str) -> None:
    """Choose the backend that runs backward graphs (and, later, traced functions):
    ``"cpu"`` (compiled with Numba, the default) or ``"interpret"`` (numpy)."""
    _current[0] = check_backend(name)


def get_backend() -> str:
    return _current[0]


def preload() -> None:
    """``cpu`` is the default backend: load Numba, the vector math and scipy's BLAS at
    import (as TensorFlow and JAX load their compilers), so that a first step pays for
    compiling only, and numpy's BLAS has its one thread from the start (see
    ``blas.py``). ``JITTAPE_BACKEND=interpret`` skips it."""
    if _current[0] != "cpu":
        return
    try:
        from . import cpu, vmath  # noqa: F401
    except ImportError:  # the cpu backend reports it when it is first used
        pass


def pipeline(backend: str | None = None) -> tuple:
    """The passes a graph goes through before ``backend`` runs it."""
    return get(backend).pipeline()


def optimize(graph, pipeline) -> tuple:
    """``graph`` through ``pipeline``, with inputs nothing reads dropped (before the
    passes and, when they made more unused, after them; a buffer plan made by the last
    pass is made again then). Input ids are kept. Returns ``(graph, reports)``."""
    import passes
    from passes.prune import prune_unreachable

    graph = prune_unreachable(graph, drop_inputs=True).graph
    if not pipeline:
        return graph, []
    res = passes.run_pipeline(graph, pipeline)
    graph = res.graph
    read = set().union(*(n.inputs for n in graph.nodes), graph.outputs)
    if any(v not in read for v in graph.inputs):
        graph = prune_unreachable(graph, drop_inputs=True).graph
        if passes.pass_key(pipeline[-1])[0] == "plan_buffers":
            graph = pipeline[-1](graph).graph
    return graph, res.reports


def run(graph, feeds: dict, backend: str | None = None) -> list:
    """Run ``graph`` with ``feeds`` (input id -> ndarray); returns the output arrays."""
    return get(backend).run(graph, feeds)


def frozen(a):
    """``a`` as a compiled program takes it: C-contiguous and read-only."""
    from .runtime import frozen as _frozen

    return _frozen(a)


def background_compile() -> bool:
    """Whether compiling backends compile new programs in a background thread."""
    from .runtime import background_compile as _bc

    return _bc()
