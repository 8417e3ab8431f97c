"""``jt.config``: process-wide switches (``tf.config`` names where TF has them)."""

from __future__ import annotations

_flags = {"run_functions_eagerly": False}


def run_functions_eagerly(run_eagerly: bool) -> None:
    """With ``True``, every ``jt.function`` runs its Python function eagerly instead of
    the traced and compiled graph: breakpoints, ``print`` and ``.numpy()`` work inside
    it again. For debugging; ``False`` (the default) compiles again."""
    _flags["run_functions_eagerly"] = bool(run_eagerly)


def functions_run_eagerly() -> bool:
    """Whether :func:`run_functions_eagerly` is on."""
    return _flags["run_functions_eagerly"]
