"""slice-views: a StridedSlice that only inserts or drops size-1 axes becomes a Reshape.

`m[:, None]` and `x[..., None]` are written as StridedSlice in TensorFlow; as a Reshape they
are free views the fuser can see through.
"""

from __future__ import annotations

import numpy as np

from tf_stitch.graph.guards import Guard
from tf_stitch.graph.ir import Graph, Node
from tf_stitch.graph.values import constant_value
from tf_stitch.passes.base import PassContext, graph_pass
from tf_stitch.passes.builder import replace_with_reshape


@graph_pass("slice-views")
def slice_views(graph: Graph, ctx: PassContext) -> Graph:
    """Rewrites full-range, stride-1 StridedSlices (new axes / dropped 1-axes) as Reshapes."""
    out = graph.copy()
    guard = Guard(out)
    for node in list(out):
        if node.op != "StridedSlice" or not guard.rewritable(node) or not _is_view(out, node):
            continue
        replace_with_reshape(out, node)
    return out


def _bits(node: Node, name: str) -> int:
    return int(node.attrs.get(name, 0))


def _is_view(graph: Graph, node: Node) -> bool:
    in_shape = graph.info(node.inputs[0]).shape
    begin, end, strides = (constant_value(graph, r) for r in node.inputs[1:4])
    if in_shape is None or begin is None or end is None or strides is None:
        return False
    if np.any(strides != 1):
        return False
    new_axis, shrink, ellipsis = (
        _bits(node, k) for k in ("new_axis_mask", "shrink_axis_mask", "ellipsis_mask")
    )
    begin_mask, end_mask = _bits(node, "begin_mask"), _bits(node, "end_mask")
    specs = len(begin)
    consumed = sum(1 for i in range(specs) if not (new_axis >> i) & 1 and not (ellipsis >> i) & 1)
    dim = 0
    for i in range(specs):
        if (ellipsis >> i) & 1:
            dim += len(in_shape) - consumed
            continue
        if (new_axis >> i) & 1:
            continue
        if dim >= len(in_shape):
            return False
        size = in_shape[dim]
        if (shrink >> i) & 1:
            if size != 1 or int(begin[i]) not in (0, -1):
                return False
        else:
            full_begin = (begin_mask >> i) & 1 or int(begin[i]) == 0
            full_end = (end_mask >> i) & 1 or (size is not None and int(end[i]) >= size)
            if not (full_begin and full_end):
                return False
        dim += 1
    return True
