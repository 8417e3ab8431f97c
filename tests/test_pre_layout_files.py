"""Files written by the tree before the layout move (tests/data/pre_layout/, made by
tests/data/make_pre_layout.py at the commit before it) load into today's tree with the
same values: a ``.keras`` archive with its optimizer's state, a ``.weights.h5``, a saved
model and a checkpoint. None of these formats records a jittape module path."""

import os

import numpy as np

import jittape as jt

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "pre_layout")
X = np.linspace(-1, 1, 24, dtype=np.float32).reshape(6, 4)
EXPECTED = np.load(os.path.join(HERE, "expected.npz"))


def _sequential():
    return jt.keras.Sequential([jt.keras.Input((4,)), jt.keras.layers.Dense(5, activation="tanh"),
                                jt.keras.layers.Dense(2)])


def test_a_keras_archive_written_before_loads_with_its_optimizer():
    m = jt.keras.models.load_model(os.path.join(HERE, "functional.keras"))
    np.testing.assert_allclose(m.predict(X, verbose=0), EXPECTED["functional"], rtol=1e-5,
                               atol=1e-6)
    assert [type(layer).__name__ for layer in m.layers] == [
        "InputLayer", "Dense", "BatchNormalization", "Dense"]
    assert int(m.optimizer.iterations.numpy()) == int(EXPECTED["adam_iterations"]) > 0


def test_weights_and_a_checkpoint_written_before_restore():
    seq = _sequential()
    seq.load_weights(os.path.join(HERE, "sequential.weights.h5"))
    np.testing.assert_allclose(seq.predict(X, verbose=0), EXPECTED["sequential"], rtol=1e-6)
    fresh, step = _sequential(), jt.Variable(0, dtype=jt.int64)
    jt.train.Checkpoint(model=fresh, step=step).read(
        os.path.join(HERE, "ckpt", "ckpt")).assert_consumed()
    assert int(step.numpy()) == 3
    np.testing.assert_allclose(fresh.predict(X, verbose=0), EXPECTED["sequential"], rtol=1e-6)


def test_a_saved_model_written_before_loads_without_its_code():
    loaded = jt.saved_model.load(os.path.join(HERE, "saved_model"))
    np.testing.assert_allclose(np.asarray(loaded(X)), EXPECTED["affine"], rtol=1e-6)
