"""The benchmark workloads as data and hand-written numpy, without importing jittape (so
that ``peers.py`` can time TensorFlow, JAX and PyTorch in processes that never load
it), plus the jittape versions, which import it when called. All float32.

- ``chain``: ``loss = sum(tanh(x*w + b) * sigmoid(x) + 0.5*(x - w)**2)``, its gradients
  w.r.t. ``w`` and ``b``; N = 1M and 8M (as ``test_chain.py``).
- ``softmax-ce``: ``loss = mean(sparse softmax cross-entropy(labels, logits))`` over a
  batch of 256 x 1000 classes, its gradient w.r.t. the logits.
- ``mlp-small`` / ``mlp-large``: the train steps of ``train_steps.py`` (``CONFIGS``,
  ``data``, ``NumpyStep``, ``jittape_step``).
- ``lenet``: a LeNet train step (two VALID convolutions, max-pools, two dense layers,
  Adam) on 28x28x1, batch 64 (``lenet_data``, ``LeNetNumpy``, ``lenet_jittape``).
- ``dcgan``: a DCGAN train step, generator and discriminator, on 28x28x1, batch 64
  (``dcgan_data``, ``DCGANNumpy``, ``dcgan_jittape``).
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


def _glorot(rng, shapes) -> list:
    """float32 parameters of ``shapes``, drawn in order: vectors (biases) normal * 0.01,
    filters and matrices normal scaled as Keras's glorot."""
    params = []
    for s in shapes:
        if len(s) == 1:
            params.append((rng.standard_normal(s) * 0.01).astype(np.float32))
        else:
            fan_in, fan_out = int(np.prod(s[:-1])), s[-1] * int(np.prod(s[:-2]))
            params.append((rng.standard_normal(s) * np.sqrt(2.0 / (fan_in + fan_out)))
                          .astype(np.float32))
    return params


def lenet_data(seed=0, batch=LENET["batch"]):
    """Images in [0, 1), int32 labels, and the eight parameters (filters HWIO, scaled
    as Keras's glorot: the step's numbers stay in range for float32 checks)."""
    rng = np.random.default_rng(seed)
    x = rng.random((batch, 28, 28, 1), dtype=np.float32)
    y = rng.integers(0, 10, batch).astype(np.int32)
    shapes = [(5, 5, 1, 32), (32,), (5, 5, 32, 64), (64,), (1024, 128), (128,), (128, 10),
              (10,)]
    params = _glorot(rng, shapes)
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
        adam_numpy(self.params, grads, self.m, self.v, self.t, self.lr)
        return loss


def adam_numpy(params, grads, ms, vs, t, lr):
    """Update ``t`` (1-based) of Adam, Keras's formula (as ``NumpyStep``), in place."""
    alpha = lr * np.sqrt(1 - np.float32(B2) ** t) / (1 - np.float32(B1) ** t)
    for p, gp, m, v in zip(params, grads, ms, vs):
        gp = gp.astype(np.float32)
        m += (gp - m) * np.float32(1 - B1)
        v += (gp * gp - v) * np.float32(1 - B2)
        p -= alpha * m / (np.sqrt(v) + np.float32(EPS))


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


# -- DCGAN ---------------------------------------------------------------------------
#
# TF's DCGAN tutorial, smaller, without BatchNormalization and Dropout (so that every
# framework computes the same deterministic math), with biases (which the tutorial's
# generator leaves to its batch norms).
# generator:     z[64, 100] -> dense 7*7*64 -> leaky relu -> reshape [7, 7, 64]
#                -> conv2d_transpose 5x5 stride 2 SAME to 14x14x32 -> leaky relu
#                -> conv2d_transpose 5x5 stride 2 SAME to 28x28x1 -> tanh
# discriminator: x[64, 28, 28, 1] -> conv 5x5 stride 2 SAME 32 -> leaky relu
#                -> conv 5x5 stride 2 SAME 64 -> leaky relu -> flatten (h, w, c) -> dense 1
# One step: the generator's images and the discriminator's logits on the real and the
# generated images; discriminator loss = mean sigmoid cross-entropy(1, real) + that of
# (0, fake), generator loss = that of (1, fake); each tape's gradients of its model's
# variables, then two Adams (Keras's formula), as the tutorial's ``train_step``.
# Leaky relu's slope 0.2 (tf.nn.leaky_relu's default). Filters: conv HWIO, conv2d_transpose
# [kh, kw, out, in] (TF's).

DCGAN = {"batch": 64, "noise": 100, "lr": 1e-4, "alpha": 0.2}
# the generator's six parameters, then the discriminator's six
DCGAN_SHAPES = [(100, 7 * 7 * 64), (7 * 7 * 64,), (5, 5, 32, 64), (32,), (5, 5, 1, 32), (1,),
                (5, 5, 1, 32), (32,), (5, 5, 32, 64), (64,), (7 * 7 * 64, 1), (1,)]


def dcgan_data(seed=0, batch=DCGAN["batch"]):
    """Noise ``z[batch, 100]`` (standard normal), real images ``[batch, 28, 28, 1]`` in
    [-1, 1) (the generator's tanh range), and the twelve parameters (generator's, then
    discriminator's; scaled as Keras's glorot, biases small)."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((batch, DCGAN["noise"])).astype(np.float32)
    x = rng.random((batch, 28, 28, 1), dtype=np.float32) * 2 - 1
    params = _glorot(rng, DCGAN_SHAPES)
    return z, x, params


def same_pads(size, k, s):
    """(output size, (pad before, pad after)) of TF's SAME padding: the odd pad after."""
    out = -(-size // s)
    total = max((out - 1) * s + k - size, 0)
    return out, (total // 2, total - total // 2)


def _pad_same(x, k, s):
    _, (lo, hi) = same_pads(x.shape[1], k, s)
    return np.pad(x, [(0, 0), (lo, hi), (lo, hi), (0, 0)])


def conv_same_numpy(x, w, s):
    """SAME, stride ``s``, NHWC by HWIO, square images."""
    k = w.shape[0]
    win = _windows(_pad_same(x, k, s), k)[:, ::s, ::s]
    return np.einsum("nhwcij,ijcf->nhwf", win, w, optimize=True)


def conv_same_dw_numpy(x, dy, k, s):
    """The filter gradient of ``conv_same_numpy(x, w, s)`` for ``w`` k x k."""
    win = _windows(_pad_same(x, k, s), k)[:, ::s, ::s]
    return np.einsum("nhwcij,nhwf->ijcf", win, dy, optimize=True)


def conv_same_dx_numpy(dy, w, s, size):
    """The input gradient of ``conv_same_numpy(x, w, s)`` for ``x`` of spatial size
    ``size``, which is also ``tf.nn.conv2d_transpose(dy, w, [n, size, size, c], s,
    "SAME")`` (``w`` read as ``[kh, kw, out, in]``): each position's columns ``dy @ w.T``
    added back into its window of the padded input, whose padding is then cut off."""
    k = w.shape[0]
    _, (lo, hi) = same_pads(size, k, s)
    n, ho, wo, _ = dy.shape
    cols = np.tensordot(dy, w, axes=([3], [3]))  # [n, ho, wo, k, k, c]
    dxp = np.zeros((n, size + lo + hi, size + lo + hi, w.shape[2]), np.float32)
    for i in range(k):
        for j in range(k):
            dxp[:, i:i + s * (ho - 1) + 1:s, j:j + s * (wo - 1) + 1:s] += cols[:, :, :, i, j]
    return dxp[:, lo:lo + size, lo:lo + size]


def sigmoid_ce_numpy(logits, label):
    """(mean sigmoid cross-entropy against a constant label, its gradient w.r.t. the
    logits) in TF's stable form."""
    loss = (np.maximum(logits, 0) - logits * label + np.log1p(np.exp(-np.abs(logits)))).mean()
    return loss, (1 / (1 + np.exp(-logits)) - np.float32(label)) / np.float32(logits.size)


class DCGANNumpy:
    """The DCGAN step by hand, updating the arrays in place (as NumpyStep). Returns
    (generator loss, discriminator loss)."""

    def __init__(self, params, lr=DCGAN["lr"]):
        self.params = params
        self.lr = np.float32(lr)
        self.a = np.float32(DCGAN["alpha"])
        self.t = 0
        self.m = [np.zeros_like(p) for p in params]
        self.v = [np.zeros_like(p) for p in params]

    def _lrelu(self, z):
        return np.where(z > 0, z, z * self.a), np.where(z > 0, np.float32(1), self.a)

    def generator(self, z):
        w1, b1, w2, b2, w3, b3 = self.params[:6]
        n = len(z)
        h1, d1 = self._lrelu(z @ w1 + b1)
        h1 = h1.reshape(n, 7, 7, 64)
        h2, d2 = self._lrelu(conv_same_dx_numpy(h1, w2, 2, 14) + b2)
        fake = np.tanh(conv_same_dx_numpy(h2, w3, 2, 28) + b3)
        return fake, (z, h1, d1, h2, d2, fake)

    def gen_grads(self, cache, g_fake):
        w1, b1, w2, b2, w3, b3 = self.params[:6]
        z, h1, d1, h2, d2, fake = cache
        g3 = g_fake * (1 - fake * fake)
        gw3, gb3 = conv_same_dw_numpy(g3, h2, 5, 2), g3.sum((0, 1, 2))
        g2 = conv_same_numpy(g3, w3, 2) * d2
        gw2, gb2 = conv_same_dw_numpy(g2, h1, 5, 2), g2.sum((0, 1, 2))
        g1 = conv_same_numpy(g2, w2, 2).reshape(len(z), -1) * d1
        return [z.T @ g1, g1.sum(0), gw2, gb2, gw3, gb3]

    def discriminator(self, x):
        w1, b1, w2, b2, w3, b3 = self.params[6:]
        e1, d1 = self._lrelu(conv_same_numpy(x, w1, 2) + b1)
        e2, d2 = self._lrelu(conv_same_numpy(e1, w2, 2) + b2)
        f = e2.reshape(len(x), -1)
        return f @ w3 + b3, (x, e1, d1, e2, d2, f)

    def disc_grads(self, cache, g, weights=True):
        """(the gradients of the discriminator's parameters or None, that of its input)."""
        w1, b1, w2, b2, w3, b3 = self.params[6:]
        x, e1, d1, e2, d2, f = cache
        g2 = (g @ w3.T).reshape(e2.shape) * d2
        g1 = conv_same_dx_numpy(g2, w2, 2, 14) * d1
        gx = conv_same_dx_numpy(g1, w1, 2, 28)
        if not weights:
            return None, gx
        return [conv_same_dw_numpy(x, g1, 5, 2), g1.sum((0, 1, 2)),
                conv_same_dw_numpy(e1, g2, 5, 2), g2.sum((0, 1, 2)), f.T @ g, g.sum(0)], gx

    def __call__(self, z, x):
        fake, gcache = self.generator(z)
        real_logits, rcache = self.discriminator(x)
        fake_logits, fcache = self.discriminator(fake)
        l_real, g_real = sigmoid_ce_numpy(real_logits, 1)
        l_fake, g_fake = sigmoid_ce_numpy(fake_logits, 0)
        gen_loss, g_gen = sigmoid_ce_numpy(fake_logits, 1)
        disc_loss = l_real + l_fake
        d_real, _ = self.disc_grads(rcache, g_real)
        d_fake, _ = self.disc_grads(fcache, g_fake)
        d_grads = [a + b for a, b in zip(d_real, d_fake)]
        _, g_img = self.disc_grads(fcache, g_gen, weights=False)
        g_grads = self.gen_grads(gcache, g_img)
        self.t += 1  # two Adams, each at its first, second, ... update
        adam_numpy(self.params[:6], g_grads, self.m[:6], self.v[:6], self.t, self.lr)
        adam_numpy(self.params[6:], d_grads, self.m[6:], self.v[6:], self.t, self.lr)
        return gen_loss, disc_loss


def dcgan_jittape(params, compiled, backend="cpu"):
    """The same step with jittape: ``jt.nn.conv2d``, ``jt.nn.conv2d_transpose``,
    ``jt.nn.leaky_relu``, ``jt.nn.sigmoid_cross_entropy_with_logits``, two tapes and two
    ``jt.optimizers.Adam``; eager or ``@jt.function``. Returns (step(z, x) returning
    (generator loss, discriminator loss), variables)."""
    import jittape as jt

    vs = [jt.Variable(p.copy()) for p in params]
    gen, disc = vs[:6], vs[6:]
    lr, alpha = DCGAN["lr"], DCGAN["alpha"]
    gen_opt = jt.optimizers.Adam(lr, beta_1=B1, beta_2=B2, epsilon=EPS)
    disc_opt = jt.optimizers.Adam(lr, beta_1=B1, beta_2=B2, epsilon=EPS)

    def generator(z):
        w1, b1, w2, b2, w3, b3 = gen
        n = z.shape[0]
        h = jt.reshape(jt.nn.leaky_relu(z @ w1 + b1, alpha), [n, 7, 7, 64])
        h = jt.nn.leaky_relu(jt.nn.conv2d_transpose(h, w2, [n, 14, 14, 32], 2, "SAME") + b2,
                             alpha)
        return jt.tanh(jt.nn.conv2d_transpose(h, w3, [n, 28, 28, 1], 2, "SAME") + b3)

    def discriminator(x):
        w1, b1, w2, b2, w3, b3 = disc
        h = jt.nn.leaky_relu(jt.nn.conv2d(x, w1, 2, "SAME") + b1, alpha)
        h = jt.nn.leaky_relu(jt.nn.conv2d(h, w2, 2, "SAME") + b2, alpha)
        return jt.reshape(h, [-1, 7 * 7 * 64]) @ w3 + b3

    def bce(labels, logits):
        return jt.reduce_mean(jt.nn.sigmoid_cross_entropy_with_logits(labels=labels,
                                                                      logits=logits))

    def step(z, x):
        with jt.GradientTape(backend=backend) as gen_tape, \
                jt.GradientTape(backend=backend) as disc_tape:
            fake = generator(z)
            real_logits, fake_logits = discriminator(x), discriminator(fake)
            gen_loss = bce(jt.ones_like(fake_logits), fake_logits)
            disc_loss = (bce(jt.ones_like(real_logits), real_logits)
                         + bce(jt.zeros_like(fake_logits), fake_logits))
        gen_grads = gen_tape.gradient(gen_loss, gen)
        disc_grads = disc_tape.gradient(disc_loss, disc)
        gen_opt.apply_gradients(zip(gen_grads, gen))
        disc_opt.apply_gradients(zip(disc_grads, disc))
        return gen_loss, disc_loss

    fn = jt.function(step, backend=backend) if compiled else step
    return fn, vs
