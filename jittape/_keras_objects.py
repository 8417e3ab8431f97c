"""Keras' serialized forms and names of objects, shared by ``jt.losses`` and ``jt.metrics``:
``serialize_object``, ``deserialize_object``, ``function_from`` and ``init_config``.

A class instance serializes as ``{"module", "class_name", "config", "registered_name"}``
(``config`` is its ``get_config()``), a function as ``{"module": "builtins",
"class_name": "function", "config": its name, "registered_name": "function"}``, as Keras
3 writes them; both, the plain ``{"class_name", "config"}`` form and bare names come back.
"""

from __future__ import annotations

import inspect


def init_config(cls, config) -> dict:
    """``config`` for ``cls(**config)``: a Keras DTypePolicy's dict as its name, and no
    ``dtype`` where the class's ``__init__`` takes none (a subclass written for Keras,
    whose loss configs have none)."""
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


def serialize_object(obj, module, builtin_classes, kind):
    """Keras' serialized form of ``obj``, an instance with ``get_config`` or a function;
    ``module`` is the one named for the ``builtin_classes`` (name -> class)."""
    if obj is None:
        return None
    if inspect.isfunction(obj) or inspect.isbuiltin(obj):
        return {"module": "builtins", "class_name": "function", "config": obj.__name__,
                "registered_name": "function"}
    get_config = getattr(obj, "get_config", None)
    if get_config is None:
        raise ValueError(f"Cannot serialize {obj!r}: it is neither a {kind} instance with "
                         "get_config() nor a function")
    cls = type(obj)
    builtin = builtin_classes.get(cls.__name__) is cls
    return {"module": module if builtin else cls.__module__, "class_name": cls.__name__,
            "config": get_config(), "registered_name": None if builtin else cls.__name__}


def deserialize_object(config, classes, functions, custom_objects, kind, not_yet=(),
                       named_functions=True):
    """The object a name or a serialized dict stands for: a function, or an instance of
    a class built with its ``from_config``.

    Args:
        classes, functions: name -> class, name -> function.
        custom_objects: name -> your own class or function, looked up first.
        kind: "loss" or "metric", for the messages.
        not_yet: Keras names jittape lacks (their error says so).
        named_functions: whether a bare name may be a function's (Keras' metric names
            are all classes').
    """
    custom = dict(custom_objects or {})

    def lookup(name):
        if name in custom:
            return custom[name]
        if name in classes:
            return classes[name]
        return functions.get(name) if named_functions else None

    def unknown(name):
        known = set(classes) | (set(functions) if named_functions else set())
        hint = (f" (a Keras {kind} jittape does not have yet)" if name in not_yet else
                f"; known names: {', '.join(sorted(known))}")
        return ValueError(f"Could not interpret {kind} identifier: {name!r}{hint}")

    if isinstance(config, str):
        obj = lookup(config)
        if obj is None:
            raise unknown(config)
        return obj() if inspect.isclass(obj) else obj
    if not isinstance(config, dict) or "class_name" not in config:
        raise ValueError(f"Could not interpret {kind} identifier: {config!r} (expected a "
                         "name or a dict with 'class_name' and 'config')")
    name, inner = config["class_name"], config.get("config")
    if name == "function":  # Keras' form of a function: its name is the config
        if not isinstance(inner, str):
            raise ValueError(f"Could not interpret {kind} identifier: {config!r}")
        obj = custom.get(inner) or functions.get(inner)
        if obj is None:
            raise unknown(inner)
        return obj
    obj = lookup(config.get("registered_name") or name) or lookup(name)
    if obj is None:
        raise unknown(name)
    if not inspect.isclass(obj):
        return obj
    if inner is None:
        inner = {}
    if not isinstance(inner, dict):
        raise ValueError(f"Could not interpret {kind} identifier: {config!r} ('config' must "
                         "be a dict)")
    return obj.from_config(inner)


def function_from(identifier, functions, kind):
    """A function from itself, its name or its serialized form (a wrapper config's ``fn``)."""
    if callable(identifier):
        return identifier
    obj = deserialize_object(identifier, {}, functions, None, kind)
    if not callable(obj):
        raise ValueError(f"Could not interpret {kind} function: {identifier!r}")
    return obj
