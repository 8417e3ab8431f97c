"""``jt.keras.backend``: the few backend helpers that have a meaning in jittape."""

from __future__ import annotations

from . import naming as _naming

__all__ = ["clear_session", "floatx", "epsilon"]


def clear_session():
    """Forget the automatic names given so far (Keras' ``clear_session``): the next
    ``Dense()`` is named ``"dense"`` again. Variables and compiled functions stay."""
    _naming._name_counts.clear()


def floatx() -> str:
    """The default float type (``"float32"``)."""
    return "float32"


def epsilon() -> float:
    """Keras' fuzz factor, 1e-7."""
    return 1e-7
