"""Writes the files in tests/data/pre_layout/ with jittape's public API, so that
tests/test_layering.py can show that what an earlier tree wrote still loads: a ``.keras``
archive (a functional model with a BatchNormalization, compiled, trained a step so that
Adam's slots are saved), a Sequential's ``.weights.h5``, a saved model with a traced
function, and a ``jt.train.Checkpoint``. ``expected.npz`` holds their outputs on ``X``.

    python tests/data/make_pre_layout.py      # (the committed files came from main at
                                              #  the commit before the layout move)
"""

import os
import shutil

import numpy as np

import jittape as jt

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pre_layout")
X = np.linspace(-1, 1, 24, dtype=np.float32).reshape(6, 4)
Y = np.array([0, 1, 2, 0, 1, 2])


def main():
    shutil.rmtree(HERE, ignore_errors=True)
    os.makedirs(HERE)
    jt.random.set_seed(7)
    inp = jt.keras.Input((4,))
    h = jt.keras.layers.Dense(8, activation="relu")(inp)
    h = jt.keras.layers.BatchNormalization()(h)
    out = jt.keras.layers.Dense(3)(h)
    model = jt.keras.Model(inp, out)
    model.compile(jt.keras.optimizers.Adam(0.01),
                  jt.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(X, Y, epochs=2, batch_size=6, verbose=0)
    model.save(os.path.join(HERE, "functional.keras"))

    seq = jt.keras.Sequential([jt.keras.Input((4,)), jt.keras.layers.Dense(5, activation="tanh"),
                               jt.keras.layers.Dense(2)])
    seq.save_weights(os.path.join(HERE, "sequential.weights.h5"))

    class Affine(jt.Module):
        def __init__(self):
            super().__init__()
            self.w = jt.Variable(np.arange(8, dtype=np.float32).reshape(4, 2) / 8, name="w")

        @jt.function(input_signature=[jt.TensorSpec([None, 4], jt.float32)])
        def __call__(self, x):
            return jt.tanh(x @ self.w)

    affine = Affine()
    jt.saved_model.save(affine, os.path.join(HERE, "saved_model"))

    step = jt.Variable(3, dtype=jt.int64)
    ckpt = jt.train.Checkpoint(model=seq, step=step)
    ckpt.write(os.path.join(HERE, "ckpt", "ckpt"))

    np.savez(os.path.join(HERE, "expected.npz"), functional=model.predict(X, verbose=0),
             sequential=seq.predict(X, verbose=0), affine=affine(X).numpy(),
             adam_iterations=model.optimizer.iterations.numpy())


if __name__ == "__main__":
    main()
