"""Writes the Keras-made ``.weights.h5`` fixtures that tests/test_save_weights.py reads.

Run with TensorFlow/Keras 3 installed (the files here were made with Keras 3.15.1)::

    python tests/data/make_keras_weights.py

Every variable's value is ``fixture_value(dataset path, shape)``, so a test can tell which
dataset a jittape variable was loaded from. ``keras_outputs.npz`` holds Keras' outputs of
each model on ``fixture_input(name)``.
"""

import os
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def fixture_value(path, shape):
    """The value a fixture stores at ``path``: uniform in [0.25, 1.25) (positive, so that
    moving variances are too), seeded by the path."""
    rng = np.random.default_rng(zlib.crc32(path.encode()))
    return rng.uniform(0.25, 1.25, size=shape).astype(np.float32)


def fixture_input(name, shape):
    return np.random.default_rng(zlib.crc32(name.encode())).uniform(-1, 1, shape).astype(
        np.float32)


def main():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import h5py
    import keras
    from keras import layers
    from keras.src.saving import saving_lib

    def fill(path):
        """Overwrite every dataset of a saved file with fixture_value(its path)."""
        with h5py.File(path, "r+") as f:
            def visit(name, obj):
                if isinstance(obj, h5py.Dataset) and obj.dtype.kind == "f":
                    obj[...] = fixture_value(name, obj.shape)
            f.visititems(visit)

    outputs = {}

    # Sequential, with RMSprop's state (centered, momentum: three slots per variable)
    seq = keras.Sequential([keras.Input((4,)), layers.Dense(3, activation="tanh"),
                            layers.BatchNormalization(), layers.Dropout(0.5), layers.Dense(2)])
    seq.compile(keras.optimizers.RMSprop(0.01, momentum=0.5, centered=True), "mse")
    seq.fit(np.ones((4, 4), np.float32), np.ones((4, 2), np.float32), verbose=0)
    seq.optimizer.iterations.assign(7)
    path = os.path.join(HERE, "keras_sequential.weights.h5")
    seq.save_weights(path)
    fill(path)
    seq.load_weights(path)
    outputs["sequential"] = seq.predict(fixture_input("sequential", (5, 4)), verbose=0)

    # a subclassed Layer: sublayers as attributes, in a list (nested), in a dict, private,
    # its own weights (a non-trainable one made first), a nested Sequential
    class Net(layers.Layer):
        def __init__(self):
            super().__init__()
            self.encoder = keras.Sequential([layers.Dense(3), layers.Dropout(0.5)])
            self.blocks = [layers.Dense(3), [layers.Dense(3), layers.Dense(3, use_bias=False)]]
            self.heads = {"b": layers.Dense(2), "a": layers.Dense(2)}
            self.bn = layers.BatchNormalization()
            self._gate = layers.Dense(2)

        def build(self, input_shape):
            self.count = self.add_weight(shape=(), initializer="zeros", trainable=False,
                                         name="count")
            self.scale = self.add_weight(shape=(2,), initializer="ones", name="scale")

        def call(self, x):
            x = self.encoder(x)
            x = self.blocks[1][1](self.blocks[1][0](self.blocks[0](x)))
            x = self.bn(x)
            y = self.heads["b"](x) + self.heads["a"](x)
            return self._gate(y) * self.scale + self.count

    net = Net()
    net(np.zeros((1, 4), np.float32))
    path = os.path.join(HERE, "keras_layer.weights.h5")
    saving_lib.save_weights_only(net, path)  # what Model.save_weights runs
    fill(path)
    saving_lib.load_weights_only(net, path)
    outputs["layer"] = np.asarray(net(fixture_input("layer", (5, 4))))

    np.savez(os.path.join(HERE, "keras_outputs.npz"), **outputs)


if __name__ == "__main__":
    main()
