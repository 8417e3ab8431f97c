"""jt.saved_model against tf.saved_model, run only where TensorFlow is installed
(``pip install -e '.[tf]'``); the default suite does not need it.

The same module is built on both sides from the same float32 weights, saved and loaded
back; the loaded objects give the same values, the same signature keys and output
names, pick the same saved trace for Python-value arguments (and refuse the same call
that fits none), and a saved train step trains on alike.
"""

import numpy as np
import pytest
from tolerances import tol

import jittape as jt

tf = pytest.importorskip("tensorflow")

T32 = tol("float32")
F32 = np.float32
RNG = np.random.default_rng(3)
W = RNG.standard_normal((3, 2)).astype(F32)
B = RNG.standard_normal(2).astype(F32)


def close(a, b):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=T32.fwd_rtol,
                               atol=T32.fwd_atol)


class TfModel(tf.Module):
    def __init__(self):
        super().__init__()
        self.w = tf.Variable(W)
        self.b = tf.Variable(B)

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, name="x")])
    def serve(self, x):
        return tf.matmul(x, self.w) + self.b

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, name="x")])
    def parts(self, x):
        return {"lin": tf.matmul(x, self.w), "sum": tf.reduce_sum(x, axis=1)}

    @tf.function
    def shift(self, x, up=True):
        return x + 1.0 if up else x - 1.0

    @tf.function(input_signature=[tf.TensorSpec([None, 3]), tf.TensorSpec([None, 2])])
    def step(self, x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(tf.matmul(x, self.w) + self.b - y))
        gw, gb = tape.gradient(loss, [self.w, self.b])
        self.w.assign_sub(0.1 * gw)
        self.b.assign_sub(0.1 * gb)
        return loss


class JtModel(jt.Module):
    def __init__(self):
        super().__init__()
        self.w = jt.Variable(W)
        self.b = jt.Variable(B)

    @jt.function(input_signature=[jt.TensorSpec([None, 3], jt.float32, name="x")])
    def serve(self, x):
        return jt.matmul(x, self.w) + self.b

    @jt.function(input_signature=[jt.TensorSpec([None, 3], jt.float32, name="x")])
    def parts(self, x):
        return {"lin": jt.matmul(x, self.w), "sum": jt.reduce_sum(x, axis=1)}

    @jt.function
    def shift(self, x, up=True):
        return x + 1.0 if up else x - 1.0

    @jt.function(input_signature=[jt.TensorSpec([None, 3]), jt.TensorSpec([None, 2])])
    def step(self, x, y):
        with jt.GradientTape() as tape:
            loss = jt.reduce_mean(jt.square(jt.matmul(x, self.w) + self.b - y))
        gw, gb = tape.gradient(loss, [self.w, self.b])
        self.w.assign_sub(0.1 * gw)
        self.b.assign_sub(0.1 * gb)
        return loss


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    d = tmp_path_factory.mktemp("sm")
    out = []
    for side, model, lib in (("tf", TfModel(), tf), ("jt", JtModel(), jt)):
        model.shift(lib.constant([1.0, 2.0]))
        model.shift(lib.constant([1.0, 2.0, 3.0]), up=False)
        lib.saved_model.save(model, str(d / side),
                             signatures={"serving_default": model.serve, "parts": model.parts})
        out.append(lib.saved_model.load(str(d / side)))
    return out


def test_loaded_values_and_signatures_agree(loaded):
    t, j = loaded
    x = RNG.standard_normal((4, 3)).astype(F32)
    close(j.serve(x), t.serve(tf.constant(x)).numpy())
    assert sorted(j.signatures) == sorted(t.signatures)
    for key in t.signatures:
        ts, js = t.signatures[key], j.signatures[key]
        assert sorted(js.structured_outputs) == sorted(ts.structured_outputs)
        assert sorted(js.structured_input_signature[1]) == sorted(
            ts.structured_input_signature[1])
        got, want = js(x=x), ts(x=tf.constant(x))
        assert sorted(got) == sorted(want)
        for k in want:
            close(got[k], want[k].numpy())


def test_python_arguments_pick_the_same_trace(loaded):
    t, j = loaded
    close(j.shift(np.array([1.0, 5.0], F32)), t.shift(tf.constant([1.0, 5.0])).numpy())
    close(j.shift(np.array([1.0, 5.0, 2.0], F32), up=False),
          t.shift(tf.constant([1.0, 5.0, 2.0]), up=False).numpy())
    with pytest.raises(ValueError):
        t.shift(tf.constant([1.0, 5.0, 2.0]))
    with pytest.raises(ValueError, match="match one of the following 2 option"):
        j.shift(np.array([1.0, 5.0, 2.0], F32))


def test_a_loaded_train_step_trains_alike(loaded):
    t, j = loaded
    x = RNG.standard_normal((5, 3)).astype(F32)
    y = RNG.standard_normal((5, 2)).astype(F32)
    for _ in range(3):
        close(j.step(x, y), t.step(tf.constant(x), tf.constant(y)).numpy())
    close(j.w.numpy(), t.w.numpy())
    close(j.b.numpy(), t.b.numpy())
