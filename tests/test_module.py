"""jt.Module and jt.name_scope: tf.Module's tracking and TF 2's eager variable names
(the expectations are what TF 2.21 prints; tests/test_vs_tensorflow_metrics.py compares
against tf.Module directly)."""

import numpy as np
import pytest

import jittape as jt


class Dense(jt.Module):
    def __init__(self, n_in, n_out, name=None):
        super().__init__(name=name)
        self.w = jt.Variable(np.full((n_in, n_out), 0.5, np.float32), name="w")
        self.b = jt.Variable(np.zeros(n_out, np.float32), name="b")

    def __call__(self, x):
        return x @ self.w + self.b


def test_default_name_is_snake_case_and_not_unique():
    class HTTPServerModule(jt.Module):
        pass

    assert HTTPServerModule().name == "http_server_module"
    assert Dense(1, 1).name == Dense(1, 1).name == "dense"
    assert jt.Module().name == "module"
    assert Dense(1, 1, name="first").name == "first"


@pytest.mark.parametrize("bad", ["bad name", "1abc", "a.b", "a/b"])
def test_invalid_module_name(bad):
    with pytest.raises(ValueError, match="is not a valid module name"):
        jt.Module(name=bad)


def test_name_scope_variable_names():
    with jt.name_scope("outer") as scope:
        assert scope == "outer/"
        assert jt.Variable(1.0, name="v").name == "outer/v:0"
        with jt.name_scope("inner"):
            assert jt.Variable(1.0).name == "outer/inner/Variable:0"
        with jt.name_scope("inner"):  # eager scopes are not made unique
            assert jt.Variable(1.0, name="v").name == "outer/inner/v:0"
        with jt.name_scope("top/"):  # a trailing "/" is the whole scope
            assert jt.Variable(1.0, name="v").name == "top/v:0"
        with jt.name_scope(""):
            assert jt.Variable(1.0, name="v").name == "v:0"
    assert jt.Variable(1.0, name="a/b").name == "a/b:0"
    with pytest.raises(ValueError, match="name for name_scope must be a string"):
        jt.name_scope(None)


def test_module_scope_and_with_name_scope():
    class MyModule(jt.Module):
        def __init__(self):
            super().__init__()
            self.w = jt.Variable(1.0, name="w")  # __init__ is not in the module's scope
            with jt.name_scope("dense"):
                self.k = jt.Variable(2.0, name="k")
            with self.name_scope:
                self.z = jt.Variable(2.0, name="z")

        @jt.Module.with_name_scope
        def make(self):
            """Docstring kept."""
            self.m = jt.Variable(3.0, name="m")
            with jt.name_scope("dense"):
                self.d = jt.Variable(3.0, name="d")
            return self.m

    m = MyModule()
    assert (m.name, m.name_scope.name) == ("my_module", "my_module/")
    assert (m.w.name, m.k.name, m.z.name) == ("w:0", "dense/k:0", "my_module/z:0")
    m.make()
    assert (m.m.name, m.d.name) == ("my_module/m:0", "my_module/dense/d:0")
    assert MyModule.make.__doc__ == "Docstring kept."
    with jt.name_scope("outer"):
        inner = MyModule()
    assert inner.z.name == "outer/my_module/z:0"
    assert inner.name_scope.name == "outer/my_module/"
    inner.make()  # the scope is fixed at creation
    assert inner.m.name == "outer/my_module/m:0"


class Inner(jt.Module):
    def __init__(self, name=None):
        super().__init__(name=name)
        self.v = jt.Variable(1.0, name=f"{name}_v")
        self.frozen = jt.Variable(1.0, name=f"{name}_f", trainable=False)


def test_tracking_order_nesting_and_dedup():
    top = jt.Module(name="top")
    top.b = Inner("b")
    top.a = Inner("a")
    top.lst = [Inner("l0"), {"k": Inner("d0"), "a": Inner("d1")}]
    top.a.child = Inner("a_child")
    top.b.child = Inner("b_child")
    top.t = (jt.Variable(5.0, name="tv"),)
    top.c = jt.Variable(5.0, name="cv")
    top.again = [top.c, top.a]  # seen once
    # the module's own leaves in attribute order (dicts by key), then each submodule's,
    # depth first (a's child before b): what tf.Module does, whatever its docstring says
    assert [s.name for s in top.submodules] == ["a", "b", "l0", "d1", "d0", "a_child",
                                                "b_child"]
    names = [v.name for v in top.variables]
    assert names[:2] == ["cv:0", "tv:0"]
    assert names[2:8] == ["a_f:0", "a_v:0", "a_child_f:0", "a_child_v:0", "b_f:0", "b_v:0"]
    assert names[8:10] == ["b_child_f:0", "b_child_v:0"]
    assert names[-2:] == ["d0_f:0", "d0_v:0"]
    assert len(names) == len(set(names)) == 2 + 2 * 7
    assert all(v.trainable for v in top.trainable_variables)
    assert [v.name for v in top.non_trainable_variables][0] == "a_f:0"
    assert isinstance(top.variables, tuple)


def test_cycles_terminate():
    a, b = jt.Module(name="a"), jt.Module(name="b")
    a.b, b.a = b, a
    a.v = jt.Variable(1.0, name="av")
    b.v = jt.Variable(1.0, name="bv")
    assert [s.name for s in a.submodules] == ["b"]
    assert [v.name for v in a.variables] == ["av:0", "bv:0"]


def test_layer_is_a_module():
    model = jt.Sequential([jt.layers.Dense(3), jt.layers.Dense(1)])
    model(np.ones((2, 4), np.float32))
    assert isinstance(model, jt.Module)
    assert [s.name for s in model.submodules][:2] == [model.layers[0].name,
                                                      model.layers[1].name]
    holder = jt.Module(name="holder")
    holder.net = model
    # a module lists a layer's weights in the layer's own order (kernel, then bias)
    assert [v.name for v in holder.variables] == [v.name for v in model.variables]
    model.layers[1].trainable = False
    assert len(holder.trainable_variables) == 2


def test_function_method_traces_per_instance():
    class Net(Dense):
        @jt.function
        def step(self, x):
            self.b.assign_add(jt.reduce_sum(x, axis=0)[:2])
            return x @ self.w + self.b

    n1, n2 = Net(3, 2), Net(3, 2)
    n2.w.assign(np.full((3, 2), 2.0, np.float32))
    x = jt.constant(np.ones((1, 3), np.float32))
    for _ in range(3):
        y1, y2 = n1.step(x), n2.step(x)
    # each instance compiled once with its own variables
    assert n1.step.cache_info().traces == 1 and n2.step.cache_info().traces == 1
    np.testing.assert_allclose(n1.b.numpy(), [3.0, 3.0])
    np.testing.assert_allclose(n2.b.numpy(), [3.0, 3.0])
    np.testing.assert_allclose(y1.numpy(), [[1.5 + 3.0] * 2])
    np.testing.assert_allclose(y2.numpy(), [[6.0 + 3.0] * 2])


def test_variables_inside_function_get_the_scope():
    class Lazy(jt.Module):
        @jt.function
        @jt.Module.with_name_scope
        def __call__(self, x):
            if not hasattr(self, "w"):
                self.w = jt.Variable(jt.ones([3]), name="w")
            return x * self.w

    m = Lazy(name="lazy")
    m(jt.constant([1.0, 2.0, 3.0]))
    assert m.w.name == "lazy/w:0"
    assert [v.name for v in m.variables] == ["lazy/w:0"]
