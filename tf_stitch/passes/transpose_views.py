"""transpose-views: a Transpose that only moves axes of size 1 becomes a Reshape.

Moving a size-1 axis does not change the order of the elements in memory: TensorFlow's softmax
over a middle axis of `[B, T, 1]` transposes to `[B, 1, T]` and back, and both are free views
that a kernel reads in place.
"""

from __future__ import annotations

from tf_stitch.graph.guards import Guard
from tf_stitch.graph.ir import Graph
from tf_stitch.graph.values import constant_value
from tf_stitch.passes.base import PassContext, graph_pass
from tf_stitch.passes.builder import replace_with_reshape


@graph_pass("transpose-views")
def transpose_views(graph: Graph, ctx: PassContext) -> Graph:
    """Rewrites Transposes that keep the order of the axes longer than 1 as Reshapes."""
    out = graph.copy()
    guard = Guard(out)
    for node in list(out):
        if node.op != "Transpose" or not guard.rewritable(node):
            continue
        shape = out.info(node.inputs[0]).shape
        perm = constant_value(out, node.inputs[1])
        target = node.outputs[0].shape
        if shape is None or perm is None or target is None or len(perm) != len(shape):
            continue
        moved = [int(p) for p in perm.reshape(-1)]
        kept = [p for p in moved if shape[p] != 1]
        if kept == sorted(kept):
            replace_with_reshape(out, node)
    return out
