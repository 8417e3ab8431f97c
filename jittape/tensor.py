"""Tensors, variables and the one dispatch path every op call goes through.

``apply(op, *args, **attrs)`` converts the arguments, checks shapes and dtypes with
the op's ``infer`` rule (raising :class:`InvalidArgumentError` that names the op,
the shapes and the user's line), then either computes the result with the op's
numpy reference (eager) or appends a node to the current trace (symbolic). Eager
results are offered to every recording tape on this thread.
"""

from __future__ import annotations

import numbers

import numpy as np

from . import _state
from .dtypes import DType, as_dtype
from .errors import InvalidArgumentError, SymbolicTensorError, user_location
from .compiler.dims import Dim
from .compiler.ir import GraphBuilder, OpDef, Type, dtype_name, freeze_attrs, get_op, infer_types

# ---------------------------------------------------------------------------
# Shapes


class TensorShape(tuple):
    """A tuple of dims that also compares equal to lists, as ``tf.TensorShape`` does."""

    def __eq__(self, other):
        if isinstance(other, (list, tuple)):
            return tuple(self) == tuple(other)
        return NotImplemented

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = tuple.__hash__

    @property
    def rank(self) -> int:
        return len(self)

    def as_list(self) -> list:
        return list(self)


# ---------------------------------------------------------------------------
# Operators shared by Tensor and Variable


# the op catalogue, installed by ``jittape.ops`` when it loads (ops sit above tensors, as
# TF's math_ops install Tensor's operators): the operators below call through it
_OPS = []


def _ops():
    try:
        return _OPS[0]
    except IndexError:
        raise RuntimeError("jittape.ops is not loaded: `import jittape` first") from None


class _Operators:
    __slots__ = ()
    __array_priority__ = 100  # ndarray (op) Tensor defers to Tensor's reflected operator

    def __add__(self, o):
        return _ops().add(self, o)

    def __radd__(self, o):
        return _ops().add(o, self)

    def __sub__(self, o):
        return _ops().subtract(self, o)

    def __rsub__(self, o):
        return _ops().subtract(o, self)

    def __mul__(self, o):
        return _ops().multiply(self, o)

    def __rmul__(self, o):
        return _ops().multiply(o, self)

    def __truediv__(self, o):
        return _ops().divide(self, o)

    def __rtruediv__(self, o):
        return _ops().divide(o, self)

    def __floordiv__(self, o):
        return _ops().floordiv(self, o)

    def __rfloordiv__(self, o):
        return _ops().floordiv(o, self)

    def __mod__(self, o):
        return _ops().floormod(self, o)

    def __pow__(self, o):
        return _ops().pow(self, o)

    def __rpow__(self, o):
        return _ops().pow(o, self)

    def __matmul__(self, o):
        return _ops().matmul(self, o)

    def __rmatmul__(self, o):
        return _ops().matmul(o, self)

    def __neg__(self):
        return _ops().negative(self)

    def __pos__(self):
        return self

    def __abs__(self):
        return _ops().abs(self)

    def __lt__(self, o):
        return _ops().less(self, o)

    def __le__(self, o):
        return _ops().less_equal(self, o)

    def __gt__(self, o):
        return _ops().greater(self, o)

    def __ge__(self, o):
        return _ops().greater_equal(self, o)

    def __eq__(self, o):
        return _ops().equal(self, o)

    def __ne__(self, o):
        return _ops().not_equal(self, o)

    def __invert__(self):
        return _ops().logical_not(self)

    def __and__(self, o):
        return _ops().logical_and(self, o)

    def __or__(self, o):
        return _ops().logical_or(self, o)

    def __getitem__(self, key):
        return _ops().getitem(self, key)

    def __hash__(self):
        raise TypeError(
            f"{type(self).__name__} is unhashable (== is elementwise). Use tensor.ref() as a key."
        )

    def ref(self):
        """A hashable reference to this object (``tf.Tensor.ref``)."""
        return _Ref(self)

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a scalar tensor")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a scalar tensor")
        for i in range(self.shape[0]):
            yield self[i]


def _array_protocol(value: np.ndarray, dtype, copy) -> np.ndarray:
    """``__array__(dtype, copy)`` as numpy 2 calls it: ``copy=True`` always copies, ``None``
    copies only to convert, ``False`` never does (a conversion then raises numpy's
    ValueError, as a TF EagerTensor's does). The value stays read-only when shared."""
    return np.array(value, dtype=dtype, copy=copy)


class _Ref:
    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def deref(self):
        return self.obj

    def __hash__(self):
        return id(self.obj)

    def __eq__(self, other):
        return isinstance(other, _Ref) and other.obj is self.obj


# ---------------------------------------------------------------------------
# Tensor


class Tensor(_Operators):
    """An immutable value: an eager numpy array, or a symbolic value in a trace.

    Its ``_id`` is the value id the IR uses, so a tape's recorded node refers to
    the tensor itself; identity, not value, decides what a gradient source is.
    """

    __slots__ = ("_value", "_id", "_type", "_tracer", "__weakref__")

    def __init__(self, value=None, *, _type=None, _tracer=None, _id=None, _own=False):
        if value is not None:
            a = np.asarray(value)
            if a.flags.writeable:
                if not _own:  # never freeze (or alias) an array the caller still holds
                    a = a.copy()
                a.setflags(write=False)
            self._value = a
            # dispatch passes the type it already inferred (and checked against the array)
            self._type = _type if _type is not None else Type(a.shape, dtype_name(a.dtype))
        else:
            self._value = None
            self._type = _type
        self._tracer = _tracer
        self._id = _state.new_id() if _id is None else _id

    # -- properties ---------------------------------------------------------
    @property
    def shape(self) -> TensorShape:
        """The static shape: a size unknown while tracing (symbolic: None in an
        input_signature) is None, as in TF; ``jt.shape(t)`` gives it as a tensor."""
        ty = self._type
        if ty.symbolic:
            return TensorShape(None if isinstance(d, Dim) else d for d in ty.shape)
        return TensorShape(ty.shape)

    @property
    def dtype(self) -> DType:
        return as_dtype(self._type.dtype)

    @property
    def ndim(self) -> int:
        return self._type.rank

    @property
    def is_symbolic(self) -> bool:
        return self._value is None

    def _concrete(self, what):
        if self._value is None:
            _out_of_scope_check(self)
            raise TypeError(
                f"{what} needs a concrete value, but this tensor is symbolic "
                f"(it is being traced); use jittape ops instead"
            )
        return self._value

    def numpy(self) -> np.ndarray:
        """A copy of the value as a numpy array (a 0-d array for scalars, as TF gives a
        numpy scalar)."""
        v = self._value
        if v is None:
            raise _symbolic_numpy_error(self)
        if _state.local.tapes:
            _escaped(self, ".numpy()")
        return v.copy() if v.ndim else v[()]

    def __format__(self, spec):
        """``f"{loss:.3f}"``: a scalar tensor formats as its numpy value; an empty spec
        gives ``str(t)``; a spec on a non-scalar raises ``TypeError``, as in TF (numpy's
        ``ndarray.__format__`` does)."""
        if not spec:
            return str(self)
        v = self._value
        if v is None:
            _out_of_scope_check(self)
            raise TypeError(
                f"unsupported format string {spec!r} passed to a symbolic jt.Tensor "
                f"(shape {list(self.shape)}, dtype {self.dtype.name}): inside a jt.function "
                "its value is not known while the function is traced. Format it outside the "
                "function (return it from the function)" + _at(user_location()))
        if v.ndim:
            raise TypeError(
                f"unsupported format string {spec!r} passed to jt.Tensor.__format__ for a "
                f"tensor of shape {list(v.shape)}: only scalar tensors take a format spec "
                "(format an element, t[i], or use np.array2string(t.numpy(), ...))")
        if _state.local.tapes:
            _escaped(self, "format()")
        return format(v[()], spec)

    def __array__(self, dtype=None, copy=None):
        v = self._concrete("np.asarray(tensor)")
        if _state.local.tapes:
            _escaped(self, "numpy (np.asarray or an np.* function)")
        return _array_protocol(v, dtype, copy)

    def __float__(self):
        v = self._concrete("float()")
        if _state.local.tapes:
            _escaped(self, "float()")
        return float(v)

    def __int__(self):
        return int(self._concrete("int()"))

    def __index__(self):
        if not self.dtype.is_integer:
            raise TypeError("only integer scalar tensors can be used as an index")
        return int(self._concrete("index"))

    def __bool__(self):
        v = self._concrete("bool() (Python control flow on a tensor)")
        if v.size != 1:
            raise ValueError(
                f"The truth value of a tensor with shape {list(v.shape)} is ambiguous; "
                "use jt.reduce_any / jt.reduce_all"
            )
        return bool(v)

    def __repr__(self):
        if self._value is None:
            return f"<jt.Tensor symbolic %{self._id}: shape={self.shape}, dtype={self.dtype.name}>"
        body = _numpy_text(self._value, True)
        return f"<jt.Tensor: shape={self.shape}, dtype={self.dtype.name}, numpy={body}>"

    def __str__(self):
        """TF's ``str`` of a tensor: ``jt.Tensor([1 2], shape=(2,), dtype=int32)``."""
        if self._value is None:
            return repr(self)
        body = _numpy_text(self._value, False)
        return f"jt.Tensor({body}, shape={self.shape}, dtype={self.dtype.name})"


def _numpy_text(v: np.ndarray, is_repr: bool) -> str:
    """The value as TF's tensor ``repr`` and ``str`` show it (TF's ``_numpy_text``): numpy's
    ``repr`` (``array([0.6666667 , 0.33333334], dtype=float32)``; a scalar as the Python
    number it holds) or ``str``, on a line of its own when it takes several."""
    if v.ndim == 0:
        text = repr(v.item()) if is_repr else str(v[()])
    else:
        text = repr(v) if is_repr else str(v)
    return "\n" + text if "\n" in text else text


def _trace_name(tracer) -> str:
    b = getattr(tracer, "builder", None)
    name = getattr(b, "name", None) or "trace"
    if getattr(tracer, "traces_function", False):
        return f"the trace of jt.function {name!r}"
    return f"the {name!r} trace"


def _defined_at(t) -> str | None:
    """The user's ``file:line`` where the op that made symbolic ``t`` ran (if recorded)."""
    from .errors import format_loc

    b = getattr(t._tracer, "builder", None)
    if b is None:
        return None
    for n in reversed(b.nodes):
        if t._id in n.outputs:
            return n.loc if isinstance(n.loc, str) or n.loc is None else format_loc(n.loc)
    return None


def _out_of_scope(t) -> TypeError:
    where = _defined_at(t)
    made = f"; it was defined here: {where}" if where else ""
    if t._id in getattr(getattr(t._tracer, "builder", None), "inputs", ()):
        made = "; it is an input (an argument or a captured value) of that trace" + made
    used = user_location()
    return TypeError(
        f"{t!r} is out of scope and cannot be used here: it is a symbolic tensor of "
        f"{_trace_name(t._tracer)}, which is not being traced here (it ended, or runs on "
        f"another thread){made}. Use return values, explicit Python locals or jt.Variables "
        "(assign the value inside the function) to get values out of a jt.function"
        + (f" (used at {used})" if used else ""))


def _out_of_scope_check(t) -> None:
    """Raise the out-of-scope TypeError if symbolic ``t`` belongs to no trace being built
    on this thread (it leaked out of a finished ``jt.function`` trace)."""
    tr = t._tracer
    if tr is not None and tr not in _state.local.tracers:
        raise _out_of_scope(t)


def _symbolic_numpy_error(t) -> SymbolicTensorError:
    tr = t._tracer
    if tr is not None and tr not in _state.local.tracers:
        return SymbolicTensorError(
            f"'Tensor' object has no attribute 'numpy' (it is symbolic): {_out_of_scope(t)}")
    return SymbolicTensorError(
        "'Tensor' object has no attribute 'numpy' while it is symbolic: numpy() needs a "
        f"concrete value, but this tensor is symbolic (it is being traced by "
        f"{_trace_name(tr)}); use jittape ops instead, or return it from the function"
        + _at(user_location()))


def _escaped(t, how):
    """Tell the recording tapes that a value left jittape as a numpy array or number:
    what is computed from it later has no history (see jt.debugging.explain_gradient)."""
    for tape in _state.local.tapes:
        tape._on_escape(t, how)


# ---------------------------------------------------------------------------
# Variable


class Variable(_Operators):
    """Mutable state. Reads inside a tape are watched automatically when trainable.

    ``assign`` replaces the stored array (it never writes into it), so a value a
    tape has already recorded stays as it was.

    ``constraint`` (as tf.Variable's): ``None`` or a projection ``c(v) -> tensor`` of
    the variable's shape, which an optimizer applies (``v.assign(v.constraint(v))``)
    after each update of ``v``; kept as ``v.constraint``.
    """

    __slots__ = ("_value", "_id", "_uid", "_read_tensor", "trainable", "_name", "constraint",
                 "__weakref__")
    _count = 0

    def __init__(self, initial_value, trainable=True, name=None, dtype=None, constraint=None):
        if constraint is not None and not callable(constraint):
            raise ValueError(
                f"Variable: the `constraint` argument must be a callable, got {constraint!r}")
        self.constraint = constraint
        tracer = function_tracer()
        if tracer is not None:
            # inside ``jt.function``: the initial value is computed once, eagerly (TF
            # lifts variable initializers out of the function too)
            initial_value = tracer.initial_value(initial_value, dtype)
        if isinstance(initial_value, Variable):
            initial_value = initial_value.numpy()
        if callable(initial_value):
            initial_value = initial_value()
        t = convert_to_tensor(initial_value, dtype=dtype)
        if t._value is None:
            raise TypeError("a Variable needs a concrete initial value, not a symbolic tensor")
        self._value = t._value
        self._id = _state.new_id()  # the gradient source id; each read gets its own value id
        Variable._count += 1
        self._uid = Variable._count
        self._read_tensor = t
        self.trainable = bool(trainable)
        self._name = _state.name_scope_prefix() + (name or "Variable")  # as TF names it
        if tracer is not None:
            tracer.created(self)

    @property
    def name(self) -> str:
        return f"{self._name}:0"

    @property
    def _label(self) -> str:
        """TF's name, ``scope/x:0``: how the TF core's messages name a variable (a Keras
        variable's ``name`` is its short name, ``kernel``; this is its path plus ``:0``)."""
        return f"{self._name}:0"

    @property
    def shape(self) -> TensorShape:
        return TensorShape(self._value.shape)

    @property
    def dtype(self) -> DType:
        return as_dtype(self._value.dtype)

    @property
    def ndim(self):
        return self._value.ndim

    def read_value(self) -> Tensor:
        """The current value as a tensor (recorded on tapes that watch this variable).

        Each call gives a distinct tensor, as each of TF's reads does: a gradient with
        respect to one read counts that read only; one with respect to the variable sums
        over all its reads."""
        return self._read(True)

    def _read(self, fresh=False) -> Tensor:
        """A read of the current value. ``fresh``: a tensor of its own (``read_value``,
        ``convert_to_tensor``); otherwise the implicit read of an op's variable argument,
        one shared tensor per value (only the op sees it, so its identity does not
        matter; sharing keeps the common eager path cheap)."""
        tracer = function_tracer()
        if tracer is not None:
            t = tracer.read_variable(self)
            if fresh:  # an identity node gives this read its own value id in the trace
                (t,) = tracer.add(get_op("identity"), [t], {}, (t._type,))
        else:
            t = self._read_tensor
            if t is None:
                t = self._read_tensor = Tensor(self._value)
            if fresh:  # a new id sharing the (read-only) array and type: no copy
                r = Tensor.__new__(Tensor)
                r._value, r._type, r._tracer, r._id = t._value, t._type, None, _state.new_id()
                t = r
        for reads in _state.local.variable_reads:
            reads.append(self)
        for tape in _state.local.tapes:
            tape._on_variable_read(self, t)
        return t

    value = read_value

    def __format__(self, spec):
        """A scalar variable formats as its value (``f"{v:.3f}"``); see Tensor.__format__."""
        if not spec:
            return str(self)
        v = self._concrete(f"format spec {spec!r}")
        if v.ndim:
            raise TypeError(
                f"unsupported format string {spec!r} passed to jt.Variable.__format__ for "
                f"variable {self._label!r} of shape {list(v.shape)}: only scalars take a "
                "format spec")
        return format(v[()], spec)

    def _concrete(self, what) -> np.ndarray:
        if function_tracer() is not None:
            raise TypeError(
                f"{what} of variable {self._label!r} inside a jt.function: while the function "
                "is traced its value is symbolic (it is read when the compiled function "
                "runs); use jittape ops on the variable instead"
            )
        return self._value

    def numpy(self) -> np.ndarray:
        v = self._concrete("numpy()")
        if _state.local.tapes:
            _escaped(self, ".numpy()")
        return v.copy() if v.ndim else v[()]

    def __array__(self, dtype=None, copy=None):
        return _array_protocol(self._concrete("np.asarray()"), dtype, copy)

    def __float__(self):
        return float(self._concrete("float()"))

    def __int__(self):
        return int(self._concrete("int()"))

    def __bool__(self):
        return bool(self._concrete("bool() (Python control flow on a variable)"))

    def _new_value(self, value, what) -> np.ndarray:
        t = convert_to_tensor(value, dtype=self.dtype)
        a = t._concrete(f"Variable.{what}")
        if a.shape != self._value.shape:
            raise InvalidArgumentError(
                f"Variable.{what}: cannot assign a value of shape {list(a.shape)} to variable "
                f"{self._label!r} of shape {list(self._value.shape)}"
            )
        return a

    def _set(self, a: np.ndarray):
        a = np.array(a, dtype=self._value.dtype, copy=True)
        a.setflags(write=False)
        self._value = a
        self._read_tensor = None

    def assign(self, value, read_value=True):
        """Set the value. Returns the variable."""
        tracer = function_tracer()
        if tracer is not None:
            tracer.assign_variable(self, "assign", value)
            return self
        self._set(self._new_value(value, "assign"))
        return self

    def assign_add(self, delta, read_value=True):
        tracer = function_tracer()
        if tracer is not None:
            tracer.assign_variable(self, "assign_add", delta)
            return self
        self._set(self._value + self._new_value(delta, "assign_add"))
        return self

    def assign_sub(self, delta, read_value=True):
        tracer = function_tracer()
        if tracer is not None:
            tracer.assign_variable(self, "assign_sub", delta)
            return self
        self._set(self._value - self._new_value(delta, "assign_sub"))
        return self

    def __repr__(self):
        if function_tracer() is not None:
            return (f"<jt.Variable '{self._label}' shape={self.shape} "
                    f"dtype={self.dtype.name}, symbolic while traced>")
        body = _numpy_text(self._value, True)
        return (
            f"<jt.Variable '{self._label}' shape={self.shape} dtype={self.dtype.name}, "
            f"numpy={body}>"
        )


# ---------------------------------------------------------------------------
# Conversion


def _default_dtype(a: np.ndarray, pyvalue) -> np.dtype:
    """TF's defaults: Python floats are float32, Python ints int32."""
    if isinstance(pyvalue, np.ndarray) or isinstance(pyvalue, np.generic):
        return a.dtype
    if a.dtype == np.float64:
        return np.dtype(np.float32)
    if a.dtype == np.int64:
        if a.size and (a.max() > np.iinfo(np.int32).max or a.min() < np.iinfo(np.int32).min):
            return a.dtype
        return np.dtype(np.int32)
    return a.dtype


def convert_to_tensor(value, dtype=None) -> Tensor:
    """A Tensor from a Tensor, Variable, numpy array, Python number or nested list."""
    if isinstance(value, Tensor):
        if dtype is not None and value.dtype != as_dtype(dtype):
            raise InvalidArgumentError(
                f"Tensor conversion requested dtype {as_dtype(dtype).name} for a tensor of "
                f"dtype {value.dtype.name}"
            )
        return value
    if isinstance(value, Variable):
        if dtype is not None and value.dtype != as_dtype(dtype):
            raise InvalidArgumentError(
                f"Tensor conversion requested dtype {as_dtype(dtype).name} for variable "
                f"{value._label!r} of dtype {value.dtype.name}"
            )
        return value._read(True)  # a read of its own, as read_value()
    if isinstance(value, (list, tuple)) and any(isinstance(v, (Tensor, Variable)) for v in value):
        return _ops().stack([convert_to_tensor(v, dtype) for v in value])
    try:
        a = np.asarray(value)
    except Exception as e:
        raise TypeError(f"cannot convert {type(value).__name__} to a tensor: {e}") from None
    if a.dtype == object or a.dtype.kind in "USV":
        raise TypeError(f"cannot convert {type(value).__name__} of {a.dtype} to a tensor")
    if dtype is None:
        return Tensor(a.astype(_default_dtype(a, value), copy=False))
    want = as_dtype(dtype)._np
    if a.dtype != want:
        # an explicit dtype converts, as tf.constant does, but never drops a fraction
        if a.dtype.kind == "f" and want.kind in "iub" and not np.all(np.mod(a, 1) == 0):
            raise TypeError(
                f"Cannot convert {value!r} to a tensor of dtype {want.name}" + _at(user_location())
            )
        return Tensor(a.astype(want), _own=True)
    return Tensor(a)


def _at(loc):
    return f" (at {loc})" if loc else ""


def _is_python_scalar(v) -> bool:
    return isinstance(v, (numbers.Number, bool)) and not isinstance(v, (np.ndarray, np.generic))


def convert_args(args, like=None):
    """Convert op arguments. Values that are not tensors (Python numbers, lists, numpy
    arrays) take the dtype of the first tensor beside them, as in TF's operators
    (``x_f32 + np.float64(2)`` is float32), unless that would lose information (a float
    into an integer tensor raises). Tensors of different dtypes are never promoted."""
    ref = like
    if ref is None:
        for a in args:
            if isinstance(a, (Tensor, Variable)) and not a.dtype.is_bool:
                ref = a.dtype
                break
    out = []
    for a in args:
        if isinstance(a, (Tensor,)):
            out.append(a)
        elif isinstance(a, Variable):
            out.append(a._read())
        elif _is_python_scalar(a) and ref is not None and not isinstance(a, bool):
            if isinstance(a, float) and not ref.is_floating:
                raise TypeError(
                    f"Cannot convert {a!r} to a tensor of dtype {ref.name}" + _at(user_location())
                )
            out.append(_scalar_tensor(a, ref))
        elif ref is not None and not isinstance(a, bool):
            out.append(_convert_like(a, ref))
        else:
            out.append(convert_to_tensor(a))
    return out


def _convert_like(value, ref: DType) -> Tensor:
    try:
        a = np.asarray(value)
    except Exception as e:
        raise TypeError(f"cannot convert {type(value).__name__} to a tensor: {e}") from None
    kind = a.dtype.kind
    if kind == "b" or kind not in "iuf":
        return convert_to_tensor(value)  # bool masks stay bool; the op's rule decides
    if kind == "f" and not ref.is_floating:
        raise TypeError(
            f"Cannot convert a {a.dtype.name} value of shape {list(a.shape)} to a tensor of "
            f"dtype {ref.name} (it would truncate); cast it explicitly" + _at(user_location())
        )
    if kind in "iu" and ref.is_integer and a.size and not np.can_cast(a.dtype, ref._np):
        info = np.iinfo(ref._np)
        lo, hi = a.min(), a.max()
        if lo < info.min or hi > info.max:
            raise _out_of_range(lo if lo < info.min else hi, ref)
    return Tensor(a.astype(ref._np), _own=True)  # astype copied: the caller keeps theirs


def _out_of_range(v, ref: DType) -> TypeError:
    info = np.iinfo(ref._np)
    return TypeError(
        f"Cannot convert {v!r} to a tensor of dtype {ref.name}: it is out of the range of "
        f"{ref.name} [{info.min}, {info.max}] (TF would wrap it around silently). Cast the "
        f"tensor first, e.g. jt.cast(x, jt.float32) / {v!r} or jt.cast(x, jt.int32)"
        + _at(user_location()))  # astype copied: the caller keeps theirs


_scalar_cache: dict = {}
_literal_ids: set = set()  # ids of the tensors in _scalar_cache


def _scalar_tensor(v, dtype: DType) -> Tensor:
    """Small Python constants (1.0, 2, 0.5) are shared tensors: they recur in every VJP.
    A trace embeds them as ``const`` nodes, not inputs (see ``Tracer.capture``)."""
    key = (type(v), v, dtype.name)
    t = _scalar_cache.get(key)
    if t is None:
        try:
            a = np.asarray(v, dtype=dtype._np)
        except OverflowError:  # a Python int out of an integer dtype's range
            raise _out_of_range(v, dtype) from None
        t = Tensor(a, _own=True)
        if len(_scalar_cache) < 4096:
            _scalar_cache[key] = t
            _literal_ids.add(t._id)
    return t


# ---------------------------------------------------------------------------
# Symbolic tracing


class Tracer:
    """Builds a Graph from op calls on symbolic tensors.

    Concrete tensors that meet a symbolic one become graph inputs ("captures"),
    so the graph's structure does not depend on their values.
    """

    def __init__(self, name="trace", const_captures: bool = False):
        self.builder = GraphBuilder(name, new_id=_state.new_id)
        # small captures become ``const`` nodes (the passes can then fold them); only
        # right when their values are fixed by what keys the graph (see autodiff)
        self.const_captures = const_captures
        self.captures: dict = {}  # concrete tensor id -> (input id, ndarray)
        # value id -> what it is known to hold while tracing: the sizes ``jt.shape`` of a
        # tensor with symbolic sizes gives, and slices of them (so that
        # ``jt.reshape(x, [jt.shape(x)[0], -1])`` traces with the symbol)
        self.static: dict = {}
        self.literals: dict = {}  # Python-literal tensor id -> const node value id

    def placeholder(self, type_: Type, name=None) -> Tensor:
        vid = self.builder.add_input(type_, name)
        return Tensor(_type=type_, _tracer=self, _id=vid)

    def capture(self, t: Tensor) -> int:
        """The graph value for a concrete tensor: a ``const`` node for a Python literal
        (part of the program's structure), else an input fed with its array."""
        if t._value is None:  # a symbolic tensor of another trace (it leaked out of it)
            raise _out_of_scope(t)
        small = self.const_captures and t._type.size is not None and t._type.size <= 16
        if small or t._id in _literal_ids:
            vid = self.literals.get(t._id)
            if vid is None:
                from .compiler.ir import Const

                (vid,) = self.builder.add_node(_const_op(), (), {"value": Const(t._value)})
                self.literals[t._id] = vid
            return vid
        hit = self.captures.get(t._id)
        if hit is None:
            vid = self.builder.add_input(t._type, f"capture{len(self.captures)}")
            hit = self.captures[t._id] = (vid, t._value)
        return hit[0]

    def add(self, op: OpDef, ins, attrs: dict, types, loc=None):
        ids = [t._id if t._tracer is self else self.capture(t) for t in ins]
        outs = self.builder.add_node(op, ids, attrs, loc=loc, types=types)
        return [Tensor(_type=ty, _tracer=self, _id=o) for o, ty in zip(outs, types)]

    def __enter__(self):
        _state.local.tracers.append(self)
        return self

    def __exit__(self, *exc):
        _state.local.tracers.remove(self)


def function_tracer():
    """The ``jt.function`` trace being built on this thread, if any (the innermost
    tracer, when it traces a function: a backward graph's tracer is not one)."""
    tracers = _state.local.tracers
    if tracers:
        t = tracers[-1]
        if getattr(t, "traces_function", False):
            return t
    return None


def _const_op():
    return _ops().REGISTRY["const"]


# ---------------------------------------------------------------------------
# Dispatch

_config = {"check_numerics": False}


def _describe(types) -> str:
    return ", ".join(str(t) for t in types)


def apply(op: OpDef, *args, **attrs):
    """Run ``op`` on ``args`` eagerly, or add it to the trace that owns a symbolic input.

    Returns one Tensor, or a tuple when the op has several outputs.
    """
    ins = convert_args(args)
    frozen = dict(freeze_attrs(attrs))
    in_types = [t._type for t in ins]
    try:
        types = infer_types(op, in_types, frozen)
    except (ValueError, IndexError, TypeError) as e:
        raise InvalidArgumentError(
            f"{op.name}: {e} [inputs: {_describe(in_types)}]"
        ) from None
    tracer = next((t._tracer for t in ins if t._tracer is not None), None)
    if tracer is None and not ins and _state.local.tracers:
        tracer = _state.local.tracers[-1]  # a constant-making op joins the active trace
    if tracer is not None:
        if tracer not in _state.local.tracers:  # a tensor leaked out of a finished trace
            raise _out_of_scope(next(t for t in ins if t._tracer is tracer))
        outs = tracer.add(op, ins, frozen, types, loc=None)
    else:
        res = op.forward(*[t._value for t in ins], **frozen)
        res = res if op.nout > 1 else (res,)
        outs = []
        for r, ty in zip(res, types):
            r = np.asarray(r)
            if dtype_name(r.dtype) != ty.dtype:
                r = r.astype(ty.dtype)
            if r.shape != ty.shape:
                raise AssertionError(
                    f"op {op.name}: reference gave shape {r.shape}, infer said {ty}"
                )
            outs.append(Tensor(r, _own=True, _type=ty))
        if _config["check_numerics"]:
            _check_outputs(op, outs)
    if _state.local.tapes:
        for tape in _state.local.tapes:
            tape._record(op, frozen, ins, outs)
    if (_config["check_numerics"] and tracer is not None and op.name != "check_numerics"
            and getattr(tracer, "traces_function", False) and not _state.local.grad_of):
        # a traced function's forward op: the check goes into the graph, right after it
        outs = [_traced_check(op, t) if t._type.is_float else t for t in outs]
    return tuple(outs) if op.nout > 1 else outs[0]


def _phase() -> str:
    """Where an op runs, for numerics messages: the forward pass, or the backward pass
    inside the VJP rule of a recorded op (named with its line)."""
    from .errors import at

    grad_of = _state.local.grad_of
    if not grad_of:
        return "in the forward pass"
    n = grad_of[-1]
    return f"in the backward pass, in the gradient of {n.op.name}{at(n.loc)}"


def _traced_check(op, t):
    loc = user_location(3)
    where = f" (at {loc})" if loc else ""
    return apply(get_op("check_numerics"), t, auto=True,
                 message=f"check_numerics: op {op.name} {_phase()}{where}")


def _check_outputs(op, outs):
    for t in outs:
        if t._type.is_float:
            v = t._value
            if not np.isfinite(v).all():
                kind = _nan_inf(v)
                raise InvalidArgumentError(
                    f"check_numerics: op {op.name} produced {kind} values {_phase()} "
                    f"[output {t._type}]"
                )


def _nan_inf(v) -> str:
    has_nan = bool(np.isnan(v).any())
    has_inf = bool(np.isinf(v).any())
    return "Inf and NaN" if has_nan and has_inf else ("NaN" if has_nan else "Inf")
