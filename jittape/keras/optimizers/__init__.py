"""``jt.optimizers`` (also ``jt.keras.optimizers``): Keras 3's optimizers and their options.

SGD, Adam, AdamW, RMSprop, Adagrad, Adadelta, Adamax, Nadam, Ftrl and Lion, with
Keras 3 / tf.keras update rules and defaults. Every update is written with jittape
ops and applied with ``Variable.assign*``, and keeps the variable's dtype: the
gradient and the learning rate are cast to it, as Keras does. The learning rate is
stored in a float32 variable (assigning ``opt.learning_rate = 0.01`` changes it) or
given as a schedule, a callable of the step (see ``jt.optimizers.schedules``).

One ``apply_gradients`` call, in Keras 3's order:

1. drops pairs whose gradient is ``None``, with one ``UserWarning`` naming their
   variables (a ``ValueError`` when no gradient is left);
2. checks every gradient's shape against its variable's;
3. creates the slot variables of variables it has not seen before (zeros, or the
   optimizer's starting value);
4. divides the gradients by ``loss_scale_factor`` when set;
5. with ``gradient_accumulation_steps=N``: adds them to the accumulators, and goes
   on with their mean only on every ``N``-th call (a mask on the values assigned);
6. clips them (``clipnorm``, ``clipvalue`` or ``global_clipnorm``);
7. reads the learning rate ``lr`` (the schedule at the call count) and applies
   weight decay when set: ``var <- var - var * weight_decay * lr`` (the decay
   rounded to float32, as Keras' TF backend casts it);
8. applies each optimizer's update rule;
9. with ``use_ema``: updates the moving averages (and overwrites the variables with
   them every ``ema_overwrite_frequency`` updates);
10. assigns ``constraint(var)`` to each updated variable that has a ``constraint``;
11. increments the call count (the int64 ``iterations`` variable) by one.

``get``, ``serialize`` and ``deserialize`` read Keras' names and config dicts.
"""

from __future__ import annotations

from ..saving import serialization as _config
from . import schedules  # noqa: F401
from .adam import Adam, Adamax, AdamW, Nadam
from .adaptive import Adadelta, Adagrad, Ftrl, RMSprop
from .base import Optimizer
from .momentum import SGD, Lion
from .schedules import ExponentialDecay, LearningRateSchedule  # noqa: F401

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax",
           "Nadam", "Ftrl", "Lion", "schedules", "get", "serialize", "deserialize"]

_BY_NAME = {cls.__name__.lower(): cls for cls in (
    SGD, Adam, AdamW, RMSprop, Adagrad, Adadelta, Adamax, Nadam, Ftrl, Lion)}
_CLASSES = {cls.__name__: cls for cls in _BY_NAME.values()}


class _AnyCase(dict):
    """Built-in optimizers by class name in any case ("adam", "Adam"), as Keras reads them."""

    def get(self, key, default=None):
        return super().get(str(key).lower(), default)


_ANY_CASE = _AnyCase(_BY_NAME)


def serialize(optimizer) -> dict:
    """An optimizer as Keras serializes it: ``{"module", "class_name", "config",
    "registered_name"}`` (a schedule as learning rate is serialized inside ``config``).

    Example::

        d = jt.optimizers.serialize(jt.optimizers.Adam(1e-3))
        opt = jt.optimizers.deserialize(d)
    """
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"serialize: expected a jt.optimizers.Optimizer, got "
                        f"{type(optimizer).__name__}")
    return _config.serialize(optimizer, "keras.optimizers", _CLASSES, "optimizer")


def deserialize(config, custom_objects=None):
    """An optimizer from ``serialize()``'s dict (jittape's or Keras'): the class name is
    matched case-insensitively among the built-in optimizers, or looked up in
    ``custom_objects`` (name -> class)."""
    if not isinstance(config, dict) or "class_name" not in config:
        raise ValueError(f"deserialize: expected a dict with 'class_name' and 'config', got "
                         f"{config!r}")
    with _config.custom_object_scope(custom_objects):
        cls = _config.find(config, "optimizer", _ANY_CASE)
    return cls.from_config(dict(config.get("config") or {}), custom_objects=custom_objects)


def get(identifier):
    """An optimizer from a Keras identifier.

    Args:
        identifier: a name (``"adam"``, ``"RMSprop"``: the class name, any case) for
            an optimizer with its defaults; a config dict (``serialize()``'s, or
            ``{"class_name": "SGD", "config": {"learning_rate": 0.1}}``); an optimizer
            (returned as it is); or ``None`` (returns ``None``).

    Returns:
        An ``Optimizer``. An unknown identifier raises ``ValueError`` naming it.

    Example::

        opt = jt.optimizers.get("nadam")
    """
    if identifier is None or isinstance(identifier, Optimizer):
        return identifier
    if isinstance(identifier, dict):
        return deserialize(identifier)
    if isinstance(identifier, str):
        if identifier.lower() not in _BY_NAME:
            raise ValueError(f"Could not interpret optimizer identifier: {identifier!r}; known "
                             f"names: {', '.join(sorted(_BY_NAME))}")
        return _BY_NAME[identifier.lower()]()
    raise ValueError(f"Could not interpret optimizer identifier: {identifier!r} (a "
                     f"{type(identifier).__name__}); pass a name, a config dict or an optimizer")


_config.export("optimizer", ("keras.optimizers",), Optimizer, _CLASSES, serialize, deserialize)
