"""Bad data (labels and indices out of range, negative ones too) raises the same
``InvalidArgumentError`` everywhere: eager, a traced graph on ``interpret``, the ``cpu``
backend's kernels, ``@jt.function`` and Keras ``fit``/``evaluate``; good data still gives
the right values. A compiled train step used to give a loss of 0 for a label out of range
(the one-hot row of a bad label is all zeros), where eager code and TF raise.

The messages are TF's (asked of TF 2.21): ``Received a label value of 5 which is outside
the valid range of [0, 3)`` for sparse_softmax_cross_entropy_with_logits, ``indices[1,0]
= 7 is not in [0, 3)`` for gather, each after the op's name and before the user's line
of the op. tf.one_hot gives a row of zeros for an index out of range, and so does
jt.one_hot: no check there.

The cpu graphs are few and tiny (each distinct one costs a Numba compile); the tests
share them through module-level functions.
"""

import re

import numpy as np
import pytest

import jittape as jt
from jittape.compiler import backends
from jittape.compiler.backends import cpu
from jittape.ops.shaping import scatter_add

pytestmark = pytest.mark.filterwarnings("error::jittape.compiler.backends.cpu.CompileWarning")

BACKENDS = ("interpret", "cpu")
LOGITS = np.array([[1.0, 2.0, 0.5], [0.0, -1.0, 3.0], [2.0, 2.0, 2.0], [0.3, 0.1, -0.2]],
                  np.float32)
PARAMS = np.arange(12.0).reshape(3, 4)


def _log_softmax(z):
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def _ce_step(z, y):
    """Loss and its gradient: the forward's labels and the backward both run."""
    with jt.GradientTape() as tape:
        tape.watch(z)
        loss = jt.reduce_mean(jt.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=z))
    return loss, tape.gradient(loss, z)


def _gather(p, i):
    return jt.gather(p, i, axis=1)


_FUNCTIONS: dict = {}


def function(fn, backend):
    """One ``jt.function`` per (fn, backend), shared by the tests (one compile each)."""
    key = (fn, backend)
    if key not in _FUNCTIONS:
        _FUNCTIONS[key] = jt.function(fn, backend=backend)
    return _FUNCTIONS[key]


def _ways(fn):
    """``name -> callable``: ``fn`` eagerly, and under jt.function on each backend."""
    ways = {"eager": lambda *a: fn(*(jt.constant(x) for x in a))}
    for b in BACKENDS:
        ways[b] = lambda *a, f=function(fn, b): f(*a)
    return ways


def _raises(call, *args) -> str:
    """The message ``call(*args)`` raises, without its trailing user line."""
    with pytest.raises(jt.errors.InvalidArgumentError) as e:
        call(*args)
    assert type(e.value) is jt.errors.InvalidArgumentError
    return re.sub(r" \(at [^()]*\)$", "", str(e.value))


# ---------------------------------------------------------------------------
# sparse_softmax_cross_entropy_with_logits


@pytest.mark.parametrize("bad", [5, 3, -1, -7])
def test_sparse_softmax_cross_entropy_rejects_labels_out_of_range_everywhere(bad):
    labels = np.array([0, 2, bad, 1], np.int32)
    want = ("sparse_softmax_cross_entropy_with_logits: Received a label value of "
            f"{bad} which is outside the valid range of [0, 3)")
    for name, call in _ways(_ce_step).items():
        assert _raises(call, LOGITS, labels) == want, name


def test_sparse_softmax_cross_entropy_good_labels_agree():
    labels = np.array([0, 2, 1, 1], np.int32)
    ls = _log_softmax(LOGITS.astype(np.float64))
    want_loss = -ls[np.arange(4), labels].mean()
    want_grad = (np.exp(ls) - np.eye(3)[labels]) / 4
    for name, call in _ways(_ce_step).items():
        loss, grad = call(LOGITS, labels)
        np.testing.assert_allclose(loss.numpy(), want_loss, rtol=1e-5, err_msg=name)
        np.testing.assert_allclose(grad.numpy(), want_grad, rtol=1e-5, atol=1e-7, err_msg=name)


def test_the_error_names_the_user_line_of_the_op():
    """As eager code does: the line of the loss inside the function, not the call."""
    labels = np.array([0, 9, 1, 1], np.int32)

    def step(z, y):
        return jt.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=z)  # HERE

    line = next(i for i, t in enumerate(open(__file__), 1) if t.rstrip().endswith("# HERE"))
    for name, call in _ways(step).items():
        with pytest.raises(jt.errors.InvalidArgumentError) as e:
            call(LOGITS, labels)
        assert str(e.value).endswith(f"test_bad_data.py:{line})"), (name, str(e.value))


def test_a_compiled_kernel_checks_the_labels():
    """The check is the cpu kernel's, not the interpreter's: the program ran compiled."""
    f = function(_ce_step, "cpu")
    f(LOGITS, np.array([0, 1, 2, 0], np.int32))
    prog = f.get_concrete_function(LOGITS, np.array([0, 1, 2, 0], np.int32)).program
    assert prog is not None and prog.ready and prog.fallback is None
    fallbacks = cpu.stats["fallbacks"]
    assert "9 which" in _raises(f, LOGITS, np.array([0, 9, 2, 0], np.int32))
    assert cpu.stats["fallbacks"] == fallbacks


def test_one_hot_gives_zeros_out_of_range_as_tf():
    """tf.one_hot([5, -1, 1], 3) is [[0, 0, 0], [0, 0, 0], [0, 1, 0]]: no error."""
    want = np.array([[0, 0, 0], [0, 0, 0], [0, 1, 0]], np.float32)
    np.testing.assert_array_equal(jt.one_hot(np.array([5, -1, 1]), 3).numpy(), want)
    f = jt.function(lambda i: jt.one_hot(i, 3), backend="interpret")
    np.testing.assert_array_equal(f(np.array([5, -1, 1])).numpy(), want)


# ---------------------------------------------------------------------------
# gather (and its gradient, scatter_add)


@pytest.mark.parametrize("bad", [4, -1, 100])
def test_gather_rejects_indices_out_of_range_everywhere(bad):
    idx = np.array([[0, 1], [bad, 2]], np.int32)
    want = f"gather: indices[1,0] = {bad} is not in [0, 4)"
    for name, call in _ways(_gather).items():
        assert _raises(call, PARAMS, idx) == want, name


def test_gather_good_indices_agree():
    idx = np.array([[0, 1], [3, 2]], np.int32)
    for name, call in _ways(_gather).items():
        np.testing.assert_array_equal(call(PARAMS, idx).numpy(), np.take(PARAMS, idx, axis=1),
                                      err_msg=name)


def test_the_compiled_gradient_of_gather_checks_too():
    """A tape on cpu compiles the backward graph (scatter_add of the indices): it is
    checked there too, when the indices reach it unchecked (a hand-fed graph)."""
    v = jt.Variable(PARAMS)

    def grad(i):
        with jt.GradientTape() as tape:
            y = jt.reduce_sum(jt.gather(v, i) ** 2)
        return tape.gradient(y, v)

    f = function(grad, "cpu")
    got = f(np.array([0, 2, 2], np.int32)).numpy()
    want = np.zeros_like(PARAMS)
    want[0], want[2] = 2 * PARAMS[0], 4 * PARAMS[2]
    np.testing.assert_array_equal(got, want)
    assert _raises(f, np.array([0, 3], np.int32)) == "gather: indices[1] = 3 is not in [0, 3)"
    # the eager scatter_add (numpy's add.at wrapped negative indices) checks its own
    with pytest.raises(jt.errors.InvalidArgumentError, match=r"scatter_add: indices\[0\] = -1"):
        scatter_add(jt.constant(np.ones(2)), jt.constant([-1, 0]), (3,))


# ---------------------------------------------------------------------------
# Keras


@pytest.mark.parametrize("backend", BACKENDS)
def test_fit_and_evaluate_reject_labels_out_of_range(backend):
    old = backends.get_backend()
    jt.set_backend(backend)
    try:
        m = jt.keras.Sequential([jt.keras.layers.Dense(3, activation="softmax")])
        m.compile("sgd", "sparse_categorical_crossentropy")
        x = np.ones((4, 3), "float32")
        for bad in (5, -1):
            msg = f"Received a label value of {bad} which is outside the valid range of [0, 3)"
            with pytest.raises(jt.errors.InvalidArgumentError, match=re.escape(msg)):
                m.fit(x, np.array([bad] * 4), verbose=0)
            with pytest.raises(jt.errors.InvalidArgumentError, match=re.escape(msg)):
                m.evaluate(x, np.array([1, 2, bad, 0]), verbose=0)
        w = [a.copy() for a in m.get_weights()]
        loss = m.evaluate(x, np.array([2] * 4), verbose=0)
        z = x @ w[0] + w[1]
        np.testing.assert_allclose(loss, -_log_softmax(z.astype(np.float64))[:, 2].mean(),
                                   rtol=1e-5)
        assert np.isfinite(m.fit(x, np.array([2] * 4), verbose=0).history["loss"][0])
    finally:
        jt.set_backend(old)
