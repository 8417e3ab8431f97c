"""Keras' guide "Writing a training loop from scratch" (TensorFlow version), ported by
changing the import: a model, a ``jt.data`` pipeline, a ``@jt.function`` train step and
test step that update Keras metrics, and the guide's epoch loop with its prints.

The guide builds its model with the functional API (``keras.Input``; that comes with the
next round) and trains on MNIST (a download); here the same layers are a ``Sequential``
and the data are the 8x8 digits that ship with scikit-learn. Note the import line: the
guide's own names run unchanged.

Run: python examples/training_loop_from_scratch.py        (needs the ``examples`` extra)
"""

from __future__ import annotations

import sys
import time

import jittape as tf  # the one line that changes: import tensorflow as tf
from jittape import keras  # from tensorflow import keras


def load(seed=0):
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = (digits.data / 16.0).astype("float32")
    y = digits.target.astype("int64")
    return train_test_split(x, y, test_size=0.2, random_state=seed, stratify=y)


def main(epochs=3, batch_size=64, verbose=True):
    say = print if verbose else (lambda *a, **k: None)
    keras.utils.set_random_seed(0)
    x_train, x_val, y_train, y_val = load()

    model = keras.Sequential([
        keras.layers.Dense(64, activation="relu", name="dense_1", input_shape=(64,)),
        keras.layers.Dense(64, activation="relu", name="dense_2"),
        keras.layers.Dense(10, name="predictions"),
    ])
    # instantiate an optimizer to train the model
    optimizer = keras.optimizers.SGD(learning_rate=1e-1)
    # instantiate a loss function
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    # prepare the training dataset
    train_dataset = tf.data.Dataset.from_tensor_slices((x_train, y_train))
    train_dataset = train_dataset.shuffle(buffer_size=1024, seed=0).batch(batch_size)
    # prepare the validation dataset
    val_dataset = tf.data.Dataset.from_tensor_slices((x_val, y_val))
    val_dataset = val_dataset.batch(batch_size)

    # prepare the metrics
    train_acc_metric = keras.metrics.SparseCategoricalAccuracy()
    val_acc_metric = keras.metrics.SparseCategoricalAccuracy()

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss_value = loss_fn(y, logits)
        grads = tape.gradient(loss_value, model.trainable_weights)
        optimizer.apply_gradients(zip(grads, model.trainable_weights))
        train_acc_metric.update_state(y, logits)
        return loss_value

    @tf.function
    def test_step(x, y):
        val_logits = model(x, training=False)
        val_acc_metric.update_state(y, val_logits)

    history = []
    for epoch in range(epochs):
        say("\nStart of epoch %d" % (epoch,))
        start_time = time.time()

        # iterate over the batches of the dataset
        for step, (x_batch_train, y_batch_train) in enumerate(train_dataset):
            loss_value = train_step(x_batch_train, y_batch_train)

            # log every 10 batches
            if step % 10 == 0:
                say("Training loss (for 1 batch) at step %d: %.4f" % (step, float(loss_value)))
                say("Seen so far: %d samples" % ((step + 1) * batch_size))

        # display metrics at the end of each epoch
        train_acc = train_acc_metric.result()
        say("Training acc over epoch: %.4f" % (float(train_acc),))

        # reset training metrics at the end of each epoch
        train_acc_metric.reset_state()

        # run a validation loop at the end of each epoch
        for x_batch_val, y_batch_val in val_dataset:
            test_step(x_batch_val, y_batch_val)

        val_acc = val_acc_metric.result()
        val_acc_metric.reset_state()
        say("Validation acc: %.4f" % (float(val_acc),))
        say("Time taken: %.2fs" % (time.time() - start_time))
        history.append((float(train_acc), float(val_acc)))
    return {"history": history, "train_traces": train_step.experimental_get_tracing_count(),
            "test_traces": test_step.experimental_get_tracing_count()}


if __name__ == "__main__":
    res = main(epochs=10)
    sys.exit(0 if res["history"][-1][1] >= 0.9 else 1)
