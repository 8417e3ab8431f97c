"""One trace for a family of shapes (issue 19): ``input_signature`` with ``None`` dims and
``reduce_retracing=True`` trace with symbolic sizes (``jittape.compiler.dims``), as TF does, so that
the Python function runs once and one trace serves every batch size; each new binding of
the sizes is specialized (passes, code generation) and compiles nothing new."""

import numpy as np
import pytest

import jittape as jt
from jittape.compiler.dims import Dim, SymbolicSizeError, new_symbol, unify

BACKENDS = ["interpret", "cpu"]


# ---------------------------------------------------------------------------
# Dim arithmetic


def test_dim_arithmetic_and_comparisons():
    s = new_symbol("dimension 0 of argument 'x'")
    t = new_symbol("dimension 0 of argument 'y'")
    assert str(s * 784) == "784*s0" or str(s * 784).endswith("*s0")
    assert (s * 784) // 784 == s and (s * 28 * 28) // s == 784
    assert s + s == 2 * s and s - s == 0 and (s * 3) % 3 == 0
    assert s != 1 and s != 784 and s == s and s != t
    assert s >= 1 and s > 0 and not (s < 1)
    with pytest.raises(SymbolicSizeError, match="dimension 0 of argument 'x'"):
        int(s)
    with pytest.raises(SymbolicSizeError):
        s > 1  # noqa: B015 - undecidable without the value
    with pytest.raises(SymbolicSizeError, match="not a known multiple"):
        s // 3
    assert unify(s, t) and s == t  # two unknown sizes a rule needs equal become one
    assert not unify(s, 5) and unify(s, None)
    assert (2 * s + 1).evaluate({s.symbol(): 4}) == 9
    assert isinstance(s, Dim) and hash(s) == hash(t * 1)


# ---------------------------------------------------------------------------
# One trace for every batch size


def _mlp(seed=0, dtype="float64"):
    rng = np.random.default_rng(seed)
    w1 = jt.Variable(rng.normal(size=(6, 8)) * 0.3, dtype=dtype)
    b1 = jt.Variable(np.zeros(8), dtype=dtype)
    w2 = jt.Variable(rng.normal(size=(8, 3)) * 0.3, dtype=dtype)
    b2 = jt.Variable(np.zeros(3), dtype=dtype)
    return [w1, b1, w2, b2]


def _step(params, opt, x, y, seen):
    seen.append(tuple(x.shape))
    w1, b1, w2, b2 = params
    with jt.GradientTape() as tape:
        h = jt.nn.relu(x @ w1 + b1)
        logits = h @ w2 + b2
        loss = jt.reduce_mean(
            jt.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    grads = tape.gradient(loss, params)
    opt.apply_gradients(zip(grads, params))
    return loss, jt.shape(x), jt.size(y)


@pytest.mark.parametrize("backend", BACKENDS)
def test_input_signature_none_batch_traces_once_and_matches_eager(backend):
    params, eager_params = _mlp(), _mlp()
    opt, eager_opt = jt.optimizers.Adam(0.05), jt.optimizers.Adam(0.05)
    seen: list = []
    sig = [jt.TensorSpec([None, 6], jt.float64), jt.TensorSpec([None], jt.int32)]
    f = jt.function(lambda x, y: _step(params, opt, x, y, seen), input_signature=sig,
                    backend=backend)
    rng = np.random.default_rng(1)
    for n in (5, 4, 9, 5, 7):
        x = rng.normal(size=(n, 6))
        y = rng.integers(0, 3, n).astype(np.int32)
        loss, shape, size = f(x, y)
        want, _, _ = _step(eager_params, eager_opt, jt.constant(x), jt.constant(y), [])
        np.testing.assert_allclose(loss.numpy(), want.numpy(), rtol=1e-12)
        assert shape.numpy().tolist() == [n, 6] and int(size) == n
        for p, q in zip(params, eager_params):
            np.testing.assert_allclose(p.numpy(), q.numpy(), rtol=1e-10, atol=1e-12)
    assert seen == [(None, 6)]  # the Python function ran once, with the static shape
    info = f.cache_info()
    assert info.traces == 1 and info.misses == 1 and info.hits == 4
    cf = f.get_concrete_function(np.zeros((11, 6)), np.zeros(11, np.int32))
    assert cf.symbolic and cf.specializations == 5  # 5, 4, 9, 7 and 11
    if backend == "cpu":
        # every batch size runs the same generated module: Numba compiled it once
        names = {spec.program.name for spec in cf._all_specs()}
        assert len(names) == 1
        info = f.cache_info()
        assert info.compiled <= 1 and info.compiled + info.reused >= 4  # 11 has not run


def test_shape_inside_a_symbolic_trace_is_tfs():
    got = {}

    @jt.function(input_signature=[jt.TensorSpec([None, 4, None], jt.float32)])
    def f(x):
        got["static"] = x.shape
        got["rank"] = x.ndim
        flat = jt.reshape(x, [jt.shape(x)[0], -1])  # TF's idiom for a flatten
        got["flat"] = flat.shape
        z = jt.zeros([jt.shape(x)[0], 2])
        return flat, z, jt.reduce_mean(x), jt.size(x)

    flat, z, mean, size = f(np.ones((3, 4, 5), "float32"))
    assert got == {"static": (None, 4, None), "rank": 3, "flat": (None, None)}
    assert flat.shape == (3, 20) and z.shape == (3, 2) and float(mean) == 1.0
    assert int(size) == 60
    flat, z, mean, size = f(np.full((2, 4, 1), 2.0, "float32"))
    assert flat.shape == (2, 4) and z.shape == (2, 2) and float(mean) == 2.0
    assert f.cache_info().traces == 1


def test_reduce_retracing_generalizes_after_the_second_shape():
    seen = []

    @jt.function(reduce_retracing=True)
    def f(x, y):
        seen.append((tuple(x.shape), tuple(y.shape)))
        return jt.reduce_sum(x, axis=0) * 2.0 + jt.reduce_mean(y)

    for n in (3, 4, 5, 7):
        out = f(np.ones((n, 2), "float32"), np.full((5,), 3.0, "float32"))
        np.testing.assert_allclose(out.numpy(), [2.0 * n + 3.0] * 2)
    # as TF: the first call traces its shapes, the second the generalized ones (the dim
    # that changed unknown), the others reuse that trace
    assert seen == [((3, 2), (5,)), ((None, 2), (5,))]
    assert f.cache_info().traces == 2
    # a change of rank is a new trace
    f(np.ones((2, 2, 2), "float32"), np.ones((5,), "float32"))
    assert f.cache_info().traces == 3


@pytest.mark.parametrize("backend", BACKENDS)
def test_layers_losses_dropout_and_optimizer_with_a_none_batch(backend):
    def build():
        jt.random.set_seed(3)
        model = jt.Sequential([jt.layers.Flatten(), jt.layers.Dense(8, activation="relu"),
                               jt.layers.Dropout(0.25), jt.layers.Dense(3)])
        model.build((None, 2, 3))
        return model

    model, eager = build(), build()
    eager.set_weights(model.get_weights())
    opt, eager_opt = jt.optimizers.SGD(0.1), jt.optimizers.SGD(0.1)
    loss_fn = jt.losses.SparseCategoricalCrossentropy(from_logits=True)

    def step(m, o, x, y):
        with jt.GradientTape() as tape:
            loss = loss_fn(y, m(x, training=True))
        grads = tape.gradient(loss, m.trainable_variables)
        o.apply_gradients(zip(grads, m.trainable_variables))
        return loss

    sig = [jt.TensorSpec([None, 2, 3], jt.float32), jt.TensorSpec([None], jt.int64)]
    f = jt.function(lambda x, y: step(model, opt, x, y), input_signature=sig,
                    backend=backend)
    rng = np.random.default_rng(0)
    batches = [(rng.normal(size=(n, 2, 3)).astype("float32"), rng.integers(0, 3, n))
               for n in (4, 7, 4)]
    jt.random.set_seed(11)
    got = [float(f(x, y)) for x, y in batches]
    jt.random.set_seed(11)
    want = [float(step(eager, eager_opt, jt.constant(x), jt.constant(y))) for x, y in batches]
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert f.cache_info().traces == 1


# ---------------------------------------------------------------------------
# What needs a concrete size says so


def test_an_op_that_needs_a_concrete_size_names_the_op_and_the_dim():
    @jt.function(input_signature=[jt.TensorSpec([None, 6], jt.float32)])
    def f(x):
        return jt.reshape(x, [4, -1])  # 6 * s0 elements in rows of 4: not decidable

    with pytest.raises(jt.errors.InvalidArgumentError) as e:
        f(np.ones((2, 6), "float32"))
    msg = str(e.value)
    assert msg.startswith("reshape:") and "dimension 0 of argument 'x'" in msg
    assert "test_symbolic_shapes.py" in msg


def test_python_code_that_needs_the_size_says_which():
    @jt.function(input_signature=[jt.TensorSpec([None], jt.float32)])
    def f(x):
        return x * float(jt.shape(x)[0].numpy())

    with pytest.raises((AttributeError, TypeError)):
        f(np.ones(3, "float32"))

    @jt.function(input_signature=[jt.TensorSpec([None], jt.float32)])
    def g(x):
        return jt.ones([int(x._type.shape[0])])

    with pytest.raises(SymbolicSizeError, match="dimension 0 of argument 'x'"):
        g(np.ones(3, "float32"))


def test_a_symbolic_size_does_not_broadcast_against_a_number():
    @jt.function(input_signature=[jt.TensorSpec([None], jt.float32)])
    def f(x):
        return x + jt.ones([5])

    with pytest.raises(jt.errors.InvalidArgumentError, match=r"add: Incompatible shapes"):
        f(np.ones(5, "float32"))


def test_sizes_taken_as_equal_must_be_equal_at_the_call():
    @jt.function(input_signature=[jt.TensorSpec([None, 3], jt.float32),
                                  jt.TensorSpec([None], jt.float32)])
    def f(x, w):
        return jt.reduce_sum(x * w[:, None])  # the two None sizes meet: one size

    assert float(f(np.ones((4, 3), "float32"), np.ones(4, "float32"))) == 12.0
    with pytest.raises(jt.errors.InvalidArgumentError, match="sizes 4 and 5"):
        f(np.ones((4, 3), "float32"), np.ones(5, "float32"))


def test_explain_reports_the_symbolic_sizes():
    @jt.function(input_signature=[jt.TensorSpec([None, 3], jt.float32)])
    def f(x):
        return jt.reduce_sum(x * 2.0, axis=1)

    text = str(f.explain(np.ones((4, 3), "float32")))
    assert "symbolic sizes: s0 is dimension 0 of argument 'x'" in text
    assert "f32[s0,3]" in text and "s0=4" in text


def test_background_compiles_of_one_module_compile_it_once(monkeypatch):
    monkeypatch.setenv("JITTAPE_BACKGROUND_COMPILE", "1")

    @jt.function(input_signature=[jt.TensorSpec([None, 3], jt.float32)], backend="cpu")
    def f(x):
        return jt.reduce_sum(jt.sigmoid(x) * 3.0, axis=1)

    for n in (4, 5, 7, 4, 5, 7):  # each new size starts a background compile
        np.testing.assert_allclose(f(np.zeros((n, 3), "float32")).numpy(), [4.5] * n)
    assert f.wait()
    info = f.cache_info()
    assert info.traces == 1 and info.compiled <= 1 and info.compiled + info.reused == 3
    np.testing.assert_allclose(f(np.zeros((2, 3), "float32")).numpy(), [4.5] * 2)


# ---------------------------------------------------------------------------
# Random batch programs: one symbolic trace, several batch sizes, the eager numbers


_LAYER_OPS = ["dense", "tanh", "relu", "sigmoid", "softmax", "square", "concat", "slice",
              "reshape", "mean_rows", "scale_by_batch_mean", "log_softmax"]


def _apply(op, h, w, k):
    """One op of a batch program on ``h`` of shape [batch, d]; ``w`` the variables."""
    d = h.shape[-1]
    if op == "dense":
        return jt.matmul(h, w[k % len(w)][:d, :]) + 0.1
    if op in ("tanh", "relu", "sigmoid", "square"):
        return {"tanh": jt.tanh, "relu": jt.nn.relu, "sigmoid": jt.sigmoid,
                "square": jt.square}[op](h)
    if op == "softmax":
        return jt.nn.softmax(h)
    if op == "log_softmax":
        return jt.nn.log_softmax(h)
    if op == "concat":
        return jt.concat([h, h * 0.5], axis=1)[:, :4]
    if op == "slice":
        return h[:, 1:] if d > 1 else h
    if op == "reshape":
        return jt.reshape(jt.reshape(h, [-1]), [jt.shape(h)[0], d])
    if op == "mean_rows":
        return h - jt.reduce_mean(h, axis=0, keepdims=True)
    return h * jt.reduce_mean(h)  # scale_by_batch_mean


@pytest.mark.parametrize("seed, backend", [(s, "interpret") for s in range(6)]
                         + [(s, "cpu") for s in range(2)])
def test_random_batch_programs_agree_with_eager_for_every_batch_size(seed, backend):
    rng = np.random.default_rng(seed)
    ops = list(rng.choice(_LAYER_OPS, size=int(rng.integers(3, 7))))
    w0 = [rng.normal(size=(4, 4)) * 0.5 for _ in range(2)]

    def program(x, w):
        with jt.GradientTape() as tape:
            h = x
            for k, op in enumerate(ops):
                h = _apply(op, h, w, k)
            loss = jt.reduce_mean(h * h)
        return [loss] + tape.gradient(loss, w, unconnected_gradients="zero")

    ws = [jt.Variable(a) for a in w0]
    f = jt.function(lambda x: program(x, ws), backend=backend,
                    input_signature=[jt.TensorSpec([None, 4], jt.float64)])
    for n in (3, 5, 2, 8):
        x = rng.normal(size=(n, 4))
        got = [t.numpy() for t in f(x)]
        want = [t.numpy() for t in program(jt.constant(x), [jt.Variable(a) for a in w0])]
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12, err_msg=str(ops))
    assert f.cache_info().traces == 1, ops
