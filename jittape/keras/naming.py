"""The names Keras objects are given (``dense``, ``dense_1``, ``mean_squared_error``) and
how a shape prints in messages (``(None, 4)``), for layers, models, losses and metrics
alike (Keras 3's ``utils/naming.py``)."""

from __future__ import annotations

import collections
import re

# how many objects were given each automatic name so far (jt.keras.backend.clear_session
# forgets them)
_name_counts: collections.Counter = collections.Counter()


def _unique_name(prefix: str) -> str:
    """``prefix`` the first time, then ``prefix_1``, ``prefix_2``, ..."""
    n = _name_counts[prefix]
    _name_counts[prefix] += 1
    return prefix if n == 0 else f"{prefix}_{n}"


def _snake(name: str) -> str:
    """A class name as an object name, as Keras 3's ``to_snake_case``:
    ``"BatchNormalization"`` -> ``"batch_normalization"``, ``"Conv2D"`` -> ``"conv2d"``
    (a capital after a digit starts no new word)."""
    s = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub(r"([a-z])([A-Z])", r"\1_\2", s).lower()


def _fmt_shape(shape) -> str:
    """A shape as Keras prints it: ``(None, 4)``, ``(3,)``."""
    dims = ", ".join("None" if d is None else str(d) for d in shape)
    return f"({dims},)" if len(shape) == 1 else f"({dims})"
