"""jt.random.categorical and jt.random.shuffle: distributions, seeds, dtypes, errors, and
their compiled form (a fresh draw at each call of a jt.function)."""

from __future__ import annotations

import numpy as np
import pytest

import jittape as jt


@pytest.fixture(autouse=True)
def _unseeded_after():
    yield
    jt.random.set_seed(None)


def test_categorical_frequencies_follow_softmax():
    jt.random.set_seed(1)
    p = np.array([[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]])
    n = 20000
    s = jt.random.categorical(jt.constant(np.log(p)), n).numpy()
    assert s.shape == (2, n) and s.dtype == np.int64
    for row in range(2):
        freq = np.bincount(s[row], minlength=3) / n
        # 4 standard errors of a frequency
        np.testing.assert_allclose(freq, p[row], atol=4 * np.sqrt(0.25 / n))


def test_categorical_minus_inf_logit_is_never_drawn():
    jt.random.set_seed(2)
    s = jt.random.categorical(jt.constant([[0.0, -np.inf, 0.0]]), 2000).numpy()
    assert not (s == 1).any()


def test_categorical_seeds_and_dtype():
    logits = jt.constant(np.zeros((3, 5), np.float32))
    jt.random.set_seed(7)
    a = jt.random.categorical(logits, 8, seed=3).numpy()
    a2 = jt.random.categorical(logits, 8, seed=3).numpy()
    jt.random.set_seed(7)
    b = jt.random.categorical(logits, 8, seed=3).numpy()
    np.testing.assert_array_equal(a, b)  # the op seed's sequence replays
    assert not np.array_equal(a, a2)  # a second call draws afresh, as a TF eager op
    c = jt.random.categorical(logits, 4, dtype=jt.int32)
    assert c.dtype == jt.int32 and c.shape == (3, 4)


def test_categorical_bad_input():
    with pytest.raises(jt.errors.InvalidArgumentError, match=r"categorical.*matrix.*\[3\]"):
        jt.random.categorical(jt.constant([0.0, 1.0, 2.0]), 2)
    with pytest.raises(TypeError, match="int32 or int64"):
        jt.random.categorical(jt.constant([[0.0, 1.0]]), 2, dtype=jt.float32)


def test_categorical_no_gradient():
    x = jt.constant([[0.0, 1.0]])
    with jt.GradientTape() as tape:
        tape.watch(x)
        s = jt.random.categorical(x, 3)
    assert tape.gradient(jt.cast(s, jt.float32), x) is None


def test_shuffle_is_a_permutation_of_rows():
    jt.random.set_seed(3)
    x = np.arange(20.0).reshape(10, 2)
    y = jt.random.shuffle(jt.constant(x)).numpy()
    assert sorted(map(tuple, y)) == sorted(map(tuple, x))
    assert (y[:, 1] == y[:, 0] + 1).all()  # rows move whole


def test_shuffle_is_uniform():
    jt.random.set_seed(4)
    x = jt.constant([0, 1, 2])
    counts = {}
    n = 6000
    for _ in range(n):
        k = tuple(jt.random.shuffle(x).numpy())
        counts[k] = counts.get(k, 0) + 1
    assert len(counts) == 6
    for c in counts.values():
        assert abs(c / n - 1 / 6) < 4 * np.sqrt((1 / 6) * (5 / 6) / n)


def test_shuffle_seeds_scalar_and_gradient():
    x = jt.constant(np.arange(50))
    jt.random.set_seed(5)
    a = jt.random.shuffle(x, seed=1).numpy()
    jt.random.set_seed(5)
    b = jt.random.shuffle(x, seed=1).numpy()
    np.testing.assert_array_equal(a, b)
    assert jt.random.shuffle(jt.constant(3.0)).numpy() == 3.0  # a scalar, as TF
    v = jt.constant([[1.0, 2.0], [3.0, 4.0]])
    with jt.GradientTape() as tape:
        tape.watch(v)
        y = jt.random.shuffle(v)
    assert tape.gradient(y, v) is None  # TF's RandomShuffle has no gradient


@pytest.mark.filterwarnings("error::jittape.compiler.backends.cpu.CompileWarning")
@pytest.mark.parametrize("backend", ["interpret", "cpu"])
def test_compiled_draws_afresh_and_follows_set_seed(backend):
    @jt.function(backend=backend)
    def step(logits, x):
        return jt.random.categorical(logits, 16), jt.random.shuffle(x)

    logits = jt.constant(np.zeros((2, 4), np.float32))
    x = jt.constant(np.arange(8.0, dtype=np.float32))
    jt.random.set_seed(11)
    c1, s1 = step(logits, x)
    c2, s2 = step(logits, x)
    assert not np.array_equal(c1.numpy(), c2.numpy())
    assert sorted(s1.numpy()) == list(range(8))
    jt.random.set_seed(11)
    c3, s3 = step(logits, x)
    np.testing.assert_array_equal(c1.numpy(), c3.numpy())
    np.testing.assert_array_equal(s1.numpy(), s3.numpy())
    assert step.cache_info().traces == 1
