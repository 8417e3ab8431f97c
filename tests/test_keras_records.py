"""jittape.keras.saving.serialization, the one writer and reader of Keras 3's object records for every family
(layers, initializers, regularizers, constraints, activations, losses, metrics,
optimizers, schedules): the records written (Keras 3.15's forms, written out here), bare
names, records and function records read back, your own objects found through
``custom_objects`` or an enclosing scope before jittape's, errors that name the kind, the
identifier and the remedy, and objects rebuilt from records computing the same inside
``@jt.function`` as eagerly and as numpy's formulas."""

import numpy as np
import pytest
from tolerances import tol

import jittape as jt
from jittape.keras.saving import serialization as _config
from jittape.keras import constraints as C
from jittape.keras import initializers as I
from jittape.keras import layers as L
from jittape.keras import losses as Ls
from jittape.keras import metrics as M
from jittape.keras import optimizers as O
from jittape.keras import regularizers as R
from jittape.keras.optimizers import schedules as S

T32 = tol("float32")


def double(x):
    return 2.0 * x


def function_record(name):
    """Keras 3's record of a function, in every family (the function's type's module)."""
    return {"module": "builtins", "class_name": "function", "config": name,
            "registered_name": "function"}


# user classes: subclasses of built-in ones, so each is a class of the user's own
class Half(R.L2):
    pass


class Cap(C.NonNeg):
    pass


class Fill(I.Constant):
    pass


class Abs(Ls.MeanAbsoluteError):
    pass


class Count(M.Sum):
    pass


class Shift(L.Layer):
    pass


class Fast(O.SGD):
    pass


class Slow(S.ExponentialDecay):
    pass


# (kind, serialize, deserialize, a built-in object, Keras' module, a user object)
FAMILIES = [
    ("regularizer", R.serialize, R.deserialize, R.L2(0.1), "keras.regularizers", Half(0.1)),
    ("constraint", C.serialize, C.deserialize, C.NonNeg(), "keras.constraints", Cap()),
    ("initializer", I.serialize, I.deserialize, I.Constant(2.0), "keras.initializers",
     Fill(2.0)),
    ("loss", Ls.serialize, Ls.deserialize, Ls.MeanAbsoluteError(), "keras.losses", Abs()),
    ("metric", M.serialize, M.deserialize, M.Sum(), "keras.metrics", Count()),
    ("layer", L.serialize, L.deserialize, L.Layer(), "keras.layers", Shift()),
    ("optimizer", O.serialize, O.deserialize, O.SGD(0.1), "keras.optimizers", Fast(0.1)),
    ("learning rate schedule", S.serialize, S.deserialize, S.ExponentialDecay(0.1, 10, 0.5),
     "keras.optimizers.schedules", Slow(0.1, 10, 0.5)),
]
IDS = [f[0] for f in FAMILIES]
# the families whose records may be a function's
FUNCTION_FAMILIES = [f for f in FAMILIES if f[0] not in ("layer", "optimizer",
                                                         "learning rate schedule")]


@pytest.mark.parametrize("kind, ser, des, builtin, module, mine", FAMILIES, ids=IDS)
def test_records_name_keras_module_for_builtins_and_yours_for_your_classes(
        kind, ser, des, builtin, module, mine):
    record = ser(builtin)
    assert list(record)[:4] == ["module", "class_name", "config", "registered_name"]
    assert (record["module"], record["class_name"], record["registered_name"]) == (
        module, type(builtin).__name__, None)
    assert record["config"] == builtin.get_config()
    assert type(des(record)) is type(builtin)
    name = type(mine).__name__
    record = ser(mine)
    assert (record["module"], record["class_name"], record["registered_name"]) == (
        __name__, name, name)
    with pytest.raises(ValueError, match=rf"Could not interpret {kind} identifier: '{name}' "
                                         rf"\(module '{__name__}'\).*custom_objects="):
        des(record)
    again = des(record, custom_objects={name: type(mine)})
    assert type(again) is type(mine) and again.get_config() == mine.get_config()


@pytest.mark.parametrize("kind, ser, des, builtin, module, mine", FAMILIES, ids=IDS)
def test_an_enclosing_scope_finds_your_classes_in_every_family(
        kind, ser, des, builtin, module, mine):
    record = ser(mine)
    with _config.custom_object_scope({type(mine).__name__: type(mine)}):
        assert type(des(record)) is type(mine)
    with pytest.raises(ValueError, match=f"{kind} identifier"):  # the scope has ended
        des(record)


@pytest.mark.parametrize("kind, ser, des, builtin, module, mine", FUNCTION_FAMILIES,
                         ids=[f[0] for f in FUNCTION_FAMILIES])
def test_a_function_is_keras_function_record_in_every_family(
        kind, ser, des, builtin, module, mine):
    assert ser(double) == function_record("double")
    with pytest.raises(ValueError, match=rf"{kind} identifier: function 'double': pass it in "
                                         r"custom_objects=\{'double': double\}"):
        des(function_record("double"))
    assert des(function_record("double"), custom_objects={"double": double}) is double
    with _config.custom_object_scope({"double": double}):
        assert des(function_record("double")) is double
    with pytest.raises(ValueError, match=rf"{kind} identifier: a lambda.*named function"):
        des({"class_name": "__lambda__", "config": {"value": "..."}})
    with pytest.raises(ValueError, match=rf"{kind} identifier: .*'config' is its name"):
        des({"class_name": "function", "config": 3})
    with pytest.raises(ValueError, match=rf"Could not interpret {kind} identifier: 7 "
                                         r"\(expected a name or a dict"):
        des(7)
    assert des(None) is None


def test_activation_records_are_function_records_and_builtins_are_names():
    assert L.Dense(2, activation=double).get_config()["activation"] == function_record(
        "double")
    assert L.Dense(2, activation="relu").get_config()["activation"] == "relu"
    relu = L.get_activation("relu")
    assert L.get_activation(function_record("relu")) is relu  # a built-in's record too
    with pytest.raises(ValueError, match=r"activation identifier: function 'double'"):
        L.get_activation(function_record("double"))


def test_builtin_functions_come_back_from_their_records():
    assert Ls.serialize(Ls.huber) == function_record("huber")
    assert Ls.deserialize(function_record("huber")) is Ls.huber
    assert Ls.deserialize("mse") is Ls.mse  # a bare name may be a loss function's
    assert M.deserialize(function_record("binary_accuracy")) is M.binary_accuracy
    assert type(M.deserialize("binary_accuracy")) is M.BinaryAccuracy  # a metric's: a class


def test_your_objects_come_before_jittape_names():
    # as in Keras: custom_objects are looked up first, for bare names too
    assert type(R.deserialize("l2", custom_objects={"l2": Half})) is Half
    assert type(R.deserialize("l2")) is R.L2
    assert Ls.deserialize("mse", custom_objects={"mse": double}) is double
    assert type(C.deserialize({"class_name": "NonNeg", "config": {}},
                              custom_objects={"NonNeg": Cap})) is Cap


def test_one_scope_serves_a_layer_record_and_everything_in_it():
    layer = L.Dense(2, activation=double, kernel_regularizer=Half(0.3),
                    kernel_constraint=Cap(), kernel_initializer=Fill(0.5))
    record = L.serialize(layer)
    for key, name in [("activation", "double"), ("kernel_regularizer", "Half"),
                      ("kernel_constraint", "Cap"), ("kernel_initializer", "Fill")]:
        with pytest.raises(ValueError, match=f"'{name}'.*custom_objects"):
            L.deserialize(record, custom_objects={
                n: o for n, o in [("double", double), ("Half", Half), ("Cap", Cap),
                                  ("Fill", Fill)] if n != name})
    again = L.deserialize(record, custom_objects={"double": double, "Half": Half,
                                                  "Cap": Cap, "Fill": Fill})
    assert again.activation is double and type(again.kernel_regularizer) is Half
    assert type(again.kernel_constraint) is Cap and type(again.kernel_initializer) is Fill
    assert again.kernel_regularizer.l2 == 0.3 and again.kernel_initializer.value == 0.5


@pytest.mark.parametrize("des, kind, name, hint", [
    (R.deserialize, "regularizer", "l3", "known names: L1, L1L2, L2"),
    (C.deserialize, "constraint", "maxnorm", "known names: Constraint, MaxNorm"),
    (I.deserialize, "initializer", "glorot", "known names: Constant"),
    (Ls.deserialize, "loss", "nope", "known names: BCE"),
    (Ls.deserialize, "loss", "CTC", r"\(a Keras loss jittape does not have yet\)"),
    (M.deserialize, "metric", "F1Score", r"\(a Keras metric jittape does not have yet\)"),
])
def test_unknown_names_are_named_with_what_is_known(des, kind, name, hint):
    with pytest.raises(ValueError, match=rf"Could not interpret {kind} identifier: "
                                         rf"'{name}'.*{hint}"):
        des(name)


def test_unknown_record_classes_name_jittapes():
    with pytest.raises(ValueError, match=r"regularizer identifier: 'L3': none of jittape's "
                                         r"classes \(L1, L1L2, L2, .*custom_objects=\{'L3': L3\}"):
        R.deserialize({"class_name": "L3", "config": {}})
    with pytest.raises(ValueError, match=r"metric identifier: 'F1Score' \(a Keras metric "
                                         "jittape does not have yet\\)"):
        M.deserialize({"class_name": "F1Score", "config": {}})
    with pytest.raises(ValueError, match=r"Dense's 'config' must be a dict, got \[2\]"):
        R.deserialize({"class_name": "Dense", "config": [2]}, custom_objects={"Dense": R.L2})


def test_optimizer_records_are_read_in_any_case_and_yours_by_name():
    assert type(O.deserialize({"class_name": "ADAM", "config": {}})) is O.Adam
    assert type(O.deserialize({"class_name": "rmsprop", "config": {}})) is O.RMSprop
    with pytest.raises(ValueError, match=r"optimizer identifier: 'Adamm'.*adadelta, adagrad"):
        O.deserialize({"class_name": "Adamm", "config": {}})
    # a schedule inside an optimizer's config: one custom_objects serves both
    record = O.serialize(Fast(Slow(0.1, 10, 0.5)))
    again = O.deserialize(record, custom_objects={"Fast": Fast, "Slow": Slow})
    assert type(again) is Fast and type(again._schedule) is Slow


def test_objects_from_records_compute_the_same_inside_function():
    huber = Ls.deserialize(Ls.serialize(Ls.Huber(delta=0.5)))
    mse = Ls.deserialize(Ls.serialize(Ls.mean_squared_error))
    penalty = R.deserialize(R.serialize(R.L1L2(l1=0.01, l2=0.02)))
    cap = C.deserialize(C.serialize(C.MaxNorm(1.0)))

    def step(y, p, w):
        return huber(y, p) + jt.reduce_mean(mse(y, p)) + penalty(w), cap(w)

    compiled = jt.function(step)
    rng = np.random.default_rng(3)
    for _ in range(2):  # new values each call: one trace
        y, p = rng.standard_normal((2, 4, 3)).astype(np.float32)
        w = (rng.standard_normal((3, 2)) * 2).astype(np.float32)
        e = p - y
        want_huber = np.where(np.abs(e) <= 0.5, 0.5 * e * e, 0.5 * np.abs(e) - 0.125).mean()
        want = want_huber + (e * e).mean() + 0.01 * np.abs(w).sum() + 0.02 * (w * w).sum()
        norms = np.sqrt((w * w).sum(axis=0, keepdims=True))
        want_w = w * np.clip(norms, 0.0, 1.0) / (1e-7 + norms)
        args = [jt.constant(v) for v in (y, p, w)]
        for got, got_w in (step(*args), compiled(*args)):
            np.testing.assert_allclose(got.numpy(), want, rtol=T32.fwd_rtol, atol=T32.fwd_atol)
            np.testing.assert_allclose(got_w.numpy(), want_w, rtol=T32.fwd_rtol,
                                       atol=T32.fwd_atol)
    assert compiled.cache_info().traces == 1
