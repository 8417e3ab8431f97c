"""The callback protocol: ``Callback``'s hooks, ``CallbackList`` that calls many of them,
and the small callbacks ``History``, ``LambdaCallback`` and ``TerminateOnNaN``.

A training loop (``Model.fit``, or one written by hand) calls the hooks in this order::

    on_train_begin
      on_epoch_begin(epoch)                      # epochs count from 0
        on_train_batch_begin(batch), on_train_batch_end(batch, logs)   # per step
        on_test_begin ... on_test_end(logs)      # validation, when there is some
      on_epoch_end(epoch, logs)                  # logs: the epoch's results, val_* included
    on_train_end

``evaluate`` calls ``on_test_begin``, ``on_test_batch_begin/end`` and ``on_test_end``;
``predict`` the ``on_predict_*`` hooks. ``logs`` are dicts of Python floats.
"""

from __future__ import annotations

import math
import numbers
import sys

__all__ = ["Callback", "CallbackList", "History", "LambdaCallback", "TerminateOnNaN"]

# every hook a Callback has, with the arguments before ``logs``
HOOKS = {
    "on_train_begin": (), "on_train_end": (),
    "on_epoch_begin": ("epoch",), "on_epoch_end": ("epoch",),
    "on_batch_begin": ("batch",), "on_batch_end": ("batch",),
    "on_train_batch_begin": ("batch",), "on_train_batch_end": ("batch",),
    "on_test_begin": (), "on_test_end": (),
    "on_test_batch_begin": ("batch",), "on_test_batch_end": ("batch",),
    "on_predict_begin": (), "on_predict_end": (),
    "on_predict_batch_begin": ("batch",), "on_predict_batch_end": ("batch",),
}


def print_msg(message):
    """Prints a callback's message to ``sys.stdout`` (looked up at each call, so a
    redirected or captured stdout gets it), as Keras' ``io_utils.print_msg`` does."""
    sys.stdout.write(message + "\n")
    sys.stdout.flush()


class Callback:
    """Base class: override the hooks you need; each takes ``logs`` (a dict or None).

    ``params`` (``{"epochs": E, "steps": S, "verbose": V}``) and ``model`` are set by
    the loop (``set_params``, ``set_model``).

    Example::

        class PrintLoss(jt.keras.callbacks.Callback):
            def on_epoch_end(self, epoch, logs=None):
                print(epoch, logs["loss"])
    """

    def __init__(self):
        self.params = None
        self._model = None

    def set_params(self, params):
        self.params = params

    def set_model(self, model):
        self._model = model

    @property
    def model(self):
        return self._model

    def on_batch_begin(self, batch, logs=None):
        """Keras 2's name of ``on_train_batch_begin``."""

    def on_batch_end(self, batch, logs=None):
        """Keras 2's name of ``on_train_batch_end``."""

    def on_epoch_begin(self, epoch, logs=None):
        """At the start of an epoch of training."""

    def on_epoch_end(self, epoch, logs=None):
        """At the end of an epoch; ``logs`` holds the epoch's metric results."""

    def on_train_batch_begin(self, batch, logs=None):
        """Before a training step; calls ``on_batch_begin`` unless overridden."""
        self.on_batch_begin(batch, logs=logs)

    def on_train_batch_end(self, batch, logs=None):
        """After a training step; calls ``on_batch_end`` unless overridden."""
        self.on_batch_end(batch, logs=logs)

    def on_test_batch_begin(self, batch, logs=None):
        """Before a batch of evaluation."""

    def on_test_batch_end(self, batch, logs=None):
        """After a batch of evaluation."""

    def on_predict_batch_begin(self, batch, logs=None):
        """Before a batch of prediction."""

    def on_predict_batch_end(self, batch, logs=None):
        """After a batch of prediction."""

    def on_train_begin(self, logs=None):
        """At the start of training."""

    def on_train_end(self, logs=None):
        """At the end of training."""

    def on_test_begin(self, logs=None):
        """At the start of evaluation."""

    def on_test_end(self, logs=None):
        """At the end of evaluation."""

    def on_predict_begin(self, logs=None):
        """At the start of prediction."""

    def on_predict_end(self, logs=None):
        """At the end of prediction."""


def _pythonify(logs):
    """``logs`` flattened (a nested dict's items join the top level), in sorted key
    order, with each value that ``float()`` accepts (tensors, numpy scalars) as a float."""
    if getattr(logs, "_jt_lazy_logs", False):
        return logs  # fit's batch logs: floats in sorted order when a callback reads them
    out = {}
    for key, value in sorted((logs or {}).items()):
        if isinstance(value, dict):
            out.update(_pythonify(value))
            continue
        if not isinstance(value, (str, bytes)):
            try:
                value = float(value)
            except (TypeError, ValueError):
                pass  # a non-scalar value reaches the callbacks as it is
        out[key] = value
    return out


def _flatten(callbacks):
    if callbacks is None:
        return []
    if isinstance(callbacks, Callback):
        return [callbacks]
    out = []
    for c in callbacks:
        out.extend(_flatten(c) if isinstance(c, (list, tuple)) else [c])
    for c in out:
        if not isinstance(c, Callback):
            raise TypeError(
                "CallbackList: every callback must be a jt.keras.callbacks.Callback "
                f"instance, got {c!r} ({type(c).__name__})")
    return out


class CallbackList(Callback):
    """Calls each hook on every callback in order, with the same ``logs`` dict.

    Args:
        callbacks: a list (nested lists are flattened) of ``Callback`` instances.
        add_history: append a ``History`` when the list has none.
        add_progbar: append a ``ProgbarLogger`` when the list has none.
        model: passed to every callback's ``set_model`` (``model.history`` becomes
            the list's ``History``).
        **params: passed to every callback's ``set_params`` (``epochs``, ``steps``,
            ``verbose``).

    Logs are made Python floats (tensors converted) and their keys sorted before each
    hook, as Keras does. Unlike Keras, batch-end hooks are never run on a thread.

    Example::

        cbs = CallbackList([EarlyStopping("loss")], add_history=True, model=model,
                           epochs=5, steps=10, verbose=0)
        cbs.on_train_begin()
        ...
    """

    def __init__(self, callbacks=None, add_history=False, add_progbar=False, model=None,
                 **params):
        super().__init__()
        self.callbacks = _flatten(callbacks)
        self._open_blocks = 0
        self._history = None
        self._progbar = None
        self._add_default_callbacks(add_history, add_progbar)
        self.set_model(model)
        self.set_params(params)

    def _add_default_callbacks(self, add_history, add_progbar):
        from .progbar import ProgbarLogger

        for c in self.callbacks:
            if isinstance(c, ProgbarLogger):
                self._progbar = c
            elif isinstance(c, History):
                self._history = c
        if self._history is None and add_history:
            self._history = History()
            self.callbacks.append(self._history)
        if self._progbar is None and add_progbar:
            self._progbar = ProgbarLogger()
            self.callbacks.append(self._progbar)

    def append(self, callback):
        """Adds ``callback`` at the end, with the list's model and params."""
        (callback,) = _flatten([callback])
        if self.model is not None:
            callback.set_model(self.model)
        if self.params:
            callback.set_params(self.params)
        self.callbacks.append(callback)

    def __iter__(self):
        return iter(self.callbacks)

    def __len__(self):
        return len(self.callbacks)

    def set_params(self, params):
        self.params = params
        if params:
            for c in self.callbacks:
                c.set_params(params)

    def set_model(self, model):
        if model is None:
            return
        super().set_model(model)
        if self._history is not None:
            model.history = self._history
        for c in self.callbacks:
            c.set_model(model)

    def _listeners(self, hook):
        """The callbacks whose class overrides a batch hook (or the Keras 2 alias it
        calls): the others' hooks do nothing, and a step should not pay for them."""
        cache = self.__dict__.setdefault("_listening", {})
        key = (hook, len(self.callbacks))
        found = cache.get(key)
        if found is None:
            names = [hook]
            if hook in ("on_train_batch_begin", "on_train_batch_end"):
                names.append(hook.replace("train_", ""))
            found = cache[key] = [
                c for c in self.callbacks
                if any(getattr(getattr(c, n), "__func__", getattr(c, n))
                       is not getattr(Callback, n) for n in names)]
        return found

    def _call(self, hook, *args, logs=None):
        # as Keras: batch hooks get logs by keyword, the others by position
        if "batch" in hook:
            targets = self._listeners(hook)
            if not targets:
                return
            logs = _pythonify(logs)
            for c in targets:
                getattr(c, hook)(*args, logs=logs)
            return
        logs = _pythonify(logs)
        for c in self.callbacks:
            getattr(c, hook)(*args, logs)

    def _begin(self, hook, logs):
        self._open_blocks += 1
        self._call(hook, logs=logs)

    def _end(self, hook, logs):
        if self._open_blocks <= 0:
            raise ValueError(
                f"CallbackList.{hook} was called without the matching "
                f"{hook.replace('_end', '_begin')}")
        self._call(hook, logs=logs)
        self._open_blocks -= 1

    def on_batch_begin(self, batch, logs=None):
        self._call("on_batch_begin", batch, logs=logs)

    def on_batch_end(self, batch, logs=None):
        self._call("on_batch_end", batch, logs=logs)

    def on_epoch_begin(self, epoch, logs=None):
        self._call("on_epoch_begin", epoch, logs=logs)

    def on_epoch_end(self, epoch, logs=None):
        self._call("on_epoch_end", epoch, logs=logs)

    def on_train_batch_begin(self, batch, logs=None):
        self._call("on_train_batch_begin", batch, logs=logs)

    def on_train_batch_end(self, batch, logs=None):
        self._call("on_train_batch_end", batch, logs=logs)

    def on_test_batch_begin(self, batch, logs=None):
        self._call("on_test_batch_begin", batch, logs=logs)

    def on_test_batch_end(self, batch, logs=None):
        self._call("on_test_batch_end", batch, logs=logs)

    def on_predict_batch_begin(self, batch, logs=None):
        self._call("on_predict_batch_begin", batch, logs=logs)

    def on_predict_batch_end(self, batch, logs=None):
        self._call("on_predict_batch_end", batch, logs=logs)

    def on_train_begin(self, logs=None):
        self._begin("on_train_begin", logs)

    def on_train_end(self, logs=None):
        self._end("on_train_end", logs)

    def on_test_begin(self, logs=None):
        self._begin("on_test_begin", logs)

    def on_test_end(self, logs=None):
        self._end("on_test_end", logs)

    def on_predict_begin(self, logs=None):
        self._begin("on_predict_begin", logs)

    def on_predict_end(self, logs=None):
        self._end("on_predict_end", logs)


class History(Callback):
    """Records each epoch's ``logs``: ``history.history["loss"]`` lists the losses, and
    ``history.epoch`` the epoch numbers. ``fit`` adds one and returns it."""

    def __init__(self):
        super().__init__()
        self.history = {}
        self.epoch = []

    def on_train_begin(self, logs=None):
        self.epoch = []

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        self.epoch.append(epoch)
        for k, v in logs.items():
            self.history.setdefault(k, []).append(v)
        if self._model is not None:
            self._model.history = self


class LambdaCallback(Callback):
    """A callback made of functions: each keyword names a hook and gives the function
    that replaces it, called with the hook's arguments.

    Args:
        on_epoch_begin, on_epoch_end: ``f(epoch, logs)``.
        on_train_begin, on_train_end: ``f(logs)``.
        on_train_batch_begin, on_train_batch_end: ``f(batch, logs)``.
        **kwargs: any other hook by its name (``on_test_end=f``, ...).

    Example::

        LambdaCallback(on_epoch_end=lambda epoch, logs: print(epoch, logs["loss"]))
    """

    def __init__(self, on_epoch_begin=None, on_epoch_end=None, on_train_begin=None,
                 on_train_end=None, on_train_batch_begin=None, on_train_batch_end=None,
                 **kwargs):
        super().__init__()
        hooks = dict(on_epoch_begin=on_epoch_begin, on_epoch_end=on_epoch_end,
                     on_train_begin=on_train_begin, on_train_end=on_train_end,
                     on_train_batch_begin=on_train_batch_begin,
                     on_train_batch_end=on_train_batch_end, **kwargs)
        for name, fn in hooks.items():
            if name not in HOOKS:
                raise TypeError(
                    f"LambdaCallback: {name!r} is not a callback hook; the hooks are "
                    f"{', '.join(sorted(HOOKS))}")
            if fn is None:
                continue
            if not callable(fn):
                raise TypeError(f"LambdaCallback: {name} must be callable, got {fn!r}")
            setattr(self, name, fn)


class TerminateOnNaN(Callback):
    """Stops training when a training step's loss is NaN or infinite.

    After the batch whose ``logs["loss"]`` is not finite it prints
    ``Batch {batch}: Invalid loss, terminating training`` and sets
    ``model.stop_training``; with ``raise_error=True`` it raises a ``RuntimeError``
    instead, ending ``fit`` at once (``on_train_end`` is not reached).

    Example::

        model.fit(x, y, callbacks=[jt.keras.callbacks.TerminateOnNaN()])
    """

    def __init__(self, raise_error=False):
        super().__init__()
        self.raise_error = bool(raise_error)

    def on_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is None:
            return
        if not isinstance(loss, numbers.Real):
            loss = float(loss)
        if math.isfinite(loss):
            return
        if self.raise_error:
            raise RuntimeError(
                f"NaN or Inf loss encountered at batch {batch}. Loss value: {loss}. "
                "Terminating training immediately.")
        print_msg(f"Batch {batch}: Invalid loss, terminating training")
        self.model.stop_training = True
