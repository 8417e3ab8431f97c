"""A functional model's config (Keras 3's format: layer records with their
``inbound_nodes``, ``input_layers``, ``output_layers``) and the ``.keras`` archive
(``model.save``, ``jt.keras.models.load_model``); ``clone_model`` is in
``jittape.keras.models.cloning``.

The config of a functional model names each layer call by ``[layer name, node index,
tensor index]``, the node index counting only that layer's calls inside this model; a
symbolic tensor in a call's arguments is ``{"class_name": "__keras_tensor__", "config":
{"shape", "dtype", "keras_history"}}``. ``from_config`` replays the calls in an order
where every argument exists, so a config Keras wrote rebuilds the same graph.

A ``.keras`` file is a zip of ``metadata.json``, ``config.json`` (the model's record and
its ``compile_config``) and ``model.weights.h5`` (``save_weights``' layout), written to a
temporary file and renamed into place.
"""

from __future__ import annotations

import datetime
import json
import os
import tempfile
import zipfile

from ..saving import serialization as _config
from ... import nest
from ...version import __version__
from ..keras_tensor import KerasTensor

__all__ = ["functional_config", "functional_from_config", "save_model", "load_model"]


# ---------------------------------------------------------------------------
# the functional config


def _model_nodes(model):
    """``{id(node): index among its layer's nodes in this model}``."""
    in_model = {id(n) for n in model._graph[4]}
    index = {}
    for layer in model.layers:
        k = 0
        for node in layer.__dict__.get("_inbound_nodes", []):
            if id(node) in in_model or type(layer).__name__ == "InputLayer":
                index[id(node)] = k
                k += 1
    return index


def _history(t, node_index):
    layer, ni, ti = t._keras_history
    node = layer._inbound_nodes[ni]
    return [layer.name, node_index[id(node)], ti]


def _encode(value, node_index):
    if type(value) is KerasTensor:
        return {"class_name": "__keras_tensor__",
                "config": {"shape": list(value.shape), "dtype": value.dtype.name,
                           "keras_history": _history(value, node_index)}}
    if isinstance(value, dict):
        return {k: _encode(v, node_index) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encode(v, node_index) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"the functional model's config cannot hold a {type(value).__name__} "
                    f"argument ({value!r:.80}); pass tensors, numbers and strings to layers")


def functional_config(model) -> dict:
    from ..layers import serialize

    node_index = _model_nodes(model)
    in_model = {id(n) for n in model._graph[4]}
    records = []
    for layer in model.layers:
        record = serialize(layer)
        record["name"] = layer.name
        nodes = []
        if type(layer).__name__ != "InputLayer":
            for node in layer._inbound_nodes:
                if id(node) not in in_model:
                    continue
                kwargs = {k: _encode(v, node_index) for k, v in node.kwargs.items()
                          if k != "training" or v is not None}
                nodes.append({"args": [_encode(node.inputs, node_index)]
                              + [_encode(a, node_index) for a in node.args],
                              "kwargs": kwargs})
        record["inbound_nodes"] = nodes
        records.append(record)
    inputs, outputs = model._graph[0], model._graph[1]

    def ends(s):
        if type(s) is KerasTensor:
            return _history(s, node_index)
        if isinstance(s, dict):
            return {k: ends(v) for k, v in s.items()}
        return [ends(v) for v in s]

    def top(s):  # a single tensor is a list of one, as Keras writes it
        return [ends(s)] if type(s) is KerasTensor else ends(s)

    return {"name": model.name, "trainable": model.trainable, "layers": records,
            "input_layers": top(inputs), "output_layers": top(outputs)}


def _is_history(v) -> bool:
    return (isinstance(v, list) and len(v) == 3 and isinstance(v[0], str)
            and isinstance(v[1], int) and isinstance(v[2], int))


def functional_from_config(cls, config, custom_objects=None):
    from ..saving import serialization as _config
    from ..layers import deserialize

    config = dict(config)
    made = {}  # (layer name, node index, tensor index) -> KerasTensor
    layers, pending = {}, []
    with _config.custom_object_scope(custom_objects):
        for record in config["layers"]:
            name = record.get("name") or record["config"]["name"]
            layer = deserialize({k: v for k, v in record.items()
                                 if k not in ("name", "inbound_nodes")})
            layers[name] = layer
            if type(layer).__name__ == "InputLayer":
                made[(name, 0, 0)] = layer.output
            for i, node in enumerate(record.get("inbound_nodes") or []):
                pending.append((name, i, node))

    def decode(v):
        if isinstance(v, dict) and v.get("class_name") == "__keras_tensor__":
            key = tuple(v["config"]["keras_history"])
            if key not in made:
                raise KeyError(key)
            return made[key]
        if isinstance(v, dict):
            return {k: decode(x) for k, x in v.items()}
        if isinstance(v, list):
            if _is_history(v) and tuple(v) in made:  # Keras 2's [name, node, tensor, {}]
                return made[tuple(v)]
            return [decode(x) for x in v]
        return v

    while pending:
        progressed = False
        for item in list(pending):
            name, i, node = item
            try:
                args = [decode(a) for a in node.get("args", [])]
                kwargs = {k: decode(v) for k, v in (node.get("kwargs") or {}).items()}
            except KeyError:
                continue
            out = layers[name](*args, **kwargs)
            for t_index, t in enumerate(nest.flatten(out)):
                made[(name, i, t_index)] = t
            pending.remove(item)
            progressed = True
        if not progressed:
            missing = sorted({p[0] for p in pending})
            raise ValueError(f"from_config: the calls of layer(s) {missing} need tensors no "
                             "layer in the config makes (a broken config)")

    def ends(s):
        if _is_history(s):
            return made[tuple(s)]
        if isinstance(s, dict):
            return {k: ends(v) for k, v in s.items()}
        return [ends(v) for v in s]

    def top(s):  # a list of one tensor is that tensor, as Keras reads it
        out = ends(s)
        return out[0] if isinstance(s, list) and len(s) == 1 and _is_history(s[0]) else out

    inputs, outputs = top(config["input_layers"]), top(config["output_layers"])
    return cls(inputs=inputs, outputs=outputs, name=config.get("name"),
               trainable=config.get("trainable", True))


# ---------------------------------------------------------------------------
# the .keras archive


def _compile_config(model):
    d = model.__dict__
    if not d.get("compiled"):
        return None
    from .. import losses as _losses
    from .. import metrics as _metrics
    from .. import optimizers as _optimizers

    def part(v, serialize):  # names stay names; objects become records, in their nesting
        if v is None or isinstance(v, str):
            return v
        if isinstance(v, dict):
            return {k: part(x, serialize) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [part(x, serialize) for x in v]
        return serialize(v)

    def loss_part(v):
        return part(v, _losses.serialize)

    def metric_part(v):
        return part(v, _metrics.serialize)

    cm = d.get("_compile_metrics")
    metrics, weighted = (cm._user if cm is not None else (None, None))
    cl = d.get("_compile_loss")
    return {"optimizer": _optimizers.serialize(model.optimizer), "loss": loss_part(model.loss),
            "loss_weights": cl._weights if cl is not None else None,
            "metrics": metric_part(metrics), "weighted_metrics": metric_part(weighted),
            "run_eagerly": model.run_eagerly, "steps_per_execution": d.get(
                "steps_per_execution", 1), "jit_compile": d.get("_jit_compile", "auto")}


def save_model(model, filepath, overwrite=True, zipped=None, **kwargs):
    """Write ``model`` as a ``.keras`` archive (config, compile config, weights)."""
    from ... import _files
    from ..layers import serialize
    from ..saving.weights import save_weights

    filepath = os.fspath(filepath)
    if not filepath.endswith(".keras"):
        raise ValueError(
            "Invalid filepath extension for saving. Please add either a `.keras` extension "
            "for the native Keras format (recommended) or a `.h5` extension. Use "
            f"`model.export(filepath)` if you want to export a SavedModel for use with "
            f"TFLite/TFServing/etc. Received: filepath={filepath}. (jittape writes `.keras` "
            "only; for the weights alone use save_weights(path.weights.h5))")
    if kwargs:
        raise TypeError(f"save: unexpected keyword argument(s) {sorted(kwargs)}")
    if not overwrite and os.path.exists(filepath):
        raise FileExistsError(f"save: {filepath} exists and overwrite=False")
    record = serialize(model)
    if type(model).__name__ == "Functional" and record.get("registered_name") is None:
        # where Keras 3 keeps its Functional class, so that Keras reads the archive too
        record["module"], record["registered_name"] = "keras.src.models.functional", "Functional"
    compile_config = _compile_config(model)
    if compile_config is not None:
        record["compile_config"] = compile_config
    meta = {"keras_version": "3.15.1", "jittape_version": __version__,
            "date_saved": datetime.datetime.now().strftime("%Y-%m-%d@%H:%M:%S")}
    folder = os.path.dirname(os.path.abspath(filepath))
    with tempfile.TemporaryDirectory(dir=folder, prefix=".jt-save-") as tmp:
        weights = os.path.join(tmp, "model.weights.h5")
        save_weights(model, weights)
        archive = os.path.join(tmp, "model.keras")
        with zipfile.ZipFile(archive, "w") as z:
            z.writestr("metadata.json", json.dumps(meta))
            z.writestr("config.json", json.dumps(record, default=_json_default))
            z.write(weights, "model.weights.h5")
        with open(archive, "rb") as f:
            _files.write_atomic(filepath, f.read(), durable=True)


def _json_default(value):
    import numpy as np

    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"cannot write {type(value).__name__} into a model config")


def load_model(filepath, custom_objects=None, compile=True, safe_mode=True):
    """The model a ``.keras`` archive holds (from ``model.save`` here or in Keras), with its
    weights, compiled again when it was saved compiled (and ``compile=True``)."""
    from ..layers import deserialize
    from ..saving.serialization_lib import safe_mode_scope
    from ..saving.weights import load_weights

    filepath = os.fspath(filepath)
    if not filepath.endswith(".keras"):
        raise ValueError(f"load_model: jittape reads `.keras` archives; got {filepath!r} (for "
                         "a `.weights.h5` file build the model and call load_weights)")
    with zipfile.ZipFile(filepath) as z:
        names = set(z.namelist())
        for need in ("config.json", "model.weights.h5"):
            if need not in names:
                raise ValueError(f"load_model: {filepath} is not a Keras archive (no {need})")
        record = json.loads(z.read("config.json"))
        compile_config = record.pop("compile_config", None)
        with safe_mode_scope(safe_mode):  # a Lambda layer's lambda loads only unsafe
            model = deserialize(record, custom_objects=custom_objects)
        if compile and compile_config:
            with _config.custom_object_scope(custom_objects):  # the user's losses, metrics
                _recompile(model, compile_config)
        with tempfile.TemporaryDirectory(prefix="jt-load-") as tmp:
            path = os.path.join(tmp, "model.weights.h5")
            with open(path, "wb") as f:
                f.write(z.read("model.weights.h5"))
            opt = model.__dict__.get("optimizer") if model.__dict__.get("compiled") else None
            if opt is not None and model.built and model.trainable_variables:
                import h5py

                with h5py.File(path, "r") as f:  # a built optimizer was saved: build ours
                    saved = len(f["optimizer/vars"]) if "optimizer/vars" in f else 0
                if saved > len(opt.variables):
                    opt.build(model.trainable_variables)
            load_weights(model, path)
    return model


def _recompile(model, compile_config):
    """``model.compile`` again from a saved ``compile_config``."""
    from .. import losses as _losses
    from .. import metrics as _metrics
    from .. import optimizers as _optimizers

    def resolve(v, get):
        if isinstance(v, dict) and "class_name" in v:
            return get(v)
        if isinstance(v, dict):
            return {k: resolve(x, get) for k, x in v.items()}
        if isinstance(v, list):
            return [resolve(x, get) for x in v]
        return v

    model.compile(
        optimizer=_optimizers.deserialize(compile_config["optimizer"]),
        loss=resolve(compile_config.get("loss"), _losses.get),
        loss_weights=compile_config.get("loss_weights"),
        metrics=resolve(compile_config.get("metrics"), _metrics.get),
        weighted_metrics=resolve(compile_config.get("weighted_metrics"), _metrics.get),
        run_eagerly=compile_config.get("run_eagerly", False),
        steps_per_execution=compile_config.get("steps_per_execution", 1))
