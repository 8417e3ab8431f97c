"""``ProgbarLogger``: the progress display of ``fit``, ``evaluate`` and ``predict``.

``verbose=0`` prints nothing. ``verbose=2`` prints ``Epoch 1/5`` (when there is more
than one epoch) and one line per epoch, in Keras 3's format::

    100/100 - 1s - 3ms/step - accuracy: 0.9000 - loss: 0.1000 - val_loss: 0.1200

``verbose=1`` shows a live bar while the epoch runs when the stream is a terminal and
``tqdm`` is installed (``step/steps``, the bar, the time left or taken, the time per
step and each metric, as Keras' bar); otherwise (a file, a pipe, no tqdm) it prints the
same lines as ``verbose=2``. A value prints with 4 decimals, or as ``1.2345e-04`` when
its magnitude is at most 1e-3.
"""

from __future__ import annotations

import io
import math
import os
import shutil
import sys
import time

import numpy as np

from .base import Callback

__all__ = ["ProgbarLogger"]


_now = time.perf_counter  # the clock of every Progbar; tests replace it
_REFRESH_S = 0.05  # the live bar redraws at most this often (Keras' interval)


def format_time(seconds_per_step, unit="step"):
    """Keras' time per step: ``" 2s/step"``, ``" 35ms/step"`` or ``" 120us/step"``."""
    if seconds_per_step >= 1 or seconds_per_step == 0:
        return f" {seconds_per_step:.0f}s/{unit}"
    if seconds_per_step >= 1e-3:
        return f" {seconds_per_step * 1e3:.0f}ms/{unit}"
    return f" {seconds_per_step * 1e6:.0f}us/{unit}"


def format_value(value):
    """A metric as the bar prints it: ``0.1235``, or ``1.2346e-04`` when small."""
    try:
        value = float(np.mean(value))
    except (TypeError, ValueError):
        return str(value)
    return f"{value:.4f}" if abs(value) > 1e-3 else f"{value:.4e}"


def _eta(seconds):
    if seconds > 3600:
        return "%d:%02d:%02d" % (seconds // 3600, (seconds % 3600) // 60, seconds % 60)
    if seconds > 60:
        return "%d:%02d" % (seconds // 60, seconds % 60)
    return "%ds" % seconds


def _is_terminal(stream):
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed file
        return False


def _terminal_size(stream):
    """(columns, lines) of the terminal: one that reports 0 (some ptys do) would have
    tqdm print nothing, so a 0 counts as unknown ($COLUMNS/$LINES, or 80x24)."""
    try:
        size = os.get_terminal_size(stream.fileno())
    except (AttributeError, ValueError, OSError, io.UnsupportedOperation):
        size = os.terminal_size((0, 0))
    fallback = shutil.get_terminal_size()
    return size.columns or fallback.columns, size.lines or fallback.lines


def _tqdm():
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm


class Progbar:
    """The display of one epoch (or one evaluate/predict): a live tqdm bar, or a line
    at the end.

    Args:
        target: the number of steps, or None while unknown.
        verbose: 1 (bar) or 2 (a line at the end).
        stream: where to write.
        clock: the time source in seconds (None: the module's ``_now``).
    """

    def __init__(self, target, verbose, stream, clock=None):
        self.target = target
        self.verbose = verbose
        self.stream = stream
        self._clock = clock or _now
        self._start = self._clock()
        self._after_first_step = None
        self._values = {}
        self._bar = None
        self._tqdm = _tqdm() if verbose == 1 and _is_terminal(stream) else None

    def _step_time(self, current, now):
        # as Keras: the first step (which compiles) is left out once there is a second
        if not current:
            return 0.0
        if self._after_first_step is not None and current > 1:
            per_step = (now - self._after_first_step) / (current - 1)
        else:
            per_step = (now - self._start) / current
        if current == 1:
            self._after_first_step = now
        return per_step

    def _metrics(self):
        return "".join(f" - {k}: {format_value(v)}" for k, v in self._values.items())

    def update(self, current, values=None, finalize=False):
        """Shows step ``current`` with the ``(name, value)`` pairs in ``values`` (the
        latest value of each name is shown); ``finalize`` ends the display."""
        for k, v in values or ():
            self._values[k] = v
        now = self._clock()
        per_step = self._step_time(current, now)
        if self._tqdm is not None:
            self._update_bar(current, now, per_step, finalize)
        elif finalize and self.target:
            width = int(math.log10(self.target)) + 1
            self.stream.write(f"{current:{width}d}/{self.target} - {now - self._start:.0f}s -"
                              f"{format_time(per_step)}{self._metrics()}\n")
            self.stream.flush()

    def _bar_format(self):
        # the fields Keras shows; tqdm draws the bar and refreshes the line
        if not self.target:
            return "{n_fmt:>7}/Unknown{desc}"
        width = int(math.log10(self.target)) + 1
        return "{n_fmt:>%d}/{total_fmt} {bar:20}{desc}" % width

    def _update_bar(self, current, now, per_step, finalize):
        if self._bar is None:
            columns, lines = _terminal_size(self.stream)
            self._bar = self._tqdm(total=self.target or None, file=self.stream,
                                   bar_format=self._bar_format(), leave=True,
                                   mininterval=_REFRESH_S, miniters=1, ncols=columns,
                                   nrows=lines)
        if self.target and not finalize:
            when = _eta(per_step * (self.target - current))
        else:
            when = f"{now - self._start:.0f}s"
        # the fields go in tqdm's desc, a value that bar_format places: set_postfix
        # would prefix ", "
        self._bar.set_description_str(f" {when}{format_time(per_step)}{self._metrics()}",
                                      refresh=False)
        if finalize:
            bar, self._bar = self._bar, None
            bar.total = self.target or None
            bar.bar_format = self._bar_format()
            bar.n = current
            # live frames are cut to the terminal's width (a wrapped line cannot be
            # redrawn); the epoch's last line is kept whole: the bar is erased and the
            # line written in full
            line = bar.format_meter(**{**bar.format_dict, "ncols": None})
            bar.leave = False
            bar.close()
            self.stream.write(line + "\n")
            self.stream.flush()
        else:
            self._bar.update(current - self._bar.n)


class ProgbarLogger(Callback):
    """Prints the progress of ``fit``, ``evaluate`` and ``predict`` (see the module).

    ``fit`` adds one when ``verbose`` is not 0; it reads ``params["verbose"]``,
    ``params["epochs"]`` and ``params["steps"]`` (None: unknown until the first epoch
    ends). Inside ``fit`` the validation runs silently: its results reach the epoch's
    line as ``val_*``.

    Args:
        stream: where to write; None writes to ``sys.stdout`` (as it is at each epoch).

    Example::

        import io
        out = io.StringIO()
        model.fit(x, y, epochs=2, verbose=0, callbacks=[ProgbarLogger(stream=out)])
    """

    def __init__(self, stream=None):
        super().__init__()
        self.stream = stream
        self.seen = 0
        self.progbar = None
        self.target = None
        self.verbose = 1
        self.epochs = 1
        self._called_in_fit = False

    def set_params(self, params):
        super().set_params(params)
        verbose = params.get("verbose", 1)
        if verbose == "auto":
            verbose = 1
        if verbose not in (0, 1, 2):
            raise ValueError(f"ProgbarLogger: verbose must be 0, 1, 2 or 'auto', "
                             f"got {verbose!r}")
        self.verbose = int(verbose)
        self.epochs = params.get("epochs", 1)
        self.target = params.get("steps")

    def _stream(self):
        return sys.stdout if self.stream is None else self.stream

    def _reset_progbar(self):
        self.seen = 0
        self.progbar = None

    def _maybe_init_progbar(self):
        if self.progbar is None and self.verbose:
            self.progbar = Progbar(self.target, self.verbose, self._stream())

    def _update_progbar(self, batch, logs):
        self.seen = batch + 1  # batches count from 0
        if self.verbose == 1:
            self._maybe_init_progbar()
            self.progbar.update(self.seen, list((logs or {}).items()))

    def _finalize_progbar(self, logs):
        if self.target is None:
            self.target = self.seen  # the later epochs know their length
        self._maybe_init_progbar()
        if self.progbar is not None:
            self.progbar.target = self.target
            self.progbar.update(self.target, list((logs or {}).items()), finalize=True)
        self.progbar = None

    def on_train_begin(self, logs=None):
        self._called_in_fit = True  # the validation inside fit prints nothing

    def on_train_end(self, logs=None):
        self._called_in_fit = False

    def on_epoch_begin(self, epoch, logs=None):
        self._reset_progbar()
        if self.verbose and self.epochs > 1:
            stream = self._stream()
            stream.write(f"Epoch {epoch + 1}/{self.epochs}\n")
            stream.flush()
        self._maybe_init_progbar()

    def on_train_batch_end(self, batch, logs=None):
        self._update_progbar(batch, logs)

    def on_epoch_end(self, epoch, logs=None):
        self._finalize_progbar(logs)

    def on_test_begin(self, logs=None):
        if not self._called_in_fit:
            self._reset_progbar()
            self._maybe_init_progbar()

    def on_test_batch_end(self, batch, logs=None):
        if not self._called_in_fit:
            self._update_progbar(batch, logs)

    def on_test_end(self, logs=None):
        if not self._called_in_fit:
            self._finalize_progbar(logs)

    def on_predict_begin(self, logs=None):
        self._reset_progbar()
        self._maybe_init_progbar()

    def on_predict_batch_end(self, batch, logs=None):
        self._update_progbar(batch, None)  # the predictions are not metrics

    def on_predict_end(self, logs=None):
        self._finalize_progbar(logs)
