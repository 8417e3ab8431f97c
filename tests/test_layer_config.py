"""Configs in Keras 3's format: every layer's and initializer's ``get_config``/``from_config``,
``jt.layers.serialize``/``deserialize`` (build configs, custom objects, JSON), Sequential's
config and Keras' own config records read back. The expected records are those Keras 3.15
gives for the same objects (checked against Keras itself in
``test_vs_tensorflow_regularizers.py``)."""

import json

import numpy as np
import pytest
from tolerances import tol

import jittape as jt
from jittape.keras import constraints as C
from jittape.keras import initializers as I
from jittape.keras import layers as L
from jittape.keras import regularizers as R

T32 = tol("float32")
X = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)


@pytest.fixture(autouse=True)
def _unseed():
    yield
    jt.random.set_seed(None)


def close(actual, expected, t=T32):
    np.testing.assert_allclose(np.asarray(actual), expected, rtol=t.fwd_rtol, atol=t.fwd_atol)


def policy(name="float32"):
    return {"module": "keras", "class_name": "DTypePolicy", "config": {"name": name},
            "registered_name": None}


def record(module, class_name, config):
    return {"module": module, "class_name": class_name, "config": config, "registered_name": None}


GLOROT = record("keras.initializers", "GlorotUniform",
                {"seed": None, "input_axes": None, "output_axes": None})
ZEROS = record("keras.initializers", "Zeros", {})
ONES = record("keras.initializers", "Ones", {})


def test_dense_config_is_keras_3():
    d = L.Dense(3, activation="relu", kernel_regularizer=R.L2(0.1), bias_regularizer=R.L1(0.5),
                activity_regularizer=R.L1L2(0.1, 0.2), kernel_constraint=C.MaxNorm(2.0),
                bias_constraint="non_neg", name="d")
    assert d.get_config() == {
        "name": "d", "trainable": True, "dtype": policy(),
        "activity_regularizer": record("keras.regularizers", "L1L2", {"l1": 0.1, "l2": 0.2}),
        "units": 3, "activation": "relu", "use_bias": True,
        "kernel_initializer": GLOROT, "bias_initializer": ZEROS,
        "kernel_regularizer": record("keras.regularizers", "L2", {"l2": 0.1}),
        "bias_regularizer": record("keras.regularizers", "L1", {"l1": 0.5}),
        "kernel_constraint": record("keras.constraints", "MaxNorm", {"max_value": 2.0, "axis": 0}),
        "bias_constraint": record("keras.constraints", "NonNeg", {}),
        "quantization_config": None,
    }
    plain = L.Dense(2, name="p").get_config()
    assert "activity_regularizer" not in plain  # only when set, as Keras
    assert plain["activation"] == "linear" and plain["kernel_regularizer"] is None


def test_other_layers_configs_are_keras_3():
    assert L.Dropout(0.5, name="dr").get_config() == {
        "name": "dr", "trainable": True, "dtype": policy(), "rate": 0.5, "seed": None,
        "noise_shape": None}
    assert L.Flatten(name="f").get_config() == {
        "name": "f", "trainable": True, "dtype": policy(), "data_format": "channels_last"}
    assert L.Activation("tanh", name="a").get_config() == {
        "name": "a", "trainable": True, "dtype": policy(), "activation": "tanh"}
    assert L.BatchNormalization(name="bn").get_config() == {
        "name": "bn", "trainable": True, "dtype": policy(), "axis": -1, "momentum": 0.99,
        "epsilon": 0.001, "center": True, "scale": True, "beta_initializer": ZEROS,
        "gamma_initializer": ONES, "moving_mean_initializer": ZEROS,
        "moving_variance_initializer": ONES, "beta_regularizer": None, "gamma_regularizer": None,
        "beta_constraint": None, "gamma_constraint": None, "synchronized": False,
        "renorm": False, "renorm_clipping": None, "renorm_momentum": 0.99}
    assert L.Layer(name="base", trainable=False, dtype="float64").get_config() == {
        "name": "base", "trainable": False, "dtype": policy("float64")}


LAYERS = {
    "dense": lambda: L.Dense(3, activation="tanh", kernel_regularizer="l2",
                             activity_regularizer=R.L1(0.3), bias_constraint="non_neg"),
    "dense_float64": lambda: L.Dense(2, use_bias=False, dtype="float64",
                                     kernel_initializer=I.RandomNormal(0.0, 0.1, seed=3)),
    "activation": lambda: L.Activation("softmax"),
    "flatten": lambda: L.Flatten(data_format="channels_first"),
    "dropout": lambda: L.Dropout(0.25, noise_shape=(None, 1), seed=4),
    "batch_norm": lambda: L.BatchNormalization(momentum=0.9, epsilon=0.01, center=False,
                                               gamma_regularizer=R.L2(0.2),
                                               gamma_constraint=C.UnitNorm()),
    "frozen": lambda: L.Dense(2, trainable=False),
}


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_from_config_rebuilds_the_same_layer(name):
    layer = LAYERS[name]()
    x = X.reshape(4, 3, 1) if name == "flatten" else X
    want = layer(x, training=False)
    config = layer.get_config()
    again = type(layer).from_config(config)
    assert again.get_config() == config and again is not layer
    again(x, training=False)
    again.set_weights(layer.get_weights())
    close(again(x, training=False).numpy(), want.numpy())
    assert json.loads(json.dumps(config)) == json.loads(json.dumps(again.get_config()))
    close([float(v) for v in again.losses], [float(v) for v in layer.losses])


def test_batch_norm_round_trip_computes_the_same_in_training():
    bn = L.BatchNormalization(momentum=0.5)
    bn(X)
    bn.set_weights([np.full(3, 2.0), np.full(3, 0.5), np.zeros(3), np.ones(3)])
    again = L.BatchNormalization.from_config(bn.get_config())
    again(X)
    again.set_weights(bn.get_weights())
    close(again(X, training=True).numpy(), bn(X, training=True).numpy())
    close(again.moving_mean.numpy(), bn.moving_mean.numpy())


def test_flatten_channels_first_orders_the_features_channels_last():
    x = np.arange(12.0, dtype=np.float32).reshape(1, 2, 3, 2)
    out = L.Flatten(data_format="channels_first")(x)
    np.testing.assert_array_equal(out.numpy(), np.transpose(x, (0, 2, 3, 1)).reshape(1, 12))
    np.testing.assert_array_equal(L.Flatten()(x).numpy(), x.reshape(1, 12))
    with pytest.raises(ValueError, match=r"Flatten: .*`data_format`.*'nchw'"):
        L.Flatten(data_format="nchw")


def test_unsupported_keras_arguments_are_named():
    with pytest.raises(ValueError, match=r"BatchNormalization: .*invalid keys for "
                                         r"`renorm_clipping`.*'rmaxx'"):
        L.BatchNormalization(renorm=True, renorm_clipping={"rmaxx": 2.0})
    with pytest.raises(ValueError, match=r"Dense: quantization_config=.*int8.*not supported"):
        L.Dense(2, quantization_config="int8")
    with pytest.raises(TypeError, match=r"Dense: unexpected keyword argument\(s\) \['lora_rnk'\]"):
        L.Dense.from_config({"units": 2, "lora_rnk": 4})
    with pytest.raises(ValueError, match=r"Dense: the mixed precision policy 'mixed_float16'"):
        L.Dense.from_config({"units": 2, "dtype": policy("mixed_float16")})
    L.BatchNormalization(synchronized=True)  # one device: accepted, nothing to synchronize


def test_dtype_from_a_name_or_a_policy():
    assert L.Dense.from_config({"units": 2, "dtype": "float64"}).dtype == jt.float64
    assert L.Dense.from_config({"units": 2, "dtype": policy("float64")}).dtype == jt.float64
    assert L.Dense(2, dtype=policy("float64")).dtype == jt.float64


# ---------------------------------------------------------------------------
# serialize / deserialize, Sequential


def test_serialize_adds_class_and_build_config():
    d = L.Dense(2, name="s")
    assert L.serialize(d) == {"module": "keras.layers", "class_name": "Dense",
                              "config": d.get_config(), "registered_name": None}
    d(X)
    rec = L.serialize(d)
    assert rec["build_config"] == {"input_shape": (None, 3)}
    again = L.deserialize(json.loads(json.dumps(rec)))
    assert type(again) is L.Dense and again.built and again.kernel.shape == (3, 2)
    assert again.get_config() == d.get_config()


def _model():
    return jt.Sequential([
        L.Dense(4, activation="relu", kernel_regularizer="l2", input_shape=(3,)),
        L.BatchNormalization(),
        L.Dropout(0.5),
        L.Dense(2, activation="softmax", kernel_constraint="max_norm"),
    ], name="seq")


def test_sequential_config_and_json_round_trip():
    model = _model()
    config = model.get_config()
    assert set(config) == {"name", "trainable", "dtype", "layers", "build_input_shape"}
    assert config["build_input_shape"] == (None, 3)
    assert [r["class_name"] for r in config["layers"]] == [
        "Dense", "BatchNormalization", "Dropout", "Dense"]
    assert config["layers"][0]["build_config"] == {"input_shape": (None, 3)}
    assert config["layers"][3]["build_config"] == {"input_shape": (None, 4)}
    rec = L.serialize(model)
    assert rec["module"] == "keras" and rec["class_name"] == "Sequential"
    again = L.deserialize(json.loads(json.dumps(rec)))
    assert type(again) is jt.Sequential and again.built and again.name == "seq"
    assert again.get_config() == config
    again.set_weights(model.get_weights())
    close(again(X).numpy(), model(X).numpy())
    close([float(v) for v in again.losses], [float(v) for v in model.losses])
    assert isinstance(again.layers[3].kernel.constraint, C.MaxNorm)


def test_unbuilt_sequential_has_no_build_input_shape():
    model = jt.Sequential([L.Dense(2)])
    assert "build_input_shape" not in model.get_config()
    again = jt.Sequential.from_config(model.get_config())
    assert not again.built and len(again.layers) == 1


def test_keras_sequential_record_with_an_input_layer():
    # the shape of Keras 3.15's keras.Sequential([keras.Input((4,)), Dense(2)]).get_config()
    config = {
        "name": "k", "trainable": True, "dtype": policy(),
        "layers": [
            record("keras.layers", "InputLayer", {
                "batch_shape": [None, 4], "dtype": "float32", "sparse": False, "ragged": False,
                "name": "input_layer", "optional": False}),
            {**record("keras.layers", "Dense", {
                "name": "dense_k", "trainable": True, "dtype": policy(), "units": 2,
                "activation": "linear", "use_bias": True, "kernel_initializer": GLOROT,
                "bias_initializer": ZEROS, "kernel_regularizer": None, "bias_regularizer": None,
                "kernel_constraint": None, "bias_constraint": None,
                "quantization_config": None}),
             "build_config": {"input_shape": [None, 4]}},
        ],
        "build_input_shape": [None, 4],
    }
    model = jt.Sequential.from_config(config)
    assert model.built and [l.name for l in model.layers] == ["dense_k"]
    assert model.layers[0].kernel.shape == (4, 2)
    assert model.get_config()["build_input_shape"] == (None, 4)


class Scale(L.Layer):
    """A user layer whose config is made automatically (plain constructor arguments)."""

    def __init__(self, factor, offset=0.0, **kwargs):
        super().__init__(**kwargs)
        self.factor, self.offset = factor, offset

    def call(self, x):
        return x * self.factor + self.offset


def double(x):
    return 2.0 * x


def test_custom_layers_and_functions_through_custom_objects():
    layer = Scale(3.0, name="sc")
    assert layer.get_config() == {"name": "sc", "trainable": True, "dtype": policy(),
                                  "factor": 3.0, "offset": 0.0}
    model = jt.Sequential([Scale(2.0), L.Dense(2, activation=double)])
    model(X)
    rec = L.serialize(model)
    assert rec["config"]["layers"][0]["registered_name"] == "Scale"
    assert rec["config"]["layers"][1]["config"]["activation"] == {
        "module": "builtins", "class_name": "function", "config": "double",
        "registered_name": "function"}
    with pytest.raises(ValueError, match=r"layer identifier: 'Scale'.*custom_objects"):
        L.deserialize(rec)
    with pytest.raises(ValueError, match=r"activation identifier: function 'double'"):
        L.deserialize(rec, custom_objects={"Scale": Scale})
    again = L.deserialize(rec, custom_objects={"Scale": Scale, "double": double})
    assert again.layers[1].activation is double and again.layers[0].factor == 2.0
    again.set_weights(model.get_weights())
    close(again(X).numpy(), model(X).numpy())


def test_a_layer_with_non_plain_arguments_must_write_its_config():
    class Holds(L.Layer):
        def __init__(self, inner, **kwargs):
            super().__init__(**kwargs)
            self.inner = inner

    with pytest.raises(NotImplementedError, match=r"Layer Holds has constructor arguments.*"
                                                  r"override get_config"):
        Holds(L.Dense(2)).get_config()

    class Written(Holds):
        def get_config(self):
            return {**super().get_config(), "inner": L.serialize(self.inner)}

    assert Written(L.Dense(2)).get_config()["inner"]["class_name"] == "Dense"


def test_deserialize_errors_name_the_record():
    with pytest.raises(ValueError, match=r"Could not interpret layer identifier: 'Conv9D'"):
        L.deserialize({"class_name": "Conv9D", "config": {}})
    with pytest.raises(ValueError, match=r"expected a layer record"):
        L.deserialize("Dense")
    with pytest.raises(TypeError, match=r"serialize: expected a jt.layers.Layer, got int"):
        L.serialize(3)


# ---------------------------------------------------------------------------
# initializers


INITIALIZERS = [
    (I.Zeros(), {}), (I.Ones(), {}), (I.Constant(2.0), {"value": 2.0}),
    (I.RandomUniform(), {"seed": None, "minval": -0.05, "maxval": 0.05}),
    (I.RandomNormal(seed=1), {"seed": 1, "mean": 0.0, "stddev": 0.05}),
    (I.TruncatedNormal(), {"seed": None, "mean": 0.0, "stddev": 0.05}),
    (I.VarianceScaling(), {"seed": None, "scale": 1.0, "mode": "fan_in",
                           "distribution": "truncated_normal", "input_axes": None,
                           "output_axes": None}),
] + [(cls(seed=2), {"seed": 2, "input_axes": None, "output_axes": None}) for cls in (
    I.GlorotUniform, I.GlorotNormal, I.HeNormal, I.HeUniform, I.LecunNormal, I.LecunUniform)]


@pytest.mark.parametrize("init, config", INITIALIZERS, ids=lambda v: type(v).__name__)
def test_initializer_configs_are_keras_3_and_round_trip(init, config):
    assert init.get_config() == config
    rec = I.serialize(init)
    assert rec == record("keras.initializers", type(init).__name__, config)
    again = I.deserialize(json.loads(json.dumps(rec)))
    assert type(again) is type(init) and again.get_config() == config
    assert type(I.get(rec)) is type(init)
    if init.get_config().get("seed") is not None:  # a fixed seed draws the same values
        np.testing.assert_array_equal(again((3, 4)).numpy(), init((3, 4)).numpy())


def test_constant_with_an_array_value():
    init = I.Constant(np.array([1.0, 2.0]))
    config = init.get_config()
    assert config == {"value": {"class_name": "__numpy__",
                                "config": {"value": [1.0, 2.0], "dtype": "float64"}}}
    again = I.Constant.from_config(json.loads(json.dumps(config)))
    np.testing.assert_array_equal(again((2, 2)).numpy(), [[1.0, 2.0], [1.0, 2.0]])
    assert I.Constant(np.float32(0.5)).get_config() == {"value": 0.5}


def test_variance_scaling_fans_from_input_and_output_axes():
    # an EinsumDense-like kernel (in, heads, dim): fan_in = 6, fan_out = 4 * 5
    assert I.compute_fans((6, 4, 5), input_axes=[0], output_axes=[1, 2]) == (6.0, 20.0)
    init = I.VarianceScaling(2.0, "fan_out", input_axes=[0], output_axes=[1, 2])
    assert init.variance((6, 4, 5)) == 2.0 / 20
    assert I.GlorotUniform(input_axes=[0], output_axes=[1, 2]).variance((6, 4, 5)) == 1.0 / 13
    assert I.VarianceScaling().variance((6, 4, 5)) == 1.0 / (4 * 6)  # a conv kernel's fans


def test_initializer_errors_name_the_identifier():
    with pytest.raises(ValueError, match=r"initializer identifier: 'Orthogonal'"):
        I.get({"class_name": "Orthogonal", "config": {}})
    with pytest.raises(ValueError, match=r"Could not interpret initializer identifier: 'nope'"):
        I.get("nope")


class Fixed(L.Layer):
    """A user layer whose __init__ takes none of the base arguments."""

    def __init__(self, k):
        super().__init__()
        self.k = k

    def call(self, x):
        return x * self.k


def test_from_config_sets_the_base_entries_a_user_init_does_not_take():
    layer = Fixed(2.5)
    layer.trainable = False
    config = layer.get_config()
    assert config["k"] == 2.5 and config["trainable"] is False
    again = Fixed.from_config({**config, "dtype": "float64", "activity_regularizer": "l2"})
    assert again.name == layer.name and again.k == 2.5 and not again.trainable
    assert again.dtype == jt.float64 and isinstance(again.activity_regularizer, R.L2)
