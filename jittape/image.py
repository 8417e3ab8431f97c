"""``jt.image``: ``tf.image.resize`` for NHWC (and HWC) images, as gathers and lerps.

TF 2's sampling: output pixel ``i`` of an axis resized from ``n`` to ``m`` sits at input
coordinate ``(i + 0.5) * n / m - 0.5`` (half-pixel centres). ``bilinear`` blends the
two input pixels around it (clamped at the edges) and returns float32 whatever the
input dtype, as TF does; ``nearest`` takes the pixel ``floor((i + 0.5) * n / m)`` and
keeps the dtype. The coordinates are computed in float32, as TF's kernels do, so the
pixels chosen agree with TF's exactly. Both are built from ``gather`` and elementwise
ops: they fuse, compile and differentiate (twice) like any composite.
"""

from __future__ import annotations

import numbers

import numpy as np

from .errors import InvalidArgumentError, composite
from .ops import elementwise as E
from .ops import shaping as S
from .tensor import Tensor, Variable, convert_args

__all__ = ["resize", "ResizeMethod"]


class ResizeMethod:
    """The names ``tf.image.ResizeMethod`` gives the methods (those jittape has)."""

    BILINEAR = "bilinear"
    NEAREST_NEIGHBOR = "nearest"


_TF_METHODS = ("bicubic", "area", "lanczos3", "lanczos5", "gaussian", "mitchellcubic")


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


@composite("resize")
def resize(images, size, method="bilinear", preserve_aspect_ratio=False, antialias=False,
           name=None):
    """``images`` (``[batch, height, width, channels]`` or ``[height, width, channels]``)
    resized to ``size = (new_height, new_width)`` (``tf.image.resize``).

    Args:
        images: a 4-D or 3-D tensor.
        size: two positive ints.
        method: ``"bilinear"`` (the result is float32) or ``"nearest"`` (the dtype of
            ``images``).
        antialias: for ``nearest``, ignored (as in TF); for ``bilinear``, TF's
            antialiasing filter is not implemented (``NotImplementedError``).

    Returns:
        The resized images, of the rank of ``images``.

    Example:
        >>> jt.image.resize(jt.zeros([1, 4, 4, 3]), [8, 8]).shape
        TensorShape([1, 8, 8, 3])
    """
    (x,) = convert_args((images,))
    shape = x._type.shape
    if x._type.rank not in (3, 4):
        raise InvalidArgumentError(
            f"resize: 'images' must have either 3 or 4 dimensions, got shape {list(shape)}")
    method = getattr(method, "value", method)
    if method in _TF_METHODS:
        raise NotImplementedError(f"resize: method {method!r} is not implemented in jittape "
                                  "(bilinear and nearest are)")
    if method not in ("bilinear", "nearest"):
        raise InvalidArgumentError(f"resize: Resize method is not implemented: {method!r}")
    if preserve_aspect_ratio:
        raise NotImplementedError("resize: preserve_aspect_ratio=True is not implemented")
    m_h, m_w = _size(size)
    single = x._type.rank == 3
    if single:
        x = S.expand_dims(x, 0)
    n_h, n_w = x._type.shape[1:3]
    if not all(isinstance(d, numbers.Integral) for d in (n_h, n_w)):
        raise InvalidArgumentError(
            f"resize: the height and width of the images must be known, got shape {list(shape)}")
    n_h, n_w = int(n_h), int(n_w)
    if method == "nearest":
        y = x
        if n_h != m_h:
            y = S.gather(y, _nearest_taps(n_h, m_h), axis=1)
        if n_w != m_w:
            y = S.gather(y, _nearest_taps(n_w, m_w), axis=2)
    else:
        if antialias:
            raise NotImplementedError(
                "resize: antialias=True is not implemented for bilinear in jittape (TF's "
                "scale_and_translate filter); pass antialias=False")
        y = x if x.dtype.name == "float32" else E.cast(x, "float32")
        y = _lerp_axis(_lerp_axis(y, 1, n_h, m_h), 2, n_w, m_w)
    if single:
        y = S.squeeze(y, 0)
    return y
