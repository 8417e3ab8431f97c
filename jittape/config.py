"""``jt.config``: process-wide switches (``tf.config`` names where TF has them), and the
bounds of the in-memory compile caches."""

from __future__ import annotations

import os
import threading

_flags = {"run_functions_eagerly": False}


def run_functions_eagerly(run_eagerly: bool) -> None:
    """With ``True``, every ``jt.function`` runs its Python function eagerly instead of
    the traced and compiled graph: breakpoints, ``print`` and ``.numpy()`` work inside
    it again. For debugging; ``False`` (the default) compiles again."""
    _flags["run_functions_eagerly"] = bool(run_eagerly)


def functions_run_eagerly() -> bool:
    """Whether :func:`run_functions_eagerly` is on."""
    return _flags["run_functions_eagerly"]


# ---------------------------------------------------------------------------
# In-memory cache bounds
#
# Each in-memory cache keeps at most its bound of entries and drops the least recently
# used one beyond it (the on-disk cache has its own bound, JITTAPE_CACHE_MAX_MB):
#   programs  the cpu backend's compiled programs, by graph and by structure (and the
#             graphs it failed to compile), each
#   plans     backward graphs of tape.gradient, by the structure the tape recorded
#   traces    traced signatures of each jt.function (TF keeps them all; a function
#             called with ever new shapes would keep every trace alive)

_ENV = {
    "programs": ("JITTAPE_MAX_PROGRAMS", "JITTAPE_COMPILE_CACHE_SIZE"),
    "plans": ("JITTAPE_MAX_PLANS",),
    "traces": ("JITTAPE_MAX_TRACES",),
}
_DEFAULTS = {"programs": 256, "plans": 256, "traces": 256}


def _from_env(kind: str) -> int:
    for var in _ENV[kind]:
        text = os.environ.get(var)
        if text:
            try:
                n = int(text)
            except ValueError:
                raise ValueError(f"{var}={text!r}: expected a whole number of entries, at "
                                 "least 1") from None
            if n < 1:
                raise ValueError(f"{var}={text!r}: a cache needs room for at least 1 entry")
            return n
    return _DEFAULTS[kind]


_limits = {kind: _from_env(kind) for kind in _DEFAULTS}
_trimmers: dict = {kind: [] for kind in _DEFAULTS}
_lock = threading.Lock()


def cache_limits() -> dict:
    """The bounds of the in-memory caches: ``{"programs": n, "plans": n, "traces": n}``
    (see :func:`set_cache_limits`)."""
    return dict(_limits)


def set_cache_limits(programs: int | None = None, plans: int | None = None,
                     traces: int | None = None) -> dict:
    """Bound the in-memory caches; ``None`` leaves a bound as it is. Returns the bounds
    as they were before, so a caller can restore them.

    ``programs``: compiled programs the cpu backend keeps (default 256,
    ``JITTAPE_MAX_PROGRAMS``); ``plans``: backward graphs ``tape.gradient`` keeps
    (default 256, ``JITTAPE_MAX_PLANS``); ``traces``: signatures each ``jt.function``
    keeps (default 256, ``JITTAPE_MAX_TRACES``). A cache above its new bound drops its
    least recently used entries at once. A dropped entry is rebuilt when it is needed
    again: a ``jt.function`` traces the signature again, a program is loaded from the
    disk cache."""
    old = dict(_limits)
    new = {"programs": programs, "plans": plans, "traces": traces}
    for kind, n in new.items():
        if n is None:
            continue
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"set_cache_limits: {kind}={n!r}; a bound is a whole number "
                             "of entries, at least 1")
    with _lock:
        for kind, n in new.items():
            if n is not None:
                _limits[kind] = n
        hooks = [(kind, fn) for kind, fns in _trimmers.items() for fn in fns
                 if new[kind] is not None]
    for _, fn in hooks:
        fn()
    return old


def cache_limit(kind: str) -> int:
    """The bound of one kind of cache (``"programs"``, ``"plans"`` or ``"traces"``)."""
    return _limits[kind]


def on_cache_limit_change(kind: str, trim) -> None:
    """Call ``trim()`` whenever the bound of ``kind`` is set (a cache shrinks at once)."""
    with _lock:
        _trimmers[kind].append(trim)


def evict(cache, kind: str) -> list:
    """Drop ``cache``'s (an ``OrderedDict``, most recently used last) oldest entries
    beyond the bound of ``kind``; returns the dropped ``(key, value)`` pairs. The caller
    holds the cache's lock."""
    limit = _limits[kind]
    dropped = []
    while len(cache) > limit:
        try:
            dropped.append(cache.popitem(last=False))
        except KeyError:  # emptied meanwhile
            break
    return dropped


def log(topic: str, msg: str) -> None:
    """Write ``msg`` on the ``jittape`` logger as ``jittape[topic]: msg`` (to stderr when
    the application configured no handler for it)."""
    import logging
    import sys

    logger = logging.getLogger("jittape")
    if not logger.handlers:
        h = logging.StreamHandler(sys.stderr)
        h.setFormatter(logging.Formatter("jittape[%(topic)s]: %(message)s"))
        logger.addHandler(h)
    if logger.level == logging.NOTSET or logger.level > logging.INFO:
        logger.setLevel(logging.INFO)
    logger.info(msg, extra={"topic": topic})
