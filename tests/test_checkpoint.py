"""jt.train.Checkpoint and CheckpointManager: object-based paths, optimizer slots and
iterations, restore deferred to variables made later, atomic writes, clear errors for a
checkpoint of another structure."""

from __future__ import annotations

import errno
import os

import numpy as np
import pytest

import jittape as jt

RNG = np.random.default_rng(0)
X = RNG.standard_normal((8, 3)).astype(np.float32)
Y = RNG.standard_normal((8, 2)).astype(np.float32)


def _model(width=4, depth=2):
    layers = [jt.layers.Dense(width, activation="relu") for _ in range(depth - 1)]
    return jt.Sequential(layers + [jt.layers.Dense(2)])


def _trainer(model, opt, compiled=False):
    def step(x, y):
        with jt.GradientTape() as tape:
            loss = jt.reduce_mean((model(x) - y) ** 2)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    return jt.function(step) if compiled else step


def _weights(model):
    return [v.numpy() for v in model.variables]


@pytest.mark.parametrize("compiled", [False, True])
def test_restore_into_a_new_unbuilt_model_continues_training_identically(tmp_path, compiled):
    m, opt = _model(), jt.optimizers.Adam(0.01)
    step = _trainer(m, opt, compiled)
    for _ in range(3):
        step(X, Y)
    ck = jt.train.Checkpoint(model=m, optimizer=opt, step=jt.Variable(7, dtype=jt.int64))
    path = ck.save(str(tmp_path / "ckpt"))
    assert path == str(tmp_path / "ckpt-1")

    m2, opt2 = _model(), jt.optimizers.Adam(0.01)
    ck2 = jt.train.Checkpoint(model=m2, optimizer=opt2, step=jt.Variable(0, dtype=jt.int64))
    status = ck2.restore(path)
    assert int(ck2.step.numpy()) == 7
    assert int(opt2.iterations.numpy()) == 3  # restored before any slot exists
    step2 = _trainer(m2, opt2, compiled)
    for _ in range(2):  # builds the layers, then makes the slots: both restored then
        a, b = float(step(X, Y)), float(step2(X, Y))
        assert a == b
    status.assert_consumed()
    for u, v in zip(_weights(m), _weights(m2)):
        np.testing.assert_array_equal(u, v)
    for u, v in zip(opt.variables, opt2.variables):
        np.testing.assert_array_equal(u.numpy(), v.numpy())


def test_slots_are_restored_not_zeros(tmp_path):
    m, opt = _model(), jt.optimizers.Adam(0.05)
    step = _trainer(m, opt)
    for _ in range(4):
        step(X, Y)
    path = jt.train.Checkpoint(model=m, optimizer=opt).write(str(tmp_path / "w"))
    m2, opt2 = _model(), jt.optimizers.Adam(0.05)
    jt.train.Checkpoint(model=m2, optimizer=opt2).read(path)
    m2(X)  # built: weights restored
    opt2.build(m2.trainable_variables)  # slots made: restored
    for v, v2 in zip(m.trainable_variables, m2.trainable_variables):
        for s in ("m", "v"):
            got = opt2.get_slot(v2, s).numpy()
            np.testing.assert_array_equal(got, opt.get_slot(v, s).numpy())
            assert np.any(got != 0)


def test_restore_into_a_built_model_is_immediate(tmp_path):
    m = _model()
    m(X)
    path = jt.train.Checkpoint(model=m).save(str(tmp_path / "c"))
    m2 = _model()
    m2(X)
    before = m2(X).numpy()
    jt.train.Checkpoint(model=m2).restore(path).assert_existing_objects_matched()
    np.testing.assert_array_equal(m2(X).numpy(), m(X).numpy())
    assert not np.array_equal(before, m(X).numpy())


def test_paths_do_not_depend_on_generated_layer_names(tmp_path):
    m = _model()
    m(X)
    path = jt.train.Checkpoint(model=m).write(str(tmp_path / "c"))
    with np.load(path + ".jtckpt") as z:
        names = sorted(z.files)
    assert names == ["model/layer-0/bias", "model/layer-0/kernel", "model/layer-1/bias",
                     "model/layer-1/kernel", "save_counter"]


def test_lists_dicts_and_objects_with_variables(tmp_path):
    class Box:
        def __init__(self):
            self.w = jt.Variable(np.arange(3.0, dtype=np.float32))
            self.parts = [jt.Variable(1.0), {"b": jt.Variable(2.0)}]

        @property
        def variables(self):
            return [self.w, self.parts[0], self.parts[1]["b"]]

    box = Box()
    ck = jt.train.Checkpoint(box=box, extra=[jt.Variable(5.0)])
    path = ck.write(str(tmp_path / "b"))
    box2, extra2 = Box(), [jt.Variable(0.0)]
    box2.w.assign([9.0, 9.0, 9.0])
    box2.parts[1]["b"].assign(0.0)
    jt.train.Checkpoint(box=box2, extra=extra2).read(path).assert_consumed()
    np.testing.assert_array_equal(box2.w.numpy(), [0.0, 1.0, 2.0])
    assert float(box2.parts[1]["b"].numpy()) == 2.0 and float(extra2[0].numpy()) == 5.0


def test_manager_keeps_the_last_n_and_a_new_manager_finds_them(tmp_path):
    v = jt.Variable(0.0)
    ck = jt.train.Checkpoint(v=v)
    mgr = jt.train.CheckpointManager(ck, str(tmp_path), max_to_keep=2)
    assert mgr.latest_checkpoint is None and jt.train.latest_checkpoint(str(tmp_path)) is None
    for i in range(4):
        v.assign(float(i))
        mgr.save()
    assert [os.path.basename(p) for p in mgr.checkpoints] == ["ckpt-3", "ckpt-4"]
    assert sorted(os.listdir(tmp_path)) == ["checkpoint", "ckpt-3.jtckpt", "ckpt-4.jtckpt"]
    assert jt.train.latest_checkpoint(str(tmp_path)) == str(tmp_path / "ckpt-4")
    again = jt.train.CheckpointManager(jt.train.Checkpoint(v=jt.Variable(0.0)), str(tmp_path),
                                       max_to_keep=2)
    assert again.checkpoints == mgr.checkpoints
    w = jt.Variable(-1.0)
    jt.train.Checkpoint(v=w).restore(again.latest_checkpoint)
    assert float(w.numpy()) == 3.0
    assert mgr.save(checkpoint_number=100).endswith("ckpt-100")


def test_restore_none_does_nothing_and_a_missing_path_raises(tmp_path):
    v = jt.Variable(1.0)
    jt.train.Checkpoint(v=v).restore(None)
    assert float(v.numpy()) == 1.0
    with pytest.raises(FileNotFoundError, match="no checkpoint at"):
        jt.train.Checkpoint(v=v).restore(str(tmp_path / "nothing-1"))


def _two_saves(tmp_path, fail):
    v = jt.Variable(1.0)
    mgr = jt.train.CheckpointManager(jt.train.Checkpoint(v=v), str(tmp_path), max_to_keep=1)
    first = mgr.save()
    v.assign(2.0)
    with fail():
        with pytest.raises(OSError):
            mgr.save()
    assert jt.train.latest_checkpoint(str(tmp_path)) == first
    w = jt.Variable(0.0)
    jt.train.Checkpoint(v=w).restore(jt.train.latest_checkpoint(str(tmp_path)))
    assert float(w.numpy()) == 1.0
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]


def test_a_crash_before_the_rename_leaves_the_previous_checkpoint(tmp_path, monkeypatch):
    import contextlib

    @contextlib.contextmanager
    def fail():
        real = os.replace

        def crash(src, dst):
            raise OSError(errno.EIO, "simulated crash")

        monkeypatch.setattr(os, "replace", crash)
        yield
        monkeypatch.setattr(os, "replace", real)

    _two_saves(tmp_path, fail)


def test_a_full_disk_mid_write_leaves_the_previous_checkpoint(tmp_path, monkeypatch):
    import contextlib

    import jittape.compiler.cache as jc

    @contextlib.contextmanager
    def fail():
        real = jc.os.fdopen

        class Full:
            def __init__(self, f):
                self.f = f

            def write(self, data):
                self.f.write(data[: len(data) // 2])
                raise OSError(errno.ENOSPC, "No space left on device")

            def __getattr__(self, k):
                return getattr(self.f, k)

            def __enter__(self):
                return self

            def __exit__(self, *a):
                self.f.close()

        monkeypatch.setattr(jc.os, "fdopen", lambda *a, **k: Full(real(*a, **k)))
        yield
        monkeypatch.setattr(jc.os, "fdopen", real)

    _two_saves(tmp_path, fail)


def test_another_structure_names_the_first_mismatching_variable(tmp_path):
    m = _model(width=4)
    m(X)
    path = jt.train.Checkpoint(model=m).write(str(tmp_path / "c"))
    wider = _model(width=5)
    wider(X)
    with pytest.raises(ValueError, match=r"'model/layer-0/bias'.*shape \[4\].*\[5\]"):
        jt.train.Checkpoint(model=wider).restore(path)
    deeper = _model(depth=3)
    deeper(X)
    with pytest.raises(ValueError, match=r"another structure"):
        jt.train.Checkpoint(model=deeper).restore(path)
    # unbuilt: the mismatch shows when the layer is built
    later = _model(width=6)
    jt.train.Checkpoint(model=later).restore(path)
    with pytest.raises(ValueError, match=r"model/layer-0/.*shape"):
        later(X)


def test_assert_consumed_reports_values_not_matched_yet(tmp_path):
    m = _model()
    m(X)
    path = jt.train.Checkpoint(model=m).write(str(tmp_path / "c"))
    status = jt.train.Checkpoint(model=_model()).restore(path)
    with pytest.raises(AssertionError, match="not matched"):
        status.assert_consumed()
    status.expect_partial()


def test_a_damaged_file_is_a_clear_error(tmp_path):
    p = tmp_path / "bad-1.jtckpt"
    p.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="not a readable checkpoint"):
        jt.train.Checkpoint(v=jt.Variable(1.0)).restore(str(tmp_path / "bad-1"))


def test_checkpoint_refuses_untrackable_objects():
    with pytest.raises(ValueError, match="cannot|not something"):
        jt.train.Checkpoint(x=3)
