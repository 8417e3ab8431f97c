"""``model.summary()`` for functional and subclassed models: a table of the layers
(name and type, output shape, parameter count, and for a functional graph that is not
a chain the layers each one is connected to), then the parameter totals."""

from __future__ import annotations

import math

from ..naming import _fmt_shape

__all__ = ["print_summary"]


def _shape_text(outputs):
    shapes = [t.shape for t in outputs]
    return _fmt_shape(shapes[0]) if len(shapes) == 1 else "[" + ", ".join(
        _fmt_shape(s) for s in shapes) + "]"


def _rows(model):
    graph = model._graph
    rows, connected = [], False
    if graph is None:
        for layer in model.layers:
            shape = "?"
            built = getattr(layer, "_build_input_shape", None)
            if layer.built and built is not None:
                try:
                    shape = _fmt_shape(layer.compute_output_shape(built))
                except Exception:  # a layer whose output shape needs data: unknown here
                    shape = "?"
            rows.append([f"{layer.name} ({type(layer).__name__})", shape,
                         f"{layer.count_params():,}", ""])
        return rows, connected
    in_graph = {id(n) for n in graph[4]}
    for layer in model.layers:
        nodes = [n for n in layer.__dict__.get("_inbound_nodes", [])
                 if id(n) in in_graph or type(layer).__name__ == "InputLayer"]
        outs = [t for n in nodes[:1] for t in n.flat_outputs]
        parents = []
        for n in nodes:
            for p in n.parents:
                pl, pi, ti = p._keras_history
                parents.append(f"{pl.name}[{pi}][{ti}]")
        if len(parents) > 1 or len(nodes) > 1:
            connected = True
        rows.append([f"{layer.name} ({type(layer).__name__})", _shape_text(outs) if outs else "?",
                     f"{layer.count_params():,}", ", ".join(parents) or "-"])
    return rows, connected


def print_summary(model, line_length=None, print_fn=None, show_trainable=False):
    p = print_fn or print
    if not model.built:
        raise ValueError(
            f'This model ("{model.name}") has not yet been built. Build the model first by '
            "calling `build()` or by calling the model on a batch of data.")
    rows, connected = _rows(model)
    headers = ["Layer (type)", "Output Shape", "Param #"] + (["Connected to"] if connected else [])
    if show_trainable:
        headers.append("Trainable")
        for r, layer in zip(rows, model.layers):
            r.append("Y" if layer.trainable else "N")
    cols = [max([len(h)] + [len(r[i]) for r in rows]) + 3 for i, h in enumerate(headers)]
    width = max(line_length or 65, sum(cols))

    def line(values):
        return "".join(f"{v:<{c}}" for v, c in zip(values, cols)).rstrip()

    def cells(r):
        out = r[:3]
        if connected:
            out.append(r[3])
        if show_trainable:
            out.append(r[-1])
        return out

    total = model.count_params()
    trainable = int(sum(math.prod(v.shape) for v in model.trainable_variables))
    p(f'Model: "{model.name}"')
    p("_" * width)
    p(line(headers))
    p("=" * width)
    for i, r in enumerate(rows):
        p(line(cells(r)))
        if i < len(rows) - 1:
            p("-" * width)
    p("=" * width)
    p(f"Total params: {total:,}")
    p(f"Trainable params: {trainable:,}")
    p(f"Non-trainable params: {total - trainable:,}")
    p("_" * width)
