"""Keras 3's variable names: ``v.name`` is the short name a layer, optimizer or metric
gave (``kernel``), ``v.path`` where it was made (``inner/d1/kernel``).

A path is the stack of Keras scopes open when the variable is created. Each layer
opens a scope named after itself around its ``build`` and its calls; an optimizer or
a metric opens one around the variables it adds. Two rules make the paths what Keras
3 gives:

- a scope that is already the innermost one (the same object under the same name) is
  not opened again: ``add_weight`` inside ``build`` inside ``__call__`` gives
  ``dense/kernel``, not ``dense/dense/dense/kernel``;
- a layer remembers where its scope was first opened (its parent path), and its scope
  always stands there, wherever the layer is built or called later: a ``Dense`` built
  on its own keeps ``dense/kernel`` when a model calls it.

So a layer called symbolically at the top of a functional model gets ``head/kernel``
(the functional ``Model`` wraps nothing), a layer built inside a ``Sequential``'s build
or call gets ``sequential/dense/kernel``, and a sublayer of a subclassed layer
``l2/dense/kernel``.

A Keras variable is a ``jt.Variable`` all the same: the TF core (checkpoints, saved
models, traces, its error messages) knows it by TF's name, the path inside the
``jt.name_scope`` open at creation plus ``:0`` (``v._label``), as Keras 3 on TensorFlow
names the ``tf.Variable`` it holds. ``jt.name_scope`` (TF's scopes) does not enter the
path, and a Keras scope does not enter a plain ``jt.Variable``'s name: each keeps to
its own kind, as in Keras 3.
"""

from __future__ import annotations

import threading

from ..tensor import Variable

__all__ = ["KerasVariable", "current_path", "name_scope"]

_stack = threading.local()  # .scopes: the open name_scope entries, innermost last


def _scopes() -> list:
    scopes = getattr(_stack, "scopes", None)
    if scopes is None:
        scopes = _stack.scopes = []
    return scopes


def _check_name(name, what="name"):
    if not isinstance(name, str) or "/" in name:
        raise ValueError(f"Argument `{what}` must be a string and cannot contain character "
                         f"`/`. Received: {what}={name!r}")


class name_scope:
    """A Keras scope for the paths of the variables made inside it (``keras.name_scope``).

    ``caller`` is the object that opens it (a layer, optimizer or metric): entering
    the scope that is already innermost for the same caller and name does nothing.
    ``override_parent``, a path, puts this scope there instead of under the open ones;
    a caller with a parent path (a layer once its scope has been opened) uses it.

    Example:
        >>> with jt.keras.name_scope("block"):
        ...     d = jt.layers.Dense(2); d.build((None, 3))
        >>> d.kernel.path  # 'block/dense/kernel'
    """

    def __init__(self, name, caller=None, deduplicate=True, override_parent=None):
        _check_name(name)
        self.name = name
        self.caller = caller
        self.deduplicate = deduplicate
        if override_parent is None and deduplicate and caller is not None:
            override_parent = getattr(caller, "__dict__", {}).get("_parent_path")
        self.override_parent = override_parent
        self._pushed = False

    def __enter__(self):
        scopes = _scopes()
        top = scopes[-1] if scopes else None
        if (self.deduplicate and top is not None and self.caller is not None
                and top.caller is self.caller and top.name == self.name):
            return self  # already inside it
        scopes.append(self)
        self._pushed = True
        return self

    def __exit__(self, *exc):
        if self._pushed:
            self._pushed = False
            _scopes().pop()


def current_path() -> str:
    """The path of the open Keras scopes (``""`` when none is open)."""
    parts: list = []
    for entry in _scopes():
        if entry.override_parent is not None:
            parts = [p for p in entry.override_parent.split("/") if p]
        parts.append(entry.name)
    return "/".join(parts)


class KerasVariable(Variable):
    """A ``jt.Variable`` made by Keras (``add_weight``, an optimizer's or a metric's
    ``add_variable``): ``name`` the short name, ``path`` the scopes it was made in.

    The name may not contain ``/`` (Keras 3 refuses it too: the path is built of names).
    """

    __slots__ = ("_short_name", "_path")

    def __init__(self, initial_value, trainable=True, name=None, dtype=None, constraint=None):
        name = "variable" if name is None else name
        _check_name(name)
        parent = current_path()
        path = f"{parent}/{name}" if parent else name
        super().__init__(initial_value, trainable=trainable, name=path, dtype=dtype,
                         constraint=constraint)
        self._short_name = name
        self._path = path

    @property
    def name(self) -> str:
        """The short name (``kernel``), as Keras 3 gives it."""
        return self._short_name

    @property
    def path(self) -> str:
        """Where the variable was made: the Keras scopes and its name (``dense/kernel``)."""
        return self._path

    def __repr__(self):
        return super().__repr__().replace(f"'{self._label}'", f"path={self._path}", 1)
