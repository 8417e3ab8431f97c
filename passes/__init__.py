"""The graph optimizer: pure IR -> IR passes over ``jittape.ir`` graphs.

It depends only on ``jittape.ir``. The passes themselves (pruning, CSE, folding,
simplification, fusion, buffer reuse) are the next piece of work; this package
holds the pipeline entry point so that backends have one place to call.
"""

from jittape.ir import Graph, verify  # noqa: F401


def default_pipeline():
    """The passes the compilers run, in order. Empty until the passes land."""
    return ()


def run_pipeline(graph: Graph, pipeline=None, check: bool = False) -> Graph:
    """Run each pass of ``pipeline`` over ``graph`` (verifying after each when ``check``)."""
    for p in pipeline if pipeline is not None else default_pipeline():
        graph = p(graph).graph
        if check:
            verify(graph)
    return graph
