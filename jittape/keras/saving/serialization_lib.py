"""Keras 3's ``serialize_keras_object`` and ``deserialize_keras_object``: any object
(a layer, loss, metric, optimizer, initializer, ... of jittape's or of yours, a function,
plain values and containers of them) as Keras' record and back.

jittape's objects go through their family's own ``serialize``/``deserialize`` (found in
``serialization.FAMILIES``, which each family fills when imported), so the records are
the ones ``model.save`` writes and Keras reads. A class of your own that is no family's
(a plain object with ``get_config``) is written as Keras writes it, under its module
with its registered name, and read back with ``from_config``.
"""

from __future__ import annotations

import builtins
import codecs
import contextlib
import inspect
import marshal
import threading
import types
import warnings

import numpy as np

from ...tensor import Tensor, Variable, convert_to_tensor
from . import serialization as _config
from .object_registration import (custom_object, custom_object_scope, get_registered_name,
                                  get_registered_object)

__all__ = ["serialize_keras_object", "deserialize_keras_object", "safe_mode_scope"]

_PLAIN = (str, int, float, bool)
_safe = threading.local()


def _family_of(obj):
    for family in _config.FAMILIES:
        if family.base is not None and isinstance(obj, family.base):
            return family
    return None


def serialize_keras_object(obj):
    """The Keras record of ``obj``: ``{"module", "class_name", "config",
    "registered_name"}`` for an object with ``get_config`` (a layer's with its
    ``build_config``), Keras' function record for a function, and plain values, lists,
    tuples and dicts as themselves with their items serialized (numpy values as
    numbers and ``__numpy__`` records, tensors as ``__tensor__`` records).

    Example::

        record = jt.keras.saving.serialize_keras_object(jt.layers.Dense(2))
        record["module"], record["class_name"]  # "keras.layers", "Dense"
        jt.keras.saving.deserialize_keras_object(record).units  # 2
    """
    if obj is None or isinstance(obj, _PLAIN):
        return obj
    if isinstance(obj, (list, tuple)):
        items = [serialize_keras_object(x) for x in obj]
        return tuple(items) if isinstance(obj, tuple) else items
    if isinstance(obj, dict):
        return {k: serialize_keras_object(v) for k, v in obj.items()}
    if isinstance(obj, bytes):
        return {"class_name": "__bytes__", "config": {"value": obj.decode("utf-8")}}
    if isinstance(obj, slice):
        return {"class_name": "__slice__", "config": {
            "start": serialize_keras_object(obj.start), "stop": serialize_keras_object(obj.stop),
            "step": serialize_keras_object(obj.step)}}
    if obj is Ellipsis:
        return {"class_name": "__ellipsis__", "config": {}}
    if isinstance(obj, (Tensor, Variable)):
        value = np.asarray(obj.numpy())
        return {"class_name": "__tensor__",
                "config": {"value": value.tolist(), "dtype": value.dtype.name}}
    if isinstance(obj, (np.ndarray, np.generic)):
        return _config.to_plain(obj)
    if isinstance(obj, types.FunctionType) and obj.__name__ == "<lambda>":
        warnings.warn("The object being serialized includes a `lambda`: loading it needs "
                      "safe_mode=False, which runs the code the file holds. Use a named "
                      "function instead", stacklevel=2)
        return {"class_name": "__lambda__", "config": {"value": func_dump(obj)}}
    if isinstance(obj, (types.FunctionType, types.BuiltinFunctionType)):
        return _config.serialize_function(obj)
    family = _family_of(obj)
    if family is not None and family.serialize is not None:
        return family.serialize(obj)
    if not hasattr(obj, "get_config"):
        raise TypeError(f"Cannot serialize object {obj!r} of type {type(obj).__name__}: to be "
                        "serializable, a class must implement the `get_config()` method")
    config = obj.get_config()
    if not isinstance(config, dict):
        raise TypeError(f"The `get_config()` method of {obj!r} should return a dict. It "
                        f"returned: {config!r}")
    cls = type(obj)
    record = {"module": None if cls.__module__ == "__main__" else cls.__module__,
              "class_name": cls.__name__, "config": serialize_keras_object(config),
              "registered_name": get_registered_name(cls)}
    for key in ("build_config", "compile_config"):
        getter = getattr(obj, "get_" + key, None)
        value = getter() if callable(getter) else None
        if value is not None:
            record[key] = serialize_keras_object(value)
    return record


def deserialize_keras_object(config, custom_objects=None, safe_mode=True, **kwargs):
    """The object a record from ``serialize_keras_object`` (or Keras) describes: a new
    instance for a class record (``from_config``, built from its ``build_config``), the
    function for a function record, containers with their items deserialized, plain
    values as themselves; a string names a registered or ``custom_objects`` object (else
    it is a plain string).

    ``custom_objects`` (name -> class or function) and an enclosing
    ``custom_object_scope`` come before the registry and jittape's own classes.
    ``safe_mode=False`` allows a lambda's record (it runs the bytecode the record holds).
    ``module_objects`` (name -> object, as Keras' family modules pass) is looked in last.
    """
    module_objects = kwargs.pop("module_objects", None)
    if kwargs:
        raise TypeError(f"deserialize_keras_object: unexpected keyword argument(s) "
                        f"{sorted(kwargs)}")
    with safe_mode_scope(safe_mode), custom_object_scope(custom_objects):
        return _deserialize(config, module_objects)


def in_safe_mode():
    """The enclosing ``safe_mode_scope``'s flag (None outside every one)."""
    return getattr(_safe, "mode", None)


@contextlib.contextmanager
def safe_mode_scope(safe_mode=True):
    """Every nested deserialization refuses lambdas unless ``safe_mode`` is False; an
    enclosing scope's flag rules (``load_model(safe_mode=False)`` reaches a Lambda layer's
    function through the layer's ``from_config``), as Keras' ``SafeModeScope``."""
    outer = getattr(_safe, "mode", None)
    _safe.mode = safe_mode if outer is None else outer
    try:
        yield
    finally:
        _safe.mode = outer


def _deserialize(config, module_objects):
    if config is None:
        return None
    if isinstance(config, str):
        obj = get_registered_object(config, module_objects=module_objects)
        return config if obj is None else obj
    if isinstance(config, (list, tuple)):
        return [_deserialize(x, module_objects) for x in config]
    if isinstance(config, _PLAIN):
        return config
    if not isinstance(config, dict):
        raise TypeError(f"deserialize_keras_object: could not parse config: {config!r}")
    if "class_name" not in config or "config" not in config:
        return {k: _deserialize(v, module_objects) for k, v in config.items()}
    class_name = config["class_name"]
    inner = config["config"] if config["config"] is not None else {}
    if class_name == "__numpy__":
        return np.asarray(inner["value"], dtype=inner["dtype"])
    if class_name == "__tensor__":
        return convert_to_tensor(np.asarray(inner["value"], dtype=inner["dtype"]))
    if class_name == "__bytes__":
        return inner["value"].encode("utf-8")
    if class_name == "__ellipsis__":
        return Ellipsis
    if class_name == "__slice__":
        return slice(*(_deserialize(inner[k], module_objects)
                       for k in ("start", "stop", "step")))
    if class_name == "__lambda__":
        if in_safe_mode() is not False:
            raise ValueError(
                "Requested the deserialization of a Python lambda. This carries a potential "
                "risk of arbitrary code execution and thus it is disallowed by default. If "
                "you trust the source of the artifact, you can override this error by "
                "passing `safe_mode=False` to the loading function")
        return func_load(inner["value"])
    if class_name == "__keras_tensor__":
        raise ValueError("deserialize_keras_object: a `__keras_tensor__` record belongs to a "
                         "functional model's config: load the model (Model.from_config)")
    if class_name == "function":
        return _function(config, inner, module_objects)
    if not isinstance(inner, dict):
        raise TypeError(f"Expected 'config' to be a dict for {class_name}, instead got "
                        f"{type(inner).__name__}. Full config: {config}")
    cls, family = _class(config, module_objects)
    if family is not None and family.deserialize is not None:
        return family.deserialize(config)
    if inspect.isfunction(cls):
        return cls
    if not hasattr(cls, "from_config"):
        raise TypeError(f"Unable to reconstruct an instance of {class_name!r} because the "
                        f"class is missing a `from_config()` method. Full config: {config}")
    instance = cls.from_config(inner)
    build = config.get("build_config")
    if build and hasattr(instance, "build_from_config") and not getattr(instance, "built", 1):
        instance.build_from_config(build)
    compile_config = config.get("compile_config")
    if compile_config and hasattr(instance, "compile_from_config"):
        instance.compile_from_config(compile_config)
    return instance


def _function(config, name, module_objects):
    if not isinstance(name, str):
        raise TypeError(f"Expected 'config' to be a non-null str for a function, instead got "
                        f"{type(name).__name__}. Full config: {config}")
    fn = get_registered_object(name, module_objects=module_objects)
    if fn is not None:
        return fn
    module = config.get("module") or "builtins"
    for family in _config.FAMILIES:  # Keras' module, or "builtins": every family's
        if (module == "builtins" or module in family.modules) and name in family.functions:
            return family.functions[name]
    fn = _config.registered_function(name)
    if fn is not None:
        return fn
    raise TypeError(
        f"Could not locate function {name!r}. Make sure custom classes and functions are "
        "decorated with `@jt.keras.saving.register_keras_serializable()`. If they are "
        "already decorated, make sure they are all imported so that the decorator is run "
        f"before trying to load them (or pass custom_objects). Full object config: {config}")


def _class(config, module_objects):
    """The class a record names and the family that reads it (None: a plain class)."""
    class_name, module = config["class_name"], config.get("module")
    registered = config.get("registered_name") or class_name
    cls = get_registered_object(registered) or custom_object(class_name)
    if cls is None and module_objects:
        cls = module_objects.get(class_name)
    if cls is not None:
        if not inspect.isclass(cls):
            return cls, None
        family = next((f for f in _config.FAMILIES
                       if f.base is not None and issubclass(cls, f.base)), None)
        return cls, family
    if module:
        for family in _config.FAMILIES:
            if module in family.modules and class_name in family.classes:
                return family.classes[class_name], family
        if module == "keras" or module.startswith("keras."):  # keras.src.models.functional
            found = [f for f in _config.FAMILIES if class_name in f.classes]
            if len(found) == 1:
                return found[0].classes[class_name], found[0]
    raise TypeError(
        f"Could not locate class {class_name!r}. Make sure custom classes and functions are "
        "decorated with `@jt.keras.saving.register_keras_serializable()`. If they are "
        "already decorated, make sure they are all imported so that the decorator is run "
        f"before trying to load them (or pass custom_objects). Full object config: {config}")


def func_dump(fn):
    """A lambda as Keras writes one: ``(base64 of its marshalled code, defaults,
    closure values)`` (readable by the same Python version only)."""
    code = codecs.encode(marshal.dumps(fn.__code__), "base64").decode("ascii")
    closure = tuple(c.cell_contents for c in fn.__closure__) if fn.__closure__ else None
    return code, fn.__defaults__, closure


def func_load(value):
    """The function ``func_dump`` wrote; its globals are Python's builtins only."""
    code, defaults, closure = value
    code = marshal.loads(codecs.decode(code.encode("ascii"), "base64"))
    cells = tuple(types.CellType(v) for v in closure) if closure else None
    return types.FunctionType(code, {"__builtins__": builtins}, code.co_name,
                              tuple(defaults) if defaults else None, cells)
