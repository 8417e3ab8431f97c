"""TF's core-API guide "Multilayer perceptrons for digit recognition", ported by
changing the import: an MLP written as ``jt.Module``s (layers that build on their first
call), a ``@jt.function`` train step fed by ``jt.data.Dataset`` batches, and a
checkpoint every epoch with ``jt.train.CheckpointManager``. At the end a fresh model
restores the latest checkpoint and must score the same test accuracy.

The guide trains on MNIST (a download); here it is the 8x8 digits that ship with
scikit-learn, so nothing is downloaded.

Run: python examples/module_mlp_checkpoint.py [--epochs N] [--dir DIR]
"""

from __future__ import annotations

import argparse
import sys
import tempfile

import numpy as np

import jittape as jt


def xavier_init(shape):
    # computes the xavier initialization values for a weight matrix
    in_dim, out_dim = shape
    xavier_lim = jt.sqrt(6.0) / jt.sqrt(jt.cast(in_dim + out_dim, jt.float32))
    weight_vals = jt.random.uniform(shape=(in_dim, out_dim), minval=-xavier_lim,
                                    maxval=xavier_lim, seed=22)
    return weight_vals


class DenseLayer(jt.Module):
    def __init__(self, out_dim, weight_init=xavier_init, activation=jt.identity):
        # initialize the dimensions and activation functions
        super().__init__()
        self.out_dim = out_dim
        self.weight_init = weight_init
        self.activation = activation
        self.built = False

    def __call__(self, x):
        if not self.built:
            # infer the input dimension based on first call
            self.in_dim = x.shape[1]
            # initialize the weights and biases
            self.w = jt.Variable(self.weight_init(shape=(self.in_dim, self.out_dim)))
            self.b = jt.Variable(jt.zeros(shape=(self.out_dim,)))
            self.built = True
        # compute the forward pass
        z = jt.add(jt.matmul(x, self.w), self.b)
        return self.activation(z)


class MLP(jt.Module):
    def __init__(self, layers):
        super().__init__()
        self.layers = layers

    @jt.function
    def __call__(self, x, preds=False):
        # execute the model's layers sequentially
        for layer in self.layers:
            x = layer(x)
        return x


def cross_entropy_loss(y_pred, y):
    # compute cross entropy loss with a sparse operation
    sparse_ce = jt.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=y_pred)
    return jt.reduce_mean(sparse_ce)


def accuracy(y_pred, y):
    # compute accuracy after extracting class predictions
    class_preds = jt.argmax(jt.nn.softmax(y_pred), axis=1)
    is_equal = jt.equal(y, class_preds)
    return jt.reduce_mean(jt.cast(is_equal, jt.float32))


def new_model(hidden_layer_1_size=128, hidden_layer_2_size=64, output_size=10):
    return MLP([
        DenseLayer(out_dim=hidden_layer_1_size, activation=jt.nn.relu),
        DenseLayer(out_dim=hidden_layer_2_size, activation=jt.nn.relu),
        DenseLayer(out_dim=output_size)])


@jt.function
def train_step(x_batch, y_batch, loss, acc, model, optimizer):
    # update the model state given a batch of data
    with jt.GradientTape() as tape:
        y_pred = model(x_batch)
        batch_loss = loss(y_pred, y_batch)
    batch_acc = acc(y_pred, y_batch)
    grads = tape.gradient(batch_loss, model.variables)
    optimizer.apply_gradients(zip(grads, model.variables))
    return batch_loss, batch_acc


@jt.function
def val_step(x_batch, y_batch, loss, acc, model):
    # evaluate the model given a batch of validation data
    y_pred = model(x_batch)
    batch_loss = loss(y_pred, y_batch)
    batch_acc = acc(y_pred, y_batch)
    return batch_loss, batch_acc


def load(seed=0):
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    return train_test_split(x, y, test_size=0.2, random_state=seed, stratify=y)


def evaluate(model, ds):
    accs = []
    for x_batch, y_batch in ds:
        _, batch_acc = val_step(x_batch, y_batch, cross_entropy_loss, accuracy, model)
        accs.append(float(batch_acc) * int(x_batch.shape[0]))
    return sum(accs) / sum(int(x.shape[0]) for x, _ in ds)


def main(epochs=10, batch_size=128, ckpt_dir=None, verbose=True):
    say = print if verbose else (lambda *a, **k: None)
    jt.random.set_seed(22)
    x_train, x_val, y_train, y_val = load()
    train_data = jt.data.Dataset.from_tensor_slices((x_train, y_train))
    val_data = jt.data.Dataset.from_tensor_slices((x_val, y_val))
    train_data = train_data.shuffle(buffer_size=len(x_train), seed=0).batch(batch_size)
    val_data = val_data.batch(batch_size)

    mlp_model = new_model()
    optimizer = jt.keras.optimizers.Adam(learning_rate=1e-2)
    ckpt_dir = ckpt_dir or tempfile.mkdtemp(prefix="jt_mlp_ckpt_")
    checkpoint = jt.train.Checkpoint(model=mlp_model, optimizer=optimizer,
                                     epoch=jt.Variable(0, dtype=jt.int64))
    manager = jt.train.CheckpointManager(checkpoint, ckpt_dir, max_to_keep=3)

    history = []
    for epoch in range(epochs):
        batch_losses_train, batch_accs_train = [], []
        for x_batch, y_batch in train_data:
            batch_loss, batch_acc = train_step(x_batch, y_batch, cross_entropy_loss,
                                               accuracy, mlp_model, optimizer)
            batch_losses_train.append(float(batch_loss))
            batch_accs_train.append(float(batch_acc))
        val_acc = evaluate(mlp_model, val_data)
        checkpoint.epoch.assign(epoch + 1)
        path = manager.save()
        history.append((float(np.mean(batch_losses_train)), val_acc))
        say(f"Epoch: {epoch}  training loss: {history[-1][0]:.3f}, validation accuracy: "
            f"{val_acc:.3f}  -> {path}")
    say(f"train_step traced {train_step.experimental_get_tracing_count()} times "
        "(full batches, then the smaller last batch)")

    # a fresh model, built by its first call, restores the latest checkpoint
    restored = new_model()
    restored(jt.zeros([1, x_train.shape[1]]))
    status = jt.train.Checkpoint(model=restored, epoch=jt.Variable(0, dtype=jt.int64)).restore(
        manager.latest_checkpoint)
    status.expect_partial()  # the optimizer's slots are in the checkpoint too
    restored_acc = evaluate(restored, val_data)
    say(f"restored from {manager.latest_checkpoint}: validation accuracy {restored_acc:.3f}")
    return {"history": history, "val_accuracy": history[-1][1], "restored_accuracy": restored_acc,
            "checkpoints": manager.checkpoints,
            "traces": train_step.experimental_get_tracing_count()}


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--dir", default=None)
    a = p.parse_args()
    res = main(epochs=a.epochs, ckpt_dir=a.dir)
    ok = res["val_accuracy"] >= 0.9 and res["restored_accuracy"] == res["val_accuracy"]
    sys.exit(0 if ok else 1)
