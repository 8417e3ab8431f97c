"""``jt.data``: a lazy input pipeline over numpy arrays, with tf.data's names and semantics.

    ds = (jt.data.Dataset.from_tensor_slices((x_train, y_train))
          .shuffle(60000, seed=0).batch(128).prefetch(jt.data.AUTOTUNE))
    for x, y in ds:           # jt.Tensors, in the element's structure
        train_step(x, y)

How it runs. Every dataset is a recipe; ``iter(ds)`` opens a chain of Python generators.
Elements travel as nested structures (tuples, namedtuples, dicts) of numpy arrays and
become ``jt.Tensor``s only when they leave the pipeline. A Python list in the input is a
tensor, not a structure (as in tf.data).

The fast path: a ``from_tensor_slices`` / ``from_tensors`` / ``range`` source, followed
only by ``shuffle``, ``repeat``, ``take``, ``skip``, ``shard`` and ``cache``, is an
*index stream*: chunks of int64 row indices into the source arrays. ``batch`` over an
index stream gathers a whole batch with one fancy index per component (one slice view
when the rows are contiguous), so an epoch never copies the source and never loops in
Python per element. After ``map``, ``filter``, ``zip`` ... elements are assembled one by
one (``np.stack`` per batch).
"""

from .dataset import Dataset, Iterator, experimental
from .structure import AUTOTUNE, INFINITE_CARDINALITY, UNKNOWN_CARDINALITY

__all__ = ["Dataset", "Iterator", "AUTOTUNE", "INFINITE_CARDINALITY", "UNKNOWN_CARDINALITY",
           "experimental"]
