"""jt.initializers: Keras' fan rules and VarianceScaling formulas, seeding, lookup by name."""

import math

import numpy as np
import pytest

import jittape as jt
from jittape.keras import initializers as I


@pytest.fixture(autouse=True)
def _unseed():
    yield
    jt.random.set_seed(None)


def test_compute_fans_as_keras():
    assert I.compute_fans(()) == (1, 1)
    assert I.compute_fans((7,)) == (7, 7)
    assert I.compute_fans((3, 5)) == (3, 5)
    # conv kernel (kh, kw, in, out): receptive field 2*2
    assert I.compute_fans((2, 2, 3, 5)) == (12, 20)


def test_constant_initializers():
    np.testing.assert_array_equal(I.get("zeros")((2, 3)).numpy(), np.zeros((2, 3)))
    np.testing.assert_array_equal(I.get("ones")((4,), dtype="float64").numpy(), np.ones(4))
    assert I.get("ones")((4,), dtype="float64").dtype == jt.float64
    np.testing.assert_array_equal(I.Constant(2.5)((2, 2)).numpy(), np.full((2, 2), 2.5))
    np.testing.assert_array_equal(I.Constant([1.0, 2.0])((3, 2)).numpy(),
                                  np.tile([1.0, 2.0], (3, 1)))
    with pytest.raises(ValueError, match="does not broadcast"):
        I.Constant([1.0, 2.0, 3.0])((3, 2))


# (name, variance as a function of fans, distribution) from Keras' definitions
CASES = [
    ("glorot_uniform", lambda fi, fo: 2 / (fi + fo), "uniform"),
    ("glorot_normal", lambda fi, fo: 2 / (fi + fo), "truncated"),
    ("he_normal", lambda fi, fo: 2 / fi, "truncated"),
    ("he_uniform", lambda fi, fo: 2 / fi, "uniform"),
    ("lecun_normal", lambda fi, fo: 1 / fi, "truncated"),
    ("lecun_uniform", lambda fi, fo: 1 / fi, "uniform"),
]


@pytest.mark.parametrize("name,variance,dist", CASES, ids=[c[0] for c in CASES])
def test_variance_scaling_formulas(name, variance, dist):
    fan_in, fan_out = 300, 100
    var = variance(fan_in, fan_out)
    x = getattr(I, name)(seed=0)((fan_in, fan_out), dtype="float64").numpy()
    assert x.shape == (fan_in, fan_out) and x.dtype == np.float64
    if dist == "uniform":
        limit = math.sqrt(3 * var)  # U(-l, l) has variance l^2 / 3
        assert np.abs(x).max() <= limit
        assert np.abs(x).max() > 0.99 * limit
    else:
        # truncated at 2 sd of the underlying normal, whose sd is sqrt(var) / 0.8796...
        sd = math.sqrt(var) / 0.87962566103423978
        assert np.abs(x).max() <= 2 * sd
        assert np.abs(x).max() > 0.98 * 2 * sd
    # either way the result has variance `var` (30000 draws: within a few percent)
    assert abs(x.var() / var - 1) < 0.05
    assert abs(x.mean()) < 0.05 * math.sqrt(var)


def test_glorot_uniform_values_from_the_formula():
    # GlorotUniform(seed=k): U(-limit, limit) with limit = sqrt(6 / (fan_in + fan_out)),
    # drawn from numpy's Generator seeded with k
    limit = math.sqrt(6 / (3 + 4))
    expected = np.random.default_rng(5).random((3, 4)) * 2 * limit - limit
    got = I.GlorotUniform(seed=5)((3, 4), dtype="float64").numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-15)


def test_lookup_by_name_class_and_callable():
    assert isinstance(I.get("glorot_uniform"), I.GlorotUniform)
    assert isinstance(I.get("GlorotUniform"), I.GlorotUniform)
    assert isinstance(I.get("HeNormal"), I.HeNormal)
    assert isinstance(I.get(I.Zeros), I.Zeros)
    inst = I.he_uniform(seed=1)
    assert I.get(inst) is inst
    fn = lambda shape, dtype="float32": np.full(shape, 3.0)
    assert I.get(fn) is fn
    assert I.get(None) is None
    with pytest.raises(ValueError, match="Could not interpret initializer identifier: 'glorot'.*glorot_uniform"):
        I.get("glorot")
    with pytest.raises(TypeError):
        I.get(3)


def test_seeded_initializer_repeats_and_global_seed_governs_unseeded():
    a = I.HeNormal(seed=3)((4, 4)).numpy()
    np.testing.assert_array_equal(I.HeNormal(seed=3)((4, 4)).numpy(), a)
    jt.random.set_seed(11)
    u1 = I.glorot_uniform()((5, 5)).numpy()
    u2 = I.glorot_uniform()((5, 5)).numpy()
    assert not np.array_equal(u1, u2)
    jt.random.set_seed(11)
    np.testing.assert_array_equal(I.glorot_uniform()((5, 5)).numpy(), u1)
    np.testing.assert_array_equal(I.glorot_uniform()((5, 5)).numpy(), u2)


def test_model_weights_reproducible_after_set_seed():
    def make():
        m = jt.Sequential([jt.layers.Dense(4, activation="relu", input_shape=(3,)),
                           jt.layers.Dense(2, kernel_initializer="he_normal")])
        return m.get_weights()

    jt.random.set_seed(123)
    a = make()
    jt.random.set_seed(123)
    b = make()
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    jt.random.set_seed(124)
    assert not np.array_equal(make()[0], a[0])


def test_bad_arguments():
    with pytest.raises(ValueError, match="mode"):
        I.VarianceScaling(mode="fan_sideways")
    with pytest.raises(ValueError, match="distribution"):
        I.VarianceScaling(distribution="cauchy")
    with pytest.raises(TypeError, match="float dtype"):
        I.GlorotUniform()((2, 2), dtype="int32")
