"""split-slices: Split, SplitV and range-only StridedSlices become Slices (one per piece).

`Slice(x, begin, size)` with constant arguments is the one slicing op the fuser understands (a
view of an input at an offset); Keras' LSTM/GRU cells split their gate pre-activations with
Split/SplitV.
"""

from __future__ import annotations

import numpy as np

from tf_stitch.graph.ir import DType, Graph, Node, TensorRef
from tf_stitch.graph.values import constant_value
from tf_stitch.passes.base import PassContext, graph_pass
from tf_stitch.passes.builder import NodeBuilder


@graph_pass("split-slices")
def split_slices(graph: Graph, ctx: PassContext) -> Graph:
    """Rewrites Split/SplitV with a constant axis (and sizes), and StridedSlices that only take
    a range of each axis, into Slice nodes."""
    out = graph.copy()
    fed = out.fed()
    for node in list(out):
        if node.op == "StridedSlice" and not node.control_inputs and node.output(0) not in fed:
            _strided_to_slice(out, node)
            continue
        if node.op not in ("Split", "SplitV") or node.control_inputs:
            continue
        if any(node.output(i) in fed for i in range(len(node.outputs))):
            continue
        pieces = _pieces(out, node)
        if pieces is not None:
            _rewrite(out, node, *pieces)
    return out


def _pieces(graph: Graph, node: Node) -> tuple[TensorRef, int, list[int]] | None:
    """(the split tensor, the axis, the size of every piece), or None if not all constant."""
    if node.op == "Split":
        axis_ref, value = node.inputs
    else:
        value, _sizes, axis_ref = node.inputs
    axis_value = constant_value(graph, axis_ref)
    shape = graph.info(value).shape
    if axis_value is None or shape is None:
        return None
    axis = int(axis_value) % len(shape)
    if any(o.shape is None or o.shape[axis] is None for o in node.outputs):
        return None
    sizes = [int((o.shape or ())[axis] or 0) for o in node.outputs]
    return value, axis, sizes


def _rewrite(graph: Graph, node: Node, value: TensorRef, axis: int, sizes: list[int]) -> None:
    rank = len(graph.info(value).shape or ())
    b = NodeBuilder(graph, node.name, node.device)
    start = 0
    for i, size in enumerate(sizes):
        begin = np.zeros(rank, np.int32)
        extent = np.full(rank, -1, np.int32)
        begin[axis], extent[axis] = start, size
        start += size
        piece = b.op(
            "Slice",
            [value, b.const(begin, "int32", f"begin_{i}"), b.const(extent, "int32", f"size_{i}")],
            node.outputs[i],
            {"T": node.attrs["T"], "Index": DType("int32")},
            base=f"piece_{i}",
        )
        graph.replace_uses(node.output(i), piece)
    graph.remove([node.name])


def _strided_to_slice(graph: Graph, node: Node) -> None:
    """A StridedSlice with stride 1 and no new, shrunk or ellipsis axes is a Slice."""
    if any(
        int(node.attrs.get(m, 0)) for m in ("new_axis_mask", "shrink_axis_mask", "ellipsis_mask")
    ):
        return
    shape = graph.info(node.inputs[0]).shape
    begin, end, strides = (constant_value(graph, r) for r in node.inputs[1:4])
    if shape is None or begin is None or end is None or strides is None:
        return
    if np.any(strides != 1) or len(begin) != len(shape):
        return
    begin_mask, end_mask = int(node.attrs.get("begin_mask", 0)), int(node.attrs.get("end_mask", 0))
    starts, sizes = [], []
    for i, dim in enumerate(shape):
        lo = 0 if (begin_mask >> i) & 1 else int(begin[i])
        hi = None if (end_mask >> i) & 1 else int(end[i])
        if (lo < 0 or (hi is not None and hi < 0)) and dim is None:
            return
        if dim is not None:
            lo = min(max(lo + dim if lo < 0 else lo, 0), dim)
            hi = dim if hi is None else min(max(hi + dim if hi < 0 else hi, 0), dim)
        starts.append(lo)
        sizes.append(-1 if hi is None or (dim is not None and hi == dim) else max(hi - lo, 0))
    b = NodeBuilder(graph, node.name, node.device)
    begin_ref = b.const(np.asarray(starts, np.int32), "int32", "begin")
    size_ref = b.const(np.asarray(sizes, np.int32), "int32", "size")
    graph.nodes[node.name] = Node(
        node.name,
        "Slice",
        [node.inputs[0], begin_ref, size_ref],
        {"T": node.attrs["T"], "Index": DType("int32")},
        list(node.outputs),
        device=node.device,
    )
