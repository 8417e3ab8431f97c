"""``save_weights`` / ``load_weights``: Keras 3's ``.weights.h5`` layout, both ways.

The layouts expected here are written out from files Keras 3.15 wrote for the same
architectures; ``tests/data/keras_*.weights.h5`` are such files (made by
``tests/data/make_keras_weights.py``, every dataset holding distinct values), so that
loading what Keras writes is checked without TensorFlow. ``test_vs_tensorflow_weights_h5.py``
checks both directions against tf.keras itself.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
from tolerances import tol

import jittape as jt
from jittape.keras import layers as L
from jittape.keras import optimizers as O
from jittape.keras.saving import weights as saving

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
T32 = tol("float32")


@pytest.fixture
def h5py():
    import h5py  # a dependency of jittape's (as of Keras's)

    return h5py


def _x(shape, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


def _layout(path, h5py):
    """``{dataset path: (shape, dtype)}`` and the set of ``vars`` groups of a file."""
    datasets, groups = {}, set()
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                datasets[name] = (tuple(obj.shape), obj.dtype.name)
            elif name.split("/")[-1] == "vars":
                groups.add(name)
                assert isinstance(obj.attrs["name"], str), f"{name} has no name attribute"
        f.visititems(visit)
        assert dict(f.attrs) == {}
    return datasets, groups


def _read(path, h5py):
    with h5py.File(path, "r") as f:
        out = {}
        f.visititems(lambda n, o: out.__setitem__(n, o[()]) if isinstance(o, h5py.Dataset)
                     else None)
    return out


def _reinit(model, seed):
    """Give every variable of ``model`` (found through its layers, not the saving walk)
    new random values, so a load that assigns nothing is seen."""
    rng = np.random.default_rng(seed)
    for v in model.variables:
        v.assign(rng.uniform(-1, 1, v.shape).astype(v.dtype._np))


def _snapshot(variables):
    return [np.array(v.numpy()) for v in variables]


def _assert_same(got, want):
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w), err_msg=f"variable {i}")


# ---------------------------------------------------------------------------
# Architectures (the same as tests/data/make_keras_weights.py builds in Keras)


def _sequential():
    return jt.Sequential([L.Dense(3, activation="tanh", input_shape=(4,)),
                          L.BatchNormalization(), L.Dropout(0.5), L.Dense(2)])


class Net(L.Layer):
    """Sublayers as attributes, in a nested list, in a dict, private; own weights (the
    non-trainable one made first); a nested Sequential."""

    def __init__(self, name=None):
        super().__init__(name=name)
        self.encoder = jt.Sequential([L.Dense(3), L.Dropout(0.5)])
        self.blocks = [L.Dense(3), [L.Dense(3), L.Dense(3, use_bias=False)]]
        self.heads = {"b": L.Dense(2), "a": L.Dense(2)}
        self.bn = L.BatchNormalization()
        self._gate = L.Dense(2)

    def build(self, input_shape):
        self.count = self.add_weight("count", (), "zeros", trainable=False)
        self.scale = self.add_weight("scale", (2,), "ones")

    def call(self, x, training=None):
        x = self.encoder(x, training=training)
        x = self.blocks[1][1](self.blocks[1][0](self.blocks[0](x)))
        x = self.bn(x, training=training)
        y = self.heads["b"](x) + self.heads["a"](x)
        return self._gate(y) * self.scale + self.count


def _net(seed=None):
    net = Net()
    net(np.zeros((1, 4), np.float32))
    if seed is not None:
        _reinit_net(net, seed)
    return net


def _net_variables(net):
    """Every variable of a Net by the path Keras 3 gives it (written out from Keras' file:
    attributes by name, nested lists as "container", dicts in insertion order, the
    trainable own weight first)."""
    b, h = net.blocks, net.heads
    return {
        "vars/0": net.scale, "vars/1": net.count,
        "_gate/vars/0": net._gate.kernel, "_gate/vars/1": net._gate.bias,
        "blocks/dense/vars/0": b[0].kernel, "blocks/dense/vars/1": b[0].bias,
        "blocks/container/dense/vars/0": b[1][0].kernel,
        "blocks/container/dense/vars/1": b[1][0].bias,
        "blocks/container/dense_1/vars/0": b[1][1].kernel,
        "bn/vars/0": net.bn.gamma, "bn/vars/1": net.bn.beta,
        "bn/vars/2": net.bn.moving_mean, "bn/vars/3": net.bn.moving_variance,
        "encoder/layers/dense/vars/0": net.encoder.layers[0].kernel,
        "encoder/layers/dense/vars/1": net.encoder.layers[0].bias,
        "heads/dense/vars/0": h["b"].kernel, "heads/dense/vars/1": h["b"].bias,
        "heads/dense_1/vars/0": h["a"].kernel, "heads/dense_1/vars/1": h["a"].bias,
    }


def _reinit_net(net, seed):
    rng = np.random.default_rng(seed)
    for v in _net_variables(net).values():
        v.assign(rng.uniform(0.25, 1.25, v.shape).astype(np.float32))


def _seq_variables(model):
    d0, bn, _, d1 = model.layers
    return {"layers/dense/vars/0": d0.kernel, "layers/dense/vars/1": d0.bias,
            "layers/batch_normalization/vars/0": bn.gamma,
            "layers/batch_normalization/vars/1": bn.beta,
            "layers/batch_normalization/vars/2": bn.moving_mean,
            "layers/batch_normalization/vars/3": bn.moving_variance,
            "layers/dense_1/vars/0": d1.kernel, "layers/dense_1/vars/1": d1.bias}


def _rmsprop_paths(model, opt):
    """Keras 3's order of RMSprop's variables (from its file): iteration, learning_rate,
    then every variable's velocity ("rms"), every momentum, every average_gradient
    ("mg"), each over the trainable variables in order."""
    tv = model.trainable_variables
    n = len(tv)
    out = {"optimizer/vars/0": opt.iterations, "optimizer/vars/1": opt._lr}
    for k, v in enumerate(tv):
        out[f"optimizer/vars/{2 + k}"] = opt.get_slot(v, "rms")
        out[f"optimizer/vars/{2 + n + k}"] = opt.get_slot(v, "momentum")
        out[f"optimizer/vars/{2 + 2 * n + k}"] = opt.get_slot(v, "mg")
    return out


def _rmsprop(model):
    opt = O.RMSprop(0.01, momentum=0.5, centered=True)
    opt.build(model.trainable_variables)
    return opt


# numpy references of the two architectures in inference, from Keras' formulas


def _dense(x, k, b=None, act=None):
    y = x.astype(np.float64) @ k.astype(np.float64) + (0 if b is None else b)
    return np.tanh(y) if act == "tanh" else y


def _bn(x, gamma, beta, mean, var, eps=1e-3):
    return (x - mean) / np.sqrt(var.astype(np.float64) + eps) * gamma + beta


def _seq_reference(w, x):
    h = _dense(x, w["layers/dense/vars/0"], w["layers/dense/vars/1"], "tanh")
    h = _bn(h, *(w[f"layers/batch_normalization/vars/{i}"] for i in range(4)))
    return _dense(h, w["layers/dense_1/vars/0"], w["layers/dense_1/vars/1"])


def _net_reference(w, x):
    h = _dense(x, w["encoder/layers/dense/vars/0"], w["encoder/layers/dense/vars/1"])
    h = _dense(h, w["blocks/dense/vars/0"], w["blocks/dense/vars/1"])
    h = _dense(h, w["blocks/container/dense/vars/0"], w["blocks/container/dense/vars/1"])
    h = _dense(h, w["blocks/container/dense_1/vars/0"])
    h = _bn(h, *(w[f"bn/vars/{i}"] for i in range(4)))
    y = (_dense(h, w["heads/dense/vars/0"], w["heads/dense/vars/1"])
         + _dense(h, w["heads/dense_1/vars/0"], w["heads/dense_1/vars/1"]))
    return _dense(y, w["_gate/vars/0"], w["_gate/vars/1"]) * w["vars/0"] + w["vars/1"]


def _close(got, want):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=T32.fwd_rtol,
                               atol=T32.fwd_atol)


# ---------------------------------------------------------------------------
# The layout: what jittape writes is what Keras writes


def test_sequential_layout_is_keras_layout(h5py, tmp_path):
    model = _sequential()
    model.optimizer = _rmsprop(model)
    path = tmp_path / "seq.weights.h5"
    model.save_weights(path)
    got, got_groups = _layout(path, h5py)
    want, want_groups = _layout(os.path.join(DATA, "keras_sequential.weights.h5"), h5py)
    assert got == want
    # empty groups too: the Dropout's, the model's own
    assert got_groups == want_groups
    assert {"vars", "layers/dropout/vars", "optimizer/vars"} <= got_groups
    with h5py.File(path, "r") as f:
        assert f["vars"].attrs["name"] == model.name
        assert f["layers/dense_1/vars"].attrs["name"] == model.layers[3].name
        assert f["optimizer/vars"].attrs["name"] == model.optimizer.name


def test_subclassed_layer_layout_is_keras_layout(h5py, tmp_path):
    net = _net()
    path = tmp_path / "net.weights.h5"
    net.save_weights(path)
    got, got_groups = _layout(path, h5py)
    want, want_groups = _layout(os.path.join(DATA, "keras_layer.weights.h5"), h5py)
    assert got == want
    assert got_groups == want_groups


def test_nested_sequential_and_same_class_names(h5py, tmp_path):
    # Keras 3.15 for Sequential([Dense(2), Sequential([Dense(3), Dense(3)]), Dense(1)]):
    # names count per list, so the outer model's second Dense is dense_1
    inner = jt.Sequential([L.Dense(3), L.Dense(3)])
    outer = jt.Sequential([L.Dense(2, input_shape=(2,)), inner, L.Dense(1)])
    path = tmp_path / "nested.weights.h5"
    outer.save_weights(path)
    got, groups = _layout(path, h5py)
    assert got == {
        "layers/dense/vars/0": ((2, 2), "float32"), "layers/dense/vars/1": ((2,), "float32"),
        "layers/sequential/layers/dense/vars/0": ((2, 3), "float32"),
        "layers/sequential/layers/dense/vars/1": ((3,), "float32"),
        "layers/sequential/layers/dense_1/vars/0": ((3, 3), "float32"),
        "layers/sequential/layers/dense_1/vars/1": ((3,), "float32"),
        "layers/dense_1/vars/0": ((3, 1), "float32"), "layers/dense_1/vars/1": ((1,), "float32"),
    }
    assert groups == {"vars", "layers/dense/vars", "layers/sequential/vars",
                      "layers/sequential/layers/dense/vars",
                      "layers/sequential/layers/dense_1/vars", "layers/dense_1/vars"}


class Shared(L.Layer):
    def __init__(self):
        super().__init__()
        self._priv = L.Dense(2)
        self.tup = (L.Dense(2), L.BatchNormalization())
        self.shared = self.tup[0]
        self.aaa = self.tup[0]
        self._alias = self.tup[0]
        self.B = self._priv

    def call(self, x):
        return self.tup[1](self.tup[0](self._priv(x)))


def test_a_shared_layer_is_saved_once_at_its_first_path(h5py, tmp_path):
    # Keras 3.15: attributes by name, private ones last ("B" < "aaa" < ... < "_alias"), so
    # "aaa" holds the tuple's Dense, which is not written again in the tuple, but still
    # takes the name "dense" there (the BatchNormalization is not renamed); "_priv" is
    # written at "B"
    layer = Shared()
    layer(_x((1, 2)))
    path = tmp_path / "shared.weights.h5"
    layer.save_weights(path)
    got, groups = _layout(path, h5py)
    assert got == {
        "B/vars/0": ((2, 2), "float32"), "B/vars/1": ((2,), "float32"),
        "aaa/vars/0": ((2, 2), "float32"), "aaa/vars/1": ((2,), "float32"),
        **{f"tup/batch_normalization/vars/{i}": ((2,), "float32") for i in range(4)},
    }
    assert groups == {"vars", "B/vars", "aaa/vars", "tup/batch_normalization/vars"}
    values = _read(path, h5py)
    np.testing.assert_array_equal(values["aaa/vars/0"], layer.tup[0].kernel.numpy())
    np.testing.assert_array_equal(values["B/vars/0"], layer._priv.kernel.numpy())


class Holder(L.Layer):
    """Two variables and an optimizer as an attribute (a compiled model's layout)."""

    def __init__(self, opt):
        super().__init__()
        self.optimizer = opt

    def build(self, input_shape):
        self.a = self.add_weight("a", (2,))
        self.b = self.add_weight("b", (3,))

    def call(self, x):
        return x


# Keras 3.15's order of each optimizer's variables for trainable variables a (2,), b (3,)
OPTIMIZER_ORDER = {
    "sgd_momentum": (lambda: O.SGD(0.1, momentum=0.9),
                     [("a", "momentum"), ("b", "momentum")]),
    "adam_amsgrad": (lambda: O.Adam(0.1, amsgrad=True),
                     [("a", "m"), ("a", "v"), ("b", "m"), ("b", "v"), ("a", "vhat"),
                      ("b", "vhat")]),
    "adamw": (lambda: O.AdamW(0.1), [("a", "m"), ("a", "v"), ("b", "m"), ("b", "v")]),
    "rmsprop_centered_momentum": (
        lambda: O.RMSprop(0.1, momentum=0.9, centered=True),
        [("a", "rms"), ("b", "rms"), ("a", "momentum"), ("b", "momentum"), ("a", "mg"),
         ("b", "mg")]),
    "rmsprop": (lambda: O.RMSprop(0.1), [("a", "rms"), ("b", "rms")]),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZER_ORDER))
def test_optimizer_variables_in_keras_order(h5py, tmp_path, name):
    make, order = OPTIMIZER_ORDER[name]
    layer = Holder(make())
    layer(_x((1, 2)))
    opt = layer.optimizer
    opt.build([layer.a, layer.b])
    rng = np.random.default_rng(1)
    for s in opt._slot_variables:
        s.assign(rng.uniform(-1, 1, s.shape).astype(np.float32))
    opt.iterations.assign(5)
    path = tmp_path / "opt.weights.h5"
    layer.save_weights(path)
    values = _read(path, h5py)
    assert values["optimizer/vars/0"] == 5 and values["optimizer/vars/0"].dtype == np.int64
    np.testing.assert_array_equal(values["optimizer/vars/1"], np.float32(0.1))
    slots = [opt.get_slot(getattr(layer, var), slot) for var, slot in order]
    assert sorted(k for k in values if k.startswith("optimizer/")) == sorted(
        f"optimizer/vars/{i}" for i in range(2 + len(order)))
    for i, s in enumerate(slots):
        np.testing.assert_array_equal(values[f"optimizer/vars/{2 + i}"], s.numpy())
    # and back, into a fresh optimizer built on the same variables
    other = Holder(make())
    other(_x((1, 2)))
    other.optimizer.build([other.a, other.b])
    other.load_weights(path)
    for (var, slot), s in zip(order, slots):
        np.testing.assert_array_equal(other.optimizer.get_slot(getattr(other, var), slot).numpy(),
                                      s.numpy())
    assert int(other.optimizer.iterations.numpy()) == 5


def test_a_schedule_has_no_learning_rate_variable(h5py, tmp_path):
    # Keras 3.15: Adam(ExponentialDecay(...)) has iteration, then the slots
    layer = Holder(O.Adam(O.schedules.ExponentialDecay(0.1, 10, 0.9)))
    layer(_x((1, 2)))
    layer.optimizer.build([layer.a, layer.b])
    path = tmp_path / "sched.weights.h5"
    layer.save_weights(path)
    shapes = {k: v[0] for k, v in _layout(path, h5py)[0].items() if k.startswith("optimizer")}
    assert shapes == {"optimizer/vars/0": (), "optimizer/vars/1": (2,),
                      "optimizer/vars/2": (2,), "optimizer/vars/3": (3,),
                      "optimizer/vars/4": (3,)}


def _keras_model_class():
    try:
        return jt.keras.Model
    except AttributeError as e:
        pytest.skip(f"jt.keras.Model does not exist yet ({e})")


def _sub_model(base):
    """A subclassed model; on a plain Layer base, ``_keras_saving_kind`` asks for the
    subclassed Model's walk (its ``layers`` property is walked too, in its place among
    the attributes); None leaves it to the class."""

    class SubModel(base):
        _keras_saving_kind = "Model" if base is L.Layer else None

        def __init__(self):
            super().__init__()
            self.dense = L.Dense(3, activation="tanh")
            self.blocks = [L.Dense(3), L.BatchNormalization()]
            self.head = L.Dense(2)
            self.out = L.Dense(2)
            self._gate = L.Dense(2)

        def call(self, x, training=None):
            x = self.blocks[1](self.blocks[0](self.dense(x)), training=training)
            return self._gate(self.out(self.head(x)))

    return SubModel()


@pytest.mark.parametrize("base", ["marked_layer", "jt.keras.Model"])
def test_a_subclassed_model_writes_later_attributes_under_layers(h5py, tmp_path, base):
    # Keras 3.15 for the same keras.Model subclass: "blocks", "dense", "head" sort before
    # "layers"; "out" and "_gate" are reached first through model.layers, where the names
    # count every layer of the list (dense, dense_1, batch_normalization, dense_2, ...)
    model = _sub_model(L.Layer if base == "marked_layer" else _keras_model_class())
    model(_x((2, 4)))
    path = tmp_path / "sub.weights.h5"
    model.save_weights(path)
    f32 = "float32"
    assert _layout(path, h5py)[0] == {
        "blocks/dense/vars/0": ((3, 3), f32), "blocks/dense/vars/1": ((3,), f32),
        **{f"blocks/batch_normalization/vars/{i}": ((3,), f32) for i in range(4)},
        "dense/vars/0": ((4, 3), f32), "dense/vars/1": ((3,), f32),
        "head/vars/0": ((3, 2), f32), "head/vars/1": ((2,), f32),
        "layers/dense_3/vars/0": ((2, 2), f32), "layers/dense_3/vars/1": ((2,), f32),
        "layers/dense_4/vars/0": ((2, 2), f32), "layers/dense_4/vars/1": ((2,), f32),
    }
    values = _read(path, h5py)
    np.testing.assert_array_equal(values["layers/dense_3/vars/0"], model.out.kernel.numpy())
    np.testing.assert_array_equal(values["layers/dense_4/vars/0"], model._gate.kernel.numpy())


# Keras 3.15 for Input((4,)) -> Dense(3) -> BatchNormalization -> Dropout -> Dense(2)
FUNCTIONAL_LAYOUT = {
    "layers/dense/vars/0": ((4, 3), "float32"), "layers/dense/vars/1": ((3,), "float32"),
    **{f"layers/batch_normalization/vars/{i}": ((3,), "float32") for i in range(4)},
    "layers/dense_1/vars/0": ((3, 2), "float32"), "layers/dense_1/vars/1": ((2,), "float32"),
}
FUNCTIONAL_GROUPS = {"vars", "layers/input_layer/vars", "layers/dense/vars",
                     "layers/batch_normalization/vars", "layers/dropout/vars",
                     "layers/dense_1/vars"}


def _jt_functional():
    Model = _keras_model_class()
    inp = jt.keras.Input((4,))
    h = L.BatchNormalization()(L.Dense(3)(inp))
    return Model(inp, L.Dense(2)(L.Dropout(0.5)(h)))


def test_a_jt_keras_functional_model_has_keras_layout(h5py, tmp_path):
    src, dst = _jt_functional(), _jt_functional()
    path = tmp_path / "fn.weights.h5"
    src.save_weights(path)
    got, groups = _layout(path, h5py)
    assert got == FUNCTIONAL_LAYOUT
    assert groups == FUNCTIONAL_GROUPS
    _reinit(dst, 1)
    dst.load_weights(path)
    x = _x((3, 4), 7)
    np.testing.assert_array_equal(dst.predict(x, verbose=0), src.predict(x, verbose=0))


def test_a_fitted_model_saves_its_optimizer_state(h5py, tmp_path):
    # Keras 3.15: a compiled model's "optimizer" attribute: iteration, learning_rate, then
    # Adam's m and v of each trainable variable; compiled metrics write nothing
    src, dst = _jt_functional(), _jt_functional()
    x, y = _x((8, 4), 8), _x((8, 2), 9)
    for m in (src, dst):
        m.compile(O.Adam(0.01), "mse", metrics=["mae"])
    src.fit(x, y, batch_size=4, epochs=1, verbose=0, shuffle=False)
    path = tmp_path / "fit.weights.h5"
    src.save_weights(path)
    got = _layout(path, h5py)[0]
    tv = src.trainable_variables
    want_opt = {"optimizer/vars/0": ((), "int64"), "optimizer/vars/1": ((), "float32")}
    for k, v in enumerate(tv):
        for j in (0, 1):
            want_opt[f"optimizer/vars/{2 + 2 * k + j}"] = (tuple(v.shape), "float32")
    assert {k: v for k, v in got.items() if k.startswith("optimizer/")} == want_opt
    assert {k: v for k, v in got.items() if not k.startswith("optimizer/")} == FUNCTIONAL_LAYOUT
    # into a model not fitted yet: its optimizer has no slots, so it is skipped (Keras')
    with pytest.warns(UserWarning, match="Skipping variable loading for optimizer 'adam'"):
        dst.load_weights(path)
    _assert_same(_snapshot(dst.variables), _snapshot(src.variables))
    dst.optimizer.build(dst.trainable_variables)
    dst.load_weights(path)
    assert int(dst.optimizer.iterations.numpy()) == 2
    for v, w in zip(src.trainable_variables, dst.trainable_variables):
        for slot in ("m", "v"):
            np.testing.assert_array_equal(dst.optimizer.get_slot(w, slot).numpy(),
                                          src.optimizer.get_slot(v, slot).numpy())


class InputLayer(L.Layer):
    """Stands for a functional model's input (named as Keras' InputLayer)."""


class FunctionalLike(L.Layer):
    """Walked as a functional model: its ``layers`` (InputLayer first) before anything."""

    _keras_saving_kind = "Functional"

    def __init__(self, stack):
        super().__init__()
        self._stack = stack
        self.aaa_nodes = list(reversed(stack))  # sorts first, but layers come before it

    @property
    def layers(self):
        return list(self._stack)

    def call(self, x, training=None):
        for layer in self._stack[1:]:
            x = layer(x, training=training)
        return x


def test_a_functional_model_writes_its_layers_first(h5py, tmp_path):
    # Keras 3.15 for Input((4,)) -> Dense(3) -> BatchNormalization -> Dropout -> Dense(2)
    model = FunctionalLike([InputLayer(), L.Dense(3), L.BatchNormalization(), L.Dropout(0.5),
                            L.Dense(2)])
    model(_x((2, 4)))
    path = tmp_path / "fn.weights.h5"
    model.save_weights(path)
    got, groups = _layout(path, h5py)
    f32 = "float32"
    assert got == {
        "layers/dense/vars/0": ((4, 3), f32), "layers/dense/vars/1": ((3,), f32),
        **{f"layers/batch_normalization/vars/{i}": ((3,), f32) for i in range(4)},
        "layers/dense_1/vars/0": ((3, 2), f32), "layers/dense_1/vars/1": ((2,), f32),
    }
    assert groups == {"vars", "layers/input_layer/vars", "layers/dense/vars",
                      "layers/batch_normalization/vars", "layers/dropout/vars",
                      "layers/dense_1/vars"}


def test_weight_paths_lists_what_the_file_holds(h5py, tmp_path):
    model = _sequential()
    path = tmp_path / "seq.weights.h5"
    model.save_weights(path)
    paths = saving.weight_paths(model)
    assert list(paths) == list(_seq_variables(model))
    assert all(paths[k] is v for k, v in _seq_variables(model).items())
    assert set(paths) == set(_layout(path, h5py)[0])


# ---------------------------------------------------------------------------
# Files Keras wrote load here


def test_loads_a_keras_sequential_with_its_optimizer(h5py):
    path = os.path.join(DATA, "keras_sequential.weights.h5")
    values = _read(path, h5py)
    model = _sequential()
    model.optimizer = _rmsprop(model)
    model.load_weights(path)
    for p, v in {**_seq_variables(model), **_rmsprop_paths(model, model.optimizer)}.items():
        np.testing.assert_array_equal(v.numpy(), values[p], err_msg=p)
    assert int(model.optimizer.iterations.numpy()) == 7
    x = np.random.default_rng(_crc("sequential")).uniform(-1, 1, (5, 4)).astype(np.float32)
    y = model(x).numpy()
    _close(y, _seq_reference(values, x))
    _close(y, np.load(os.path.join(DATA, "keras_outputs.npz"))["sequential"])


def test_loads_a_keras_subclassed_layer(h5py):
    path = os.path.join(DATA, "keras_layer.weights.h5")
    values = _read(path, h5py)
    net = _net(seed=3)
    net.load_weights(path)
    for p, v in _net_variables(net).items():
        np.testing.assert_array_equal(v.numpy(), values[p], err_msg=p)
    x = np.random.default_rng(_crc("layer")).uniform(-1, 1, (5, 4)).astype(np.float32)
    y = net(x).numpy()
    _close(y, _net_reference(values, x))
    _close(y, np.load(os.path.join(DATA, "keras_outputs.npz"))["layer"])


def _crc(name):
    import zlib

    return zlib.crc32(name.encode())


def test_loads_keras_2_13_layer_checkpoint_dependencies(h5py, tmp_path):
    # Keras 2.13 named a Sequential's "layers" group "_layer_checkpoint_dependencies"
    src = _sequential()
    path = tmp_path / "old.weights.h5"
    src.save_weights(path)
    with h5py.File(path, "r+") as f:
        f.move("layers", "_layer_checkpoint_dependencies")
    model = _sequential()
    model.load_weights(path)
    _assert_same(_snapshot(model.variables), _snapshot(src.variables))


# ---------------------------------------------------------------------------
# Round trips


def test_round_trip_sequential_with_trained_batch_norm(h5py, tmp_path):
    src = _sequential()
    src(_x((8, 4), 1), training=True)  # moving statistics move off their initial values
    bn = src.layers[1]
    assert not np.allclose(bn.moving_mean.numpy(), 0)
    path = tmp_path / "seq.weights.h5"
    src.save_weights(path)
    dst = _sequential()
    dst.load_weights(path)
    _assert_same(_snapshot(dst.variables), _snapshot(src.variables))
    x = _x((3, 4), 2)
    np.testing.assert_array_equal(dst(x).numpy(), src(x).numpy())


def test_round_trip_subclassed_layer(h5py, tmp_path):
    src, dst = _net(seed=1), _net(seed=2)
    path = tmp_path / "net.weights.h5"
    src.save_weights(str(path))
    dst.load_weights(str(path))
    a, b = _net_variables(src), _net_variables(dst)
    _assert_same([b[k].numpy() for k in a], [a[k].numpy() for k in a])
    x = _x((3, 4), 4)
    np.testing.assert_array_equal(dst(x).numpy(), src(x).numpy())


class Tower(L.Layer):
    """A nested model inside a list, a frozen layer, a layer made by an inner layer."""

    def __init__(self):
        super().__init__()
        self.stages = [Net(), jt.Sequential([L.Dense(2), L.Dropout(0.1), L.Dense(2)])]
        self.frozen = L.Dense(2, trainable=False)

    def call(self, x):
        return self.frozen(self.stages[1](self.stages[0](x)))


def test_round_trip_nested_models_and_frozen_layer(h5py, tmp_path):
    src, dst = Tower(), Tower()
    for m, seed in ((src, 1), (dst, 2)):
        m(_x((1, 4)))
        _reinit(m, seed)
        _reinit_net(m.stages[0], seed)
    path = tmp_path / "tower.weights.h5"
    src.save_weights(path)
    got = _layout(path, h5py)[0]
    assert "stages/net/heads/dense_1/vars/0" in got
    assert "stages/sequential/layers/dense_1/vars/1" in got
    assert got["frozen/vars/0"] == ((2, 2), "float32")
    dst.load_weights(path)
    x = _x((3, 4), 5)
    np.testing.assert_array_equal(dst(x).numpy(), src(x).numpy())
    _assert_same(_snapshot(dst.variables), _snapshot(src.variables))


def test_round_trip_keeps_float64(h5py, tmp_path):
    src = jt.Sequential([L.Dense(2, input_shape=(3,), dtype="float64")])
    path = tmp_path / "f64.weights.h5"
    src.save_weights(path)
    assert _layout(path, h5py)[0]["layers/dense/vars/0"] == ((3, 2), "float64")
    # into float32 weights, the values are cast (as Keras' assign casts)
    dst = jt.Sequential([L.Dense(2, input_shape=(3,))])
    dst.load_weights(path)
    assert dst.layers[0].kernel.dtype.name == "float32"
    np.testing.assert_array_equal(dst.layers[0].kernel.numpy(),
                                  src.layers[0].kernel.numpy().astype(np.float32))


def test_overwrite_replaces_the_file(h5py, tmp_path):
    path = tmp_path / "m.weights.h5"
    a, b = _sequential(), _sequential()
    a.save_weights(path)
    b.save_weights(path)  # overwrite=True by default
    c = _sequential()
    c.load_weights(path)
    _assert_same(_snapshot(c.variables), _snapshot(b.variables))


# ---------------------------------------------------------------------------
# Inside jt.function


def test_a_traced_function_sees_loaded_weights_without_retracing(h5py, tmp_path):
    src, model = _net(seed=1), _net(seed=2)
    path = tmp_path / "net.weights.h5"
    src.save_weights(path)

    @jt.function
    def predict(x):
        return model(x)

    x = _x((3, 4), 6)
    before = predict(x).numpy()
    np.testing.assert_allclose(before, model(x).numpy(), rtol=T32.fwd_rtol, atol=T32.fwd_atol)
    model.load_weights(path)
    after = predict(x).numpy()
    assert predict.cache_info().traces == 1
    assert not np.allclose(after, before)
    np.testing.assert_allclose(after, src(x).numpy(), rtol=T32.fwd_rtol, atol=T32.fwd_atol)
    np.testing.assert_allclose(after, model(x).numpy(), rtol=T32.fwd_rtol, atol=T32.fwd_atol)


@pytest.mark.parametrize("method", ["save_weights", "load_weights"])
def test_not_inside_a_traced_function(h5py, tmp_path, method):
    model = _sequential()
    path = tmp_path / "m.weights.h5"
    if method == "load_weights":
        _sequential().save_weights(path)
    before = _snapshot(model.variables)

    @jt.function
    def step(x):
        getattr(model, method)(path)
        return x

    with pytest.raises(RuntimeError, match=f"{method} inside a jt.function"):
        step(_x((1, 4)))
    assert path.exists() == (method == "load_weights")
    _assert_same(_snapshot(model.variables), before)


# ---------------------------------------------------------------------------
# Errors


def test_filename_must_end_in_weights_h5(tmp_path):
    model = _sequential()
    with pytest.raises(ValueError, match=r"The filename must end in `\.weights\.h5`\. "
                                         r"Received: filepath=.*m\.h5"):
        model.save_weights(tmp_path / "m.h5")
    with pytest.raises(ValueError, match=r"File format not supported: filepath=.*m\.keras"):
        model.load_weights(tmp_path / "m.keras")
    with pytest.raises(TypeError, match="filepath must be a str or os.PathLike, got int"):
        model.save_weights(3)
    assert os.listdir(tmp_path) == []


def test_unbuilt_models_are_refused(tmp_path):
    model = jt.Sequential([L.Dense(2)], name="unbuilt_seq")
    with pytest.raises(ValueError, match=r"You are saving a model that has not yet been "
                                         r'built \(Sequential "unbuilt_seq"\)'):
        model.save_weights(tmp_path / "m.weights.h5")
    with pytest.raises(ValueError, match="You are loading weights into a model that has not "
                                         "yet been built"):
        model.load_weights(tmp_path / "m.weights.h5")
    assert os.listdir(tmp_path) == []


def test_not_a_layer():
    with pytest.raises(TypeError, match="expected a jt.layers.Layer or model, got Module"):
        saving.save_weights(jt.Module(), "m.weights.h5")


def test_overwrite_false_refuses_an_existing_file(h5py, tmp_path):
    path = tmp_path / "m.weights.h5"
    a, b = _sequential(), _sequential()
    b.save_weights(path, overwrite=False)  # a new file is fine
    with pytest.raises(FileExistsError, match="exists and overwrite=False"):
        a.save_weights(path, overwrite=False)
    c = _sequential()
    c.load_weights(path)
    _assert_same(_snapshot(c.variables), _snapshot(b.variables))
    assert os.listdir(tmp_path) == ["m.weights.h5"]


def test_missing_file_and_directory(h5py, tmp_path):
    model = _sequential()
    with pytest.raises(FileNotFoundError, match="no such file"):
        model.load_weights(tmp_path / "none.weights.h5")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        model.save_weights(tmp_path / "sub" / "m.weights.h5")


def test_shape_mismatch_names_the_path_and_loads_nothing(h5py, tmp_path):
    path = tmp_path / "m.weights.h5"
    jt.Sequential([L.Dense(3, input_shape=(4,)), L.Dense(2)]).save_weights(path)
    model = jt.Sequential([L.Dense(3, input_shape=(4,)), L.Dense(5)])
    before = _snapshot(model.variables)
    with pytest.raises(ValueError) as e:
        model.load_weights(path)
    msg = str(e.value)
    assert ("The first: layers/dense_1/vars/0: variable '" in msg
            and "has shape (3, 5), the file's value has shape (3, 2)" in msg), msg
    assert "Nothing was loaded" in msg and "skip_mismatch=True" in msg
    _assert_same(_snapshot(model.variables), before)  # the first layer fits, but is untouched


def test_variable_count_mismatch(h5py, tmp_path):
    path = tmp_path / "m.weights.h5"
    jt.Sequential([L.Dense(3, input_shape=(4,))]).save_weights(path)
    model = jt.Sequential([L.Dense(3, input_shape=(4,), use_bias=False)])
    with pytest.raises(ValueError, match=r"layers/dense/vars: Dense \"\w+\" has 1 variable\(s\) "
                                         r"\(\w+/\w+/kernel\), the file has 2 variable\(s\) there"):
        model.load_weights(path)


def test_a_layer_the_file_lacks(h5py, tmp_path):
    path = tmp_path / "m.weights.h5"
    jt.Sequential([L.Dense(3, input_shape=(4,))]).save_weights(path)
    model = jt.Sequential([L.Dense(3, input_shape=(4,)), L.Dense(2)])
    with pytest.raises(ValueError, match=r"layers/dense_1/vars: .* has 2 variable\(s\) .*, the "
                                         "file has no group there"):
        model.load_weights(path)


def test_groups_the_model_does_not_reach_are_ignored(h5py, tmp_path):
    # as Keras: a file with more layers loads into the model made of its first ones
    path = tmp_path / "m.weights.h5"
    big = jt.Sequential([L.Dense(3, input_shape=(4,)), L.Dense(2)])
    big.save_weights(path)
    small = jt.Sequential([L.Dense(3, input_shape=(4,))])
    small.load_weights(path)
    _assert_same(_snapshot(small.variables), _snapshot(big.layers[0].variables))


def test_skip_mismatch_loads_the_rest_and_warns(h5py, tmp_path):
    path = tmp_path / "m.weights.h5"
    src = jt.Sequential([L.Dense(3, input_shape=(4,)), L.Dense(2), L.Dense(2)])
    src.save_weights(path)
    model = jt.Sequential([L.Dense(3, input_shape=(4,)), L.Dense(2, use_bias=False), L.Dense(2)])
    kept = _snapshot(model.layers[1].variables)
    with pytest.warns(UserWarning, match=r"(?s)1 object\(s\) .*The first: layers/dense_1/vars: "
                                         ".*The other objects were loaded"):
        model.load_weights(path, skip_mismatch=True)
    _assert_same(_snapshot(model.layers[0].variables), _snapshot(src.layers[0].variables))
    _assert_same(_snapshot(model.layers[2].variables), _snapshot(src.layers[2].variables))
    _assert_same(_snapshot(model.layers[1].variables), kept)


class Lazy(L.Layer):
    """A layer whose second sublayer is built only when asked (it is not, here)."""

    def __init__(self, use_second):
        super().__init__()
        self.first, self.second, self.use_second = L.Dense(2), L.Dense(2), use_second

    def call(self, x):
        x = self.first(x)
        return self.second(x) if self.use_second else x


def test_an_unbuilt_sublayer(h5py, tmp_path):
    path = tmp_path / "m.weights.h5"
    full = Lazy(True)
    full(_x((1, 2)))
    full.save_weights(path)
    part = Lazy(False)
    part(_x((1, 2)))
    with pytest.raises(ValueError, match=r'second/vars: Dense "\w+" was never built, so it has '
                                         "no variables, but the file has 2 for it"):
        part.load_weights(path)


def test_an_unbuilt_optimizer_is_skipped_with_a_warning(h5py, tmp_path):
    path = tmp_path / "m.weights.h5"
    src = _sequential()
    src.optimizer = _rmsprop(src)
    src.save_weights(path)
    model = _sequential()
    model.optimizer = O.RMSprop(0.01, momentum=0.5, centered=True)  # no slots yet
    with pytest.warns(UserWarning, match=r"Skipping variable loading for optimizer '\w+', "
                                         "because it has 2 variables whereas the saved "
                                         r"optimizer has 20 variables .*not been built"):
        model.load_weights(path)
    _assert_same(_snapshot(model.variables), _snapshot(src.variables))
    assert int(model.optimizer.iterations.numpy()) == 0


def test_not_an_hdf5_file(h5py, tmp_path):
    path = tmp_path / "m.weights.h5"
    path.write_bytes(b"not hdf5")
    with pytest.raises(ValueError, match="is not an HDF5 weights file"):
        _sequential().load_weights(path)


def test_soft_links_are_refused(h5py, tmp_path):
    path = tmp_path / "m.weights.h5"
    model = jt.Sequential([L.Dense(3, input_shape=(4,)), L.Dense(3)])
    model.save_weights(path)
    with h5py.File(path, "r+") as f:
        del f["layers/dense_1"]
        f["layers/dense_1"] = h5py.SoftLink("/layers/dense")
    with pytest.raises(ValueError, match="layers/dense_1 is a SoftLink"):
        model.load_weights(path)


# ---------------------------------------------------------------------------
# Atomic writes


def _boom_after(n, real):
    calls = []

    def fail(*args, **kwargs):
        calls.append(1)
        if len(calls) > n:
            raise OSError("injected: disk full")
        return real(*args, **kwargs)

    return fail


@pytest.mark.parametrize("where", ["mid_write", "rename", "interrupt"])
def test_a_failed_save_leaves_the_old_file_whole(h5py, tmp_path, monkeypatch, where):
    path = tmp_path / "m.weights.h5"
    old = _sequential()
    old.save_weights(path)
    new = _sequential()
    if where == "mid_write":  # after the first object's group is written
        monkeypatch.setattr(saving, "_write_entry", _boom_after(1, saving._write_entry))
        error = OSError
    elif where == "rename":
        monkeypatch.setattr(saving.os, "replace", _boom_after(0, os.replace))
        error = OSError
    else:
        def interrupt(f, e):
            raise KeyboardInterrupt
        monkeypatch.setattr(saving, "_write_entry", interrupt)
        error = KeyboardInterrupt
    with pytest.raises(error):
        new.save_weights(path)
    monkeypatch.undo()
    assert os.listdir(tmp_path) == ["m.weights.h5"]  # no temporary file left
    back = _sequential()
    back.load_weights(path)
    _assert_same(_snapshot(back.variables), _snapshot(old.variables))


def test_the_saved_file_has_ordinary_permissions(h5py, tmp_path):
    path = tmp_path / "m.weights.h5"
    _sequential().save_weights(path)
    plain = tmp_path / "plain"
    plain.write_bytes(b"")
    assert (path.stat().st_mode & 0o777) == (plain.stat().st_mode & 0o777)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _sequential().load_weights(path)
