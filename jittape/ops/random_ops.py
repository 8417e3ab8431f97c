"""The state behind ``jt.random``: TF 2.x's two-level seeding (a global seed and op seeds)
over numpy Generators, and the draw that becomes a fresh input of every call of a
compiled function. ``jt.random`` and the ops that draw (``nn.dropout``) both read it here.
"""

from __future__ import annotations

import numbers

import numpy as np

from ..compiler.ir import Type
from ..tensor import Tensor, convert_to_tensor, function_tracer

_DEFAULT_GLOBAL_SEED = 87654321  # TF's DEFAULT_GRAPH_SEED, used when only an op seed is given


class _SeedState:
    def __init__(self):
        self.global_seed = None
        self.rng = np.random.default_rng()
        self.op_rngs: dict = {}


_state = _SeedState()


def set_seed(seed):
    """Set the global random seed (``tf.random.set_seed``).

    Every draw after this call (by ``jt.random``, initializers and ``Dropout``) is
    reproducible: calling ``set_seed`` with the same value again replays them.
    ``set_seed(None)`` goes back to unseeded draws.
    """
    if seed is not None:
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
            raise TypeError(f"set_seed: the seed must be an int or None, got {seed!r}")
        seed = int(seed)
        if seed < 0:
            raise ValueError(f"set_seed: the seed must be non-negative, got {seed}")
    _state.global_seed = seed
    _state.rng = np.random.default_rng(seed)
    _state.op_rngs = {}


def get_seed():
    """The global seed last set by ``set_seed`` (``None`` when unseeded)."""
    return _state.global_seed


def generator(seed=None) -> np.random.Generator:
    """The numpy Generator a draw with op seed ``seed`` uses (see the module docstring).

    Layers and initializers draw through this, so ``set_seed`` governs them too.
    """
    if seed is None:
        return _state.rng
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"the op seed must be an int or None, got {seed!r}")
    g = _state.op_rngs.get(int(seed))
    if g is None:
        gs = _DEFAULT_GLOBAL_SEED if _state.global_seed is None else _state.global_seed
        g = _state.op_rngs[int(seed)] = np.random.default_rng([gs, int(seed)])
    return g


def _sample(draw, dims, dt) -> Tensor:
    """``draw(shape)`` as a tensor. Inside a ``jt.function`` trace the draw becomes an
    input of the traced graph that every call draws afresh (from the generator current
    at that call, so ``set_seed`` governs compiled steps as it does eager ones), of the
    shape the call's sizes give (a symbolic size is known only then)."""
    def sample(shape):
        return np.asarray(draw(tuple(shape))).astype(dt._np, copy=False)

    tracer = function_tracer()
    if tracer is not None:
        return tracer.random_input(Type(tuple(dims), dt.name), sample)
    return convert_to_tensor(sample(dims))
