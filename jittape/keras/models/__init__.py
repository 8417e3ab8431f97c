"""``jt.keras.models``: Keras 3's ``keras.models`` names (the models, ``clone_model``, and
the ``.keras`` archive's ``save_model`` / ``load_model``)."""

from __future__ import annotations

from .cloning import clone_model
from ..layers import Input, InputLayer
from .functional import load_model, save_model
from .model import Functional, Model
from .sequential import Sequential
from ..saving import provide_archive

provide_archive(save_model, load_model)  # jt.keras.saving.save_model / load_model

__all__ = ["Model", "Functional", "InputLayer", "Input", "Sequential", "clone_model",
           "load_model", "save_model"]
