"""The geometry of sliding windows (convolution and pooling), shared by their ops.

The primitives see plain ints only: per spatial axis a window size, a stride, a
dilation and a pair of explicit pads (low, high). The public functions turn TF's
arguments into those here: ``padding="SAME"``/``"VALID"`` or TF's explicit list of
pairs, ``strides``/``dilations``/``ksize`` as an int, a list per spatial axis or a
list over all axes (batch and channel entries must then be 1), and ``data_format``
(channels last, or channels first: ``"NCHW"``, ``"NCW"``, ``"NCDHW"``, moved to the
last axis around the channels-last primitive).
"""

from __future__ import annotations

from ..errors import InvalidArgumentError

CHANNELS_LAST = {1: "NWC", 2: "NHWC", 3: "NDHWC"}
CHANNELS_FIRST = {1: "NCW", 2: "NCHW", 3: "NCDHW"}


def channels_first(who: str, data_format, nspatial: int) -> bool:
    """Whether ``data_format`` puts the channels first (``"NCHW"``); None is TF's
    default, channels last. Keras' ``"channels_last"``/``"channels_first"`` are read
    too."""
    if data_format is None or data_format in ("channels_last", CHANNELS_LAST[nspatial]):
        return False
    if data_format in ("channels_first", CHANNELS_FIRST[nspatial]):
        return True
    # TF reads NHC/NCH as 1-d data formats too
    if nspatial == 1 and data_format in ("NHWC", "NCHW"):
        return data_format == "NCHW"
    raise InvalidArgumentError(
        f"{who}: data_format must be {CHANNELS_LAST[nspatial]!r} or "
        f"{CHANNELS_FIRST[nspatial]!r}, got {data_format!r}")


def per_axis(who: str, what: str, value, nspatial: int, first: bool = False) -> tuple:
    """An int, a list of ``nspatial`` ints or a list over all ``nspatial + 2`` axes (whose
    batch and channel entries must be 1) as a tuple of ``nspatial`` positive ints."""
    if isinstance(value, (int,)) or (hasattr(value, "__index__") and not hasattr(value, "__len__")):
        vals = (int(value),) * nspatial
    else:
        vals = tuple(int(v) for v in value)
        if len(vals) == 1:
            vals = vals * nspatial
        elif len(vals) == nspatial + 2:
            outer = (vals[0], vals[1]) if first else (vals[0], vals[-1])
            if outer != (1, 1):
                raise InvalidArgumentError(
                    f"{who}: {what} {list(vals)} moves along the batch or channel axis: "
                    "its batch and channel entries must be 1")
            vals = vals[2:] if first else vals[1:-1]
        elif len(vals) != nspatial:
            raise InvalidArgumentError(
                f"{who}: {what} must be an int or a list of 1, {nspatial} or "
                f"{nspatial + 2} ints, got {list(vals)}")
    if any(v < 1 for v in vals):
        raise InvalidArgumentError(f"{who}: {what} must be positive, got {list(vals)}")
    return vals


def pads_for(who: str, padding, sizes, ksize, strides, dilations, first: bool = False
             ) -> tuple:
    """``((low, high), ...)`` per spatial axis for TF's ``padding``: ``"VALID"`` (none),
    ``"SAME"`` (the output size is ``ceil(n / stride)``; the total pad is split with the
    odd one at the high end, as TF), or explicit pairs (a list over all axes, whose batch
    and channel pairs must be 0, or one per spatial axis)."""
    ns = len(ksize)
    if isinstance(padding, str):
        p = padding.upper()
        if p == "VALID":
            return ((0, 0),) * ns
        if p == "SAME":
            out = []
            for n, k, s, d in zip(sizes, ksize, strides, dilations):
                span = (k - 1) * d + 1
                total = max((-(-n // s) - 1) * s + span - n, 0)
                out.append((total // 2, total - total // 2))
            return tuple(out)
        raise InvalidArgumentError(
            f"{who}: padding must be 'SAME', 'VALID' or a list of pairs, got {padding!r}")
    pairs = [tuple(int(v) for v in pr) for pr in padding]
    if any(len(pr) != 2 for pr in pairs):
        raise InvalidArgumentError(f"{who}: explicit padding must be pairs, got {padding!r}")
    if len(pairs) == ns + 2:
        outer = (pairs[0], pairs[1]) if first else (pairs[0], pairs[-1])
        if outer != ((0, 0), (0, 0)):
            raise InvalidArgumentError(
                f"{who}: explicit padding {pairs} pads the batch or channel axis: their "
                "pairs must be [0, 0]")
        pairs = pairs[2:] if first else pairs[1:-1]
    if len(pairs) != ns:
        raise InvalidArgumentError(
            f"{who}: explicit padding needs {ns + 2} pairs (one per axis), got {len(pairs)}")
    if any(v < 0 for pr in pairs for v in pr):
        raise InvalidArgumentError(f"{who}: explicit padding must be non-negative, got {pairs}")
    return tuple(pairs)


def out_size(n: int, k: int, s: int, d: int, lo: int, hi: int) -> int:
    """The number of window positions along one axis (0 when the window does not fit)."""
    span = (k - 1) * d + 1
    return max((n + lo + hi - span) // s + 1, 0)
