"""Keras 3's object records against jittape's, every family, run only where TensorFlow is
installed (``pip install -e '.[tf]'``); the default suite does not need it.

A function's record (``"module": "builtins"`` in every family, the module of the
function's type), a user class's record (its module, its class name as
``registered_name``), and each side reading the other's, with your own objects given in
``custom_objects``. The built-in classes' records are checked per family in
``test_vs_tensorflow_{regularizers,losses,metrics,optimizers}.py``.
"""

import pytest

import jittape as jt

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")


def double(x):
    return 2.0 * x


def _family(side, kind):
    return {"regularizer": side.regularizers, "constraint": side.constraints,
            "initializer": side.initializers, "loss": side.losses,
            "metric": side.metrics}[kind]


FUNCTION_KINDS = ["regularizer", "constraint", "initializer", "loss", "metric"]


@pytest.mark.parametrize("kind", FUNCTION_KINDS)
def test_function_records_match_keras(kind):
    ours, theirs = _family(jt, kind), _family(keras, kind)
    want = theirs.serialize(double)
    assert ours.serialize(double) == want
    assert ours.deserialize(want, custom_objects={"double": double}) is double
    assert theirs.deserialize(ours.serialize(double), custom_objects={"double": double}) \
        is double


def test_builtin_functions_records_match_keras_and_read_across():
    for name in ("huber", "mean_squared_error", "kl_divergence"):
        want = keras.losses.serialize(getattr(keras.losses, name))
        assert jt.losses.serialize(getattr(jt.losses, name)) == want
        assert keras.losses.deserialize(jt.losses.serialize(getattr(jt.losses, name))) \
            is getattr(keras.losses, name)
    want = keras.metrics.serialize(keras.metrics.binary_accuracy)
    assert jt.metrics.serialize(jt.metrics.binary_accuracy) == want
    assert jt.metrics.deserialize(want) is jt.metrics.binary_accuracy


def test_layer_activation_and_penalty_functions_match_keras():
    theirs = keras.layers.Dense(2, activation=double, kernel_regularizer=double).get_config()
    ours = jt.layers.Dense(2, activation=double, kernel_regularizer=double).get_config()
    for key in ("activation", "kernel_regularizer"):
        assert ours[key] == theirs[key], key
    record = jt.layers.serialize(jt.layers.Dense(2, activation=double))
    back = keras.layers.deserialize(record, custom_objects={"double": double})
    assert back.activation is double
    again = jt.layers.deserialize(keras.layers.serialize(back),
                                  custom_objects={"double": double})
    assert again.activation is double


def _bases(side):
    o = side.optimizers
    return {"regularizer": (side.regularizers.serialize, side.regularizers.L2, (0.1,)),
            "constraint": (side.constraints.serialize, side.constraints.NonNeg, ()),
            "initializer": (side.initializers.serialize, side.initializers.Constant, (2.0,)),
            "loss": (side.losses.serialize, side.losses.MeanAbsoluteError, ()),
            "metric": (side.metrics.serialize, side.metrics.Sum, ()),
            "layer": (side.layers.serialize, side.layers.Dense, (2,)),
            "optimizer": (o.serialize, o.SGD, (0.1,)),
            "learning rate schedule": (o.schedules.serialize, o.schedules.ExponentialDecay,
                                       (0.1, 10, 0.5))}


@pytest.mark.parametrize("kind", list(_bases(jt)))
def test_user_class_records_match_keras(kind):
    records = []
    for side in (jt, keras):
        serialize, base, args = _bases(side)[kind]
        mine = type("Mine", (base,), {})  # the same name and module on both sides
        records.append(serialize(mine(*args)))
    ours, theirs = records
    assert {k: ours[k] for k in ("module", "class_name", "registered_name")} == {
        k: theirs[k] for k in ("module", "class_name", "registered_name")}
    assert ours["registered_name"] == "Mine" and ours["module"] == __name__
