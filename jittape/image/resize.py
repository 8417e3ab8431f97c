"""``jt.image.resize``: ``tf.image.resize`` for NHWC (and HWC) images.

TF 2's sampling: output pixel ``i`` of an axis resized from ``n`` to ``m`` sits at input
coordinate ``(i + 0.5) * n / m - 0.5`` (half-pixel centres). ``bilinear`` blends the
two input pixels around it (clamped at the edges) and returns float32 whatever the
input dtype, as TF does; ``nearest`` takes the pixel ``floor((i + 0.5) * n / m)`` and
keeps the dtype. The coordinates are computed in float32, as TF's kernels do, so the
pixels chosen agree with TF's exactly. Both are built from ``gather`` and elementwise
ops: they fuse, compile and differentiate (twice) like any composite.

The other methods are separable too: each axis is a constant ``[m, n]`` matrix of
weights (TF's per-output taps, computed here in float32 as its kernels do) applied with
``einsum``, so they differentiate like any contraction. ``bicubic`` is TF's
``ResizeBicubic`` (Keys' cubic, a = -0.5, its 1024-entry weight table, out-of-image taps
dropped and the rest renormalized); ``area`` is ``ResizeArea`` (each output pixel the
coverage-weighted mean of the input box it spans); ``antialias=True`` and the
``lanczos3`` / ``lanczos5`` / ``mitchellcubic`` / ``gaussian`` methods are TF's
``ScaleAndTranslate`` (the kernel stretched by ``n / m`` when shrinking, taps
renormalized).
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from ..errors import InvalidArgumentError, composite
from ..ops import elementwise as E
from ..ops import shaping as S
from ..ops.einsum import einsum
from ..tensor import Tensor, Variable, convert_args

__all__ = ["resize", "ResizeMethod"]


class ResizeMethod:
    """The names ``tf.image.ResizeMethod`` gives the methods."""

    BILINEAR = "bilinear"
    NEAREST_NEIGHBOR = "nearest"
    BICUBIC = "bicubic"
    AREA = "area"
    LANCZOS3 = "lanczos3"
    LANCZOS5 = "lanczos5"
    GAUSSIAN = "gaussian"
    MITCHELLCUBIC = "mitchellcubic"


_METHODS = ("bilinear", "nearest", "bicubic", "area", "lanczos3", "lanczos5", "gaussian",
            "mitchellcubic")


def _size(size) -> tuple:
    if isinstance(size, (Tensor, Variable)):
        size = np.asarray(size)
    vals = list(np.asarray(size).reshape(-1)) if isinstance(size, np.ndarray) else size
    try:
        vals = list(vals)
    except TypeError:
        vals = [vals]
    if len(vals) != 2 or not all(isinstance(v, numbers.Integral) and not isinstance(v, bool)
                                 for v in vals):
        raise InvalidArgumentError(
            f"resize: 'size' must be a 1-D Tensor of 2 elements: new_height, new_width; got "
            f"{size!r}")
    h, w = int(vals[0]), int(vals[1])
    if h <= 0 or w <= 0:
        raise InvalidArgumentError(f"resize: output dimensions must be positive, got [{h}, {w}]")
    return h, w


def _scale(n: int, m: int) -> np.float32:
    return np.float32(n) / np.float32(m)


def _bilinear_taps(n: int, m: int):
    """(lower, upper, lerp) per output index, TF's ``compute_interpolation_weights``."""
    pos = (np.arange(m, dtype=np.float32) + np.float32(0.5)) * _scale(n, m) - np.float32(0.5)
    fl = np.floor(pos)
    lower = np.maximum(fl, 0).astype(np.int32)
    upper = np.minimum(np.ceil(pos), n - 1).astype(np.int32)
    return lower, upper, (pos - fl).astype(np.float32)


def _nearest_taps(n: int, m: int):
    pos = (np.arange(m, dtype=np.float32) + np.float32(0.5)) * _scale(n, m)
    return np.clip(np.floor(pos), 0, n - 1).astype(np.int32)


def _lerp_axis(x, axis: int, n: int, m: int):
    """``x`` (float32, NHWC) resized from ``n`` to ``m`` along ``axis`` (1 or 2)."""
    if n == m:
        return x  # the taps are the pixels themselves
    lower, upper, lerp = _bilinear_taps(n, m)
    a = S.gather(x, lower, axis=axis)
    b = S.gather(x, upper, axis=axis)
    w = lerp.reshape((m, 1, 1) if axis == 1 else (m, 1))
    return E.add(a, E.multiply(E.subtract(b, a), w))


_TABLE = 1024  # TF's kKeysCubicTableSize: the fraction is rounded to 1/1024


def _bicubic_weights(n: int, m: int) -> np.ndarray:
    """TF's ``ResizeBicubic`` (half-pixel, Keys a = -0.5) taps as an ``[m, n]`` matrix."""
    a = np.float32(-0.5)
    pos = (np.arange(m, dtype=np.float32) + np.float32(0.5)) * _scale(n, m) - np.float32(0.5)
    base = np.floor(pos)
    off = np.rint((pos - base) * np.float32(_TABLE)).astype(np.int64)  # lrintf

    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 <= |x| <= 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    t = (off.astype(np.float32) / np.float32(_TABLE)).astype(np.float32)
    u = ((_TABLE - off).astype(np.float32) / np.float32(_TABLE)).astype(np.float32)
    taps = np.stack([far(t + 1), near(t), near(u), far(u + 1)], axis=1).astype(np.float32)
    w = np.zeros((m, n), np.float32)
    for i in range(m):
        idx = int(base[i]) + np.arange(-1, 3)
        keep = (idx >= 0) & (idx < n)  # TF zeroes the taps off the image, then renormalizes
        wt = np.where(keep, taps[i], np.float32(0))
        total = wt.sum(dtype=np.float32)
        if abs(total) >= 1000 * np.finfo(np.float32).tiny:
            wt = wt * (np.float32(1) / total)
        np.add.at(w[i], np.clip(idx, 0, n - 1), wt)
    return w


def _area_weights(n: int, m: int) -> np.ndarray:
    """TF's ``ResizeArea``: output ``i`` covers input ``[i * n/m, (i+1) * n/m)``; each
    input pixel weighs the part of it covered, over the box's size."""
    s = _scale(n, m)
    w = np.zeros((m, n), np.float32)
    for i in range(m):
        lo, hi = np.float32(i) * s, np.float32(i + 1) * s
        for j in range(int(np.floor(lo)), int(np.ceil(hi))):
            if j < lo:
                cover = s if j + 1 > hi else np.float32(j + 1) - lo
            else:
                cover = hi - np.float32(j) if j + 1 > hi else np.float32(1)
            w[i, min(j, n - 1)] += cover / s
    return w


def _lanczos(radius):
    def k(x):
        if x > radius:
            return 0.0
        if x <= 1e-3:
            return 1.0
        return radius * math.sin(math.pi * x) * math.sin(math.pi * x / radius) / (
            math.pi * math.pi * x * x)

    return k, radius


def _keys(x):
    if x >= 2:
        return 0.0
    if x >= 1:
        return ((-0.5 * x + 2.5) * x - 4.0) * x + 2.0
    return (1.5 * x - 2.5) * x * x + 1.0


def _mitchell(x):
    if x >= 2:
        return 0.0
    if x >= 1:
        return (((-7.0 / 18.0) * x + 2.0) * x - 10.0 / 3.0) * x + 16.0 / 9.0
    return ((7.0 / 6.0) * x - 2.0) * x * x + 8.0 / 9.0


_KERNELS = {  # ScaleAndTranslate's kernels: (function of |x|, radius)
    "bilinear": (lambda x: max(0.0, 1.0 - x), 1.0),
    "bicubic": (_keys, 2.0),
    "lanczos3": _lanczos(3.0),
    "lanczos5": _lanczos(5.0),
    "mitchellcubic": (_mitchell, 2.0),
    "gaussian": (lambda x: 0.0 if x >= 3.0 * 0.5 else math.exp(-x * x / (2 * 0.5 * 0.5)), 1.5),
}


def _scale_translate_weights(n: int, m: int, method: str, antialias: bool) -> np.ndarray:
    """TF's ``ScaleAndTranslate`` spans (``ComputeSpansCore``) as an ``[m, n]`` matrix."""
    kernel, radius = _KERNELS[method]
    inv = np.float32(1) / (np.float32(m) / np.float32(n))
    kscale = max(float(inv), 1.0) if antialias else 1.0
    w = np.zeros((m, n), np.float32)
    for i in range(m):
        sample = np.float32(i + 0.5) * inv
        if sample < 0 or sample > n:
            continue  # TF leaves a sampling point outside the image black
        start = math.ceil(sample - radius * kscale - 0.5)
        end = math.floor(sample + radius * kscale - 0.5)
        start = min(max(start, 0), n - 1)
        end = min(max(end, 0), n - 1) + 1
        src = np.arange(start, end)
        wt = np.array([kernel(abs((s + 0.5 - sample) / kscale)) for s in src], np.float32)
        total = wt.sum(dtype=np.float32)
        if abs(total) >= 1000 * np.finfo(np.float32).tiny:
            wt = wt * (np.float32(1) / total)
        w[i, start:end] = wt
    return w


def _weights(n: int, m: int, method: str, antialias: bool):
    if method == "bicubic" and not antialias:
        return _bicubic_weights(n, m)
    if method == "area":
        return _area_weights(n, m)
    return _scale_translate_weights(n, m, method, antialias)


def _aspect_size(n_h, n_w, m_h, m_w) -> tuple:
    """TF's ``preserve_aspect_ratio``: the largest size with the input's aspect ratio
    inside ``(m_h, m_w)`` (float32 scales, rounded half to even as ``tf.round``)."""
    f = min(np.float32(m_h) / np.float32(n_h), np.float32(m_w) / np.float32(n_w))
    return (int(np.round(np.float32(f) * np.float32(n_h))),
            int(np.round(np.float32(f) * np.float32(n_w))))


@composite("resize")
def resize(images, size, method="bilinear", preserve_aspect_ratio=False, antialias=False,
           name=None):
    """``images`` (``[batch, height, width, channels]`` or ``[height, width, channels]``)
    resized to ``size = (new_height, new_width)`` (``tf.image.resize``).

    Args:
        images: a 4-D or 3-D tensor.
        size: two positive ints.
        method: ``"bilinear"``, ``"bicubic"``, ``"area"``, ``"lanczos3"``,
            ``"lanczos5"``, ``"mitchellcubic"``, ``"gaussian"`` (the result is float32)
            or ``"nearest"`` (the dtype of ``images``).
        preserve_aspect_ratio: shrink ``size`` to keep the input's aspect ratio.
        antialias: when shrinking, widen the kernel by the scale (TF's
            ``scale_and_translate``); ignored by ``nearest`` and ``area``, as in TF.

    Returns:
        The resized images, of the rank of ``images``.

    Example:
        >>> jt.image.resize(jt.zeros([1, 4, 4, 3]), [8, 8], method="bicubic").shape
        TensorShape([1, 8, 8, 3])
    """
    (x,) = convert_args((images,))
    shape = x._type.shape
    if x._type.rank not in (3, 4):
        raise InvalidArgumentError(
            f"resize: 'images' must have either 3 or 4 dimensions, got shape {list(shape)}")
    method = getattr(method, "value", method)
    if method not in _METHODS:
        raise InvalidArgumentError(f"resize: Resize method is not implemented: {method!r}")
    m_h, m_w = _size(size)
    single = x._type.rank == 3
    if single:
        x = S.expand_dims(x, 0)
    n_h, n_w = x._type.shape[1:3]
    if not all(isinstance(d, numbers.Integral) for d in (n_h, n_w)):
        raise InvalidArgumentError(
            f"resize: the height and width of the images must be known, got shape {list(shape)}")
    n_h, n_w = int(n_h), int(n_w)
    if preserve_aspect_ratio:
        m_h, m_w = _aspect_size(n_h, n_w, m_h, m_w)
    if method == "nearest":
        y = x
        if n_h != m_h:
            y = S.gather(y, _nearest_taps(n_h, m_h), axis=1)
        if n_w != m_w:
            y = S.gather(y, _nearest_taps(n_w, m_w), axis=2)
    else:
        y = x if x.dtype.name == "float32" else E.cast(x, "float32")
        if method == "bilinear" and not antialias:
            y = _lerp_axis(_lerp_axis(y, 1, n_h, m_h), 2, n_w, m_w)
        else:
            y = einsum("ij,njwc->niwc", _weights(n_h, m_h, method, antialias), y)
            y = einsum("ij,nhjc->nhic", _weights(n_w, m_w, method, antialias), y)
    if single:
        y = S.squeeze(y, 0)
    return y
