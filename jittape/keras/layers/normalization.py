"""``BatchNormalization``: batch statistics in training, moving statistics otherwise."""

from __future__ import annotations

import numbers

import numpy as np

from .. import constraints as _constraints
from .. import initializers as _init
from ... import ops as _ops
from .. import regularizers as _regularizers
from ...errors import InvalidArgumentError
from ..naming import _fmt_shape
from .base import Layer
from .utils import _promote


def _renorm_clipping(clipping) -> dict:
    """Keras 3's check of ``renorm_clipping``: a dict of ``rmax``, ``rmin`` and ``dmax``
    (each may be missing or None), ``rmax >= rmin`` and ``dmax >= 0``."""
    clipping = dict(clipping or {})
    keys = ["rmax", "rmin", "dmax"]
    if set(clipping) - set(keys):
        raise ValueError(
            "BatchNormalization: received invalid keys for `renorm_clipping` argument: "
            f"{clipping}. Supported values: {keys}.")
    rmax, rmin, dmax = (clipping.get(k) for k in keys)
    if rmax is not None and rmin is not None and rmax < rmin:
        raise ValueError("BatchNormalization: rmax should be greater than rmin in the "
                         f"`renorm_clipping` argument. Received: rmax={rmax}, rmin={rmin}.")
    if dmax is not None and dmax < 0:
        raise ValueError("BatchNormalization: dmax should be non-negative in the "
                         f"`renorm_clipping` argument. Received: dmax={dmax}.")
    return clipping


class BatchNormalization(Layer):
    """Normalize over every axis except ``axis`` (Keras' formulas).

    With ``training=True``::

        mean, var = batch mean and biased batch variance (divided by n, not n - 1)
        y = (x - mean) / sqrt(var + epsilon) * gamma + beta
        moving_mean     <- moving_mean * momentum + mean * (1 - momentum)
        moving_variance <- moving_variance * momentum + var * (1 - momentum)

    Otherwise ``y`` uses ``moving_mean`` and ``moving_variance`` and nothing is
    updated. gamma and beta are trainable; the moving statistics are non-trainable
    variables (updated with ``assign``). ``beta_regularizer``/``gamma_regularizer`` and
    ``beta_constraint``/``gamma_constraint`` apply to those two weights.

    The inputs may have any rank (``(batch, features)``, sequences, images, volumes):
    ``axis=-1`` is the channels-last axis, ``axis=1`` the channels-first one.

    ``renorm=True`` is batch renormalization, with Keras 3's formulas and weights (after
    the four above: ``moving_stddev``, ``renorm_mean``, ``renorm_stddev``). In training::

        s = sqrt(var + epsilon)
        r = s / max(renorm_stddev, sqrt(epsilon)),  d = (mean - renorm_mean) / that same
        r, d clipped to [rmin, rmax] and [-dmax, dmax] (``renorm_clipping``), no gradient
        y = (x - mean) / s * (r * gamma) + (d * gamma + beta)
        renorm_mean, renorm_stddev <- moving averages of mean and s (``renorm_momentum``)
        moving_mean, moving_stddev <- moving averages of mean and s (``momentum``)
        moving_variance <- relu(moving_stddev^2 - epsilon)

    and inference uses ``moving_mean`` and ``moving_variance`` as without renorm.

    ``synchronized`` is accepted for Keras' configs (one device: nothing to synchronize).
    """

    def __init__(self, axis=-1, momentum=0.99, epsilon=1e-3, center=True, scale=True,
                 beta_initializer="zeros", gamma_initializer="ones",
                 moving_mean_initializer="zeros", moving_variance_initializer="ones",
                 beta_regularizer=None, gamma_regularizer=None, beta_constraint=None,
                 gamma_constraint=None, synchronized=False, renorm=False, renorm_clipping=None,
                 renorm_momentum=0.99, name=None, dtype=None, input_shape=None, trainable=True,
                 **kwargs):
        super().__init__(trainable=trainable, name=name, dtype=dtype, input_shape=input_shape,
                         **kwargs)
        self.renorm = bool(renorm)
        self.renorm_clipping = (_renorm_clipping(renorm_clipping) if self.renorm
                                else renorm_clipping)  # Keras keeps it as given
        self.synchronized = bool(synchronized)
        self.renorm_momentum = float(renorm_momentum)
        if not isinstance(axis, numbers.Integral):
            raise TypeError(f"BatchNormalization: axis must be an int, got {axis!r}")
        self.axis = int(axis)
        self.momentum = float(momentum)
        self.epsilon = float(epsilon)
        self.center, self.scale = bool(center), bool(scale)
        self.beta_initializer = _init.get(beta_initializer)
        self.gamma_initializer = _init.get(gamma_initializer)
        self.moving_mean_initializer = _init.get(moving_mean_initializer)
        self.moving_variance_initializer = _init.get(moving_variance_initializer)
        self.beta_regularizer = _regularizers.get(beta_regularizer)
        self.gamma_regularizer = _regularizers.get(gamma_regularizer)
        self.beta_constraint = _constraints.get(beta_constraint)
        self.gamma_constraint = _constraints.get(gamma_constraint)
        self.gamma = self.beta = self.moving_mean = self.moving_variance = None
        self.moving_stddev = self.renorm_mean = self.renorm_stddev = None

    def _axis(self, rank):
        a = self.axis + rank if self.axis < 0 else self.axis
        if not 0 <= a < rank:
            raise InvalidArgumentError(
                f'layer "{self.name}": axis {self.axis} is out of range for inputs of rank {rank}'
            )
        return a

    def build(self, input_shape):
        a = self._axis(len(input_shape))
        dim = input_shape[a]
        if dim is None:
            raise InvalidArgumentError(
                f'layer "{self.name}": axis {self.axis} of the input shape '
                f"{_fmt_shape(input_shape)} must be known"
            )
        self._rank = len(input_shape)
        shape = (dim,)
        if self.scale:
            self.gamma = self.add_weight(
                shape=shape, initializer=self.gamma_initializer, name="gamma",
                regularizer=self.gamma_regularizer, constraint=self.gamma_constraint)
        if self.center:
            self.beta = self.add_weight(
                shape=shape, initializer=self.beta_initializer, name="beta",
                regularizer=self.beta_regularizer, constraint=self.beta_constraint)
        self.moving_mean = self.add_weight(
            "moving_mean", shape, self.moving_mean_initializer, trainable=False)
        self.moving_variance = self.add_weight(
            "moving_variance", shape, self.moving_variance_initializer, trainable=False)
        if self.renorm:
            # the stddevs start at the square root of the moving variance's initializer
            def stddev_init(shape, dtype=None):
                return np.sqrt(np.asarray(self.moving_variance_initializer(shape, dtype=dtype)))

            self.moving_stddev = self.add_weight(
                "moving_stddev", shape, stddev_init, trainable=False)
            self.renorm_mean = self.add_weight(
                "renorm_mean", shape, self.moving_mean_initializer, trainable=False)
            self.renorm_stddev = self.add_weight(
                "renorm_stddev", shape, stddev_init, trainable=False)

    def _check_input(self, shape):
        if len(shape) != self._rank:
            raise InvalidArgumentError(
                f'Input 0 of layer "{self.name}" is incompatible with the layer: expected '
                f"ndim={self._rank}, found ndim={len(shape)}. Full shape received: "
                f"{_fmt_shape(shape)}"
            )
        a = self._axis(len(shape))
        if shape[a] != self.moving_mean.shape[0]:
            raise self._incompatible(self.axis, self.moving_mean.shape[0], shape)

    def call(self, inputs, training=None, mask=None):
        # ``mask`` as Keras 3 takes it (and records it in a functional config, as
        # ``"mask": null``): with training, the batch statistics skip the masked entries
        inputs = _promote(inputs, self.dtype)
        rank = inputs.ndim
        if mask is not None and len(mask.shape) != rank - 1:
            raise ValueError(
                f'layer "{self.name}": the mask provided should be one dimension less than '
                f"the inputs. Received: mask.shape={_fmt_shape(mask.shape)}, "
                f"inputs.shape={_fmt_shape(inputs.shape)}")
        a = self._axis(rank)
        reduce_axes = [i for i in range(rank) if i != a]
        bshape = [1] * rank
        bshape[a] = self.moving_mean.shape[0]

        def param(v):
            return v if a == rank - 1 else _ops.reshape(v, bshape)

        gamma = param(self.gamma) if self.scale else None
        beta = param(self.beta) if self.center else None
        if training and self.trainable:
            mean, var = self._moments(inputs, reduce_axes, mask)
            m = _ops.stop_gradient(_ops.reshape(mean, bshape[a:a + 1]))
            v = _ops.stop_gradient(_ops.reshape(var, bshape[a:a + 1]))
            if self.renorm:
                r, d = self._renorm_update(m, v)
                r, d = param(r), param(d)
                gamma, beta = (r, d) if gamma is None else (r * gamma, d * gamma)
                beta = beta + param(self.beta) if self.center else beta
            else:
                k = self.momentum
                self.moving_mean.assign(self.moving_mean * k + m * (1.0 - k))
                self.moving_variance.assign(self.moving_variance * k + v * (1.0 - k))
        else:
            mean = param(self.moving_mean)
            var = param(self.moving_variance)
        y = (inputs - mean) / _ops.sqrt(var + self.epsilon)
        if gamma is not None:
            y = y * gamma
        if beta is not None:
            y = y + beta
        return y

    def _renorm_update(self, mean, var):
        """Batch renormalization's corrections ``r`` and ``d`` from the batch ``mean`` and
        ``var`` (per channel, no gradient) and the renorm statistics before this batch;
        then the moving statistics' updates (Keras 3's
        ``_renorm_correction_and_moments`` and ``_update_renorm_statistics``)."""
        eps = self.epsilon
        stddev = _ops.sqrt(var + eps)
        floor = _ops.maximum(self.renorm_stddev, float(np.sqrt(np.float32(eps))))
        r = stddev / floor
        d = (mean - self.renorm_mean) / floor
        clip = self.renorm_clipping
        if clip.get("rmin") is not None:
            r = _ops.maximum(r, float(clip["rmin"]))
        if clip.get("rmax") is not None:
            r = _ops.minimum(r, float(clip["rmax"]))
        if clip.get("dmax") is not None:
            d = _ops.clip_by_value(d, -float(clip["dmax"]), float(clip["dmax"]))
        k, kr = self.momentum, self.renorm_momentum
        self.renorm_mean.assign(self.renorm_mean * kr + mean * (1.0 - kr))
        self.renorm_stddev.assign(self.renorm_stddev * kr + stddev * (1.0 - kr))
        self.moving_mean.assign(self.moving_mean * k + mean * (1.0 - k))
        moving_stddev = self.moving_stddev * k + stddev * (1.0 - k)
        self.moving_stddev.assign(moving_stddev)
        self.moving_variance.assign(_ops.relu(moving_stddev * moving_stddev - eps))
        return _ops.stop_gradient(r), _ops.stop_gradient(d)

    @staticmethod
    def _moments(inputs, axes, mask):
        """Mean and biased variance over ``axes``; with a mask, of the entries it keeps
        (Keras 3's ``_moments``: sums over the kept entries divided by their count plus
        1e-7, Keras' epsilon)."""
        if mask is None:
            mean = _ops.reduce_mean(inputs, axes, keepdims=True)
            return mean, _ops.reduce_mean(_ops.square(inputs - mean), axes, keepdims=True)
        keep = _ops.broadcast_to(_ops.expand_dims(_ops.cast(mask, "bool"), -1),
                                 _ops.shape(inputs))
        zero = _ops.zeros_like(inputs)
        count = _ops.reduce_sum(_ops.cast(keep, inputs.dtype), axes, keepdims=True) + 1e-7
        mean = _ops.reduce_sum(_ops.where(keep, inputs, zero), axes, keepdims=True) / count
        dev = _ops.where(keep, inputs - mean, zero)
        return mean, _ops.reduce_sum(_ops.square(dev), axes, keepdims=True) / count

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def get_config(self):
        s = _init.serialize
        return {
            **super().get_config(), "axis": self.axis, "momentum": self.momentum,
            "epsilon": self.epsilon, "center": self.center, "scale": self.scale,
            "beta_initializer": s(self.beta_initializer),
            "gamma_initializer": s(self.gamma_initializer),
            "moving_mean_initializer": s(self.moving_mean_initializer),
            "moving_variance_initializer": s(self.moving_variance_initializer),
            "beta_regularizer": _regularizers.serialize(self.beta_regularizer),
            "gamma_regularizer": _regularizers.serialize(self.gamma_regularizer),
            "beta_constraint": _constraints.serialize(self.beta_constraint),
            "gamma_constraint": _constraints.serialize(self.gamma_constraint),
            "synchronized": self.synchronized, "renorm": self.renorm,
            "renorm_clipping": self.renorm_clipping,
            "renorm_momentum": self.renorm_momentum,
        }
