"""``jt.keras.saving``: Keras 3's registry (``register_keras_serializable``, the registered
names ``"package>name"``, ``get_registered_object``/``_name``, ``get_custom_objects``,
``custom_object_scope``), the generic ``serialize_keras_object`` /
``deserialize_keras_object`` (every exported layer class round-trips, as in Keras' own
layer tests), the archive's functions under ``saving``, and a registered layer, loss,
metric and activation that load from a ``.keras`` file in a new process without
``custom_objects``. The expected records are Keras 3.15's for the same objects (checked
against Keras in ``test_vs_tensorflow_saving.py``)."""

import inspect
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import jittape as jt
from jittape.keras import layers as L
from jittape.keras import saving as S
from jittape.keras.saving import object_registration as _registry

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _registry_restored():
    """Each test's registrations end with it."""
    objects, names = dict(_registry.GLOBAL_CUSTOM_OBJECTS), dict(_registry.GLOBAL_CUSTOM_NAMES)
    yield
    for live, saved in ((_registry.GLOBAL_CUSTOM_OBJECTS, objects),
                        (_registry.GLOBAL_CUSTOM_NAMES, names)):
        live.clear()
        live.update(saved)


def policy():
    return {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
            "registered_name": None}


def function_record(config):
    return {"module": "builtins", "class_name": "function", "config": config,
            "registered_name": "function"}


# ---------------------------------------------------------------------------
# the namespace


def test_the_namespace_has_keras_3_names():
    # dir(keras.saving) in Keras 3.15, less KerasFileEditor (a tool for editing files)
    keras_names = {"CustomObjectScope", "custom_object_scope", "deserialize_keras_object",
                   "get_custom_objects", "get_registered_name", "get_registered_object",
                   "load_model", "load_weights", "register_keras_serializable", "save_model",
                   "save_weights", "serialize_keras_object"}
    assert keras_names <= set(dir(S)) and keras_names <= set(S.__all__)
    assert S.save_model is jt.keras.models.save_model
    assert S.load_model is jt.keras.models.load_model
    assert S.custom_object_scope is S.CustomObjectScope
    assert jt.keras.saving is S
    with pytest.raises(AttributeError, match="no attribute 'save_modle'"):
        S.save_modle  # noqa: B018
    # keras.utils' aliases of them (dir(keras.utils) in Keras 3.15)
    for name in ("CustomObjectScope", "custom_object_scope", "deserialize_keras_object",
                 "get_custom_objects", "get_registered_name", "get_registered_object",
                 "register_keras_serializable", "serialize_keras_object"):
        assert getattr(jt.keras.utils, name) is getattr(S, name), name


def test_save_weights_and_load_weights(tmp_path):
    model = jt.Sequential([jt.Input((3,)), L.Dense(2)])
    other = jt.Sequential([jt.Input((3,)), L.Dense(2)])
    path = tmp_path / "m.weights.h5"
    S.save_weights(model, path)
    S.load_weights(other, path)
    for a, b in zip(model.get_weights(), other.get_weights()):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="max_shard_size"):
        S.save_weights(model, path, max_shard_size=1)


# ---------------------------------------------------------------------------
# the registry


def test_registered_names_are_package_and_name():
    @S.register_keras_serializable()
    class Scale(L.Layer):
        pass

    @S.register_keras_serializable("my_pkg", "Bee")
    def my_loss(y, p):
        return (y - p) ** 2

    assert S.get_registered_name(Scale) == "Custom>Scale"
    assert S.get_registered_name(my_loss) == "my_pkg>Bee"
    assert S.get_registered_object("Custom>Scale") is Scale
    assert S.get_registered_object("my_pkg>Bee") is my_loss
    assert S.get_registered_object("Scale") is None  # only under its registered name
    assert S.get_custom_objects()["Custom>Scale"] is Scale
    # not registered: its own name (Keras' answer for its built-ins too)
    assert S.get_registered_name(L.Dense) == "Dense"


def test_registering_twice_under_one_name_keeps_the_last():
    @S.register_keras_serializable(name="A")
    class First(L.Layer):
        pass

    @S.register_keras_serializable(name="A")
    class Second(L.Layer):
        pass

    assert S.get_registered_object("Custom>A") is Second
    assert S.get_registered_name(First) == S.get_registered_name(Second) == "Custom>A"


def test_a_class_without_get_config_cannot_be_registered():
    with pytest.raises(ValueError, match="does not have a get_config"):
        S.register_keras_serializable()(type("NoConfig", (), {}))
    with pytest.raises(TypeError, match="package"):
        S.register_keras_serializable(L.Dense)  # used without parentheses


def test_get_registered_object_looks_in_scopes_registry_then_arguments():
    S.get_custom_objects()["K"] = "global"
    assert S.get_registered_object("K", custom_objects={"K": "arg"}) == "global"
    with S.custom_object_scope({"K": "scope"}):
        assert S.get_registered_object("K") == "scope"  # a scope first, as in Keras
    assert S.get_registered_object("x", custom_objects={"x": 1}) == 1
    assert S.get_registered_object("y", module_objects={"y": 2}) == 2
    assert S.get_registered_object("y", custom_objects={"y": 1}, module_objects={"y": 2}) == 1
    assert S.get_registered_object("nothing") is None


def test_custom_object_scope_is_a_context_manager_that_nests():
    with S.custom_object_scope({"a": 1}) as scope:
        assert isinstance(scope, S.CustomObjectScope)
        with S.CustomObjectScope({"b": 2}):
            # the names add up (Keras 3.15's inner scope hides the outer one's instead)
            assert S.get_registered_object("a") == 1 and S.get_registered_object("b") == 2
        assert S.get_registered_object("b") is None and S.get_registered_object("a") == 1
    assert S.get_registered_object("a") is None
    assert "a" not in S.get_custom_objects()  # a scope's names are not the global dict's


def test_get_custom_objects_is_the_live_dict():
    class Twice(L.Layer):
        def call(self, x):
            return 2.0 * x

    record = S.serialize_keras_object(Twice(name="t"))
    assert record["registered_name"] == "Twice"
    with pytest.raises(TypeError, match="Could not locate class 'Twice'"):
        S.deserialize_keras_object(record)
    S.get_custom_objects()["Twice"] = Twice  # Keras' older way of registering
    assert type(S.deserialize_keras_object(record)) is Twice


# ---------------------------------------------------------------------------
# serialize_keras_object / deserialize_keras_object


def test_plain_values_serialize_as_keras_writes_them():
    # serialize_keras_object's answers in Keras 3.15
    assert S.serialize_keras_object(
        [1, (2, 3), {"a": 1.5, "b": None}, "s", b"x", slice(1, 2), ...]) == [
        1, (2, 3), {"a": 1.5, "b": None}, "s", {"class_name": "__bytes__", "config": {"value": "x"}},
        {"class_name": "__slice__", "config": {"start": 1, "stop": 2, "step": None}},
        {"class_name": "__ellipsis__", "config": {}}]
    assert S.serialize_keras_object(np.float32(2)) == 2.0
    assert S.serialize_keras_object(np.arange(3)) == {
        "class_name": "__numpy__", "config": {"value": [0, 1, 2], "dtype": "int64"}}
    back = S.deserialize_keras_object(S.serialize_keras_object(
        [b"x", slice(1, None, 2), ..., np.arange(3), {"k": 4}]))
    assert back[:3] == [b"x", slice(1, None, 2), ...] and back[4] == {"k": 4}
    np.testing.assert_array_equal(back[3], np.arange(3))
    t = S.deserialize_keras_object(S.serialize_keras_object(jt.constant([1.0, 2.0])))
    np.testing.assert_array_equal(t.numpy(), [1.0, 2.0])
    assert S.deserialize_keras_object("hello") == "hello"  # a name of nothing stays a string


def test_jittape_objects_serialize_as_their_family_does():
    cases = [L.Dense(2, name="d"), jt.losses.Huber(), jt.metrics.AUC(), jt.optimizers.Adam(0.1),
             jt.keras.initializers.GlorotUniform(), jt.keras.regularizers.L2(0.1),
             jt.keras.constraints.MaxNorm(2.0),
             jt.optimizers.schedules.ExponentialDecay(0.1, 10, 0.9)]
    families = [jt.layers, jt.losses, jt.metrics, jt.optimizers, jt.keras.initializers,
                jt.keras.regularizers, jt.keras.constraints, jt.optimizers.schedules]
    for obj, family in zip(cases, families):
        record = S.serialize_keras_object(obj)
        assert record == family.serialize(obj), type(obj).__name__
        back = S.deserialize_keras_object(json.loads(json.dumps(record)))
        assert type(back) is type(obj) and back is not obj
        assert back.get_config() == obj.get_config(), type(obj).__name__
    record = S.serialize_keras_object(jt.losses.Huber())
    assert (record["module"], record["class_name"], record["registered_name"]) == (
        "keras.losses", "Huber", None)


def test_functions_serialize_by_their_registered_names():
    @S.register_keras_serializable("my_pkg", "Bee")
    def my_loss(y, p):
        return (y - p) ** 2

    def plain(x):
        return x

    assert S.serialize_keras_object(my_loss) == function_record("my_pkg>Bee")
    assert S.serialize_keras_object(plain) == function_record("plain")
    assert S.serialize_keras_object(jt.keras.activations.relu) == function_record("relu")
    assert S.serialize_keras_object(jt.losses.mean_squared_error) == function_record(
        "mean_squared_error")
    assert S.deserialize_keras_object(function_record("my_pkg>Bee")) is my_loss
    assert S.deserialize_keras_object(function_record("Bee")) is my_loss  # Keras finds it too
    assert S.deserialize_keras_object("my_pkg>Bee") is my_loss
    assert S.deserialize_keras_object(function_record("relu")) is jt.keras.activations.relu
    assert S.deserialize_keras_object(function_record("plain"),
                                      custom_objects={"plain": plain}) is plain
    with pytest.raises(TypeError, match="Could not locate function 'plain'"):
        S.deserialize_keras_object(function_record("plain"))


def test_a_registered_layer_and_a_plain_class_round_trip():
    @S.register_keras_serializable(package="my_pkg")
    class Scale(L.Layer):
        def __init__(self, factor=2.0, **kwargs):
            super().__init__(**kwargs)
            self.factor = factor

        def call(self, x):
            return self.factor * x

        def get_config(self):
            return {**super().get_config(), "factor": self.factor}

    layer = Scale(3.0, name="s")
    layer(np.ones((1, 2), np.float32))
    record = S.serialize_keras_object(layer)
    assert record == {"module": __name__, "class_name": "Scale",
                      "config": {"name": "s", "trainable": True, "dtype": policy(),
                                 "factor": 3.0},
                      "registered_name": "my_pkg>Scale",
                      "build_config": {"input_shape": (None, 2)}}
    back = S.deserialize_keras_object(json.loads(json.dumps(record)))
    assert type(back) is Scale and back.factor == 3.0 and back.built

    class Settings:  # no family's: Keras' record, read with from_config
        def __init__(self, size=1):
            self.size = size

        def get_config(self):
            return {"size": self.size}

        @classmethod
        def from_config(cls, config):
            return cls(**config)

    S.register_keras_serializable()(Settings)
    record = S.serialize_keras_object(Settings(5))
    assert record == {"module": __name__, "class_name": "Settings", "config": {"size": 5},
                      "registered_name": "Custom>Settings"}
    assert S.deserialize_keras_object(record).size == 5


def test_records_that_name_nothing_are_errors():
    with pytest.raises(TypeError, match="Could not locate class 'Dense'"):
        S.deserialize_keras_object({"class_name": "Dense", "config": {"units": 2}})  # no module
    with pytest.raises(TypeError, match="Could not locate class 'Zzz'.*register_keras_serial"):
        S.deserialize_keras_object({"class_name": "Zzz", "config": {}, "module": "foo",
                                    "registered_name": "Zzz"})
    with pytest.raises(TypeError, match="could not parse config"):
        S.deserialize_keras_object(object())
    with pytest.raises(TypeError, match="get_config"):
        S.serialize_keras_object(object())


def test_a_lambda_needs_safe_mode_off():
    with pytest.warns(UserWarning, match="lambda"):
        record = S.serialize_keras_object(lambda x, k=3: x + k)
    assert record["class_name"] == "__lambda__"
    with pytest.raises(ValueError, match="safe_mode=False"):
        S.deserialize_keras_object(record)
    assert S.deserialize_keras_object(json.loads(json.dumps(record)), safe_mode=False)(1) == 4


# every layer class jittape exports, as Keras' layer tests round-trip each of theirs; a
# class that needs arguments has them here (a new layer without an entry fails the test)
LAYER_ARGS = {
    "Activation": dict(activation="tanh"),
    "Dense": dict(units=3, activation="relu", kernel_regularizer="l2"),
    "Dot": dict(axes=1),
    "Dropout": dict(rate=0.25, seed=1),
    "InputLayer": dict(shape=(3,)),
    "Lambda": dict(function=jt.keras.activations.relu),
    "Reshape": dict(target_shape=(3, 1)),
    # convolution (the Convolution* aliases are the same classes)
    **{n: dict(filters=4, kernel_size=3, strides=2, padding="same", kernel_regularizer="l2")
       for n in ("Conv1D", "Conv2D", "Conv3D", "Convolution1D", "Convolution2D",
                 "Convolution3D")},
    **{n: dict(filters=2, kernel_size=3, strides=2, output_padding=1)
       for n in ("Conv1DTranspose", "Conv2DTranspose", "Conv3DTranspose",
                 "Convolution1DTranspose", "Convolution2DTranspose", "Convolution3DTranspose")},
    **{n: dict(kernel_size=2, depth_multiplier=3, data_format="channels_first")
       for n in ("DepthwiseConv1D", "DepthwiseConv2D")},
    **{n: dict(filters=2, kernel_size=3, depth_multiplier=2, pointwise_initializer="he_normal")
       for n in ("SeparableConv1D", "SeparableConv2D", "SeparableConvolution1D",
                 "SeparableConvolution2D")},
    # pooling (Keras 3's average pools need a pool size; the Avg* aliases are the same classes)
    **{n: dict(pool_size=3, strides=2, padding="same")
       for n in ("AveragePooling1D", "AveragePooling2D", "AveragePooling3D", "AvgPool1D",
                 "AvgPool2D", "AvgPool3D")},
    # image preprocessing
    "CenterCrop": dict(height=4, width=5),
    "RandomBrightness": dict(factor=0.2, value_range=(0, 1), seed=3),
    "RandomContrast": dict(factor=(0.1, 0.4), seed=3),
    "RandomCrop": dict(height=4, width=5, seed=3),
    "RandomRotation": dict(factor=0.1, fill_mode="nearest", seed=3),
    "RandomTranslation": dict(height_factor=0.1, width_factor=(-0.2, 0.3), fill_mode="wrap"),
    "RandomZoom": dict(height_factor=(-0.2, 0.1), fill_mode="constant", fill_value=1.0),
    "Rescaling": dict(scale=1 / 255.0, offset=-0.5),
    "Resizing": dict(height=6, width=7, interpolation="nearest", crop_to_aspect_ratio=True),
    # reshaping and noise
    "Permute": dict(dims=(2, 1)),
    "RepeatVector": dict(n=3),
    "AlphaDropout": dict(rate=0.2, seed=2),
    "GaussianDropout": dict(rate=0.3, seed=2),
    "GaussianNoise": dict(stddev=0.5, seed=2),
    **{n: dict(rate=0.4, seed=2)
       for n in ("SpatialDropout1D", "SpatialDropout2D", "SpatialDropout3D")},
}


def _exported_layer_classes():
    return sorted(n for n, c in vars(L).items()
                  if inspect.isclass(c) and issubclass(c, L.Layer) and not n.startswith("_"))


@pytest.mark.parametrize("name", _exported_layer_classes())
def test_every_exported_layer_round_trips_through_keras_records(name):
    cls = getattr(L, name)
    layer = cls(**LAYER_ARGS.get(name, {}), name=f"my_{name.lower()}")
    record = S.serialize_keras_object(layer)
    # an alias (Convolution2D) is written under its class's name, as Keras writes it
    assert record["class_name"] == cls.__name__ and record["module"] == "keras.layers"
    assert record["registered_name"] is None
    back = S.deserialize_keras_object(json.loads(json.dumps(record)))
    assert type(back) is cls and back is not layer
    # a tuple argument comes back from JSON as a list, as it does in Keras
    assert json.loads(json.dumps(back.get_config())) == json.loads(json.dumps(layer.get_config()))
    assert back.name == layer.name


def test_the_layer_table_covers_the_exports():
    assert len(_exported_layer_classes()) >= 18  # the classes jt.keras.layers exports today
    assert set(LAYER_ARGS) <= set(_exported_layer_classes())


# ---------------------------------------------------------------------------
# .keras files in a new process


MODULE = '''
import jittape as jt

register = jt.keras.saving.register_keras_serializable


@register(package="mine")
class Scale(jt.layers.Layer):
    def __init__(self, factor=2.0, **kwargs):
        super().__init__(**kwargs)
        self.factor = factor

    def build(self, input_shape):
        self.w = self.add_weight(shape=(input_shape[-1],), initializer="ones", name="w")

    def call(self, x):
        return self.factor * self.w * x

    def get_config(self):
        return {**super().get_config(), "factor": self.factor}


@register(package="mine")
def half_mse(y_true, y_pred):
    return 0.5 * jt.ops.reduce_mean(jt.ops.square(y_true - y_pred), axis=-1)


@register(package="mine")
def abs_err(y_true, y_pred):
    return jt.ops.reduce_mean(jt.ops.abs(y_true - y_pred), axis=-1)


@register(package="mine")
def soft_relu(x):
    return jt.ops.nn.softplus(x) - 0.5
'''

SAVE = '''
import numpy as np
import jittape as jt
import custom_parts as cp

x = np.random.default_rng(0).standard_normal((8, 3)).astype("float32")
y = np.random.default_rng(1).standard_normal((8, 2)).astype("float32")
inputs = jt.Input((3,))
h = cp.Scale(3.0, name="scale")(inputs)
outputs = jt.layers.Dense(2, activation=cp.soft_relu, name="out")(h)
model = jt.Model(inputs, outputs)
model.compile(optimizer="sgd", loss=cp.half_mse, metrics=[cp.abs_err])
model.fit(x, y, epochs=1, batch_size=4, verbose=0)
model.save("m.keras")
np.save("x.npy", x)
np.save("y.npy", y)
np.save("want.npy", model.predict(x, verbose=0))
np.save("eval.npy", np.array(model.evaluate(x, y, verbose=0)))
'''

LOAD = '''
import json
import numpy as np
import jittape as jt
import custom_parts as cp  # the registrations happen at import, as in Keras

model = jt.keras.saving.load_model("m.keras")  # no custom_objects
x, y = np.load("x.npy"), np.load("y.npy")
np.testing.assert_allclose(model.predict(x, verbose=0), np.load("want.npy"), rtol=1e-6)
np.testing.assert_allclose(model.evaluate(x, y, verbose=0), np.load("eval.npy"), rtol=1e-6)
scale = model.get_layer("scale")
assert type(scale) is cp.Scale and scale.factor == 3.0, scale
assert model.get_layer("out").activation is cp.soft_relu
assert model.loss is cp.half_mse, model.loss
model.fit(x, y, epochs=1, batch_size=4, verbose=0)  # compiled again: it trains
print("LOADED", json.dumps(sorted(model.get_metrics_result())))
'''


def _run(code, cwd):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd,
                          capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": f"{ROOT}:{cwd}", "PATH": "/usr/bin:/bin"})


def test_registered_objects_load_in_a_new_process_without_custom_objects(tmp_path):
    (tmp_path / "custom_parts.py").write_text(MODULE)
    saved = _run(SAVE, tmp_path)
    assert saved.returncode == 0, saved.stderr
    with open(tmp_path / "m.keras", "rb") as f:
        import zipfile

        config = json.loads(zipfile.ZipFile(f).read("config.json"))
    layers = {r["name"]: r for r in config["config"]["layers"]}
    assert layers["scale"]["registered_name"] == "mine>Scale"
    assert layers["scale"]["module"] == "custom_parts"
    assert layers["out"]["config"]["activation"] == function_record("mine>soft_relu")
    assert config["compile_config"]["loss"] == function_record("mine>half_mse")
    assert config["compile_config"]["metrics"] == [function_record("mine>abs_err")]

    loaded = _run(LOAD, tmp_path)
    assert loaded.returncode == 0, loaded.stderr
    assert "LOADED" in loaded.stdout and "abs_err" in loaded.stdout, loaded.stdout

    # without the module imported nothing registers the layer: the error says what to do
    bare = _run('import jittape as jt\njt.keras.saving.load_model("m.keras")', tmp_path)
    assert bare.returncode != 0
    assert "'Scale'" in bare.stderr and "mine>Scale" in bare.stderr, bare.stderr
    assert "register_keras_serializable" in bare.stderr, bare.stderr


# ---------------------------------------------------------------------------
# Lambda layers: their function is a record now


def test_a_lambda_layer_with_a_registered_function_saves_and_loads(tmp_path):
    @S.register_keras_serializable("my_pkg")
    def shift(x, by=1.0):
        return x + by

    layer = L.Lambda(shift, output_shape=(3,), arguments={"by": 2.0}, name="lam")
    config = layer.get_config()
    assert config["function"] == function_record("my_pkg>shift")
    assert config["output_shape"] == [3] and config["arguments"] == {"by": 2.0}
    back = L.Lambda.from_config(json.loads(json.dumps(config)))
    assert back.function is shift and back.arguments == {"by": 2.0}
    inputs = jt.Input((3,))
    model = jt.Model(inputs, L.Lambda(shift, arguments={"by": 2.0})(L.Dense(3)(inputs)))
    model.save(tmp_path / "m.keras")
    loaded = jt.keras.saving.load_model(tmp_path / "m.keras")
    x = np.ones((2, 3), np.float32)
    np.testing.assert_allclose(loaded.predict(x, verbose=0), model.predict(x, verbose=0))


def test_a_lambda_layer_with_a_python_lambda_loads_only_unsafe(tmp_path):
    inputs = jt.Input((3,))
    model = jt.Model(inputs, L.Lambda(lambda t, k=3.0: t * k)(inputs))
    config = model.layers[1].get_config()
    assert config["function"]["class_name"] == "__lambda__"  # Keras' Lambda format
    assert set(config["function"]["config"]) == {"code", "defaults", "closure"}
    with pytest.raises(ValueError, match="safe_mode=False"):
        L.Lambda.from_config(config)  # outside any load: refused, as Keras 3.15
    model.save(tmp_path / "m.keras")
    with pytest.raises(ValueError, match="safe_mode=False"):
        jt.keras.saving.load_model(tmp_path / "m.keras")
    loaded = jt.keras.saving.load_model(tmp_path / "m.keras", safe_mode=False)
    np.testing.assert_allclose(loaded.predict(np.ones((1, 3), np.float32), verbose=0),
                               [[3.0, 3.0, 3.0]])
