"""Elementwise ops: one record each, with the scalar expression codegen uses.

VJP rules return gradients of the broadcast output shape; autodiff undoes the
broadcasting once. Comparisons and integer-only ops are ``NO_GRADIENT``.
"""

from __future__ import annotations

import numpy as np

from ..compiler.ir import NO_GRADIENT, Type
from ..compiler.dims import Dim
from ..tensor import apply, convert_args
from .registry import binary, broadcast_shapes, defop, elementwise_infer, same_dtype, unary

FLOAT = elementwise_infer(float_only=True)
SAME = elementwise_infer()
BOOL_OUT = elementwise_infer(out_dtype="bool")


def _errstate(f):
    """numpy reference without floating-point warnings: NaN/Inf are values, not errors."""

    def g(*a, **k):
        with np.errstate(all="ignore"):
            return f(*a)

    g.__name__ = getattr(f, "__name__", "forward")
    return g


# ---------------------------------------------------------------------------
# Arithmetic

add_op = defop(
    "add", inputs=2, kind="elementwise", cost="cheap", forward=_errstate(np.add), infer=SAME,
    vjp=lambda g, out, x, y: (g, g), scalar="({0} + {1})", commutative=True,
)
subtract_op = defop(
    "subtract", inputs=2, kind="elementwise", forward=_errstate(np.subtract), infer=SAME,
    cost="cheap",
    vjp=lambda g, out, x, y: (g, negative(g)), scalar="({0} - {1})",
)
multiply_op = defop(
    "multiply", inputs=2, kind="elementwise", forward=_errstate(np.multiply), infer=SAME,
    cost="cheap",
    vjp=lambda g, out, x, y: (multiply(g, y), multiply(g, x)), scalar="({0} * {1})",
    commutative=True,
)


def _int_truediv_dtype(dt) -> str:
    """TF's truediv of integers: (u)int8 and (u)int16 divide in float32, wider integers
    in float64 (``uint8_images / 255`` is float32)."""
    return "float32" if np.dtype(dt).itemsize <= 2 else "float64"


def _divide_fwd(x, y):
    if x.dtype.kind in "iu":  # both are cast to the float type first, as TF does
        f = _int_truediv_dtype(x.dtype)
        return np.true_divide(x, y, dtype=f)
    return np.divide(x, y)


def _divide_infer(types):
    dt = same_dtype(types)
    shape = broadcast_shapes(*(t.shape for t in types))
    if np.dtype(dt).kind in "iu":
        return Type(shape, _int_truediv_dtype(dt))
    if dt == "bool":
        raise TypeError("divide is not defined for bool")
    return Type(shape, dt)


divide_op = defop(
    "divide", inputs=2, kind="elementwise", forward=_errstate(_divide_fwd), infer=_divide_infer,
    vjp=lambda g, out, x, y: (divide(g, y), negative(divide(multiply(g, out), y))),
    # integers are cast to the result's float type first (as the reference and TF do:
    # int8 / int8 divides in float32); for floats the casts are no-ops
    scalar="({dt}({0}) / {dt}({1}))", domain=("positive_second",),
)


def _pow_vjp(g, out, x, y):
    gx = multiply(g, multiply(y, pow(x, subtract(y, 1))))
    # log(x) only where x > 0: TF's convention, avoids NaN for negative bases
    pos = greater(x, 0)
    safe_x = where(pos, x, ones_like(x))
    gy = multiply(g, multiply(out, where(pos, log(safe_x), zeros_like(x))))
    return gx, gy


def _pow_fwd(x, y):
    with np.errstate(all="ignore"):
        r = np.power(x, y)
    # numpy computes x**0.5 as sqrt(x): (-inf)**0.5 would be NaN and (-0)**0.5 -0;
    # C's pow (TF's, and compiled code's) gives +inf and +0
    if x.dtype.kind == "f" and y.size <= 16 and np.any(y == 0.5):
        fix = (y == 0.5) & ((x == -np.inf) | (x == 0))
        if fix.any():
            r = np.where(fix, np.abs(x), r).astype(r.dtype, copy=False)
    return r


pow_op = defop(
    "pow", inputs=2, kind="elementwise", cost="transcendental", forward=_pow_fwd, infer=SAME,
    vjp=_pow_vjp, scalar="({0} ** {1})", domain=("positive_first",),
)
negative_op = defop(
    "negative", inputs=1, kind="elementwise", cost="cheap", forward=np.negative, infer=SAME,
    vjp=lambda g, out, x: (negative(g),), scalar="(-{0})",
)
abs_op = defop(
    "abs", inputs=1, kind="elementwise", cost="cheap", forward=np.abs, infer=SAME,
    vjp=lambda g, out, x: (multiply(g, sign(x)),), scalar="abs({0})", domain=("away_from_zero",),
)
sign_op = defop(
    "sign", inputs=1, kind="elementwise", cost="cheap", forward=np.sign, infer=SAME,
    vjp=lambda g, out, x: (None,), scalar="_vm.jt_sign({0})",  # derivative 0 almost everywhere
)
square_op = defop(
    "square", inputs=1, kind="elementwise", cost="cheap", forward=np.square, infer=SAME,
    vjp=lambda g, out, x: (multiply(g, multiply(x, 2)),), scalar="({0} * {0})",
)
reciprocal_op = defop(
    "reciprocal", inputs=1, kind="elementwise", forward=_errstate(np.reciprocal), infer=FLOAT,
    vjp=lambda g, out, x: (negative(multiply(g, square(out))),), scalar="({dt}(1) / {0})",
    domain=("positive",),
)
sqrt_op = defop(
    "sqrt", inputs=1, kind="elementwise", forward=_errstate(np.sqrt), infer=FLOAT,
    cost="transcendental",
    vjp=lambda g, out, x: (divide(multiply(g, 0.5), out),), scalar="np.sqrt({0})",
    domain=("positive",),
)
exp_op = defop(
    "exp", inputs=1, kind="elementwise", forward=_errstate(np.exp), infer=FLOAT,
    cost="transcendental",
    vjp=lambda g, out, x: (multiply(g, out),), scalar="_vm.jt_exp({0})",
)
log_op = defop(
    "log", inputs=1, kind="elementwise", forward=_errstate(np.log), infer=FLOAT,
    cost="transcendental",
    vjp=lambda g, out, x: (divide(g, x),), scalar="_vm.jt_log({0})", domain=("positive",),
)
log1p_op = defop(
    "log1p", inputs=1, kind="elementwise", forward=_errstate(np.log1p), infer=FLOAT,
    cost="transcendental",
    vjp=lambda g, out, x: (divide(g, add(x, 1)),), scalar="_vm.jt_log1p({0})",
    domain=("positive",),
)
sin_op = defop(
    "sin", inputs=1, kind="elementwise", cost="transcendental", forward=np.sin, infer=FLOAT,
    vjp=lambda g, out, x: (multiply(g, cos(x)),), scalar="np.sin({0})",
)
cos_op = defop(
    "cos", inputs=1, kind="elementwise", cost="transcendental", forward=np.cos, infer=FLOAT,
    vjp=lambda g, out, x: (negative(multiply(g, sin(x))),), scalar="np.cos({0})",
)
tanh_op = defop(
    "tanh", inputs=1, kind="elementwise", cost="transcendental", forward=np.tanh, infer=FLOAT,
    vjp=lambda g, out, x: (multiply(g, subtract(1, square(out))),), scalar="_vm.jt_tanh({0})",
)


def _sigmoid_fwd(x):
    # stable on both tails: exp of a non-positive number only, e = exp(-|x|) in [0, 1];
    # 1/(1+e) for x >= 0, e/(1+e) below, selected by arithmetic (all finite) because
    # np.where with an unpredictable mask is branchy: 4 ms against 0.5 ms at 1M
    with np.errstate(all="ignore"):
        e = np.exp(-np.abs(x))
        r = np.reciprocal(1 + e)
        pos = (x >= 0).astype(x.dtype)
        return (r * (e + pos * (1 - e))).astype(x.dtype, copy=False)


# a primitive, not exp/add/reciprocal: stable for large |x| and one fused scalar
sigmoid_op = defop(
    "sigmoid", inputs=1, kind="elementwise", forward=_sigmoid_fwd, infer=FLOAT,
    cost="transcendental",
    vjp=lambda g, out, x: (multiply(g, multiply(out, subtract(1, out))),),
    scalar="_vm.jt_sigmoid({0})",
)
# a primitive so that relu'(0) = 0 (maximum(x, 0) would give the tie to x)
relu_op = defop(
    "relu", inputs=1, kind="elementwise", forward=lambda x: np.maximum(x, 0).astype(x.dtype),
    cost="cheap",
    infer=SAME, vjp=lambda g, out, x: (where(greater(x, 0), g, zeros_like(g)),),
    scalar="_vm.jt_relu({0})", domain=("away_from_zero",),
)


def _max_vjp(g, out, x, y):
    first = greater_equal(x, y)  # a tie gives the whole gradient to the first argument
    z = zeros_like(g)
    return where(first, g, z), where(first, z, g)


def _min_vjp(g, out, x, y):
    first = less_equal(x, y)
    z = zeros_like(g)
    return where(first, g, z), where(first, z, g)


maximum_op = defop(
    "maximum", inputs=2, kind="elementwise", forward=np.maximum, infer=SAME, vjp=_max_vjp,
    cost="cheap",
    scalar="_vm.jt_maximum({0}, {1})", domain=("no_ties",),
)
minimum_op = defop(
    "minimum", inputs=2, kind="elementwise", forward=np.minimum, infer=SAME, vjp=_min_vjp,
    cost="cheap",
    scalar="_vm.jt_minimum({0}, {1})", domain=("no_ties",),
)


def _floordiv_fwd(x, y):
    if x.dtype.kind in "iu" and np.any(y == 0):
        from ..errors import InvalidArgumentError

        raise InvalidArgumentError("floordiv: Integer division by zero")
    with np.errstate(all="ignore"):
        return np.floor_divide(x, y)


floordiv_op = defop(
    "floordiv", inputs=2, kind="elementwise", forward=_floordiv_fwd, infer=SAME,
    vjp=NO_GRADIENT, scalar="_vm.jt_floordiv({0}, {1})", int_divisor=True,
)
def _floormod_fwd(x, y):
    if x.dtype.kind in "iu" and np.any(y == 0):
        from ..errors import InvalidArgumentError

        raise InvalidArgumentError("floormod: Integer division by zero")
    with np.errstate(all="ignore"):
        return np.mod(x, y)


floormod_op = defop(
    "floormod", inputs=2, kind="elementwise", forward=_floormod_fwd, infer=SAME,
    vjp=NO_GRADIENT, scalar="_vm.jt_floormod({0}, {1})",
    int_divisor=True,
)
floor_op = defop(
    "floor", inputs=1, kind="elementwise", forward=np.floor, infer=FLOAT,
    vjp=lambda g, out, x: (None,), scalar="np.floor({0})",
)


# ---------------------------------------------------------------------------
# Comparisons and logic (not differentiable)


def _cmp(name, fn, sym):
    return defop(
        name, inputs=2, kind="elementwise", forward=fn, infer=BOOL_OUT, vjp=NO_GRADIENT,
        scalar="({0} %s {1})" % sym, commutative=sym in ("==", "!="), cost="cheap",
    )


greater_op = _cmp("greater", np.greater, ">")
greater_equal_op = _cmp("greater_equal", np.greater_equal, ">=")
less_op = _cmp("less", np.less, "<")
less_equal_op = _cmp("less_equal", np.less_equal, "<=")
equal_op = _cmp("equal", np.equal, "==")
not_equal_op = _cmp("not_equal", np.not_equal, "!=")


def _bool_infer(types, **attrs):
    for t in types:
        if t.dtype != "bool":
            raise TypeError(f"needs bool tensors, got {t.dtype}")
    return Type(broadcast_shapes(*(t.shape for t in types)), "bool")


logical_and_op = defop(
    "logical_and", inputs=2, kind="elementwise", forward=np.logical_and, infer=_bool_infer,
    cost="cheap",
    vjp=NO_GRADIENT, scalar="({0} & {1})", commutative=True,
)
logical_or_op = defop(
    "logical_or", inputs=2, kind="elementwise", forward=np.logical_or, infer=_bool_infer,
    cost="cheap",
    vjp=NO_GRADIENT, scalar="({0} | {1})", commutative=True,
)
logical_not_op = defop(
    "logical_not", inputs=1, kind="elementwise", forward=np.logical_not, infer=_bool_infer,
    cost="cheap",
    vjp=NO_GRADIENT, scalar="(not {0})",
)
is_finite_op = defop(
    "is_finite", inputs=1, kind="elementwise", forward=np.isfinite,
    infer=elementwise_infer(out_dtype="bool", float_only=True), vjp=NO_GRADIENT,
    scalar="np.isfinite({0})",
)
is_nan_op = defop(
    "is_nan", inputs=1, kind="elementwise", forward=np.isnan,
    infer=elementwise_infer(out_dtype="bool", float_only=True), vjp=NO_GRADIENT,
    scalar="np.isnan({0})",
)


def _where_infer(types, **attrs):
    c, x, y = types
    if c.dtype != "bool":
        raise TypeError(f"condition must be bool, got {c.dtype}")
    dt = same_dtype((x, y), "where's x and y")
    return Type(broadcast_shapes(c.shape, x.shape, y.shape), dt)


def _where_vjp(g, out, c, x, y):
    z = zeros_like(g)
    return None, where(c, g, z), where(c, z, g)


_UINT = {4: np.uint32, 8: np.uint64}


def _where_fwd(c, x, y):
    """np.where, bit for bit, without its branches: with an unpredictable mask
    np.where takes 3.8 ms on 1M float32, a select on the bits 0.66 ms."""
    c, x, y = np.asarray(c), np.asarray(x), np.asarray(y)
    u = _UINT.get(x.dtype.itemsize)
    if u is None or x.dtype.kind not in "fiu" or max(c.size, x.size, y.size) < 4096:
        return np.where(c, x, y)
    m = c.astype(u)
    np.negative(m, out=m)  # all ones where c
    r = np.bitwise_and(x.view(u), m)
    r |= np.bitwise_and(y.view(u), ~m)
    return r.view(x.dtype)


where_op = defop(
    "where", inputs=3, kind="elementwise", forward=_where_fwd, infer=_where_infer, vjp=_where_vjp,
    cost="cheap",
    scalar="({1} if {0} else {2})",
)


# ---------------------------------------------------------------------------
# Identity-like


identity_op = defop(
    "identity", inputs=1, kind="elementwise", forward=lambda x: x, infer=SAME,
    cost="cheap", view="alias",
    vjp=lambda g, out, x: (g,), scalar="{0}",
)
# a variable read: its input is the variable's id, its output this read's snapshot
read_op = defop(
    "read", inputs=1, kind="other", view="alias", forward=lambda x: x, infer=SAME,
    vjp=lambda g, out, x: (g,), doc="a variable read (snapshot)",
)
stop_gradient_op = defop(
    "stop_gradient", inputs=1, kind="elementwise", view="alias", forward=lambda x: x, infer=SAME,
    vjp=lambda g, out, x: (None,), scalar="{0}", cut=True,  # tapes do not record past it
)


def _cast_infer(types, dtype):
    return Type(types[0].shape, dtype)


def _cast_fwd(x, dtype):
    if np.dtype(dtype).kind in "iu" and x.dtype.kind == "f":
        with np.errstate(all="ignore"):
            return np.trunc(x).astype(dtype)  # TF truncates toward zero
    return x.astype(dtype)


def _cast_vjp(g, out, x, dtype):
    if x._type.is_float and out._type.is_float:
        return (cast(g, x.dtype),)
    return (None,)


cast_op = defop(
    "cast", inputs=1, kind="elementwise", forward=_cast_fwd, infer=_cast_infer, vjp=_cast_vjp,
    cost="cheap",
    scalar="{dt}({0})",
)


def _fill_infer(types, shape, value, dtype):
    return Type(shape, dtype)


fill_op = defop(
    "fill", inputs=0, kind="elementwise", cost="cheap", literal="uniform",
    forward=lambda shape, value, dtype: np.full(shape, value, dtype=dtype),
    infer=_fill_infer, vjp=lambda g, out: (), scalar="{value}",
)


def _const_infer(types, value):
    return Type(value.array.shape, value.array.dtype.name)


const_op = defop(
    "const", inputs=0, kind="other", forward=lambda value: value.array, infer=_const_infer,
    literal="array",
    vjp=lambda g, out: (),
)


# ---------------------------------------------------------------------------
# Public functions

add = binary(add_op)
subtract = binary(subtract_op)
multiply = binary(multiply_op)
divide = binary(divide_op)
pow = binary(pow_op)
maximum = binary(maximum_op)
minimum = binary(minimum_op)
floordiv = binary(floordiv_op)
floormod = binary(floormod_op)
greater = binary(greater_op)
greater_equal = binary(greater_equal_op)
less = binary(less_op)
less_equal = binary(less_equal_op)
equal = binary(equal_op)
not_equal = binary(not_equal_op)
logical_and = binary(logical_and_op)
logical_or = binary(logical_or_op)
negative = unary(negative_op)
abs = unary(abs_op)
sign = unary(sign_op)
square = unary(square_op)
reciprocal = unary(reciprocal_op)
sqrt = unary(sqrt_op)
exp = unary(exp_op)
log = unary(log_op)
log1p = unary(log1p_op)
sin = unary(sin_op)
cos = unary(cos_op)
tanh = unary(tanh_op)
sigmoid = unary(sigmoid_op)
relu = unary(relu_op)
floor = unary(floor_op)
logical_not = unary(logical_not_op)
is_finite = unary(is_finite_op)
is_nan = unary(is_nan_op)
identity = unary(identity_op)

truediv = divide
mod = floormod


def stop_gradient(x, name=None):
    """The value of ``x``, through which no gradient flows."""
    return apply(stop_gradient_op, x)


def where(condition, x=None, y=None, name=None):
    """Elements of ``x`` where ``condition`` holds, else of ``y`` (broadcasting)."""
    if x is None or y is None:
        raise ValueError("where(condition) without x and y is not supported; pass both")
    c, x, y = convert_args((condition, x, y))
    return apply(where_op, c, x, y)


def cast(x, dtype, name=None):
    """``x`` converted to ``dtype`` (floats to integers truncate toward zero)."""
    from ..dtypes import as_dtype

    (x,) = convert_args((x,))
    dt = as_dtype(dtype).name
    if x._type.dtype == dt:
        return x
    return apply(cast_op, x, dtype=dt)


def as_shape(shape, opname, allow_minus_one=False) -> tuple:
    """A shape argument as a tuple of ints, for the ops that take one: an int is a 1-D
    shape (``jt.zeros(3)``, as in TF); a list or tuple of ints, or a 1-D integer
    tensor or array, gives the dims. A dim that is not an int (a float, a bool, None)
    raises ``TypeError``, a negative one ``InvalidArgumentError``, naming ``opname``."""
    if type(shape) is tuple or type(shape) is list or isinstance(shape, tuple):
        for d in shape:  # the common case (and the VJPs'): a tuple of non-negative ints
            if type(d) is not int or d < 0:
                break
        else:
            return tuple(shape)
    import numbers

    from ..errors import InvalidArgumentError, user_location
    from ..tensor import Tensor, Variable

    given = shape
    if isinstance(shape, (Tensor, Variable, np.ndarray, np.generic)):
        if np.dtype(shape.dtype).kind not in "iu":
            raise TypeError(f"{opname}: shape must be integers, got a "
                            f"{np.dtype(shape.dtype).name} {type(shape).__name__}"
                            + _at(user_location()))
        known = _static(shape)
        shape = np.asarray(shape).tolist() if known is None else list(known.reshape(-1))
    if isinstance(shape, numbers.Integral) and not isinstance(shape, bool):
        shape = (shape,)
    try:
        dims = list(shape)
    except TypeError:
        raise TypeError(f"{opname}: shape must be an int or a list/tuple of ints, got "
                        f"{given!r} (type {type(given).__name__})" + _at(user_location())
                        ) from None
    out = []
    for d in dims:
        if isinstance(d, Dim):  # a symbolic size (jittape.compiler.dims): known at the call
            out.append(d)
            continue
        bad = isinstance(d, bool) or getattr(type(d), "__index__", None) is None
        if not bad and not isinstance(d, numbers.Integral):
            if isinstance(d, Tensor) and d._value is None:
                known = _static(d)
                if known is not None and known.ndim == 0:  # jt.shape(t)[k]
                    out.append(known.item())
                    continue
                d._concrete(f"{opname}: a shape dimension")  # raises: it is symbolic
            try:  # a 0-d integer tensor or array
                d = d.__index__()
            except TypeError as e:
                if type(e) is not TypeError:  # e.g. a symbolic size's own error
                    raise
                bad = True
        if bad:
            raise TypeError(f"{opname}: shape dimensions must be ints, got {d!r} (type "
                            f"{type(d).__name__}) in shape {given!r}" + _at(user_location()))
        d = int(d)
        if d < 0 and not (allow_minus_one and d == -1):
            raise InvalidArgumentError(
                f"{opname}: Dimension {d} must be >= 0, in shape {given!r}")
        out.append(d)
    return tuple(out)


def _static(t):
    """The sizes a symbolic shape tensor is known to hold (``jt.shape`` of a tensor with
    symbolic sizes, or a slice of it), as an object array; None otherwise."""
    if getattr(t, "_value", 0) is not None or getattr(t, "_tracer", None) is None:
        return None
    return t._tracer.static.get(t._id)


def _at(loc):
    return f" (at {loc})" if loc else ""


def fill(dims, value, dtype=None, name=None, _opname="fill"):
    """A tensor of shape ``dims`` (an int is a 1-D shape) filled with ``value``."""
    return _fill(as_shape(dims, _opname), value, dtype)


def _fill(shape: tuple, value, dtype=None):
    from ..dtypes import as_dtype

    if dtype is None:
        dtype = "float32" if isinstance(value, float) else np.asarray(value).dtype.name
        if dtype == "int64":
            dtype = "int32"
    dt = as_dtype(dtype)
    return apply(fill_op, shape=shape, value=dt.as_numpy_dtype(value).item(), dtype=dt.name)


def zeros(shape, dtype="float32", name=None):
    """Zeros of ``shape`` (an int is a 1-D shape, as in TF)."""
    return fill(shape, 0, dtype, _opname="zeros")


def ones(shape, dtype="float32", name=None):
    """Ones of ``shape`` (an int is a 1-D shape, as in TF)."""
    return fill(shape, 1, dtype, _opname="ones")


def _like(x, value, dtype):
    (x,) = convert_args((x,))
    dt = dtype if dtype is not None else x._type.dtype
    if any(d is None for d in x._type.shape):
        return add(multiply(cast(x, dt) if dt != x._type.dtype else x, 0), value)
    return _fill(x._type.shape, value, dt)


def zeros_like(x, dtype=None, name=None):
    return _like(x, 0, dtype)


def ones_like(x, dtype=None, name=None):
    return _like(x, 1, dtype)


def constant_op(value):
    """A constant node (used by tracing to embed small values)."""
    from ..compiler.ir import Const

    return apply(const_op, value=Const(value))


# ---------------------------------------------------------------------------
# Special functions (tf.math): primitives for accuracy, each one fused scalar


def _erf_fwd(x):
    from scipy import special

    return special.erf(x).astype(x.dtype, copy=False)


def _erfc_fwd(x):
    from scipy import special

    return special.erfc(x).astype(x.dtype, copy=False)


_TWO_OVER_SQRT_PI = 1.1283791670955126


# a primitive: 1/sqrt(x) in one scalar, TF's Rsqrt (its gradient -0.5 * out**3)
rsqrt_op = defop(
    "rsqrt", inputs=1, kind="elementwise", forward=_errstate(lambda x: 1 / np.sqrt(x)),
    infer=FLOAT, cost="transcendental",
    vjp=lambda g, out, x: (multiply(g, multiply(multiply(square(out), out), -0.5)),),
    scalar="({dt}(1) / np.sqrt({0}))", domain=("positive",),
)
# a primitive: no composite of exp and friends is accurate (math.erf is libm's)
erf_op = defop(
    "erf", inputs=1, kind="elementwise", forward=_erf_fwd, infer=FLOAT, cost="transcendental",
    vjp=lambda g, out, x: (multiply(g, multiply(exp(negative(square(x))), _TWO_OVER_SQRT_PI)),),
    scalar="math.erf({0})",
)
# a primitive: 1 - erf(x) loses every digit for large x
erfc_op = defop(
    "erfc", inputs=1, kind="elementwise", forward=_erfc_fwd, infer=FLOAT, cost="transcendental",
    vjp=lambda g, out, x: (multiply(g, multiply(exp(negative(square(x))), -_TWO_OVER_SQRT_PI)),),
    scalar="math.erfc({0})",
)
# a primitive: exp(x) - 1 loses the digits of small x (elu and selu use it)
expm1_op = defop(
    "expm1", inputs=1, kind="elementwise", forward=_errstate(np.expm1), infer=FLOAT,
    cost="transcendental",
    vjp=lambda g, out, x: (multiply(g, add(out, 1)),), scalar="math.expm1({0})",
)

rsqrt = unary(rsqrt_op)
erf = unary(erf_op)
erfc = unary(erfc_op)
expm1 = unary(expm1_op)
