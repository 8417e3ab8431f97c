"""Backends run IR graphs. ``interpret`` (numpy, node by node) is the reference
that every pass and every compiled backend is checked against."""

from __future__ import annotations

from . import interpret

_BACKENDS = {"interpret": interpret}
_PLANNED = ("cpu", "cuda")
_current = ["interpret"]


def set_backend(name: str) -> None:
    """Choose the backend that runs backward graphs (and, later, traced functions)."""
    if name in _BACKENDS:
        _current[0] = name
        return
    if name in _PLANNED:
        raise NotImplementedError(
            f"backend {name!r} is not built yet; 'interpret' is available now"
        )
    raise ValueError(f"unknown backend {name!r}; choose one of {sorted(_BACKENDS)}")


def get_backend() -> str:
    return _current[0]


def run(graph, feeds: dict, backend: str | None = None) -> list:
    """Run ``graph`` with ``feeds`` (input id -> ndarray); returns the output arrays."""
    return _BACKENDS[backend or _current[0]].run(graph, feeds)
