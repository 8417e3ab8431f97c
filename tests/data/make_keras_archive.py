"""Writes ``keras_bn_dropout.keras``, a functional model saved by tf.keras (Keras 3), and
``keras_bn_dropout.npz`` with its inputs and Keras' predictions, which
tests/test_keras_archive.py loads without TensorFlow.

Run with TensorFlow/Keras 3 installed (the files here were made with Keras 3.15.1)::

    python tests/data/make_keras_archive.py

The model has a BatchNormalization (Keras records ``"kwargs": {"mask": null}`` in its
node), a Dropout (recorded ``"training": false``), Dense layers and a Concatenate of two
inputs. The moving statistics are set away from 0 and 1 so that inference is not the
identity.
"""

import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import keras
    from keras import layers

    keras.utils.set_random_seed(7)
    rng = np.random.default_rng(7)
    a = keras.Input((4,), name="a")
    b = keras.Input((3,), name="b")
    h = layers.Dense(5, activation="relu", name="dense")(a)
    h = layers.BatchNormalization(name="bn")(h)
    h = layers.Dropout(0.25, name="dropout")(h)
    c = layers.Concatenate(name="concat")([h, b])
    out = layers.Dense(2, name="out")(c)
    model = keras.Model([a, b], out, name="bn_dropout")
    bn = model.get_layer("bn")
    bn.moving_mean.assign(rng.uniform(-0.5, 0.5, 5).astype(np.float32))
    bn.moving_variance.assign(rng.uniform(0.5, 2.0, 5).astype(np.float32))
    bn.gamma.assign(rng.uniform(0.5, 1.5, 5).astype(np.float32))
    bn.beta.assign(rng.uniform(-0.5, 0.5, 5).astype(np.float32))
    xa = rng.standard_normal((8, 4)).astype(np.float32)
    xb = rng.standard_normal((8, 3)).astype(np.float32)
    model.save(os.path.join(HERE, "keras_bn_dropout.keras"))
    np.savez(os.path.join(HERE, "keras_bn_dropout.npz"), a=xa, b=xb,
             predict=model.predict([xa, xb], verbose=0),
             keras_version=np.array(keras.__version__))


if __name__ == "__main__":
    main()
