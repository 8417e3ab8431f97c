"""Keras 3's config format for jittape's objects: the ``{"module", "class_name", "config",
"registered_name"}`` records of initializers, regularizers, constraints, activations,
dtypes and layers, and the ``custom_objects`` scope that resolves user classes in them.

A built-in object is written under Keras' module (``"keras.regularizers"``), so that
Keras reads jittape's configs and jittape reads Keras'. A user class is written under
its own module, with its class name as ``registered_name``, and is found again through
``custom_objects`` (as an unregistered class is in Keras). A plain function (a custom
activation, a regularizer written as a function) is written as Keras writes one:
``{"module": ..., "class_name": "function", "config": <its name>, "registered_name":
"function"}``.
"""

from __future__ import annotations

import contextlib
import threading
import types

import numpy as np

from .dtypes import as_dtype

_scopes = threading.local()


@contextlib.contextmanager
def custom_object_scope(custom_objects):
    """Make ``custom_objects`` (name -> class or function) known to every nested
    ``get``/``deserialize`` while the block runs (Keras' ``custom_object_scope``)."""
    stack = _scopes.__dict__.setdefault("stack", [])
    stack.append(dict(custom_objects or {}))
    try:
        yield
    finally:
        stack.pop()


def custom_object(name):
    """The class or function registered as ``name`` by an enclosing scope, or None."""
    for objects in reversed(_scopes.__dict__.get("stack", ())):
        if name in objects:
            return objects[name]
    return None


def serialize(obj, module: str, builtins: dict):
    """``obj`` as a Keras record; ``builtins`` maps class names to jittape's own classes,
    which are written under ``module``."""
    if obj is None:
        return None
    cls = type(obj)
    if builtins.get(cls.__name__) is cls:
        return {"module": module, "class_name": cls.__name__, "config": obj.get_config(),
                "registered_name": None}
    if isinstance(obj, (types.FunctionType, types.BuiltinFunctionType)):
        return serialize_function(obj)
    if not hasattr(obj, "get_config"):
        raise ValueError(
            f"Cannot serialize {obj!r}: it is neither one of jittape's built-in objects, a "
            "named function, nor an object with get_config()")
    return {"module": cls.__module__, "class_name": cls.__name__, "config": obj.get_config(),
            "registered_name": cls.__name__}


def serialize_function(fn):
    """A plain function as Keras writes one (found again by its name in custom_objects)."""
    return {"module": getattr(fn, "__module__", None), "class_name": "function",
            "config": fn.__name__, "registered_name": "function"}


def deserialize(config, kind: str, builtins: dict, custom_objects=None, names=None):
    """The object a Keras record (or a bare name) describes.

    ``kind`` names the family in errors ("regularizer"); ``builtins`` maps class names
    to jittape's classes; ``names`` maps further names ("l2", "max_norm") to what makes
    their default object. User classes and functions come from ``custom_objects`` or an
    enclosing scope.
    """
    if config is None:
        return None
    names = names or {}
    with custom_object_scope(custom_objects):
        if isinstance(config, str):
            make = names.get(config) or builtins.get(config)
            if make is not None:
                return make()
            obj = custom_object(config)
            if obj is None:
                raise ValueError(f"Unknown {kind} {config!r}; known names: "
                                 f"{', '.join(sorted(set(builtins) | set(names)))}")
            return obj() if isinstance(obj, type) else obj
        if not isinstance(config, dict) or "class_name" not in config:
            raise ValueError(
                f"Could not interpret {kind} config {config!r}: expected a name or a dict "
                "with 'class_name' and 'config'")
        class_name = config["class_name"]
        inner = config.get("config", {})
        if class_name == "function":
            fn = custom_object(inner)
            if fn is None:
                raise ValueError(
                    f"Unknown {kind} function {inner!r}: pass it in custom_objects "
                    f"(custom_objects={{{inner!r}: {inner}}})")
            return fn
        if class_name == "__lambda__":
            raise ValueError(
                f"Cannot deserialize a {kind} written as a lambda: define a named function and "
                "pass it in custom_objects")
        registered = config.get("registered_name")
        cls = (custom_object(registered) if registered else None) or custom_object(class_name)
        if cls is None:
            cls = builtins.get(class_name)
        if cls is None:
            raise ValueError(
                f"Unknown {kind} class {class_name!r} (module {config.get('module')!r}): "
                f"jittape's are {', '.join(sorted(builtins))}; pass a class of your own in "
                f"custom_objects={{{class_name!r}: {class_name}}}")
        if not isinstance(inner, dict):
            raise ValueError(f"{kind} {class_name}: 'config' must be a dict, got {inner!r}")
        return cls.from_config(inner)


# ---------------------------------------------------------------------------
# dtypes and values

_POLICIES = ("DTypePolicy", "FloatDTypePolicy")


def dtype_policy(dtype) -> dict:
    """A layer's dtype as Keras 3 writes it (a ``DTypePolicy`` record)."""
    return {"module": "keras", "class_name": "DTypePolicy",
            "config": {"name": as_dtype(dtype).name}, "registered_name": None}


def dtype_from_config(value, who: str):
    """A dtype from a name, a jittape/numpy dtype or a Keras ``DTypePolicy`` record."""
    if value is None:
        return None
    if isinstance(value, dict):
        if value.get("class_name") not in _POLICIES:
            raise ValueError(f"{who}: cannot read the dtype {value!r} (expected a DTypePolicy)")
        value = value.get("config", {}).get("name")
    if isinstance(value, str) and value.startswith("mixed_"):
        raise ValueError(
            f"{who}: the mixed precision policy {value!r} is not supported: jittape layers "
            "compute in the dtype of their weights")
    return as_dtype(value)


def to_plain(value):
    """A config value with numpy scalars as Python numbers and arrays as Keras'
    ``__numpy__`` records."""
    if isinstance(value, np.ndarray) and value.ndim > 0:
        return {"class_name": "__numpy__",
                "config": {"value": value.tolist(), "dtype": value.dtype.name}}
    if isinstance(value, (np.ndarray, np.generic)):
        return value.item()
    return value


def from_plain(value):
    """The inverse of ``to_plain`` (a ``__numpy__`` record becomes an array)."""
    if isinstance(value, dict) and value.get("class_name") == "__numpy__":
        c = value["config"]
        return np.asarray(c["value"], dtype=c.get("dtype"))
    return value
