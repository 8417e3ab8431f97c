"""``jt.image``'s filters and image-quality measures: ``sobel_edges``,
``image_gradients``, ``psnr`` and ``ssim``, as TF computes them. The filters are sums
of shifted slices and the Gaussian window of ``ssim`` two constant ``einsum`` passes
(TF's 2-D window is the outer product of one 1-D window), so all of them differentiate."""

from __future__ import annotations

import numbers

import numpy as np

from .. import ops as O
from ..errors import InvalidArgumentError, composite
from ..ops.einsum import einsum
from ..tensor import convert_args
from .color import convert_image_dtype

__all__ = ["sobel_edges", "image_gradients", "psnr", "ssim"]


def _nhwc(image, fn):
    (x,) = convert_args((image,))
    if x._type.rank != 4:
        raise InvalidArgumentError(
            f"{fn}: image must be 4-D [batch, height, width, channels], got shape "
            f"{list(x._type.shape)}")
    return x


@composite("sobel_edges")
def sobel_edges(image):
    """Sobel gradients per channel: ``[batch, h, w, channels, 2]``, ``dy`` then ``dx``
    (``tf.image.sobel_edges``: 3x3 kernels over the image padded by reflection).

    Example:
        >>> jt.image.sobel_edges(jt.zeros([1, 4, 4, 3])).shape
        TensorShape([1, 4, 4, 3, 2])
    """
    x = _nhwc(image, "sobel_edges")
    h, w = int(x._type.shape[1]), int(x._type.shape[2])
    p = O.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]], mode="REFLECT")

    def tap(i, j):
        return p[:, i:i + h, j:j + w, :]

    dy = (tap(2, 0) + 2.0 * tap(2, 1) + tap(2, 2)) - (tap(0, 0) + 2.0 * tap(0, 1) + tap(0, 2))
    dx = (tap(0, 2) + 2.0 * tap(1, 2) + tap(2, 2)) - (tap(0, 0) + 2.0 * tap(1, 0) + tap(2, 0))
    return O.stack([dy, dx], axis=-1)


@composite("image_gradients")
def image_gradients(image):
    """``(dy, dx)``: forward differences ``x[i+1] - x[i]``, zero in the last row
    (column) (``tf.image.image_gradients``)."""
    x = _nhwc(image, "image_gradients")
    dy = x[:, 1:] - x[:, :-1]
    dx = x[:, :, 1:] - x[:, :, :-1]
    dy = O.pad(dy, [[0, 0], [0, 1], [0, 0], [0, 0]])
    dx = O.pad(dx, [[0, 0], [0, 0], [0, 1], [0, 0]])
    return dy, dx


def _pair(a, b, max_val, fn):
    x, y = convert_args((a, b))
    if x.dtype != y.dtype:
        raise TypeError(f"{fn}: the images must have the same dtype, got {x.dtype.name} and "
                        f"{y.dtype.name}")
    if list(x._type.shape) != list(y._type.shape) or x._type.rank < 3:
        raise InvalidArgumentError(
            f"{fn}: the images must have the same shape, of rank at least 3, got "
            f"{list(x._type.shape)} and {list(y._type.shape)}")
    mv = O.cast(convert_args((max_val,))[0], x.dtype.name)
    return (convert_image_dtype(x, "float32"), convert_image_dtype(y, "float32"),
            convert_image_dtype(mv, "float32"))


@composite("psnr")
def psnr(a, b, max_val, name=None):
    """Peak signal-to-noise ratio per image, ``20 log10(max_val) - 10 log10(mse)``
    (``tf.image.psnr``; float32, integer images rescaled to ``[0, 1]`` first)."""
    x, y, mv = _pair(a, b, max_val, "psnr")
    mse = O.reduce_mean(O.square(x - y), axis=[-3, -2, -1])
    return 20.0 * O.log(mv) / float(np.log(np.float32(10.0))) - \
        float(np.float32(10 / np.log(10))) * O.log(mse)


def _gauss(size: int, sigma: float) -> np.ndarray:
    """TF's ``_fspecial_gauss`` is a softmax of ``g[i] + g[j]``, the outer product of
    this 1-D window with itself."""
    c = np.arange(size, dtype=np.float32) - np.float32(size - 1) / np.float32(2)
    g = np.square(c) * (np.float32(-0.5) / np.square(np.float32(sigma)))
    e = np.exp(g - g.max())
    return (e / e.sum()).astype(np.float32)


def _window(size: int, n: int, g) -> np.ndarray:
    """The VALID correlation with ``g`` along an axis of ``n`` as an ``[n - size + 1, n]``
    matrix."""
    m = np.zeros((n - size + 1, n), np.float32)
    for i in range(n - size + 1):
        m[i, i:i + size] = g
    return m


@composite("ssim")
def ssim(img1, img2, max_val, filter_size=11, filter_sigma=1.5, k1=0.01, k2=0.03,
         return_index_map=False):
    """Structural similarity per image (``tf.image.ssim``): luminance times
    contrast-structure over Gaussian windows (``filter_size``, ``filter_sigma``), averaged
    over the window positions and the channels. Float32; integer images are rescaled
    to ``[0, 1]`` and ``max_val`` with them.

    Example:
        >>> x = jt.random.uniform([1, 16, 16, 3], seed=0)
        >>> float(jt.image.ssim(x, x, 1.0)[0])
        1.0
    """
    x, y, mv = _pair(img1, img2, max_val, "ssim")
    h, w = int(x._type.shape[-3]), int(x._type.shape[-2])
    if not isinstance(filter_size, numbers.Integral) or h < filter_size or w < filter_size:
        raise InvalidArgumentError(
            f"ssim: the images' height and width must be >= filter_size ({filter_size}), got "
            f"shape {list(x._type.shape)}")
    g = _gauss(int(filter_size), float(filter_sigma))
    mh, mw = _window(int(filter_size), h, g), _window(int(filter_size), w, g)

    def reducer(t):
        t = einsum("ij,...jwc->...iwc", mh, t)
        return einsum("ij,...hjc->...hic", mw, t)

    c1 = O.square(k1 * mv)
    c2 = O.square(k2 * mv)
    mean0, mean1 = reducer(x), reducer(y)
    num0 = mean0 * mean1 * 2.0
    den0 = O.square(mean0) + O.square(mean1)
    luminance = (num0 + c1) / (den0 + c1)
    num1 = reducer(x * y) * 2.0
    den1 = reducer(O.square(x) + O.square(y))
    cs = (num1 - num0 + c2) / (den1 - den0 + c2)
    val = luminance * cs
    if not return_index_map:
        val = O.reduce_mean(val, axis=[-3, -2])
    return O.reduce_mean(val, axis=[-1])
