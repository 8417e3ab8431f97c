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
