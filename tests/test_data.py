"""jt.data: every Dataset method against numpy expectations, structure, errors, threads,
memory and tracing (tests/test_vs_tensorflow_data.py compares with TF itself)."""

import collections
import gc
import threading
import time
import tracemalloc

import numpy as np
import pytest

import jittape as jt

D = jt.data.Dataset


def values(ds):
    return list(ds.as_numpy_iterator())


def ints(ds):
    return [int(v) for v in ds.as_numpy_iterator()]


def _threads(prefix):
    return [t for t in threading.enumerate() if t.name.startswith(prefix)]


# ---------------------------------------------------------------------------
# constructors


def test_from_tensor_slices_array_yields_rows_as_tensors():
    x = np.arange(12, dtype=np.float64).reshape(4, 3)
    ds = D.from_tensor_slices(x)
    rows = list(ds)
    assert all(isinstance(r, jt.Tensor) for r in rows)
    np.testing.assert_array_equal(np.stack([r.numpy() for r in rows]), x)
    assert rows[0].dtype == jt.float64  # numpy float64 stays float64, as in TF
    assert ds.element_spec == jt.TensorSpec((3,), jt.float64)
    assert len(ds) == 4


def test_from_tensor_slices_python_lists_take_tf_dtypes():
    assert D.from_tensor_slices([1.0, 2.0]).element_spec.dtype == jt.float32
    assert D.from_tensor_slices([1, 2]).element_spec.dtype == jt.int32
    assert D.from_tensor_slices([True, False]).element_spec.dtype == jt.bool
    assert D.from_tensor_slices([2**40]).element_spec.dtype == jt.int64
    # a list is one tensor, not a structure
    ds = D.from_tensor_slices([[1, 2], [3, 4]])
    assert ds.element_spec == jt.TensorSpec((2,), jt.int32)
    assert [v.tolist() for v in values(ds)] == [[1, 2], [3, 4]]


def test_from_tensor_slices_structures_keep_their_shape():
    P = collections.namedtuple("P", "a b")
    ds = D.from_tensor_slices({"y": [1, 2], "x": (np.arange(2.0), P([5, 6], [7.0, 8.0]))})
    first = next(iter(ds))
    assert list(first) == ["y", "x"]
    assert isinstance(first["x"], tuple) and isinstance(first["x"][1], P)
    assert int(first["y"]) == 1 and float(first["x"][1].b) == 7.0
    assert ds.element_spec["x"][1].a == jt.TensorSpec((), jt.int32)
    second = values(ds)[1]
    assert second["y"] == 2 and second["x"][1].a == 6


def test_from_tensor_slices_of_jt_tensors():
    t = jt.constant([[1.0, 2.0], [3.0, 4.0]])
    assert [v.tolist() for v in values(D.from_tensor_slices(t))] == [[1.0, 2.0], [3.0, 4.0]]


def test_from_tensor_slices_snapshots_the_input():
    x = np.arange(4.0)
    ds = D.from_tensor_slices(x)
    x[0] = 99.0
    assert values(ds)[0] == 0.0


def test_from_tensor_slices_mismatched_first_dims_name_the_shapes():
    with pytest.raises(ValueError, match=r"Dimensions 3 and 2 are not compatible.*\[3, 4\], "
                                         r"\[2\]"):
        D.from_tensor_slices((np.zeros((3, 4)), np.zeros(2)))


def test_from_tensor_slices_scalar_raises():
    with pytest.raises(ValueError, match="rank >= 1"):
        D.from_tensor_slices(1.0)


def test_from_tensors_is_one_element():
    ds = D.from_tensors(([1, 2], 3.0))
    assert len(ds) == 1
    (a, b), = values(ds)
    assert a.tolist() == [1, 2] and b == 3.0
    assert ds.element_spec == (jt.TensorSpec((2,), jt.int32), jt.TensorSpec((), jt.float32))


def test_range_signatures_and_dtype():
    assert ints(D.range(5)) == [0, 1, 2, 3, 4]
    assert ints(D.range(2, 10, 3)) == [2, 5, 8]
    assert ints(D.range(5, 0, -2)) == [5, 3, 1]
    assert ints(D.range(5, 2)) == []
    assert D.range(3).element_spec == jt.TensorSpec((), jt.int64)
    assert D.range(3, output_type=jt.int32).element_spec.dtype == jt.int32
    assert len(D.range(0, 10, 3)) == 4 and len(D.range(10, 0, -3)) == 4
    with pytest.raises(ValueError, match="step must not be 0"):
        D.range(0, 5, 0)


def test_zip_tuple_nested_and_varargs():
    a, b = D.range(5), D.range(10, 13)
    assert [(int(x), int(y)) for x, y in values(D.zip((a, b)))] == [(0, 10), (1, 11), (2, 12)]
    assert values(D.zip(a, b)) == values(D.zip((a, b)))
    nested = D.zip({"p": a, "q": (b, a)})
    v = values(nested)
    assert len(v) == 3 and v[1]["p"] == 1 and v[1]["q"] == (11, 1)
    assert nested.element_spec["q"][0] == jt.TensorSpec((), jt.int64)
    assert nested.cardinality() == 3
    with pytest.raises(TypeError, match="every leaf must be a Dataset"):
        D.zip((a, [1, 2]))


def test_from_generator():
    def gen():
        for i in range(1, 4):
            yield np.arange(i), float(i)

    sig = (jt.TensorSpec([None], jt.int64), jt.TensorSpec([], jt.float32))
    ds = D.from_generator(gen, output_signature=sig)
    v = values(ds)
    assert [a.tolist() for a, _ in v] == [[0], [0, 1], [0, 1, 2]]
    assert v[2][1] == np.float32(3.0) and v[2][1].dtype == np.float32
    assert ds.cardinality() == jt.data.UNKNOWN_CARDINALITY
    assert len(values(ds)) == 3  # a new generator each epoch
    bad = D.from_generator(lambda: iter([np.zeros(3)]),
                           output_signature=jt.TensorSpec([2], jt.float32))
    with pytest.raises(ValueError, match=r"shape \[3\] where an element of shape \[2\]"):
        values(bad)


# ---------------------------------------------------------------------------
# batch, unbatch, padded_batch


def test_batch_values_and_remainder():
    x = np.arange(20).reshape(10, 2)
    got = values(D.from_tensor_slices(x).batch(4))
    assert [b.shape for b in got] == [(4, 2), (4, 2), (2, 2)]
    np.testing.assert_array_equal(np.concatenate(got), x)
    dropped = values(D.from_tensor_slices(x).batch(4, drop_remainder=True))
    assert [b.shape for b in dropped] == [(4, 2), (4, 2)]


def test_batch_keeps_structure_and_spec():
    ds = D.from_tensor_slices({"x": np.ones((5, 3), np.float32), "y": np.arange(5)}).batch(2)
    b = next(iter(ds))
    assert set(b) == {"x", "y"} and b["x"].shape == (2, 3) and b["y"].dtype == jt.int64
    assert ds.element_spec["x"] == jt.TensorSpec((None, 3), jt.float32)
    dr = D.from_tensor_slices(np.ones((5, 3))).batch(2, drop_remainder=True)
    assert dr.element_spec == jt.TensorSpec((2, 3), jt.float64)
    assert len(ds) == 3 and len(dr) == 2


def test_batch_after_map_assembles_elements():
    ds = D.range(7).map(lambda x: (x, x * 2)).batch(3)
    got = values(ds)
    assert [a.tolist() for a, _ in got] == [[0, 1, 2], [3, 4, 5], [6]]
    assert [b.tolist() for _, b in got] == [[0, 2, 4], [6, 8, 10], [12]]


def test_batch_of_batches_and_unbatch_roundtrip():
    x = np.arange(24).reshape(12, 2)
    bb = values(D.from_tensor_slices(x).batch(3).batch(2))
    assert bb[0].shape == (2, 3, 2)
    back = values(D.from_tensor_slices(x).batch(5).unbatch())
    np.testing.assert_array_equal(np.stack(back), x)
    ds = D.from_tensor_slices((x, np.arange(12))).batch(5).unbatch()
    assert ds.element_spec == (jt.TensorSpec((2,), jt.int64), jt.TensorSpec((), jt.int64))
    assert [int(b) for _, b in values(ds)] == list(range(12))


def test_bad_batch_sizes():
    for bad in (0, -3):
        with pytest.raises(ValueError, match="Batch size must be greater than zero"):
            D.range(3).batch(bad)
    with pytest.raises(TypeError, match="batch_size must be an int"):
        D.range(3).batch(2.5)


def test_batch_of_ragged_elements_names_the_shapes():
    ds = D.range(1, 4).map(lambda n: jt.ones([int(n)]))
    with pytest.raises(ValueError, match=r"Cannot batch tensors with different shapes in "
                                         r"component 0. First element had shape \[1\] and "
                                         r"element 1 had shape \[2\].*padded_batch"):
        values(ds.batch(3))


def test_unbatch_of_scalars_raises():
    with pytest.raises(ValueError, match="Cannot unbatch an input with scalar components"):
        D.range(3).unbatch().element_spec
    with pytest.raises(ValueError, match="Cannot unbatch an input with scalar components"):
        values(D.range(3).unbatch())


def _ragged():
    return D.from_generator(lambda: iter([np.arange(2), np.arange(3), np.arange(1)]),
                            output_signature=jt.TensorSpec([None], jt.int64))


def test_padded_batch_pads_to_largest_in_batch():
    got = values(_ragged().padded_batch(2))
    np.testing.assert_array_equal(got[0], [[0, 1, 0], [0, 1, 2]])
    np.testing.assert_array_equal(got[1], [[0]])
    assert _ragged().padded_batch(2).element_spec == jt.TensorSpec((None, None), jt.int64)


def test_padded_batch_shapes_values_and_errors():
    got = values(_ragged().padded_batch(3, padded_shapes=[4], padding_values=np.int64(-1)))
    np.testing.assert_array_equal(got[0], [[0, 1, -1, -1], [0, 1, 2, -1], [0, -1, -1, -1]])
    assert _ragged().padded_batch(2, padded_shapes=[5]).element_spec == jt.TensorSpec(
        (None, 5), jt.int64)
    assert _ragged().padded_batch(2, drop_remainder=True).element_spec.shape == (2, None)
    with pytest.raises(ValueError, match="pad to a smaller size than the input element"):
        values(_ragged().padded_batch(2, padded_shapes=[2]))
    with pytest.raises(ValueError, match="rank"):
        values(_ragged().padded_batch(2, padded_shapes=[2, 2]))


def test_padded_batch_structure():
    ds = D.from_tensor_slices(([1, 2, 3], [1.5, 2.5, 3.5])).padded_batch(
        2, padding_values=(0, 0.0))
    (a, b), (c, d) = values(ds)
    assert a.tolist() == [1, 2] and d.tolist() == [3.5]
    assert D.from_tensor_slices(np.zeros((4, 3))).padded_batch(2).element_spec == \
        jt.TensorSpec((None, 3), jt.float64)


# ---------------------------------------------------------------------------
# shuffle


def test_shuffle_buffer_one_is_identity():
    assert ints(D.range(20).shuffle(1, seed=3)) == list(range(20))


def test_shuffle_full_buffer_is_a_permutation_and_seeded():
    a = ints(D.range(100).shuffle(100, seed=7))
    assert sorted(a) == list(range(100)) and a != list(range(100))
    assert ints(D.range(100).shuffle(100, seed=7)) == a  # same seed, same first epoch
    assert ints(D.range(100).shuffle(100, seed=8)) != a


def test_shuffle_reshuffles_each_epoch_unless_told_not_to():
    ds = D.range(50).shuffle(50, seed=1)
    e1, e2 = ints(ds), ints(ds)
    assert sorted(e1) == sorted(e2) == list(range(50)) and e1 != e2
    fixed = D.range(50).shuffle(50, seed=1, reshuffle_each_iteration=False)
    assert ints(fixed) == ints(fixed)
    rep = ints(D.range(10).shuffle(10, seed=2).repeat(2))
    assert sorted(rep[:10]) == sorted(rep[10:]) == list(range(10)) and rep[:10] != rep[10:]
    rep_fixed = ints(D.range(10).shuffle(10, seed=2, reshuffle_each_iteration=False).repeat(2))
    assert rep_fixed[:10] == rep_fixed[10:]


def test_shuffle_small_buffer_is_local():
    # with a buffer of k, element i can come out no earlier than position i - k + 1
    for ds in (D.range(200).shuffle(5, seed=0), D.range(200).map(lambda x: x).shuffle(5, seed=0)):
        order = ints(ds)
        assert sorted(order) == list(range(200)) and order != list(range(200))
        assert all(pos >= v - 4 for pos, v in enumerate(order))


def test_shuffle_distribution_first_element():
    # buffer of 3 over 10: the first output is uniform over the first 3 inputs
    counts = collections.Counter(ints(D.range(10).shuffle(3, seed=s))[0] for s in range(300))
    assert set(counts) == {0, 1, 2} and min(counts.values()) > 60


def test_shuffle_global_seed():
    jt.random.set_seed(5)
    a = ints(D.range(30).shuffle(30))
    jt.random.set_seed(5)
    b = ints(D.range(30).shuffle(30))
    jt.random.set_seed(None)
    assert a == b


def test_shuffle_bad_buffer():
    with pytest.raises(ValueError, match="buffer_size must be greater than zero"):
        D.range(3).shuffle(0)


def test_shuffle_batch_fast_path_matches_per_element_path():
    x = np.arange(30).reshape(15, 2)
    fast = values(D.from_tensor_slices(x).shuffle(15, seed=4).batch(4))
    slow_order = ints(D.range(15).shuffle(15, seed=4))
    np.testing.assert_array_equal(np.concatenate(fast), x[slow_order])


# ---------------------------------------------------------------------------
# map, filter


def test_map_unpacks_tuples_and_passes_dicts():
    ds = D.from_tensor_slices((np.arange(3.0), np.arange(3))).map(
        lambda x, y: {"s": x + jt.cast(y, jt.float64), "y": y})
    v = values(ds)
    assert [e["s"] for e in v] == [0.0, 2.0, 4.0]
    assert ds.element_spec == {"s": jt.TensorSpec((), jt.float64),
                               "y": jt.TensorSpec((), jt.int64)}
    ds2 = D.from_tensor_slices({"a": [1, 2]}).map(lambda d: d["a"] * 3)
    assert ints(ds2) == [3, 6]
    P = collections.namedtuple("P", "a b")
    ds3 = D.from_tensor_slices(P([1, 2], [3, 4])).map(lambda p: p.a + p.b)  # one argument
    assert ints(ds3) == [4, 6]


def test_map_arguments_are_tensors_and_lists_become_tuples():
    seen = []
    ds = D.range(2).map(lambda x: seen.append(type(x)) or [x, x + 1])
    assert values(ds) == [(0, 1), (1, 2)]
    assert set(seen) == {jt.Tensor}
    assert isinstance(ds.element_spec, tuple)


def test_map_python_scalars_take_tf_dtypes():
    ds = D.range(2).map(lambda x: (1.5, 2))
    assert ds.element_spec == (jt.TensorSpec((), jt.float32), jt.TensorSpec((), jt.int32))
    assert values(ds)[0][0].dtype == np.float32


def test_map_spec_keeps_unknown_batch_dim():
    ds = D.range(10).batch(3).map(lambda x: jt.cast(x, jt.float32) * 2.0)
    assert ds.element_spec == jt.TensorSpec((None,), jt.float32)


def test_map_spec_of_a_function_needing_values_runs_it():
    ds = D.range(1, 4).map(lambda n: jt.ones([int(n)]))  # int() needs a concrete value
    assert ds.element_spec == jt.TensorSpec((1,), jt.float32)


def test_map_parallel_keeps_order_and_uses_threads():
    names = set()

    def f(x):
        names.add(threading.current_thread().name)
        time.sleep(0.001 * (int(x) % 3))
        return x * 10

    ds = D.range(40).map(f, num_parallel_calls=4)
    assert ints(ds) == [10 * i for i in range(40)]
    assert all(n.startswith("jt.data.map") for n in names)
    assert ints(D.range(40).map(f, num_parallel_calls=jt.data.AUTOTUNE)) == ints(ds)
    gc.collect()
    assert _threads("jt.data.map") == []


def test_map_errors_propagate():
    def boom(x):
        if int(x) == 3:
            raise RuntimeError("bad element")
        return x

    with pytest.raises(RuntimeError, match="bad element"):
        values(D.range(5).map(boom))
    with pytest.raises(RuntimeError, match="bad element"):
        values(D.range(5).map(boom, num_parallel_calls=2))


def test_filter():
    ds = D.range(10).filter(lambda x: x % 3 == 0)
    assert ints(ds) == [0, 3, 6, 9]
    assert ds.cardinality() == jt.data.UNKNOWN_CARDINALITY
    pairs = D.from_tensor_slices((np.arange(6), np.arange(6) * 10)).filter(lambda a, b: b > 25)
    assert [int(a) for a, _ in values(pairs)] == [3, 4, 5]
    with pytest.raises(ValueError, match="must return a `jt.bool` scalar"):
        values(D.range(3).filter(lambda x: x))
    with pytest.raises(TypeError, match="The dataset length is unknown"):
        len(ds)


# ---------------------------------------------------------------------------
# repeat, take, skip, shard, enumerate, concatenate, cache


def test_repeat():
    assert ints(D.range(3).repeat(2)) == [0, 1, 2, 0, 1, 2]
    assert ints(D.range(3).repeat().take(7)) == [0, 1, 2, 0, 1, 2, 0]
    assert ints(D.range(3).repeat(0)) == []
    assert ints(D.range(0).repeat()) == []  # an empty dataset repeated forever ends
    assert ints(D.range(3).map(lambda x: x).repeat(2)) == [0, 1, 2, 0, 1, 2]
    assert D.range(3).repeat().cardinality() == jt.data.INFINITE_CARDINALITY
    with pytest.raises(TypeError, match="The dataset is infinite"):
        len(D.range(3).repeat())


def test_batch_spans_repeat_boundaries():
    got = values(D.range(5).repeat(2).batch(4))
    assert [b.tolist() for b in got] == [[0, 1, 2, 3], [4, 0, 1, 2], [3, 4]]


def test_take_and_skip():
    for ds in (D.range(10), D.range(10).map(lambda x: x)):
        assert ints(ds.take(3)) == [0, 1, 2]
        assert ints(ds.take(-1)) == list(range(10))
        assert ints(ds.take(0)) == []
        assert ints(ds.skip(7)) == [7, 8, 9]
        assert ints(ds.skip(-1)) == []
        assert ints(ds.skip(3).take(2)) == [3, 4]
    assert len(D.range(10).take(20)) == 10 and len(D.range(10).skip(20)) == 0


def test_shard():
    for ds in (D.range(10), D.range(10).map(lambda x: x)):
        assert ints(ds.shard(3, 1)) == [1, 4, 7]
        assert ints(ds.shard(3, 0)) == [0, 3, 6, 9]
    big = D.range(200000).shard(7, 3)  # crosses index chunks
    assert ints(big) == list(range(3, 200000, 7))
    assert [len(D.range(10).shard(4, i)) for i in range(4)] == [3, 3, 2, 2]
    with pytest.raises(ValueError, match=r"Index must be between 0 and 2 \(currently index = 3"):
        D.range(10).shard(3, 3)
    with pytest.raises(ValueError, match="Number of shards must be greater than zero"):
        D.range(10).shard(0, 0)


def test_enumerate():
    ds = D.from_tensor_slices([5.0, 6.0]).enumerate(start=3)
    assert values(ds) == [(3, 5.0), (4, 6.0)]
    assert ds.element_spec == (jt.TensorSpec((), jt.int64), jt.TensorSpec((), jt.float32))


def test_concatenate():
    ds = D.range(3).concatenate(D.range(10, 12))
    assert ints(ds) == [0, 1, 2, 10, 11] and len(ds) == 5
    shapes = D.from_tensor_slices(np.zeros((3, 2))).concatenate(
        D.from_tensor_slices(np.zeros((3, 4))))
    assert shapes.element_spec == jt.TensorSpec((None,), jt.float64)
    with pytest.raises(TypeError, match="Incompatible dataset elements"):
        D.range(3).concatenate(D.from_tensor_slices([1.0]))
    with pytest.raises(TypeError, match="Incompatible dataset elements"):
        D.range(3).concatenate(D.zip((D.range(3), D.range(3))))


def test_cache_replays_first_epoch():
    calls = []
    ds = D.range(4).map(lambda x: calls.append(1) or x * 2).cache()
    assert ints(ds) == [0, 2, 4, 6] and ints(ds) == [0, 2, 4, 6]
    assert len(calls) == 4  # the map ran in the first epoch only
    shuffled = D.range(20).shuffle(20, seed=1).cache()
    assert ints(shuffled) == ints(shuffled)  # the first epoch's order is kept (TF does too)
    part = D.range(5).map(lambda x: calls.append(1) or x).cache()
    calls.clear()
    it = iter(part)
    next(it)
    del it  # an abandoned epoch is not kept
    assert ints(part) == [0, 1, 2, 3, 4]
    with pytest.raises(NotImplementedError, match="in memory only"):
        D.range(3).cache("/tmp/x")


def test_as_numpy_iterator_values_are_numpy():
    v = values(D.from_tensor_slices((np.arange(2), np.ones((2, 3)))))
    assert isinstance(v[0][0], np.integer) and isinstance(v[0][1], np.ndarray)
    v[0][1][0] = 5.0  # writable copies: the dataset's source is untouched
    assert values(D.from_tensor_slices(np.ones((2, 3))))[0][0] == 1.0


def test_cardinality_rules():
    r = D.range(10)
    card = {
        "batch": r.batch(3), "drop": r.batch(3, True), "repeat2": r.repeat(2),
        "take inf": r.repeat().take(5), "skip inf": r.repeat().skip(3),
        "shard": r.shard(3, 1), "unbatch": r.batch(3).unbatch(),
        "unbatch drop": r.batch(3, True).unbatch(), "concat": r.concatenate(r),
        "concat inf": r.concatenate(r.repeat()), "zip": D.zip((r, r.take(3))),
        "zip inf": D.zip((r.repeat(), r.repeat())), "enumerate": r.enumerate(),
        "padded": r.batch(2).padded_batch(4), "filter repeat": r.filter(lambda x: x > 2).repeat(),
        "cache": r.cache(), "shuffle": r.shuffle(3), "prefetch": r.prefetch(2),
        "map": r.map(lambda x: x), "unknown take": r.filter(lambda x: x > 2).take(3),
    }
    want = {"batch": 4, "drop": 3, "repeat2": 20, "take inf": 5, "skip inf": -1, "shard": 3,
            "unbatch": -2, "unbatch drop": 9, "concat": 20, "concat inf": -1, "zip": 3,
            "zip inf": -1, "enumerate": 10, "padded": 2, "filter repeat": -1, "cache": 10,
            "shuffle": 10, "prefetch": 10, "map": 10, "unknown take": -2}
    assert {k: int(d.cardinality()) for k, d in card.items()} == want
    assert jt.data.INFINITE_CARDINALITY == -1 and jt.data.UNKNOWN_CARDINALITY == -2
    assert jt.data.AUTOTUNE == jt.data.experimental.AUTOTUNE == -1
    assert r.cardinality().dtype == jt.int64


# ---------------------------------------------------------------------------
# prefetch: background thread, clean stop


def test_prefetch_values_and_thread_ends():
    ds = D.range(50).map(lambda x: x + 1).prefetch(3)
    assert ints(ds) == list(range(1, 51))
    gc.collect()
    assert _threads("jt.data.prefetch") == []


def test_prefetch_runs_ahead_of_the_consumer():
    produced = []
    ds = D.range(20).map(lambda x: produced.append(int(x)) or x).prefetch(5)
    it = iter(ds)
    next(it)
    deadline = time.time() + 5
    while len(produced) < 5 and time.time() < deadline:
        time.sleep(0.01)
    assert len(produced) >= 5  # the thread filled the buffer while we did nothing
    del it
    gc.collect()
    assert _threads("jt.data.prefetch") == []


def test_prefetch_abandoned_iterator_stops_thread():
    for ds in (D.range(10**9).prefetch(2), D.range(10**9).map(lambda x: x).prefetch(
            jt.data.AUTOTUNE).batch(4).prefetch(1)):
        it = iter(ds)
        next(it)
        assert _threads("jt.data.prefetch")
        del it
        gc.collect()
        deadline = time.time() + 5
        while _threads("jt.data.prefetch") and time.time() < deadline:
            time.sleep(0.01)
        assert _threads("jt.data.prefetch") == []
    for _ in D.range(10**9).prefetch(2):
        break  # a for loop left early
    gc.collect()
    assert _threads("jt.data.prefetch") == []


def test_prefetch_passes_errors_and_close():
    def boom(x):
        if int(x) == 2:
            raise KeyError("element two")
        return x

    it = iter(D.range(5).map(boom).prefetch(2))
    assert int(next(it)) == 0 and int(next(it)) == 1
    with pytest.raises(KeyError, match="element two"):
        next(it)
    it2 = iter(D.range(10**9).prefetch(2))
    next(it2)
    it2.close()
    with pytest.raises(StopIteration):
        next(it2)
    assert _threads("jt.data.prefetch") == []
    with pytest.raises(ValueError, match="buffer_size must be >= 0"):
        D.range(3).prefetch(-5)
    assert ints(D.range(3).prefetch(0)) == [0, 1, 2]


def test_no_hang_at_interpreter_exit(tmp_path):
    import os
    import subprocess
    import sys

    script = tmp_path / "exit.py"
    script.write_text(
        "import jittape as jt\n"
        "it = iter(jt.data.Dataset.range(10**9).map(lambda x: x).prefetch(4))\n"
        "next(it)\n"
        "keep = it  # still alive at exit\n"
        "print('ok')\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(os.path.dirname(jt.__file__))] + sys.path)
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


# ---------------------------------------------------------------------------
# memory, copies, tracing, speed


def test_batches_index_the_source_without_copying_it():
    x = np.arange(40, dtype=np.float32).reshape(20, 2)
    ds = D.from_tensor_slices(x).batch(5)
    src = ds._up._src.flat[0]
    b = next(iter(ds))
    assert np.shares_memory(b.numpy(), src) is False  # numpy() copies; the tensor's array:
    assert np.shares_memory(b._value, src)  # a contiguous batch is a view of the source
    shuffled = next(iter(D.from_tensor_slices(x).shuffle(20, seed=0).batch(5)))
    assert not np.shares_memory(shuffled._value, src)  # a gather of just that batch
    assert shuffled.shape == (5, 2)


def test_memory_is_flat_over_epochs():
    x = np.random.default_rng(0).standard_normal((2000, 64)).astype(np.float32)
    y = np.arange(2000) % 10
    ds = (D.from_tensor_slices((x, y)).shuffle(2000, seed=0).batch(64)
          .map(lambda a, b: (a * 2.0, b)).prefetch(2))
    gc.collect()
    tracemalloc.start()
    try:
        for _ in range(2):
            for a, b in ds:
                pass
        gc.collect()
        base = tracemalloc.get_traced_memory()[0]
        for _ in range(28):
            for a, b in ds:
                pass
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert grown < 256 * 1024, f"memory grew by {grown} bytes over 28 epochs"
    assert _threads("jt.data.prefetch") == []


def test_one_trace_per_batch_shape():
    x = np.random.default_rng(1).standard_normal((10, 3)).astype(np.float32)
    w = jt.Variable(np.ones((3, 1), np.float32))
    traced = []

    @jt.function
    def step(a, b):
        traced.append(1)
        return jt.reduce_sum(a @ w) + jt.cast(jt.reduce_sum(b), jt.float32)

    ds = D.from_tensor_slices((x, np.arange(10))).shuffle(10, seed=0).batch(4).prefetch(2)
    total = 0.0
    for _ in range(5):
        for a, b in ds:
            total += float(step(a, b))
    assert len(traced) == 2  # batches of 4, and the last batch of 2
    assert step.cache_info().traces == 2
    assert np.isclose(total, 5 * (x.sum() + 45), rtol=1e-4)


def test_epoch_speed_is_numpy_speed():
    x = np.zeros((60000, 784), np.float32)
    ds = D.from_tensor_slices((x, np.zeros(60000, np.int64))).shuffle(60000, seed=0).batch(128)
    t = time.perf_counter()
    n = sum(1 for _ in ds)
    dt = time.perf_counter() - t
    assert n == 469
    assert dt < 2.0, f"one epoch took {dt:.2f}s"  # about 0.035 s here; a Python loop: seconds


def test_zip_of_slices_batches_like_the_element_path():
    """zip of from_tensor_slices datasets is one slice source (batches gathered whole);
    it gives what zipping element by element gives, ending with the shortest."""
    a = np.arange(14, dtype=np.float32).reshape(7, 2)
    b = np.arange(5, dtype=np.int64)
    fast = jt.data.Dataset.zip((jt.data.Dataset.from_tensor_slices(a),
                                jt.data.Dataset.from_tensor_slices(b)))
    slow = jt.data.Dataset.zip((jt.data.Dataset.from_tensor_slices(a).map(lambda x: x),
                                jt.data.Dataset.from_tensor_slices(b)))
    assert fast.cardinality().numpy() == slow.cardinality().numpy() == 5
    assert fast.element_spec == slow.element_spec
    for ds_f, ds_s in [(fast.batch(2), slow.batch(2)),
                       (fast.shuffle(5, seed=3).batch(2), slow.shuffle(5, seed=3).batch(2))]:
        got = [(x.numpy(), y.numpy()) for x, y in ds_f]
        want = [(x.numpy(), y.numpy()) for x, y in ds_s]
        assert len(got) == len(want) == 3
        for (gx, gy), (wx, wy) in zip(got, want):
            np.testing.assert_array_equal(gx, wx)
            np.testing.assert_array_equal(gy, wy)
    d = jt.data.Dataset.zip({"x": jt.data.Dataset.from_tensor_slices(a),
                             "y": jt.data.Dataset.from_tensor_slices(b)})
    first = next(iter(d))
    assert set(first) == {"x", "y"} and int(first["y"].numpy()) == 0
