"""The train-step workloads, shared by the benchmarks: an MLP with relu hidden layers,
softmax cross-entropy over integer labels, float32, and an SGD or Adam update, each
as hand-written numpy (the reference), as an eager jittape step and as the same step
under ``@jt.function``.

- small: 64-128-64-10, batch 64, SGD (lr 0.01)
- large: 784-512-256-10, batch 256, Adam (lr 0.001, Keras defaults)
"""

from __future__ import annotations

import numpy as np

CONFIGS = {
    "small": {"sizes": (64, 128, 64, 10), "batch": 64, "opt": "sgd", "lr": 0.01},
    "large": {"sizes": (784, 512, 256, 10), "batch": 256, "opt": "adam", "lr": 0.001},
}
B1, B2, EPS = 0.9, 0.999, 1e-7


def data(cfg, seed=0):
    rng = np.random.default_rng(seed)
    sizes, n = cfg["sizes"], cfg["batch"]
    x = rng.standard_normal((n, sizes[0])).astype(np.float32)
    y = rng.integers(0, sizes[-1], n).astype(np.int32)
    ws = [(rng.standard_normal((a, b)) * np.sqrt(2.0 / a)).astype(np.float32)
          for a, b in zip(sizes[:-1], sizes[1:])]
    bs = [np.zeros(b, np.float32) for b in sizes[1:]]
    return x, y, ws, bs


def softmax_ce_numpy(logits, labels):
    """(mean sparse softmax cross-entropy, its gradient w.r.t. the logits) by hand, with
    the row max subtracted."""
    n = logits.shape[0]
    z = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(z)
    s = e.sum(axis=1, keepdims=True)
    rows = np.arange(n)
    loss = (np.log(s[:, 0]) - z[rows, labels]).mean()
    g = e / s
    g[rows, labels] -= 1
    g /= np.float32(n)
    return loss, g


class NumpyStep:
    """Forward, backward and the update by hand, updating the arrays in place."""

    def __init__(self, cfg, ws, bs):
        self.cfg = cfg
        self.params = [p for pair in zip(ws, bs) for p in pair]
        self.lr = np.float32(cfg["lr"])
        self.t = 0
        if cfg["opt"] == "adam":
            self.m = [np.zeros_like(p) for p in self.params]
            self.v = [np.zeros_like(p) for p in self.params]

    def __call__(self, x, y):
        ps = self.params
        acts, h = [x], x
        nl = len(ps) // 2
        for i in range(nl):
            z = h @ ps[2 * i] + ps[2 * i + 1]
            h = np.maximum(z, 0) if i < nl - 1 else z
            acts.append(h)
        loss, g = softmax_ce_numpy(h, y)
        grads = [None] * len(ps)
        for i in range(nl - 1, -1, -1):
            grads[2 * i] = acts[i].T @ g
            grads[2 * i + 1] = g.sum(axis=0)
            if i:
                g = (g @ ps[2 * i].T) * (acts[i] > 0)
        self.t += 1
        if self.cfg["opt"] == "sgd":
            for p, gp in zip(ps, grads):
                p -= self.lr * gp
        else:
            t = self.t
            alpha = self.lr * np.sqrt(1 - np.float32(B2) ** t) / (1 - np.float32(B1) ** t)
            for p, gp, m, v in zip(ps, grads, self.m, self.v):
                m += (gp - m) * np.float32(1 - B1)
                v += (gp * gp - v) * np.float32(1 - B2)
                p -= alpha * m / (np.sqrt(v) + np.float32(EPS))
        return loss


def jittape_step(cfg, ws, bs, compiled, backend=None, batch_none=False, name=None,
                 var_names=None, distributed=False):
    """The same step with jittape: variables, a tape, an optimizer. ``batch_none``: the
    jt.function has an input_signature with a None batch size (one trace with a
    symbolic size serves every batch size). ``name``: the step's name. ``var_names``: a
    prefix for the variables' names (``<prefix>_w0``, ...): the same kernels, another
    entry (its parameters are named after the variables). ``distributed``: the tape is a
    ``jt.distributed.DistributedGradientTape`` (the gradients are the mean over the ranks
    of an MPI job: one allreduce per step, ``mpi_steps.py``)."""
    import jittape as jt  # here, so that the numpy half imports without jittape (peers.py)

    params = []
    for i, (w, b) in enumerate(zip(ws, bs)):
        names = (None, None) if var_names is None else (f"{var_names}_w{i}",
                                                        f"{var_names}_b{i}")
        params += [jt.Variable(w.copy(), name=names[0]), jt.Variable(b.copy(), name=names[1])]
    opt = (jt.optimizers.SGD(cfg["lr"]) if cfg["opt"] == "sgd"
           else jt.optimizers.Adam(cfg["lr"], beta_1=B1, beta_2=B2, epsilon=EPS))
    nl = len(params) // 2

    def step(x, y):
        with jt.GradientTape(backend=backend) as tape:
            h = x
            for i in range(nl):
                h = h @ params[2 * i] + params[2 * i + 1]
                if i < nl - 1:
                    h = jt.nn.relu(h)
            loss = jt.reduce_mean(
                jt.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=h))
        if distributed:
            tape = jt.distributed.DistributedGradientTape(tape)
        grads = tape.gradient(loss, params)
        opt.apply_gradients(zip(grads, params))
        return loss

    if name is not None:
        step.__qualname__ = name
    if compiled and batch_none:
        sig = [jt.TensorSpec([None, ws[0].shape[0]], jt.float32),
               jt.TensorSpec([None], jt.int32)]
        step = jt.function(step, backend=backend, input_signature=sig)
    elif compiled:
        step = jt.function(step, backend=backend)
    step.params = params
    return step
