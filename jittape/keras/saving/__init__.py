"""Keras 3's saving: ``serialization`` (the serialized-object records of every family)
and ``weights`` (``.weights.h5`` files). The ``.keras`` archive's ``save_model`` and
``load_model`` live with the functional model, in ``jittape.keras.models``."""
