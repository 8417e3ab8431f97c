"""Differential fuzzing: random programs differentiated three ways, first and second order,
and checked against finite differences.

Hypothesis draws small programs (a read of each variable, then 2-6 steps; tiny shapes;
float64) over the registered
ops: elementwise unary and binary ops with broadcasting, ``where``, the reductions
(``reduce_sum/mean/max/min/logsumexp``, ``norm``) over random axes with and without
``keepdims``, ``matmul`` (2-D and batched, transposed operands), ``reshape``,
``transpose``, ``expand_dims``, ``squeeze``, ``broadcast_to``, basic slicing
(``x[1:, ::2]``, ints, ``None``, ``...``, negative steps), ``gather`` (repeated indices),
``concat``, ``stack``, ``unstack``, ``softmax``/``log_softmax``, ``clip_by_value``,
a ``jt.custom_gradient`` (its derivative written by hand), ``jt.stop_gradient``, and ``jt.Variable`` sources read, then ``assign``/``assign_add``/
``assign_sub``-ed, then read again. The loss is ``sum_k <tanh(v_k), u_k>`` over the values
no later step uses, for fixed random ``u_k``.

Each program is differentiated with respect to its inputs (watched constants) and its
variables:

1. eagerly, ``jt.GradientTape(backend="interpret")``: the gradient (the backward graph
   run by the interpreter), the same gradient under an outer tape (the VJPs run as
   eager ops) and the outer tape's gradient of ``<gradient, w>`` (second order);
2. the same with ``backend="cpu"`` (the backward graphs compiled by Numba; a tape that
   holds a custom gradient runs its VJPs eagerly, on cpu too);
3. the same computation inside ``@jt.function(backend="cpu")``: one traced, compiled
   program, called twice;

and all of them must agree (``cpu_cases.assert_same``), as must the final variable
values. The interpreter's derivatives are checked against central finite differences:
first order in a random direction, second order as the mixed difference of the loss
in two random directions (``<v, H w>``).

The finite differences follow TF's semantics: a value behind ``stop_gradient`` is held
at its unperturbed value, and so is a value a variable was assigned (``assign`` is not
differentiable: a read after it is a read of the variable, whose gradient is the sum
over all reads); a variable's perturbation is added to each of its reads.

Kinks and domains are kept away by construction: ``log``, ``sqrt``, ``reciprocal``,
``pow`` and ``divide`` see ``x*x + 0.5`` (``log1p``: ``x*x``); an op with a kink or a
jump (``abs``, ``relu``, ``leaky_relu``, ``softplus``, ``sign``, ``floor``,
``clip_by_value``, ``maximum``, ``minimum``, ``where``'s comparison, ``reduce_max/min``)
sees its operand plus a random constant, and the generator evaluates every candidate
step on the example's data and leaves it out when an operand is within ``GAP`` of a
kink (or the top two of a ``reduce_max`` tie within it, or a ``norm`` is near 0), or a
value is not finite or exceeds ``BOUND``. ``cast`` is not drawn: a float32 round trip
is noise to a 1e-6 finite difference.

``window_programs`` (``test_random_window_programs_agree_everywhere``) draws programs
over an image (batch 1-2, 1 or 2 spatial axes of 3-6, 1-3 channels, channels first or
last) and a filter bank, with one or two window steps among the others: ``conv1d``,
``conv2d``, ``convolution`` (grouped when the filter's depth divides the channels),
``conv1d_transpose``, ``conv2d_transpose``, ``depthwise_conv2d``, ``separable_conv2d``,
``max_pool``/``avg_pool`` (rank-generic, 1d, 2d) and ``pool`` (dilations), with random
kernel sizes (1-3), strides, dilations and padding (SAME, VALID, explicit pairs), NWC/NHWC
or NCW/NCHW. A filter is a slice of a value (usually the bank), reshaped, so its gradient
flows back through the slice. A max pool's operand is shifted by a random constant, and
the step is left out when the top two of a window are within ``GAP``.

Cost: every example compiles three graphs with Numba (the cpu tape's first- and
second-order backward graphs and the function's program), 0.3-6 s each on an empty
kernel cache; a window step adds kernels of its own configuration (forward, both
backprops and their second-order partners), so ``WINDOW_EXAMPLES`` is half the count
(plus one fixed example). The default count (``DEFAULT_EXAMPLES``) keeps the file
within about two and a half minutes on a 2-core machine with an empty cache (95 s, and
35-45 s more for the window programs; seconds when the cache is warm);
``JITTAPE_FUZZ_EXAMPLES=200`` (any count) runs a longer search. Hypothesis is derandomized on CI (``tests/conftest.py``);
``HYPOTHESIS_PROFILE=dev`` draws fresh programs. A failing program prints as a
``Program(...)`` literal: paste it into a regression test at the end of this file.
"""

from __future__ import annotations

import itertools
import math
import os
import re
from typing import NamedTuple

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

import jittape as jt
from jittape.compiler.backends import cpu, schedule_window
from jittape.ops import window_geometry

from cpu_cases import COMPILED, KERNEL_SETTINGS, CompileSpy, assert_same, record
from test_passes_random import _fits, _reshapes
from tolerances import tol

pytestmark = pytest.mark.filterwarnings("error::jittape.compiler.backends.cpu.CompileWarning")

DEFAULT_EXAMPLES = 10
N_EXAMPLES = int(os.environ.get("JITTAPE_FUZZ_EXAMPLES", DEFAULT_EXAMPLES))

SHAPES = [(), (3,), (2, 3), (2, 1), (1, 3), (2, 2, 3)]
GAP = 0.02  # distance every kink keeps from the operands (see the module docstring)
BOUND = 30.0  # largest |value| a program may hold
FD1 = tol("float64")  # eps 1e-6, rtol 1e-6, atol 1e-8
FD2_EPS, FD2_RTOL, FD2_ATOL = 1e-4, 1e-5, 1e-7  # the mixed second difference


class Step(NamedTuple):
    """One step of a program: ``kind``, op ``name``, the value indices it reads
    (``ins``) and its attributes. Every step adds one value (``None`` for an assign)."""

    kind: str
    name: str
    ins: tuple
    attrs: dict


class Program(NamedTuple):
    inputs: tuple  # shapes of the watched constants: values 0 .. len-1
    variables: tuple  # shapes of the variables
    steps: tuple
    seed: int  # the data: inputs, initial variable values, weights, directions


# ---------------------------------------------------------------------------
# Data: every array an example uses derives from the program's seed


def _normal(seed, purpose, k, shape, scale=1.0):
    return scale * np.random.default_rng([seed, purpose, k]).standard_normal(shape)


def _offset(c, shape):
    """The constant a kinked op's operand is shifted by (``c`` is its seed)."""
    return 0.0 if c is None else _normal(c, 9, 0, shape, 0.5)


def _inputs(prog):
    return [_normal(prog.seed, 0, k, s) for k, s in enumerate(prog.inputs)]


def _inits(prog):
    return [_normal(prog.seed, 1, k, s) for k, s in enumerate(prog.variables)]


# ---------------------------------------------------------------------------
# The ops a step applies


def _sq(x):
    return x * x + 0.5


@jt.custom_gradient
def _custom_softsign(x):
    """x / sqrt(1 + x^2) with its derivative written by hand (differentiable again)."""
    def grad(dy):
        return dy * jt.pow(1.0 + x * x, -1.5)

    return x / jt.sqrt(1.0 + x * x), grad


UNARY = {
    "tanh": lambda x, c: jt.tanh(x),
    "sin": lambda x, c: jt.sin(x),
    "cos": lambda x, c: jt.cos(x),
    "sigmoid": lambda x, c: jt.sigmoid(x),
    "exp": lambda x, c: jt.exp(x),
    "square": lambda x, c: jt.square(x),
    "negative": lambda x, c: -x,
    "identity": lambda x, c: jt.identity(x),
    "log": lambda x, c: jt.log(_sq(x)),
    "sqrt": lambda x, c: jt.sqrt(_sq(x)),
    "reciprocal": lambda x, c: jt.reciprocal(_sq(x)),
    "log1p": lambda x, c: jt.log1p(x * x),
    "pow_const": lambda x, c: _sq(x) ** 1.5,
    "custom_gradient": lambda x, c: _custom_softsign(x),
    # kinked: the operand is shifted by c, and kept GAP away from the kink
    "abs": lambda x, c: jt.abs(x + c),
    "relu": lambda x, c: jt.nn.relu(x + c),
    "leaky_relu": lambda x, c: jt.nn.leaky_relu(x + c),
    "softplus": lambda x, c: jt.nn.softplus(x + c),
    "sign": lambda x, c: jt.sign(x + c) * x,  # sign's derivative is 0: times x
    "floor": lambda x, c: jt.floor(x + c) + x,
    "clip": lambda x, c: jt.clip_by_value(x + c, -0.5, 0.5),
}
_KINK_DISTANCE = {
    "abs": np.abs, "relu": np.abs, "leaky_relu": np.abs, "softplus": np.abs, "sign": np.abs,
    "floor": lambda z: np.abs(z - np.round(z)),
    "clip": lambda z: np.minimum(np.abs(z - 0.5), np.abs(z + 0.5)),
}
BINARY = {
    "add": lambda a, b, c: a + b,
    "subtract": lambda a, b, c: a - b,
    "multiply": lambda a, b, c: a * b,
    "divide": lambda a, b, c: a / _sq(b),
    "pow": lambda a, b, c: jt.pow(_sq(a), b),
    "maximum": lambda a, b, c: jt.maximum(a, b + c),
    "minimum": lambda a, b, c: jt.minimum(a, b + c),
}
REDUCE = {
    "reduce_sum": lambda x, axis, keep, c: jt.reduce_sum(x, axis, keep),
    "reduce_mean": lambda x, axis, keep, c: jt.reduce_mean(x, axis, keep),
    "reduce_logsumexp": lambda x, axis, keep, c: jt.reduce_logsumexp(x, axis, keep),
    "reduce_max": lambda x, axis, keep, c: jt.reduce_max(x + c, axis, keep),
    "reduce_min": lambda x, axis, keep, c: jt.reduce_min(x + c, axis, keep),
    "norm": lambda x, axis, keep, c: jt.norm(x, axis=axis, keepdims=keep),
}
KINKED = set(_KINK_DISTANCE) | {"maximum", "minimum", "reduce_max", "reduce_min"}


def _apply(step, vals, env, k):
    """The value step ``k`` adds (a tensor, or None)."""
    kind, name, ins, a = step
    x = [vals[i] for i in ins]
    if kind == "read":
        return env.read(a["var"])
    if kind == "assign":
        v = x[0]
        if tuple(v.shape) != tuple(env.var_shape(a["var"])):
            v = jt.broadcast_to(v, env.var_shape(a["var"]))
        env.assign(name, a["var"], v)
        return None
    if kind == "stop_gradient":
        return env.stop(k, x[0])
    if kind == "unary":
        return UNARY[name](x[0], _offset(a.get("c"), x[0].shape))
    if kind == "binary":
        return BINARY[name](x[0], x[1], _offset(a.get("c"), x[1].shape))
    if kind == "where":
        return jt.where(x[0] > x[1] + _offset(a["c"], x[1].shape), x[2], x[3])
    if kind == "reduce":
        return REDUCE[name](x[0], a["axis"], a["keepdims"], _offset(a.get("c"), x[0].shape))
    if kind == "matmul":
        return jt.matmul(x[0], x[1], transpose_a=a["ta"], transpose_b=a["tb"])
    if kind == "reshape":
        return jt.reshape(x[0], a["shape"])
    if kind == "transpose":
        return jt.transpose(x[0], a["perm"])
    if kind == "expand_dims":
        return jt.expand_dims(x[0], a["axis"])
    if kind == "squeeze":
        return jt.squeeze(x[0], a["axis"])
    if kind == "broadcast_to":
        return jt.broadcast_to(x[0], a["shape"])
    if kind == "slice":
        return x[0][a["key"]]
    if kind == "gather":
        return jt.gather(x[0], np.array(a["indices"], np.int32), axis=a["axis"])
    if kind == "concat":
        return jt.concat(x, a["axis"])
    if kind == "stack":
        return jt.stack(x, a["axis"])
    if kind == "unstack":
        return jt.unstack(x[0], axis=a["axis"])[a["k"]]
    if kind == "softmax":
        return getattr(jt.nn, name)(x[0], a["axis"])
    if kind == "window":
        return _window(name, x, a)
    raise AssertionError(f"unknown step {step}")


def _sinks(prog):
    """Values no later step reads: the loss sums over them."""
    used = {i for s in prog.steps for i in s.ins}
    n = len(prog.inputs) + len(prog.steps)
    return [k for k in range(n) if k not in used]


def execute(prog, env):
    """Run ``prog`` in ``env``; returns the loss."""
    vals = [env.input(i) for i in range(len(prog.inputs))]
    for k, step in enumerate(prog.steps):
        vals.append(_apply(step, vals, env, len(prog.inputs) + k))
    loss = None
    for k in _sinks(prog):
        if vals[k] is None:
            continue
        term = jt.reduce_sum(jt.tanh(vals[k]) * _normal(prog.seed, 2, k, tuple(vals[k].shape)))
        loss = term if loss is None else loss + term
    return loss


# ---------------------------------------------------------------------------
# Environments: where inputs, variable reads, assigns and stop_gradient come from


class TapeEnv:
    """The real thing: watched inputs, ``jt.Variable`` reads and assigns."""

    def __init__(self, xs, variables):
        self.xs, self.variables = xs, variables

    def input(self, i):
        return self.xs[i]

    def var_shape(self, j):
        return tuple(self.variables[j].shape)

    def read(self, j):
        return self.variables[j].read_value()

    def assign(self, how, j, value):
        getattr(self.variables[j], how)(value)

    def stop(self, k, x):
        return jt.stop_gradient(x)


class ValueEnv:
    """Plain values for finite differences. Inputs and every read of a variable are
    shifted by ``shift`` (a list: inputs, then variables); with ``frozen`` (from an
    unshifted run, which fills it) the values behind ``stop_gradient`` and the values
    variables are assigned stay at their unshifted values."""

    def __init__(self, prog, shift=None, frozen=None):
        self.prog = prog
        n = len(prog.inputs)
        ins, inits = _inputs(prog), _inits(prog)
        if shift is not None:
            ins = [a + s for a, s in zip(ins, shift[:n])]
        self.ins = ins
        self.stored = inits
        self.read_shift = shift[n:] if shift is not None else [0.0] * len(inits)
        self.record = frozen is None
        self.frozen = {} if frozen is None else frozen
        self.n_assigns = 0

    def input(self, i):
        return jt.constant(self.ins[i])

    def var_shape(self, j):
        return self.prog.variables[j]

    def read(self, j):
        return jt.constant(self.stored[j] + self.read_shift[j])

    def assign(self, how, j, value):
        key = ("assign", self.n_assigns)
        self.n_assigns += 1
        if self.record:
            v = value.numpy()
            self.frozen[key] = {"assign": v, "assign_add": self.stored[j] + v,
                                "assign_sub": self.stored[j] - v}[how]
        self.stored[j] = self.frozen[key]

    def stop(self, k, x):
        if self.record:
            self.frozen[("stop", k)] = x.numpy()
        return jt.constant(self.frozen[("stop", k)])


# ---------------------------------------------------------------------------
# Generating programs


def _bcast(*shapes):
    return tuple(np.broadcast_shapes(*shapes))


def _slice_choices(n):
    ch = [slice(None), 0, -1, slice(None, None, -1)]
    if n >= 2:
        ch += [slice(1, None), slice(None, None, 2), slice(-2, None), slice(None, -1),
               slice(None, None, -2), slice(1, None, 2)]
    return ch


@st.composite
def _step(draw, shapes, var_shapes):
    """A candidate step over values of ``shapes`` (None: no value), or None."""
    avail = [k for k, s in enumerate(shapes) if s is not None]

    def pick(pred=lambda s: True):
        cands = [k for k in avail if pred(shapes[k])]
        return draw(st.sampled_from(cands)) if cands else None

    kind = draw(st.sampled_from([
        "unary", "binary", "reduce", "matmul", "slice", "unary", "binary", "where", "reduce",
        "matmul", "slice", "reshape", "transpose", "expand_dims", "squeeze", "broadcast_to",
        "gather", "concat", "unstack", "stop_gradient", "softmax", "read", "assign", "assign",
    ]))
    cseed = draw(st.integers(0, 2**16))
    if kind == "read":
        if not var_shapes:
            return None
        return Step("read", "read", (), {"var": draw(st.integers(0, len(var_shapes) - 1))})
    if kind == "assign":
        if not var_shapes:
            return None
        j = draw(st.integers(0, len(var_shapes) - 1))
        i = pick(lambda s: _fits(s, var_shapes[j]) and _bcast(s, var_shapes[j]) == var_shapes[j])
        if i is None:
            return None
        how = draw(st.sampled_from(["assign", "assign_add", "assign_sub"]))
        return Step("assign", how, (i,), {"var": j})
    i = pick()
    s = shapes[i]
    r = len(s)
    if kind == "unary":
        name = draw(st.sampled_from(list(UNARY)))
        return Step("unary", name, (i,), {"c": cseed if name in KINKED else None})
    if kind == "stop_gradient":
        return Step("stop_gradient", "stop_gradient", (i,), {})
    if kind == "binary":
        j = pick(lambda t: _fits(s, t))
        name = draw(st.sampled_from(list(BINARY)))
        return Step("binary", name, (i, j), {"c": cseed if name in KINKED else None})
    if kind == "where":
        j = pick(lambda t: _fits(s, t))
        cond = _bcast(s, shapes[j])
        x = pick(lambda t: _fits(cond, t))
        y = pick(lambda t: _fits(cond, shapes[x], t))
        return Step("where", "where", (i, j, x, y), {"c": cseed})
    if kind == "reduce":
        name = draw(st.sampled_from(list(REDUCE)))
        if r == 0:
            axis = None
        else:
            axis = draw(st.one_of(
                st.none(), st.integers(-r, r - 1),
                st.lists(st.integers(0, r - 1), max_size=r, unique=True).map(
                    lambda a: tuple(sorted(a)))))
        keep = draw(st.booleans())
        return Step("reduce", name, (i,), {"axis": axis, "keepdims": keep,
                                            "c": cseed if name in KINKED else None})
    if kind == "matmul":
        if r < 2:
            return None
        options = []
        for j in avail:
            t = shapes[j]
            if len(t) < 2:
                continue
            for ta, tb in itertools.product([False, True], repeat=2):
                ka = s[-2] if ta else s[-1]
                kb = t[-1] if tb else t[-2]
                if ka == kb and _fits(s[:-2], t[:-2]):
                    options.append((j, ta, tb))
        if not options:
            return None
        j, ta, tb = draw(st.sampled_from(options))
        return Step("matmul", "matmul", (i, j), {"ta": ta, "tb": tb})
    if kind in ("reshape", "transpose", "expand_dims", "squeeze", "broadcast_to"):
        op = kind
        if op == "reshape":
            shape = list(draw(st.sampled_from(_reshapes(s))))
            if shape and draw(st.booleans()):
                shape[draw(st.integers(0, len(shape) - 1))] = -1
            return Step("reshape", "reshape", (i,), {"shape": shape})
        if op == "transpose":
            if r < 2:
                return None
            perm = draw(st.one_of(st.none(), st.permutations(range(r)).map(list)))
            return Step("transpose", "transpose", (i,), {"perm": perm})
        if op == "expand_dims":
            return Step("expand_dims", "expand_dims", (i,),
                        {"axis": draw(st.integers(-r - 1, r))})
        if op == "squeeze":
            ones = [d for d in range(r) if s[d] == 1]
            if not ones:
                return None
            axis = draw(st.one_of(st.none(), st.sampled_from(ones)))
            return Step("squeeze", "squeeze", (i,), {"axis": axis})
        target = tuple(draw(st.sampled_from([1, 2, 3])) if d == 1 else d for d in s)
        if r < 3 and draw(st.booleans()):
            target = (2,) + target
        return Step("broadcast_to", "broadcast_to", (i,), {"shape": target})
    if kind == "slice":
        if r == 0:
            return None
        n_key = draw(st.integers(1, r))
        key = [draw(st.sampled_from(_slice_choices(s[d]))) for d in range(n_key)]
        if draw(st.booleans()):
            key.insert(draw(st.integers(0, len(key))), None)
        if n_key < r and draw(st.booleans()):
            # the key names the last axes
            key = [Ellipsis] + [draw(st.sampled_from(_slice_choices(s[d])))
                                for d in range(r - n_key, r)]
        return Step("slice", "slice", (i,), {"key": tuple(key)})
    if kind == "gather":
        if r == 0:
            return None
        axis = draw(st.integers(0, r - 1))
        n = s[axis]
        idx = st.integers(0, n - 1)
        indices = draw(st.one_of(
            st.lists(idx, min_size=1, max_size=3).map(tuple),
            st.tuples(st.tuples(idx, idx), st.tuples(idx, idx))))
        return Step("gather", "gather", (i,), {"indices": indices, "axis": axis})
    if kind == "concat":
        if r == 0:
            return None
        axis = draw(st.integers(-r, r - 1))
        ax = axis % r
        j = pick(lambda t: len(t) == r and all(t[d] == s[d] for d in range(r) if d != ax))
        if draw(st.booleans()):
            return Step("concat", "concat", (i, j), {"axis": axis})
        j = pick(lambda t: t == s)
        return Step("stack", "stack", (i, j), {"axis": draw(st.integers(-r - 1, r))})
    if kind == "unstack":
        if r == 0:
            return None
        axis = draw(st.integers(0, r - 1))
        return Step("unstack", "unstack", (i,),
                    {"axis": axis, "k": draw(st.integers(0, s[axis] - 1))})
    if kind == "softmax":
        if r == 0:
            return None
        name = draw(st.sampled_from(["softmax", "log_softmax"]))
        return Step("softmax", name, (i,), {"axis": draw(st.integers(-r, r - 1))})
    raise AssertionError(kind)


def _top_gap(z, axis, largest):
    """The smallest gap between the two extreme values of each reduced group."""
    z = np.asarray(z)
    axes = tuple(range(z.ndim)) if axis is None else \
        tuple(sorted(a % z.ndim for a in ((axis,) if isinstance(axis, int) else axis)))
    if not axes:
        return math.inf
    keep = [d for d in range(z.ndim) if d not in axes]
    flat = np.transpose(z, keep + list(axes)).reshape(
        [z.shape[d] for d in keep] + [-1])
    if flat.shape[-1] < 2:
        return math.inf
    srt = np.sort(flat, axis=-1)
    gap = srt[..., -1] - srt[..., -2] if largest else srt[..., 1] - srt[..., 0]
    return float(np.min(gap))


def _margin(step, arrays):
    """How far the step's operands (numpy) are from its kinks, jumps and ties."""
    kind, name, _, a = step
    if kind == "unary" and name in _KINK_DISTANCE:
        return float(np.min(_KINK_DISTANCE[name](arrays[0] + _offset(a["c"], arrays[0].shape)),
                            initial=math.inf))
    if kind == "binary" and name in ("maximum", "minimum"):
        return float(np.min(np.abs(arrays[0] - arrays[1] - _offset(a["c"], arrays[1].shape)),
                            initial=math.inf))
    if kind == "where":
        return float(np.min(np.abs(arrays[0] - arrays[1] - _offset(a["c"], arrays[1].shape)),
                            initial=math.inf))
    if kind == "reduce" and name in ("reduce_max", "reduce_min"):
        return _top_gap(arrays[0] + _offset(a["c"], arrays[0].shape), a["axis"],
                        name == "reduce_max")
    if kind == "reduce" and name == "norm":
        n = np.sqrt(np.sum(arrays[0] ** 2, axis=a["axis"]))
        return float(np.min(n)) / 5  # sqrt's curvature: the norm keeps 5 * GAP from 0
    if kind == "window" and a.get("pooling") == "MAX":
        return _pool_top_gap(arrays[0] + _offset(a["c"], arrays[0].shape), a)
    return math.inf


@st.composite
def programs(draw):
    seed = draw(st.integers(0, 2**16))
    inputs = tuple(draw(st.lists(st.sampled_from(SHAPES), min_size=1, max_size=2)))
    variables = tuple(draw(st.lists(st.sampled_from(SHAPES), max_size=2)))
    n_steps = draw(st.integers(2, 6))
    return _grow(draw, Program(inputs, variables, (), seed), n_steps,
                 lambda shapes, var_shapes, steps: _step(shapes, var_shapes))


def _grow(draw, prog, n_steps, step_strategy):
    """``prog`` (no steps yet) with a read of each variable, then up to ``n_steps``
    steps drawn from ``step_strategy(shapes, var_shapes, steps so far)``, each evaluated
    on the example's data and kept only if its operands are away from kinks and its
    value is finite, bounded and not empty."""
    inputs, variables = prog.inputs, prog.variables
    env = ValueEnv(prog)
    vals = [env.input(i) for i in range(len(inputs))]
    shapes = list(inputs)
    steps = []
    for j, s in enumerate(variables):  # every variable is read (and later maybe assigned)
        steps.append(Step("read", "read", (), {"var": j}))
        vals.append(env.read(j))
        shapes.append(s)
    n_steps += len(steps)
    for _ in range(4 * n_steps):
        if len(steps) >= n_steps:
            break
        step = draw(step_strategy(shapes, variables, steps))
        if step is None or any(i is None for i in step.ins):
            continue
        k = len(vals)
        if _margin(step, [vals[i].numpy() for i in step.ins]) < GAP:
            continue
        try:
            v = _apply(step, vals, env, k)
        except (ValueError, TypeError) as e:  # a drawn shape combination that is invalid
            raise AssertionError(f"the generator drew an invalid step {step}: {e}") from e
        if v is not None:
            a = v.numpy()
            if not np.all(np.isfinite(a)) or np.max(np.abs(a), initial=0.0) > BOUND \
                    or a.size == 0:
                continue
        steps.append(step)
        vals.append(v)
        shapes.append(None if v is None else tuple(v.shape))
    return prog._replace(steps=tuple(steps))


# ---------------------------------------------------------------------------
# Window steps: convolutions and pools (test_random_window_programs_agree_everywhere)
#
# A window step reads a rank-3 (1-d) or rank-4 (2-d) value as channels last or first and
# applies one of TF's functions: conv1d/conv2d/convolution (groups where the filter's
# depth divides the channels), conv1d/conv2d_transpose, depthwise_conv2d,
# separable_conv2d, max_pool/avg_pool (1d, 2d and the rank-generic ones) or pool
# (dilations). Strides, dilations, kernel sizes and padding (SAME, VALID, explicit pairs)
# are drawn per axis, as an int, a list per spatial axis or TF's list over all axes.
# A filter is cut from any value with enough elements (usually BANK, an input or a
# variable): its flattened elements offset .. offset + size, reshaped and scaled by
# 1/sqrt(fan-in), so the filter's gradient reaches that value through a slice and a
# reshape. A max pool sees its operand plus a random constant and is left out when the
# top two of a window are within GAP (``_pool_top_gap``).

BANK = 81  # the largest filter: 3x3 taps, 3 channels in, 3 out
MAX_CHANNELS = 3  # a window step reads values of at most this many channels
MAX_SPATIAL = 8  # ... and spatial sizes


def _filter(v, offset, shape, fan_in):
    n = math.prod(shape)
    flat = jt.reshape(v, [-1])[offset:offset + n]
    return jt.reshape(flat, shape) * (1.0 / math.sqrt(fan_in))


def _window(name, x, a):
    """The value of window step ``name`` (see ``_window_step``) on operands ``x``."""
    fmt = a["format"]
    if a.get("pooling"):
        v = x[0] + _offset(a.get("c"), x[0].shape) if a["pooling"] == "MAX" else x[0]
        if name == "pool":
            return jt.nn.pool(v, a["ksize"], a["pooling"], a["strides"], a["padding"],
                              data_format=fmt, dilations=a["dilations"])
        return getattr(jt.nn, name)(v, a["ksize"], a["strides"], a["padding"],
                                    data_format=fmt)
    w = _filter(x[1], a["offset"], a["fshape"], a["fan_in"])
    if name in ("conv1d", "conv2d", "convolution"):
        return getattr(jt.nn, name)(x[0], w, a["strides"], a["padding"], data_format=fmt,
                                    dilations=a["dilations"])
    if name in ("conv1d_transpose", "conv2d_transpose"):
        return getattr(jt.nn, name)(x[0], w, a["output_shape"], a["strides"], a["padding"],
                                    data_format=fmt, dilations=a["dilations"])
    if name == "depthwise_conv2d":
        return jt.nn.depthwise_conv2d(x[0], w, a["strides"], a["padding"], data_format=fmt,
                                      dilations=a["dilations"])
    if name == "separable_conv2d":
        pw = _filter(x[1], a["offset2"], a["fshape2"], a["fshape2"][2])
        return jt.nn.separable_conv2d(x[0], w, pw, a["strides"], a["padding"],
                                      data_format=fmt, dilations=a["dilations"])
    raise AssertionError(f"unknown window step {name}")


def _layout(shape, first):
    """(batch, spatial sizes, channels) of a value read as channels first or last."""
    return (shape[0], tuple(shape[2:]), shape[1]) if first else \
        (shape[0], tuple(shape[1:-1]), shape[-1])


def _resolved_pads(a, spatial):
    """The (low, high) pads per spatial axis of window step attributes ``a``."""
    ns = len(spatial)
    k = window_geometry.per_axis("fuzz", "ksize", a["ksize"], ns, a["first"])
    s = window_geometry.per_axis("fuzz", "strides", a["strides"], ns, a["first"])
    d = window_geometry.per_axis("fuzz", "dilations", a["dilations"], ns, a["first"])
    return k, s, d, window_geometry.pads_for("fuzz", a["padding"], spatial, k, s, d,
                                             a["first"])


def _pool_top_gap(z, a):
    """The smallest gap between the two largest inputs of a max pool's windows (only
    the positions inside the input count: the padding never wins)."""
    first = a["first"]
    z = np.moveaxis(z, 1, -1) if first else z
    k, s, d, pads = _resolved_pads(a, z.shape[1:-1])
    zp = np.pad(z, [(0, 0), *pads, (0, 0)], constant_values=-np.inf)
    outs = [window_geometry.out_size(n, kk, ss, dd, lo, hi)
            for n, kk, ss, dd, (lo, hi) in zip(z.shape[1:-1], k, s, d, pads)]
    gap = math.inf
    for o in itertools.product(*map(range, outs)):
        key = tuple(slice(oo * ss, oo * ss + (kk - 1) * dd + 1, dd)
                    for oo, kk, ss, dd in zip(o, k, s, d))
        win = zp[(slice(None), *key, slice(None))].reshape(z.shape[0], -1, z.shape[-1])
        if win.shape[1] < 2:
            continue
        top = np.sort(win, axis=1)[:, -2:, :]
        inside = np.isfinite(top[:, 0])  # -inf: the window has one position inside
        diff = top[:, 1] - np.where(inside, top[:, 0], 0.0)
        gap = min(gap, float(np.min(np.where(inside, diff, math.inf))))
    return gap


@st.composite
def _spatial_args(draw, ns, first, bound):
    """An int, a list per spatial axis or TF's list over all axes, of values in
    ``1..bound``; returns (the argument, the per-axis tuple)."""
    vals = tuple(draw(st.integers(1, bound)) for _ in range(ns))
    form = draw(st.integers(0, 2))
    if form == 0 and len(set(vals)) == 1:
        return vals[0], vals
    if form == 1:
        return [1, 1, *vals] if first else [1, *vals, 1], vals
    return list(vals), vals


@st.composite
def _padding(draw, ns, first, ksize=None):
    """"SAME", "VALID" or explicit pairs over all axes (each pad below the window size
    when ``ksize`` is given: TF's rule for max pool)."""
    how = draw(st.sampled_from(["SAME", "VALID", "explicit"]))
    if how != "explicit":
        return how
    pairs = [[draw(st.integers(0, 2 if ksize is None else min(2, k - 1))) for _ in range(2)]
             for k in (ksize or (None,) * ns)]
    return [[0, 0], [0, 0], *pairs] if first else [[0, 0], *pairs, [0, 0]]


@st.composite
def _window_step(draw, shapes, var_shapes):
    """A window step (a convolution or a pool) on a rank-3/4 value, or None."""
    first = draw(st.booleans())

    def fits(s):
        if s is None or len(s) not in (3, 4):
            return False
        n, sp, c = _layout(s, first)
        return c <= MAX_CHANNELS and all(d <= MAX_SPATIAL for d in sp)

    cands = [k for k, s in enumerate(shapes) if fits(s)]
    if not cands:
        return None
    i = draw(st.sampled_from(cands))
    s = shapes[i]
    ns = len(s) - 2
    n, sp, c = _layout(s, first)
    fmt = ("NCW" if ns == 1 else "NCHW") if first else ("NWC" if ns == 1 else "NHWC")
    kinds = ["conv", "conv", "transpose", "max_pool", "avg_pool", "pool"]
    if ns == 2:
        kinds += ["depthwise", "separable"]
    kind = draw(st.sampled_from(kinds))
    karg, ksize = draw(_spatial_args(ns, first, 3))
    a = {"format": fmt, "first": first, "ksize": karg}
    if kind in ("max_pool", "avg_pool", "pool"):
        pooling = "MAX" if kind == "max_pool" else "AVG" if kind == "avg_pool" else \
            draw(st.sampled_from(["MAX", "AVG"]))
        if kind == "pool":
            name = "pool"
            a["dilations"] = list(draw(_spatial_args(ns, first, 2))[1])
            if max(a["dilations"]) > 1:  # TF's rule: VALID and strides 1 with dilations
                a["strides"], a["padding"] = [1] * ns, "VALID"
            else:
                a["strides"] = list(draw(_spatial_args(ns, first, 3))[1])
                a["padding"] = draw(st.sampled_from(["SAME", "VALID"]))
            a["ksize"] = list(ksize)
        else:
            base = kind.removesuffix("_pool") + "_pool"
            name = draw(st.sampled_from([base, f"{base}{ns}d"]))
            a["strides"] = draw(_spatial_args(ns, first, 3))[0]
            a["dilations"] = 1
            a["padding"] = draw(_padding(ns, first, ksize)) if pooling == "MAX" else \
                draw(st.sampled_from(["SAME", "VALID"]))
        a["pooling"] = pooling
        if pooling == "MAX":
            a["c"] = draw(st.integers(0, 2**16))
        return Step("window", name, (i,), a)

    strides_arg, strides = draw(_spatial_args(ns, first, 2))
    dil_arg, dil = draw(_spatial_args(ns, first, 2))
    a.update(strides=strides_arg, dilations=dil_arg, padding=draw(_padding(ns, first)))
    a["ksize"] = ksize  # the filter's spatial sizes
    k, st_, d, pads = _resolved_pads(a, sp)
    if kind == "conv":
        groups = draw(st.sampled_from([g for g in range(1, c + 1) if c % g == 0]))
        f = groups * draw(st.integers(1, MAX_CHANNELS // groups))
        name = draw(st.sampled_from([f"conv{ns}d", "convolution"]))
        a["fshape"] = (*ksize, c // groups, f)
        a["fan_in"] = math.prod(ksize) * (c // groups)
    elif kind == "transpose":
        name = f"conv{ns}d_transpose"
        fout = draw(st.integers(1, MAX_CHANNELS))
        a["fshape"] = (*ksize, fout, c)
        a["fan_in"] = math.prod(ksize) * c
        # the output size m: a convolution of an input of m positions gives this one's
        sizes = []
        for j in range(ns):
            ms = [m for m in range(1, MAX_SPATIAL + 1)
                  if window_geometry.out_size(m, k[j], st_[j], d[j], *window_geometry.pads_for(
                      "fuzz", a["padding"], (m,) * ns, k, st_, d, first)[j]) == sp[j]]
            if not ms:
                return None
            sizes.append(draw(st.sampled_from(ms)))
        a["output_shape"] = [n, fout, *sizes] if first else [n, *sizes, fout]
    else:  # depthwise, separable
        m = draw(st.integers(1, max(1, MAX_CHANNELS // c)))
        name = f"{kind}_conv2d" if kind == "depthwise" else "separable_conv2d"
        a["fshape"] = (*ksize, c, m)
        a["fan_in"] = math.prod(ksize)
        if kind == "separable":
            a["fshape2"] = (1, 1, c * m, draw(st.integers(1, MAX_CHANNELS)))
            if len(set(strides)) > 1:  # TF's rule: equal strides in both spatial axes
                return None
    need = math.prod(a["fshape"]) + (math.prod(a["fshape2"]) if "fshape2" in a else 0)
    srcs = [j for j, t in enumerate(shapes) if t is not None and math.prod(t) >= need]
    if not srcs:
        return None
    j = draw(st.sampled_from(srcs))  # the bank, or any other value large enough
    size = math.prod(shapes[j])
    a["offset"] = draw(st.integers(0, size - math.prod(a["fshape"])))
    if "fshape2" in a:
        a["offset2"] = draw(st.integers(0, size - math.prod(a["fshape2"])))
    return Step("window", name, (i, j), a)


@st.composite
def window_programs(draw):
    """A program over an image (1-d or 2-d, channels first or last) and a filter bank
    (an input or a variable): one or two window steps, the other steps mixed in."""
    seed = draw(st.integers(0, 2**16))
    ns = draw(st.integers(1, 2))
    first = draw(st.booleans())
    n, c = draw(st.integers(1, 2)), draw(st.integers(1, MAX_CHANNELS))
    sp = tuple(draw(st.integers(3, 6)) for _ in range(ns))
    image = (n, c, *sp) if first else (n, *sp, c)
    inputs, variables = [image], []
    (inputs if draw(st.booleans()) else variables).append((BANK,))
    if draw(st.booleans()):  # a bias-like operand for the steps after a convolution
        inputs.append(draw(st.sampled_from([(c,), (1,), (c,) + (1,) * ns, ()])))
    n_steps = draw(st.integers(2, 4))

    @st.composite
    def step(draw2, shapes, var_shapes, steps):
        # each window step costs its own kernels (see WINDOW_EXAMPLES): at most two
        n_windows = sum(s.kind == "window" for s in steps)
        if n_windows == 0 or (n_windows < 2 and draw2(st.integers(0, 2)) == 0):
            return draw2(_window_step(shapes, var_shapes))
        return draw2(_step(shapes, var_shapes))

    prog = _grow(draw, Program(tuple(inputs), tuple(variables), (), seed), n_steps, step)
    assume(any(s.kind == "window" for s in prog.steps))
    return prog


# ---------------------------------------------------------------------------
# Differentiating a program


def _reset(variables, inits):
    for v, a in zip(variables, inits):
        v.assign(a)


def _weights(prog, purpose, shapes):
    return [_normal(prog.seed, purpose, k, s) for k, s in enumerate(shapes)]


def differentiate(prog, xs, variables, backend=None):
    """Loss, gradient (one tape), the same gradient under an outer tape, second order
    (the outer tape's gradient of <gradient, w>) and the final variable values."""
    inits = _inits(prog)
    sources = list(xs) + list(variables)
    w = _weights(prog, 3, list(prog.inputs) + list(prog.variables))
    _reset(variables, inits)
    with jt.GradientTape(backend=backend) as tape:
        tape.watch(xs)
        loss = execute(prog, TapeEnv(xs, variables))
    g = tape.gradient(loss, sources, unconnected_gradients="zero")
    _reset(variables, inits)
    with jt.GradientTape(backend=backend) as outer:
        outer.watch(xs)
        with jt.GradientTape(backend=backend) as inner:
            inner.watch(xs)
            loss2 = execute(prog, TapeEnv(xs, variables))
        g2 = inner.gradient(loss2, sources, unconnected_gradients="zero")
        s = None
        for gk, wk in zip(g2, w):
            term = jt.reduce_sum(gk * wk)
            s = term if s is None else s + term
    h = outer.gradient(s, sources, unconnected_gradients="zero")
    return [loss, loss2] + list(g) + list(g2) + list(h) + [v.read_value() for v in variables]


def _eager(prog, backend):
    xs = [jt.constant(a) for a in _inputs(prog)]
    variables = [jt.Variable(a) for a in _inits(prog)]
    return [np.array(t.numpy()) for t in differentiate(prog, xs, variables, backend)]


def _compiled(prog):
    variables = [jt.Variable(a) for a in _inits(prog)]
    f = jt.function(lambda *xs: differentiate(prog, xs, variables), backend="cpu")
    runs = []
    for _ in range(2):  # the second call runs the same compiled program
        out = [np.array(t.numpy()) for t in f(*_inputs(prog))]
        for v, a in zip(variables, out[len(out) - len(variables):]):
            np.testing.assert_array_equal(v.numpy(), a)  # written back after the call
        runs.append(out)
    info = f.cache_info()
    assert info.traces == 1 and info.hits == 1, info
    program = f.get_concrete_function(*_inputs(prog)).program
    assert program is not None and program.ready and program.fallback is None, \
        "the function's program did not run compiled"
    return runs


def _loss_at(prog, shift, frozen):
    return float(execute(prog, ValueEnv(prog, shift, frozen)).numpy())


def _check_finite_differences(prog, out):
    n_src = len(prog.inputs) + len(prog.variables)
    g, h = out[2:2 + n_src], out[2 + 2 * n_src:2 + 3 * n_src]
    env = ValueEnv(prog)
    base = float(execute(prog, env).numpy())
    frozen = env.frozen
    np.testing.assert_allclose(out[0], base, rtol=1e-12)
    shapes = list(prog.inputs) + list(prog.variables)
    d = _weights(prog, 4, shapes)
    v = _weights(prog, 5, shapes)
    w = _weights(prog, 3, shapes)

    def at(*terms):
        return _loss_at(prog, [sum(c * x[k] for c, x in terms) for k in range(n_src)], frozen)

    e = FD1.fd_eps
    fd = (at((e, d)) - at((-e, d))) / (2 * e)
    terms = [gk * dk for gk, dk in zip(g, d)]
    analytic = sum(float(np.sum(t)) for t in terms)
    scale = sum(float(np.sum(np.abs(t))) for t in terms)
    assert abs(fd - analytic) <= FD1.fd_rtol * scale + FD1.fd_atol * (1 + abs(base)), \
        f"first order: finite differences {fd!r}, gradient {analytic!r}"

    e = FD2_EPS
    fd2 = (at((e, v), (e, w)) - at((e, v), (-e, w)) - at((-e, v), (e, w))
           + at((-e, v), (-e, w))) / (4 * e * e)
    terms = [hk * vk for hk, vk in zip(h, v)]
    analytic = sum(float(np.sum(t)) for t in terms)
    scale = sum(float(np.sum(np.abs(t))) for t in terms)
    assert abs(fd2 - analytic) <= FD2_RTOL * scale + FD2_ATOL * (1 + abs(base)), \
        f"second order: finite differences {fd2!r}, Hessian-vector product {analytic!r}"


def _same(got, want, what):
    """``cpu_cases.assert_same`` with an absolute floor: a derivative that cancels to
    nearly 0 (a saturated tanh's, 1e-10) keeps the rounding of its O(1) terms."""
    if np.allclose(got, want, rtol=1e-10, atol=1e-11) and got.shape == want.shape \
            and got.dtype == want.dtype:
        return
    assert_same(got, want, what)


NAMES = ("loss", "loss (nested)", "gradient", "gradient (nested)", "second order", "variable")


def _what(prog, k):
    n_src = len(prog.inputs) + len(prog.variables)
    if k < 2:
        return NAMES[k]
    group, j = divmod(k - 2, n_src)
    return f"{NAMES[2 + group]} {j}"


@pytest.fixture
def spy():
    s = CompileSpy(cpu.BACKEND.run)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cpu.BACKEND, "run", s)
        yield s


def check_program(prog, spy):
    """Every way of differentiating ``prog`` agrees, and with finite differences."""
    fallbacks = cpu.stats["fallbacks"]
    ref = _eager(prog, "interpret")
    n_src = len(prog.inputs) + len(prog.variables)
    # the graph-built gradient equals the eagerly run VJPs
    for k in range(n_src):
        _same(ref[2 + n_src + k], ref[2 + k], f"interpret: {_what(prog, 2 + n_src + k)}")
    _check_finite_differences(prog, ref)
    graphs = spy.graphs
    with record() as ops:
        got = _eager(prog, "cpu")
    if not any(s.name == "custom_gradient" for s in prog.steps):
        # (a tape that holds a custom gradient runs its VJPs eagerly, as TF eager does)
        assert COMPILED in ops and spy.graphs >= graphs + 2, "the cpu tape compiled nothing"
    for k, (a, b) in enumerate(zip(got, ref)):
        _same(a, b, f"cpu tape: {_what(prog, k)}")
    for run in _compiled(prog):
        assert len(run) == len(ref)
        for k, (a, b) in enumerate(zip(run, ref)):
            _same(a, b, f"@jt.function: {_what(prog, k)}")
    assert cpu.stats["fallbacks"] == fallbacks, "a graph fell back to the interpreter"


@pytest.mark.filterwarnings("ignore:.*triggered tracing")  # a new jt.function per program
@settings(max_examples=N_EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                 HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(programs())
# a saturated tanh: a second derivative of 1.3e-10 whose last digits are rounding (not a
# bug: the comparison's absolute floor, see _same)
@example(prog=Program(
    inputs=((1, 3),), variables=((), ()), steps=(
        Step("read", "read", (), {"var": 0}), Step("read", "read", (), {"var": 1}),
        Step("binary", "maximum", (0, 1), {"c": 0}),
        Step("unary", "pow_const", (3,), {"c": None}),
        Step("assign", "assign", (1,), {"var": 0}),
        Step("unary", "pow_const", (4,), {"c": None})),
    seed=11723))
def test_random_programs_agree_everywhere(spy, prog):
    check_program(prog, spy)


# every window step compiles kernels of its own configuration (its forward, both
# backprops, their second-order partners): half as many examples as the programs above
WINDOW_EXAMPLES = max(1, N_EXAMPLES // 2)


@pytest.mark.filterwarnings("ignore:.*triggered tracing")  # a new jt.function per program
@settings(max_examples=WINDOW_EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                 HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(window_programs(), st.sampled_from(sorted(KERNEL_SETTINGS)))
# always: a strided SAME convolution with a bias and a relu (its epilogue), then a max
# pool with explicit pads (second order through max_pool_grad_grad)
@example(kernels="packed GEMM, one image per tile", prog=Program(
    inputs=((2, 5, 4, 2), (BANK,), (3,)), variables=(), steps=(
        Step("window", "conv2d", (0, 1), {
            "format": "NHWC", "first": False, "ksize": (3, 2), "strides": [1, 2, 1, 1],
            "dilations": 1, "padding": "SAME", "fshape": (3, 2, 2, 3), "fan_in": 12,
            "offset": 7}),
        Step("binary", "add", (3, 2), {"c": None}),
        Step("unary", "relu", (4,), {"c": 3}),
        Step("window", "max_pool2d", (5,), {
            "format": "NHWC", "first": False, "ksize": [2, 2], "strides": 1, "dilations": 1,
            "padding": [[0, 0], [1, 0], [0, 1], [0, 0]], "pooling": "MAX", "c": 4})),
    seed=2))
def test_random_window_programs_agree_everywhere(spy, prog, kernels):
    with pytest.MonkeyPatch.context() as mp:
        for name, value in KERNEL_SETTINGS[kernels].items():
            mp.setattr(schedule_window, name, value)
        check_program(prog, spy)


# ---------------------------------------------------------------------------
# Regressions: what the fuzzer found, kept as explicit cases


# passes/buffers.py planned a slot for every strided_slice (as if it copied) while the
# backends keep it as a view of the sliced array: a slot reused after the slice, while
# the slice was still read, changed it. The cpu tape's gradient of x of a concat of x
# with itself (its VJP slices) was wrong (found as a 5-step program, shrunk by hand),
# and a compiled function's loss through unstack (slices) too.
SLICE_VIEW_BACKWARD = Program(
    inputs=((2, 1),), variables=(), steps=(
        Step("concat", "concat", (0, 0), {"axis": 1}),
        Step("reduce", "reduce_min", (1,), {"axis": -2, "keepdims": False, "c": 4412}),
        Step("concat", "concat", (0, 0), {"axis": -2})),
    seed=1455)
SLICE_VIEW_FORWARD = Program(
    inputs=((3,), (1, 3)), variables=((2, 3), (2, 3)), steps=(
        Step("expand_dims", "expand_dims", (1,), {"axis": 1}),
        Step("matmul", "matmul", (1, 1), {"ta": False, "tb": True}),
        Step("slice", "slice", (0,), {"key": (slice(None), None)}),
        Step("unstack", "unstack", (2,), {"axis": 2, "k": 2}),
        Step("concat", "concat", (5, 3), {"axis": -1}),
        Step("slice", "slice", (3,), {"key": (None, slice(None))})),
    seed=3082)


@pytest.mark.parametrize("prog", [SLICE_VIEW_BACKWARD, SLICE_VIEW_FORWARD],
                         ids=["backward", "function"])
def test_regression_slices_are_views_in_the_buffer_plan(spy, prog):
    check_program(prog, spy)


def test_regression_background_compile_of_a_graph_of_equal_structure(monkeypatch):
    """While a program compiled in the background, a second backward graph of the same
    structure (another trace with the same path: other value ids) ran the first graph on
    the interpreter with its own feeds: ``KeyError: no value fed``, and a CompileWarning
    (found with a variable assigned, then assign_add-ed, between two tapes)."""
    monkeypatch.setenv("JITTAPE_BACKGROUND_COMPILE", "1")
    monkeypatch.setattr(cpu.Program, "compile_in_background", lambda prog, arrays: None)  # never
    a = np.array([0.3, -1.2, 0.8])
    x = jt.constant(a)

    def grad(detour):
        with jt.GradientTape(backend="cpu") as tape:
            tape.watch(x)
            if detour:
                jt.sin(x)  # off the path: another trace, the same backward graph
            y = jt.reduce_sum(jt.tanh(x) * 1.37)
        return tape.gradient(y, x).numpy()

    want = 1.37 * (1 - np.tanh(a) ** 2)
    np.testing.assert_allclose(grad(False), want, rtol=1e-12)
    np.testing.assert_allclose(grad(True), want, rtol=1e-12)


# ---------------------------------------------------------------------------
# Bad data: a random program that ends in a gather of an index out of range raises the
# same error on every way of running it (tests/test_bad_data.py has the fixed cases)


@st.composite
def bad_programs(draw):
    """A drawn program, then a gather of its first input with one index out of range
    (past the end or negative); returns (program, the message it must raise)."""
    prog = draw(programs().filter(lambda p: len(p.inputs[0]) > 0))
    s = prog.inputs[0]
    axis = draw(st.integers(0, len(s) - 1))
    n = s[axis]
    bad = draw(st.one_of(st.integers(n, n + 3), st.integers(-3, -1)))
    good = draw(st.integers(0, n - 1))
    step = Step("gather", "gather", (0,), {"indices": (good, bad), "axis": axis})
    return (prog._replace(steps=prog.steps + (step,)),
            f"gather: indices[1] = {bad} is not in [0, {n})")


def _loss_and_gradient(prog, xs, variables):
    """First order only: one compile per program, kept small."""
    with jt.GradientTape() as tape:
        tape.watch(xs)
        loss = execute(prog, TapeEnv(xs, variables))
    return loss, tape.gradient(loss, list(xs) + list(variables), unconnected_gradients="zero")


def _message(call) -> str:
    with pytest.raises(jt.errors.InvalidArgumentError) as e:
        call()
    return re.sub(r" \(at [^()]*\)$", "", str(e.value))


@pytest.mark.filterwarnings("ignore:.*triggered tracing")  # a new jt.function per program
@settings(max_examples=min(N_EXAMPLES, 4), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                 HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(bad_programs())
def test_random_programs_with_an_index_out_of_range_raise_everywhere(spy, case):
    prog, want = case
    fallbacks = cpu.stats["fallbacks"]
    for backend in ("interpret", "cpu"):
        assert _message(lambda: _eager(prog, backend)) == want, f"{backend} tape"
        variables = [jt.Variable(a) for a in _inits(prog)]
        f = jt.function(lambda *xs: _loss_and_gradient(prog, xs, variables), backend=backend)
        assert _message(lambda: f(*_inputs(prog))) == want, f"@jt.function({backend!r})"
    assert cpu.stats["fallbacks"] == fallbacks, "a graph fell back to the interpreter"
