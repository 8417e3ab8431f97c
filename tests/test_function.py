"""``@jt.function``: signature keys, retracing, variables, input_signature, methods,
introspection, and whole train steps that must match the eager loop."""

from __future__ import annotations

import logging
import re
import warnings

import numpy as np
import pytest

import jittape as jt
from jittape.compiler.backends import cpu

BACKENDS = ["interpret", "cpu"]


def _mlp(seed, dtype="float64"):
    jt.random.set_seed(seed)
    return jt.Sequential([
        jt.layers.Dense(16, activation="relu", input_shape=(8,), dtype=dtype),
        jt.layers.Dense(12, activation="tanh", dtype=dtype),
        jt.layers.Dense(5, dtype=dtype),
    ])


def _data(n=32, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 8))
    y = rng.integers(0, 5, size=n).astype(np.int32)
    return x, y


def _train(make_opt, backend, compiled, steps=20):
    model = _mlp(3)
    opt = make_opt()
    loss_fn = jt.losses.SparseCategoricalCrossentropy(from_logits=True)

    def step(x, y):
        with jt.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    if compiled:
        step = jt.function(step, backend=backend)
    losses = []
    for k in range(steps):
        x, y = _data(seed=k % 4)
        losses.append(float(step(jt.constant(x), jt.constant(y))))
    if compiled:
        info = step.cache_info()
        assert info.traces == 1 and info.hits == steps - 1
    return [v.numpy() for v in model.variables + opt.variables], losses


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("opt", ["sgd", "sgd_momentum", "adam"])
def test_mlp_train_step_matches_eager_loop(opt, backend):
    make = {"sgd": lambda: jt.optimizers.SGD(0.1),
            "sgd_momentum": lambda: jt.optimizers.SGD(0.05, momentum=0.9, nesterov=True),
            "adam": lambda: jt.optimizers.Adam(0.01)}[opt]
    prev = jt.get_backend()
    jt.set_backend(backend)
    try:
        want, want_losses = _train(make, backend, compiled=False)
    finally:
        jt.set_backend(prev)
    got, got_losses = _train(make, backend, compiled=True)
    np.testing.assert_allclose(got_losses, want_losses, rtol=1e-10)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-13)
    assert want_losses[-1] < want_losses[0]


# ---------------------------------------------------------------------------
# signature keys and retracing


def test_same_signature_reuses_trace_new_shape_or_dtype_retraces():
    calls = []

    @jt.function
    def f(x):
        calls.append(1)  # a Python side effect: runs when tracing only
        return x * 2.0

    f(jt.constant(np.ones((2, 3), np.float32)))
    f(jt.constant(np.zeros((2, 3), np.float32)))
    f(np.full((2, 3), 3.0, np.float32))  # an ndarray keys like a tensor
    assert len(calls) == 1
    out = f(np.ones((4, 3), np.float32))
    assert out.shape == (4, 3) and len(calls) == 2
    f(np.ones((4, 3), np.float64))
    assert len(calls) == 3
    info = f.cache_info()
    assert (info.traces, info.hits, info.misses, info.signatures) == (3, 2, 3, 3)


def test_python_scalars_retrace_by_value():
    @jt.function
    def f(x, lr):
        return x * lr

    x = jt.constant([1.0, 2.0])
    np.testing.assert_allclose(f(x, 0.5).numpy(), [0.5, 1.0])
    np.testing.assert_allclose(f(x, 0.5).numpy(), [0.5, 1.0])
    np.testing.assert_allclose(f(x, 0.25).numpy(), [0.25, 0.5])
    assert f.cache_info().traces == 2
    # a 0-d tensor is an input: one more trace for the new kind of argument, then none
    f(x, jt.constant(0.1))
    f(x, jt.constant(0.2))
    assert f.cache_info().traces == 3


def test_retrace_cause_names_the_argument(caplog, monkeypatch):
    monkeypatch.setenv("JITTAPE_LOG", "retrace")

    @jt.function
    def step(x, lr):
        return x * lr

    with caplog.at_level(logging.INFO, logger="jittape"):
        step(np.ones((32, 10), np.float32), 0.1)
        step(np.ones((31, 10), np.float32), 0.1)
        step(np.ones((31, 10), np.float32), 0.05)
    text = caplog.text
    assert "argument 'x': shape (32, 10) -> (31, 10)" in text
    assert "argument 'lr': Python float 0.1 -> float 0.05" in text
    assert "pass a 0-d tensor instead" in text


def test_retracing_warning_fires_at_most_twice():
    @jt.function
    def f(x):
        return x + 1.0

    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        for n in range(1, 5):
            f(np.ones(n, np.float32))
        assert not [w for w in rec if "triggered tracing" in str(w.message)]
        f(np.ones(5, np.float32))  # 5 of the last 5 calls traced
        msgs = [str(w.message) for w in rec if "triggered tracing" in str(w.message)]
        assert len(msgs) == 1
        assert "shape (4,) -> (5,)" in msgs[0] and "reduce_retracing=True" in msgs[0]
        for n in range(6, 20):
            f(np.ones(n, np.float32))
        msgs = [str(w.message) for w in rec if "triggered tracing" in str(w.message)]
        assert len(msgs) == 2


def test_reduce_retracing_does_not_warn_for_shapes():
    @jt.function(reduce_retracing=True)
    def f(x):
        return x + 1.0

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for n in range(1, 12):
            np.testing.assert_allclose(f(np.zeros(n, np.float32)).numpy(), np.ones(n))


def test_variables_by_identity():
    @jt.function
    def f(v):
        return v * 2.0

    a, b = jt.Variable(1.0), jt.Variable(2.0)
    assert float(f(a)) == 2.0 and float(f(b)) == 4.0 and float(f(a)) == 2.0
    a.assign(5.0)
    assert float(f(a)) == 10.0  # the variable is read when the program runs
    assert f.cache_info().traces == 2


# ---------------------------------------------------------------------------
# variables


def test_variable_created_on_first_trace_only():
    state = {}

    @jt.function
    def f(x):
        if "v" not in state:
            state["v"] = jt.Variable(jt.zeros_like(x))
        state["v"].assign_add(x)
        return state["v"].read_value()

    np.testing.assert_allclose(f(jt.constant([1.0, 2.0])).numpy(), [1.0, 2.0])
    np.testing.assert_allclose(f(jt.constant([1.0, 2.0])).numpy(), [2.0, 4.0])

    made = []

    @jt.function
    def g(x):
        made.append(jt.Variable(np.zeros(x.shape, np.float32)))
        return x

    g(np.ones(2, np.float32))
    with pytest.raises(ValueError, match="only supports variables created on its first call"):
        g(np.ones(3, np.float32))


def test_optimizer_slots_created_inside_first_trace():
    w = jt.Variable(np.ones(3))
    opt = jt.optimizers.Adam(0.1)

    @jt.function
    def step(x):
        with jt.GradientTape() as tape:
            loss = jt.reduce_sum(jt.square(w * x))
        opt.apply_gradients([(tape.gradient(loss, w), w)])
        return loss

    for _ in range(3):
        step(np.arange(3.0))
    assert int(opt.iterations.numpy()) == 3
    assert opt.get_slot(w, "m").numpy()[1] != 0.0


def test_variable_initial_value_from_argument_raises():
    @jt.function
    def f(x):
        return jt.Variable(x * 2.0).read_value()

    with pytest.raises(TypeError, match="depends on the function's arguments"):
        f(np.ones(2, np.float32))


def test_assign_shape_and_dtype_errors_while_tracing():
    v = jt.Variable(np.zeros(3, np.float32))

    @jt.function
    def f(x):
        v.assign(x)
        return v.read_value()

    with pytest.raises(jt.errors.InvalidArgumentError, match=r"shape \[4\] to variable"):
        f(np.ones(4, np.float32))
    with pytest.raises(jt.errors.InvalidArgumentError, match="dtype float32"):
        f(np.ones(3, np.float64))


def test_variable_numpy_inside_trace_raises():
    v = jt.Variable(1.0)

    @jt.function
    def f():
        return v.numpy()

    with pytest.raises(TypeError, match="symbolic"):
        f()


@pytest.mark.parametrize("backend", BACKENDS)
def test_outputs_and_variables_never_alias_callers_arrays(backend):
    v = jt.Variable(np.zeros(3))

    @jt.function(backend=backend)
    def f(x):
        v.assign(x)
        return x, v.read_value()

    x = np.arange(3.0)
    a, b = f(x)
    x[0] = 100.0  # the caller's array stays theirs and writeable
    assert x.flags.writeable
    np.testing.assert_array_equal(a.numpy(), [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(b.numpy(), [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(v.numpy(), [0.0, 1.0, 2.0])
    held = f(np.ones(3))[0]
    f(np.full(3, 7.0))
    np.testing.assert_array_equal(held.numpy(), [1.0, 1.0, 1.0])  # a held output keeps its value


def test_large_outputs_held_by_the_caller_are_not_overwritten():
    w = jt.Variable(np.zeros(1 << 15, np.float32))

    @jt.function(backend="cpu")
    def f(x):
        w.assign_add(x)
        return w * 1.0

    x = np.ones(1 << 15, np.float32)
    outs = [f(x) for _ in range(4)]
    for k, o in enumerate(outs):
        assert float(o.numpy()[0]) == k + 1
    assert float(w.numpy()[-1]) == 4.0


# ---------------------------------------------------------------------------
# input_signature, methods, nesting, eager mode


def test_input_signature_fixes_dtype_and_checks_calls():
    @jt.function(input_signature=[jt.TensorSpec([None, 3], jt.float32)])
    def f(x):
        return jt.reduce_sum(x, axis=1)

    np.testing.assert_allclose(f([[1, 2, 3]]).numpy(), [6.0])  # converted to float32
    assert f(np.ones((5, 3), np.float32)).shape == (5,)
    with pytest.raises(TypeError, match="does not fit"):
        f(np.ones((5, 4), np.float32))
    with pytest.raises(TypeError, match="does not fit"):
        f(np.ones((5, 3, 1), np.float32))
    with pytest.raises(TypeError, match="takes 1 argument"):
        f(np.ones((5, 3), np.float32), 2)
    assert f(np.ones((2, 3), np.float64)).dtype == jt.float32  # numpy data is cast
    with pytest.raises(TypeError, match="does not fit"):
        f(jt.ones((2, 3), jt.float64))  # a tensor keeps its dtype
    with pytest.raises(TypeError, match="TensorSpec"):
        jt.function(lambda x: x, input_signature=[np.float32])


def test_methods_trace_per_instance():
    class Scaler:
        def __init__(self, k):
            self.k = jt.Variable(k)

        @jt.function
        def __call__(self, x):
            return x * self.k

    a, b = Scaler(2.0), Scaler(3.0)
    assert float(a(jt.constant(1.0))) == 2.0
    assert float(b(jt.constant(1.0))) == 3.0
    assert a.__call__ is a.__call__
    assert a.__call__.cache_info().traces == 1


def test_function_calls_function_and_eager_tape_differentiates_through_call():
    @jt.function
    def inner(x):
        return jt.sin(x) * x

    @jt.function
    def outer(x):
        return inner(x) + inner(2.0 * x)

    x = jt.constant(0.7)
    want = np.sin(0.7) * 0.7 + np.sin(1.4) * 1.4
    np.testing.assert_allclose(float(outer(x)), want, rtol=1e-6)
    assert inner.cache_info().traces == 0  # inlined into outer's trace
    with jt.GradientTape() as tape:
        tape.watch(x)
        y = outer(x)
    d = tape.gradient(y, x)
    want_d = np.sin(0.7) + 0.7 * np.cos(0.7) + 2 * (np.sin(1.4) + 1.4 * np.cos(1.4))
    np.testing.assert_allclose(float(d), want_d, rtol=1e-5)


def test_run_functions_eagerly():
    seen = []

    @jt.function
    def f(x):
        seen.append(float(x.numpy()))  # works only eagerly
        return x + 1.0

    jt.config.run_functions_eagerly(True)
    try:
        assert jt.config.functions_run_eagerly()
        assert float(f(jt.constant(1.0))) == 2.0
        assert float(f(jt.constant(2.0))) == 3.0
    finally:
        jt.config.run_functions_eagerly(False)
    assert seen == [1.0, 2.0] and f.cache_info().traces == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_random_values_are_drawn_afresh_on_every_call(backend):
    """jt.random and dropout masks inside a function are inputs drawn at each call from
    the generator of that moment: the same values as the eager code with the same seed."""
    drop = jt.layers.Dropout(0.5)

    def f(x):
        return x + jt.random.normal(x.shape, dtype="float64"), drop(x, training=True)

    x = np.ones((3, 4))
    jt.random.set_seed(11)
    eager = [[t.numpy() for t in f(jt.constant(x))] for _ in range(3)]
    g = jt.function(f, backend=backend)
    jt.random.set_seed(11)
    got = [[t.numpy() for t in g(x)] for _ in range(3)]
    for e, c in zip(eager, got):
        for a, b in zip(e, c):
            np.testing.assert_array_equal(a, b)
    assert not np.array_equal(got[0][0], got[1][0])  # a new draw each call
    assert g.cache_info().traces == 1
    jt.random.set_seed(11)  # set_seed replays the draws of the compiled function too
    np.testing.assert_array_equal(g(x)[0].numpy(), got[0][0])


# ---------------------------------------------------------------------------
# introspection


def test_explain_and_cache_info():
    w = jt.Variable(np.ones((4, 3), np.float32))

    @jt.function(backend="cpu")
    def step(x):
        with jt.GradientTape() as tape:
            loss = jt.reduce_mean(jt.square(jt.tanh(x @ w)))
        w.assign_sub(0.1 * tape.gradient(loss, w))
        return loss

    x = np.ones((2, 4), np.float32)
    text = str(step.explain(x))
    assert "-- traced graph" in text and "tanh" in text and "test_function.py:" in text
    assert "fuse" in text and "kernels after fusion" in text and "matmul over" in text
    assert "generated source: " in text and "not compiled yet" in text
    assert step.cache_info().traces == 1
    step(x)
    info = step.cache_info()
    assert info.traces == 1 and info.misses == 0 and info.hits == 1
    assert info.kernels >= 2 and info.compiled + info.reused == 1
    assert info.compile_seconds > 0
    ex = step.explain(x)
    assert ex.source_path and ex.source.startswith("# jittape generated module")
    assert ex.source_paths[0] == ex.source_path and len(ex.source_paths) >= 2
    assert all(f"kernel module: {p}" in str(ex) for p in ex.source_paths[1:])
    assert "first run" in str(ex)


def test_compile_log(caplog, monkeypatch):
    monkeypatch.setenv("JITTAPE_LOG", "compile")

    @jt.function(backend="cpu")
    def f(x):
        return x * 3.0

    with caplog.at_level(logging.INFO, logger="jittape"):
        f(np.ones(2, np.float32))
        f(np.ones(3, np.float32))
    text = caplog.text
    assert "tracing" in text and "first call" in text
    assert "argument 'x': shape (2,) -> (3,)" in text
    assert "distinct kernels" in text and "[first call]" in text


def test_cpu_stats_count_a_function_compile():
    before = dict(cpu.stats)

    @jt.function(backend="cpu")
    def f(x):
        return jt.exp(x) * 0.123456 + jt.reduce_sum(x)

    f(np.ones(7, np.float32))
    f(np.ones(7, np.float32))
    after = cpu.stats
    made = sum(after[k] - before[k] for k in ("compiled", "disk_hits", "memory_hits"))
    assert made == 1


def test_new_batch_size_retraces_but_compiles_nothing():
    """Generated kernels take their sizes from the arrays (and size-dependent constants,
    like a mean's 1/N, as arguments), so the trace for a new batch size generates the
    same module and Numba's compiled code serves it."""
    import sys

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parents[1] / "benchmarks"))
    from train_steps import CONFIGS, data, jittape_step

    cfg = dict(CONFIGS["small"], sizes=(20, 30, 16, 5), batch=48)
    x, y, ws, bs = data(cfg)
    step = jittape_step(cfg, ws, bs, compiled=True, backend="cpu")
    ref = jittape_step(cfg, ws, bs, compiled=False, backend="interpret")
    for n in (48, 48, 33, 48, 21):
        want = float(ref(jt.constant(x[:n]), jt.constant(y[:n])))
        before = dict(cpu.stats)
        got = float(step(x[:n], y[:n]))
        np.testing.assert_allclose(got, want, rtol=1e-5)
        if n != 48:
            assert cpu.stats["compiled"] == before["compiled"]
            assert cpu.stats["disk_hits"] == before["disk_hits"]
    info = step.cache_info()
    assert info.traces == 3 and info.signatures == 3
    assert info.compiled + info.reused == 3 and info.reused >= 2
    for p, q in zip(step.params, ref.params):
        np.testing.assert_allclose(p.numpy(), q.numpy(), rtol=1e-5, atol=1e-6)


def test_kernels_of_the_same_structure_are_written_and_compiled_once():
    model = _mlp(5, dtype="float32")
    opt = jt.optimizers.Adam(0.01)

    @jt.function(backend="cpu")
    def step(x, y):
        with jt.GradientTape() as tape:
            loss = jt.losses.sparse_categorical_crossentropy(y, model(x), from_logits=True)
            loss = jt.reduce_mean(loss)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    x, y = _data()
    step(x.astype(np.float32), y)
    prog = step.get_concrete_function(x.astype(np.float32), y).program
    calls = [name for name, _ in prog.kernels]
    assert len(set(calls)) < len(calls)
    for name in set(calls):  # each distinct kernel: one module, imported once
        assert len(re.findall(rf" import k as {name}\b", prog.source)) == 1
    # the Adam update of every weight matrix is one function called three times
    assert max(calls.count(n) for n in set(calls)) >= 3


def test_threads_call_one_function_and_trace_each_signature_once():
    import threading

    w = jt.Variable(np.ones((8, 4), np.float32))
    traces = []

    @jt.function(backend="cpu")
    def f(x):
        traces.append(1)
        return jt.reduce_sum(jt.tanh(x @ w), axis=1)

    xs = [np.random.default_rng(k).standard_normal((16, 8)).astype(np.float32)
          for k in range(8)]
    want = [np.tanh(x @ np.ones((8, 4), np.float32)).sum(axis=1) for x in xs]
    errors = []
    barrier = threading.Barrier(4)

    def work(k):
        try:
            barrier.wait()
            for j in range(20):
                i = (k + j) % len(xs)
                np.testing.assert_allclose(f(xs[i]).numpy(), want[i], rtol=1e-5)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(traces) == 1 and f.cache_info().traces == 1


def test_background_compile_first_calls_interpret_then_compiled(monkeypatch):
    """By default (outside this suite) a new trace's program compiles in a thread; the
    calls meanwhile run the same graph on the interpreter, so the first call returns
    without waiting for Numba."""
    monkeypatch.setenv("JITTAPE_BACKGROUND_COMPILE", "1")
    w = jt.Variable(np.full((5, 3), 0.5))

    @jt.function(backend="cpu")
    def step(x):
        with jt.GradientTape() as tape:
            loss = jt.reduce_sum(jt.sin(x @ w) * 0.987654)
        w.assign_sub(0.01 * tape.gradient(loss, w))
        return loss

    x = np.random.default_rng(1).normal(size=(4, 5))
    ref_w = np.full((5, 3), 0.5)
    for _ in range(3):
        got = float(step(x))
        want = float(np.sum(np.sin(x @ ref_w)) * 0.987654)
        ref_w = ref_w - 0.01 * x.T @ (np.cos(x @ ref_w) * 0.987654)
        np.testing.assert_allclose(got, want, rtol=1e-12)
    cf = step.get_concrete_function(x)
    assert cf._thread is not None  # a compile thread was started, once
    assert step.wait() and cf.program.ready and cf.program.origin is not None
    assert "first run" in str(step.explain(x))
    for _ in range(3):
        got = float(step(x))
        want = float(np.sum(np.sin(x @ ref_w)) * 0.987654)
        ref_w = ref_w - 0.01 * x.T @ (np.cos(x @ ref_w) * 0.987654)
        np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(w.numpy(), ref_w, rtol=1e-12)
    assert step.cache_info().traces == 1


def test_background_compile_of_the_parallel_variant(monkeypatch):
    monkeypatch.setenv("JITTAPE_BACKGROUND_COMPILE", "1")
    n = 1 << 17
    w = jt.Variable(np.linspace(-1, 1, n).astype(np.float32))

    @jt.function(backend="cpu")
    def f(x):
        return jt.tanh(x * w) * jt.exp(-x)

    x = np.linspace(0, 1, n).astype(np.float32)
    want = np.tanh(x * w.numpy()) * np.exp(-x)
    f(x)
    f.wait()
    prog = f.get_concrete_function(x).program
    assert prog.entry_par is not None and not prog.par_ready
    for _ in range(cpu.PARALLEL_AFTER + 2):
        np.testing.assert_allclose(f(x).numpy(), want, rtol=2e-6, atol=1e-7)
    assert prog.par_thread is not None
    f.wait()
    assert prog.par_ready
    for _ in range(2 * cpu._TUNE_CALLS + 2):
        np.testing.assert_allclose(f(x).numpy(), want, rtol=2e-6, atol=1e-7)
    assert prog.threads is not None


def test_shape_error_while_tracing_names_the_op_shapes_and_the_line():
    import inspect

    @jt.function
    def f(x, w):
        return x @ w  # the line the error must name

    line = inspect.getsourcelines(f.python_function)[1] + 2
    with pytest.raises(jt.errors.InvalidArgumentError) as e:
        f(np.ones((2, 3), np.float32), np.ones((4, 5), np.float32))
    msg = str(e.value)
    assert msg.startswith("matmul: Matrix size-incompatible: In[0]: [2,3], In[1]: [4,5]")
    assert f"test_function.py:{line})" in msg


def test_explain_names_each_kernel_as_the_source_and_the_profiler_do():
    """One numbering: the kernel list, the optimized graph's notes, the generated entry's
    calls and the kernels' comments say the same kernel names."""
    def f(x, w):
        y = jt.debugging.check_numerics(jt.matmul(x, w), "m")
        return jt.reduce_sum(jt.tanh(y) * 2.0, axis=1), jt.matmul(y, w)

    x, w = np.ones((4, 4), np.float32), np.eye(4, dtype=np.float32)
    fn = jt.function(f, backend="cpu")
    fn(x, w)
    ex = fn.explain(x, w)
    names = [name for name, _ in ex.kernels]
    text = str(ex)
    graph_text = text.split("-- optimized graph --")[1]
    for name in set(names):
        assert f"# {name}" in graph_text
    sources = ex.concrete.program.sources
    for site, name in enumerate(names):  # the entry's call at each site
        assert re.search(rf"kcall\d+\(kp, {site}, {name},", sources.entry), (site, name)
    kinds = {name: desc.split(" over ")[0].split(" of ")[0] for name, desc in ex.kernels}
    for kname, _, ktext in sources.kernels:
        assert f"    # {kinds[kname]}" in ktext
