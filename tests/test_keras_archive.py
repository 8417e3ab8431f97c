"""Loading ``.keras`` archives that tf.keras wrote, without TensorFlow: the fixture
``tests/data/keras_bn_dropout.keras`` (made by tests/data/make_keras_archive.py) records
``"mask": null`` for its BatchNormalization and ``"training": false`` for its Dropout,
as Keras 3 does. Also the call arguments behind them: BatchNormalization's and Lambda's
``mask``, and a functional model's ``training`` winning over a recorded one."""

import json
import os
import zipfile

import numpy as np

import jittape as jt

K = jt.keras
L = jt.keras.layers
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
ARCHIVE = os.path.join(DATA, "keras_bn_dropout.keras")


def test_a_tf_keras_archive_with_batch_norm_and_dropout_loads():
    with zipfile.ZipFile(ARCHIVE) as z:
        config = json.loads(z.read("config.json"))
    kwargs = {r["class_name"]: r["inbound_nodes"][0]["kwargs"]
              for r in config["config"]["layers"] if r["inbound_nodes"]}
    assert kwargs["BatchNormalization"] == {"mask": None}  # what the fixture is for
    assert kwargs["Dropout"] == {"training": False}
    ref = np.load(os.path.join(DATA, "keras_bn_dropout.npz"))
    model = K.models.load_model(ARCHIVE)
    got = model.predict([ref["a"], ref["b"]], verbose=0)
    np.testing.assert_allclose(got, ref["predict"], rtol=1e-5, atol=1e-6)
    assert [layer.name for layer in model.layers] == [
        "a", "dense", "bn", "dropout", "b", "concat", "out"]
    # the recorded training=False does not stop the dropout of a training call (BN
    # frozen, so that the dropout alone can change the outputs)
    model.get_layer("bn").trainable = False
    x = [ref["a"], ref["b"]]
    np.testing.assert_allclose(model(x, training=False).numpy(), ref["predict"], rtol=1e-5,
                               atol=1e-6)
    assert not np.allclose(model(x, training=True).numpy(), ref["predict"], atol=1e-3)


def test_recorded_training_yields_to_the_models():
    inp = K.Input((400,))
    model = K.Model(inp, L.Dropout(0.5)(inp, training=True))
    x = np.ones((2, 400), np.float32)
    assert np.mean(model(x).numpy() == 0) > 0.3  # None: the recorded True
    np.testing.assert_array_equal(model(x, training=False).numpy(), x)


def test_batch_norm_takes_a_mask_as_keras():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 5, 3)).astype(np.float32)
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 0]], bool)
    bn = L.BatchNormalization(momentum=0.0, epsilon=1e-3)
    y = bn(x, training=True, mask=mask).numpy()
    keep = np.broadcast_to(mask[..., None], x.shape)
    n = keep.sum((0, 1)) + 1e-7
    mean = np.where(keep, x, 0).sum((0, 1)) / n
    var = np.where(keep, x - mean, 0).__pow__(2).sum((0, 1)) / n
    np.testing.assert_allclose(y, (x - mean) / np.sqrt(var + 1e-3), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(bn.moving_mean.numpy(), mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bn.moving_variance.numpy(), var, rtol=1e-5, atol=1e-6)
    # inference ignores the mask; None is the plain layer
    np.testing.assert_allclose(bn(x, mask=mask).numpy(), bn(x, mask=None).numpy())
    try:
        bn(x, training=True, mask=mask[:, :, None])
    except ValueError as e:
        assert "one dimension less" in str(e) and "(2, 5, 1)" in str(e)
    else:
        raise AssertionError("a mask of the inputs' rank was taken")


def test_lambda_passes_mask_and_training_to_a_function_that_takes_them():
    seen = {}

    def fn(x, mask=None, training=None):
        seen.update(mask=mask, training=training)
        return x * 2

    out = L.Lambda(fn)(np.ones((1, 2), np.float32), mask=None, training=True)
    np.testing.assert_array_equal(out.numpy(), [[2.0, 2.0]])
    assert seen == {"mask": None, "training": True}
    plain = L.Lambda(lambda x: x + 1)
    np.testing.assert_array_equal(plain(np.zeros((1, 2)), mask=None).numpy(), [[1.0, 1.0]])
