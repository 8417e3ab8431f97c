"""The noise and dropout family besides ``Dropout``: ``SpatialDropout1D/2D/3D`` (whole
channels), ``GaussianNoise``, ``GaussianDropout``, ``AlphaDropout``, and
``ActivityRegularization``, as Keras 3's ``keras/src/layers/regularization/``.

Each is the identity unless called with ``training=True``. Their draws come from
``jt.random``'s global generator (``jt.random.set_seed`` makes them reproducible) or,
with ``seed=``, from the layer's own generator, as ``Dropout``'s do; inside a
``jt.function`` step every call draws afresh."""

from __future__ import annotations

import math
import numbers

import numpy as np

from ... import ops as _ops
from ... import random as _random
from .. import regularizers as _regularizers
from ...errors import InvalidArgumentError
from ..naming import _fmt_shape
from ...ops.random_ops import _sample
from .base import Layer
from .core import Dropout
from .utils import _data_format


def _rate(who, arg, value, high_open=False):
    """Keras' check: a number in [0, 1] ([0, 1) where 1 would divide by 0)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (
            0 <= value < 1 if high_open else 0 <= value <= 1):
        interval = "[0, 1)" if high_open else "[0, 1]"
        raise ValueError(f"{who}: invalid value received for argument `{arg}`: expected a "
                         f"float value in {interval}. Received: {arg}={value!r}")
    return float(value)


class _Seeded(Layer):
    """A layer that draws noise: from its own generator with ``seed=``, else from
    ``jt.random``'s (looked up at each draw, so ``set_seed`` replaces it)."""

    def _init_seed(self, seed):
        self.seed = seed
        self._rng = None if seed is None else np.random.default_rng(int(seed))

    def _generator(self):
        return self._rng if self._rng is not None else _random.generator()

    def _draw(self, fn, shape, dtype):
        """``fn(generator, shape)`` as a tensor of ``dtype`` (an input of a traced step)."""
        return _sample(lambda s: fn(self._generator(), s), shape, dtype)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)


class _SpatialDropout(Dropout):
    """``Dropout`` whose mask has size 1 on the spatial axes: each channel of each sample
    is kept (scaled by ``1 / (1 - rate)``) or zeroed as a whole."""

    _ndim = 3

    def __init__(self, rate, data_format=None, seed=None, name=None, dtype=None, **kwargs):
        super().__init__(rate, seed=seed, name=name, dtype=dtype, **kwargs)
        self.data_format = _data_format(type(self).__name__, data_format)

    def call(self, inputs, training=None):
        shape = tuple(inputs._type.shape)
        if len(shape) != self._ndim:
            raise InvalidArgumentError(
                f'Input 0 of layer "{self.name}" is incompatible with the layer: expected '
                f"ndim={self._ndim}, found ndim={len(shape)}. Full shape received: "
                f"{_fmt_shape(inputs.shape)}")
        if not training or self.rate == 0:
            return inputs
        c = 1 if self.data_format == "channels_first" else self._ndim - 1
        noise = [shape[0]] + [1] * (self._ndim - 1)
        noise[c] = shape[c]
        return _ops.nn.dropout(inputs, self.rate, noise_shape=noise, rng=self._generator())

    def _generator(self):
        return self._rng if self._rng is not None else _random.generator()

    def get_config(self):
        # Keras 3's BaseSpatialDropout writes these four only (no trainable, no noise_shape),
        # the dtype by its name rather than as a policy record
        return {"rate": self.rate, "seed": self.seed, "name": self.name,
                "dtype": self.dtype.name}


class SpatialDropout1D(_SpatialDropout):
    """Dropout of whole feature maps of ``(batch, steps, channels)`` inputs (Keras 3 has
    no ``data_format`` here: the channels are last)."""

    _ndim = 3

    def __init__(self, rate, seed=None, name=None, dtype=None, **kwargs):
        super().__init__(rate, seed=seed, name=name, dtype=dtype, **kwargs)


class SpatialDropout2D(_SpatialDropout):
    """Dropout of whole channels of images (``data_format`` says where the channels are).

    Example:
        >>> y = jt.layers.SpatialDropout2D(0.5)(jt.ones([2, 4, 4, 3]), training=True)
        >>> # each y[b, :, :, c] is all 0 or all 2
    """

    _ndim = 4

    def get_config(self):
        return {**super().get_config(), "data_format": self.data_format}


class SpatialDropout3D(_SpatialDropout):
    """Dropout of whole channels of volumes (``data_format`` says where the channels are)."""

    _ndim = 5

    def get_config(self):
        return {**super().get_config(), "data_format": self.data_format}


class GaussianNoise(_Seeded):
    """Adds noise drawn from N(0, ``stddev``^2) to each entry when ``training=True``.

    Example:
        >>> jt.layers.GaussianNoise(0.1, seed=1)(jt.zeros([2, 3]), training=True)
    """

    def __init__(self, stddev, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.stddev = _rate("GaussianNoise", "stddev", stddev)
        self._init_seed(seed)

    def call(self, inputs, training=None):
        if not training or self.stddev == 0:
            return inputs
        stddev = self.stddev
        noise = self._draw(lambda g, s: g.normal(0.0, stddev, s), inputs._type.shape,
                           inputs.dtype)
        return inputs + noise

    def get_config(self):
        return {**super().get_config(), "stddev": self.stddev, "seed": self.seed}


class GaussianDropout(_Seeded):
    """Multiplies each entry by noise drawn from N(1, rate / (1 - rate)) when
    ``training=True`` (the variance of inverted dropout of that ``rate``)."""

    def __init__(self, rate, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.rate = _rate("GaussianDropout", "rate", rate, high_open=True)
        self._init_seed(seed)

    def call(self, inputs, training=None):
        if not training or self.rate == 0:
            return inputs
        stddev = math.sqrt(self.rate / (1.0 - self.rate))
        noise = self._draw(lambda g, s: g.normal(1.0, stddev, s), inputs._type.shape,
                           inputs.dtype)
        return inputs * noise

    def get_config(self):
        return {**super().get_config(), "rate": self.rate, "seed": self.seed}


# SELU's constants, which AlphaDropout keeps the mean and variance of
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


class AlphaDropout(_Seeded):
    """Dropout for SELU networks: with ``training=True`` each entry is set, with
    probability ``rate``, to SELU's negative saturation ``-alpha * scale``, then
    everything is mapped by ``a * x + b`` so that the mean and variance stay those of
    the inputs (Keras 3's formulas: ``a = ((1 - rate)(1 + rate alpha'^2))^-1/2``, ``b =
    -a alpha' rate``). ``noise_shape`` as ``Dropout``'s."""

    def __init__(self, rate, noise_shape=None, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.rate = _rate("AlphaDropout", "rate", rate, high_open=True)
        self.noise_shape = None if noise_shape is None else tuple(noise_shape)
        self._init_seed(seed)

    def call(self, inputs, training=None):
        if not training or self.rate == 0:
            return inputs
        shape = tuple(inputs._type.shape)
        if self.noise_shape is not None:
            if len(self.noise_shape) != len(shape):
                raise InvalidArgumentError(
                    f'layer "{self.name}": noise_shape {list(self.noise_shape)} does not have '
                    f"the rank of the inputs {_fmt_shape(inputs.shape)}")
            shape = tuple(shape[i] if d is None else int(d)
                          for i, d in enumerate(self.noise_shape))
        rate = self.rate
        kept = self._draw(lambda g, s: g.random(s) >= rate, shape, inputs.dtype)
        alpha_p = -_SELU_ALPHA * _SELU_SCALE
        a = ((1 - rate) * (1 + rate * alpha_p ** 2)) ** -0.5
        b = -a * alpha_p * rate
        x = inputs * kept + alpha_p * (1.0 - kept)
        return a * x + b

    def get_config(self):
        return {**super().get_config(), "rate": self.rate, "seed": self.seed,
                "noise_shape": self.noise_shape}


class ActivityRegularization(Layer):
    """The identity, whose output is penalized by ``L1L2(l1, l2)`` (the penalty, divided
    by the batch size, is in ``losses`` after each call, as any activity regularizer's).

    Example:
        >>> layer = jt.layers.ActivityRegularization(l2=0.01)
        >>> layer(jt.ones([2, 3])); layer.losses  # [0.01 * 6 / 2]
    """

    def __init__(self, l1=0.0, l2=0.0, **kwargs):
        kwargs.pop("activity_regularizer", None)  # Keras' config leaves it out; l1, l2 say it
        super().__init__(activity_regularizer=_regularizers.L1L2(l1=l1, l2=l2), **kwargs)
        self.l1, self.l2 = l1, l2

    def call(self, inputs):
        return inputs

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def get_config(self):
        config = super().get_config()
        config.pop("activity_regularizer", None)
        return {**config, "l1": self.l1, "l2": self.l2}
