"""Neural-network ops, written as composites of primitives (they fuse and
differentiate through the primitives' rules)."""

from __future__ import annotations


from ..errors import InvalidArgumentError, composite
from ..tensor import Tensor, convert_args, convert_to_tensor
from . import elementwise as E
from . import reduction as R
from . import random_ops
from . import shaping as S
from .registry import same_shape
# pooling
from .pooling import (  # noqa: F401
    avg_pool, avg_pool1d, avg_pool2d, avg_pool3d, max_pool, max_pool1d, max_pool2d, max_pool3d,
    pool,
)

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
    shape = x._type.shape if noise_shape is None else tuple(noise_shape)
    dt = x.dtype

    def draw(shape):  # the generator is looked up at each draw (set_seed replaces it)
        g = rng if rng is not None else random_ops.generator(seed)
        return (g.random(shape) >= rate).astype(dt._np) / dt._np.type(1 - rate)

    return E.multiply(x, random_ops._sample(draw, shape, dt))


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
    # a strict one_hot: a label out of range raises (TF's message), eager and compiled
    hot = S.one_hot(y, z._type.shape[-1], dtype=z.dtype,
                    strict="sparse_softmax_cross_entropy_with_logits")
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


# ---------------------------------------------------------------------------
# More activations and normalizations (composites: they fuse with their neighbours)

# tf.nn.selu's constants (Klambauer et al. 2017), as TF writes them
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def _negative_part_expm1(x):
    """expm1(min(x, 0)): the negative branch of elu, finite for every x (an exp of a
    large positive x would be inf, and the unselected branch's 0 * inf a NaN gradient)."""
    return E.expm1(E.minimum(x, 0.0))


@composite("elu")
def elu(features, name=None):
    """x for x >= 0, exp(x) - 1 below (``tf.nn.elu``; the gradient at 0 is 1, as TF's)."""
    (x,) = convert_args((features,))
    return E.where(E.less(x, 0.0), _negative_part_expm1(x), x)


@composite("selu")
def selu(features, name=None):
    """scale * elu(x) with elu's negative branch times alpha (``tf.nn.selu``)."""
    (x,) = convert_args((features,))
    neg = E.multiply(_negative_part_expm1(x), SELU_ALPHA * SELU_SCALE)
    return E.where(E.less(x, 0.0), neg, E.multiply(x, SELU_SCALE))


@composite("gelu")
def gelu(features, approximate=False, name=None):
    """x * Phi(x) (``tf.nn.gelu``): exactly, through erf, or TF's tanh approximation."""
    (x,) = convert_args((features,))
    if approximate:
        inner = E.multiply(E.add(x, E.multiply(E.multiply(E.square(x), x), 0.044715)),
                           0.7978845608028654)  # sqrt(2 / pi)
        return E.multiply(E.multiply(x, 0.5), E.add(E.tanh(inner), 1.0))
    return E.multiply(E.multiply(x, 0.5), E.add(E.erf(E.multiply(x, 0.7071067811865476)), 1.0))


@composite("softsign")
def softsign(features, name=None):
    """x / (1 + |x|)."""
    (x,) = convert_args((features,))
    return E.divide(x, E.add(E.abs(x), 1.0))


@composite("silu")
def silu(features, beta=1.0, name=None):
    """x * sigmoid(beta * x) (``tf.nn.silu``, also ``tf.nn.swish``)."""
    (x,) = convert_args((features,))
    return E.multiply(x, E.sigmoid(x if beta == 1.0 else E.multiply(x, beta)))


swish = silu


@composite("log_sigmoid")
def log_sigmoid(x, name=None):
    """log(sigmoid(x)) = -softplus(-x), stable for large |x| (``tf.math.log_sigmoid``)."""
    (x,) = convert_args((x,))
    return E.negative(softplus(E.negative(x)))


@composite("l2_normalize")
def l2_normalize(x, axis=None, epsilon=1e-12, name=None, dim=None):
    """x / sqrt(max(sum(x**2, axis), epsilon)) (``tf.math.l2_normalize``)."""
    (x,) = convert_args((x,))
    if axis is None:
        axis = dim
    sq = R.reduce_sum(E.square(x), axis, keepdims=True)
    return E.multiply(x, E.rsqrt(E.maximum(sq, epsilon)))


@composite("moments")
def moments(x, axes, shift=None, keepdims=False, name=None):
    """``(mean, variance)`` of ``x`` over ``axes`` (``tf.nn.moments``; ``shift`` is
    unused, as in TF 2): the variance is the mean of squared deviations from the mean.
    TF holds the mean constant in it (``stop_gradient``): the first derivative is the
    same (the variance's derivative in the mean is zero), but the second is not, so the
    mean here is differentiated, and Hessians are right."""
    (x,) = convert_args((x,))
    mean = R.reduce_mean(x, axes, keepdims=True)
    variance = R.reduce_mean(E.square(E.subtract(x, mean)), axes,
                             keepdims=keepdims)
    if not keepdims:
        mean = S.squeeze(mean, axes)
    return mean, variance


# convolution
from .window import (  # noqa: E402,F401
    conv1d, conv1d_transpose, conv2d, conv2d_backprop_filter, conv2d_backprop_input,
    conv2d_transpose, conv3d, conv3d_transpose, conv_transpose, convolution, depthwise_conv2d,
    separable_conv2d,
)
