"""``jt.keras.utils``: ``set_random_seed`` and ``to_categorical``, as in Keras 3, and
Keras 3's aliases of ``jt.keras.saving``'s registry and generic (de)serialization."""

from __future__ import annotations

import random as _py_random

import numpy as np

from .. import ops as _ops
from .. import random as _random
from ..tensor import Tensor, Variable
from .saving import (CustomObjectScope, custom_object_scope, deserialize_keras_object,
                     get_custom_objects, get_registered_name, get_registered_object,
                     register_keras_serializable, serialize_keras_object)

__all__ = ["set_random_seed", "to_categorical", "CustomObjectScope", "custom_object_scope",
           "deserialize_keras_object", "get_custom_objects", "get_registered_name",
           "get_registered_object", "register_keras_serializable", "serialize_keras_object"]


def set_random_seed(seed):
    """Seed Python's ``random``, numpy's global state and ``jt.random`` (which
    initializers and ``Dropout`` draw from) with one int, as
    ``keras.utils.set_random_seed`` seeds Python, numpy and TensorFlow.

    Example::

        jt.keras.utils.set_random_seed(0)
        a = jt.layers.Dense(3).kernel_initializer((2, 3))
        jt.keras.utils.set_random_seed(0)
        b = jt.layers.Dense(3).kernel_initializer((2, 3))  # equal to a
    """
    if not isinstance(seed, int):
        raise ValueError("Expected `seed` argument to be an integer. "
                         f"Received: seed={seed} (of type {type(seed)})")
    _py_random.seed(seed)
    np.random.seed(seed)
    _random.set_seed(seed)


def to_categorical(x, num_classes=None):
    """One-hot float64 rows for integer class values (Keras 3's rules): a trailing
    axis of 1 is dropped (``(N, 1)`` -> ``(N, C)``); ``num_classes`` defaults to
    ``max(x) + 1``; the class axis is last.

    Example::

        to_categorical([0, 2], num_classes=3)  # [[1., 0., 0.], [0., 0., 1.]]
    """
    if isinstance(x, (Tensor, Variable)):  # a tensor gives a float32 tensor, as Keras'
        shape = tuple(x.shape)
        if len(shape) > 1 and shape[-1] == 1:
            x = _ops.reshape(x, shape[:-1])
        if num_classes is None:
            raise ValueError("to_categorical of a tensor needs num_classes")
        return _ops.one_hot(x, int(num_classes))
    x = np.array(x, dtype="int64")
    input_shape = x.shape
    if input_shape and input_shape[-1] == 1 and len(input_shape) > 1:
        input_shape = tuple(input_shape[:-1])
    x = x.reshape(-1)
    if not num_classes:
        num_classes = np.max(x) + 1
    batch_size = x.shape[0]
    categorical = np.zeros((batch_size, num_classes))
    categorical[np.arange(batch_size), x] = 1
    return np.reshape(categorical, input_shape + (num_classes,))
