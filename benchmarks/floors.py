"""Machine ceilings measured in the same run as the benchmarks, and each workload's
floor derived from them: the least time the bytes that must move, or the FLOPs that
must be done, can take on this machine.

- **bandwidth**: bytes read + written per second by a copy of a 256 MB float32 array
  (larger than any cache) on every core (a Numba ``prange`` loop; ``np.copyto`` uses one
  core, about half of it here);
- **GEMM rate**: float32 FLOP/s of a 1024 x 1024 x 1024 ``matmul`` through numpy's BLAS
  on every core.

A floor is a bound, not a target: a workload whose arrays fit in a cache can beat the
bandwidth floor, and a step of small matmuls cannot reach the GEMM rate.
"""

from __future__ import annotations

import os
import time

import numpy as np

from workloads import CONFIGS, DCGAN, LENET


def _median(fn, repeats):
    fn()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    ts.sort()
    return ts[len(ts) // 2]


def measure_ceilings() -> dict:
    """``{"bandwidth_Bps": ..., "gemm_flops": ...}`` for this machine, now."""
    from jittape.compiler.backends import blas

    import numba

    @numba.njit(parallel=True, nogil=True)
    def copy(dst, src):
        for i in numba.prange(src.shape[0]):
            dst[i] = src[i]

    src = np.ones(1 << 26, np.float32)  # 256 MB
    dst = np.empty_like(src)
    t = _median(lambda: copy(dst, src), 5)
    bandwidth = 2 * src.nbytes / t
    n = 1024
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    c = np.empty((n, n), np.float32)
    blas.limit_threads(n=os.cpu_count() or 1, kernel_n=0)  # numpy's BLAS on every core
    try:
        t = _median(lambda: np.matmul(a, b, out=c), 5)
    finally:
        blas.limit_threads()
    return {"bandwidth_Bps": bandwidth, "gemm_flops": 2.0 * n ** 3 / t}


def floor(ceilings: dict, nbytes: float = 0.0, flops: float = 0.0) -> dict:
    """The floor of a workload that must move ``nbytes`` and do ``flops`` (GEMM) FLOPs."""
    t_mem = nbytes / ceilings["bandwidth_Bps"]
    t_gemm = flops / ceilings["gemm_flops"]
    basis = "memory" if t_mem >= t_gemm else "gemm"
    return {"floor_s": max(t_mem, t_gemm), "floor_basis": basis,
            "floor_bytes": nbytes, "floor_flops": flops}


def chain_step_floor(ceilings, n):
    """Forward and backward: read x, w, b; write the two gradients."""
    return floor(ceilings, nbytes=5 * 4 * n)


def chain_backward_floor(ceilings, n):
    """The gradient of a recorded tape: read x, w, tanh(.), sigmoid(x); write two."""
    return floor(ceilings, nbytes=6 * 4 * n)


def softmax_ce_floor(ceilings, batch, classes):
    """Read the logits, write their gradient (the labels are negligible)."""
    return floor(ceilings, nbytes=2 * 4 * batch * classes)


def mlp_floor(ceilings, size):
    """Matmul FLOPs of forward (2BΣab), weight gradients (2BΣab) and input gradients of
    every layer but the first; against the bytes of the update (SGD reads and writes the
    parameters; Adam also its two moments) and of reading the batch."""
    cfg = CONFIGS[size]
    sizes, batch = cfg["sizes"], cfg["batch"]
    layers = list(zip(sizes[:-1], sizes[1:]))
    mac = sum(a * b for a, b in layers)
    flops = 2 * batch * mac * 2 + 2 * batch * sum(a * b for a, b in layers[1:])
    params = sum(a * b + b for a, b in layers)
    arrays = 2 if cfg["opt"] == "sgd" else 6
    nbytes = 4 * (arrays * params + batch * sizes[0])
    return floor(ceilings, nbytes=nbytes, flops=flops)


def conv_flops(batch, out_hw, taps, c, f):
    """One GEMM of a convolution (its forward, its filter gradient or its input gradient,
    each the same count): 2 x batch x output positions x taps x in x out channels."""
    return 2 * batch * out_hw * out_hw * taps * c * f


def lenet_floor(ceilings):
    """The GEMM FLOPs of the LeNet step: each layer's forward and filter (weight)
    gradient, and the input gradient of every layer but the first (a 25-tap, 1-channel
    first convolution is counted as a GEMM too, though it runs as a loop nest)."""
    n = LENET["batch"]
    conv1 = conv_flops(n, 24, 25, 1, 32)
    conv2 = conv_flops(n, 8, 25, 32, 64)
    dense = 2 * n * (1024 * 128 + 128 * 10)
    return floor(ceilings, flops=2 * conv1 + 3 * conv2 + 3 * dense)


def dcgan_floor(ceilings):
    """The GEMM FLOPs of the DCGAN step, the least the hand-written numpy does: the
    discriminator on the real images (forward, filter gradients, the second layer's input
    gradient) and on the generated ones (the same, and the input gradient of every layer
    a second time for the generator's loss, whose cotangent differs); the generator's
    forward, filter gradients and input gradients down to the dense layer (the noise
    needs none). A conv2d_transpose costs what the convolution it transposes costs."""
    n = DCGAN["batch"]
    d1 = conv_flops(n, 14, 25, 1, 32)  # discriminator 28 -> 14; generator's 14 -> 28
    d2 = conv_flops(n, 7, 25, 32, 64)  # discriminator 14 -> 7; generator's 7 -> 14
    d3 = 2 * n * 7 * 7 * 64  # the discriminator's dense layer to one logit
    g1 = 2 * n * DCGAN["noise"] * 7 * 7 * 64  # the generator's dense layer
    disc = (2 * d1 + 3 * d2 + 3 * d3) + (3 * d1 + 4 * d2 + 4 * d3)  # real, generated
    gen = 3 * d2 + 3 * d1 + 2 * g1
    return floor(ceilings, flops=disc + gen)
