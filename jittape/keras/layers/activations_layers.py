"""The activation layers with arguments of their own: ``LeakyReLU``, ``ReLU``, ``ELU``,
``PReLU`` (a learned slope per entry) and ``Softmax`` (over any axes, with a mask), as
Keras 3's ``keras/src/layers/activations/``."""

from __future__ import annotations

import numbers
import warnings

from .. import constraints as _constraints
from .. import initializers as _init
from ... import ops as _ops
from .. import regularizers as _regularizers
from ...errors import InvalidArgumentError
from ..naming import _fmt_shape
from ...tensor import Tensor, convert_to_tensor
from .base import Layer


def _nonnegative(who, arg, value, allow_none=False):
    """A number >= 0 (Keras' check of these layers' arguments), kept as given."""
    if value is None and allow_none:
        return None
    if value is None or isinstance(value, bool) or not isinstance(value, numbers.Real) \
            or value < 0:
        raise ValueError(f"{who}: `{arg}` cannot be None or a negative value, expected a "
                         f"float >= 0. Received: {arg}={value!r}")
    return value


class _Elementwise(Layer):
    """A layer that maps each entry on its own: the output has the input's shape."""

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)


class LeakyReLU(_Elementwise):
    """``x`` where ``x > 0``, ``negative_slope * x`` elsewhere (Keras 3's default slope
    0.3; the ``"leaky_relu"`` activation's is 0.2). Keras 2's ``alpha=`` is accepted
    with Keras 3's deprecation warning.

    Example:
        >>> jt.layers.LeakyReLU()(jt.constant([-1.0, 2.0]))  # [-0.3, 2.0]
    """

    def __init__(self, negative_slope=0.3, **kwargs):
        if "alpha" in kwargs:
            negative_slope = kwargs.pop("alpha")
            warnings.warn("Argument `alpha` is deprecated. Use `negative_slope` instead.",
                          stacklevel=2)
        super().__init__(**kwargs)
        self.negative_slope = _nonnegative("LeakyReLU", "negative_slope", negative_slope)

    def call(self, inputs):
        return _ops.nn.leaky_relu(inputs, alpha=self.negative_slope)

    def get_config(self):
        return {**super().get_config(), "negative_slope": self.negative_slope}


def _relu(x, negative_slope, max_value, threshold):
    """Keras 3's ``ReLU.static_call``: ``x`` above ``threshold`` (0 below), clipped at
    ``max_value``, minus ``negative_slope * relu(threshold - x)``."""
    if negative_slope != 0 and max_value is None and threshold == 0:
        return _ops.nn.leaky_relu(x, alpha=negative_slope)
    if threshold != 0:
        y = _ops.where(_ops.greater(x, threshold), x, _ops.zeros_like(x))
    else:
        y = _ops.relu(x)
    if max_value is not None:
        y = _ops.clip_by_value(y, 0.0, float(max_value))
    if negative_slope != 0:
        y = y - negative_slope * _ops.relu(threshold - x)
    return y


class ReLU(_Elementwise):
    """Keras' rectifier: ``max_value`` where ``x >= max_value``, ``x`` where ``threshold
    < x < max_value``, ``negative_slope * (x - threshold)`` otherwise (0 with the
    defaults; at ``threshold > 0`` the kept part jumps from 0 to ``threshold``, as Keras').

    Example:
        >>> jt.layers.ReLU(max_value=6.0)(jt.constant([-1.0, 3.0, 9.0]))  # [0, 3, 6]
    """

    def __init__(self, max_value=None, negative_slope=0.0, threshold=0.0, **kwargs):
        super().__init__(**kwargs)
        self.max_value = _nonnegative("ReLU", "max_value", max_value, allow_none=True)
        self.negative_slope = _nonnegative("ReLU", "negative_slope", negative_slope)
        self.threshold = _nonnegative("ReLU", "threshold", threshold)

    def call(self, inputs):
        return _relu(inputs, self.negative_slope, self.max_value, self.threshold)

    def get_config(self):
        return {**super().get_config(), "max_value": self.max_value,
                "negative_slope": self.negative_slope, "threshold": self.threshold}


class ELU(_Elementwise):
    """``x`` where ``x > 0``, ``alpha * (exp(x) - 1)`` elsewhere.

    Example:
        >>> jt.layers.ELU(alpha=2.0)(jt.constant([-1.0]))  # [2 * (exp(-1) - 1)]
    """

    def __init__(self, alpha=1.0, **kwargs):
        super().__init__(**kwargs)
        self.alpha = alpha

    def call(self, inputs):
        y = _ops.nn.elu(inputs)
        if self.alpha == 1:
            return y
        return _ops.where(_ops.greater(inputs, 0.0), y, self.alpha * y)  # Keras' TF form

    def get_config(self):
        return {**super().get_config(), "alpha": self.alpha}


class PReLU(_Elementwise):
    """``x`` where ``x > 0``, ``alpha * x`` elsewhere, with ``alpha`` a trainable weight
    of the shape of a sample (``input_shape[1:]``), of size 1 on the ``shared_axes``
    (numbered from 1: ``shared_axes=[1, 2]`` gives images one slope per channel).
    ``alpha_initializer`` (zeros: a ReLU at first), ``alpha_regularizer`` and
    ``alpha_constraint`` apply to that weight.

    Example:
        >>> layer = jt.layers.PReLU(shared_axes=[1, 2])
        >>> layer(jt.ones([2, 8, 8, 3])); layer.alpha.shape  # (1, 1, 3)
    """

    def __init__(self, alpha_initializer="Zeros", alpha_regularizer=None, alpha_constraint=None,
                 shared_axes=None, **kwargs):
        super().__init__(**kwargs)
        self.alpha_initializer = _init.get(alpha_initializer)
        self.alpha_regularizer = _regularizers.get(alpha_regularizer)
        self.alpha_constraint = _constraints.get(alpha_constraint)
        if shared_axes is None:
            self.shared_axes = None
        elif isinstance(shared_axes, (list, tuple)):
            self.shared_axes = [int(a) for a in shared_axes]
        else:
            self.shared_axes = [int(shared_axes)]
        self.alpha = None

    def build(self, input_shape):
        rank = len(input_shape)
        shape = list(input_shape[1:])
        for a in self.shared_axes or ():
            if not 1 <= a < rank:
                raise InvalidArgumentError(
                    f'layer "{self.name}" (PReLU): shared_axes {self.shared_axes} must be '
                    f"axes 1 to {rank - 1} of the inputs, got shape {_fmt_shape(input_shape)}")
            shape[a - 1] = 1
        if any(d is None for d in shape):
            raise InvalidArgumentError(
                f'layer "{self.name}" (PReLU): the axes of the inputs that are not shared must '
                f"be known, got shape {_fmt_shape(input_shape)} and shared_axes="
                f"{self.shared_axes}")
        self.alpha = self.add_weight(
            shape=tuple(shape), name="alpha", initializer=self.alpha_initializer,
            regularizer=self.alpha_regularizer, constraint=self.alpha_constraint)

    def _check_input(self, shape):
        want = tuple(self.alpha.shape)
        if len(shape) != len(want) + 1:
            raise InvalidArgumentError(
                f'Input 0 of layer "{self.name}" is incompatible with the layer: expected '
                f"ndim={len(want) + 1}, found ndim={len(shape)}. Full shape received: "
                f"{_fmt_shape(shape)}")
        shared = set(self.shared_axes or ())
        for axis in range(1, len(shape)):
            if axis not in shared and shape[axis] != want[axis - 1]:
                raise self._incompatible(axis, want[axis - 1], shape)

    def call(self, inputs):
        return _ops.relu(inputs) - self.alpha * _ops.relu(-inputs)

    def get_config(self):
        return {**super().get_config(),
                "alpha_initializer": _init.serialize(self.alpha_initializer),
                "alpha_regularizer": _regularizers.serialize(self.alpha_regularizer),
                "alpha_constraint": _constraints.serialize(self.alpha_constraint),
                "shared_axes": self.shared_axes}


def _large_negative(dtype) -> float:
    """What a masked logit becomes (Keras' ``_large_negative_number``)."""
    return -3e4 if dtype.name == "float16" else -1e9


class Softmax(_Elementwise):
    """``softmax`` over ``axis`` (an int, or a list of axes normalized together).

    ``layer(x, mask=m)``: entries where ``m`` is False (or <= 0.5 for a numeric mask)
    get no probability, as in Keras 3: their logits become -1e9 before the softmax and
    their outputs 0 after it, so a fully masked row is all zeros. ``m`` broadcasts
    against ``x`` (each of its axes, from the last, 1 or the size of ``x``'s).

    Example:
        >>> jt.layers.Softmax()(jt.constant([[1.0, 2.0, 3.0]]), mask=[[True, True, False]])
    """

    def __init__(self, axis=-1, **kwargs):
        super().__init__(**kwargs)
        self.axis = list(axis) if isinstance(axis, (list, tuple)) else axis

    def _mask(self, mask, inputs):
        mask = mask if isinstance(mask, Tensor) else convert_to_tensor(mask)
        ms, xs = tuple(mask.shape), tuple(inputs.shape)
        fits = len(ms) <= len(xs) and all(
            m is None or x is None or m in (1, x) for m, x in zip(ms[::-1], xs[::-1]))
        if not fits:
            raise InvalidArgumentError(
                f'layer "{self.name}" (Softmax): the mask must broadcast to the inputs (each '
                "of its axes, from the last, 1 or the size of the input's). Received: "
                f"inputs.shape={_fmt_shape(xs)}, mask.shape={_fmt_shape(ms)}")
        if mask.dtype.name != "bool":
            mask = _ops.greater(mask, _ops.cast(0.5, mask.dtype))
        return _ops.broadcast_to(mask, _ops.shape(inputs))

    def call(self, inputs, mask=None):
        x = inputs
        if mask is not None:
            mask = self._mask(mask, inputs)
            x = _ops.where(mask, x, _large_negative(x.dtype) * _ops.ones_like(x))
        axis = self.axis
        if isinstance(axis, list) and len(axis) > 1:
            y = _ops.exp(x - _ops.reduce_logsumexp(x, axis=axis, keepdims=True))
        else:
            y = _ops.nn.softmax(x, axis=axis[0] if isinstance(axis, list) else axis)
        if mask is not None:
            y = _ops.where(mask, y, _ops.zeros_like(y))
        return y

    def get_config(self):
        return {**super().get_config(), "axis": self.axis}
