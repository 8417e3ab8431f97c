"""The losses of image models: Dice and Tversky (segmentation overlap), Circle (embedding
metric learning) and the generalized crossentropy, as classes and functions, with
Keras 3's configs and reductions. The numbers are those Keras 3.15 gives (its docstring
examples, and ``test_vs_tensorflow_layers_image.py`` for the rest)."""

import json

import numpy as np
import pytest
from tolerances import tol

import jittape as jt

T32 = tol("float32")
# Keras' docstring example: two 2x2 one-channel masks and predictions
Y_TRUE = [[[[1.0], [1.0]], [[0.0], [0.0]]], [[[1.0], [1.0]], [[0.0], [0.0]]]]
Y_PRED = [[[[0.0], [1.0]], [[0.0], [1.0]]], [[[0.4], [0.0]], [[0.0], [0.9]]]]
LABELS = np.array([0, 0, 1, 1, 2])
EMB = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
EMB /= np.linalg.norm(EMB, axis=1, keepdims=True)


def close(actual, expected, t=T32):
    np.testing.assert_allclose(np.asarray(actual), expected, rtol=t.fwd_rtol, atol=t.fwd_atol)


def test_dice_per_image_and_over_the_batch():
    per_image = jt.losses.Dice(axis=(1, 2, 3), reduction=None)(Y_TRUE, Y_PRED)
    close(per_image, [0.5, 0.75757575])
    close(jt.losses.Dice()(Y_TRUE, Y_PRED), 0.6164384)  # axis=None: one value for the batch
    close(jt.losses.dice(Y_TRUE, Y_PRED, axis=(1, 2, 3)), [0.5, 0.75757575])
    y, p = np.asarray(Y_TRUE), np.asarray(Y_PRED)
    weighted = jt.losses.Dice(axis=(1, 2, 3), reduction="sum")(y, p, sample_weight=[1.0, 2.0])
    close(weighted, 0.5 + 2 * 0.75757575)


def test_tversky_weighs_false_positives_and_negatives():
    y, p = np.asarray(Y_TRUE, np.float32), np.asarray(Y_PRED, np.float32)
    axes = (1, 2, 3)
    tp, fp, fn = (y * p).sum(axes), ((1 - p) * y).sum(axes), (p * (1 - y)).sum(axes)
    want = 1 - tp / (tp + 0.3 * fp + 0.7 * fn + 1e-7)
    close(jt.losses.Tversky(0.3, 0.7, axis=axes, reduction=None)(y, p), want)
    close(jt.losses.Tversky(axis=axes, reduction=None)(y, p),
          jt.losses.dice(y, p, axis=axes).numpy())  # alpha = beta = 0.5 is Dice


def test_circle_averages_over_the_samples_with_a_loss():
    values = jt.losses.Circle(reduction=None)(LABELS, EMB).numpy()
    close(values, [1.3065775e-03, 1.2634525e-03, 2.8114050e02, 3.2015930e02, 0.0])
    # the sample of a label of its own has no positive pair: its loss is 0, and it is
    # left out of the mean (4 values, not 5), as Keras masks it
    close(jt.losses.Circle()(LABELS, EMB), values.sum() / 4)
    with jt.GradientTape() as tape:
        e = jt.constant(EMB)
        tape.watch(e)
        loss = jt.losses.Circle(gamma=2.0)(LABELS, e)
    close(loss, 4.728357)
    assert np.isfinite(tape.gradient(loss, e).numpy()).all()


def test_generalized_crossentropy():
    probs = np.array([[0.7, 0.3], [0.2, 0.8], [0.6, 0.4], [0.4, 0.6]], np.float32)
    labels = np.array([0, 1, 0, 1])
    p = probs[np.arange(4), labels]
    close(jt.losses.CategoricalGeneralizedCrossEntropy(q=0.3)(labels, probs),
          ((1 - p ** 0.3) / 0.3).mean())
    close(jt.losses.categorical_generalized_cross_entropy(labels[:, None], probs, q=0.5),
          (1 - p ** 0.5) / 0.5)  # (batch, 1) labels are the (batch,) ones
    with pytest.raises(ValueError, match=r"q must be in the interval \(0, 1\)"):
        jt.losses.CategoricalGeneralizedCrossEntropy(q=1.0)


def test_configs_names_and_round_trips():
    L = jt.losses
    assert L.Dice(axis=(1, 2)).get_config() == {
        "name": "dice", "reduction": "sum_over_batch_size", "dtype": None, "axis": (1, 2)}
    assert L.Tversky(alpha=0.3).get_config()["beta"] == 0.5
    assert L.Circle().get_config() == {"name": "circle", "reduction": "sum_over_batch_size",
                                       "dtype": None, "gamma": 80.0, "margin": 0.4,
                                       "remove_diagonal": True}
    assert L.CategoricalGeneralizedCrossEntropy().get_config()["q"] == 0.5
    for loss in (L.Dice(axis=(1, 2, 3)), L.Tversky(0.2, 0.8), L.Circle(margin=0.3),
                 L.CategoricalGeneralizedCrossEntropy(q=0.2)):
        again = L.deserialize(json.loads(json.dumps(L.serialize(loss))))
        assert type(again) is type(loss)
        assert again.get_config() == json.loads(json.dumps(loss.get_config()))
    assert L.get("dice") is L.dice and isinstance(L.get("Tversky"), L.Tversky)
    close(L.Dice(axis=[1, 2, 3], reduction=None)(Y_TRUE, Y_PRED), [0.5, 0.75757575])


def test_logsumexp_of_a_fully_masked_row_is_minus_infinity():
    # TF's guard (an infinite max is taken as 0), which Circle's masked rows rely on
    x = jt.constant([[-np.inf, -np.inf], [0.0, 1.0]])
    close(jt.reduce_logsumexp(x, axis=1), [-np.inf, np.log(1 + np.e)])
