"""``jt.constraints``: Keras 3's weight constraints, projections applied to a variable
after each optimizer update.

A constraint is a callable ``c(w) -> tensor`` of ``w``'s shape. A layer gives it to the
weight it creates (``Dense(kernel_constraint=MaxNorm(2.0))`` sets ``kernel.constraint``),
and the optimizer assigns ``v.constraint(v)`` to ``v`` after updating it. With
``norms = sqrt(reduce_sum(square(w), axis, keepdims=True))`` and Keras' epsilon
``eps = 1e-7``::

    MaxNorm(max_value, axis):    w * clip(norms, 0, max_value) / (eps + norms)
    NonNeg():                    maximum(w, 0)
    UnitNorm(axis):              w / (eps + norms)
    MinMaxNorm(min_value, max_value, rate, axis):
        w * (rate * clip(norms, min_value, max_value) + (1 - rate) * norms) / (eps + norms)

``axis`` is an int or a list of ints: for a ``Dense`` kernel ``(input_dim, units)`` the
default ``axis=0`` constrains the weights into each unit. ``max_norm``, ``non_neg``,
``unit_norm`` and ``min_max_norm`` are Keras' aliases of the classes.
"""

from __future__ import annotations

import numbers

import numpy as np

from .saving import serialization as _config
from .. import ops as _ops
from ..tensor import Tensor, Variable, convert_to_tensor

__all__ = [
    "Constraint", "MaxNorm", "NonNeg", "UnitNorm", "MinMaxNorm", "max_norm", "non_neg",
    "unit_norm", "min_max_norm", "get", "serialize", "deserialize",
]

EPSILON = 1e-7  # Keras' backend.epsilon(), added to every norm a weight is divided by


def _tensor(w):
    return w if isinstance(w, (Tensor, Variable)) else convert_to_tensor(w)


def _number(value, name, who, low=0.0, high=None):
    bad = isinstance(value, bool) or not isinstance(value, numbers.Real)
    if not bad and (value < low or (high is not None and value > high)):
        bad = True
    if bad:
        span = f"in [{low}, {high}]" if high is not None else f">= {low}"
        raise ValueError(
            f"{who}: invalid value for argument `{name}`: expected a number {span}, "
            f"got {name}={value!r}")
    return value.item() if isinstance(value, np.generic) else value  # plain in the config


def _axis(axis, who):
    ok = (isinstance(axis, numbers.Integral) and not isinstance(axis, bool)) or (
        isinstance(axis, (list, tuple)) and axis
        and all(isinstance(a, numbers.Integral) and not isinstance(a, bool) for a in axis))
    if not ok:
        raise ValueError(
            f"{who}: invalid value for argument `axis`: expected an int or a list of ints, "
            f"got axis={axis!r}")
    return axis


def _norms(w, axis):
    dims = [int(a) for a in axis] if isinstance(axis, (list, tuple)) else int(axis)
    return _ops.sqrt(_ops.reduce_sum(_ops.square(w), dims, keepdims=True))


class Constraint:
    """Base class: a subclass projects a weight in ``__call__(w)`` and returns its
    arguments from ``get_config()``. The base constraint returns ``w`` unchanged.

    Any function of one tensor returning a tensor of its shape also works.
    """

    def __call__(self, w):
        return w

    def get_config(self) -> dict:
        return {}

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def __repr__(self):
        return _config.config_repr(self)


class MaxNorm(Constraint):
    """Scale each slice along ``axis`` down to a norm of at most ``max_value``.

    Example:
        >>> jt.constraints.MaxNorm(2.0)(jt.constant([[3.0], [4.0]]))  # [[1.2], [1.6]]
    """

    def __init__(self, max_value=2, axis=0):
        self.max_value = _number(max_value, "max_value", "MaxNorm")
        self.axis = _axis(axis, "MaxNorm")

    def __call__(self, w):
        w = _tensor(w)
        norms = _norms(w, self.axis)
        desired = _ops.clip_by_value(norms, 0.0, float(self.max_value))
        return w * (desired / (EPSILON + norms))

    def get_config(self):
        return {"max_value": self.max_value, "axis": self.axis}


class NonNeg(Constraint):
    """Negative weights become 0.

    Example:
        >>> jt.constraints.NonNeg()(jt.constant([-1.0, 2.0]))  # [0.0, 2.0]
    """

    def __call__(self, w):
        return _ops.maximum(_tensor(w), 0)


class UnitNorm(Constraint):
    """Scale each slice along ``axis`` to norm 1 (``w / (eps + norm)``).

    Example:
        >>> jt.constraints.UnitNorm()(jt.constant([[3.0], [4.0]]))  # [[0.6], [0.8]]
    """

    def __init__(self, axis=0):
        self.axis = _axis(axis, "UnitNorm")

    def __call__(self, w):
        w = _tensor(w)
        return w / (EPSILON + _norms(w, self.axis))

    def get_config(self):
        return {"axis": self.axis}


class MinMaxNorm(Constraint):
    """Move the norm of each slice along ``axis`` into ``[min_value, max_value]``:
    entirely with ``rate=1``, a fraction ``rate`` of the way otherwise.

    Example:
        >>> jt.constraints.MinMaxNorm(0.0, 1.0)(jt.constant([[3.0], [4.0]]))  # [[0.6], [0.8]]
    """

    def __init__(self, min_value=0.0, max_value=1.0, rate=1.0, axis=0):
        self.min_value = _number(min_value, "min_value", "MinMaxNorm")
        self.max_value = _number(max_value, "max_value", "MinMaxNorm", low=min_value)
        self.rate = _number(rate, "rate", "MinMaxNorm", high=1.0)
        self.axis = _axis(axis, "MinMaxNorm")

    def __call__(self, w):
        w = _tensor(w)
        norms = _norms(w, self.axis)
        clipped = _ops.clip_by_value(norms, float(self.min_value), float(self.max_value))
        desired = float(self.rate) * clipped + (1.0 - float(self.rate)) * norms
        return w * (desired / (EPSILON + norms))

    def get_config(self):
        return {"min_value": self.min_value, "max_value": self.max_value, "rate": self.rate,
                "axis": self.axis}


# Keras' lower-case names are the classes themselves
max_norm = MaxNorm
non_neg = NonNeg
unit_norm = UnitNorm
min_max_norm = MinMaxNorm

_CLASSES = {c.__name__: c for c in (Constraint, MaxNorm, NonNeg, UnitNorm, MinMaxNorm)}
_NAMES = {"max_norm": MaxNorm, "non_neg": NonNeg, "unit_norm": UnitNorm,
          "min_max_norm": MinMaxNorm, "constraint": Constraint}


def serialize(constraint):
    """A constraint as Keras 3's config record (``None`` stays ``None``)."""
    return _config.serialize(constraint, "keras.constraints", _CLASSES, "constraint")


def deserialize(config, custom_objects=None):
    """The constraint a record from ``serialize`` (or Keras) describes."""
    return _config.deserialize(config, "constraint", _CLASSES, custom_objects, _NAMES)


def get(identifier):
    """A constraint from a name (``"non_neg"``, ``"MaxNorm"``), a config record, an
    instance, a class, or any callable of one tensor. ``None`` gives ``None``.

    Example:
        >>> jt.constraints.get("max_norm").max_value  # 2
    """
    if identifier is None:
        return None
    if isinstance(identifier, (str, dict)):
        return deserialize(identifier)
    if isinstance(identifier, type):
        if issubclass(identifier, Constraint):
            return identifier()
    elif callable(identifier):
        return identifier
    raise ValueError(
        f"Could not interpret constraint identifier: {identifier!r} (give a name such as "
        "'non_neg', a jt.constraints.Constraint, a config dict, or a function of one tensor)")


_config.export("constraint", ("keras.constraints",), Constraint, _CLASSES, serialize,
               deserialize)
