"""Keras 3's ``.weights.h5`` files: ``save_weights`` / ``load_weights`` for layers and models.

A file written here loads into the same architecture built with Keras 3
(``model.load_weights``), and one Keras 3.15 writes loads here. The layout is Keras'::

    vars                              the model's own variables: datasets "0", "1", ...
    layers/dense/vars                 a Sequential's or functional model's layers
    layers/dense_1/vars                 (a subclassed Model's ``layers`` too)
    encoder/vars                      a layer held by the attribute ``encoder``
    encoder/layers/dense/vars           its own layers below it
    blocks/dense/vars                 a layer in a list, tuple or dict attribute
    blocks/container/dense/vars         (a nested list: "container", "container_1")
    optimizer/vars                    iterations, learning_rate, then the slot variables

Every ``vars`` group carries one attribute, ``name`` (the object's name; information
only, loading never reads it). A layer's variables are numbered trainable ones first,
then non-trainable ones, each in creation order (a BatchNormalization: gamma, beta,
moving_mean, moving_variance). A layer without variables (Dropout) still has its
empty ``vars`` group.

The walk, as Keras 3 walks objects: a model's own variables, then its children. A
Sequential's or functional model's children are its ``layers`` first; then, for every
layer, its attributes in name order (names starting with "_" last), skipping those a
bare ``Layer`` has (a subclassed ``Model``'s ``layers`` property is walked, so layers
held by attributes named after "layers" land under ``layers/``). A layer or optimizer
is written at the first path that reaches it; in a list the name is the class name in
snake case, numbered within that list (``dense``, ``dense_1``); a dict is walked by its
values in insertion order. Names given to layers never appear in paths, so a file loads
into any instance of the same architecture, whatever its layers are called.

Which walk an object gets is what its ``_obj_type()`` says (Keras 3's
``KerasSaveable._obj_type``): ``jt.Sequential``'s; a functional model's when its class is
jittape's ``Functional``, or jittape's ``Model`` with an ``InputLayer`` first in its
``layers``; a subclassed model's for jittape's ``Model`` otherwise; a layer's for the
rest, an optimizer's for an optimizer; objects without ``_obj_type`` are not saved. A
layer's class can say which with ``_keras_saving_kind = "Sequential"``, ``"Functional"``,
``"Model"`` or ``"Layer"``.

``load_weights`` checks the whole file against the model before it assigns anything:
every object's group, the number of its variables and each shape. A mismatch is an
error naming the first mismatching path (``skip_mismatch=True``: a warning, and the
mismatching objects keep their values). Groups in the file that the model does not
reach are ignored, as Keras ignores them.
"""

from __future__ import annotations

import os
import re
import secrets
import warnings
from typing import NamedTuple

import numpy as np

from ...tensor import function_tracer

__all__ = ["save_weights", "load_weights", "weight_paths"]

_SUFFIX = ".weights.h5"


class _Entry(NamedTuple):
    """One object of the file: its group, the object and its variables in file order."""

    path: str  # "" for the root
    obj: object
    variables: list


# ---------------------------------------------------------------------------
# The walk


def _snake_case(name: str) -> str:
    """Keras' name of a class in a list: ``"BatchNormalization"`` -> ``"batch_normalization"``,
    ``"Conv2D"`` -> ``"conv2d"`` (digits do not start a word, unlike layer names)."""
    name = re.sub(r"\W+", "", name)
    name = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub(r"([a-z])([A-Z])", r"\1_\2", name).lower()


def _sort_key(attr: str) -> str:
    return "~" + attr if attr.startswith("_") else attr  # private attributes last


def _obj_type(obj) -> str | None:
    """What ``obj`` says it is (Keras 3's ``KerasSaveable._obj_type``): "Layer",
    "Sequential", "Functional", "Model" or "Optimizer"; None for an object that does not
    say (it is not saved)."""
    obj_type = getattr(type(obj), "_obj_type", None)  # on the class: not a class itself
    return None if obj_type is None else obj_type(obj)


def _kind(obj) -> str | None:
    """How the walk treats ``obj``: "Sequential", "Functional", "Model" (subclassed),
    "Layer", "Optimizer", or None (not saved)."""
    kind = _obj_type(obj)
    if kind is None or kind == "Optimizer":
        return kind
    said = getattr(obj, "_keras_saving_kind", None)  # a model may say which it is
    return kind if said is None else said


def _saveable_base(obj) -> type:
    """The base class of ``obj``'s kind: the first class (from ``object`` up) of its
    MRO that defines ``_obj_type`` (jittape's ``Layer`` or ``Optimizer``)."""
    return [c for c in type(obj).__mro__ if "_obj_type" in c.__dict__][-1]


_SKIP: dict = {}


def _skipped(kind: str, obj) -> frozenset:
    """The attributes the walk does not visit: those of a bare jittape ``Layer`` (or
    ``Optimizer``), as Keras skips those of its bare ``Layer``. A bare jittape layer has
    a ``layers`` property, a bare Keras layer does not: it is walked on models only."""
    base = _saveable_base(obj)
    skip = _SKIP.get((kind, base))
    if skip is None:
        if kind == "Optimizer":
            try:
                skip = set(dir(base(learning_rate=1.0, name="saving_probe")))
            except TypeError:  # a base class that cannot be made: its class attributes
                skip = set(dir(base))
        else:
            skip = set(dir(base(name="saving_probe")))  # a name: no counter advances
            if kind == "Model":
                skip.discard("layers")
            elif kind == "Functional":
                skip |= {"operations", "_operations"}
        _SKIP[(kind, base)] = skip = frozenset(skip)
    return skip


def _children(obj, kind: str):
    """``(attribute, value)`` pairs the walk visits below ``obj``, in order."""
    if kind in ("Sequential", "Functional"):
        yield "layers", list(obj.layers)
    skip = _skipped(kind, obj)
    for attr in sorted(dir(obj), key=_sort_key):
        if attr.startswith("__") or attr in skip:
            continue
        try:
            value = getattr(obj, attr)
        except Exception:  # noqa: BLE001 - a property that raises is not state
            continue
        yield attr, value


def _layer_variables(layer) -> list:
    own = list({id(v): v for v in layer._own_weights}.values())  # duplicates dropped
    # trainable as created, not as now: freezing a layer does not renumber its weights
    made = {id(v) for v in layer.__dict__.get("_made_trainable", ())}
    return [v for v in own if id(v) in made] + [v for v in own if id(v) not in made]


# Keras' order of each optimizer's slot variables, by jittape's slot names: groups of
# slots, each group interleaved over the variables (Adam: m, v of the first variable,
# m, v of the second, ..., then every vhat). Keras names them momentum (m), velocity (v,
# and RMSprop's rms), velocity_hat (vhat), average_gradient (mg). An optimizer not listed
# keeps its slots interleaved in its own order.
_SLOT_LAYOUT = {
    "SGD": (("momentum",),),
    "Adam": (("m", "v"), ("vhat",)),
    "AdamW": (("m", "v"), ("vhat",)),
    "RMSprop": (("rms",), ("momentum",), ("mg",)),
}


def _optimizer_variables(opt) -> list:
    """``iterations``, the learning-rate variable (none for a schedule), then the slot
    variables in Keras' order."""
    slot_ids = {id(s) for s in opt._slot_variables}
    head = [v for v in opt.variables if id(v) not in slot_ids]
    slots = list(opt._slots.values())  # {slot name: Variable} per variable, as first seen
    layout = None
    for cls in type(opt).__mro__:
        layout = _SLOT_LAYOUT.get(cls.__name__)
        if layout is not None:
            break
    if layout is None:
        layout = (tuple(dict.fromkeys(n for s in slots for n in s)),)
    out = [s[n] for group in layout for s in slots for n in group if n in s]
    placed = {id(v) for v in out}
    return head + out + [v for v in opt._slot_variables if id(v) not in placed]


def _own_variables(obj, kind) -> list:
    return _optimizer_variables(obj) if kind == "Optimizer" else _layer_variables(obj)


def _join(path: str, name: str) -> str:
    return f"{path}/{name}" if path else name


def _plan(root) -> list:
    """Every object the file holds, as ``_Entry`` in walk order."""
    out: list = []
    _visit(root, _kind(root), "", set(), out)
    return out


def _visit(obj, kind, path, visited, out):
    if id(obj) in visited:
        return
    visited.add(id(obj))
    out.append(_Entry(path, obj, _own_variables(obj, kind)))
    for attr, value in _children(obj, kind):
        _visit_value(value, _join(path, attr), visited, out, set())


def _visit_value(value, path, visited, out, containers):
    kind = _kind(value)
    if kind is not None:
        _visit(value, kind, path, visited, out)
    elif isinstance(value, (list, tuple, dict)):
        if id(value) in containers:
            return
        containers.add(id(value))
        used: dict = {}
        for item in (value.values() if isinstance(value, dict) else value):
            item_kind = _kind(item)
            if item_kind is not None:
                name = _snake_case(type(item).__name__)
            elif isinstance(item, (list, tuple, dict)):
                name = "container"
            else:
                continue
            n = used.get(name)
            used[name] = 0 if n is None else n + 1
            child = _join(path, name if n is None else f"{name}_{n + 1}")
            if item_kind is not None:
                _visit(item, item_kind, child, visited, out)
            else:
                _visit_value(item, child, visited, out, containers)


def weight_paths(model) -> dict:
    """The dataset path of each variable in the file ``save_weights`` writes.

    Example::

        model = jt.Sequential([jt.layers.Dense(2, input_shape=(3,))])
        list(jittape.keras.saving.weights.weight_paths(model))
        # ["layers/dense/vars/0", "layers/dense/vars/1"]
    """
    _check_model(model, "weight_paths")
    return {f"{_vars_path(e.path)}/{i}": v for e in _plan(model) for i, v in enumerate(e.variables)}


# ---------------------------------------------------------------------------
# Checks shared by saving and loading


def _vars_path(path: str) -> str:
    return _join(path, "vars")


def _describe(obj) -> str:
    return f'{type(obj).__name__} "{getattr(obj, "name", "?")}"'


def _check_model(model, what):
    if _obj_type(model) in (None, "Optimizer"):  # a layer or model says another type
        raise TypeError(f"{what}: expected a jt.layers.Layer or model, got {type(model).__name__}")


def _check_filepath(filepath, what) -> str:
    try:
        path = os.fspath(filepath)
    except TypeError:
        raise TypeError(f"{what}: filepath must be a str or os.PathLike, got "
                        f"{type(filepath).__name__} ({filepath!r})") from None
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not path.endswith(_SUFFIX):
        if what == "save_weights":
            raise ValueError(f"The filename must end in `.weights.h5`. Received: filepath={path}")
        raise ValueError(
            f"File format not supported: filepath={path}. jittape's load_weights reads Keras 3 "
            "`.weights.h5` files (not `.keras` archives, sharded `.weights.json` files or "
            "the legacy `.h5` format)")
    return path


def _check_eager(what):
    if function_tracer() is not None:
        raise RuntimeError(
            f"{what} inside a jt.function: the function's Python runs once, when it is traced, "
            f"so the file would be touched once and never again; call {what} outside it")


def _check_built(model, what):
    if not model.built:
        verb = "saving" if what == "save_weights" else "loading weights into"
        raise ValueError(
            f"You are {verb} a model that has not yet been built ({_describe(model)}). Try "
            "building the model first by calling it on some data or by using `build()`.")


def _h5py():
    """h5py (a dependency, as Keras's), imported when weights are first saved or loaded:
    ``import jittape.keras`` does not pay for it."""
    import h5py

    return h5py


# ---------------------------------------------------------------------------
# Saving


def save_weights(model, filepath, overwrite=True):
    """Write ``model``'s weights to a Keras 3 ``.weights.h5`` file.

    Args:
        model: a built ``jt.layers.Layer`` (a Sequential, a subclassed layer or model).
        filepath: a path ending in ``.weights.h5``.
        overwrite: when False, an existing file is an error (``FileExistsError``)
            instead of being replaced (Keras asks on the terminal).

    The file is written to a temporary file beside it, flushed to disk and renamed, so
    an interrupted save leaves the previous file whole.

    Example::

        model.save_weights("model.weights.h5")   # keras_model.load_weights(...) reads it
    """
    path = _check_filepath(filepath, "save_weights")
    _check_model(model, "save_weights")
    _check_eager("save_weights")
    _check_built(model, "save_weights")
    if not overwrite and os.path.exists(path):
        raise FileExistsError(f"save_weights: {path!r} exists and overwrite=False; pass "
                              "overwrite=True to replace it")
    h5py = _h5py()
    entries = _plan(model)
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"save_weights: the directory {directory!r} does not exist")
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{secrets.token_hex(4)}.tmp")
    try:
        with h5py.File(tmp, "x") as f:  # "x": a new file, never someone else's
            for e in entries:
                _write_entry(f, e)
        _fsync(tmp)
        if overwrite:
            os.replace(tmp, path)
        else:
            _publish_new(tmp, path)
        _fsync_directory(directory)
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


def _write_entry(f, entry: _Entry):
    group = f.require_group(entry.path).create_group("vars") if entry.path else (
        f.create_group("vars"))
    name = getattr(entry.obj, "name", None)
    if isinstance(name, str):
        group.attrs["name"] = name
    for i, v in enumerate(entry.variables):
        group.create_dataset(str(i), data=np.asarray(v))  # no tape sees this read


def _fsync(path):
    fd = os.open(path, os.O_RDWR)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_directory(directory):
    """Make the rename durable too (where directories can be opened: not on Windows)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _publish_new(tmp, path):
    """Rename ``tmp`` to ``path`` unless ``path`` exists (checked and done at once, by a
    hard link, where the file system has them)."""
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise FileExistsError(f"save_weights: {path!r} exists and overwrite=False; pass "
                              "overwrite=True to replace it") from None
    except OSError:  # no hard links here: the check above has to do
        if os.path.exists(path):
            raise FileExistsError(f"save_weights: {path!r} exists and overwrite=False") from None
        os.replace(tmp, path)


# ---------------------------------------------------------------------------
# Loading


def load_weights(model, filepath, skip_mismatch=False):
    """Load a Keras 3 ``.weights.h5`` file (written by Keras or by ``save_weights``).

    Args:
        model: a built ``jt.layers.Layer`` of the architecture the file was saved from.
        filepath: a path ending in ``.weights.h5``.
        skip_mismatch: when True, objects whose variables do not fit (their number or
            a shape) keep their values and a ``UserWarning`` lists them; otherwise they
            are a ``ValueError`` and nothing is loaded.

    The whole file is checked before any variable is assigned. An optimizer whose
    number of variables differs (one not built yet) is skipped with a warning, as Keras
    skips it. Variables are assigned in place, so a ``jt.function`` traced before sees
    the loaded values without a retrace.

    Example::

        model = make_model()           # the same architecture, built
        model.load_weights("model.weights.h5")
    """
    path = _check_filepath(filepath, "load_weights")
    _check_model(model, "load_weights")
    _check_eager("load_weights")
    _check_built(model, "load_weights")
    h5py = _h5py()
    if not os.path.isfile(path):
        raise FileNotFoundError(f"load_weights: no such file: {path!r}")
    entries = _plan(model)
    fits, mismatched = [], []
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise ValueError(f"load_weights: {path!r} is not an HDF5 weights file ({e})") from None
    with f:
        for e in entries:
            group, where = _find_group(h5py, f, e.path)
            datasets = _datasets(h5py, group, where)
            if _is_optimizer(e.obj) and len(datasets) != len(e.variables):
                warnings.warn(_optimizer_skip_message(e, datasets), UserWarning, stacklevel=3)
                continue
            ordered, problem = _match(e, datasets, where, group is not None)
            if problem is None:
                fits.append((e, ordered))
            else:
                mismatched.append((e, problem))
        if mismatched and not skip_mismatch:
            raise ValueError(_mismatch_message(path, model, mismatched, loaded=False))
        values = [(v, _read(ds, where)) for e, ordered in fits
                  for v, (where, ds) in zip(e.variables, ordered)]
    for v, a in values:
        v._set(a.astype(v.dtype._np, copy=False))  # in place: traced functions see it
    if mismatched:
        warnings.warn(_mismatch_message(path, model, mismatched, loaded=True), UserWarning,
                      stacklevel=3)


def _is_optimizer(obj) -> bool:
    return _obj_type(obj) == "Optimizer"


def _hard_child(h5py, parent, name, want, where):
    """``parent[name]`` when it is a hard link to a ``want`` (Group or Dataset), else
    None; a soft or external link is refused (it could point outside the file)."""
    if name not in parent:
        return None
    link = parent.get(name, getlink=True)
    if not isinstance(link, h5py.HardLink):
        raise ValueError(f"load_weights: {where} is a {type(link).__name__}; weights files "
                         "with soft or external links are not read")
    obj = parent[name]
    return obj if isinstance(obj, want) else None


def _find_group(h5py, f, path):
    """The ``vars`` group of ``path`` (Keras 2.13's files named ``layers``
    ``_layer_checkpoint_dependencies``) and its path, or None when the file has none."""
    candidates = [path]
    if path and "_layer_checkpoint_dependencies" in f and "layers" in path.split("/"):
        candidates.append("/".join("_layer_checkpoint_dependencies" if p == "layers" else p
                                   for p in path.split("/")))
    for p in candidates:
        group, where = f, ""
        for part in [*p.split("/"), "vars"] if p else ["vars"]:
            where = _join(where, part)
            group = _hard_child(h5py, group, part, h5py.Group, where)
            if group is None:
                break
        if group is not None:
            return group, where
    return None, _vars_path(path)


def _datasets(h5py, group, where) -> list:
    """``[(path, dataset)]`` of a ``vars`` group, by key (None: no group)."""
    if group is None:
        return []
    out = []
    for key in group:
        ds = _hard_child(h5py, group, key, h5py.Dataset, f"{where}/{key}")
        if ds is None:
            raise ValueError(f"load_weights: {where}/{key} is not a dataset; a Keras weights "
                             "file holds only datasets in its vars groups")
        if ds.external or ds.is_virtual:
            raise ValueError(f"load_weights: {where}/{key} keeps its data outside the file; "
                             "such datasets are not read")
        out.append((f"{where}/{key}", ds))
    return out


def _variable_name(v) -> str:
    """A variable as messages name it: a Keras variable's path (``dense/kernel``), a plain
    ``jt.Variable``'s TF name without the ``:0``."""
    return getattr(v, "path", None) or v._name


def _fmt(shape) -> str:
    shape = tuple(int(d) for d in shape)
    return f"({shape[0]},)" if len(shape) == 1 else "(" + ", ".join(map(str, shape)) + ")"


def _match(e: _Entry, datasets, where, found):
    """``(datasets in the order of e.variables, None)`` when the file's ``vars`` group
    fits ``e``, else ``(None, why not)``."""
    n, have = len(e.variables), len(datasets)
    if have != n:
        if n == 0 and not getattr(e.obj, "built", True):
            return None, (
                f"{where}: {_describe(e.obj)} was never built, so it has no variables, but the "
                f"file has {have} for it. A build() must create all the state of the layer, "
                "its sublayers' too (build or call it before loading)")
        names = ", ".join(_variable_name(v) for v in e.variables) or "none"
        there = f"{have} variable(s)" if found else "no group"
        return None, (f"{where}: {_describe(e.obj)} has {n} variable(s) ({names}), the file "
                      f"has {there} there")
    by_key = {p.rsplit("/", 1)[1]: (p, ds) for p, ds in datasets}
    if set(by_key) != {str(i) for i in range(n)}:
        return None, (f"{where}: the datasets are named {sorted(by_key)}, expected "
                      f"{[str(i) for i in range(n)]} (a Keras 3 weights file numbers them)")
    ordered = [by_key[str(i)] for i in range(n)]
    for v, (p, ds) in zip(e.variables, ordered):
        if tuple(ds.shape) != tuple(v.shape):
            return None, (f"{p}: variable {_variable_name(v)!r} of {_describe(e.obj)} has "
                          f"shape {_fmt(v.shape)}, the file's value has shape {_fmt(ds.shape)}")
        if ds.dtype.kind not in "biuf":
            return None, (f"{p}: the file's value has dtype {ds.dtype}, not a number "
                          f"(variable {_variable_name(v)!r} is {v.dtype.name})")
    return ordered, None


def _read(ds, where) -> np.ndarray:
    if ds.attrs.get("dtype") == "bfloat16":
        raise ValueError(f"load_weights: {where} holds bfloat16 values, which jittape does "
                         "not have; save the Keras model in float32")
    return np.asarray(ds[()])


def _optimizer_skip_message(e: _Entry, datasets) -> str:
    msg = (f"Skipping variable loading for optimizer '{e.obj.name}', because it has "
           f"{len(e.variables)} variables whereas the saved optimizer has {len(datasets)} "
           f"variables ({_vars_path(e.path)}).")
    if not e.obj._slot_variables:
        msg += (" This is likely because the optimizer has not been built yet: "
                "optimizer.build(model.trainable_variables) makes its slots.")
    return msg


def _mismatch_message(path, model, mismatched, loaded) -> str:
    first = mismatched[0][1]
    where = [f"{_vars_path(e.path)} ({_describe(e.obj)})" for e, _ in mismatched]
    tail = ("The other objects were loaded; these keep their values." if loaded else
            "Nothing was loaded; load_weights(..., skip_mismatch=True) loads the rest "
            "and skips these.")
    return (f"load_weights({path!r}): {len(mismatched)} object(s) of {_describe(model)} do "
            f"not fit the weights file. The first: {first}.\nObjects that do not fit: "
            f"{where}.\n{tail}")

