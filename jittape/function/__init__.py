"""``jt.function``: trace a Python function once per call signature, optimize the whole
graph and run it as one compiled call, as ``tf.function`` does. One module per concern,
each importing only those above it in this list:

- ``spec``: ``TensorSpec``, and the specs of traced types
- ``keys``: signature keys, their generalization (None dims, reduce_retracing) and the
  description of what changed between two calls
- ``binding``: binding a call's arguments to the parameters, fitting an input_signature
- ``tracer``: ``FunctionTracer``, and the tracing of the Python function into the IR
- ``concrete``: ``ConcreteFunction``, one trace and its programs per binding of sizes
- ``explain``: ``Explanation``, the report of ``Function.explain``
- ``polymorphic``: ``Function`` (its per-signature cache, the retrace detectors) and the
  ``function`` decorator
"""

from .binding import _WeakMethod  # noqa: F401 - tests read it here
from .concrete import ConcreteFunction  # noqa: F401
from .explain import Explanation  # noqa: F401
from .polymorphic import CacheInfo, Function, function  # noqa: F401
from .polymorphic import _live_functions  # noqa: F401 - tests read it here
from .spec import TensorSpec  # noqa: F401
from .tracer import FunctionTracer  # noqa: F401

__all__ = ["function", "Function", "TensorSpec", "CacheInfo"]
