"""Tapes are per thread; the shared backward-graph cache is safe under threads."""

import threading

import numpy as np

import jittape as jt


def test_many_threads_train_with_the_same_structure():
    errors = []

    def worker(seed):
        try:
            rng = np.random.default_rng(seed)
            for _ in range(20):
                x = rng.standard_normal((5, 3))
                w = rng.standard_normal((3, 2))
                wv = jt.Variable(w)
                with jt.GradientTape() as tape:
                    loss = jt.reduce_sum(jt.sigmoid(jt.constant(x) @ wv))
                (g,) = tape.gradient(loss, [wv])
                s = 1 / (1 + np.exp(-(x @ w)))
                np.testing.assert_allclose(g.numpy(), x.T @ (s * (1 - s)), rtol=1e-10)
        except Exception as e:  # surfaced below, in the main thread
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_a_tape_does_not_record_other_threads_ops():
    x = jt.constant(2.0)
    with jt.GradientTape() as tape:
        tape.watch(x)
        box = {}
        t = threading.Thread(target=lambda: box.setdefault("y", x * x))
        t.start()
        t.join()
    assert tape.gradient(box["y"], x) is None


def test_tapes_recording_at_once_in_two_threads_see_only_their_own_ops():
    v = jt.Variable(np.array([1.0, 2.0, 3.0]))
    both_recording = threading.Barrier(2)
    both_done = threading.Barrier(2)
    losses, results, errors = {}, {}, []

    def worker(name, f):
        try:
            with jt.GradientTape(persistent=True) as tape:
                both_recording.wait(timeout=30)
                losses[name] = f(v)
                both_done.wait(timeout=30)  # the other thread's ops ran while this recorded
            other = losses["b" if name == "a" else "a"]
            results[name] = (tape.gradient(losses[name], v).numpy(), tape.gradient(other, v),
                             len(tape._nodes))
        except Exception as e:  # noqa: BLE001 - surfaced below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=("a", lambda v: jt.reduce_sum(v * 2.0))),
               threading.Thread(target=worker, args=("b", lambda v: jt.reduce_sum(v * v * v)))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    np.testing.assert_allclose(results["a"][0], [2.0, 2.0, 2.0])
    np.testing.assert_allclose(results["b"][0], 3 * v.numpy() ** 2)
    assert results["a"][1] is None and results["b"][1] is None  # not on this thread's tape
    assert results["a"][2] < results["b"][2]  # a recorded 2 ops, b 3


def _run_at_once(n_threads, fn):
    """Call ``fn(k)`` in ``n_threads`` threads released together by a barrier; return
    the results by k (raising the first error)."""
    barrier = threading.Barrier(n_threads)
    out, errors = {}, []

    def work(k):
        try:
            barrier.wait(timeout=60)
            out[k] = fn(k)
        except Exception as e:  # noqa: BLE001 - surfaced below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return out


def _compiled_regression(w0):
    """A jt.function on cpu: the loss of a linear model and its gradient (a shared
    variable, read only)."""
    w = jt.Variable(w0)

    @jt.function(backend="cpu")
    def loss_and_grad(x, y):
        with jt.GradientTape() as tape:
            r = jt.tanh(x @ w) - y
            loss = jt.reduce_mean(r * r)
        return loss, tape.gradient(loss, w)

    def reference(x, y):
        z = np.tanh(x @ w0)
        r = z - y
        return np.mean(r * r), x.T @ (2 * r * (1 - z * z) / r.size)

    return loss_and_grad, reference


def _origins():
    from jittape.compiler.backends import cpu

    return cpu.stats["compiled"] + cpu.stats["disk_hits"] + cpu.stats["memory_hits"]


def _check_threads(shapes_of, n_signatures):
    from jittape.compiler.backends import cpu

    rng = np.random.default_rng(7)
    f, reference = _compiled_regression(rng.standard_normal((5, 3)))
    data = {k: (rng.standard_normal(shapes_of(k)), rng.standard_normal((shapes_of(k)[0], 3)))
            for k in range(8)}
    before = dict(cpu.stats), _origins()

    def call(k):
        x, y = data[k]
        return [(float(loss), g.numpy()) for loss, g in (f(x, y) for _ in range(4))]

    got = _run_at_once(8, call)
    for k, results in got.items():
        want_loss, want_g = reference(*data[k])
        for loss, g in results:
            np.testing.assert_allclose(loss, want_loss, rtol=1e-10)
            np.testing.assert_allclose(g, want_g, rtol=1e-9, atol=1e-12)
    info = f.cache_info()
    assert info.traces == n_signatures and info.misses == n_signatures
    # each signature's program generated and compiled (or loaded) once, whatever the
    # number of threads that met it at once; none fell back to the interpreter
    assert cpu.stats["graphs"] - before[0]["graphs"] == n_signatures
    assert _origins() - before[1] == n_signatures
    assert cpu.stats["fallbacks"] == before[0]["fallbacks"]


def test_a_compiled_function_called_from_eight_threads_at_once():
    _check_threads(lambda k: (11, 5), 1)  # a shape no other test uses


def test_two_signatures_of_a_compiled_function_from_eight_threads_at_once():
    _check_threads(lambda k: (9, 5) if k % 2 else (10, 5), 2)
