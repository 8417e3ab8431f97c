"""Neural-network ops, written as composites of primitives (they fuse and
differentiate through the primitives' rules)."""

from __future__ import annotations


from ..errors import InvalidArgumentError, composite
from ..tensor import Tensor, convert_args, convert_to_tensor
from . import elementwise as E
from . import reduction as R
from . import shaping as S
from .registry import same_shape

relu = E.relu
sigmoid = E.sigmoid
tanh = E.tanh


@composite("softmax")
def softmax(logits, axis=-1, name=None):
    """exp(x) / sum(exp(x)) along ``axis``, with the max subtracted for stability."""
    (x,) = convert_args((logits,))
    m = E.stop_gradient(R.reduce_max(x, axis, keepdims=True))
    e = E.exp(E.subtract(x, m))
    return E.divide(e, R.reduce_sum(e, axis, keepdims=True))


@composite("log_softmax")
def log_softmax(logits, axis=-1, name=None):
    """(x - max) - log(sum(exp(x - max))) along ``axis`` (TF's order: small values
    next to a large maximum keep their precision)."""
    (x,) = convert_args((logits,))
    shifted = E.subtract(x, E.stop_gradient(R.reduce_max(x, axis, keepdims=True)))
    return E.subtract(shifted, E.log(R.reduce_sum(E.exp(shifted), axis, keepdims=True)))


@composite("leaky_relu")
def leaky_relu(features, alpha=0.2, name=None):
    (x,) = convert_args((features,))
    return E.where(E.greater(x, 0), x, E.multiply(x, alpha))


@composite("softplus")
def softplus(features, name=None):
    """log(1 + exp(x)), stable for large |x|."""
    (x,) = convert_args((features,))
    return E.add(E.relu(x), E.log1p(E.exp(E.negative(E.abs(x)))))


@composite("dropout")
def dropout(x, rate, noise_shape=None, seed=None, name=None, rng=None):
    """Zero each element with probability ``rate``, scale the rest by 1/(1-rate).

    The mask comes from ``jt.random`` (the global seed, or the op ``seed``'s own
    sequence, as in TF); ``rng`` (a numpy Generator, jittape's addition) overrides both.
    """
    (x,) = convert_args((x,))
    if not 0 <= rate < 1:
        raise InvalidArgumentError(f"dropout: rate must be in [0, 1), got {rate}")
    if rate == 0:
        return x
    from .. import random as _random  # jt.random's generators: set_seed governs dropout

    shape = x._type.shape if noise_shape is None else tuple(noise_shape)
    dt = x.dtype

    def draw(shape):  # the generator is looked up at each draw (set_seed replaces it)
        g = rng if rng is not None else _random.generator(seed)
        return (g.random(shape) >= rate).astype(dt._np) / dt._np.type(1 - rate)

    return E.multiply(x, _random._sample(draw, shape, dt))


@composite("sparse_softmax_cross_entropy_with_logits")
def sparse_softmax_cross_entropy_with_logits(labels=None, logits=None, name=None):
    """Per-example -log softmax(logits)[label]; labels are integer class ids."""
    if labels is None or logits is None:
        raise ValueError("sparse_softmax_cross_entropy_with_logits needs labels= and logits=")
    (z,) = convert_args((logits,))
    y = labels if isinstance(labels, Tensor) else convert_to_tensor(labels)
    if not y.dtype.is_integer:
        raise InvalidArgumentError(f"labels must be integers, got {y.dtype.name}")
    if not same_shape(y._type.shape, z._type.shape[:-1]):
        raise InvalidArgumentError(
            "logits and labels must have the same first dimensions, got logits shape "
            f"{list(z._type.shape)} and labels shape {list(y._type.shape)}"
        )
    depth = z._type.shape[-1]
    if y._value is not None and y._value.size:
        bad = y._value[(y._value < 0) | (y._value >= depth)]
        if bad.size:
            raise InvalidArgumentError(
                f"Received a label value of {bad.ravel()[0]} which is outside the valid range "
                f"of [0, {depth})"
            )
    hot = S.one_hot(y, depth, dtype=z.dtype)
    return E.negative(R.reduce_sum(E.multiply(hot, log_softmax(z)), -1))


@composite("softmax_cross_entropy_with_logits")
def softmax_cross_entropy_with_logits(labels=None, logits=None, axis=-1, name=None):
    (y, z) = convert_args((labels, logits))
    return E.negative(R.reduce_sum(E.multiply(y, log_softmax(z, axis)), axis))


@composite("sigmoid_cross_entropy_with_logits")
def sigmoid_cross_entropy_with_logits(labels=None, logits=None, name=None):
    """max(z, 0) - z*y + log(1 + exp(-|z|)), TF's stable form, with TF's choice of
    branch at z = 0 (z >= 0), so that the gradient there is sigmoid(0) - y = 0.5 - y."""
    (y, z) = convert_args((labels, logits))
    pos = E.greater_equal(z, 0)
    zeros = E.zeros_like(z)
    relu_z = E.where(pos, z, zeros)
    neg_abs = E.where(pos, E.negative(z), z)
    return E.add(E.subtract(relu_z, E.multiply(z, y)), E.log1p(E.exp(neg_abs)))


@composite("l2_loss")
def l2_loss(t, name=None):
    (x,) = convert_args((t,))
    return E.multiply(R.reduce_sum(E.square(x)), 0.5)
