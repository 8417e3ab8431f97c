"""``jt.image``'s geometric ops: flips, rotations by quarter turns, crops and pads, and
the projective transform behind Keras' rotation, zoom and translation layers.

Every op takes ``[height, width, channels]`` or ``[batch, height, width, channels]``
with a known height and width, and is a gather or a slice of the input, so it keeps
the dtype and passes gradients through.
"""

from __future__ import annotations

import numbers

import numpy as np

from .. import ops as O
from ..errors import InvalidArgumentError, composite
from ..tensor import convert_args
from .resize import resize

__all__ = [
    "flip_left_right", "flip_up_down", "rot90", "transpose", "central_crop",
    "crop_to_bounding_box", "pad_to_bounding_box", "resize_with_crop_or_pad", "resize_with_pad",
    "affine_transform",
]


def _image(images, fn, ranks=(3, 4)):
    """The tensor, checked to be 3-D or 4-D with a known height and width."""
    (x,) = convert_args((images,))
    shape = list(x._type.shape)
    if x._type.rank not in ranks:
        want = " or ".join(str(r) for r in ranks)
        raise InvalidArgumentError(
            f"{fn}: 'image' must be {want}-D ([batch,] height, width, channels), got shape "
            f"{shape}")
    if not all(isinstance(d, numbers.Integral) for d in shape[-3:-1]):
        raise InvalidArgumentError(f"{fn}: the height and width must be known, got shape {shape}")
    return x, int(shape[-3]), int(shape[-2])


def _reverse(x, axis: int, n: int):
    return O.gather(x, np.arange(n - 1, -1, -1, dtype=np.int32), axis=axis % x._type.rank)


@composite("flip_left_right")
def flip_left_right(image):
    """The width axis reversed (``tf.image.flip_left_right``).

    Example:
        >>> jt.image.flip_left_right(jt.reshape(jt.range(3.0), [1, 3, 1]))[0, :, 0]
        jt.Tensor([2. 1. 0.], shape=(3,), dtype=float32)
    """
    x, _, w = _image(image, "flip_left_right")
    return _reverse(x, -2, w)


@composite("flip_up_down")
def flip_up_down(image):
    """The height axis reversed (``tf.image.flip_up_down``)."""
    x, h, _ = _image(image, "flip_up_down")
    return _reverse(x, -3, h)


def _swap_hw(x):
    perm = [1, 0, 2] if x._type.rank == 3 else [0, 2, 1, 3]
    return O.transpose(x, perm)


@composite("transpose")
def transpose(image, name=None):
    """Height and width swapped (``tf.image.transpose``)."""
    x, _, _ = _image(image, "transpose")
    return _swap_hw(x)


@composite("rot90")
def rot90(image, k=1, name=None):
    """``image`` rotated counter-clockwise by ``k`` quarter turns (``tf.image.rot90``)."""
    x, h, w = _image(image, "rot90")
    k = int(np.asarray(k))
    k %= 4
    if k == 0:
        return O.identity(x)
    if k == 1:
        return _swap_hw(_reverse(x, -2, w))
    if k == 2:
        return _reverse(_reverse(x, -2, w), -3, h)
    return _reverse(_swap_hw(x), -2, h)


def _int(v, fn, what) -> int:
    v = np.asarray(v)
    if v.ndim != 0 or not np.issubdtype(v.dtype, np.integer):
        raise InvalidArgumentError(f"{fn}: {what} must be an int, got {v!r}")
    return int(v)


@composite("central_crop")
def central_crop(image, central_fraction):
    """The central ``central_fraction`` of the height and width
    (``tf.image.central_crop``: the offset ``int((n - n * f) / 2)``, the size
    ``n - 2 * offset``)."""
    x, h, w = _image(image, "central_crop")
    f = float(central_fraction)
    if f <= 0.0 or f > 1.0:
        raise ValueError(f"central_crop: central_fraction must be within (0, 1], got {f}")
    if f == 1.0:
        return x
    top, left = int((h - h * f) / 2), int((w - w * f) / 2)
    return _slice_hw(x, top, left, h - 2 * top, w - 2 * left)


def _slice_hw(x, top, left, height, width):
    key = (slice(top, top + height), slice(left, left + width), slice(None))
    if x._type.rank == 4:
        key = (slice(None),) + key
    return x[key]


@composite("crop_to_bounding_box")
def crop_to_bounding_box(image, offset_height, offset_width, target_height, target_width):
    """The box with top-left corner ``(offset_height, offset_width)`` and size
    ``(target_height, target_width)`` (``tf.image.crop_to_bounding_box``)."""
    fn = "crop_to_bounding_box"
    x, h, w = _image(image, fn)
    oh, ow = _int(offset_height, fn, "offset_height"), _int(offset_width, fn, "offset_width")
    th, tw = _int(target_height, fn, "target_height"), _int(target_width, fn, "target_width")
    for ok, msg in ((ow >= 0, "offset_width must be >= 0"),
                    (oh >= 0, "offset_height must be >= 0"),
                    (tw > 0, "target_width must be > 0"),
                    (th > 0, "target_height must be > 0"),
                    (w >= tw + ow, "width must be >= target + offset"),
                    (h >= th + oh, "height must be >= target + offset")):
        if not ok:
            raise ValueError(f"{fn}: {msg}: image {list(x._type.shape)}, offset [{oh}, {ow}], "
                             f"target [{th}, {tw}]")
    return _slice_hw(x, oh, ow, th, tw)


@composite("pad_to_bounding_box")
def pad_to_bounding_box(image, offset_height, offset_width, target_height, target_width):
    """``image`` placed at ``(offset_height, offset_width)`` in a zero image of size
    ``(target_height, target_width)`` (``tf.image.pad_to_bounding_box``)."""
    fn = "pad_to_bounding_box"
    x, h, w = _image(image, fn)
    oh, ow = _int(offset_height, fn, "offset_height"), _int(offset_width, fn, "offset_width")
    th, tw = _int(target_height, fn, "target_height"), _int(target_width, fn, "target_width")
    after_h, after_w = th - oh - h, tw - ow - w
    for ok, msg in ((oh >= 0, "offset_height must be >= 0"),
                    (ow >= 0, "offset_width must be >= 0"),
                    (after_w >= 0, "width must be <= target - offset"),
                    (after_h >= 0, "height must be <= target - offset")):
        if not ok:
            raise ValueError(f"{fn}: {msg}: image {list(x._type.shape)}, offset [{oh}, {ow}], "
                             f"target [{th}, {tw}]")
    pads = [[oh, after_h], [ow, after_w], [0, 0]]
    if x._type.rank == 4:
        pads = [[0, 0]] + pads
    return O.pad(x, pads)


@composite("resize_with_crop_or_pad")
def resize_with_crop_or_pad(image, target_height, target_width):
    """Centrally cropped and/or zero-padded to ``(target_height, target_width)``
    (``tf.image.resize_with_crop_or_pad``: an odd surplus goes to the bottom/right)."""
    fn = "resize_with_crop_or_pad"
    x, h, w = _image(image, fn)
    th, tw = _int(target_height, fn, "target_height"), _int(target_width, fn, "target_width")
    if th <= 0 or tw <= 0:
        raise ValueError(f"{fn}: target_height and target_width must be > 0, got [{th}, {tw}]")
    dh, dw = th - h, tw - w
    cropped = crop_to_bounding_box(x, max(-dh // 2, 0), max(-dw // 2, 0), min(th, h),
                                   min(tw, w))
    return pad_to_bounding_box(cropped, max(dh // 2, 0), max(dw // 2, 0), th, tw)


@composite("resize_with_pad")
def resize_with_pad(image, target_height, target_width, method="bilinear", antialias=False):
    """Resized to fit ``(target_height, target_width)`` keeping its aspect ratio, then
    zero-padded to it, centred (``tf.image.resize_with_pad``; TF's float32 arithmetic)."""
    fn = "resize_with_pad"
    x, h, w = _image(image, fn)
    th, tw = _int(target_height, fn, "target_height"), _int(target_width, fn, "target_width")
    if th <= 0 or tw <= 0:
        raise ValueError(f"{fn}: target_height and target_width must be > 0, got [{th}, {tw}]")
    f32 = np.float32
    ratio = max(f32(w) / f32(tw), f32(h) / f32(th))
    rh, rw = f32(h) / ratio, f32(w) / ratio
    ph = max(0, int(np.floor((f32(th) - rh) / f32(2))))
    pw = max(0, int(np.floor((f32(tw) - rw) / f32(2))))
    resized = resize(x, [int(np.floor(rh)), int(np.floor(rw))], method=method,
                     antialias=antialias)
    return pad_to_bounding_box(resized, ph, pw, th, tw)


# --- the projective transform (TF's ImageProjectiveTransformV3, which Keras 3 calls) ---

_FILL_MODES = ("constant", "nearest", "reflect", "wrap")


def _map_coordinate(c, n: int, mode: str):
    """TF's ``map_coordinate`` for one axis of length ``n``: where a sample outside the
    image reads from (``constant`` leaves it outside, to be filled)."""
    if mode == "constant":
        return c
    if n <= 1 and mode != "nearest":
        return O.zeros_like(c)
    if mode == "reflect":
        sz2 = float(2 * n)
        # below 0: "d c b a | a b c d": fold by whole periods (C's truncating int cast)
        t = O.where(O.less(c, -sz2), c + sz2 * O.floor(-c / sz2), c)
        lo = O.where(O.less(t, -float(n)), t + sz2, -t - 1.0)
        u = c - sz2 * O.floor(c / sz2)
        hi = O.where(O.greater_equal(u, float(n)), sz2 - u - 1.0, u)
        c = O.where(O.less(c, 0.0), lo, O.where(O.greater(c, n - 1.0), hi, c))
    elif mode == "wrap":
        # TF's periods: counted in steps of n - 1, moved by n ("a b c d | a b c d")
        sz, step = float(n - 1), float(n)
        lo = c + step * (O.floor(-c / sz) + 1.0)
        hi = c - step * O.floor(c / sz)
        c = O.where(O.less(c, 0.0), lo, O.where(O.greater(c, n - 1.0), hi, c))
    return O.clip_by_value(c, 0.0, n - 1.0)


def _read(flat, yi, xi, h: int, w: int, fill, nimg):
    """Pixels at integer-valued float coordinates ``yi, xi`` ``[n, h', w']`` of the images
    ``flat`` ``[n * h * w, c]``; ``fill`` where a coordinate is off the image."""
    inside = O.logical_and(O.logical_and(O.greater_equal(yi, 0.0), O.less_equal(yi, h - 1.0)),
                           O.logical_and(O.greater_equal(xi, 0.0), O.less_equal(xi, w - 1.0)))
    y = O.cast(O.clip_by_value(yi, 0.0, h - 1.0), "int32")
    x = O.cast(O.clip_by_value(xi, 0.0, w - 1.0), "int32")
    base = O.reshape(O.range(nimg, dtype="int32") * (h * w), [-1, 1, 1])
    vals = O.gather(flat, base + y * w + x, axis=0)
    return O.where(O.expand_dims(inside, -1), vals, O.cast(fill, vals.dtype.name))


@composite("affine_transform")
def affine_transform(images, transform, interpolation="bilinear", fill_mode="constant",
                     fill_value=0.0):
    """``images`` resampled through projective transforms (``keras.ops.image.
    affine_transform`` on TF, i.e. ``ImageProjectiveTransformV3``).

    Each transform ``[a0, a1, a2, b0, b1, b2, c0, c1]`` maps the output pixel ``(x, y)``
    to the input point ``((a0 x + a1 y + a2) / k, (b0 x + b1 y + b2) / k)``,
    ``k = c0 x + c1 y + 1``. That point is folded into the image by ``fill_mode``
    (``reflect``: ``d c b a | a b c d``; ``wrap``; ``nearest``: clamped; ``constant``:
    outside reads ``fill_value``), then read by ``nearest`` (rounded half away from 0)
    or ``bilinear`` (four neighbours; a neighbour past the edge reads ``fill_value``,
    as in TF). The gather runs over the flattened batch, so the transforms can be
    tensors (random per image) and gradients reach the pixels.

    Args:
        images: ``[batch, height, width, channels]`` or ``[height, width, channels]``.
        transform: ``[8]`` or ``[batch, 8]`` floats.
    """
    fn = "affine_transform"
    x, h, w = _image(images, fn)
    if interpolation not in ("nearest", "bilinear"):
        raise ValueError(f"{fn}: interpolation must be one of ('nearest', 'bilinear'), got "
                         f"{interpolation!r}")
    if fill_mode not in _FILL_MODES:
        raise ValueError(f"{fn}: fill_mode must be one of {_FILL_MODES}, got {fill_mode!r}")
    (t,) = convert_args((transform,))
    if t._type.rank not in (1, 2) or t._type.shape[-1] != 8:
        raise InvalidArgumentError(
            f"{fn}: transform must be [8] or [batch, 8], got shape {list(t._type.shape)} "
            f"for images {list(x._type.shape)}")
    single = x._type.rank == 3
    if single:
        x = O.expand_dims(x, 0)
    if t._type.rank == 1:
        t = O.expand_dims(t, 0)
    dt = x.dtype
    xf = x if dt.name in ("float32", "float64") else O.cast(x, "float32")
    t = O.cast(t, "float32")
    n, c = x._type.shape[0], x._type.shape[-1]
    if not isinstance(n, numbers.Integral):
        n = O.shape(x)[0]  # a symbolic batch: its size is read at each call
    gy, gx = np.meshgrid(np.arange(h, dtype=np.float32), np.arange(w, dtype=np.float32),
                         indexing="ij")
    col = [O.reshape(t[:, i], [-1, 1, 1]) for i in range(8)]
    k = col[6] * gx + col[7] * gy + 1.0
    ok = O.not_equal(k, 0.0)
    safe_k = O.where(ok, k, O.ones_like(k))
    px = _map_coordinate((col[0] * gx + col[1] * gy + col[2]) / safe_k, w, fill_mode)
    py = _map_coordinate((col[3] * gx + col[4] * gy + col[5]) / safe_k, h, fill_mode)
    flat = O.reshape(xf, [-1, c])
    if xf.dtype.name != "float32":
        px, py = O.cast(px, xf.dtype.name), O.cast(py, xf.dtype.name)
    fill = float(fill_value)
    if interpolation == "nearest":
        # std::round: half away from zero
        ry = O.sign(py) * O.floor(O.abs(py) + 0.5)
        rx = O.sign(px) * O.floor(O.abs(px) + 0.5)
        out = _read(flat, ry, rx, h, w, fill, n)
    else:
        y0, x0 = O.floor(py), O.floor(px)
        y1, x1 = y0 + 1.0, x0 + 1.0
        wy0, wy1 = O.expand_dims(y1 - py, -1), O.expand_dims(py - y0, -1)
        wx0, wx1 = O.expand_dims(x1 - px, -1), O.expand_dims(px - x0, -1)
        top = wx0 * _read(flat, y0, x0, h, w, fill, n) + wx1 * _read(flat, y0, x1, h, w, fill, n)
        bot = wx0 * _read(flat, y1, x0, h, w, fill, n) + wx1 * _read(flat, y1, x1, h, w, fill, n)
        out = wy0 * top + wy1 * bot
    out = O.where(O.expand_dims(ok, -1), out, O.cast(fill, out.dtype.name))
    if out.dtype != dt:
        out = O.cast(out, dt.name)
    return O.squeeze(out, 0) if single else out
