"""``jt.linalg``: the TF ``tf.linalg`` names, for code written against TensorFlow."""

from .ops.contraction import matmul  # noqa: F401
from .ops.linalg import (  # noqa: F401
    cholesky, det, diag, diag_part, inv, logdet, slogdet, solve, trace,
)
from .ops.reduction import norm  # noqa: F401
