"""``jt.image``'s colour and value ops: dtype conversion, grayscale, HSV, the
``adjust_*`` family and ``per_image_standardization``, with TF's formulas.

TF has two HSV codes: ``rgb_to_hsv`` / ``hsv_to_rgb`` (the ``RGBToHSV`` / ``HSVToRGB``
kernels, hue from the max channel, back through clipped ramps) and the private ones
inside ``AdjustSaturation`` (the same forward code, back through a switch on the hue
sextant) and ``AdjustHue`` (hue from the sorted channels). They agree mathematically
but round differently, so each op here follows its own kernel. Every branch is a
``where`` over the whole image, so the ops compile and differentiate (divisions are
guarded so that the branch not taken cannot put a NaN into the gradient).
"""

from __future__ import annotations

import numbers

import numpy as np

from .. import ops as O
from ..dtypes import as_dtype
from ..errors import InvalidArgumentError, composite
from ..tensor import convert_args

__all__ = [
    "convert_image_dtype", "rgb_to_grayscale", "grayscale_to_rgb", "rgb_to_hsv", "hsv_to_rgb",
    "adjust_brightness", "adjust_contrast", "adjust_saturation", "adjust_hue",
    "per_image_standardization",
]


def _shape(x) -> list:
    return list(x._type.shape)


def _max(dt) -> int:
    return int(np.iinfo(dt._np).max)


def _saturate_cast(x, dt):
    """TF's ``saturate_cast``: clamp to the target's range first (a float beyond it
    would wrap or be undefined in a plain cast)."""
    if dt.is_integer:
        info = np.iinfo(dt._np)
        lo, hi = info.min, info.max
        if x.dtype.is_integer:
            src = np.iinfo(x.dtype._np)
            lo, hi = max(lo, src.min), min(hi, src.max)
        if x.dtype.is_floating:
            # the bounds as the source's floats, rounded inwards (TF: int32's max in
            # float32 is 2147483520, not 2**31, which would wrap)
            f = x.dtype._np.type
            flo, fhi = f(lo), f(hi)
            lo = float(flo if int(flo) >= lo else np.nextafter(flo, f(0)))
            hi = float(fhi if int(fhi) <= hi else np.nextafter(fhi, f(0)))
        x = O.clip_by_value(x, lo, hi)
    return O.cast(x, dt.name)


@composite("convert_image_dtype")
def convert_image_dtype(image, dtype, saturate=False, name=None):
    """``image`` in ``dtype``, rescaled as TF does (``tf.image.convert_image_dtype``):
    floats are in ``[0, 1)``, integers in ``[0, MAX]``.

    int -> int multiplies or floor-divides by the ratio of the ranges; int -> float
    multiplies by ``1 / MAX``; float -> int multiplies by ``MAX + 0.5`` and truncates
    (``saturate=True`` clamps to the target range first, as ``tf.saturate_cast``);
    float -> float is a cast.

    Example:
        >>> jt.image.convert_image_dtype(jt.constant([0, 255], jt.uint8), jt.float32)
        jt.Tensor([0. 1.], shape=(2,), dtype=float32)
    """
    (x,) = convert_args((image,))
    dt = as_dtype(dtype)
    src = x.dtype
    if not (dt.is_floating or dt.is_integer) or dt.name == "bool":
        raise TypeError(f"convert_image_dtype: dtype must be a float or integer type, got "
                        f"{dt.name}")
    if not (src.is_floating or src.is_integer) or src.name == "bool":
        raise TypeError(f"convert_image_dtype: image must be a float or integer tensor, got "
                        f"{src.name}")
    if src == dt:
        return O.identity(x)
    if src.is_integer and dt.is_integer:
        m_in, m_out = _max(src), _max(dt)
        if m_in > m_out:
            scaled = O.floordiv(x, (m_in + 1) // (m_out + 1))
            return _saturate_cast(scaled, dt) if saturate else O.cast(scaled, dt.name)
        cast = _saturate_cast(x, dt) if saturate else O.cast(x, dt.name)
        return cast * ((m_out + 1) // (m_in + 1))
    if src.is_floating and dt.is_floating:
        return O.cast(x, dt.name)
    if src.is_integer:
        return O.cast(x, dt.name) * (1.0 / _max(src))
    scaled = x * (_max(dt) + 0.5)  # + 0.5: 1.0 lands on MAX after the truncation
    return _saturate_cast(scaled, dt) if saturate else O.cast(scaled, dt.name)


def _to_float(x):
    """TF's ``adjust_*`` preamble: float16 and float32 stay, the rest go to float32."""
    return x if x.dtype.name in ("float16", "float32") else convert_image_dtype(x, "float32")


def _rgb(x, fn):
    if x._type.rank < 1 or x._type.shape[-1] != 3:
        raise InvalidArgumentError(
            f"{fn}: the last dimension of 'images' must be 3 (RGB), got shape {_shape(x)}")
    return O.unstack(x, axis=-1)


def _safe_div(num, den):
    """``num / den`` where ``den != 0``, else 0, with no NaN in either branch's gradient."""
    nz = O.not_equal(den, 0)
    return O.where(nz, num / O.where(nz, den, O.ones_like(den)), O.zeros_like(num))


@composite("rgb_to_grayscale")
def rgb_to_grayscale(images, name=None):
    """Luma ``0.2989 R + 0.5870 G + 0.1140 B`` with a last axis of 1
    (``tf.image.rgb_to_grayscale``); integer images are converted to float32 and back.

    Example:
        >>> jt.image.rgb_to_grayscale(jt.ones([2, 2, 3])).shape
        TensorShape([2, 2, 1])
    """
    (x,) = convert_args((images,))
    _rgb(x, "rgb_to_grayscale")
    f = convert_image_dtype(x, "float32")
    w = np.array([0.2989, 0.5870, 0.1140], f.dtype._np)
    gray = O.reduce_sum(f * w, axis=-1, keepdims=True)
    return convert_image_dtype(gray, x.dtype)


@composite("grayscale_to_rgb")
def grayscale_to_rgb(images, name=None):
    """The single channel repeated three times (``tf.image.grayscale_to_rgb``)."""
    (x,) = convert_args((images,))
    if x._type.rank < 2 or x._type.shape[-1] != 1:
        raise InvalidArgumentError(
            f"grayscale_to_rgb: the last dimension of 'images' must be 1, and the rank at "
            f"least 2, got shape {_shape(x)}")
    return O.concat([x, x, x], axis=-1)


def _float_only(x, fn):
    if not x.dtype.is_floating:
        raise TypeError(f"{fn}: images must be a float tensor (float16, float32, float64), "
                        f"got {x.dtype.name}; use convert_image_dtype first")


def _hsv_parts(r, g, b):
    """The ``RGBToHSV`` kernel's h, s, v (also ``AdjustSaturation``'s)."""
    v = O.maximum(O.maximum(r, g), b)
    rng = v - O.minimum(O.minimum(r, g), b)
    s = O.where(O.greater(v, 0), _safe_div(rng, v), O.zeros_like(v))
    norm = _safe_div(O.ones_like(rng), rng) * (1.0 / 6.0)
    h = O.where(O.equal(r, v), norm * (g - b),
                O.where(O.equal(g, v), norm * (b - r) + 2.0 / 6.0, norm * (r - g) + 4.0 / 6.0))
    h = O.where(O.greater(rng, 0), h, O.zeros_like(h))
    h = O.where(O.less(h, 0), h + 1.0, h)
    return h, s, v


@composite("rgb_to_hsv")
def rgb_to_hsv(images, name=None):
    """RGB in ``[0, 1]`` to HSV, each in ``[0, 1]`` (``tf.image.rgb_to_hsv``; a grey
    pixel has hue 0)."""
    (x,) = convert_args((images,))
    _float_only(x, "rgb_to_hsv")
    return O.stack(list(_hsv_parts(*_rgb(x, "rgb_to_hsv"))), axis=-1)


@composite("hsv_to_rgb")
def hsv_to_rgb(images, name=None):
    """HSV to RGB (``tf.image.hsv_to_rgb``: the ``HSVToRGB`` kernel's clipped ramps)."""
    (x,) = convert_args((images,))
    _float_only(x, "hsv_to_rgb")
    h, s, v = _rgb(x, "hsv_to_rgb")
    dh = h * 6.0
    dr = O.clip_by_value(O.abs(dh - 3.0) - 1.0, 0.0, 1.0)
    dg = O.clip_by_value(2.0 - O.abs(dh - 2.0), 0.0, 1.0)
    db = O.clip_by_value(2.0 - O.abs(dh - 4.0), 0.0, 1.0)
    one_s = 1.0 - s
    return O.stack([(one_s + s * dr) * v, (one_s + s * dg) * v, (one_s + s * db) * v], axis=-1)


def _pick(cat, table, like):
    """``table[cat]`` per pixel, for an integer-valued float ``cat``; 0 past the table."""
    out = O.zeros_like(like)
    for k in reversed(range(len(table))):
        out = O.where(O.equal(cat, float(k)), table[k], out)
    return out


def _back_to(x, adjusted, dt, saturate):
    return adjusted if adjusted.dtype == dt else convert_image_dtype(adjusted, dt, saturate)


@composite("adjust_brightness")
def adjust_brightness(image, delta):
    """``image + delta``, in float (``tf.image.adjust_brightness``): integer images are
    converted to float32, adjusted and converted back with saturation.

    Example:
        >>> jt.image.adjust_brightness(jt.constant([[[0.2, 0.4, 0.6]]]), 0.1)
        jt.Tensor([[[0.3 0.5 0.7]]], shape=(1, 1, 3), dtype=float32)
    """
    (x,) = convert_args((image,))
    f = _to_float(x)
    (d,) = convert_args((delta,))
    return _back_to(x, f + O.cast(d, f.dtype.name), x.dtype, True)


def _hw_axes(x, fn):
    if x._type.rank < 3:
        raise InvalidArgumentError(
            f"{fn}: 'images' must be at least 3-D [height, width, channels], got shape "
            f"{_shape(x)}")
    return [-3, -2]


@composite("adjust_contrast")
def adjust_contrast(images, contrast_factor):
    """``(x - mean) * contrast_factor + mean``, the mean per image and channel over height
    and width (``tf.image.adjust_contrast``); integer images go through float32 and come
    back saturated."""
    (x,) = convert_args((images,))
    axes = _hw_axes(x, "adjust_contrast")
    f = _to_float(x)
    (c,) = convert_args((contrast_factor,))
    mean = O.reduce_mean(f, axis=axes, keepdims=True)
    return _back_to(x, (f - mean) * O.cast(c, f.dtype.name) + mean, x.dtype, True)


@composite("adjust_saturation")
def adjust_saturation(image, saturation_factor, name=None):
    """The HSV saturation scaled by ``saturation_factor`` and clipped to ``[0, 1]``
    (``tf.image.adjust_saturation``: the ``AdjustSaturation`` kernel's HSV code)."""
    (x,) = convert_args((image,))
    f = _to_float(x)
    r, g, b = _rgb(f, "adjust_saturation")
    h, s, v = _hsv_parts(r, g, b)
    (k,) = convert_args((saturation_factor,))
    s = O.clip_by_value(s * O.cast(k, f.dtype.name), 0.0, 1.0)
    c = s * v
    m = v - c
    dh = h * 6.0
    cat = O.floor(dh)  # dh >= 0: the kernel's truncation is a floor
    fmodu = dh - 2.0 * O.floor(dh * 0.5)
    xx = c * (1.0 - O.abs(fmodu - 1.0))
    z = O.zeros_like(c)
    rr = _pick(cat, [c, xx, z, z, xx, c], c)
    gg = _pick(cat, [xx, c, c, xx, z, z], c)
    bb = _pick(cat, [z, z, xx, c, c, xx], c)
    return _back_to(x, O.stack([rr + m, gg + m, bb + m], axis=-1), x.dtype, False)


@composite("adjust_hue")
def adjust_hue(image, delta, name=None):
    """The hue rotated by ``delta`` (a fraction of a turn, in ``[-1, 1]``)
    (``tf.image.adjust_hue``: the ``AdjustHue`` kernel, hue from the sorted channels)."""
    (x,) = convert_args((image,))
    if isinstance(delta, numbers.Real) and not -1.0 <= delta <= 1.0:
        raise ValueError(f"adjust_hue: delta must be in the interval [-1, 1], got {delta}")
    f = _to_float(x)
    r, g, b = _rgb(f, "adjust_hue")
    rg, bg, br = O.less(r, g), O.less(b, g), O.less(b, r)
    b_r, b_g = O.greater(b, r), O.greater(b, g)
    # the six orderings, as the kernel's if-tree: (max, mid, min, sextant)
    c1, c3 = O.logical_and(rg, br), O.logical_and(rg, b_g)
    c0, c4 = O.logical_and(O.logical_not(rg), bg), O.logical_and(O.logical_not(rg), b_r)

    def sel(v1, v3, v2, v0, v4, v5):
        return O.where(rg, O.where(c1, v1, O.where(c3, v3, v2)),
                       O.where(c0, v0, O.where(c4, v4, v5)))

    vmax = sel(g, b, g, r, b, r)
    vmid = sel(r, g, b, g, r, b)
    vmin = sel(b, r, r, b, g, g)
    one = O.ones_like(r)
    cat = sel(one, 3.0 * one, 2.0 * one, 0.0 * one, 4.0 * one, 5.0 * one)
    ratio = _safe_div(vmid - vmin, vmax - vmin)
    even = O.equal(O.floormod(cat, 2.0), 0.0)
    h = O.where(O.equal(vmax, vmin), O.zeros_like(r), cat + O.where(even, ratio, 1.0 - ratio))
    (dd,) = convert_args((delta,))
    h = h + O.cast(dd, f.dtype.name) * 6.0
    h = h - 6.0 * O.floor(h * (1.0 / 6.0))
    h = O.where(O.greater_equal(h, 6.0), h - 6.0, h)
    cat = O.floor(h)
    ratio = h - cat
    ratio = O.where(O.equal(O.floormod(cat, 2.0), 0.0), ratio, 1.0 - ratio)
    vmid = vmin + ratio * (vmax - vmin)
    # sextant 5 is also the kernel's default
    rr = _pick(cat, [vmax, vmid, vmin, vmin, vmid], vmax)
    gg = _pick(cat, [vmid, vmax, vmax, vmid, vmin], vmin)
    bb = _pick(cat, [vmin, vmin, vmid, vmax, vmax], vmid)
    five = O.greater_equal(cat, 5.0)
    rr, gg, bb = O.where(five, vmax, rr), O.where(five, vmin, gg), O.where(five, vmid, bb)
    return _back_to(x, O.stack([rr, gg, bb], axis=-1), x.dtype, False)


@composite("per_image_standardization")
def per_image_standardization(image):
    """``(x - mean) / max(stddev, 1 / sqrt(N))`` per image, ``N`` its number of values
    (``tf.image.per_image_standardization``; integer images become float32).

    Example:
        >>> jt.image.per_image_standardization(jt.constant([[[1.0], [3.0]]])).numpy().ravel()
        array([-1.,  1.], dtype=float32)
    """
    (x,) = convert_args((image,))
    if x._type.rank < 3:
        raise InvalidArgumentError(
            f"per_image_standardization: 'image' must be at least three-dimensional, got "
            f"shape {_shape(x)}")
    if not x.dtype.is_floating:
        x = O.cast(x, "float32")
    axes = [-1, -2, -3]
    n = int(np.prod([int(d) for d in x._type.shape[-3:]]))
    mean = O.reduce_mean(x, axis=axes, keepdims=True)
    centred = x - mean
    std = O.sqrt(O.reduce_mean(O.square(centred), axis=axes, keepdims=True))
    return centred / O.maximum(std, float(1.0 / np.sqrt(np.float32(n))))
