"""A non-persistent tape frees what it recorded at its first gradient/jacobian;
`del tape` frees a persistent tape's trace (TF_SEMANTICS.md, DESIGN.md)."""
import gc
import weakref

import numpy as np
import pytest

import jittape as jt


class Marker:
    """Something only the recorded trace (a custom gradient's closure) holds."""


def npv(t):
    assert t is not None, "expected a gradient, got None"
    return np.asarray(t.numpy())


def _record(markers):
    @jt.custom_gradient
    def spy(x):
        m = Marker()
        markers.append(weakref.ref(m))

        def grad(dy):
            assert m is not None
            return dy * 3.0

        return x * 1.0, grad

    return spy


def _build(x, markers):
    """Run a small model on the active tape; return the loss and weakrefs to
    every intermediate tensor and the numpy arrays they were built from."""
    spy = _record(markers)
    arr = np.linspace(0.0, 1.0, 1000).astype(np.float32)
    c = jt.constant(arr)
    a = x * c
    b = jt.exp(a)
    s = spy(b)
    d = jt.tanh(s) * a
    loss = jt.reduce_sum(d)
    refs = [weakref.ref(t) for t in (c, a, b, s, d)]
    return loss, refs


def _all_dead(refs):
    gc.collect()
    return [r() is None for r in refs]


def test_non_persistent_tape_frees_after_gradient():
    x = jt.Variable(np.full((1000,), 0.5, np.float32))
    markers = []
    with jt.GradientTape() as tape:
        loss, refs = _build(x, markers)
    loss_ref = weakref.ref(loss)
    g = tape.gradient(loss, x)
    assert g.shape == (1000,)
    del loss
    assert all(_all_dead(refs + [loss_ref])), _all_dead(refs + [loss_ref])
    assert all(_all_dead(markers)), "custom-gradient closure still held by the tape"
    assert tape is not None  # the tape object itself is still alive


def test_non_persistent_tape_frees_after_gradient_inside_context():
    x = jt.Variable(np.full((1000,), 0.5, np.float32))
    markers = []
    with jt.GradientTape() as tape:
        loss, refs = _build(x, markers)
        loss_ref = weakref.ref(loss)
        tape.gradient(loss, x)
        del loss
        assert all(_all_dead(refs + [loss_ref]))
        assert all(_all_dead(markers))
    assert all(_all_dead(markers))


def test_non_persistent_tape_frees_after_jacobian():
    x = jt.Variable(np.full((4,), 0.5, np.float32))
    markers = []
    spy = _record(markers)
    with jt.GradientTape() as tape:
        a = x * 2.0
        b = spy(a)
        y = jt.sin(b)
    refs = [weakref.ref(t) for t in (a, b, y)]
    j = tape.jacobian(y, x)
    assert j.shape == (4, 4)
    del a, b, y
    assert all(_all_dead(refs))
    assert all(_all_dead(markers))


def test_persistent_tape_keeps_trace_until_deleted():
    x = jt.Variable(np.full((1000,), 0.5, np.float32))
    markers = []
    with jt.GradientTape(persistent=True) as tape:
        loss, refs = _build(x, markers)
    g1 = tape.gradient(loss, x)
    del loss
    gc.collect()
    # A persistent tape must still be able to run the custom backward.
    assert not any(_all_dead(markers))
    tape_ref = weakref.ref(tape)
    del tape
    gc.collect()
    assert tape_ref() is None
    assert all(_all_dead(refs))
    assert all(_all_dead(markers))
    assert npv(g1).shape == (1000,)


def test_persistent_tape_gradients_survive_tape_deletion():
    x = jt.Variable(np.array([1.0, 2.0], np.float32))
    with jt.GradientTape(persistent=True) as tape:
        y = jt.reduce_sum(x * x)
    g = tape.gradient(y, x)
    del tape, y
    gc.collect()
    np.testing.assert_allclose(npv(g), [2.0, 4.0])


def test_nested_tapes_free_everything():
    x = jt.Variable(np.full((100,), 0.3, np.float32))
    markers = []
    spy = _record(markers)
    with jt.GradientTape() as outer:
        with jt.GradientTape() as inner:
            a = spy(x * x)
            y = jt.reduce_sum(jt.sin(a))
        gx = inner.gradient(y, x)
        pen = jt.reduce_sum(gx * gx)
    refs = [weakref.ref(t) for t in (a, y, gx, pen)]
    g2 = outer.gradient(pen, x)
    assert g2.shape == (100,)
    del a, y, gx, pen
    assert all(_all_dead(refs)), _all_dead(refs)
    assert all(_all_dead(markers))
    assert inner is not None and outer is not None


def test_many_steps_do_not_grow_memory():
    x = jt.Variable(np.full((200,), 0.5, np.float32))
    all_refs = []
    for _ in range(20):
        with jt.GradientTape() as tape:
            a = x * 3.0
            loss = jt.reduce_mean(jt.square(a))
        all_refs.append(weakref.ref(a))
        all_refs.append(weakref.ref(loss))
        g = tape.gradient(loss, x)
        x.assign_sub(g * 0.01)
    del a, loss, tape
    assert all(_all_dead(all_refs))


# --------------------------------------------------------------------------
# the arrays themselves (not only the Tensor objects) are released: measured
# with tracemalloc, which numpy reports its buffers to
# --------------------------------------------------------------------------

import tracemalloc  # noqa: E402

_N = 1_000_000  # 8 MB per float64 array


def _step(x, persistent=False):
    big = jt.constant(np.random.default_rng(0).standard_normal(_N))
    with jt.GradientTape(persistent=persistent) as tape:
        a = x * big
        b = jt.exp(a * 1e-3)
        c = jt.sin(b) * a
        loss = jt.reduce_sum(c)
    g = tape.gradient(loss, x)
    return tape, float(np.sum(npv(g)))


def _current():
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


def test_non_persistent_tape_releases_array_memory():
    x = jt.Variable(np.full((_N,), 0.5))
    _step(x)  # warm up: caches that do not hold data are allowed to fill
    tracemalloc.start()
    try:
        base = _current()
        tape, _ = _step(x)
        held = _current() - base  # tape still alive, all arrays should be gone
        del tape
        after = _current() - base
    finally:
        tracemalloc.stop()
    assert held < 4 * _N, f"non-persistent tape still holds {held / 1e6:.1f} MB after gradient"
    assert after < 4 * _N, f"{after / 1e6:.1f} MB still held after the step"


def test_persistent_tape_memory_released_on_del():
    x = jt.Variable(np.full((_N,), 0.5))
    _step(x, persistent=True)
    tracemalloc.start()
    try:
        base = _current()
        tape, _ = _step(x, persistent=True)
        held = _current() - base
        del tape
        after = _current() - base
    finally:
        tracemalloc.stop()
    assert held > 8 * _N, "a persistent tape must keep its recorded values"
    assert after < 4 * _N, f"{after / 1e6:.1f} MB still held after `del tape`"


def test_repeated_steps_do_not_accumulate_memory():
    x = jt.Variable(np.full((_N // 10,), 0.5))
    tracemalloc.start()
    try:
        for _ in range(2):  # x's buffer is replaced each step: allocate it under tracing
            _step_small(x)
        base = _current()
        for _ in range(10):
            _step_small(x)
        grown = _current() - base
    finally:
        tracemalloc.stop()
    assert grown < 8 * (_N // 10), f"memory grew by {grown / 1e6:.1f} MB over 10 steps"


def _step_small(x):
    with jt.GradientTape() as tape:
        loss = jt.reduce_mean(jt.square(jt.tanh(x * 3.0)))
    g = tape.gradient(loss, x)
    x.assign_sub(g * 0.1)


def test_gradients_are_freed_without_the_garbage_collector():
    """The list tape.gradient returns is not part of a reference cycle: dropping it frees
    the gradient tensors at once (the cpu backend then reuses their buffers)."""
    x = jt.Variable(np.full((1000,), 0.5))
    with jt.GradientTape() as tape:
        loss = jt.reduce_sum(x * x)
    grads = tape.gradient(loss, [x, {"again": x}])
    refs = [weakref.ref(grads[0]), weakref.ref(grads[1]["again"])]
    gc.disable()
    try:
        del grads
        assert [r() for r in refs] == [None, None]
    finally:
        gc.enable()


def test_freed_memory_is_kept_for_reuse_unless_turned_off():
    import subprocess
    import sys

    code = "import jittape.compiler.malloc as m, jittape; print(m.applied)"
    root = __import__("os").path.dirname(__import__("os").path.dirname(__file__))
    env = dict(__import__("os").environ, PYTHONPATH=root)
    on = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    off = subprocess.run([sys.executable, "-c", code], env=dict(env, JITTAPE_MALLOC="0"),
                         capture_output=True, text=True)
    assert off.stdout.strip() == "[False]", off.stderr
    import platform

    if sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc":
        assert on.stdout.strip() == "[True]", on.stderr


def test_a_used_non_persistent_tape_reaches_no_tensor_or_array():
    """Everything reachable from the tape object after ``gradient``: no tensor, no
    array, no recorded closure. It keeps what says it was used, and the variables it
    watched (``watched_variables()`` lists them after the gradient too, as in TF)."""
    import types

    x = jt.Variable(np.full((1000,), 0.5, np.float32))
    markers = []
    with jt.GradientTape() as tape:
        loss, _ = _build(x, markers)
    tape.gradient(loss, x)
    assert tape.watched_variables() == (x,)
    seen, stack, found = set(), [tape], []
    skip = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
            types.MethodType, types.CodeType, types.FrameType)
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, skip) or isinstance(obj, jt.Variable):
            continue
        seen.add(id(obj))
        if obj is not tape and isinstance(obj, (jt.Tensor, np.ndarray, Marker)):
            found.append(obj)
            continue
        stack.extend(gc.get_referents(obj))
    assert not found, f"the used tape still reaches {[type(o).__name__ for o in found]}"


# --------------------------------------------------------------------------
# training loops keep memory flat: after a warm-up, N more steps and N more
# again allocate (and keep) almost nothing, and the second N no more than the
# first (a leak of 100 bytes a step shows as 20 KB more over the second 200)
# --------------------------------------------------------------------------


def _mlp(seed=0):
    rng = np.random.default_rng(seed)
    x = jt.constant(rng.standard_normal((16, 8)).astype(np.float32))
    y = jt.constant(rng.integers(0, 3, 16).astype(np.int32))
    model = jt.Sequential([jt.layers.Dense(12, activation="tanh"), jt.layers.Dense(3)])
    loss_fn = jt.losses.SparseCategoricalCrossentropy(from_logits=True)
    opt = jt.optimizers.SGD(0.05)
    return x, y, model, loss_fn, opt


def _growth(step, n, warmup=150):
    """Bytes still held after ``n`` steps and after ``2 n`` steps, past a warm-up."""
    for _ in range(warmup):
        step()
    tracemalloc.start()
    try:
        for _ in range(10):  # allocations that tracemalloc itself makes on its first sight
            step()
        base = _current()
        for _ in range(n):
            step()
        first = _current() - base
        for _ in range(n):
            step()
        second = _current() - base
    finally:
        tracemalloc.stop()
    return first, second


def _assert_flat(first, second, n):
    assert second < 256 * 1024, f"{second / 1024:.0f} KB still held after {2 * n} steps"
    assert second - first < 16 * 1024, (
        f"held {first / 1024:.1f} KB after {n} steps and {second / 1024:.1f} KB after "
        f"{2 * n}: memory grows with the number of steps")


@pytest.mark.parametrize("backend", ["interpret", "cpu"])
def test_an_eager_training_loop_keeps_memory_flat(backend):
    x, y, model, loss_fn, opt = _mlp()
    losses = []

    def step():
        with jt.GradientTape(backend=backend) as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        losses.append(float(loss))
        del losses[:-2]

    n = 200
    first, second = _growth(step, n)
    _assert_flat(first, second, n)
    assert losses[-1] < losses[0]  # it trained


def test_a_compiled_training_step_keeps_memory_flat():
    x, y, model, loss_fn, opt = _mlp(1)

    @jt.function(backend="cpu")
    def train(x, y):
        with jt.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    n = 1000
    first, second = _growth(lambda: train(x, y), n)
    _assert_flat(first, second, n)
    info = train.cache_info()
    assert info.traces == 1 and info.hits == 150 + 10 + 2 * n - 1
