"""TF's "Custom training: walkthrough", ported by changing the import: classify flowers
with a Keras ``Sequential`` model fed by a ``jt.data.Dataset``, a hand-written loop with
``GradientTape``, and ``jt.keras.metrics`` for the epoch loss and accuracy.

The guide downloads the Palmer penguins CSV; here the same kind of table (4 numeric
features, 3 species) comes from the iris data that ships with scikit-learn, so nothing
is downloaded. Everything else is the guide's program with ``tf`` replaced by ``jt``.

Run: python examples/custom_training_walkthrough.py       (needs the ``examples`` extra)
"""

from __future__ import annotations

import sys

import numpy as np

import jittape as jt

CLASS_NAMES = ["setosa", "versicolor", "virginica"]


def load(seed=0):
    from sklearn.datasets import load_iris
    from sklearn.model_selection import train_test_split

    iris = load_iris()
    x = iris.data.astype(np.float32)
    x = (x - x.mean(axis=0)) / x.std(axis=0)  # the guide's penguins come preprocessed
    y = iris.target.astype(np.int64)
    return train_test_split(x, y, test_size=0.2, random_state=seed, stratify=y)


def main(num_epochs=201, batch_size=32, verbose=True):
    say = print if verbose else (lambda *a, **k: None)
    jt.keras.utils.set_random_seed(0)
    x_train, x_test, y_train, y_test = load()

    ds_train_batch = jt.data.Dataset.from_tensor_slices((x_train, y_train))
    ds_train_batch = ds_train_batch.shuffle(len(x_train), seed=0).batch(batch_size)
    features, labels = next(iter(ds_train_batch))
    say("features batch:", features.shape, "labels:", labels[:5].numpy())

    model = jt.keras.Sequential([
        jt.keras.layers.Dense(10, activation=jt.nn.relu, input_shape=(4,)),  # input shape required
        jt.keras.layers.Dense(10, activation=jt.nn.relu),
        jt.keras.layers.Dense(3),
    ])
    predictions = model(features)
    say("Prediction:", jt.math.argmax(predictions, axis=1)[:5].numpy())

    loss_object = jt.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def loss(model, x, y, training):
        # training=training is needed only if there are layers with different
        # behavior during training versus inference (e.g. Dropout)
        y_ = model(x, training=training)
        return loss_object(y_true=y, y_pred=y_)

    say("Loss test:", float(loss(model, features, labels, training=False)))

    def grad(model, inputs, targets):
        with jt.GradientTape() as tape:
            loss_value = loss(model, inputs, targets, training=True)
        return loss_value, tape.gradient(loss_value, model.trainable_variables)

    optimizer = jt.keras.optimizers.SGD(learning_rate=0.01)

    # keep results for plotting
    train_loss_results = []
    train_accuracy_results = []

    for epoch in range(num_epochs):
        epoch_loss_avg = jt.keras.metrics.Mean()
        epoch_accuracy = jt.keras.metrics.SparseCategoricalAccuracy()

        # training loop - using batches of 32
        for x, y in ds_train_batch:
            # optimize the model
            loss_value, grads = grad(model, x, y)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))

            # track progress
            epoch_loss_avg.update_state(loss_value)  # add current batch loss
            # compare predicted label to actual label
            # training=True is needed only if there are layers with different
            # behavior during training versus inference (e.g. Dropout)
            epoch_accuracy.update_state(y, model(x, training=True))

        # end epoch
        train_loss_results.append(float(epoch_loss_avg.result()))
        train_accuracy_results.append(float(epoch_accuracy.result()))

        if epoch % 50 == 0:
            say("Epoch {:03d}: Loss: {:.3f}, Accuracy: {:.3%}".format(
                epoch, epoch_loss_avg.result(), epoch_accuracy.result()))

    test_dataset = jt.data.Dataset.from_tensor_slices((x_test, y_test)).batch(batch_size)
    test_accuracy = jt.keras.metrics.Accuracy()
    ds_test_batch = test_dataset
    for (x, y) in ds_test_batch:
        # training=False is needed only if there are layers with different
        # behavior during training versus inference (e.g. Dropout)
        logits = model(x, training=False)
        prediction = jt.math.argmax(logits, axis=1, output_type=jt.int64)
        test_accuracy(prediction, y)
    say("Test set accuracy: {:.3%}".format(test_accuracy.result()))

    predict_dataset = jt.convert_to_tensor(x_test[:3])
    # training=False is needed only if there are layers with different
    # behavior during training versus inference (e.g. Dropout)
    predictions = model(predict_dataset, training=False)
    named = []
    for i, logits in enumerate(predictions):
        class_idx = int(jt.math.argmax(logits).numpy())
        p = jt.nn.softmax(logits)[class_idx]
        name = CLASS_NAMES[class_idx]
        named.append(name)
        say("Example {} prediction: {} ({:4.1f}%)".format(i, name, 100 * p))
    return {"loss": train_loss_results, "accuracy": train_accuracy_results,
            "test_accuracy": float(test_accuracy.result()), "predicted": named,
            "expected": [CLASS_NAMES[int(k)] for k in y_test[:3]]}


if __name__ == "__main__":
    res = main()
    sys.exit(0 if res["test_accuracy"] >= 0.9 else 1)
