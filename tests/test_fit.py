"""compile / fit / evaluate / predict / train_on_batch (Keras 3 semantics)."""

import numpy as np
import pytest

import jittape as jt

K = jt.keras
L = jt.keras.layers

RNG = np.random.default_rng(0)
X = RNG.random((50, 4), dtype=np.float32)
Y = RNG.integers(0, 3, 50).astype(np.int32)


def _model(seed=0, units=3):
    jt.random.set_seed(seed)
    return jt.Sequential([L.Dense(6, activation="relu", input_shape=(4,)), L.Dense(units)])


def _np_ce(logits, y):
    z = logits - logits.max(1, keepdims=True)
    return np.log(np.exp(z).sum(1)) - z[np.arange(len(y)), y]


def _logits(m, x):
    h = np.maximum(x @ m.layers[0].kernel.numpy() + m.layers[0].bias.numpy(), 0)
    return h @ m.layers[1].kernel.numpy() + m.layers[1].bias.numpy()


def test_fit_matches_a_hand_written_loop():
    a, b = _model(), _model()
    a.compile(K.optimizers.SGD(0.1), K.losses.SparseCategoricalCrossentropy(from_logits=True))
    a.fit(X, Y, batch_size=10, epochs=3, shuffle=False, verbose=0)
    opt = K.optimizers.SGD(0.1)
    loss_fn = K.losses.SparseCategoricalCrossentropy(from_logits=True)
    for _ in range(3):
        for i in range(0, 50, 10):
            with jt.GradientTape() as tape:
                loss = loss_fn(Y[i:i + 10], b(X[i:i + 10], training=True))
            g = tape.gradient(loss, b.trainable_variables)
            opt.apply_gradients(zip(g, b.trainable_variables))
    for wa, wb in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_allclose(wa, wb, rtol=1e-5, atol=1e-6)
    assert int(a.optimizer.iterations) == 15


def test_epoch_loss_and_accuracy_are_means_over_samples():
    m = _model()
    m.compile(K.optimizers.SGD(0.0), K.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy"])
    h = m.fit(X, Y, batch_size=16, epochs=2, verbose=0)  # 16+16+16+2: uneven batches
    logits = _logits(m, X)
    np.testing.assert_allclose(h.history["loss"], [_np_ce(logits, Y).mean()] * 2, rtol=1e-5)
    acc = (logits.argmax(1) == Y).mean()
    np.testing.assert_allclose(h.history["accuracy"], [acc] * 2, rtol=1e-6)
    assert h.epoch == [0, 1] and m.history is h
    res = m.evaluate(X, Y, batch_size=7, verbose=0)
    np.testing.assert_allclose(res, [_np_ce(logits, Y).mean(), acc], rtol=1e-5)
    d = m.evaluate(X, Y, verbose=0, return_dict=True)
    assert list(d) == ["loss", "accuracy"]


def test_one_trace_for_full_batches_and_one_for_the_last():
    m = _model()
    m.compile("adam", K.losses.SparseCategoricalCrossentropy(from_logits=True))
    m.fit(X[:40], Y[:40], batch_size=10, epochs=3, verbose=0)
    assert m.train_function.experimental_get_tracing_count() == 1
    m.fit(X, Y, batch_size=16, epochs=2, verbose=0)  # batches of 16 and a last one of 2
    assert m.train_function.experimental_get_tracing_count() == 3


def test_accuracy_string_resolves_from_shapes():
    cases = [  # (targets, outputs, loss, the metric Keras picks)
        (Y, 3, "sparse_categorical_crossentropy", "SparseCategoricalAccuracy"),
        (np.eye(3, dtype=np.float32)[Y], 3, "mse", "CategoricalAccuracy"),
        ((Y > 0).astype(np.float32)[:, None], 1, "mse", "BinaryAccuracy"),
    ]
    for y, units, loss, cls in cases:
        m = _model(units=units)
        m.compile("sgd", loss, metrics=["acc"])
        m.fit(X, y, epochs=1, verbose=0)
        assert type(m.metrics[1]).__name__ == cls and m.metrics[1].name == "acc"


def test_sample_weight_and_class_weight():
    m = _model()
    m.compile(K.optimizers.SGD(0.0), K.losses.SparseCategoricalCrossentropy(from_logits=True))
    w = RNG.random(50).astype(np.float32)
    h = m.fit(X, Y, sample_weight=w, batch_size=50, epochs=1, verbose=0)
    per = _np_ce(_logits(m, X), Y)
    np.testing.assert_allclose(h.history["loss"][0], (per * w).mean(), rtol=1e-5)
    cw = {0: 0.5, 1: 2.0, 2: 1.0}
    h = m.fit(X, Y, class_weight=cw, batch_size=50, epochs=1, verbose=0)
    with pytest.raises(ValueError, match="cannot `class_weight` and `sample_weight`"):
        m.fit(X, Y, class_weight=cw, sample_weight=w, verbose=0)
    wc = np.array([cw[c] for c in Y], np.float32)
    np.testing.assert_allclose(h.history["loss"][0], (per * wc).mean(), rtol=1e-5)
    onehot = np.eye(3, dtype=np.float32)[Y]
    m2 = _model()
    m2.compile(K.optimizers.SGD(0.0), K.losses.CategoricalCrossentropy(from_logits=True))
    h = m2.fit(X, onehot, class_weight=cw, batch_size=50, epochs=1, verbose=0)
    np.testing.assert_allclose(h.history["loss"][0], (_np_ce(_logits(m2, X), Y) * wc).mean(),
                               rtol=1e-5)


def test_validation_split_and_validation_data():
    m = _model()
    m.compile(K.optimizers.SGD(0.0), K.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy"])
    h = m.fit(X, Y, validation_split=0.2, epochs=1, verbose=0)
    v = m.evaluate(X[40:], Y[40:], verbose=0)
    np.testing.assert_allclose([h.history["val_loss"][0], h.history["val_accuracy"][0]], v,
                               rtol=1e-5)
    np.testing.assert_allclose(h.history["loss"][0], _np_ce(_logits(m, X[:40]), Y[:40]).mean(),
                               rtol=1e-5)
    h = m.fit(X, Y, validation_data=(X[:10], Y[:10]), epochs=3, validation_freq=2, verbose=0)
    assert len(h.history["val_loss"]) == 1
    with pytest.raises(ValueError, match="not sufficient to split"):
        m.fit(X[:1], Y[:1], validation_split=0.1, verbose=0)


def test_fit_on_a_dataset_equals_fit_on_arrays():
    a, b = _model(), _model()
    for m in (a, b):
        m.compile(K.optimizers.SGD(0.05), K.losses.SparseCategoricalCrossentropy(from_logits=True))
    ha = a.fit(X, Y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    ds = jt.data.Dataset.from_tensor_slices((X, Y)).batch(8)
    hb = b.fit(ds, epochs=2, verbose=0)
    np.testing.assert_allclose(ha.history["loss"], hb.history["loss"], rtol=1e-5)
    for wa, wb in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_allclose(wa, wb, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b.evaluate(ds, verbose=0), a.evaluate(X, Y, verbose=0), rtol=1e-5)
    with pytest.raises(ValueError, match="`y` must not be given"):
        b.fit(ds, Y, verbose=0)


def test_fit_on_a_generator_with_steps_per_epoch():
    def gen():
        while True:
            for i in range(0, 50, 10):
                yield X[i:i + 10], Y[i:i + 10]

    m = _model()
    m.compile("sgd", K.losses.SparseCategoricalCrossentropy(from_logits=True))
    h = m.fit(gen(), steps_per_epoch=3, epochs=2, verbose=0)
    assert len(h.history["loss"]) == 2 and int(m.optimizer.iterations) == 6


def test_predict_and_predict_on_batch():
    m = _model()
    out = m.predict(X, batch_size=7, verbose=0)
    assert isinstance(out, np.ndarray) and out.shape == (50, 3)
    np.testing.assert_allclose(out, m(X).numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(m.predict_on_batch(X[:5]), out[:5], rtol=1e-5, atol=1e-6)
    a, b = K.Input(shape=(4,)), K.Input(shape=(4,))
    two = K.Model([a, b], {"s": L.Add()([a, b]), "d": L.Subtract()([a, b])})
    res = two.predict([X, X], batch_size=16, verbose=0)
    np.testing.assert_allclose(res["s"], 2 * X, rtol=1e-6)
    np.testing.assert_allclose(res["d"], 0 * X, atol=1e-6)


def test_train_and_test_on_batch_give_this_batchs_metrics_alone():
    # Keras 3 resets the metrics at the start of each call (there is no reset_metrics
    # argument), so nothing carries over from an earlier batch, fit or evaluate
    m = _model()
    m.compile(K.optimizers.SGD(0.0), K.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy"])
    logits = _logits(m, X)
    per = _np_ce(logits, Y)
    hit = (logits.argmax(1) == Y).astype(np.float64)
    first = m.train_on_batch(X[:10], Y[:10])
    np.testing.assert_allclose(first, [per[:10].mean(), hit[:10].mean()], rtol=1e-5)
    second = m.train_on_batch(X[10:30], Y[10:30], return_dict=True)
    np.testing.assert_allclose(second["loss"], per[10:30].mean(), rtol=1e-5)
    np.testing.assert_allclose(second["accuracy"], hit[10:30].mean(), rtol=1e-6)
    m.evaluate(X, Y, verbose=0)
    third = m.test_on_batch(X[30:], Y[30:])
    np.testing.assert_allclose(third, [per[30:].mean(), hit[30:].mean()], rtol=1e-5)
    fourth = m.test_on_batch(X[:5], Y[:5], return_dict=True)
    np.testing.assert_allclose(fourth["loss"], per[:5].mean(), rtol=1e-5)
    with pytest.raises(TypeError):
        m.train_on_batch(X[:5], Y[:5], reset_metrics=False)  # Keras 3 has no such argument


def test_multi_output_losses_weights_and_names():
    a = K.Input(shape=(4,), name="a")
    h = L.Dense(5, activation="relu", name="h")(a)
    m = K.Model(a, [L.Dense(1, name="reg")(h), L.Dense(3, name="cls")(h)])
    yr = RNG.random((50, 1)).astype(np.float32)
    m.compile(K.optimizers.SGD(0.0),
              loss={"reg": "mse", "cls": K.losses.SparseCategoricalCrossentropy(from_logits=True)},
              loss_weights={"reg": 2.0, "cls": 0.5}, metrics={"cls": ["accuracy"]})
    hist = m.fit(X, {"reg": yr, "cls": Y}, batch_size=50, verbose=0)
    reg, cls = m(X)
    mse = ((reg.numpy() - yr) ** 2).mean()
    ce = _np_ce(cls.numpy(), Y).mean()
    np.testing.assert_allclose(hist.history["reg_loss"][0], mse, rtol=1e-5)
    np.testing.assert_allclose(hist.history["cls_loss"][0], ce, rtol=1e-5)
    np.testing.assert_allclose(hist.history["loss"][0], 2 * mse + 0.5 * ce, rtol=1e-5)
    assert "cls_accuracy" in hist.history
    # Keras 3's list order: loss, per-output losses, then the prefixed metrics
    res = m.evaluate(X, [yr, Y], verbose=0)
    np.testing.assert_allclose(res[:3], [2 * mse + 0.5 * ce, mse, ce], rtol=1e-5)


def test_overridden_train_step_is_compiled_and_driven_by_fit():
    class Custom(K.Model):
        def __init__(self):
            super().__init__()
            self.dense = L.Dense(1)
            self.tracker = jt.metrics.Mean(name="loss")
            self.steps_seen = 0

        def call(self, x, training=None):
            return self.dense(x)

        def train_step(self, data):
            self.steps_seen += 1  # Python side effect: runs only when traced
            x, y = data
            with jt.GradientTape() as tape:
                loss = jt.reduce_mean(jt.square(self(x, training=True) - y))
            grads = tape.gradient(loss, self.trainable_variables)
            self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
            self.tracker.update_state(loss)
            return {"loss": self.tracker.result()}

    m = Custom()
    y = X @ np.array([[1.0], [-2.0], [0.5], [3.0]], np.float32)
    m.compile(K.optimizers.SGD(0.1))
    h = m.fit(X, y, batch_size=10, epochs=20, verbose=0)
    assert h.history["loss"][-1] < 0.5 * h.history["loss"][0]
    assert m.steps_seen == 1  # traced once, then the compiled step ran 99 more times
    assert m.tracker in m.metrics


def test_run_eagerly_gives_the_compiled_result():
    a, b = _model(), _model()
    a.compile(K.optimizers.Adam(0.01), K.losses.SparseCategoricalCrossentropy(from_logits=True))
    b.compile(K.optimizers.Adam(0.01), K.losses.SparseCategoricalCrossentropy(from_logits=True),
              run_eagerly=True)
    ha = a.fit(X, Y, batch_size=10, epochs=2, shuffle=False, verbose=0)
    hb = b.fit(X, Y, batch_size=10, epochs=2, shuffle=False, verbose=0)
    np.testing.assert_allclose(ha.history["loss"], hb.history["loss"], rtol=1e-5)
    assert b.train_function is b.train_step or not hasattr(b.train_function,
                                                           "experimental_get_tracing_count")


def test_callbacks_see_the_hooks_and_can_stop_training():
    events = []

    class Rec(K.callbacks.Callback):
        def on_train_begin(self, logs=None):
            events.append("train_begin")

        def on_epoch_begin(self, epoch, logs=None):
            events.append(f"epoch_begin {epoch}")

        def on_train_batch_end(self, batch, logs=None):
            events.append(f"batch {batch} {sorted(logs)}")

        def on_epoch_end(self, epoch, logs=None):
            events.append(f"epoch_end {epoch} {sorted(logs)}")
            if epoch == 1:
                self.model.stop_training = True

        def on_train_end(self, logs=None):
            events.append("train_end")

    m = _model()
    m.compile("sgd", K.losses.SparseCategoricalCrossentropy(from_logits=True))
    h = m.fit(X, Y, batch_size=25, epochs=5, callbacks=[Rec()], verbose=0)
    assert events == ["train_begin", "epoch_begin 0", "batch 0 ['loss']", "batch 1 ['loss']",
                      "epoch_end 0 ['loss']", "epoch_begin 1", "batch 0 ['loss']",
                      "batch 1 ['loss']", "epoch_end 1 ['loss']", "train_end"]
    assert len(h.history["loss"]) == 2


def test_errors_are_clear():
    m = _model()
    with pytest.raises(ValueError, match="must call `compile\\(\\)`"):
        m.fit(X, Y, verbose=0)
    m.compile("sgd", "mse")
    with pytest.raises(ValueError, match="Data cardinality is ambiguous.*'x' sizes: 50.*'y' sizes: 49"):
        m.fit(X, Y[:49], verbose=0)
    with pytest.raises(ValueError, match="batch_size"):
        m.fit(X, Y, batch_size=0, verbose=0)
    with pytest.raises(ValueError, match="loss_weights"):
        m.compile("sgd", "mse", loss_weights="heavy")
    m.compile("sgd")
    with pytest.raises(ValueError, match="No loss to compute"):
        m.fit(X, np.zeros((50, 3), np.float32), verbose=0)


def test_batch_logs_kept_by_a_callback_keep_their_values():
    kept = []

    class Keep(K.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            kept.append(logs)

    m = _model()
    m.compile(K.optimizers.SGD(0.0), K.losses.SparseCategoricalCrossentropy(from_logits=True))
    m.fit(X, Y, batch_size=10, epochs=1, shuffle=False, callbacks=[Keep()], verbose=0)
    per = _np_ce(_logits(m, X), Y)
    want = [per[:10 * (i + 1)].mean() for i in range(5)]  # the running mean after each batch
    np.testing.assert_allclose([d["loss"] for d in kept], want, rtol=1e-5)


def test_loss_given_as_a_function_name_or_callable_is_a_batch_mean():
    yr = RNG.random((50, 3)).astype(np.float32)
    for loss in ("mse", "mean_squared_error", jt.losses.mean_squared_error,
                 lambda t, p: jt.reduce_mean(jt.square(t - p), axis=-1)):
        m = _model()
        m.compile(K.optimizers.SGD(0.0), loss)
        h = m.fit(X, yr, batch_size=50, epochs=1, verbose=0)
        np.testing.assert_allclose(h.history["loss"][0], ((_logits(m, X) - yr) ** 2).mean(),
                                   rtol=1e-5)
    a, b = _model(), _model()
    a.compile(K.optimizers.SGD(0.1), "mse")
    b.compile(K.optimizers.SGD(0.1), K.losses.MeanSquaredError())
    a.fit(X, yr, batch_size=10, epochs=1, shuffle=False, verbose=0)
    b.fit(X, yr, batch_size=10, epochs=1, shuffle=False, verbose=0)
    for wa, wb in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_allclose(wa, wb, rtol=1e-6)



def test_fit_prints_keras_epoch_lines(capsys):
    m = _model()
    m.compile("sgd", K.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy"])
    m.fit(X, Y, batch_size=25, epochs=2, verbose=2, validation_data=(X[:10], Y[:10]))
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "Epoch 1/2" and out[2] == "Epoch 2/2"
    import re
    assert re.fullmatch(r"2/2 - \d+s - \d+m?s/step - accuracy: \d\.\d{4} - loss: \d\.\d{4} - "
                        r"val_accuracy: \d\.\d{4} - val_loss: \d\.\d{4}", out[1]), out[1]
    m.evaluate(X, Y, verbose=0)
    m.predict(X, verbose=0)
    assert capsys.readouterr().out == ""


def test_evaluate_lists_a_weighted_metric_as_keras_does():
    # Keras 3 (3.15.1) returns [loss, mae, mae, weighted_mae] here: its weighted metric
    # keeps the name "mae", so the list takes logs["mae"] twice, then the sorted rest
    jt.random.set_seed(0)
    m = jt.Sequential([L.Dense(1, input_shape=(4,))])
    m.compile(K.optimizers.SGD(0.0), "mse", metrics=["mae"], weighted_metrics=["mae"])
    t = RNG.random((50, 1)).astype(np.float32)
    w = RNG.uniform(0, 2, 50).astype(np.float32)
    err = X @ m.layers[0].kernel.numpy() + m.layers[0].bias.numpy() - t
    loss = np.sum(w * err[:, 0] ** 2) / 50  # mse weighted, summed over the batch size
    mae, wmae = np.abs(err).mean(), np.sum(w * np.abs(err[:, 0])) / w.sum()
    got = m.evaluate(X, t, sample_weight=w, batch_size=50, verbose=0)
    np.testing.assert_allclose(got, [loss, mae, mae, wmae], rtol=1e-5)
    logs = m.evaluate(X, t, sample_weight=w, batch_size=50, verbose=0, return_dict=True)
    assert list(logs) == ["loss", "mae", "weighted_mae"]


def test_string_labels_fail_naming_the_argument_and_the_way_out():
    m = _model()
    m.compile(K.optimizers.SGD(0.1), "sparse_categorical_crossentropy")
    labels = np.array(["a", "b", "c", "a", "b"] * 10)
    with pytest.raises(TypeError, match=r"fit: `y` holds strings .*StringLookup.*not have yet"):
        m.fit(X, labels, verbose=0)
    with pytest.raises(TypeError, match=r"evaluate: `x` holds strings"):
        m.evaluate(labels[:, None].repeat(4, 1), Y, verbose=0)
