"""The layers image models use besides convolution and pooling: padding, cropping,
upsampling, Permute, RepeatVector, the activation layers with arguments, the noise and
dropout family, and BatchNormalization over channels (renorm too). Values are written
out from the formulas; ``test_vs_tensorflow_layers_image.py`` checks them, the configs
and the gradients against Keras 3 itself."""

import json

import numpy as np
import pytest
from tolerances import tol

import jittape as jt
from jittape.keras import layers as L

T32 = tol("float32")
RNG = np.random.default_rng(0)
IMG = RNG.standard_normal((2, 4, 5, 3)).astype(np.float32)  # (batch, rows, cols, channels)


@pytest.fixture(autouse=True)
def _unseed():
    yield
    jt.random.set_seed(None)


def close(actual, expected, t=T32):
    np.testing.assert_allclose(np.asarray(actual), expected, rtol=t.fwd_rtol, atol=t.fwd_atol)


def roundtrip(layer):
    """The layer rebuilt from its config sent through JSON, as a saved model reads it."""
    return jt.layers.deserialize(json.loads(json.dumps(jt.layers.serialize(layer))))


# ---------------------------------------------------------------------------
# reshaping


def test_zero_padding_pads_the_spatial_axes_of_either_layout():
    y = L.ZeroPadding2D(((1, 2), (0, 1)))(IMG).numpy()
    close(y, np.pad(IMG, ((0, 0), (1, 2), (0, 1), (0, 0))))
    first = np.transpose(IMG, (0, 3, 1, 2))
    y = L.ZeroPadding2D(1, data_format="channels_first")(first).numpy()
    close(y, np.pad(first, ((0, 0), (0, 0), (1, 1), (1, 1))))
    seq = IMG[:, 0]
    close(L.ZeroPadding1D((2, 0))(seq), np.pad(seq, ((0, 0), (2, 0), (0, 0))))
    vol = IMG[..., None]
    assert L.ZeroPadding3D()(vol).shape == (2, 6, 7, 5, 1)
    assert L.ZeroPadding2D((1, 2)).compute_output_shape((None, 4, None, 3)) == (None, 6, None, 3)


def test_cropping_cuts_the_borders_and_refuses_to_empty_an_axis():
    close(L.Cropping2D(((1, 0), (1, 2)))(IMG), IMG[:, 1:, 1:-2])
    close(L.Cropping2D(1, data_format="channels_first")(IMG), IMG[:, :, 1:-1, 1:-1])
    close(L.Cropping1D((0, 2))(IMG[:, 0]), IMG[:, 0, :-2])
    assert L.Cropping3D()(IMG[..., None]).shape == (2, 2, 3, 1, 1)
    with pytest.raises(jt.errors.InvalidArgumentError,
                       match=r'layer "crop".*Cropping2D.*\(\(2, 2\), \(0, 0\)\).*\(2, 4, 5, 3\)'):
        L.Cropping2D(((2, 2), (0, 0)), name="crop")(IMG)


def test_upsampling_repeats_or_interpolates():
    y = L.UpSampling2D((2, 3))(IMG).numpy()
    close(y, IMG.repeat(2, axis=1).repeat(3, axis=2))
    close(L.UpSampling1D(3)(IMG[:, 0]), IMG[:, 0].repeat(3, axis=1))
    assert L.UpSampling3D((1, 2, 1))(IMG[..., None]).shape == (2, 4, 10, 3, 1)
    # bilinear is tf.image.resize's (half-pixel centers): a constant row stays constant,
    # and a doubled ramp 0, 1 becomes 0, 0.25, 0.75, 1
    ramp = np.array([0.0, 1.0], np.float32).reshape(1, 1, 2, 1)
    y = L.UpSampling2D((1, 2), interpolation="bilinear")(ramp).numpy()
    close(y.ravel(), [0.0, 0.25, 0.75, 1.0])
    first = L.UpSampling2D(interpolation="bilinear", data_format="channels_first")
    close(first(np.transpose(IMG, (0, 3, 1, 2))).numpy(),
          np.transpose(L.UpSampling2D(interpolation="bilinear")(IMG).numpy(), (0, 3, 1, 2)))
    with pytest.raises(NotImplementedError, match=r"UpSampling2D: interpolation='bicubic'"):
        L.UpSampling2D(interpolation="bicubic")


def test_permute_and_repeat_vector():
    close(L.Permute((3, 1, 2))(IMG), np.transpose(IMG, (0, 3, 1, 2)))
    assert L.Permute((2, 1)).compute_output_shape((None, 4, 7)) == (None, 7, 4)
    with pytest.raises(ValueError, match=r"Permute: .*start from 1.*\(0, 1\)"):
        L.Permute((0, 1))
    v = IMG[:, 0, 0]
    close(L.RepeatVector(4)(v), np.repeat(v[:, None], 4, axis=1))
    with pytest.raises(jt.errors.InvalidArgumentError,
                       match=r'layer "repeat_vector\w*".*expected ndim=2, found ndim=4'):
        L.RepeatVector(2)(IMG)


def test_reshaping_configs_are_keras_and_round_trip():
    layer = L.ZeroPadding2D((1, 2), data_format="channels_first")
    config = layer.get_config()
    assert config["name"].startswith("zero_padding2d")  # Keras 3's to_snake_case
    assert config["padding"] == ((1, 1), (2, 2))
    assert config["data_format"] == "channels_first"
    assert "data_format" not in L.Cropping1D().get_config()
    assert L.UpSampling2D().get_config()["size"] == (2, 2)
    again = roundtrip(L.Cropping2D(((1, 0), (2, 1))))
    assert again.cropping == ((1, 0), (2, 1))
    assert roundtrip(L.Permute((2, 1))).dims == (2, 1)
    with pytest.raises(ValueError,
                       match=r"ZeroPadding2D: `padding` should be .*Received: padding=\(1, 2, 3\)"):
        L.ZeroPadding2D((1, 2, 3))


# ---------------------------------------------------------------------------
# activation layers


def test_relu_family_values():
    x = np.array([-2.0, -0.5, 0.5, 1.5, 7.0], np.float32)
    close(L.LeakyReLU()(x), np.where(x > 0, x, 0.3 * x))
    with pytest.warns(UserWarning, match="`alpha` is deprecated"):
        assert L.LeakyReLU(alpha=0.1).negative_slope == 0.1
    # Keras' ReLU: x above the threshold (0 below it), clipped, minus the negative part
    y = L.ReLU(max_value=6.0, negative_slope=0.1, threshold=1.0)(x)
    close(y, np.where(x > 1.0, np.minimum(x, 6.0), 0.0) - 0.1 * np.maximum(1.0 - x, 0.0))
    close(L.ReLU(max_value=1.0)(x), np.clip(x, 0.0, 1.0))
    close(L.ELU(alpha=2.0)(x), np.where(x > 0, x, 2.0 * np.expm1(x)))
    with pytest.raises(ValueError, match=r"ReLU: `threshold` cannot be None or a negative"):
        L.ReLU(threshold=-1.0)


def test_prelu_learns_one_slope_per_channel_with_shared_axes():
    layer = L.PReLU(alpha_initializer="ones", shared_axes=[1, 2])
    assert layer(IMG).shape == IMG.shape
    assert layer.alpha.shape == (1, 1, 3) and layer.alpha.path == f"{layer.name}/alpha"
    layer.alpha.assign(np.array([[[0.1, 0.2, 0.3]]], np.float32))
    close(layer(IMG), np.where(IMG > 0, IMG, IMG * np.array([0.1, 0.2, 0.3], np.float32)))
    with jt.GradientTape() as tape:
        loss = jt.reduce_sum(layer(IMG))
    close(tape.gradient(loss, layer.alpha), np.minimum(IMG, 0).sum(axis=(0, 1, 2))[None, None])
    with pytest.raises(jt.errors.InvalidArgumentError, match=r"expected axis 3 .* value 3"):
        layer(IMG[..., :2])
    assert roundtrip(layer).shared_axes == [1, 2]
    assert L.PReLU().get_config()["alpha_initializer"]["class_name"] == "Zeros"


def test_softmax_over_axes_and_with_a_mask():
    x = IMG[0, 0]  # (5, 3)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    close(L.Softmax()(x), e / e.sum(-1, keepdims=True))
    e = np.exp(IMG - IMG.max(axis=(1, 2), keepdims=True))
    close(L.Softmax(axis=[1, 2])(IMG), e / e.sum((1, 2), keepdims=True))
    logits = np.array([[1.0, 2.0, 3.0], [1.0, 1.0, 1.0]], np.float32)
    mask = np.array([[True, True, False], [False, False, False]])
    y = L.Softmax()(logits, mask=mask).numpy()
    close(y[0], [np.exp(-1) / (1 + np.exp(-1)), 1 / (1 + np.exp(-1)), 0.0])
    close(y[1], [0.0, 0.0, 0.0])  # a fully masked row gets no probability at all
    with pytest.raises(jt.errors.InvalidArgumentError, match=r"Softmax.*mask must broadcast"):
        L.Softmax()(logits, mask=np.ones((2, 2), bool))


# ---------------------------------------------------------------------------
# noise and dropout


def test_spatial_dropout_drops_whole_channels_only_in_training():
    ones = np.ones((4, 3, 3, 6), np.float32)
    layer = L.SpatialDropout2D(0.5, seed=3)
    assert layer(ones) is not None and np.array_equal(layer(ones).numpy(), ones)
    y = layer(ones, training=True).numpy()
    per_channel = y.reshape(4, 9, 6)
    assert set(np.unique(y)) <= {0.0, 2.0} and len(np.unique(y)) == 2
    assert (per_channel.min(axis=1) == per_channel.max(axis=1)).all()  # whole maps
    first = L.SpatialDropout2D(0.5, data_format="channels_first", seed=3)
    z = first(np.ones((4, 6, 3, 3), np.float32), training=True).numpy().reshape(4, 6, 9)
    assert (z.min(axis=2) == z.max(axis=2)).all()
    assert L.SpatialDropout1D(0.5)(ones[:, 0], training=True).shape == (4, 3, 6)
    assert set(L.SpatialDropout2D(0.2).get_config()) == {"rate", "seed", "name", "dtype",
                                                        "data_format"}
    with pytest.raises(jt.errors.InvalidArgumentError, match=r"expected ndim=5, found ndim=4"):
        L.SpatialDropout3D(0.5)(ones, training=True)


def test_seeded_noise_is_reproducible_and_off_at_inference():
    x = np.zeros((200, 50), np.float32)
    a = L.GaussianNoise(0.5, seed=7)(x, training=True).numpy()
    b = L.GaussianNoise(0.5, seed=7)(x, training=True).numpy()
    np.testing.assert_array_equal(a, b)
    assert abs(a.std() - 0.5) < 0.02 and abs(a.mean()) < 0.02
    assert np.array_equal(L.GaussianNoise(0.5)(x).numpy(), x)
    d = L.GaussianDropout(0.2, seed=1)(np.ones((200, 50), np.float32), training=True).numpy()
    assert abs(d.mean() - 1.0) < 0.02 and abs(d.std() - 0.5) < 0.02  # sqrt(0.2 / 0.8)
    jt.random.set_seed(5)
    c = L.GaussianNoise(0.5)(x, training=True).numpy()
    jt.random.set_seed(5)
    np.testing.assert_array_equal(L.GaussianNoise(0.5)(x, training=True).numpy(), c)
    with pytest.raises(ValueError, match=r"GaussianNoise: .*`stddev`.*2.0"):
        L.GaussianNoise(2.0)


def test_alpha_dropout_keeps_mean_and_variance():
    x = RNG.standard_normal((400, 100)).astype(np.float32)
    y = L.AlphaDropout(0.2, seed=0)(x, training=True).numpy()
    assert abs(y.mean()) < 0.03 and abs(y.std() - 1.0) < 0.03
    alpha_p = -1.6732632423543772 * 1.0507009873554805
    a = ((1 - 0.2) * (1 + 0.2 * alpha_p ** 2)) ** -0.5
    dropped = np.isclose(y, a * alpha_p - a * alpha_p * 0.2, atol=1e-5)
    assert 0.15 < dropped.mean() < 0.25
    assert np.array_equal(L.AlphaDropout(0.2)(x).numpy(), x)


def test_activity_regularization_adds_the_penalty_per_sample():
    layer = L.ActivityRegularization(l1=0.1, l2=0.01)
    x = np.array([[1.0, -2.0], [3.0, 0.0]], np.float32)
    close(layer(x), x)
    close(layer.losses[0], (0.1 * 6.0 + 0.01 * 14.0) / 2)
    assert layer.get_config()["l1"] == 0.1 and "activity_regularizer" not in layer.get_config()
    assert roundtrip(layer).l2 == 0.01


# ---------------------------------------------------------------------------
# BatchNormalization over channels, and batch renormalization


def test_batch_normalization_normalizes_each_channel_of_images():
    first = np.transpose(IMG, (0, 3, 1, 2))
    for axis, x, red in ((-1, IMG, (0, 1, 2)), (1, first, (0, 2, 3))):
        bn = L.BatchNormalization(axis=axis, epsilon=1e-3)
        y = bn(x, training=True).numpy()
        want = (x - x.mean(red, keepdims=True)) / np.sqrt(x.var(red, keepdims=True) + 1e-3)
        close(y, want)
        assert bn.gamma.shape == (3,)
        close(bn.moving_mean, 0.01 * x.mean(red))


def _renorm_reference(xs, momentum, renorm_momentum, clip, eps=1e-3):
    """Keras 3's renorm training step written out in numpy over channels-last batches."""
    mm, ms, rm, rs = np.zeros(3), np.ones(3), np.zeros(3), np.ones(3)
    outs = []
    for x in xs:
        mean, var = x.mean((0, 1, 2)), x.var((0, 1, 2))
        s = np.sqrt(var + eps)
        floor = np.maximum(rs, np.sqrt(eps))
        r = np.clip(s / floor, clip["rmin"], clip["rmax"])
        d = np.clip((mean - rm) / floor, -clip["dmax"], clip["dmax"])
        outs.append((x - mean) / s * r + d)
        rm, rs = rm * renorm_momentum + mean * (1 - renorm_momentum), \
            rs * renorm_momentum + s * (1 - renorm_momentum)
        mm, ms = mm * momentum + mean * (1 - momentum), ms * momentum + s * (1 - momentum)
    return outs, mm, np.maximum(ms * ms - eps, 0)


def test_batch_renormalization_corrects_with_the_renorm_statistics():
    clip = {"rmax": 1.5, "rmin": 0.7, "dmax": 0.5}
    bn = L.BatchNormalization(renorm=True, renorm_clipping=clip, renorm_momentum=0.5,
                              momentum=0.8)
    xs = [IMG * 3 + 1, IMG * 0.5 - 2, IMG + 4]
    outs = [bn(x, training=True).numpy() for x in xs]
    want, moving_mean, moving_variance = _renorm_reference(xs, 0.8, 0.5, clip)
    for y, w in zip(outs, want):
        close(y, w)
    assert [v.name for v in bn.weights] == ["gamma", "beta", "moving_mean", "moving_variance",
                                          "moving_stddev", "renorm_mean", "renorm_stddev"]
    close(bn.moving_mean, moving_mean)
    close(bn.moving_variance, moving_variance)
    # inference uses the moving statistics, as without renorm
    close(bn(xs[0]).numpy(), (xs[0] - moving_mean) / np.sqrt(moving_variance + 1e-3))
    config = roundtrip(bn).get_config()
    assert config["renorm"] is True and config["renorm_clipping"] == clip
    assert config["renorm_momentum"] == 0.5
    with pytest.raises(ValueError, match=r"rmax should be greater than rmin"):
        L.BatchNormalization(renorm=True, renorm_clipping={"rmax": 0.5, "rmin": 1.0})


def test_batch_renormalization_weights_save_and_load(tmp_path):
    bn = L.BatchNormalization(renorm=True)
    bn(IMG, training=True)
    path = str(tmp_path / "bn.weights.h5")
    bn.save_weights(path)
    again = L.BatchNormalization(renorm=True)
    again(IMG)
    again.load_weights(path)
    for a, b in zip(again.weights, bn.weights):
        close(a, b.numpy())
