"""Keras 3's registry of custom objects (``keras.saving.register_keras_serializable`` and
its companions): the classes and functions a saved config may name besides jittape's own.

``register_keras_serializable(package, name)`` puts an object in the global dict under
``"package>name"`` (``name`` defaults to its ``__name__``), which is the name its records
carry (``registered_name`` for a class, ``config`` for a function), so that a file written
with it loads in a new process once the module defining it is imported, without
``custom_objects``. ``get_custom_objects()`` is that dict itself; users may add to it.

A ``custom_object_scope(objects)`` adds names for the block it encloses. Nested scopes
add up (the inner one's names first); in Keras 3.15 an inner scope hides the outer
one's names instead, which no saved file depends on. Lookups go: the scopes, innermost
first, then the global dict, as ``get_registered_object`` does in Keras.
"""

from __future__ import annotations

import inspect
import threading

__all__ = ["CustomObjectScope", "custom_object_scope", "get_custom_objects",
           "register_keras_serializable", "get_registered_name", "get_registered_object"]

GLOBAL_CUSTOM_OBJECTS: dict = {}  # registered name -> class or function
GLOBAL_CUSTOM_NAMES: dict = {}  # class or function -> registered name

_scopes = threading.local()


def _stack() -> list:
    return _scopes.__dict__.setdefault("stack", [])


class CustomObjectScope:
    """Make ``custom_objects`` (name -> class or function) known to every ``get``,
    ``deserialize`` and ``load_model`` inside the ``with`` block (per thread).

    Example::

        with jt.keras.saving.custom_object_scope({"MyLayer": MyLayer}):
            model = jt.keras.models.load_model("m.keras")
    """

    def __init__(self, custom_objects):
        self.custom_objects = dict(custom_objects or {})

    def __enter__(self):
        _stack().append(self.custom_objects)
        return self

    def __exit__(self, *exc):
        _stack().pop()


custom_object_scope = CustomObjectScope


def custom_object(name):
    """The class or function an enclosing scope or the global dict names ``name``, or
    None."""
    for objects in reversed(_stack()):
        if name in objects:
            return objects[name]
    return GLOBAL_CUSTOM_OBJECTS.get(name)


def custom_objects_named(suffix: str) -> list:
    """The objects known (scopes, then the global dict) under a name ending in
    ``suffix`` (``">my_loss"``): how Keras finds a registered function from a record that
    names it without its package."""
    found = []
    for objects in [*reversed(_stack()), GLOBAL_CUSTOM_OBJECTS]:
        found += [obj for key, obj in objects.items() if key.endswith(suffix)]
    return found


def get_custom_objects() -> dict:
    """The global dict of registered objects (registered name -> object), itself: adding
    to it (``get_custom_objects()["MyLayer"] = MyLayer``) registers under that name.
    A scope's names are not in it."""
    return GLOBAL_CUSTOM_OBJECTS


def register_keras_serializable(package="Custom", name=None):
    """A decorator that registers a class (which must have ``get_config``) or a function
    as ``"package>name"`` (``name`` defaults to its ``__name__``): its records carry that
    name, and loading finds it by that name without ``custom_objects``. Registering
    another object under a taken name replaces it, as in Keras.

    Example::

        @jt.keras.saving.register_keras_serializable(package="my_pkg")
        class Scale(jt.layers.Layer):
            ...

        jt.keras.saving.get_registered_name(Scale)  # "my_pkg>Scale"
    """
    if not isinstance(package, str):
        raise TypeError("register_keras_serializable: `package` must be a string (use it as "
                        f"@register_keras_serializable(package=...)), got {package!r}")

    def decorator(arg):
        class_name = name if name is not None else arg.__name__
        registered_name = f"{package}>{class_name}"
        if inspect.isclass(arg) and not hasattr(arg, "get_config"):
            raise ValueError("Cannot register a class that does not have a get_config() "
                             f"method (register_keras_serializable of {arg.__name__})")
        GLOBAL_CUSTOM_OBJECTS[registered_name] = arg
        GLOBAL_CUSTOM_NAMES[arg] = registered_name
        return arg

    return decorator


def get_registered_name(obj) -> str:
    """The name ``obj`` was registered under, or its ``__name__`` when it was not."""
    try:
        return GLOBAL_CUSTOM_NAMES[obj]
    except (KeyError, TypeError):  # TypeError: an unhashable object
        return obj.__name__


def get_registered_object(name, custom_objects=None, module_objects=None):
    """The class or function known as ``name``: from an enclosing ``custom_object_scope``,
    the global dict, then ``custom_objects`` and ``module_objects`` (Keras' order); None
    when none has it."""
    for objects in reversed(_stack()):
        if name in objects:
            return objects[name]
    for objects in (GLOBAL_CUSTOM_OBJECTS, custom_objects, module_objects):
        if objects and name in objects:
            return objects[name]
    return None
