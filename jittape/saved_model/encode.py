"""The JSON forms of a saved trace's calls (Python values, nestings, TensorSpecs,
parameters) and :class:`Trace`, one trace as a saved model holds it, on either side."""

from __future__ import annotations

import inspect
import math
import sys
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..function import ConcreteFunction, TensorSpec
from ..function.keys import _dict_keys
from ..compiler.ir import Graph
from ..tensor import Variable


class NotSaveable(Exception):
    """Something a saved model cannot hold; the message says what, the caller where."""


# ---------------------------------------------------------------------------
# Python values, nestings, specs


def value_to_json(v):
    """A Python literal (None, bool, int, float, str) as JSON; floats exactly."""
    t = type(v)
    if v is None or t in (bool, int, str):
        return {"py": v}
    if t is float:
        return {"float": repr(v)}  # exact, and inf and nan too (JSON has neither)
    raise NotSaveable(f"a {t.__name__} ({v!r:.60}); a saved model holds tensors and the "
                      "Python literals None, bool, int, float and str")


def value_from_json(d):
    if "py" in d:
        return d["py"]
    return float(d["float"])


def same_value(a, b) -> bool:
    """Python values as a call signature compares them: by type and value (nan is nan)."""
    if type(a) is not type(b):
        return False
    return a == b or (type(a) is float and math.isnan(a) and math.isnan(b))


def nest_to_json(x, leaf):
    """The nesting of ``x`` (lists, tuples, dicts by sorted key, as ``jt.nest``) with
    each leaf as ``leaf(value)`` gives it. A namedtuple is saved as a tuple."""
    if isinstance(x, dict):
        return {"dict": [[value_to_json(k), nest_to_json(x[k], leaf)] for k in _dict_keys(x)]}
    if isinstance(x, list):
        return {"list": [nest_to_json(v, leaf) for v in x]}
    if isinstance(x, tuple):
        return {"tuple": [nest_to_json(v, leaf) for v in x]}
    return leaf(x)


def nest_from_json(d, leaf):
    """The inverse of :func:`nest_to_json`: ``leaf(json)`` makes each leaf."""
    if "dict" in d:
        return {value_from_json(k): nest_from_json(v, leaf) for k, v in d["dict"]}
    if "list" in d:
        return [nest_from_json(v, leaf) for v in d["list"]]
    if "tuple" in d:
        return tuple(nest_from_json(v, leaf) for v in d["tuple"])
    return leaf(d)


def spec_to_json(s: TensorSpec) -> dict:
    return {"spec": {"shape": None if s.shape is None else list(s.shape),
                     "dtype": s.dtype.name, "name": s.name}}


def spec_from_json(d) -> TensorSpec:
    s = d["spec"]
    return TensorSpec(s["shape"], s["dtype"], s["name"])


def arg_leaf_to_json(x):
    """One leaf of a trace's input structure: a TensorSpec or a Python literal."""
    if isinstance(x, TensorSpec):
        return spec_to_json(x)
    if isinstance(x, Variable):
        raise NotSaveable(f"a jt.Variable ({x._label!r}) passed as an argument; a saved function "
                          "takes tensors and Python literals (read the variable inside the "
                          "function, from an attribute of the object saved)")
    return value_to_json(x)


def arg_leaf_from_json(d):
    return spec_from_json(d) if "spec" in d else value_from_json(d)


def flat_specs(structure) -> list:
    """The TensorSpecs of an input structure, in the order of the trace's leaves."""
    out = []

    def walk(x):
        if isinstance(x, dict):
            for k in _dict_keys(x):
                walk(x[k])
        elif isinstance(x, (list, tuple)):
            for v in x:
                walk(v)
        elif isinstance(x, TensorSpec):
            out.append(x)

    walk(structure)
    return out


def parameters_to_json(sig) -> list | None:
    """A function's parameters (names, kinds, defaults that are literals), so that a
    loaded function binds its calls' arguments as the original did."""
    if sig is None:
        return None
    out = []
    for p in sig.parameters.values():
        d = {"name": p.name, "kind": p.kind.name}
        if p.default is not inspect.Parameter.empty:
            try:
                d["default"] = value_to_json(p.default)
            except NotSaveable:
                d["default_not_saved"] = repr(p.default)[:80]  # the call must pass it
        out.append(d)
    return out


_KINDS = {k.name: k for k in type(inspect.Parameter.POSITIONAL_ONLY)}


def parameters_from_json(params) -> inspect.Signature | None:
    if params is None:
        return None
    return inspect.Signature([
        inspect.Parameter(p["name"], _KINDS[p["kind"]],
                          default=value_from_json(p["default"]) if "default" in p
                          else inspect.Parameter.empty)
        for p in params])


def stream_to_json(stream):
    """Where a ``jt.print`` writes, if a saved model can say it."""
    if stream is None:
        return None
    if isinstance(stream, str):
        return {"file": stream}
    if stream is sys.stdout:
        return "stdout"
    if stream is sys.stderr:
        return "stderr"
    raise NotSaveable(f"jt.print writes to {stream!r:.60}, a Python object a saved model "
                      "cannot hold; print to sys.stdout, sys.stderr or a 'file://' path")


def stream_from_json(d):
    if d is None:
        return None
    if d == "stdout":
        return sys.stdout
    if d == "stderr":
        return sys.stderr
    return d["file"]


# ---------------------------------------------------------------------------
# Traces


@dataclass
class Trace:
    """One trace of a function, as a saved model holds it (the saving side makes it from
    a ``ConcreteFunction``, the loading side from the files).

    ``feeds``: per graph input, ``("arg", leaf)``, ``("variable", Variable)`` or
    ``("capture", ndarray)``. ``outputs``: the result's nesting in JSON, leaves as
    ``{"leaf": n}``; ``out_plan``: per leaf, the graph output it is (an int) or a JSON
    Python value. ``writes``: ``(Variable, graph output)`` assigned after each call.
    ``prints``: the ``jt.print`` calls (JSON, leaves by graph output).
    """

    name: str
    graph: Graph
    feeds: list
    args: tuple
    kwargs: dict
    outputs: Any
    out_plan: list
    writes: list
    prints: list = field(default_factory=list)


def trace_of(cf: ConcreteFunction) -> Trace:
    """The :class:`Trace` of a traced ``jt.function``; raises :class:`NotSaveable`."""
    if cf.draws:
        raise NotSaveable(
            "it draws random values (jt.random, dropout) on every call, from a generator "
            "a saved model cannot hold: save a function that draws none (training=False), "
            "or pass the random values in as arguments")
    g = cf.traced
    feeds = []
    for vid in g.inputs:
        src = cf._source.get(vid)
        if src is None:
            feeds.append(("capture", np.asarray(cf._captures[vid])))
        elif src[0] == "arg":
            feeds.append(("arg", src[1]))
        else:
            feeds.append(("variable", src[1]))
    n = iter(range(len(cf.out_plan)))
    outputs = nest_to_json(cf.out_structure, lambda _: {"leaf": next(n)})
    plan = [p if type(p) is int else value_to_json(p[1]) for p in cf.out_plan]
    prints = []
    for structure, slots, out_index, opts in cf.prints:
        k = iter(range(len(slots)))
        prints.append({
            "structure": nest_to_json(structure, lambda _: {"leaf": next(k)}),
            "leaves": [{"output": out_index[s]} if type(s) is int else value_to_json(s[1])
                       for s in slots],
            "stream": stream_to_json(opts["output_stream"]),
            "summarize": opts["summarize"], "sep": opts["sep"], "end": opts["end"]})
    args, kwargs = cf.input_structure
    return Trace(cf.name, g, feeds, args, kwargs, outputs, plan, list(cf.writes), prints)
