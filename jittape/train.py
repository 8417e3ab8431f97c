"""``jt.train``: object-based checkpoints (``tf.train.Checkpoint``, ``CheckpointManager``).

A checkpoint saves the variables reachable from the objects given to it, each under the
path of attribute names that leads to it (``model/layer-0/kernel``,
``optimizer/iterations``, ``step``); an optimizer's slot variables are saved under the
path of the variable they belong to (``optimizer/.slots/model/layer-0/kernel/m``). So
a checkpoint restores into any program that builds the same structure, whatever its
layers' generated names: ``dense_7`` or ``dense``, it is ``layer-0`` of ``model``.

Restoring a variable that does not exist yet (a layer built on its first call, an
optimizer slot made at the first ``apply_gradients``) is deferred, as TF defers it: the
value is assigned when the variable is created. A variable whose checkpointed shape or
dtype differs, or an existing variable that the checkpoint lacks inside an object it
does hold, is an error naming the first such path.

Files: ``<prefix>-<n>.jtckpt`` (a numpy ``.npz`` archive: one array per path) and, for
``save`` and the manager, a ``checkpoint`` text file in the directory naming the latest
(TF's state file). Each file is written to a temporary file, flushed to disk and renamed,
so a crash or a full disk during a save leaves the previous checkpoint whole.
"""

from __future__ import annotations

import io
import os
import re
import weakref

import numpy as np

from . import _files
from .tensor import Tensor, Variable

__all__ = ["Checkpoint", "CheckpointManager", "latest_checkpoint"]

_SUFFIX = ".jtckpt"
_STATE = "checkpoint"
_SLOTS = ".slots"


# ---------------------------------------------------------------------------
# The object graph


def _is_trackable(obj) -> bool:
    """Objects whose variables a checkpoint follows: layers, modules, optimizers,
    metrics, checkpoints (anything with ``variables`` that is not a tensor)."""
    if isinstance(obj, (Variable, Tensor, np.ndarray, type)):
        return False
    try:
        return hasattr(type(obj), "variables") or "variables" in getattr(obj, "__dict__", {})
    except Exception:  # noqa: BLE001 - a property that raises: not trackable
        return False


def _children(obj) -> list:
    """``(name, child)`` pairs of one object, in a stable order.

    An object that defines ``_checkpoint_children()`` says what it holds (a layer: its
    own weights, then its attributes; a ``Sequential``: its layers; an optimizer: its
    variables that are not slots), as TF's ``Trackable._trackable_children`` does; any
    other object is followed through its attributes."""
    if isinstance(obj, (Checkpoint, _Roots)):
        return list(obj._objects.items())
    if isinstance(obj, (list, tuple, dict)):  # a container given to the Checkpoint
        out = []
        for k, v in (obj.items() if isinstance(obj, dict) else enumerate(obj)):
            out += _values(str(k), v)
        return out
    own = getattr(type(obj), "_checkpoint_children", None)
    if own is not None:
        return own(obj)
    return _attribute_children(obj)


def _attribute_children(obj, skip=()) -> list:
    """``(name, child)`` pairs of ``obj``'s attributes that a checkpoint follows
    (variables, trackable objects, and lists and dicts of them), in attribute order;
    names in ``skip`` are left out (an object's own bookkeeping)."""
    out = []
    for k, v in vars(obj).items():
        if k.startswith("__") or k in skip:
            continue
        out += _values(k, v)
    return out


def _values(name, v) -> list:
    if isinstance(v, Variable) or _is_trackable(v):
        return [(name, v)]
    if isinstance(v, (list, tuple)):
        out = []
        for i, x in enumerate(v):
            out += _values(f"{name}/{i}", x)
        return out
    if isinstance(v, dict):
        out = []
        for k, x in v.items():
            if isinstance(k, str):
                out += _values(f"{name}/{k}", x)
        return out
    return []


def _walk(root):
    """``(variables, objects, slots)``: path -> Variable, path -> trackable object, and
    ``(optimizer path, optimizer)`` pairs, each object visited once (the first path to
    it wins, as in TF's object graph). An object whose class sets
    ``_checkpoint_has_slots`` (an optimizer) has its ``_slots`` saved too, under the
    paths of their variables."""
    variables: dict = {}
    objects: dict = {}
    optimizers: list = []
    seen: set = set()
    stack = [("", root)]
    while stack:
        path, obj = stack.pop(0)  # breadth first: the shortest path names an object
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, Variable):
            variables[path] = obj
            continue
        objects[path] = obj
        if getattr(type(obj), "_checkpoint_has_slots", False):
            optimizers.append((path, obj))
        for name, child in _children(obj):
            stack.append((f"{path}/{name}" if path else name, child))
    return variables, objects, optimizers


def _slot_paths(variables: dict, optimizers: list) -> dict:
    """path -> slot variable of each optimizer, keyed by the path of its variable."""
    where = {id(v): p for p, v in variables.items()}
    out = {}
    for opath, opt in optimizers:
        for ref, slots in opt._slots.items():
            vpath = where.get(id(ref.deref()))
            if vpath is None:
                continue
            for sname, s in slots.items():
                out[f"{opath}/{_SLOTS}/{vpath}/{sname}"] = s
    return out


def _graph(root) -> tuple:
    """``(variables, objects)``: path -> Variable (optimizer slots included) and path ->
    trackable object, from one walk."""
    variables, objects, optimizers = _walk(root)
    variables.update(_slot_paths(variables, optimizers))
    return variables, objects


def _all_variables(root) -> dict:
    return _graph(root)[0]


# ---------------------------------------------------------------------------
# Deferred restores

_PENDING: list = []  # _Restore objects with values not assigned yet


def _assign(v: Variable, value: np.ndarray, path: str) -> None:
    want = (tuple(v.shape), v.dtype.name)
    have = (tuple(value.shape), value.dtype.name)
    if want != have:
        raise ValueError(
            f"checkpoint value {path!r} has shape {list(have[0])} and dtype {have[1]}, but "
            f"variable {v._label!r} there has shape {list(want[0])} and dtype {want[1]}: the "
            "checkpoint was written by a program of another structure")
    v._set(value)  # directly, not an assign op: a restore inside a trace is no step


def restore_deferred() -> None:
    """Assign the values waiting for variables that exist now (called when a layer is
    built and when an optimizer makes a slot variable)."""
    for r in list(_PENDING):
        r._resolve()


class _Restore:
    """A restore in progress: the checkpoint's values not assigned yet."""

    def __init__(self, ckpt, values: dict, path: str):
        # the objects, not the Checkpoint: a restore waits for its variables even when
        # the Checkpoint object is gone, as long as the objects live (weakly held)
        self.refs = {k: _weak(v) for k, v in ckpt._objects.items()}
        self.path = path
        self.pending = dict(values)
        self.matched: set = set()

    def root(self):
        """The objects restored into, as a root of the object graph (None: all gone)."""
        objs = {k: r() for k, r in self.refs.items()}
        objs = {k: v for k, v in objs.items() if v is not None}
        return _Roots(objs) if objs else None

    def _resolve(self, strict=False):
        root = self.root()
        if root is None or not self.pending:
            if self in _PENDING:
                _PENDING.remove(self)
            return
        variables, objects = _graph(root)
        for p in sorted(set(self.pending) & set(variables)):
            _assign(variables[p], self.pending.pop(p), p)
            self.matched.add(p)
        if strict:
            self._check_structure(variables, objects)
        if self.pending and self not in _PENDING:
            _PENDING.append(self)
        elif not self.pending and self in _PENDING:
            _PENDING.remove(self)

    def _check_structure(self, variables: dict, objects: dict):
        """Fail on an existing variable the checkpoint lacks inside an object whose other
        variables it holds (another structure, not a variable made later)."""
        saved = self.matched | set(self.pending)
        for p, v in variables.items():
            if p in saved or f"/{_SLOTS}/" in p:
                continue
            parent = p.rsplit("/", 1)[0] if "/" in p else ""
            siblings = [q for q in saved if q.startswith(parent + "/")] if parent else saved
            if siblings:
                near = min(siblings, key=lambda q: _distance(p, q))
                raise ValueError(
                    f"checkpoint {self.path!r} has no value for variable {v._label!r} at "
                    f"{p!r} (it holds {near!r} near it): it was written by a program of "
                    "another structure")
        for p in sorted(self.pending):
            if f"/{_SLOTS}/" in p:
                continue
            parent = p.rsplit("/", 1)[0] if "/" in p else ""
            obj = objects.get(parent)
            if hasattr(type(obj), "_checkpoint_children"):
                # a layer or an optimizer: an unbuilt one makes its variables later
                built = getattr(obj, "built", True)
            else:
                built = obj is not None
            if obj is not None and built and not isinstance(obj, (Checkpoint, _Roots)):
                raise ValueError(
                    f"checkpoint {self.path!r} holds {p!r}, but {type(obj).__name__} at "
                    f"{parent!r} has no such variable: it was written by a program of another "
                    "structure")


def _weak(obj):
    try:
        return weakref.ref(obj)
    except TypeError:  # lists, dicts: held as they are
        return lambda: obj


class _Roots:
    """The top of an object graph: named objects (a Checkpoint's, or a restore's)."""

    def __init__(self, objects: dict):
        self._objects = objects


def _distance(a: str, b: str) -> int:
    pa, pb = a.split("/"), b.split("/")
    common = 0
    for x, y in zip(pa, pb):
        if x != y:
            break
        common += 1
    return len(pa) + len(pb) - 2 * common


class LoadStatus:
    """What ``restore`` returns (TF's ``CheckpointLoadStatus``)."""

    def __init__(self, restore: _Restore):
        self._r = restore

    def assert_consumed(self):
        """Raise unless every value in the checkpoint was assigned to a variable."""
        self._r._resolve()
        if self._r.pending:
            first = sorted(self._r.pending)[0]
            raise AssertionError(
                f"checkpoint {self._r.path!r}: {len(self._r.pending)} value(s) not matched "
                f"to a variable yet, the first {first!r}")
        return self

    def assert_existing_objects_matched(self):
        """Raise unless every variable that exists now got a value."""
        root = self._r.root()
        missing = [p for p in _all_variables(root) if p not in self._r.matched
                   and not p.startswith("save_counter")]
        if missing:
            raise AssertionError(
                f"checkpoint {self._r.path!r} has no value for {missing[0]!r} "
                f"({len(missing)} variable(s) unmatched)")
        return self

    def assert_nontrivial_match(self):
        if not self._r.matched - {"save_counter"}:
            raise AssertionError(f"checkpoint {self._r.path!r} matched no variable")
        return self

    def expect_partial(self):
        """Silence the checks for values never matched (TF's spelling)."""
        return self

    def run_restore_ops(self, session=None):
        return None


# ---------------------------------------------------------------------------
# Checkpoint


class Checkpoint:
    """``tf.train.Checkpoint(model=..., optimizer=..., step=...)``: saves and restores
    the variables of the objects given by keyword."""

    def __init__(self, root=None, **kwargs):
        if root is not None:
            kwargs = {"root": root, **kwargs}
        for k, v in kwargs.items():
            if not (isinstance(v, Variable) or _is_trackable(v) or isinstance(v, (list, dict))):
                raise ValueError(
                    f"jt.train.Checkpoint: {k}={type(v).__name__} is not something a "
                    "checkpoint can track (a Variable, layer, model, module, optimizer or "
                    "metric)")
        self._objects = dict(kwargs)
        self.save_counter = Variable(np.int64(0), trainable=False, name="save_counter")
        self._objects["save_counter"] = self.save_counter

    @property
    def variables(self) -> list:
        return list(_all_variables(self).values())

    def __getattr__(self, name):
        objs = self.__dict__.get("_objects")
        if objs is not None and name in objs:
            return objs[name]
        raise AttributeError(f"Checkpoint has no attribute {name!r}")

    # -- writing ---------------------------------------------------------------------
    def _archive(self) -> bytes:
        values = {}
        for p, v in _all_variables(self).items():
            values[p] = np.asarray(v._value)
        buf = io.BytesIO()
        np.savez(buf, **values)
        return buf.getvalue()

    def write(self, file_prefix, options=None) -> str:
        """Write the checkpoint to ``file_prefix`` (no counter, no state file)."""
        path = os.fspath(file_prefix)
        d = os.path.dirname(path)
        if d:
            os.makedirs(d, exist_ok=True)
        _files.write_atomic(path + _SUFFIX, self._archive(), durable=True)
        return path

    def _count_save(self) -> int:
        """The save counter, incremented: the number of the save being made."""
        self.save_counter._set(self.save_counter._value + 1)
        return int(self.save_counter._value)

    def save(self, file_prefix, options=None) -> str:
        """Write ``<file_prefix>-<n>`` (``n``: the save counter, counted from 1) and name
        it the latest in the directory's ``checkpoint`` file; returns the path."""
        path = f"{os.fspath(file_prefix)}-{self._count_save()}"
        self.write(path)
        d = os.path.dirname(path) or "."
        state = _read_state(d)
        paths = [p for p in state[1] if p != path] + [path]
        _write_state(d, path, paths)
        return path

    # -- reading ---------------------------------------------------------------------
    def read(self, save_path, options=None) -> LoadStatus:
        """Restore from ``save_path`` (what ``write`` or ``save`` returned)."""
        return self.restore(save_path)

    def restore(self, save_path, options=None) -> LoadStatus:
        """Assign the checkpoint's values to the variables at their paths; values for
        variables not created yet are assigned when they are. ``None`` restores nothing
        (TF's behaviour when ``latest_checkpoint`` found none)."""
        if save_path is None:
            return LoadStatus(_Restore(self, {}, "<none>"))
        path = os.fspath(save_path)
        file = path if path.endswith(_SUFFIX) else path + _SUFFIX
        if not os.path.exists(file):
            raise FileNotFoundError(
                f"jt.train.Checkpoint.restore: no checkpoint at {path!r} (looked for "
                f"{file!r})")
        try:
            with np.load(file, allow_pickle=False) as z:
                values = {k: z[k] for k in z.files}
        except Exception as e:  # noqa: BLE001 - name the file whatever numpy says
            raise ValueError(f"jt.train.Checkpoint.restore: {file!r} is not a readable "
                             f"checkpoint ({type(e).__name__}: {e})") from None
        mine = {id(v) for v in self._objects.values()}
        for r in list(_PENDING):  # a newer restore of the same objects replaces it
            if {id(f()) for f in r.refs.values()} == mine:
                _PENDING.remove(r)
        r = _Restore(self, values, path)
        r._resolve(strict=True)
        return LoadStatus(r)


# ---------------------------------------------------------------------------
# The state file and the manager


def _state_path(directory) -> str:
    return os.path.join(os.fspath(directory), _STATE)


def _read_state(directory) -> tuple:
    """(latest path or None, all paths) from the directory's state file."""
    try:
        with open(_state_path(directory), encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return None, []
    latest = re.search(r'^model_checkpoint_path: "(.*)"$', text, re.M)
    paths = re.findall(r'^all_model_checkpoint_paths: "(.*)"$', text, re.M)
    d = os.fspath(directory)

    def full(p):
        return p if os.path.isabs(p) else os.path.join(d, p)

    return (full(latest.group(1)) if latest else None), [full(p) for p in paths]


def _write_state(directory, latest, paths) -> None:
    d = os.fspath(directory)

    def rel(p):
        return os.path.relpath(p, d) if not os.path.isabs(p) or p.startswith(
            os.path.abspath(d)) else p

    lines = [f'model_checkpoint_path: "{rel(latest)}"']
    lines += [f'all_model_checkpoint_paths: "{rel(p)}"' for p in paths]
    _files.write_atomic(_state_path(d), "\n".join(lines) + "\n", durable=True)


def latest_checkpoint(checkpoint_dir, latest_filename=None):
    """The path of the latest checkpoint in ``checkpoint_dir``, or None."""
    latest, _ = _read_state(checkpoint_dir)
    if latest is None or not os.path.exists(latest + _SUFFIX):
        return None
    return latest


class CheckpointManager:
    """``tf.train.CheckpointManager``: numbered saves in ``directory``, keeping the last
    ``max_to_keep`` (None: all)."""

    def __init__(self, checkpoint, directory, max_to_keep, checkpoint_name="ckpt",
                 step_counter=None, checkpoint_interval=None, init_fn=None):
        if not isinstance(checkpoint, Checkpoint):
            raise TypeError("jt.train.CheckpointManager needs a jt.train.Checkpoint, got "
                            f"{type(checkpoint).__name__}")
        if max_to_keep is not None and int(max_to_keep) < 1:
            raise ValueError(f"CheckpointManager: max_to_keep must be at least 1 or None, "
                             f"got {max_to_keep}")
        self._checkpoint = checkpoint
        self.directory = os.fspath(directory)
        self.max_to_keep = None if max_to_keep is None else int(max_to_keep)
        self._prefix = os.path.join(self.directory, checkpoint_name)
        self._step_counter = step_counter
        self._interval = checkpoint_interval
        self._last_step = None
        os.makedirs(self.directory, exist_ok=True)
        _, paths = _read_state(self.directory)
        self._paths = [p for p in paths if os.path.exists(p + _SUFFIX)]
        self._init_fn = init_fn

    @property
    def checkpoints(self) -> list:
        return list(self._paths)

    @property
    def latest_checkpoint(self):
        return self._paths[-1] if self._paths else None

    @property
    def checkpoint(self):
        return self._checkpoint

    def restore_or_initialize(self):
        if self.latest_checkpoint is not None:
            self._checkpoint.restore(self.latest_checkpoint)
            return self.latest_checkpoint
        if self._init_fn is not None:
            self._init_fn()
        return None

    def save(self, checkpoint_number=None, check_interval=True, options=None):
        """Save ``<directory>/<name>-<n>``; ``n`` is ``checkpoint_number`` or the
        checkpoint's save counter. Older ones beyond ``max_to_keep`` are deleted after
        the new one and the state file are written."""
        if self._interval is not None and check_interval and self._step_counter is not None:
            step = int(np.asarray(self._step_counter))
            if self._last_step is not None and step < self._last_step + self._interval:
                return None
            self._last_step = step
        ck = self._checkpoint
        n = ck._count_save() if checkpoint_number is None else int(np.asarray(checkpoint_number))
        path = f"{self._prefix}-{n}"
        ck.write(path)
        paths = [p for p in self._paths if p != path] + [path]
        drop = []
        if self.max_to_keep is not None and len(paths) > self.max_to_keep:
            drop, paths = paths[:-self.max_to_keep], paths[-self.max_to_keep:]
        _write_state(self.directory, path, paths)
        self._paths = paths
        for p in drop:
            try:
                os.unlink(p + _SUFFIX)
            except OSError:
                pass
        return path
