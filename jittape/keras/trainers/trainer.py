"""``compile``/``fit``/``evaluate``/``predict`` for ``jt.keras.Model`` and ``Sequential``
(Keras 3's trainer, on ``@jt.function`` steps).

``fit`` runs ``train_step(data)`` wrapped in one ``jt.function`` per model, so full
batches share one trace and compiled program (a smaller last batch adds one more);
``evaluate`` and ``predict`` do the same with ``test_step`` and ``predict_step``. A
subclass that overrides ``train_step(self, data)`` gets it compiled and driven by
``fit`` in the same way, as in Keras 3. ``compile(run_eagerly=True)`` runs the steps
eagerly (for debugging).

The logs follow Keras 3: ``loss`` is the mean of the batch losses weighted by the batch
sizes, over the epoch so far; then the compiled metrics; then, with several losses,
``<output>_loss`` for each; then the metrics a model holds as attributes.
"""

from __future__ import annotations

import numbers
import sys
import warnings

import numpy as np

from ... import nest
from .data_adapter import pack_x_y_sample_weight, unpack_x_y_sample_weight  # noqa: F401
from ...tensor import Tensor, Variable, convert_to_tensor

__all__ = ["Trainer"]


def _map(fn, s):
    if isinstance(s, dict):
        return {k: _map(fn, v) for k, v in s.items()}
    if isinstance(s, (list, tuple)):
        return type(s)(_map(fn, v) for v in s)
    return fn(s)


def _pythonify(logs):
    """Metric results as Python floats (arrays of more than one value as numpy)."""
    out = {}
    for k, v in logs.items():
        a = np.asarray(v.numpy() if isinstance(v, (Tensor, Variable)) else v)
        out[k] = float(a) if a.size == 1 else a
    return out


class _BatchLogs(dict):
    """A batch's logs for the callbacks: the step's metric results, turned into Python
    floats when a callback first reads them (most batches, nobody does)."""

    def __init__(self, results):
        super().__init__()
        self._results = results  # a dict of tensors, or a function that returns one
        self._lazy = callable(results)
        self._done = False

    def _results_now(self):
        if callable(self._results):
            self._results = self._results()
        return self._results

    _jt_lazy_logs = True  # the callbacks take these logs as they are

    def _fill(self):
        if not self._done:
            self._done = True
            values = _pythonify(self._results_now())
            dict.update(self, {k: values[k] for k in sorted(values)})  # Keras' order

    def __getitem__(self, k):
        self._fill()
        return dict.__getitem__(self, k)

    def __iter__(self):
        self._fill()
        return dict.__iter__(self)

    def __len__(self):
        self._fill()
        return dict.__len__(self)

    def __contains__(self, k):
        self._fill()
        return dict.__contains__(self, k)

    def __repr__(self):
        self._fill()
        return dict.__repr__(self)

    def __eq__(self, other):
        self._fill()
        return dict.__eq__(self, other)

    __hash__ = None

    def get(self, k, default=None):
        self._fill()
        return dict.get(self, k, default)

    def keys(self):
        self._fill()
        return dict.keys(self)

    def values(self):
        self._fill()
        return dict.values(self)

    def items(self):
        self._fill()
        return dict.items(self)

    def copy(self):
        self._fill()
        return dict(self)


# ---------------------------------------------------------------------------
# compiled losses and metrics


def _names_of(model, y_pred):
    """Names for the outputs: the functional model's output layers, dict keys, or
    ``output_<i>``."""
    flat = nest.flatten(y_pred)
    if isinstance(y_pred, dict):
        return sorted(y_pred)
    names = getattr(model, "output_names", None) or []
    if len(names) == len(flat):
        return list(names)
    return [f"output_{i}" for i in range(len(flat))] if len(flat) > 1 else ["output"]


def _per_output(spec, names, what):
    """A per-output list from a user's single value, list (in output order) or dict
    (keyed by output name)."""
    if isinstance(spec, dict):
        unknown = sorted(set(spec) - set(names))
        if unknown:
            raise ValueError(f"compile: unknown output name(s) {unknown} in the `{what}` dict; "
                             f"the model's outputs are {names}")
        return [spec.get(n) for n in names]
    if isinstance(spec, (list, tuple)) and len(names) > 1:
        if len(spec) != len(names):
            raise ValueError(f"compile: `{what}` has {len(spec)} entries but the model has "
                             f"{len(names)} outputs ({names})")
        return list(spec)
    return [spec] * len(names) if what == "loss" else [spec] + [None] * (len(names) - 1)


def _flat_targets(y_true, y_pred, names):
    flat_pred = nest.flatten(y_pred)
    if isinstance(y_true, dict) and not isinstance(y_pred, dict):
        missing = [n for n in names if n not in y_true]
        if missing:
            raise ValueError(f"the targets dict has no entries for output(s) {missing}; its "
                             f"keys are {sorted(y_true)}")
        return [y_true[n] for n in names]
    flat_true = nest.flatten(y_true) if isinstance(y_true, (list, tuple, dict)) else [y_true]
    if len(flat_true) != len(flat_pred):
        raise ValueError(f"the model has {len(flat_pred)} outputs ({names}) but "
                         f"{len(flat_true)} targets were given")
    return flat_true


def _flat_parts(y_true, y_pred, sample_weight, names):
    """Targets, predictions and sample weights as three lists in output order (one
    array of sample weights serves every output)."""
    flat_pred = nest.flatten(y_pred)
    flat_sw = (nest.flatten(sample_weight) if isinstance(sample_weight, (list, dict))
               else [sample_weight] * len(flat_pred))
    return _flat_targets(y_true, y_pred, names), flat_pred, flat_sw


class _CompileLoss:
    """The losses given to ``compile``, one per output, with their weights."""

    def __init__(self, model, loss, loss_weights):
        self._model, self._user, self._weights = model, loss, loss_weights
        self.built = False
        self.metrics = []

    def build(self, y_true, y_pred):
        from .. import losses as _losses
        from ..metrics import Mean

        names = _names_of(self._model, y_pred)
        self.names = names
        user = self._user
        if not isinstance(user, (list, tuple, dict)) and len(names) > 1:
            user = [user] * len(names)
        specs = _per_output(user, names, "loss")
        weights = self._weights
        if weights is None:
            weights = [None] * len(names)
        elif isinstance(weights, numbers.Real):
            weights = [float(weights)] * len(names)
        else:
            weights = _per_output(weights, names, "loss_weights")
        self.fns = []
        for spec in specs:
            fn = None if spec is None else _losses.get(spec)
            if fn is not None and not isinstance(fn, _losses.Loss):
                # a per-sample function ("mse", or the user's): weighted and reduced over
                # the batch, as Keras wraps it
                fn = _losses.LossFunctionWrapper(fn)
            self.fns.append(fn)
        if all(f is None for f in self.fns):
            raise ValueError("compile: every entry of `loss` is None")
        self.weights = weights
        used = [n for n, f in zip(names, self.fns) if f is not None]
        self.metrics = [Mean(name=f"{n}_loss") for n in used] if len(used) > 1 else []
        self.built = True

    def __call__(self, y_true, y_pred, sample_weight=None):
        if not self.built:
            self.build(y_true, y_pred)
        flat_true, flat_pred, flat_sw = _flat_parts(y_true, y_pred, sample_weight, self.names)
        total = None
        trackers = iter(self.metrics)
        for fn, w, yt, yp, sw in zip(self.fns, self.weights, flat_true, flat_pred, flat_sw):
            if fn is None:
                continue
            value = fn(yt, yp, sample_weight=sw) if sw is not None else fn(yt, yp)
            if self.metrics:
                next(trackers).update_state(value, sample_weight=_batch_size(yp))
            if w is not None:
                value = value * float(w)
            total = value if total is None else total + value
        return total


def _batch_size(t):
    shape = t._type.shape if isinstance(t, Tensor) else np.shape(t)
    return shape[0] if len(shape) else 1


def _resolve_metric(identifier, y_true, y_pred, prefix):
    from .. import metrics as _metrics

    if isinstance(identifier, str) and identifier.lower() in ("accuracy", "acc"):
        yt_shape, yp_shape = tuple(y_true.shape), tuple(y_pred.shape)
        binary = yp_shape[-1:] == (1,)
        sparse = len(yt_shape) < len(yp_shape) or (yt_shape[-1:] == (1,) and yp_shape[-1:] != (1,))
        cls = (_metrics.BinaryAccuracy if binary else
               _metrics.SparseCategoricalAccuracy if sparse else _metrics.CategoricalAccuracy)
        m = cls(name=identifier)
    else:
        m = _metrics.get(identifier)
        if not isinstance(m, _metrics.Metric):
            fn = m
            m = _metrics.MeanMetricWrapper(fn, name=getattr(fn, "__name__", "metric"))
    name = identifier if isinstance(identifier, str) else m.name
    if prefix:
        name = f"{prefix}_{name}"
    if m.name != name:
        m._name = name
    return m


class _CompileMetrics:
    """The ``metrics`` and ``weighted_metrics`` given to ``compile``, per output; the
    weighted ones receive the sample weights."""

    def __init__(self, model, metrics, weighted_metrics):
        self._model = model
        self._user = metrics, weighted_metrics
        self.built = False
        self.metrics = []

    def build(self, y_true, y_pred):
        names = _names_of(self._model, y_pred)
        self.names = names
        flat_pred = nest.flatten(y_pred)
        flat_true = _flat_targets(y_true, y_pred, names)
        multi = len(names) > 1
        self.entries = []  # (metric, output index, weighted)
        for user, weighted in zip(self._user, (False, True)):
            if user is None:
                continue
            if multi and isinstance(user, (list, tuple)) and all(
                isinstance(u, (list, tuple)) or u is None for u in user
            ):
                per = _per_output(list(user), names, "metrics")
            elif isinstance(user, dict):
                per = _per_output(user, names, "metrics")
            elif multi:
                per = [user] * len(names)
            else:
                per = [user]
            for i, spec in enumerate(per):
                if spec is None:
                    continue
                for ident in (spec if isinstance(spec, (list, tuple)) else [spec]):
                    prefix = names[i] if multi else None
                    if weighted and prefix is None and any(
                        e[0].name == ident for e in self.entries if isinstance(ident, str)
                    ):
                        prefix = "weighted"
                    m = _resolve_metric(ident, flat_true[i], flat_pred[i], prefix)
                    if prefix == "weighted":
                        # Keras' metric keeps its own name (its log key alone is
                        # prefixed), which is how evaluate's list orders it
                        m._listed_as = m.name[len("weighted_"):]
                    self.entries.append((m, i, weighted))
        self.metrics = [e[0] for e in self.entries]
        self.built = True

    def update_state(self, y_true, y_pred, sample_weight=None):
        if not self.built:
            self.build(y_true, y_pred)
        flat_true, flat_pred, flat_sw = _flat_parts(y_true, y_pred, sample_weight, self.names)
        for m, i, weighted in self.entries:
            sw = flat_sw[i] if weighted else None
            if sw is None:
                m.update_state(flat_true[i], flat_pred[i])
            else:
                m.update_state(flat_true[i], flat_pred[i], sample_weight=sw)


# ---------------------------------------------------------------------------
# the trainer


class Trainer:
    """Mixed into ``Model`` and ``Sequential``: Keras 3's training API."""

    def __init__(self):
        d = self.__dict__
        d["optimizer"] = None
        d["loss"] = None
        d["compiled"] = False
        d["stop_training"] = False
        d["history"] = None
        d["_compile_loss"] = None
        d["_compile_metrics"] = None
        d["_loss_tracker"] = None
        d["_run_eagerly"] = False
        d["_steps"] = {}
        d.setdefault("_tracked_metrics", [])

    # -- compile --------------------------------------------------------------------------
    def compile(self, optimizer="rmsprop", loss=None, loss_weights=None, metrics=None,
                weighted_metrics=None, run_eagerly=False, steps_per_execution=1,
                jit_compile="auto", auto_scale_loss=True):
        """Configure training: the optimizer (an instance or a name like ``"adam"``),
        the loss (per output: a list or a dict keyed by output name), ``loss_weights``,
        ``metrics`` (``"accuracy"`` picks binary, categorical or sparse categorical
        accuracy from the shapes, as Keras does) and ``weighted_metrics``.

        The steps are compiled (``jt.function``) unless ``run_eagerly=True``;
        ``jit_compile`` is accepted for Keras compatibility (jittape always compiles
        the steps to Numba kernels when not eager).
        """
        from .. import optimizers as _optimizers
        from ..metrics import Mean

        if isinstance(steps_per_execution, bool) or not isinstance(
            steps_per_execution, numbers.Integral
        ) or steps_per_execution < 1:
            raise ValueError(f"compile: steps_per_execution must be a positive int, got "
                             f"{steps_per_execution!r}")
        if loss_weights is not None and not isinstance(
            loss_weights, (numbers.Real, list, tuple, dict)
        ):
            raise ValueError(
                "Expected `loss_weights` argument to be a float (single output case) or a "
                f"list, tuple, or dict (multiple output case). Received instead: "
                f"loss_weights={loss_weights!r} of type {type(loss_weights)}")
        from ..distribution import active as _active_strategy

        d = self.__dict__
        d["optimizer"] = _optimizers.get(optimizer)
        strategy = d["_distribute"] = _active_strategy()  # jt.distributed.DataParallel
        if strategy is not None:
            d["optimizer"] = strategy.wrap_optimizer(d["optimizer"])
        d["loss"] = loss
        d["_compile_loss"] = None if loss is None else _CompileLoss(self, loss, loss_weights)
        d["_compile_metrics"] = (None if metrics is None and weighted_metrics is None
                                 else _CompileMetrics(self, metrics, weighted_metrics))
        d["_loss_tracker"] = Mean(name="loss")
        d["_run_eagerly"] = bool(run_eagerly)
        d["_jit_compile"] = jit_compile
        d["steps_per_execution"] = int(steps_per_execution)
        d["_steps"] = {}
        d["_prepared"] = {}
        d["compiled"] = True

    @property
    def distribute_strategy(self):
        """The ``jt.distributed.DataParallel`` this model was compiled under, or None."""
        return self.__dict__.get("_distribute")

    @property
    def run_eagerly(self):
        return self.__dict__.get("_run_eagerly", False)

    @run_eagerly.setter
    def run_eagerly(self, value):
        self.__dict__["_run_eagerly"] = bool(value)
        self.__dict__["_steps"] = {}

    def _assert_compiled(self, what):
        if not self.__dict__.get("compiled"):
            raise ValueError(f"You must call `compile()` before using the model ({what}).")

    # -- metrics --------------------------------------------------------------------------
    @property
    def metrics(self) -> list:
        """The loss tracker, the compiled metrics, the per-output loss trackers, then
        the metrics held as attributes (of this model and of its layers)."""
        out = []
        d = self.__dict__
        if d.get("compiled"):
            if d["_loss_tracker"] is not None:
                out.append(d["_loss_tracker"])
            if d["_compile_metrics"] is not None:
                out.extend(d["_compile_metrics"].metrics)
            if d["_compile_loss"] is not None:
                out.extend(d["_compile_loss"].metrics)
        seen = {id(m) for m in out}
        for m in d.get("_tracked_metrics", []):
            if id(m) not in seen:
                seen.add(id(m))
                out.append(m)
        for layer in getattr(self, "_sublayers", []):
            if isinstance(layer, Trainer):
                continue
            for m in layer.__dict__.get("_tracked_metrics", []):
                if id(m) not in seen:
                    seen.add(id(m))
                    out.append(m)
        return out

    @property
    def metrics_names(self) -> list:
        return [m.name for m in self.metrics]

    @property
    def metrics_variables(self) -> list:
        return [v for m in self.metrics for v in m.variables]

    def reset_metrics(self):
        for m in self.metrics:
            m.reset_state()

    def get_metrics_result(self) -> dict:
        """``{name: result}`` of ``metrics`` (tensors)."""
        out = {}
        for m in self.metrics:
            r = m.result()
            if isinstance(r, dict):
                out.update(r)
            else:
                out[m.name] = r
        return out

    # -- the steps --------------------------------------------------------------------------
    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """The compiled loss plus the model's regularization losses (``losses``)."""
        from ... import ops as _ops

        parts = []
        cl = self.__dict__.get("_compile_loss")
        if cl is not None:
            value = cl(y, y_pred, sample_weight)
            if value is not None:
                parts.append(value)
        for extra in getattr(self, "losses", None) or []:
            extra = extra if isinstance(extra, Tensor) else convert_to_tensor(extra)
            if not extra.dtype.is_floating:
                extra = _ops.cast(extra, "float32")
            parts.append(_ops.reduce_sum(extra))
        if not parts:
            raise ValueError("No loss to compute. Provide a `loss` argument in `compile()`.")
        total = parts[0]
        for p in parts[1:]:
            total = total + p
        return total

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        """Update the compiled metrics; return ``get_metrics_result()``."""
        cm = self.__dict__.get("_compile_metrics")
        if cm is not None:
            cm.update_state(y, y_pred, sample_weight)
        return self.get_metrics_result()

    def _call_training(self, x, training):
        return self(x, training=training)

    def train_step(self, data):
        """One step of ``fit``: forward under a tape, loss, gradients, update; returns
        the metric results. Override it for a custom step (Keras 3's contract)."""
        from ...tape import GradientTape

        x, y, sample_weight = unpack_x_y_sample_weight(data)
        with GradientTape() as tape:
            y_pred = self._call_training(x, True)
            loss = self._compute_loss_compat(x, y, y_pred, sample_weight, True)
        self._loss_tracker.update_state(loss, sample_weight=_batch_size(nest.flatten(x)[0]))
        weights = self.trainable_variables
        if weights:
            scaled = loss
            scale = getattr(self.optimizer, "scale_loss", None)
            if scale is not None:
                scaled = scale(loss)
            grads = tape.gradient(scaled, weights)
            self.optimizer.apply_gradients(zip(grads, weights))
        else:
            warnings.warn("The model does not have any trainable weights.", stacklevel=2)
        return self.compute_metrics(x, y, y_pred, sample_weight=sample_weight)

    def test_step(self, data):
        """One step of ``evaluate``: forward, loss and metrics."""
        x, y, sample_weight = unpack_x_y_sample_weight(data)
        y_pred = self._call_training(x, False)
        loss = self._compute_loss_compat(x, y, y_pred, sample_weight, False)
        self._loss_tracker.update_state(loss, sample_weight=_batch_size(nest.flatten(x)[0]))
        return self.compute_metrics(x, y, y_pred, sample_weight=sample_weight)

    def predict_step(self, data):
        """One step of ``predict``: the model's outputs."""
        x, _, _ = unpack_x_y_sample_weight(data)
        return self._call_training(x, False)

    def _compute_loss_compat(self, x, y, y_pred, sample_weight, training):
        import inspect

        try:
            takes = "training" in inspect.signature(self.compute_loss).parameters
        except (TypeError, ValueError):
            takes = False
        if takes:
            return self.compute_loss(x, y, y_pred, sample_weight, training=training)
        return self.compute_loss(x, y, y_pred, sample_weight)

    def _quiet_train_step(self, *data):
        """``train_step`` without its return value, for ``fit`` when neither
        ``train_step`` nor ``compute_metrics`` is overridden: the batch logs are then
        the metrics' results read when a callback asks (no extra outputs per step). The
        batch's parts come as separate arguments (a cheaper call than one tuple)."""
        self.train_step(data)

    def _quiet_test_step(self, *data):
        self.test_step(data)

    def _quiet(self, kind) -> bool:
        cls = type(self)
        return kind in ("train", "test") and getattr(cls, f"{kind}_step") is getattr(
            Trainer, f"{kind}_step") and cls.compute_metrics is Trainer.compute_metrics

    def _run_step(self, kind, batch):
        """Run a step of ``fit``/``evaluate``; the batch logs (read lazily)."""
        fn = self._step(kind)
        out = fn(*batch) if self.__dict__["_quiet_steps"].get(kind) else fn(batch)
        return _BatchLogs(self.get_metrics_result if out is None else out)

    def _step(self, kind):
        """The (compiled) step function of ``kind``: "train", "test" or "predict"."""
        steps = self.__dict__.setdefault("_steps", {})
        fn = steps.get(kind)
        if fn is None:
            quiet = self._quiet(kind)
            self.__dict__.setdefault("_quiet_steps", {})[kind] = quiet
            method = getattr(self, f"_quiet_{kind}_step" if quiet else f"{kind}_step")
            if self.run_eagerly:
                fn = method
            else:
                from ...function import Function
                from ...function.binding import _WeakMethod

                # one Function per model, holding the model weakly; each model is meant
                # to trace its own steps, so new models are not "created in a loop"
                fn = Function(_WeakMethod(method.__func__, self),
                              name=f"{type(self).__name__}.{method.__name__}")
                fn._detect_loops = False
            steps[kind] = fn
        return fn

    def make_train_function(self, force=False):
        if force:
            self.__dict__.setdefault("_steps", {}).pop("train", None)
        return self._step("train")

    def make_test_function(self, force=False):
        if force:
            self.__dict__.setdefault("_steps", {}).pop("test", None)
        return self._step("test")

    def make_predict_function(self, force=False):
        if force:
            self.__dict__.setdefault("_steps", {}).pop("predict", None)
        return self._step("predict")

    @property
    def train_function(self):
        return self.__dict__.get("_steps", {}).get("train")

    @property
    def test_function(self):
        return self.__dict__.get("_steps", {}).get("test")

    @property
    def predict_function(self):
        return self.__dict__.get("_steps", {}).get("predict")

    def _prepare(self, batch, training):
        """Before the first step: build the model, the compiled losses and metrics and
        the optimizer's slots eagerly from one batch, so the traced step creates no
        state."""
        from ..keras_tensor import isolated

        if self.__dict__.get("_prepared", {}).get(training):
            return  # done for this compile (new variables get slots on their first update)
        x, y, sw = unpack_x_y_sample_weight(batch)
        cl, cm = self.__dict__.get("_compile_loss"), self.__dict__.get("_compile_metrics")
        need_pred = not self.built or (y is not None and (
            (cl is not None and not cl.built) or (cm is not None and not cm.built)))
        if need_pred:
            with isolated():
                y_pred = self(x, training=False)
                if y is not None and cl is not None and not cl.built:
                    cl.build(y, y_pred)
                if y is not None and cm is not None and not cm.built:
                    cm.build(y, y_pred)
        if training and self.optimizer is not None and self.trainable_variables:
            self.optimizer.build(self.trainable_variables)
        self.__dict__.setdefault("_prepared", {})[training] = True

    # -- fit / evaluate / predict ------------------------------------------------------------
    def fit(self, x=None, y=None, batch_size=None, epochs=1, verbose="auto", callbacks=None,
            validation_split=0.0, validation_data=None, shuffle=True, class_weight=None,
            sample_weight=None, initial_epoch=0, steps_per_epoch=None, validation_steps=None,
            validation_batch_size=None, validation_freq=1):
        """Train for ``epochs`` epochs on arrays (``x``, ``y``, ``sample_weight``) or a
        ``jt.data.Dataset`` / iterable of ``(x, y[, sample_weight])`` batches; returns the
        ``History``. See Keras' ``Model.fit``."""
        from .data_adapter import make_adapter, split_validation

        self._assert_compiled("fit")
        if validation_split and validation_data is None:
            (x, y, sample_weight), validation_data = split_validation(
                x, y, sample_weight, validation_split)
        data = make_adapter(x, y, sample_weight, batch_size=batch_size, shuffle=shuffle,
                            class_weight=class_weight, steps=steps_per_epoch, what="fit")
        strategy = self.__dict__.get("_distribute")
        if strategy is not None:
            data = strategy.shard(data, "fit")
        val = None
        if validation_data is not None:
            vx, vy, vsw = unpack_x_y_sample_weight(validation_data) if isinstance(
                validation_data, (tuple, list)) else (validation_data, None, None)
            val = make_adapter(vx, vy, vsw, batch_size=validation_batch_size or batch_size,
                               shuffle=False, steps=validation_steps, what="validation_data")
            if strategy is not None:
                val = strategy.shard(val, "validation_data")
        verbose = 1 if verbose == "auto" else int(verbose)
        if strategy is not None:
            verbose, callbacks = strategy.verbose(verbose), strategy.callbacks(callbacks)
        cbs = _callback_list(self, callbacks, add_history=True, verbose=verbose,
                             epochs=epochs, steps=data.steps)
        self.stop_training = False
        train = None
        cbs.on_train_begin()
        logs = {}
        epoch_logs = {}
        for epoch in range(initial_epoch, epochs):
            self.reset_metrics()
            cbs.on_epoch_begin(epoch)
            logs = {}
            # batch hooks only when a callback overrides one (the loop is the hot path)
            hooks = _has_batch_hooks(cbs, "train")
            for step, batch in enumerate(data.epoch(epoch)):
                if train is None:
                    self._prepare(batch, training=True)
                    if strategy is not None:
                        strategy.start(self)  # rank 0's weights and optimizer state
                    train = self._step("train")
                    spread = self.__dict__["_quiet_steps"]["train"]
                if hooks:
                    cbs.on_train_batch_begin(step)
                out = train(*batch) if spread else train(batch)
                if hooks:
                    logs = _BatchLogs(self.get_metrics_result if out is None else out)
                    cbs.on_train_batch_end(step, logs)
                    if sys.getrefcount(logs) > 2:  # a callback kept the logs: fix them
                        logs._fill()
                if self.stop_training:
                    break
            if train is not None and not hooks:
                logs = _BatchLogs(self.get_metrics_result if out is None else out)
            if train is None:
                raise ValueError("fit: the training data is empty (no batch was produced)")
            if strategy is not None:
                strategy.sum_metrics(self)  # the job's loss and metrics, on every rank
            epoch_logs = self._epoch_logs(logs)
            if val is not None and _validates(epoch, validation_freq):
                val_logs = self._evaluate_adapter(val, cbs=None)
                epoch_logs.update({f"val_{k}": v for k, v in val_logs.items()})
            cbs.on_epoch_end(epoch, epoch_logs)
            if self.stop_training:
                break
        cbs.on_train_end(epoch_logs)
        return self.history

    def _epoch_logs(self, logs):
        """The metrics' results, or the last step's logs when a custom step returned
        other keys (Keras 3's rule)."""
        results = _pythonify(self.get_metrics_result())
        if isinstance(logs, _BatchLogs) and logs._lazy:
            return results  # the quiet step's logs are these results
        if isinstance(logs, dict) and set(logs) != set(results):
            return _pythonify(dict(logs.items()) if not isinstance(logs, _BatchLogs)
                              else logs._results_now())
        return results

    def _evaluate_adapter(self, data, cbs):
        self.reset_metrics()
        test = None
        logs = {}
        for step, batch in enumerate(data.epoch(0)):
            if test is None:
                self._prepare(batch, training=False)
                test = self._step("test")
            if cbs is not None:
                cbs.on_test_batch_begin(step)
            logs = self._run_step("test", batch)
            if cbs is not None:
                cbs.on_test_batch_end(step, logs)
                if sys.getrefcount(logs) > 2:
                    logs._fill()
        if test is None:
            raise ValueError("evaluate: the data is empty (no batch was produced)")
        strategy = self.__dict__.get("_distribute")
        if strategy is not None:
            strategy.sum_metrics(self)
        return self._epoch_logs(logs)

    def evaluate(self, x=None, y=None, batch_size=None, verbose="auto", sample_weight=None,
                 steps=None, callbacks=None, return_dict=False):
        """The loss and metrics on the data (metrics reset first): a scalar, a list in
        ``metrics_names`` order, or a dict with ``return_dict=True``."""
        from .data_adapter import make_adapter

        self._assert_compiled("evaluate")
        data = make_adapter(x, y, sample_weight, batch_size=batch_size, shuffle=False,
                            steps=steps, what="evaluate")
        strategy = self.__dict__.get("_distribute")
        if strategy is not None:
            data = strategy.shard(data, "evaluate")
            verbose, callbacks = strategy.verbose(verbose), strategy.callbacks(callbacks)
        verbose = 1 if verbose == "auto" else int(verbose)
        cbs = _callback_list(self, callbacks, add_history=False, verbose=verbose, epochs=1,
                             steps=data.steps)
        cbs.on_test_begin()
        logs = self._evaluate_adapter(data, cbs)
        cbs.on_test_end(logs)
        if return_dict:
            return logs
        return self._flatten_logs(logs)

    def _flatten_logs(self, logs):
        """``logs`` as a list in Keras 3's order: the metrics in ``metrics`` order (a
        multi-output model's prefixed compiled metrics excepted), then the remaining keys
        sorted; one value alone is returned as is."""
        cm = self.__dict__.get("_compile_metrics")
        prefixed = set()
        if cm is not None and cm.built and len(cm.names) > 1:
            prefixed = {id(m) for m in cm.metrics}
        # a weighted metric named like an unweighted one is listed under that name (so
        # its value comes twice, then again as weighted_<name>), as Keras 3's
        # _flatten_metrics_in_order gives it
        names = [getattr(m, "_listed_as", m.name) for m in self.metrics
                 if id(m) not in prefixed]
        values = [logs[n] for n in names if n in logs]
        values += [logs[k] for k in sorted(logs) if k not in names]
        return values[0] if len(values) == 1 else values

    def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None):
        """The model's outputs on ``x``, batch by batch (compiled), as numpy arrays in the
        outputs' structure."""
        from .data_adapter import make_adapter

        data = make_adapter(x, None, None, batch_size=batch_size, shuffle=False, steps=steps,
                            what="predict")
        verbose = 1 if verbose == "auto" else int(verbose)
        cbs = _callback_list(self, callbacks, add_history=False, verbose=verbose, epochs=1,
                             steps=data.steps)
        cbs.on_predict_begin()
        pred = None
        chunks = []
        for step, batch in enumerate(data.epoch(0)):
            if pred is None:
                self._prepare(batch, training=False)
                pred = self._step("predict")
            cbs.on_predict_batch_begin(step)
            out = pred(batch)
            flat = [np.asarray(t.numpy() if isinstance(t, (Tensor, Variable)) else t)
                    for t in nest.flatten(out)]
            chunks.append((out, flat))
            cbs.on_predict_batch_end(step, {"outputs": out})
        cbs.on_predict_end()
        if not chunks:
            raise ValueError("predict: the data is empty (no batch was produced)")
        structure = chunks[0][0]
        joined = [np.concatenate([c[1][i] for c in chunks]) for i in range(len(chunks[0][1]))]
        return nest.pack_sequence_as(structure, joined) if isinstance(
            structure, (list, tuple, dict)) else joined[0]

    def _one_batch(self, x, y, sample_weight, class_weight=None):
        from .data_adapter import make_adapter

        data = make_adapter(x, y, sample_weight, batch_size=None, shuffle=False,
                            class_weight=class_weight, whole=True, what="train_on_batch")
        return next(iter(data.epoch(0)))

    def train_on_batch(self, x, y=None, sample_weight=None, class_weight=None,
                       return_dict=False):
        """One training step on one batch; returns this batch's loss and metrics alone
        (the metrics are reset first, as Keras 3 does: it has no ``reset_metrics``
        argument)."""
        self._assert_compiled("train_on_batch")
        batch = self._one_batch(x, y, sample_weight, class_weight)
        self._prepare(batch, training=True)
        self.reset_metrics()
        logs = _pythonify(self._run_step("train", batch)._results_now())
        return logs if return_dict else self._flatten_logs(logs)

    def test_on_batch(self, x, y=None, sample_weight=None, return_dict=False):
        """One evaluation step on one batch; this batch's loss and metrics alone (reset
        first, as in ``train_on_batch``)."""
        self._assert_compiled("test_on_batch")
        batch = self._one_batch(x, y, sample_weight)
        self._prepare(batch, training=False)
        self.reset_metrics()
        logs = _pythonify(self._run_step("test", batch)._results_now())
        return logs if return_dict else self._flatten_logs(logs)

    def predict_on_batch(self, x):
        batch = self._one_batch(x, None, None)
        self._prepare(batch, training=False)
        out = self._step("predict")(batch)
        return _map(lambda t: np.asarray(t.numpy()) if isinstance(t, (Tensor, Variable))
                    else t, out)


def _callback_list(model, callbacks, add_history, verbose, epochs, steps):
    from ..callbacks import CallbackList

    return CallbackList(callbacks, add_history=add_history, add_progbar=verbose != 0,
                        model=model, verbose=verbose, epochs=epochs, steps=steps)


def _has_batch_hooks(cbs, kind) -> bool:
    listeners = getattr(cbs, "_listeners", None)
    if listeners is None:
        return True
    return bool(listeners(f"on_{kind}_batch_begin") or listeners(f"on_{kind}_batch_end"))


def _validates(epoch, freq) -> bool:
    """Keras' ``validation_freq``: every ``freq`` epochs, or at the epochs (1-based) listed."""
    if isinstance(freq, numbers.Integral) and not isinstance(freq, bool):
        if freq < 1:
            raise ValueError(f"fit: validation_freq must be a positive int, got {freq}")
        return (epoch + 1) % int(freq) == 0
    try:
        return (epoch + 1) in set(freq)
    except TypeError:
        raise ValueError(f"fit: validation_freq must be an int or a collection of epochs, got "
                         f"{freq!r}") from None
