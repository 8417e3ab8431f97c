"""``jt.print`` (``tf.print``): print tensors when the program runs.

Eagerly it prints at once. Inside a ``jt.function`` the printed tensors become outputs of
the traced graph, and every call of the compiled function prints them after it runs, in
the order the trace met the ``jt.print`` calls (Python's ``print`` runs while tracing
only, as in TF). Tensors print as TF prints them: ``[0 1 2 ... 7 8 9]`` (``summarize``
elements at each end of a long dimension; -1 or None: all), floats with TF's digits
(``0.666666687`` for a float32 2/3: see :func:`_float`), booleans as 0/1, strings in
quotes inside tensors. Everything else prints as TF's ``tf.print`` does: each input as
``pprint.pformat`` writes it (a string as it is), with its tensors in their places
(Python floats in a structure as ``repr``, dicts by sorted key, a numpy array as its
``repr``: only tensors and variables are formatted as tensors).
"""

from __future__ import annotations

import pprint
import sys

import numpy as np

from . import nest
from .tensor import Tensor, Variable, function_tracer

__all__ = ["print"]


def _float(x, single: bool) -> str:
    """A float as TF writes it (``FloatToBuffer``/``DoubleToBuffer``): the shortest of
    ``%.6g`` (``%.15g`` for float64) that reads back as the same value, else ``%.9g``
    (``%.17g``), which always does: float32 2/3 is ``0.666666687``, 0.1 stays ``0.1``,
    1e6 is ``1e+06``. Half and bfloat16 values are written as the float32 they are."""
    v = float(x)
    if v != v:
        return "-nan" if np.signbit(x) else "nan"
    if single:
        text = "%.6g" % v
        return text if float(np.float32(text)) == v else "%.9g" % v
    text = "%.15g" % v
    return text if float(text) == v else "%.17g" % v


def _scalar(x) -> str:
    if isinstance(x, (np.bool_, bool)):
        return "1" if x else "0"
    if isinstance(x, np.floating):
        return _float(x, x.dtype.itemsize <= 4)
    if isinstance(x, float):
        return _float(x, False)
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


def _is_tensor(x) -> bool:
    return isinstance(x, (Tensor, Variable))


def _tensor(x, summarize) -> str:
    return _array(x._value if isinstance(x, Variable) else np.asarray(x._value), summarize)


def _text(inputs, sep, summarize) -> str:
    """``inputs`` as TF's ``tf.print`` writes them: a template of each input (a string
    as it is, anything else as ``pprint.pformat`` writes it with a placeholder string
    for each tensor, quotes dropped), joined by ``sep``; then the placeholders, in
    ``nest.flatten`` order, take the tensors' text."""
    free = " ".join(pprint.pformat(nest.pack_sequence_as(
        x, ["" if _is_tensor(v) else v for v in nest.flatten(x)])) for x in inputs)
    ph = "{}"
    while ph in free:
        ph += "0"
    templates, tensors = [], []
    for x in inputs:
        flat = nest.flatten(x)
        tensors += [v for v in flat if _is_tensor(v)]
        templates.append(x if isinstance(x, str) else pprint.pformat(
            nest.pack_sequence_as(x, [ph if _is_tensor(v) else v for v in flat])))
    parts = sep.join(templates).replace(f"'{ph}'", ph).split(ph)
    out = [parts[0]]
    for t, rest in zip(tensors, parts[1:]):
        out += [_tensor(t, summarize), rest]
    return "".join(out)


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
    _write(_text(inputs, opts["sep"], opts["summarize"]) + opts["end"],
           opts["output_stream"])


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
        flat = [Tensor(outs[out_index[s]]) if type(s) is int else s[1] for s in slots]
        emit(nest.pack_sequence_as(structure, flat), opts)

