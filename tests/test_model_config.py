"""Functional configs, clone_model, and the .keras archive (model.save / load_model)."""

import json
import os
import zipfile

import numpy as np
import pytest

import jittape as jt

K = jt.keras
L = jt.keras.layers
RNG = np.random.default_rng(0)
XA = RNG.random((6, 4), dtype=np.float32)
XB = RNG.random((6, 2), dtype=np.float32)


def _two_io(name="two"):
    a, b = K.Input(shape=(4,), name="a"), K.Input(shape=(2,), name="b")
    shared = L.Dense(4, activation="tanh", name="shared")
    h = L.Add(name="sum")([shared(a), L.Dense(4, name="proj")(b)])
    h2 = shared(h)  # a layer called twice
    return K.Model({"a": a, "b": b}, [L.Dense(1, name="reg")(h2), L.Dense(3, name="cls")(h)],
                   name=name)


def _same_outputs(m1, m2, inputs):
    for p, q in zip(jt.nest.flatten(m1(inputs)), jt.nest.flatten(m2(inputs))):
        np.testing.assert_allclose(p.numpy(), q.numpy(), rtol=1e-6, atol=1e-7)


def test_functional_config_round_trips_through_json():
    m = _two_io()
    cfg = m.get_config()
    assert cfg["input_layers"] == {"a": ["a", 0, 0], "b": ["b", 0, 0]}
    assert cfg["output_layers"] == [["reg", 0, 0], ["cls", 0, 0]]
    shared = next(r for r in cfg["layers"] if r["name"] == "shared")
    assert len(shared["inbound_nodes"]) == 2
    arg = shared["inbound_nodes"][1]["args"][0]
    assert arg["class_name"] == "__keras_tensor__"
    assert arg["config"]["keras_history"] == ["sum", 0, 0]
    m2 = K.Model.from_config(json.loads(json.dumps(cfg)))
    assert [l.name for l in m2.layers] == [l.name for l in m.layers]
    assert m2.get_config() == cfg
    m2.set_weights(m.get_weights())
    _same_outputs(m, m2, {"a": XA, "b": XB})


def test_nested_functional_model_in_a_config():
    inner_in = K.Input(shape=(4,))
    inner = K.Model(inner_in, L.Dense(2, name="inner_dense")(inner_in), name="inner")
    x = K.Input(shape=(4,), name="x")
    outer = K.Model(x, L.Dense(1, name="head")(inner(x)), name="outer")
    rebuilt = K.Model.from_config(outer.get_config())
    assert type(rebuilt.get_layer("inner")).__name__ == "Functional"
    rebuilt.set_weights(outer.get_weights())
    _same_outputs(outer, rebuilt, XA)


def test_clone_model_has_the_architecture_and_new_weights():
    m = _two_io()
    c = K.models.clone_model(m)
    assert [l.name for l in c.layers] == [l.name for l in m.layers]
    assert all(a is not b for a, b in zip(c.variables, m.variables))
    assert not np.allclose(c.get_weights()[0], m.get_weights()[0])
    c.set_weights(m.get_weights())
    _same_outputs(m, c, {"a": XA, "b": XB})
    seq = K.Sequential([K.Input(shape=(4,)), L.Dense(3), L.Dropout(0.5), L.Dense(1)])
    sc = K.models.clone_model(seq)
    assert sc.built and [type(l).__name__ for l in sc.layers] == ["Dense", "Dropout", "Dense"]
    renamed = K.models.clone_model(
        seq, clone_function=lambda l: type(l).from_config({**l.get_config(),
                                                           "name": "c_" + l.name}))
    assert all(l.name.startswith("c_") for l in renamed.layers)

    class Sub(K.Model):
        def __init__(self, units=2, **kw):
            super().__init__(**kw)
            self.units = units
            self.d = L.Dense(units)

        def call(self, x):
            return self.d(x)

        def get_config(self):
            return {"units": self.units, "name": self.name}

    sub = K.models.clone_model(Sub(units=5, name="s"))
    assert isinstance(sub, Sub) and sub.units == 5


def test_keras_archive_round_trip_with_compile_state(tmp_path):
    m = _two_io()
    m.compile(K.optimizers.Adam(0.01), loss=["mse", "sparse_categorical_crossentropy"],
              loss_weights=[1.0, 0.5], metrics=[[], ["accuracy"]])
    y = [RNG.random((6, 1)).astype(np.float32), RNG.integers(0, 3, 6)]
    m.fit({"a": XA, "b": XB}, y, epochs=2, verbose=0)
    path = tmp_path / "m.keras"
    m.save(path)
    with zipfile.ZipFile(path) as z:
        assert set(z.namelist()) == {"metadata.json", "config.json", "model.weights.h5"}
        record = json.loads(z.read("config.json"))
    assert record["class_name"] == "Functional" and "compile_config" in record
    loaded = K.models.load_model(path)
    _same_outputs(m, loaded, {"a": XA, "b": XB})
    assert loaded.compiled and int(loaded.optimizer.iterations) == 2
    # the optimizer's slots came back too: one more step is the same on both
    m.fit({"a": XA, "b": XB}, y, epochs=1, shuffle=False, verbose=0)
    loaded.fit({"a": XA, "b": XB}, y, epochs=1, shuffle=False, verbose=0)
    for a, b in zip(m.get_weights(), loaded.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    uncompiled = K.models.load_model(path, compile=False)
    assert not uncompiled.compiled


def test_sequential_archive_and_errors(tmp_path):
    seq = K.Sequential([K.Input(shape=(4,)), L.Dense(3, activation="relu"), L.Dense(1)])
    seq.save(tmp_path / "s.keras")
    _same_outputs(seq, K.models.load_model(tmp_path / "s.keras"), XA)
    with pytest.raises(ValueError, match="Invalid filepath extension"):
        seq.save(tmp_path / "s.h5")
    with pytest.raises(FileExistsError):
        seq.save(tmp_path / "s.keras", overwrite=False)
    (tmp_path / "bad.keras").write_bytes(b"not a zip")
    with pytest.raises(zipfile.BadZipFile):
        K.models.load_model(tmp_path / "bad.keras")


def test_a_failed_save_keeps_the_previous_archive(tmp_path, monkeypatch):
    seq = K.Sequential([K.Input(shape=(4,)), L.Dense(2)])
    path = tmp_path / "s.keras"
    seq.save(path)
    before = path.read_bytes()
    from jittape.keras.saving import weights as saving

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(saving, "save_weights", boom)
    with pytest.raises(OSError, match="disk full"):
        seq.save(path)
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["s.keras"]


def test_load_model_finds_a_custom_loss_in_custom_objects(tmp_path):
    def scaled_mse(y_true, y_pred):
        return 2.0 * jt.reduce_mean(jt.square(y_true - y_pred), axis=-1)

    seq = K.Sequential([K.Input(shape=(4,)), L.Dense(1)])
    seq.compile("sgd", loss=scaled_mse)
    seq.save(tmp_path / "c.keras")
    with pytest.raises(ValueError, match="scaled_mse"):
        K.models.load_model(tmp_path / "c.keras")
    loaded = K.models.load_model(tmp_path / "c.keras", custom_objects={"scaled_mse": scaled_mse})
    y = RNG.random((6, 1)).astype(np.float32)
    np.testing.assert_allclose(loaded.evaluate(XA, y, verbose=0),
                               2 * ((seq.predict(XA, verbose=0) - y) ** 2).mean(), rtol=1e-5)
