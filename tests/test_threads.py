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
