"""jt.metrics against Keras 3's metrics, and jt.Module against tf.Module (names, order),
run only where TensorFlow is installed; the default suite does not need it.

Each metric gets the same random float32 inputs on both sides, twice (the state
accumulates), with and without sample weights, and the results must agree.
"""

import numpy as np
import pytest

import jittape as jt

tf = pytest.importorskip("tensorflow")
keras = tf.keras


def _inputs(kind, rng, n=16, c=5):
    if kind == "binary":
        return rng.integers(0, 2, (n, 1)).astype(np.float32), rng.random((n, 1), np.float32)
    if kind == "binary_flat":
        return rng.integers(0, 2, n).astype(np.float32), rng.random(n, np.float32)
    if kind == "onehot":
        return np.eye(c, dtype=np.float32)[rng.integers(0, c, n)], rng.random((n, c),
                                                                             np.float32)
    if kind == "sparse":
        return rng.integers(0, c, n), rng.random((n, c), np.float32)
    if kind == "sparse_col":
        return rng.integers(0, c, (n, 1)), rng.random((n, c), np.float32)
    if kind == "multilabel":
        return rng.integers(0, 2, (n, c)).astype(np.float32), rng.random((n, c), np.float32)
    if kind == "regression":
        return rng.normal(size=(n, 3)).astype(np.float32), rng.normal(size=(n, 3)).astype(
            np.float32)
    if kind == "equal":
        y = rng.integers(0, 3, n)
        return y, np.where(rng.random(n) < 0.6, y, rng.integers(0, 3, n))
    raise AssertionError(kind)


CASES = [
    ("Accuracy", {}, "equal"),
    ("BinaryAccuracy", {}, "binary"),
    ("BinaryAccuracy", {"threshold": 0.7}, "binary_flat"),
    ("CategoricalAccuracy", {}, "onehot"),
    ("SparseCategoricalAccuracy", {}, "sparse"),
    ("SparseCategoricalAccuracy", {}, "sparse_col"),
    ("TopKCategoricalAccuracy", {"k": 2}, "onehot"),
    ("SparseTopKCategoricalAccuracy", {"k": 3}, "sparse"),
    ("SparseTopKCategoricalAccuracy", {"k": 2}, "sparse_col"),
    ("MeanSquaredError", {}, "regression"),
    ("MeanAbsoluteError", {}, "regression"),
    ("RootMeanSquaredError", {}, "regression"),
    ("Precision", {}, "binary"),
    ("Precision", {"thresholds": [0.2, 0.5, 0.9]}, "binary_flat"),
    ("Precision", {"thresholds": [0.0, 0.5, 1.0]}, "multilabel"),
    ("Precision", {"top_k": 2}, "multilabel"),
    ("Precision", {"class_id": 1}, "multilabel"),
    ("Recall", {}, "binary"),
    ("Recall", {"thresholds": [0.1, 0.3, 0.6]}, "multilabel"),
    ("Recall", {"top_k": 3, "class_id": 2}, "multilabel"),
    ("AUC", {}, "binary"),
    ("AUC", {"num_thresholds": 7}, "multilabel"),
    ("AUC", {"curve": "PR"}, "binary"),
    ("AUC", {"curve": "PR", "num_thresholds": 11}, "binary_flat"),
    ("AUC", {"summation_method": "minoring"}, "binary"),
    ("AUC", {"curve": "PR", "summation_method": "majoring"}, "binary"),
    ("AUC", {"thresholds": [0.3, 0.1, 0.75]}, "binary"),
]


def _weights(kind, y, rng):
    if kind == "per_sample":
        return rng.random(len(y)).astype(np.float32)
    if kind == "per_element" and np.ndim(y) == 2:
        return rng.random(np.shape(y)).astype(np.float32)
    return None


@pytest.mark.parametrize("weights", ["none", "per_sample", "per_element"])
@pytest.mark.parametrize("name,kwargs,kind", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_metric_matches_keras(name, kwargs, kind, weights):
    rng = np.random.default_rng(hash((name, kind, weights)) % 2**32)
    ours, theirs = getattr(jt.metrics, name)(**kwargs), getattr(keras.metrics, name)(**kwargs)
    for _ in range(2):
        y, p = _inputs(kind, rng)
        w = _weights(weights, y, rng)
        try:
            theirs.update_state(y, p, sample_weight=w)
        except Exception:  # weights Keras cannot broadcast: jittape refuses them too
            with pytest.raises(ValueError):
                ours.update_state(y, p, sample_weight=w)
            return
        ours.update_state(y, p, sample_weight=w)
    np.testing.assert_allclose(np.asarray(ours.result()), np.asarray(theirs.result()),
                               rtol=1e-5, atol=1e-6)
    assert len(ours.variables) == len(theirs.variables)
    assert [tuple(v.shape) for v in ours.variables] == [tuple(v.shape) for v in
                                                        theirs.variables]


@pytest.mark.parametrize("weights", [None, "1d", "2d"])
def test_mean_and_sum_match_keras(weights):
    rng = np.random.default_rng(3)
    values = rng.normal(size=(6, 4)).astype(np.float32)
    w = {None: None, "1d": rng.random(6).astype(np.float32),
         "2d": rng.random((6, 4)).astype(np.float32)}[weights]
    for name in ("Mean", "Sum"):
        ours, theirs = getattr(jt.metrics, name)(), getattr(keras.metrics, name)()
        ours.update_state(values, sample_weight=w)
        theirs.update_state(values, sample_weight=w)
        ours.update_state(values[0, 0])
        theirs.update_state(values[0, 0])
        np.testing.assert_allclose(float(ours.result()), float(theirs.result()), rtol=1e-5)


def test_auc_thresholds_and_default_names_match_keras():
    np.testing.assert_allclose(jt.metrics.AUC(num_thresholds=5).thresholds,
                               keras.metrics.AUC(num_thresholds=5).thresholds, rtol=1e-12)
    for name in ("Mean", "Accuracy", "SparseCategoricalAccuracy", "RootMeanSquaredError"):
        assert getattr(jt.metrics, name)().name == getattr(keras.metrics, name)().name


def test_to_categorical_matches_keras():
    for x, n in (([0, 2, 1], None), ([[1], [3]], 5), ([[0, 1], [2, 0]], 3), (4, 6)):
        want = keras.utils.to_categorical(x, n)
        got = jt.keras.utils.to_categorical(x, n)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


# -- Module ------------------------------------------------------------------------


def _build(mod_base, var, scope):
    class Inner(mod_base):
        def __init__(self, name=None):
            super().__init__(name=name)
            self.v = var(1.0, name="iv")
            self.frozen = var(1.0, name="fv", trainable=False)

    class MyModule(mod_base):
        def __init__(self, name=None):
            super().__init__(name=name)
            self.w = var(1.0, name="w")
            with scope("dense"):
                self.k = var(2.0, name="k")
            with self.name_scope:
                self.z = var(2.0, name="z")
            self.b = Inner(name="b")
            self.a = Inner(name="a")
            self.lst = [Inner(name="l0"), {"k": Inner(name="d0"), "a": Inner(name="d1")}]
            self.a.child = Inner(name="a_child")
            self.t = (var(5.0, name="tv"),)

        @mod_base.with_name_scope
        def make(self):
            self.m = var(3.0, name="m")
            with scope("inner"):
                self.n = var(3.0)
            return self.m

    with scope("outer"):
        m = MyModule()
    m.make()
    return m


def test_module_names_and_order_match_tf_module():
    ours = _build(jt.Module, jt.Variable, jt.name_scope)
    theirs = _build(tf.Module, tf.Variable, tf.name_scope)
    assert ours.name == theirs.name
    assert ours.name_scope.name == theirs.name_scope.name
    assert [s.name for s in ours.submodules] == [s.name for s in theirs.submodules]
    for prop in ("variables", "trainable_variables", "non_trainable_variables"):
        assert [v.name for v in getattr(ours, prop)] == [v.name for v in getattr(theirs, prop)]
