"""``jt.keras``: Keras' names for jittape's objects, so ``tf.keras.X`` ports as ``jt.keras.X``.

``jt.keras.layers`` *is* ``jt.layers`` (likewise ``optimizers``, ``losses``,
``metrics``, ``initializers``, ``regularizers``, ``constraints``); ``activations``,
``callbacks``, ``utils``, ``backend`` and ``models`` (the models, ``clone_model``,
``load_model``, ``save_model``) live here. ``from jittape.keras.layers import Dense``
works.
"""

from __future__ import annotations

import sys as _sys

from . import constraints, initializers, layers, losses, metrics, optimizers, regularizers
from .layers import Input, InputLayer, Layer  # noqa: F401
from .metrics import Metric  # noqa: F401
from .optimizers import schedules as _schedules
from .models.model import Model  # noqa: F401
from .models.sequential import Sequential  # noqa: F401

# the short forms' modules under their Keras paths, so that ``import jittape.keras.layers``
# and ``from jittape.keras.optimizers.schedules import ExponentialDecay`` find them
for _name, _mod in (("layers", layers), ("optimizers", optimizers), ("losses", losses),
                    ("metrics", metrics), ("initializers", initializers),
                    ("regularizers", regularizers), ("constraints", constraints),
                    ("optimizers.schedules", _schedules)):
    _sys.modules.setdefault(f"{__name__}.{_name}", _mod)

from . import activations, backend, callbacks, models, utils  # noqa: E402,F401

__all__ = ["layers", "optimizers", "losses", "metrics", "initializers", "regularizers",
           "constraints", "activations", "callbacks", "utils", "backend", "Sequential", "Layer",
           "Metric", "Model", "Input", "InputLayer", "models"]

_LATER = {
    "mixed_precision": "jt.keras.mixed_precision",
}


def __getattr__(name):
    if name in _LATER:
        raise AttributeError(
            f"jt.keras.{name} is not available yet: {_LATER[name]} comes with a later "
            "issue. Until then, write the training loop with jt.GradientTape, jt.Sequential "
            "and an optimizer's apply_gradients.")
    raise AttributeError(f"module 'jittape.keras' has no attribute {name!r}")
