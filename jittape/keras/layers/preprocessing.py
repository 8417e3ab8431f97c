"""Keras 3's image preprocessing and augmentation layers, over ``jt.image``.

``Rescaling``, ``Resizing`` and ``CenterCrop`` always apply. The ``Random*`` layers
apply only with ``training=True`` (as inside ``fit``) and return their input (in the
layer's dtype) otherwise, as Keras 3's do (``RandomCrop`` too: Keras 3.15 no longer
crops at inference). Channels last only.

Randomness: each layer draws its factors uniformly in Keras' ranges, one per image
(``RandomCrop``: one offset per batch, as Keras), from its own numpy generator when
given ``seed=`` (the same seed gives the same succession of draws) or else from
``jt.random``'s global one (so ``jt.random.set_seed`` makes them reproducible). The
draws are not Keras' random stream: the distributions match, the numbers do not.
Inside a compiled step each draw is a fresh input at every call.

The geometric layers (``RandomRotation``, ``RandomZoom``, ``RandomTranslation``) build
Keras' transform matrices and resample with ``jt.image.affine_transform``, TF's
``ImageProjectiveTransformV3`` (fill modes ``reflect``, ``wrap``, ``constant``,
``nearest``; ``bilinear`` or ``nearest`` reads).
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from ... import image as _image
from ... import ops as _ops
from ... import random as _random
from ...dtypes import as_dtype
from ...errors import InvalidArgumentError
from .base import Layer

__all__ = [
    "Rescaling", "Resizing", "CenterCrop", "RandomFlip", "RandomRotation", "RandomZoom",
    "RandomTranslation", "RandomContrast", "RandomBrightness", "RandomCrop",
]

_INTERPOLATIONS = ("bilinear", "nearest", "bicubic", "area", "lanczos3", "lanczos5")
_FILL_MODES = ("reflect", "wrap", "constant", "nearest")


def _check_rank(layer, x):
    if x._type.rank not in (3, 4):
        raise InvalidArgumentError(
            f'layer "{layer.name}" ({type(layer).__name__}): expected the input image to be '
            f"rank 3 or 4, got shape {list(x._type.shape)}")


def _hw(x) -> tuple:
    return int(x._type.shape[-3]), int(x._type.shape[-2])


def _slice_hw(x, top, left, height, width):
    key = (slice(top, top + height), slice(left, left + width), slice(None))
    return x[((slice(None),) + key) if x._type.rank == 4 else key]


def _crop_to_aspect(x, th, tw):
    """Keras' ``crop_to_aspect_ratio``: the largest centred box of the target's aspect."""
    h, w = _hw(x)
    ch = max(min(h, int(np.float32(w * th) / np.float32(tw))), 1)
    cw = max(min(w, int(np.float32(h * tw) / np.float32(th))), 1)
    return _slice_hw(x, int(np.float32(h - ch) / 2), int(np.float32(w - cw) / 2), ch, cw)


def _pad_to_aspect(x, th, tw, fill):
    """Keras' ``pad_to_aspect_ratio``: ``fill`` added equally on both sides."""
    h, w = _hw(x)
    ph = max(h, int(np.float32(w * th) / np.float32(tw)))
    pw = max(w, int(np.float32(h * tw) / np.float32(th)))
    top, left = int(np.float32(ph - h) / 2), int(np.float32(pw - w) / 2)
    pads = [[top, top], [left, left], [0, 0]]
    if x._type.rank == 4:
        pads = [[0, 0]] + pads
    return _ops.pad(x, pads, constant_values=fill)


def _resize(x, th, tw, interpolation="bilinear", antialias=False, crop=False, pad=False,
            fill=0.0):
    """``keras.ops.image.resize`` on TF; an integer input comes back rounded and
    saturated, as Keras' ``Resizing`` does."""
    dt = x.dtype
    if crop:
        x = _crop_to_aspect(x, th, tw)
    elif pad:
        x = _pad_to_aspect(x, th, tw, fill)
    y = _image.resize(x, (th, tw), method=interpolation, antialias=antialias)
    if y.dtype != dt and dt.is_integer:
        info = np.iinfo(dt._np)
        floor = _ops.floor(y + 0.5)
        even = _ops.equal(floor - y, 0.5)  # a half rounds to even, as Keras' round
        odd = _ops.not_equal(_ops.floormod(floor, 2.0), 0.0)
        y = _ops.where(_ops.logical_and(even, odd), floor - 1.0, floor)
        y = _ops.cast(_ops.clip_by_value(y, float(info.min), float(info.max)), dt.name)
    elif y.dtype != dt:
        y = _ops.cast(y, dt.name)
    return y


class Rescaling(Layer):
    """``inputs * scale + offset`` (Keras 3's ``Rescaling``; ``1 / 255`` maps bytes to
    ``[0, 1]``)."""

    def __init__(self, scale, offset=0.0, **kwargs):
        super().__init__(**kwargs)
        self.scale = scale
        self.offset = offset

    def call(self, inputs):
        x = inputs if inputs.dtype == as_dtype(self.dtype) else _ops.cast(inputs, self.dtype)
        return x * float(self.scale) + float(self.offset)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def get_config(self):
        return {**super().get_config(), "scale": self.scale, "offset": self.offset}


class Resizing(Layer):
    """Images resized to ``(height, width)`` (Keras 3's ``Resizing``), optionally after a
    centred crop (``crop_to_aspect_ratio``) or a padding with ``fill_value``
    (``pad_to_aspect_ratio``) to the target's aspect ratio."""

    def __init__(self, height, width, interpolation="bilinear", crop_to_aspect_ratio=False,
                 pad_to_aspect_ratio=False, fill_mode="constant", fill_value=0.0,
                 antialias=False, data_format=None, **kwargs):
        super().__init__(**kwargs)
        if interpolation not in _INTERPOLATIONS:
            raise ValueError(f"Resizing: invalid interpolation {interpolation!r}; expected one "
                             f"of {_INTERPOLATIONS}")
        if crop_to_aspect_ratio and pad_to_aspect_ratio:
            raise ValueError("Resizing: only one of `crop_to_aspect_ratio` and "
                             "`pad_to_aspect_ratio` can be True")
        if fill_mode != "constant":
            raise NotImplementedError(
                f"Resizing: fill_mode {fill_mode!r}: only 'constant' is supported (as Keras)")
        _channels_last(data_format, "Resizing")
        self.height, self.width = int(height), int(width)
        self.interpolation = interpolation
        self.crop_to_aspect_ratio = crop_to_aspect_ratio
        self.pad_to_aspect_ratio = pad_to_aspect_ratio
        self.fill_mode = fill_mode
        self.fill_value = fill_value
        self.antialias = antialias

    def call(self, inputs):
        _check_rank(self, inputs)
        return _resize(inputs, self.height, self.width, self.interpolation, self.antialias,
                       self.crop_to_aspect_ratio, self.pad_to_aspect_ratio,
                       float(self.fill_value))

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-3]) + (self.height, self.width, input_shape[-1])

    def get_config(self):
        return {**super().get_config(), "data_format": "channels_last", "height": self.height,
                "width": self.width, "interpolation": self.interpolation,
                "crop_to_aspect_ratio": self.crop_to_aspect_ratio,
                "pad_to_aspect_ratio": self.pad_to_aspect_ratio, "fill_mode": self.fill_mode,
                "fill_value": self.fill_value, "antialias": self.antialias}


def _channels_last(data_format, cls):
    if data_format not in (None, "channels_last"):
        raise NotImplementedError(f"{cls}: only data_format='channels_last' is supported")


class CenterCrop(Layer):
    """The central ``(height, width)`` box; an image smaller than that is first cropped
    to the target's aspect ratio and resized (Keras 3's ``CenterCrop``, its
    ``smart_resize``)."""

    def __init__(self, height, width, data_format=None, **kwargs):
        super().__init__(**kwargs)
        _channels_last(data_format, "CenterCrop")
        self.height, self.width = int(height), int(width)

    def call(self, inputs):
        _check_rank(self, inputs)
        h, w = _hw(inputs)
        if h >= self.height and w >= self.width:
            return _slice_hw(inputs, (h - self.height) // 2, (w - self.width) // 2,
                             self.height, self.width)
        return _resize(inputs, self.height, self.width, crop=True)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-3]) + (self.height, self.width, input_shape[-1])

    def get_config(self):
        return {**super().get_config(), "data_format": "channels_last", "height": self.height,
                "width": self.width}


class _RandomLayer(Layer):
    """Seeding and the training switch of the random layers."""

    def __init__(self, seed=None, **kwargs):
        super().__init__(**kwargs)
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)):
            raise TypeError(f"{type(self).__name__}: seed must be an int or None, got {seed!r}")
        self.seed = seed
        self._rng = None if seed is None else np.random.default_rng(int(seed))

    def _uniform(self, shape, lo, hi):
        """Uniform float32 draws in ``[lo, hi)``, fresh at every call of a compiled step."""
        lo, hi = float(lo), float(hi)

        def draw(d):  # the generator is looked up at each draw (set_seed replaces it)
            g = self._rng if self._rng is not None else _random.generator()
            return g.random(d) * (hi - lo) + lo

        return _random._sample(draw, tuple(shape), as_dtype("float32"))

    def _inputs(self, inputs):
        _check_rank(self, inputs)
        return inputs if inputs.dtype == as_dtype(self.dtype) else _ops.cast(inputs, self.dtype)

    def call(self, inputs, training=None):
        x = self._inputs(inputs)
        return self._augment(x) if training else x

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)


def _batched(x):
    """``x`` as a batch, and how to undo it."""
    if x._type.rank == 3:
        return _ops.expand_dims(x, 0), lambda y: _ops.squeeze(y, 0)
    return x, lambda y: y


class RandomFlip(_RandomLayer):
    """Each image flipped with probability 1/2 (Keras 3's ``RandomFlip``): left-right
    (``"horizontal"``), upside down (``"vertical"``) or, with the same coin, both
    (``"horizontal_and_vertical"``)."""

    _MODES = ("horizontal", "vertical", "horizontal_and_vertical")

    def __init__(self, mode="horizontal_and_vertical", seed=None, data_format=None, **kwargs):
        super().__init__(seed=seed, **kwargs)
        _channels_last(data_format, "RandomFlip")
        if mode not in self._MODES:
            raise ValueError(f"RandomFlip: mode must be one of {self._MODES}, got {mode!r}")
        self.mode = mode

    def _augment(self, x):
        x, unbatch = _batched(x)
        flip = _ops.less_equal(self._uniform((x._type.shape[0], 1, 1, 1), 0.0, 1.0), 0.5)
        if self.mode != "vertical":
            x = _ops.where(flip, _image.flip_left_right(x), x)
        if self.mode != "horizontal":
            x = _ops.where(flip, _image.flip_up_down(x), x)
        return unbatch(x)

    def get_config(self):
        return {**super().get_config(), "data_format": "channels_last", "seed": self.seed,
                "mode": self.mode}


def _factor_pair(cls, factor, bounds=(-1, 1)):
    """Keras' ``_set_factor``: a number ``f`` is ``(max(-|f|, low), |f|)``, a pair is
    sorted; both checked against ``bounds``."""
    msg = (f"{cls}: the `factor` argument should be a number (or a list of two numbers) in "
           f"the range [{bounds[0]}, {bounds[1]}]. Received: factor={factor}")
    if isinstance(factor, (tuple, list)):
        if len(factor) != 2 or factor[0] > bounds[1] or factor[1] < bounds[0]:
            raise ValueError(msg)
        return tuple(sorted(factor))
    if isinstance(factor, numbers.Real) and not isinstance(factor, bool):
        if factor < bounds[0] or factor > bounds[1]:
            raise ValueError(msg)
        f = abs(factor)
        return (max(-f, bounds[0]), f)
    raise ValueError(msg)


def _zoom_pair(cls, name, factor, low_open):
    """RandomZoom / RandomTranslation's ``_set_factor``: each value in ``(-1, 1]``
    (zoom) or ``[-1, 1]`` (translation)."""
    def check(v):
        if v > 1.0 or (v <= -1.0 if low_open else v < -1.0):
            raise ValueError(f"{cls}: the `{name}` argument should be a number (or a list of "
                             f"two numbers) in the range {'(' if low_open else '['}-1.0, 1.0]. "
                             f"Received: {name}={factor}")

    if isinstance(factor, (tuple, list)):
        if len(factor) != 2:
            raise ValueError(f"{cls}: `{name}` must be a number or a pair, got {factor}")
        check(factor[0])
        check(factor[1])
        return tuple(sorted(factor))
    if isinstance(factor, numbers.Real) and not isinstance(factor, bool):
        check(factor)
        return (-abs(factor), abs(factor))
    raise ValueError(f"{cls}: `{name}` must be a number or a pair, got {factor!r}")


class _AffineLayer(_RandomLayer):
    def _affine_options(self, fill_mode, interpolation, fill_value):
        cls = type(self).__name__
        if fill_mode not in _FILL_MODES:
            raise NotImplementedError(f"{cls}: unknown `fill_mode` {fill_mode}. Expected one of "
                                      f"{_FILL_MODES}.")
        if interpolation not in ("nearest", "bilinear"):
            raise NotImplementedError(f"{cls}: unknown `interpolation` {interpolation}. "
                                      "Expected one of ('nearest', 'bilinear').")
        self.fill_mode, self.interpolation, self.fill_value = fill_mode, interpolation, fill_value

    def _transform(self, x, cols):
        """``x`` resampled through the per-image transform of the eight ``[n, 1]`` columns."""
        t = _ops.concat([_ops.cast(c, "float32") for c in cols], axis=1)
        y = _image.affine_transform(x, t, interpolation=self.interpolation,
                                    fill_mode=self.fill_mode, fill_value=self.fill_value)
        return y if y.dtype == x.dtype else _ops.cast(y, x.dtype.name)

    def _affine_config(self):
        return {"fill_mode": self.fill_mode, "interpolation": self.interpolation,
                "seed": self.seed, "fill_value": self.fill_value}


class RandomRotation(_AffineLayer):
    """Each image rotated about its centre by ``factor * 360`` degrees, drawn uniformly
    in ``factor``'s range (Keras 3's ``RandomRotation``; a positive angle turns
    counter-clockwise)."""

    def __init__(self, factor, fill_mode="reflect", interpolation="bilinear", seed=None,
                 fill_value=0.0, data_format=None, **kwargs):
        super().__init__(seed=seed, **kwargs)
        _channels_last(data_format, "RandomRotation")
        self.factor = _factor_pair("RandomRotation", factor)
        self._affine_options(fill_mode, interpolation, fill_value)

    def _augment(self, x):
        x, unbatch = _batched(x)
        h, w = _hw(x)
        angle = self._uniform((x._type.shape[0], 1), self.factor[0] * 360.0,
                              self.factor[1] * 360.0) * (math.pi / 180.0)
        cos, sin = _ops.cos(angle), _ops.sin(angle)
        cx, cy = 0.5 * (w - 1), 0.5 * (h - 1)
        zero = _ops.zeros_like(cos)
        cols = [cos, -sin, cx - cx * cos + cy * sin, sin, cos, cy - cx * sin - cy * cos,
                zero, zero]
        return unbatch(self._transform(x, cols))

    def get_config(self):
        return {**super().get_config(), "data_format": "channels_last", "factor": self.factor,
                **self._affine_config()}


class RandomZoom(_AffineLayer):
    """Each image zoomed about its centre (Keras 3's ``RandomZoom``): the height scaled
    by ``1 + u``, ``u`` uniform in ``height_factor``'s range (positive zooms out), the
    width by its own draw from ``width_factor`` or, when that is None, by the same."""

    def __init__(self, height_factor, width_factor=None, fill_mode="reflect",
                 interpolation="bilinear", seed=None, fill_value=0.0, data_format=None,
                 **kwargs):
        super().__init__(seed=seed, **kwargs)
        _channels_last(data_format, "RandomZoom")
        self.height_factor, self.width_factor = height_factor, width_factor
        self._h = _zoom_pair("RandomZoom", "height_factor", height_factor, True)
        self._w = (None if width_factor is None
                   else _zoom_pair("RandomZoom", "width_factor", width_factor, True))
        self._affine_options(fill_mode, interpolation, fill_value)

    def _augment(self, x):
        x, unbatch = _batched(x)
        h, w = _hw(x)
        n = x._type.shape[0]
        zh = self._uniform((n, 1), 1.0 + self._h[0], 1.0 + self._h[1])
        zw = zh if self._w is None else self._uniform((n, 1), 1.0 + self._w[0], 1.0 + self._w[1])
        zero = _ops.zeros_like(zh)
        cols = [zw, zero, (w - 1.0) / 2.0 * (1.0 - zw), zero, zh, (h - 1.0) / 2.0 * (1.0 - zh),
                zero, zero]
        return unbatch(self._transform(x, cols))

    def get_config(self):
        return {**super().get_config(), "data_format": "channels_last",
                "height_factor": self.height_factor, "width_factor": self.width_factor,
                **self._affine_config()}


class RandomTranslation(_AffineLayer):
    """Each image shifted by ``u * height`` rows and ``v * width`` columns, ``u, v``
    uniform in the factors' ranges (Keras 3's ``RandomTranslation``)."""

    def __init__(self, height_factor, width_factor, fill_mode="reflect",
                 interpolation="bilinear", seed=None, fill_value=0.0, data_format=None,
                 **kwargs):
        super().__init__(seed=seed, **kwargs)
        _channels_last(data_format, "RandomTranslation")
        self.height_factor, self.width_factor = height_factor, width_factor
        self._h = _zoom_pair("RandomTranslation", "height_factor", height_factor, False)
        self._w = _zoom_pair("RandomTranslation", "width_factor", width_factor, False)
        self._affine_options(fill_mode, interpolation, fill_value)

    def _augment(self, x):
        x, unbatch = _batched(x)
        h, w = _hw(x)
        n = x._type.shape[0]
        ty = self._uniform((n, 1), *self._h) * float(h)
        tx = self._uniform((n, 1), *self._w) * float(w)
        one, zero = _ops.ones_like(ty), _ops.zeros_like(ty)
        return unbatch(self._transform(x, [one, zero, -tx, zero, one, -ty, zero, zero]))

    def get_config(self):
        return {**super().get_config(), "data_format": "channels_last",
                "height_factor": self.height_factor, "width_factor": self.width_factor,
                **self._affine_config()}


class RandomContrast(_RandomLayer):
    """``(x - mean) * f + mean`` per image and channel, clipped to ``value_range``
    (Keras 3's ``RandomContrast``). ``f`` is uniform in ``[1 - lower, 1 + upper]`` where
    ``(lower, upper)`` is Keras' reading of ``factor``: a number ``a`` gives ``(0, a)``
    (so, as in Keras 3.15, the contrast only grows), a pair is taken as it is."""

    def __init__(self, factor, value_range=(0, 255), seed=None, data_format=None, **kwargs):
        super().__init__(seed=seed, **kwargs)
        _channels_last(data_format, "RandomContrast")
        self.factor = _factor_pair("RandomContrast", factor, (0, 1))
        self.value_range = value_range

    def _augment(self, x):
        shape = (x._type.shape[0], 1, 1, 1) if x._type.rank == 4 else (1, 1, 1)
        f = self._uniform(shape, 1.0 - self.factor[0], 1.0 + self.factor[1])
        mean = _ops.reduce_mean(x, axis=[-3, -2], keepdims=True)
        y = (x - mean) * _ops.cast(f, x.dtype.name) + mean
        return _ops.clip_by_value(y, float(self.value_range[0]), float(self.value_range[1]))

    def get_config(self):
        return {**super().get_config(), "data_format": "channels_last", "factor": self.factor,
                "value_range": self.value_range, "seed": self.seed}


class RandomBrightness(_RandomLayer):
    """``x + u * (high - low)`` per image, ``u`` uniform in ``factor``'s range, clipped
    to ``value_range = (low, high)`` (Keras 3's ``RandomBrightness``)."""

    def __init__(self, factor, value_range=(0, 255), seed=None, data_format=None, **kwargs):
        super().__init__(seed=seed, **kwargs)
        _channels_last(data_format, "RandomBrightness")
        self.factor = _factor_pair("RandomBrightness", factor)
        if not isinstance(value_range, (tuple, list)) or len(value_range) != 2:
            raise ValueError("RandomBrightness: the `value_range` argument should be a list of "
                             f"two numbers. Received: value_range={value_range}")
        self.value_range = sorted(value_range)

    def _augment(self, x):
        shape = (x._type.shape[0], 1, 1, 1) if x._type.rank == 4 else (1, 1, 1)
        lo, hi = self.value_range
        delta = self._uniform(shape, *self.factor) * float(hi - lo)
        return _ops.clip_by_value(x + _ops.cast(delta, x.dtype.name), float(lo), float(hi))

    def get_config(self):
        return {**super().get_config(), "data_format": "channels_last", "factor": self.factor,
                "value_range": self.value_range, "seed": self.seed}


class RandomCrop(_RandomLayer):
    """A ``(height, width)`` box at a uniformly random offset, the same for the whole
    batch (Keras 3's ``RandomCrop``); an image not larger than the box in both axes is
    cropped to its aspect ratio and resized instead."""

    def __init__(self, height, width, seed=None, data_format=None, name=None, **kwargs):
        if seed is None:  # Keras stores a drawn default seed in the config
            seed = int(_random.generator().integers(0, 2 ** 30))
        super().__init__(seed=seed, name=name, **kwargs)
        _channels_last(data_format, "RandomCrop")
        self.height, self.width = int(height), int(width)

    def _augment(self, x):
        h, w = _hw(x)
        if not (h > self.height and w > self.width):
            # Keras: the offsets of a centred box of the target's aspect, but a slice of
            # the target's size from there (clipped by the image), resized to the target
            ch = max(min(h, int(np.float32(w * self.height) / np.float32(self.width))), 1)
            cw = max(min(w, int(np.float32(h * self.width) / np.float32(self.height))), 1)
            top, left = int(np.float32(h - ch) / 2), int(np.float32(w - cw) / 2)
            y = _slice_hw(x, top, left, self.height, self.width)
            if _hw(y) == (self.height, self.width):
                return y
            return _resize(y, self.height, self.width)
        u = self._uniform((2,), 0.0, 1.0)
        limits = np.array([h - self.height + 1, w - self.width + 1], np.float32)
        start = _ops.cast(_ops.floor(u * limits), "int32")
        out = x
        for axis, (size, s) in enumerate(((self.height, start[0]), (self.width, start[1]))):
            out = _ops.gather(out, _ops.range(size, dtype="int32") + s,
                              axis=x._type.rank - 3 + axis)
        return out

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-3]) + (self.height, self.width, input_shape[-1])

    def get_config(self):
        return {**super().get_config(), "data_format": "channels_last", "height": self.height,
                "width": self.width, "seed": self.seed}
