"""``jt.saved_model``: a module's variables and traced functions in a directory, loaded
back without the code that defined them (``tf.saved_model.save`` and ``load``).

``save(obj, export_dir, signatures=None)`` writes every variable reachable from ``obj``
(by the checkpoints' object paths: ``layer-0/kernel``, ``optimizer/.slots/...``), every
trace of every ``jt.function`` attribute or method of ``obj`` and of the objects under
it (a function with an ``input_signature`` is traced now if it was not), and the
``signatures``. ``load(export_dir)`` gives back an object tree of the same shape whose
functions run the saved graphs: as ``jt.function`` s, compiled and cached like any
other, reading and assigning the restored variables. Nothing is pickled: the graphs are
IR text, everything else JSON and ``.npz`` archives that ``np.load(allow_pickle=False)``
reads.

An export directory (format version 1)::

    saved_model.json            what the directory holds (below); written last
    variables/variables.jtckpt  the variables: an .npz archive, one array per object
                                path (the format of jt.train.Checkpoint's files)
    captures.npz                arrays the traces captured (eager tensors they used)
    functions/<k>.jtir          trace k's graph as IR text (``jittape.compiler.ir_text.dump_graph``)

``saved_model.json``: ``format`` ("jittape.saved_model"), ``version``; ``objects``: per
object path, its class, name and children (``[name, "object" | "variable", path]``,
a name ``a/0`` being inside a list or dict attribute ``a``) and its ``variables``,
``trainable_variables`` and ``non_trainable_variables`` in its own order;
``variables``: per path, name, dtype, shape and ``trainable``; ``concrete_functions``:
per trace, its graph's file, what feeds each graph input (``{"arg": leaf}``,
``{"variable": path}`` or ``{"capture": key}``), the input structure (``args``,
``kwargs``: TensorSpecs, a None dim for a symbolic size, and Python literals), the
output structure and which graph output each leaf is, the variables assigned from
graph outputs after each call (``writes``) and the ``jt.print`` calls; ``functions``:
per saved ``jt.function``, the object and attribute it is at, its parameters and its
traces; ``signatures``: per name, its trace and its input and output names.

What cannot be saved raises a ``ValueError`` naming the function: a trace that draws
random values (the generator is Python state), a ``jt.print`` to a Python stream
object, an op attribute holding a Python object, a variable not reachable from
``obj``, an argument or result that is neither a tensor nor a Python literal. Keras'
own compiled loops (``train_function``, ``test_function``, ``predict_function``) are
not saved, as in tf.keras.

The directory is written beside ``export_dir`` (``.<name>.<random>.tmp``) and takes its
place only when complete: a crash during a save leaves the previous export whole (on
Linux the two directories are exchanged in one step; elsewhere, by two renames).
"""

from __future__ import annotations

import ctypes
import io
import json
import os
import shutil
import tempfile

import numpy as np

from .. import _files
from .. import nest
from .. import train as _train
from ..function import ConcreteFunction, Function, TensorSpec
from ..compiler.ir import GraphTextError, dump_graph, parse_graph
from ..module import Module
from ..tensor import Variable
from . import encode as E
from .restore import (RestoredConcrete, RestoredFunction, RestoredObject, SignatureFunction,
                      identifiers, set_children)

__all__ = ["save", "load", "SAVED_MODEL_VERSION"]

SAVED_MODEL_VERSION = 1
_FORMAT = "jittape.saved_model"
_META = "saved_model.json"
_VARIABLES = "variables/variables.jtckpt"
_CAPTURES = "captures.npz"
# Keras' compiled loops, made again by compile() (tf.keras does not save them either)
_NOT_SAVED = frozenset({"train_function", "test_function", "predict_function"})


# ---------------------------------------------------------------------------
# Saving


def _functions_of(obj) -> list:
    """``(attribute, function)`` of one object: its ``jt.function`` attributes and the
    instance's own Function of each ``jt.function`` method of its class, by name."""
    names = {name for klass in type(obj).__mro__ for name, a in vars(klass).items()
             if isinstance(a, Function)}
    names |= {name for name, a in getattr(obj, "__dict__", {}).items()
              if isinstance(a, (Function, RestoredFunction))}
    out = []
    for name in sorted(names - _NOT_SAVED):
        f = getattr(obj, name, None)
        if isinstance(f, (Function, RestoredFunction)):
            out.append((name, f))
    return out


def _traces(fn: Function) -> list:
    """A Function's traces, oldest first; one for its input_signature is made now."""
    if fn.input_signature is not None:
        fn.get_concrete_function(*fn.input_signature)
    return sorted(fn._cache.values(), key=lambda cf: cf.call_number)


class _Exporter:
    """Collects what a saved model holds: the object graph, the traces, the files."""

    def __init__(self, root):
        self.variables, self.objects = _train._graph(root)
        self.var_path = {id(v): p for p, v in self.variables.items()}
        self.obj_path = {id(o): p for p, o in self.objects.items()}
        self.files: dict = {}  # relative path -> text
        self.captures: dict = {}  # key -> array
        self._capture_keys: dict = {}  # id(array) -> key
        self.concretes: list = []  # JSON records
        self._index: dict = {}  # id(ConcreteFunction or RestoredConcrete) -> index

    def fail(self, label, msg):
        return ValueError(f"jt.saved_model.save: {label}: {msg}")

    def _var(self, v, label, how) -> str:
        path = self.var_path.get(id(v))
        if path is None:
            raise self.fail(label, f"it {how} variable {v._label!r}, which is not reachable from "
                            "the object saved: assign the variable (or the object holding it, "
                            "an optimizer say) to an attribute, so that the saved model holds it")
        return path

    def trace(self, c, label) -> int:
        """The index of a trace's record (a ConcreteFunction or a restored one)."""
        k = self._index.get(id(c))
        if k is not None:
            return k
        try:
            t = c if isinstance(c, RestoredConcrete) else E.trace_of(c)
            text = dump_graph(t.graph)
            rec = self._record(t, label)
        except (E.NotSaveable, GraphTextError) as e:
            raise self.fail(label, str(e)) from None
        k = self._index[id(c)] = len(self.concretes)
        rec["file"] = f"functions/{k}.jtir"
        self.files[rec["file"]] = text
        self.concretes.append(rec)
        return k

    def _record(self, t: E.Trace, label) -> dict:
        inputs = []
        for kind, x in t.feeds:
            if kind == "arg":
                inputs.append({"arg": x})
            elif kind == "variable":
                inputs.append({"variable": self._var(x, label, "reads")})
            else:
                key = self._capture_keys.get(id(x))
                if key is None:
                    key = self._capture_keys[id(x)] = f"c{len(self.captures)}"
                    self.captures[key] = x
                inputs.append({"capture": key})
        return {
            "name": t.name, "inputs": inputs,
            "args": E.nest_to_json(t.args, E.arg_leaf_to_json),
            "kwargs": E.nest_to_json(t.kwargs, E.arg_leaf_to_json),
            "outputs": t.outputs, "out_plan": t.out_plan,
            "writes": [[self._var(v, label, "assigns"), k] for v, k in t.writes],
            "prints": t.prints,
        }

    def function(self, opath, attr, fn) -> dict:
        where = f"function {attr!r}" + (f" of {opath!r}" if opath else "")
        if isinstance(fn, RestoredFunction):
            traces = fn._concretes
        else:
            where += f" (jt.function {fn._name!r})"
            try:
                traces = _traces(fn)
            except Exception as e:
                raise self.fail(where, f"tracing it for its input_signature failed: "
                                f"{type(e).__name__}: {e}") from e
        n = len(traces)
        params = E.parameters_to_json(fn._binding.sig)
        return {"object": opath, "attribute": attr, "name": fn._name, "parameters": params,
                "concrete": [self.trace(c, where + (f", trace {k + 1} of {n}" if n > 1 else ""))
                             for k, c in enumerate(traces)]}

    def signature(self, key, s) -> dict:
        label = f"signature {key!r}"
        names = None
        if isinstance(s, SignatureFunction):  # of a loaded saved model
            c, names = s._concrete, s._inputs
        elif isinstance(s, Function):
            if s.input_signature is None:
                raise TypeError(
                    f"jt.saved_model.save: {label}: jt.function {s._name!r} has no "
                    "input_signature; a signature is a jt.function with one, or a concrete "
                    "function (f.get_concrete_function(jt.TensorSpec(...)))")
            names = [sp.name for sp in E.flat_specs(s.input_signature)]
            c = s.get_concrete_function(*s.input_signature)
        elif isinstance(s, ConcreteFunction):
            c = s
            fn = getattr(s, "_function", None)
            fn = fn() if fn is not None else None
            if fn is not None and fn.input_signature is not None:
                names = [sp.name for sp in E.flat_specs(fn.input_signature)]
        elif isinstance(s, RestoredConcrete):
            c = s
        else:
            raise TypeError(f"jt.saved_model.save: {label} is a {type(s).__name__}; a "
                            "signature is a jt.function with an input_signature or a concrete "
                            "function")
        k = self.trace(c, label)
        rec = self.concretes[k]
        structure = (c.args, c.kwargs) if isinstance(c, RestoredConcrete) else c.input_structure
        if not all(isinstance(x, TensorSpec) for x in nest.flatten(list(structure))):
            raise self.fail(label, "its arguments include Python values; a signature takes "
                            "tensors only (a jt.TensorSpec for every argument)")
        specs = E.flat_specs(structure)
        inputs = identifiers([n or sp.name for n, sp in zip(names or [None] * len(specs),
                                                            specs)])
        outs = rec["outputs"]
        if "dict" in outs:
            keys = [E.value_from_json(k) for k, _ in outs["dict"]]
            items = [v for _, v in outs["dict"]]
            if not all(isinstance(x, str) for x in keys):
                raise self.fail(label, "it returns a dict with keys that are not strings")
        else:
            items = outs.get("list", outs.get("tuple", [outs]))
            keys = [f"output_{j}" for j in range(len(items))]
        if not all("leaf" in x and type(rec["out_plan"][x["leaf"]]) is int for x in items):
            raise self.fail(label, "outputs of a signature must be a single tensor, a sequence "
                            "of tensors, or a dict from string to tensor")
        return {"concrete": k, "inputs": inputs, "outputs": keys}

    def meta(self) -> dict:
        objects = {}
        for path, o in self.objects.items():
            children = []
            for name, child in _train._children(o):
                target = self.var_path.get(id(child)) if isinstance(child, Variable) else \
                    self.obj_path.get(id(child))
                if target is not None:
                    children.append([name, "variable" if isinstance(child, Variable)
                                     else "object", target])
            cls = o._saved_class if isinstance(o, RestoredObject) else type(o).__qualname__
            info = {"class": cls, "children": children}
            if isinstance(getattr(o, "name", None), str):
                info["name"] = o.name
            for attr in ("variables", "trainable_variables", "non_trainable_variables"):
                if hasattr(type(o), attr):
                    info[attr] = [self.var_path[id(v)] for v in getattr(o, attr)
                                  if id(v) in self.var_path]
            objects[path] = info
        variables = {p: {"name": v._name, "trainable": v.trainable, "dtype": v.dtype.name,
                         "shape": list(v.shape)} for p, v in self.variables.items()}
        return {"format": _FORMAT, "version": SAVED_MODEL_VERSION, "objects": objects,
                "variables": variables, "concrete_functions": self.concretes}


def save(obj, export_dir, signatures=None, options=None):
    """Save ``obj`` (a ``jt.Module``: a layer, a model, a module) to ``export_dir``.

    Args:
        obj: the root of the object tree saved.
        export_dir: the directory to write (replaced whole if it holds a saved model).
        signatures: a ``jt.function`` with an ``input_signature``, a concrete function,
            or a dict of names to them; a single one is ``"serving_default"``.
        options: accepted for TF compatibility and ignored.

    Example::

        class Scale(jt.Module):
            def __init__(self):
                super().__init__()
                self.w = jt.Variable(2.0)

            @jt.function(input_signature=[jt.TensorSpec([None], jt.float32)])
            def __call__(self, x):
                return x * self.w

        jt.saved_model.save(Scale(), "/tmp/scale")
        jt.saved_model.load("/tmp/scale")(jt.constant([1.0, 2.0]))  # [2., 4.]
    """
    if not isinstance(obj, Module):
        raise TypeError(f"jt.saved_model.save: obj must be a jt.Module (a layer, a model, a "
                        f"module), got {type(obj).__name__}")
    ex = _Exporter(obj)
    functions = [ex.function(opath, attr, fn) for opath, o in ex.objects.items()
                 for attr, fn in _functions_of(o)]
    if signatures is not None and not isinstance(signatures, dict):
        signatures = {"serving_default": signatures}
    sigs = {}
    for key, s in (signatures or {}).items():
        if not isinstance(key, str):
            raise TypeError(f"jt.saved_model.save: signature names must be strings, got "
                            f"{key!r}")
        sigs[key] = ex.signature(key, s)
    meta = ex.meta()
    meta["functions"] = functions
    meta["signatures"] = sigs
    _write(os.fspath(export_dir), ex, meta)


def _npz(arrays: dict) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **{k: np.asarray(v) for k, v in arrays.items()})
    return buf.getvalue()


def _write(export_dir: str, ex: _Exporter, meta: dict) -> None:
    """Write the directory beside ``export_dir`` and put it in its place when whole."""
    target = os.path.abspath(export_dir)
    if os.path.exists(target) and not _replaceable(target):
        raise FileExistsError(
            f"jt.saved_model.save: {export_dir!r} exists and is not a saved model (it has no "
            f"{_META}); not replacing it: remove it, or save elsewhere")
    parent, base = os.path.split(target)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{base}.", suffix=".tmp", dir=parent)
    try:
        files = dict(ex.files)
        files[_VARIABLES] = _npz({p: v._value for p, v in ex.variables.items()})
        files[_CAPTURES] = _npz(ex.captures)
        files[_META] = json.dumps(meta, indent=1, allow_nan=False) + "\n"  # last: complete
        for rel, data in files.items():
            path = os.path.join(tmp, *rel.split("/"))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            _files.write_atomic(path, data, durable=True)
        if os.path.exists(target):
            _exchange(tmp, target)  # tmp now holds the previous export
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            os.rename(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _replaceable(path: str) -> bool:
    return os.path.isdir(path) and (not os.listdir(path) or os.path.exists(
        os.path.join(path, _META)))


def _exchange(a: str, b: str) -> None:
    """Swap two directories: at once with Linux's renameat2(RENAME_EXCHANGE), else by
    two renames (between them ``b`` is missing; the previous export is whole at ``a``)."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
        renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                              ctypes.c_uint]
    except (OSError, AttributeError):  # not Linux, or a libc without it
        renameat2 = None
    at_fdcwd, rename_exchange = -100, 2
    if renameat2 is not None and renameat2(at_fdcwd, os.fsencode(a), at_fdcwd,
                                           os.fsencode(b), rename_exchange) == 0:
        return
    aside = a + ".old"
    os.rename(b, aside)
    os.rename(a, b)
    os.rename(aside, a)


# ---------------------------------------------------------------------------
# Loading


def load(export_dir, tags=None, options=None):
    """The object saved in ``export_dir``, restored (see :class:`RestoredObject`).

    Its attributes mirror the saved object's (submodules, variables with their saved
    values, lists and dicts of them), its ``jt.function`` s are callable with the
    arguments of their saved traces, and ``signatures`` holds the saved signatures.
    ``tags`` and ``options`` are accepted for TF compatibility and ignored.

    Example::

        loaded = jt.saved_model.load("/tmp/scale")
        loaded.signatures["serving_default"](x=jt.constant([1.0]))  # {"output_0": ...}
    """
    d = os.fspath(export_dir)
    meta_path = os.path.join(d, _META)
    if not os.path.exists(meta_path):
        raise FileNotFoundError(f"jt.saved_model.load: no saved model at {d!r} (no {_META})")
    try:
        with open(meta_path, encoding="utf-8") as f:
            meta = json.load(f)
    except ValueError as e:
        raise ValueError(f"jt.saved_model.load: {meta_path!r} is not readable JSON ({e})") from None
    if not isinstance(meta, dict) or meta.get("format") != _FORMAT:
        raise ValueError(f"jt.saved_model.load: {meta_path!r} is not a jittape saved model")
    if not isinstance(meta.get("version"), int) or meta["version"] > SAVED_MODEL_VERSION:
        raise ValueError(
            f"jt.saved_model.load: {d!r} has format version {meta.get('version')!r}, newer "
            f"than this jittape reads (up to {SAVED_MODEL_VERSION})")
    values = _read_npz(os.path.join(d, *_VARIABLES.split("/")))
    captures = _read_npz(os.path.join(d, _CAPTURES))
    variables = {}
    for path, info in meta["variables"].items():
        if path not in values:
            raise ValueError(f"jt.saved_model.load: {d!r} has no value for variable {path!r}")
        a = values[path]
        if list(a.shape) != info["shape"] or a.dtype.name != info["dtype"]:
            raise ValueError(f"jt.saved_model.load: variable {path!r} is {a.dtype.name}"
                             f"{list(a.shape)} in the archive, {info['dtype']}{info['shape']} "
                             "in the metadata")
        v = Variable(a, trainable=info["trainable"])
        v._name = info["name"]
        variables[path] = v
    objects = {p: RestoredObject(info.get("name"), info["class"], {
        k: [variables[q] for q in info[k]] for k in (
            "variables", "trainable_variables", "non_trainable_variables") if k in info})
        for p, info in meta["objects"].items()}
    reached = set()
    for p, info in meta["objects"].items():
        kids = []
        for name, kind, target in info["children"]:
            kids.append((name, variables[target] if kind == "variable" else objects[target]))
            if kind == "variable":
                reached.add(target)
        set_children(objects[p], kids)
    for p in sorted(set(variables) - reached):  # optimizer slots: under their optimizer
        owner = max((q for q in objects if q == "" or p.startswith(q + "/")), key=len)
        set_children(objects[owner], [(p[len(owner) + 1:] if owner else p, variables[p])])
    concretes = [_restore_trace(d, rec, variables, captures)
                 for rec in meta["concrete_functions"]]
    for f in meta["functions"]:
        fn = RestoredFunction(f["name"], E.parameters_from_json(f["parameters"]),
                              [concretes[k] for k in f["concrete"]])
        objects[f["object"]].__dict__[f["attribute"]] = fn
    root = objects[""]
    for key, s in meta["signatures"].items():
        root._signatures[key] = SignatureFunction(key, concretes[s["concrete"]], s["inputs"],
                                                  s["outputs"])
    return root


def _read_npz(path: str) -> dict:
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except Exception as e:  # noqa: BLE001 - name the file whatever numpy says
        raise ValueError(f"jt.saved_model.load: {path!r} is not a readable archive "
                         f"({type(e).__name__}: {e})") from None


def _restore_trace(d, rec, variables, captures) -> RestoredConcrete:
    with open(os.path.join(d, *rec["file"].split("/")), encoding="utf-8") as f:
        graph = parse_graph(f.read())
    feeds = []
    for src in rec["inputs"]:
        if "arg" in src:
            feeds.append(("arg", src["arg"]))
        elif "variable" in src:
            feeds.append(("variable", variables[src["variable"]]))
        else:
            feeds.append(("capture", captures[src["capture"]]))
    if len(feeds) != len(graph.inputs):
        raise ValueError(f"jt.saved_model.load: {rec['file']!r} has {len(graph.inputs)} "
                         f"inputs, the metadata feeds {len(feeds)}")
    args = E.nest_from_json(rec["args"], E.arg_leaf_from_json)
    kwargs = E.nest_from_json(rec["kwargs"], E.arg_leaf_from_json)
    writes = [(variables[p], k) for p, k in rec["writes"]]
    return RestoredConcrete(E.Trace(rec["name"], graph, feeds, tuple(args), dict(kwargs),
                                    rec["outputs"], rec["out_plan"], writes, rec["prints"]))
