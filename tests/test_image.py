"""``jt.image`` and the Keras image preprocessing layers: values pinned from TF 2.21 /
Keras 3.15 (each literal below was printed by TF on the same input), gradients against
finite differences or the exact Jacobian of the linear ops, seeding, errors, and the
layers inside ``fit``. The wide comparison on random inputs is in
``tests/test_vs_tensorflow_image.py`` (needs TensorFlow)."""

import numpy as np
import pytest

import jittape as jt
from jittape.errors import InvalidArgumentError

PX = np.array([[[[0.2, 0.5, 0.9], [0.7, 0.1, 0.3]], [[0.4, 0.4, 0.4], [1.0, 0.6, 0.0]]]],
              np.float32)
R = np.arange(12.0, dtype=np.float32).reshape(1, 3, 4, 1)


def _close(got, want, tol=1e-5):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want, np.float32), rtol=tol,
                               atol=tol)


def test_colour_ops_as_tf():
    # tf.image.rgb_to_hsv / adjust_hue(0.25) / adjust_saturation(0.5) / rgb_to_grayscale(PX)
    _close(jt.image.rgb_to_hsv(PX), [[[[0.595238, 0.777778, 0.9], [0.944444, 0.857143, 0.7]],
                                      [[0.0, 0.0, 0.4], [0.1, 1.0, 1.0]]]])
    _close(jt.image.adjust_hue(PX, 0.25), [[[[0.9, 0.2, 0.85], [0.6, 0.7, 0.1]],
                                            [[0.4, 0.4, 0.4], [0.0, 1.0, 0.1]]]])
    _close(jt.image.adjust_saturation(PX, 0.5), [[[[0.55, 0.7, 0.9], [0.7, 0.4, 0.5]],
                                                  [[0.4, 0.4, 0.4], [1.0, 0.8, 0.5]]]])
    _close(jt.image.rgb_to_grayscale(PX)[..., 0], [[[0.45588, 0.30213], [0.39996, 0.6511]]])
    back = jt.image.hsv_to_rgb(jt.image.rgb_to_hsv(PX))
    _close(back, PX)


def test_convert_image_dtype_as_tf():
    u = jt.constant(np.array([0, 1, 127, 128, 255], np.uint8))
    _close(jt.image.convert_image_dtype(u, jt.float32),
           [0.0, 0.003921569, 0.49803925, 0.5019608, 1.0])
    got = jt.image.convert_image_dtype(u, jt.int16)
    assert got.dtype == jt.int16 and got.numpy().tolist() == [0, 128, 16256, 16384, 32640]
    f = jt.constant([-0.1, 0.0, 0.5, 0.999, 1.0, 1.2])
    got = jt.image.convert_image_dtype(f, jt.uint8, saturate=True)
    assert got.numpy().tolist() == [0, 0, 127, 255, 255, 255]
    # int32's max is not a float32: TF clamps to 2147483520, the float below 2**31
    big = jt.image.convert_image_dtype(jt.constant([3e9]), jt.int32, saturate=True)
    assert big.numpy().tolist() == [2147483520]


@pytest.mark.parametrize("method, antialias, size, want", [
    ("bicubic", False, [2, 3], [0.774615, 2.171533, 3.568451, 7.431548, 8.828468, 10.225385]),
    ("area", False, [2, 3], [1.583334, 2.833334, 4.083333, 6.916667, 8.166667, 9.416666]),
    ("bilinear", True, [2, 3], [1.8, 3.0, 4.2, 6.8, 8.0, 9.2]),
    ("lanczos3", False, [2, 5], [0.453581, 1.103748, 1.992857, 2.881966, 3.532132, 7.467868,
                                 8.118034, 9.007143, 9.896252, 10.546419]),
])
def test_resize_methods_as_tf(method, antialias, size, want):
    got = jt.image.resize(R, size, method=method, antialias=antialias)
    assert got.dtype == jt.float32 and got.shape == [1] + size + [1]
    _close(got.numpy().ravel(), want)


def test_filters_and_measures_as_tf():
    sobel = jt.image.sobel_edges(R).numpy()
    assert sobel.shape == (1, 3, 4, 1, 2)
    _close(sobel.reshape(-1), [0, 0, 0, 8, 0, 8, 0, 0, 32, 0, 32, 8, 32, 8, 32, 0, 0, 0, 0, 8,
                               0, 8, 0, 0])
    a = np.arange(48.0, dtype=np.float32).reshape(1, 4, 4, 3) / 48
    b = a[:, ::-1].copy()
    _close(jt.image.psnr(a, b, 1.0), [5.0514994])
    _close(jt.image.ssim(a, b, 1.0, filter_size=3), [-0.7549327])
    _close(jt.image.per_image_standardization(R).numpy().ravel()[:3],
           [-1.593255, -1.303572, -1.01389])
    pad = jt.image.resize_with_pad(R, 5, 4).numpy()[0, ..., 0]
    _close(pad, [[0] * 4, [0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [0] * 4])
    dy, dx = jt.image.image_gradients(R)
    assert dy.numpy()[0, :, 0, 0].tolist() == [4.0, 4.0, 0.0]
    assert dx.numpy()[0, 0, :, 0].tolist() == [1.0, 1.0, 1.0, 0.0]


@pytest.mark.parametrize("mode, want", [
    # keras.ops.image.affine_transform(R, T, fill_mode=mode, fill_value=-1) on TF
    ("reflect", [5.5, 5.2, 4.6, 3.2, 1.3, 2.2, 3.0, 3.0, 1.9, 4.0, 6.1, 7.4]),
    ("wrap", [9.5, 7.6, 6.4, 7.8, 9.3, 10.2, 8.0, 0.0, 1.9, 4.0, 6.1, 4.4]),
    ("constant", [-1.0, -1.0, -1.0, -1.0, -0.77, 0.28, 1.52, -1.0, 1.9, 4.0, 6.1, 0.68]),
    ("nearest", [1.5, 2.4, 3.0, 3.0, 1.3, 2.2, 3.0, 3.0, 1.9, 4.0, 6.1, 7.4]),
])
def test_affine_transform_fill_modes_as_tf(mode, want):
    t = np.array([0.9, -0.2, 1.5, 0.3, 1.1, -2.0, 0.0, 0.0], np.float32)
    got = jt.image.affine_transform(R, t, fill_mode=mode, fill_value=-1.0)
    _close(got.numpy().ravel(), want, 1e-4)


def test_geometry_matches_numpy():
    x = np.random.default_rng(0).random((2, 3, 5, 2)).astype(np.float32)
    for k in range(4):
        np.testing.assert_array_equal(jt.image.rot90(x, k), np.rot90(x, k, axes=(1, 2)))
    np.testing.assert_array_equal(jt.image.flip_left_right(x[0]), x[0, :, ::-1])
    np.testing.assert_array_equal(jt.image.flip_up_down(x), x[:, ::-1])
    np.testing.assert_array_equal(jt.image.transpose(x), x.transpose(0, 2, 1, 3))
    np.testing.assert_array_equal(jt.image.crop_to_bounding_box(x, 1, 2, 2, 3), x[:, 1:3, 2:5])
    padded = jt.image.pad_to_bounding_box(x, 1, 0, 5, 6).numpy()
    np.testing.assert_array_equal(padded[:, 1:4, :5], x)
    assert padded.sum() == pytest.approx(x.sum(), rel=1e-6)
    # resize_with_crop_or_pad: an odd surplus is cropped from the bottom/right
    np.testing.assert_array_equal(jt.image.resize_with_crop_or_pad(x, 2, 2), x[:, 0:2, 1:3])
    np.testing.assert_array_equal(jt.image.central_crop(x, 0.5), x[:, 0:3, 1:4])


def _jacobian(f, shape):
    """The Jacobian of a linear ``f`` from one batched call on the basis images."""
    n = int(np.prod(shape[1:]))
    basis = np.eye(n, dtype=np.float32).reshape((n,) + tuple(shape[1:]))
    return np.asarray(f(basis)).reshape(n, -1).T


@pytest.mark.parametrize("f", [
    lambda x: jt.image.resize(x, [5, 3], method="bicubic"),
    lambda x: jt.image.resize(x, [2, 3], method="area"),
    lambda x: jt.image.resize(x, [2, 2], method="lanczos3", antialias=True),
    lambda x: jt.image.affine_transform(x, [0.9, -0.2, 0.5, 0.3, 1.1, -0.4, 0.0, 0.0],
                                        fill_mode="reflect"),
    lambda x: jt.image.sobel_edges(x),
], ids=["bicubic", "area", "lanczos3_aa", "affine", "sobel"])
def test_gradients_of_linear_ops_are_their_jacobian(f):
    x = jt.constant(np.random.default_rng(1).random((1, 3, 4, 1)).astype(np.float32))
    u = np.random.default_rng(2).random(f(x).shape).astype(np.float32)
    with jt.GradientTape() as tape:
        tape.watch(x)
        y = jt.reduce_sum(f(x) * u)
    grad = tape.gradient(y, x).numpy().ravel()
    np.testing.assert_allclose(grad, _jacobian(f, x.shape).T @ u.ravel(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("f, dtype", [
    (lambda x: jt.image.rgb_to_hsv(x), "float64"),
    (lambda x: jt.image.hsv_to_rgb(x), "float64"),
    (lambda x: jt.image.per_image_standardization(x), "float64"),
    (lambda x: jt.image.adjust_contrast(x, 1.7), "float32"),
    (lambda x: jt.image.adjust_hue(x, 0.3), "float32"),
    (lambda x: jt.image.adjust_saturation(x, 0.6), "float32"),
    (lambda x: jt.image.ssim(x, jt.constant(np.full((1, 4, 4, 3), 0.5, np.float32)), 1.0,
                             filter_size=3), "float32"),
], ids=["rgb_to_hsv", "hsv_to_rgb", "standardization", "contrast", "hue", "saturation", "ssim"])
def test_gradients_against_central_differences(f, dtype):
    """``<J^T u, v>`` against ``<u, (f(x + e v) - f(x - e v)) / 2e>`` at a point away
    from the colour ops' branch switches (float32 where TF computes in float32)."""
    rng = np.random.default_rng(3)
    x0 = rng.uniform(0.1, 0.9, (1, 4, 4, 3)).astype(dtype)
    x0[..., 0] += 0.05  # keep the channels apart: no ties between the HSV branches
    v = rng.standard_normal(x0.shape).astype(dtype)
    x = jt.constant(x0)
    u = rng.standard_normal(f(x).shape).astype(np.float32 if "32" in str(f(x).dtype) else dtype)
    with jt.GradientTape() as tape:
        tape.watch(x)
        y = jt.reduce_sum(f(x) * u)
    analytic = float(np.sum(tape.gradient(y, x).numpy() * v))
    eps = 1e-6 if dtype == "float64" else 1e-3
    fd = np.sum(u * (np.asarray(f(jt.constant(x0 + eps * v)), np.float64)
                     - np.asarray(f(jt.constant(x0 - eps * v)), np.float64))) / (2 * eps)
    assert analytic == pytest.approx(fd, rel=1e-5 if dtype == "float64" else 2e-2, abs=1e-4)


def test_random_ops_are_seeded_as_jt_random():
    x = jt.constant(np.arange(2 * 4 * 5 * 3, dtype=np.float32).reshape(2, 4, 5, 3))
    jt.random.set_seed(5)
    a = [jt.image.random_crop(x, [2, 3, 3, 2], seed=1).numpy() for _ in range(3)]
    jt.random.set_seed(5)
    b = [jt.image.random_crop(x, [2, 3, 3, 2], seed=1).numpy() for _ in range(3)]
    for p, q in zip(a, b):
        np.testing.assert_array_equal(p, q)
    assert len({p.tobytes() for p in a}) > 1  # each call draws afresh
    flips = [jt.image.random_flip_left_right(x, seed=2).numpy() for _ in range(8)]
    mirrored = [[np.array_equal(f[i], x.numpy()[i, :, ::-1]) for i in range(2)] for f in flips]
    assert {m for row in mirrored for m in row} == {True, False}
    d = jt.image.random_brightness(x, 0.5, seed=3).numpy() - x.numpy()
    assert np.ptp(d) < 1e-5 and abs(d.flat[0]) <= 0.5
    with pytest.raises(ValueError, match="random_contrast: upper must be > lower"):
        jt.image.random_contrast(x, 0.5, 0.5)


def test_errors_name_the_function_and_shapes():
    with pytest.raises(ValueError, match=r"crop_to_bounding_box: height must be >= target \+ "
                                         r"offset: image \[3, 4, 1\]"):
        jt.image.crop_to_bounding_box(R[0], 1, 1, 3, 3)
    with pytest.raises(ValueError, match="pad_to_bounding_box: width must be <= target - offset"):
        jt.image.pad_to_bounding_box(R[0], 1, 1, 3, 3)
    with pytest.raises(ValueError, match=r"central_crop: central_fraction must be within \(0, "):
        jt.image.central_crop(R, 0.0)
    with pytest.raises(InvalidArgumentError, match=r"ssim: .*>= filter_size \(11\).*\[1, 3, 4"):
        jt.image.ssim(R, R, 1.0)
    with pytest.raises(InvalidArgumentError, match=r"rgb_to_hsv: .*must be 3.*\[1, 3, 4, 1\]"):
        jt.image.rgb_to_hsv(R)
    with pytest.raises(InvalidArgumentError, match=r"sobel_edges: .*4-D.*\[3, 4, 1\]"):
        jt.image.sobel_edges(R[0])
    with pytest.raises(ValueError, match=r"adjust_hue: delta must be in the interval \[-1, 1\]"):
        jt.image.adjust_hue(PX, 1.5)
    with pytest.raises(InvalidArgumentError, match="resize: Resize method is not implemented"):
        jt.image.resize(R, [2, 2], method="cubic")


def test_image_ops_compile():
    """One small compiled step through resize, a colour op and an affine transform
    agrees with the same ops run eagerly."""
    def body(x):
        y = jt.image.resize(x, [4, 6], method="bicubic")
        y = jt.image.adjust_contrast(y, 1.5)
        return jt.image.affine_transform(y, [1.0, 0.0, 0.5, 0.0, 1.0, -0.5, 0.0, 0.0],
                                         fill_mode="wrap")

    x = np.random.default_rng(4).random((2, 3, 4, 3)).astype(np.float32)
    np.testing.assert_allclose(jt.function(body)(x), body(x), rtol=1e-5, atol=1e-5)


# --- the Keras layers ---

L = jt.keras.layers
IMG = np.random.default_rng(5).uniform(0, 255, (2, 6, 7, 3)).astype(np.float32)


def test_layer_configs_as_keras():
    # keras.layers.X(...).get_config() in Keras 3.15, less the name/trainable/dtype
    want = {
        L.RandomRotation(0.1): {"factor": (-0.1, 0.1), "fill_mode": "reflect",
                                "fill_value": 0.0, "interpolation": "bilinear", "seed": None},
        L.RandomContrast(0.2): {"factor": (0, 0.2), "value_range": (0, 255), "seed": None},
        L.RandomBrightness(0.2): {"factor": (-0.2, 0.2), "value_range": [0, 255],
                                  "seed": None},
        L.RandomZoom(0.1): {"height_factor": 0.1, "width_factor": None, "fill_mode": "reflect",
                            "interpolation": "bilinear", "seed": None, "fill_value": 0.0},
        L.RandomFlip(): {"seed": None, "mode": "horizontal_and_vertical"},
        L.Resizing(4, 5): {"height": 4, "width": 5, "interpolation": "bilinear",
                           "crop_to_aspect_ratio": False, "pad_to_aspect_ratio": False,
                           "fill_mode": "constant", "fill_value": 0.0, "antialias": False},
        L.Rescaling(0.5): {"scale": 0.5, "offset": 0.0},
    }
    for layer, cfg in want.items():
        got = layer.get_config()
        assert {k: got[k] for k in cfg} == cfg, type(layer).__name__
        again = type(layer).from_config(got)
        assert again.get_config() == got
    assert isinstance(L.RandomCrop(3, 3).get_config()["seed"], int)  # Keras draws one


@pytest.mark.parametrize("make, t, mode", [
    # Keras' matrices for h = 6, w = 7: a shift by (0.2 h, -0.3 w) ...
    (lambda: L.RandomTranslation((0.2, 0.2), (-0.3, -0.3), fill_mode="constant"),
     [1.0, 0.0, 2.1, 0.0, 1.0, -1.2, 0.0, 0.0], "constant"),
    # ... and a zoom by 1.3 (height) and 0.8 (width) about the centre
    (lambda: L.RandomZoom((0.3, 0.3), (-0.2, -0.2), fill_mode="wrap"),
     [0.8, 0.0, 3.0 * 0.2, 0.0, 1.3, 2.5 * -0.3, 0.0, 0.0], "wrap"),
], ids=["translation", "zoom"])
def test_degenerate_ranges_are_keras_fixed_transforms(make, t, mode):
    """With a one-point range a geometric layer is the fixed transform Keras builds
    (the pixels against Keras itself: tests/test_vs_tensorflow_image.py)."""
    y = make()(IMG, training=True)
    np.testing.assert_allclose(y, jt.image.affine_transform(IMG, t, fill_mode=mode),
                               rtol=1e-5, atol=1e-3)


def test_random_layers_only_train_and_follow_their_seed():
    for make in (lambda s: L.RandomFlip(seed=s), lambda s: L.RandomRotation(0.2, seed=s),
                 lambda s: L.RandomZoom(0.3, seed=s), lambda s: L.RandomContrast(0.5, seed=s),
                 lambda s: L.RandomTranslation(0.3, 0.3, seed=s),
                 lambda s: L.RandomBrightness(0.3, seed=s)):
        a, b = make(7), make(7)
        np.testing.assert_array_equal(a(IMG), IMG)  # inference: the identity
        ya = [a(IMG, training=True).numpy() for _ in range(4)]
        yb = [b(IMG, training=True).numpy() for _ in range(4)]
        for p, q in zip(ya, yb):
            np.testing.assert_array_equal(p, q)
        assert any(not np.array_equal(p, IMG) for p in ya), type(a).__name__
    crop = L.RandomCrop(3, 4, seed=1)
    assert crop(IMG, training=True).shape == [2, 3, 4, 3]
    np.testing.assert_array_equal(crop(IMG), IMG)  # Keras 3.15: no crop at inference


def test_factors_are_drawn_uniformly_per_image():
    """RandomBrightness(0.2) on 0-255: each image's shift is uniform in [-51, 51)."""
    x = np.full((400, 1, 1, 1), 128.0, np.float32)
    d = L.RandomBrightness(0.2, seed=3)(x, training=True).numpy().ravel() - 128.0
    assert d.min() >= -51.0 and d.max() < 51.0
    assert abs(d.mean()) < 5.0 and abs(d.std() - 102 / np.sqrt(12)) < 3.0
    # RandomContrast(0.5) as Keras 3.15 reads it: the factor is in [1, 1.5]
    x = np.random.default_rng(0).uniform(50, 200, (300, 2, 2, 1)).astype(np.float32)
    y = L.RandomContrast(0.5, seed=4)(x, training=True).numpy()
    mean = x.mean(axis=(1, 2), keepdims=True)
    f = ((y - mean) / (x - mean))[:, 0, 0, 0]
    assert f.min() >= 1.0 - 1e-4 and f.max() <= 1.5 + 1e-4 and np.ptp(f) > 0.3


def test_layer_errors():
    with pytest.raises(ValueError, match=r"RandomRotation: the `factor` argument .*\[-1, 1\]"):
        L.RandomRotation(1.5)
    with pytest.raises(ValueError, match=r"RandomZoom: .*height_factor.*\(-1.0, 1.0\]"):
        L.RandomZoom(-1.0)
    with pytest.raises(NotImplementedError, match="RandomTranslation: unknown `fill_mode`"):
        L.RandomTranslation(0.1, 0.1, fill_mode="mirror")
    with pytest.raises(ValueError, match="RandomFlip: mode must be one of"):
        L.RandomFlip("diagonal")
    with pytest.raises(InvalidArgumentError, match=r'"rs" \(Resizing\).*rank 3 or 4.*\[3, 4\]'):
        L.Resizing(2, 2, name="rs")(np.zeros((3, 4), np.float32))


def test_preprocessing_layers_in_fit():
    """Augmentation in ``fit`` (training=True), none in ``evaluate`` and ``predict``: with
    a learning rate of 0 the weights stay, so fit's loss differs from evaluate's only by
    the augmentation, and predict is the plain model."""
    jt.random.set_seed(0)
    x = np.random.default_rng(6).uniform(0, 255, (8, 6, 6, 1)).astype(np.float32)
    y = np.arange(8) % 2
    model = jt.keras.Sequential([
        L.Input((6, 6, 1)), L.Rescaling(1 / 255), L.RandomFlip("horizontal", seed=1),
        L.RandomTranslation(0.2, 0.2, seed=2), L.RandomBrightness(0.5, (0, 1), seed=3),
        L.CenterCrop(4, 4), L.Flatten(), L.Dense(2)])
    model.compile(optimizer=jt.keras.optimizers.SGD(learning_rate=0.0),
                  loss=jt.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    fit_loss = model.fit(x, y, batch_size=8, epochs=1, verbose=0).history["loss"][0]
    eval_loss = model.evaluate(x, y, verbose=0)
    assert np.isfinite(fit_loss) and abs(fit_loss - eval_loss) > 1e-3
    w, b = (v.numpy() for v in model.layers[-1].weights)
    want = (x[:, 1:5, 1:5, :] / 255).reshape(8, -1) @ w + b
    np.testing.assert_allclose(model.predict(x, verbose=0), want, rtol=1e-4, atol=1e-5)
