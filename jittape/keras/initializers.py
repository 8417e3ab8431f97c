"""``jt.initializers``: Keras' weight initializers, drawn through ``jt.random``.

Each initializer is a callable ``init(shape, dtype="float32") -> jt.Tensor``. Look one
up by name (``"glorot_uniform"``, ``"GlorotUniform"``), pass an instance, or pass any
callable of ``(shape, dtype)``. Without ``seed=`` they draw from the global generator,
so ``jt.random.set_seed`` makes a model's initial weights reproducible; with
``seed=k`` every call gives the same values.

Fans, as Keras computes them for a kernel of shape ``shape``: a vector has
``fan_in = fan_out = shape[0]``; a matrix ``(fan_in, fan_out)``; a convolution
kernel ``(*receptive_field, in, out)`` multiplies both by the receptive field size.

``VarianceScaling(scale, mode, distribution)``, with ``n`` = fan_in, fan_out or
their mean (``mode``) and ``s = scale / max(1, n)``:

- ``"truncated_normal"``: normal truncated at 2 standard deviations with
  ``stddev = sqrt(s) / 0.87962566103423978`` (the truncation shrinks the standard
  deviation by that factor; dividing by it gives the result a variance of ``s``);
- ``"untruncated_normal"``: normal with ``stddev = sqrt(s)``;
- ``"uniform"``: uniform in ``[-limit, limit)`` with ``limit = sqrt(3 s)``.

``glorot_uniform`` = (1, fan_avg, uniform), ``glorot_normal`` = (1, fan_avg,
truncated_normal), ``he_normal`` = (2, fan_in, truncated_normal), ``he_uniform`` =
(2, fan_in, uniform), ``lecun_normal`` = (1, fan_in, truncated_normal),
``lecun_uniform`` = (1, fan_in, uniform).

``input_axes`` and ``output_axes`` (Keras 3.15), when both are given, name the axes whose
sizes multiply into fan_in and fan_out instead.

``get_config()``/``from_config()`` and ``serialize``/``deserialize`` use Keras 3's
config format (``{"module": "keras.initializers", "class_name": "GlorotUniform",
"config": {"seed": None, ...}, "registered_name": None}``).
"""

from __future__ import annotations

import math
import re

import numpy as np

from .saving import serialization as _config
from .. import random as _random
from ..dtypes import as_dtype
from ..tensor import convert_to_tensor

__all__ = [
    "Initializer", "Zeros", "Ones", "Constant", "RandomUniform", "RandomNormal",
    "TruncatedNormal", "VarianceScaling", "GlorotUniform", "GlorotNormal", "HeNormal",
    "HeUniform", "LecunNormal", "LecunUniform", "zeros", "ones", "constant",
    "glorot_uniform", "glorot_normal", "he_normal", "he_uniform", "lecun_normal",
    "lecun_uniform", "random_uniform", "random_normal", "truncated_normal", "variance_scaling",
    "get", "serialize", "deserialize", "compute_fans",
]

TRUNCATION_STDDEV_FACTOR = 0.87962566103423978  # std of a unit normal truncated at +-2


def compute_fans(shape, input_axes=None, output_axes=None) -> tuple[float, float]:
    """``(fan_in, fan_out)`` of a weight of ``shape``, as Keras computes them (from
    ``input_axes`` and ``output_axes`` when both are given)."""
    shape = tuple(int(d) for d in shape)
    if input_axes is not None and output_axes is not None:
        return (float(math.prod(shape[a] for a in input_axes)),
                float(math.prod(shape[a] for a in output_axes)))
    if len(shape) == 0:
        return 1.0, 1.0
    if len(shape) == 1:
        return float(shape[0]), float(shape[0])
    if len(shape) == 2:
        return float(shape[0]), float(shape[1])
    receptive = math.prod(shape[:-2])
    return float(shape[-2] * receptive), float(shape[-1] * receptive)


class Initializer:
    """Base class: subclasses implement ``__call__(shape, dtype="float32")``."""

    def __call__(self, shape, dtype="float32"):
        raise NotImplementedError

    def get_config(self) -> dict:
        """The arguments that rebuild this initializer (``from_config``)."""
        return {}

    @classmethod
    def from_config(cls, config):
        """An initializer from ``get_config()``'s dict (Keras' too)."""
        return cls(**{k: _config.from_plain(v) for k, v in config.items()})

    def __repr__(self):
        return _config.config_repr(self)


class _Seeded(Initializer):
    def __init__(self, seed=None):
        self.seed = seed

    def _rng(self) -> np.random.Generator:
        # a fixed seed gives the same values at every call (Keras' behaviour)
        if self.seed is None:
            return _random.generator()
        return np.random.default_rng(int(self.seed))

    def get_config(self):
        return {"seed": self.seed}


def _float(dtype, who):
    dt = as_dtype(dtype)
    if not dt.is_floating:
        raise TypeError(f"{who}: expected a float dtype, got {dt.name}")
    return dt


def _dims(shape):
    return tuple(int(d) for d in shape)


class Zeros(Initializer):
    """All zeros."""

    def __call__(self, shape, dtype="float32"):
        return convert_to_tensor(np.zeros(_dims(shape), as_dtype(dtype)._np))


class Ones(Initializer):
    """All ones."""

    def __call__(self, shape, dtype="float32"):
        return convert_to_tensor(np.ones(_dims(shape), as_dtype(dtype)._np))


class Constant(Initializer):
    """Every element equal to ``value`` (a scalar, or an array broadcastable to the
    shape)."""

    def __init__(self, value=0.0):
        self.value = value

    def __call__(self, shape, dtype="float32"):
        dims = _dims(shape)
        v = np.asarray(self.value)
        try:
            a = np.broadcast_to(v, dims)
        except ValueError:
            raise ValueError(
                f"Constant initializer: value of shape {list(v.shape)} does not broadcast to "
                f"the weight shape {list(dims)}"
            ) from None
        return convert_to_tensor(np.array(a, dtype=as_dtype(dtype)._np))

    def get_config(self):
        return {"value": _config.to_plain(self.value)}


class RandomUniform(_Seeded):
    """Uniform in ``[minval, maxval)``."""

    def __init__(self, minval=-0.05, maxval=0.05, seed=None):
        super().__init__(seed)
        self.minval, self.maxval = minval, maxval

    def __call__(self, shape, dtype="float32"):
        dt = _float(dtype, "RandomUniform")
        a = self._rng().random(_dims(shape)) * (self.maxval - self.minval) + self.minval
        return convert_to_tensor(a.astype(dt._np))

    def get_config(self):
        return {"seed": self.seed, "minval": self.minval, "maxval": self.maxval}


class RandomNormal(_Seeded):
    """Normal with ``mean`` and ``stddev``."""

    def __init__(self, mean=0.0, stddev=0.05, seed=None):
        super().__init__(seed)
        self.mean, self.stddev = mean, stddev

    def __call__(self, shape, dtype="float32"):
        dt = _float(dtype, "RandomNormal")
        a = self._rng().standard_normal(_dims(shape)) * self.stddev + self.mean
        return convert_to_tensor(a.astype(dt._np))

    def get_config(self):
        return {"seed": self.seed, "mean": self.mean, "stddev": self.stddev}


class TruncatedNormal(_Seeded):
    """Normal with ``mean`` and ``stddev``, values beyond 2 ``stddev`` redrawn."""

    def __init__(self, mean=0.0, stddev=0.05, seed=None):
        super().__init__(seed)
        self.mean, self.stddev = mean, stddev

    def __call__(self, shape, dtype="float32"):
        dt = _float(dtype, "TruncatedNormal")
        z = _random._truncated_standard_normal(self._rng(), _dims(shape))
        return convert_to_tensor((z * self.stddev + self.mean).astype(dt._np))

    def get_config(self):
        return {"seed": self.seed, "mean": self.mean, "stddev": self.stddev}


class VarianceScaling(_Seeded):
    """Draws with variance ``scale / n``; see the module docstring for the formulas."""

    _MODES = ("fan_in", "fan_out", "fan_avg")
    _DISTRIBUTIONS = ("truncated_normal", "untruncated_normal", "uniform")

    def __init__(self, scale=1.0, mode="fan_in", distribution="truncated_normal", seed=None,
                 input_axes=None, output_axes=None):
        super().__init__(seed)
        if scale <= 0:
            raise ValueError(f"VarianceScaling: scale must be positive, got {scale}")
        if mode not in self._MODES:
            raise ValueError(f"VarianceScaling: mode must be one of {self._MODES}, got {mode!r}")
        if distribution == "normal":  # Keras' old name
            distribution = "truncated_normal"
        if distribution not in self._DISTRIBUTIONS:
            raise ValueError(
                f"VarianceScaling: distribution must be one of {self._DISTRIBUTIONS}, "
                f"got {distribution!r}"
            )
        self.scale, self.mode, self.distribution = float(scale), mode, distribution
        self.input_axes, self.output_axes = _axes(input_axes), _axes(output_axes)

    def variance(self, shape) -> float:
        """``scale / max(1, n)`` for a weight of ``shape``."""
        fan_in, fan_out = compute_fans(shape, self.input_axes, self.output_axes)
        n = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2}[self.mode]
        return self.scale / max(1.0, n)

    def __call__(self, shape, dtype="float32"):
        dt = _float(dtype, type(self).__name__)
        dims = _dims(shape)
        s = self.variance(dims)
        g = self._rng()
        if self.distribution == "truncated_normal":
            stddev = math.sqrt(s) / TRUNCATION_STDDEV_FACTOR
            a = _random._truncated_standard_normal(g, dims) * stddev
        elif self.distribution == "untruncated_normal":
            a = g.standard_normal(dims) * math.sqrt(s)
        else:
            limit = math.sqrt(3.0 * s)
            a = g.random(dims) * (2 * limit) - limit
        return convert_to_tensor(a.astype(dt._np))

    def get_config(self):
        return {"seed": self.seed, "scale": self.scale, "mode": self.mode,
                "distribution": self.distribution, "input_axes": self.input_axes,
                "output_axes": self.output_axes}


class GlorotUniform(VarianceScaling):
    """Uniform in ``[-limit, limit)``, ``limit = sqrt(6 / (fan_in + fan_out))``."""

    def __init__(self, seed=None, input_axes=None, output_axes=None):
        super().__init__(1.0, "fan_avg", "uniform", seed, input_axes, output_axes)

    def get_config(self):
        return _named_config(self)


class GlorotNormal(VarianceScaling):
    """Truncated normal, ``stddev = sqrt(2 / (fan_in + fan_out)) / 0.8796...``."""

    def __init__(self, seed=None, input_axes=None, output_axes=None):
        super().__init__(1.0, "fan_avg", "truncated_normal", seed, input_axes, output_axes)

    def get_config(self):
        return _named_config(self)


class HeNormal(VarianceScaling):
    """Truncated normal, ``stddev = sqrt(2 / fan_in) / 0.8796...``."""

    def __init__(self, seed=None, input_axes=None, output_axes=None):
        super().__init__(2.0, "fan_in", "truncated_normal", seed, input_axes, output_axes)

    def get_config(self):
        return _named_config(self)


class HeUniform(VarianceScaling):
    """Uniform in ``[-limit, limit)``, ``limit = sqrt(6 / fan_in)``."""

    def __init__(self, seed=None, input_axes=None, output_axes=None):
        super().__init__(2.0, "fan_in", "uniform", seed, input_axes, output_axes)

    def get_config(self):
        return _named_config(self)


class LecunNormal(VarianceScaling):
    """Truncated normal, ``stddev = sqrt(1 / fan_in) / 0.8796...``."""

    def __init__(self, seed=None, input_axes=None, output_axes=None):
        super().__init__(1.0, "fan_in", "truncated_normal", seed, input_axes, output_axes)

    def get_config(self):
        return _named_config(self)


class LecunUniform(VarianceScaling):
    """Uniform in ``[-limit, limit)``, ``limit = sqrt(3 / fan_in)``."""

    def __init__(self, seed=None, input_axes=None, output_axes=None):
        super().__init__(1.0, "fan_in", "uniform", seed, input_axes, output_axes)

    def get_config(self):
        return _named_config(self)


def _axes(axes):
    return None if axes is None else [int(a) for a in axes]


def _named_config(init):
    return {"seed": init.seed, "input_axes": init.input_axes, "output_axes": init.output_axes}


# Keras' snake_case aliases are the classes themselves (``zeros()`` is an initializer)
zeros = Zeros
ones = Ones
constant = Constant
random_uniform = RandomUniform
random_normal = RandomNormal
truncated_normal = TruncatedNormal
glorot_uniform = GlorotUniform
glorot_normal = GlorotNormal
he_normal = HeNormal
he_uniform = HeUniform
lecun_normal = LecunNormal
lecun_uniform = LecunUniform
variance_scaling = VarianceScaling

_BY_NAME = {
    "zeros": Zeros, "ones": Ones, "constant": Constant, "random_uniform": RandomUniform,
    "random_normal": RandomNormal, "truncated_normal": TruncatedNormal,
    "variance_scaling": VarianceScaling, "glorot_uniform": GlorotUniform,
    "glorot_normal": GlorotNormal, "he_normal": HeNormal, "he_uniform": HeUniform,
    "lecun_normal": LecunNormal, "lecun_uniform": LecunUniform,
    "xavier_uniform": GlorotUniform, "xavier_normal": GlorotNormal,
}


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


_CLASSES = {c.__name__: c for c in set(_BY_NAME.values()) | {Initializer}}


def serialize(initializer):
    """An initializer as Keras 3's config record (``None`` stays ``None``).

    Example:
        >>> jt.initializers.serialize(jt.initializers.Zeros())["class_name"]  # "Zeros"
    """
    return _config.serialize(initializer, "keras.initializers", _CLASSES, "initializer")


def deserialize(config, custom_objects=None):
    """The initializer a record from ``serialize`` (or Keras) describes."""
    return _config.deserialize(config, "initializer", _CLASSES, custom_objects, _BY_NAME)


def get(identifier):
    """An initializer from a name (``"he_normal"`` or ``"HeNormal"``), a config record,
    an instance or a class, or any callable ``(shape, dtype) -> values``. ``None`` gives
    ``None``."""
    if identifier is None:
        return None
    if isinstance(identifier, dict):
        return deserialize(identifier)
    if isinstance(identifier, str):
        cls = _BY_NAME.get(identifier) or _BY_NAME.get(_snake(identifier))
        if cls is None:
            raise ValueError(
                f"Could not interpret initializer identifier: {identifier!r}; known names: "
                f"{', '.join(sorted(_BY_NAME))}"
            )
        return cls()
    if isinstance(identifier, type) and issubclass(identifier, Initializer):
        return identifier()
    if callable(identifier):
        return identifier
    raise TypeError(
        f"Could not interpret initializer {identifier!r}: give a name, an Initializer or a "
        "callable (shape, dtype)"
    )


_config.export("initializer", ("keras.initializers",), Initializer, _CLASSES, serialize,
               deserialize)
