"""Train the MLP of ``train_digits.py`` data-parallel, on the ranks of an MPI job: each
rank trains on its share of every global batch, and the gradients are averaged across
the ranks inside the ``@jt.function`` step (the compiled kernel calls ``MPI_Allreduce``).

The global batch is ``--batch-size`` (32) whatever the number of ranks: rank ``r`` of
``N`` takes samples ``r, r + N, ...`` of it, so ``N`` ranks take the steps one process
takes, on ``1/N`` of the data each. Every rank starts from rank 0's weights and
optimizer slots (``broadcast_variables``), draws its own dropout masks, and ends with
rank 0's weights, which the script checks. Only rank 0 prints.

Run: mpiexec -n 2 python examples/train_digits_mpi.py [--epochs N]
     (also with -n 1, or as a plain python examples/train_digits_mpi.py)
Needs the ``examples`` extra (scikit-learn) and the ``mpi`` extra (mpi4py, MPICH).
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import jittape as jt
from train_digits import load, make_model  # the one-process demo's data, split and model

dist = jt.distributed


def main(epochs=20, batch_size=32, seed=0, verbose=True):
    dist.init()
    rank, size = dist.rank(), dist.size()
    say = print if verbose and rank == 0 else (lambda *a, **k: None)
    if batch_size % size:
        raise SystemExit(f"--batch-size {batch_size} is not a multiple of the {size} ranks")
    x_train, x_test, y_train, y_test = load(seed)
    jt.random.set_seed(seed + rank)  # each rank its own weights and masks, until...
    model = make_model()
    optimizer = jt.optimizers.Adam(learning_rate=2e-3)
    optimizer.build(model.trainable_variables)  # its slots exist now: broadcast them too
    dist.broadcast_variables(model.variables + optimizer.variables, root=0)  # ...rank 0's
    loss_fn = jt.losses.SparseCategoricalCrossentropy(from_logits=True)

    @jt.function
    def train_step(x, y):
        with jt.GradientTape() as tape:
            logits = model(x, training=True)
            loss = loss_fn(y, logits)
        tape = dist.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)  # the ranks' mean
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        hits = jt.reduce_sum(jt.cast(jt.equal(jt.cast(jt.argmax(logits, axis=1), "int32"), y),
                                     "float32"))
        return loss, hits

    @jt.function
    def predict(x):
        return jt.argmax(model(x, training=False), axis=1)

    rng = np.random.default_rng(seed)  # the same seed on every rank: one shuffle order
    n = len(x_train)
    steps_per_epoch = n // batch_size
    step_times = []
    for epoch in range(1, epochs + 1):
        order = rng.permutation(n)
        total_loss = total_hits = 0.0
        for k in range(steps_per_epoch):
            idx = order[k * batch_size:(k + 1) * batch_size][rank::size]  # this rank's share
            t0 = time.perf_counter()
            loss, hits = train_step(x_train[idx], y_train[idx])
            if epoch == 1 and k == 0:
                train_step.wait()  # the compile in the background: not a step time
            else:
                step_times.append(time.perf_counter() - t0)
            total_loss += float(loss)
            total_hits += float(hits)
        # the job's loss and accuracy: the ranks' sums (each rank's loss is its share's mean)
        totals = dist.allreduce(np.array([total_loss, total_hits]), average=False).numpy()
        test_acc = float(np.mean(predict(x_test).numpy() == y_test))
        say(f"epoch {epoch:2d}  loss {totals[0] / (steps_per_epoch * size):.4f}  train acc "
            f"{totals[1] / (steps_per_epoch * batch_size):.3f}  test acc {test_acc:.3f}")

    # every rank holds rank 0's weights: compare them with a broadcast of rank 0's
    mine = np.concatenate([w.ravel() for w in model.get_weights()])
    rank0s = dist.broadcast(mine, root=0).numpy()
    same = np.array_equal(mine, rank0s)
    agree = int(dist.allreduce(np.array(int(same), np.int32), average=False).numpy())
    # each rank's median step time, gathered on every rank (a sum of one-hot vectors)
    ms = np.zeros(size)
    ms[rank] = 1e3 * float(np.median(step_times))
    ms = dist.allreduce(ms, average=False).numpy()
    final = float(np.mean(predict(x_test).numpy() == y_test))
    say(f"test accuracy {final:.3f}")
    say(f"weights equal to rank 0's on {agree} of {size} ranks"
        + ("" if same else f" (this rank differs by up to {np.abs(mine - rank0s).max():.3g})"))
    say(f"step time (median, ms) per rank ({batch_size // size} samples each): "
        + ", ".join(f"rank {r} {t:.3f}" for r, t in enumerate(ms)))
    return {"test_acc": final, "same_weights": agree == size, "step_ms": ms.tolist(),
            "rank": rank, "size": size, "traces": train_step.cache_info().traces}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=32, help="the global batch")
    ap.add_argument("--min-accuracy", type=float, default=0.95,
                    help="exit with status 1 below this test accuracy")
    args = ap.parse_args()
    res = main(epochs=args.epochs, batch_size=args.batch_size)
    if not res["same_weights"]:
        print(f"rank {res['rank']}: the ranks' weights differ", file=sys.stderr)
        sys.exit(1)
    if res["test_acc"] < args.min_accuracy:
        if res["rank"] == 0:
            print(f"test accuracy {res['test_acc']:.3f} is below {args.min_accuracy}")
        sys.exit(1)
