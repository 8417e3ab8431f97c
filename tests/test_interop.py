"""A ``jt.Tensor`` goes into numpy's neighbours as a TF EagerTensor does: through
numpy's ``__array__`` protocol (numpy 2's ``dtype`` and ``copy`` arguments), with no
other protocol those libraries would take it for. matplotlib and pandas are optional
(the ``examples`` extra); the tests that need them are skipped without them."""

import io

import numpy as np
import pytest

import jittape as jt

X = np.linspace(-2.0, 2.0, 9, dtype=np.float32)
T = jt.constant(np.arange(6, dtype=np.float32).reshape(3, 2))


def test_array_protocol_takes_numpy_2_copy_and_dtype():
    a = np.asarray(T)
    assert not a.flags.writeable  # the tensor's own value, shared read-only
    b = np.array(T, copy=True)
    assert b.flags.owndata and b.flags.writeable
    assert np.asarray(T, dtype=np.float64).dtype == np.float64
    assert np.array(T, copy=False).dtype == np.float32  # no conversion: no copy needed
    with pytest.raises(ValueError, match="Unable to avoid copy"):
        np.array(T, dtype=np.int32, copy=False)  # as an EagerTensor, as numpy 2 asks
    with pytest.raises(ValueError, match="Unable to avoid copy"):
        np.array(jt.Variable([1.0, 2.0]), dtype=np.int32, copy=False)


def test_no_protocol_other_libraries_would_take_it_for():
    # as TF's EagerTensor: only __array__ (pandas' and matplotlib's own checks look for
    # these first)
    for name in ("__array_interface__", "__array_struct__", "__dataframe__",
                 "__cuda_array_interface__", "__array_ufunc__", "__array_function__",
                 "to_numpy", "values"):
        assert not hasattr(T, name), name
    assert len(T) == 3 and [list(np.asarray(r)) for r in T] == [[0, 1], [2, 3], [4, 5]]


def test_matplotlib_draws_tensors():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = jt.constant(X)
    fig, ax = plt.subplots()
    (line,) = ax.plot(x, jt.nn.relu(x))
    np.testing.assert_array_equal(np.asarray(line.get_ydata()), np.maximum(X, 0))
    image = ax.imshow(T)
    assert image.get_array().shape == (3, 2)
    ax.scatter(x, x)
    ax.hist(x)
    fig.savefig(io.BytesIO(), format="png")
    plt.close(fig)


def test_pandas_frames_and_series_from_tensors():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame(T)
    assert df.shape == (3, 2) and list(df.dtypes) == [np.float32, np.float32]
    assert df.values.tolist() == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]
    s = pd.Series(jt.constant(X))
    assert s.dtype == np.float32 and s.shape == (9,)


def test_sklearn_metrics_and_scalers_take_tensors():
    pytest.importorskip("sklearn")
    from sklearn.metrics import accuracy_score
    from sklearn.preprocessing import StandardScaler

    probs = jt.constant([[0.9, 0.1], [0.2, 0.8], [0.7, 0.3]])
    assert accuracy_score(np.array([0, 1, 1]), jt.argmax(probs, 1)) == pytest.approx(2 / 3)
    scaled = StandardScaler().fit_transform(T)
    np.testing.assert_allclose(scaled, [[-1.2247449, -1.2247449], [0, 0], [1.2247449] * 2],
                               rtol=1e-6)
