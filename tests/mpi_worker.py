"""One rank of the jobs ``tests/test_distributed.py`` launches with ``mpiexec -n N``.

``python tests/mpi_worker.py MODE OUTDIR``:

- ``train``: three trainings in one job, each from rank 0's weights (the other ranks
  start perturbed: the broadcast must fix that), on the rank's interleaved share of
  each global batch: ``eager`` (DistributedGradientTape, SGD), ``function`` (a
  ``@jt.function`` step on the ``cpu`` backend, DistributedOptimizer, Adam: the
  compiled kernel calls MPI_Allreduce) and ``fit`` (DataParallel, Adam, a metric).
  Each rank writes ``<training>_<rank>.npz``: initial and final weights (and fit's
  history); the test compares the ranks, and one process on the whole batches.
- ``raise`` / ``kill`` / ``hang``: rank 1 raises, is killed, or sleeps at step 3 of a
  compiled training loop; the job must end (the test bounds the time).
- ``layout``: rank 1's model has another hidden size: the first compiled step fails on
  every rank naming the first difference.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

import numpy as np

import jittape as jt

N, GLOBAL_BATCH, STEPS, EPOCHS = 48, 16, 3, 2
SIZES = (5, 4, 3)


def data():
    rng = np.random.default_rng(7)
    x = rng.normal(size=(N, SIZES[0])).astype(np.float32)
    y = rng.normal(size=(N, SIZES[-1])).astype(np.float32)
    return x, y


def model(hidden=SIZES[1]):
    m = jt.keras.Sequential([jt.keras.layers.Dense(hidden, activation="tanh"),
                             jt.keras.layers.Dense(SIZES[-1])])
    m.build((None, SIZES[0]))
    return m


def perturb(m, rank):
    if rank:
        for v in m.trainable_variables:
            v.assign(v + 0.5 * rank)


def share(a, k, rank, size):
    """Rank ``rank``'s share of global batch ``k``: samples rank, rank + size, ..."""
    return a[k * GLOBAL_BATCH:(k + 1) * GLOBAL_BATCH][rank::size]


def weights(m):
    return {f"w{i}": w for i, w in enumerate(m.get_weights())}


def save(outdir, name, rank, initial, m, **extra):
    np.savez(os.path.join(outdir, f"{name}_{rank}.npz"),
             **{f"init_{k}": v for k, v in initial.items()},
             **{f"final_{k}": v for k, v in weights(m).items()}, **extra)


def mse(y, p):
    return jt.reduce_mean(jt.square(p - y))


def compiled_step(m, opt):
    """A ``@jt.function`` train step on the cpu backend; ``opt`` allreduces."""

    @jt.function(backend="cpu")
    def step(xs, ys):
        with jt.GradientTape() as tape:
            loss = mse(ys, m(xs, training=True))
        grads = tape.gradient(loss, m.trainable_variables)
        opt.apply_gradients(zip(grads, m.trainable_variables))
        return loss

    return step


def train(outdir):
    rank, size = jt.distributed.rank(), jt.distributed.size()
    x, y = data()

    # eager: DistributedGradientTape, SGD
    m = model()
    perturb(m, rank)
    jt.distributed.broadcast_variables(m.variables)
    initial = weights(m)
    opt = jt.keras.optimizers.SGD(0.1)
    for epoch in range(EPOCHS):
        for k in range(STEPS):
            xs, ys = share(x, k, rank, size), share(y, k, rank, size)
            with jt.GradientTape() as tape:
                loss = mse(ys, m(xs, training=True))
            tape = jt.distributed.DistributedGradientTape(tape)
            grads = tape.gradient(loss, m.trainable_variables)
            opt.apply_gradients(zip(grads, m.trainable_variables))
    save(outdir, "eager", rank, initial, m)

    # a compiled step: DistributedOptimizer, Adam; slots made and broadcast first
    m = model()
    perturb(m, rank)
    opt = jt.distributed.DistributedOptimizer(jt.keras.optimizers.Adam(0.05))
    opt.build(m.trainable_variables)
    jt.distributed.broadcast_variables(m.variables + opt.variables)
    initial = weights(m)
    step = compiled_step(m, opt)
    for epoch in range(EPOCHS):
        for k in range(STEPS):
            step(share(x, k, rank, size), share(y, k, rank, size))
    cf = next(iter(step._cache.values()))
    prog = cf.program
    kernels = [d for _, d in prog.kernels] if prog is not None else []
    import numba

    save(outdir, "function", rank, initial, m,
         compiled=np.array(prog is not None and prog.ready and prog.fallback is None),
         kernels=np.array(json.dumps(kernels)), threads=np.array(numba.get_num_threads()),
         local_size=np.array(jt.distributed.local_size()))

    # fit under DataParallel: the global batch, the job's metrics
    m = model()
    perturb(m, rank)
    strategy = jt.distributed.DataParallel()
    with strategy.scope():
        m.compile(optimizer=jt.keras.optimizers.Adam(0.05), loss="mse", metrics=["mae"])
    initial = weights(m)  # rank 0's: what fit broadcasts before its first step

    class Ran(jt.keras.callbacks.Callback):  # a user's callback runs on every rank
        def on_epoch_end(self, epoch, logs=None):
            open(os.path.join(outdir, f"ran_{rank}_{epoch}"), "w").close()

    callbacks = [Ran(), jt.keras.callbacks.CSVLogger(os.path.join(outdir, "log.csv")),
                 jt.keras.callbacks.ModelCheckpoint(os.path.join(outdir, "best.weights.h5"),
                                                    save_weights_only=True)]
    hist = m.fit(x, y, batch_size=GLOBAL_BATCH, epochs=EPOCHS, shuffle=False, verbose=1,
                 callbacks=callbacks)
    save(outdir, "fit", rank, initial, m,
         loss=np.array(hist.history["loss"]), mae=np.array(hist.history["mae"]),
         evaluate=np.array(m.evaluate(x, y, batch_size=GLOBAL_BATCH, verbose=0)))

    # fit on a jt.data.Dataset: each rank reads dataset.shard(size, rank), whose batches
    # are per rank: with batches of GLOBAL_BATCH / size, step k of the job is the
    # whole global batch k
    m = model()
    perturb(m, rank)
    with strategy.scope():
        m.compile(optimizer=jt.keras.optimizers.Adam(0.05), loss="mse", metrics=["mae"])
    initial = weights(m)
    ds = jt.data.Dataset.from_tensor_slices((x, y)).batch(GLOBAL_BATCH // size)
    hist = m.fit(ds, epochs=EPOCHS, verbose=0)
    save(outdir, "fit_dataset", rank, initial, m, loss=np.array(hist.history["loss"]),
         mae=np.array(hist.history["mae"]),
         evaluate=np.array(m.evaluate(ds, verbose=0)))

    # fit with shuffling: one order for all ranks (identical weights)
    m = model()
    with strategy.scope():
        m.compile(optimizer="adam", loss="mse")
    m.fit(x, y, batch_size=GLOBAL_BATCH, epochs=1, shuffle=True, verbose=0)
    save(outdir, "fit_shuffled", rank, {}, m)

    # broadcast_variables inside a compiled function, from the last rank, two dtypes
    v = jt.Variable(np.full((2, 3), rank + 1.0, np.float32))
    w = jt.Variable(np.full((4,), 10.0 * (rank + 1), np.float64))

    @jt.function(backend="cpu")
    def sync():
        jt.distributed.broadcast_variables([v, w], root=size - 1)

    sync()
    cf = next(iter(sync._cache.values()))

    # a buffer the step reads again after its allreduce is not reduced over; one read
    # only once is reduced in place
    @jt.function(backend="cpu")
    def reuse(a):
        y = a * 2.0
        s = jt.distributed.allreduce(y, average=False)
        z = a * 3.0
        return s + y, jt.distributed.allreduce(z, average=True)

    got, mean = reuse(np.full(5, rank + 1.0, np.float32))
    # eagerly: nested gradients of two dtypes with a None, one buffer per dtype
    mixed = jt.distributed.allreduce_gradients(
        {"a": [jt.constant(np.full((2, 3), rank + 1.0, np.float32)), None],
         "b": (jt.constant(np.arange(3.0) * (rank + 1)), jt.constant(np.float32(rank)))})
    rcf = next(iter(reuse._cache.values()))
    np.savez(os.path.join(outdir, f"sync_{rank}.npz"), v=v.numpy(), w=w.numpy(),
             kernels=np.array(json.dumps([d for _, d in cf.program.kernels])),
             reuse=got.numpy(), mean=mean.numpy(), mixed_none=mixed["a"][1] is None,
             mixed_a=mixed["a"][0].numpy(), mixed_b0=mixed["b"][0].numpy(),
             mixed_b1=mixed["b"][1].numpy(),
             reuse_kernels=np.array(json.dumps([d for _, d in rcf.program.kernels])))


def failing(outdir, mode):
    rank = jt.distributed.rank()
    x, y = data()
    m = model(6 if (mode == "layout" and rank == 1) else SIZES[1])
    opt = jt.distributed.DistributedOptimizer(jt.keras.optimizers.SGD(0.1))
    step = compiled_step(m, opt)  # a hang waits inside the compiled kernel's MPI call

    for k in range(100):
        if rank == 1 and k == 3:
            if mode == "raise":
                raise ValueError("rank 1 fails on purpose at step 3")
            if mode == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            if mode == "hang":
                time.sleep(600)
        step(x[:8], y[:8])
    print(f"rank {rank}: finished", flush=True)


def main():
    mode, outdir = sys.argv[1], sys.argv[2]
    jt.distributed.init(timeout=float(os.environ.get("WORKER_TIMEOUT", "60")))
    if mode == "train":
        train(outdir)
    else:
        failing(outdir, mode)


if __name__ == "__main__":
    main()
