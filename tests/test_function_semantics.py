"""``@jt.function`` faithful to ``tf.function`` where jittape was silently wrong: methods
do not keep their instances alive, per-call variables and mutated list/dict arguments
raise, arguments are bound to parameters (keywords, defaults, input_signature), sets and
weakrefs are refused, and a function created in a loop warns."""

from __future__ import annotations

import gc
import importlib
import logging
import warnings
import weakref

import numpy as np
import pytest

import jittape as jt
F = importlib.import_module("jittape.function")  # the module (jt.function is the decorator)

BACKENDS = ["interpret", "cpu"]


def _retrace_warnings(rec):
    return [str(w.message) for w in rec if "triggered tracing" in str(w.message)]


# ---------------------------------------------------------------------------
# 1. a method's per-instance Function does not keep its instance alive


class _Scaler:
    def __init__(self, k):
        self.k = jt.Variable(np.float32(k))

    @jt.function
    def __call__(self, x):
        return x * self.k

    @jt.function
    def bump(self, x):
        self.k.assign_add(x)
        return self.k.read_value()


class _Unhashable(_Scaler):
    __hash__ = None

    def __eq__(self, other):
        return isinstance(other, _Unhashable)


class _EqualAndHashable(_Scaler):
    # equal instances with the same hash: each must still have its own trace
    def __eq__(self, other):
        return isinstance(other, _EqualAndHashable)

    def __hash__(self):
        return 1


# many instances of one class, one trace each: the retrace warning says so, as TF's does
_MANY_INSTANCES = pytest.mark.filterwarnings("ignore:.*instances traced the method")


def _collected(ref) -> bool:
    gc.collect()
    return ref() is None


@_MANY_INSTANCES
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("cls", [_Scaler, _Unhashable], ids=["hashable", "unhashable"])
def test_method_function_does_not_keep_its_instance_alive(cls, backend):
    with _backend(backend):
        obj = cls(2.0)
        for k in range(3):
            assert float(obj(jt.constant(1.5))) == 1.5 * (2.0 + k)
            obj.bump(jt.constant(1.0))
        bound = obj.__call__
        assert bound.cache_info().traces == 1 and bound.cache_info().hits == 2
        ref, bound_ref = weakref.ref(obj), weakref.ref(bound)
        del obj, bound
        assert _collected(ref)
        assert _collected(bound_ref)  # nor does any registry (_live_functions is weak)
        assert not [f for f in F._live_functions if f._fn.__class__ is F._WeakMethod
                    and f._fn.ref() is None]


@_MANY_INSTANCES
def test_an_instance_only_looked_up_is_collected_and_the_cache_is_emptied():
    obj = _Scaler(1.0)
    obj.bump  # noqa: B018 - creates the per-instance Function
    ref = weakref.ref(obj)
    del obj
    assert _collected(ref)
    assert len(_Scaler.bump._bound) == 0


class _backend:
    def __init__(self, name):
        self.name = name

    def __enter__(self):
        from jittape.compiler import backends

        self.saved = backends._current[0]
        jt.set_backend(self.name)

    def __exit__(self, *exc):
        jt.set_backend(self.saved)


@_MANY_INSTANCES
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("cls", [_Scaler, _Unhashable, _EqualAndHashable],
                         ids=["hashable", "unhashable", "equal"])
def test_each_instance_traces_once_and_reads_its_own_variables(cls, backend):
    with _backend(backend):
        a, b = cls(2.0), cls(3.0)
        x = jt.constant(1.0)
        assert float(a(x)) == 2.0 and float(b(x)) == 3.0
        assert float(a(x)) == 2.0 and float(b(x)) == 3.0
        assert a.__call__ is a.__call__ and a.__call__ is not b.__call__
        assert a.__call__.cache_info().traces == 1
        assert b.__call__.cache_info().traces == 1
        assert float(a.bump(x)) == 3.0 and float(b.bump(x)) == 4.0
        assert float(a.k.numpy()) == 3.0 and float(b.k.numpy()) == 4.0


@_MANY_INSTANCES
def test_method_called_after_its_instance_died_says_so():
    bump = _Scaler(1.0).bump  # the Function, not the instance, is kept
    gc.collect()
    with pytest.raises(ReferenceError, match="instance"):
        bump(jt.constant(1.0))


# ---------------------------------------------------------------------------
# 2. a variable created on every call raises at the first call


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_variable_created_on_every_call_raises_at_the_first_call(backend):
    @jt.function(backend=backend)
    def f(x):
        v = jt.Variable(2.0)
        return x * v

    with pytest.raises(ValueError, match="only supports singleton Variables created on the "
                                         "first call") as e:
        f(jt.constant(1.0))
    assert ".f'" in str(e.value) and "Variable:0" in str(e.value)
    assert f.cache_info().traces == 0
    with pytest.raises(ValueError, match="singleton"):
        f(jt.constant(1.0))


def test_a_per_call_variable_under_a_tape_or_in_a_local_list_raises():
    @jt.function
    def g(x):
        v = jt.Variable(2.0, name="local")
        with jt.GradientTape() as tape:
            y = v * x
        return tape.gradient(y, v)

    with pytest.raises(ValueError, match="singleton Variables created on the first call"):
        g(jt.constant(3.0))

    @jt.function
    def h(x):
        vs = [jt.Variable(np.ones(2)) for _ in range(2)]
        return x + vs[0] + vs[1]

    with pytest.raises(ValueError, match="singleton"):
        h(jt.constant(np.zeros(2)))

    @jt.function
    def returned():
        return jt.Variable(1.0)

    with pytest.raises(ValueError, match="singleton"):
        returned()


@pytest.mark.parametrize("backend", BACKENDS)
def test_variables_created_on_the_first_call_and_kept_work(backend):
    class Counter:
        def __init__(self):
            self.v = None

        @jt.function(backend=backend)
        def __call__(self, x):
            if self.v is None:
                self.v = jt.Variable(np.zeros(2))
            self.v.assign_add(x)
            return self.v.read_value()

    c = Counter()
    for k in range(1, 4):
        np.testing.assert_allclose(c(np.ones(2)).numpy(), [k, k])
    assert c.__call__.cache_info().traces == 1

    kept = []

    @jt.function(backend=backend)
    def in_a_list(x):
        if not kept:
            kept.append(jt.Variable(np.float32(10.0)))
        kept[0].assign_sub(x)
        return kept[0] * 1.0

    assert float(in_a_list(jt.constant(1.0))) == 9.0
    assert float(in_a_list(jt.constant(1.0))) == 8.0
    assert in_a_list.cache_info().traces == 1


def test_lazily_built_layers_and_optimizer_slots_inside_the_first_trace_work():
    model = jt.Sequential([jt.layers.Dense(3), jt.layers.Dense(1)])
    opt = jt.optimizers.Adam(0.01)

    @jt.function
    def step(x):
        with jt.GradientTape() as tape:
            loss = jt.reduce_mean(jt.square(model(x)))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    x = np.ones((4, 2), np.float32)
    losses = [float(step(x)) for _ in range(3)]
    assert step.cache_info().traces == 1
    assert losses[2] < losses[0]
    assert int(opt.iterations.numpy()) == 3


# ---------------------------------------------------------------------------
# 3. modifying a list or dict argument raises


def test_appending_to_a_list_argument_raises():
    @jt.function
    def f(x, acc):
        acc.append(x * 2.0)
        return x

    with pytest.raises(ValueError, match="should not modify its Python input arguments") as e:
        f(jt.constant(1.0), [])
    msg = str(e.value)
    assert "'f'" in msg or "f(x, acc)" in msg
    assert "Modifying a copy is allowed" in msg and "acc" in msg


@pytest.mark.parametrize("mutate, arg", [
    (lambda d: d.__setitem__("k", 1.0), {}),
    (lambda d: d.pop("a"), {"a": 1.0}),
    (lambda a: a.__setitem__(0, 5.0), [1.0]),
    (lambda a: a[0].append(5.0), [[1.0]]),
    (lambda a: a[1].clear(), (1.0, [2.0])),
    (lambda a: a.reverse(), [1.0, 2.0]),
], ids=["dict_setitem", "dict_pop", "list_setitem", "nested_append", "in_tuple",
        "reverse"])
def test_modifying_lists_and_dicts_argument_raises(mutate, arg):
    @jt.function
    def f(x, arg):
        mutate(arg)
        return x

    with pytest.raises(ValueError, match="should not modify its Python input arguments"):
        f(jt.constant(1.0), arg)


def test_modifying_a_keyword_argument_names_it_and_copies_are_allowed():
    @jt.function
    def f(x, *, log):
        log["y"] = x
        return x

    with pytest.raises(ValueError, match="modified: log"):
        f(jt.constant(1.0), log={})

    @jt.function
    def g(x, acc):
        acc = list(acc)  # a copy
        acc.append(x)
        return jt.add_n(acc) if hasattr(jt, "add_n") else acc[0] + acc[-1]

    assert float(g(jt.constant(1.0), [jt.constant(2.0)])) == 3.0
    assert float(g(jt.constant(1.0), [jt.constant(2.0)])) == 3.0
    assert g.cache_info().traces == 1


# ---------------------------------------------------------------------------
# 4. input_signature binds keyword arguments and defaults


SPEC = jt.TensorSpec([None], jt.float32)


def test_input_signature_accepts_keyword_arguments():
    @jt.function(input_signature=[SPEC, SPEC])
    def f(x, y=None):
        return x - y

    a, b = np.ones(2, np.float32), np.full(2, 3.0, np.float32)
    for call in (lambda: f(a, b), lambda: f(a, y=b), lambda: f(x=a, y=b),
                 lambda: f(y=b, x=a)):
        np.testing.assert_allclose(call().numpy(), [-2.0, -2.0])
    assert f.cache_info().traces == 1
    with pytest.raises(TypeError):
        f(a)  # y has no tensor value
    with pytest.raises(TypeError):
        f(a, x=b)
    with pytest.raises(TypeError):
        f(a, z=b)


def test_input_signature_parameters_beyond_it_take_their_defaults():
    @jt.function(input_signature=[SPEC])
    def g(x, training=False):
        return x * 2.0 if training else x

    a = np.ones(2, np.float32)
    np.testing.assert_allclose(g(a).numpy(), [1.0, 1.0])
    np.testing.assert_allclose(g(x=a).numpy(), [1.0, 1.0])
    np.testing.assert_allclose(g(a, training=False).numpy(), [1.0, 1.0])
    assert g.cache_info().traces == 1
    with pytest.raises(TypeError, match="training"):
        g(a, training=True)
    with pytest.raises(TypeError, match="training"):
        g(a, True)

    def h(x, y):
        return x

    with pytest.raises(TypeError, match="missing type constraint for y"):
        jt.function(h, input_signature=[SPEC])(a, a)


def test_input_signature_on_a_method_binds_keywords():
    class M:
        @jt.function(input_signature=[SPEC])
        def call(self, x, scale=3.0):
            return x * scale

    m = M()
    a = np.ones(2, np.float32)
    np.testing.assert_allclose(m.call(a).numpy(), [3.0, 3.0])
    np.testing.assert_allclose(m.call(x=a).numpy(), [3.0, 3.0])
    assert m.call.cache_info().traces == 1


def test_get_concrete_function_without_arguments_uses_the_input_signature():
    # TF 2.21: f.get_concrete_function() on a tf.function with an input_signature is the
    # signature's concrete function; the same one that a spec or a tensor argument finds
    @jt.function(input_signature=[SPEC])
    def f(x, training=False):
        return x * 2.0

    cf = f.get_concrete_function()
    args, kwargs = cf.structured_input_signature
    assert args == (jt.TensorSpec((None,), jt.float32), False) and kwargs == {}
    assert args[0].name == "x"
    assert f.get_concrete_function(SPEC) is cf
    assert f.get_concrete_function(jt.constant([1.0, 2.0, 3.0])) is cf
    assert f.experimental_get_tracing_count() == 1
    for n in (1, 4):  # the signature's None dim: any size
        np.testing.assert_allclose(cf(jt.ones([n])).numpy(), np.full(n, 2.0))
    # TF: "missing a required argument: 'x'" without a signature, and for keywords only
    with pytest.raises(TypeError, match="missing a required argument: 'x'"):
        jt.function(lambda x: x).get_concrete_function()
    with pytest.raises(TypeError, match="missing a required argument: 'x'"):
        f.get_concrete_function(training=False)

    @jt.function(input_signature=[(SPEC, jt.TensorSpec([2], jt.int32))])
    def g(pair):
        return pair[0] + 1.0, pair[1] * 2

    cf = g.get_concrete_function()
    assert cf.structured_input_signature[0][0] == (SPEC, jt.TensorSpec((2,), jt.int32))
    out = cf((jt.ones([3]), jt.constant([1, 2])))
    np.testing.assert_array_equal(out[1].numpy(), [2, 4])


@pytest.mark.parametrize("dtype, value, want", [
    # what TF 2.21's tf.function does with each: numpy data is cast to the spec's dtype
    # whatever its own (astype: floats truncate into an int spec), Python numbers and
    # lists convert as tf.convert_to_tensor does
    (jt.float32, np.array([1.1, 2.0]), np.array([1.1, 2.0], np.float32)),
    (jt.int32, np.array([1, 2], np.int64), np.array([1, 2], np.int32)),
    (jt.int32, np.array([1.5, 2.0]), np.array([1, 2], np.int32)),
    (jt.float32, np.array([1, 2]), np.array([1.0, 2.0], np.float32)),
    (jt.float64, np.array([0.5], np.float32), np.array([0.5], np.float64)),
    (jt.bool, np.array([0.5, 0.0]), np.array([True, False])),
    (jt.float32, np.array([1.5], np.float16), np.array([1.5], np.float32)),
    (jt.float32, [1, 2.5], np.array([1.0, 2.5], np.float32)),
    (jt.float32, [True, False], np.array([1.0, 0.0], np.float32)),
    (jt.int32, [True, False], np.array([1, 0], np.int32)),
    (jt.float32, [jt.constant(1.0), 2.0], np.array([1.0, 2.0], np.float32)),
])
def test_input_signature_converts_numpy_data_and_python_values(dtype, value, want):
    f = jt.function(lambda x: x, input_signature=[jt.TensorSpec([None], dtype)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the retrace warning of many made functions
        out = f(value)
    assert out.dtype == dtype
    np.testing.assert_array_equal(out.numpy(), want)
    assert out.numpy().dtype == want.dtype


def test_input_signature_converts_scalars_and_nested_numpy():
    s = jt.function(lambda x: x * 3.0, input_signature=[jt.TensorSpec([], jt.float32)])
    # 2/3 as a float32 (TF: 0.6666666865348816), not a float64 refused
    assert s(2 / 3).numpy() == np.float32(2 / 3) * np.float32(3.0)
    assert s(np.float64(0.5)).numpy() == np.float32(1.5)
    assert s(np.int64(3)).numpy() == np.float32(9.0)
    assert s.experimental_get_tracing_count() == 1
    pair = jt.function(lambda t: (t[0] + 1.0, t[1] + 1), input_signature=[
        (jt.TensorSpec([None], jt.float32), jt.TensorSpec([None], jt.int32))])
    a, b = pair((np.array([1.0]), np.array([2])))
    assert (a.dtype, b.dtype) == (jt.float32, jt.int32) and int(b.numpy()[0]) == 3


@pytest.mark.parametrize("dtype, value, match", [
    # TF 2.21 refuses these (its messages: "Can not cast TensorSpec(shape=(1,),
    # dtype=tf.float64, name=None) to TensorSpec(shape=(None,), dtype=tf.float32,
    # name=None)", "Cannot convert 1.0 to EagerTensor of dtype int32", ...)
    (jt.float32, lambda: jt.constant([1.0], jt.float64),
     r"Can not cast TensorSpec\(shape=\(1,\), dtype=jt.float64, name=None\) to "
     r"TensorSpec\(shape=\(None,\), dtype=jt.float32.*jt.cast\(x, jt.float32\)"),
    (jt.float64, lambda: jt.constant([1.0]), "Can not cast .*dtype=jt.float32"),
    (jt.int32, lambda: jt.constant([1], jt.int64), "Can not cast .*dtype=jt.int64"),
    (jt.float32, lambda: jt.Variable([1.0], dtype=jt.float64, name="v"),
     "variable 'v.*keeps its dtype float64"),
    (jt.int32, lambda: [1.5, 2.0], r"Cannot convert \[1.5, 2.0\] to a tensor of dtype int32"),
    (jt.int32, lambda: [1.0], "Cannot convert .* dtype int32"),
    (jt.bool, lambda: [1], "Cannot convert .* dtype bool"),
    (jt.float32, lambda: np.array(["a"]), "numpy data of dtype <U1"),
    (jt.float32, lambda: [[1.0], [2.0, 3.0]], "cannot be converted"),
])
def test_input_signature_refuses_tensors_of_another_dtype_and_python_floats_for_ints(
        dtype, value, match):
    f = jt.function(lambda x: x, input_signature=[jt.TensorSpec([None], dtype)])
    with pytest.raises(TypeError, match=match) as e:
        f(value())
    assert "argument 0 does not fit the input_signature" in str(e.value)
    assert "test_function_semantics.py" in str(e.value)  # the user's line


def test_input_signature_checks_the_shape_after_converting():
    f = jt.function(lambda x: x, input_signature=[jt.TensorSpec([3], jt.float32)])
    with pytest.raises(TypeError, match=r"of shape \[2\] does not fit"):
        f(np.array([1.0, 2.0]))
    with pytest.raises(TypeError, match="jt.function"):
        jt.function(lambda x: x, input_signature=[jt.TensorSpec([], jt.int32)])(1.5)


# ---------------------------------------------------------------------------
# 5. positional and keyword forms of one argument are one signature


@pytest.mark.parametrize("backend", BACKENDS)
def test_positional_keyword_and_default_forms_trace_once(backend):
    @jt.function(backend=backend)
    def f(x, training=False):
        return x * 2.0 if training else x + 1.0

    x = jt.constant([1.0, 2.0])
    np.testing.assert_allclose(f(x, True).numpy(), [2.0, 4.0])
    np.testing.assert_allclose(f(x, training=True).numpy(), [2.0, 4.0])
    np.testing.assert_allclose(f(x=x, training=True).numpy(), [2.0, 4.0])
    info = f.cache_info()
    assert (info.traces, info.hits, info.misses) == (1, 2, 1)
    np.testing.assert_allclose(f(x).numpy(), [2.0, 3.0])
    np.testing.assert_allclose(f(x, False).numpy(), [2.0, 3.0])
    np.testing.assert_allclose(f(x, training=False).numpy(), [2.0, 3.0])
    info = f.cache_info()
    assert (info.traces, info.hits, info.misses) == (2, 4, 2)


def test_the_retrace_cause_names_the_bound_parameter(caplog, monkeypatch):
    monkeypatch.setenv("JITTAPE_LOG", "retrace")

    @jt.function
    def f(x, training=False):
        return x

    with caplog.at_level(logging.INFO, logger="jittape"):
        f(jt.constant(1.0))
        f(jt.constant(1.0), training=True)
    assert "argument 'training': Python bool False -> bool True" in caplog.text
    cf = f.get_concrete_function(jt.constant(1.0), True)
    assert f.cache_info().traces == 2
    assert cf.cause.startswith("new signature: argument 'training'")


def test_varargs_and_kwargs_functions_still_work():
    @jt.function
    def f(x, *rest, scale=1.0, **extra):
        out = x * scale
        for r in rest:
            out = out + r
        return out + extra.get("shift", 0.0)

    x = jt.constant(1.0)
    assert float(f(x, x, x, scale=2.0, shift=10.0)) == 14.0
    assert float(f(x, x, x, shift=10.0, scale=2.0)) == 14.0
    assert f.cache_info().traces == 1
    assert float(f(x)) == 1.0
    cf = f.get_concrete_function(x, jt.constant([1.0, 2.0]))
    assert "argument 'rest[0]'" in cf.cause, cf.cause
    with pytest.raises(TypeError):
        f()


def test_callables_without_an_inspectable_signature_fall_back():
    class Opaque:
        __signature__ = 1  # inspect.signature raises TypeError

        def __call__(self, x, k=2.0):
            return x * k

    f = jt.function(Opaque())
    assert float(f(jt.constant(1.5))) == 3.0
    assert float(f(jt.constant(1.5), k=3.0)) == 4.5
    assert f.cache_info().traces == 2


# ---------------------------------------------------------------------------
# 6. sets and weakrefs are not signature parts


def test_set_argument_raises_type_error_naming_it():
    @jt.function
    def f(x, s):
        return x

    with pytest.raises(TypeError, match="argument 's'.*hashable"):
        f(jt.constant(1.0), {1, 2})
    with pytest.raises(TypeError, match=r"argument 's\[0\]'"):
        f(jt.constant(1.0), [{1}])
    assert float(f(jt.constant(1.0), frozenset({1}))) == 1.0


def test_weakref_argument_raises_type_error_naming_it():
    @jt.function
    def f(x, r):
        return x

    class Obj:
        pass

    o = Obj()
    with pytest.raises(TypeError, match="argument 'r'.*weakref input"):
        f(jt.constant(1.0), weakref.ref(o))
    with pytest.raises(TypeError, match="weakref"):
        f(jt.constant(1.0), r=weakref.proxy(o))


# ---------------------------------------------------------------------------
# 7. a jt.function created repeatedly in a loop warns


def _g(x):
    return x + 1.0


def test_creating_a_function_in_a_loop_warns():
    x = jt.constant(1.0)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        for _ in range(10):
            jt.function(_g)(x)
    msgs = _retrace_warnings(rec)
    assert 1 <= len(msgs) <= 2, msgs
    assert all("_g" in m and "outside the loop" in m for m in msgs), msgs
    assert rec[0].category is UserWarning


def test_a_function_made_by_a_factory_in_a_loop_warns():
    def make():
        @jt.function
        def step(x):
            return x * 2.0
        return step

    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        for _ in range(10):
            make()(jt.constant(1.0))
    msgs = _retrace_warnings(rec)
    assert 1 <= len(msgs) <= 2 and "outside the loop" in msgs[0], msgs


def test_methods_of_a_few_instances_and_distinct_functions_do_not_warn():
    x = jt.constant(1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        class Local(_Scaler):
            @jt.function
            def __call__(self, x):
                return x * self.k

        objs = [Local(k) for k in range(3)]
        for _ in range(5):
            for o in objs:
                o(x)
        fs = [jt.function(eval(f"lambda x: x + {k}.0")) for k in range(8)]
        for f in fs:
            f(x)
            f(x)
