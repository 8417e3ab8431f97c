"""A new elementwise op needs its record and a catalogue case, nothing else: the
catalogue's checks pass for it, the fusion pass puts it in a loop with its neighbours,
and the cpu backend compiles it through the lowering table's elementwise rule, from the
record's ``scalar`` expression (no backend file names it)."""

from __future__ import annotations

import numpy as np
import pytest

import jittape as jt
from jittape.ops.elementwise import FLOAT
from jittape.ops.registry import REGISTRY, apply, defop

from . import test_catalogue as cat
from .cases import Case, F

NAME = "test_softsign"


def _softsign_vjp(g, out, x):
    return (g / jt.square(1.0 + jt.abs(x)),)


@pytest.fixture(scope="module")
def softsign():
    op = defop(NAME, inputs=1, kind="elementwise", forward=lambda x: x / (1 + np.abs(x)),
               infer=FLOAT, vjp=_softsign_vjp, scalar="({0} / ({dt}(1) + abs({0})))",
               domain=("away_from_zero",))
    yield op
    REGISTRY.pop(NAME, None)


@pytest.fixture
def case(softsign):
    return Case(NAME, "(2,3)", lambda x: apply(softsign, x), lambda x: x / (1 + np.abs(x)),
                (F((2, 3), "away"),))


@pytest.fixture
def spy(monkeypatch):
    monkeypatch.setattr(jt.compiler.backends, "_current", ["interpret"])
    return cat.Spy().install(monkeypatch)


def test_the_catalogue_checks_pass_for_it(case, spy):
    cat._check_forward(case, "float64", spy)
    cat._check_forward(case, "float32", spy)
    cat.test_vjp_matches_finite_differences(case, spy)
    cat.test_hvp_matches_finite_differences(case, spy)
    assert NAME in spy.ran


def test_it_is_fused_and_compiled_on_cpu(softsign):
    import passes
    from jittape.compiler.backends import cpu

    def f(x, y):
        return jt.reduce_sum(apply(softsign, x * y) + 1.0, axis=1)

    x = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    y = np.random.default_rng(1).standard_normal((3, 5)).astype(np.float32)
    fn = jt.function(f, backend="cpu")
    got = fn(x, y).numpy()
    np.testing.assert_allclose(got, (x * y / (1 + np.abs(x * y)) + 1).sum(axis=1),
                               rtol=1e-6)
    cf = fn.get_concrete_function(x, y)
    # one kernel: the multiply, the new op, the add and the sum in one reduction loop
    fused = [n for n in cf.graph.nodes if passes.is_fused(n)]
    assert len(fused) == 1
    assert [b.op.name for b in fused[0].attr_dict["body"].nodes if b.op.literal is None] \
        == ["multiply", NAME, "add", "reduce_sum"]
    prog = cf.program
    assert prog is not None and prog.fallback is None and prog.ready
    assert f"# {NAME}" in prog.source  # the record's scalar expression, in the loop
    assert cpu.lowering(softsign) == "elementwise"
