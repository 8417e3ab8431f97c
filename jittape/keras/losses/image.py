"""The losses of image models, as per-sample functions: the overlap losses of
segmentation (``dice``, ``tversky``), the metric-learning ``circle`` loss of embeddings,
and the noise-robust ``categorical_generalized_cross_entropy`` (Keras 3's
``keras/src/losses/losses.py``)."""

from __future__ import annotations

from ... import ops as _ops
from ...errors import InvalidArgumentError
from .base import EPSILON, _pred, _remember_mask, _true_like


def _sum(x, axis):
    return _ops.reduce_sum(x, axis=None if axis is None else list(_axes(axis)))


def _axes(axis):
    return (axis,) if isinstance(axis, int) else tuple(axis)


def dice(y_true, y_pred, axis=None):
    """``1 - 2 sum(y_true y_pred) / (sum(y_true) + sum(y_pred) + eps)``, the sums over
    ``axis`` (an int or a tuple; ``None``: every axis, one value for the whole batch).

    Example::

        jt.losses.dice(masks, probabilities, axis=(1, 2, 3))  # one value per image
    """
    p = _pred(y_pred)
    y = _true_like(y_true, p)
    intersection = _sum(y * p, axis)
    return 1.0 - 2.0 * intersection / (_sum(y, axis) + _sum(p, axis) + EPSILON)


def tversky(y_true, y_pred, alpha=0.5, beta=0.5, axis=None):
    """``1 - tp / (tp + alpha fp + beta fn + eps)`` with ``tp = sum(y_true y_pred)``,
    ``fp = sum((1 - y_pred) y_true)`` and ``fn = sum(y_pred (1 - y_true))`` over ``axis``
    (Keras 3's names: its ``fp`` counts the true entries predicted absent). ``alpha =
    beta = 0.5`` is ``dice``."""
    p = _pred(y_pred)
    y = _true_like(y_true, p)
    tp = _sum(y * p, axis)
    fp = _sum((1.0 - p) * y, axis)
    fn = _sum(p * (1.0 - y), axis)
    return 1.0 - tp / (tp + fp * alpha + fn * beta + EPSILON)


def _masked_logsumexp(mask, x):
    """logsumexp over axis 1 of the entries ``mask`` keeps (-inf for a row keeping none)."""
    return _ops.reduce_logsumexp(_ops.where(mask, x, float("-inf") * _ops.ones_like(x)), 1)


def circle(y_true, y_pred, ref_labels=None, ref_embeddings=None, remove_diagonal=True,
           gamma=80, margin=0.4):
    """Circle loss of L2-normalized embeddings ``y_pred`` (``(batch, dim)``) with integer
    labels ``y_true`` (``(batch,)``), against ``ref_embeddings`` / ``ref_labels`` (the
    batch itself by default), as Keras 3 computes it::

        dist = max(1 - y_pred @ ref^T, 0)                 # cosine distances
        pos  = pairs of one label (not a sample with itself when remove_diagonal)
        p = logsumexp over pos of -gamma relu(margin + dist) (margin - dist)
        n = logsumexp over the other pairs of gamma relu(1 + margin - dist) (1 - margin - dist)
        loss = softplus(p + n)

    The result masks out the samples whose loss is 0 (a mean over the batch counts only
    the others), as Keras' does.
    """
    p = _pred(y_pred)
    if p.ndim != 2:
        raise InvalidArgumentError(
            f"circle: y_pred must be embeddings of shape (batch, dim), got shape {list(p.shape)}")
    labels = _ops.cast(y_true, "int32")
    ref = p if ref_embeddings is None else _pred(ref_embeddings)
    ref_labels = labels if ref_labels is None else _ops.cast(ref_labels, "int32")
    dist = _ops.maximum(1.0 - _ops.matmul(p, _ops.transpose(ref)), 0.0)
    query = _ops.reshape(labels, [-1, 1])
    keys = _ops.reshape(ref_labels, [1, -1])
    positive = _ops.equal(query, keys)
    negative = _ops.logical_not(positive)
    if remove_diagonal:
        eye = _ops.cast(_ops.eye(query.shape[0], keys.shape[1]), "bool")
        positive = _ops.logical_and(positive, _ops.logical_not(eye))
    pos_w = _ops.maximum((margin + dist) * _ops.cast(positive, p.dtype), 0.0)
    neg_w = _ops.maximum((1.0 + margin - dist) * _ops.cast(negative, p.dtype), 0.0)
    p_loss = _masked_logsumexp(positive, -gamma * pos_w * (margin - dist))
    n_loss = _masked_logsumexp(negative, gamma * neg_w * ((1.0 - margin) - dist))
    loss = _ops.nn.softplus(p_loss + n_loss)
    return _remember_mask(loss, _ops.greater(loss, 0.0))


def categorical_generalized_cross_entropy(y_true, y_pred, q):
    """``(1 - p^q) / q`` per sample, ``p`` the probability ``y_pred`` (``(batch,
    classes)``) gives the integer label ``y_true`` (``(batch,)`` or ``(batch, 1)``): like
    the crossentropy as ``q -> 0``, like the absolute error as ``q -> 1``.

    (Keras 3.15 broadcasts ``(batch, 1)`` labels against the batch into a ``(batch,
    batch)`` result; here they are the ``(batch,)`` labels its docstring says they are.)
    """
    p = _pred(y_pred)
    labels = _ops.cast(y_true, "int32")
    if labels.ndim == p.ndim and labels.ndim > 1 and labels.shape[-1] == 1:
        labels = _ops.squeeze(labels, -1)
    hot = _ops.one_hot(labels, p.shape[-1], dtype=p.dtype)
    prob = _ops.reduce_sum(p * hot, axis=-1)
    return (1.0 - _ops.pow(prob, q)) / q
