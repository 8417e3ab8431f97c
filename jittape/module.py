"""``jt.Module`` and ``jt.name_scope``: tf.Module's variable tracking and TF 2's eager name scopes.

Name scopes (as TF 2 runs eagerly, where scopes are never uniquified)::

    with jt.name_scope("outer"):            # scope "outer/"
        with jt.name_scope("inner"):        # scope "outer/inner/"
            jt.Variable(1.0, name="v").name  # "outer/inner/v:0"
        with jt.name_scope("abs/"):         # a name ending in "/" is absolute: "abs/"
            ...

A ``Module`` finds its variables and submodules by reflection over its attributes, as
``tf.Module._flatten`` does: attributes in sorted name order, each value flattened
(lists and tuples in order, dicts by sorted key), duplicates dropped, then each
submodule's leaves, depth first, after all of the module's own.
"""

from __future__ import annotations

import functools
import re

from . import _state
from . import train as _train
from .tensor import Variable

__all__ = ["Module", "name_scope", "current_name_scope"]


def current_name_scope() -> str:
    """The innermost name scope as a prefix (``"outer/inner/"``; ``""`` at the top)."""
    return _state.name_scope_prefix()


class name_scope:  # noqa: N801 (TF's spelling)
    """A context manager that prefixes the names of variables created inside it.

    ``with jt.name_scope("dense") as scope`` gives ``scope == "<outer>dense/"``. A name
    ending in ``"/"`` is taken as the whole scope (``"dense/"`` resets any outer scope);
    ``""`` is the top scope. The same object can be entered again, and nested.

    Example::

        with jt.name_scope("block"):
            w = jt.Variable(1.0, name="w")
        w.name  # "block/w:0"
    """

    def __init__(self, name):
        if not isinstance(name, str):
            raise ValueError("name for name_scope must be a string.")
        self._name = name
        self._entered = []

    @property
    def name(self) -> str:
        return self._name

    def __enter__(self) -> str:
        name = self._name
        if not name:
            scope = ""
        elif name.endswith("/"):
            scope = name
        else:
            scope = current_name_scope() + name + "/"
        _state.local.name_scopes.append(scope)
        self._entered.append(scope)
        return scope

    def __exit__(self, *exc):
        _state.local.name_scopes.pop()
        self._entered.pop()
        return False

    def __repr__(self):
        return f"jt.name_scope({self._name!r})"


# -- names ---------------------------------------------------------------------------

_CAMEL_TO_SNAKE = re.compile(r"((?<=[a-z0-9])[A-Z]|(?!^)[A-Z](?=[a-z]))")
_IDENTIFIER = re.compile(r"^[a-zA-Z_]([a-zA-Z0-9_])*$")


def camel_to_snake(value: str) -> str:
    """tf.Module's default name of a class: ``"HTTPServer"`` -> ``"http_server"``."""
    return _CAMEL_TO_SNAKE.sub(r"_\1", value).lower()


# -- reflection ------------------------------------------------------------------------


def _leaves(value) -> list:
    """The leaves of an attribute value, as ``tf.nest.flatten`` orders them."""
    out, stack = [], [value]
    while stack:
        s = stack.pop()
        if isinstance(s, dict):
            try:
                keys = sorted(s)
            except TypeError:  # keys that do not sort: insertion order
                keys = list(s)
            stack.extend(s[k] for k in reversed(keys))
        elif isinstance(s, (list, tuple)):
            stack.extend(reversed(s))
        else:
            out.append(s)
    return out


def _walk(module, predicate, seen, stack):
    """tf.Module's ``_flatten_module``: the module's own leaves (attributes in name
    order), then each submodule's, depth first; a module already on the way down is not
    entered again (cycles). A ``jt.Layer`` answers for its own variables (its order and
    its ``trainable`` flag), so it is asked rather than entered."""
    subs = []
    recursive = id(module) not in stack
    attrs = vars(module)
    for key in sorted(attrs):
        for leaf in _leaves(attrs[key]):
            if id(leaf) in seen:
                continue
            seen.add(id(leaf))
            if predicate(leaf):
                yield leaf
            if recursive and isinstance(leaf, Module):
                subs.append(leaf)
    stack.append(id(module))
    for sub in subs:
        yield from sub._flatten_for(predicate, seen, stack)
    stack.pop()


def _is_module(x) -> bool:
    return isinstance(x, Module)


def _is_variable(x) -> bool:
    return isinstance(x, Variable)


def _is_trainable(x) -> bool:
    return isinstance(x, Variable) and x.trainable


def _is_non_trainable(x) -> bool:
    return isinstance(x, Variable) and not x.trainable


class Module:
    """A named container of variables, submodules and the functions that use them
    (``tf.Module``).

    Variables and modules assigned as attributes, directly or inside lists, tuples and
    dicts (nested), are found by ``variables``, ``trainable_variables`` and
    ``submodules``. ``name`` defaults to the class name in snake case (not made unique,
    as in TF); ``name_scope`` is the module's scope, fixed when it is created (inside
    ``jt.name_scope("outer")`` it is ``"outer/<name>/"``).

    Example::

        class Dense(jt.Module):
            def __init__(self, n_in, n_out, name=None):
                super().__init__(name=name)
                with self.name_scope:
                    self.w = jt.Variable(jt.random.normal([n_in, n_out]), name="w")
                    self.b = jt.Variable(jt.zeros([n_out]), name="b")

            @jt.Module.with_name_scope
            def __call__(self, x):
                return jt.nn.relu(x @ self.w + self.b)

        d = Dense(3, 2)
        [v.name for v in d.variables]  # ["dense/b:0", "dense/w:0"] (attribute order)
    """

    def __init__(self, name=None):
        if name is None:
            name = camel_to_snake(type(self).__name__)
        elif not isinstance(name, str) or not _IDENTIFIER.match(name):
            raise ValueError(
                f"{name!r} is not a valid module name. Module names must be valid Python "
                "identifiers (e.g. a valid class name).")
        self._init_module(name)

    def _init_module(self, name: str) -> None:
        """Set the name and the scope (``Layer`` calls this with names TF would refuse)."""
        self._name = name
        with name_scope(name) as scope:
            self._name_scope = name_scope(scope)

    @property
    def name(self) -> str:
        """The name given (or the default); ``name_scope.name`` adds the outer scopes."""
        return self._name

    @property
    def name_scope(self) -> name_scope:
        """The module's scope: ``with module.name_scope:`` names variables
        ``"<scope>/<name>:0"``."""
        scope = self.__dict__.get("_name_scope")
        if scope is None:
            raise RuntimeError(
                f"{type(self).__name__} has no name scope: its __init__ did not call "
                "super().__init__()")
        return scope

    def _flatten_for(self, predicate, seen, stack):
        return _walk(self, predicate, seen, stack)

    def _flatten(self, predicate=None):
        predicate = predicate or (lambda _: True)
        return self._flatten_for(predicate, {id(self)}, [])

    @property
    def variables(self) -> tuple:
        """The module's variables (attributes in name order), then its submodules'."""
        return tuple(self._flatten(_is_variable))

    @property
    def trainable_variables(self) -> tuple:
        """``variables`` whose ``trainable`` is True."""
        return tuple(self._flatten(_is_trainable))

    @property
    def non_trainable_variables(self) -> tuple:
        """``variables`` whose ``trainable`` is False."""
        return tuple(self._flatten(_is_non_trainable))

    @property
    def submodules(self) -> tuple:
        """Every module reachable from this one's attributes (itself excluded): its own
        first, in attribute order, then theirs, depth first."""
        return tuple(self._flatten(_is_module))

    @classmethod
    def with_name_scope(cls, method):
        """Decorator: run ``method`` inside the module's ``name_scope``, so that variables
        it creates are named ``"<module>/<name>:0"``."""

        @functools.wraps(method)
        def method_with_name_scope(self, *args, **kwargs):
            with self.name_scope:
                return method(self, *args, **kwargs)

        return method_with_name_scope

    def __setattr__(self, key, value):
        object.__setattr__(self, key, value)
        if _train._PENDING and not key.startswith("_"):
            # a variable made after a checkpoint was restored into this module (a layer
            # that builds on its first call): the checkpoint's value, as TF defers it
            _train.restore_deferred()

    def __repr__(self):
        return f"<{type(self).__name__} name={self.name!r}>"
