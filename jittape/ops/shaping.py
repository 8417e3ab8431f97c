"""Shape ops: reshape, transpose, broadcast, concat, slicing, gather, one_hot."""

from __future__ import annotations

import numbers

import numpy as np

from ..errors import InvalidArgumentError, composite
from ..compiler.ir import decode_index, NO_GRADIENT, Type
from ..tensor import Tensor, Variable, apply, convert_args, convert_to_tensor
from . import elementwise as E
from ..compiler.dims import Dim
from ..dtypes import as_dtype
from ..compiler.dims import unify
from .registry import defop, normalize_axis, prod, same_dtype, symbolic_probe
from .sizes import symbolic_shape, symbolic_size


def _known(shape, opname):
    if any(d is None for d in shape):
        raise ValueError(f"{opname} needs a fully known input shape, got {list(shape)}")


# ---------------------------------------------------------------------------
# reshape


def _resolve_shape(shape, size, opname="reshape"):
    """``shape`` with its -1 worked out for ``size`` elements (sizes may be symbolic,
    ``jittape.compiler.dims``: ``s0 * 784`` elements into ``[-1, 784]`` gives ``[s0, 784]``)."""
    shape = [d if isinstance(d, Dim) else int(d) for d in shape]
    if shape.count(-1) > 1:
        raise ValueError(f"{opname}: only one dimension can be -1, got {shape}")
    if -1 in shape:
        rest = prod(d for d in shape if d != -1)
        if rest == 0 or size % rest:
            raise ValueError(f"{opname}: cannot reshape {size} elements into {shape}")
        shape[shape.index(-1)] = size // rest
    if prod(shape) != size:
        raise ValueError(
            f"Input to reshape is a tensor with {size} values, but the requested shape has "
            f"{prod(shape)}"
        )
    return tuple(shape)


def _reshape_infer(types, shape):
    (x,) = types
    _known(x.shape, "reshape")
    return Type(_resolve_shape(shape, prod(x.shape)), x.dtype)


reshape_op = defop(
    "reshape", inputs=1, kind="shape", view="layout",
    forward=lambda x, shape: np.reshape(x, _resolve_shape(shape, x.size)),
    infer=_reshape_infer,
    vjp=lambda g, out, x, shape: (reshape(g, x._type.shape),),
)


def reshape(tensor, shape, name=None):
    """``tensor`` with a new shape of the same size (one dim may be -1; an int is a 1-D
    shape, as in TF)."""
    (x,) = convert_args((tensor,))
    shape = E.as_shape(shape, "reshape", allow_minus_one=True)
    if shape == x._type.shape:
        return x
    return apply(reshape_op, x, shape=shape)


# ---------------------------------------------------------------------------
# transpose


def _transpose_infer(types, perm):
    (x,) = types
    if sorted(perm) != list(range(x.rank)):
        raise ValueError(f"transpose: perm {list(perm)} is not a permutation of rank {x.rank}")
    return Type(tuple(x.shape[p] for p in perm), x.dtype)


transpose_op = defop(
    "transpose", inputs=1, kind="shape", view="layout",
    forward=lambda x, perm: np.transpose(x, perm),
    infer=_transpose_infer,
    vjp=lambda g, out, x, perm: (transpose(g, tuple(int(i) for i in np.argsort(perm))),),
)


def transpose(a, perm=None, name=None, conjugate=False):
    """Permute the dimensions (reverse them when ``perm`` is None)."""
    (x,) = convert_args((a,))
    if perm is None:
        perm = tuple(reversed(range(x.ndim)))
    r = x.ndim
    if len(perm) != r or any(not -r <= int(p) < r for p in perm):
        raise InvalidArgumentError(
            f"transpose: perm {list(perm)} is not a permutation of the axes of {x._type}"
        )
    perm = tuple(int(p) % r for p in perm)
    if perm == tuple(range(x.ndim)):
        return x
    return apply(transpose_op, x, perm=perm)


def swap_last(x):
    """Swap the last two axes (matrix transpose of a batch)."""
    r = x.ndim
    return transpose(x, tuple(range(r - 2)) + (r - 1, r - 2))


# ---------------------------------------------------------------------------
# broadcast_to


def _broadcast_infer(types, shape):
    (x,) = types
    from .registry import broadcast_shapes

    out = broadcast_shapes(x.shape, shape)
    if out != tuple(shape):
        raise ValueError(f"cannot broadcast {list(x.shape)} to {list(shape)}")
    return Type(tuple(shape), x.dtype)


broadcast_to_op = defop(
    "broadcast_to", inputs=1, kind="shape", cost="cheap", view="broadcast",
    forward=lambda x, shape: np.broadcast_to(x, shape),
    infer=_broadcast_infer,
    vjp=lambda g, out, x, shape: (g,),  # autodiff sums g back to x's shape
)


def broadcast_to(input, shape, name=None):
    (x,) = convert_args((input,))
    shape = E.as_shape(shape, "broadcast_to")
    if shape == x._type.shape:
        return x
    return apply(broadcast_to_op, x, shape=shape)


@composite("expand_dims")
def expand_dims(input, axis, name=None):
    """Insert a dimension of size 1 at ``axis``."""
    (x,) = convert_args((input,))
    r = x.ndim
    if not -r - 1 <= axis <= r:
        raise InvalidArgumentError(
            f"expand_dims: axis {axis} out of range [{-r - 1}, {r}] for input {x._type}"
        )
    axis = axis % (r + 1)
    shape = list(x._type.shape)
    shape.insert(axis, 1)
    return reshape(x, shape)


@composite("squeeze")
def squeeze(input, axis=None, name=None):
    """Remove dimensions of size 1 (those in ``axis``, or all)."""
    (x,) = convert_args((input,))
    shape = x._type.shape
    if axis is None:
        keep = [d for d in shape if d != 1]
    else:
        try:
            axes = normalize_axis(axis, len(shape), "squeeze")
        except ValueError as e:
            raise InvalidArgumentError(str(e)) from None
        for a in axes:
            if shape[a] != 1:
                raise InvalidArgumentError(
                    f"squeeze: cannot squeeze dim {a} of shape {list(shape)}, its size is not 1"
                )
        keep = [d for i, d in enumerate(shape) if i not in axes]
    return reshape(x, keep)


# ---------------------------------------------------------------------------
# concat / stack


def _concat_infer(types, axis):
    if not types:
        raise ValueError("concat needs at least one tensor")
    same_dtype(types, "concat inputs")
    r = types[0].rank
    a = axis % r if r else 0
    for t in types:
        if t.rank != r or not all(
            unify(t.shape[i], types[0].shape[i]) for i in range(r) if i != a
        ):
            raise ValueError(
                "ConcatOp: Dimension mismatch: "
                + ", ".join(str(list(t.shape)) for t in types)
                + f" on axis {axis}"
            )
    shape = list(types[0].shape)
    shape[a] = sum(t.shape[a] for t in types)
    return Type(tuple(shape), types[0].dtype)


def _concat_vjp(g, out, *xs, axis):
    grads, start = [], 0
    r = g.ndim
    for x in xs:
        n = x._type.shape[axis]
        key = tuple(("slice", start, start + n, None) if i == axis else ("slice", None, None, None)
                    for i in range(r))
        grads.append(strided_slice(g, key))
        start += n
    return tuple(grads)


concat_op = defop(
    "concat", inputs=None, kind="shape",
    forward=lambda *xs, axis: np.concatenate(xs, axis=axis),
    infer=_concat_infer, vjp=_concat_vjp,
)


def concat(values, axis, name=None):
    """Join tensors along an existing axis."""
    xs = convert_args(tuple(values))
    if not xs:
        raise InvalidArgumentError("concat needs at least one tensor")
    r = xs[0].ndim
    if not -r <= axis < r:
        raise InvalidArgumentError(
            f"concat: axis {axis} out of range for inputs "
            + ", ".join(str(x._type) for x in xs)
        )
    if len(xs) == 1:
        return xs[0]
    return apply(concat_op, *xs, axis=axis % r)


@composite("stack")
def stack(values, axis=0, name=None):
    """Join tensors of one shape along a new axis."""
    xs = convert_args(tuple(values))
    if not xs:
        raise InvalidArgumentError("stack needs at least one tensor")
    shapes = {x._type.shape for x in xs}
    if len(shapes) > 1:
        raise InvalidArgumentError(
            "stack: shapes of all inputs must match: "
            + ", ".join(str(list(x._type.shape)) for x in xs)
        )
    return concat([expand_dims(x, axis) for x in xs], axis=axis)


@composite("unstack")
def unstack(value, num=None, axis=0, name=None):
    """The slices of ``value`` along ``axis``, as a list."""
    (x,) = convert_args((value,))
    r = x.ndim
    if not -r <= axis < r:
        raise InvalidArgumentError(f"unstack: axis {axis} out of range for input {x._type}")
    n = x._type.shape[axis]
    if num is not None and num != n:
        raise InvalidArgumentError(f"unstack: num={num} but axis {axis} of {x._type} has {n}")
    return [squeeze(_take_along(x, i, axis), axis) for i in range(n)]


def _take_along(x, i, axis):
    r = x.ndim
    axis %= r
    key = tuple(("slice", i, i + 1, None) if d == axis else ("slice", None, None, None)
                for d in range(r))
    return strided_slice(x, key)


# ---------------------------------------------------------------------------
# Slicing


_decode = decode_index


def _encode(key):
    if not isinstance(key, tuple):
        key = (key,)
    out = []
    for k in key:
        if isinstance(k, slice):
            parts = []
            for p in (k.start, k.stop, k.step):
                if isinstance(p, (Tensor, Variable)):
                    p = int(p)
                parts.append(None if p is None else int(p))
            out.append(("slice", *parts))
        elif k is Ellipsis:
            out.append("...")
        elif k is None:
            out.append("newaxis")
        elif isinstance(k, (numbers.Integral, np.integer)) and not isinstance(k, bool):
            out.append(int(k))
        else:
            return None
    return tuple(out)


def _slice_infer(types, key):
    (x,) = types
    _known(x.shape, "strided_slice")
    def rule(shape, size):
        index = _decode(tuple(_sized(k, size) for k in key))
        return np.shape(np.broadcast_to(np.empty((), dtype=bool), shape)[index])

    try:
        return Type(symbolic_probe(x.shape, rule), x.dtype)
    except IndexError as e:
        raise ValueError(f"slice {_fmt_key(key)} of shape {list(x.shape)}: {e}") from None


def _sized(k, size):
    """A key entry with its bounds through ``size`` (symbolic bounds: a concat's VJP)."""
    if isinstance(k, tuple) and k and k[0] == "slice":
        return ("slice",) + tuple(None if p is None else size(p) for p in k[1:])
    return k


def _fmt_key(key):
    return "[" + ", ".join(
        ":".join("" if p is None else str(p) for p in k[1:]) if isinstance(k, tuple) else str(k)
        for k in key
    ) + "]"


strided_slice_op = defop(
    "strided_slice", inputs=1, kind="shape", view="slice",
    forward=lambda x, key: x[_decode(key)],
    infer=_slice_infer,
    vjp=lambda g, out, x, key: (strided_slice_grad(g, x._type.shape, key),),
)


def _slice_grad_fwd(g, shape, key):
    z = np.zeros(shape, dtype=g.dtype)
    z[_decode(key)] = g  # basic indexing selects each element once
    return z


def _slice_grad_infer(types, shape, key):
    return Type(shape, types[0].dtype)


strided_slice_grad_op = defop(
    "strided_slice_grad", inputs=1, kind="shape",
    forward=_slice_grad_fwd, infer=_slice_grad_infer,
    vjp=lambda g, out, dy, shape, key: (strided_slice(g, key),),
)


def strided_slice(x, key):
    out = apply(strided_slice_op, x, key=tuple(key))
    if x._tracer is not None and x._tracer.static:
        known = E._static(x)
        if known is not None:  # a slice of jt.shape(t): its sizes are known too
            part = known[decode_index(tuple(key))]
            if not isinstance(part, np.ndarray):  # one size: a 0-d object array
                one = np.empty((), dtype=object)
                one[()] = part
                part = one
            out._tracer.static[out._id] = part
    return out


def strided_slice_grad(g, shape, key):
    return apply(strided_slice_grad_op, g, shape=tuple(shape), key=tuple(key))


def getitem(x, key):
    """``x[key]``: basic indexing (ints, slices, ``None``, ``...``) is a view with a
    gradient; an integer tensor, array or list indexes axis 0 through ``gather``."""
    (x,) = convert_args((x,))
    enc = _encode(key)
    if enc is not None:
        return strided_slice(x, enc)
    if isinstance(key, (Tensor, Variable, np.ndarray, list)):
        idx = convert_to_tensor(key)
        if idx.dtype.is_bool:
            raise InvalidArgumentError(
                "boolean mask indexing is not supported (its shape depends on values); "
                "use jt.where"
            )
        return gather(x, idx, axis=0)
    raise InvalidArgumentError(f"unsupported index {key!r} for a tensor of shape {x.shape}")


# ---------------------------------------------------------------------------
# gather / scatter


def _gather_infer(types, axis):
    p, i = types
    if i.dtype not in ("int32", "int64"):
        raise TypeError(f"gather indices must be int32 or int64, got {i.dtype}")
    if not -p.rank <= axis < p.rank:
        raise ValueError(f"gather: axis {axis} out of range for params of rank {p.rank}")
    a = axis % p.rank
    return Type(p.shape[:a] + i.shape + p.shape[a + 1:], p.dtype)


def _first_out_of_range(i, n: int):
    """The flat position (C order) of the first value of ``i`` not in ``[0, n)``, or
    None when all are in range."""
    if i.size and (i.min() < 0 or i.max() >= n):
        return int(np.flatnonzero((i < 0) | (i >= n))[0])
    return None


def check_indices(op: str, i, n: int) -> None:
    """Raise, with TF's message, when an index of ``i`` is not in ``[0, n)``: the first
    bad one in C order, where it is and its value (``gather: indices[1,0] = 7 is not
    in [0, 3)``). The compiled kernels make the same check with the same message
    (``backends/schedule_ops.py: _index_check``)."""
    flat = _first_out_of_range(i, n)
    if flat is not None:
        where = np.unravel_index(flat, i.shape)
        at = f"[{','.join(str(int(k)) for k in where)}]" if i.ndim else ""
        raise InvalidArgumentError(
            f"{op}: indices{at} = {i.ravel()[flat]} is not in [0, {n})")


def _gather_fwd(p, i, axis):
    check_indices("gather", i, p.shape[axis])
    return np.take(p, i, axis=axis)


gather_op = defop(
    "gather", inputs=2, kind="other", forward=_gather_fwd, infer=_gather_infer,
    vjp=lambda g, out, p, i, axis: (scatter_add(g, i, p._type.shape, axis), None),
)


def _scatter_fwd(g, i, shape, axis):
    check_indices("scatter_add", i, shape[axis])
    z = np.zeros(shape, dtype=g.dtype)
    zm = np.moveaxis(z, axis, 0)
    gm = g.reshape(shape[:axis] + (i.size,) + shape[axis + 1:])
    np.add.at(zm, i.ravel(), np.moveaxis(gm, axis, 0))
    return z


def _scatter_infer(types, shape, axis):
    return Type(shape, types[0].dtype)


# the dense gradient of gather (TF returns IndexedSlices): sums repeated indices
scatter_add_op = defop(
    "scatter_add", inputs=2, kind="other", forward=_scatter_fwd, infer=_scatter_infer,
    vjp=lambda g, out, dy, i, shape, axis: (gather(g, i, axis=axis), None),
)


def gather(params, indices, axis=None, batch_dims=0, name=None):
    """Slices of ``params`` at ``indices`` along ``axis`` (default 0)."""
    if batch_dims:
        raise NotImplementedError("gather with batch_dims is not supported yet")
    (p,) = convert_args((params,))
    i = indices if isinstance(indices, Tensor) else convert_to_tensor(indices)
    axis = 0 if axis is None else int(axis)
    if not -p.ndim <= axis < p.ndim:
        raise InvalidArgumentError(f"gather: axis {axis} out of range for params {p._type}")
    return apply(gather_op, p, i, axis=axis % p.ndim)


def scatter_add(g, indices, shape, axis=0):
    return apply(scatter_add_op, g, indices, shape=tuple(shape), axis=axis)


# ---------------------------------------------------------------------------
# one_hot


def check_labels(op: str, i, depth: int) -> None:
    """Raise, with TF's message, when a class id of ``i`` is not in ``[0, depth)`` (the
    first bad one in C order); the compiled one_hot kernel makes the same check."""
    flat = _first_out_of_range(i, depth)
    if flat is not None:
        bad = i.ravel()[flat]
        raise InvalidArgumentError(
            f"{op}: Received a label value of {bad} which is outside the valid range of "
            f"[0, {depth})")


def _one_hot_fwd(i, depth, on_value, off_value, axis, dtype, strict=""):
    if strict:
        check_labels(strict, i, depth)
    eye = np.arange(depth).reshape((-1,) + (1,) * (i.ndim - (axis if axis >= 0 else i.ndim)))
    hot = np.expand_dims(i, axis if axis >= 0 else i.ndim) == eye
    return np.where(hot, on_value, off_value).astype(dtype)


def _one_hot_infer(types, depth, on_value, off_value, axis, dtype, strict=""):
    (i,) = types
    if i.dtype not in ("int32", "int64", "uint8"):
        raise TypeError(f"one_hot indices must be integers, got {i.dtype}")
    shape = list(i.shape)
    shape.insert(axis if axis >= 0 else len(shape), depth)
    return Type(tuple(shape), dtype)


# ``strict``: the op whose labels these are (sparse_softmax_cross_entropy_with_logits):
# an index out of range raises, naming it, where tf.one_hot gives a row of off_value.
# The check rides on the loop that writes the one-hot rows, in eager and compiled code
# alike (a traced graph knows no label values: a check in Python would see none).
one_hot_op = defop(
    "one_hot", inputs=1, kind="other", forward=_one_hot_fwd, infer=_one_hot_infer,
    vjp=NO_GRADIENT,
)


def one_hot(indices, depth, on_value=None, off_value=None, axis=None, dtype=None, name=None,
            strict=""):
    """One-hot vectors along a new ``axis`` (last by default); out-of-range rows are off.
    ``strict`` (jittape's, for losses): the op named when an index is out of range, which
    then raises instead."""
    from ..dtypes import as_dtype

    i = indices if isinstance(indices, Tensor) else convert_to_tensor(indices)
    dt = as_dtype(dtype or "float32").name
    extra = {"strict": str(strict)} if strict else {}  # plain one_hot graphs read as before
    return apply(
        one_hot_op, i, depth=int(depth),
        on_value=1 if on_value is None else on_value,
        off_value=0 if off_value is None else off_value,
        axis=-1 if axis is None else int(axis), dtype=dt, **extra,
    )


def size(x, out_type="int32"):
    """The number of elements of ``x`` as a 0-d tensor (``tf.size``)."""
    (x,) = convert_args((x,))
    if x._type.symbolic:  # known when a call binds the sizes
        return symbolic_size(x, range(x._type.rank), as_dtype(out_type).name)
    return E.fill((), int(np.prod(x._type.shape)), as_dtype(out_type).name)


def shape(x, out_type="int32"):
    """The shape of ``x`` as a 1-D tensor (``tf.shape``): inside a trace with symbolic
    sizes (None in an input_signature) it holds their values at each call."""
    (x,) = convert_args((x,))
    if x._type.symbolic:
        t = symbolic_shape(x, as_dtype(out_type).name)
        t._tracer.static[t._id] = np.array(x._type.shape, dtype=object)
        return t
    return convert_to_tensor(np.asarray(x._type.shape, dtype=as_dtype(out_type)._np))

