"""The one per-dtype tolerance table every test uses (no inline tolerances).

``fwd_*``: an op's result against a numpy reference computed in float64 from
the same (rounded) inputs. ``fd_*``: a derivative against central finite
differences taken with step ``fd_eps``; compared as scalars, with ``fd_rtol``
relative to the sum of the absolute terms of the inner product.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Tol:
    fwd_rtol: float
    fwd_atol: float
    fd_eps: float
    fd_rtol: float
    fd_atol: float


TOLERANCES = {
    "float32": Tol(fwd_rtol=1e-5, fwd_atol=1e-6, fd_eps=1e-3, fd_rtol=1e-2, fd_atol=1e-3),
    "float64": Tol(fwd_rtol=1e-12, fwd_atol=1e-13, fd_eps=1e-6, fd_rtol=1e-6, fd_atol=1e-8),
}


def tol(dtype) -> Tol:
    """The row for ``dtype`` (a name, numpy dtype or jittape DType)."""
    name = getattr(dtype, "name", None) or np.dtype(dtype).name
    return TOLERANCES[np.dtype(name).name]


def coarsest(*dtypes) -> Tol:
    """The loosest row among the float dtypes given (float64 when none is float)."""
    names = {np.dtype(getattr(d, "name", d)).name for d in dtypes}
    return TOLERANCES["float32"] if "float32" in names else TOLERANCES["float64"]
