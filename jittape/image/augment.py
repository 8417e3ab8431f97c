"""``jt.image``'s random ops: flips, crops, brightness and contrast, seeded as
``jt.random`` is (``jt.random.set_seed`` and an op ``seed=``). Each draw is a fresh
input of a compiled function at every call, as in ``jt.random``."""

from __future__ import annotations

import numbers

import numpy as np

from .. import ops as O
from ..dtypes import as_dtype
from ..errors import InvalidArgumentError, composite
from ..ops.random_ops import _sample, generator
from ..tensor import convert_args
from .color import adjust_brightness, adjust_contrast
from .geometry import _image, _reverse

__all__ = ["random_flip_left_right", "random_flip_up_down", "random_crop", "random_brightness",
           "random_contrast"]

_F32 = as_dtype("float32")


def _uniform(shape, lo, hi, seed):
    return _sample(lambda d: generator(seed).random(d) * (hi - lo) + lo, tuple(shape), _F32)


def _random_flip(image, axis, seed, fn):
    x, h, w = _image(image, fn)
    flipped = _reverse(x, axis, w if axis == -2 else h)
    if x._type.rank == 3:
        return O.where(O.less(_uniform((), 0.0, 1.0, seed), 0.5), flipped, x)
    # TF: round(u) per image, so u > 0.5 flips (0.5 itself rounds to even, 0)
    u = _uniform((x._type.shape[0], 1, 1, 1), 0.0, 1.0, seed)
    return O.where(O.greater(u, 0.5), flipped, x)


@composite("random_flip_left_right")
def random_flip_left_right(image, seed=None):
    """Each image mirrored left-right with probability 1/2
    (``tf.image.random_flip_left_right``)."""
    return _random_flip(image, -2, seed, "random_flip_left_right")


@composite("random_flip_up_down")
def random_flip_up_down(image, seed=None):
    """Each image flipped upside down with probability 1/2
    (``tf.image.random_flip_up_down``)."""
    return _random_flip(image, -3, seed, "random_flip_up_down")


@composite("random_crop")
def random_crop(value, size, seed=None, name=None):
    """A slice of ``size`` at a uniformly random offset (``tf.image.random_crop``: any
    rank, one offset per axis in ``[0, shape - size]``).

    Example:
        >>> jt.image.random_crop(jt.zeros([5, 5, 3]), [3, 3, 3], seed=1).shape
        TensorShape([3, 3, 3])
    """
    (x,) = convert_args((value,))
    shape = list(x._type.shape)
    size = [int(s) for s in np.asarray(size).reshape(-1)]
    if len(size) != len(shape) or not all(isinstance(d, numbers.Integral) for d in shape):
        raise InvalidArgumentError(
            f"random_crop: size {size} must have one entry per axis of a fully known shape, "
            f"got shape {shape}")
    if any(s > d or s < 0 for s, d in zip(size, shape)):
        raise InvalidArgumentError(f"random_crop: need value.shape >= size, got shape {shape} "
                                   f"and size {size}")
    limits = np.array([d - s + 1 for s, d in zip(size, shape)], np.int64)
    offsets = _sample(lambda d: generator(seed).integers(0, limits), (len(shape),),
                      as_dtype("int32"))
    out = x
    for axis, (s, d) in enumerate(zip(size, shape)):
        if s != d:
            out = O.gather(out, O.range(s, dtype="int32") + offsets[axis], axis=axis)
    return out


@composite("random_brightness")
def random_brightness(image, max_delta, seed=None):
    """``adjust_brightness`` by a delta uniform in ``[-max_delta, max_delta)``
    (``tf.image.random_brightness``)."""
    if max_delta < 0:
        raise ValueError(f"random_brightness: max_delta must be non-negative, got {max_delta}")
    return adjust_brightness(image, _uniform((), -float(max_delta), float(max_delta), seed))


@composite("random_contrast")
def random_contrast(image, lower, upper, seed=None):
    """``adjust_contrast`` by a factor uniform in ``[lower, upper)``
    (``tf.image.random_contrast``)."""
    if upper <= lower:
        raise ValueError(f"random_contrast: upper must be > lower, got [{lower}, {upper}]")
    if lower < 0:
        raise ValueError(f"random_contrast: lower must be non-negative, got {lower}")
    return adjust_contrast(image, _uniform((), float(lower), float(upper), seed))
