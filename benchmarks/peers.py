"""jittape against its peers: the same workloads, the same math, float32, in numpy,
jittape (eager tape and ``@jt.function``, cpu backend), TensorFlow (eager and
``tf.function``), JAX (``jit``) and PyTorch (eager and ``torch.compile``), those of
them that are installed (``pip install -e '.[peers]'``).

    python benchmarks/peers.py [--quick] [--out FILE] [--threads N]
                               [--frameworks numpy,jittape,...] [--workloads chain-1M,...]

Workloads (``workloads.py``): the chain's forward + backward at N = 1M and 8M, a
softmax cross-entropy forward + backward (256 x 1000, gradient w.r.t. the logits), and
the two MLP train steps of ``train_steps.py`` (64-128-64-10 batch 64 SGD; 784-512-256-10
batch 256 Adam, with Keras's Adam formula written out in each framework, as
``NumpyStep`` has it), a LeNet train step and a DCGAN train step (generator and
discriminator, two tapes, two Adams; ``workloads.py`` has each model). Every framework
starts from the same numpy arrays.

Before timing, each framework's first call is checked against the hand-written numpy:
the loss (rtol 1e-4) and the gradients (chain: rtol 1e-4, atol 1e-4 as
``test_chain.py``; softmax CE: rtol 1e-4, atol 1e-4 of the largest) or, for the train
steps, the loss (the DCGAN: both losses) and the weights after that one step (rtol
1e-4, atol 1e-5 as ``test_train_step.py``, and each weight's update within 5% of the
largest update). A framework that disagrees is reported as a mismatch and not timed.

Each cell (framework, variant, workload) runs in a process of its own (numpy's without
jittape imported), one after the other, pinned to the same N CPUs (``--threads``,
default: all this process may use) with every thread pool sized N:
``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``,
``NUMBA_NUM_THREADS``, TensorFlow's intra- and inter-op pools, ``torch.set_num_threads``
and ``set_num_interop_threads``; XLA sizes its pool by the CPUs it may use. jittape
keeps its defaults: one thread for numpy's BLAS in the eager forward, and compiled
programs that measure whether their matmuls run faster on N BLAS threads or on one
(``jittape/compiler/backends/blas.py``, ``cpu.Program._run_tuned``). Compile caches start
empty (a fresh ``JITTAPE_CACHE_DIR`` and ``TORCHINDUCTOR_CACHE_DIR``) and jittape
compiles on the first call (``JITTAPE_BACKGROUND_COMPILE=0``), so the "first call"
table is each framework's trace + compile from cold (the import not counted).

Timing: the first call (reported separately), then warm-up calls (for jittape, until
its compiled programs are settled, as the pytest benchmarks do), then ``timeit``'s
``repeat`` of loops of calls; the cell is the median over the repeats of the time per
call. JAX's results are waited for (``block_until_ready``) inside the timed call.

Each framework's step is the same Python function eager and compiled. ``torch.compile``
breaks the graph at ``torch.autograd.grad`` (dynamo's default): the forward and, through
AOTAutograd, the backward are compiled, and the update after the break is a graph of
its own (the DCGAN's step: two ``autograd.grad`` calls, one per model). PyTorch's labels
are int64 (what ``cross_entropy`` takes), int32 elsewhere.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import workloads as W  # noqa: E402  (numpy only: no framework is imported here)
from compare import fmt_time as _fmt_time  # noqa: E402

WORKLOADS = {
    "chain-1M": "chain fwd+bwd, N = 1M",
    "chain-8M": "chain fwd+bwd, N = 8M",
    "softmax-ce": "softmax CE fwd+bwd, 256 x 1000",
    "mlp-small": "MLP step 64-128-64-10, b64, SGD",
    "mlp-large": "MLP step 784-512-256-10, b256, Adam",
    "lenet": "LeNet step 28x28x1 b64, Adam",
    "dcgan": "DCGAN step 28x28x1 b64, 2 Adams",
}
COLUMNS = {
    "numpy": "numpy",
    "jittape-eager": "jittape eager (cpu)",
    "jittape-function": "jittape `@jt.function` (cpu)",
    "tf-eager": "TF eager",
    "tf-function": "`tf.function`",
    "jax-jit": "JAX `jit`",
    "torch-eager": "torch eager",
    "torch-compile": "`torch.compile`",
}
# worker: (the module that must be installed, its columns, the distributions to report)
WORKERS = {
    "numpy": (None, ["numpy"], []),
    "jittape": ("jittape", ["jittape-eager", "jittape-function"], ["jittape", "numba"]),
    "tensorflow": ("tensorflow", ["tf-eager", "tf-function"], ["tensorflow-cpu", "tensorflow"]),
    "jax": ("jax", ["jax-jit"], ["jax", "jaxlib"]),
    "torch": ("torch", ["torch-eager", "torch-compile"], ["torch"]),
}
BASELINE = "jittape-function"
B1, B2, EPS = W.B1, W.B2, W.EPS

_PROGRESS = "  peers: "
FULL = {"repeat": 21, "loop_s": 0.05, "warm_s": 0.5}
QUICK = {"repeat": 7, "loop_s": 0.01, "warm_s": 0.05}


# -- the workloads, in each framework --------------------------------------------------
#
# A builder returns a Case: ``step()`` runs one call and returns its outputs (chain and
# softmax CE: loss and gradients; MLP: the loss), ``params()`` the MLP's weights as
# numpy arrays, ``settle(step)`` the warm-up (default: calls for warm_s).


class Case:
    def __init__(self, step, params=None, settle=None):
        self.step, self.params, self.settle = step, params, settle


def _mlp_parts(cfg):
    x, y, ws, bs = W.data(cfg)
    init = [a for pair in zip(ws, bs) for a in pair]
    return x, y, init


def build_numpy(column, workload):
    kind, size = _split(workload)
    if kind == "chain":
        x, w, b = W.chain_data(W.CHAIN_SIZES[size])
        return Case(lambda: W.chain_numpy(x, w, b))
    if kind == "softmax-ce":
        logits, labels = W.softmax_ce_data()
        return Case(lambda: W.softmax_ce_numpy(logits, labels))
    if kind == "lenet":
        x, y, params = W.lenet_data()
        s = W.LeNetNumpy(params)
        return Case(lambda: s(x, y), params=lambda: s.params)
    if kind == "dcgan":
        z, x, params = W.dcgan_data()
        s = W.DCGANNumpy(params)
        return Case(lambda: s(z, x), params=lambda: s.params)
    cfg = W.CONFIGS[size]
    x, y, ws, bs = W.data(cfg)
    s = W.NumpyStep(cfg, ws, bs)
    return Case(lambda: s(x, y), params=lambda: s.params)


def build_jittape(column, workload):
    import jittape as jt
    from bench_util import settle

    compiled = column == "jittape-function"
    kind, size = _split(workload)
    if kind == "chain":
        step = W.chain_jittape(*W.chain_data(W.CHAIN_SIZES[size]), compiled=compiled)
        fn, params = step.function, None
    elif kind == "softmax-ce":
        step = W.softmax_ce_jittape(*W.softmax_ce_data(), compiled=compiled)
        fn, params = step.function, None
    elif kind in ("lenet", "dcgan"):
        x, y, init = W.lenet_data() if kind == "lenet" else W.dcgan_data()
        run, vs = (W.lenet_jittape if kind == "lenet" else W.dcgan_jittape)(init, compiled)
        xt, yt = jt.constant(x), jt.constant(y)
        step = lambda: run(xt, yt)  # noqa: E731  (not ``fn``: it is None below when eager)
        fn = run if compiled else None
        params = lambda: [v.numpy() for v in vs]  # noqa: E731
    else:
        cfg = W.CONFIGS[size]
        x, y, ws, bs = W.data(cfg)
        s = W.jittape_step(cfg, ws, bs, compiled=compiled, backend="cpu")
        xt, yt = jt.constant(x), jt.constant(y)
        step = lambda: s(xt, yt)
        fn = s if compiled else None
        params = lambda: [p.numpy() for p in s.params]

    def warm(step):
        if fn is not None:
            fn.wait()  # a no-op with JITTAPE_BACKGROUND_COMPILE=0, which the parent sets
        settle(step)

    return Case(step, params, warm)


def build_tensorflow(column, workload):
    import tensorflow as tf

    wrap = tf.function if column == "tf-function" else (lambda f: f)
    kind, size = _split(workload)
    if kind == "chain":
        x, w, b = W.chain_data(W.CHAIN_SIZES[size])
        x, w, b = tf.constant(x), tf.Variable(w), tf.Variable(b)

        @wrap
        def chain(x):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(tf.tanh(x * w + b) * tf.sigmoid(x) + 0.5 * (x - w) ** 2)
            gw, gb = tape.gradient(loss, [w, b])
            return loss, gw, gb

        return Case(lambda: chain(x))
    if kind == "softmax-ce":
        logits, labels = (tf.constant(a) for a in W.softmax_ce_data())

        @wrap
        def ce(logits, labels):
            with tf.GradientTape() as tape:
                tape.watch(logits)
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                    labels=labels, logits=logits))
            return loss, tape.gradient(loss, logits)

        return Case(lambda: ce(logits, labels))
    if kind == "lenet":
        return _lenet_tensorflow(tf, wrap)
    if kind == "dcgan":
        return _dcgan_tensorflow(tf, wrap)
    cfg = W.CONFIGS[size]
    x, y, init = _mlp_parts(cfg)
    x, y = tf.constant(x), tf.constant(y)
    ps = [tf.Variable(a) for a in init]
    ms = [tf.Variable(np.zeros_like(a)) for a in init]
    vs = [tf.Variable(np.zeros_like(a)) for a in init]
    t = tf.Variable(0.0)
    nl, lr = len(ps) // 2, cfg["lr"]

    @wrap
    def step(x, y):
        with tf.GradientTape() as tape:
            h = x
            for i in range(nl):
                h = h @ ps[2 * i] + ps[2 * i + 1]
                if i < nl - 1:
                    h = tf.nn.relu(h)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=y, logits=h))
        grads = tape.gradient(loss, ps)
        if cfg["opt"] == "sgd":
            for p, g in zip(ps, grads):
                p.assign_sub(lr * g)
        else:
            t.assign_add(1.0)
            alpha = lr * tf.sqrt(1 - tf.pow(B2, t)) / (1 - tf.pow(B1, t))
            for p, g, m, v in zip(ps, grads, ms, vs):
                m.assign_add((g - m) * (1 - B1))
                v.assign_add((g * g - v) * (1 - B2))
                p.assign_sub(alpha * m / (tf.sqrt(v) + EPS))
        return loss

    return Case(lambda: step(x, y), params=lambda: [p.numpy() for p in ps])


def build_jax(column, workload):
    import jax
    import jax.numpy as jnp

    kind, size = _split(workload)
    if kind == "chain":
        x, w, b = (jnp.asarray(a) for a in W.chain_data(W.CHAIN_SIZES[size]))

        def chain(w, b, x):
            return jnp.sum(jnp.tanh(x * w + b) * jax.nn.sigmoid(x) + 0.5 * (x - w) ** 2)

        f = jax.jit(jax.value_and_grad(chain, argnums=(0, 1)))

        def step():
            loss, (gw, gb) = jax.block_until_ready(f(w, b, x))
            return loss, gw, gb

        return Case(step)
    if kind == "softmax-ce":
        logits, labels = (jnp.asarray(a) for a in W.softmax_ce_data())

        def ce(logits, labels):
            logp = jax.nn.log_softmax(logits, axis=1)
            return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=1))

        f = jax.jit(jax.value_and_grad(ce))
        return Case(lambda: jax.block_until_ready(f(logits, labels)))
    if kind == "lenet":
        return _lenet_jax(jax, jnp)
    if kind == "dcgan":
        return _dcgan_jax(jax, jnp)
    cfg = W.CONFIGS[size]
    x, y, init = _mlp_parts(cfg)
    x, y = jnp.asarray(x), jnp.asarray(y)
    nl, lr, adam = len(init) // 2, cfg["lr"], cfg["opt"] == "adam"

    def loss_fn(ps, x, y):
        h = x
        for i in range(nl):
            h = h @ ps[2 * i] + ps[2 * i + 1]
            if i < nl - 1:
                h = jax.nn.relu(h)
        logp = jax.nn.log_softmax(h, axis=1)
        return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))

    def train(ps, ms, vs, t, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(ps, x, y)
        if not adam:
            return [p - lr * g for p, g in zip(ps, grads)], ms, vs, t, loss
        t = t + 1
        alpha = lr * jnp.sqrt(1 - B2 ** t) / (1 - B1 ** t)
        ms = [m + (g - m) * (1 - B1) for g, m in zip(grads, ms)]
        vs = [v + (g * g - v) * (1 - B2) for g, v in zip(grads, vs)]
        ps = [p - alpha * m / (jnp.sqrt(v) + EPS) for p, m, v in zip(ps, ms, vs)]
        return ps, ms, vs, t, loss

    f = jax.jit(train, donate_argnums=(0, 1, 2))
    zeros = lambda: [jnp.zeros_like(a) for a in init] if adam else []  # noqa: E731
    state = [[jnp.asarray(a) for a in init], zeros(), zeros(), jnp.float32(0.0)]

    def step():
        ps, ms, vs, t, loss = jax.block_until_ready(f(*state, x, y))
        state[:] = [ps, ms, vs, t]
        return loss

    return Case(step, params=lambda: [np.asarray(p) for p in state[0]])


def build_torch(column, workload):
    import torch
    import torch.nn.functional as F

    wrap = torch.compile if column == "torch-compile" else (lambda f: f)
    kind, size = _split(workload)
    T = lambda a: torch.from_numpy(np.array(a))  # noqa: E731  (a copy of the array)
    if kind == "chain":
        x, w, b = (T(a) for a in W.chain_data(W.CHAIN_SIZES[size]))
        w.requires_grad_()
        b.requires_grad_()

        @wrap
        def chain(x):
            loss = (torch.tanh(x * w + b) * torch.sigmoid(x) + 0.5 * (x - w) ** 2).sum()
            gw, gb = torch.autograd.grad(loss, [w, b])
            return loss.detach(), gw, gb

        return Case(lambda: chain(x))
    if kind == "softmax-ce":
        logits, labels = W.softmax_ce_data()
        logits, labels = T(logits).requires_grad_(), T(labels).long()  # torch's label type

        @wrap
        def ce(logits, labels):
            loss = F.cross_entropy(logits, labels)
            (g,) = torch.autograd.grad(loss, [logits])
            return loss.detach(), g

        return Case(lambda: ce(logits, labels))
    if kind == "lenet":
        return _lenet_torch(torch, F, wrap, T)
    if kind == "dcgan":
        return _dcgan_torch(torch, F, wrap, T)
    cfg = W.CONFIGS[size]
    x, y, init = _mlp_parts(cfg)
    x, y = T(x), T(y).long()
    ps = [T(a).requires_grad_() for a in init]
    ms = [torch.zeros_like(p) for p in ps]
    vs = [torch.zeros_like(p) for p in ps]
    t = torch.zeros((), dtype=torch.float32)
    nl, lr = len(ps) // 2, cfg["lr"]

    @wrap
    def step(x, y):
        h = x
        for i in range(nl):
            h = h @ ps[2 * i] + ps[2 * i + 1]
            if i < nl - 1:
                h = torch.relu(h)
        loss = F.cross_entropy(h, y)
        grads = torch.autograd.grad(loss, ps)
        with torch.no_grad():
            if cfg["opt"] == "sgd":
                for p, g in zip(ps, grads):
                    p.sub_(lr * g)
            else:
                t.add_(1.0)
                alpha = lr * torch.sqrt(1 - torch.pow(B2, t)) / (1 - torch.pow(B1, t))
                for p, g, m, v in zip(ps, grads, ms, vs):
                    m.add_((g - m) * (1 - B1))
                    v.add_((g * g - v) * (1 - B2))
                    p.sub_(alpha * m / (torch.sqrt(v) + EPS))
        return loss.detach()

    return Case(lambda: step(x, y), params=lambda: [p.detach().numpy().copy() for p in ps])


# -- LeNet in each framework: the same step as ``workloads.LeNetNumpy`` ------------------


def _lenet_tensorflow(tf, wrap):
    x, y, init = W.lenet_data()
    x, y = tf.constant(x), tf.constant(y)
    ps = [tf.Variable(a) for a in init]
    opt = tf.keras.optimizers.Adam(W.LENET["lr"], beta_1=B1, beta_2=B2, epsilon=EPS)

    @wrap
    def step(x, y):
        w1, b1, w2, b2, w3, b3, w4, b4 = ps
        with tf.GradientTape() as tape:
            h = tf.nn.max_pool2d(tf.nn.relu(tf.nn.conv2d(x, w1, 1, "VALID") + b1), 2, 2, "VALID")
            h = tf.nn.max_pool2d(tf.nn.relu(tf.nn.conv2d(h, w2, 1, "VALID") + b2), 2, 2, "VALID")
            h = tf.nn.relu(tf.reshape(h, [-1, 1024]) @ w3 + b3)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=y, logits=h @ w4 + b4))
        opt.apply_gradients(zip(tape.gradient(loss, ps), ps))
        return loss

    return Case(lambda: step(x, y), params=lambda: [p.numpy() for p in ps])


def _adam_lists(lr, t, ps, grads, ms, vs, sqrt):
    alpha = lr * sqrt(1 - B2 ** t) / (1 - B1 ** t)
    ms = [m + (g - m) * (1 - B1) for g, m in zip(grads, ms)]
    vs = [v + (g * g - v) * (1 - B2) for g, v in zip(grads, vs)]
    return [p - alpha * m / (sqrt(v) + EPS) for p, m, v in zip(ps, ms, vs)], ms, vs


def _lenet_jax(jax, jnp):
    x, y, init = W.lenet_data()
    x, y = jnp.asarray(x), jnp.asarray(y)
    lr = W.LENET["lr"]

    def block(h, w, b):
        h = jax.lax.conv_general_dilated(h, w, (1, 1), "VALID",
                                         dimension_numbers=("NHWC", "HWIO", "NHWC"))
        h = jax.nn.relu(h + b)
        return jax.lax.reduce_window(h, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1),
                                     "VALID")

    def loss_fn(ps, x, y):
        w1, b1, w2, b2, w3, b3, w4, b4 = ps
        h = block(block(x, w1, b1), w2, b2).reshape(x.shape[0], -1)
        logits = jax.nn.relu(h @ w3 + b3) @ w4 + b4
        logp = jax.nn.log_softmax(logits, axis=1)
        return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))

    def train(ps, ms, vs, t, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(ps, x, y)
        t = t + 1
        ps, ms, vs = _adam_lists(lr, t, ps, grads, ms, vs, jnp.sqrt)
        return ps, ms, vs, t, loss

    f = jax.jit(train, donate_argnums=(0, 1, 2))
    state = [[jnp.asarray(a) for a in init], [jnp.zeros_like(a) for a in init],
             [jnp.zeros_like(a) for a in init], jnp.float32(0.0)]

    def step():
        ps, ms, vs, t, loss = jax.block_until_ready(f(*state, x, y))
        state[:] = [ps, ms, vs, t]
        return loss

    return Case(step, params=lambda: [np.asarray(p) for p in state[0]])


def _lenet_torch(torch, F, wrap, T):
    """NCHW and OIHW, torch's layout: the images and filters are transposed once, the
    flatten takes (h, w, c) order as the others do, and the weights are reported HWIO."""
    x, y, init = W.lenet_data()
    x, y = T(x.transpose(0, 3, 1, 2)), T(y).long()
    conv_axes = (3, 2, 0, 1)  # HWIO -> OIHW
    ps = [T(a.transpose(conv_axes)) if a.ndim == 4 else T(a) for a in init]
    for p in ps:
        p.requires_grad_()
    ms = [torch.zeros_like(p) for p in ps]
    vs = [torch.zeros_like(p) for p in ps]
    t = torch.zeros((), dtype=torch.float32)
    lr = W.LENET["lr"]

    @wrap
    def step(x, y):
        w1, b1, w2, b2, w3, b3, w4, b4 = ps
        h = F.max_pool2d(torch.relu(F.conv2d(x, w1, b1)), 2)
        h = F.max_pool2d(torch.relu(F.conv2d(h, w2, b2)), 2)
        h = torch.relu(h.permute(0, 2, 3, 1).reshape(h.shape[0], -1) @ w3 + b3)
        loss = F.cross_entropy(h @ w4 + b4, y)
        grads = torch.autograd.grad(loss, ps)
        with torch.no_grad():
            t.add_(1.0)
            alpha = lr * torch.sqrt(1 - torch.pow(B2, t)) / (1 - torch.pow(B1, t))
            for p, g, m, v in zip(ps, grads, ms, vs):
                m.add_((g - m) * (1 - B1))
                v.add_((g * g - v) * (1 - B2))
                p.sub_(alpha * m / (torch.sqrt(v) + EPS))
        return loss.detach()

    back = (2, 3, 1, 0)  # OIHW -> HWIO
    return Case(lambda: step(x, y), params=lambda: [
        p.detach().numpy().transpose(back).copy() if p.ndim == 4 else p.detach().numpy().copy()
        for p in ps])


# -- DCGAN in each framework: the same step as ``workloads.DCGANNumpy`` -----------------


def _dcgan_tensorflow(tf, wrap):
    z, x, init = W.dcgan_data()
    z, x = tf.constant(z), tf.constant(x)
    ps = [tf.Variable(a) for a in init]
    gen, disc = ps[:6], ps[6:]
    lr, a = W.DCGAN["lr"], W.DCGAN["alpha"]
    gen_opt = tf.keras.optimizers.Adam(lr, beta_1=B1, beta_2=B2, epsilon=EPS)
    disc_opt = tf.keras.optimizers.Adam(lr, beta_1=B1, beta_2=B2, epsilon=EPS)

    def generator(z):
        w1, b1, w2, b2, w3, b3 = gen
        n = z.shape[0]
        h = tf.reshape(tf.nn.leaky_relu(z @ w1 + b1, a), [n, 7, 7, 64])
        h = tf.nn.leaky_relu(tf.nn.conv2d_transpose(h, w2, [n, 14, 14, 32], 2, "SAME") + b2, a)
        return tf.tanh(tf.nn.conv2d_transpose(h, w3, [n, 28, 28, 1], 2, "SAME") + b3)

    def discriminator(x):
        w1, b1, w2, b2, w3, b3 = disc
        h = tf.nn.leaky_relu(tf.nn.conv2d(x, w1, 2, "SAME") + b1, a)
        h = tf.nn.leaky_relu(tf.nn.conv2d(h, w2, 2, "SAME") + b2, a)
        return tf.reshape(h, [-1, 7 * 7 * 64]) @ w3 + b3

    def bce(labels, logits):
        return tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels,
                                                                      logits=logits))

    @wrap
    def step(z, x):
        with tf.GradientTape() as gen_tape, tf.GradientTape() as disc_tape:
            fake = generator(z)
            real_logits, fake_logits = discriminator(x), discriminator(fake)
            gen_loss = bce(tf.ones_like(fake_logits), fake_logits)
            disc_loss = (bce(tf.ones_like(real_logits), real_logits)
                         + bce(tf.zeros_like(fake_logits), fake_logits))
        gen_grads = gen_tape.gradient(gen_loss, gen)
        disc_grads = disc_tape.gradient(disc_loss, disc)
        gen_opt.apply_gradients(zip(gen_grads, gen))
        disc_opt.apply_gradients(zip(disc_grads, disc))
        return gen_loss, disc_loss

    return Case(lambda: step(z, x), params=lambda: [p.numpy() for p in ps])


def _dcgan_jax(jax, jnp):
    """conv2d_transpose as the input gradient of the SAME stride-2 convolution: the input
    spread 2 apart (``lhs_dilation``), padded by k-1 less TF's SAME pads, correlated with
    the filter flipped, its ``[kh, kw, out, in]`` read as HWOI."""
    z, x, init = W.dcgan_data()
    z, x = jnp.asarray(z), jnp.asarray(x)
    lr, a = W.DCGAN["lr"], W.DCGAN["alpha"]
    lax = jax.lax

    def conv(h, w):
        return lax.conv_general_dilated(h, w, (2, 2), "SAME",
                                        dimension_numbers=("NHWC", "HWIO", "NHWC"))

    def conv_t(h, w, size):
        k = w.shape[0]
        _, (lo, hi) = W.same_pads(size, k, 2)
        extra = size + lo + hi - ((h.shape[1] - 1) * 2 + k)
        pad = (k - 1 - lo, k - 1 - hi + extra)
        return lax.conv_general_dilated(h, w[::-1, ::-1], (1, 1), [pad, pad], lhs_dilation=(2, 2),
                                        dimension_numbers=("NHWC", "HWOI", "NHWC"))

    def generator(gp, z):
        w1, b1, w2, b2, w3, b3 = gp
        h = jax.nn.leaky_relu(z @ w1 + b1, a).reshape(z.shape[0], 7, 7, 64)
        h = jax.nn.leaky_relu(conv_t(h, w2, 14) + b2, a)
        return jnp.tanh(conv_t(h, w3, 28) + b3)

    def discriminator(dp, x):
        w1, b1, w2, b2, w3, b3 = dp
        h = jax.nn.leaky_relu(conv(x, w1) + b1, a)
        h = jax.nn.leaky_relu(conv(h, w2) + b2, a)
        return h.reshape(x.shape[0], -1) @ w3 + b3

    def bce(label, z):  # TF's stable form
        return jnp.mean(jnp.maximum(z, 0) - z * label + jnp.log1p(jnp.exp(-jnp.abs(z))))

    def losses(gp, dp, z, x):
        fake_logits = discriminator(dp, generator(gp, z))
        real_logits = discriminator(dp, x)
        return bce(1.0, fake_logits), bce(1.0, real_logits) + bce(0.0, fake_logits)

    def train(gp, dp, gs, ds, t, z, x):
        (gen_loss, disc_loss), vjp = jax.vjp(lambda gp, dp: losses(gp, dp, z, x), gp, dp)
        one, zero = jnp.ones((), jnp.float32), jnp.zeros((), jnp.float32)
        gen_grads, _ = vjp((one, zero))
        _, disc_grads = vjp((zero, one))
        t = t + 1
        gp, gm, gv = _adam_lists(lr, t, gp, gen_grads, *gs, jnp.sqrt)
        dp, dm, dv = _adam_lists(lr, t, dp, disc_grads, *ds, jnp.sqrt)
        return gp, dp, (gm, gv), (dm, dv), t, gen_loss, disc_loss

    f = jax.jit(train, donate_argnums=(0, 1, 2, 3))
    zeros = lambda ps: ([jnp.zeros_like(p) for p in ps], [jnp.zeros_like(p) for p in ps])  # noqa: E731
    gp, dp = [jnp.asarray(p) for p in init[:6]], [jnp.asarray(p) for p in init[6:]]
    state = [gp, dp, zeros(gp), zeros(dp), jnp.float32(0.0)]

    def step():
        *new, gen_loss, disc_loss = jax.block_until_ready(f(*state, z, x))
        state[:] = new
        return gen_loss, disc_loss

    return Case(step, params=lambda: [np.asarray(p) for p in state[0] + state[1]])


def _dcgan_torch(torch, F, wrap, T):
    """NCHW, torch's layout. Both filter layouts move with one transpose: conv HWIO to
    OIHW, and conv2d_transpose's ``[kh, kw, out, in]`` to ConvTranspose's ``[in, out,
    kh, kw]``. TF's SAME stride 2 pads 1 before and 2 after: the convolution pads
    explicitly; the transposed one pads 1 (``padding=1`` crops 1 on each side of the full
    result) and cuts the one extra row and column at the end."""
    z, x, init = W.dcgan_data()
    z, x = T(z), T(x.transpose(0, 3, 1, 2))
    axes = (3, 2, 0, 1)
    ps = [T(p.transpose(axes)) if p.ndim == 4 else T(p) for p in init]
    for p in ps:
        p.requires_grad_()
    gen, disc = ps[:6], ps[6:]
    ms = [torch.zeros_like(p) for p in ps]
    vs = [torch.zeros_like(p) for p in ps]
    t = torch.zeros((), dtype=torch.float32)
    lr, a = W.DCGAN["lr"], W.DCGAN["alpha"]

    def conv_t(h, w, b, size):
        return F.conv_transpose2d(h, w, b, stride=2, padding=1)[:, :, :size, :size]

    def generator(z):
        w1, b1, w2, b2, w3, b3 = gen
        h = F.leaky_relu(z @ w1 + b1, a).reshape(-1, 7, 7, 64).permute(0, 3, 1, 2)
        h = F.leaky_relu(conv_t(h, w2, b2, 14), a)
        return torch.tanh(conv_t(h, w3, b3, 28))

    def discriminator(x):
        w1, b1, w2, b2, w3, b3 = disc
        h = F.leaky_relu(F.conv2d(F.pad(x, (1, 2, 1, 2)), w1, b1, stride=2), a)
        h = F.leaky_relu(F.conv2d(F.pad(h, (1, 2, 1, 2)), w2, b2, stride=2), a)
        return h.permute(0, 2, 3, 1).reshape(h.shape[0], -1) @ w3 + b3

    bce = F.binary_cross_entropy_with_logits

    @wrap
    def step(z, x):
        fake = generator(z)
        real_logits, fake_logits = discriminator(x), discriminator(fake)
        gen_loss = bce(fake_logits, torch.ones_like(fake_logits))
        disc_loss = (bce(real_logits, torch.ones_like(real_logits))
                     + bce(fake_logits, torch.zeros_like(fake_logits)))
        gen_grads = torch.autograd.grad(gen_loss, gen, retain_graph=True)
        disc_grads = torch.autograd.grad(disc_loss, disc)
        with torch.no_grad():
            t.add_(1.0)
            alpha = lr * torch.sqrt(1 - torch.pow(B2, t)) / (1 - torch.pow(B1, t))
            for p, g, m, v in zip(ps, gen_grads + disc_grads, ms, vs):
                m.add_((g - m) * (1 - B1))
                v.add_((g * g - v) * (1 - B2))
                p.sub_(alpha * m / (torch.sqrt(v) + EPS))
        return gen_loss.detach(), disc_loss.detach()

    back = (2, 3, 1, 0)
    return Case(lambda: step(z, x), params=lambda: [
        p.detach().numpy().transpose(back).copy() if p.ndim == 4 else p.detach().numpy().copy()
        for p in ps])


BUILDERS = {"numpy": build_numpy, "jittape": build_jittape, "tensorflow": build_tensorflow,
            "jax": build_jax, "torch": build_torch}


def _split(workload):
    kind, _, size = workload.rpartition("-")
    return (kind, size) if kind in ("chain", "mlp") else (workload, "")


# -- checking against numpy ----------------------------------------------------------

def _np(a):
    if hasattr(a, "detach"):
        a = a.detach()
    if hasattr(a, "numpy"):
        a = a.numpy()
    return np.asarray(a, dtype=np.float64)


def _close(what, got, want, rtol, atol):
    got, want = _np(got), np.asarray(want, np.float64)
    if got.shape != want.shape:
        return f"{what}: shape {got.shape}, numpy's {want.shape}"
    err = np.abs(got - want)
    if not np.all(err <= atol + rtol * np.abs(want)):  # NaN fails too
        return f"{what}: max abs err {err.max() if err.size else 0:.2g}"
    return None


def check(workload, case, out):
    """None when the first call's results equal numpy's, else what differs."""
    kind, size = _split(workload)
    if kind == "chain":
        loss, gw, gb = W.chain_numpy(*W.chain_data(W.CHAIN_SIZES[size]))
        probs = [_close("loss", out[0], loss, 1e-4, 0.0),
                 _close("dw", out[1], gw, 1e-4, 1e-4), _close("db", out[2], gb, 1e-4, 1e-4)]
    elif kind == "softmax-ce":
        loss, g = W.softmax_ce_numpy(*W.softmax_ce_data())
        probs = [_close("loss", out[0], loss, 1e-4, 0.0),
                 _close("dlogits", out[1], g, 1e-4, 1e-4 * np.abs(g).max())]
    else:
        if kind == "lenet":
            x, y, init = W.lenet_data()
            ref = W.LeNetNumpy([a.copy() for a in init])
        elif kind == "dcgan":
            x, y, init = W.dcgan_data()  # (noise, real images)
            ref = W.DCGANNumpy([a.copy() for a in init])
        else:
            cfg = W.CONFIGS[size]
            x, y, init = _mlp_parts(cfg)
            ref = W.NumpyStep(cfg, [a.copy() for a in init[0::2]],
                              [a.copy() for a in init[1::2]])
        loss = ref(x, y)
        if kind == "dcgan":
            probs = [_close("generator loss", out[0], loss[0], 1e-4, 0.0),
                     _close("discriminator loss", out[1], loss[1], 1e-4, 0.0)]
        else:
            probs = [_close("loss", out, loss, 1e-4, 0.0)]
        got = case.params()
        for i, (p, q, p0) in enumerate(zip(got, ref.params, init)):
            probs.append(_close(f"weight {i}", p, q, 1e-4, 1e-5))
            upd = q.astype(np.float64) - p0
            probs.append(_close(f"update {i}", _np(p) - p0, upd, 0.0,
                                0.05 * np.abs(upd).max()))
        if len(got) != len(ref.params):
            probs.append(f"{len(got)} weights, numpy's {len(ref.params)}")
    probs = [p for p in probs if p]
    return "; ".join(probs[:2]) if probs else None


# -- timing --------------------------------------------------------------------------

def median_time(step, repeat, loop_s):
    """timeit's repeat: loops of ``number`` calls, ``number`` chosen so a loop takes
    about ``loop_s``; the median time per call."""
    timer = timeit.Timer(step)
    one = min(timer.repeat(repeat=3, number=1))
    number = max(1, round(loop_s / max(one, 1e-9)))
    return statistics.median(timer.repeat(repeat=repeat, number=number)) / number


def warm_up(step, warm_s):
    end, n = time.perf_counter() + warm_s, 0
    while n < 10 or time.perf_counter() < end:
        step()
        n += 1


def run_worker(name, columns, threads, cpus, quick, workloads, out_path):
    if cpus:
        os.sched_setaffinity(0, cpus)
    if name == "torch":
        import torch
        torch.set_num_threads(threads)
        torch.set_num_interop_threads(threads)
    elif name == "tensorflow":
        import tensorflow as tf
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    opts = QUICK if quick else FULL
    results = {}
    for column in columns:
        for workload in workloads:
            res = {}
            try:
                case = BUILDERS[name](column, workload)
                t0 = time.perf_counter()
                out = case.step()
                res["first_s"] = time.perf_counter() - t0
                bad = check(workload, case, out)
                if bad:
                    res.update(status="mismatch", detail=bad)
                else:
                    if case.settle is not None:
                        case.settle(case.step)
                    warm_up(case.step, opts["warm_s"])
                    res["median_s"] = median_time(case.step, opts["repeat"], opts["loop_s"])
                    res["status"] = "ok"
            except Exception as e:  # noqa: BLE001  (reported in the table, not fatal)
                res.update(status="error", detail=f"{type(e).__name__}: {e}"[:300])
            results.setdefault(column, {})[workload] = res
            print(f"{_PROGRESS}{column:18s} {workload:11s} {res['status']:8s} "
                  f"{_fmt_time(res.get('median_s'))}  first call "
                  f"{_fmt_time(res.get('first_s'))}  {res.get('detail', '')}",
                  file=sys.stderr, flush=True)
    with open(out_path, "w") as f:
        json.dump(results, f)


# -- the parent: one worker per framework, then the table ----------------------------

def _version(dist):
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _worker_env(threads, tmp):
    env = dict(os.environ)
    n = str(threads)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                "NUMBA_NUM_THREADS",
                "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS"):
        env[var] = n
    eigen = "true" if threads > 1 else "false"
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + f" --xla_cpu_multi_thread_eigen={eigen}"
                        ).strip()
    env.update(JITTAPE_BACKGROUND_COMPILE="0", JITTAPE_CACHE_DIR=str(Path(tmp, "jittape")),
               TORCHINDUCTOR_CACHE_DIR=str(Path(tmp, "inductor")), TF_CPP_MIN_LOG_LEVEL="2",
               PYTHONPATH=os.pathsep.join(filter(None, [str(HERE.parent),
                                                        env.get("PYTHONPATH")])))
    return env


def run_all(frameworks, workloads, threads, cpus, quick, timeout):
    """One process per framework, column and workload, one after the other, each with
    empty compile caches."""
    results, versions = {}, {"numpy": np.__version__}
    for name in frameworks:
        module, columns, dists = WORKERS[name]
        if module is not None and importlib.util.find_spec(module) is None:
            for c in columns:
                results[c] = {w: {"status": "not installed"} for w in workloads}
            continue
        for d in dists:
            if _version(d):
                versions[d] = _version(d)
        for column in columns:
            print(f"{column}:", file=sys.stderr, flush=True)
            for workload in workloads:
                results.setdefault(column, {})[workload] = _run_one(
                    name, column, workload, threads, cpus, quick, timeout)
    return results, versions


def _run_one(name, column, workload, threads, cpus, quick, timeout):
    with tempfile.TemporaryDirectory(prefix="jittape-peers-") as tmp:
        out = Path(tmp, "result.json")
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", name,
               "--column", column, "--workloads", workload, "--threads", str(threads),
               "--cpus", ",".join(map(str, cpus)), "--worker-out", str(out)]
        if quick:
            cmd.append("--quick")
        try:  # the frameworks' own logging stays out of sight unless the worker fails
            proc = subprocess.run(cmd, env=_worker_env(threads, tmp), timeout=timeout,
                                  stderr=subprocess.PIPE, text=True)
            ours = [ln for ln in proc.stderr.splitlines() if ln.startswith(_PROGRESS)]
            print("\n".join(ours or proc.stderr.splitlines()[-20:]), file=sys.stderr,
                  flush=True)
            why = f"worker exited {proc.returncode}" if proc.returncode else "no result"
        except subprocess.TimeoutExpired:
            why = f"worker timed out after {timeout} s"
        if out.exists():
            return json.loads(out.read_text())[column][workload]
        return {"status": "error", "detail": why}




def _fmt_ratio(r):
    return f"{r:.0f}" if r >= 10 else f"{r:.1f}" if r >= 1 else f"{r:.2f}"


def _cell(res, base):
    status = res.get("status")
    if status == "ok":
        t = res["median_s"]
        ratio = f" ({_fmt_ratio(t / base)}×)" if base else ""
        return _fmt_time(t) + ratio
    if status == "not installed":
        return "not installed"
    return f"{status}"


def _cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def markdown(results, versions, workloads, threads, quick):
    cols = [c for c in COLUMNS if c in results]
    lines = ["| workload | " + " | ".join(COLUMNS[c] for c in cols) + " |",
             "| --- |" + " --- |" * len(cols)]
    notes = []
    for w in workloads:
        base = results.get(BASELINE, {}).get(w, {}).get("median_s")
        cells = []
        for c in cols:
            res = results[c].get(w, {"status": "error"})
            cells.append(_cell(res, base))
            if res.get("detail"):
                notes.append(f"- {COLUMNS[c]}, {WORKLOADS[w]}: {res['status']}: {res['detail']}")
        lines.append(f"| {WORKLOADS[w]} | " + " | ".join(cells) + " |")
    lines += ["", "First call, in a fresh process with empty compile caches (trace + "
              "compile; eager: the first step, jittape's compiling its backward):", "",
              "| workload | " + " | ".join(COLUMNS[c] for c in cols) + " |",
              "| --- |" + " --- |" * len(cols)]
    for w in workloads:
        lines.append(f"| {WORKLOADS[w]} | " + " | ".join(
            _fmt_time(results[c].get(w, {}).get("first_s")) for c in cols) + " |")
    vs = ", ".join(f"{k} {v}" for k, v in versions.items())
    lines += [
        "",
        f"Medians of the time per call{' (--quick)' if quick else ''}; in brackets the "
        "ratio to jittape `@jt.function` (above 1: slower than it). float32, the same "
        "initial weights and batch everywhere; every framework's first results checked "
        "against hand-written numpy before timing.",
        f"{datetime.date.today().isoformat()}; {platform.platform()}, {_cpu_name()}, "
        f"{os.cpu_count()} CPUs; Python {platform.python_version()}; {vs}.",
        f"Threads: every framework in its own process pinned to {threads} CPU(s), "
        f"OMP/MKL/OpenBLAS/Numba threads = {threads}, TF intra-op = inter-op = {threads}, "
        f"torch.set_num_threads({threads}) and set_num_interop_threads({threads}), XLA "
        "sized by the CPUs it may use; jittape's numpy BLAS at 1 thread (its default), "
        f"its compiled programs choose 1 or {threads} BLAS threads by measuring (their "
        "default).",
    ]
    if notes:
        lines += ["", "Not timed or failed:", *notes]
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer, shorter repeats")
    ap.add_argument("--out", help="write the markdown tables to this file too")
    ap.add_argument("--json", help="write the raw results to this file")
    ap.add_argument("--threads", type=int, help="threads per framework (default: all CPUs "
                    "this process may use)")
    ap.add_argument("--frameworks", default=",".join(WORKERS),
                    help=f"comma-separated, of {', '.join(WORKERS)}")
    ap.add_argument("--workloads", default=",".join(WORKLOADS),
                    help=f"comma-separated, of {', '.join(WORKLOADS)}")
    ap.add_argument("--timeout", type=int, default=600,
                    help="seconds per framework and workload")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--worker-out", help=argparse.SUPPRESS)
    ap.add_argument("--cpus", help=argparse.SUPPRESS)
    ap.add_argument("--column", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    workloads = [w for w in args.workloads.split(",") if w]
    for w in workloads:
        if w not in WORKLOADS:
            ap.error(f"unknown workload {w!r}; choose from {', '.join(WORKLOADS)}")
    if args.worker:
        cpus = [int(c) for c in args.cpus.split(",")] if args.cpus else None
        columns = [args.column] if args.column else WORKERS[args.worker][1]
        run_worker(args.worker, columns, args.threads, cpus, args.quick, workloads,
                   args.worker_out)
        return 0
    frameworks = [f for f in args.frameworks.split(",") if f]
    for f in frameworks:
        if f not in WORKERS:
            ap.error(f"unknown framework {f!r}; choose from {', '.join(WORKERS)}")
    allowed = sorted(os.sched_getaffinity(0))
    threads = args.threads or len(allowed)
    if not 1 <= threads <= len(allowed):
        ap.error(f"--threads must be between 1 and {len(allowed)}")
    results, versions = run_all(frameworks, workloads, threads, allowed[:threads],
                                args.quick, args.timeout)
    text = markdown(results, versions, workloads, threads, args.quick)
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    if args.json:
        Path(args.json).write_text(json.dumps({"results": results, "versions": versions},
                                              indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
