"""refresh-shapes: reruns TensorFlow's shape inference after rewrites that sharpen shapes."""

from __future__ import annotations

from tf_stitch.graph.io import infer_shapes
from tf_stitch.graph.ir import Graph
from tf_stitch.passes.base import PassContext, graph_pass


@graph_pass("refresh-shapes")
def refresh_shapes(graph: Graph, ctx: PassContext) -> Graph:
    """Recomputes every tensor's shape (static reshapes make later shapes known)."""
    return infer_shapes(graph)
