"""``jt.random``: random tensors drawn from numpy Generators, seeded as in TF 2.x.

TF's seeding has two levels, and so does this module:

- ``set_seed(s)`` sets the global seed and restarts every random sequence, so the
  same program after the same ``set_seed`` draws the same numbers.
- an op's ``seed=`` argument picks its own sequence: for a given global seed, calls
  with ``seed=k`` draw the same succession of values (the first call after
  ``set_seed`` always gives the same tensor; a second call gives different values,
  as a TF eager op does). With an op seed but no global seed, a fixed default
  global seed is used, as TF does.
- with neither, numbers come from an unseeded generator (different each run).

All functions return eager ``jt.Tensor`` values; no gradient flows into a random
draw (there is nothing to differentiate).
"""

from __future__ import annotations

import numbers

import numpy as np

from .dtypes import as_dtype
from .tensor import Tensor, TensorShape, Variable

# the seeds and generators live with the ops that draw (dropout draws too); this module
# is their public face
from .ops.random_ops import (  # noqa: F401 - jt.random.set_seed / get_seed / generator
    _DEFAULT_GLOBAL_SEED, _sample, generator, get_seed, set_seed,
)

__all__ = [
    "set_seed", "get_seed", "uniform", "normal", "truncated_normal", "generator", "categorical",
    "shuffle",
]

def _is_int(d) -> bool:
    return isinstance(d, numbers.Integral) and not isinstance(d, bool)


def _index(d) -> int:
    if isinstance(d, bool):
        raise TypeError("a bool is not a dimension")
    return d.__index__()  # a 0-d integer tensor or numpy integer; a float has none


def _shape(shape, fn) -> tuple:
    if isinstance(shape, (Tensor, Variable)):
        shape = np.asarray(shape).tolist()
    if isinstance(shape, numbers.Integral):
        shape = (shape,)
    try:
        dims = tuple(int(d) if _is_int(d) else _index(d) for d in shape)
    except (TypeError, ValueError, AttributeError):
        # a float dim is an error (int() would truncate 2.5 to 2 without a word)
        raise TypeError(f"{fn}: shape must be an int or a list of ints, got {shape!r}") from None
    if any(d < 0 for d in dims) or any(d is None for d in dims):
        raise ValueError(f"{fn}: shape must be fully defined and non-negative, got {list(dims)}")
    return TensorShape(dims)


def _float_dtype(dtype, fn):
    dt = as_dtype(dtype)
    if not dt.is_floating:
        raise TypeError(f"{fn}: dtype must be a float type, got {dt.name}")
    return dt


def uniform(shape, minval=0, maxval=None, dtype="float32", seed=None, name=None):
    """Uniform values in ``[minval, maxval)`` (``tf.random.uniform``).

    Float dtypes default to ``maxval=1``. Integer dtypes need an explicit ``maxval``.
    """
    dims = _shape(shape, "uniform")
    dt = as_dtype(dtype)
    if dt.is_integer:
        if maxval is None:
            raise ValueError("uniform: an integer dtype needs an explicit maxval")
        if not minval < maxval:
            raise ValueError(f"uniform: need minval < maxval, got [{minval}, {maxval})")
        lo_i, hi_i = int(minval), int(maxval)
        return _sample(lambda d: generator(seed).integers(lo_i, hi_i, size=d), dims, dt)
    if not dt.is_floating:
        raise TypeError(f"uniform: dtype must be a float or integer type, got {dt.name}")
    lo = float(minval)
    hi = 1.0 if maxval is None else float(maxval)
    return _sample(lambda d: generator(seed).random(d) * (hi - lo) + lo, dims, dt)


def normal(shape, mean=0.0, stddev=1.0, dtype="float32", seed=None, name=None):
    """Normally distributed values (``tf.random.normal``)."""
    dims = _shape(shape, "normal")
    dt = _float_dtype(dtype, "normal")
    sd, mu = float(stddev), float(mean)
    return _sample(lambda d: generator(seed).standard_normal(d) * sd + mu, dims, dt)


def _truncated_standard_normal(g: np.random.Generator, dims) -> np.ndarray:
    """Standard normal draws, redrawing every value more than 2 away from 0."""
    a = g.standard_normal(dims)
    bad = np.abs(a) > 2.0
    while bad.any():
        a[bad] = g.standard_normal(int(bad.sum()))
        bad = np.abs(a) > 2.0
    return a


def truncated_normal(shape, mean=0.0, stddev=1.0, dtype="float32", seed=None, name=None):
    """Normal values, with those more than 2 standard deviations from the mean redrawn
    (``tf.random.truncated_normal``). The standard deviation of the result is about
    0.88 * ``stddev``."""
    dims = _shape(shape, "truncated_normal")
    dt = _float_dtype(dtype, "truncated_normal")
    sd, mu = float(stddev), float(mean)
    return _sample(lambda d: _truncated_standard_normal(generator(seed), d) * sd + mu,
                   dims, dt)


def categorical(logits, num_samples, dtype=None, seed=None, name=None):
    """Class indices drawn from ``softmax(logits)`` per row (``tf.random.categorical``):
    ``logits`` is ``[batch_size, num_classes]``, the result ``[batch_size, num_samples]``
    of ``dtype`` (int64 by default, or int32).

    The Gumbel-max trick: the index of the largest ``logits + Gumbel noise`` is a draw
    from the softmax, so the draw is one noise tensor (a fresh input of a compiled step
    at each call) and an argmax, which compile like any other op. No gradient flows.
    """
    from .errors import InvalidArgumentError
    from .ops import argmax, expand_dims
    from .tensor import convert_args

    (x,) = convert_args((logits,))
    if x._type.rank != 2:
        raise InvalidArgumentError(
            f"categorical: logits should be a matrix [batch_size, num_classes], got shape "
            f"{list(x._type.shape)}")
    if not x.dtype.is_floating:
        raise TypeError(f"categorical: logits must be a float tensor, got {x.dtype.name}")
    out = as_dtype("int64" if dtype is None else dtype)
    if out.name not in ("int32", "int64"):
        raise TypeError(f"categorical: dtype must be int32 or int64, got {out.name}")
    if not _is_int(num_samples) or num_samples < 0:
        raise ValueError(f"categorical: num_samples must be a non-negative int, got "
                         f"{num_samples!r}")
    batch, classes = x._type.shape
    noise = _sample(lambda d: generator(seed).gumbel(size=d),
                    (batch, int(num_samples), classes), x.dtype)
    return argmax(expand_dims(x, 1) + noise, axis=-1, output_type=out.name)


def shuffle(value, seed=None, name=None):
    """``value`` with its first axis in a random order (``tf.random.shuffle``); a scalar
    is returned as it is. No gradient flows, as in TF."""
    from .ops import gather, stop_gradient
    from .tensor import convert_args

    (x,) = convert_args((value,))
    if x._type.rank == 0:
        return x
    n = x._type.shape[0]
    perm = _sample(lambda d: generator(seed).permutation(d[0]), (n,), as_dtype("int64"))
    return gather(stop_gradient(x), perm, axis=0)
