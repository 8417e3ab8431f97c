"""jt.data against tf.data itself, run only where TensorFlow is installed: the same
pipelines give the same elements in the same order, the same cardinality and the same
element_spec; shuffles are checked for their properties (TF's random stream is its own).

Each pipeline is written once against ``m.data.Dataset`` (``m`` is ``tensorflow`` or
``jittape``).
"""

import collections

import numpy as np
import pytest

import jittape as jt

tf = pytest.importorskip("tensorflow")

X = np.arange(30, dtype=np.float32).reshape(10, 3)
Y = np.arange(10, dtype=np.int64)


def _gen():
    for n in (2, 3, 1, 4, 2):
        yield np.arange(n, dtype=np.int64)


def _ragged(m):
    return m.data.Dataset.from_generator(
        _gen, output_signature=m.TensorSpec([None], m.int64))


PIPELINES = {
    "slices": lambda m: m.data.Dataset.from_tensor_slices((X, Y)),
    "dict": lambda m: m.data.Dataset.from_tensor_slices({"x": X, "y": Y}),
    "lists": lambda m: m.data.Dataset.from_tensor_slices(([1, 2, 3], [0.5, 1.5, 2.5])),
    "from_tensors": lambda m: m.data.Dataset.from_tensors((X, 1.0)),
    "range": lambda m: m.data.Dataset.range(2, 20, 3),
    "batch": lambda m: m.data.Dataset.from_tensor_slices((X, Y)).batch(4),
    "batch_drop": lambda m: m.data.Dataset.from_tensor_slices(X).batch(4, drop_remainder=True),
    "unbatch": lambda m: m.data.Dataset.from_tensor_slices(X).batch(3).unbatch(),
    "unbatch_drop": lambda m: m.data.Dataset.from_tensor_slices(X).batch(3, True).unbatch(),
    "padded_batch": lambda m: _ragged(m).padded_batch(2),
    "padded_shapes": lambda m: _ragged(m).padded_batch(
        3, padded_shapes=[6], padding_values=np.int64(-1), drop_remainder=True),
    "repeat_take": lambda m: m.data.Dataset.range(4).repeat().take(10),
    "repeat_batch": lambda m: m.data.Dataset.range(5).repeat(3).batch(4),
    "skip": lambda m: m.data.Dataset.range(10).skip(4),
    "take_skip": lambda m: m.data.Dataset.from_tensor_slices(Y).skip(2).take(5),
    "enumerate": lambda m: m.data.Dataset.from_tensor_slices(X).enumerate(start=2),
    "shard": lambda m: m.data.Dataset.range(17).shard(4, 3),
    "zip": lambda m: m.data.Dataset.zip(
        (m.data.Dataset.range(6), m.data.Dataset.from_tensor_slices(X))),
    "zip_nested": lambda m: m.data.Dataset.zip(
        {"a": m.data.Dataset.range(3), "b": (m.data.Dataset.range(5), m.data.Dataset.range(4))}),
    "filter": lambda m: m.data.Dataset.range(20).filter(lambda x: x % 3 == 1),
    "map": lambda m: m.data.Dataset.from_tensor_slices((X, Y)).map(
        lambda x, y: (x * 2.0, y + 1)),
    "map_batched": lambda m: m.data.Dataset.from_tensor_slices(X).batch(4).map(
        lambda x: m.reduce_sum(x, axis=1)),
    "map_dict": lambda m: m.data.Dataset.from_tensor_slices({"x": X, "y": Y}).map(
        lambda d: d["y"] * 2),
    "concatenate": lambda m: m.data.Dataset.range(3).concatenate(m.data.Dataset.range(7, 9)),
    "cache": lambda m: m.data.Dataset.range(5).map(lambda x: x * x).cache(),
    "prefetch": lambda m: m.data.Dataset.from_tensor_slices(X).batch(3).prefetch(2),
    "filter_repeat": lambda m: m.data.Dataset.range(6).filter(lambda x: x > 2).repeat(2),
    "empty_repeat": lambda m: m.data.Dataset.range(0).repeat(),
}


def _np(v):
    return jt.nest.flatten(v) if isinstance(v, (tuple, dict)) else [v]


def _as_lists(m, ds):
    out = []
    for el in ds.as_numpy_iterator():
        if isinstance(el, dict):
            el = tuple(el[k] for k in sorted(el))
        flat = []
        stack = [el]
        while stack:
            s = stack.pop()
            if isinstance(s, dict):
                stack.extend(s[k] for k in reversed(sorted(s)))
            elif isinstance(s, tuple):
                stack.extend(reversed(s))
            else:
                flat.append(np.asarray(s))
        out.append(flat)
    return out


def _spec(m, spec):
    if isinstance(spec, dict):
        return {k: _spec(m, v) for k, v in spec.items()}
    if isinstance(spec, tuple):
        return tuple(_spec(m, v) for v in spec)
    shape = None if spec.shape is None or (m is tf and spec.shape.rank is None) else tuple(
        spec.shape)
    return shape, np.dtype(spec.dtype.name).name


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_same_elements_cardinality_and_spec(name):
    t, j = PIPELINES[name](tf), PIPELINES[name](jt)
    te, je = _as_lists(tf, t), _as_lists(jt, j)
    assert len(te) == len(je)
    for a, b in zip(te, je):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert x.dtype == y.dtype and x.shape == y.shape
            np.testing.assert_allclose(x, y, rtol=1e-6)
    assert int(t.cardinality()) == int(j.cardinality())
    assert _spec(tf, t.element_spec) == _spec(jt, j.element_spec)


@pytest.mark.parametrize("name", ["batch", "slices", "repeat_take", "filter", "unbatch_drop"])
def test_len_and_its_errors_match(name):
    t, j = PIPELINES[name](tf), PIPELINES[name](jt)
    try:
        want = len(t)
    except TypeError as e:
        with pytest.raises(TypeError, match=str(e)):
            len(j)
    else:
        assert len(j) == want


def test_infinite_and_unknown_cardinality_constants():
    assert jt.data.INFINITE_CARDINALITY == int(tf.data.INFINITE_CARDINALITY)
    assert jt.data.UNKNOWN_CARDINALITY == int(tf.data.UNKNOWN_CARDINALITY)
    assert jt.data.AUTOTUNE == int(tf.data.AUTOTUNE)
    for m in (tf, jt):
        assert int(m.data.Dataset.range(3).repeat().cardinality()) == -1
        assert int(m.data.Dataset.range(3).filter(lambda x: x > 0).cardinality()) == -2


def test_shuffle_properties_match():
    for m in (tf, jt):
        one = [int(v) for v in m.data.Dataset.range(30).shuffle(1, seed=3).as_numpy_iterator()]
        assert one == list(range(30))
        full = [int(v) for v in m.data.Dataset.range(30).shuffle(64, seed=3)
                .as_numpy_iterator()]
        assert sorted(full) == list(range(30)) and full != list(range(30))
        ds = m.data.Dataset.range(30).shuffle(30, seed=4)
        e1 = [int(v) for v in ds.as_numpy_iterator()]
        e2 = [int(v) for v in ds.as_numpy_iterator()]
        assert e1 != e2 and sorted(e1) == sorted(e2)
        fixed = m.data.Dataset.range(30).shuffle(30, seed=4, reshuffle_each_iteration=False)
        assert list(fixed.as_numpy_iterator()) == list(fixed.as_numpy_iterator())


def test_errors_have_the_same_kind():
    for m in (tf, jt):
        # TF's InvalidArgumentError is an OpError; jittape's is a ValueError subclass
        invalid = tf.errors.InvalidArgumentError if m is tf else jt.errors.InvalidArgumentError
        with pytest.raises(ValueError, match="Dimensions 3 and 2 are not compatible"):
            m.data.Dataset.from_tensor_slices((np.zeros(3), np.zeros(2)))
        with pytest.raises(ValueError, match="Cannot unbatch an input with scalar components"):
            m.data.Dataset.range(3).unbatch().element_spec
        with pytest.raises(invalid, match="Batch size must be greater than zero"):
            m.data.Dataset.range(3).batch(0)
        with pytest.raises(invalid, match="Cannot batch tensors with different shapes in "
                                             "component 0"):
            list(_ragged(m).batch(2).as_numpy_iterator())
        with pytest.raises(TypeError, match="Incompatible dataset elements"):
            m.data.Dataset.range(3).concatenate(m.data.Dataset.from_tensor_slices([1.0]))


def test_namedtuple_is_one_map_argument():
    P = collections.namedtuple("P", "a b")
    for m in (tf, jt):
        ds = m.data.Dataset.from_tensor_slices(P([1, 2], [3, 4])).map(lambda p: p.a * p.b)
        assert [int(v) for v in ds.as_numpy_iterator()] == [3, 8]
