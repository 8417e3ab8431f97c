"""Layers that pass one tensor through a rule of their own: ``Reshape``, ``Identity``,
``Lambda``, the layer that records an operator applied to a functional-API
``KerasTensor`` (``x + y``, ``x[:, 0]``), and the image models' reshaping layers
(``ZeroPadding1D/2D/3D``, ``Cropping1D/2D/3D``, ``UpSampling1D/2D/3D``, ``Permute``,
``RepeatVector``)."""

from __future__ import annotations

import inspect
import math
import numbers

from .. import keras_tensor as _kt
from ... import image as _image
from ... import ops as _ops
from ...errors import InvalidArgumentError
from ..naming import _fmt_shape, _unique_name
from ..saving.serialization_lib import (deserialize_keras_object, func_dump, func_load,
                                        in_safe_mode, serialize_keras_object)
from ...tensor import Tensor
from .base import Layer
from .utils import _data_format, _int_tuple, _pairs


class Reshape(Layer):
    """Reshape each sample to ``target_shape`` (the batch dimension is kept; one entry
    may be -1)."""

    def __init__(self, target_shape, **kwargs):
        super().__init__(**kwargs)
        self.target_shape = tuple(int(d) for d in target_shape)
        if sum(d == -1 for d in self.target_shape) > 1 or any(
            d < -1 or d == 0 for d in self.target_shape
        ):
            raise ValueError(f"Reshape: invalid target_shape {self.target_shape}")

    def call(self, inputs):
        inputs = inputs if isinstance(inputs, Tensor) else _ops.identity(inputs)
        shape = tuple(inputs._type.shape)
        size = math.prod(inputs.shape[1:]) if all(
            isinstance(d, numbers.Integral) for d in inputs.shape[1:]) else None
        known = math.prod(d for d in self.target_shape if d != -1)
        if size is not None and (
            (-1 not in self.target_shape and known != size)
            or (-1 in self.target_shape and size % known)
        ):
            raise InvalidArgumentError(
                f'layer "{self.name}" (Reshape): total size of the input sample '
                f"{_fmt_shape(inputs.shape[1:])} ({size}) does not fit target_shape "
                f"{_fmt_shape(self.target_shape)}")
        return _ops.reshape(inputs, (shape[0],) + self.target_shape)

    def compute_output_shape(self, input_shape):
        if -1 in self.target_shape:
            rest = math.prod(input_shape[1:]) // math.prod(
                d for d in self.target_shape if d != -1)
            return (input_shape[0],) + tuple(rest if d == -1 else d for d in self.target_shape)
        return (input_shape[0],) + self.target_shape

    def get_config(self):
        return {**super().get_config(), "target_shape": list(self.target_shape)}


class Identity(Layer):
    """Returns its input unchanged."""

    def call(self, inputs):
        return inputs


def _parameters(fn) -> frozenset:
    """The names ``fn`` takes (none when Python cannot tell, as for some builtins)."""
    try:
        return frozenset(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return frozenset()


class Lambda(Layer):
    """Wrap a function of tensors as a layer (``Lambda(lambda t: t * 2)``), so jittape ops
    can be used in a functional model. ``arguments`` are extra keyword arguments."""

    def __init__(self, function, output_shape=None, mask=None, arguments=None, **kwargs):
        super().__init__(**kwargs)
        if not callable(function):
            raise TypeError(f"Lambda: function must be callable, got {type(function).__name__}")
        self.function = function
        self.arguments = dict(arguments or {})
        self._output_shape = output_shape

    def call(self, inputs, mask=None, training=None):
        # Keras 3's signature; the function gets mask / training when it takes them
        kwargs = dict(self.arguments)
        params = _parameters(self.function)
        if "mask" in params:
            kwargs["mask"] = mask
        if "training" in params:
            kwargs["training"] = training
        return self.function(inputs, **kwargs)

    def compute_output_shape(self, input_shape):
        if self._output_shape is not None:
            shape = self._output_shape(input_shape) if callable(self._output_shape) else (
                (input_shape[0],) + tuple(self._output_shape))
            return tuple(shape)
        return super().compute_output_shape(input_shape)

    def get_config(self):
        """Keras 3's config: the function as its record (a named function by its
        registered name, so register it or pass it in ``custom_objects`` to load; a
        ``lambda`` as its bytecode, Keras' ``__lambda__`` record, which only
        ``safe_mode=False`` loads, seeing only Python's builtins as its globals)."""
        config = {**super().get_config(), "function": _function_config(self.function)}
        if self._output_shape is not None:
            config["output_shape"] = (_function_config(self._output_shape)
                                      if callable(self._output_shape)
                                      else list(self._output_shape))
        config["arguments"] = serialize_keras_object(self.arguments)
        return config

    @classmethod
    def from_config(cls, config):
        """Refuses a lambda's bytecode unless an enclosing load has ``safe_mode=False``
        (Keras 3.15 fails closed so too)."""
        config = dict(config)
        for key in ("function", "output_shape"):
            value = config.get(key)
            if isinstance(value, dict) and value.get("class_name") == "__lambda__":
                if in_safe_mode() is not False:
                    raise ValueError(
                        f"Requested the deserialization of a `Lambda` layer whose `{key}` is "
                        "a Python lambda. This carries a potential risk of arbitrary code "
                        "execution and thus it is disallowed by default. If you trust the "
                        "source of the artifact, pass `safe_mode=False` to the loading "
                        "function (or give the layer a named, registered function)")
                inner = value["config"]
                config[key] = func_load((inner["code"], inner["defaults"], inner["closure"]))
            elif isinstance(value, dict):
                config[key] = deserialize_keras_object(value)
            elif isinstance(value, list):
                config[key] = tuple(value)
        if config.get("arguments") is not None:
            config["arguments"] = deserialize_keras_object(config["arguments"])
        return super().from_config(config)


def _function_config(fn):
    """A Lambda's function as Keras' Lambda writes it (a lambda as its bytecode)."""
    if getattr(fn, "__name__", None) == "<lambda>":
        code, defaults, closure = func_dump(fn)
        return {"class_name": "__lambda__",
                "config": {"code": code, "defaults": defaults, "closure": closure}}
    return serialize_keras_object(fn)


class _OpLayer(Layer):
    """An operator applied to a ``KerasTensor`` (``x + y``): the function of the operands."""

    def __init__(self, fn, op_name):
        super().__init__(name=_unique_name(op_name))
        self._fn = fn

    def _convert_input(self, x):
        return x  # operands stay as given (a Python number stays a number)

    def call(self, inputs):
        if isinstance(inputs, list):
            return self._fn(*inputs)
        return self._fn(inputs)


_kt._OP_LAYER = _OpLayer  # the layer an operator on a KerasTensor calls


# ---------------------------------------------------------------------------
# The image models' reshaping layers: padding, cropping, upsampling, Permute, RepeatVector


class _FixedRank(Layer):
    """A layer whose inputs have one rank, ``_ndim`` (Keras' ``InputSpec(ndim=...)``),
    checked at every call; ``_spatial`` is the number of spatial axes, which sit after
    the batch axis, or after the channels with ``data_format="channels_first"``."""

    _ndim = 3
    data_format = "channels_last"

    def _expect_rank(self, shape):
        if len(shape) != self._ndim:
            raise InvalidArgumentError(
                f'Input 0 of layer "{self.name}" is incompatible with the layer: expected '
                f"ndim={self._ndim}, found ndim={len(shape)}. Full shape received: "
                f"{_fmt_shape(shape)}")

    def build(self, input_shape):
        self._expect_rank(input_shape)

    def _check_input(self, shape):
        self._expect_rank(shape)

    def _spatial_axes(self) -> tuple:
        first = 2 if self.data_format == "channels_first" else 1
        return tuple(range(first, first + self._ndim - 2))

    def call(self, inputs):
        inputs = inputs if isinstance(inputs, Tensor) else _ops.identity(inputs)
        return self._apply(inputs)


class _ZeroPadding(_FixedRank):
    """Zeros added before and after each spatial axis: ``padding[i] = (before, after)``."""

    def __init__(self, padding, data_format=None, **kwargs):
        super().__init__(**kwargs)
        who = type(self).__name__
        self.data_format = _data_format(who, data_format)
        n = self._ndim - 2
        self.padding = (_int_tuple(who, padding, 2, "padding", allow_zero=True) if n == 1
                        else _pairs(who, padding, n, "padding"))

    def _pads(self):
        return (self.padding,) if self._ndim == 3 else self.padding

    def _apply(self, inputs):
        pads = [[0, 0]] * self._ndim
        for axis, pair in zip(self._spatial_axes(), self._pads()):
            pads[axis] = list(pair)
        return _ops.pad(inputs, pads)

    def compute_output_shape(self, input_shape):
        out = list(input_shape)
        for axis, (lo, hi) in zip(self._spatial_axes(), self._pads()):
            if out[axis] is not None:
                out[axis] += lo + hi
        return tuple(out)

    def get_config(self):
        return {**super().get_config(), "padding": self.padding,
                "data_format": self.data_format}


class ZeroPadding1D(_ZeroPadding):
    """Zeros at the start and end of the steps of ``(batch, steps, features)`` inputs
    (``padding``: an int, or ``(before, after)``).

    Example:
        >>> jt.layers.ZeroPadding1D(2)(jt.ones([1, 3, 4])).shape  # (1, 7, 4)
    """

    _ndim = 3

    def __init__(self, padding=1, data_format=None, **kwargs):
        super().__init__(padding, data_format, **kwargs)


class ZeroPadding2D(_ZeroPadding):
    """Zero rows and columns around images (``padding``: an int, ``(rows, cols)`` or
    ``((top, bottom), (left, right))``)."""

    _ndim = 4

    def __init__(self, padding=(1, 1), data_format=None, **kwargs):
        super().__init__(padding, data_format, **kwargs)


class ZeroPadding3D(_ZeroPadding):
    """Zeros around volumes (``padding``: an int, three ints or three pairs)."""

    _ndim = 5

    def __init__(self, padding=((1, 1), (1, 1), (1, 1)), data_format=None, **kwargs):
        super().__init__(padding, data_format, **kwargs)


class _Cropping(_FixedRank):
    """``cropping[i] = (before, after)`` entries cut from each spatial axis; an axis must
    keep at least one entry (Keras' check)."""

    def __init__(self, cropping, data_format=None, **kwargs):
        super().__init__(**kwargs)
        who = type(self).__name__
        n = self._ndim - 2
        if n == 1:
            self.cropping = _int_tuple(who, cropping, 2, "cropping", allow_zero=True)
        else:
            self.data_format = _data_format(who, data_format)
            self.cropping = _pairs(who, cropping, n, "cropping")

    def _crops(self):
        return (self.cropping,) if self._ndim == 3 else self.cropping

    def _checked(self, shape):
        for axis, (lo, hi) in zip(self._spatial_axes(), self._crops()):
            if isinstance(shape[axis], numbers.Integral) and lo + hi >= shape[axis]:
                raise InvalidArgumentError(
                    f'layer "{self.name}" ({type(self).__name__}): the cropping '
                    f"{self.cropping} must leave at least one entry of each spatial axis, "
                    f"got inputs of shape {_fmt_shape(shape)}")

    def _apply(self, inputs):
        self._checked(tuple(inputs.shape))
        index = [slice(None)] * self._ndim
        for axis, (lo, hi) in zip(self._spatial_axes(), self._crops()):
            index[axis] = slice(lo, -hi if hi else None)  # a negative end: any length
        return inputs[tuple(index)]

    def compute_output_shape(self, input_shape):
        self._checked(tuple(input_shape))
        out = list(input_shape)
        for axis, (lo, hi) in zip(self._spatial_axes(), self._crops()):
            if out[axis] is not None:
                out[axis] -= lo + hi
        return tuple(out)

    def get_config(self):
        config = {**super().get_config(), "cropping": self.cropping}
        if self._ndim > 3:  # Keras' Cropping1D has no data_format
            config["data_format"] = self.data_format
        return config


class Cropping1D(_Cropping):
    """Cut ``(start, end)`` steps from ``(batch, steps, features)`` inputs.

    Example:
        >>> jt.layers.Cropping1D((1, 2))(jt.ones([1, 5, 4])).shape  # (1, 2, 4)
    """

    _ndim = 3

    def __init__(self, cropping=(1, 1), **kwargs):
        super().__init__(cropping, **kwargs)


class Cropping2D(_Cropping):
    """Cut rows and columns from images (``cropping``: an int, ``(rows, cols)`` or
    ``((top, bottom), (left, right))``)."""

    _ndim = 4

    def __init__(self, cropping=((0, 0), (0, 0)), data_format=None, **kwargs):
        super().__init__(cropping, data_format, **kwargs)


class Cropping3D(_Cropping):
    """Cut the borders of volumes (``cropping``: an int, three ints or three pairs)."""

    _ndim = 5

    def __init__(self, cropping=((1, 1), (1, 1), (1, 1)), data_format=None, **kwargs):
        super().__init__(cropping, data_format, **kwargs)


class _UpSampling(_FixedRank):
    """Each entry of the spatial axes repeated ``size[i]`` times (nearest neighbour)."""

    def _sizes(self) -> tuple:
        return (self.size,) if self._ndim == 3 else self.size

    def _apply(self, inputs):
        y = inputs
        for axis, k in zip(self._spatial_axes(), self._sizes()):
            if k != 1:
                y = _ops.repeat(y, k, axis=axis)
        return y

    def compute_output_shape(self, input_shape):
        out = list(input_shape)
        for axis, k in zip(self._spatial_axes(), self._sizes()):
            if out[axis] is not None:
                out[axis] *= k
        return tuple(out)


class UpSampling1D(_UpSampling):
    """Each step of ``(batch, steps, features)`` inputs repeated ``size`` times.

    Example:
        >>> jt.layers.UpSampling1D(3)(jt.ones([1, 2, 4])).shape  # (1, 6, 4)
    """

    _ndim = 3

    def __init__(self, size=2, **kwargs):
        super().__init__(**kwargs)
        if isinstance(size, bool) or not isinstance(size, numbers.Integral):
            raise TypeError(f"UpSampling1D: expected an integer value for `size`, got "
                            f"{type(size).__name__} {size!r}")
        if size <= 0:
            raise ValueError(f"UpSampling1D: argument `size` should be a positive integer. "
                             f"Received: size={size}")
        self.size = int(size)

    def get_config(self):
        return {**super().get_config(), "size": self.size}


# Keras 3's other interpolations (``ops.image.resize``'s), which jt.image.resize lacks
_RESIZE_ONLY_IN_KERAS = ("bicubic", "lanczos3", "lanczos5", "area")


class UpSampling2D(_UpSampling):
    """Images enlarged ``size = (rows, cols)`` times: ``interpolation="nearest"`` repeats
    each pixel, ``"bilinear"`` interpolates as ``jt.image.resize`` (``tf.image.resize``,
    half-pixel centers, no antialiasing: Keras' TF backend; the result is float32)."""

    _ndim = 4

    def __init__(self, size=(2, 2), data_format=None, interpolation="nearest", **kwargs):
        super().__init__(**kwargs)
        self.data_format = _data_format("UpSampling2D", data_format)
        self.size = _int_tuple("UpSampling2D", size, 2, "size")
        self.interpolation = str(interpolation).lower()
        if self.interpolation in _RESIZE_ONLY_IN_KERAS:
            raise NotImplementedError(
                f"UpSampling2D: interpolation={interpolation!r} is not implemented in "
                "jittape (nearest and bilinear are)")
        if self.interpolation not in ("nearest", "bilinear"):
            raise ValueError(f"UpSampling2D: unknown interpolation {interpolation!r}; "
                             "expected 'nearest' or 'bilinear'")

    def _apply(self, inputs):
        if self.interpolation == "nearest":
            return super()._apply(inputs)
        y = inputs
        if self.data_format == "channels_first":
            y = _ops.transpose(y, [0, 2, 3, 1])
        h, w = y.shape[1], y.shape[2]
        if h is None or w is None:
            raise InvalidArgumentError(
                f'layer "{self.name}" (UpSampling2D): bilinear interpolation needs the '
                f"height and width of the inputs, got shape {_fmt_shape(inputs.shape)}")
        y = _image.resize(y, (h * self.size[0], w * self.size[1]), method="bilinear")
        if self.data_format == "channels_first":
            y = _ops.transpose(y, [0, 3, 1, 2])
        return y

    def get_config(self):
        return {**super().get_config(), "size": self.size, "data_format": self.data_format,
                "interpolation": self.interpolation}


class UpSampling3D(_UpSampling):
    """Volumes enlarged ``size = (d1, d2, d3)`` times by repetition."""

    _ndim = 5

    def __init__(self, size=(2, 2, 2), data_format=None, **kwargs):
        super().__init__(**kwargs)
        self.data_format = _data_format("UpSampling3D", data_format)
        self.size = _int_tuple("UpSampling3D", size, 3, "size")

    def get_config(self):
        return {**super().get_config(), "size": self.size, "data_format": self.data_format}


class Permute(_FixedRank):
    """The axes of each sample permuted: ``dims`` numbers them from 1 (the batch axis
    stays first). ``Permute((2, 1))`` swaps the two axes of ``(batch, steps, features)``."""

    def __init__(self, dims, **kwargs):
        super().__init__(**kwargs)
        self.dims = tuple(dims)
        if sorted(self.dims) != list(range(1, len(self.dims) + 1)):
            raise ValueError(
                "Permute: invalid permutation argument `dims`. The set of indices in `dims` "
                f"must be consecutive and start from 1. Received dims={dims!r}")
        self.dims = tuple(int(d) for d in self.dims)
        self._ndim = len(self.dims) + 1

    def _apply(self, inputs):
        return _ops.transpose(inputs, (0,) + self.dims)

    def compute_output_shape(self, input_shape):
        return (input_shape[0],) + tuple(input_shape[d] for d in self.dims)

    def get_config(self):
        return {**super().get_config(), "dims": self.dims}


class RepeatVector(_FixedRank):
    """``(batch, features)`` inputs repeated ``n`` times: ``(batch, n, features)``."""

    _ndim = 2

    def __init__(self, n, **kwargs):
        super().__init__(**kwargs)
        if isinstance(n, bool) or not isinstance(n, numbers.Integral):
            raise TypeError(f"RepeatVector: expected an integer value for `n`, got "
                            f"{type(n).__name__} {n!r}")
        if n <= 0:
            raise ValueError(f"RepeatVector: argument `n` should be a positive integer. "
                             f"Received: n={n}")
        self.n = int(n)

    def _apply(self, inputs):
        return _ops.repeat(_ops.expand_dims(inputs, 1), self.n, axis=1)

    def compute_output_shape(self, input_shape):
        return (input_shape[0], self.n, input_shape[1])

    def get_config(self):
        return {**super().get_config(), "n": self.n}
