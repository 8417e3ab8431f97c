"""jt.saved_model.save / load, and the IR text its graphs are stored in.

The IR text: a graph dumped and parsed back is the same graph (structure, types,
attributes to the bit, input names) and computes the same on the interpret backend, for
random graphs and for traced ones with symbolic sizes. The saved model: variables at the
checkpoints' paths in an .npz that numpy reads without pickle; functions that run after
load without the code that defined them (a subprocess that never imports this file),
with their symbolic batch sizes, their Python-value arguments, their variable updates
(a train step trains on as the original would) and their signatures; atomic writes; and
a clear error for what cannot be saved.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tolerances import tol

import jittape as jt
from jittape import train as _train
from jittape.compiler.backends import interpret
from jittape.compiler.ir import (
    Const, GraphBuilder, GraphTextError, Opaque, Type, dump_graph, get_op, parse_graph,
)

RNG = np.random.default_rng(7)
F32 = np.float32
T32, T64 = tol("float32"), tol("float64")


def _close(a, b, t=T32):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=t.fwd_rtol, atol=t.fwd_atol)


def _same_graph(a, b):
    assert a.structural_key() == b.structural_key()
    assert (a.name, a.input_names) == (b.name, b.input_names)
    assert (a.inputs, a.outputs) == (b.inputs, b.outputs)


# ---------------------------------------------------------------------------
# IR text


def test_ir_text_layout():
    b = GraphBuilder("step")
    x = b.add_input(Type((2, 3), "float32"), "arg:x")
    w = b.add_input(Type((3,), "float32"), "var:w")
    (y,) = b.add_node(get_op("multiply"), [x, w])
    (s,) = b.add_node(get_op("reduce_sum"), [y], {"axis": (1,), "keepdims": False})
    g = b.build([s])
    assert dump_graph(g) == textwrap.dedent("""\
        jittape-ir 1
        graph step(%0: f32[2,3] 'arg:x', %1: f32[3] 'var:w') {
          %2 = multiply %0, %1               : f32[2,3]
          %3 = reduce_sum %2 {axis=(1,), keepdims=False} : f32[2]
          return %3
        }
        """)


def test_ir_text_keeps_every_kind_of_attribute_exactly():
    b = GraphBuilder("attrs: 'odd' name")
    x = b.add_input(Type((4,), "float32"), "arg:x['k'], y")
    consts = [
        np.array([np.nan, np.inf, -np.inf, -0.0, 1e-45, 3.4e38], F32),
        np.arange(40, dtype=np.float64).reshape(5, 8) / 7,  # base64: more than 16 elements
        np.array([[True, False]]), np.array(2**62, np.int64), np.array([255, 0], np.uint8),
        np.array([-128, 5], np.int8), np.array([1.5, 65504.0], np.float16),
        np.zeros((0, 3), np.int32),
    ]
    for c in consts:
        b.add_node(get_op("const"), [], {"value": Const(c)})
    msg = "a 'quoted' \"message\" {with: braces} : and\na newline \\ backslash"
    b.add_node(get_op("check_numerics"), [x], {"message": msg})
    b.add_node(get_op("strided_slice"), [x], {"key": (slice(1, None, 2),)})
    b.add_node(get_op("fill"), [], {"shape": (2,), "value": -0.0, "dtype": "float64"})
    g = b.build([x])
    text = dump_graph(g)
    back = parse_graph(text)
    _same_graph(g, back)
    for n, m in zip(g.nodes, back.nodes):
        if n.op.name == "const":
            a, c = n.attr_dict["value"].array, m.attr_dict["value"].array
            assert a.dtype == c.dtype and a.shape == c.shape
            assert a.tobytes() == c.tobytes()  # nan, -0.0 and the smallest float, bit for bit
    assert back.nodes[-3].attr_dict["message"] == msg
    assert str(back.nodes[-1].attr_dict["value"]) == "-0.0"
    assert dump_graph(back) == text
    assert "b64=" in text  # the large constant


def test_ir_text_symbolic_sizes_and_types():
    f = jt.function(lambda x, y: (jt.reshape(x * y, [jt.shape(x)[0], 2, 2]),
                                  jt.concat([x, x], axis=0)),
                    input_signature=[jt.TensorSpec([None, 4]), jt.TensorSpec([None, 4])])
    g = f.get_concrete_function(*f.input_signature).traced
    text = dump_graph(g)
    assert "symbol s0 \"dimension 0 of argument 'x'\"" in text
    back = parse_graph(text)
    _same_graph(g, back)
    types = back.types()
    concat = next(n for n in back.nodes if n.op.name == "concat")
    assert str(types[concat.outputs[0]]) == "f32[2*s0,4]"
    s0 = back.input_types[0].shape[0]
    assert s0.symbol().origin == "dimension 0 of argument 'x'"
    # size polynomials and a Type attribute (not a graph that runs: not verified)
    b = GraphBuilder("t")
    b.add_input(Type((s0, 3), "float32"))
    b.add_node(get_op("fill"), [], {"shape": (s0 * s0 + 1, 3 - s0 * 2), "value": 1.0,
                                    "dtype": "float32", "like": Type((s0, None), "int8")},
               types=(Type((2, 2), "float32"),))
    g2 = b.build([])
    text2 = dump_graph(g2)
    assert "like=type('i8[s0,?]'), shape=(s0**2 + 1, -2*s0 + 3)" in text2
    back2 = parse_graph(text2, check=False)
    assert dump_graph(back2) == text2
    assert back2.structural_key() == g2.structural_key()


def test_ir_text_refuses_python_objects_and_fused_bodies():
    b = GraphBuilder("custom")
    x = b.add_input(Type((3,), "float32"))

    def grad_fn(dy):
        return dy

    b.add_node(get_op("custom_gradient"), [x], {"grad_fn": Opaque(grad_fn), "n_args": 1},
               types=(Type((3,), "float32"),))
    with pytest.raises(GraphTextError, match=r"graph 'custom', node %1 = custom_gradient: "
                       r"attribute 'grad_fn' holds a Python object \(<.*grad_fn>\)"):
        dump_graph(b.build([1]))
    import passes

    fused = passes.run_pipeline(jt.function(lambda a: jt.tanh(a) * 2.0 + a)
                                .get_concrete_function(jt.TensorSpec([3])).traced).graph
    with pytest.raises(GraphTextError, match="fused kernel's body"):
        dump_graph(fused)


def test_ir_text_errors_name_the_line():
    good = dump_graph(jt.function(lambda a: jt.tanh(a)).get_concrete_function(
        jt.TensorSpec([3])).traced)
    with pytest.raises(GraphTextError, match="version 2 is newer"):
        parse_graph(good.replace("jittape-ir 1", "jittape-ir 2"))
    with pytest.raises(GraphTextError, match=r"line 3: no op named 'tanhh'"):
        parse_graph(good.replace("= tanh", "= tanhh"))
    with pytest.raises(GraphTextError, match=r"line 3: .f32\(3\). is not a list of types"):
        parse_graph(good.replace(": f32[3]\n", ": f32(3)\n"))
    with pytest.raises(GraphTextError, match="does not verify"):
        parse_graph(good.replace(": f32[3]\n", ": f32[4]\n"))
    with pytest.raises(GraphTextError, match="not IR text"):
        parse_graph("graph g() {\n  return\n}\n")
    with pytest.raises(GraphTextError, match="not a declared symbol"):
        parse_graph(good.replace(": f32[3]\n", ": f32[s9]\n"))


def test_every_op_of_the_registry_round_trips():
    """Each case of the op catalogue, with its gradient, traced: its graph through IR text
    computes what it computed. Together they hold every op a trace can hold."""
    from ops.cases import CASES

    seen = set()
    for case in CASES:
        arrays = case.inputs(np.random.default_rng(0))
        floats = case.float_positions

        def f(*xs):
            with jt.GradientTape() as tape:
                for k in floats:
                    tape.watch(xs[k])
                ys = jt.nest.flatten(case.fn(*xs))
                total = [jt.reduce_sum(y) for y in ys if y.dtype.is_floating]
            grads = tape.gradient(jt.add_n(total), [xs[k] for k in floats]) if total else []
            return ys + [g for g in grads if g is not None]

        try:
            cf = jt.function(f).get_concrete_function(*[jt.constant(a) for a in arrays])
        except TypeError as e:  # an op that needs a concrete value (tile's multiples)
            assert "needs a concrete value" in str(e), case.id
            continue
        g = cf.traced
        back = parse_graph(dump_graph(g))
        assert back.structural_key() == g.structural_key(), case.id
        feeds = {v: arrays[src[1]] for v, src in cf._source.items() if src[0] == "arg"}
        feeds.update(cf._captures)
        for a, b in zip(_interpret(g, feeds), _interpret(back, feeds)):
            np.testing.assert_array_equal(a, b, err_msg=case.id)
        seen |= {n.op.name for n in g.nodes}
    v = jt.Variable(1.0)

    def assign_then_read(x):
        v.assign(x)
        return v.read_value() * 2.0

    g = jt.function(assign_then_read).get_concrete_function(jt.constant(3.0)).traced
    assert parse_graph(dump_graph(g)).structural_key() == g.structural_key()
    seen |= {n.op.name for n in g.nodes}
    # the one op no trace holds is a tape record (its Python function: refused above)
    assert set(jt.ops.registry.REGISTRY) - seen == {"custom_gradient"}


def _interpret(g, feeds):
    return interpret.run(g, feeds)


from test_passes_random import graphs  # noqa: E402 - the random-graph generator
from test_random_graphs import programs, run  # noqa: E402


@settings(max_examples=40)
@given(graphs("float64"))
def test_ir_text_round_trip_of_random_graphs(case):
    g, feeds, _ = case
    text = dump_graph(g)
    back = parse_graph(text)
    _same_graph(g, back)
    assert dump_graph(back) == text
    for a, b in zip(_interpret(g, feeds), _interpret(back, dict(feeds))):
        np.testing.assert_array_equal(a, b)


@settings(max_examples=25)
@given(programs(), st.integers(0, 2**16))
def test_ir_text_round_trip_of_traced_programs(program, seed):
    shapes, _ = program
    f = jt.function(lambda *xs: run(program, list(xs))[0])
    arrays = [np.random.default_rng(seed).standard_normal(s) for s in shapes]
    cf = f.get_concrete_function(*[jt.constant(a) for a in arrays])
    back = parse_graph(dump_graph(cf.traced))
    _same_graph(cf.traced, back)
    feeds = {v: a for v, a in zip(cf.traced.inputs, arrays)}
    feeds.update({v: a for v, a in cf._captures.items()})
    (want,) = _interpret(cf.traced, feeds)
    (got,) = _interpret(back, feeds)
    np.testing.assert_array_equal(got, want)
    _close(got, f(*arrays), T64)


# ---------------------------------------------------------------------------
# Saved models


class Affine(jt.Module):
    """y = x @ w + b, with its signature given: traced on save if never called."""

    def __init__(self, n_in=3, n_out=2):
        super().__init__()
        self.w = jt.Variable(RNG.standard_normal((n_in, n_out)).astype(F32), name="w")
        self.b = jt.Variable(RNG.standard_normal(n_out).astype(F32), name="b")
        self.frozen = jt.Variable(F32(0.5), trainable=False, name="frozen")

    @jt.function(input_signature=[jt.TensorSpec([None, 3], jt.float32, name="x")])
    def __call__(self, x):
        return jt.matmul(x, self.w) + self.b

    @jt.function
    def shifted(self, x, up=True):
        return x + self.frozen if up else x - self.frozen


def _affine_ref(x, w, b):
    return x.astype(F32) @ w + b


def test_module_with_an_input_signature_is_traced_on_save(tmp_path):
    m = Affine()
    assert m.__call__.experimental_get_tracing_count() == 0
    jt.saved_model.save(m, tmp_path / "m")
    assert m.__call__.experimental_get_tracing_count() == 1
    loaded = jt.saved_model.load(tmp_path / "m")
    for n in (1, 4, 9):  # one trace with a symbolic batch size serves every size
        x = RNG.standard_normal((n, 3)).astype(F32)
        _close(loaded(x), _affine_ref(x, m.w.numpy(), m.b.numpy()))
    fn = loaded.__call__.concrete_functions[0].function
    assert fn.experimental_get_tracing_count() == 1
    assert [v.name for v in loaded.variables] == [v.name for v in m.variables]
    assert [v.name for v in loaded.trainable_variables] == ["b:0", "w:0"]
    assert [v.name for v in loaded.non_trainable_variables] == ["frozen:0"]
    for a, b in zip(loaded.variables, m.variables):
        assert isinstance(a, jt.Variable) and a is not b and a.trainable == b.trainable
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert isinstance(loaded, jt.Module) and loaded.name == "affine"
    (spec,), kw = loaded.__call__.concrete_functions[0].structured_input_signature
    assert spec == jt.TensorSpec([None, 3]) and kw == {}
    assert not hasattr(loaded, "shifted") or loaded.shifted.concrete_functions == []


def test_python_value_arguments_pick_their_trace(tmp_path):
    m = Affine()
    m.shifted(jt.constant([1.0, 2.0]))
    m.shifted(jt.constant([1.0, 2.0]), up=False)
    jt.saved_model.save(m, tmp_path / "m")
    loaded = jt.saved_model.load(tmp_path / "m")
    x = np.array([1.0, 2.0], F32)
    _close(loaded.shifted(x), x + 0.5)
    _close(loaded.shifted(x, up=False), x - 0.5)
    _close(loaded.shifted(x, False), x - 0.5)  # bound as the original's parameters bind
    with pytest.raises(ValueError, match=r"no saved trace of 'Affine.shifted' fits the call"
                       r"(.|\n)*Option 2:(.|\n)*False"):
        loaded.shifted(np.ones(3, F32))
    with pytest.raises(ValueError, match="no saved trace"):
        loaded.shifted(x, up=1)  # 1 is not True: Python values by type and value


def test_captured_arrays_are_saved(tmp_path):
    table = RNG.standard_normal((40, 3)).astype(F32)  # captured: a graph input
    small = np.array([1.0, -1.0, 2.0], F32)  # small: a constant in the graph

    class Lookup(jt.Module):
        def __init__(self):
            super().__init__()
            self.bias = jt.Variable(np.zeros(3, F32))

        @jt.function(input_signature=[jt.TensorSpec([None], jt.int64)])
        def __call__(self, i):
            return jt.gather(jt.constant(table), i) * small + self.bias

    jt.saved_model.save(Lookup(), tmp_path / "l")
    with np.load(tmp_path / "l" / "captures.npz", allow_pickle=False) as z:
        assert [z[k].shape for k in z.files] == [(40, 3)]
    loaded = jt.saved_model.load(tmp_path / "l")
    i = np.array([3, 0, 39], np.int64)
    _close(loaded(i), table[i] * small)


def _mlp():
    model = jt.Sequential([jt.layers.Dense(4, activation="relu"), jt.layers.Dense(2)])
    model(np.zeros((1, 5), F32))
    return model


def _mlp_ref(model_vars, x):
    k0, b0, k1, b1 = [v.numpy() for v in model_vars]
    return np.maximum(x @ k0 + b0, 0) @ k1 + b1


def test_sequential_with_a_traced_predict_function(tmp_path):
    model = _mlp()
    model.serve = jt.function(lambda x: model(x, training=False),
                              input_signature=[jt.TensorSpec([None, 5])])
    model.predict_step = jt.function(lambda x: model(x))
    x2 = RNG.standard_normal((2, 5)).astype(F32)
    model.predict_step(x2)  # one trace, of shape (2, 5)
    jt.saved_model.save(model, tmp_path / "seq")
    loaded = jt.saved_model.load(tmp_path / "seq")
    x = RNG.standard_normal((6, 5)).astype(F32)
    _close(loaded.serve(x), _mlp_ref(model.variables, x))
    _close(loaded.predict_step(x2), _mlp_ref(model.variables, x2))
    with pytest.raises(ValueError, match=r"no saved trace(.|\n)*shape=\(2, 5\)"):
        loaded.predict_step(x)
    layer0 = getattr(loaded, "layer-0")
    np.testing.assert_array_equal(layer0.kernel.numpy(), model.layers[0].kernel.numpy())
    # restored variables are TF's, named by TF's name (the Keras path and ":0"), as
    # tf.saved_model.load names a Keras 3 model's variables
    assert [v.name for v in loaded.variables] == [f"{v.path}:0" for v in model.variables]
    assert [v.name for v in layer0.variables] == [
        f"{v.path}:0" for v in model.layers[0].variables]
    # the checkpoint paths of the loaded tree are the saved tree's
    assert sorted(_train._graph(loaded)[0]) == sorted(_train._graph(model)[0])


def test_a_fitted_keras_model(tmp_path):
    """A subclassed jt.keras.Model after compile and fit: its own compiled loops are not
    saved (as tf.keras), its weights, optimizer state and a serving function are."""

    class MLP(jt.keras.Model):
        def __init__(self):
            super().__init__()
            self.hidden = jt.keras.layers.Dense(4, activation="relu")
            self.out = jt.keras.layers.Dense(2)

        def call(self, x, training=None):
            return self.out(self.hidden(x))

    model = MLP()
    model.compile(optimizer="adam", loss="mse")
    x = RNG.standard_normal((16, 5)).astype(F32)
    y = RNG.standard_normal((16, 2)).astype(F32)
    model.fit(x, y, epochs=1, batch_size=8, verbose=0)
    model.serve = jt.function(lambda a: model(a, training=False),
                              input_signature=[jt.TensorSpec([None, 5])])
    jt.saved_model.save(model, tmp_path / "k")
    with open(tmp_path / "k" / "saved_model.json") as f:
        meta = json.load(f)
    assert [f["attribute"] for f in meta["functions"]] == ["serve"]
    assert "optimizer/iterations" in meta["variables"]
    loaded = jt.saved_model.load(tmp_path / "k")
    _close(loaded.serve(x), model.predict(x, verbose=0))
    assert [v.name for v in loaded.trainable_variables] == [
        f"{v.path}:0" for v in model.trainable_variables]
    assert int(loaded.optimizer.iterations.numpy()) == 2


class Trainer(jt.Module):
    """A model, its optimizer and a compiled train step (a method of the module)."""

    def __init__(self, opt_cls=jt.optimizers.Adam):
        super().__init__()
        self.model = _mlp()
        self.opt = opt_cls(learning_rate=0.05)

    @jt.function(input_signature=[jt.TensorSpec([None, 5]), jt.TensorSpec([None, 2])])
    def train_step(self, x, y):
        with jt.GradientTape() as tape:
            loss = jt.reduce_mean(jt.square(self.model(x, training=True) - y))
        grads = tape.gradient(loss, self.model.trainable_variables)
        self.opt.apply_gradients(zip(grads, self.model.trainable_variables))
        return {"loss": loss, "step": self.opt.iterations.read_value()}


def _trainer(opt_cls=jt.optimizers.Adam):
    return Trainer(opt_cls)


def test_a_saved_train_step_trains_on_like_the_original(tmp_path):
    model = _trainer()
    x = RNG.standard_normal((8, 5)).astype(F32)
    y = RNG.standard_normal((8, 2)).astype(F32)
    model.train_step(x, y)  # Adam's slots exist now: they are saved too
    jt.saved_model.save(model, tmp_path / "t")
    saved = {p: v.numpy() for p, v in _train._graph(model)[0].items()}
    assert any("/.slots/" in p for p in saved)
    with np.load(tmp_path / "t" / "variables" / "variables.jtckpt", allow_pickle=False) as z:
        assert sorted(z.files) == sorted(saved)
        for p in z.files:
            np.testing.assert_array_equal(z[p], saved[p])
    loaded = jt.saved_model.load(tmp_path / "t")
    for k in range(3):
        xs, ys = x[k:k + 5], y[k:k + 5]  # batch sizes 5 (a symbolic size)
        want = model.train_step(xs, ys)
        got = loaded.train_step(xs, ys)
        _close(got["loss"], want["loss"])
        assert int(got["step"]) == int(want["step"]) == k + 2
    now = _train._graph(model)[0]
    for p, v in _train._graph(loaded)[0].items():
        _close(v.numpy(), now[p].numpy())
    assert not np.allclose(now["model/layer-0/kernel"].numpy(), saved["model/layer-0/kernel"])


def test_loaded_functions_compiled_equal_eager(tmp_path):
    """The replayed graph as a compiled jt.function, eagerly, under a tape and inlined
    into another jt.function: the same values (and the train step's updates)."""
    model = _trainer(jt.optimizers.SGD)
    x = RNG.standard_normal((4, 5)).astype(F32)
    y = RNG.standard_normal((4, 2)).astype(F32)
    jt.saved_model.save(model, tmp_path / "t")
    runs = []
    for how in ("compiled", "eager", "inlined"):
        loaded = jt.saved_model.load(tmp_path / "t")
        if how == "eager":
            jt.config.run_functions_eagerly(True)
        try:
            if how == "inlined":
                out = jt.function(lambda a, b: loaded.train_step(a, b))(x, y)
            else:
                out = loaded.train_step(x, y)
        finally:
            jt.config.run_functions_eagerly(False)
        runs.append((float(out["loss"]), [v.numpy() for v in loaded.variables]))
    for loss, values in runs[1:]:
        _close(loss, runs[0][0])
        for a, b in zip(values, runs[0][1]):
            _close(a, b)
    # the gradient of a loaded function, with respect to the restored variables
    m = Affine()
    jt.saved_model.save(m, tmp_path / "a")
    la = jt.saved_model.load(tmp_path / "a")
    xa = RNG.standard_normal((3, 3)).astype(F32)
    grads = []
    for f, obj in ((m, m), (la, la)):
        with jt.GradientTape() as tape:
            s = jt.reduce_sum(jt.square(f(xa)))
        grads.append(tape.gradient(s, [obj.w, obj.b]))
    for a, b in zip(*grads):
        _close(a, b)
    out = _affine_ref(xa, m.w.numpy(), m.b.numpy())
    _close(grads[1][0], xa.T @ (2 * out))


class Pairs(jt.Module):
    """Two arguments whose batch sizes the trace takes as one (a broadcast matched
    them), sizes in attributes (a reshape by jt.shape), and several signatures."""

    def __init__(self):
        super().__init__()
        self.scale = jt.Variable(np.array([1.0, -2.0, 0.5, 3.0], F32), name="scale")

    @jt.function(input_signature=[jt.TensorSpec([None, 4], name="a"),
                                  jt.TensorSpec([None, 4], name="b")])
    def combine(self, a, b):
        z = a * self.scale + b
        return jt.reshape(z, [jt.shape(z)[0], 2, 2]), jt.reduce_sum(z, axis=1)

    @jt.function(input_signature=[jt.TensorSpec([None, 4], name="a")])
    def stats(self, a):
        return {"mean": jt.reduce_mean(a, axis=0), "max": jt.reduce_max(a)}

    @jt.function
    def double(self, a):
        return a * 2.0


def test_symbolic_batch_sizes(tmp_path):
    m = Pairs()
    jt.saved_model.save(m, tmp_path / "p")
    loaded = jt.saved_model.load(tmp_path / "p")
    scale = m.scale.numpy()
    for n in (1, 3, 7):
        a = RNG.standard_normal((n, 4)).astype(F32)
        b = RNG.standard_normal((n, 4)).astype(F32)
        z = a * scale + b
        r, s = loaded.combine(a, b)
        assert r.shape == (n, 2, 2)
        _close(r, z.reshape(n, 2, 2))
        _close(s, z.sum(axis=1))
        jt.config.run_functions_eagerly(True)
        try:
            r2, _ = loaded.combine(a, b)  # the attributes' sizes bound to this call's
        finally:
            jt.config.run_functions_eagerly(False)
        _close(r2, r)
    assert loaded.combine.concrete_functions[0].function.experimental_get_tracing_count() == 1
    with pytest.raises(jt.errors.InvalidArgumentError, match="dimension 0 of argument"):
        loaded.combine(np.ones((2, 4), F32), np.ones((3, 4), F32))
    jt.config.run_functions_eagerly(True)
    try:
        with pytest.raises(jt.errors.InvalidArgumentError,
                           match=r"sizes 2 and 3 for one dimension \(dimension 0 of argument"):
            loaded.combine(np.ones((2, 4), F32), np.ones((3, 4), F32))
    finally:
        jt.config.run_functions_eagerly(False)


def test_several_signatures(tmp_path):
    m = Pairs()
    double = m.double.get_concrete_function(jt.TensorSpec([2, 4], name="a"))
    jt.saved_model.save(m, tmp_path / "p", signatures={
        "serving_default": m.combine, "stats": m.stats, "double": double})
    loaded = jt.saved_model.load(tmp_path / "p")
    assert sorted(loaded.signatures) == ["double", "serving_default", "stats"]
    a = RNG.standard_normal((3, 4)).astype(F32)
    b = RNG.standard_normal((3, 4)).astype(F32)
    serve = loaded.signatures["serving_default"]
    assert serve.structured_input_signature == (
        (), {"a": jt.TensorSpec([None, 4]), "b": jt.TensorSpec([None, 4])})
    assert sorted(serve.structured_outputs) == ["output_0", "output_1"]
    out = serve(a=a, b=b)
    z = a * m.scale.numpy() + b
    assert sorted(out) == ["output_0", "output_1"]
    _close(out["output_0"], z.reshape(3, 2, 2))
    _close(serve(a, b=b)["output_1"], z.sum(axis=1))
    st_ = loaded.signatures["stats"](a=a)
    assert sorted(st_) == ["max", "mean"]  # a dict result keeps its keys
    _close(st_["mean"], a.mean(axis=0))
    _close(st_["max"], a.max())
    _close(loaded.signatures["double"](a[:2])["output_0"], a[:2] * 2)
    with pytest.raises(TypeError, match=r"signature 'stats' has no input 'x'"):
        loaded.signatures["stats"](x=a)
    with pytest.raises(TypeError, match=r"signature 'double': input 'a' .* does not fit"):
        loaded.signatures["double"](a)  # traced for [2, 4] only
    with pytest.raises(TypeError, match="missing input"):
        serve(a=a)
    # what a signature cannot be
    with pytest.raises(TypeError, match="jt.function 'Pairs.double' has no input_signature"):
        jt.saved_model.save(m, tmp_path / "q", signatures=m.double)
    nested = jt.function(lambda a: {"x": {"y": a}}, input_signature=[jt.TensorSpec([2])])
    with pytest.raises(ValueError, match="outputs of a signature must be a single tensor"):
        jt.saved_model.save(m, tmp_path / "q", signatures=nested)
    with_py = jt.function(lambda a, k: a * k).get_concrete_function(jt.TensorSpec([2]), 3)
    with pytest.raises(ValueError, match="signature 'serving_default': its arguments include "
                       "Python values"):
        jt.saved_model.save(m, tmp_path / "q", signatures=with_py)
    assert not (tmp_path / "q").exists()


SUBPROCESS = """
import json, sys
import numpy as np
import jittape as jt
jt.set_backend("cpu")
loaded = jt.saved_model.load(sys.argv[1])
x = np.asarray(json.loads(sys.argv[2]), np.float32)
y = np.asarray(json.loads(sys.argv[3]), np.float32)
out = {"serve": loaded.signatures["serving_default"](x=x)["output_0"].numpy().tolist()}
out["losses"] = [float(loaded.train_step(x, y)["loss"]) for _ in range(2)]
out["kernel"] = getattr(loaded.model, "layer-0").kernel.numpy().tolist()
out["modules"] = sorted(m for m in sys.modules if m.startswith("test_"))
info = loaded.signatures["serving_default"]._concrete.function.cache_info()
out["programs"] = info.compiled + info.reused
print(json.dumps(out))
"""


def test_a_fresh_process_loads_without_the_defining_code(tmp_path):
    t = Trainer(jt.optimizers.SGD)
    t.serve = jt.function(lambda x: t.model(x), input_signature=[jt.TensorSpec([None, 5])])
    x = RNG.standard_normal((3, 5)).astype(F32)
    y = RNG.standard_normal((3, 2)).astype(F32)
    jt.saved_model.save(t, tmp_path / "t", signatures=t.serve)
    want_serve = t.serve(x).numpy()
    want_losses = [float(t.train_step(x, y)["loss"]) for _ in range(2)]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(jt.__file__))
    r = subprocess.run(
        [sys.executable, "-c", SUBPROCESS, str(tmp_path / "t"), json.dumps(x.tolist()),
         json.dumps(y.tolist())], env=env, capture_output=True, text=True, timeout=300,
        cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["modules"] == []  # the classes' module (this file) was never imported
    assert got["programs"] == 1  # compiled by the cpu backend (or found in its cache)
    _close(got["serve"], want_serve)
    _close(got["losses"], want_losses)
    _close(got["kernel"], t.model.layers[0].kernel.numpy())


def _files(d):
    out = {}
    for root, _, names in os.walk(d):
        for n in names:
            p = os.path.join(root, n)
            with open(p, "rb") as f:
                out[os.path.relpath(p, d)] = f.read()
    return out


def test_a_crash_during_a_save_leaves_the_previous_export(tmp_path, monkeypatch):
    m = Affine()
    target = tmp_path / "m"
    jt.saved_model.save(m, target)
    before = _files(target)
    w0 = m.w.numpy()
    m.w.assign(np.full((3, 2), 7.0, F32))
    real, calls = jt._files.write_atomic, [0]

    def full_disk(path, data, durable=False):
        calls[0] += 1
        if calls[0] == 3:
            raise OSError(28, "No space left on device")
        return real(path, data, durable)

    monkeypatch.setattr(jt._files, "write_atomic", full_disk)
    with pytest.raises(OSError, match="No space left"):
        jt.saved_model.save(m, target)
    monkeypatch.undo()
    assert calls[0] == 3
    assert _files(target) == before
    assert os.listdir(tmp_path) == ["m"]  # the half-written directory is gone
    np.testing.assert_array_equal(jt.saved_model.load(target).w.numpy(), w0)
    jt.saved_model.save(m, target)  # a save that completes replaces it
    np.testing.assert_array_equal(jt.saved_model.load(target).w.numpy(), m.w.numpy())
    assert os.listdir(tmp_path) == ["m"]


CRASH = """
import os, sys
import numpy as np
import jittape as jt
loaded = jt.saved_model.load(sys.argv[1])
loaded.w.assign(np.full((3, 2), -1.0, np.float32))
calls = [0]
real = jt._files.write_atomic
def crash(path, data, durable=False):
    calls[0] += 1
    if calls[0] == int(sys.argv[2]):
        os._exit(3)  # the process dies mid-save: no cleanup runs
    return real(path, data, durable)
jt._files.write_atomic = crash
jt.saved_model.save(loaded, sys.argv[1])
"""


def test_a_process_killed_mid_save_leaves_the_previous_export(tmp_path):
    m = Affine()
    target = tmp_path / "m"
    jt.saved_model.save(m, target)
    before = _files(target)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(jt.__file__))
    for k in (1, 4):  # the first file; the metadata, written last
        r = subprocess.run([sys.executable, "-c", CRASH, str(target), str(k)], env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 3, r.stderr
        assert _files(target) == before
    loaded = jt.saved_model.load(target)
    np.testing.assert_array_equal(loaded.w.numpy(), m.w.numpy())
    x = RNG.standard_normal((2, 3)).astype(F32)
    _close(loaded(x), m(x))
    # what the dead processes left beside it is hidden, and a later save is not disturbed
    left = [n for n in os.listdir(tmp_path) if n != "m"]
    assert left and all(n.startswith(".m.") and n.endswith(".tmp") for n in left)
    jt.saved_model.save(loaded, target)
    _close(jt.saved_model.load(target)(x), m(x))


def test_save_replaces_only_a_saved_model(tmp_path):
    d = tmp_path / "mine"
    d.mkdir()
    (d / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="exists and is not a saved model"):
        jt.saved_model.save(Affine(), d)
    assert os.listdir(d) == ["notes.txt"]
    (d / "notes.txt").unlink()
    jt.saved_model.save(Affine(), d)  # an empty directory is filled
    assert (d / "saved_model.json").exists()
    with pytest.raises(FileNotFoundError, match="no saved model at"):
        jt.saved_model.load(tmp_path / "nothing")


def test_a_loaded_object_saves_again(tmp_path):
    p = Pairs()
    jt.saved_model.save(p, tmp_path / "a", signatures={"serving_default": p.stats})
    first = jt.saved_model.load(tmp_path / "a")
    jt.saved_model.save(first, tmp_path / "b", signatures=first.signatures)
    second = jt.saved_model.load(tmp_path / "b")
    a = RNG.standard_normal((5, 4)).astype(F32)
    b = RNG.standard_normal((5, 4)).astype(F32)
    for x, y in zip(second.combine(a, b), p.combine(a, b)):
        _close(x, y)
    _close(second.signatures["serving_default"](a=a)["max"], p.stats(a)["max"])
    assert [v.name for v in second.variables] == [v.name for v in p.variables]


class Noisy(jt.Module):
    def __init__(self):
        super().__init__()
        self.w = jt.Variable(np.ones(3, F32), name="w")

    @jt.function
    def dropout(self, x):
        return jt.nn.dropout(x * self.w, 0.5)

    @jt.function
    def talk(self, x, stream=None):
        jt.print("x is", x * self.w, output_stream=stream)
        return x

    @jt.function
    def with_object(self, x, obj):
        return x * self.w


G = jt.Variable(2.0, name="global_g")


class Outside(jt.Module):
    def __init__(self):
        super().__init__()
        self.w = jt.Variable(1.0, name="w")

    @jt.function
    def f(self, x):
        return x * self.w * G


class Key:
    def __hash__(self):
        return 1

    def __eq__(self, other):
        return isinstance(other, Key)


def test_what_cannot_be_saved_is_a_clear_error(tmp_path):
    x = jt.constant(np.ones(3, F32))
    n = Noisy()
    n.dropout(x)
    with pytest.raises(ValueError, match=r"jt.saved_model.save: function 'dropout' \(jt.function "
                       r"'Noisy.dropout'\): it draws random values"):
        jt.saved_model.save(n, tmp_path / "n")
    n = Noisy()
    n.talk(x, stream=lambda s: None)
    with pytest.raises(ValueError, match=r"function 'talk' .*: jt.print writes to <function"):
        jt.saved_model.save(n, tmp_path / "n")
    n = Noisy()
    n.with_object(x, Key())
    with pytest.raises(ValueError, match=r"function 'with_object' .*: a Key \("):
        jt.saved_model.save(n, tmp_path / "n")
    o = Outside()
    o.f(x)
    with pytest.raises(ValueError, match="it reads variable 'global_g:0', which is not "
                       "reachable from the object saved"):
        jt.saved_model.save(o, tmp_path / "o")
    with pytest.raises(TypeError, match="obj must be a jt.Module .* got Variable"):
        jt.saved_model.save(G, tmp_path / "g")
    assert os.listdir(tmp_path) == []  # nothing written by a save that failed


def test_prints_and_custom_gradients_are_saved(tmp_path, capsys):
    n = Noisy()
    n.talk(jt.constant(np.arange(3, dtype=F32)))
    capsys.readouterr()
    jt.saved_model.save(n, tmp_path / "n")
    loaded = jt.saved_model.load(tmp_path / "n")
    loaded.w.assign(np.full(3, 2.0, F32))
    loaded.talk(np.arange(3, dtype=F32))
    assert capsys.readouterr().err == "x is [0 2 4]\n"  # every call prints, after the call

    @jt.custom_gradient
    def clip_grad(v):
        return jt.identity(v), lambda dy: jt.clip_by_value(dy, -0.5, 0.5)

    class Clipped(jt.Module):
        def __init__(self):
            super().__init__()
            self.w = jt.Variable(np.array([1.0, -3.0, 0.1], F32), name="w")

        @jt.function(input_signature=[jt.TensorSpec([3])])
        def step(self, x):
            with jt.GradientTape() as tape:
                loss = jt.reduce_sum(jt.square(clip_grad(self.w) * x))
            g = tape.gradient(loss, self.w)
            self.w.assign_sub(0.1 * g)
            return g

    c = Clipped()
    jt.saved_model.save(c, tmp_path / "c")
    loaded = jt.saved_model.load(tmp_path / "c")
    x = np.array([2.0, 1.0, 0.05], F32)
    for _ in range(2):
        w = c.w.numpy()
        want = np.clip(2 * w * x * x, -0.5, 0.5)  # the gradient clipped by the custom rule
        _close(loaded.step(x), want)
        _close(c.step(x), want)
        _close(loaded.w.numpy(), c.w.numpy())


def test_the_directory_exchange_without_renameat2(tmp_path, monkeypatch):
    import ctypes

    from jittape.saved_model import _exchange

    def no_libc(*args, **kwargs):
        raise OSError("no libc here")

    for lib in ("real", "missing"):
        a, b = tmp_path / f"a_{lib}", tmp_path / f"b_{lib}"
        a.mkdir()
        b.mkdir()
        (a / "new").write_text("n")
        (b / "old").write_text("o")
        if lib == "missing":
            monkeypatch.setattr(ctypes, "CDLL", no_libc)  # two renames, not one exchange
        _exchange(str(a), str(b))
        assert os.listdir(b) == ["new"] and os.listdir(a) == ["old"]
