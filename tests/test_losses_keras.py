"""jt.losses' Keras 3 set: each loss against a numpy reference written out from Keras'
documented formula (random inputs, sample weights, every reduction), the clipping and
label rules at the edges, gradients against central differences in float64, the
losses inside ``@jt.function``, errors, and the configs, serialized forms and names
of losses and metrics."""

import numpy as np
import pytest
from tolerances import tol

import jittape as jt
from jittape.keras import losses as Ls
from jittape.keras import metrics as M

T64 = tol("float64")
T32 = tol("float32")
EPS = 1e-7
N, C = 5, 4


def close(actual, expected, t=T64):
    np.testing.assert_allclose(np.asarray(actual), expected, rtol=t.fwd_rtol, atol=t.fwd_atol)


def rng(seed):
    return np.random.default_rng(seed)


# --------------------------------------------------------------------------
# numpy references, from the formulas in Keras' documentation


def np_l2n(x, axis=-1):
    norm = np.sqrt((x * x).sum(axis, keepdims=True))
    return x * np.minimum(1 / np.where(norm == 0, 1e-300, norm), 1 / EPS)


def np_sigmoid(z):
    return 1 / (1 + np.exp(-z))


def np_softmax(z, axis=-1):
    e = np.exp(z - z.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def np_hinge_labels(y):
    return 2 * y - 1 if np.isin(y, [0, 1]).all() else y


def np_bce(y, p):
    q = np.clip(p, EPS, 1 - EPS)
    return -(y * np.log(q) + (1 - y) * np.log(1 - q))


def np_bce_logits(y, z):
    return np.maximum(z, 0) - z * y + np.log1p(np.exp(-np.abs(z)))


def np_bfce(y, p, apply_class_balancing=False, alpha=0.25, gamma=2.0, from_logits=False,
            label_smoothing=0.0):
    y = y * (1 - label_smoothing) + 0.5 * label_smoothing
    if from_logits:
        bce, p = np_bce_logits(y, p), np_sigmoid(p)
    else:
        bce = np_bce(y, p)
    p_t = y * p + (1 - y) * (1 - p)
    focal = (1 - p_t) ** gamma * bce
    if apply_class_balancing:
        focal = (y * alpha + (1 - y) * (1 - alpha)) * focal
    return focal.mean(-1)


def np_cfce(y, p, alpha=0.25, gamma=2.0, from_logits=False, label_smoothing=0.0):
    y = y * (1 - label_smoothing) + label_smoothing / y.shape[-1]
    if from_logits:
        p = np_softmax(p)
    q = np.clip(p / p.sum(-1, keepdims=True), EPS, 1 - EPS)
    return (-np.asarray(alpha) * (1 - q) ** gamma * y * np.log(q)).sum(-1)


REFERENCES = {
    "mean_absolute_percentage_error":
        lambda y, p: 100 * np.abs((y - p) / np.maximum(np.abs(y), EPS)).mean(-1),
    "mean_squared_logarithmic_error":
        lambda y, p: ((np.log(np.maximum(p, EPS) + 1) - np.log(np.maximum(y, EPS) + 1))
                      ** 2).mean(-1),
    "cosine_similarity": lambda y, p: -(np_l2n(y) * np_l2n(p)).sum(-1),
    "huber": lambda y, p, delta=1.0: np.where(
        np.abs(p - y) <= delta, 0.5 * (p - y) ** 2,
        delta * np.abs(p - y) - 0.5 * delta**2).mean(-1),
    "log_cosh": lambda y, p: np.log(np.cosh(p - y)).mean(-1),
    "hinge": lambda y, p: np.maximum(1 - np_hinge_labels(y) * p, 0).mean(-1),
    "squared_hinge": lambda y, p: (np.maximum(1 - np_hinge_labels(y) * p, 0) ** 2).mean(-1),
    "categorical_hinge": lambda y, p: np.maximum(
        ((1 - y) * p).max(-1) - (y * p).sum(-1) + 1, 0),
    "kl_divergence": lambda y, p: (np.clip(y, EPS, 1) * np.log(
        np.clip(y, EPS, 1) / np.clip(p, EPS, 1))).sum(-1),
    "poisson": lambda y, p: (p - y * np.log(p + EPS)).mean(-1),
    "binary_focal_crossentropy": np_bfce,
    "categorical_focal_crossentropy": np_cfce,
}


def _data(kind, seed=0):
    """float64 ``(y_true, y_pred)`` of ``kind``, away from the formulas' kinks."""
    r = rng(seed)
    if kind == "regression":
        return r.standard_normal((N, C)), r.standard_normal((N, C)) * 2
    if kind == "positive":
        return r.uniform(0.1, 3, (N, C)), r.uniform(0.1, 3, (N, C))
    if kind == "labels01":
        return r.integers(0, 2, (N, C)).astype(float), r.standard_normal((N, C)) * 2
    if kind == "onehot":
        return np.eye(C)[r.integers(0, C, N)], r.standard_normal((N, C)) * 2
    if kind == "distribution":
        return r.dirichlet(np.ones(C), N), r.dirichlet(np.ones(C), N)
    if kind == "binary":
        return r.integers(0, 2, (N, C)).astype(float), r.uniform(0.05, 0.95, (N, C))
    if kind == "categorical":
        return np.eye(C)[r.integers(0, C, N)], r.dirichlet(np.ones(C), N)
    raise AssertionError(kind)


# (class, function, kwargs, kind)
CASES = [
    ("MeanAbsolutePercentageError", "mean_absolute_percentage_error", {}, "regression"),
    ("MeanSquaredLogarithmicError", "mean_squared_logarithmic_error", {}, "positive"),
    ("CosineSimilarity", "cosine_similarity", {}, "regression"),
    ("Huber", "huber", {}, "regression"),
    ("Huber", "huber", {"delta": 0.4}, "regression"),
    ("LogCosh", "log_cosh", {}, "regression"),
    ("Hinge", "hinge", {}, "labels01"),
    ("SquaredHinge", "squared_hinge", {}, "labels01"),
    ("CategoricalHinge", "categorical_hinge", {}, "onehot"),
    ("KLDivergence", "kl_divergence", {}, "distribution"),
    ("Poisson", "poisson", {}, "positive"),
    ("BinaryFocalCrossentropy", "binary_focal_crossentropy", {}, "binary"),
    ("BinaryFocalCrossentropy", "binary_focal_crossentropy",
     {"apply_class_balancing": True, "alpha": 0.6, "gamma": 1.5, "label_smoothing": 0.2},
     "binary"),
    ("BinaryFocalCrossentropy", "binary_focal_crossentropy",
     {"from_logits": True, "gamma": 3.0}, "labels01"),
    ("CategoricalFocalCrossentropy", "categorical_focal_crossentropy", {}, "categorical"),
    ("CategoricalFocalCrossentropy", "categorical_focal_crossentropy",
     {"alpha": [0.1, 0.2, 0.3, 0.4], "gamma": 1.0, "label_smoothing": 0.1}, "categorical"),
    ("CategoricalFocalCrossentropy", "categorical_focal_crossentropy",
     {"from_logits": True}, "onehot"),
]
IDS = [f"{c[0]}-{i}" for i, c in enumerate(CASES)]
SW = rng(9).uniform(0, 2, N)


def np_reduce(per, reduction, sw=None):
    """Keras 3's reductions of per-sample values ``per`` of shape (N,)."""
    v = per if sw is None else per * sw
    if reduction in (None, "none"):
        return v
    if reduction == "sum":
        return v.sum()
    if reduction == "mean_with_sample_weight" and sw is not None:
        return v.sum() / np.sum(sw)
    return v.sum() / v.size


@pytest.mark.parametrize("cls,fn,kw,kind", CASES, ids=IDS)
def test_loss_matches_the_documented_formula(cls, fn, kw, kind):
    y, p = _data(kind, seed=len(kw))
    per = REFERENCES[fn](y, p, **kw)
    close(getattr(Ls, fn)(y, jt.constant(p), **kw).numpy(), per)
    for reduction in ("sum_over_batch_size", "sum", "none", None, "mean",
                      "mean_with_sample_weight"):
        loss = getattr(Ls, cls)(reduction=reduction, **kw)
        close(loss(y, jt.constant(p)).numpy(), np_reduce(per, reduction))
        close(loss(y, jt.constant(p), sample_weight=SW).numpy(), np_reduce(per, reduction, SW))
        # a (batch, 1) weight: Keras makes the per-sample values a column
        got = loss(y, jt.constant(p), sample_weight=SW[:, None]).numpy()
        want = np_reduce(per, reduction, SW)
        close(got, want[:, None] if np.ndim(want) else want)


# --------------------------------------------------------------------------
# the edges Keras handles


def f(x):
    return jt.constant(np.asarray(x, np.float64))


def test_clipping_and_epsilons():
    # MAPE divides by max(|y|, eps); MSLE and Poisson take eps for values <= 0
    close(Ls.mape([[0.0, 2.0]], f([[1e-3, 1.0]])).numpy(), [100 * (1e-3 / EPS + 0.5) / 2])
    close(Ls.msle([[-1.0, 0.0]], f([[-5.0, 3.0]])).numpy(),
          [(0 + (np.log(4) - np.log(1 + EPS)) ** 2) / 2])
    close(Ls.poisson([[1.0, 0.0]], f([[0.0, 2.0]])).numpy(), [(-np.log(EPS) + 2) / 2])
    # KL: both sides clipped to [eps, 1]: a 0 label still adds eps * log(eps / p)
    y, p = np.array([[0.0, 1.0]]), np.array([[0.5, 0.0]])
    close(Ls.kld(y, f(p)).numpy(), [EPS * np.log(EPS / 0.5) + np.log(1 / EPS)])
    # focal losses of exact 0/1 probabilities are finite (the crossentropy is clipped)
    y, p = np.array([[1.0, 0.0, 1.0]]), np.array([[0.0, 1.0, 1.0]])
    got = Ls.binary_focal_crossentropy(y, f(p), gamma=1.0)
    close(got.numpy(), np_bfce(y, p, gamma=1.0))
    assert np.isfinite(got.numpy()).all()
    got = Ls.categorical_focal_crossentropy([[1.0, 0.0, 0.0]], f([[0.0, 1.0, 0.0]]))
    close(got.numpy(), [0.25 * (1 - EPS) ** 2 * -np.log(EPS)])


def test_from_logits_is_exact_beyond_the_clip():
    y, z = np.array([[1.0, 0.0]]), np.array([[-60.0, 60.0]])
    # the crossentropy from the logits (60 each), not -log(1e-7) ~ 16.1
    close(Ls.binary_focal_crossentropy(y, jt.constant(z), from_logits=True, gamma=0.0).numpy(),
          [60.0])
    close(Ls.binary_focal_crossentropy(y, jt.constant(z), from_logits=True).numpy(),
          np_bfce(y, z, from_logits=True))
    close(Ls.categorical_focal_crossentropy([[1.0, 0.0]], f([[0.0, 40.0]]),
                                            from_logits=True, gamma=0.0, alpha=1.0).numpy(),
          [-np.log(EPS)])  # categorical focal: softmax, then the clip (as Keras)


def test_large_errors_do_not_overflow():
    e = np.array([[1e4, -1e4, 800.0, 1e-3]])
    got = Ls.log_cosh(np.zeros((1, 4)), jt.constant(e)).numpy()
    close(got, [(1e4 - np.log(2)) * 2 / 4 + (800 - np.log(2)) / 4 + np.log(np.cosh(1e-3)) / 4])
    got32 = Ls.log_cosh(np.zeros((1, 4), np.float32), jt.constant(e.astype(np.float32)))
    assert got32.dtype == jt.float32 and np.isfinite(got32.numpy()).all()


def test_hinge_label_conversion_follows_keras():
    p = np.array([[0.3, -0.8, 2.0]])
    # all labels 0/1: mapped to -1/1
    close(Ls.hinge([[0.0, 1.0, 1.0]], jt.constant(p)).numpy(), [(1.3 + 1.8 + 0) / 3])
    # -1/1 labels unchanged: the same values
    close(Ls.hinge([[-1.0, 1.0, 1.0]], jt.constant(p)).numpy(), [(1.3 + 1.8 + 0) / 3])
    # any other label (here 0.5) keeps them all as they are: 0 stays 0
    close(Ls.hinge([[0.0, 0.5, 1.0]], jt.constant(p)).numpy(), [(1 + 1.4 + 0) / 3])
    close(Ls.squared_hinge([[0.0, 1.0, 1.0]], jt.constant(p)).numpy(),
          [(1.3**2 + 1.8**2) / 3])
    # integer labels too
    close(Ls.Hinge(reduction="none")(np.array([[0, 1, 1]]), jt.constant(p)).numpy(),
          [(1.3 + 1.8) / 3])


def test_cosine_similarity_of_a_zero_vector_is_zero_with_a_finite_gradient():
    p = jt.Variable(np.array([[0.0, 0.0], [3.0, 4.0]]))
    y = np.array([[1.0, 2.0], [6.0, 8.0]])
    with jt.GradientTape() as tape:
        per = Ls.cosine_similarity(y, p)
    close(per.numpy(), [0.0, -1.0])
    g = tape.gradient(per, p).numpy()
    assert np.isfinite(g).all()
    # along axis 0: one value per column
    y2, p2 = _data("regression", 3)
    close(Ls.CosineSimilarity(axis=0, reduction="none")(y2, jt.constant(p2)).numpy(),
          -(np_l2n(y2, 0) * np_l2n(p2, 0)).sum(0))


def test_label_smoothing_of_the_focal_losses():
    y, p = _data("binary", 4)
    for ls in (0.0, 0.1, 0.5):
        close(Ls.binary_focal_crossentropy(y, jt.constant(p), label_smoothing=ls).numpy(),
              np_bfce(y, p, label_smoothing=ls))
    y, p = _data("categorical", 4)
    close(Ls.CategoricalFocalCrossentropy(label_smoothing=0.3, reduction="none")(
        y, jt.constant(p)).numpy(), np_cfce(y, p, label_smoothing=0.3))
    # gamma = 0 without balancing is the binary crossentropy
    close(Ls.binary_focal_crossentropy(y, jt.constant(p), gamma=0.0).numpy(),
          Ls.binary_crossentropy(y, jt.constant(p)).numpy())


# --------------------------------------------------------------------------
# SparseCategoricalCrossentropy(ignore_class=)


def np_scce(labels, p):
    q = np.clip(p, EPS, 1 - EPS)
    logq = np.log(q) - np.log(q.sum(-1, keepdims=True))
    return -logq[np.arange(len(labels)), np.where(labels < 0, 0, labels)]


def test_sparse_crossentropy_ignore_class_leaves_the_samples_out_of_the_mean():
    labels = np.array([2, -1, 0, 3, -1])
    p = _data("categorical", 5)[1]
    valid = labels != -1
    per = np.where(valid, np_scce(labels, p), 0.0)
    close(Ls.sparse_categorical_crossentropy(labels, jt.constant(p), ignore_class=-1).numpy(),
          per)
    for reduction, want, want_w in [
        ("sum_over_batch_size", per.sum() / valid.sum(), (per * SW).sum() / valid.sum()),
        ("mean", per.sum() / valid.sum(), (per * SW).sum() / valid.sum()),
        ("sum", per.sum(), (per * SW).sum()),
        ("mean_with_sample_weight", per.sum() / valid.sum(),
         (per * SW).sum() / (SW * valid).sum()),
        ("none", per, per * SW),
    ]:
        loss = Ls.SparseCategoricalCrossentropy(ignore_class=-1, reduction=reduction)
        close(loss(labels, jt.constant(p)).numpy(), want)
        close(loss(labels, jt.constant(p), sample_weight=SW).numpy(), want_w)
    # labels as a column, a class id in range (here 0) as the ignored one, from logits
    z = np.log(p) + 1.5
    loss = Ls.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0)
    column = np.maximum(labels, 0)[:, None]
    keep = column[:, 0] != 0
    want = np.where(keep, np_scce(column[:, 0], p), 0.0)
    close(loss(column, jt.constant(z)).numpy(), want.sum() / keep.sum())
    # every sample ignored: 0, and a zero gradient (Keras' divide_no_nan)
    zv = jt.Variable(z)
    with jt.GradientTape() as tape:
        value = Ls.SparseCategoricalCrossentropy(ignore_class=7)(np.full(N, 7), zv)
    assert float(value) == 0.0
    np.testing.assert_array_equal(tape.gradient(value, zv).numpy(), np.zeros_like(z))


def test_sparse_crossentropy_ignore_class_gradient():
    labels = np.array([1, 255, 3, 0, 255])
    z = jt.Variable(rng(6).standard_normal((N, C)))
    with jt.GradientTape() as tape:
        value = Ls.SparseCategoricalCrossentropy(from_logits=True, ignore_class=255)(labels, z)
    valid = labels != 255
    want = (np_softmax(z.numpy()) - np.eye(C)[np.where(valid, labels, 0)]) * valid[:, None]
    close(tape.gradient(value, z).numpy(), want / valid.sum())


# --------------------------------------------------------------------------
# gradients against central differences (float64)


def check_gradient(fn, y, p, seed=0):
    """<J^T u, v> from the tape against the central difference of sum(fn) along v."""
    v = rng(seed).standard_normal(p.shape)
    var = jt.Variable(p)
    with jt.GradientTape() as tape:
        value = jt.reduce_sum(fn(y, var))
    g = tape.gradient(value, var).numpy()

    def f(q):
        return float(jt.reduce_sum(fn(y, jt.constant(q))))

    h = T64.fd_eps
    fd = (f(p + h * v) - f(p - h * v)) / (2 * h)
    analytic = float((g * v).sum())
    scale = float(np.abs(g * v).sum())
    assert abs(analytic - fd) <= T64.fd_rtol * scale + T64.fd_atol, (analytic, fd)


@pytest.mark.parametrize("cls,fn,kw,kind", CASES, ids=IDS)
def test_gradient_matches_finite_differences(cls, fn, kw, kind):
    y, p = _data(kind, seed=11)
    check_gradient(lambda a, b: getattr(Ls, fn)(a, b, **kw), y, p)
    check_gradient(lambda a, b: getattr(Ls, cls)(**kw)(a, b, sample_weight=SW), y, p, seed=1)


def test_gradient_of_the_sparse_crossentropy_with_ignore_class():
    labels = np.array([1, -1, 3, 0, -1])
    p = _data("categorical", 12)[1]
    for from_logits in (False, True):
        loss = Ls.SparseCategoricalCrossentropy(from_logits=from_logits, ignore_class=-1)
        check_gradient(lambda a, b: loss(a, b, sample_weight=SW), labels, p)


# --------------------------------------------------------------------------
# inside @jt.function


def test_losses_in_a_compiled_step_match_eager():
    delta = jt.Variable(1.0, dtype="float32")  # a value that changes between calls
    losses = [
        Ls.Huber(delta=delta), Ls.LogCosh(), Ls.CosineSimilarity(),
        Ls.Hinge(reduction="sum"), Ls.KLDivergence(), Ls.Poisson(),
        Ls.BinaryFocalCrossentropy(from_logits=True, apply_class_balancing=True),
        Ls.CategoricalFocalCrossentropy(alpha=[0.1, 0.2, 0.3, 0.4], label_smoothing=0.1),
        Ls.SparseCategoricalCrossentropy(from_logits=True, ignore_class=-1),
        Ls.MeanSquaredLogarithmicError(reduction="mean_with_sample_weight"),
    ]
    w = jt.Variable(rng(1).standard_normal((3, C)).astype(np.float32))

    def step(x, y01, yc, labels, sw):
        with jt.GradientTape() as tape:
            out = jt.matmul(x, w)
            soft = jt.nn.softmax(out)
            values = [
                losses[0](y01, out, sample_weight=sw), losses[1](y01, out),
                losses[2](y01, out), losses[3](y01, out), losses[4](yc, soft),
                losses[5](yc, jt.exp(out)), losses[6](y01, out), losses[7](yc, soft),
                losses[8](labels, out), losses[9](yc, soft, sample_weight=sw),
            ]
            total = jt.add_n(values)
        return values, tape.gradient(total, w)

    compiled = jt.function(step)
    for seed in (0, 1):
        r = rng(seed)
        args = (r.standard_normal((N, 3)).astype(np.float32),
                r.integers(0, 2, (N, C)).astype(np.float32),
                np.eye(C, dtype=np.float32)[r.integers(0, C, N)],
                np.where(r.random(N) < 0.3, -1, r.integers(0, C, N)),
                r.uniform(0, 2, N).astype(np.float32))
        delta.assign(0.5 + seed)
        (got, g), (want, gw) = compiled(*map(jt.constant, args)), step(*args)
        for a, b in zip(got + [g], want + [gw]):
            assert a.dtype == jt.float32
            close(a.numpy(), b.numpy(), T32)
    assert compiled.cache_info().traces == 1  # delta is read, not baked in


# --------------------------------------------------------------------------
# arguments, dtypes, errors


def test_reductions_and_dtype_arguments():
    y, p = _data("regression", 2)
    per = REFERENCES["huber"](y, p)
    # the reduction is kept as given (Keras' get_config shows it so)
    assert Ls.Huber(reduction="mean").reduction == "mean"
    assert Ls.Huber(reduction=None).reduction is None
    close(Ls.Huber(reduction=None)(y, jt.constant(p)).numpy(), per)
    # dtype: y_pred (and so y_true) cast to it; by default y_pred's own float dtype
    p32 = jt.constant(p.astype(np.float32))
    assert Ls.Huber()(y, p32).dtype == jt.float32
    assert Ls.Huber()(y, jt.constant(p)).dtype == jt.float64
    assert Ls.Huber()(y.tolist(), p.astype(np.float32).tolist()).dtype == jt.float32
    out = Ls.Huber(dtype="float64")(y, p32)
    assert out.dtype == jt.float64 and Ls.Huber(dtype="float64").dtype == jt.float64
    close(out.numpy(), REFERENCES["huber"](y, p.astype(np.float32).astype(np.float64)).mean())
    assert Ls.Huber().dtype is None
    assert Ls.Huber().name == "huber_loss" and Ls.KLDivergence().name == "kl_divergence"


@pytest.mark.parametrize("make, match", [
    (lambda: Ls.Huber(delta=0.0), r"Huber: `delta` must be > 0.0, got 0.0"),
    (lambda: Ls.Huber(delta="1"), r"Huber: `delta` must be a finite number, got '1'"),
    (lambda: Ls.huber([[1.0]], [[2.0]], delta=-1), r"huber: `delta` must be > 0.0, got -1"),
    (lambda: Ls.BinaryFocalCrossentropy(alpha=1.5),
     r"BinaryFocalCrossentropy: `alpha` must be <= 1.0, got 1.5"),
    (lambda: Ls.BinaryFocalCrossentropy(gamma=-2.0),
     r"BinaryFocalCrossentropy: `gamma` must be >= 0.0, got -2.0"),
    (lambda: Ls.CategoricalFocalCrossentropy(gamma=float("nan")),
     r"CategoricalFocalCrossentropy: `gamma` must be a finite number, got nan"),
    (lambda: Ls.CategoricalFocalCrossentropy(alpha=[0.5, 0.5])(np.eye(3), np.eye(3)),
     r"categorical_focal_crossentropy: `alpha` must be a number or one finite number per "
     r"class \(3\), got \[0.5, 0.5\]"),
    (lambda: Ls.BinaryCrossentropy(label_smoothing=1.5),
     r"BinaryCrossentropy: `label_smoothing` must be <= 1.0, got 1.5"),
    (lambda: Ls.categorical_crossentropy(np.eye(2), np.eye(2), axis=True),
     r"categorical_crossentropy: `axis` must be an int, got True"),
    (lambda: Ls.SparseCategoricalCrossentropy(ignore_class=1.5),
     r"SparseCategoricalCrossentropy: `ignore_class` must be an int or None, got 1.5"),
    (lambda: Ls.SparseCategoricalCrossentropy(axis=0),
     r"SparseCategoricalCrossentropy: only the last axis \(-1\) can be the class axis"),
    (lambda: Ls.Poisson(reduction="auto"),
     r"Poisson: Invalid value for argument `reduction`: 'auto' \(Keras 2's 'auto' is "
     r"'sum_over_batch_size' in Keras 3\)"),
    (lambda: Ls.LogCosh(dtype="int32"), r"LogCosh: dtype must be a float dtype, got int32"),
    (lambda: Ls.LossFunctionWrapper(3), r"LossFunctionWrapper: `fn` must be callable, got 3"),
])
def test_bad_arguments_name_the_loss_argument_and_value(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_shape_errors_name_the_function():
    with pytest.raises(jt.errors.InvalidArgumentError,
                       match=r"kl_divergence: y_true and y_pred must have the same shape, got "
                             r"y_true \[5, 3\] and y_pred \[5, 4\]"):
        Ls.KLDivergence()(np.ones((N, 3)), np.ones((N, C)))
    with pytest.raises(jt.errors.InvalidArgumentError,
                       match="huber: expected inputs with at least one axis"):
        Ls.huber(1.0, 2.0)
    with pytest.raises(jt.errors.InvalidArgumentError,
                       match="categorical_hinge: y_pred must be a float tensor, got int32"):
        Ls.categorical_hinge(np.eye(2), jt.constant(np.eye(2, dtype=np.int32)))
    with pytest.raises(jt.errors.InvalidArgumentError,
                       match=r"sparse_categorical_crossentropy: sample_weight of shape \[4\] "
                             r"does not broadcast to the per-sample losses of shape \[3\]"):
        Ls.SparseCategoricalCrossentropy(ignore_class=-1)([0, 1, -1], np.ones((3, 2)) / 2,
                                                          sample_weight=np.ones(4))


def test_one_class_categorical_input_warns_as_keras():
    with pytest.warns(SyntaxWarning, match="Consider using 'binary_crossentropy'"):
        Ls.categorical_focal_crossentropy(np.ones((3, 1)), np.ones((3, 1)) * 0.5)


# --------------------------------------------------------------------------
# configs, serialize / deserialize, get: losses


LOSS_CLASSES = [getattr(Ls, name) for name in sorted(Ls._CLASSES)]
NON_DEFAULT = {
    "CosineSimilarity": {"axis": 0}, "Huber": {"delta": 0.3},
    "BinaryCrossentropy": {"from_logits": True, "label_smoothing": 0.1, "axis": 0},
    "BinaryFocalCrossentropy": {"apply_class_balancing": True, "alpha": 0.4, "gamma": 1.0},
    "CategoricalCrossentropy": {"label_smoothing": 0.2},
    "CategoricalFocalCrossentropy": {"alpha": [0.2, 0.8], "gamma": 0.5, "from_logits": True},
    "SparseCategoricalCrossentropy": {"from_logits": True, "ignore_class": 255},
}


@pytest.mark.parametrize("cls", LOSS_CLASSES, ids=lambda c: c.__name__)
def test_loss_config_round_trips(cls):
    kw = {**NON_DEFAULT.get(cls.__name__, {}), "reduction": "sum", "name": "x",
          "dtype": "float64"}
    loss = cls(**kw)
    config = loss.get_config()
    assert {k: config[k] for k in kw} == kw  # Keras' keys, with the values given
    assert set(config) == {"name", "reduction", "dtype", *loss._fn_kwargs}
    again = cls.from_config(config)
    assert type(again) is cls and again.get_config() == config
    s = Ls.serialize(loss)
    assert s == {"module": "keras.losses", "class_name": cls.__name__, "config": config,
                 "registered_name": None}
    for form in (s, {"class_name": cls.__name__, "config": config}):
        back = Ls.deserialize(form)
        assert type(back) is cls and back.get_config() == config
        assert Ls.get(form).get_config() == config
    # defaults: Keras' names and reduction
    default = cls().get_config()
    assert default["reduction"] == "sum_over_batch_size" and default["dtype"] is None
    assert cls.from_config({"name": default["name"]}).get_config() == default


def test_a_config_without_the_new_keys_still_builds():
    # a Keras config: no dtype, and (Keras 3.15) no delta for Huber
    h = Ls.Huber.from_config({"name": "huber_loss", "reduction": "sum_over_batch_size"})
    assert h.delta == 1.0 and h.dtype is None
    d = Ls.Huber.from_config({"name": "h", "reduction": "sum", "dtype": {
        "module": "keras", "class_name": "DTypePolicy", "config": {"name": "float64"},
        "registered_name": None}})
    assert d.dtype == jt.float64


def test_get_resolves_keras_names():
    # functions by their names and aliases, classes (new instances) by theirs
    for name, fn in [("mse", Ls.mean_squared_error), ("MAE", Ls.mean_absolute_error),
                     ("mape", Ls.mean_absolute_percentage_error),
                     ("MSLE", Ls.mean_squared_logarithmic_error), ("kld", Ls.kl_divergence),
                     ("KLD", Ls.kl_divergence), ("logcosh", Ls.log_cosh),
                     ("log_cosh", Ls.log_cosh), ("bce", Ls.binary_crossentropy),
                     ("huber", Ls.huber), ("categorical_hinge", Ls.categorical_hinge),
                     ("binary_focal_crossentropy", Ls.binary_focal_crossentropy)]:
        assert Ls.get(name) is fn, name
        assert Ls.serialize(fn)["config"] == fn.__name__
    for cls in LOSS_CLASSES:
        assert type(Ls.get(cls.__name__)) is cls
        assert type(Ls.get(cls)) is cls
    huber = Ls.Huber()
    assert Ls.get(huber) is huber and Ls.get(None) is None

    def custom(y, p):
        return jt.reduce_mean(p - y, axis=-1)

    assert Ls.get(custom) is custom
    with pytest.raises(ValueError, match="Could not interpret loss identifier: 'nope'; known "
                                         "names: BCE, "):
        Ls.get("nope")
    with pytest.raises(ValueError, match="Could not interpret loss identifier: 'CTC' \\(a "
                                         "Keras loss jittape does not have yet\\)"):
        Ls.get("CTC")
    with pytest.raises(ValueError, match="Could not interpret loss identifier: 42"):
        Ls.get(42)
    with pytest.raises(ValueError, match="Could not interpret loss identifier: 'Nope'"):
        Ls.deserialize({"class_name": "Nope", "config": {}})
    with pytest.raises(ValueError, match="expected a name or a dict with 'class_name'"):
        Ls.deserialize({"config": {}})


def test_custom_losses_serialize_and_come_back_through_custom_objects():
    class Scaled(Ls.Loss):  # written for Keras: no dtype argument
        def __init__(self, factor=2.0, name="scaled", reduction="sum_over_batch_size"):
            super().__init__(name=name, reduction=reduction)
            self.factor = factor

        def call(self, y_true, y_pred):
            return self.factor * Ls.mse(y_true, y_pred)

        def get_config(self):
            return {**super().get_config(), "factor": self.factor}

    s = Ls.serialize(Scaled(3.0))
    assert s["class_name"] == "Scaled" and s["registered_name"] == "Scaled"
    back = Ls.deserialize(s, custom_objects={"Scaled": Scaled})
    assert back.factor == 3.0 and back.name == "scaled"
    close(float(back([[1.0]], [[2.0]])), 3.0)
    # a wrapped function keeps its function and arguments
    wrapped = Ls.LossFunctionWrapper(Ls.huber, reduction="sum", delta=0.5)
    config = wrapped.get_config()
    assert config["fn"] == Ls.serialize(Ls.huber) and config["delta"] == 0.5
    again = Ls.LossFunctionWrapper.from_config(config)
    assert again.fn is Ls.huber and again.get_config() == config
    y, p = _data("regression", 7)
    close(float(again(y, jt.constant(p))), REFERENCES["huber"](y, p, delta=0.5).sum())

    def summed(y_true, y_pred):  # a user function gets Keras' rank alignment
        return jt.reduce_sum(y_pred - y_true, axis=-1)

    got = Ls.LossFunctionWrapper(summed, reduction="none")([1.0, 2.0], [[1.5], [1.0]])
    close(got.numpy(), [0.5, -1.0])
    assert Ls.LossFunctionWrapper(summed).name == "summed"


# --------------------------------------------------------------------------
# configs, serialize / deserialize, get: metrics


METRIC_ARGS = {
    "MeanMetricWrapper": {"fn": M.binary_accuracy, "threshold": 0.3},
    "BinaryAccuracy": {"threshold": 0.7}, "TopKCategoricalAccuracy": {"k": 2},
    "SparseTopKCategoricalAccuracy": {"k": 3},
    "Precision": {"thresholds": [0.2, 0.6], "top_k": 2, "class_id": 1},
    "Recall": {"thresholds": 0.4},
    "AUC": {"num_thresholds": 20, "curve": "PR", "summation_method": "majoring",
            "from_logits": True},
}


@pytest.mark.parametrize("name", sorted(M._CLASSES))
def test_metric_config_round_trips(name):
    cls = M._CLASSES[name]
    m = cls(**METRIC_ARGS.get(name, {}), name="m", dtype="float64")
    config = m.get_config()
    assert config["name"] == "m" and config["dtype"] == "float64"
    again = cls.from_config(config)
    assert type(again) is cls and again.get_config() == config
    s = M.serialize(m)
    assert s == {"module": "keras.metrics", "class_name": name, "config": config,
                 "registered_name": None}
    for form in (s, {"class_name": name, "config": config}):
        back = M.deserialize(form)
        assert type(back) is cls and back.get_config() == config
    # the rebuilt metric computes the same (fresh state)
    y = np.array([[1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 0.0]])
    p = np.array([[0.9, 0.3, 0.4, 0.1], [0.2, 0.8, 0.6, 0.3]])
    if name in ("Mean", "Sum"):
        m.update_state(p)
        again.update_state(p)
    elif name in ("SparseCategoricalAccuracy", "SparseTopKCategoricalAccuracy"):
        m.update_state([0, 1], p)
        again.update_state([0, 1], p)
    else:
        m.update_state(y, p)
        again.update_state(y, p)
    close(np.asarray(again.result()), np.asarray(m.result()))


def test_auc_with_thresholds_config_round_trips():
    auc = M.AUC(thresholds=[0.7, 0.2])
    config = auc.get_config()
    assert config["thresholds"] == [0.2, 0.7] and config["num_thresholds"] == 4
    assert M.AUC.from_config(config).thresholds == auc.thresholds


def test_metrics_get_resolves_keras_names():
    for name, cls in [("accuracy", M.Accuracy), ("Accuracy", M.Accuracy), ("acc", M.Accuracy),
                      ("auc", M.AUC), ("AUC", M.AUC), ("mse", M.MeanSquaredError),
                      ("MAE", M.MeanAbsoluteError), ("sum", M.Sum),
                      ("root_mean_squared_error", M.RootMeanSquaredError),
                      ("top_k_categorical_accuracy", M.TopKCategoricalAccuracy),
                      ("SparseTopKCategoricalAccuracy", M.SparseTopKCategoricalAccuracy)]:
        assert type(M.get(name)) is cls, name
    auc = M.get({"class_name": "AUC", "config": {"curve": "PR"}})
    assert auc.curve == "PR"
    assert type(M.get(M.Precision)) is M.Precision
    assert M.get(M.binary_accuracy) is M.binary_accuracy and M.get(None) is None
    fn_form = M.serialize(M.sparse_categorical_accuracy)
    assert fn_form["class_name"] == "function"
    assert M.deserialize(fn_form) is M.sparse_categorical_accuracy
    with pytest.raises(ValueError, match="Could not interpret metric identifier: 'f1_score' "
                                         r"\(a Keras metric jittape does not have yet\)"):
        M.get("f1_score")
    with pytest.raises(ValueError, match="Could not interpret metric identifier: 'nope'"):
        M.get("nope")
    with pytest.raises(ValueError, match="Could not interpret metric identifier: 3.5"):
        M.get(3.5)
