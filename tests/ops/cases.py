"""The op catalogue's case table: how to call every registered op through its
public function, with which inputs, and a numpy expression for its result.

``CASES`` is a list of :class:`Case`. A case's ``op`` is a registry name (then
running the case, forward and first-order gradient, must execute that op) or
the name of a composite (``softmax``, ``reduce_mean``, ...). Every registry op
needs at least one case: ``test_catalogue.test_every_op_has_a_case`` fails
otherwise, so a new op cannot go untested.

Inputs are drawn per case with ``np.random.default_rng(0)``. Float inputs are
the differentiable ones (watched on the tape); integer and bool inputs are
fixed. Input generators respect the op record's ``domain`` hint (see
:data:`DOMAIN_GENS`) so that finite differences are meaningful.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

import jittape as jt
from jittape.compiler.ir import Const
from jittape.ops import sizes
from jittape.ops.registry import REGISTRY
from jittape.tensor import apply

# ---------------------------------------------------------------------------
# Inputs


def _gen_real(rng, shape):
    return rng.normal(size=shape)


def _gen_positive(rng, shape):
    return rng.uniform(0.5, 2.0, size=shape)


def _gen_away(rng, shape):
    """|x| in [0.3, 1.5]: no kink of abs/relu/sign within a finite-difference step."""
    return rng.uniform(0.3, 1.5, size=shape) * rng.choice([-1.0, 1.0], size=shape)


def _gen_grid(rng, shape):
    """Integers plus a little jitter; with ``halfgrid`` never closer than 0.3: no ties."""
    return rng.integers(-2, 3, size=shape) + rng.uniform(-0.1, 0.1, size=shape)


def _gen_halfgrid(rng, shape):
    return rng.integers(-2, 2, size=shape) + 0.5 + rng.uniform(-0.1, 0.1, size=shape)


def _gen_distinct(rng, shape):
    """All values at least 0.3 apart (no ties for max/min/argmax)."""
    n = int(np.prod(shape, dtype=int))
    vals = (rng.permutation(n) - n / 2) * 0.5 + rng.uniform(-0.1, 0.1, size=n)
    return vals.reshape(shape)


def _gen_distinct_abs(rng, shape):
    """Distinct magnitudes, away from zero, random signs (for max |x|)."""
    n = int(np.prod(shape, dtype=int))
    mags = (rng.permutation(n) + 1) * 0.3 + rng.uniform(-0.05, 0.05, size=n)
    return (mags * rng.choice([-1.0, 1.0], size=n)).reshape(shape)


def _gen_frac(rng, shape):
    """Away from the integers (floor, casts to int)."""
    return rng.integers(-3, 3, size=shape) + rng.uniform(0.2, 0.8, size=shape)


def _gen_small(rng, shape):
    return rng.normal(size=shape) * 0.1


def _gen_ints(rng, shape):
    """Integer-valued floats: comparisons see ties."""
    return rng.integers(-2, 3, size=shape).astype(np.float64)


def _gen_clipsafe(rng, shape):
    """|x| in [0, 0.8] or [1.2, 2]: away from clip bounds at +-1."""
    inner = rng.uniform(-0.8, 0.8, size=shape)
    outer = rng.uniform(1.2, 2.0, size=shape) * rng.choice([-1.0, 1.0], size=shape)
    return np.where(rng.random(size=shape) < 0.5, inner, outer)


def _gen_bool(rng, shape):
    return rng.random(size=shape) < 0.5


GENS = {
    "real": _gen_real,
    "positive": _gen_positive,
    "away": _gen_away,
    "grid": _gen_grid,
    "halfgrid": _gen_halfgrid,
    "distinct": _gen_distinct,
    "distinct_abs": _gen_distinct_abs,
    "frac": _gen_frac,
    "small": _gen_small,
    "ints": _gen_ints,
    "clipsafe": _gen_clipsafe,
    "bool": _gen_bool,
}

# a record's domain hint -> generator per float input position
DOMAIN_GENS = {
    None: lambda n: ["real"] * n,
    ("positive",): lambda n: ["positive"] * n,
    ("positive_first",): lambda n: ["positive"] + ["real"] * (n - 1),
    ("positive_second",): lambda n: ["real", "positive"] + ["real"] * (n - 2),
    ("away_from_zero",): lambda n: ["away"] * n,
    ("no_ties",): lambda n: ["distinct"] if n == 1 else ["grid", "halfgrid"][:n],
}


@dataclass(frozen=True)
class Arg:
    """One input: drawn by ``gen`` with ``shape``, or a fixed ``value``."""

    shape: tuple = ()
    gen: str = "real"
    dtype: str = "float64"
    value: object = None
    var: bool = False  # pass it as a jt.Variable (read under the tape)

    @property
    def is_float(self) -> bool:
        return np.dtype(self.dtype).kind == "f"

    def draw(self, rng) -> np.ndarray:
        if self.value is not None:
            return np.array(self.value, dtype=self.dtype)
        return np.asarray(GENS[self.gen](rng, self.shape)).astype(self.dtype)


def F(shape=(), gen="real", dtype="float64", var=False) -> Arg:
    return Arg(tuple(shape), gen, dtype, None, var)


def fixed(value, dtype) -> Arg:
    a = np.asarray(value, dtype=dtype)
    return Arg(a.shape, "fixed", np.dtype(dtype).name, a)


def I(value, dtype="int32") -> Arg:  # noqa: E743
    return fixed(value, dtype)


def B(shape) -> Arg:
    return Arg(tuple(shape), "bool", "bool")


@dataclass
class Case:
    """``fn(*tensors)`` through the public API; ``ref(*arrays)``: a numpy expression.

    grad: "fd"   the VJP (and the HVP) are checked against finite differences;
          "none" every float input gets a None gradient (non-differentiable path);
          "skip" no gradient check (no float input, or a value where FD is meaningless).
    f32:  the forward also runs with float32 inputs, against float32 tolerances.
    """

    op: str
    name: str
    fn: Callable
    ref: Callable
    args: tuple = ()
    grad: str = "fd"
    f32: bool = True
    tags: tuple = field(default_factory=tuple)

    @property
    def id(self) -> str:
        return f"{self.op}:{self.name}"

    def inputs(self, rng, dtype="float64") -> list:
        arrays = [a.draw(rng) for a in self.args]
        if dtype != "float64":
            arrays = [x.astype(dtype) if a.is_float and a.dtype == "float64" else x
                      for x, a in zip(arrays, self.args)]
        return arrays

    def tensors(self, arrays) -> list:
        return [jt.Variable(x) if a.var else jt.constant(x) for x, a in zip(arrays, self.args)]

    @property
    def float_positions(self) -> list:
        return [k for k, a in enumerate(self.args) if a.is_float]


CASES: list[Case] = []


def case(op, name, fn, ref, args, **kw):
    CASES.append(Case(op, name, fn, ref, tuple(args), **kw))


def _shape_name(*shapes) -> str:
    return "x".join("(" + ",".join(map(str, s)) + ")" for s in shapes)


def _gens(opname, n, gens=None):
    if gens is not None:
        return list(gens)
    return DOMAIN_GENS[REGISTRY[opname].domain](n)


# ---------------------------------------------------------------------------
# Elementwise, unary

UNARY_SHAPES = [(), (5,), (2, 3), (0, 3)]

UNARY = {
    # op: (public function, numpy expression, generator override, grad mode)
    "negative": (jt.negative, lambda x: -x, None, "fd"),
    "abs": (jt.abs, lambda x: np.where(x < 0, -x, x), None, "fd"),
    "sign": (jt.sign, lambda x: np.sign(x), "away", "fd"),
    "square": (jt.square, lambda x: x * x, None, "fd"),
    "reciprocal": (jt.reciprocal, lambda x: 1.0 / x, None, "fd"),
    "sqrt": (jt.sqrt, lambda x: x**0.5, None, "fd"),
    "exp": (jt.exp, lambda x: np.e**x, None, "fd"),
    "log": (jt.log, lambda x: np.log(x), None, "fd"),
    "log1p": (jt.log1p, lambda x: np.log(1.0 + x), None, "fd"),
    "sin": (jt.sin, lambda x: np.sin(x), None, "fd"),
    "cos": (jt.cos, lambda x: np.cos(x), None, "fd"),
    "tanh": (jt.tanh, lambda x: (np.exp(2 * x) - 1) / (np.exp(2 * x) + 1), None, "fd"),
    "sigmoid": (jt.sigmoid, lambda x: 1.0 / (1.0 + np.exp(-x)), None, "fd"),
    "relu": (jt.nn.relu, lambda x: np.where(x > 0, x, 0.0), None, "fd"),
    "floor": (jt.floor, lambda x: np.floor(x), "frac", "fd"),
    "identity": (jt.identity, lambda x: x, None, "fd"),
    "stop_gradient": (jt.stop_gradient, lambda x: x, None, "none"),
    "check_numerics": (lambda x: jt.debugging.check_numerics(x, "catalogue"), lambda x: x,
                       None, "fd"),
}

for _op, (_fn, _ref, _gen, _grad) in UNARY.items():
    for _s in UNARY_SHAPES:
        (_g,) = _gens(_op, 1, None if _gen is None else [_gen])
        case(_op, _shape_name(_s), _fn, _ref, [F(_s, _g)], grad=_grad)

case("negative", "operator", lambda x: -x, lambda x: -x, [F((2, 3))])
case("abs", "operator", lambda x: abs(x), lambda x: np.where(x < 0, -x, x), [F((2, 3), "away")])
case("exp", "large_and_small", jt.exp, lambda x: np.e**x, [fixed([-30.0, 0.0, 20.0], "float64")])
case("sigmoid", "tails", jt.sigmoid, lambda x: 1.0 / (1.0 + np.exp(-x)),
     [fixed([-40.0, -5.0, 0.0, 5.0, 40.0], "float64")])

for _s in [(), (4,), (0,)]:
    case("is_finite", _shape_name(_s), jt.is_finite, lambda x: ~(np.isnan(x) | np.isinf(x)),
         [F(_s)], grad="none")
    case("is_nan", _shape_name(_s), jt.is_nan, lambda x: x != x, [F(_s)], grad="none")
_SPECIAL = [1.0, np.inf, np.nan, -np.inf, 0.0, -2.5]
case("is_finite", "special", jt.is_finite, lambda x: ~(np.isnan(x) | np.isinf(x)),
     [fixed(_SPECIAL, "float64")], grad="none")
case("is_nan", "special", jt.is_nan, lambda x: x != x, [fixed(_SPECIAL, "float64")], grad="none")

# collectives in a job of one rank (the default world): the sum, the mean and rank 0's
# value are the value itself (tests/test_distributed.py runs them across ranks)
from jittape.ops import collective as _collective  # noqa: E402

for _s in [(), (2, 3), (0,)]:
    case("allreduce", "mean" + _shape_name(_s), _collective.allreduce, lambda x: x, [F(_s)])
    case("allreduce", "sum" + _shape_name(_s), lambda x: _collective.allreduce(x, average=False),
         lambda x: x, [F(_s)])
    case("broadcast", _shape_name(_s), _collective.broadcast, lambda x: x, [F(_s)], grad="none")

for _s in [(), (2, 3), (0,)]:
    case("logical_not", _shape_name(_s), jt.logical_not, lambda b: ~b, [B(_s)], grad="skip")
case("logical_not", "operator", lambda b: ~b, lambda b: ~b, [B((4,))], grad="skip")
case("logical_not", "on_float_path", lambda x: jt.logical_not(jt.greater(x, 0.0)),
     lambda x: ~(x > 0), [F((2, 3))], grad="none")

# cast: float inputs of a fixed dtype; FD in the coarser of the two dtypes
case("cast", "f64_to_f32", lambda x: jt.cast(x, jt.float32), lambda x: x.astype(np.float32),
     [F((2, 3))], f32=False)
case("cast", "f32_to_f64", lambda x: jt.cast(x, jt.float64), lambda x: x.astype(np.float64),
     [F((2, 3), dtype="float32")], f32=False)
case("cast", "f64_to_f32_scalar", lambda x: jt.cast(x, "float32"),
     lambda x: x.astype(np.float32), [F(())], f32=False)
case("cast", "f64_to_i32_truncates", lambda x: jt.cast(x, jt.int32),
     lambda x: np.trunc(x).astype(np.int32), [F((2, 3), "frac")], grad="none", f32=False)
case("cast", "i32_to_f64", lambda i: jt.cast(i, jt.float64), lambda i: i.astype(np.float64),
     [I([[-2, 0, 7]])], grad="skip")
case("cast", "bool_to_f32", lambda b: jt.cast(b, jt.float32), lambda b: b.astype(np.float32),
     [B((4,))], grad="skip")
case("cast", "f64_to_f32_empty", lambda x: jt.cast(x, jt.float32),
     lambda x: x.astype(np.float32), [F((0, 2))], f32=False)

# ---------------------------------------------------------------------------
# Elementwise, binary

BINARY_SHAPES = [((), ()), ((4,), (4,)), ((3, 1), (4,)), ((2, 3), (3,)), ((), (2, 3)),
                 ((0, 3), (3,))]


def _floor_div(x, y):
    return np.floor(x / y)


BINARY = {
    # op: (public function, operator form, numpy expression, generators, grad mode)
    "add": (jt.add, lambda x, y: x + y, lambda x, y: x + y, None, "fd"),
    "subtract": (jt.subtract, lambda x, y: x - y, lambda x, y: x - y, None, "fd"),
    "multiply": (jt.multiply, lambda x, y: x * y, lambda x, y: x * y, None, "fd"),
    "divide": (jt.divide, lambda x, y: x / y, lambda x, y: x / y, None, "fd"),
    "pow": (jt.pow, lambda x, y: x**y, lambda x, y: np.exp(y * np.log(x)), None, "fd"),
    "maximum": (jt.maximum, None, lambda x, y: np.where(x > y, x, y), None, "fd"),
    "minimum": (jt.minimum, None, lambda x, y: np.where(x < y, x, y), None, "fd"),
    "floordiv": (jt.floordiv, lambda x, y: x // y, _floor_div, ["real", "away"], "none"),
    "floormod": (jt.floormod, lambda x, y: x % y, lambda x, y: x - y * _floor_div(x, y),
                 ["real", "away"], "none"),
    "greater": (jt.greater, lambda x, y: x > y, lambda x, y: x > y, ["ints", "ints"], "none"),
    "greater_equal": (jt.greater_equal, lambda x, y: x >= y, lambda x, y: x >= y,
                      ["ints", "ints"], "none"),
    "less": (jt.less, lambda x, y: x < y, lambda x, y: x < y, ["ints", "ints"], "none"),
    "less_equal": (jt.less_equal, lambda x, y: x <= y, lambda x, y: x <= y, ["ints", "ints"],
                   "none"),
    "equal": (jt.equal, lambda x, y: x == y, lambda x, y: x == y, ["ints", "ints"], "none"),
    "not_equal": (jt.not_equal, lambda x, y: x != y, lambda x, y: x != y, ["ints", "ints"],
                  "none"),
}

for _op, (_fn, _oper, _ref, _gen, _grad) in BINARY.items():
    _g = _gens(_op, 2, _gen)
    for _sx, _sy in BINARY_SHAPES:
        case(_op, _shape_name(_sx, _sy), _fn, _ref, [F(_sx, _g[0]), F(_sy, _g[1])], grad=_grad)
    if _oper is not None:
        case(_op, "operator", _oper, _ref, [F((2, 3), _g[0]), F((3,), _g[1])], grad=_grad)

# Python scalars take the tensor's dtype
case("add", "python_scalar", lambda x: x + 2.5, lambda x: x + 2.5, [F((2, 3))])
case("subtract", "python_scalar_reflected", lambda x: 3.0 - x, lambda x: 3.0 - x, [F((2, 3))])
case("multiply", "python_scalar_reflected", lambda x: 2.0 * x, lambda x: 2.0 * x, [F((4,))])
case("divide", "python_scalar_reflected", lambda x: 1.0 / x, lambda x: 1.0 / x,
     [F((4,), "positive")])
case("pow", "python_exponent", lambda x: x**3.0, lambda x: x * x * x, [F((2, 3), "positive")])
case("pow", "python_base", lambda x: 2.0**x, lambda x: np.exp(x * np.log(2.0)), [F((4,))])
case("pow", "integer_exponent_negative_base", lambda x: jt.pow(x, 2.0), lambda x: x * x,
     [F((2, 3), "away")])
case("maximum", "python_scalar", lambda x: jt.maximum(x, 0.5), lambda x: np.where(x > 0.5, x, 0.5),
     [F((2, 3), "grid")])
case("minimum", "python_scalar", lambda x: jt.minimum(x, 0.5), lambda x: np.where(x < 0.5, x, 0.5),
     [F((2, 3), "grid")])
# a non-differentiable branch inside a differentiable expression contributes nothing
case("greater", "mask_times_x", lambda x: x * jt.cast(jt.greater(x, 0.0), jt.float64),
     lambda x: x * (x > 0), [F((2, 3), "away")], f32=False)

_IA = [[-7, -3, 0, 5, 7, -1]]
_IB = [[2, -2, 3, -3, 2, 4]]
case("floordiv", "int32_floors", jt.floordiv,
     lambda a, b: np.floor(a / b).astype(np.int32), [I(_IA), I(_IB)], grad="skip")
case("floormod", "int32_sign_of_divisor", jt.floormod,
     lambda a, b: (a - b * np.floor(a / b)).astype(np.int32), [I(_IA), I(_IB)], grad="skip")
case("floordiv", "int64_operator", lambda a, b: a // b,
     lambda a, b: np.floor(a / b).astype(np.int64), [I(_IA, "int64"), I([[3]], "int64")],
     grad="skip")

for _op, _ref in [("logical_and", lambda a, b: a & b), ("logical_or", lambda a, b: a | b)]:
    for _sx, _sy in [((), ()), ((2, 3), (3,)), ((3, 1), (4,)), ((0, 2), (2,))]:
        case(_op, _shape_name(_sx, _sy), getattr(jt, _op), _ref, [B(_sx), B(_sy)], grad="skip")
    case(_op, "on_float_path",
         lambda x, y, _f=getattr(jt, _op): _f(jt.greater(x, 0.0), jt.less(y, 0.0)),
         lambda x, y, _r=_ref: _r(x > 0, y < 0), [F((2, 3)), F((3,))], grad="none")
case("logical_and", "operator", lambda a, b: a & b, lambda a, b: a & b, [B((2, 3)), B((3,))],
     grad="skip")
case("logical_or", "operator", lambda a, b: a | b, lambda a, b: a | b, [B((2, 3)), B((3,))],
     grad="skip")

# where: gradient to x and y, none to the condition


def _where_ref(c, x, y):
    c, x, y = np.broadcast_arrays(c, x, y)
    out = y.copy()
    out[c] = x[c]
    return out


for _sc, _sx, _sy in [((2, 3), (2, 3), (2, 3)), ((3, 1), (4,), ()), ((2, 3), (), (3,)),
                      ((), (2,), (2,)), ((0, 3), (3,), (0, 3))]:
    case("where", _shape_name(_sc, _sx, _sy), jt.where,
         _where_ref,
         [B(_sc), F(_sx), F(_sy)])

# ---------------------------------------------------------------------------
# Ops without a public function of their own

case("fill", "fill_f64", lambda: jt.fill((2, 3), 1.5, jt.float64),
     lambda: np.full((2, 3), 1.5), [], grad="skip")
case("fill", "zeros_empty", lambda: jt.zeros((0, 2), jt.float64), lambda: np.zeros((0, 2)), [],
     grad="skip")
case("fill", "ones_scalar_f32", lambda: jt.ones(()), lambda: np.ones((), np.float32), [],
     grad="skip")
case("fill", "ones_like_int", lambda i: jt.ones_like(i), lambda i: np.ones_like(i), [I([3, 4])],
     grad="skip")

_CONST = np.arange(6.0).reshape(2, 3)
case("const", "apply", lambda: apply(REGISTRY["const"], value=Const(_CONST)),
     lambda: _CONST.copy(), [], grad="skip")
case("const", "apply_int_scalar", lambda: apply(REGISTRY["const"], value=Const(np.int32(7))),
     lambda: np.array(7, np.int32), [], grad="skip")

# a variable read: the gradient flows from the read back to the variable
case("read", "variable", lambda v: jt.square(v), lambda x: x * x, [F((2, 3), var=True)])
case("read", "variable_scalar", lambda v: v * jt.sin(v), lambda x: x * np.sin(x),
     [F((), var=True)])
case("read", "variable_and_tensor", lambda v, x: jt.matmul(v, x), lambda a, b: a @ b,
     [F((2, 3), var=True), F((3, 2))])


@jt.custom_gradient
def _softsign(x):
    y = x / (1.0 + jt.abs(x))

    def grad(dy):
        return dy / jt.square(1.0 + jt.abs(x))

    return y, grad


@jt.custom_gradient
def _custom_mul(a, b):
    def grad(dy):
        return dy * b, dy * a

    return a * b, grad


case("custom_gradient", "softsign", _softsign, lambda x: x / (1 + np.abs(x)),
     [F((2, 3), "away")])
case("custom_gradient", "two_inputs", _custom_mul, lambda a, b: a * b, [F((3,)), F((3,))])

# ---------------------------------------------------------------------------
# Shape ops

for _s, _new, _ref_shape in [((2, 3), (3, 2), (3, 2)), ((6,), (2, -1), (2, 3)),
                             ((), (1, 1), (1, 1)), ((2, 3, 4), (4, -1), (4, 6)),
                             ((0, 3), (3, 0), (3, 0))]:
    case("reshape", f"{_shape_name(_s)}_to_{_new}",
         lambda x, _n=_new: jt.reshape(x, _n),
         lambda x, _r=_ref_shape: x.reshape(_r), [F(_s)])

for _s, _perm, _name in [((2, 3), None, "default"), ((2, 3, 4), (1, 2, 0), "120"),
                         ((2, 3, 4), (2, 0, 1), "201"), ((2, 3, 4), (-1, 0, 1), "negative"),
                         ((0, 3), None, "empty")]:
    case("transpose", _name, lambda x, _p=_perm: jt.transpose(x, _p),
         lambda x, _p=_perm: np.einsum(
             "abc"[: x.ndim] + "->" + "".join("abc"[p % x.ndim] for p in
                                               (_p or range(x.ndim - 1, -1, -1))), x),
         [F(_s)])

for _s, _to in [((3,), (2, 3)), ((3, 1), (3, 4)), ((), (2, 2)), ((1, 0), (2, 0)),
                ((2, 1, 3), (4, 2, 5, 3))]:
    case("broadcast_to", f"{_shape_name(_s)}_to_{_to}",
         lambda x, _t=_to: jt.broadcast_to(x, _t),
         lambda x, _t=_to: x + np.zeros(_t), [F(_s)])

for _s, _ax, _want in [((3,), 0, (1, 3)), ((2, 3), -1, (2, 3, 1)), ((), 0, (1,)),
                       ((2, 3), 1, (2, 1, 3))]:
    case("expand_dims", f"{_shape_name(_s)}_axis{_ax}",
         lambda x, _a=_ax: jt.expand_dims(x, _a), lambda x, _w=_want: x.reshape(_w), [F(_s)])

for _s, _ax, _want in [((1, 3, 1), None, (3,)), ((1, 3, 1), -1, (1, 3)), ((2, 1, 3), 1, (2, 3)),
                       ((1,), None, ()), ((1, 3, 1), [0, 2], (3,))]:
    case("squeeze", f"{_shape_name(_s)}_axis{_ax}",
         lambda x, _a=_ax: jt.squeeze(x, _a), lambda x, _w=_want: x.reshape(_w), [F(_s)])

for _shapes, _ax in [([(2, 3), (1, 3)], 0), ([(2, 1), (2, 3), (2, 2)], -1),
                     ([(0, 3), (2, 3)], 0), ([(3,), (2,)], 0), ([(2, 2, 1), (2, 2, 2)], 2)]:
    case("concat", f"{_shape_name(*_shapes)}_axis{_ax}",
         lambda *xs, _a=_ax: jt.concat(list(xs), _a),
         lambda *xs, _a=_ax: np.concatenate(xs, _a), [F(s) for s in _shapes])

for _shapes, _ax in [([(2, 3), (2, 3)], 0), ([(4,), (4,), (4,)], 1), ([(4,), (4,)], -1),
                     ([(), (), ()], 0), ([(2, 3), (2, 3)], 1), ([(0, 2), (0, 2)], 0)]:
    case("stack", f"{_shape_name(*_shapes)}_axis{_ax}",
         lambda *xs, _a=_ax: jt.stack(list(xs), _a),
         lambda *xs, _a=_ax: np.stack(xs, _a), [F(s) for s in _shapes])

# getitem: basic indexing is strided_slice
_KEYS = [
    ("1:3", lambda x: x[1:3]),
    ("int", lambda x: x[1]),
    ("negative_int", lambda x: x[-1]),
    ("reverse", lambda x: x[::-1]),
    ("step_minus2", lambda x: x[::-2]),
    ("newaxis", lambda x: x[None]),
    ("ellipsis_int", lambda x: x[..., 1]),
    ("slice_newaxis_slice", lambda x: x[:, None, 1:]),
    ("int_ellipsis_reverse", lambda x: x[1, ..., ::-1]),
    ("tail", lambda x: x[-2:]),
    ("empty", lambda x: x[5:]),
    ("slice_and_negative_int", lambda x: x[1:3, -1]),
    ("ellipsis_newaxis", lambda x: x[..., None]),
    ("negative_range", lambda x: x[3:0:-1, ::2]),
    ("scalar_element", lambda x: x[2, 3]),
]
for _name, _k in _KEYS:
    case("strided_slice", _name, _k, _k, [F((4, 5))])
case("strided_slice", "rank3_mixed", lambda x: x[:, -1, ::-2], lambda x: x[:, -1, ::-2],
     [F((2, 3, 4))])
case("strided_slice", "scalar_ellipsis", lambda x: x[...], lambda x: x[...], [F(())])
case("strided_slice", "tensor_bounds", lambda x: x[jt.constant(1):jt.constant(3)],
     lambda x: x[1:3], [F((5,))])

# strided_slice_grad: through the gradient of a slice, and through apply directly
_SSG = REGISTRY["strided_slice_grad"]
case("strided_slice_grad", "via_slice_gradient", lambda x: jt.square(x[1:3, ::-1]),
     lambda x: np.square(x[1:3, ::-1]), [F((4, 5))])
case("strided_slice_grad", "via_int_index_gradient", lambda x: jt.sin(x[..., -2]),
     lambda x: np.sin(x[..., -2]), [F((2, 3, 4))])


def _ssg_ref(shape, index):
    def ref(g):
        z = np.zeros(shape, dtype=g.dtype)
        z[index] = g
        return z

    return ref


case("strided_slice_grad", "apply",
     lambda g: apply(_SSG, g, shape=(4, 5), key=(("slice", 1, 3, None), 2)),
     _ssg_ref((4, 5), (slice(1, 3), 2)), [F((2,))])
case("strided_slice_grad", "apply_reverse_newaxis",
     lambda g: apply(_SSG, g, shape=(3, 4), key=("newaxis", ("slice", None, None, -1), "...")),
     _ssg_ref((3, 4), (None, slice(None, None, -1), Ellipsis)), [F((1, 3, 4))])

# gather (and getitem with an index list), with repeated indices
for _name, _ps, _idx, _ax, _ref in [
    ("repeated_axis0", (4, 3), [0, 2, 0, 3], 0, lambda p, i: p[i]),
    ("axis1", (4, 3), [2, 0, 2], 1, lambda p, i: p[:, i]),
    ("axis_minus1", (2, 3), [1, 1], -1, lambda p, i: p[:, i]),
    ("indices_2d", (4, 3), [[0, 1], [1, 1]], 0, lambda p, i: p[i]),
    ("indices_2d_axis1", (2, 5), [[4, 0], [4, 4]], 1, lambda p, i: p[:, i]),
    ("vector", (5,), [4, 0, 4], 0, lambda p, i: p[i]),
    ("scalar_index", (4, 3), 2, 0, lambda p, i: p[i]),
    ("empty_indices", (4, 3), np.zeros((0,), np.int32), 0, lambda p, i: p[i]),
    ("int64_indices", (4, 3), np.array([3, 3, 1], np.int64), 0, lambda p, i: p[i]),
]:
    _dt = np.asarray(_idx).dtype.name if isinstance(_idx, np.ndarray) else "int32"
    case("gather", _name, lambda p, i, _a=_ax: jt.gather(p, i, axis=_a), _ref,
         [F(_ps), I(_idx, _dt)])
case("gather", "getitem_list", lambda p: p[[0, 2, 0]], lambda p: p[[0, 2, 0]], [F((4, 3))])
case("gather", "getitem_index_tensor", lambda p, i: p[i], lambda p, i: p[i],
     [F((4, 3)), I([[1, 1], [3, 0]])])

# scatter_add: the (dense) gradient of gather, and through apply directly
_SCATTER = REGISTRY["scatter_add"]
case("scatter_add", "via_gather_gradient", lambda p: jt.square(jt.gather(p, [0, 2, 0, 0])),
     lambda p: np.square(p[[0, 2, 0, 0]]), [F((4, 3))])
case("scatter_add", "via_gather_gradient_axis1",
     lambda p: jt.sin(jt.gather(p, [[1, 1], [0, 1]], axis=1)),
     lambda p: np.sin(p[:, [[1, 1], [0, 1]]]), [F((2, 3))])


def _scatter_ref(shape, axis):
    def ref(g, i):
        z = np.zeros(shape, dtype=g.dtype)
        gm = np.moveaxis(g.reshape(shape[:axis] + (i.size,) + shape[axis + 1:]), axis, 0)
        zm = np.moveaxis(z, axis, 0)
        for k, row in enumerate(i.ravel()):
            zm[row] += gm[k]
        return z

    return ref


case("scatter_add", "apply_axis0", lambda g, i: apply(_SCATTER, g, i, shape=(4, 2), axis=0),
     _scatter_ref((4, 2), 0), [F((3, 2)), I([0, 2, 0])])
case("scatter_add", "apply_axis1_2d_indices",
     lambda g, i: apply(_SCATTER, g, i, shape=(2, 3), axis=1),
     _scatter_ref((2, 3), 1), [F((2, 2, 2)), I([[2, 2], [0, 2]])])

# shape and size as ops (what jt.shape / jt.size become for symbolic sizes; ir.concretize
# folds them to constants before any backend runs a graph; eagerly they read the shape)

case("shape", "matrix", lambda x: sizes.symbolic_shape(x),
     lambda x: np.array(x.shape, np.int32), [F((2, 3))], grad="none")
case("shape", "scalar_int64", lambda x: sizes.symbolic_shape(x, "int64"),
     lambda x: np.zeros((0,), np.int64), [F(())], grad="skip")
case("size", "axes", lambda x: sizes.symbolic_size(x, (0, 2), "float64"),
     lambda x: np.float64(x.shape[0] * x.shape[2]), [F((2, 3, 4))], grad="none", f32=False)
case("size", "empty", lambda x: sizes.symbolic_size(x, (0, 1), "int32"),
     lambda x: np.int32(0), [F((0, 3))], grad="skip")

# one_hot (not differentiable)


def _one_hot_ref(depth, axis=-1, on=1.0, off=0.0, dtype=np.float32):
    def ref(i):
        hot = i[..., None] == np.arange(depth)
        out = np.where(hot, on, off).astype(dtype)
        return np.moveaxis(out, -1, axis)

    return ref


case("one_hot", "out_of_range_row_is_off", lambda i: jt.one_hot(i, 3), _one_hot_ref(3),
     [I([0, 2, 1, 3, -1])], grad="skip")
case("one_hot", "axis0", lambda i: jt.one_hot(i, 4, axis=0), _one_hot_ref(4, 0), [I([0, 2, 1])],
     grad="skip")
case("one_hot", "2d_axis1_on_off_f64",
     lambda i: jt.one_hot(i, 4, on_value=5.0, off_value=-1.0, axis=1, dtype=jt.float64),
     _one_hot_ref(4, 1, 5.0, -1.0, np.float64), [I([[0, 3], [2, 2]], "int64")], grad="skip")
case("one_hot", "empty", lambda i: jt.one_hot(i, 3), _one_hot_ref(3),
     [I(np.zeros((0,), np.int32))], grad="skip")
case("one_hot", "on_float_path", lambda x: jt.one_hot(jt.cast(x, jt.int32), 3, dtype=jt.float64),
     lambda x: _one_hot_ref(3, dtype=np.float64)(np.trunc(x).astype(np.int32)),
     [fixed([0.3, 2.7, 1.5, 1.2], "float64")], grad="none", f32=False)

# ---------------------------------------------------------------------------
# Reductions

_REDUCE_VARIANTS = [((), None, True), ((5,), None, False), ((5,), 0, True), ((2, 3), None, True),
                    ((2, 3), 0, False), ((2, 3), 1, True), ((2, 3), -1, False),
                    ((2, 3, 4), (0, 2), False), ((2, 3, 4), [-1, 0], True),
                    ((0, 3), 1, False), ((2, 0), 0, True)]


def _np_axis(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, int):
        axis = [axis]
    return tuple(a % ndim for a in axis)


def _sum_ref(axis, keepdims):
    def ref(x):
        return np.sum(x, axis=_np_axis(axis, x.ndim), keepdims=keepdims)

    return ref


def _extreme_ref(axis, keepdims, sign):
    def ref(x):
        ax = _np_axis(axis, x.ndim)
        if not ax:
            return x.copy()
        # move the reduced axes last, flatten them, sort
        rest = [k for k in range(x.ndim) if k not in ax]
        n = int(np.prod([x.shape[k] for k in ax]))  # not -1: numpy can't infer it for size 0
        y = np.transpose(x, rest + list(ax)).reshape([x.shape[k] for k in rest] + [n])
        if y.shape[-1] == 0:
            out = np.full(y.shape[:-1], -sign * np.inf, x.dtype)
        else:
            out = np.sort(y * sign, axis=-1)[..., -1] * sign
        if keepdims:
            out = out.reshape([1 if k in ax else d for k, d in enumerate(x.shape)])
        return out

    return ref


for _s, _ax, _kd in _REDUCE_VARIANTS:
    _nm = f"{_shape_name(_s)}_axis{_ax}_keepdims{_kd}"
    case("reduce_sum", _nm, lambda x, _a=_ax, _k=_kd: jt.reduce_sum(x, _a, _k), _sum_ref(_ax, _kd),
         [F(_s)])
    case("reduce_max", _nm, lambda x, _a=_ax, _k=_kd: jt.reduce_max(x, _a, _k),
         _extreme_ref(_ax, _kd, 1.0), [F(_s, "distinct")])
    case("reduce_min", _nm, lambda x, _a=_ax, _k=_kd: jt.reduce_min(x, _a, _k),
         _extreme_ref(_ax, _kd, -1.0), [F(_s, "distinct")])
case("reduce_sum", "keyword_args", lambda x: jt.reduce_sum(x, axis=[0], keepdims=True),
     _sum_ref([0], True), [F((3, 2))])
case("reduce_sum", "int32", lambda i: jt.reduce_sum(i, 1), lambda i: i.sum(1).astype(np.int32),
     [I([[1, -2, 3], [4, 5, 6]])], grad="skip")
case("reduce_sum", "bool_via_reduce_any", lambda b: jt.reduce_any(b, 1), lambda b: b.any(1),
     [B((3, 4))], grad="skip")
case("reduce_sum", "bool_via_reduce_all", lambda b: jt.reduce_all(b, 0), lambda b: b.all(0),
     [B((3, 4))], grad="skip")
# TF: the max over an empty axis is -inf (the identity of max), the min +inf
case("reduce_max", "empty_axis_is_minus_inf", lambda x: jt.reduce_max(x, 0),
     _extreme_ref(0, False, 1.0), [F((0, 3))], grad="skip")
case("reduce_min", "empty_axis_is_plus_inf", lambda x: jt.reduce_min(x, 0),
     _extreme_ref(0, False, -1.0), [F((0, 3))], grad="skip")

for _op, _np_fn in [("argmax", np.argmax), ("argmin", np.argmin)]:
    for _s, _ax in [((5,), None), ((2, 3), 0), ((2, 3), 1), ((2, 3), -1), ((2, 3, 4), 2)]:
        case(_op, f"{_shape_name(_s)}_axis{_ax}",
             lambda x, _a=_ax, _f=getattr(jt, _op): _f(x, _a),
             lambda x, _a=_ax, _f=_np_fn: _f(x, axis=0 if _a is None else _a).astype(np.int64),
             [F(_s, "distinct")], grad="none")
    case(_op, "int32_output", lambda x, _f=getattr(jt, _op): _f(x, 1, output_type=jt.int32),
         lambda x, _f=_np_fn: _f(x, axis=1).astype(np.int32), [F((3, 4), "distinct")],
         grad="none")

# ---------------------------------------------------------------------------
# Contraction


def _mm(a, b):
    return np.einsum("...ij,...jk->...ik", a, b)


for _sa, _sb in [((2, 3), (3, 4)), ((1, 3), (3, 1)), ((2, 2, 3), (2, 3, 4)),
                 ((2, 1, 2, 3), (3, 3, 2)), ((2, 2, 3), (3, 4)), ((3, 2), (2, 2, 5)),
                 ((0, 3), (3, 2)), ((2, 0), (0, 3))]:
    case("matmul", _shape_name(_sa, _sb), jt.matmul, _mm, [F(_sa), F(_sb)])
case("matmul", "operator", lambda a, b: a @ b, _mm, [F((2, 3)), F((3, 2))])
case("matmul", "transpose_a", lambda a, b: jt.matmul(a, b, transpose_a=True),
     lambda a, b: _mm(np.swapaxes(a, -1, -2), b), [F((3, 2)), F((3, 4))])
case("matmul", "transpose_b", lambda a, b: jt.matmul(a, b, transpose_b=True),
     lambda a, b: _mm(a, np.swapaxes(b, -1, -2)), [F((2, 3)), F((4, 3))])
case("matmul", "transpose_both_batched",
     lambda a, b: jt.matmul(a, b, transpose_a=True, transpose_b=True),
     lambda a, b: _mm(np.swapaxes(a, -1, -2), np.swapaxes(b, -1, -2)),
     [F((2, 3, 2)), F((1, 4, 3))])

# ---------------------------------------------------------------------------
# Composites (no registry entry of their own)


def _np_softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True)) if x.size else x
    return e / e.sum(axis=axis, keepdims=True) if x.size else x


def _np_logsumexp(x, axis, keepdims):
    ax = _np_axis(axis, x.ndim)
    m = np.amax(x, axis=ax, keepdims=True)
    r = np.log(np.sum(np.exp(x - m), axis=ax, keepdims=True)) + m
    return r if keepdims else r.reshape([d for k, d in enumerate(x.shape) if k not in ax])


for _s, _ax in [((2, 3), -1), ((2, 3), 0), ((4,), -1), ((2, 3, 2), 1), ((0, 3), -1)]:
    case("softmax", f"{_shape_name(_s)}_axis{_ax}",
         lambda x, _a=_ax: jt.nn.softmax(x, _a), lambda x, _a=_ax: _np_softmax(x, _a), [F(_s)])
for _s, _ax in [((2, 3), -1), ((2, 3), 0), ((4,), -1)]:
    case("log_softmax", f"{_shape_name(_s)}_axis{_ax}",
         lambda x, _a=_ax: jt.nn.log_softmax(x, _a),
         lambda x, _a=_ax: x - _np_logsumexp(x, _a, True), [F(_s)])
case("softmax", "large_logits", lambda x: jt.nn.softmax(x), lambda x: _np_softmax(x, -1),
     [fixed([[1000.0, 1001.0, 999.0], [-1000.0, -1002.0, -1001.0]], "float64")])


def _np_sparse_xent(labels, logits):
    ls = logits - _np_logsumexp(logits, -1, True)
    return -np.take_along_axis(ls, labels[..., None].astype(np.int64), -1)[..., 0]


case("sparse_softmax_cross_entropy_with_logits", "batch",
     lambda y, z: jt.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=z),
     _np_sparse_xent, [I([0, 2, 1]), F((3, 4))])
case("sparse_softmax_cross_entropy_with_logits", "rank2_labels_int64",
     lambda y, z: jt.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=z),
     _np_sparse_xent, [I([[0, 2], [1, 1]], "int64"), F((2, 2, 3))])


def _mean_ref(axis, keepdims):
    s = _sum_ref(axis, keepdims)

    def ref(x):
        n = int(np.prod([x.shape[a] for a in _np_axis(axis, x.ndim)], dtype=int))
        with np.errstate(all="ignore"):
            return s(x) / x.dtype.type(n)

    return ref


for _s, _ax, _kd in [((2, 3), None, False), ((2, 3), 0, False), ((2, 3), (0, 1), True),
                     ((2, 3), -1, True), ((), None, False), ((4,), 0, False)]:
    case("reduce_mean", f"{_shape_name(_s)}_axis{_ax}_keepdims{_kd}",
         lambda x, _a=_ax, _k=_kd: jt.reduce_mean(x, _a, _k), _mean_ref(_ax, _kd), [F(_s)])
case("reduce_mean", "empty_is_nan", lambda x: jt.reduce_mean(x, 0), _mean_ref(0, False),
     [F((0, 3))], grad="skip")
# TF divides integer sums with C++ integer division: truncation toward zero
case("reduce_mean", "int32_truncates_toward_zero", lambda i: jt.reduce_mean(i, 1),
     lambda i: np.trunc(i.sum(1) / i.shape[1]).astype(np.int32),
     [I([[-3, -2], [3, 2], [-4, 1], [5, 6]])], grad="skip")

for _s, _ax, _kd in [((2, 3), None, False), ((2, 3), 1, False), ((2, 3), 0, True),
                     ((4,), -1, True), ((3, 2, 2), (1, 2), False)]:
    case("reduce_logsumexp", f"{_shape_name(_s)}_axis{_ax}_keepdims{_kd}",
         lambda x, _a=_ax, _k=_kd: jt.reduce_logsumexp(x, _a, _k),
         lambda x, _a=_ax, _k=_kd: _np_logsumexp(x, _a, _k), [F(_s)])
case("reduce_logsumexp", "large", lambda x: jt.reduce_logsumexp(x, 1),
     lambda x: _np_logsumexp(x, 1, False),
     [fixed([[1000.0, 1001.0, 999.0], [-1000.0, -1002.0, -1001.0]], "float64")])


def _norm_ref(ordr, axis, keepdims):
    def ref(x):
        ax = _np_axis(axis, x.ndim)
        if ordr == "euclidean":
            r = np.sqrt(np.sum(x * x, axis=ax, keepdims=True))
        elif ordr == 1:
            r = np.sum(np.abs(x), axis=ax, keepdims=True)
        else:
            r = np.amax(np.abs(x), axis=ax, keepdims=True)
        return r if keepdims else r.reshape([d for k, d in enumerate(x.shape) if k not in ax])

    return ref


for _ord, _gen in [("euclidean", "away"), (1, "away"), (np.inf, "distinct_abs")]:
    for _s, _ax, _kd in [((2, 3), None, False), ((2, 3), 1, True), ((4,), 0, False)]:
        case("norm", f"ord{_ord}_{_shape_name(_s)}_axis{_ax}_keepdims{_kd}",
             lambda x, _o=_ord, _a=_ax, _k=_kd: jt.norm(x, _o, _a, _k),
             _norm_ref(_ord, _ax, _kd), [F(_s, _gen)])

case("clip_by_value", "scalar_bounds", lambda x: jt.clip_by_value(x, -1.0, 1.0),
     lambda x: np.where(x < -1, -1.0, np.where(x > 1, 1.0, x)), [F((3, 4), "clipsafe")])
case("clip_by_value", "scalar_input", lambda x: jt.clip_by_value(x, -1.0, 1.0),
     lambda x: np.where(x < -1, -1.0, np.where(x > 1, 1.0, x)), [F((), "clipsafe")])
case("clip_by_value", "empty", lambda x: jt.clip_by_value(x, -1.0, 1.0),
     lambda x: x.copy(), [F((0, 2))])
case("clip_by_value", "tensor_bounds", lambda x, lo: jt.clip_by_value(x, lo, lo + 1.0),
     lambda x, lo: np.where(x < lo, lo, np.where(x > lo + 1, lo + 1, x)),
     [F((2, 3), "grid"), F((3,), "halfgrid")])


def _clip_norm_ref(c, axes=None):
    def ref(x):
        ax = _np_axis(axes, x.ndim)
        n = np.sqrt(np.sum(x * x, axis=ax, keepdims=True))
        return x * c / np.where(n > c, n, c)

    return ref


case("clip_by_norm", "clipped", lambda x: jt.clip_by_norm(x, 1.0), _clip_norm_ref(1.0),
     [F((2, 3))])
case("clip_by_norm", "not_clipped", lambda x: jt.clip_by_norm(x, 1.0), _clip_norm_ref(1.0),
     [F((2, 3), "small")])
case("clip_by_norm", "per_row_axes", lambda x: jt.clip_by_norm(x, 0.8, axes=[1]),
     _clip_norm_ref(0.8, [1]),
     [fixed([[0.1, -0.2, 0.3], [1.0, 0.5, -2.0], [0.3, 0.2, -0.1], [-1.5, 0.1, 0.9]],
            "float64")])


def _global_ref(c):
    def ref(a, b):
        gn = np.sqrt(np.sum(a * a) + np.sum(b * b))
        scale = c / max(gn, c)
        return [a * scale, b * scale, np.asarray(gn)]

    return ref


case("clip_by_global_norm", "clipped", lambda a, b: jt.clip_by_global_norm([a, b], 1.0),
     _global_ref(1.0), [F((2, 3)), F((3,))])
case("clip_by_global_norm", "not_clipped", lambda a, b: jt.clip_by_global_norm([a, b], 5.0),
     _global_ref(5.0), [F((2, 3), "small"), F((3,), "small")])
case("global_norm", "two_tensors", lambda a, b: jt.global_norm([a, b]),
     lambda a, b: np.sqrt(np.sum(a * a) + np.sum(b * b)), [F((2, 3)), F((4,))])

case("unstack", "axis0", lambda x: jt.unstack(x), lambda x: [x[0], x[1], x[2]], [F((3, 2))])
case("unstack", "axis1", lambda x: jt.unstack(x, axis=1), lambda x: [x[:, 0], x[:, 1]],
     [F((3, 2))])


# the catalogue's other case modules append their cases to CASES when imported here
from . import cases_conv, cases_creation, cases_math, cases_pool  # noqa: E402,F401


def cases_by_op() -> dict:
    out: dict = {}
    for c in CASES:
        out.setdefault(c.op, []).append(c)
    return out


def _check_unique_ids():
    seen = set()
    for c in CASES:
        if c.id in seen:
            raise AssertionError(f"duplicate case id {c.id}")
        seen.add(c.id)


_check_unique_ids()
