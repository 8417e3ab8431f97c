"""``serialize``/``deserialize``: a layer as Keras 3's record (module, class name, config,
build config) and back, through the registry of jittape's layer classes."""

from __future__ import annotations

from ..saving import serialization as _config
from .base import _LAYER_CLASSES, Layer


# the Keras module a class is written under, when it is not "keras.layers"
_KERAS_MODULE = {"Sequential": "keras", "Model": "keras", "Functional": "keras"}


def serialize(layer) -> dict:
    """A layer as Keras 3's record: ``{"module", "class_name", "config",
    "registered_name"}`` and, once built, ``"build_config"`` (its input shape).

    jittape's layers are written under Keras' modules (``"keras.layers"``); a class of
    your own under its module, with its class name as ``registered_name``.

    Example:
        >>> record = jt.layers.serialize(jt.layers.Dense(2))
        >>> jt.layers.deserialize(record).units  # 2
    """
    if not isinstance(layer, Layer):
        raise TypeError(f"serialize: expected a jt.layers.Layer, got {type(layer).__name__}")
    module = _KERAS_MODULE.get(type(layer).__name__, "keras.layers")
    record = _config.serialize(layer, module, _LAYER_CLASSES, "layer")
    build = layer.get_build_config()
    if build is not None:
        record["build_config"] = build
    return record


def deserialize(config, custom_objects=None):
    """The layer a record from ``serialize`` (or Keras) describes, built when the record
    has a ``build_config``.

    ``class_name`` is looked up in ``custom_objects`` (name -> class; also used for the
    nested initializers, regularizers, constraints and activation functions of your
    own), then among jittape's layers.
    """
    if not isinstance(config, dict) or "class_name" not in config:
        raise ValueError(
            f"deserialize: expected a layer record with 'class_name' and 'config', got {config!r}")
    with _config.custom_object_scope(custom_objects):
        cls = _config.find(config, "layer", _LAYER_CLASSES)
        layer = cls.from_config(config.get("config", {}))
        if config.get("build_config"):
            layer.build_from_config(config["build_config"])
    return layer


# the models are layers: their records name "keras" (Keras' own files name the source module)
_config.export("layer", ("keras.layers", "keras", "keras.models", "keras.src.models.functional",
                         "keras.src.models.sequential", "keras.src.models.model"),
               Layer, _LAYER_CLASSES, serialize, deserialize)
