"""The pooling layers, as Keras 3's: ``MaxPooling1D/2D/3D`` and ``AveragePooling1D/2D/3D``
(windows, over ``jt.nn.max_pool`` / ``avg_pool``), ``GlobalMaxPooling1D/2D/3D`` and
``GlobalAveragePooling1D/2D/3D`` (reductions over the spatial axes), and Keras' short
aliases (``MaxPool2D``, ``AvgPool2D``, ``GlobalAvgPool2D``, ...)."""

from __future__ import annotations

import numbers

from ... import ops as _ops
from ...errors import InvalidArgumentError
from ...tensor import Tensor, convert_to_tensor
from ..naming import _fmt_shape
from .base import Layer


def _data_format(who, data_format):
    if data_format is None:
        return "channels_last"  # Keras' image_data_format()
    if data_format not in ("channels_last", "channels_first"):
        raise ValueError(
            f"{who}: invalid value for argument `data_format`: expected 'channels_last' or "
            f"'channels_first', got data_format={data_format!r}")
    return data_format


def _tuple(who, what, value, n):
    """Keras' ``standardize_tuple``: an int for every spatial axis, or ``n`` ints."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        vals = (int(value),) * n
    else:
        try:
            vals = tuple(int(v) for v in value)
        except TypeError:
            vals = ()
        if len(vals) != n:
            raise ValueError(f"{who}: the `{what}` argument must be a tuple of {n} integers. "
                             f"Received {what}={value!r}")
    if any(v <= 0 for v in vals):
        raise ValueError(f"{who}: the `{what}` argument must be a tuple of {n} positive "
                         f"integers. Received {what}={value!r}")
    return vals


def _check_rank(layer, inputs, ns):
    inputs = inputs if isinstance(inputs, Tensor) else convert_to_tensor(inputs)
    if inputs._type.rank != ns + 2:
        raise InvalidArgumentError(
            f'Input 0 of layer "{layer.name}" is incompatible with the layer: expected '
            f"ndim={ns + 2}, found ndim={inputs._type.rank}. Full shape received: "
            f"{_fmt_shape(tuple(inputs.shape))}")
    return inputs


class _Pooling(Layer):
    """Windows of ``pool_size`` every ``strides`` (default: ``pool_size``) over the
    spatial axes, ``padding`` ``"valid"`` or ``"same"`` (TF's: ``"same"`` averages only
    the positions inside the input)."""

    _rank = 2
    _type = "MAX"

    def __init__(self, pool_size, strides=None, padding="valid", data_format=None, name=None,
                 **kwargs):
        super().__init__(name=name, **kwargs)
        who = type(self).__name__
        ns = self._rank
        self.pool_size = _tuple(who, "pool_size", pool_size, ns)
        self.strides = self.pool_size if strides is None else _tuple(who, "strides", strides, ns)
        pad = padding.lower() if isinstance(padding, str) else padding
        if pad not in ("valid", "same"):
            raise ValueError(f"{who}: the `padding` argument must be one of 'valid', 'same'. "
                             f"Received: padding={padding!r}")
        self.padding = pad
        self.data_format = _data_format(who, data_format)

    def call(self, inputs):
        x = _check_rank(self, inputs, self._rank)
        first = self.data_format == "channels_first"
        fn = _ops.nn.max_pool if self._type == "MAX" else _ops.nn.avg_pool
        return fn(x, self.pool_size, self.strides, self.padding.upper(),
                  data_format="NC" + "DHW"[3 - self._rank:] if first else None)

    def compute_output_shape(self, input_shape):
        shape = tuple(input_shape)
        first = self.data_format == "channels_first"
        spatial = shape[2:] if first else shape[1:-1]
        out = []
        for n, k, s in zip(spatial, self.pool_size, self.strides):
            if n is None:
                out.append(None)
            elif self.padding == "same":
                out.append(-(-int(n) // s))
            else:
                out.append(max((int(n) - k) // s + 1, 0))
        if first:
            return (shape[0], shape[1], *out)
        return (shape[0], *out, shape[-1])

    def get_config(self):
        return {**super().get_config(), "pool_size": self.pool_size, "padding": self.padding,
                "strides": self.strides, "data_format": self.data_format}


_REQUIRED = object()


def _pooling(name, rank, kind, default=_REQUIRED):
    """A pooling class; ``default``: its ``pool_size`` default (Keras 3's average pooling
    layers have none)."""
    if default is _REQUIRED:
        def __init__(self, pool_size, strides=None, padding="valid", data_format=None,
                     name=None, **kwargs):
            _Pooling.__init__(self, pool_size, strides, padding, data_format, name, **kwargs)
    else:
        def __init__(self, pool_size=default, strides=None, padding="valid", data_format=None,
                     name=None, **kwargs):
            _Pooling.__init__(self, pool_size, strides, padding, data_format, name, **kwargs)

    what = "maximum" if kind == "MAX" else "average"
    doc = (f"The {what} of each window over {rank} spatial axis{'es' if rank > 1 else ''}, "
           f"as Keras 3's ``{name}``"
           + (f" (default ``pool_size={default}``)." if default is not _REQUIRED else "."))
    return type(name, (_Pooling,), {"__init__": __init__, "__doc__": doc, "_rank": rank,
                                    "_type": kind, "__module__": __name__})


MaxPooling1D = _pooling("MaxPooling1D", 1, "MAX", 2)
MaxPooling2D = _pooling("MaxPooling2D", 2, "MAX", (2, 2))
MaxPooling3D = _pooling("MaxPooling3D", 3, "MAX", (2, 2, 2))
AveragePooling1D = _pooling("AveragePooling1D", 1, "AVG")
AveragePooling2D = _pooling("AveragePooling2D", 2, "AVG")
AveragePooling3D = _pooling("AveragePooling3D", 3, "AVG")


class _GlobalPooling(Layer):
    """The maximum or the mean over all spatial axes; ``keepdims`` keeps them as size 1."""

    _rank = 2
    _type = "MAX"

    def __init__(self, data_format=None, keepdims=False, **kwargs):
        super().__init__(**kwargs)
        self.data_format = _data_format(type(self).__name__, data_format)
        self.keepdims = bool(keepdims)

    def _axes(self):
        start = 2 if self.data_format == "channels_first" else 1
        return list(range(start, start + self._rank))

    def call(self, inputs):
        x = _check_rank(self, inputs, self._rank)
        fn = _ops.reduce_max if self._type == "MAX" else _ops.reduce_mean
        return fn(x, axis=self._axes(), keepdims=self.keepdims)

    def compute_output_shape(self, input_shape):
        shape = tuple(input_shape)
        axes = set(self._axes())
        if self.keepdims:
            return tuple(1 if a in axes else d for a, d in enumerate(shape))
        return tuple(d for a, d in enumerate(shape) if a not in axes)

    def get_config(self):
        return {**super().get_config(), "data_format": self.data_format,
                "keepdims": self.keepdims}


def _global(name, rank, kind, call=None):
    what = "maximum" if kind == "MAX" else "mean"
    doc = (f"The {what} over the {rank} spatial axis{'es' if rank > 1 else ''} "
           f"(``keepdims`` keeps them as size 1), as Keras 3's ``{name}``.")
    body = {"__doc__": doc, "_rank": rank, "_type": kind, "__module__": __name__}
    if call is not None:
        body["call"] = call
    return type(name, (_GlobalPooling,), body)


def _average_over_steps(self, inputs, mask=None):
    """Keras 3's rule: with a ``mask`` (batch, steps), the mean of the steps it keeps
    (NaN for a sample that keeps none, as Keras' 0 / 0)."""
    if mask is None:
        return _GlobalPooling.call(self, inputs)
    x = _check_rank(self, inputs, 1)
    m = _ops.cast(mask if isinstance(mask, Tensor) else convert_to_tensor(mask), x.dtype)
    m = _ops.expand_dims(m, 2 if self.data_format == "channels_last" else 1)
    axis = self._axes()
    return (_ops.reduce_sum(x * m, axis=axis, keepdims=self.keepdims)
            / _ops.reduce_sum(m, axis=axis, keepdims=self.keepdims))


GlobalMaxPooling1D = _global("GlobalMaxPooling1D", 1, "MAX")
GlobalMaxPooling2D = _global("GlobalMaxPooling2D", 2, "MAX")
GlobalMaxPooling3D = _global("GlobalMaxPooling3D", 3, "MAX")
GlobalAveragePooling1D = _global("GlobalAveragePooling1D", 1, "AVG", _average_over_steps)
GlobalAveragePooling2D = _global("GlobalAveragePooling2D", 2, "AVG")
GlobalAveragePooling3D = _global("GlobalAveragePooling3D", 3, "AVG")

# Keras' aliases: the same classes
MaxPool1D, MaxPool2D, MaxPool3D = MaxPooling1D, MaxPooling2D, MaxPooling3D
AvgPool1D, AvgPool2D, AvgPool3D = AveragePooling1D, AveragePooling2D, AveragePooling3D
GlobalMaxPool1D, GlobalMaxPool2D, GlobalMaxPool3D = (
    GlobalMaxPooling1D, GlobalMaxPooling2D, GlobalMaxPooling3D)
GlobalAvgPool1D, GlobalAvgPool2D, GlobalAvgPool3D = (
    GlobalAveragePooling1D, GlobalAveragePooling2D, GlobalAveragePooling3D)
