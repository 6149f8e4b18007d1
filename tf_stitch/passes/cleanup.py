"""cleanup: removes the planning marks that `stitch` left on groups that were not outlined."""

from __future__ import annotations

from tf_stitch.graph.ir import Graph
from tf_stitch.passes.base import PassContext, graph_pass
from tf_stitch.passes.stitch import GROUP_ATTR


@graph_pass("cleanup")
def cleanup(graph: Graph, ctx: PassContext) -> Graph:
    """Drops `_stitch_group` attributes."""
    out = graph.copy()
    for node in out:
        node.attrs.pop(GROUP_ATTR, None)
    return out
