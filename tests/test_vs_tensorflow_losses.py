"""jt.losses against tf.keras.losses (Keras 3), and the configs, serialized forms and
``get`` names of jt.losses and jt.metrics against Keras', run only where TensorFlow is
installed; the default suite does not need it.

Each loss, as a class (every reduction, with and without sample weights) and as a
function, gets the same float32 arrays on both sides; values and the gradient with
respect to ``y_pred`` must agree within the float32 row of the tolerance table.
"""

import warnings

import numpy as np
import pytest
from tolerances import tol

import jittape as jt

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")  # Keras 3 itself: tf.keras lacks some function names

T32 = tol("float32")
F32 = np.float32
N, C = 6, 4


def _np(x):
    return np.asarray(x.numpy() if hasattr(x, "numpy") else x)


def close(got, want, what=""):
    got, want = _np(got), _np(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != Keras' {want.shape}"
    # relative to the largest entry: a gradient's entries differ by ulps of the largest
    atol = max(T32.fwd_atol, T32.fwd_rtol * float(np.max(np.abs(want), initial=0.0)))
    np.testing.assert_allclose(got, want, rtol=T32.fwd_rtol, atol=atol, err_msg=what)


def _inputs(kind, extreme=False):
    """``(y_true, y_pred)`` float32 arrays of ``kind``; ``extreme`` puts 0s, 1s and large
    values where the clipping rules apply."""
    rng = np.random.default_rng(abs(hash((kind, extreme))) % 2**32)
    normal = rng.standard_normal((N, C)).astype(F32)
    if kind == "regression":
        y, p = rng.standard_normal((N, C)).astype(F32), normal * 2
        if extreme:
            p[0] = [1e3, -1e3, 0.0, 40.0]
            y[1] = [0.0, 0.0, 1e-9, -1e-9]  # MAPE's max(|y|, eps)
        return y, p
    if kind == "positive":  # MSLE, Poisson
        y = rng.uniform(0, 3, (N, C)).astype(F32)
        p = rng.uniform(0.1, 3, (N, C)).astype(F32)
        if extreme:
            p[0] = [0.0, 1e-9, 50.0, 1e-7]
            y[1] = [0.0, -0.5, 1e-8, 10.0]
        return y, p
    if kind == "cosine":
        y, p = rng.standard_normal((N, C)).astype(F32), normal
        if extreme:
            y[0] = 0.0  # a zero vector
            p[1] = 1e-9
        return y, p
    if kind in ("hinge01", "hinge_pm"):
        y = rng.integers(0, 2, (N, C)).astype(F32)
        return (y if kind == "hinge01" else 2 * y - 1), normal
    if kind == "onehot_scores":
        return np.eye(C, dtype=F32)[rng.integers(0, C, N)], normal * 2
    if kind == "distribution":
        y = rng.dirichlet(np.ones(C), N).astype(F32)
        p = rng.dirichlet(np.ones(C), N).astype(F32)
        if extreme:
            y[0] = [0.0, 1.0, 0.0, 0.0]
            p[1] = [0.0, 0.5, 0.5, 0.0]
        return y, p
    if kind in ("binary_probs", "binary_logits"):
        y = rng.integers(0, 2, (N, C)).astype(F32)
        z = normal * 3
        if extreme:
            z[0] = [30.0, -30.0, 80.0, -80.0]
        if kind == "binary_logits":
            return y, z
        p = (1 / (1 + np.exp(-z.astype(np.float64)))).astype(F32)
        if extreme:
            p[1] = [0.0, 1.0, 1e-9, 1 - 1e-9]
        return y, p
    if kind in ("categorical_probs", "categorical_logits"):
        y = np.eye(C, dtype=F32)[rng.integers(0, C, N)]
        z = normal * 3
        if extreme:
            z[0] = [30.0, -30.0, 20.0, -50.0]
        if kind == "categorical_logits":
            return y, z
        e = np.exp(z - z.max(-1, keepdims=True))
        p = (e / e.sum(-1, keepdims=True)).astype(F32)
        if extreme:
            p[1] = [0.0, 1.0, 0.0, 0.0]
        return y, p
    if kind in ("sparse_probs", "sparse_logits"):
        y, p = _inputs("categorical_" + kind.split("_")[1], extreme)
        labels = y.argmax(-1)
        labels[[1, 4]] = -1  # the ignored class in the ignore_class cases
        return labels, p
    raise AssertionError(kind)


# (class, kwargs, function, kind); the function takes the same kwargs
CASES = [
    ("MeanSquaredError", {}, "mean_squared_error", "regression"),
    ("MeanAbsoluteError", {}, "mean_absolute_error", "regression"),
    ("MeanAbsolutePercentageError", {}, "mean_absolute_percentage_error", "regression"),
    ("MeanSquaredLogarithmicError", {}, "mean_squared_logarithmic_error", "positive"),
    ("CosineSimilarity", {}, "cosine_similarity", "cosine"),
    ("CosineSimilarity", {"axis": 0}, "cosine_similarity", "cosine"),
    ("Huber", {}, "huber", "regression"),
    ("Huber", {"delta": 0.3}, "huber", "regression"),
    ("Huber", {"delta": 2.5}, "huber", "regression"),
    ("LogCosh", {}, "log_cosh", "regression"),
    ("Hinge", {}, "hinge", "hinge01"),
    ("Hinge", {}, "hinge", "hinge_pm"),
    ("SquaredHinge", {}, "squared_hinge", "hinge01"),
    ("SquaredHinge", {}, "squared_hinge", "hinge_pm"),
    ("CategoricalHinge", {}, "categorical_hinge", "onehot_scores"),
    ("KLDivergence", {}, "kl_divergence", "distribution"),
    ("Poisson", {}, "poisson", "positive"),
    ("BinaryFocalCrossentropy", {}, "binary_focal_crossentropy", "binary_probs"),
    ("BinaryFocalCrossentropy", {"gamma": 0.5, "label_smoothing": 0.2},
     "binary_focal_crossentropy", "binary_probs"),
    ("BinaryFocalCrossentropy", {"from_logits": True}, "binary_focal_crossentropy",
     "binary_logits"),
    ("BinaryFocalCrossentropy", {"apply_class_balancing": True, "alpha": 0.7, "gamma": 3.0,
                                 "from_logits": True, "label_smoothing": 0.1},
     "binary_focal_crossentropy", "binary_logits"),
    ("BinaryFocalCrossentropy", {"apply_class_balancing": True, "gamma": 0.0},
     "binary_focal_crossentropy", "binary_probs"),
    ("CategoricalFocalCrossentropy", {}, "categorical_focal_crossentropy",
     "categorical_probs"),
    ("CategoricalFocalCrossentropy", {"alpha": 0.5, "gamma": 1.5, "label_smoothing": 0.2},
     "categorical_focal_crossentropy", "categorical_probs"),
    ("CategoricalFocalCrossentropy", {"from_logits": True, "alpha": [0.1, 0.2, 0.3, 0.4]},
     "categorical_focal_crossentropy", "categorical_logits"),
    ("CategoricalFocalCrossentropy", {"from_logits": True, "gamma": 0.0, "alpha": 1.0},
     "categorical_focal_crossentropy", "categorical_logits"),
    ("SparseCategoricalCrossentropy", {"ignore_class": -1},
     "sparse_categorical_crossentropy", "sparse_probs"),
    ("SparseCategoricalCrossentropy", {"from_logits": True, "ignore_class": -1},
     "sparse_categorical_crossentropy", "sparse_logits"),
    ("BinaryCrossentropy", {"label_smoothing": 0.3}, "binary_crossentropy", "binary_probs"),
    ("CategoricalCrossentropy", {"from_logits": True, "label_smoothing": 0.3},
     "categorical_crossentropy", "categorical_logits"),
]
IDS = [f"{c[0]}-{i}" for i, c in enumerate(CASES)]

SAMPLE_WEIGHTS = {
    "none": None,
    "per_sample": np.random.default_rng(5).uniform(0, 2, N).astype(F32),
    "column": np.random.default_rng(6).uniform(0, 2, (N, 1)).astype(F32),
    "scalar": 2.5,
}


def _value_and_grad(m, fn, y_true, y_pred, **kw):
    p = m.constant(y_pred)
    with m.GradientTape() as tape, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tape.watch(p)
        value = fn(y_true, p, **kw)
    return value, tape.gradient(value, p)


def _check(got, want, what):
    for g, w, part in zip(got, want, ("value", "gradient")):
        assert (g is None) == (w is None), f"{what} {part}: {g!r} against Keras' {w!r}"
        if w is None:
            continue
        g, w = _np(g), _np(w)
        assert np.isfinite(g).all(), f"{what}: jittape's {part} is not finite: {g}"
        bad = ~np.isfinite(w)
        if bad.any():
            # Keras' NaN gradients: (1 - p_t)^0 at p_t = 1 differentiates as 0 * inf
            assert part == "gradient" and "gamma': 0.0" in what, f"{what}: Keras' {part}"
            g, w = np.where(bad, 0.0, g), np.where(bad, 0.0, w)
        close(g, w, f"{what} {part}")


@pytest.mark.parametrize("extreme", [False, True])
@pytest.mark.parametrize("reduction", ["sum_over_batch_size", "sum", None, "mean",
                                       "mean_with_sample_weight"])
@pytest.mark.parametrize("cls,kw,fn,kind", CASES, ids=IDS)
def test_loss_class_matches_keras(cls, kw, fn, kind, reduction, extreme):
    y_true, y_pred = _inputs(kind, extreme)
    ours = getattr(jt.losses, cls)(reduction=reduction, **kw)
    theirs = getattr(keras.losses, cls)(reduction=reduction, **kw)
    for name, sw in SAMPLE_WEIGHTS.items():
        if kw.get("axis") == 0 and name in ("per_sample", "column"):
            continue  # per-column values: a per-sample weight does not apply
        _check(_value_and_grad(jt, ours, y_true, y_pred, sample_weight=sw),
               _value_and_grad(tf, theirs, y_true, y_pred, sample_weight=sw),
               f"{cls}({kw}, reduction={reduction!r}) weights={name}")


@pytest.mark.parametrize("cls,kw,fn,kind", CASES, ids=IDS)
def test_loss_function_matches_keras(cls, kw, fn, kind):
    kw = dict(kw)
    for extreme in (False, True):
        y_true, y_pred = _inputs(kind, extreme)
        _check(_value_and_grad(jt, getattr(jt.losses, fn), y_true, y_pred, **kw),
               _value_and_grad(tf, getattr(keras.losses, fn), y_true, y_pred, **kw),
               f"{fn}({kw}) extreme={extreme}")


@pytest.mark.parametrize("alias", ["mse", "mae", "mape", "msle", "kld", "KLD", "MSE", "bce"])
def test_aliases_are_keras_functions(alias):
    target = keras.losses.get(alias).__name__
    assert getattr(jt.losses, alias) is getattr(jt.losses, target)


def test_sparse_ignore_class_with_every_label_ignored_matches_keras():
    y_pred = _inputs("sparse_logits")[1]
    labels = np.full(N, 3)
    for reduction in ("sum_over_batch_size", "mean_with_sample_weight", "sum"):
        kw = {"from_logits": True, "ignore_class": 3, "reduction": reduction}
        _check(_value_and_grad(jt, jt.losses.SparseCategoricalCrossentropy(**kw), labels,
                               y_pred),
               _value_and_grad(tf, keras.losses.SparseCategoricalCrossentropy(**kw), labels,
                               y_pred), reduction)


def test_dtype_argument_matches_keras():
    y_true, y_pred = _inputs("regression")
    for cls in ("Huber", "LogCosh", "MeanSquaredError"):
        got = getattr(jt.losses, cls)(dtype="float64")(y_true, y_pred.astype(np.float32))
        want = getattr(keras.losses, cls)(dtype="float64")(y_true, y_pred)
        assert got.dtype.name == want.dtype.name == "float64"
        # Keras' log(2) in LogCosh is a float32 constant
        np.testing.assert_allclose(_np(got), _np(want), rtol=1e-7)


# ---------------------------------------------------------------------------
# configs, serialized forms and names


LOSS_CONFIGS = [(c, kw) for c, kw, _, _ in CASES] + [
    ("BinaryCrossentropy", {"from_logits": True, "axis": 0}),
    ("CategoricalCrossentropy", {"label_smoothing": 0.1}),
    ("SparseCategoricalCrossentropy", {}),
    ("MeanSquaredError", {"reduction": "sum", "name": "my_mse"}),
    ("Huber", {"reduction": None}),
    ("KLDivergence", {"reduction": "mean_with_sample_weight", "name": "kl"}),
]


def _config_inputs(cls, kw):
    y_true, y_pred = _inputs(next(kind for c, _, _, kind in CASES if c == cls))
    if cls == "SparseCategoricalCrossentropy" and kw.get("ignore_class") is None:
        y_true = np.maximum(y_true, 0)
    return y_true, y_pred


@pytest.mark.parametrize("cls,kw", LOSS_CONFIGS, ids=[c for c, _ in LOSS_CONFIGS])
def test_loss_configs_round_trip_with_keras(cls, kw):
    theirs = getattr(keras.losses, cls)(**kw)
    ours = getattr(jt.losses, cls).from_config(theirs.get_config())
    keras_config, our_config = theirs.get_config(), ours.get_config()
    # Keras' keys, with Keras' values (jittape's config also carries dtype and the
    # arguments Keras 3.15 leaves out of some configs: Huber's delta, CosineSimilarity's axis)
    assert set(keras_config) <= set(our_config)
    assert {k: our_config[k] for k in keras_config} == keras_config
    # the same loss as Keras builds from its own config (which, for those two, has lost
    # delta and axis)
    y_true, y_pred = _config_inputs(cls, kw)
    rebuilt = getattr(keras.losses, cls).from_config(keras_config)
    close(ours(y_true, y_pred), rebuilt(y_true, y_pred), f"{cls} from Keras' config")
    # and jittape's config builds the same loss in Keras, delta and axis included
    mirror = getattr(keras.losses, cls).from_config(
        getattr(jt.losses, cls)(**kw).get_config())
    assert {k: mirror.get_config()[k] for k in keras_config} == keras_config
    close(getattr(jt.losses, cls)(**kw)(y_true, y_pred), mirror(y_true, y_pred),
          f"{cls} into Keras from jittape's config")
    close(mirror(y_true, y_pred), theirs(y_true, y_pred), f"{cls} into Keras")


def test_loss_serialized_forms_match_keras():
    for cls, kw in LOSS_CONFIGS:
        want = keras.losses.serialize(getattr(keras.losses, cls)(**kw))
        got = jt.losses.serialize(getattr(jt.losses, cls)(**kw))
        assert {k: got[k] for k in ("module", "class_name", "registered_name")} == {
            k: want[k] for k in ("module", "class_name", "registered_name")}
        ours = jt.losses.deserialize(want)
        assert type(ours) is getattr(jt.losses, cls)
        assert {k: ours.get_config()[k] for k in want["config"]} == want["config"]
        assert keras.losses.deserialize(got).get_config() == want["config"] or cls in (
            "Huber", "CosineSimilarity")
    for fn in ("huber", "kl_divergence", "mean_squared_error"):
        want = keras.losses.serialize(getattr(keras.losses, fn))
        assert jt.losses.serialize(getattr(jt.losses, fn)) == want
        assert jt.losses.deserialize(want) is getattr(jt.losses, fn)


def test_every_keras_loss_name_resolves_the_same():
    from keras.src.losses import ALL_OBJECTS_DICT

    missing = {"CTC", "Dice", "Tversky", "Circle", "ctc", "dice", "tversky", "circle",
               "Loss", "LossFunctionWrapper"}
    for name in sorted(ALL_OBJECTS_DICT):
        if name in missing:
            continue
        want = keras.losses.get(name)
        got = jt.losses.get(name)
        if isinstance(want, keras.losses.Loss):
            assert type(got).__name__ == type(want).__name__, name
            assert {k: got.get_config()[k] for k in want.get_config()} == want.get_config()
        else:
            assert got.__name__ == want.__name__, name
    for name in sorted(missing - {"Loss", "LossFunctionWrapper"}):
        with pytest.raises(ValueError, match="jittape does not have yet"):
            jt.losses.get(name)


METRIC_CONFIGS = [
    ("Mean", {"name": "m"}), ("Sum", {}), ("Accuracy", {}),
    ("BinaryAccuracy", {"threshold": 0.3}), ("CategoricalAccuracy", {}),
    ("SparseCategoricalAccuracy", {"name": "acc", "dtype": "float64"}),
    ("TopKCategoricalAccuracy", {"k": 2}), ("SparseTopKCategoricalAccuracy", {"k": 3}),
    ("MeanSquaredError", {}), ("MeanAbsoluteError", {}), ("RootMeanSquaredError", {}),
    ("Precision", {"thresholds": [0.2, 0.7], "top_k": 2}), ("Recall", {"class_id": 1}),
    ("AUC", {"num_thresholds": 50, "curve": "PR", "summation_method": "minoring"}),
    ("AUC", {"thresholds": [0.3, 0.1, 0.75], "from_logits": True}),
]


@pytest.mark.parametrize("cls,kw", METRIC_CONFIGS, ids=[c for c, _ in METRIC_CONFIGS])
def test_metric_configs_round_trip_with_keras(cls, kw):
    theirs = getattr(keras.metrics, cls)(**kw)
    want = theirs.get_config()
    ours = getattr(jt.metrics, cls).from_config(want)
    got = ours.get_config()
    assert set(got) == set(want)
    for key in want:
        if key == "thresholds" and want[key] is not None:
            np.testing.assert_allclose(got[key], want[key])
        else:
            assert got[key] == want[key], key
    again = getattr(keras.metrics, cls).from_config(got).get_config()
    assert set(again) == set(want)
    s = jt.metrics.serialize(ours)
    ks = keras.metrics.serialize(theirs)
    assert {k: s[k] for k in ("module", "class_name", "registered_name")} == {
        k: ks[k] for k in ("module", "class_name", "registered_name")}
    assert type(jt.metrics.deserialize(ks)) is getattr(jt.metrics, cls)


def test_mean_metric_wrapper_config_round_trips_with_keras():
    theirs = keras.metrics.MeanMetricWrapper(keras.metrics.binary_accuracy, threshold=0.3)
    ours = jt.metrics.MeanMetricWrapper.from_config(theirs.get_config())
    assert ours.get_config() == theirs.get_config()
    y, p = _inputs("binary_probs")
    ours.update_state(y, p)
    theirs.update_state(y, p)
    close(ours.result(), theirs.result(), "MeanMetricWrapper")
    back = keras.metrics.MeanMetricWrapper.from_config(ours.get_config())
    assert back.get_config() == theirs.get_config()


def test_every_keras_metric_name_jittape_has_resolves_the_same():
    from keras.src.metrics import ALL_OBJECTS_DICT

    known = {c.__name__ for c in jt.metrics._CLASSES.values()}
    for name in sorted(ALL_OBJECTS_DICT):
        cls_name = ALL_OBJECTS_DICT[name].__name__
        if cls_name in ("Metric", "MeanMetricWrapper"):
            continue
        if cls_name not in known:
            with pytest.raises(ValueError, match="jittape does not have yet"):
                jt.metrics.get(name)
            continue
        assert type(jt.metrics.get(name)).__name__ == type(keras.metrics.get(name)).__name__


@pytest.mark.parametrize("from_logits", [False, True])
@pytest.mark.parametrize("cls,activation,labels", [
    ("BinaryFocalCrossentropy", "sigmoid", "binary"),
    ("CategoricalFocalCrossentropy", "softmax", "categorical"),
])
def test_focal_loss_of_a_layer_activation_output_matches_keras(cls, activation, labels,
                                                               from_logits):
    """Keras reads a sigmoid layer's logits for the binary focal loss's crossentropy
    (exact where the output saturates), not for the categorical one."""
    rng = np.random.default_rng(90)
    x = (rng.standard_normal((N, 3)) * 30).astype(F32)  # saturates the activation
    w = rng.standard_normal((3, C)).astype(F32)
    b = rng.standard_normal(C).astype(F32)
    y = (rng.integers(0, 2, (N, C)).astype(F32) if labels == "binary"
         else np.eye(C, dtype=F32)[rng.integers(0, C, N)])
    out = []
    for m, mod in ((jt, jt), (tf, keras)):
        layer = mod.layers.Dense(C, activation=activation)
        layer(x)
        layer.set_weights([w, b])
        loss = getattr(mod.losses, cls)(from_logits=from_logits)
        with m.GradientTape() as tape, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            value = loss(y, layer(x))
        out.append((value, tape.gradient(value, layer.kernel)))
    _check(*out, f"{cls}(from_logits={from_logits}) of a {activation} layer")
