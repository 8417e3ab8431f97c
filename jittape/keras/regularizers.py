"""``jt.regularizers``: Keras 3's weight and activity penalties, added to a loss through
``layer.losses``.

A regularizer is a callable ``reg(x) -> scalar tensor`` written with jittape's ops, so
the penalty is differentiable and works on the trace of a ``jt.function`` step::

    L1(l1)(x)          = l1 * sum(|x|)
    L2(l2)(x)          = l2 * sum(x ** 2)
    L1L2(l1, l2)(x)    = l1 * sum(|x|) + l2 * sum(x ** 2)
    OrthogonalRegularizer(factor, mode)(x), x of rank 2:
        rows mode: the rows of x, L2-normalized (each divided by max(|row|, 1e-7)), give
        P = x_n @ x_n^T of size s = rows; columns mode: the same for the columns
        factor * 0.5 * sum(|P off its diagonal|) / (s (s - 1) / 2)   (0 when s < 2)

Given to a layer (``Dense(kernel_regularizer=L2(0.01))``), the penalty of a weight is
evaluated on the current weight each time ``layer.losses`` is read; an
``activity_regularizer`` is evaluated on the layer's outputs at each call and divided
by the batch size. ``l1``, ``l2`` and ``l1_l2`` are Keras 3's aliases of the classes
(``l1_l2()`` is ``L1L2()``, no penalty by default); the names ``"l1"`` and ``"l2"`` give
a factor of 0.01, and ``"l1_l2"`` 0.01 for both, as Keras documents.
"""

from __future__ import annotations

import math
import numbers

from .saving import serialization as _config
from .. import ops as _ops
from ..tensor import Tensor, Variable, convert_to_tensor

__all__ = [
    "Regularizer", "L1", "L2", "L1L2", "OrthogonalRegularizer", "l1", "l2", "l1_l2",
    "orthogonal_regularizer", "get", "serialize", "deserialize",
]

_EPSILON = 1e-7  # Keras' backend.epsilon(): the smallest norm a row is divided by


def _factor(value, name, who) -> float:
    if (isinstance(value, bool) or not isinstance(value, numbers.Real)
            or not math.isfinite(value) or value < 0):
        raise ValueError(
            f"{who}: invalid value for argument `{name}`: expected a non-negative float, "
            f"got {name}={value!r}")
    return float(value)


def _tensor(x):
    return x if isinstance(x, (Tensor, Variable)) else convert_to_tensor(x)


class Regularizer:
    """Base class: a subclass computes its penalty in ``__call__(x)`` and returns its
    arguments from ``get_config()`` (``from_config`` passes them back to ``__init__``).

    Any function of one tensor returning a scalar also works as a regularizer.
    """

    def __call__(self, x):
        return 0.0

    def get_config(self) -> dict:
        raise NotImplementedError(f"{type(self).__name__} does not implement get_config()")

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def __repr__(self):
        return _config.config_repr(self)


class L1(Regularizer):
    """``l1 * reduce_sum(abs(x))``.

    Example:
        >>> jt.regularizers.L1(0.5)(jt.constant([1.0, -2.0]))  # 1.5
    """

    def __init__(self, l1=0.01):
        self.l1 = _factor(0.01 if l1 is None else l1, "l1", "L1")

    def __call__(self, x):
        x = _tensor(x)
        return self.l1 * _ops.reduce_sum(_ops.abs(x))

    def get_config(self):
        return {"l1": self.l1}


class L2(Regularizer):
    """``l2 * reduce_sum(square(x))``.

    Example:
        >>> jt.regularizers.L2(0.5)(jt.constant([1.0, -2.0]))  # 2.5
    """

    def __init__(self, l2=0.01):
        self.l2 = _factor(0.01 if l2 is None else l2, "l2", "L2")

    def __call__(self, x):
        x = _tensor(x)
        return self.l2 * _ops.reduce_sum(_ops.square(x))

    def get_config(self):
        return {"l2": self.l2}


class L1L2(Regularizer):
    """``l1 * reduce_sum(abs(x)) + l2 * reduce_sum(square(x))``; a zero factor adds
    nothing (both default to 0, as in Keras 3).

    Example:
        >>> jt.regularizers.L1L2(l1=0.5, l2=0.5)(jt.constant([1.0, -2.0]))  # 4.0
    """

    def __init__(self, l1=0.0, l2=0.0):
        self.l1 = _factor(0.0 if l1 is None else l1, "l1", "L1L2")
        self.l2 = _factor(0.0 if l2 is None else l2, "l2", "L1L2")

    def __call__(self, x):
        x = _tensor(x)
        penalty = _ops.zeros((), x.dtype)
        if self.l1:
            penalty = penalty + self.l1 * _ops.reduce_sum(_ops.abs(x))
        if self.l2:
            penalty = penalty + self.l2 * _ops.reduce_sum(_ops.square(x))
        return penalty

    def get_config(self):
        return {"l1": self.l1, "l2": self.l2}


class OrthogonalRegularizer(Regularizer):
    """Pushes the rows (``mode="rows"``) or columns (``"columns"``) of a matrix towards
    being orthogonal: ``factor`` times the mean absolute cosine between distinct rows
    (columns), halved. See the module docstring for the formula.

    Example:
        >>> jt.regularizers.OrthogonalRegularizer(1.0)(jt.eye(3))  # 0.0
    """

    def __init__(self, factor=0.01, mode="rows"):
        self.factor = _factor(factor, "factor", "OrthogonalRegularizer")
        if mode not in ("rows", "columns"):
            raise ValueError(
                "OrthogonalRegularizer: invalid value for argument `mode`: expected one of "
                f"'rows', 'columns', got mode={mode!r}")
        self.mode = mode

    def __call__(self, x):
        x = _tensor(x)
        if x.ndim != 2:
            raise ValueError(
                f"OrthogonalRegularizer: inputs must have rank 2, got shape {list(x.shape)}")
        axis = 1 if self.mode == "rows" else 0
        squares = _ops.reduce_sum(_ops.square(x), axis, keepdims=True)
        # x / max(norm, eps) as Keras' min(rsqrt(s), 1/eps); max under the sqrt keeps the
        # gradient of an all-zero row finite
        unit = x / _ops.sqrt(_ops.maximum(squares, _EPSILON * _EPSILON))
        if self.mode == "rows":
            product, size = _ops.matmul(unit, _ops.transpose(unit)), x.shape[0]
        else:
            product, size = _ops.matmul(_ops.transpose(unit), unit), x.shape[1]
        off_diagonal = product * (1.0 - _ops.eye(size, dtype=x.dtype))
        if size < 2:  # no pairs (Keras divides 0 by 0 here and gives NaN)
            return _ops.reduce_sum(off_diagonal) * 0.0
        pairs = size * (size - 1.0) / 2.0
        return self.factor * 0.5 * _ops.reduce_sum(_ops.abs(off_diagonal)) / pairs

    def get_config(self):
        return {"factor": self.factor, "mode": self.mode}


# Keras 3's lower-case names are the classes themselves
l1 = L1
l2 = L2
l1_l2 = L1L2
orthogonal_regularizer = OrthogonalRegularizer

_CLASSES = {c.__name__: c for c in (Regularizer, L1, L2, L1L2, OrthogonalRegularizer)}
_NAMES = {
    "l1": L1, "l2": L2, "l1l2": L1L2, "orthogonal_regularizer": OrthogonalRegularizer,
    "regularizer": Regularizer,
    "l1_l2": lambda: L1L2(l1=0.01, l2=0.01),  # Keras' documented defaults for the name
}


def serialize(regularizer):
    """A regularizer as Keras 3's config record (``None`` stays ``None``)."""
    return _config.serialize(regularizer, "keras.regularizers", _CLASSES, "regularizer")


def deserialize(config, custom_objects=None):
    """The regularizer a record from ``serialize`` (or Keras) describes."""
    return _config.deserialize(config, "regularizer", _CLASSES, custom_objects, _NAMES)


def get(identifier):
    """A regularizer from a name (``"l2"``, ``"L1L2"``), a config record, an instance, a
    class, or any callable of one tensor. ``None`` gives ``None``.

    Example:
        >>> jt.regularizers.get("l2").l2  # 0.01
    """
    if identifier is None:
        return None
    if isinstance(identifier, (str, dict)):
        return deserialize(identifier)
    if isinstance(identifier, type):
        if issubclass(identifier, Regularizer):
            return identifier()
    elif callable(identifier):
        return identifier
    raise ValueError(
        f"Could not interpret regularizer identifier: {identifier!r} (give a name such as "
        "'l2', a jt.regularizers.Regularizer, a config dict, or a function of one tensor)")


_config.export("regularizer", ("keras.regularizers",), Regularizer, _CLASSES, serialize,
               deserialize)
