"""``jt.math``: the TF ``tf.math`` names, for code written against TensorFlow."""

from .ops import (  # noqa: F401
    abs, add, argmax, argmin, cos, divide, equal, exp, floor, floordiv, floormod, greater,
    greater_equal, is_finite, is_nan, less, less_equal, log, log1p, logical_and, logical_not,
    logical_or, maximum, minimum, multiply, negative, not_equal, pow, reciprocal, reduce_all,
    reduce_any, reduce_logsumexp, reduce_max, reduce_mean, reduce_min, reduce_sum, sigmoid, sign,
    sin, sqrt, square, subtract, tanh, truediv,
)
from .ops import add_n, cumprod, cumsum, reduce_prod, top_k  # noqa: F401,E402
from .ops.elementwise import erf, erfc, expm1, rsqrt  # noqa: F401
from .ops.nn import l2_normalize, log_sigmoid, softplus  # noqa: F401
