"""``jt.keras``: Keras 3 over jittape's TF core, laid out like Keras 3's sources, so
``tf.keras.X`` ports as ``jt.keras.X``.

``layers``, ``optimizers``, ``losses``, ``metrics``, ``initializers``, ``regularizers``,
``constraints``, ``activations``, ``callbacks``, ``utils``, ``backend``, ``models``
(the models, ``clone_model``, ``load_model``, ``save_model``) and ``saving``
(``register_keras_serializable``, ``serialize_keras_object``, records, weights files,
the archive's functions) are this package's modules; ``name_scope`` (the Keras scopes
of variables' paths, ``variables``) is Keras 3's; ``trainers`` (fit, evaluate,
predict) and ``distribution`` (DataParallel) sit below ``models``, ``saving`` below all.
The root's short forms (``jt.layers``, ``jt.Sequential``, ...) are these same modules
and classes.

Keras imports the public core (``jittape.tensor``, ``ops``, ``tape``, ``function``, ...)
and never ``jittape.compiler``: the contracts in ``pyproject.toml`` say so and
``tests/test_layering.py`` checks them.
"""

from __future__ import annotations

from . import constraints, initializers, layers, losses, metrics, optimizers, regularizers
from .layers import Input, InputLayer, Layer  # noqa: F401
from .metrics import Metric  # noqa: F401
from .models import Model, Sequential  # noqa: F401
from . import activations, backend, callbacks, models, saving, utils  # noqa: F401
from .variables import name_scope  # noqa: F401

__all__ = ["layers", "optimizers", "losses", "metrics", "initializers", "regularizers",
           "constraints", "activations", "callbacks", "utils", "backend", "Sequential", "Layer",
           "Metric", "Model", "Input", "InputLayer", "models", "saving", "name_scope"]

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
