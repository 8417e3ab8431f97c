"""jt.metrics: values against numpy computations of Keras 3's formulas, state handling,
errors, and a metric updated inside a compiled step (tests/test_vs_tensorflow_metrics.py
checks the same metrics against Keras itself)."""

import numpy as np
import pytest

import jittape as jt
from jittape.keras import metrics as M


def _r(m):
    return np.asarray(m.result() if isinstance(m, M.Metric) else m)


def test_mean_weighted_and_reset():
    m = M.Mean()
    m.update_state([1.0, 2.0, 3.0])
    m.update_state([[4.0, 6.0]], sample_weight=[2.0])  # per-sample weight: mean of the row
    # total = 6 + 2*5, count = 3 + 2
    assert np.isclose(_r(m), 16.0 / 5.0)
    assert [v.name for v in m.variables] == ["total", "count"]  # Keras 3's names
    assert [v.path for v in m.variables] == ["mean/total", "mean/count"]
    assert all(not v.trainable for v in m.variables)
    m.reset_state()
    assert float(m.result()) == 0.0  # 0 / 0 is 0
    m.update_state(5.0)
    m.reset_states()  # Keras 2's alias
    assert float(m.count.numpy()) == 0.0


def test_mean_weights_of_values_shape():
    values = np.array([[1.0, 2.0], [3.0, 5.0]], np.float32)
    w = np.array([[1.0, 0.0], [0.5, 0.5]], np.float32)
    m = M.Mean()
    m.update_state(values, sample_weight=w)
    # per sample: mean(values * w) over the row; weights: mean of the row
    total = np.mean(values * w, axis=1).sum()
    count = np.mean(w, axis=1).sum()
    assert np.isclose(_r(m), total / count)


def test_sum_and_call():
    s = M.Sum()
    assert float(s([1.0, 2.0], sample_weight=[3.0, 0.5])) == 4.0
    assert float(s(10.0)) == 14.0
    assert s.get_config() == {"name": "sum", "dtype": "float32"}


def test_accuracies():
    assert float(M.Accuracy()([1, 2, 3, 4], [1, 2, 0, 4])) == 0.75
    b = M.BinaryAccuracy(threshold=0.6)
    assert float(b([[1], [0], [1]], [[0.7], [0.65], [0.2]])) == pytest.approx(1 / 3)
    c = M.CategoricalAccuracy()
    assert float(c([[0, 1, 0], [1, 0, 0]], [[0.1, 0.8, 0.1], [0.2, 0.7, 0.1]])) == 0.5
    p = [[0.1, 0.8, 0.1], [0.6, 0.3, 0.1], [0.2, 0.2, 0.6]]
    for labels in ([1, 1, 2], [[1], [1], [2]]):  # (N,) and (N, 1) labels
        assert float(M.SparseCategoricalAccuracy()(labels, p)) == pytest.approx(2 / 3)
    w = M.SparseCategoricalAccuracy()
    w.update_state([[1], [1], [2]], p, sample_weight=[1.0, 3.0, 0.0])
    assert float(w.result()) == 0.25


def test_top_k_accuracies_with_ties():
    p = np.array([[0.5, 0.2, 0.2, 0.1], [0.1, 0.2, 0.3, 0.4]], np.float32)
    # row 0, label 2: one larger value, so in the top 2 (tied with label 1: ties count in)
    assert float(M.SparseTopKCategoricalAccuracy(k=2)([2, 0], p)) == 0.5
    assert float(M.SparseTopKCategoricalAccuracy(k=4)([[2], [0]], p)) == 1.0
    onehot = np.eye(4, dtype=np.float32)[[1, 3]]
    assert float(M.TopKCategoricalAccuracy(k=1)(onehot, p)) == 0.5
    assert float(M.sparse_top_k_categorical_accuracy([0], [[np.nan, 1.0]], k=2)[0]) == 0.0
    with pytest.raises(ValueError, match="k must be a positive integer"):
        M.TopKCategoricalAccuracy(k=0)


def test_regression_metrics():
    y = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    p = np.array([[1.5, 2.0], [2.0, 6.0]], np.float32)
    assert np.isclose(_r(M.MeanSquaredError()(y, p)), np.mean((y - p) ** 2))
    assert np.isclose(_r(M.MeanAbsoluteError()(y, p)), np.mean(np.abs(y - p)))
    r = M.RootMeanSquaredError()
    r.update_state(y, p, sample_weight=[1.0, 3.0])
    want = np.sqrt((np.mean((y - p)[0] ** 2) + 3 * np.mean((y - p)[1] ** 2)) / 4)
    assert np.isclose(_r(r), want)


def _confusion(y, p, thresholds, w=None):
    y = np.asarray(y, bool).ravel()
    p = np.asarray(p, np.float32).ravel()
    w = np.ones_like(p) if w is None else np.broadcast_to(w, p.shape)
    pos = p[None, :] > np.asarray(thresholds, np.float32)[:, None]
    return {"tp": (pos & y).astype(np.float32) @ w, "fp": (pos & ~y).astype(np.float32) @ w,
            "fn": (~pos & y).astype(np.float32) @ w, "tn": (~pos & ~y).astype(np.float32) @ w}


def test_precision_recall_thresholds():
    y = [0, 1, 1, 0, 1, 1]
    p = [0.1, 0.4, 0.8, 0.6, 0.95, 0.3]
    th = [0.25, 0.5, 0.9]
    c = _confusion(y, p, th)
    prec, rec = M.Precision(thresholds=th), M.Recall(thresholds=th)
    np.testing.assert_allclose(_r(prec(y, p)), c["tp"] / (c["tp"] + c["fp"]), rtol=1e-6)
    np.testing.assert_allclose(_r(rec(y, p)), c["tp"] / (c["tp"] + c["fn"]), rtol=1e-6)
    c5 = _confusion(y, p, [0.5], w=np.array([1, 2, 1, 3, 1, 2], np.float32))
    p5 = M.Precision()
    p5.update_state(y, p, sample_weight=[1, 2, 1, 3, 1, 2])
    assert np.isclose(float(p5.result()), c5["tp"][0] / (c5["tp"][0] + c5["fp"][0]))
    assert M.Precision().result().shape == ()  # one threshold: a scalar
    with pytest.raises(ValueError, match=r"must be in \[0, 1\]"):
        M.Recall(thresholds=[0.5, 1.5])


def test_precision_top_k_and_class_id():
    y = np.array([[0, 1, 1], [1, 0, 0]], np.float32)
    p = np.array([[0.2, 0.9, 0.3], [0.6, 0.7, 0.1]], np.float32)
    # top_k=1: row 0 predicts class 1 (right), row 1 predicts class 1 (wrong)
    assert float(M.Precision(top_k=1)(y, p)) == 0.5
    # class 0 only: predictions 0.2 (neg) and 0.6 (pos, right)
    assert float(M.Precision(class_id=0)(y, p)) == 1.0
    assert float(M.Recall(class_id=2)(y, p)) == 0.0
    with pytest.raises(ValueError, match="class_id is provided"):
        M.Precision(class_id=0)([1, 0], [0.3, 0.6])


def _trapezoid_roc(y, p, n):
    th = [-1e-7] + [(i + 1) / (n - 1) for i in range(n - 2)] + [1 + 1e-7]
    c = _confusion(y, p, th)
    tpr = c["tp"] / (c["tp"] + c["fn"])
    fpr = c["fp"] / (c["fp"] + c["tn"])
    return float(np.sum((fpr[:-1] - fpr[1:]) * (tpr[:-1] + tpr[1:]) / 2))


def test_auc_roc_and_thresholds():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 50)
    p = np.clip(y * 0.3 + rng.random(50) * 0.7, 0, 1).astype(np.float32)
    auc = M.AUC(num_thresholds=50)
    assert auc.thresholds[0] == -1e-7 and auc.thresholds[-1] == 1 + 1e-7
    assert len(auc.thresholds) == 50
    assert np.isclose(float(auc(y, p)), _trapezoid_roc(y, p, 50), atol=1e-6)
    # a perfect ranking (far from the thresholds) has an area of 1
    assert np.isclose(float(M.AUC()([0, 0, 1, 1], [0.1, 0.3, 0.62, 0.9])), 1.0)
    assert [v.name for v in auc.variables] == [
        "true_positives", "false_positives", "true_negatives", "false_negatives"]


def test_auc_pr_interpolation_single_step():
    # all positives above every negative: precision 1 everywhere, PR area 1
    assert np.isclose(float(M.AUC(curve="PR")([0, 1, 1], [0.2, 0.7, 0.8])), 1.0)


def test_auc_errors():
    with pytest.raises(ValueError, match="Invalid AUC curve value"):
        M.AUC(curve="XYZ")
    with pytest.raises(ValueError, match="num_thresholds"):
        M.AUC(num_thresholds=1)
    with pytest.raises(NotImplementedError, match="multi_label"):
        M.AUC(multi_label=True)


def test_default_names_and_config():
    a, b = M.Precision(), M.Precision()
    assert b.name == a.name + "_1" or b.name.startswith("precision_")
    assert M.Mean().name == M.Mean().name == "mean"  # fixed default names, as Keras
    assert M.BinaryAccuracy(threshold=0.3).get_config() == {
        "name": "binary_accuracy", "dtype": "float32", "threshold": 0.3}
    assert isinstance(M.get("accuracy"), M.Accuracy)  # Keras 3: names give instances
    assert isinstance(M.get("AUC"), M.AUC)
    with pytest.raises(ValueError, match="Could not interpret metric identifier"):
        M.get("nope")


def test_custom_metric_needs_super_init():
    class Bad(M.Metric):
        def __init__(self):
            pass

    with pytest.raises(RuntimeError, match="super"):
        Bad()([1.0])


def test_metric_variables_in_module():
    class Holder(jt.Module):
        def __init__(self):
            super().__init__()
            self.acc = M.Accuracy()

    h = Holder()
    assert [v.path for v in h.variables] == ["accuracy/total", "accuracy/count"]
    assert h.trainable_variables == ()


@pytest.mark.parametrize("make,backend", [
    (M.SparseCategoricalAccuracy, "interpret"), (M.AUC, "interpret"), (M.Mean, "interpret"),
    (lambda: M.Precision(thresholds=[0.3, 0.6]), "interpret"),
    (M.SparseCategoricalAccuracy, "cpu"), (M.AUC, "cpu")])
def test_metric_in_compiled_step(make, backend):
    rng = np.random.default_rng(1)
    batches = []
    for _ in range(5):
        if make is M.SparseCategoricalAccuracy:
            batches.append((rng.integers(0, 3, (8, 1)), rng.random((8, 3), np.float32)))
        elif make is M.Mean:
            batches.append((rng.random(8, np.float32), rng.random(8, np.float32)))
        else:
            batches.append((rng.integers(0, 2, 8).astype(np.float32),
                            rng.random(8, np.float32)))
    compiled, eager = make(), make()

    @jt.function(backend=backend)
    def step(y, p):
        if isinstance(compiled, M.Mean) and not isinstance(compiled, M.MeanMetricWrapper):
            compiled.update_state(p, sample_weight=y)
        else:
            compiled.update_state(y, p)
        return compiled.result()

    for y, p in batches:
        out = step(jt.constant(y), jt.constant(p))
        if isinstance(eager, M.Mean) and not isinstance(eager, M.MeanMetricWrapper):
            eager.update_state(p, sample_weight=y)
        else:
            eager.update_state(y, p)
    assert step.cache_info().traces == 1
    np.testing.assert_allclose(np.asarray(out), _r(eager), rtol=1e-6)
    np.testing.assert_allclose(_r(compiled), _r(eager), rtol=1e-6)
