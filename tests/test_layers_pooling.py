"""The pooling layers (``jittape/keras/layers/pooling.py``): Keras 3's arguments, defaults,
configs and values (the literal values and configs below came from Keras 3 on TF 2.21;
``test_vs_tensorflow_pooling.py`` compares with Keras itself when it is installed)."""

from __future__ import annotations

import numpy as np
import pytest

import jittape as jt

L = jt.layers


def test_average_pooling_same_counts_only_the_inputs_positions():
    # Keras 3 (TF 2.21): AveragePooling2D(2, padding="same") of 1..9 in a 3x3 image
    x = np.arange(1, 10, dtype=np.float32).reshape(1, 3, 3, 1)
    np.testing.assert_array_equal(L.AveragePooling2D(2, padding="same")(x).numpy().ravel(),
                                  [3, 4.5, 7.5, 9])
    np.testing.assert_array_equal(L.MaxPooling2D(2, padding="SAME")(-x).numpy().ravel(),
                                  [-1, -3, -7, -9])


@pytest.mark.parametrize("cls, rank", [(L.MaxPooling1D, 1), (L.AveragePooling2D, 2),
                                       (L.MaxPooling3D, 3)])
def test_channels_first_equals_channels_last_transposed(cls, rank):
    x = np.random.default_rng(0).normal(size=(2, *([4] * rank), 3)).astype(np.float32)
    last = cls(2, strides=1, padding="same")(x).numpy()
    perm = (0, rank + 1, *range(1, rank + 1))
    first = cls(2, strides=1, padding="same", data_format="channels_first")(
        np.transpose(x, perm)).numpy()
    np.testing.assert_allclose(first, np.transpose(last, perm), rtol=1e-6)
    layer = cls(2, data_format="channels_first")
    assert cls(2).pool_size == (2,) * rank
    assert layer.compute_output_shape((None, 3, *([5] * rank))) == (None, 3, *([2] * rank))


def test_configs_are_keras():
    # Keras 3 (TF 2.21) get_config(), less name, trainable and dtype
    def own(layer):
        c = layer.get_config()
        assert c.pop("trainable") is True and c.pop("dtype")["config"]["name"] == "float32"
        c.pop("name")
        return c

    assert own(L.MaxPooling2D()) == {"pool_size": (2, 2), "padding": "valid",
                                     "strides": (2, 2), "data_format": "channels_last"}
    assert own(L.AveragePooling1D(3)) == {"pool_size": (3,), "padding": "valid",
                                          "strides": (3,), "data_format": "channels_last"}
    assert own(L.MaxPooling3D(strides=1, padding="same", data_format="channels_first")) == {
        "pool_size": (2, 2, 2), "padding": "same", "strides": (1, 1, 1),
        "data_format": "channels_first"}
    assert own(L.GlobalAveragePooling1D()) == {"data_format": "channels_last",
                                               "keepdims": False}
    assert own(L.GlobalMaxPooling3D(keepdims=True)) == {"data_format": "channels_last",
                                                        "keepdims": True}
    layer = L.deserialize(L.serialize(L.AvgPool2D((3, 1), strides=(1, 2), padding="same")))
    assert type(layer) is L.AveragePooling2D
    assert (layer.pool_size, layer.strides, layer.padding) == ((3, 1), (1, 2), "same")


def test_average_pooling_needs_a_pool_size_max_pooling_has_a_default():
    # Keras 3: AveragePooling2D(pool_size, ...), MaxPooling2D(pool_size=(2, 2), ...)
    with pytest.raises(TypeError):
        L.AveragePooling2D()
    assert L.MaxPooling3D().pool_size == (2, 2, 2)


def test_aliases_are_the_same_classes():
    assert L.MaxPool2D is L.MaxPooling2D and L.AvgPool3D is L.AveragePooling3D
    assert L.GlobalAvgPool1D is L.GlobalAveragePooling1D
    assert L.GlobalMaxPool2D is L.GlobalMaxPooling2D


def test_global_pooling_and_keepdims():
    x = np.random.default_rng(1).normal(size=(2, 3, 4, 5)).astype(np.float32)
    np.testing.assert_allclose(L.GlobalAveragePooling2D()(x).numpy(), x.mean(axis=(1, 2)),
                               rtol=1e-6)
    got = L.GlobalMaxPooling2D(data_format="channels_first", keepdims=True)(x).numpy()
    np.testing.assert_array_equal(got, x.max(axis=(2, 3), keepdims=True))
    assert L.GlobalMaxPooling2D(keepdims=True).compute_output_shape((None, 3, 4, 5)) == \
        (None, 1, 1, 5)
    assert L.GlobalAveragePooling3D().compute_output_shape((None, 2, 3, 4, 5)) == (None, 5)


def test_global_average_pooling_1d_takes_a_mask():
    # Keras 3 (TF 2.21): the mean of the kept steps; a sample that keeps none is NaN
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    got = L.GlobalAveragePooling1D()(x, mask=np.array([[1, 1, 0], [0, 0, 0]], bool)).numpy()
    np.testing.assert_array_equal(got[0], [2, 3, 4, 5])
    assert np.isnan(got[1]).all()
    got = L.GlobalAveragePooling1D(data_format="channels_first")(
        x, mask=np.array([[1, 1, 0, 0], [1, 0, 0, 0]], bool)).numpy()
    np.testing.assert_array_equal(got, [[0.5, 4.5, 8.5], [12, 16, 20]])


def test_bad_arguments():
    with pytest.raises(ValueError, match="padding"):
        L.MaxPooling2D(padding="full")
    with pytest.raises(ValueError, match="pool_size"):
        L.MaxPooling2D((2, 2, 2))
    with pytest.raises(ValueError, match="data_format"):
        L.GlobalMaxPooling1D(data_format="NCW")
    with pytest.raises(jt.errors.InvalidArgumentError,
                       match='layer "max_pooling2d.*expected ndim=4, found ndim=3'):
        L.MaxPooling2D()(np.ones((2, 3, 1), np.float32))


def test_a_small_convolutional_head_trains_through_pooling():
    """MaxPool2D -> GlobalAvgPool2D -> Dense in a Sequential: the gradient reaches the
    Dense weights and the input through both pooling layers."""
    model = jt.Sequential([jt.keras.Input((4, 4, 2)), L.MaxPool2D(), L.GlobalAvgPool2D(),
                           L.Dense(1)])
    x = jt.constant(np.random.default_rng(2).normal(size=(3, 4, 4, 2)).astype(np.float32))
    with jt.GradientTape() as tape:
        tape.watch(x)
        y = jt.reduce_sum(model(x))
    gx, *gw = tape.gradient(y, [x, *model.trainable_variables])
    assert tuple(model.compute_output_shape((None, 4, 4, 2))) == (None, 1)
    # each 2x2 window's maximum gets the Dense weight of its channel / 4 positions
    w = model.trainable_variables[0].numpy()[:, 0]
    np.testing.assert_allclose(gx.numpy().sum(axis=(1, 2)), np.tile(w, (3, 1)), rtol=1e-5)
    assert int(np.count_nonzero(gx.numpy())) == 3 * 4 * 2
    assert all(g is not None for g in gw)
