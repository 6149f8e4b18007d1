"""prune: removes nodes that no output or target needs."""

from __future__ import annotations

from tf_stitch.graph.ir import Graph
from tf_stitch.passes.base import PassContext, graph_pass


@graph_pass("prune")
def prune(graph: Graph, ctx: PassContext) -> Graph:
    """Keeps only what the fetches, targets and feeds reach backwards (data and control)."""
    live: set[str] = set()
    stack = [r.node for r in graph.outputs] + list(graph.targets) + [r.node for r in graph.inputs]
    while stack:
        name = stack.pop()
        if name in live:
            continue
        live.add(name)
        node = graph.node(name)
        stack.extend(r.node for r in node.inputs)
        stack.extend(node.control_inputs)
    out = graph.copy()
    out.remove([n for n in graph.nodes if n not in live])
    return out
