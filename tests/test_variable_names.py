"""Keras variables' ``name`` and ``path`` as Keras 3 gives them (checked against
Keras 3.15 in tests/test_vs_tensorflow_variable_names.py), and jt.Variable's TF names."""

import numpy as np
import pytest

import jittape as jt

L = jt.keras.layers


def _paths(vs):
    return [v.path for v in vs]


def test_dense_and_batchnorm_names_and_paths():
    d = L.Dense(3, name="d")
    d.build((None, 2))
    assert [(v.name, v.path) for v in d.weights] == [("kernel", "d/kernel"), ("bias", "d/bias")]
    assert d.path == "d"
    bn = L.BatchNormalization(name="bn")
    bn.build((None, 4))
    assert [v.name for v in bn.weights] == ["gamma", "beta", "moving_mean", "moving_variance"]
    assert _paths(bn.weights) == ["bn/gamma", "bn/beta", "bn/moving_mean", "bn/moving_variance"]
    assert "path=d/kernel" in repr(d.kernel)


def test_nested_sequential_in_a_functional_model():
    inner = jt.keras.Sequential([L.Dense(4, name="d1"), L.Dense(2, name="d2")], name="inner")
    x = jt.keras.Input((3,))
    model = jt.keras.Model(x, L.Dense(1, name="head")(inner(x)), name="outer")
    # a functional model opens no scope of its own; the Sequential does
    assert _paths(model.weights) == ["inner/d1/kernel", "inner/d1/bias", "inner/d2/kernel",
                                     "inner/d2/bias", "head/kernel", "head/bias"]
    assert [v.name for v in model.weights] == ["kernel", "bias"] * 3


def test_sequential_built_by_its_call_and_by_its_input():
    s = jt.keras.Sequential([L.Dense(2, name="a")], name="s")
    s(np.zeros((1, 3), np.float32))
    assert _paths(s.weights) == ["s/a/kernel", "s/a/bias"]
    t = jt.keras.Sequential([jt.keras.Input((3,)), L.Dense(2, name="b")], name="t")
    assert _paths(t.weights) == ["t/b/kernel", "t/b/bias"]
    nest = jt.keras.Sequential([jt.keras.Sequential([L.Dense(2, name="x")], name="in_s")],
                               name="out_s")
    nest(np.zeros((1, 3), np.float32))
    assert _paths(nest.weights) == ["out_s/in_s/x/kernel", "out_s/in_s/x/bias"]


def test_subclassed_layer_and_model_with_sublayers():
    class Block(L.Layer):
        def __init__(self, **kw):
            super().__init__(**kw)
            self.d = L.Dense(2, name="d")
            self.e = L.Dense(3, name="e")

        def build(self, shape):
            self.w = self.add_weight(shape=(2,), name="w")

        def call(self, x):
            return self.e(self.d(x) * self.w)

    block = Block(name="l2")
    block(np.zeros((1, 3), np.float32))
    assert _paths(block.weights) == ["l2/w", "l2/d/kernel", "l2/d/bias", "l2/e/kernel",
                                     "l2/e/bias"]

    class Net(jt.keras.Model):
        def __init__(self):
            super().__init__(name="net")
            self.a = L.Dense(2, name="a")
            self.b = L.Dense(1, name="b")

        def call(self, x):
            return self.b(self.a(x))

    net = Net()
    net(np.zeros((1, 3), np.float32))
    assert _paths(net.weights) == ["net/a/kernel", "net/a/bias", "net/b/kernel", "net/b/bias"]


def test_a_layer_keeps_the_path_it_was_first_built_under():
    d = L.Dense(2, name="alone")
    d.build((None, 3))
    s = jt.keras.Sequential([d], name="later")
    s(np.zeros((1, 3), np.float32))
    assert _paths(s.weights) == ["alone/kernel", "alone/bias"]


def test_keras_name_scope_enters_paths_and_tf_name_scope_does_not():
    with jt.keras.name_scope("block"):
        d = L.Dense(2, name="k")
        d.build((None, 3))
    assert d.kernel.path == "block/k/kernel"
    with jt.name_scope("tfs"):
        e = L.Dense(2, name="t")
        e.build((None, 3))
        v = jt.Variable(1.0, name="x")
    assert e.kernel.path == "t/kernel" and e.kernel.name == "kernel"
    assert v.name == "tfs/x:0"


def test_unnamed_weights_and_names_with_a_slash():
    class Two(L.Layer):
        def build(self, shape):
            self.a = self.add_weight(shape=())
            self.b = self.add_weight(shape=())

    two = Two(name="two")
    two.build(None)
    assert [(v.name, v.path) for v in two.weights] == [("variable", "two/variable"),
                                                       ("variable_1", "two/variable_1")]

    class Slash(L.Layer):
        def build(self, shape):
            self.add_weight(shape=(), name="a/b")

    with pytest.raises(ValueError, match=r'layer "sl": add_weight: .*without \'/\'.*a/b'):
        Slash(name="sl").build(None)


def test_optimizer_variables():
    d = L.Dense(3, name="dense")
    d.build((None, 2))
    adam = jt.optimizers.Adam()
    adam.build(d.trainable_variables)
    assert adam.iterations.name == "iteration" and adam.iterations.path == "adam/iteration"
    assert _paths(adam.variables) == [
        "adam/iteration", "adam/learning_rate", "adam/dense_kernel_momentum",
        "adam/dense_kernel_velocity", "adam/dense_bias_momentum", "adam/dense_bias_velocity"]
    # the slots keep tf.keras 2's names (checkpoints key them so)
    assert adam.get_slot(d.kernel, "m").path == "adam/dense_kernel_momentum"
    sgd = jt.optimizers.SGD(momentum=0.9, name="mine")
    sgd.build(d.trainable_variables)
    assert _paths(sgd.variables) == ["mine/iteration", "mine/learning_rate",
                                     "mine/dense_kernel_momentum", "mine/dense_bias_momentum"]
    rms = jt.optimizers.RMSprop(momentum=0.5, centered=True)
    rms.build([d.kernel])
    assert sorted(v.name for v in rms.variables) == sorted([
        "iteration", "learning_rate", "dense_kernel_velocity", "dense_kernel_momentum",
        "dense_kernel_average_gradient"])
    # a plain jt.Variable's slots start with its TF name, ':' and '/' made '_'
    x = jt.Variable(np.zeros(2, np.float32), name="x")
    opt = jt.optimizers.SGD(momentum=0.5)
    opt.build([x])
    assert opt.variables[-1].path == f"{opt.name}/x_0_momentum"


def test_metric_state():
    m = jt.metrics.Mean(name="avg")
    assert [(v.name, v.path) for v in m.variables] == [("total", "avg/total"),
                                                       ("count", "avg/count")]
    auc = jt.metrics.AUC()
    assert [v.name for v in auc.variables] == ["true_positives", "false_positives",
                                              "true_negatives", "false_negatives"]
    assert auc.variables[0].path == f"{auc.name}/true_positives"


def test_tf_variables_keep_tf_names():
    assert jt.Variable(1.0).name == "Variable:0"
    assert jt.Variable(1.0, name="x").name == "x:0"
    with jt.name_scope("scope"):
        assert jt.Variable(1.0, name="x").name == "scope/x:0"
    assert not hasattr(jt.Variable(1.0), "path")


def test_core_messages_name_a_keras_variable_by_its_path():
    d = L.Dense(2, name="msg")
    d.build((None, 3))
    with pytest.raises(Exception, match=r"msg/kernel:0"):
        d.kernel.assign(np.zeros((5, 5), np.float32))
