"""transpose-views: a Transpose that only moves axes of size 1 becomes a Reshape.

Moving a size-1 axis does not change the order of the elements in memory: TensorFlow's softmax
over a middle axis of `[B, T, 1]` transposes to `[B, 1, T]` and back, and both are free views
that a kernel reads in place.
"""

from __future__ import annotations

import numpy as np

from tf_stitch.graph.ir import DType, Graph, Node, TensorRef
from tf_stitch.graph.values import constant_value
from tf_stitch.passes.base import PassContext, graph_pass
from tf_stitch.passes.builder import NodeBuilder


@graph_pass("transpose-views")
def transpose_views(graph: Graph, ctx: PassContext) -> Graph:
    """Rewrites Transposes that keep the order of the axes longer than 1 as Reshapes."""
    out = graph.copy()
    for node in list(out):
        if node.op != "Transpose" or node.control_inputs:
            continue
        shape = out.info(node.inputs[0]).shape
        perm = constant_value(out, node.inputs[1])
        target = node.outputs[0].shape
        if shape is None or perm is None or target is None or len(perm) != len(shape):
            continue
        moved = [int(p) for p in perm.reshape(-1)]
        kept = [p for p in moved if shape[p] != 1]
        if kept != sorted(kept) or sum(d is None for d in target) > 1:
            continue
        new_shape = np.asarray([-1 if d is None else d for d in target], np.int32)
        const = NodeBuilder(out, node.name, node.device).const(new_shape, "int32", "view_shape")
        out.nodes[node.name] = Node(
            node.name,
            "Reshape",
            [node.inputs[0], TensorRef(const.node, 0)],
            {"T": node.attrs["T"], "Tshape": DType("int32")},
            list(node.outputs),
            device=node.device,
        )
    return out
