"""jt.random: TF's two-level seeding (global seed, op seed), distributions, errors."""

import numpy as np
import pytest

import jittape as jt


@pytest.fixture(autouse=True)
def _unseed():
    yield
    jt.random.set_seed(None)


def test_results_are_tensors_of_the_requested_shape_and_dtype():
    jt.random.set_seed(0)
    for fn in (jt.random.uniform, jt.random.normal, jt.random.truncated_normal):
        t = fn((2, 3))
        assert isinstance(t, jt.Tensor)
        assert t.shape == (2, 3) and t.dtype == jt.float32
        t64 = fn([4], dtype=jt.float64)
        assert t64.shape == (4,) and t64.dtype == jt.float64
    assert jt.random.uniform(5).shape == (5,)
    assert jt.random.normal(()).shape == ()


def test_set_seed_replays_the_same_sequence():
    jt.random.set_seed(42)
    first = [jt.random.uniform((3,)).numpy(), jt.random.normal((2, 2)).numpy(),
             jt.random.truncated_normal((4,)).numpy()]
    jt.random.set_seed(42)
    again = [jt.random.uniform((3,)).numpy(), jt.random.normal((2, 2)).numpy(),
             jt.random.truncated_normal((4,)).numpy()]
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    assert jt.random.get_seed() == 42
    # successive draws differ, and another global seed gives other numbers
    jt.random.set_seed(42)
    a, b = jt.random.uniform((8,)).numpy(), jt.random.uniform((8,)).numpy()
    assert not np.array_equal(a, b)
    jt.random.set_seed(43)
    assert not np.array_equal(jt.random.uniform((8,)).numpy(), a)


def test_op_seed_gives_its_own_reproducible_sequence():
    jt.random.set_seed(1)
    a1 = jt.random.uniform((5,), seed=7).numpy()
    a2 = jt.random.uniform((5,), seed=7).numpy()
    assert not np.array_equal(a1, a2)  # an op seed is a sequence, not a fixed value (TF eager)
    jt.random.set_seed(1)
    jt.random.normal((100,))  # draws without an op seed do not disturb the seeded sequence
    np.testing.assert_array_equal(jt.random.uniform((5,), seed=7).numpy(), a1)
    np.testing.assert_array_equal(jt.random.uniform((5,), seed=7).numpy(), a2)
    # the same op seed under another global seed is another sequence
    jt.random.set_seed(2)
    assert not np.array_equal(jt.random.uniform((5,), seed=7).numpy(), a1)


def test_op_seed_without_global_seed_is_deterministic():
    jt.random.set_seed(None)
    a = jt.random.normal((4,), seed=3).numpy()
    jt.random.set_seed(None)
    np.testing.assert_array_equal(jt.random.normal((4,), seed=3).numpy(), a)


def test_unseeded_draws_differ_between_resets():
    jt.random.set_seed(None)
    a = jt.random.uniform((16,)).numpy()
    jt.random.set_seed(None)
    assert not np.array_equal(jt.random.uniform((16,)).numpy(), a)


def test_uniform_range_and_moments():
    jt.random.set_seed(0)
    x = jt.random.uniform((20000,), minval=-2.0, maxval=3.0, dtype=jt.float64).numpy()
    assert x.min() >= -2.0 and x.max() < 3.0
    # U(a, b): mean (a+b)/2 = 0.5, variance (b-a)^2/12; 20000 draws: std error of mean 0.01
    assert abs(x.mean() - 0.5) < 0.05
    assert abs(x.var() - 25 / 12) < 0.1
    d = jt.random.uniform((1000,)).numpy()
    assert d.min() >= 0.0 and d.max() < 1.0


def test_integer_uniform():
    jt.random.set_seed(0)
    x = jt.random.uniform((1000,), minval=3, maxval=7, dtype=jt.int32)
    assert x.dtype == jt.int32
    assert set(np.unique(x.numpy())) == {3, 4, 5, 6}
    with pytest.raises(ValueError, match="maxval"):
        jt.random.uniform((2,), dtype=jt.int32)


def test_normal_moments():
    jt.random.set_seed(0)
    x = jt.random.normal((20000,), mean=1.5, stddev=2.0, dtype=jt.float64).numpy()
    assert abs(x.mean() - 1.5) < 0.1
    assert abs(x.std() - 2.0) < 0.1


def test_truncated_normal_is_cut_at_two_stddevs():
    jt.random.set_seed(0)
    x = jt.random.truncated_normal((20000,), mean=-1.0, stddev=0.5, dtype=jt.float64).numpy()
    assert np.all(np.abs(x + 1.0) <= 2 * 0.5)
    assert abs(x.mean() + 1.0) < 0.02
    # a unit normal truncated at +-2 has standard deviation 0.8796...
    assert abs(x.std() / 0.5 - 0.87962566103423978) < 0.02


def test_random_values_have_no_gradient():
    x = jt.Variable([1.0, 2.0])
    with jt.GradientTape() as tape:
        y = x * jt.random.uniform((2,))
    g = tape.gradient(y, x)
    assert g is not None and g.shape == (2,)


def test_bad_arguments():
    with pytest.raises(TypeError, match="float"):
        jt.random.normal((2,), dtype=jt.int32)
    with pytest.raises(TypeError, match="shape"):
        jt.random.uniform("ab")
    with pytest.raises(ValueError, match="non-negative"):
        jt.random.uniform((2, -1))
    with pytest.raises(TypeError, match="seed"):
        jt.random.set_seed(1.5)
    with pytest.raises(TypeError, match="seed"):
        jt.random.uniform((2,), seed="x")


def test_nn_dropout_follows_the_global_seed_and_op_seeds():
    x = jt.ones((200,))
    jt.random.set_seed(3)
    a = jt.nn.dropout(x, 0.5).numpy()
    b = jt.nn.dropout(x, 0.5).numpy()
    jt.random.set_seed(3)
    np.testing.assert_array_equal(jt.nn.dropout(x, 0.5).numpy(), a)
    assert not np.array_equal(a, b)  # a new mask every call, as TF gives
    s1 = jt.nn.dropout(x, 0.5, seed=7).numpy()
    s2 = jt.nn.dropout(x, 0.5, seed=7).numpy()
    assert not np.array_equal(s1, s2)  # an op seed gives a sequence, not one mask
    jt.random.set_seed(3)
    np.testing.assert_array_equal(jt.nn.dropout(x, 0.5, seed=7).numpy(), s1)
