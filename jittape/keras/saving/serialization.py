"""Keras 3's serialized-object records for every family of jittape's objects (layers,
initializers, regularizers, constraints, activations, losses, metrics, optimizers,
schedules): ``serialize``, ``deserialize``/``find``, the ``custom_objects`` scope, and
the dtypes and values inside configs.

A record is ``{"module", "class_name", "config", "registered_name"}``. A built-in class
is written under Keras' module (``"keras.regularizers"``), so that Keras reads jittape's
records and jittape reads Keras'. A user class is written under its own module with its
registered name as ``registered_name`` (``"package>Name"`` once registered with
``register_keras_serializable``, else its class name, found again through
``custom_objects``), as in Keras. A function is written as Keras 3 writes one in every
family: ``{"module": "builtins", "class_name": "function", "config": <its registered
name>, "registered_name": "function"}``. Bare names and the plain ``{"class_name",
"config"}`` form are read too.

Each family ``export``s its Keras modules, base class, classes, functions and its own
``serialize``/``deserialize`` here when it is imported, so that the generic
``serialize_keras_object``/``deserialize_keras_object`` (``serialization_lib``) reach
every family from below them.
"""

from __future__ import annotations

import inspect
import types
from typing import NamedTuple

import numpy as np

from ...dtypes import as_dtype
from .object_registration import (  # noqa: F401 - custom_object_scope: the families' scope
    custom_object, custom_object_scope, custom_objects_named, get_registered_name)

def serialize(obj, module: str, classes: dict, kind: str):
    """``obj`` (an object with ``get_config`` or a named function) as a Keras record;
    ``classes`` maps class names to jittape's own classes, which are written under
    ``module``. ``kind`` names the family in errors ("loss")."""
    if obj is None:
        return None
    if isinstance(obj, (types.FunctionType, types.BuiltinFunctionType)):
        return serialize_function(obj)
    if not hasattr(obj, "get_config"):
        raise ValueError(f"Cannot serialize {obj!r}: a {kind} must be an object with "
                         "get_config() or a named function")
    cls = type(obj)
    builtin = classes.get(cls.__name__) is cls
    if builtin:
        return {"module": module, "class_name": cls.__name__, "config": obj.get_config(),
                "registered_name": None}
    return {"module": _module_of(cls), "class_name": cls.__name__, "config": obj.get_config(),
            "registered_name": get_registered_name(cls)}


def _module_of(obj):
    # Keras writes no module for a script's own class (it would not import as "__main__")
    return None if obj.__module__ == "__main__" else obj.__module__


def serialize_function(fn):
    """A function as Keras 3 writes one: found again by its registered name (its name
    when it was not registered: then through custom_objects)."""
    # "builtins" is the module of the function's type: Keras writes it for every function
    return {"module": "builtins", "class_name": "function",
            "config": get_registered_name(fn), "registered_name": "function"}


def registered_function(name):
    """The function (or class) a scope or the registry knows as ``name``, or else, for a
    name without a package, the one object registered as ``"package>name"`` (Keras
    looks a function's bare name up so)."""
    obj = custom_object(name)
    if obj is None and ">" not in name:
        found = custom_objects_named(">" + name)
        obj = found[0] if found else None
    return obj


def find(config: dict, kind: str, classes: dict, functions=None, not_yet=()):
    """The class (or, with ``functions``, the function) a record's ``registered_name``
    or ``class_name`` names: your own from the enclosing ``custom_object_scope`` first,
    then jittape's ``classes`` and ``functions`` (name -> object)."""
    name = config["class_name"]
    for key in (config.get("registered_name"), name):
        if not key:
            continue
        obj = custom_object(key)
        if obj is None:
            obj = classes.get(key) or (functions or {}).get(key)
        if obj is not None:
            return obj
    if name in not_yet:
        raise ValueError(f"Could not interpret {kind} identifier: {name!r} (a Keras {kind} "
                         "jittape does not have yet)")
    module = config.get("module")
    where = f" (module {module!r})" if module else ""
    registered = config.get("registered_name") or ""
    if ">" in registered:
        where += f" (registered as {registered!r} where it was saved)"
    raise ValueError(
        f"Could not interpret {kind} identifier: {name!r}{where}: none of jittape's classes "
        f"({', '.join(sorted(classes))}); pass a class of your own in "
        f"custom_objects={{{name!r}: {name}}}, or decorate it with "
        "@jt.keras.saving.register_keras_serializable() and import its module before loading")


def deserialize(config, kind: str, classes: dict, custom_objects=None, names=None,
                functions=None, named_functions=False, not_yet=()):
    """The object a bare name or a Keras record describes: a new instance for a class
    (``from_config`` of the record's ``config``), the function for a function.

    Args:
        config: a name, a record, or ``None`` (gives ``None``).
        kind: the family, for errors ("regularizer").
        classes: class name -> jittape's class, as records name them.
        custom_objects: name -> your own class or function; these and an enclosing
            ``custom_object_scope``'s come before jittape's.
        names: bare names beyond ``classes`` -> what makes their default object
            (``"l2"``; a class or a function of no arguments).
        functions: name -> jittape's function, for function records (and for bare
            names and records' class names when ``named_functions``).
        not_yet: Keras names jittape lacks (their error says so).
    """
    if config is None:
        return None
    names, functions = names or {}, functions or {}
    named = functions if named_functions else {}
    with custom_object_scope(custom_objects):
        if isinstance(config, str):
            obj = custom_object(config)
            if obj is not None:
                return obj() if inspect.isclass(obj) else obj
            make = names.get(config) or classes.get(config)
            if make is not None:
                return make()
            if config in named:
                return named[config]
            known = ", ".join(sorted(set(classes) | set(names) | set(named)))
            hint = (f" (a Keras {kind} jittape does not have yet)" if config in not_yet else
                    f"; known names: {known} (or pass your own in custom_objects)")
            raise ValueError(f"Could not interpret {kind} identifier: {config!r}{hint}")
        if not isinstance(config, dict) or "class_name" not in config:
            raise ValueError(f"Could not interpret {kind} identifier: {config!r} (expected a "
                             "name or a dict with 'class_name' and 'config')")
        name, inner = config["class_name"], config.get("config")
        if name == "function":  # Keras' form of a function: its name is the config
            if not isinstance(inner, str):
                raise ValueError(f"Could not interpret {kind} identifier: {config!r} (a "
                                 "function's 'config' is its name)")
            fn = custom_object(inner) or functions.get(inner) or registered_function(inner)
            if fn is None:
                raise ValueError(
                    f"Could not interpret {kind} identifier: function {inner!r}: pass it in "
                    f"custom_objects={{{inner!r}: {inner}}}, or decorate it with "
                    "@jt.keras.saving.register_keras_serializable() and import its module "
                    "before loading")
            return fn
        if name == "__lambda__":
            raise ValueError(
                f"Could not interpret {kind} identifier: a lambda (Keras writes its bytecode): "
                "define a named function and pass it in custom_objects")
        obj = find(config, kind, classes, named, not_yet)
        if not inspect.isclass(obj):
            return obj
        if inner is None:
            inner = {}
        if not isinstance(inner, dict):
            raise ValueError(f"Could not interpret {kind} identifier: {name}'s 'config' must "
                             f"be a dict, got {inner!r}")
        return obj.from_config(inner)


def function_from(identifier, functions: dict, kind: str):
    """A function from itself, its name or its record (a wrapper config's ``fn``)."""
    if callable(identifier):
        return identifier
    fn = deserialize(identifier, kind, {}, functions=functions, named_functions=True)
    if not callable(fn):
        raise ValueError(f"Could not interpret {kind} function: {identifier!r}")
    return fn


class Family(NamedTuple):
    """One family of jittape's objects, as ``serialize_keras_object`` reaches it."""
    kind: str  # "layer", for errors
    modules: tuple  # the Keras modules its records name ("keras.layers")
    base: type | None  # the class its objects are instances of (None: functions only)
    classes: dict  # class name -> jittape's class
    functions: dict  # function name -> jittape's function
    serialize: object  # the family's own serialize(obj) -> record
    deserialize: object  # the family's own deserialize(record, custom_objects)


FAMILIES: list = []  # in the order the families were imported


def export(kind, modules, base, classes, serialize=None, deserialize=None, functions=None):
    """Make a family known to the generic ``serialize_keras_object`` and
    ``deserialize_keras_object`` (the family calls this when it is imported, as
    Keras' ``keras_export`` fills its table of public names)."""
    FAMILIES[:] = [f for f in FAMILIES if f.kind != kind]
    FAMILIES.append(Family(kind, tuple(modules), base, classes, functions or {}, serialize,
                           deserialize))


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


def init_config(cls, config) -> dict:
    """``config`` for ``cls(**config)`` (a loss's or a metric's): a Keras DTypePolicy
    record as its name, and no ``dtype`` where the class's ``__init__`` takes none (a
    subclass written for Keras, whose loss configs have none)."""
    config = dict(config)
    dtype = config.get("dtype")
    if isinstance(dtype, dict):
        config["dtype"] = dtype.get("config", {}).get("name", dtype)
    if "dtype" in config:
        params = inspect.signature(cls.__init__).parameters
        if "dtype" not in params and not any(
                p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
            del config["dtype"]
    return config


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


def config_repr(obj) -> str:
    """``ClassName(arg=value, ...)`` from ``obj.get_config()`` (no arguments when the
    class has no config): the repr of the configurable Keras objects."""
    try:
        args = ", ".join(f"{k}={v!r}" for k, v in obj.get_config().items())
    except NotImplementedError:
        args = ""
    return f"{type(obj).__name__}({args})"
