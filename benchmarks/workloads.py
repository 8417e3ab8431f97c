"""The benchmark workloads as data and hand-written numpy, without importing jittape (so
that ``peers.py`` can time TensorFlow, JAX and PyTorch in processes that never load
it), plus the jittape versions, which import it when called. All float32.

- ``chain``: ``loss = sum(tanh(x*w + b) * sigmoid(x) + 0.5*(x - w)**2)``, its gradients
  w.r.t. ``w`` and ``b``; N = 1M and 8M (as ``test_chain.py``).
- ``softmax-ce``: ``loss = mean(sparse softmax cross-entropy(labels, logits))`` over a
  batch of 256 x 1000 classes, its gradient w.r.t. the logits.
- ``mlp-small`` / ``mlp-large``: the train steps of ``train_steps.py`` (``CONFIGS``,
  ``data``, ``NumpyStep``, ``jittape_step``).
"""

from __future__ import annotations

import numpy as np

from train_steps import (  # noqa: F401 (re-exported)
    B1, B2, EPS, CONFIGS, NumpyStep, data, jittape_step, softmax_ce_numpy)

CHAIN_SIZES = {"1M": 1 << 20, "8M": 1 << 23}
SOFTMAX_CE = {"batch": 256, "classes": 1000}


# -- chain ---------------------------------------------------------------------------

def chain_data(n, seed=0):
    """x, w, b: float32 standard normal (the same draws as ``test_chain.py``)."""
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal(n).astype(np.float32) for _ in range(3))


def chain_numpy(x, w, b):
    """(loss, dloss/dw, dloss/db) by hand."""
    t = np.tanh(x * w + b)
    s = 1 / (1 + np.exp(-x))
    d = x - w
    loss = np.sum(t * s + np.float32(0.5) * d * d)
    gb = s * (1 - t * t)
    gw = gb * x - d
    return loss, gw, gb


def chain_jittape(x, w, b, compiled, backend="cpu"):
    """A no-argument step returning (loss, gw, gb): ``x`` a constant, ``w`` and ``b``
    variables; eager with a tape, or the same step under ``@jt.function``."""
    import jittape as jt

    xt, wv, bv = jt.constant(x), jt.Variable(w), jt.Variable(b)

    def step(x):
        with jt.GradientTape(backend=backend) as tape:
            loss = jt.reduce_sum(jt.tanh(x * wv + bv) * jt.sigmoid(x) + 0.5 * (x - wv) ** 2)
        gw, gb = tape.gradient(loss, [wv, bv])
        return loss, gw, gb

    fn = jt.function(step, backend=backend) if compiled else step
    out = lambda: fn(xt)
    out.function = fn if compiled else None
    return out


# -- softmax cross-entropy -----------------------------------------------------------

def softmax_ce_data(seed=0, batch=SOFTMAX_CE["batch"], classes=SOFTMAX_CE["classes"]):
    """logits (float32, spread like a trained net's: N(0, 3)) and int32 labels."""
    rng = np.random.default_rng(seed)
    logits = (rng.standard_normal((batch, classes)) * 3).astype(np.float32)
    labels = rng.integers(0, classes, batch).astype(np.int32)
    return logits, labels


def softmax_ce_jittape(logits, labels, compiled, backend="cpu"):
    """A no-argument step returning (loss, dloss/dlogits); eager or ``@jt.function``."""
    import jittape as jt

    lt, yt = jt.constant(logits), jt.constant(labels)

    def step(logits, labels):
        with jt.GradientTape(backend=backend) as tape:
            tape.watch(logits)
            loss = jt.reduce_mean(
                jt.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
        return loss, tape.gradient(loss, logits)

    fn = jt.function(step, backend=backend) if compiled else step
    out = lambda: fn(lt, yt)
    out.function = fn if compiled else None
    return out


# -- LeNet ---------------------------------------------------------------------------
#
# x[64, 28, 28, 1] -> conv 5x5x32 + relu -> 2x2 max-pool -> conv 5x5x64 + relu -> 2x2
# max-pool -> flatten (h, w, c order) -> dense 128 + relu -> dense 10 -> mean sparse
# softmax cross-entropy; Adam (Keras's formula, as NumpyStep). Filters HWIO, VALID.

LENET = {"batch": 64, "lr": 1e-3}


def lenet_data(seed=0, batch=LENET["batch"]):
    """Images in [0, 1), int32 labels, and the eight parameters (filters HWIO, scaled
    as Keras's glorot: the step's numbers stay in range for float32 checks)."""
    rng = np.random.default_rng(seed)
    x = rng.random((batch, 28, 28, 1), dtype=np.float32)
    y = rng.integers(0, 10, batch).astype(np.int32)
    shapes = [(5, 5, 1, 32), (32,), (5, 5, 32, 64), (64,), (1024, 128), (128,), (128, 10),
              (10,)]
    params = []
    for s in shapes:
        if len(s) == 1:
            params.append((rng.standard_normal(s) * 0.01).astype(np.float32))
        else:
            fan_in, fan_out = int(np.prod(s[:-1])), s[-1] * int(np.prod(s[:-2]))
            params.append((rng.standard_normal(s) * np.sqrt(2.0 / (fan_in + fan_out)))
                          .astype(np.float32))
    return x, y, params


def _windows(x, k):
    """``[N, H-k+1, W-k+1, C, k, k]``: every k x k window of an NHWC array (a view)."""
    return np.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(1, 2))


def conv_numpy(x, w):
    """VALID, stride 1, NHWC by HWIO."""
    return np.einsum("nhwcij,ijcf->nhwf", _windows(x, w.shape[0]), w, optimize=True)


def conv_grads_numpy(x, w, dy, need_dx=True):
    """(dx, dw) of ``conv_numpy``: dx is dy padded by k-1, correlated with the flipped
    filter."""
    k = w.shape[0]
    dw = np.einsum("nhwcij,nhwf->ijcf", _windows(x, k), dy, optimize=True)
    if not need_dx:
        return None, dw
    dyp = np.pad(dy, [(0, 0), (k - 1, k - 1), (k - 1, k - 1), (0, 0)])
    dx = np.einsum("nhwfij,ijcf->nhwc", _windows(dyp, k), w[::-1, ::-1], optimize=True)
    return dx, dw


def pool_numpy(a):
    """2x2 stride-2 max-pool and the mask of each window's maximum."""
    n, h, w, c = a.shape
    r = a.reshape(n, h // 2, 2, w // 2, 2, c)
    p = r.max(axis=(2, 4))
    return p, r == p[:, :, None, :, None, :]


def unpool_numpy(dp, mask):
    n, h, _, w, _, c = mask.shape
    return (mask * dp[:, :, None, :, None, :]).reshape(n, 2 * h, 2 * w, c)


class LeNetNumpy:
    """The LeNet step by hand, updating the arrays in place (as NumpyStep). Ties of a
    window's maximum only happen among relu's zeros, whose gradient is zero anyway."""

    def __init__(self, params, lr=LENET["lr"]):
        self.params = params
        self.lr = np.float32(lr)
        self.t = 0
        self.m = [np.zeros_like(p) for p in params]
        self.v = [np.zeros_like(p) for p in params]

    def __call__(self, x, y):
        w1, b1, w2, b2, w3, b3, w4, b4 = self.params
        z1 = conv_numpy(x, w1) + b1
        a1 = np.maximum(z1, 0)
        p1, m1 = pool_numpy(a1)
        z2 = conv_numpy(p1, w2) + b2
        a2 = np.maximum(z2, 0)
        p2, m2 = pool_numpy(a2)
        f = p2.reshape(len(x), -1)
        z3 = f @ w3 + b3
        h = np.maximum(z3, 0)
        logits = h @ w4 + b4
        loss, g = softmax_ce_numpy(logits, y)
        gw4, gb4 = h.T @ g, g.sum(0)
        g3 = (g @ w4.T) * (z3 > 0)
        gw3, gb3 = f.T @ g3, g3.sum(0)
        gp2 = (g3 @ w3.T).reshape(p2.shape)
        gz2 = unpool_numpy(gp2, m2) * (z2 > 0)
        gp1, gw2 = conv_grads_numpy(p1, w2, gz2)
        gb2 = gz2.sum((0, 1, 2))
        gz1 = unpool_numpy(gp1, m1) * (z1 > 0)
        _, gw1 = conv_grads_numpy(x, w1, gz1, need_dx=False)
        gb1 = gz1.sum((0, 1, 2))
        grads = [gw1, gb1, gw2, gb2, gw3, gb3, gw4, gb4]
        self.t += 1
        t = self.t
        alpha = self.lr * np.sqrt(1 - np.float32(B2) ** t) / (1 - np.float32(B1) ** t)
        for p, gp, m, v in zip(self.params, grads, self.m, self.v):
            gp = gp.astype(np.float32)
            m += (gp - m) * np.float32(1 - B1)
            v += (gp * gp - v) * np.float32(1 - B2)
            p -= alpha * m / (np.sqrt(v) + np.float32(EPS))
        return loss


def lenet_jittape(params, compiled, backend="cpu"):
    """The same step with jittape: ``jt.nn.conv2d``, ``jt.nn.max_pool2d``, variables and
    ``jt.optimizers.Adam``; eager or ``@jt.function``. Returns (step(x, y), variables)."""
    import jittape as jt

    vs = [jt.Variable(p.copy()) for p in params]
    opt = jt.optimizers.Adam(LENET["lr"], beta_1=B1, beta_2=B2, epsilon=EPS)

    def step(x, y):
        w1, b1, w2, b2, w3, b3, w4, b4 = vs
        with jt.GradientTape(backend=backend) as tape:
            h = jt.nn.max_pool2d(jt.nn.relu(jt.nn.conv2d(x, w1, 1, "VALID") + b1), 2, 2, "VALID")
            h = jt.nn.max_pool2d(jt.nn.relu(jt.nn.conv2d(h, w2, 1, "VALID") + b2), 2, 2, "VALID")
            h = jt.reshape(h, [-1, 1024])
            h = jt.nn.relu(h @ w3 + b3)
            loss = jt.reduce_mean(jt.nn.sparse_softmax_cross_entropy_with_logits(
                labels=y, logits=h @ w4 + b4))
        opt.apply_gradients(zip(tape.gradient(loss, vs), vs))
        return loss

    fn = jt.function(step, backend=backend) if compiled else step
    return fn, vs
