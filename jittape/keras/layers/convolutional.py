"""The convolution layers, as Keras 3's ``keras/src/layers/convolutional/``: ``Conv1D/2D/3D``,
``Conv1D/2D/3DTranspose``, ``DepthwiseConv1D/2D`` and ``SeparableConv1D/2D``.

Each is written with ``jt.nn``'s convolutions (channels last inside; ``channels_first``
inputs are transposed around them by those functions). Weights, shapes, configs and
errors are Keras 3.15's, so that a ``.weights.h5`` file and a config go both ways:

- ``Conv*``: ``kernel (*kernel_size, in_channels // groups, filters)``, ``bias (filters,)``.
- ``Conv*Transpose``: ``kernel (*kernel_size, filters, in_channels)`` (the transposed
  convolution of TF: the gradient of a convolution with that kernel).
- ``DepthwiseConv*``: ``kernel (*kernel_size, in_channels, depth_multiplier)`` (Keras 3
  names it ``kernel``), ``bias (in_channels * depth_multiplier,)``; output channel
  ``c * depth_multiplier + m``.
- ``SeparableConv*``: ``depthwise_kernel`` as above, ``pointwise_kernel (1, ..., 1,
  in_channels * depth_multiplier, filters)``, ``bias (filters,)``.

The output size of an axis of ``n`` entries, a window spanning ``span = (k - 1) * d + 1``
and a stride ``s``: ``floor((n - span) / s) + 1`` with ``"valid"`` (an error when it is
not positive, as Keras checks when the layer is built), ``ceil(n / s)`` with ``"same"``
(TF's split: the odd pad at the end) and ``"causal"`` (``Conv1D`` only: ``span - 1``
zeros before the steps, so that ``output[t]`` reads no input after ``t``). The transposes
use Keras' ``deconv_output_length`` (see ``_transpose_length``).
"""

from __future__ import annotations

import numbers

from .. import constraints as _constraints
from .. import initializers as _init
from ... import ops as _ops
from .. import regularizers as _regularizers
from ...errors import InvalidArgumentError
from ..keras_tensor import _CALLS
from ..naming import _fmt_shape
from .activations import _ActivationAttr, _serialize_activation, get_activation
from .base import Layer
from .utils import _data_format, _int_tuple, _promote

_TF_FORMATS = {(1, False): "NWC", (1, True): "NCW", (2, False): "NHWC", (2, True): "NCHW",
               (3, False): "NDHWC", (3, True): "NCDHW"}


def _positive(who, name, value):
    """Keras' check of ``filters`` and ``depth_multiplier`` (a positive int here)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        raise ValueError(f"{who}: invalid value for argument `{name}`. Expected a strictly "
                         f"positive value. Received {name}={value!r}.")
    return int(value)


def _padding(who, value, causal):
    """Keras' ``standardize_padding``: the name in lower case."""
    allowed = ("valid", "same", "causal") if causal else ("valid", "same")
    name = value.lower() if isinstance(value, str) else value
    if name not in allowed:
        raise ValueError(f"{who}: the `padding` argument must be one of {set(allowed)}. "
                         f"Received: {value!r}")
    return name


def _transpose_length(n, k, s, padding, output_padding, d):
    """Keras' output length of a transposed convolution along one axis
    (``_get_output_shape_given_tf_padding``): with ``"valid"``, ``(n - 1) * s + span``
    plus ``output_padding`` (by default ``max(span, s) - span``, so that strides larger
    than the window leave no gap at the end); with ``"same"``, ``n * s``, or ``(n - 1) *
    s + span % 2 + output_padding`` when ``output_padding`` is given."""
    if n is None:
        return None
    span = (k - 1) * d + 1
    if padding == "valid":
        extra = max(span, s) - span if output_padding is None else output_padding
        return (n - 1) * s + span + extra
    if output_padding is None:
        return n * s
    return (n - 1) * s + span % 2 + output_padding


class _BaseConv(Layer):
    """What the convolution layers share: the window's arguments, the input checks, the
    bias and activation after the convolution, and the output shape (``_rank`` spatial
    axes; ``_channels_out`` and ``_convolve`` are the subclass's)."""

    _rank = 2
    activation = _ActivationAttr()

    def __init__(self, kernel_size, strides, padding, data_format, dilation_rate, activation,
                 use_bias, bias_initializer, bias_regularizer, bias_constraint,
                 activity_regularizer, causal=False, **kwargs):
        super().__init__(activity_regularizer=activity_regularizer, **kwargs)
        who = type(self).__name__
        n = self._rank
        self.kernel_size = _int_tuple(who, kernel_size, n, "kernel_size")
        self.strides = _int_tuple(who, strides, n, "strides")
        self.dilation_rate = _int_tuple(who, dilation_rate, n, "dilation_rate")
        self.padding = _padding(who, padding, causal)
        self.data_format = _data_format(who, data_format)
        self.activation = get_activation(activation)
        self.use_bias = bool(use_bias)
        self.bias_initializer = _init.get(bias_initializer)
        self.bias_regularizer = _regularizers.get(bias_regularizer)
        self.bias_constraint = _constraints.get(bias_constraint)
        self.bias = None

    def _no_strided_dilation(self):
        """Keras' check for ``Conv*`` and ``Conv*Transpose`` (the depthwise layers allow
        both)."""
        if max(self.strides) > 1 and max(self.dilation_rate) > 1:
            raise ValueError(
                f"{type(self).__name__}: `strides > 1` not supported in conjunction with "
                f"`dilation_rate > 1`. Received: strides={self.strides} and "
                f"dilation_rate={self.dilation_rate}")

    # -- shapes ----------------------------------------------------------------------
    def _channel_axis(self):
        return 1 if self.data_format == "channels_first" else -1

    def _spatial(self, shape):
        return tuple(shape[2:]) if self.data_format == "channels_first" else tuple(shape[1:-1])

    def _check_rank(self, shape):
        want = self._rank + 2
        if len(shape) != want:
            raise InvalidArgumentError(
                f'Input 0 of layer "{self.name}" is incompatible with the layer: expected '
                f"ndim={want}, found ndim={len(shape)}. Full shape received: "
                f"{_fmt_shape(shape)}")

    def _in_channels(self, shape):
        self._check_rank(shape)
        c = shape[self._channel_axis()]
        if c is None:
            raise InvalidArgumentError(
                f'layer "{self.name}": the channel dimension of the inputs to '
                f"{type(self).__name__} must be known, got shape {_fmt_shape(shape)}")
        return int(c)

    def _spatial_out(self, sizes):
        out = []
        for n, k, s, d in zip(sizes, self.kernel_size, self.strides, self.dilation_rate):
            if n is None:
                out.append(None)
            elif self.padding == "valid":
                out.append((n - (k - 1) * d - 1) // s + 1)
            else:
                out.append(-(-n // s))
        return tuple(out)

    def _check_size(self, shape):
        """Keras' check that a ``"valid"`` window fits the input (skipped on the
        functional API's probes, whose sizes stand for unknown ones)."""
        if _CALLS.probing or self.padding != "valid":
            return
        if any(o is not None and o <= 0 for o in self._spatial_out(self._spatial(shape))):
            raise InvalidArgumentError(
                f'layer "{self.name}" ({type(self).__name__}): computed output size would be '
                f"zero or negative: inputs of shape {_fmt_shape(shape)}, kernel_size="
                f"{self.kernel_size}, dilation_rate={self.dilation_rate}, strides="
                f"{self.strides}, padding={self.padding!r}")

    def _with_channels(self, shape, spatial, channels):
        if self.data_format == "channels_first":
            return (shape[0], channels, *spatial)
        return (shape[0], *spatial, channels)

    def compute_output_shape(self, input_shape):
        shape = tuple(input_shape)
        self._check_rank(shape)
        self._check_size(shape)
        return self._with_channels(shape, self._spatial_out(self._spatial(shape)),
                                   self._channels_out(shape[self._channel_axis()]))

    def _check_input(self, shape):
        want = self._built_channels
        if self._in_channels(shape) != want:
            raise self._incompatible(self._channel_axis(), want, shape)
        self._check_size(shape)

    def _tf_format(self):
        return _TF_FORMATS[(self._rank, self.data_format == "channels_first")]

    def _conv(self, x, kernel, padding=None):
        """``jt.nn.convolution`` with this layer's window (``padding``: explicit pairs
        instead of the layer's)."""
        return _ops.nn.convolution(
            x, kernel, strides=list(self.strides),
            padding=self.padding.upper() if padding is None else padding,
            data_format=self._tf_format(), dilations=list(self.dilation_rate))

    # -- the call --------------------------------------------------------------------
    def call(self, inputs):
        y = self._convolve(_promote(inputs, self.dtype))
        if self.use_bias:
            bias = self.bias
            if self.data_format == "channels_first":
                bias = _ops.reshape(bias, (-1,) + (1,) * self._rank)
            y = y + bias
        return self.activation(y)

    def _add_bias(self, n):
        if self.use_bias:
            self.bias = self.add_weight(
                shape=(n,), initializer=self.bias_initializer, name="bias",
                regularizer=self.bias_regularizer, constraint=self.bias_constraint)

    def _window_config(self):
        return {"kernel_size": self.kernel_size, "strides": self.strides,
                "padding": self.padding, "data_format": self.data_format,
                "dilation_rate": self.dilation_rate}

    def _tail_config(self):
        return {
            "bias_initializer": _init.serialize(self.bias_initializer),
            "bias_regularizer": _regularizers.serialize(self.bias_regularizer),
            "activity_regularizer": _regularizers.serialize(self.activity_regularizer),
            "bias_constraint": _constraints.serialize(self.bias_constraint),
        }


# ---------------------------------------------------------------------------
# Conv1D, Conv2D, Conv3D


class _Conv(_BaseConv):
    """``activation(conv(inputs, kernel) + bias)``: Keras 3's ``BaseConv``."""

    def __init__(self, filters, kernel_size, strides=1, padding="valid", data_format=None,
                 dilation_rate=1, groups=1, activation=None, use_bias=True,
                 kernel_initializer="glorot_uniform", bias_initializer="zeros",
                 kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 kernel_constraint=None, bias_constraint=None, lora_rank=None, lora_alpha=None,
                 **kwargs):
        super().__init__(kernel_size, strides, padding, data_format, dilation_rate, activation,
                         use_bias, bias_initializer, bias_regularizer, bias_constraint,
                         activity_regularizer, causal=self._rank == 1, **kwargs)
        who = type(self).__name__
        if lora_rank is not None or lora_alpha is not None:
            raise ValueError(f"{who}: LoRA (lora_rank={lora_rank!r}, lora_alpha="
                             f"{lora_alpha!r}) is not supported (only None)")
        self.filters = _positive(who, "filters", filters)
        if isinstance(groups, bool) or not isinstance(groups, numbers.Integral) or groups <= 0:
            raise ValueError(f"{who}: the number of groups must be a positive integer. "
                             f"Received: groups={groups!r}.")
        self.groups = int(groups)
        if self.filters % self.groups:
            raise ValueError(f"{who}: the number of filters must be evenly divisible by the "
                             f"number of groups. Received: groups={self.groups}, "
                             f"filters={self.filters}.")
        self._no_strided_dilation()
        self.kernel_initializer = _init.get(kernel_initializer)
        self.kernel_regularizer = _regularizers.get(kernel_regularizer)
        self.kernel_constraint = _constraints.get(kernel_constraint)
        self.kernel = None

    def _channels_out(self, channels):
        return self.filters

    def build(self, input_shape):
        c = self._in_channels(input_shape)
        if c % self.groups:
            raise InvalidArgumentError(
                f'layer "{self.name}" ({type(self).__name__}): the number of input channels '
                f"must be evenly divisible by the number of groups. Received groups="
                f"{self.groups}, but the input has {c} channels (full input shape is "
                f"{_fmt_shape(input_shape)}).")
        self._check_size(input_shape)
        self._built_channels = c
        self.kernel = self.add_weight(
            shape=self.kernel_size + (c // self.groups, self.filters), name="kernel",
            initializer=self.kernel_initializer, regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint)
        self._add_bias(self.filters)

    def _convolve(self, x):
        if self.padding != "causal":
            return self._conv(x, self.kernel)
        # left pad only: Keras pads the steps with (kernel_size - 1) * dilation zeros
        left = self.dilation_rate[0] * (self.kernel_size[0] - 1)
        return self._conv(x, self.kernel, padding=[[0, 0], [0, 0], [left, 0]]
                          if self.data_format == "channels_first" else
                          [[0, 0], [left, 0], [0, 0]])

    def get_config(self):
        return {
            **super().get_config(), "filters": self.filters, **self._window_config(),
            "groups": self.groups, "activation": _serialize_activation(self.activation),
            "use_bias": self.use_bias,
            "kernel_initializer": _init.serialize(self.kernel_initializer),
            "bias_initializer": _init.serialize(self.bias_initializer),
            "kernel_regularizer": _regularizers.serialize(self.kernel_regularizer),
            "bias_regularizer": _regularizers.serialize(self.bias_regularizer),
            "activity_regularizer": _regularizers.serialize(self.activity_regularizer),
            "kernel_constraint": _constraints.serialize(self.kernel_constraint),
            "bias_constraint": _constraints.serialize(self.bias_constraint),
        }


class Conv1D(_Conv):
    """1-D convolution over the steps of ``(batch, steps, channels)`` inputs
    (``padding="causal"``: the output at step ``t`` reads no later step).

    Example:
        >>> jt.layers.Conv1D(4, 3, padding="causal")(jt.ones([2, 10, 3])).shape  # (2, 10, 4)
    """

    _rank = 1


class Conv2D(_Conv):
    """2-D convolution over images ``(batch, rows, cols, channels)`` (``groups`` splits
    the channels into separately convolved groups).

    Example:
        >>> jt.layers.Conv2D(8, 3, strides=2, padding="same")(jt.ones([1, 5, 5, 3])).shape
        (1, 3, 3, 8)
    """

    _rank = 2

    def __init__(self, filters, kernel_size, strides=(1, 1), padding="valid", data_format=None,
                 dilation_rate=(1, 1), groups=1, **kwargs):
        super().__init__(filters, kernel_size, strides, padding, data_format, dilation_rate,
                         groups, **kwargs)


class Conv3D(_Conv):
    """3-D convolution over volumes ``(batch, depth, rows, cols, channels)``."""

    _rank = 3

    def __init__(self, filters, kernel_size, strides=(1, 1, 1), padding="valid",
                 data_format=None, dilation_rate=(1, 1, 1), groups=1, **kwargs):
        super().__init__(filters, kernel_size, strides, padding, data_format, dilation_rate,
                         groups, **kwargs)


# ---------------------------------------------------------------------------
# Conv1DTranspose, Conv2DTranspose, Conv3DTranspose


class _ConvTranspose(_BaseConv):
    """The transposed convolution (the gradient of a convolution with respect to its
    input), ``kernel (*kernel_size, filters, in_channels)``: Keras 3's
    ``BaseConvTranspose``. ``output_padding`` (each entry less than its stride) adds
    entries at the end of each spatial axis, choosing among the sizes whose convolution
    gives the input's."""

    def __init__(self, filters, kernel_size, strides=1, padding="valid", output_padding=None,
                 data_format=None, dilation_rate=1, activation=None, use_bias=True,
                 kernel_initializer="glorot_uniform", bias_initializer="zeros",
                 kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 kernel_constraint=None, bias_constraint=None, **kwargs):
        super().__init__(kernel_size, strides, padding, data_format, dilation_rate, activation,
                         use_bias, bias_initializer, bias_regularizer, bias_constraint,
                         activity_regularizer, **kwargs)
        who = type(self).__name__
        self.filters = _positive(who, "filters", filters)
        self.output_padding = (None if output_padding is None else _int_tuple(
            who, output_padding, self._rank, "output_padding", allow_zero=True))
        if self.output_padding is not None:
            for i, (op, s) in enumerate(zip(self.output_padding, self.strides)):
                if op >= s:
                    raise ValueError(
                        f"{who}: `output_padding` must be strictly less than `strides` for "
                        f"all dimensions. At dimension {i}, `output_padding` is {op} but "
                        f"`strides` is {s}. Received: output_padding={self.output_padding}, "
                        f"strides={self.strides}")
        self._no_strided_dilation()
        self.kernel_initializer = _init.get(kernel_initializer)
        self.kernel_regularizer = _regularizers.get(kernel_regularizer)
        self.kernel_constraint = _constraints.get(kernel_constraint)
        self.kernel = None

    def _channels_out(self, channels):
        return self.filters

    def _spatial_out(self, sizes):
        ops = self.output_padding or (None,) * self._rank
        return tuple(_transpose_length(n, k, s, self.padding, op, d) for n, k, s, op, d in
                     zip(sizes, self.kernel_size, self.strides, ops, self.dilation_rate))

    def _check_size(self, shape):
        """A transposed convolution's output is never smaller than its input."""

    def build(self, input_shape):
        c = self._in_channels(input_shape)
        self._built_channels = c
        self.kernel = self.add_weight(
            shape=self.kernel_size + (self.filters, c), name="kernel",
            initializer=self.kernel_initializer, regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint)
        self._add_bias(self.filters)

    def _convolve(self, x):
        sizes = self._spatial_out(self._spatial(tuple(x.shape)))
        return _ops.nn.conv_transpose(
            x, self.kernel, list(sizes), strides=list(self.strides),
            padding=self.padding.upper(), data_format=self._tf_format(),
            dilations=list(self.dilation_rate))

    def get_config(self):
        return {
            **Layer.get_config(self), "filters": self.filters, "kernel_size": self.kernel_size,
            "strides": self.strides, "padding": self.padding,
            "output_padding": self.output_padding, "data_format": self.data_format,
            "dilation_rate": self.dilation_rate,
            "activation": _serialize_activation(self.activation), "use_bias": self.use_bias,
            "kernel_initializer": _init.serialize(self.kernel_initializer),
            "bias_initializer": _init.serialize(self.bias_initializer),
            "kernel_regularizer": _regularizers.serialize(self.kernel_regularizer),
            "bias_regularizer": _regularizers.serialize(self.bias_regularizer),
            "activity_regularizer": _regularizers.serialize(self.activity_regularizer),
            "kernel_constraint": _constraints.serialize(self.kernel_constraint),
            "bias_constraint": _constraints.serialize(self.bias_constraint),
        }


class Conv1DTranspose(_ConvTranspose):
    """The transpose of ``Conv1D``: ``(batch, steps, channels)`` to longer steps.

    Example:
        >>> jt.layers.Conv1DTranspose(2, 3, strides=2)(jt.ones([1, 4, 3])).shape  # (1, 9, 2)
    """

    _rank = 1


class Conv2DTranspose(_ConvTranspose):
    """The transpose of ``Conv2D`` (an upsampling of images with learnt weights)."""

    _rank = 2

    def __init__(self, filters, kernel_size, strides=(1, 1), padding="valid",
                 output_padding=None, data_format=None, dilation_rate=(1, 1), **kwargs):
        super().__init__(filters, kernel_size, strides, padding, output_padding, data_format,
                         dilation_rate, **kwargs)


class Conv3DTranspose(_ConvTranspose):
    """The transpose of ``Conv3D``."""

    _rank = 3

    def __init__(self, filters, kernel_size, strides=(1, 1, 1), padding="valid",
                 data_format=None, output_padding=None, dilation_rate=(1, 1, 1), **kwargs):
        super().__init__(filters, kernel_size, strides, padding, output_padding, data_format,
                         dilation_rate, **kwargs)


# ---------------------------------------------------------------------------
# DepthwiseConv1D, DepthwiseConv2D, SeparableConv1D, SeparableConv2D


class _Depthwise(_BaseConv):
    """Each input channel convolved with its own ``depth_multiplier`` filters: a grouped
    convolution with one group per channel. Strides and dilations may both exceed 1
    (Keras 3 computes it as a dilated convolution subsampled, which is the same)."""

    def _init_depthwise(self, depth_multiplier, depthwise_initializer, depthwise_regularizer,
                        depthwise_constraint):
        self.depth_multiplier = _positive(type(self).__name__, "depth_multiplier",
                                          depth_multiplier)
        self.depthwise_initializer = _init.get(depthwise_initializer)
        self.depthwise_regularizer = _regularizers.get(depthwise_regularizer)
        self.depthwise_constraint = _constraints.get(depthwise_constraint)

    def _depthwise_weight(self, input_shape, name):
        c = self._in_channels(input_shape)
        self._check_size(input_shape)
        self._built_channels = c
        return self.add_weight(
            shape=self.kernel_size + (c, self.depth_multiplier), name=name,
            initializer=self.depthwise_initializer, regularizer=self.depthwise_regularizer,
            constraint=self.depthwise_constraint)

    def _depthwise(self, x, kernel):
        # (*K, C, M) -> (*K, 1, C * M): groups = C, output channel c * M + m (TF's order)
        c, m = kernel.shape[-2], kernel.shape[-1]
        return self._conv(x, _ops.reshape(kernel, self.kernel_size + (1, c * m)))


class _DepthwiseConv(_Depthwise):
    """Keras 3's ``BaseDepthwiseConv``: ``channels * depth_multiplier`` outputs."""

    def __init__(self, kernel_size, strides=1, padding="valid", depth_multiplier=1,
                 data_format=None, dilation_rate=1, activation=None, use_bias=True,
                 depthwise_initializer="glorot_uniform", bias_initializer="zeros",
                 depthwise_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 depthwise_constraint=None, bias_constraint=None, **kwargs):
        super().__init__(kernel_size, strides, padding, data_format, dilation_rate, activation,
                         use_bias, bias_initializer, bias_regularizer, bias_constraint,
                         activity_regularizer, **kwargs)
        self._init_depthwise(depth_multiplier, depthwise_initializer, depthwise_regularizer,
                             depthwise_constraint)
        self.kernel = None

    def _channels_out(self, channels):
        return None if channels is None else channels * self.depth_multiplier

    def build(self, input_shape):
        self.kernel = self._depthwise_weight(input_shape, "kernel")  # Keras 3's name
        self._add_bias(self._built_channels * self.depth_multiplier)

    def _convolve(self, x):
        return self._depthwise(x, self.kernel)

    def get_config(self):
        return {
            **Layer.get_config(self), "depth_multiplier": self.depth_multiplier,
            **self._window_config(), "activation": _serialize_activation(self.activation),
            "use_bias": self.use_bias,
            "depthwise_initializer": _init.serialize(self.depthwise_initializer),
            "bias_initializer": _init.serialize(self.bias_initializer),
            "depthwise_regularizer": _regularizers.serialize(self.depthwise_regularizer),
            "bias_regularizer": _regularizers.serialize(self.bias_regularizer),
            "activity_regularizer": _regularizers.serialize(self.activity_regularizer),
            "depthwise_constraint": _constraints.serialize(self.depthwise_constraint),
            "bias_constraint": _constraints.serialize(self.bias_constraint),
        }


class DepthwiseConv1D(_DepthwiseConv):
    """Depthwise 1-D convolution: ``kernel (kernel_size, channels, depth_multiplier)``."""

    _rank = 1


class DepthwiseConv2D(_DepthwiseConv):
    """Depthwise 2-D convolution (MobileNet's): ``kernel (rows, cols, channels,
    depth_multiplier)``.

    Example:
        >>> jt.layers.DepthwiseConv2D(3, depth_multiplier=2)(jt.ones([1, 5, 5, 3])).shape
        (1, 3, 3, 6)
    """

    _rank = 2

    def __init__(self, kernel_size, strides=(1, 1), padding="valid", depth_multiplier=1,
                 data_format=None, dilation_rate=(1, 1), **kwargs):
        super().__init__(kernel_size, strides, padding, depth_multiplier, data_format,
                         dilation_rate, **kwargs)


class _SeparableConv(_Depthwise):
    """Keras 3's ``BaseSeparableConv``: a depthwise convolution, then a pointwise (size
    1) convolution to ``filters`` channels; the bias and activation come after both."""

    def __init__(self, filters, kernel_size, strides=1, padding="valid", data_format=None,
                 dilation_rate=1, depth_multiplier=1, activation=None, use_bias=True,
                 depthwise_initializer="glorot_uniform", pointwise_initializer="glorot_uniform",
                 bias_initializer="zeros", depthwise_regularizer=None,
                 pointwise_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 depthwise_constraint=None, pointwise_constraint=None, bias_constraint=None,
                 **kwargs):
        super().__init__(kernel_size, strides, padding, data_format, dilation_rate, activation,
                         use_bias, bias_initializer, bias_regularizer, bias_constraint,
                         activity_regularizer, **kwargs)
        self.filters = _positive(type(self).__name__, "filters", filters)
        self._init_depthwise(depth_multiplier, depthwise_initializer, depthwise_regularizer,
                             depthwise_constraint)
        self.pointwise_initializer = _init.get(pointwise_initializer)
        self.pointwise_regularizer = _regularizers.get(pointwise_regularizer)
        self.pointwise_constraint = _constraints.get(pointwise_constraint)
        self.depthwise_kernel = None
        self.pointwise_kernel = None

    def _channels_out(self, channels):
        return self.filters

    def build(self, input_shape):
        self.depthwise_kernel = self._depthwise_weight(input_shape, "depthwise_kernel")
        self.pointwise_kernel = self.add_weight(
            shape=(1,) * self._rank + (self._built_channels * self.depth_multiplier,
                                       self.filters),
            name="pointwise_kernel", initializer=self.pointwise_initializer,
            regularizer=self.pointwise_regularizer, constraint=self.pointwise_constraint)
        self._add_bias(self.filters)

    def _convolve(self, x):
        y = self._depthwise(x, self.depthwise_kernel)
        return _ops.nn.convolution(y, self.pointwise_kernel, padding="VALID",
                                   data_format=self._tf_format())

    def get_config(self):
        return {
            **Layer.get_config(self), "depth_multiplier": self.depth_multiplier,
            "filters": self.filters, **self._window_config(),
            "activation": _serialize_activation(self.activation), "use_bias": self.use_bias,
            "depthwise_initializer": _init.serialize(self.depthwise_initializer),
            "pointwise_initializer": _init.serialize(self.pointwise_initializer),
            "bias_initializer": _init.serialize(self.bias_initializer),
            "depthwise_regularizer": _regularizers.serialize(self.depthwise_regularizer),
            "pointwise_regularizer": _regularizers.serialize(self.pointwise_regularizer),
            "bias_regularizer": _regularizers.serialize(self.bias_regularizer),
            "activity_regularizer": _regularizers.serialize(self.activity_regularizer),
            "depthwise_constraint": _constraints.serialize(self.depthwise_constraint),
            "pointwise_constraint": _constraints.serialize(self.pointwise_constraint),
            "bias_constraint": _constraints.serialize(self.bias_constraint),
        }


class SeparableConv1D(_SeparableConv):
    """Separable 1-D convolution: depthwise over the steps, then size 1 across channels."""

    _rank = 1


class SeparableConv2D(_SeparableConv):
    """Separable 2-D convolution (Xception's): depthwise, then 1x1 across channels."""

    _rank = 2

    def __init__(self, filters, kernel_size, strides=(1, 1), padding="valid", data_format=None,
                 dilation_rate=(1, 1), depth_multiplier=1, **kwargs):
        super().__init__(filters, kernel_size, strides, padding, data_format, dilation_rate,
                         depth_multiplier, **kwargs)


# Keras' other names for the same classes
Convolution1D, Convolution2D, Convolution3D = Conv1D, Conv2D, Conv3D
Convolution1DTranspose, Convolution2DTranspose, Convolution3DTranspose = (
    Conv1DTranspose, Conv2DTranspose, Conv3DTranspose)
SeparableConvolution1D, SeparableConvolution2D = SeparableConv1D, SeparableConv2D
