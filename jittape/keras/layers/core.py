"""The core layers: ``Dense``, ``Activation``, ``Flatten`` and ``Dropout``."""

from __future__ import annotations

import math
import numbers

import numpy as np

from .. import constraints as _constraints
from .. import initializers as _init
from ... import ops as _ops
from ... import random as _random
from .. import regularizers as _regularizers
from ...errors import InvalidArgumentError
from ..naming import _fmt_shape
from ...tensor import Tensor, Variable, convert_to_tensor
from .activations import _activation_name, _ActivationAttr, _serialize_activation, get_activation
from .base import Layer
from .utils import _promote


# ---------------------------------------------------------------------------
# Dense


def _no_quantization(config, who):
    if config is not None:
        raise ValueError(f"{who}: quantization_config={config!r} is not supported (only None)")


class Dense(Layer):
    """``activation(inputs @ kernel + bias)``; kernel ``(input_dim, units)``, bias ``(units,)``.

    Inputs of rank > 2 are multiplied on their last axis. ``kernel_regularizer`` and
    ``bias_regularizer`` penalize the weights, ``activity_regularizer`` the outputs (see
    ``losses``); ``kernel_constraint`` and ``bias_constraint`` become the weights'
    ``constraint``.
    """

    activation = _ActivationAttr()

    def __init__(self, units, activation=None, use_bias=True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None, bias_regularizer=None,
                 activity_regularizer=None, kernel_constraint=None, bias_constraint=None,
                 input_shape=None, name=None, dtype=None, trainable=True,
                 quantization_config=None, **kwargs):
        super().__init__(trainable=trainable, name=name, dtype=dtype, input_shape=input_shape,
                         activity_regularizer=activity_regularizer, **kwargs)
        if isinstance(units, bool) or not isinstance(units, numbers.Integral) or units <= 0:
            raise ValueError(f"Dense: units must be a positive integer, got {units!r}")
        _no_quantization(quantization_config, "Dense")
        self.units = int(units)
        self.activation = get_activation(activation)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = _init.get(kernel_initializer)
        self.bias_initializer = _init.get(bias_initializer)
        self.kernel_regularizer = _regularizers.get(kernel_regularizer)
        self.bias_regularizer = _regularizers.get(bias_regularizer)
        self.kernel_constraint = _constraints.get(kernel_constraint)
        self.bias_constraint = _constraints.get(bias_constraint)
        self.kernel = None
        self.bias = None

    def build(self, input_shape):
        if len(input_shape) < 2:
            raise InvalidArgumentError(
                f'Input 0 of layer "{self.name}" is incompatible with the layer: expected '
                f"min_ndim=2, found ndim={len(input_shape)}. Full shape received: "
                f"{_fmt_shape(input_shape)}"
            )
        in_dim = input_shape[-1]
        if in_dim is None:
            raise InvalidArgumentError(
                f'layer "{self.name}": the last dimension of the inputs to Dense must be known, '
                f"got shape {_fmt_shape(input_shape)}"
            )
        self.kernel = self.add_weight(
            shape=(in_dim, self.units), initializer=self.kernel_initializer, name="kernel",
            regularizer=self.kernel_regularizer, constraint=self.kernel_constraint)
        if self.use_bias:
            self.bias = self.add_weight(
                shape=(self.units,), initializer=self.bias_initializer, name="bias",
                regularizer=self.bias_regularizer, constraint=self.bias_constraint)

    def _check_input(self, shape):
        if len(shape) < 2:
            raise InvalidArgumentError(
                f'Input 0 of layer "{self.name}" is incompatible with the layer: expected '
                f"min_ndim=2, found ndim={len(shape)}. Full shape received: {_fmt_shape(shape)}"
            )
        if shape[-1] != self.kernel.shape[0]:
            raise self._incompatible(-1, self.kernel.shape[0], shape)

    def call(self, inputs):
        inputs = _promote(inputs, self.dtype)
        y = _ops.matmul(inputs, self.kernel)
        if self.use_bias:
            y = y + self.bias
        return self.activation(y)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.units,)

    def get_config(self):
        return {
            **super().get_config(), "units": self.units,
            "activation": _serialize_activation(self.activation), "use_bias": self.use_bias,
            "kernel_initializer": _init.serialize(self.kernel_initializer),
            "bias_initializer": _init.serialize(self.bias_initializer),
            "kernel_regularizer": _regularizers.serialize(self.kernel_regularizer),
            "bias_regularizer": _regularizers.serialize(self.bias_regularizer),
            "kernel_constraint": _constraints.serialize(self.kernel_constraint),
            "bias_constraint": _constraints.serialize(self.bias_constraint),
            "quantization_config": None,
        }

    def __repr__(self):
        return (f"<Dense name={self.name!r}, units={self.units}, "
                f"activation={_activation_name(self.activation)}>")


# ---------------------------------------------------------------------------
# Activation, Flatten


class Activation(Layer):
    """Applies an activation function (by name or callable; ``None`` is linear)."""

    activation = _ActivationAttr()

    def __init__(self, activation, name=None, dtype=None, input_shape=None, **kwargs):
        super().__init__(name=name, dtype=dtype, input_shape=input_shape, **kwargs)
        self.activation = get_activation(activation)

    def call(self, inputs):
        return self.activation(inputs)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def get_config(self):
        return {**super().get_config(), "activation": _serialize_activation(self.activation)}


class Flatten(Layer):
    """Reshape ``(batch, d1, d2, ...)`` to ``(batch, d1*d2*...)``; a vector becomes
    ``(batch, 1)``. With ``data_format="channels_first"`` an input of rank 3 or more is
    first transposed to put axis 1 (the channels) last, so that the order of the
    features is that of the channels-last layout, as in Keras."""

    def __init__(self, data_format=None, name=None, dtype=None, input_shape=None, **kwargs):
        super().__init__(name=name, dtype=dtype, input_shape=input_shape, **kwargs)
        if data_format is None:
            data_format = "channels_last"  # Keras' image_data_format()
        if data_format not in ("channels_last", "channels_first"):
            raise ValueError(
                "Flatten: invalid value for argument `data_format`: expected 'channels_last' "
                f"or 'channels_first', got data_format={data_format!r}")
        self.data_format = data_format

    def _flat(self, shape):
        rest = shape[1:]
        return None if any(d is None for d in rest) else int(math.prod(rest))

    def call(self, inputs):
        inputs = inputs if isinstance(inputs, Tensor) else convert_to_tensor(inputs)
        shape = tuple(inputs._type.shape)  # symbolic sizes too (a None batch size)
        if not shape:
            raise InvalidArgumentError(
                f'layer "{self.name}": Flatten needs inputs with a batch dimension, got a scalar'
            )
        if self.data_format == "channels_first" and len(shape) >= 3:
            inputs = _ops.transpose(inputs, [0, *range(2, len(shape)), 1])
        return _ops.reshape(inputs, (shape[0], math.prod(shape[1:])))  # Dims multiply too

    def compute_output_shape(self, input_shape):
        return (input_shape[0], self._flat(tuple(input_shape)))

    def get_config(self):
        return {**super().get_config(), "data_format": self.data_format}


# ---------------------------------------------------------------------------
# Dropout


def _validate_noise_shape(noise_shape):
    """Keras 3's check of ``Dropout(noise_shape=)``: None, or a tuple/list whose entries
    are positive ints or None (a bool is not taken as a dimension here)."""
    if noise_shape is None:
        return None
    head = "Dropout: invalid value received for argument `noise_shape`."
    if isinstance(noise_shape, str):
        raise ValueError(f"{head} Expected a tuple or list of integers. "
                         f"Received: noise_shape={noise_shape!r}")
    if isinstance(noise_shape, (Tensor, Variable)):
        noise_shape = np.asarray(noise_shape).tolist()
    try:
        dims = tuple(noise_shape)
    except TypeError:
        raise ValueError(f"{head} Expected an iterable of integers (e.g., a tuple or list). "
                         f"Received: noise_shape={noise_shape!r}") from None
    for i, d in enumerate(dims):
        if d is None:
            continue
        if isinstance(d, bool) or not isinstance(d, numbers.Integral):
            raise ValueError(f"{head} Expected all elements to be integers or None. Received "
                             f"element at index {i}: {d!r} (type: {type(d).__name__})")
        if d <= 0:
            raise ValueError(f"{head} Expected all dimensions to be positive integers or "
                             f"None. Received negative or zero value at index {i}: {d}")
    return tuple(None if d is None else int(d) for d in dims)


class Dropout(Layer):
    """Inverted dropout: with ``training=True`` each element is zeroed with probability
    ``rate`` and the rest are scaled by ``1 / (1 - rate)``; otherwise the identity.

    Masks come from ``jt.random``'s global generator (so ``jt.random.set_seed`` makes
    them reproducible), or, with ``seed=``, from this layer's own generator, which
    gives a new mask at each call and the same succession for the same seed.
    """

    def __init__(self, rate, noise_shape=None, seed=None, name=None, dtype=None,
                 input_shape=None, **kwargs):
        super().__init__(name=name, dtype=dtype, input_shape=input_shape, **kwargs)
        if isinstance(rate, bool) or not isinstance(rate, numbers.Real) or not 0 <= rate < 1:
            raise ValueError(
                "Dropout: invalid value received for argument `rate`: expected a float value "
                f"in [0, 1) (the fraction of the inputs to drop). Received: rate={rate!r}")
        self.rate = float(rate)
        self.noise_shape = _validate_noise_shape(noise_shape)
        self.seed = seed
        self._rng = None if seed is None else np.random.default_rng(int(seed))

    def call(self, inputs, training=None):
        if not training or self.rate == 0:
            return inputs
        g = self._rng if self._rng is not None else _random.generator()
        noise = None
        if self.noise_shape is not None:
            if len(self.noise_shape) != inputs.ndim:
                raise InvalidArgumentError(
                    f'layer "{self.name}": noise_shape {list(self.noise_shape)} does not have '
                    f"the rank of the inputs {_fmt_shape(inputs.shape)}"
                )
            noise = [inputs._type.shape[i] if d is None else int(d)
                     for i, d in enumerate(self.noise_shape)]
        return _ops.nn.dropout(inputs, self.rate, noise_shape=noise, rng=g)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def get_config(self):
        return {**super().get_config(), "rate": self.rate, "seed": self.seed,
                "noise_shape": self.noise_shape}
