"""The op catalogue, over the whole registry (STYLE.md "Tests").

- every record is complete;
- every registered op has a case (``cases.py``) and running the case executes it;
- forward matches a numpy expression, in float64 and float32, on scalar, vector,
  broadcast and size-0 shapes; every op execution's ``infer`` equals the shape and
  dtype its numpy reference really produced (checked by a spy on all records);
- the VJP matches central differences along one random direction,
  ``<J^T u, v>`` vs ``<u, J v>``, for every float input;
- second order: nested tapes give Hessian-vector products that match central
  differences of the first-order gradient;
- non-differentiable ops on the path give ``None`` gradients.
"""

from __future__ import annotations

import string

import numpy as np
import pytest

import jittape as jt
from jittape.compiler.ir import KINDS, NO_GRADIENT, OpDef, Type, infer_types
from jittape.ops.registry import REGISTRY

from tolerances import coarsest, tol

from .cases import CASES, DOMAIN_GENS, cases_by_op

BY_OP = cases_by_op()
FD_CASES = [c for c in CASES if c.grad == "fd"]
NONE_CASES = [c for c in CASES if c.grad == "none"]
F32_CASES = [c for c in CASES if c.f32 and any(a.dtype == "float64" for a in c.args)]
PRIMITIVE_CASES = [c for c in CASES if c.op in REGISTRY]


def _ids(cases):
    return [c.id for c in cases]


# ---------------------------------------------------------------------------
# Helpers


def _flat(y) -> list:
    """The output tensors of a case, in order (lists and tuples flattened)."""
    if isinstance(y, (list, tuple)):
        out = []
        for t in y:
            out.extend(_flat(t))
        return out
    return [y]


def _flat_ref(r) -> list:
    if isinstance(r, (list, tuple)):
        out = []
        for a in r:
            out.extend(_flat_ref(a))
        return out
    return [np.asarray(r)]


def _values(ys) -> list:
    return [np.asarray(y.numpy()) for y in ys]


def _eval(case, arrays) -> list:
    """The case's outputs as numpy arrays, computed eagerly (no tape)."""
    return _values(_flat(case.fn(*case.tensors(arrays))))


def _perturbed(arrays, k, direction, eps):
    out = list(arrays)
    x = arrays[k]
    out[k] = (x.astype(np.float64) + eps * direction).astype(x.dtype)
    return out


def _random_like(rng, a) -> np.ndarray:
    return rng.normal(size=np.shape(a)).astype(np.asarray(a).dtype)


def _dot(a, b) -> float:
    return float(np.sum(np.asarray(a, np.float64) * np.asarray(b, np.float64)))


def _abs_dot(a, b) -> float:
    return float(np.sum(np.abs(np.asarray(a, np.float64) * np.asarray(b, np.float64))))


def _assert_close_scalar(lhs, rhs, scale, t, what):
    bound = t.fd_atol + t.fd_rtol * (scale + abs(lhs))
    assert abs(lhs - rhs) <= bound, (
        f"{what}: analytic {lhs!r} vs finite differences {rhs!r} "
        f"(|diff| {abs(lhs - rhs):.3g} > {bound:.3g})"
    )


def _fd_tol(case, arrays, outs):
    return coarsest(*[a.dtype for a in arrays if a.dtype.kind == "f"],
                    *[o.dtype for o in outs if o.dtype.kind == "f"])


class Spy:
    """Wraps every record's forward and vjp: notes which ops ran, and checks, at every
    forward execution (eager, interpreted, in gradients), that ``infer`` on the input
    types gives exactly the shape and dtype the numpy reference produced."""

    def __init__(self):
        self.ran: set = set()
        self.mismatches: list = []

    def install(self, monkeypatch):
        for op in REGISTRY.values():
            if op.forward is not None:
                monkeypatch.setattr(op, "forward", self._forward(op, op.forward))
            if op.vjp is not NO_GRADIENT:
                monkeypatch.setattr(op, "vjp", self._vjp(op, op.vjp))
        return self

    def _forward(self, op, f):
        def forward(*arrays, **attrs):
            res = f(*arrays, **attrs)
            self.ran.add(op.name)
            types = [Type(np.shape(a), np.asarray(a).dtype.name) for a in arrays]
            try:
                want = infer_types(op, types, attrs)
            except Exception as e:  # noqa: BLE001 - reported as a mismatch
                self.mismatches.append(f"{op.name}: infer raised {e!r} on {types}")
                return res
            got = res if op.nout != 1 else (res,)
            for r, w in zip(got, want):
                real = Type(np.shape(r), np.asarray(r).dtype.name)
                if real != w:
                    self.mismatches.append(
                        f"{op.name}{attrs}: infer says {w}, forward gave {real} "
                        f"(inputs {', '.join(map(str, types))})"
                    )
            return res

        return forward

    def _vjp(self, op, f):
        def vjp(*args, **attrs):
            self.ran.add(op.name)
            return f(*args, **attrs)

        return vjp


@pytest.fixture
def spy(monkeypatch):
    # the spy sees the ops' numpy references run: that is the interpret backend
    monkeypatch.setattr(jt.compiler.backends, "_current", ["interpret"])
    return Spy().install(monkeypatch)


def _first_order(case, arrays, us, positions):
    """Gradients of sum_k <y_k, u_k> w.r.t. the inputs at ``positions`` (one tape)."""
    srcs = case.tensors(arrays)
    with jt.GradientTape() as tape:
        for k in positions:
            tape.watch(srcs[k])
        ys = _flat(case.fn(*srcs))
    seeds = [jt.constant(u) for u in us]
    grads = tape.gradient(ys, [srcs[k] for k in positions], output_gradients=seeds)
    return grads, srcs


def _grad_arrays(case, arrays, us, positions) -> list:
    """Gradients as arrays, ``None`` read as zeros: the function G that the HVP differentiates."""
    srcs = case.tensors(arrays)
    with jt.GradientTape() as tape:
        for k in positions:
            tape.watch(srcs[k])
        ys = _flat(case.fn(*srcs))
        s = _weighted_sum(ys, us)
    grads = tape.gradient(s, [srcs[k] for k in positions])
    return [np.zeros_like(arrays[k]) if g is None else np.asarray(g.numpy())
            for g, k in zip(grads, positions)]


def _weighted_sum(ys, us):
    total = None
    for y, u in zip(ys, us):
        term = jt.reduce_sum(y * jt.constant(u))
        total = term if total is None else total + term
    return total


# ---------------------------------------------------------------------------
# Records


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_record_is_complete(name):
    op = REGISTRY[name]
    assert isinstance(op, OpDef) and op.name == name
    assert op.kind in KINDS
    assert callable(op.infer)
    assert op.nin is None or (isinstance(op.nin, int) and op.nin >= 0)
    assert op.nout is None or op.nout >= 1
    # differentiable by a rule, or not differentiable by an explicit choice
    assert op.vjp is NO_GRADIENT or callable(op.vjp)
    assert op.differentiable == (op.vjp is not NO_GRADIENT)
    # a pure op has a numpy reference; only effectful/opaque ops may lack one
    assert callable(op.forward) or not op.pure
    assert op.domain in DOMAIN_GENS, f"{name}: unknown domain hint {op.domain!r}"
    if op.kind == "elementwise":
        assert isinstance(op.scalar, str) and op.scalar, f"{name}: no scalar expression"
        fields = [f for _, f, _, _ in string.Formatter().parse(op.scalar) if f is not None]
        positional = {int(f) for f in fields if f.isdigit()}
        assert positional == set(range(op.nin)), (
            f"{name}: scalar {op.scalar!r} must use each of its {op.nin} inputs"
        )


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_op_has_a_case(name):
    assert BY_OP.get(name), (
        f"op {name!r} is registered but has no case in tests/ops/cases.py: add one that calls "
        "it through its public function (or through the op that uses it)"
    )
    op = REGISTRY[name]
    if op.differentiable and op.nin != 0:
        # "none": a rule that returns None on purpose (stop_gradient)
        assert any(c.grad in ("fd", "none") for c in BY_OP[name]), (
            f"{name}: no gradient-checked case"
        )
    if not op.differentiable:
        assert any(c.grad == "none" for c in BY_OP[name]), (
            f"{name}: not differentiable, but no case checks that its gradient is None"
        )


def test_catalogue_is_not_trivially_small():
    assert len(CASES) > 250
    assert len(FD_CASES) > 150


# ---------------------------------------------------------------------------
# Forward


@pytest.mark.parametrize("case", PRIMITIVE_CASES, ids=_ids(PRIMITIVE_CASES))
def test_case_runs_its_op(case, spy):
    """Running the case (forward and, when checked, first-order gradient) executes
    the op it is listed under (composites are listed under their own name)."""
    arrays = case.inputs(np.random.default_rng(0))
    if case.grad == "fd":
        ys = _eval(case, arrays)
        us = [np.ones_like(y) for y in ys]
        _first_order(case, arrays, us, case.float_positions)
    else:
        case.fn(*case.tensors(arrays))
    assert case.op in spy.ran, f"case {case.id} never ran op {case.op!r} (ran {sorted(spy.ran)})"


def _check_forward(case, dtype, spy):
    arrays = case.inputs(np.random.default_rng(0), dtype)
    ys = _flat(case.fn(*case.tensors(arrays)))
    ref_in = [a.astype(np.float64) if a.dtype.kind == "f" else a for a in arrays]
    with np.errstate(all="ignore"):
        refs = _flat_ref(case.ref(*ref_in))
    assert len(ys) == len(refs), f"{len(ys)} outputs, reference has {len(refs)}"
    for k, (y, r) in enumerate(zip(ys, refs)):
        assert isinstance(y, jt.Tensor), f"output {k} is {type(y).__name__}, not a jt.Tensor"
        got = np.asarray(y.numpy())
        want_dtype = r.dtype
        if dtype == "float32" and r.dtype == np.float64:
            want_dtype = np.dtype(np.float32)
        assert tuple(y.shape) == r.shape, f"output {k}: shape {tuple(y.shape)}, want {r.shape}"
        assert got.shape == r.shape
        assert y.dtype == want_dtype, f"output {k}: dtype {y.dtype.name}, want {want_dtype}"
        if r.dtype.kind == "f":
            t = tol(want_dtype)
            np.testing.assert_allclose(got, r, rtol=t.fwd_rtol, atol=t.fwd_atol, equal_nan=True,
                                       err_msg=f"output {k} of {case.id}")
        else:
            np.testing.assert_array_equal(got, r, err_msg=f"output {k} of {case.id}")
    assert not spy.mismatches, "infer disagrees with the real output:\n" + "\n".join(
        spy.mismatches
    )


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_forward_matches_numpy(case, spy):
    _check_forward(case, "float64", spy)


@pytest.mark.parametrize("case", F32_CASES, ids=_ids(F32_CASES))
def test_forward_matches_numpy_float32(case, spy):
    _check_forward(case, "float32", spy)


# ---------------------------------------------------------------------------
# First order


@pytest.mark.parametrize("case", FD_CASES, ids=_ids(FD_CASES))
def test_vjp_matches_finite_differences(case, spy):
    rng = np.random.default_rng(0)
    arrays = case.inputs(rng)
    pos = case.float_positions
    assert pos, "a gradient-checked case needs a float input"
    outs = _eval(case, arrays)
    assert all(o.dtype.kind == "f" for o in outs)
    t = _fd_tol(case, arrays, outs)
    us = [_random_like(rng, o) for o in outs]
    grads, _ = _first_order(case, arrays, us, pos)
    assert len(grads) == len(pos)
    for g, k in zip(grads, pos):
        v = rng.normal(size=arrays[k].shape)
        if g is None:
            lhs = 0.0
        else:
            assert tuple(g.shape) == arrays[k].shape, f"input {k}: gradient shape {g.shape}"
            assert g.dtype == arrays[k].dtype, f"input {k}: gradient dtype {g.dtype.name}"
            lhs = _dot(g.numpy(), v)
        plus = _eval(case, _perturbed(arrays, k, v, t.fd_eps))
        minus = _eval(case, _perturbed(arrays, k, v, -t.fd_eps))
        jv = [(p.astype(np.float64) - m) / (2 * t.fd_eps) for p, m in zip(plus, minus)]
        rhs = sum(_dot(u, d) for u, d in zip(us, jv))
        scale = sum(_abs_dot(u, d) for u, d in zip(us, jv))
        _assert_close_scalar(lhs, rhs, scale, t, f"<J^T u, v> for input {k}")
    assert not spy.mismatches, "\n".join(spy.mismatches)


# ---------------------------------------------------------------------------
# Second order


@pytest.mark.parametrize("case", FD_CASES, ids=_ids(FD_CASES))
def test_hvp_matches_finite_differences(case, spy):
    """outer.gradient(sum_i <G_i(x), w_i>, x_j) . v_j against
    sum_i <w_i, (G_i(x + eps v_j) - G_i(x - eps v_j)) / 2 eps>, where G = inner gradient."""
    rng = np.random.default_rng(0)
    arrays = case.inputs(rng)
    pos = case.float_positions
    outs = _eval(case, arrays)
    t = _fd_tol(case, arrays, outs)
    us = [_random_like(rng, o) for o in outs]
    ws = [_random_like(rng, arrays[k]) for k in pos]

    srcs = case.tensors(arrays)
    watched = [srcs[k] for k in pos]
    with jt.GradientTape() as outer:
        outer.watch(watched)
        with jt.GradientTape() as inner:
            inner.watch(watched)
            ys = _flat(case.fn(*srcs))
            s = _weighted_sum(ys, us)
        gs = inner.gradient(s, watched)
        total = None
        for g, w in zip(gs, ws):
            if g is None:
                continue
            term = jt.reduce_sum(g * jt.constant(w))
            total = term if total is None else total + term
    hs = [None] * len(pos) if total is None else outer.gradient(total, watched)

    for j, k in enumerate(pos):
        v = rng.normal(size=arrays[k].shape)
        h = hs[j]
        if h is None:
            lhs = 0.0
        else:
            assert tuple(h.shape) == arrays[k].shape
            assert h.dtype == arrays[k].dtype
            lhs = _dot(h.numpy(), v)
        gp = _grad_arrays(case, _perturbed(arrays, k, v, t.fd_eps), us, pos)
        gm = _grad_arrays(case, _perturbed(arrays, k, v, -t.fd_eps), us, pos)
        hv = [(p.astype(np.float64) - m) / (2 * t.fd_eps) for p, m in zip(gp, gm)]
        rhs = sum(_dot(w, d) for w, d in zip(ws, hv))
        scale = sum(_abs_dot(w, d) for w, d in zip(ws, hv))
        _assert_close_scalar(lhs, rhs, scale, t, f"<H v, w> along input {k}")
    assert not spy.mismatches, "\n".join(spy.mismatches)


# ---------------------------------------------------------------------------
# Not differentiable


@pytest.mark.parametrize("case", NONE_CASES, ids=_ids(NONE_CASES))
def test_no_gradient_through_non_differentiable_ops(case):
    arrays = case.inputs(np.random.default_rng(0))
    pos = case.float_positions
    assert pos, "a None-gradient case needs a float input to differentiate"
    srcs = case.tensors(arrays)
    with jt.GradientTape(persistent=True) as tape:
        for k in pos:
            tape.watch(srcs[k])
        ys = [y if y.dtype.is_floating else jt.cast(y, jt.float64)
              for y in _flat(case.fn(*srcs))]
    grads = tape.gradient(ys, [srcs[k] for k in pos])
    assert grads == [None] * len(pos), f"expected None gradients, got {grads}"
    zeros = tape.gradient(ys, [srcs[k] for k in pos],
                          unconnected_gradients=jt.UnconnectedGradients.ZERO)
    for z, k in zip(zeros, pos):
        np.testing.assert_array_equal(np.asarray(z.numpy()), np.zeros(arrays[k].shape))
    del tape


# ---------------------------------------------------------------------------
# Conventions at kinks, where finite differences say nothing (TF_SEMANTICS.md)

KINKS = [
    # (id, function of x, x, expected gradient of sum(f(x)))
    ("maximum_tie_to_first", lambda x: jt.maximum(x, jt.constant(np.ones(2))), [1.0, 1.0],
     [1.0, 1.0]),
    ("maximum_tie_not_to_second", lambda x: jt.maximum(jt.constant(np.ones(2)), x), [1.0, 1.0],
     [0.0, 0.0]),
    ("minimum_tie_to_first", lambda x: jt.minimum(x, jt.constant(np.ones(2))), [1.0, 1.0],
     [1.0, 1.0]),
    ("reduce_max_ties_split_evenly", lambda x: jt.reduce_max(x), [1.0, 3.0, 3.0],
     [0.0, 0.5, 0.5]),
    ("reduce_min_ties_split_evenly", lambda x: jt.reduce_min(x, 1), [[2.0, 2.0, 2.0, 5.0]],
     [[1 / 3, 1 / 3, 1 / 3, 0.0]]),
    ("relu_at_zero", jt.nn.relu, [0.0, -1.0, 2.0], [0.0, 0.0, 1.0]),
    ("abs_at_zero", jt.abs, [0.0, -1.0, 2.0], [0.0, -1.0, 1.0]),
    ("clip_by_value_passes_at_bounds", lambda x: jt.clip_by_value(x, -1.0, 1.0),
     [-1.0, 1.0, 2.0, -3.0, 0.5], [1.0, 1.0, 0.0, 0.0, 1.0]),
]


@pytest.mark.parametrize("fn, x, want", [k[1:] for k in KINKS], ids=[k[0] for k in KINKS])
def test_gradient_convention_at_kink(fn, x, want):
    x = jt.constant(np.array(x, np.float64))
    with jt.GradientTape() as tape:
        tape.watch(x)
        y = fn(x)
    g = tape.gradient(y, x)
    assert g is not None
    t = tol("float64")
    np.testing.assert_allclose(g.numpy(), np.array(want), rtol=t.fwd_rtol, atol=t.fwd_atol)
