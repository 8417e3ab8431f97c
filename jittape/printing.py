"""``jt.print`` (``tf.print``): print tensors when the program runs.

Eagerly it prints at once. Inside a ``jt.function`` the printed tensors become outputs of
the traced graph, and every call of the compiled function prints them after it runs, in
the order the trace met the ``jt.print`` calls (Python's ``print`` runs while tracing
only, as in TF). Tensors print as TF prints them: ``[0 1 2 ... 7 8 9]`` (``summarize``
elements at each end of a long dimension; -1 or None: all), integral floats without a
point, booleans as 0/1, strings in quotes inside tensors and containers.
"""

from __future__ import annotations

import sys

import numpy as np

from . import nest
from .tensor import Tensor, Variable, function_tracer

__all__ = ["print"]


def _scalar(x) -> str:
    if isinstance(x, (np.bool_, bool)):
        return "1" if x else "0"
    if isinstance(x, (np.floating, float)):
        if not np.isfinite(x):
            return "nan" if np.isnan(x) else ("inf" if x > 0 else "-inf")
        if x == np.floor(x) and abs(x) < 1e16:
            return str(int(x))
        if x != 0 and (abs(x) < 1e-4 or abs(x) >= 1e16):
            return np.format_float_scientific(x, unique=True, trim="-")
        return np.format_float_positional(x, unique=True, trim="-")
    if isinstance(x, (bytes, np.bytes_)):
        return '"' + x.decode("utf-8", "replace") + '"'
    if isinstance(x, (str, np.str_)):
        return f'"{x}"'
    return str(x)


def _array(a: np.ndarray, summarize) -> str:
    """TF's layout: nested brackets, elements by spaces, rows on new lines indented by
    depth, blocks of rank 3 and more apart by blank lines."""
    if a.ndim == 0:
        return _scalar(a[()])
    edge = None if summarize is None or summarize < 0 else int(summarize)

    def part(x, depth):
        n = x.shape[0]
        idx = list(range(n)) if edge is None or n <= 2 * edge else \
            list(range(edge)) + [None] + list(range(n - edge, n))
        if x.ndim == 1:
            return "[" + " ".join("..." if i is None else _scalar(x[i]) for i in idx) + "]"
        gap = "\n" * (x.ndim - 1) + " " * (depth + 1)
        return "[" + gap.join("..." if i is None else part(x[i], depth + 1) for i in idx) + "]"

    return part(a, 0)


def _format(x, summarize, top=True) -> str:
    if isinstance(x, Variable):
        x = x._value
    if isinstance(x, Tensor):
        x = x._value
    if isinstance(x, np.ndarray):
        return _array(x, summarize)
    if isinstance(x, np.generic):
        return _scalar(x)
    if isinstance(x, str):
        return x if top else repr(x)
    if isinstance(x, dict):
        return "{" + ", ".join(f"{k!r}: {_format(v, summarize, False)}" for k, v in x.items()) + "}"
    if isinstance(x, list):
        return "[" + ", ".join(_format(v, summarize, False) for v in x) + "]"
    if isinstance(x, tuple):
        inner = ", ".join(_format(v, summarize, False) for v in x)
        return "(" + inner + ("," if len(x) == 1 else "") + ")"
    return str(x)


def _write(text: str, stream) -> None:
    if stream is None:
        stream = sys.stderr  # TF's default, looked up at each print (tests capture it)
    if isinstance(stream, str):
        if not stream.startswith("file://"):
            raise ValueError(f"jt.print: output_stream {stream!r} is not a stream, a "
                             "callable or a 'file://path'")
        with open(stream[len("file://"):], "a", encoding="utf-8") as f:
            f.write(text)
        return
    write = getattr(stream, "write", None)
    if write is not None:
        write(text)
        flush = getattr(stream, "flush", None)
        if flush is not None:
            flush()
    elif callable(stream):  # logging.info and the like: the text without its end
        stream(text[:-1] if text.endswith("\n") else text)
    else:
        raise TypeError(f"jt.print: output_stream must be a stream, a callable or a "
                        f"'file://path', not {type(stream).__name__}")


def emit(inputs, opts: dict) -> None:
    """Format ``inputs`` (concrete values) and write them as ``jt.print`` does."""
    sep, end, summarize = opts["sep"], opts["end"], opts["summarize"]
    _write(sep.join(_format(x, summarize) for x in inputs) + end, opts["output_stream"])


def print(*inputs, output_stream=None, summarize=3, sep=" ", end="\n",  # noqa: A001
          name=None):
    """Print ``inputs`` (tensors, variables, Python values and structures of them), at
    run time: at once eagerly, at every call inside a ``jt.function``."""
    opts = {"output_stream": output_stream, "summarize": summarize, "sep": sep, "end": end}
    tracer = function_tracer()
    if tracer is None:
        emit(inputs, opts)
        return None
    flat = nest.flatten(list(inputs))
    vids, slots = [], []
    for leaf in flat:
        if isinstance(leaf, Variable):
            leaf = leaf.read_value()
        if isinstance(leaf, Tensor):
            vids.append(leaf._id if leaf._tracer is tracer else tracer.capture(leaf))
            slots.append(len(vids) - 1)
        else:
            slots.append(("py", leaf))
    tracer.prints.append((list(inputs), slots, vids, opts))
    return None


def run_prints(prints, outs) -> None:
    """After a compiled call: each trace-time ``jt.print`` with this call's values."""
    for structure, slots, out_index, opts in prints:
        flat = [outs[out_index[s]] if type(s) is int else s[1] for s in slots]
        emit(nest.pack_sequence_as(structure, flat), opts)

