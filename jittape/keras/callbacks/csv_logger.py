"""``CSVLogger``: one row of a CSV file per epoch, with the epoch's ``logs``."""

from __future__ import annotations

import collections.abc
import csv
import os

import numpy as np

from .base import Callback

__all__ = ["CSVLogger"]


def _cell(value):
    if isinstance(value, str):
        return value
    if isinstance(value, collections.abc.Iterable) and not (
        isinstance(value, np.ndarray) and value.ndim == 0
    ):
        return f'"[{", ".join(map(str, value))}]"'
    return value


class CSVLogger(Callback):
    """Writes each epoch's ``logs`` as a row of ``filename`` (Python's ``csv`` module,
    Excel dialect), flushed at once so the file is complete after every epoch.

    The columns are ``epoch`` (0-based) and the first epoch's keys, sorted; when they
    hold no ``val_`` key, a ``val_`` column per key follows (as Keras 3 writes it), so a
    later ``fit`` with validation data can append to the same file. A key an epoch lacks
    is written ``NA``; a list value as ``"[a, b]"``.

    Args:
        filename: the CSV file's path (str or os.PathLike).
        separator: the one-character field separator.
        append: add rows to an existing file (the header only when it is empty) instead
            of overwriting it.

    Example::

        model.fit(x, y, epochs=3, callbacks=[CSVLogger("training.log")])
    """

    def __init__(self, filename, separator=",", append=False):
        super().__init__()
        try:
            self.filename = os.fspath(filename)
        except TypeError:
            raise TypeError(
                f"CSVLogger: filename must be a str or os.PathLike, got {filename!r}"
            ) from None
        if not isinstance(separator, str) or len(separator) != 1:
            raise ValueError(
                f"CSVLogger: separator must be a one-character string, got {separator!r}")
        self.sep = separator
        self.append = bool(append)
        self.writer = None
        self.keys = None
        self.append_header = True
        self.csv_file = None

    def on_train_begin(self, logs=None):
        mode = "w"
        self.append_header = True
        if self.append:
            mode = "a"
            if os.path.exists(self.filename):
                with open(self.filename, newline="") as f:
                    self.append_header = not f.readline()
        if self.csv_file is not None and not self.csv_file.closed:
            self.csv_file.close()
        self.csv_file = open(self.filename, mode, newline="")
        self.writer = None
        self.keys = None

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        if self.csv_file is None or self.csv_file.closed:
            self.on_train_begin()  # driven without on_train_begin: open the file now
        if self.keys is None:
            self.keys = sorted(logs)
            if self.keys and not any(k.startswith("val_") for k in self.keys):
                self.keys += [f"val_{k}" for k in self.keys]
        if self.writer is None:
            self.writer = csv.DictWriter(self.csv_file, fieldnames=["epoch", *self.keys],
                                         dialect="excel", delimiter=self.sep)
            if self.append_header:
                self.writer.writeheader()
        row = {"epoch": epoch}
        row.update((k, _cell(logs.get(k, "NA"))) for k in self.keys)
        self.writer.writerow(row)
        self.csv_file.flush()

    def on_train_end(self, logs=None):
        if self.csv_file is not None and not self.csv_file.closed:
            self.csv_file.close()
        self.writer = None
