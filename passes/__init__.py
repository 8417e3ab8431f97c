"""The graph optimizer: pure IR -> IR passes over ``jittape.compiler.ir`` graphs.

It depends only on ``jittape.compiler.ir``, so every pass can be tested on a hand-built graph.
A pass is a function ``Graph -> PassResult`` (``.graph``, ``.report``);
:func:`run_pipeline` runs a list of them and collects their reports, verifying the
graph after each pass when asked (and always when ``JITTAPE_VERIFY=1``).

``default_pipeline()`` is what the compiling backends run::

    prune_unreachable, fold_constants, simplify, cse,   (twice: each exposes work
    prune_unreachable, fold_constants, simplify, cse,    for the others)
    prune_unreachable, fuse, plan_buffers

``prune_stop_gradient`` and :func:`gradient_path` slice a recorded trace down to
what can carry gradient; autodiff builds backward graphs from that slice.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from jittape.compiler.ir import Graph, GraphError  # noqa: F401

from .buffers import BufferPlan, check_plan, plan_buffers  # noqa: F401
from .core import (  # noqa: F401
    PassReport, PassResult, Rewriter, configured, graph_pass, pass_key,
)
from .cse import cse
from .fold import fold_constants
from .fusion import FUSED, body_phases, fuse, is_fused, kernels, run_body  # noqa: F401
from .prune import gradient_path, prune_stop_gradient, prune_unreachable  # noqa: F401
from .simplify import simplify
from .verify import verify

def cleanup_pipeline(assume_finite: bool = False) -> tuple:
    """Passes that shrink a graph without fusing it (what ``interpret`` runs).

    ``assume_finite`` lets ``simplify`` use the rules that are exact only for finite
    values inside their ops' domains (``x*0 -> 0`` for floats, ``exp(log x) -> x``).
    """
    simp = configured(simplify, assume_finite=True) if assume_finite else simplify
    once = (prune_unreachable, fold_constants, simp, cse)
    return once + once + (prune_unreachable,)


def default_pipeline(matmul_epilogue: bool = True, assume_finite: bool = False) -> tuple:
    """The passes the compiling backends run, in order."""
    return cleanup_pipeline(assume_finite) + (
        configured(fuse, matmul_epilogue=matmul_epilogue), plan_buffers,
    )


@dataclass
class PipelineResult:
    graph: Graph
    reports: list = field(default_factory=list)

    def __str__(self) -> str:
        return "\n".join(str(r) for r in self.reports)

    def explain(self, details: bool = False) -> str:
        """The reports (with each rewrite when ``details``), the kernels, the buffer
        plan and the final graph with its fused bodies: what a user reads to see which
        ops ended up in which kernel."""
        lines = []
        for r in self.reports:
            lines.append(str(r))
            if details:
                lines.extend("    " + d for d in r.details)
        ks = kernels(self.graph)
        lines.append(f"{len(ks)} kernels: " + ", ".join(
            f"{k.attr_dict['kind']}[{len(k.attr_dict['body'].nodes)}]" if is_fused(k)
            else k.op.name for k in ks))
        if self.graph.buffers is not None:
            lines.append(f"buffers: {self.graph.buffers}")
        lines.append(str(self.graph))
        return "\n".join(lines)


def _effects(g: Graph) -> list:
    return [(n.op.name, n.attrs) for n in g.nodes if n.op.effect]


def verify_enabled() -> bool:
    return os.environ.get("JITTAPE_VERIFY", "") not in ("", "0")


def run_pipeline(graph: Graph, pipeline=None, check: bool | None = None) -> PipelineResult:
    """Run each pass of ``pipeline`` (default: :func:`default_pipeline`) over ``graph``.

    With ``check`` (default: ``JITTAPE_VERIFY=1``) the graph is verified after every
    pass, and a pass that drops or reorders a side effect is an error.
    """
    if check is None:
        check = verify_enabled()
    passes = default_pipeline() if pipeline is None else pipeline
    result = PipelineResult(graph)
    effects = _effects(graph) if check else None
    for p in passes:
        out = p(result.graph)
        result.graph = out.graph
        result.reports.append(out.report)
        if check:
            try:
                verify(out.graph)
            except GraphError as e:
                raise GraphError(f"after pass {out.report.name}: {e}") from None
            if _effects(out.graph) != effects:
                raise GraphError(f"pass {out.report.name} dropped or reordered a side effect")
    return result
