"""Keras variables' ``name`` and ``path`` against tf.keras (Keras 3), run only where
TensorFlow is installed: the same models, optimizers and metrics built on both sides
(every layer named, so that automatic names do not depend on what ran before) give the
same names and paths, in the same order."""

import numpy as np
import pytest

import jittape as jt

tf = pytest.importorskip("tensorflow")
keras = tf.keras


def _names(vs):
    return [(v.name, v.path) for v in vs]


def _nested(lib):
    inner = lib.Sequential([lib.layers.Dense(4, name="d1"), lib.layers.BatchNormalization(
        name="bn"), lib.layers.Dense(2, name="d2")], name="inner")
    x = lib.Input((3,))
    return lib.Model(x, lib.layers.Dense(1, name="head")(inner(x)), name="outer")


def _called_sequential(lib):
    s = lib.Sequential([lib.layers.Dense(2, name="a"), lib.Sequential(
        [lib.layers.Dense(3, name="b")], name="in_s")], name="out_s")
    s(np.zeros((1, 3), np.float32))
    return s


def _subclassed(lib):
    class Block(lib.layers.Layer):
        def __init__(self, **kw):
            super().__init__(**kw)
            self.d = lib.layers.Dense(2, name="d")

        def build(self, shape):
            self.w = self.add_weight(shape=(2,), name="w")

        def call(self, x):
            return self.d(x) * self.w

    class Net(lib.Model):
        def __init__(self):
            super().__init__(name="net")
            self.block = Block(name="l2")
            self.out = lib.layers.Dense(1, name="o")

        def call(self, x):
            return self.out(self.block(x))

    net = Net()
    net(np.zeros((1, 3), np.float32))
    return net


@pytest.mark.parametrize("make", [_nested, _called_sequential, _subclassed])
def test_model_weights(make):
    assert _names(make(jt.keras).weights) == _names(make(keras).weights)


@pytest.mark.parametrize("name, kwargs", [
    ("Adam", {}), ("Adamax", {}), ("AdamW", {}),
    ("Adadelta", {}), ("Adagrad", {}), ("Ftrl", {}), ("RMSprop", {}),
    ("SGD", {"momentum": 0.9}), ("SGD", {}), ("Lion", {}), ("SGD", {"use_ema": True}),
    ("SGD", {"gradient_accumulation_steps": 2}),
])
def test_optimizer_variables(name, kwargs):
    def build(lib):
        model = _nested(lib)
        opt = getattr(lib.optimizers, name)(name="opt", **kwargs)
        opt.build(model.trainable_variables)
        return opt.variables

    assert _names(build(jt.keras)) == _names(build(keras))


@pytest.mark.parametrize("name, kwargs", [
    ("Adam", {"amsgrad": True}), ("RMSprop", {"momentum": 0.5, "centered": True})])
def test_optimizer_variables_as_a_set(name, kwargs):
    # the same variables; jittape keeps its order of them (each variable's slots
    # together; Keras makes velocity_hat, and RMSprop's momentum, for all variables first)
    def build(lib):
        d = lib.layers.Dense(2, name="d")
        d.build((None, 3))
        opt = getattr(lib.optimizers, name)(name="r", **kwargs)
        opt.build(d.trainable_variables)
        return opt.variables

    assert sorted(_names(build(jt.keras))) == sorted(_names(build(keras)))


def test_optimizer_after_fit_and_compiled_metrics():
    def fitted(lib):
        model = lib.Sequential([lib.Input((3,)), lib.layers.Dense(2, name="d")], name="net")
        model.compile(lib.optimizers.Adam(name="opt"), "mse",
                      metrics=[lib.metrics.MeanAbsoluteError(name="mae")])
        model.fit(np.zeros((4, 3), np.float32), np.zeros((4, 2), np.float32), verbose=0)
        return model

    a, b = fitted(jt.keras), fitted(keras)
    assert _names(a.optimizer.variables) == _names(b.optimizer.variables)
    mae = [m for m in b.metrics if m.name == "compile_metrics"][0].metrics[0]
    ours = [v for m in a.metrics for v in m.variables if v.path.startswith("mae/")]
    assert _names(ours) == _names(mae.variables) == [("total", "mae/total"),
                                                      ("count", "mae/count")]


@pytest.mark.parametrize("cls", ["Mean", "SparseCategoricalAccuracy", "AUC"])
def test_metric_variables(cls):
    assert _names(getattr(jt.keras.metrics, cls)(name="m").variables) == _names(
        getattr(keras.metrics, cls)(name="m").variables)


def test_tf_variables():
    assert jt.Variable(1.0, name="x").name == tf.Variable(1.0, name="x").name
    with jt.name_scope("scope"), tf.name_scope("scope"):
        assert jt.Variable(1.0, name="x").name == tf.Variable(1.0, name="x").name
