"""Tensor creation and tiling: range, linspace, eye, meshgrid, tile, repeat, pad, add_n.

All composites of existing ops (constants, reshape, broadcast_to, concat, gather, add),
so they fuse, compile and differentiate as those do."""

from __future__ import annotations

import builtins
import numbers

import numpy as np

from ..dtypes import as_dtype
from ..errors import InvalidArgumentError, composite
from ..tensor import Tensor, Variable, convert_args, convert_to_tensor
from . import elementwise as E
from . import shaping as S

# TF's order when it infers one dtype for several arguments (tf.range)
_RANGE_ORDER = ("int32", "int64", "float32", "float64")


def _dtype_of(v) -> str:
    """The dtype TF gives a value: Python ints int32, Python floats float32."""
    if isinstance(v, (Tensor, Variable)):
        return v.dtype.name
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, numbers.Integral) and not isinstance(v, np.integer):
        return "int32"
    if isinstance(v, float):
        return "float32"
    return np.asarray(v).dtype.name


def _number(v, opname, what):
    """A concrete Python number from a number, a 0-d array or a 0-d eager tensor."""
    if isinstance(v, Variable):
        v = v.read_value()
    if isinstance(v, Tensor):
        if v._value is None:
            v._concrete(f"{opname}: {what}")  # raises: the value is known only at a call
        v = v.numpy()
    a = np.asarray(v)
    if a.ndim != 0:
        raise InvalidArgumentError(f"{opname}: {what} must be a scalar, got shape {list(a.shape)}")
    return a.item()


def range(start, limit=None, delta=1, dtype=None, name="range"):  # noqa: A001 (TF's name)
    """``[start, start + delta, ...]`` up to, not including, ``limit`` (``range(n)``
    counts from 0). The dtype is ``dtype``, else the widest of the arguments' (Python
    ints int32, floats float32), as TF infers it. Not differentiable.

    Example: ``jt.range(1, 10, 3)`` is ``[1, 4, 7]`` (int32)."""
    if limit is None:
        start, limit = 0, start
    args = (start, limit, delta)
    if dtype is None:
        kinds = [_dtype_of(a) for a in args]
        bad = [k for k in kinds if k not in _RANGE_ORDER]
        if bad:
            raise TypeError(f"range: arguments must be int32, int64, float32 or float64, got "
                            f"{bad[0]}")
        dt = max(kinds, key=_RANGE_ORDER.index)
    else:
        dt = as_dtype(dtype).name
    s, lim, d = (_number(a, "range", w) for a, w in zip(args, ("start", "limit", "delta")))
    if d == 0:
        raise InvalidArgumentError(f"range: Requires delta != 0: {d}")
    if (d > 0 and s > lim) or (d < 0 and s < lim):
        rel = "<=" if d > 0 else ">="
        raise InvalidArgumentError(
            f"range: Requires start {rel} limit when delta {'>' if d > 0 else '<'} 0: "
            f"{s}/{lim}")
    if np.dtype(dt).kind in "iu":
        n = max(0, -(-(int(lim) - int(s)) // int(d)))
    else:
        n = max(0, int(np.ceil((lim - s) / d)))
    values = (np.asarray(s, np.float64 if np.dtype(dt).kind == "f" else np.int64)
              + np.arange(n) * d)
    return convert_to_tensor(values.astype(dt))


def _float_pair(start, stop, opname):
    """``start`` and ``stop`` as tensors of one float dtype: integers become float64,
    Python floats float32 (TF's choice)."""
    if not isinstance(start, (Tensor, Variable)) and not isinstance(stop, (Tensor, Variable)):
        kinds = {_dtype_of(start), _dtype_of(stop)}
        dt = "float64" if kinds <= {"int32", "int64"} or "float64" in kinds else "float32"
        return convert_to_tensor(start, dt), convert_to_tensor(stop, dt)
    a, b = convert_args((start, stop))
    if not a.dtype.is_floating:
        a = E.cast(a, "float64")
    if not b.dtype.is_floating:
        b = E.cast(b, a.dtype)
    if a.dtype != b.dtype:
        raise InvalidArgumentError(
            f"{opname}: start and stop must have one dtype, got {a.dtype.name} and "
            f"{b.dtype.name}")
    return a, b


@composite("linspace")
def linspace(start, stop, num, name=None, axis=0):
    """``num`` evenly spaced values from ``start`` to ``stop``, both included, along a new
    ``axis`` (``start`` and ``stop`` may be tensors that broadcast). Differentiable in
    ``start`` and ``stop``.

    Example: ``jt.linspace(0., 1., 5)`` is ``[0., .25, .5, .75, 1.]``."""
    a, b = _float_pair(start, stop, "linspace")
    num = int(_number(num, "linspace", "num"))
    if num < 0:
        raise InvalidArgumentError(f"linspace: num must be >= 0, got {num}")
    from .registry import broadcast_shapes

    try:
        shape = broadcast_shapes(a._type.shape, b._type.shape)
    except ValueError as e:
        raise InvalidArgumentError(f"linspace: start and stop: {e}") from None
    r = len(shape)
    if not -r - 1 <= axis <= r:
        raise InvalidArgumentError(f"linspace: axis {axis} out of range for rank {r + 1}")
    axis %= r + 1
    a, b = S.broadcast_to(a, shape), S.broadcast_to(b, shape)
    a, b = S.expand_dims(a, axis), S.expand_dims(b, axis)
    if num <= 1:
        return a if num == 1 else S.strided_slice(a, _along(axis, r + 1, 0, 0))
    # as TF: the ends exactly, the inside as start + k * (stop - start) / (num - 1)
    step = E.divide(E.subtract(b, a), float(num - 1))
    ks = np.arange(1, num - 1, dtype=a.dtype.name).reshape(
        (1,) * axis + (num - 2,) + (1,) * (r - axis))
    inner = E.add(a, E.multiply(step, convert_to_tensor(ks)))
    return S.concat([a, inner, b], axis)


def _along(axis, rank, lo, hi):
    return tuple(("slice", lo, hi, None) if i == axis else ("slice", None, None, None)
                 for i in builtins.range(rank))


def eye(num_rows, num_columns=None, batch_shape=None, dtype="float32", name=None):
    """The identity matrix ``[num_rows, num_columns]`` (square by default), repeated over
    ``batch_shape``. Not differentiable (a constant).

    Example: ``jt.eye(2, 3)`` is ``[[1., 0., 0.], [0., 1., 0.]]``."""
    n = int(_number(num_rows, "eye", "num_rows"))
    m = n if num_columns is None else int(_number(num_columns, "eye", "num_columns"))
    if n < 0 or m < 0:
        raise InvalidArgumentError(f"eye: sizes must be >= 0, got [{n}, {m}]")
    batch = () if batch_shape is None else E.as_shape(batch_shape, "eye")
    a = np.eye(n, m, dtype=as_dtype(dtype).as_numpy_dtype)
    return convert_to_tensor(np.ascontiguousarray(np.broadcast_to(a, batch + (n, m))))


@composite("meshgrid")
def meshgrid(*args, **kwargs):
    """Coordinate grids from 1-D tensors: ``indexing="xy"`` (Cartesian, the default:
    the first two outputs' axes swapped) or ``"ij"`` (matrix).

    Example: ``x, y = jt.meshgrid([1, 2, 3], [4, 5])`` gives two ``[2, 3]`` grids."""
    indexing = kwargs.pop("indexing", "xy")
    kwargs.pop("name", None)
    if kwargs:
        raise TypeError(f"meshgrid: unexpected keyword arguments {sorted(kwargs)}")
    if indexing not in ("xy", "ij"):
        raise ValueError(f"Argument `indexing` parameter must be either 'xy' or 'ij', got "
                         f"'{indexing}'")
    xs = [S.reshape(convert_to_tensor(a) if not isinstance(a, (Tensor, Variable))
                    else convert_args((a,))[0], (-1,)) for a in args]
    nd = len(xs)
    if nd == 0:
        return []
    sizes = [x._type.shape[0] for x in xs]
    shapes = [tuple(-1 if j == i else 1 for j in builtins.range(nd)) for i in builtins.range(nd)]
    if indexing == "xy" and nd > 1:  # Cartesian: the first two axes swapped
        shapes = [_swap01(s) for s in shapes]
        sizes = _swap01(sizes)
    out = tuple(sizes)
    return [S.broadcast_to(S.reshape(x, s), out) for x, s in zip(xs, shapes)]


def _swap01(s):
    s = list(s)
    s[0], s[1] = s[1], s[0]
    return tuple(s)


def _int_list(v, opname, what) -> list:
    """``(ints, shape)``: the Python ints of a list, tuple, array or integer tensor, and
    its shape."""
    if isinstance(v, Variable):
        v = v.read_value()
    if isinstance(v, Tensor):
        if not (v.dtype.is_integer):
            raise TypeError(f"{opname}: {what} must be integers, got {v.dtype.name}")
        if v._value is None:
            v._concrete(f"{opname}: {what}")
        v = v.numpy()
    a = np.asarray(v)
    if a.dtype.kind not in "iu" and a.size:
        raise TypeError(f"{opname}: {what} must be integers, got {v!r}")
    return [int(i) for i in a.reshape(-1)], a.shape


@composite("tile")
def tile(input, multiples, name=None):
    """``input`` repeated ``multiples[i]`` times along each axis ``i``.

    Example: ``jt.tile([[1, 2]], [2, 3])`` has shape ``[2, 6]``."""
    (x,) = convert_args((input,))
    ms, mshape = _int_list(multiples, "tile", "multiples")
    r = x.ndim
    if len(mshape) != 1 or len(ms) != r:
        raise InvalidArgumentError(
            f"tile: Expected multiples argument to be a vector of length {r} but got length "
            f"{len(ms)} (multiples {ms}, input {x._type})")
    for i, m in enumerate(ms):
        if m < 0:
            raise InvalidArgumentError(f"tile: Expected multiples[{i}] >= 0, but got {m}")
    if all(m == 1 for m in ms):
        return x
    shape = x._type.shape
    spread, big, out = [], [], []
    for m, d in zip(ms, shape):
        spread += [1, d]
        big += [m, d]
        out.append(m * d)
    return S.reshape(S.broadcast_to(S.reshape(x, spread), big), out)


@composite("repeat")
def repeat(input, repeats, axis=None, name=None):
    """Each element of ``input`` (flattened when ``axis`` is None) repeated along
    ``axis``: ``repeats`` is one count, or one count per element of that axis.

    Example: ``jt.repeat([[1, 2], [3, 4]], [1, 3], axis=0)`` has shape ``[4, 2]``."""
    (x,) = convert_args((input,))
    if axis is None:
        x, axis = S.reshape(x, (-1,)), 0
    r = x.ndim
    if not -r <= int(axis) < r:
        raise InvalidArgumentError(f"repeat: axis {axis} out of range for input {x._type}")
    a = int(axis) % r
    reps, rshape = _int_list(repeats, "repeat", "repeats")
    if len(rshape) > 1:
        raise InvalidArgumentError(f"repeat: repeats must be a scalar or 1-D, got shape "
                                   f"{list(rshape)}")
    if any(k < 0 for k in reps):
        raise InvalidArgumentError(f"repeat: repeats must be >= 0, got {reps}")
    shape = x._type.shape
    n = shape[a]
    if len(reps) == 1:  # one count: a size-1 axis after `a`, broadcast, folded in
        k = reps[0]
        spread = shape[:a + 1] + (1,) + shape[a + 1:]
        big = shape[:a + 1] + (k,) + shape[a + 1:]
        return S.reshape(S.broadcast_to(S.reshape(x, spread), big),
                         shape[:a] + (n * k,) + shape[a + 1:])
    if len(reps) != n:
        raise InvalidArgumentError(
            f"repeat: repeats has {len(reps)} entries, but axis {a} of input {x._type} has "
            f"size {n}")
    idx = np.repeat(np.arange(n, dtype=np.int32), reps)
    return S.gather(x, convert_to_tensor(idx), axis=a)


_PAD_MODES = ("CONSTANT", "REFLECT", "SYMMETRIC")


@composite("pad")
def pad(tensor, paddings, mode="CONSTANT", constant_values=0, name=None):
    """``tensor`` with ``paddings[i] = [before, after]`` elements added on each side of
    axis ``i``: ``constant_values`` (``"CONSTANT"``), or the tensor mirrored without
    (``"REFLECT"``) or with (``"SYMMETRIC"``) its edge.

    Example: ``jt.pad([[1, 2]], [[1, 0], [0, 2]])`` is ``[[0, 0, 0, 0], [1, 2, 0, 0]]``."""
    (x,) = convert_args((tensor,))
    m = str(mode).upper()
    if m not in _PAD_MODES:
        raise ValueError('Value of argument `mode` expected to be one of "CONSTANT", '
                         f'"REFLECT", or "SYMMETRIC". Received `mode` = {mode}')
    flat, pshape = _int_list(paddings, "pad", "paddings")
    r = x.ndim
    if tuple(pshape) != (r, 2):
        raise InvalidArgumentError(
            f"pad: The first dimension of paddings must be the rank of inputs: paddings of "
            f"shape {list(pshape)} for input {x._type} (need [{r}, 2])")
    pads = [(flat[2 * i], flat[2 * i + 1]) for i in builtins.range(r)]
    for b, a in pads:
        if b < 0 or a < 0:
            raise InvalidArgumentError(f"pad: Paddings must be non-negative: {b} {a}")
    shape = list(x._type.shape)
    for i, (b, a) in enumerate(pads):
        n = shape[i]
        if m == "REFLECT" and (b >= n or a >= n) and (b or a):
            raise InvalidArgumentError(
                f"pad: paddings must be less than the dimension size: {b}, {a} not less than "
                f"{n} (axis {i} of {x._type}, REFLECT)")
        if m == "SYMMETRIC" and (b > n or a > n):
            raise InvalidArgumentError(
                f"pad: paddings must be no greater than the dimension size: {b}, {a} greater "
                f"than {n} (axis {i} of {x._type}, SYMMETRIC)")
    for i, (b, a) in enumerate(pads):
        if not (b or a):
            continue
        if m == "CONSTANT":
            parts = []
            for k in (b, a):
                side = tuple(shape[:i]) + (k,) + tuple(shape[i + 1:])
                parts.append(_constant_block(side, constant_values, x) if k else None)
            x = S.concat([p for p in (parts[0], x, parts[1]) if p is not None], i)
        else:
            idx = np.pad(np.arange(shape[i], dtype=np.int32), (b, a), mode=m.lower())
            x = S.gather(x, convert_to_tensor(idx), axis=i)
        shape[i] += b + a
    return x


def _constant_block(shape, value, like):
    if isinstance(value, (Tensor, Variable)):
        (v,) = convert_args((value,))
        if v.dtype != like.dtype:
            raise InvalidArgumentError(
                f"pad: constant_values has dtype {v.dtype.name}, the tensor {like.dtype.name}")
        return S.broadcast_to(S.reshape(v, ()), shape)
    return E.fill(shape, value, like.dtype.name, _opname="pad")


@composite("add_n")
def add_n(inputs, name=None):
    """The elementwise sum of a list of tensors of one shape and dtype (no broadcasting).

    Example: ``jt.add_n([a, b, c])`` is ``a + b + c``."""
    if isinstance(inputs, (Tensor, Variable)) or not inputs:
        raise ValueError("add_n: Inputs must be an iterable of at least one Tensor with the "
                         "same dtype and shape.")
    xs = convert_args(tuple(inputs))
    for k, x in enumerate(xs[1:], 1):
        if x._type.shape != xs[0]._type.shape or x.dtype != xs[0].dtype:
            raise InvalidArgumentError(
                f"add_n: Inputs must have the same size and shape. Input 0: {xs[0]._type} != "
                f"input {k}: {x._type}")
    total = xs[0]
    for x in xs[1:]:
        total = E.add(total, x)
    return total
