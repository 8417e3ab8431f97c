"""Keras' merge layers (``Add``, ``Subtract``, ``Multiply``, ``Average``, ``Maximum``,
``Minimum``, ``Concatenate``, ``Dot``) and their function forms (``concatenate([a, b])``)."""

from __future__ import annotations

import numbers

from ... import ops as _ops
from ...errors import InvalidArgumentError
from ..naming import _fmt_shape
from .base import Layer


class _Merge(Layer):
    """Base of the merge layers: a list of at least two tensors of one shape (up to
    broadcasting, as Keras 3 allows) becomes one."""

    _min_inputs = 2

    def _check_list(self, inputs):
        if not isinstance(inputs, (list, tuple)) or len(inputs) < self._min_inputs:
            n = len(inputs) if isinstance(inputs, (list, tuple)) else 1
            raise ValueError(
                f'layer "{self.name}" ({type(self).__name__}) must be called on a list of at '
                f"least {self._min_inputs} inputs. Received: {n} input(s)")

    def __call__(self, inputs, *args, **kwargs):
        self._check_list(inputs)
        return super().__call__(inputs, *args, **kwargs)

    def _shapes_agree(self, inputs):
        shapes = [tuple(t.shape) for t in inputs]
        try:
            _broadcast(shapes)
        except ValueError:
            raise InvalidArgumentError(
                f'layer "{self.name}" ({type(self).__name__}): the inputs have incompatible '
                f"shapes {', '.join(_fmt_shape(s) for s in shapes)}") from None

    def call(self, inputs):
        self._shapes_agree(inputs)
        out = inputs[0]
        for t in inputs[1:]:
            out = self._merge(out, t)
        return self._finish(out, len(inputs))

    def _finish(self, out, n):
        return out



def _broadcast(shapes):
    rank = max(len(s) for s in shapes)
    out = []
    for i in range(rank):
        dims = {s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0} - {1}
        if len(dims) > 1:
            raise ValueError(shapes)
        out.append(dims.pop() if dims else 1)
    return tuple(out)


class Add(_Merge):
    """The sum of its inputs."""

    def _merge(self, a, b):
        return a + b


class Subtract(_Merge):
    """``inputs[0] - inputs[1]`` (exactly two inputs)."""

    def _check_list(self, inputs):
        if not isinstance(inputs, (list, tuple)) or len(inputs) != 2:
            raise ValueError(f'layer "{self.name}" (Subtract) must be called on a list of '
                             "exactly 2 inputs")

    def _merge(self, a, b):
        return a - b


class Multiply(_Merge):
    """The elementwise product of its inputs."""

    def _merge(self, a, b):
        return a * b


class Average(_Merge):
    """The elementwise mean of its inputs."""

    def _merge(self, a, b):
        return a + b

    def _finish(self, out, n):
        return out / float(n)


class Maximum(_Merge):
    """The elementwise maximum of its inputs."""

    def _merge(self, a, b):
        return _ops.maximum(a, b)


class Minimum(_Merge):
    """The elementwise minimum of its inputs."""

    def _merge(self, a, b):
        return _ops.minimum(a, b)


class Concatenate(_Merge):
    """Join the inputs along ``axis`` (the last by default); the other dimensions must
    agree."""

    def __init__(self, axis=-1, **kwargs):
        super().__init__(**kwargs)
        if isinstance(axis, bool) or not isinstance(axis, numbers.Integral):
            raise TypeError(f"Concatenate: axis must be an int, got {axis!r}")
        self.axis = int(axis)

    def call(self, inputs):
        shapes = [tuple(t.shape) for t in inputs]
        ranks = {len(s) for s in shapes}
        rank = len(shapes[0])
        a = self.axis + rank if self.axis < 0 else self.axis
        if len(ranks) != 1 or not 0 <= a < rank or any(
            s[:a] + s[a + 1:] != shapes[0][:a] + shapes[0][a + 1:] for s in shapes
        ):
            raise InvalidArgumentError(
                f'layer "{self.name}" (Concatenate): a Concatenate layer requires inputs with '
                f"matching shapes except for the concatenation axis ({self.axis}). Received: "
                f"input_shape={[list(s) for s in shapes]}")
        return _ops.concat(list(inputs), axis=a)

    def get_config(self):
        return {**super().get_config(), "axis": self.axis}


class Dot(_Merge):
    """The dot product of two inputs along ``axes`` (an int or a pair), per sample;
    ``normalize=True`` L2-normalizes both first (cosine similarity)."""

    def __init__(self, axes, normalize=False, **kwargs):
        super().__init__(**kwargs)
        self.axes = tuple(axes) if isinstance(axes, (list, tuple)) else (int(axes), int(axes))
        self.normalize = bool(normalize)

    def _check_list(self, inputs):
        if not isinstance(inputs, (list, tuple)) or len(inputs) != 2:
            raise ValueError(f'layer "{self.name}" (Dot) must be called on a list of exactly '
                             "2 inputs")

    def call(self, inputs):
        a, b = inputs
        ax = [x + t.ndim if x < 0 else x for x, t in zip(self.axes, (a, b))]
        if a.ndim != 2 or b.ndim != 2 or ax != [1, 1]:
            if a.ndim == b.ndim == 3 and ax in ([2, 2], [1, 1], [2, 1], [1, 2]):
                pass
            else:
                raise InvalidArgumentError(
                    f'layer "{self.name}" (Dot): supports 2-D inputs with axes 1 and 3-D inputs '
                    f"with axes in (1, 2); got shapes {_fmt_shape(a.shape)}, "
                    f"{_fmt_shape(b.shape)} and axes {tuple(self.axes)}")
        if a.shape[ax[0]] != b.shape[ax[1]]:
            raise InvalidArgumentError(
                f'layer "{self.name}" (Dot): dimension {ax[0]} of {_fmt_shape(a.shape)} and '
                f"dimension {ax[1]} of {_fmt_shape(b.shape)} must be equal")
        if self.normalize:
            a = _ops.nn.l2_normalize(a, axis=ax[0])
            b = _ops.nn.l2_normalize(b, axis=ax[1])
        if a.ndim == 2:
            return _ops.reduce_sum(a * b, axis=1, keepdims=True)
        # batched: (n, i, k) x (n, k, j) style contractions through matmul
        a = a if ax[0] == 2 else _ops.transpose(a, (0, 2, 1))
        b = b if ax[1] == 1 else _ops.transpose(b, (0, 2, 1))
        return _ops.matmul(a, b)

    def get_config(self):
        return {**super().get_config(), "axes": list(self.axes), "normalize": self.normalize}


def _functional(cls):
    def fn(inputs, **kwargs):
        return cls(**kwargs)(inputs)

    fn.__name__ = cls.__name__.lower()
    fn.__doc__ = f"``{cls.__name__}(**kwargs)(inputs)``."
    return fn


add, subtract, multiply = _functional(Add), _functional(Subtract), _functional(Multiply)
average, maximum, minimum = _functional(Average), _functional(Maximum), _functional(Minimum)
concatenate = _functional(Concatenate)


def dot(inputs, axes=-1, normalize=False, **kwargs):
    """``Dot(axes, normalize)(inputs)``."""
    return Dot(axes, normalize=normalize, **kwargs)(inputs)
