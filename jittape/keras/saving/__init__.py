"""``jt.keras.saving``: Keras 3's ``keras.saving`` names. ``register_keras_serializable``
and the registry of custom objects (``object_registration``), the generic
``serialize_keras_object``/``deserialize_keras_object`` (``serialization_lib``), the
records of every family (``serialization``), ``.weights.h5`` files (``weights``), and the
``.keras`` archive's ``save_model``/``load_model``.

The archive lives with the functional model (``jittape.keras.models``), which sits above
this package: ``jittape.keras.models`` hands its two functions here when it is imported
(which ``import jittape.keras`` does before anything can reach this module's names), and
the module's ``__getattr__`` gives those very functions, so
``jt.keras.saving.load_model is jt.keras.models.load_model`` as in Keras, without an
upward import.
"""

from __future__ import annotations

from .object_registration import (CustomObjectScope, custom_object_scope, get_custom_objects,
                                  get_registered_name, get_registered_object,
                                  register_keras_serializable)
from .serialization_lib import deserialize_keras_object, serialize_keras_object
from .weights import load_weights as _load_weights
from .weights import save_weights as _save_weights

__all__ = ["CustomObjectScope", "custom_object_scope", "get_custom_objects",
           "get_registered_name", "get_registered_object", "register_keras_serializable",
           "serialize_keras_object", "deserialize_keras_object", "save_model", "load_model",
           "save_weights", "load_weights"]

_ARCHIVE: dict = {}  # "save_model", "load_model": set by jittape.keras.models


def provide_archive(save_model, load_model):
    """Called by ``jittape.keras.models`` on import: the ``.keras`` archive's functions."""
    _ARCHIVE.update(save_model=save_model, load_model=load_model)


def save_weights(model, filepath, overwrite=True, max_shard_size=None, **kwargs):
    """``model.save_weights(filepath)``: the weights as a ``.weights.h5`` file (Keras 3's
    layout). ``max_shard_size`` (Keras' sharded ``.weights.json``) is not supported."""
    if max_shard_size is not None:
        raise ValueError("save_weights: max_shard_size (sharded .weights.json files) is not "
                         "supported by jittape; save one .weights.h5 file")
    if kwargs:
        raise TypeError(f"save_weights: unexpected keyword argument(s) {sorted(kwargs)}")
    return _save_weights(model, filepath, overwrite=overwrite)


def load_weights(model, filepath, skip_mismatch=False, **kwargs):
    """``model.load_weights(filepath)`` from a ``.weights.h5`` file (here or Keras')."""
    if kwargs:
        raise TypeError(f"load_weights: unexpected keyword argument(s) {sorted(kwargs)}")
    return _load_weights(model, filepath, skip_mismatch=skip_mismatch)


def __getattr__(name):
    if name in ("save_model", "load_model"):
        try:
            return _ARCHIVE[name]
        except KeyError:
            raise AttributeError(
                f"jt.keras.saving.{name}: jittape.keras.models is not imported yet (it "
                "provides the .keras archive); import jittape.keras first") from None
    raise AttributeError(f"module 'jittape.keras.saving' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | {"save_model", "load_model"})
